//! The simulation's frameworks: what each was told (offers, task updates)
//! and what it did (declines and their filters, suppressed roles, launches,
//! acknowledgements), and the checks made on every event it receives.
//!
//! A framework here is the protocol's client, not a driver: the simulation
//! holds its event channel ([`MasterHandle::subscribe`]) and makes its calls
//! itself, so every event is seen in the order the master sent it.
//!
//! Checks on arrival (invariants M3 and M4 of `RELIABILITY.md`):
//! - an offer names the framework, one of its roles, a role it has not
//!   suppressed, a live agent, and nothing an active decline filter refused;
//! - a task's updates with a uuid arrive in the order its agent sent them,
//!   at least once, one at a time (a new one only after the one before was
//!   acknowledged), a retry with the same uuid and state, nothing after a
//!   terminal state, no acknowledged update again; updates the master makes
//!   itself (LOST or GONE when an agent goes, FAILED when resources cannot
//!   be published) are of those states;
//! - updates without a uuid (reconciliation, invalid offers, TASK_ERROR)
//!   are exactly the ones the framework's calls of the step called for.

use std::collections::{BTreeMap, BTreeSet};

use unisched_mesos::master::EventReceiver;
use unisched_mesos::master::units::to_core;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Event, event};
use unisched_mesos::v1::task_status::Reason;
use unisched_mesos::v1::{OperationState, TaskState};

use super::ops::Refuse;

/// How a framework acknowledges status updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    /// At once.
    Immediate,
    /// This many steps later.
    Late(u32),
    /// Some acknowledgements are lost, some late, the rest at once.
    Lossy,
    /// Never (until the end of the run).
    Deaf,
}

/// What a framework is, fixed for one incarnation of a slot.
#[derive(Debug, Clone)]
pub struct FwSpec {
    /// Its name.
    pub name: String,
    /// Its roles.
    pub roles: Vec<String>,
    /// MULTI_ROLE (`roles`), else the legacy `role`.
    pub multi_role: bool,
    /// `failover_timeout`, in seconds.
    pub failover_secs: u64,
    /// PARTITION_AWARE.
    pub partition_aware: bool,
    /// TASK_KILLING_STATE.
    pub killing_state: bool,
    /// How it acknowledges.
    pub ack: AckPolicy,
}

/// A hash of the run's seed and some words: fixes per-run choices.
pub fn mix(seed: u64, words: &[u64]) -> u64 {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for w in words {
        h = (h ^ w).wrapping_mul(0x0100_0000_01b3);
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    h ^ (h >> 31)
}

/// A hash of bytes.
pub fn hash_bytes(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl FwSpec {
    /// The framework of `slot`'s `incarnation`-th life in run `seed`.
    pub fn for_slot(seed: u64, slot: u8, incarnation: u32) -> FwSpec {
        let h = mix(seed, &[u64::from(slot), u64::from(incarnation)]);
        let (roles, multi_role): (&[&str], bool) = match slot % 4 {
            0 => (&["web"], false),
            1 => (&["batch", "capped"], true),
            2 => (&["*"], false),
            _ => (&["eng/build", "web"], true),
        };
        FwSpec {
            name: format!("fw{slot}.{incarnation}"),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            multi_role,
            failover_secs: [0, 3, 10, 30][(h % 4) as usize],
            partition_aware: (h >> 8).is_multiple_of(2),
            killing_state: (h >> 9).is_multiple_of(2),
            ack: match (h >> 12) % 10 {
                0..=4 => AckPolicy::Immediate,
                5 | 6 => AckPolicy::Late(1 + ((h >> 20) % 4) as u32),
                7 | 8 => AckPolicy::Lossy,
                _ => AckPolicy::Deaf,
            },
        }
    }

    /// Its FrameworkInfo (with `id` once it has one).
    #[allow(deprecated)] // A single-role framework names its role in `role`.
    pub fn info(&self, id: Option<&str>) -> v1::FrameworkInfo {
        use v1::framework_info::capability::Type as Cap;
        let mut caps = Vec::new();
        if self.multi_role {
            caps.push(Cap::MultiRole);
        }
        if self.partition_aware {
            caps.push(Cap::PartitionAware);
        }
        if self.killing_state {
            caps.push(Cap::TaskKillingState);
        }
        v1::FrameworkInfo {
            user: "soak".to_string(),
            name: self.name.clone(),
            id: id.map(|v| v1::FrameworkId {
                value: v.to_string(),
            }),
            failover_timeout: Some(self.failover_secs as f64),
            role: (!self.multi_role && self.roles[0] != "*").then(|| self.roles[0].clone()),
            roles: if self.multi_role {
                self.roles.clone()
            } else {
                Vec::new()
            },
            capabilities: caps
                .into_iter()
                .map(|c| v1::framework_info::Capability {
                    r#type: Some(c as i32),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The roles a bit mask names (0: none).
    pub fn roles_of(&self, mask: u8) -> Vec<String> {
        self.roles
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// Where a framework's connection is, as it knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// Not subscribed yet (a fresh slot).
    New,
    /// SUBSCRIBE sent, SUBSCRIBED not seen yet.
    Subscribing,
    /// Its stream is open since this clock time.
    Connected {
        /// Clock ns.
        since: u64,
    },
    /// Its stream closed at `since`; the master removes it at `deadline`.
    Disconnected {
        /// Clock ns.
        since: u64,
        /// Clock ns.
        deadline: u64,
    },
    /// Torn down, refused or past its failover timeout.
    Removed,
}

/// An outstanding offer, as the framework holds it.
#[derive(Debug, Clone)]
pub struct HeldOffer {
    /// Agent id.
    pub agent: String,
    /// The role it is allocated to.
    pub role: String,
    /// Its resources (allocated form).
    pub resources: Resources,
}

/// A decline filter as the framework set it.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Refused scalars, in the core's units.
    pub refused: BTreeMap<String, i64>,
    /// Clock ns it ends at.
    pub until: u64,
}

/// A task of the framework.
#[derive(Debug, Clone)]
pub struct FwTask {
    /// Its agent.
    pub agent: String,
    /// The role its resources came from.
    pub role: String,
    /// What it holds (unallocated form; a new executor's resources are the
    /// executor's own hold, `Fw::executors`).
    pub resources: Resources,
    /// Its agent's updates, in the order sent: (state, uuid).
    pub emitted: Vec<(TaskState, Vec<u8>)>,
    /// Updates with a uuid received, each once, in order of first arrival.
    pub received: Vec<(TaskState, Vec<u8>)>,
    /// How many of `received` were acknowledged (always the oldest).
    pub acked: usize,
    /// Clock ns of the last arrival of an update with a uuid (or of the
    /// connection, when later).
    pub last_sent: u64,
    /// The state the master is to report when it ends the task itself.
    pub master_terminal: Option<TaskState>,
    /// Waits for a resource provider to publish its resources.
    pub publishing: bool,
}

impl FwTask {
    /// The first terminal state received.
    pub fn terminal(&self) -> Option<TaskState> {
        self.received
            .iter()
            .map(|(s, _)| *s)
            .find(|s| s.is_terminal())
    }

    /// Its terminal update was acknowledged: the master forgot it.
    pub fn done(&self) -> bool {
        self.terminal().is_some() && self.acked == self.received.len()
    }

    /// The state reconciliation reports: the update in flight, else the last.
    pub fn reported(&self) -> TaskState {
        match self.received.get(self.acked) {
            Some((s, _)) => *s,
            None => self
                .received
                .last()
                .map_or(TaskState::TaskStaging, |(s, _)| *s),
        }
    }
}

/// An acknowledgement to send.
#[derive(Debug, Clone)]
pub struct PendingAck {
    /// Step it is due at.
    pub due: usize,
    /// Task id.
    pub task: String,
    /// The update's uuid.
    pub uuid: Vec<u8>,
}

/// An operation on a resource provider's disk the framework asked for
/// with an operation id (operation feedback).
#[derive(Debug, Clone)]
pub struct FwOperation {
    /// Its agent.
    pub agent: String,
    /// The provider applying it.
    pub provider: String,
    /// The provider's statuses of it, in the order sent: (state, uuid).
    pub emitted: Vec<(OperationState, Vec<u8>)>,
    /// States the master may report with a uuid of its own (the provider's
    /// answer to a reconciliation carries none).
    pub unstamped: Vec<OperationState>,
    /// Statuses with a uuid received, each once, in order of first arrival.
    pub received: Vec<(OperationState, Vec<u8>)>,
    /// How many of `received` were acknowledged (always the oldest).
    pub acked: usize,
    /// Clock ns of the last arrival (or of the connection, when later).
    pub last_sent: u64,
}

impl FwOperation {
    /// The first terminal state received.
    pub fn terminal(&self) -> Option<OperationState> {
        self.received
            .iter()
            .map(|(s, _)| *s)
            .find(|s| s.is_terminal())
    }

    /// Its terminal status was acknowledged: the master forgot it.
    pub fn done(&self) -> bool {
        self.terminal().is_some() && self.acked == self.received.len()
    }
}

/// A uuid-less update (task, state, reason).
pub type Plain = (String, TaskState, Option<Reason>);

/// One framework slot.
#[derive(Debug)]
pub struct Fw {
    /// Slot number.
    pub slot: u8,
    /// How many frameworks this slot had before this one.
    pub incarnation: u32,
    /// What it is.
    pub spec: FwSpec,
    /// Its id, once subscribed.
    pub id: Option<String>,
    /// Its connection.
    pub conn: Conn,
    /// The stream id of its current (or last) subscription.
    pub stream: Option<String>,
    /// Its event channel while subscribed.
    pub rx: Option<EventReceiver>,
    /// A stream it replaced by failing over, still to read: ERROR, then closed.
    pub old_rx: Option<EventReceiver>,
    /// Outstanding offers by id.
    pub offers: BTreeMap<String, HeldOffer>,
    /// Offers it accepted or declined (ids), to use again on purpose.
    pub used_offers: Vec<String>,
    /// Tasks by id (kept after they end, for the checks).
    pub tasks: BTreeMap<String, FwTask>,
    /// Decline filters by (role, agent, pool).
    pub filters: BTreeMap<(String, String, Option<String>), Filter>,
    /// Suppressed roles.
    pub suppressed: BTreeSet<String>,
    /// Acknowledgements still to send.
    pub acks: Vec<PendingAck>,
    /// Uuid-less updates its calls of this step call for.
    pub plain_expected: Vec<Plain>,
    /// Uuid-less updates received this step.
    pub plain_got: Vec<Plain>,
    /// Clock ns of the last HEARTBEAT (or SUBSCRIBED).
    pub last_heartbeat: u64,
    /// Agents it heard FAILURE of this step.
    pub failures: BTreeSet<String>,
    /// The ERROR it is to get on its (new) stream.
    pub expect_error: Option<&'static str>,
    /// Executors it started, by (agent, executor id).
    pub executors: BTreeSet<(String, String)>,
    /// Next task number.
    pub next_task: u64,
    /// Updates received with a uuid (retries included).
    pub updates_seen: u64,
    /// Acknowledgements it decided not to send.
    pub acks_lost: u64,
    /// Provider operations it asked for with an id, by id.
    pub operations: BTreeMap<String, FwOperation>,
    /// Next operation number.
    pub next_operation: u64,
    /// Operation status acknowledgements still to send (`task`: operation id).
    pub op_acks: Vec<PendingAck>,
    /// Operation statuses received with a uuid (retries included).
    pub op_statuses_seen: u64,
}

/// The pool of a resource (its provider and reservation role), as the
/// master splits an agent into nodes (`master::pools::PoolKey`).
pub fn pool_of(r: &v1::Resource) -> Option<String> {
    let provider = r.provider_id.as_ref().map(|p| p.value.as_str());
    let role = unisched_mesos::resources::reservation_role(r);
    match (provider, role) {
        (None, None) => None,
        (provider, role) => Some(format!(
            "@{}#{}",
            provider.unwrap_or_default(),
            role.unwrap_or_default()
        )),
    }
}

/// Resources split by pool.
pub fn by_pool(resources: &Resources) -> BTreeMap<Option<String>, Resources> {
    let mut out: BTreeMap<Option<String>, Resources> = BTreeMap::new();
    for r in resources.iter() {
        out.entry(pool_of(r)).or_default().add_resource(r.clone());
    }
    out
}

/// The scalars of resources in the core's units.
pub fn core_scalars(resources: &Resources) -> BTreeMap<String, i64> {
    to_core(resources.iter())
        .resources
        .into_iter()
        .map(|(k, q)| (k, q.value))
        .collect()
}

/// `part` fits in `whole` (scalars in core units; a missing name is 0).
pub fn fits(part: &BTreeMap<String, i64>, whole: &BTreeMap<String, i64>) -> bool {
    part.iter()
        .all(|(k, v)| *v <= whole.get(k).copied().unwrap_or(0))
}

/// How long a decline filter lasts, by Mesos' rules (`None`: no filter).
pub fn refuse_secs(refuse: Refuse) -> Option<u64> {
    match refuse {
        Refuse::Omitted | Refuse::Negative => Some(5),
        Refuse::Zero => None,
        Refuse::Secs(s) => Some(u64::from(s)),
    }
}

/// The `filters` a refusal is sent as.
pub fn filters_of(refuse: Refuse) -> Option<v1::Filters> {
    match refuse {
        Refuse::Omitted => None,
        Refuse::Zero => Some(v1::Filters {
            refuse_seconds: Some(0.0),
        }),
        Refuse::Negative => Some(v1::Filters {
            refuse_seconds: Some(-3.0),
        }),
        Refuse::Secs(s) => Some(v1::Filters {
            refuse_seconds: Some(f64::from(s)),
        }),
    }
}

/// What a framework's event handling needs to know of the rest of the run.
pub struct Context<'a> {
    /// The run's seed.
    pub seed: u64,
    /// The step number.
    pub step: usize,
    /// Clock ns.
    pub now: u64,
    /// Live agent ids.
    pub agents: &'a BTreeSet<String>,
}

impl Fw {
    /// A fresh slot.
    pub fn new(seed: u64, slot: u8, incarnation: u32) -> Fw {
        Fw {
            slot,
            incarnation,
            spec: FwSpec::for_slot(seed, slot, incarnation),
            id: None,
            conn: Conn::New,
            stream: None,
            rx: None,
            old_rx: None,
            offers: BTreeMap::new(),
            used_offers: Vec::new(),
            tasks: BTreeMap::new(),
            filters: BTreeMap::new(),
            suppressed: BTreeSet::new(),
            acks: Vec::new(),
            plain_expected: Vec::new(),
            plain_got: Vec::new(),
            last_heartbeat: 0,
            failures: BTreeSet::new(),
            expect_error: None,
            executors: BTreeSet::new(),
            next_task: 0,
            updates_seen: 0,
            acks_lost: 0,
            operations: BTreeMap::new(),
            next_operation: 0,
            op_acks: Vec::new(),
            op_statuses_seen: 0,
        }
    }

    /// Whether its stream is open.
    pub fn connected(&self) -> bool {
        matches!(self.conn, Conn::Connected { .. })
    }

    /// A label for messages.
    pub fn who(&self) -> String {
        format!(
            "framework {} ({})",
            self.spec.name,
            self.id.as_deref().unwrap_or("no id")
        )
    }

    /// Tasks the master still has: launched and not acknowledged as ended.
    pub fn live_tasks(&self) -> impl Iterator<Item = (&String, &FwTask)> {
        self.tasks.iter().filter(|(_, t)| !t.done())
    }

    /// It lost its stream (closed by itself or by the master): offers are
    /// gone, filters cleared, acknowledgements not sent are lost.
    pub fn lose_stream(&mut self, now: u64) {
        self.rx = None;
        self.offers.clear();
        self.filters.clear();
        self.acks.clear();
        self.op_acks.clear();
        let deadline = now + self.spec.failover_secs * 1_000_000_000;
        self.conn = if self.spec.failover_secs == 0 {
            Conn::Removed
        } else {
            Conn::Disconnected {
                since: now,
                deadline,
            }
        };
    }

    /// Handles one event; returns what did not hold.
    pub fn on_event(&mut self, e: Event, cx: &Context<'_>) -> Vec<String> {
        let mut v = Vec::new();
        let who = self.who();
        match e.r#type() {
            event::Type::Subscribed => {
                let s = e.subscribed.unwrap_or_default();
                if self.conn != Conn::Subscribing {
                    v.push(format!("{who}: SUBSCRIBED while {:?}", self.conn));
                }
                if let Some(id) = &self.id
                    && *id != s.framework_id.value
                {
                    v.push(format!(
                        "{who}: resubscribed as {} instead of its id",
                        s.framework_id.value
                    ));
                }
                self.id = Some(s.framework_id.value);
                self.conn = Conn::Connected { since: cx.now };
                self.last_heartbeat = cx.now;
                for t in self.tasks.values_mut() {
                    t.last_sent = t.last_sent.max(cx.now);
                }
                for o in self.operations.values_mut() {
                    o.last_sent = o.last_sent.max(cx.now);
                }
            }
            event::Type::Error => {
                let message = e.error.map(|x| x.message).unwrap_or_default();
                match self.expect_error.take() {
                    Some(want) if message.contains(want) => {}
                    _ => v.push(format!("{who}: unexpected ERROR: {message}")),
                }
            }
            event::Type::Heartbeat => self.last_heartbeat = cx.now,
            event::Type::Offers => {
                for offer in e.offers.map(|o| o.offers).unwrap_or_default() {
                    self.on_offer(offer, cx, &mut v);
                }
            }
            event::Type::Rescind => {
                let id = e.rescind.map(|r| r.offer_id.value).unwrap_or_default();
                if self.offers.remove(&id).is_none() {
                    v.push(format!("{who}: RESCIND of offer {id} it does not hold"));
                }
            }
            event::Type::Update => {
                let status = e.update.map(|u| u.status).unwrap_or_default();
                self.on_update(status, cx, &mut v);
            }
            event::Type::Failure => {
                if let Some(f) = e.failure {
                    if f.executor_id.is_some() {
                        v.push(format!("{who}: FAILURE of an executor: {f:?}"));
                    } else if let Some(a) = f.agent_id {
                        self.failures.insert(a.value);
                    }
                }
            }
            event::Type::UpdateOperationStatus => {
                let status = e
                    .update_operation_status
                    .map(|u| u.status)
                    .unwrap_or_default();
                self.on_operation_status(status, cx, &mut v);
            }
            other => v.push(format!("{who}: unexpected {} event", other.as_str_name())),
        }
        v
    }

    fn on_offer(&mut self, offer: v1::Offer, cx: &Context<'_>, v: &mut Vec<String>) {
        let who = self.who();
        let id = offer.id.value.clone();
        let role = offer
            .allocation_info
            .as_ref()
            .and_then(|a| a.role.clone())
            .unwrap_or_default();
        if Some(&offer.framework_id.value) != self.id.as_ref() {
            v.push(format!(
                "{who}: offer {id} names framework {}",
                offer.framework_id.value
            ));
        }
        if !self.spec.roles.contains(&role) {
            v.push(format!(
                "{who}: offer {id} for role '{role}' it does not have"
            ));
        }
        if self.suppressed.contains(&role) {
            v.push(format!(
                "{who}: offer {id} for its suppressed role '{role}'"
            ));
        }
        if !cx.agents.contains(&offer.agent_id.value) {
            v.push(format!(
                "{who}: offer {id} on agent {} that is not live",
                offer.agent_id.value
            ));
        }
        let resources = Resources::from_vec(offer.resources.clone());
        for (pool, part) in by_pool(&resources.unallocated()) {
            let key = (role.clone(), offer.agent_id.value.clone(), pool.clone());
            if let Some(f) = self.filters.get(&key)
                && cx.now < f.until
                && fits(&core_scalars(&part), &f.refused)
            {
                v.push(format!(
                    "{who}: offer {id} on agent {} for '{role}' ({part}) through a filter refusing {:?} for {} s more",
                    offer.agent_id.value,
                    f.refused,
                    (f.until - cx.now) / 1_000_000_000
                ));
            }
        }
        if self.offers.contains_key(&id) || self.used_offers.contains(&id) {
            v.push(format!("{who}: offer id {id} made twice"));
        }
        self.offers.insert(
            id,
            HeldOffer {
                agent: offer.agent_id.value,
                role,
                resources,
            },
        );
    }

    fn on_update(&mut self, status: v1::TaskStatus, cx: &Context<'_>, v: &mut Vec<String>) {
        let who = self.who();
        let task_id = status.task_id.value.clone();
        let state = status.state();
        let Some(uuid) = status.uuid.clone() else {
            self.plain_got
                .push((task_id, state, status.reason.map(|_| status.reason())));
            return;
        };
        self.updates_seen += 1;
        let aware = self.spec.partition_aware;
        let Some(t) = self.tasks.get_mut(&task_id) else {
            v.push(format!(
                "{who}: update {} for task {task_id} it never launched",
                state.as_str_name()
            ));
            return;
        };
        if let Some(i) = t.received.iter().position(|(_, u)| *u == uuid) {
            if i < t.acked {
                v.push(format!(
                    "{who}: task {task_id}: acknowledged update {} ({}) sent again",
                    state.as_str_name(),
                    hex(&uuid)
                ));
            } else if i + 1 != t.received.len() {
                v.push(format!(
                    "{who}: task {task_id}: an older update retried after a newer one"
                ));
            }
            if t.received[i].0 != state {
                v.push(format!(
                    "{who}: task {task_id}: retry of {} carries {} instead of {}",
                    hex(&uuid),
                    state.as_str_name(),
                    t.received[i].0.as_str_name()
                ));
            }
        } else {
            if t.acked < t.received.len() {
                v.push(format!(
                    "{who}: task {task_id}: update {} sent while {} is not acknowledged",
                    state.as_str_name(),
                    t.received[t.acked].0.as_str_name()
                ));
            }
            if let Some(end) = t.terminal() {
                v.push(format!(
                    "{who}: task {task_id}: update {} after its terminal {}",
                    state.as_str_name(),
                    end.as_str_name()
                ));
            }
            match t.emitted.iter().position(|(_, u)| *u == uuid) {
                Some(k) => {
                    let before = t
                        .received
                        .iter()
                        .filter(|(_, u)| t.emitted.iter().any(|(_, e)| e == u))
                        .count();
                    if k != before {
                        v.push(format!(
                            "{who}: task {task_id}: agent update #{k} ({}) arrived as #{before}",
                            state.as_str_name()
                        ));
                    }
                    if t.emitted[k].0 != state {
                        v.push(format!(
                            "{who}: task {task_id}: agent sent {}, framework got {}",
                            t.emitted[k].0.as_str_name(),
                            state.as_str_name()
                        ));
                    }
                }
                None => {
                    let lost = if aware {
                        TaskState::TaskGone
                    } else {
                        TaskState::TaskLost
                    };
                    let allowed = match t.master_terminal {
                        Some(want) => state == want,
                        None => state == lost || (state == TaskState::TaskFailed && t.publishing),
                    };
                    if !allowed {
                        v.push(format!(
                            "{who}: task {task_id}: the master sent {} (expected {:?})",
                            state.as_str_name(),
                            t.master_terminal.map(|s| s.as_str_name())
                        ));
                    }
                }
            }
            t.received.push((state, uuid.clone()));
        }
        t.last_sent = cx.now;
        self.decide_ack(&task_id, uuid, cx);
    }

    /// An UPDATE_OPERATION_STATUS: the checks of task updates, for the
    /// statuses of an operation (its provider's in the order it sent them,
    /// one in flight, retries the same, nothing after a terminal state).
    fn on_operation_status(
        &mut self,
        status: v1::OperationStatus,
        cx: &Context<'_>,
        v: &mut Vec<String>,
    ) {
        let who = self.who();
        let id = status
            .operation_id
            .as_ref()
            .map(|o| o.value.clone())
            .unwrap_or_default();
        let state = status.state();
        let Some(uuid) = status.uuid.as_ref().map(|u| u.value.clone()) else {
            v.push(format!(
                "{who}: operation {id}: {} without a uuid, asked for by no call",
                state.as_str_name()
            ));
            return;
        };
        self.op_statuses_seen += 1;
        let Some(o) = self.operations.get_mut(&id) else {
            v.push(format!(
                "{who}: status {} of operation {id} it never asked for",
                state.as_str_name()
            ));
            return;
        };
        if let Some(i) = o.received.iter().position(|(_, u)| *u == uuid) {
            if i < o.acked {
                v.push(format!(
                    "{who}: operation {id}: acknowledged status {} sent again",
                    state.as_str_name()
                ));
            } else if i + 1 != o.received.len() {
                v.push(format!(
                    "{who}: operation {id}: an older status retried after a newer one"
                ));
            }
            if o.received[i].0 != state {
                v.push(format!(
                    "{who}: operation {id}: a retry carries {} instead of {}",
                    state.as_str_name(),
                    o.received[i].0.as_str_name()
                ));
            }
        } else {
            if o.acked < o.received.len() {
                v.push(format!(
                    "{who}: operation {id}: status {} sent while {} is not acknowledged",
                    state.as_str_name(),
                    o.received[o.acked].0.as_str_name()
                ));
            }
            if let Some(end) = o.terminal() {
                v.push(format!(
                    "{who}: operation {id}: status {} after its terminal {}",
                    state.as_str_name(),
                    end.as_str_name()
                ));
            }
            match o.emitted.iter().position(|(_, u)| *u == uuid) {
                Some(k) => {
                    let before = o
                        .received
                        .iter()
                        .filter(|(_, u)| o.emitted.iter().any(|(_, e)| e == u))
                        .count();
                    if k < before {
                        v.push(format!(
                            "{who}: operation {id}: provider status #{k} ({}) arrived after #{before}",
                            state.as_str_name()
                        ));
                    }
                    if o.emitted[k].0 != state {
                        v.push(format!(
                            "{who}: operation {id}: the provider sent {}, the framework got {}",
                            o.emitted[k].0.as_str_name(),
                            state.as_str_name()
                        ));
                    }
                }
                None => {
                    // The master's own: its provider went away (UNREACHABLE,
                    // or GONE_BY_OPERATOR with its agent), or a reconciliation
                    // answer the provider sent without a uuid.
                    let own = matches!(
                        state,
                        OperationState::OperationUnreachable
                            | OperationState::OperationGoneByOperator
                    );
                    if !own && !o.unstamped.contains(&state) {
                        v.push(format!(
                            "{who}: operation {id}: the master sent {} its provider never did",
                            state.as_str_name()
                        ));
                    }
                }
            }
            o.received.push((state, uuid.clone()));
        }
        o.last_sent = cx.now;
        let attempt = self.op_statuses_seen;
        match self.ack_due(&uuid, attempt, cx) {
            Some(due) if !self.op_acks.iter().any(|a| a.uuid == uuid) => {
                self.op_acks.push(PendingAck {
                    due,
                    task: id,
                    uuid,
                })
            }
            Some(_) => {}
            None => self.acks_lost += 1,
        }
    }

    /// When the framework acknowledges an update it got (`None`: never).
    fn ack_due(&self, uuid: &[u8], attempt: u64, cx: &Context<'_>) -> Option<usize> {
        match self.spec.ack {
            AckPolicy::Immediate => Some(cx.step),
            AckPolicy::Late(k) => Some(cx.step + k as usize),
            AckPolicy::Deaf => None,
            AckPolicy::Lossy => {
                match mix(cx.seed, &[hash_bytes(uuid), attempt, u64::from(self.slot)]) % 10 {
                    0..=2 => None,
                    3..=4 => Some(cx.step + 1 + (attempt % 3) as usize),
                    _ => Some(cx.step),
                }
            }
        }
    }

    /// Whether (and when) the framework acknowledges an update it got.
    fn decide_ack(&mut self, task: &str, uuid: Vec<u8>, cx: &Context<'_>) {
        let attempt = self.updates_seen;
        match self.ack_due(&uuid, attempt, cx) {
            Some(due) if !self.acks.iter().any(|a| a.uuid == uuid) => self.acks.push(PendingAck {
                due,
                task: task.to_string(),
                uuid,
            }),
            Some(_) => {}
            None => self.acks_lost += 1,
        }
    }

    /// The uuid-less updates of this step against those its calls called
    /// for (as multisets); both are cleared.
    pub fn check_plain(&mut self) -> Vec<String> {
        let mut want = std::mem::take(&mut self.plain_expected);
        let mut got = std::mem::take(&mut self.plain_got);
        want.sort_by(|a, b| (&a.0, a.1 as i32).cmp(&(&b.0, b.1 as i32)));
        got.sort_by(|a, b| (&a.0, a.1 as i32).cmp(&(&b.0, b.1 as i32)));
        if want == got {
            return Vec::new();
        }
        let show = |l: &[Plain]| {
            l.iter()
                .map(|(t, s, r)| {
                    format!(
                        "{t}:{}{}",
                        s.as_str_name(),
                        r.map(|r| format!("/{}", r.as_str_name()))
                            .unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![format!(
            "{}: updates without uuid: expected [{}], got [{}]",
            self.who(),
            show(&want),
            show(&got)
        )]
    }
}

/// Short hex of a uuid, for messages.
pub fn hex(b: &[u8]) -> String {
    b.iter().take(4).map(|x| format!("{x:02x}")).collect()
}
