//! Standard base64 as Mesos uses it for `bytes` fields in JSON: written with
//! padding; read leniently as stout does (whitespace skipped, decoding stops
//! at the first `=`, missing padding accepted).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the base64 of `data` (standard alphabet, padded) to `out`.
pub(crate) fn encode_into(out: &mut Vec<u8>, data: &[u8]) {
    out.reserve(data.len().div_ceil(3) * 4);
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            ALPHABET[(n >> 18) as usize & 63],
            ALPHABET[(n >> 12) as usize & 63],
            ALPHABET[(n >> 6) as usize & 63],
            ALPHABET[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                ALPHABET[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}

/// The value of a base64 digit.
fn digit(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// Decodes base64 text; the error names the first invalid character.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let mut group = 0u32;
    let mut count = 0;
    for c in text.bytes() {
        if c == b'=' {
            break;
        }
        if c.is_ascii_whitespace() || c == 0x0b {
            continue;
        }
        let Some(d) = digit(c) else {
            return Err(format!("Invalid character '{}'", char::from(c)));
        };
        group = (group << 6) | d;
        count += 1;
        if count == 4 {
            out.extend_from_slice(&[(group >> 16) as u8, (group >> 8) as u8, group as u8]);
            group = 0;
            count = 0;
        }
    }
    // A partial group of n digits carries n - 1 bytes.
    match count {
        2 => out.push((group >> 4) as u8),
        3 => out.extend_from_slice(&[(group >> 10) as u8, (group >> 2) as u8]),
        _ => {}
    }
    Ok(out)
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
