//! The master's state and the small helpers every handler uses: ids, timers,
//! events to frameworks, and requests to the core.
//!
//! Everything here is owned by the master thread (`mod.rs`); nothing is
//! shared or locked. Handlers live in their own files by role:
//! `subscribe.rs` (frameworks come and go), `offers.rs` (leases become
//! offers; decline, revive, suppress), `accept.rs` (ACCEPT), `tasks.rs`
//! (status updates, kill, acknowledge, reconcile), `agents.rs`, `report.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use unisched_core::Scheduler;
use unisched_core::clock::Clock;
use unisched_core::scheduler::offers::{OfferChange, OfferRequest};
use unisched_shim_api::SchedulerApi;
use unisched_si as si;

use super::Settings;
use super::framework::Framework;
use super::status::StatusStream;
use crate::agent::AgentBackend;
use crate::resources::Resources;
use crate::v1;
use crate::v1::scheduler::Event;

/// A hash map with a fixed-seed hasher: fast on the long ids Mesos uses
/// (they share the master id as a prefix, which makes ordered maps compare
/// long prefixes), and with an iteration order that depends only on what was
/// inserted, so runs replay.
pub type FastMap<K, V> = HashMap<K, V, FixedState>;

/// The fixed-seed ahash builder of [`FastMap`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedState;

impl BuildHasher for FixedState {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        ahash::RandomState::with_seeds(
            0x5be0_cd19_137e_2179,
            0x1f83_d9ab_fb41_bd6b,
            0x9b05_688c_2b3e_6c1f,
            0x510e_527f_ade6_82d1,
        )
        .build_hasher()
    }
}

/// An agent (a node of the core).
pub struct Agent {
    /// Its id (shared with the books: the `nodes` map and its offers).
    pub id: Arc<str>,
    /// What it registered with (id, hostname, resources, attributes).
    pub info: v1::AgentInfo,
    /// Its total resources.
    pub total: Resources,
    /// Held by tasks (and their executors), unallocated form.
    pub used: Resources,
    /// Neither occupied (held by something other than this master's tasks),
    /// used nor offered: `total - occupied - used - offered`, kept up to
    /// date by the methods below (the only writers of `used`), so making an
    /// offer does not recompute it. What is offered is in the offers.
    free: Resources,
    /// `free` in brief while it is all plain scalars (`plain.rs`): what an
    /// offer of the whole of it needs, without reading its entries. Made
    /// again by every method below that changes `free`.
    plain: Option<super::plain::PlainFree>,
    /// Tasks on it: (framework id, task id).
    pub tasks: std::collections::BTreeSet<(String, String)>,
    /// Executors launched on it: (framework id, executor id) → their info.
    pub executors: BTreeMap<(String, String), v1::ExecutorInfo>,
    /// Held by something other than this master's tasks (never offered).
    pub occupied: Resources,
    /// Its libprocess-style number: its endpoints are under `/slave(N)/`.
    pub pid: u32,
    /// Its URL (`http://<master's address>/slave(N)`, named by its
    /// hostname) as field 8 of its offers, encoded (`offer_wire::url_field`).
    pub(super) url: Box<[u8]>,
    /// An agent only for an external resource provider's resources: it runs
    /// no tasks.
    pub external: bool,
    /// Its pools' nodes in the core, by pool.
    pub pools: BTreeMap<super::pools::PoolKey, super::pools::PoolNode>,
    /// Where its tasks run.
    pub backend: Arc<dyn AgentBackend>,
    /// Clock time (ns) of registration.
    pub registered_time: u64,
    /// The offers an allocation run is making of it: the run's number and,
    /// per offer (one per framework role offered to), the place of its
    /// framework's OFFERS event in that run's list and its place in the
    /// event, so a run finds them without a map keyed by agent id. Stale
    /// once another run starts.
    pub(super) run_parts: (u64, smallvec::SmallVec<[(usize, usize); 2]>),
    /// True while its default pool (unreserved resources, no provider) is a
    /// node of the core and the agent is in service (`drain` unset). That
    /// node's id is the agent's own id (`PoolKey::node_id`), so a lease on
    /// it finds the agent with one lookup, without the `nodes` map; a lease
    /// of an agent out of service takes the long way, which turns it down.
    /// Kept by `sync_pools` and `drop_pools`, the only writers of `pools`,
    /// and by `drain.rs`.
    pub(super) default_node: bool,
    /// Set while an operator has it out of service (DEACTIVATE_AGENT or
    /// DRAIN_AGENT, `drain.rs`): none of it is offered.
    pub drain: Option<Box<AgentDrain>>,
}

/// How an operator took an agent out of service (`drain.rs`).
#[derive(Debug, Clone, Default)]
pub struct AgentDrain {
    /// DRAIN_AGENT's state (DRAINING, then DRAINED) and config; `None` for
    /// an agent only deactivated.
    pub info: Option<v1::DrainInfo>,
    /// Clock time (ns) the drain started.
    pub started: Option<u64>,
}

impl Agent {
    /// An agent with nothing used or offered yet; `occupied` is held by
    /// something other than this master's tasks and never offered.
    pub fn new(
        id: String,
        info: v1::AgentInfo,
        total: Resources,
        occupied: Resources,
        backend: Arc<dyn AgentBackend>,
        registered_time: u64,
    ) -> Agent {
        let mut free = total.clone();
        free.subtract(&occupied);
        Agent {
            id: Arc::from(id),
            info,
            total,
            used: Resources::default(),
            plain: super::plain::brief(&free),
            free,
            occupied,
            pid: 0,
            url: Box::default(),
            external: false,
            pools: BTreeMap::new(),
            tasks: Default::default(),
            executors: Default::default(),
            backend,
            registered_time,
            run_parts: (0, smallvec::SmallVec::new()),
            default_node: false,
            drain: None,
        }
    }

    /// Sets the free resources to the total less what is occupied, used,
    /// and `held` (offered, or held by pending operations).
    pub fn reset_free(&mut self, held: &Resources) {
        let mut free = self.total.clone();
        free.subtract(&self.occupied);
        free.subtract(&self.used);
        free.subtract(held);
        self.free = free;
        self.plain = super::plain::brief(&self.free);
    }

    /// What is free: neither occupied, used nor offered (unallocated form).
    pub fn free(&self) -> &Resources {
        &self.free
    }

    /// What of the free resources goes into an offer to a framework of
    /// `role` (`Resources::offer_for`), taken out of them (unallocated form).
    pub fn take_offer(
        &mut self,
        role: &str,
        keep: impl Fn(&v1::Resource) -> bool,
        granted: impl Fn(&str) -> Option<crate::resources::value::Scalar>,
    ) -> Resources {
        let taken = self.free.take_offer_exact(role, keep, granted);
        if !taken.is_empty() {
            self.plain = super::plain::brief(&self.free);
        }
        taken
    }

    /// The whole of the free resources, for a lease of the default pool,
    /// when they are plain scalars that the grant covers: what
    /// [`Agent::take_offer`] would take for any role, moved out without
    /// reading the entries, with its brief (to encode the offer from).
    /// `None`: not that case, nothing taken.
    pub(super) fn take_all_plain(
        &mut self,
        granted: impl Fn(&str) -> Option<crate::resources::value::Scalar>,
    ) -> Option<(Resources, super::plain::PlainFree)> {
        if !super::plain::granted_whole(self.plain.as_ref()?, &granted) {
            return None;
        }
        #[cfg(debug_assertions)]
        let expected = self.free.clone().take_offer_exact(
            "a-role",
            |r| super::pools::PoolKey::default().holds(r),
            &granted,
        );
        let brief = self.plain.replace(Default::default())?;
        let taken = std::mem::take(&mut self.free);
        #[cfg(debug_assertions)]
        debug_assert_eq!(taken, expected, "the long way takes the same");
        Some((taken, brief))
    }

    /// Resources of an offer (any form) come back (declined, rescinded, accepted).
    pub fn unoffer(&mut self, resources: &Resources) {
        self.free.add(&resources.unallocated());
        self.plain = super::plain::brief(&self.free);
    }

    /// A task (with its executor's share) takes resources of an offer
    /// (already out of the free resources).
    pub fn launch_from_offer(&mut self, resources: &Resources) {
        self.used.add(&resources.unallocated());
    }

    /// An operation turns `consumed` (any form) of the agent into `converted`.
    pub fn convert(&mut self, consumed: &Resources, converted: &Resources) {
        self.total.subtract(&consumed.unallocated());
        self.total.add(&converted.unallocated());
    }

    /// A task's resources come back at its terminal update.
    pub fn give_back(&mut self, resources: &Resources) {
        let r = resources.unallocated();
        self.used.subtract(&r);
        self.free.add(&r);
        self.plain = super::plain::brief(&self.free);
    }
}

/// The resources an executor holds on its agent (its `ExecutorInfo`'s),
/// apart from its tasks'.
#[derive(Debug, Clone)]
pub struct ExecutorHold {
    /// The role they were offered to.
    pub role: String,
    /// The executor's resources.
    pub resources: Resources,
    /// Their core allocations (one per pool of the agent).
    pub allocations: Vec<String>,
}

/// A core application of the front end: a framework's role.
#[derive(Debug, Clone)]
pub struct AppRecord {
    /// The framework id (shared with the offers made to it, so an offer
    /// takes no copy).
    pub framework: Arc<str>,
    /// The role (shared likewise).
    pub role: Arc<str>,
    /// The framework's handle in `Master::frameworks` when the role joined
    /// (a lease finds its framework by it, without hashing the id).
    pub framework_handle: u64,
}

/// An outstanding offer: leases of the core shown to a framework.
#[derive(Debug, Clone)]
pub struct Offer {
    /// Offer number: its id is `OfferBook::id_of(number)`.
    pub number: u64,
    /// The framework it was made to.
    pub framework: Arc<str>,
    /// The role it was allocated to.
    pub role: Arc<str>,
    /// The agent.
    pub agent: Arc<str>,
    /// The core allocations (leases, one per pool of the agent) behind it.
    pub leases: Vec<Arc<str>>,
    /// What it offers, unallocated: the offer carries it allocated to
    /// `role` (on the wire, in `/state`, to an ACCEPT's checks). Made
    /// allocated, each entry took a copy of the role string per offer.
    pub resources: Resources,
    /// Clock time (ns) it was made.
    pub created: u64,
    /// The number of the allocation run that made it.
    pub run: u64,
}

/// A task the master knows.
pub struct Task {
    /// Framework id.
    pub framework: String,
    /// Agent id.
    pub agent: String,
    /// The role its resources were allocated to.
    pub role: String,
    /// What the framework launched (resources included).
    pub info: v1::TaskInfo,
    /// The executor it runs under, if not a command task.
    pub executor: Option<v1::ExecutorInfo>,
    /// Latest state reported by the agent.
    pub state: v1::TaskState,
    /// Status history (latest last), as `/state` shows it.
    pub statuses: Vec<v1::TaskStatus>,
    /// Updates on their way to the framework.
    pub stream: StatusStream,
    /// Resources it holds on its agent (task and, for the first task of an
    /// executor, the executor's); given back at the terminal update.
    pub resources: Resources,
    /// The core allocations holding those resources (one per pool of the
    /// agent the task uses).
    pub allocations: Vec<String>,
    /// True until the resources are given back (at the terminal update).
    pub holds: bool,
}

/// A timer of the master thread.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Send a heartbeat on the stream of this generation.
    Heartbeat(String, u64),
    /// A disconnected framework's failover timeout may be over.
    Failover(String),
    /// A task's update in flight may be due for a retry.
    StatusRetry(String, String),
    /// An offer may have timed out.
    OfferTimeout(u64),
    /// An operation's status update in flight may be due for a retry (by
    /// operation uuid).
    OperationRetry(Vec<u8>),
    /// A launch's resources may not have been published in time.
    PublishTimeout(Vec<u8>),
    /// The allocation interval.
    AllocationTick,
    /// An operator's logging level may be due to revert (`logging.rs`).
    LoggingRevert,
}

/// Requests to the core, kept in order and merged when consecutive requests
/// are of one kind, then sent together at the end of each batch of inputs.
#[derive(Debug)]
pub enum CoreRequest {
    /// Applications added and removed.
    Apps(si::ApplicationRequest),
    /// Node changes.
    Nodes(si::NodeRequest),
    /// Offer demand and filters.
    Offers(Vec<OfferChange>),
    /// Task allocations and releases.
    Allocations(si::AllocationRequest),
}

/// The master's handle on the core.
pub struct CoreLink {
    /// The core.
    pub scheduler: Scheduler,
    /// Our RM id.
    pub rm_id: String,
    /// Our partition (plain name).
    pub partition: String,
    /// Requests not sent yet.
    pub outbox: Vec<CoreRequest>,
    /// Requests sent so far (what `Input::Sync` answers).
    pub sent: u64,
    /// A batch's changes went ahead under a hold the next [`Self::flush`]
    /// releases.
    pub holding: bool,
}

impl CoreLink {
    fn push(&mut self, request: CoreRequest) {
        use CoreRequest::*;
        match (self.outbox.last_mut(), request) {
            (Some(Apps(a)), Apps(b)) => {
                a.new.extend(b.new);
                a.remove.extend(b.remove);
            }
            (Some(Nodes(a)), Nodes(b)) => a.nodes.extend(b.nodes),
            (Some(Offers(a)), Offers(b)) => {
                // A batch of REVIVEs adds two changes each: room for the
                // part that goes ahead at once (`FLUSH_AHEAD` inputs, and
                // the hold and run changes around them), not by doubling
                // from the first call's two (nine copies of a growing list
                // per part).
                if a.capacity() - a.len() < b.len() {
                    a.reserve(b.len().max(2 * super::FLUSH_AHEAD + 4));
                }
                a.extend(b);
            }
            (Some(Allocations(a)), Allocations(b)) => {
                a.allocations.extend(b.allocations);
                let (ra, rb) = (
                    a.releases.get_or_insert_with(Default::default),
                    b.releases.unwrap_or_default(),
                );
                ra.allocations_to_release.extend(rb.allocations_to_release);
                ra.allocation_asks_to_release
                    .extend(rb.allocation_asks_to_release);
            }
            (_, request) => self.outbox.push(request),
        }
    }

    /// Queues offer changes.
    pub fn offers(&mut self, changes: Vec<OfferChange>) {
        self.push(CoreRequest::Offers(changes));
    }

    /// Queues an application to add for a framework role, with the
    /// master's number of it (handed back on its leases).
    pub fn add_app(&mut self, app: String, queue: String, user: String, handle: u64) {
        let partition_name = self.partition.clone();
        self.push(CoreRequest::Apps(si::ApplicationRequest {
            new: vec![si::AddApplicationRequest {
                application_id: app,
                queue_name: queue,
                partition_name,
                tags: [(unisched_shim_api::RM_HANDLE.to_string(), handle.to_string())].into(),
                ugi: Some(si::UserGroupInformation {
                    user,
                    groups: Vec::new(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }));
    }

    /// Queues removal of an application (its leases and tasks go with it).
    pub fn remove_app(&mut self, app: String) {
        let partition_name = self.partition.clone();
        self.push(CoreRequest::Apps(si::ApplicationRequest {
            remove: vec![si::RemoveApplicationRequest {
                application_id: app,
                partition_name,
            }],
            ..Default::default()
        }));
    }

    /// Queues a node change.
    pub fn node(&mut self, node: si::NodeInfo) {
        self.push(CoreRequest::Nodes(si::NodeRequest {
            nodes: vec![node],
            rm_id: String::new(),
        }));
    }

    /// Queues the release of a lease the master did not make an offer of.
    pub fn release_lease(&mut self, lease: &unisched_shim_api::Lease) {
        self.release(
            String::from(&*lease.application_id),
            String::from(&*lease.allocation_id),
        );
    }

    /// Queues the release of an allocation (lease or task).
    pub fn release(&mut self, app: String, allocation_id: String) {
        let partition_name = self.partition.clone();
        self.push(CoreRequest::Allocations(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: vec![si::AllocationRelease {
                    partition_name,
                    application_id: app,
                    allocation_id,
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }));
    }

    /// Queues a task allocation on a node, taken from leases released in the
    /// same request.
    pub fn allocate(&mut self, app: String, id: String, node: String, resource: si::Resource) {
        let partition_name = self.partition.clone();
        self.push(CoreRequest::Allocations(si::AllocationRequest {
            allocations: vec![si::Allocation {
                allocation_key: id.clone(),
                allocation_id: id,
                application_id: app,
                partition_name,
                node_id: node,
                resource_per_alloc: Some(resource),
                ..Default::default()
            }],
            ..Default::default()
        }));
    }

    /// Sends what is queued so far in the middle of a batch of inputs, so
    /// that the core applies it while the master takes the rest of the
    /// batch. No allocation run sees part of the batch: the first part
    /// starts with `Hold { held: true }` (a run already due waits too),
    /// [`Self::flush`] at the batch's end ends with `held: false`, and the
    /// run the batch asks for (`Allocate`) is held back until then.
    pub fn flush_ahead(&mut self) {
        let mut allocate = false;
        for request in &mut self.outbox {
            if let CoreRequest::Offers(changes) = request {
                let before = changes.len();
                changes.retain(|c| !matches!(c, OfferChange::Allocate));
                allocate |= changes.len() != before;
            }
        }
        self.outbox
            .retain(|r| !matches!(r, CoreRequest::Offers(changes) if changes.is_empty()));
        // The hold goes first in the first offer changes sent (requests of
        // other kinds add no demand, so none of them can start a run that
        // sees part of the batch).
        if !self.holding
            && let Some(changes) = self.outbox.iter_mut().find_map(|r| match r {
                CoreRequest::Offers(changes) => Some(changes),
                _ => None,
            })
        {
            self.holding = true;
            changes.insert(0, OfferChange::Hold { held: true });
        }
        self.send_all();
        if allocate {
            self.push(CoreRequest::Offers(vec![OfferChange::Allocate]));
        }
    }

    /// Sends everything queued (at the end of a batch of inputs); a hold
    /// [`Self::flush_ahead`] began ends with it.
    pub fn flush(&mut self) {
        if std::mem::take(&mut self.holding) {
            self.push(CoreRequest::Offers(vec![OfferChange::Hold { held: false }]));
        }
        self.send_all();
    }

    /// Sends what is queued, in order.
    fn send_all(&mut self) {
        for request in std::mem::take(&mut self.outbox) {
            self.sent += 1;
            let rm_id = self.rm_id.clone();
            let sent = match request {
                CoreRequest::Apps(r) => self
                    .scheduler
                    .update_application(si::ApplicationRequest { rm_id, ..r }),
                CoreRequest::Nodes(r) => self.scheduler.update_node(si::NodeRequest { rm_id, ..r }),
                CoreRequest::Offers(changes) => {
                    tracing::trace!(target: "unisched::timeline", changes = changes.len(), "master: offer changes go to the core");
                    self.scheduler.update_offers(OfferRequest {
                        rm_id,
                        partition_name: self.partition.clone(),
                        changes,
                    })
                }
                CoreRequest::Allocations(r) => self
                    .scheduler
                    .update_allocation(si::AllocationRequest { rm_id, ..r }),
            };
            if let Err(e) = sent {
                tracing::error!(error = %e, "the core refused a request of the Mesos front end");
            }
        }
    }
}

/// Counters of the master (Mesos' metric names, see `report.rs`).
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Calls received by type name.
    pub calls: BTreeMap<&'static str, u64>,
    /// Calls refused as invalid.
    pub invalid_calls: u64,
    /// Offers made.
    pub offers_sent: u64,
    /// Offers declined.
    pub offers_declined: u64,
    /// Offers accepted.
    pub offers_accepted: u64,
    /// Offers rescinded.
    pub offers_rescinded: u64,
    /// Offers that timed out.
    pub offers_timed_out: u64,
    /// Tasks that reached each terminal state, by state name.
    pub tasks_terminal: BTreeMap<&'static str, u64>,
    /// Status updates from agents.
    pub valid_status_updates: u64,
    /// Acknowledgements that matched an update in flight.
    pub valid_acknowledgements: u64,
    /// Acknowledgements that matched nothing.
    pub invalid_acknowledgements: u64,
    /// Operations that reached a state, by (operation type, state), both
    /// lower case as upstream's metric names have them.
    pub operations: BTreeMap<(String, String), u64>,
    /// Operation status acknowledgements that matched an update in flight.
    pub valid_operation_acknowledgements: u64,
    /// Operation status acknowledgements that matched nothing.
    pub invalid_operation_acknowledgements: u64,
    /// Events dropped because a stream could not keep up.
    pub dropped_events: u64,
    /// Frameworks removed.
    pub frameworks_removed: u64,
    /// Allocation runs (callbacks of the core carrying offers).
    pub allocation_runs: u64,
    /// Duration of recent allocation runs (core pass plus offer building), ms.
    pub allocation_run_ms: VecDeque<f64>,
}

/// How many allocation run timings are kept for percentiles.
pub const RUN_TIMINGS_KEPT: usize = 1000;

/// How many removed frameworks `/state` keeps.
pub const COMPLETED_FRAMEWORKS_KEPT: usize = 50;
/// How many ended tasks per framework `/state` keeps.
pub const COMPLETED_TASKS_KEPT: usize = 1000;

/// The master.
pub struct Master {
    /// Settings.
    pub settings: Settings,
    /// The clock (the core's).
    pub clock: Arc<dyn Clock>,
    /// The core.
    pub core: CoreLink,
    /// What SUBSCRIBED events carry.
    pub info: v1::MasterInfo,
    /// Frameworks by id, and by the number their applications' records
    /// keep (removed ones move to `completed_frameworks`).
    pub frameworks: super::book::Book<Framework>,
    /// Removed frameworks, newest last.
    pub completed_frameworks: VecDeque<Framework>,
    /// Agents by id, and by the number their default pool's node carries
    /// into the core (`book.rs`).
    pub agents: super::book::Book<Agent>,
    /// Outstanding offers by number (`offer_book.rs`).
    pub offers: super::offer_book::OfferBook,
    /// Offer number by lease (core allocation id).
    pub offer_by_lease: FastMap<Arc<str>, u64>,
    /// Tasks by (framework id, task id).
    pub tasks: FastMap<(String, String), Task>,
    /// What running executors hold, by (framework id, executor id, agent
    /// id): held
    /// from the executor's first task until its agent reports it exited
    /// (or the framework or agent goes), as upstream counts them.
    pub executor_holds: BTreeMap<(String, String, String), ExecutorHold>,
    /// (framework, role) by core application id, and by the number the
    /// application carries into the core.
    pub apps: super::book::Book<AppRecord>,
    /// (agent, pool) by core node id (the agent id shared with its offers).
    pub nodes: FastMap<String, (Arc<str>, super::pools::PoolKey)>,
    /// Operations with feedback, by operation uuid.
    pub operations: FastMap<Vec<u8>, super::operations::Operation>,
    /// Operation uuid by (framework id, operation id).
    pub operation_ids: FastMap<(String, String), Vec<u8>>,
    /// Resource providers by id.
    pub providers: FastMap<String, super::providers::Provider>,
    /// Launches waiting for their provider resources to be published.
    pub publishes: super::providers::Publishes,
    /// Timers: (clock time, timer).
    pub timers: BinaryHeap<Reverse<(u64, Timer)>>,
    /// Counters.
    pub counters: Counters,
    /// The allocation run being received in parts, if one is.
    pub(super) open_run: Option<super::offers::OpenRun>,
    /// Streams that failed a send (full or closed), to disconnect after the
    /// current input: (framework id, stream generation).
    pub broken_streams: Vec<(String, u64)>,
    /// Subscribers of the operator API's event stream (`operator::events`).
    pub operator_streams: Vec<super::operator::events::Sink>,
    /// Clock time (ns) the master started.
    pub start_time: u64,
    /// The queue configuration text last applied (at start, or by a hot
    /// reload); `None` for the default one.
    pub config_text: Option<String>,
    /// Quota operators set at run time, by role (`quota.rs`).
    pub quotas: super::config::Quotas,
    /// Agents an operator marked gone (MARK_AGENT_GONE, or a drain with
    /// `mark_gone`), with the clock time (ns): they never come back.
    pub gone_agents: BTreeMap<String, u64>,
    /// Agents in the DRAINING state, checked after each input for having
    /// drained (`drain.rs`).
    pub draining: std::collections::BTreeSet<String>,
    /// The operator's logging level and the clock time (ns) it lasts to
    /// (`logging.rs`).
    pub log_level: (u32, u64),
    next_framework: u64,
    /// The number of the next offer id.
    pub(super) next_offer: u64,
    next_agent: u64,
    next_generation: u64,
    next_pid: u32,
}

impl Master {
    /// A master with no frameworks or agents.
    pub fn new(
        settings: Settings,
        clock: Arc<dyn Clock>,
        core: CoreLink,
        info: v1::MasterInfo,
    ) -> Self {
        let start_time = clock.now_nanos();
        let offers = super::offer_book::OfferBook::new(&info.id);
        let mut m = Self {
            settings,
            clock,
            core,
            info,
            frameworks: Default::default(),
            completed_frameworks: VecDeque::new(),
            agents: Default::default(),
            offers,
            offer_by_lease: FastMap::default(),
            tasks: FastMap::default(),
            executor_holds: BTreeMap::new(),
            apps: Default::default(),
            nodes: FastMap::default(),
            operations: FastMap::default(),
            operation_ids: FastMap::default(),
            providers: FastMap::default(),
            publishes: FastMap::default(),
            timers: BinaryHeap::new(),
            counters: Counters::default(),
            open_run: None,
            broken_streams: Vec::new(),
            operator_streams: Vec::new(),
            start_time,
            config_text: None,
            quotas: super::config::Quotas::new(),
            gone_agents: BTreeMap::new(),
            draining: Default::default(),
            log_level: (0, 0),
            next_framework: 0,
            next_offer: 0,
            next_agent: 0,
            next_generation: 0,
            next_pid: 0,
        };
        let tick = m.settings.allocation_interval;
        m.after(tick, Timer::AllocationTick);
        m
    }

    /// Clock time in ns.
    pub fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// Arms a timer `delay` from now.
    pub fn after(&mut self, delay: Duration, timer: Timer) {
        let at = self.now().saturating_add(super::status::nanos(delay));
        self.at(at, timer);
    }

    /// Arms a timer at clock time `at`.
    pub fn at(&mut self, at: u64, timer: Timer) {
        self.timers.push(Reverse((at, timer)));
    }

    /// The earliest timer.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.peek().map(|r| r.0.0)
    }

    /// Takes the timers due at `now`.
    pub fn due_timers(&mut self, now: u64) -> Vec<Timer> {
        let mut due = Vec::new();
        while let Some(Reverse((at, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, t))) = self.timers.pop() {
                due.push(t);
            }
        }
        due
    }

    /// A new framework id: `<master id>-<number>`, as Mesos writes them.
    pub fn new_framework_id(&mut self) -> String {
        let n = self.next_framework;
        self.next_framework += 1;
        format!("{}-{n:04}", self.info.id)
    }

    /// A new agent id.
    pub fn new_agent_id(&mut self) -> String {
        let n = self.next_agent;
        self.next_agent += 1;
        format!("{}-S{n}", self.info.id)
    }

    /// The next agent's libprocess-style number (`slave(N)`, from 1).
    pub fn new_agent_pid(&mut self) -> u32 {
        self.next_pid += 1;
        self.next_pid
    }

    /// A new stream generation.
    pub fn new_generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    /// Sends an event to a framework's open stream. A stream that cannot
    /// take it (its reader is too slow, or gone) is closed after the current
    /// input: the framework is then disconnected.
    pub fn send(&mut self, framework: &str, event: impl Into<super::stream::StreamEvent>) {
        let Some(f) = self.frameworks.get(framework) else {
            return;
        };
        send_on_stream(
            framework,
            f,
            event.into(),
            &mut self.counters.dropped_events,
            &mut self.broken_streams,
        );
    }

    /// A status update event.
    pub fn update_event(status: v1::TaskStatus) -> Event {
        Event {
            r#type: Some(v1::scheduler::event::Type::Update as i32),
            update: Some(v1::scheduler::event::Update { status }),
            ..Default::default()
        }
    }

    /// Counts an operation of `kind` reaching `state`.
    pub fn count_operation(&mut self, kind: v1::offer::operation::Type, state: v1::OperationState) {
        let kind = kind.as_str_name().to_lowercase();
        let state = state
            .as_str_name()
            .trim_start_matches("OPERATION_")
            .to_lowercase();
        *self.counters.operations.entry((kind, state)).or_default() += 1;
    }

    /// Counts a call of `kind`.
    pub fn count_call(&mut self, kind: &'static str) {
        *self.counters.calls.entry(kind).or_default() += 1;
    }
}

/// A timestamp in Mesos' form: seconds since the epoch as a double.
pub fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

thread_local! {
    /// The state of the master thread's id generator when
    /// `Settings::id_seed` is set (the thread sets it when it starts);
    /// `None`: ids are random.
    static SEEDED_IDS: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Makes this thread's [`new_uuid`]s come from `seed` (the master thread
/// calls it at its start when `Settings::id_seed` is set).
pub fn seed_ids(seed: u64) {
    SEEDED_IDS.with(|s| s.set(Some(seed)));
}

/// splitmix64: the next state and its output.
fn splitmix64(state: u64) -> (u64, u64) {
    let next = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = next;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (next, z ^ (z >> 31))
}

/// A version 4 UUID made from `state` (advanced twice).
pub fn seeded_uuid(state: &mut u64) -> uuid::Uuid {
    let (s, a) = splitmix64(*state);
    let (s, b) = splitmix64(s);
    *state = s;
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// A fresh UUID's 16 bytes: random, or the next of the seeded sequence on
/// a master thread whose ids are seeded.
pub fn new_uuid() -> Vec<u8> {
    new_uuid_value().as_bytes().to_vec()
}

/// A fresh UUID, as [`new_uuid`].
pub fn new_uuid_value() -> uuid::Uuid {
    SEEDED_IDS.with(|s| match s.get() {
        Some(mut state) => {
            let u = seeded_uuid(&mut state);
            s.set(Some(state));
            u
        }
        None => uuid::Uuid::new_v4(),
    })
}

/// Sends an event on framework `id`'s open stream (`f`, its record); none
/// open, nothing is sent. A stream that cannot take it (its reader is too
/// slow, or gone) is counted in `dropped` and listed in `broken`, to be
/// closed after the current input: the framework is then disconnected.
pub(super) fn send_on_stream(
    id: &str,
    f: &super::framework::Framework,
    event: super::stream::StreamEvent,
    dropped: &mut u64,
    broken: &mut Vec<(String, u64)>,
) {
    let Some(stream) = &f.stream else {
        return;
    };
    if stream.sink.try_send(event).is_err() {
        *dropped += 1;
        broken.push((id.to_string(), stream.generation));
    }
}
