//! The Mesos soak (`unisched soak --mesos`): the seeded, deterministic
//! simulation of frameworks and agents misbehaving
//! against the Mesos master and the core under it, with invariant checks
//! after every step and shrinking of a failing operation list.
//!
//! A seed fixes the operations ([`ops::generate`]); [`sim::MesosSim`] runs
//! them one per step against a fresh core and master on a virtual clock,
//! in process (no HTTP: frameworks hold their event channels from
//! `MasterHandle::subscribe`, as the in-process driver does; agents are the
//! simulation's own `AgentBackend`s). After each operation everything is
//! brought to rest (see [`world`] for how the core and the master are made
//! quiescent) and checked ([`frameworks`] on each event, [`checks`] at the
//! end of the step). A run ends with a drain: frameworks reconnect and
//! acknowledge, every task is killed, and each must have ended with its
//! framework told.
//!
//! Faults simulated: frameworks that subscribe, fail over while connected,
//! lose their stream and come back within or past their failover timeout,
//! decline with every kind of filter, suppress and revive, accept with valid
//! and invalid offers (used, of two agents, of two roles, unknown) and with
//! tasks that are too large or reuse an id, kill known and unknown tasks,
//! reconcile implicitly and explicitly, acknowledge at once, late, lossily
//! or never, call on a wrong stream, stall until the master closes their
//! stream, and tear down; agents that join, leave (tasks lost) and come
//! back; tasks that finish, fail, fail at start, or take their time dying;
//! virtual time jumps past failover timeouts, offer timeouts and the status
//! retry cap; resource providers on the agents that subscribe, drop their
//! stream and come back with their id, change their resource version, stop
//! reading, answer operations late, fail them or lose their statuses, and
//! go with their agent; frameworks that CREATE_DISK and DESTROY_DISK on
//! their disks with operation feedback and acknowledge those statuses by
//! their policy ([`providers`]); an operator who changes roles' weights and
//! quota, lowering limits below what roles hold with and without force
//! ([`quota`]).
//!
//! Determinism: the master's ids come from the seed (`Settings::id_seed`),
//! the simulation's maps are ordered, and nothing acts while the core and
//! master move; [`MesosExecution::fingerprint`] hashes every event the
//! frameworks received and the final `/state`, so the same seed gives the
//! same fingerprint (a test checks it).

pub mod agents;
pub mod checks;
pub mod frameworks;
pub mod fw_ops;
pub mod operator_view;
pub mod ops;
pub mod providers;
pub mod quota;
pub mod service;
pub mod sim;
pub mod world;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use ops::MesosOp;
pub use sim::MesosCounts;

/// Events a framework's in-process stream holds before
/// the master closes it for not keeping up.
pub const STREAM_CAPACITY: usize = 256;

/// Settings of one Mesos soak run.
#[derive(Debug, Clone)]
pub struct MesosOptions {
    /// Fixes every operation and fault.
    pub seed: u64,
    /// Operations generated.
    pub steps: usize,
    /// A step that takes longer than this counts as a hang.
    pub stall: Duration,
}

impl Default for MesosOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            steps: 1000,
            stall: Duration::from_secs(60),
        }
    }
}

/// The first step at which something did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MesosFailure {
    /// Position in the operation list (0: the setup; one past the last:
    /// the final drain).
    pub step: usize,
    /// The operation of that step (`None` for the setup, the drain or a hang).
    pub op: Option<MesosOp>,
    /// Everything that did not hold.
    pub violations: Vec<String>,
}

/// The result of running one operation list.
#[derive(Debug, Clone, Default)]
pub struct MesosExecution {
    /// Steps completed.
    pub steps: usize,
    /// What happened.
    pub counts: MesosCounts,
    /// The first failing step, if any.
    pub failure: Option<MesosFailure>,
    /// A hash of every event the frameworks received and the final `/state`.
    pub fingerprint: u64,
}

/// Runs `ops` against a fresh core and master; stops at the first failing
/// step. A step that stalls for `options.stall` is reported as a hang.
pub fn execute(options: &MesosOptions, ops: &[MesosOp]) -> MesosExecution {
    let (opts, list) = (options.clone(), ops.to_vec());
    super::watched(
        format!("mesos-soak-{}", options.seed),
        options.stall,
        move |progress| execute_here(&opts, &list, progress),
        hang,
    )
}

fn hang(step: usize, what: String) -> MesosExecution {
    MesosExecution {
        steps: step,
        failure: Some(MesosFailure {
            step,
            op: None,
            violations: vec![what],
        }),
        ..Default::default()
    }
}

fn execute_here(options: &MesosOptions, ops: &[MesosOp], progress: &AtomicUsize) -> MesosExecution {
    let mut run = MesosExecution::default();
    let mut sim = match sim::MesosSim::start(options.seed) {
        Ok(s) => s,
        Err(e) => return hang(0, format!("setup: {e}")),
    };
    let mut setup = Vec::new();
    if let Err(e) = sim.react(&mut setup) {
        setup.push(e);
    }
    setup.extend(sim.check());
    if !setup.is_empty() {
        run.failure = Some(MesosFailure {
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
        let violations = sim.step(i + 1, op);
        run.steps = i + 1;
        if !violations.is_empty() {
            run.failure = Some(MesosFailure {
                step: i + 1,
                op: Some(op.clone()),
                violations,
            });
        }
    }
    if run.failure.is_none() {
        let last = ops.len() + 1;
        progress.store(last, Ordering::SeqCst);
        let violations = sim.finish(last);
        if !violations.is_empty() {
            run.failure = Some(MesosFailure {
                step: last,
                op: None,
                violations,
            });
        }
    }
    run.counts = sim.counts.clone();
    run.fingerprint = sim.fingerprint();
    run
}

/// The result of one seed: the run, and for a failure its shrunk reproduction.
#[derive(Debug, Clone)]
pub struct MesosReport {
    /// The seed.
    pub seed: u64,
    /// The full run.
    pub execution: MesosExecution,
    /// Wall time of the run (without shrinking).
    pub elapsed: Duration,
    /// Indices (into the generated list) of the smallest failing sub-list found.
    pub reproduction: Option<Vec<usize>>,
    /// The failure the reproduction shows.
    pub reproduction_failure: Option<MesosFailure>,
}

/// Generates the operations of `options.seed`, keeping the indices in
/// `only` when given, runs them, and shrinks a failure when `shrink` is set.
pub fn run_seed(options: &MesosOptions, only: Option<&[usize]>, shrink: bool) -> MesosReport {
    let all = ops::generate(options.seed, options.steps);
    let indices: Vec<usize> = match only {
        Some(list) => list.iter().copied().filter(|&i| i < all.len()).collect(),
        None => (0..all.len()).collect(),
    };
    let list: Vec<MesosOp> = indices.iter().map(|&i| all[i].clone()).collect();
    let started = Instant::now();
    let execution = execute(options, &list);
    let elapsed = started.elapsed();
    let mut report = MesosReport {
        seed: options.seed,
        execution,
        elapsed,
        reproduction: None,
        reproduction_failure: None,
    };
    if let Some(f) = report.execution.failure.clone()
        && shrink
    {
        let wanted = super::shrink::signature_of(&f.violations);
        // The drain is part of every run: a failure there keeps every step.
        let upto = f.step.min(indices.len());
        let mut best = f;
        let kept = super::shrink::shrink_with(indices[..upto].to_vec(), &wanted, |candidate| {
            let list: Vec<MesosOp> = candidate.iter().map(|&i| all[i].clone()).collect();
            let f = execute(options, &list).failure?;
            let found = (f.step, f.violations.clone());
            if super::shrink::signature_of(&f.violations) == wanted {
                best = f;
            }
            Some(found)
        });
        report.reproduction = Some(kept);
        report.reproduction_failure = Some(best);
    }
    report
}
