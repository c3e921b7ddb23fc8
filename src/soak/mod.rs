//! Soak: a seeded, deterministic simulation of a misbehaving RM against the
//! core, with invariant checks after every step and shrinking of failures.
//!
//! A seed fixes the list of operations ([`ops::generate`]); [`sim::Sim`] runs
//! them one per step against a fresh [`unisched_core::Scheduler`] with a
//! virtual clock, through the public `SchedulerApi` only. After each step it
//! settles the core, applies the callbacks to the RM's model and checks the
//! model and the snapshot ([`check`], [`model`]). The first step with a
//! violation ends the run; [`shrink`] then deletes operations while the run
//! still fails, so a report names the fewest operations that show the fault.
//!
//! Faults simulated: node churn (create, update, drain, back to schedulable,
//! decommission), apps added to valid and invalid queues and removed, asks
//! added, updated under the same key, refused as bad input and released,
//! allocations released by id, key and whole app, configuration reloads (valid,
//! invalid, source unavailable), RM re-registration with recovery, virtual time
//! jumps past the Completing grace period, and callbacks that fail or panic.
//!
//! `UNISCHED_SOAK_TRACE=1` prints every operation, what the RM sends and what
//! the core answers to stderr, to read a reproduction.

pub mod callback;
pub mod check;
pub mod configs;
pub mod mesos;
pub mod model;
pub mod ops;
pub mod shrink;
pub mod sim;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use ops::Op;
pub use sim::Counts;

/// Settings of one soak run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Fixes every operation and every injected fault.
    pub seed: u64,
    /// Number of operations generated.
    pub steps: usize,
    /// Nodes that join at the start (node numbers go up to twice this).
    pub nodes: usize,
    /// Share of callback calls that fail (half errors, half panics).
    pub fault_rate: f64,
    /// A step that takes longer than this counts as a hang (deadlock).
    pub stall: Duration,
    /// Steer clear of the core bugs recorded in `RELIABILITY.md` so the run can
    /// look past them: skip `ReRegister` (duplicate allocation ids after
    /// recovery) and never let `AskUpdate` leave an ask with nothing pending
    /// (dangling reservation).
    pub avoid_known_bugs: bool,
    /// Also run the gang and preemption operations (gang apps, placeholder and
    /// real asks, asks allowed to preempt, configurations with guarantees and
    /// preemption policies). On by default; off gives the operation mix from
    /// before they were added (`unisched soak --no-gang`).
    pub gang_ops: bool,
}

impl Default for SoakOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            steps: 1000,
            nodes: 4,
            fault_rate: 0.05,
            stall: Duration::from_secs(60),
            avoid_known_bugs: false,
            gang_ops: true,
        }
    }
}

/// The first step at which something did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Position in the operation list run (0 = the setup).
    pub step: usize,
    /// The operation of that step (`None` for the setup or a hang).
    pub op: Option<Op>,
    /// Everything that did not hold.
    pub violations: Vec<String>,
}

/// The result of running one operation list.
#[derive(Debug, Clone, Default)]
pub struct Execution {
    /// Steps completed.
    pub steps: usize,
    /// What happened.
    pub counts: Counts,
    /// The first failing step, if any.
    pub failure: Option<Failure>,
}

/// Runs `ops` against a fresh core; stops at the first failing step. A step
/// that stalls for `options.stall` is reported as a hang instead of blocking.
pub fn execute(options: &SoakOptions, ops: &[Op]) -> Execution {
    callback::quiet_injected_panics();
    let (opts, list) = (options.clone(), ops.to_vec());
    watched(
        format!("soak-{}", options.seed),
        options.stall,
        move |progress| execute_here(&opts, &list, progress),
        hang,
    )
}

/// Runs `run` on a thread of its own named `name`, watching the step counter
/// it is handed: when the counter stands still for `stall` (or the thread
/// cannot start or panics) the answer is `hang(step, what)` instead, and the
/// stuck thread is left behind (it cannot be stopped safely). Shared by the
/// SI soak and its Mesos mode.
pub(crate) fn watched<T: Send + 'static>(
    name: String,
    stall: Duration,
    run: impl FnOnce(&AtomicUsize) -> T + Send + 'static,
    hang: fn(usize, String) -> T,
) -> T {
    let progress = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let seen = progress.clone();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let _ = tx.send(run(&seen));
    });
    if let Err(e) = spawned {
        return hang(0, format!("could not start the soak thread: {e}"));
    }
    let mut last = (0, Instant::now());
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(done) => return done,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return hang(last.0, "the soak thread panicked".to_string());
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let now = progress.load(Ordering::SeqCst);
                if now != last.0 {
                    last = (now, Instant::now());
                } else if last.1.elapsed() > stall {
                    return hang(
                        now,
                        format!("step {now} did not finish within {stall:?} (deadlock?)"),
                    );
                }
            }
        }
    }
}

fn hang(step: usize, what: String) -> Execution {
    Execution {
        steps: step,
        counts: Counts::default(),
        failure: Some(Failure {
            step,
            op: None,
            violations: vec![what],
        }),
    }
}

fn execute_here(options: &SoakOptions, ops: &[Op], progress: &AtomicUsize) -> Execution {
    let (mut sim, setup) = sim::Sim::start(options.seed, options.nodes, options.fault_rate);
    sim.avoid_known_bugs = options.avoid_known_bugs;
    sim.gang_ops = options.gang_ops;
    let mut run = Execution::default();
    if !setup.is_empty() {
        run.failure = Some(Failure {
            step: 0,
            op: None,
            violations: setup,
        });
    }
    for (i, op) in ops.iter().enumerate() {
        if run.failure.is_some() {
            break;
        }
        progress.store(i + 1, Ordering::SeqCst);
        let gang_op = matches!(op, Op::GangAppAdd { .. } | Op::GangRealAsk { .. });
        if options.avoid_known_bugs && *op == Op::ReRegister || gang_op && !options.gang_ops {
            run.steps = i + 1;
            continue;
        }
        let violations = sim.step(i + 1, op);
        run.steps = i + 1;
        if !violations.is_empty() {
            run.failure = Some(Failure {
                step: i + 1,
                op: Some(op.clone()),
                violations,
            });
        }
    }
    run.counts = sim.counts.clone();
    run
}

/// The result of one seed: the run, and for a failure its shrunk reproduction.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The full run.
    pub execution: Execution,
    /// Wall time of the run (without shrinking).
    pub elapsed: Duration,
    /// Indices (into the generated list) of the smallest failing sub-list found.
    pub reproduction: Option<Vec<usize>>,
    /// The failure the reproduction shows.
    pub reproduction_failure: Option<Failure>,
}

/// Generates the operations of `options.seed`, keeping the indices in `only`
/// when given, runs them, and shrinks a failure when `shrink` is set.
pub fn run_seed(options: &SoakOptions, only: Option<&[usize]>, shrink: bool) -> SeedReport {
    let all = ops::generate(options.seed, options.steps, options.nodes);
    let indices: Vec<usize> = match only {
        Some(list) => list.iter().copied().filter(|&i| i < all.len()).collect(),
        None => (0..all.len()).collect(),
    };
    let list: Vec<Op> = indices.iter().map(|&i| all[i].clone()).collect();
    let started = Instant::now();
    let execution = execute(options, &list);
    let elapsed = started.elapsed();
    let mut report = SeedReport {
        seed: options.seed,
        execution,
        elapsed,
        reproduction: None,
        reproduction_failure: None,
    };
    if let Some(f) = &report.execution.failure
        && shrink
    {
        let upto = f.step.min(indices.len());
        let (kept, failure) = shrink::shrink(options, &all, indices[..upto].to_vec(), f);
        report.reproduction = Some(kept);
        report.reproduction_failure = Some(failure);
    }
    report
}

/// `1,4,7-9` for a sorted index list.
pub fn format_indices(indices: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parses `1,4,7-9` into indices.
pub fn parse_indices(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad operation index {part:?} (expected N or N-M)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_round_trip() {
        let list = vec![0, 1, 2, 5, 7, 8];
        assert_eq!(format_indices(&list), "0-2,5,7-8");
        assert_eq!(parse_indices("0-2,5,7-8").unwrap(), list);
        assert!(parse_indices("x").is_err());
    }
}
