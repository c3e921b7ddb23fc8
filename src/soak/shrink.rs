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
    signature_of(&failure.violations)
}

/// [`signature`] of a list of violations (the first one's kind).
pub fn signature_of(violations: &[String]) -> String {
    let first = violations.first().map_or("", String::as_str);
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
    indices: Vec<usize>,
    failure: &Failure,
) -> (Vec<usize>, Failure) {
    let wanted = signature(failure);
    let mut best = failure.clone();
    let kept = shrink_with(indices, &wanted, |candidate| {
        let list: Vec<Op> = candidate.iter().map(|&i| all[i].clone()).collect();
        let f = execute(options, &list).failure?;
        let found = (f.step, f.violations.clone());
        if signature(&f) == wanted {
            best = f;
        }
        Some(found)
    });
    (kept, best)
}

/// The shrinking loop of any soak: `run` runs a candidate list of
/// operation indices and returns its failing step and violations, if any;
/// deletions are kept while the first violation keeps the `wanted`
/// signature. Returns the smallest failing list found.
pub fn shrink_with(
    mut indices: Vec<usize>,
    wanted: &str,
    mut run: impl FnMut(&[usize]) -> Option<(usize, Vec<String>)>,
) -> Vec<usize> {
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
            runs += 1;
            match run(&candidate) {
                Some((step, violations)) if signature_of(&violations) == wanted => {
                    // Everything after the failing step is irrelevant too.
                    let keep = step.min(candidate.len());
                    indices = candidate[..keep].to_vec();
                }
                _ => start = end,
            }
        }
        if chunk == 1 || runs >= BUDGET {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    indices
}
