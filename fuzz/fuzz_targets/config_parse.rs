//! Fuzz target: queue configuration text through `unisched_core::config::parse`.
//!
//! Any UTF-8 text must give a config or a non-empty list of errors, never a panic.
//! Also checked: error locations lie inside the text, and an accepted config's
//! checksum is the 64-digit upper-case hex that `config::checksum` computes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use unisched_core::config;

/// Line breaks as YAML sees them: LF, CRLF, bare CR, NEL, LS and PS.
fn yaml_line_breaks(text: &str) -> usize {
    let mut n = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                n += 1;
            }
            '\n' | '\u{85}' | '\u{2028}' | '\u{2029}' => n += 1,
            _ => {}
        }
    }
    n
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::parse(text) {
        Ok(cfg) => {
            assert_eq!(cfg.checksum.len(), 64, "checksum length");
            assert!(
                cfg.checksum
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)),
                "checksum is not upper-case hex: {}",
                cfg.checksum
            );
            assert_eq!(cfg.checksum, config::checksum(text), "checksum differs");
            assert!(
                !cfg.partitions.is_empty(),
                "accepted config has no partition"
            );
            for p in &cfg.partitions {
                assert!(p.root.parent, "root of {} is not a parent", p.name);
                assert!(
                    p.root.queue_count() >= 1,
                    "partition {} has no queues",
                    p.name
                );
            }
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "rejected without an error");
            // Lines are 1-based and counted as YAML (libyaml) counts them: a bare CR
            // and U+0085/U+2028/U+2029 break lines too. End of input may be one past.
            let lines = yaml_line_breaks(text) + 2;
            for e in &errors.0 {
                if let Some(line) = e.line {
                    assert!(
                        (1..=lines).contains(&line),
                        "error line {line} outside 1..={lines}: {e}"
                    );
                }
                if let Some(column) = e.column {
                    assert!(column >= 1, "error column {column} is not 1-based: {e}");
                }
            }
            let _ = errors.to_string();
        }
    }
});
