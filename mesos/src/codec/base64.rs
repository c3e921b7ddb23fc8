//! Standard base64 as Mesos uses it for `bytes` fields in JSON (through the
//! `base64` crate): written with padding; read leniently as stout does
//! (whitespace skipped, decoding stops at the first `=`, missing padding
//! accepted).

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};

/// Standard alphabet, padding optional on input (stout accepts both).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Appends the base64 of `data` (standard alphabet, padded) to `out`.
pub(crate) fn encode_into(out: &mut Vec<u8>, data: &[u8]) {
    let start = out.len();
    out.resize(
        start + base64::encoded_len(data.len(), true).unwrap_or(0),
        0,
    );
    let written = STANDARD
        .encode_slice(data, &mut out[start..])
        .unwrap_or_default();
    out.truncate(start + written);
}

/// Decodes base64 text as stout does: whitespace skipped, everything from
/// the first `=` on ignored, missing padding accepted; the error names the
/// first character that is not base64.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text
        .bytes()
        .take_while(|&c| c != b'=')
        .filter(|&c| !(c.is_ascii_whitespace() || c == 0x0b))
        .collect();
    if let Some(&bad) = digits
        .iter()
        .find(|&&c| !(c.is_ascii_alphanumeric() || c == b'+' || c == b'/'))
    {
        return Err(format!("Invalid character '{}'", char::from(bad)));
    }
    // A lone digit after whole groups carries no byte: stout drops it.
    let whole = if digits.len() % 4 == 1 {
        &digits[..digits.len() - 1]
    } else {
        &digits[..]
    };
    LENIENT.decode(whole).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(data: &[u8]) -> String {
        let mut out = Vec::new();
        encode_into(&mut out, data);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn encodes_with_padding() {
        for (data, expect) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xff\xfe\xfd", "//79"),
        ] {
            assert_eq!(encoded(data), expect);
            assert_eq!(decode(expect).unwrap(), data);
        }
    }

    #[test]
    fn decodes_leniently() {
        for (text, expect) in [
            ("Zm9vYg", &b"foob"[..]),
            ("Zm9v\nYg==", b"foob"),
            ("Zm 9v", b"foo"),
            ("Zg==garbage", b"f"),
        ] {
            assert_eq!(decode(text).unwrap(), expect, "{text}");
        }
        assert_eq!(decode("Zm9v!").unwrap_err(), "Invalid character '!'");
    }
}
