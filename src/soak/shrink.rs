//! Shrinking a failing run: delete chunks of operations (halves, then quarters,
//! down to single operations) and keep a deletion whenever the run still fails
//! the same way. Operations pick their targets modulo what exists, so every
//! sub-list is a valid run.

use super::{Failure, Op, SoakOptions, execute};

/// Most runs one shrink may make.
const BUDGET: usize = 400;

/// The kind of a violation: its first words with digits removed, so the same
/// fault on other ids counts as the same failure.
pub fn signature(failure: &Failure) -> String {
    let first = failure.violations.first().map_or("", String::as_str);
    first
        .split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .collect()
}

/// Shrinks `indices` (into `all`) that fail with `failure`; returns the
/// smallest failing list found and its failure.
pub fn shrink(
    options: &SoakOptions,
    all: &[Op],
    mut indices: Vec<usize>,
    failure: &Failure,
) -> (Vec<usize>, Failure) {
    let wanted = signature(failure);
    let mut best = failure.clone();
    let mut runs = 0;
    let mut chunk = indices.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        while start < indices.len() && runs < BUDGET {
            let end = (start + chunk).min(indices.len());
            let candidate: Vec<usize> = indices[..start]
                .iter()
                .chain(&indices[end..])
                .copied()
                .collect();
            let list: Vec<Op> = candidate.iter().map(|&i| all[i].clone()).collect();
            runs += 1;
            match execute(options, &list).failure {
                Some(f) if signature(&f) == wanted => {
                    // Everything after the failing step is irrelevant too.
                    let keep = f.step.min(candidate.len());
                    indices = candidate[..keep].to_vec();
                    best = f;
                }
                _ => start = end,
            }
        }
        if chunk == 1 || runs >= BUDGET {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    (indices, best)
}
