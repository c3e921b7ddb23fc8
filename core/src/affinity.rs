//! Pinning a thread to one CPU (opt-in: `unisched serve --pin-threads`).
//!
//! The core's scheduling thread and a front end's thread (the Mesos
//! master's) are the two busy threads of an allocation run. On a machine
//! with few CPUs the kernel may run both on one CPU while another idles, and
//! the run then takes the time of both (BENCHMARKS.md, "W4 runs sorted by
//! what the machine gave them"). Pinning each to a CPU of its own rules that
//! out. It is never done by default: an embedding program owns its threads'
//! placement, and a pinned thread cannot move off a CPU that is busy with
//! something else.

use std::sync::OnceLock;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The CPUs the first thread to be pinned could run on before it was: the
/// set a thread started by a pinned one goes back to ([`unpin_current`]).
static BEFORE_PINNING: OnceLock<Vec<usize>> = OnceLock::new();

/// Why a thread could not be pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AffinityError {
    /// The kernel refused to read or set the CPU mask.
    #[error("cannot {what} the CPU mask: {reason}")]
    Mask {
        /// "read" or "set".
        what: &'static str,
        /// The kernel's error.
        reason: String,
    },
    /// Fewer CPUs may be used than threads are to be spread over.
    #[error(
        "{wanted} threads cannot each have a CPU of their own: this process may run on {} ({})",
        allowed.len(),
        list(allowed)
    )]
    TooFewCpus {
        /// How many CPUs were wanted.
        wanted: usize,
        /// The CPUs the process may run on.
        allowed: Vec<usize>,
    },
    /// The CPU is not one the calling thread may run on.
    #[error("CPU {cpu} is not one this process may run on ({})", list(allowed))]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs the process may run on.
        allowed: Vec<usize>,
    },
}

fn list(cpus: &[usize]) -> String {
    let parts: Vec<String> = cpus.iter().map(ToString::to_string).collect();
    format!("CPU {}", parts.join(", "))
}

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed_cpus() -> Result<Vec<usize>, AffinityError> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| AffinityError::Mask {
        what: "read",
        reason: e.desc().to_string(),
    })?;
    Ok((0..CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .collect())
}

/// `n` different CPUs the calling thread may run on, the lowest first: one
/// for each thread to pin.
pub fn spread(n: usize) -> Result<Vec<usize>, AffinityError> {
    let allowed = allowed_cpus()?;
    if allowed.len() < n {
        return Err(AffinityError::TooFewCpus { wanted: n, allowed });
    }
    Ok(allowed[..n].to_vec())
}

/// Pins the calling thread to `cpu`, which must be one it may run on now.
pub fn pin_current(cpu: usize) -> Result<(), AffinityError> {
    let allowed = allowed_cpus()?;
    if !allowed.contains(&cpu) {
        return Err(AffinityError::NotAllowed { cpu, allowed });
    }
    BEFORE_PINNING.get_or_init(|| allowed.clone());
    set_current(&[cpu])
}

/// Gives the calling thread back the CPUs the process had before a thread
/// of it was pinned; nothing when none was. A thread starts with the CPUs of
/// the thread that started it: one that a pinned thread starts (the core's
/// callback thread, started on the scheduling thread when an RM registers)
/// calls this first, so that it is not held to its parent's CPU.
pub fn unpin_current() {
    let Some(before) = BEFORE_PINNING.get() else {
        return;
    };
    if allowed_cpus().is_ok_and(|now| &now == before) {
        return;
    }
    if let Err(e) = set_current(before) {
        tracing::warn!(error = %e, "thread left on its parent's CPUs");
    }
}

fn set_current(cpus: &[usize]) -> Result<(), AffinityError> {
    let fail = |e: nix::Error| AffinityError::Mask {
        what: "set",
        reason: e.desc().to_string(),
    };
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(fail)?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(fail)
}

/// Pins the calling thread (named `thread` in the log) to `cpu` when one is
/// given; a failure is logged and the thread runs unpinned. For threads that
/// start themselves: the caller checked the CPU with [`spread`] first.
pub fn pin_or_warn(cpu: Option<usize>, thread: &str) {
    let Some(cpu) = cpu else { return };
    match pin_current(cpu) {
        Ok(()) => tracing::info!(thread, cpu, "thread pinned"),
        Err(e) => tracing::warn!(thread, cpu, error = %e, "thread left unpinned"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_leaves_one_cpu_and_refuses_others() {
        // On a thread of its own: the test harness's threads stay as they were.
        std::thread::spawn(|| {
            let allowed = allowed_cpus().expect("readable mask");
            assert!(!allowed.is_empty());
            let last = *allowed.last().expect("one CPU at least");
            pin_current(last).expect("pin to an allowed CPU");
            assert_eq!(allowed_cpus().expect("readable mask"), vec![last]);
            if let Some(&other) = allowed.first().filter(|&&c| c != last) {
                let err = pin_current(other).expect_err("no longer allowed");
                assert_eq!(
                    err,
                    AffinityError::NotAllowed {
                        cpu: other,
                        allowed: vec![last]
                    }
                );
            }
            let err = spread(2).expect_err("one CPU left");
            assert!(
                err.to_string()
                    .contains("2 threads cannot each have a CPU of their own"),
                "{err}"
            );
            // A thread this one starts inherits its one CPU until it unpins.
            let child = std::thread::spawn(|| {
                let inherited = allowed_cpus().expect("readable mask");
                unpin_current();
                (inherited, allowed_cpus().expect("readable mask"))
            })
            .join()
            .expect("the child thread");
            assert_eq!(child, (vec![last], allowed.clone()));
        })
        .join()
        .expect("the pinned thread");
    }

    #[test]
    fn spread_gives_distinct_allowed_cpus() {
        let allowed = allowed_cpus().expect("readable mask");
        let got = spread(allowed.len()).expect("as many as allowed");
        assert_eq!(got, allowed);
        assert_eq!(spread(1).expect("one"), vec![allowed[0]]);
        assert_eq!(
            spread(allowed.len() + 1),
            Err(AffinityError::TooFewCpus {
                wanted: allowed.len() + 1,
                allowed: allowed.clone()
            })
        );
    }
}
