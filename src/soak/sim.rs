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

use super::callback::{Inbound, SoakCallback, SoakSource};
use super::check;
use super::configs;
use super::model::{AllocModel, AskMeta, AskModel, GangModel, Model, NodeModel, Size};
use super::ops::{Op, QUEUES};

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
}

const REPLACED: i32 = si::TerminationType::PlaceholderReplaced as i32;
const PREEMPTED: i32 = si::TerminationType::PreemptedByScheduler as i32;
const TIMEOUT: i32 = si::TerminationType::Timeout as i32;

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

    fn nodes(&self, nodes: Vec<si::NodeInfo>) {
        let _ = self.sched.update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        });
    }

    fn allocation(&self, req: si::AllocationRequest) {
        if self.trace {
            for a in &req.asks {
                let size = size_of(a.resource_ask.as_ref());
                eprintln!(
                    "  -> ask {}/{} {size:?} x{} group {:?}{}",
                    a.application_id,
                    a.allocation_key,
                    a.max_allocations,
                    a.task_group_name,
                    if a.placeholder { " placeholder" } else { "" }
                );
            }
            for r in req.releases.iter().flat_map(|r| &r.allocations_to_release) {
                eprintln!(
                    "  -> release {}/{}/{} {:?}",
                    r.application_id,
                    r.allocation_key,
                    r.allocation_id,
                    si::TerminationType::try_from(r.termination_type)
                );
            }
            for r in req
                .releases
                .iter()
                .flat_map(|r| &r.allocation_asks_to_release)
            {
                eprintln!("  -> release ask {}/{}", r.application_id, r.allocation_key);
            }
        }
        let _ = self.sched.update_allocation(si::AllocationRequest {
            rm_id: RM.to_string(),
            ..req
        });
    }

    fn apps(&self, req: si::ApplicationRequest) {
        if self.trace {
            for a in &req.new {
                eprintln!("  -> add app {} to {}", a.application_id, a.queue_name);
            }
            for a in &req.remove {
                eprintln!("  -> remove app {}", a.application_id);
            }
        }
        let _ = self.sched.update_application(si::ApplicationRequest {
            rm_id: RM.to_string(),
            ..req
        });
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

    fn ask(app: &str, key: &str, size: Size, max: i32, priority: i32) -> si::AllocationAsk {
        si::AllocationAsk {
            allocation_key: key.to_string(),
            application_id: app.to_string(),
            partition_name: PARTITION.to_string(),
            resource_ask: resource(&[("memory", size.0), ("vcore", size.1)]),
            max_allocations: max,
            priority,
            ..Default::default()
        }
    }

    /// An ask with the task group, placeholder flag and preemption policy it
    /// was first sent with.
    fn ask_meta(&self, app: &str, key: &str, size: Size, max: i32) -> si::AllocationAsk {
        let meta = self
            .model
            .ask_meta
            .get(&(app.to_string(), key.to_string()))
            .cloned()
            .unwrap_or_default();
        let mut ask = Self::ask(app, key, size, max, meta.priority);
        ask.task_group_name = meta.group;
        ask.placeholder = meta.placeholder;
        ask.preemption_policy = Some(si::PreemptionPolicy {
            allow_preempt_self: true,
            allow_preempt_other: meta.preempt_other,
        });
        ask
    }

    /// Sends the RM's confirmations of core-initiated releases still held.
    fn confirm(&mut self, ids: &[String]) {
        let mut rels = Vec::new();
        for id in ids {
            let (Some(&termination), Some(a)) =
                (self.model.releasing.get(id), self.model.allocs.get(id))
            else {
                continue;
            };
            rels.push(si::AllocationRelease {
                partition_name: PARTITION.to_string(),
                application_id: a.app.clone(),
                allocation_key: a.key.clone(),
                allocation_id: id.clone(),
                termination_type: termination,
                message: "soak: RM confirms".to_string(),
            });
            self.model.release_confirmed(id);
            self.alloc_priority.remove(id);
        }
        if rels.is_empty() {
            return;
        }
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: rels,
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    /// An application request, with its gang settings when it has some.
    fn gang_app(id: &str, queue: &str, gang: Option<&GangModel>) -> si::AddApplicationRequest {
        let mut req = si::AddApplicationRequest {
            application_id: id.to_string(),
            queue_name: queue.to_string(),
            partition_name: PARTITION.to_string(),
            ugi: Some(si::UserGroupInformation {
                user: "soak".to_string(),
                groups: vec![],
            }),
            ..Default::default()
        };
        if let Some(g) = gang {
            req.placeholder_ask = resource(&[
                ("memory", g.placeholder_ask.0),
                ("vcore", g.placeholder_ask.1),
            ]);
            req.gang_scheduling_style = if g.hard { "Hard" } else { "Soft" }.to_string();
            req.execution_timeout_milli_seconds = g.timeout_ms;
        }
        req
    }

    fn send_asks(&self, asks: Vec<si::AllocationAsk>) {
        self.allocation(si::AllocationRequest {
            asks,
            ..Default::default()
        });
    }

    fn release(&self, app: &str, key: &str, id: &str) {
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: vec![si::AllocationRelease {
                    partition_name: PARTITION.to_string(),
                    application_id: app.to_string(),
                    allocation_key: key.to_string(),
                    allocation_id: id.to_string(),
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    fn release_asks(&mut self, app: &str, key: &str) {
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocation_asks_to_release: vec![si::AllocationAskRelease {
                    partition_name: PARTITION.to_string(),
                    application_id: app.to_string(),
                    allocation_key: key.to_string(),
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
        let keys: Vec<String> = self
            .model
            .asks
            .keys()
            .filter(|(a, k)| a == app && (key.is_empty() || k == key))
            .map(|(_, k)| k.clone())
            .collect();
        for k in keys {
            self.model.release_ask(app, &k);
        }
    }

    fn node_action(&mut self, pick: u32, action: ActionFromRm, intent: NodeIntent) {
        let Some(id) = Model::nth(&self.model.nodes, pick) else {
            return;
        };
        self.intents.nodes.push((id.clone(), intent));
        self.nodes(vec![si::NodeInfo {
            node_id: id,
            action: action as i32,
            ..Default::default()
        }]);
    }

    /// Sends the requests of one operation; violations of waiting calls.
    fn send(&mut self, op: &Op) -> Vec<String> {
        let mut out = Vec::new();
        match *op {
            Op::NodeCreate {
                node,
                memory,
                vcore,
            } => {
                let id = format!("node-{node}");
                self.intents.nodes.push((
                    id.clone(),
                    NodeIntent::Create(NodeModel {
                        capacity: (memory, vcore),
                        occupied: 0,
                        schedulable: true,
                    }),
                ));
                self.nodes(vec![si::NodeInfo {
                    node_id: id,
                    action: ActionFromRm::Create as i32,
                    schedulable_resource: resource(&[("memory", memory), ("vcore", vcore)]),
                    ..Default::default()
                }]);
            }
            Op::NodeUpdate {
                pick,
                memory,
                vcore,
                occupied,
            } => {
                let Some(id) = Model::nth(&self.model.nodes, pick) else {
                    return out;
                };
                self.intents
                    .nodes
                    .push((id.clone(), NodeIntent::Update((memory, vcore), occupied)));
                self.nodes(vec![si::NodeInfo {
                    node_id: id,
                    action: ActionFromRm::Update as i32,
                    schedulable_resource: resource(&[("memory", memory), ("vcore", vcore)]),
                    occupied_resource: resource(&[("memory", occupied)]),
                    ..Default::default()
                }]);
            }
            Op::NodeDrain { pick } => self.node_action(
                pick,
                ActionFromRm::DrainNode,
                NodeIntent::Schedulable(false),
            ),
            Op::NodeSchedulable { pick } => self.node_action(
                pick,
                ActionFromRm::DrainToSchedulable,
                NodeIntent::Schedulable(true),
            ),
            Op::NodeDecommission { pick } => {
                self.node_action(pick, ActionFromRm::Decomission, NodeIntent::Remove)
            }
            Op::AppAdd { queue } => {
                let id = format!("app-{}", self.next_app);
                self.next_app += 1;
                let queue = QUEUES[usize::from(queue) % QUEUES.len()].to_string();
                self.intents.apps.insert(id.clone(), queue.clone());
                self.apps(si::ApplicationRequest {
                    new: vec![si::AddApplicationRequest {
                        application_id: id,
                        queue_name: queue,
                        partition_name: PARTITION.to_string(),
                        ugi: Some(si::UserGroupInformation {
                            user: "soak".to_string(),
                            groups: vec![],
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                });
            }
            Op::AppRemove { pick } => {
                let Some(id) = Model::nth(&self.model.apps, pick) else {
                    return out;
                };
                self.model.apps.remove(&id);
                self.model.gone.insert(id.clone());
                self.model.asks.retain(|(a, _), _| *a != id);
                self.model.replacing.retain(|_, (a, _)| *a != id);
                self.apps(si::ApplicationRequest {
                    remove: vec![si::RemoveApplicationRequest {
                        application_id: id,
                        partition_name: PARTITION.to_string(),
                    }],
                    ..Default::default()
                });
            }
            Op::AskAdd {
                app,
                memory,
                vcore,
                max,
                priority,
            } => {
                let Some(app) = Model::nth(&self.model.apps, app) else {
                    return out;
                };
                let key = format!("ask-{}", self.next_ask);
                self.next_ask += 1;
                let id = (app.clone(), key.clone());
                self.intents.ask_undo.push((
                    id,
                    self.model.asks.get(&(app.clone(), key.clone())).cloned(),
                ));
                self.model.ask_meta.insert(
                    (app.clone(), key.clone()),
                    AskMeta {
                        preempt_other: self.gang_ops && preempting_app(&app),
                        priority,
                        ..Default::default()
                    },
                );
                self.model.send_ask(&app, &key, (memory, vcore), max);
                self.send_asks(vec![self.ask_meta(&app, &key, (memory, vcore), max)]);
            }
            Op::AskUpdate {
                pick,
                memory,
                vcore,
                max,
            } => {
                let Some((app, key)) = Model::nth(&self.model.asks, pick) else {
                    return out;
                };
                let id = (app.clone(), key.clone());
                if self.model.ask_meta.get(&id).is_some_and(|m| m.placeholder) {
                    // Placeholder asks are not re-sized: their count is the gang's.
                    return out;
                }
                self.model.ask_meta.entry(id.clone()).or_default().priority = 1;
                let old = self.model.asks.get(&id).cloned();
                let done = old.as_ref().map_or(0, |a| a.allocated_total as i32);
                let max = if self.avoid_known_bugs {
                    max.max(done + 1)
                } else {
                    max
                };
                self.intents.ask_undo.push((id, old));
                self.model.send_ask(&app, &key, (memory, vcore), max);
                self.send_asks(vec![self.ask_meta(&app, &key, (memory, vcore), max)]);
            }
            Op::AskBad { app, kind } => {
                let app = Model::nth(&self.model.apps, app).unwrap_or_default();
                let key = format!("bad-{}", self.next_ask);
                self.next_ask += 1;
                let mut ask = Self::ask(&app, &key, (10, 100), 1, 0);
                match kind % 4 {
                    0 => ask.resource_ask = resource(&[("memory", -5)]),
                    1 => ask.resource_ask = None,
                    2 => ask.application_id = "ghost-app".to_string(),
                    _ => ask.max_allocations = -1,
                }
                self.intents.ask_rejection = Some(key);
                self.send_asks(vec![ask]);
            }
            Op::AskRelease { pick } => {
                if let Some((app, key)) = Model::nth(&self.model.asks, pick) {
                    self.release_asks(&app, &key);
                }
            }
            Op::AskReleaseApp { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.release_asks(&app, "");
                }
            }
            Op::ReleaseById { pick } => {
                if let Some(id) = Model::nth(&self.model.allocs, pick) {
                    let a = &self.model.allocs[&id];
                    self.release(&a.app, "", &id);
                }
            }
            Op::ReleaseByKey { pick } => {
                if let Some(id) = Model::nth(&self.model.allocs, pick) {
                    let a = &self.model.allocs[&id];
                    self.release(&a.app, &a.key, "");
                }
            }
            Op::ReleaseApp { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.release(&app, "", "");
                }
            }
            Op::ReleaseUnknown { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.intents.unknown_release = Some("missing".to_string());
                    self.release(&app, "missing", "missing-0");
                }
            }
            Op::Reload { variant } => {
                let valid = if self.gang_ops {
                    configs::VALID.len()
                } else {
                    configs::PLAIN
                };
                let text = configs::VALID[usize::from(variant) % valid];
                self.source.set(Ok(text.to_string()));
                match self.sched.update_configuration(RM) {
                    Ok(()) => {
                        self.config = text.to_string();
                        self.counts.reloads += 1;
                    }
                    Err(e) => out.push(format!("valid configuration refused: {e}")),
                }
            }
            Op::ReloadInvalid { variant } => {
                let text = configs::INVALID[usize::from(variant) % configs::INVALID.len()];
                out.extend(self.refused_reload(Ok(text.to_string()), "invalid"));
            }
            Op::ReloadUnavailable => {
                out.extend(
                    self.refused_reload(Err("soak: source down".to_string()), "unavailable"),
                );
            }
            Op::ReRegister => out.extend(self.reregister(self.next_ask.is_multiple_of(2))),
            Op::GangAppAdd {
                queue,
                hard,
                timeout_ms,
                groups,
                memory,
                vcore,
                count,
            } => {
                let id = format!("app-{}", self.next_app);
                self.next_app += 1;
                let queue = QUEUES[usize::from(queue) % 3].to_string();
                let groups: Vec<(String, Size, i32)> = (0..groups.max(1))
                    .map(|g| format!("tg{g}"))
                    .map(|g| (g, (memory, vcore), count))
                    .collect();
                let n = i64::from(count) * groups.len() as i64;
                let gang = GangModel {
                    hard,
                    timeout_ms,
                    placeholder_ask: (memory * n, vcore * n),
                    groups,
                };
                self.intents.apps.insert(id.clone(), queue.clone());
                if !configs::fits_queue_max(&self.config, &queue, gang.placeholder_ask) {
                    self.intents.refused_gangs.insert(id.clone());
                }
                self.apps(si::ApplicationRequest {
                    new: vec![Self::gang_app(&id, &queue, Some(&gang))],
                    ..Default::default()
                });
                let mut asks = Vec::new();
                for (g, size, count) in &gang.groups {
                    let key = format!("ph-{id}-{g}");
                    let ask_id = (id.clone(), key.clone());
                    self.model.ask_meta.insert(
                        ask_id.clone(),
                        AskMeta {
                            group: g.clone(),
                            placeholder: true,
                            ..Default::default()
                        },
                    );
                    self.intents.ask_undo.push((ask_id, None));
                    self.model.send_ask(&id, &key, *size, *count);
                    asks.push(self.ask_meta(&id, &key, *size, *count));
                }
                self.model.gangs.insert(id, gang);
                self.send_asks(asks);
            }
            Op::GangRealAsk { app, group, larger } => {
                let live: BTreeMap<&String, &GangModel> = self
                    .model
                    .gangs
                    .iter()
                    .filter(|(a, _)| self.model.apps.contains_key(*a))
                    .collect();
                if live.is_empty() {
                    return out;
                }
                let (app, gang) = live
                    .iter()
                    .nth(app as usize % live.len())
                    .map(|(a, g)| ((*a).clone(), (*g).clone()))
                    .expect("not empty");
                let (g, size, count) = gang.groups[usize::from(group) % gang.groups.len()].clone();
                let size = if larger { (size.0 + 10, size.1) } else { size };
                let key = format!("real-{app}-{g}");
                let id = (app.clone(), key.clone());
                self.model.ask_meta.insert(
                    id.clone(),
                    AskMeta {
                        group: g,
                        preempt_other: preempting_app(&app),
                        ..Default::default()
                    },
                );
                self.intents
                    .ask_undo
                    .push((id.clone(), self.model.asks.get(&id).cloned()));
                self.model.send_ask(&app, &key, size, count);
                self.send_asks(vec![self.ask_meta(&app, &key, size, count)]);
            }
            Op::Advance { millis } => {
                self.clock.advance(Duration::from_millis(millis));
                self.sched.wake();
            }
        }
        out
    }

    fn refused_reload(&mut self, answer: Result<String, String>, kind: &str) -> Vec<String> {
        let mut out = Vec::new();
        let before = self.snapshot().map(|s| check::queue_limits(&s));
        self.source.set(answer);
        match self.sched.update_configuration(RM) {
            Ok(()) => out.push(format!("{kind} configuration accepted")),
            Err(SchedulerError::InvalidConfiguration { .. }) if kind == "invalid" => {}
            Err(SchedulerError::ConfigurationUnavailable { .. }) if kind == "unavailable" => {}
            Err(e) => out.push(format!(
                "{kind} configuration refused with the wrong error: {e}"
            )),
        }
        self.counts.refused_reloads += 1;
        let after = self.snapshot().map(|s| check::queue_limits(&s));
        if before != after {
            out.push(format!(
                "a refused reload changed the queues: before {before:?}, after {after:?}"
            ));
        }
        out
    }

    /// Registers again, then re-reports apps, nodes with their allocations and
    /// pending asks; `asks_first` re-reports asks before the allocations.
    fn reregister(&mut self, asks_first: bool) -> Vec<String> {
        let mut out = Vec::new();
        // First what the old core answered to confirmations sent this step
        // (a replacement's real allocation): the RM re-reports it.
        self.sched.settle();
        let mut intents = std::mem::take(&mut self.intents);
        let (mut new, mut failed) = (Vec::new(), Vec::new());
        self.absorb(self.step_no, &mut intents, &mut out, &mut new, &mut failed);
        self.intents = intents;
        if let Err(e) = self.register() {
            out.push(format!("re-registration failed: {e}"));
            return out;
        }
        self.counts.reregistrations += 1;
        let apps: Vec<(String, String)> = self
            .model
            .apps
            .iter()
            .map(|(id, a)| (id.clone(), a.queue.clone()))
            .collect();
        for (id, queue) in &apps {
            self.model.app_states.insert(id.clone(), "New".to_string());
            self.intents.readded.insert(id.clone());
            if let Some(g) = self.model.gangs.get(id)
                && !configs::fits_queue_max(&self.config, queue, g.placeholder_ask)
            {
                self.intents.refused_gangs.insert(id.clone());
            }
        }
        self.apps(si::ApplicationRequest {
            new: apps
                .iter()
                .map(|(id, queue)| Self::gang_app(id, queue, self.model.gangs.get(id)))
                .collect(),
            ..Default::default()
        });
        // The new core knows no release in flight: what the RM held is re-reported
        // as running, and replacements in flight are lost with the old core.
        self.model.releasing.clear();
        self.model.replacing.clear();
        self.model.awaiting_real.clear();
        self.confirm_queue.clear();
        // Asks still wanting allocations go out with maxAllocations counting
        // the live ones, before or after the nodes carrying those allocations.
        let old_asks = std::mem::take(&mut self.model.asks);
        let mut resend = Vec::new();
        for ((app, key), a) in old_asks {
            if a.pending == 0 {
                continue;
            }
            let live = self
                .model
                .allocs
                .values()
                .filter(|x| x.app == app && x.key == key)
                .count() as u32;
            resend.push((app, key, a.size, (a.pending + live) as i32));
        }
        let asks: Vec<si::AllocationAsk> = resend
            .iter()
            .map(|(app, key, size, max)| self.ask_meta(app, key, *size, *max))
            .collect();
        if asks_first {
            for (app, key, size, max) in &resend {
                self.intents
                    .ask_undo
                    .push(((app.clone(), key.clone()), None));
                self.model.send_ask(app, key, *size, *max);
            }
            self.send_asks(asks.clone());
        }
        let mut infos = Vec::new();
        for (id, n) in self.model.nodes.clone() {
            let existing: Vec<si::Allocation> = self
                .model
                .allocs
                .iter()
                .filter(|(_, a)| a.node == id)
                .map(|(aid, a)| si::Allocation {
                    priority: self.alloc_priority.get(aid).copied().unwrap_or(0),
                    placeholder: self
                        .model
                        .ask_meta
                        .get(&(a.app.clone(), a.key.clone()))
                        .is_some_and(|m| m.placeholder),
                    task_group_name: self
                        .model
                        .ask_meta
                        .get(&(a.app.clone(), a.key.clone()))
                        .map(|m| m.group.clone())
                        .unwrap_or_default(),
                    allocation_key: a.key.clone(),
                    resource_per_alloc: resource(&[("memory", a.size.0), ("vcore", a.size.1)]),
                    node_id: id.clone(),
                    application_id: a.app.clone(),
                    partition_name: PARTITION.to_string(),
                    allocation_id: aid.clone(),
                    ..Default::default()
                })
                .collect();
            for e in &existing {
                let alloc = self.model.allocs[&e.allocation_id].clone();
                self.model.recovered(&alloc);
                self.intents
                    .recovered
                    .insert((alloc.app.clone(), alloc.key.clone()));
                self.counts.recovered += 1;
            }
            let action = if n.schedulable {
                ActionFromRm::Create
            } else {
                ActionFromRm::CreateDrain
            };
            self.intents
                .nodes
                .push((id.clone(), NodeIntent::Create(n.clone())));
            infos.push(si::NodeInfo {
                node_id: id,
                action: action as i32,
                schedulable_resource: resource(&[
                    ("memory", n.capacity.0),
                    ("vcore", n.capacity.1),
                ]),
                occupied_resource: resource(&[("memory", n.occupied)]),
                existing_allocations: existing,
                ..Default::default()
            });
        }
        self.nodes(infos);
        if !asks_first && !asks.is_empty() {
            for (app, key, size, max) in &resend {
                let id = (app.clone(), key.clone());
                self.intents
                    .ask_undo
                    .push((id.clone(), self.model.asks.get(&id).cloned()));
                self.model.send_ask(app, key, *size, *max);
            }
            self.send_asks(asks);
        }
        out
    }

    /// Applies what the core sent to the model; the RM confirms some
    /// core-initiated releases at once, in rounds, which the core answers (a
    /// replacement's real allocation, a preemptor placed).
    fn absorb(
        &mut self,
        step: usize,
        intents: &mut Intents,
        out: &mut Vec<String>,
        new: &mut Vec<(String, String)>,
        failed: &mut Vec<String>,
    ) {
        for _round in 0..32 {
            let mut started = Vec::new();
            for item in self.callback.take() {
                if self.trace {
                    eprintln!("  [{step}] <- {item:?}");
                }
                match item {
                    Inbound::Node(r) => self.on_nodes(r, intents),
                    Inbound::Application(r) => {
                        failed.extend(
                            r.updated
                                .iter()
                                .filter(|u| u.state == "Failed")
                                .map(|u| u.application_id.clone()),
                        );
                        out.extend(self.on_apps(r, intents))
                    }
                    Inbound::Allocation(r) => {
                        out.extend(self.on_allocations(r, intents, new, &mut started))
                    }
                    Inbound::AskTimedOut(app, key) => self.model.release_ask(&app, &key),
                }
            }
            if started.is_empty() {
                break;
            }
            out.extend(self.check_preemptions(&started));
            let mut now = Vec::new();
            for id in started {
                match confirm_delay(self.seed, &id) {
                    Some(0) => now.push(id),
                    Some(n) => self.confirm_queue.push((step + n, id)),
                    None => {}
                }
            }
            if now.is_empty() {
                break;
            }
            self.confirm(&now);
            self.sched.settle();
        }
    }

    /// Settles, applies the callbacks to the model and checks everything.
    fn finish_step(&mut self, step: usize) -> Vec<String> {
        self.sched.settle();
        self.counts.steps += 1;
        self.counts.callback_faults = self.callback.faults();
        let mut out = Vec::new();
        let mut new = Vec::new();
        let mut intents = std::mem::take(&mut self.intents);
        let mut failed = Vec::new();
        self.absorb(step, &mut intents, &mut out, &mut new, &mut failed);
        if let Some(key) = intents.ask_rejection {
            out.push(format!("bad ask {key} was not rejected"));
        }
        let Some(snap) = self.snapshot() else {
            out.push("partition default is missing".to_string());
            return out;
        };
        for app in failed {
            // A failed (hard gang) application keeps nothing, placeholders included.
            let left: Vec<_> = self
                .model
                .allocs
                .values()
                .filter(|a| a.app == app)
                .collect();
            let core = snap
                .allocations
                .iter()
                .filter(|a| a.application_id == app)
                .count();
            if !left.is_empty() || core > 0 {
                out.push(format!(
                    "application {app} Failed with allocations left: RM {left:?}, core {core}"
                ));
            }
        }
        if self.trace {
            for a in &snap.applications {
                let asks: Vec<_> = a
                    .pending_asks
                    .iter()
                    .map(|k| (&k.allocation_key, k.pending_allocations))
                    .collect();
                eprintln!(
                    "  = {} {} {:?} pending {asks:?}",
                    a.id, a.state, a.allocated
                );
            }
        }
        out.extend(self.model.compare(&snap));
        out.extend(check::invariants(&snap, step));
        out.extend(check::limits(&snap, &new));
        out.extend(check::liveness_except(
            &snap,
            self.predicates,
            &self.gang_waiting(),
        ));
        out
    }

    /// Real asks that wait for a placeholder of their task group to replace
    /// (one is pending or allocated, or a replacement is in flight): the
    /// core does not schedule them normally, so liveness does not judge them.
    fn gang_waiting(&self) -> BTreeSet<(String, String)> {
        let m = &self.model;
        let mut out = BTreeSet::new();
        for (id, meta) in &m.ask_meta {
            if meta.placeholder || meta.group.is_empty() || !m.asks.contains_key(id) {
                continue;
            }
            let placeholders = m.asks.iter().any(|(pid, a)| {
                pid.0 == id.0
                    && (a.pending > 0 || a.live > 0)
                    && m.ask_meta
                        .get(pid)
                        .is_some_and(|p| p.placeholder && p.group == meta.group)
            });
            let in_flight =
                m.replacing.values().any(|r| r == id) || m.awaiting_real.contains_key(id);
            if placeholders || in_flight {
                out.insert(id.clone());
            }
        }
        out
    }

    /// Preemption laws for victims just released, against the ask the core
    /// named in each release: of another application, and of at least the
    /// victim's priority (as the RM last sent both).
    fn check_preemptions(&self, started: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for id in started {
            if self.model.releasing.get(id) != Some(&PREEMPTED) {
                continue;
            }
            let (Some(v), Some((app, key))) =
                (self.model.allocs.get(id), self.preempted_for.get(id))
            else {
                continue;
            };
            if *app == v.app {
                out.push(format!(
                    "allocation {id} of {app} preempted for ask {key} of its own application"
                ));
            }
            let vp = self.alloc_priority.get(id).copied().unwrap_or(0);
            let meta = self.model.ask_meta.get(&(app.clone(), key.clone()));
            match meta {
                Some(m) if vp > m.priority => out.push(format!(
                    "allocation {id} of {} (priority {vp}) preempted for ask {key} of {app} with lower priority {}",
                    v.app, m.priority
                )),
                Some(_) => {}
                None => out.push(format!(
                    "allocation {id} preempted for ask {key} of {app}, which the RM never sent"
                )),
            }
        }
        out
    }

    fn on_nodes(&mut self, r: si::NodeResponse, intents: &mut Intents) {
        let mut take = |id: &str| {
            let i = intents.nodes.iter().position(|(n, _)| n == id)?;
            Some(intents.nodes.remove(i).1)
        };
        for a in r.accepted {
            match take(&a.node_id) {
                Some(NodeIntent::Create(n)) => {
                    self.model.nodes.insert(a.node_id, n);
                }
                Some(NodeIntent::Update(cap, occ)) => {
                    if let Some(n) = self.model.nodes.get_mut(&a.node_id) {
                        n.capacity = cap;
                        n.occupied = occ;
                    }
                }
                Some(NodeIntent::Schedulable(s)) => {
                    if let Some(n) = self.model.nodes.get_mut(&a.node_id) {
                        n.schedulable = s;
                    }
                }
                Some(NodeIntent::Remove) => {
                    self.model.nodes.remove(&a.node_id);
                }
                None => {}
            }
        }
        for rej in r.rejected {
            take(&rej.node_id);
            self.counts.rejections += 1;
        }
    }

    fn on_apps(&mut self, r: si::ApplicationResponse, intents: &mut Intents) -> Vec<String> {
        let mut out = Vec::new();
        for a in r.accepted {
            if intents.refused_gangs.contains(&a.application_id) {
                out.push(format!(
                    "gang application {} accepted with placeholders above a queue max",
                    a.application_id
                ));
            }
            if let Some(queue) = intents.apps.remove(&a.application_id) {
                self.model
                    .apps
                    .insert(a.application_id, super::model::AppModel { queue });
            }
        }
        for rej in r.rejected {
            self.counts.rejections += 1;
            let new = intents.apps.remove(&rej.application_id).is_some();
            let id = &rej.application_id;
            if intents.refused_gangs.contains(id) {
                // Placeholders above a queue max (a reload may have lowered
                // it since the app was accepted): the RM drops the app.
                self.model.apps.remove(id);
                self.model.gone.insert(id.clone());
                self.model.asks.retain(|(a, _), _| a != id);
                self.model.allocs.retain(|_, a| a.app != *id);
                self.model.awaiting_real.retain(|(a, _), _| a != id);
                self.model.replacing.retain(|_, (a, _)| a != id);
            } else if new && self.model.gangs.contains_key(id) {
                out.push(format!("gang application {id} refused: {}", rej.reason));
            } else if intents.readded.contains(&rej.application_id) {
                out.push(format!(
                    "application {} refused when re-reported: {}",
                    rej.application_id, rej.reason
                ));
                self.model.apps.remove(&rej.application_id);
            }
        }
        for u in r.updated {
            if let Err(e) = self.model.app_state(&u.application_id, &u.state) {
                out.push(e);
            }
        }
        out
    }

    fn on_allocations(
        &mut self,
        r: si::AllocationResponse,
        intents: &mut Intents,
        new: &mut Vec<(String, String)>,
        started: &mut Vec<String>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        // One response carries everything since the last one: an allocation the
        // RM already held was released before any new one in it was made (a
        // new one may use what it freed), a new one released in the same
        // response after it was made.
        let (before, after): (Vec<_>, Vec<_>) = r
            .released
            .into_iter()
            .partition(|rel| self.model.allocs.contains_key(&rel.allocation_id));
        self.on_released(before, started, &mut out);
        for a in r.new {
            self.counts.allocations += 1;
            self.alloc_priority
                .insert(a.allocation_id.clone(), a.priority);
            let alloc = AllocModel {
                key: a.allocation_key,
                app: a.application_id,
                node: a.node_id,
                size: size_of(a.resource_per_alloc.as_ref()),
            };
            let (node, app) = (alloc.node.clone(), alloc.app.clone());
            match self.model.allocated(&a.allocation_id, alloc) {
                Ok(false) => new.push((node, app)),
                Ok(true) => {}
                Err(e) => out.push(e),
            }
        }
        self.on_released(after, started, &mut out);
        for rej in r.rejected {
            self.counts.rejections += 1;
            let id = (rej.application_id.clone(), rej.allocation_key.clone());
            if intents.ask_rejection.as_deref() == Some(rej.allocation_key.as_str()) {
                intents.ask_rejection = None;
            } else if let Some(i) = intents.ask_undo.iter().position(|(k, _)| *k == id) {
                let (_, old) = intents.ask_undo.remove(i);
                match old {
                    // A refused gang app's asks go with it.
                    Some(old) if !intents.refused_gangs.contains(&id.0) => {
                        self.model.asks.insert(id, old);
                    }
                    _ => {
                        self.model.asks.remove(&id);
                    }
                }
            } else {
                out.push(format!(
                    "ask {} of {} rejected unexpectedly: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
            }
        }
        for rej in r.rejected_allocations {
            self.counts.rejections += 1;
            let id = (rej.application_id.clone(), rej.allocation_key.clone());
            if intents.unknown_release.as_deref() == Some(rej.allocation_key.as_str()) {
                out.push(format!(
                    "release of unknown allocation {} was rejected, not ignored: {}",
                    rej.allocation_key, rej.reason
                ));
            } else if intents.refused_gangs.contains(&id.0) {
                // The allocations of a refused gang application go with it.
                self.model
                    .allocs
                    .retain(|_, a| !(a.app == id.0 && a.key == id.1));
            } else if intents.recovered.contains(&id) {
                out.push(format!(
                    "recovered allocation {} of {} refused: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
                self.model
                    .allocs
                    .retain(|_, a| !(a.app == id.0 && a.key == id.1));
            } else {
                out.push(format!(
                    "allocation release {} of {} rejected unexpectedly: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
            }
        }
        out
    }

    /// Releases the core reported: core-initiated ones start waiting for the
    /// RM's confirmation, the others leave the model.
    fn on_released(
        &mut self,
        released: Vec<si::AllocationRelease>,
        started: &mut Vec<String>,
        out: &mut Vec<String>,
    ) {
        for rel in released {
            let t = rel.termination_type;
            let first = !self.model.releasing.contains_key(&rel.allocation_id);
            if (t == REPLACED || t == PREEMPTED || t == TIMEOUT) && first {
                if t == PREEMPTED {
                    match preemptor(&rel.message) {
                        Some(who) => {
                            self.preempted_for.insert(rel.allocation_id.clone(), who);
                        }
                        None => out.push(format!(
                            "preemption of {} names no ask it makes room for: {:?}",
                            rel.allocation_id, rel.message
                        )),
                    }
                }
                // Core-initiated: the allocation stays until the RM confirms.
                match self.model.release_started(&rel.allocation_id, t) {
                    Ok(()) => started.push(rel.allocation_id),
                    Err(e) => out.push(e),
                }
                continue;
            }
            self.counts.releases += 1;
            self.alloc_priority.remove(&rel.allocation_id);
            self.preempted_for.remove(&rel.allocation_id);
            if let Err(e) = self.model.released(&rel.allocation_id) {
                out.push(e);
            }
        }
    }
}

/// The (application, ask) a preemption release names as the ask it makes
/// room for: `<PREEMPTED_FOR> <key> of application <app>`.
fn preemptor(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix(unisched_core::scheduler::PREEMPTED_FOR)?;
    let (key, app) = rest.trim_start().rsplit_once(" of application ")?;
    Some((app.to_string(), key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::preemptor;
    use unisched_core::scheduler::PREEMPTED_FOR;

    #[test]
    fn preemption_releases_name_the_ask_they_make_room_for() {
        let message = format!("{PREEMPTED_FOR} ask-7 of application app-3");
        assert_eq!(
            preemptor(&message),
            Some(("app-3".to_string(), "ask-7".to_string()))
        );
        assert_eq!(preemptor("preempted by the scheduler"), None);
        assert_eq!(preemptor(&format!("{PREEMPTED_FOR} ask-7")), None);
    }
}
