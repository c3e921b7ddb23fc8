//! The simulated RM: runs operations against a fresh core with a virtual clock,
//! applies what the callbacks report to its [`Model`], and checks the model and
//! the snapshot after every step.
//!
//! One operation is one step: send it, `settle()`, read the callbacks, check.
//! Results that confirm a request (a node accepted, an app accepted) change the
//! model when they arrive; asks change it when sent and are undone if refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use si::node_info::ActionFromRm;
use unisched_core::{ManualClock, PartitionSnapshot, Scheduler, SchedulerOptions};
use unisched_shim_api::{PREDICATES_EXTRA_CONFIG, SchedulerApi, SchedulerError};
use unisched_si as si;

use super::callback::{SoakCallback, SoakSource};
use super::configs;
use super::model::{AskModel, Model, NodeModel, Size};
use super::ops::Op;

mod answers;
mod checks;
mod perform;
mod requests;
mod reregister;

/// The RM id the soak registers.
pub const RM: &str = "soak-rm";
const PARTITION: &str = "default";

/// What a run did, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Steps run (operations plus the setup).
    pub steps: u64,
    /// Allocations the core made.
    pub allocations: u64,
    /// Allocations the core reported released.
    pub releases: u64,
    /// Rejections of any kind (apps, asks, nodes, allocations).
    pub rejections: u64,
    /// Configuration reloads applied.
    pub reloads: u64,
    /// Configuration reloads refused (invalid or unavailable).
    pub refused_reloads: u64,
    /// Re-registrations of the RM.
    pub reregistrations: u64,
    /// Allocations re-reported on re-registration.
    pub recovered: u64,
    /// Callback calls that returned an error or panicked on purpose.
    pub callback_faults: u64,
}

impl Counts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Counts) {
        self.steps += other.steps;
        self.allocations += other.allocations;
        self.releases += other.releases;
        self.rejections += other.rejections;
        self.reloads += other.reloads;
        self.refused_reloads += other.refused_reloads;
        self.reregistrations += other.reregistrations;
        self.recovered += other.recovered;
        self.callback_faults += other.callback_faults;
    }
}

#[derive(Debug)]
enum NodeIntent {
    Create(NodeModel),
    Update(Size, i64),
    Schedulable(bool),
    Remove,
}

/// What this step's requests expect back.
#[derive(Debug, Default)]
struct Intents {
    nodes: Vec<(String, NodeIntent)>,
    apps: BTreeMap<String, String>,
    readded: BTreeSet<String>,
    ask_undo: Vec<((String, String), Option<AskModel>)>,
    ask_rejection: Option<String>,
    /// Key of a release naming an allocation the core does not have: it
    /// must be ignored, not rejected.
    unknown_release: Option<String>,
    recovered: BTreeSet<(String, String)>,
    /// Gang applications (new or re-reported) whose placeholders exceed the
    /// max of a queue on their path: the core must refuse them.
    refused_gangs: BTreeSet<String>,
}

/// One simulated RM and the core it drives.
pub struct Sim {
    sched: Scheduler,
    clock: Arc<ManualClock>,
    callback: Arc<SoakCallback>,
    source: Arc<SoakSource>,
    config: String,
    predicates: bool,
    /// What the RM believes.
    pub model: Model,
    next_app: u64,
    next_ask: u64,
    /// What happened so far.
    pub counts: Counts,
    /// Keep `AskUpdate` from leaving an ask with nothing pending.
    pub avoid_known_bugs: bool,
    /// Asks may preempt and reloads include the preemption configurations.
    pub gang_ops: bool,
    intents: Intents,
    seed: u64,
    step_no: usize,
    /// Prints every operation and everything the core sends back to stderr
    /// (`UNISCHED_SOAK_TRACE`), to read a reproduction.
    pub trace: bool,
    /// Confirmations the slow RM sends later: (step due, allocation id).
    confirm_queue: Vec<(usize, String)>,
    /// Priority of every live allocation, as reported.
    alloc_priority: BTreeMap<String, i32>,
    /// Victims of preemption still waiting for the RM's confirmation: the
    /// (application, ask) the core named in the release as the one it makes
    /// room for.
    preempted_for: BTreeMap<String, (String, String)>,
    /// The limits the last step ended with: those the next one starts
    /// under (`check::limits`).
    step_limits: Option<super::check::StepLimits>,
}

const REPLACED: i32 = si::TerminationType::PlaceholderReplaced as i32;
const PREEMPTED: i32 = si::TerminationType::PreemptedByScheduler as i32;
const TIMEOUT: i32 = si::TerminationType::Timeout as i32;

/// Most applications the RM holds at once. The operation mix adds more than
/// it removes, so without a bound every step of a long seed would carry more
/// applications and asks than the one before (RELIABILITY.md, long seeds).
const LIVE_APPS: usize = 64;

/// Finished applications the core keeps for readers in a soak run.
const SOAK_COMPLETED_APPS_KEPT: usize = 16;

/// When the RM confirms a core-initiated release of `id`: `Some(0)` at once,
/// `Some(n)` after `n` steps, `None` never (a slow RM). Fixed by seed and id.
fn confirm_delay(seed: u64, id: &str) -> Option<usize> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    match h % 20 {
        0..=13 => Some(0),
        14..=18 => Some(1 + (h / 20 % 5) as usize),
        _ => None,
    }
}

/// Apps `app-N` with N divisible by 3 send asks that may preempt others.
fn preempting_app(app: &str) -> bool {
    app.rsplit('-')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n % 3 == 0)
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

fn resource(pairs: &[(&str, i64)]) -> Option<si::Resource> {
    Some(si::Resource {
        resources: pairs
            .iter()
            .map(|&(n, v)| (n.to_string(), si::Quantity { value: v }))
            .collect(),
    })
}

fn size_of(r: Option<&si::Resource>) -> Size {
    let get = |n: &str| r.and_then(|r| r.resources.get(n)).map_or(0, |q| q.value);
    (get("memory"), get("vcore"))
}

impl Sim {
    /// Starts a core and registers the RM; `nodes` nodes join.
    pub fn start(seed: u64, nodes: usize, fault_rate: f64) -> (Self, Vec<String>) {
        let clock = ManualClock::new(1_000_000_000);
        let source = Arc::new(SoakSource::default());
        let mut options = SchedulerOptions {
            clock: clock.clone(),
            config_source: Some(source.clone()),
            // The model does not need the history of finished applications,
            // and a snapshot per step carrying thousands of them would make
            // every step of a long seed slower than the one before.
            completed_apps_kept: SOAK_COMPLETED_APPS_KEPT,
            // One step at a time, each waited for: see `spin_before_park`.
            spin_before_park: unisched_core::scheduler::STEPPED_SPIN,
            ..Default::default()
        };
        // UNISCHED_SOAK_RESERVATION_TIMEOUT=<seconds> replaces the default
        // reservation timeout (60 s; RELIABILITY.md finding 5).
        if let Some(secs) = std::env::var("UNISCHED_SOAK_RESERVATION_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        {
            options.reservation_timeout = Duration::from_secs(secs);
        }
        let sched = Scheduler::start(options);
        let mut sim = Self {
            sched,
            clock,
            callback: Arc::new(SoakCallback::new(seed, fault_rate)),
            source,
            config: configs::VALID[0].to_string(),
            predicates: seed % 2 == 1,
            model: Model::default(),
            next_app: 0,
            next_ask: 0,
            counts: Counts::default(),
            avoid_known_bugs: false,
            gang_ops: false,
            intents: Intents::default(),
            seed,
            step_no: 0,
            trace: std::env::var_os("UNISCHED_SOAK_TRACE").is_some(),
            confirm_queue: Vec::new(),
            alloc_priority: BTreeMap::new(),
            preempted_for: BTreeMap::new(),
            step_limits: None,
        };
        let mut violations = Vec::new();
        if let Err(e) = sim.register() {
            violations.push(format!("registration failed: {e}"));
        }
        let infos = (0..nodes)
            .map(|i| {
                let id = format!("node-{i}");
                let cap = (200 + 50 * (i as i64 % 3), 20_000 + 4_000 * (i as i64 % 2));
                sim.intents.nodes.push((
                    id.clone(),
                    NodeIntent::Create(NodeModel {
                        capacity: cap,
                        occupied: 0,
                        schedulable: true,
                    }),
                ));
                si::NodeInfo {
                    node_id: id,
                    action: ActionFromRm::Create as i32,
                    schedulable_resource: resource(&[("memory", cap.0), ("vcore", cap.1)]),
                    ..Default::default()
                }
            })
            .collect();
        sim.nodes(infos);
        violations.extend(sim.finish_step(0));
        (sim, violations)
    }

    fn register(&self) -> Result<(), SchedulerError> {
        let mut extra = std::collections::HashMap::new();
        if self.predicates {
            extra.insert(PREDICATES_EXTRA_CONFIG.to_string(), "true".to_string());
        }
        self.sched
            .register_resource_manager(
                si::RegisterResourceManagerRequest {
                    rm_id: RM.to_string(),
                    policy_group: "queues".to_string(),
                    config: self.config.clone(),
                    extra_config: extra,
                    ..Default::default()
                },
                self.callback.clone(),
            )
            .map(|_| ())
    }

    fn snapshot(&self) -> Option<PartitionSnapshot> {
        self.sched.snapshot(PARTITION)
    }

    /// Runs one operation as step `step` and returns every violation found.
    pub fn step(&mut self, step: usize, op: &Op) -> Vec<String> {
        self.step_no = step;
        if self.trace {
            eprintln!("[{step}] -> {op:?}");
        }
        let due: Vec<String> = self
            .confirm_queue
            .iter()
            .filter(|(at, _)| *at <= step)
            .map(|(_, id)| id.clone())
            .collect();
        self.confirm_queue.retain(|(at, _)| *at > step);
        self.confirm(&due);
        let mut violations = self.send(op);
        violations.extend(self.finish_step(step));
        violations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operation mix adds more applications than it removes: without a
    /// bound a long seed's population (and every step's cost) grows with its
    /// length. Seed 1 passes 64 applications before step 2,000 unbounded.
    #[test]
    fn a_long_seed_keeps_a_steady_population() {
        super::super::callback::quiet_injected_panics();
        let options = super::super::SoakOptions::default();
        let (mut sim, setup) = Sim::start(1, options.nodes, options.fault_rate);
        assert!(setup.is_empty(), "{setup:?}");
        sim.gang_ops = true;
        let mut most = 0;
        for (i, op) in super::super::ops::generate(1, 2000, options.nodes)
            .iter()
            .enumerate()
        {
            let violations = sim.step(i + 1, op);
            assert!(violations.is_empty(), "step {}: {violations:?}", i + 1);
            most = most.max(sim.model.apps.len());
        }
        assert!(most <= LIVE_APPS, "{most} applications at once");
        let snap = sim.snapshot().expect("the partition");
        assert!(
            snap.applications.len() <= LIVE_APPS + SOAK_COMPLETED_APPS_KEPT,
            "{} applications in the snapshot",
            snap.applications.len()
        );
    }
}
