//! Fuzz target: the client side of the RecordIO event stream, as
//! `Client::subscribe` reads a SUBSCRIBE response (`client::recordio_events`
//! over the body's chunks), and the framing decoder under it.
//!
//! Input layout: byte 0 picks the encoding of the events (bit 0) and how the
//! body is cut into chunks (bits 1-7 seed the cut points); the rest is the body.
//!
//! Checked against a reference reading of the whole body at once, written here
//! from the format (a decimal length, a newline, that many bytes):
//! - however the body is chunked, `recordio::Decoder` gives the same verdict
//!   (a stream ending inside a header or record is an error of `finish`), and
//!   a decoder that refused a chunk stays failed;
//! - a well framed body gives the reference's records; a badly framed one the
//!   reference's first records (those completed in the chunk that fails are
//!   dropped with it, as upstream's decoder does);
//! - the records returned, framed again (`encode_record`), decode to the same
//!   records;
//! - the client's event stream yields one item per record (the event, or a
//!   decode error for that record alone, the stream going on), then exactly one
//!   final error, `Closed` for a clean end, and nothing after it;
//! - an event that decodes round-trips through both encodings.

#![no_main]

mod mesos_common;

use bytes::Bytes;
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use mesos_common::{content_type, round_trips};
use unisched_mesos::client::{StreamError, recordio_events};
use unisched_mesos::recordio::{self, DEFAULT_MAX_RECORD_LEN, Decoder};
use unisched_mesos::v1::scheduler::Event;

/// What reading a whole body gives: the records, and whether it was well framed.
#[derive(Debug, PartialEq, Eq)]
struct Reading {
    records: Vec<Vec<u8>>,
    /// Bytes of the body the records cover (headers included).
    consumed: usize,
    clean: bool,
}

/// The reference: the format read in one go.
fn reference(body: &[u8], max: usize) -> Reading {
    let mut records = Vec::new();
    let mut at = 0;
    loop {
        if at == body.len() {
            return Reading {
                records,
                consumed: at,
                clean: true,
            };
        }
        let fail = |records| Reading {
            records,
            consumed: at,
            clean: false,
        };
        let Some(nl) = body[at..].iter().position(|&b| b == b'\n') else {
            return fail(records);
        };
        let header = &body[at..at + nl];
        if header.is_empty() || header.len() > 20 || !header.iter().all(u8::is_ascii_digit) {
            return fail(records);
        }
        let Some(len) = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.parse::<usize>().ok())
        else {
            return fail(records);
        };
        let start = at + nl + 1;
        if len > max || body.len() - start < len {
            return fail(records);
        }
        records.push(body[start..start + len].to_vec());
        at = start + len;
    }
}

/// Cut points in `0..=len` drawn from `seed`.
fn chunks(body: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut state = u32::from(seed) | 1;
    let mut at = 0;
    while at < body.len() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let step = if seed & 1 == 0 {
            1 + (state as usize % 8)
        } else {
            1 + (state as usize % 64)
        };
        let end = (at + step).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let (flags, body) = (data[0], &data[1..]);
    let ct = content_type(flags);
    // A small limit too, so "record too long" is reached.
    for max in [DEFAULT_MAX_RECORD_LEN, 64] {
        let want = reference(body, max);
        let mut decoder = Decoder::new(max);
        let mut got = Vec::new();
        let mut failed = false;
        for chunk in chunks(body, flags >> 1) {
            match decoder.decode(chunk) {
                Ok(records) => got.extend(records),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        // A decoder that refused a chunk stays failed.
        if failed {
            assert!(decoder.decode(b"1\nx").is_err(), "decoder recovered");
            assert!(
                decoder.finish().is_err(),
                "a failed decoder finished cleanly"
            );
        } else {
            failed = decoder.finish().is_err();
        }
        assert_eq!(!failed, want.clean, "verdict differs from the reference");
        if want.clean {
            assert_eq!(got, want.records, "records differ from the reference");
        } else {
            // The records completed in the chunk that fails are dropped with
            // it (as upstream's decoder does): the rest are the first ones.
            assert!(
                want.records.starts_with(&got),
                "records are not the reference's first ones"
            );
        }
        let reframed: Vec<u8> = got
            .iter()
            .flat_map(|r| recordio::encode_record(r))
            .collect();
        let mut again = Decoder::new(max);
        assert_eq!(
            again.decode(&reframed).ok().as_ref(),
            Some(&got),
            "re-framed records decode to others"
        );
        assert!(again.finish().is_ok(), "re-framed records end mid-record");
    }

    // The client's stream over the same chunks.
    let want = reference(body, DEFAULT_MAX_RECORD_LEN);
    let parts: Vec<Result<Bytes, String>> = chunks(body, flags >> 1)
        .into_iter()
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let items = runtime.block_on(async {
        let mut source = recordio_events(futures_util::stream::iter(parts), ct);
        let mut items = Vec::new();
        while let Some(item) = source.next().await {
            let last = matches!(
                item,
                Err(StreamError::Closed | StreamError::RecordIo(_) | StreamError::Transport(_))
            );
            items.push(item);
            if last {
                break;
            }
        }
        // Nothing after the final error.
        assert!(source.next().await.is_none(), "an item after the end");
        items
    });
    let (end, events) = items.split_last().expect("a final item");
    if want.clean {
        assert_eq!(events.len(), want.records.len(), "one item per record");
    } else {
        assert!(
            events.len() <= want.records.len(),
            "more items than records"
        );
    }
    match end {
        Err(StreamError::Closed) => assert!(want.clean, "a broken stream ended as Closed"),
        Err(StreamError::RecordIo(_)) => assert!(!want.clean, "a clean stream ended in error"),
        other => panic!("the stream ended with {other:?}"),
    }
    for (item, record) in events.iter().zip(&want.records) {
        match item {
            Ok(event) => {
                let direct = unisched_mesos::codec::decode::<Event>(record, ct)
                    .expect("the stream decoded it");
                assert_eq!(&direct, event, "the stream decoded another event");
                round_trips(event);
            }
            Err(StreamError::Decode(_)) => {
                assert!(unisched_mesos::codec::decode::<Event>(record, ct).is_err());
            }
            Err(e) => panic!("a record gave {e:?}, not an event or a decode error"),
        }
    }
});
