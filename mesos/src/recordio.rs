//! RecordIO framing as Mesos streams events: each record is its length in
//! decimal ASCII, a newline, then the record's bytes (`5\nhello`).
//!
//! [`encode_record`] / [`write_record`] frame a record for the server side;
//! [`Decoder`] is the client side: it takes the stream in arbitrary chunks
//! and hands back complete records. A malformed length header leaves the
//! stream unreadable (where the next record starts is unknown), so the
//! decoder fails for good after it, as upstream's does.

/// Default largest record a [`Decoder`] accepts: 64 MiB.
pub const DEFAULT_MAX_RECORD_LEN: usize = 64 << 20;

/// Longest length header (digits): `u64::MAX` has 20.
const MAX_HEADER_DIGITS: usize = 20;

/// A record framed for the stream.
pub fn encode_record(record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len() + MAX_HEADER_DIGITS + 1);
    write_record(&mut out, record);
    out
}

/// Appends a framed record to `out`.
pub fn write_record(out: &mut Vec<u8>, record: &[u8]) {
    out.extend_from_slice(itoa::Buffer::new().format(record.len()).as_bytes());
    out.push(b'\n');
    out.extend_from_slice(record);
}

/// Why a stream cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordIoError {
    /// A newline with no length before it.
    #[error("empty record length header")]
    EmptyHeader,
    /// The header has a character that is not a decimal digit.
    #[error("record length header '{header}' is not a decimal number")]
    InvalidHeader {
        /// The header as read (lossy UTF-8).
        header: String,
    },
    /// More header digits than any length can have, or no newline after them.
    #[error("record length header longer than {MAX_HEADER_DIGITS} digits")]
    HeaderTooLong,
    /// The length does not fit in memory's address space.
    #[error("record length '{header}' overflows")]
    Overflow {
        /// The header as read.
        header: String,
    },
    /// The record is longer than the decoder accepts.
    #[error("record of {len} bytes exceeds the limit of {max} bytes")]
    RecordTooLong {
        /// Length announced by the header.
        len: usize,
        /// The decoder's limit.
        max: usize,
    },
    /// The stream ended inside a length header.
    #[error("stream ended inside a record length header ('{header}')")]
    TruncatedHeader {
        /// The digits received.
        header: String,
    },
    /// The stream ended inside a record.
    #[error("stream ended inside a record ({have} of {want} bytes)")]
    TruncatedRecord {
        /// Bytes of the record received.
        have: usize,
        /// The record's length.
        want: usize,
    },
    /// An earlier error left the stream unreadable.
    #[error("decoder failed earlier: {0}")]
    Failed(Box<RecordIoError>),
}

/// Where the decoder is within the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Reading digits of a length header.
    Header,
    /// Reading a record of this many bytes.
    Record(usize),
    /// A malformed header was seen; nothing more can be read.
    Failed(RecordIoError),
}

/// Incremental decoder of a RecordIO stream.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    /// Header digits, or the bytes of the current record, received so far.
    buffer: Vec<u8>,
    max_record_len: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_RECORD_LEN)
    }
}

impl Decoder {
    /// A decoder refusing records longer than `max_record_len` bytes.
    pub fn new(max_record_len: usize) -> Self {
        Decoder {
            state: State::Header,
            buffer: Vec::new(),
            max_record_len,
        }
    }

    /// Feeds the next chunk of the stream; returns the records it completed,
    /// in order. After an error every call fails.
    pub fn decode(&mut self, mut chunk: &[u8]) -> Result<Vec<Vec<u8>>, RecordIoError> {
        let mut records = Vec::new();
        while !chunk.is_empty() {
            match self.state {
                State::Failed(ref e) => return Err(RecordIoError::Failed(Box::new(e.clone()))),
                State::Header => {
                    let newline = chunk.iter().position(|&b| b == b'\n');
                    let (digits, rest) = match newline {
                        Some(at) => (&chunk[..at], Some(&chunk[at + 1..])),
                        None => (chunk, None),
                    };
                    if self.buffer.len() + digits.len() > MAX_HEADER_DIGITS {
                        return Err(self.fail(RecordIoError::HeaderTooLong));
                    }
                    self.buffer.extend_from_slice(digits);
                    let Some(rest) = rest else {
                        break;
                    };
                    chunk = rest;
                    let len = self.header_len().map_err(|e| self.fail(e))?;
                    self.buffer.clear();
                    if len == 0 {
                        records.push(Vec::new());
                    } else {
                        self.buffer.reserve_exact(len.min(chunk.len().max(4096)));
                        self.state = State::Record(len);
                    }
                }
                State::Record(len) => {
                    let take = (len - self.buffer.len()).min(chunk.len());
                    self.buffer.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    if self.buffer.len() == len {
                        records.push(std::mem::take(&mut self.buffer));
                        self.state = State::Header;
                    }
                }
            }
        }
        if let State::Failed(ref e) = self.state {
            return Err(RecordIoError::Failed(Box::new(e.clone())));
        }
        Ok(records)
    }

    /// Checks that the stream ended between records.
    pub fn finish(&self) -> Result<(), RecordIoError> {
        match &self.state {
            State::Failed(e) => Err(RecordIoError::Failed(Box::new(e.clone()))),
            State::Header if self.buffer.is_empty() => Ok(()),
            State::Header => Err(RecordIoError::TruncatedHeader {
                header: String::from_utf8_lossy(&self.buffer).into_owned(),
            }),
            State::Record(len) => Err(RecordIoError::TruncatedRecord {
                have: self.buffer.len(),
                want: *len,
            }),
        }
    }

    /// The length in the header buffer.
    fn header_len(&self) -> Result<usize, RecordIoError> {
        let header = &self.buffer;
        if header.is_empty() {
            return Err(RecordIoError::EmptyHeader);
        }
        let text = || String::from_utf8_lossy(header).into_owned();
        if !header.iter().all(u8::is_ascii_digit) {
            return Err(RecordIoError::InvalidHeader { header: text() });
        }
        let len = header.iter().try_fold(0usize, |n, &d| {
            n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
        });
        let len = len.ok_or_else(|| RecordIoError::Overflow { header: text() })?;
        if len > self.max_record_len {
            return Err(RecordIoError::RecordTooLong {
                len,
                max: self.max_record_len,
            });
        }
        Ok(len)
    }

    /// Enters the failed state; returns the error for the caller.
    fn fail(&mut self, error: RecordIoError) -> RecordIoError {
        self.buffer = Vec::new();
        self.state = State::Failed(error.clone());
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` to a fresh decoder (limit 100 bytes); the records, or the
    /// first error, as text.
    fn check(chunks: &[&[u8]], expect: &str) {
        let mut decoder = Decoder::new(100);
        let mut got = Vec::new();
        for chunk in chunks {
            match decoder.decode(chunk) {
                Ok(records) => got.extend(
                    records
                        .iter()
                        .map(|r| format!("[{}]", String::from_utf8_lossy(r))),
                ),
                Err(e) => {
                    got.push(format!("error: {e}"));
                    break;
                }
            }
        }
        if let Err(e) = decoder.finish()
            && !got.last().is_some_and(|g| g.starts_with("error"))
        {
            got.push(format!("error: {e}"));
        }
        assert_eq!(got.join(" "), expect, "{chunks:?}");
    }

    #[test]
    fn encodes_length_newline_record() {
        assert_eq!(encode_record(b"hello"), b"5\nhello");
        assert_eq!(encode_record(b""), b"0\n");
        let mut out = encode_record(b"a");
        write_record(&mut out, b"{\"type\":\"HEARTBEAT\"}");
        assert_eq!(out, b"1\na20\n{\"type\":\"HEARTBEAT\"}");
    }

    #[test]
    fn decodes_records_across_any_split() {
        check(&[b"5\nhello6\nworld!"], "[hello] [world!]");
        check(
            &[b"5", b"\nhel", b"lo", b"6\nworld", b"!"],
            "[hello] [world!]",
        );
        check(&[b"0\n0\n3\nabc"], "[] [] [abc]");
        check(&[b"1", b"2", b"\n", b"hello ", b"world!"], "[hello world!]");
        check(&[b"3\na\nb"], "[a\nb]");
        check(&[], "");

        // Every split point of a two-record stream gives the same records.
        let stream = [encode_record(b"first"), encode_record(b"second record")].concat();
        for at in 0..=stream.len() {
            check(&[&stream[..at], &stream[at..]], "[first] [second record]");
        }
    }

    #[test]
    fn bad_headers_fail_for_good() {
        check(&[b"\nabc"], "error: empty record length header");
        check(
            &[b"5x\nhello"],
            "error: record length header '5x' is not a decimal number",
        );
        check(
            &[b" 5\nhello"],
            "error: record length header ' 5' is not a decimal number",
        );
        check(
            &[b"-1\n"],
            "error: record length header '-1' is not a decimal number",
        );
        check(
            &[b"5\r\nhello"],
            "error: record length header '5\r' is not a decimal number",
        );
        check(
            &[b"101\n"],
            "error: record of 101 bytes exceeds the limit of 100 bytes",
        );
        check(
            &[b"99999999999999999999\n"],
            "error: record length '99999999999999999999' overflows",
        );
        check(
            &[b"1234567890", b"12345678901"],
            "error: record length header longer than 20 digits",
        );
        check(
            &[b"5\nhel"],
            "error: stream ended inside a record (3 of 5 bytes)",
        );
        check(
            &[b"2\nab12"],
            "[ab] error: stream ended inside a record length header ('12')",
        );

        let mut decoder = Decoder::new(100);
        assert!(decoder.decode(b"x\n").is_err());
        assert_eq!(
            decoder.decode(b"1\na").unwrap_err().to_string(),
            "decoder failed earlier: record length header 'x' is not a decimal number"
        );
    }
}
