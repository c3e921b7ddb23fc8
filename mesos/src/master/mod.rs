//! The Mesos-compatible master: Mesos frameworks on the unisched core.
//!
//! # What it is
//! The master speaks Mesos' v1 scheduler API to frameworks and is an RM of
//! the core with a partition of its own. It holds no allocator: offers come
//! from the core's offer partitions (see `unisched_core::scheduler::offers`).
//! A role is a queue (`a/b` is `root.a.b`), a (framework, role) pair is an
//! application, an agent is a node, an offer is a lease (an allocation of a
//! node's whole remainder), a task is an allocation made from leases.
//!
//! # Threads and who owns what
//! ```text
//!  HTTP handlers (tokio) ──Input──┐
//!  in-process drivers ────Input──┤
//!  core dispatcher (callback) ───┼──▶ master thread ──try_send──▶ event streams
//!  embedded agents (tokio) ──────┘    owns `Master`           (one bounded channel
//!                                      │                       per subscription)
//!                                      ├─ SchedulerApi / update_offers ─▶ core
//!                                      └─ AgentBackend calls ───────────▶ agents
//! ```
//! - The **master thread** owns all protocol state (`state::Master`):
//!   frameworks, their streams, offers, tasks and their status streams,
//!   agents, timers. Nothing else reads or writes it; there are no locks.
//!   It takes inputs from one channel, in arrival order, and waits on it
//!   with a timeout for its next timer.
//! - It talks to the **core** only through calls that queue and return
//!   (`update_*`, `update_offers`); the core answers through the RM
//!   callback, which runs on the core's dispatcher thread for this RM and
//!   only forwards what it gets to the master thread's channel. So the master
//!   never waits for the core and the core never waits for the master.
//! - **Events** go to each subscription's bounded channel with `try_send`;
//!   the HTTP response task (or an in-process driver) encodes and writes
//!   them. An allocation run's OFFERS events are encoded by the master as
//!   it makes the offers, from its books (`offer_wire.rs`), and travel as
//!   bytes; [`EventReceiver`] decodes them for in-process subscribers. A subscriber that does not keep up has its stream closed (the
//!   framework is disconnected and may resubscribe): a slow or stuck
//!   framework never holds up the master, the core or another framework.
//! - **Agents** get non-blocking calls (launch, kill, ...) and report status
//!   updates back through the channel.
//! - Queries (`/state`, metrics) are inputs with a reply channel; the master
//!   thread answers from its state between two inputs.
//!
//! Shutdown: dropping the last [`MasterHandle`] (or [`MasterHandle::shutdown`])
//! stops the thread; the agents kill their tasks.

mod accept;
mod agent_ops;
mod agents;
pub mod auth;
mod book;
pub mod config;
mod drain;
mod feedback;
pub mod framework;
pub mod http;
pub mod libprocess;
pub mod logging;
mod offer_book;
mod offer_wire;
mod offers;
mod operations;
pub mod operator;
mod plain;
mod pools;
mod providers;
pub mod quota;
pub mod report;
pub mod sasl;
mod state;
pub mod status;
pub mod stream;
mod subscribe;
mod tasks;
pub mod units;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tokio::sync::{mpsc, oneshot};
use unisched_core::Scheduler;
use unisched_core::scheduler::offers::OfferChange;
use unisched_shim_api::{CallbackResult, Leases, ResourceManagerCallback, SchedulerApi};
use unisched_si as si;

use crate::agent::{AgentBackend, AgentUpdate};
use crate::resources::Resources;
use crate::v1;
use crate::v1::scheduler::Call;

/// The checks of a resource provider call before it reaches the master (as
/// the HTTP route makes them; public for the fuzz target that drives the
/// master in process).
pub use providers::validate_call as validate_provider_call;
pub use state::Timer;
pub use stream::{EventReceiver, StreamEvent};

/// Settings of the master.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Interval of HEARTBEAT events (Mesos: 15 s).
    pub heartbeat_interval: Duration,
    /// How often the core is woken for an allocation run when nothing
    /// else changed (Mesos' `--allocation_interval`, 1 s).
    pub allocation_interval: Duration,
    /// Offers are rescinded after this long (Mesos' `--offer_timeout`; none by default).
    pub offer_timeout: Option<Duration>,
    /// Minimum allocatable resources: alternatives, one must fit in a remainder
    /// (Mesos' `--min_allocatable_resources`, `cpus:0.01|mem:32`).
    pub min_allocatable: Vec<Resources>,
    /// Role weights (`--mesos-weights r1=2,r2=1`), applied as queue weights.
    pub weights: BTreeMap<String, f64>,
    /// Events a subscription may have queued before its stream is closed.
    pub stream_capacity: usize,
    /// Removed frameworks' ids stay refused; their records are kept for `/state`.
    pub hostname: String,
    /// The port the scheduler API is served on (for MasterInfo).
    pub port: u32,
    /// The address MasterInfo, the master's pid and its agents' pids and
    /// URLs name: where frameworks and executors reach this master
    /// (`unisched serve --mesos-addr`'s, unless that is 0.0.0.0; then
    /// 127.0.0.1).
    pub ip: std::net::Ipv4Addr,
    /// Grace period of a kill when neither the task nor the call sets one.
    pub kill_grace_period: Duration,
    /// Seeds the master's ids (its own, which prefixes framework, agent and
    /// offer ids, and the uuids of status updates, operations, publications
    /// and resource providers) so that a run on a virtual clock replays
    /// exactly; `None` (the default): random ids.
    pub id_seed: Option<u64>,
    /// Pins the master's thread to this CPU (`unisched serve
    /// --pin-threads`; see `unisched_core::affinity`). `None` (the
    /// default): the kernel places it.
    pub cpu: Option<usize>,
    /// What turns the operator API's logging levels into the process's
    /// log filter (`logging.rs`); `None`: those calls get 501.
    pub logging: Option<logging::LogControl>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(15),
            allocation_interval: Duration::from_secs(1),
            offer_timeout: None,
            min_allocatable: vec![
                Resources::parse("cpus:0.01").unwrap_or_default(),
                Resources::parse("mem:32").unwrap_or_default(),
            ],
            weights: BTreeMap::new(),
            stream_capacity: 4096,
            hostname: "localhost".to_string(),
            ip: std::net::Ipv4Addr::LOCALHOST,
            port: 5050,
            kill_grace_period: Duration::from_secs(3),
            id_seed: None,
            cpu: None,
            logging: None,
        }
    }
}

/// Makes an agent's backend from the id the master gives it.
pub type MakeAgent = Box<dyn FnOnce(&str) -> Arc<dyn AgentBackend> + Send>;

/// An agent to add.
pub struct AgentSpec {
    /// Its hostname.
    pub hostname: String,
    /// Its resources.
    pub resources: Resources,
    /// Part of them used by something other than this master's tasks
    /// (never offered).
    pub occupied: Resources,
    /// Its attributes.
    pub attributes: Vec<v1::Attribute>,
    /// Makes its backend once its id is known.
    pub backend: MakeAgent,
}

/// The RM id the master registers with the core.
pub const RM_ID: &str = "mesos";

/// What an HTTP (or in-process) call gets back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// 202 Accepted.
    Accepted,
    /// 200 OK (UPDATE_FRAMEWORK).
    Ok,
}

/// Why a call was refused, with its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct CallError {
    /// HTTP status code.
    pub status: u16,
    /// The body.
    pub message: String,
}

impl CallError {
    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: message.into(),
        }
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            status: 403,
            message: message.into(),
        }
    }
}

/// An answer from the core, forwarded by the RM callback.
#[derive(Debug)]
pub enum CoreUpdate {
    /// Leases and releases, rejections: all of a pass, a part of an
    /// allocation run that goes on (`partial`), or its last part.
    Allocation(Leases, Instant),
    /// Application results.
    Application(si::ApplicationResponse),
    /// Node results.
    Node(si::NodeResponse),
}

/// Inputs of the master thread.
pub enum Input {
    /// A SUBSCRIBE call; its events go to `sink`.
    Subscribe {
        /// The call's payload.
        subscribe: Box<v1::scheduler::call::Subscribe>,
        /// The stream's `Mesos-Stream-Id`.
        stream_id: String,
        /// Where the events go.
        sink: mpsc::Sender<StreamEvent>,
        /// The scheduler's libprocess pid (`None` over HTTP or in process).
        pid: Option<String>,
    },
    /// Any other call.
    Call {
        /// The call (validated).
        call: Box<Call>,
        /// The `Mesos-Stream-Id` header, if any.
        stream_id: Option<String>,
        /// The principal the call authenticated as, if it did.
        principal: Option<String>,
        /// The outcome.
        reply: oneshot::Sender<Result<CallOutcome, CallError>>,
    },
    /// A resource provider's SUBSCRIBE on an agent's endpoint (`Some(N)`
    /// for `/slave(N)/`) or the master's (`None`).
    ProviderSubscribe {
        /// Which endpoint.
        endpoint: Option<u32>,
        /// The call's payload.
        subscribe: Box<crate::v1::resource_provider::call::Subscribe>,
        /// The stream's `Mesos-Stream-Id`.
        stream_id: String,
        /// Where its events go.
        sink: mpsc::Sender<crate::v1::resource_provider::Event>,
    },
    /// Any other resource provider call.
    ProviderCall {
        /// Which endpoint.
        endpoint: Option<u32>,
        /// The call (validated).
        call: Box<crate::v1::resource_provider::Call>,
        /// The `Mesos-Stream-Id` header, if any.
        stream_id: Option<String>,
        /// The outcome.
        reply: oneshot::Sender<Result<CallOutcome, CallError>>,
    },
    /// A resource provider's stream closed.
    ProviderClosed {
        /// Provider id.
        provider: String,
        /// Its stream id.
        stream_id: String,
    },
    /// A subscription's stream closed (the client went away).
    StreamClosed {
        /// Framework id.
        framework: String,
        /// Its stream generation.
        stream_id: String,
    },
    /// From the core.
    Core(CoreUpdate),
    /// From an agent.
    Agent(AgentUpdate),
    /// Adds an agent.
    AddAgent {
        /// The agent.
        spec: AgentSpec,
        /// The id it got.
        reply: Option<oneshot::Sender<String>>,
    },
    /// Removes an agent (its tasks are lost, its offers rescinded).
    RemoveAgent(String),
    /// A question answered from the state.
    Query(report::Query),
    /// Applies a new queue configuration text.
    Config(String, oneshot::Sender<Result<(), String>>),
    /// A barrier (see [`MasterHandle::sync`]): answered once every input
    /// sent before it is applied, the timers due have fired and the requests
    /// to the core are sent, with the number of requests sent so far.
    Sync(oneshot::Sender<u64>),
    /// Inputs applied in one batch, in order: no timer fires and nothing
    /// goes to the core between them, so whatever they ask of the core goes
    /// in one request (as for inputs that are queued together). For an
    /// embedder that has several calls at once, such as many frameworks'
    /// REVIVEs in one allocation run.
    Batch(Vec<Input>),
    /// Stops the master.
    Shutdown,
}

/// The core's answers to the master, forwarded to its thread.
struct CoreCallback {
    tx: Sender<Input>,
}

impl ResourceManagerCallback for CoreCallback {
    /// The core gives its leases (`update_leases`); the wire form, were
    /// it sent, is taken the same way.
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.update_leases(Leases::from_wire(response, false))
    }

    fn update_allocation_partial(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.update_leases(Leases::from_wire(response, true))
    }

    fn update_leases(&self, leases: Leases) -> CallbackResult<()> {
        let _ = self
            .tx
            .send(Input::Core(CoreUpdate::Allocation(leases, Instant::now())));
        Ok(())
    }

    /// Every callback only queues an input for the master thread (an
    /// unbounded channel: it never blocks), so the core may hand an
    /// allocation run's parts over from its scheduling thread. The master
    /// needs nothing of the order between a run's leases and the
    /// applications' changes of state: it reads only rejections from
    /// those, and applies no other input while a run is open.
    fn offer_runs_inline(&self) -> bool {
        true
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        let _ = self.tx.send(Input::Core(CoreUpdate::Application(response)));
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        let _ = self.tx.send(Input::Core(CoreUpdate::Node(response)));
        Ok(())
    }

    fn predicates(&self, _args: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn send_event(&self, _events: Vec<si::EventRecord>) -> CallbackResult<()> {
        Ok(())
    }

    fn update_container_scheduling_state(
        &self,
        _request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }

    fn update_configuration(
        &self,
        _request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse {
            success: true,
            ..Default::default()
        })
    }
}

/// Why the master could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The queue configuration is not usable.
    #[error("queue configuration for the Mesos partition: {0}")]
    Config(String),
    /// The core refused the registration.
    #[error("the core refused the Mesos front end: {0}")]
    Core(#[from] unisched_shim_api::SchedulerError),
    /// The master thread did not start.
    #[error("cannot start the master thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The authentication flags do not go together.
    #[error("{0}")]
    Authentication(String),
}

/// A handle on a running master. Cheap to clone; the master stops when the
/// last handle goes (or at [`MasterHandle::shutdown`]).
#[derive(Clone)]
pub struct MasterHandle {
    tx: Sender<Input>,
    inner: Arc<HandleInner>,
}

struct HandleInner {
    tx: Sender<Input>,
    info: v1::MasterInfo,
    heartbeat_interval: Duration,
    /// The core, for what only it knows (its queues' limits).
    scheduler: Scheduler,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        let _ = self.tx.send(Input::Shutdown);
    }
}

impl MasterHandle {
    /// Starts a master on `scheduler`, registering it as RM [`RM_ID`] with the
    /// queue configuration `config` (YAML; its first partition is used, see
    /// [`config::mesos_partition`]).
    pub fn start(
        scheduler: Scheduler,
        config: Option<&str>,
        settings: Settings,
    ) -> Result<Self, StartError> {
        let text =
            config::mesos_partition(config, &settings.weights).map_err(StartError::Config)?;
        let (tx, rx) = crossbeam_channel::unbounded();
        scheduler.register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM_ID.to_string(),
                policy_group: "queues".to_string(),
                version: "mesos-v1".to_string(),
                build_info: Default::default(),
                config: text,
                extra_config: Default::default(),
            },
            Arc::new(CoreCallback { tx: tx.clone() }),
        )?;
        let clock = scheduler.clock();
        let id_seed = settings.id_seed;
        let heartbeat_interval = settings.heartbeat_interval;
        let cpu = settings.cpu;
        let master_id = match id_seed {
            Some(mut seed) => state::seeded_uuid(&mut seed).to_string(),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let info = v1::MasterInfo {
            id: master_id,
            // Network byte order, as Mesos keeps it.
            ip: u32::from_le_bytes(settings.ip.octets()),
            port: settings.port,
            pid: Some(format!("master@{}:{}", settings.ip, settings.port)),
            hostname: Some(settings.hostname.clone()),
            version: Some(crate::MESOS_VERSION.to_string()),
            address: Some(v1::Address {
                hostname: Some(settings.hostname.clone()),
                ip: Some(settings.ip.to_string()),
                port: settings.port as i32,
            }),
            ..Default::default()
        };
        let core_handle = scheduler.clone();
        let mut core = state::CoreLink {
            scheduler,
            rm_id: RM_ID.to_string(),
            partition: config::PARTITION.to_string(),
            outbox: Vec::new(),
            sent: 0,
            holding: false,
        };
        core.offers(vec![offers::policy_change(&settings.min_allocatable)]);
        core.flush();
        let mut master = state::Master::new(settings, clock, core, info.clone());
        master.config_text = config.map(str::to_string);
        std::thread::Builder::new()
            .name("unisched-mesos-master".to_string())
            .spawn(move || {
                unisched_core::affinity::pin_or_warn(cpu, "unisched-mesos-master");
                if let Some(seed) = id_seed {
                    // Past the state that made the master id.
                    state::seed_ids(seed.wrapping_add(1));
                }
                run(master, rx)
            })?;
        Ok(Self {
            tx: tx.clone(),
            inner: Arc::new(HandleInner {
                tx,
                info,
                heartbeat_interval,
                scheduler: core_handle,
            }),
        })
    }

    /// What SUBSCRIBED events carry about this master.
    pub fn info(&self) -> &v1::MasterInfo {
        &self.inner.info
    }

    /// Mesos quota as the core's queues have it (`operator::quota_status`):
    /// a snapshot of the Mesos partition, taken off the async runtime.
    /// `None` when the core has stopped.
    pub async fn quota(&self) -> Option<crate::v1::quota::QuotaStatus> {
        let scheduler = self.inner.scheduler.clone();
        let partition = format!("[{RM_ID}]{}", config::PARTITION);
        let snapshot = tokio::task::spawn_blocking(move || scheduler.snapshot(&partition))
            .await
            .ok()??;
        Some(operator::quota_status(&snapshot))
    }

    /// How often subscribers get a HEARTBEAT.
    pub fn heartbeat_interval(&self) -> Duration {
        self.inner.heartbeat_interval
    }

    /// Sends an input to the master thread (false when it has stopped).
    pub fn send(&self, input: Input) -> bool {
        self.tx.send(input).is_ok()
    }

    /// Sends inputs to be applied as one batch ([`Input::Batch`]); false
    /// once the master has stopped.
    pub fn send_batch(&self, inputs: Vec<Input>) -> bool {
        self.send(Input::Batch(inputs))
    }

    /// Subscribes a framework in process: returns the stream id and the
    /// channel its events arrive on (SUBSCRIBED first, or ERROR).
    pub fn subscribe(
        &self,
        subscribe: v1::scheduler::call::Subscribe,
        capacity: usize,
    ) -> (String, EventReceiver) {
        self.subscribe_from(subscribe, capacity, None)
    }

    /// [`MasterHandle::subscribe`] for a scheduler at libprocess `pid`
    /// (shown in `/state`).
    pub fn subscribe_from(
        &self,
        subscribe: v1::scheduler::call::Subscribe,
        capacity: usize,
        pid: Option<String>,
    ) -> (String, EventReceiver) {
        let (sink, events) = mpsc::channel(capacity.max(1));
        let stream_id = uuid::Uuid::new_v4().to_string();
        self.send(Input::Subscribe {
            subscribe: Box::new(subscribe),
            stream_id: stream_id.clone(),
            sink,
            pid,
        });
        (stream_id, EventReceiver::new(events))
    }

    /// Makes a call (not SUBSCRIBE) and waits for its outcome.
    pub async fn call(
        &self,
        call: Call,
        stream_id: Option<String>,
    ) -> Result<CallOutcome, CallError> {
        self.call_as(call, stream_id, None).await
    }

    /// Makes a call (not SUBSCRIBE) authenticated as `principal`, which
    /// must be the framework's, and waits for its outcome.
    pub async fn call_as(
        &self,
        call: Call,
        stream_id: Option<String>,
        principal: Option<String>,
    ) -> Result<CallOutcome, CallError> {
        let (reply, rx) = oneshot::channel();
        if !self.send(Input::Call {
            call: Box::new(call),
            stream_id,
            principal,
            reply,
        }) {
            return Err(CallError {
                status: 503,
                message: "the master has stopped".to_string(),
            });
        }
        rx.await.unwrap_or_else(|_| {
            Err(CallError {
                status: 503,
                message: "the master has stopped".to_string(),
            })
        })
    }

    /// Subscribes a resource provider in process on an agent's endpoint
    /// (`Some(N)`) or the master's: returns the stream id and its events.
    pub fn provider_subscribe(
        &self,
        endpoint: Option<u32>,
        subscribe: crate::v1::resource_provider::call::Subscribe,
        capacity: usize,
    ) -> (String, mpsc::Receiver<crate::v1::resource_provider::Event>) {
        let (sink, events) = mpsc::channel(capacity.max(1));
        let stream_id = uuid::Uuid::new_v4().to_string();
        self.send(Input::ProviderSubscribe {
            endpoint,
            subscribe: Box::new(subscribe),
            stream_id: stream_id.clone(),
            sink,
        });
        (stream_id, events)
    }

    /// Makes a resource provider call (not SUBSCRIBE) and waits for its outcome.
    pub async fn provider_call(
        &self,
        endpoint: Option<u32>,
        call: crate::v1::resource_provider::Call,
        stream_id: Option<String>,
    ) -> Result<CallOutcome, CallError> {
        let (reply, rx) = oneshot::channel();
        let stopped = || CallError {
            status: 503,
            message: "the master has stopped".to_string(),
        };
        if !self.send(Input::ProviderCall {
            endpoint,
            call: Box::new(call),
            stream_id,
            reply,
        }) {
            return Err(stopped());
        }
        rx.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Adds an agent and returns its id.
    pub async fn add_agent(&self, spec: AgentSpec) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        self.send(Input::AddAgent {
            spec,
            reply: Some(reply),
        });
        rx.await.ok()
    }

    /// Answers a question from the master's state.
    pub async fn query<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> report::Query,
    ) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.send(Input::Query(make(reply)));
        rx.await.ok()
    }

    /// Waits until the master thread has applied every input sent before
    /// this call, fired the timers due at the clock's time and sent its
    /// requests to the core; returns how many requests it has sent the core
    /// in all (`None` once it has stopped).
    ///
    /// With a virtual clock this makes the master quiescent: settle the core
    /// (`Scheduler::settle`, which delivers the core's answers into the
    /// master's input channel) and sync again until the count stops moving;
    /// then neither the core nor the master has anything left to do (agents
    /// and frameworks aside). The Mesos soak drives the master this way.
    pub async fn sync(&self) -> Option<u64> {
        let (reply, rx) = oneshot::channel();
        if !self.send(Input::Sync(reply)) {
            return None;
        }
        rx.await.ok()
    }

    /// [`Self::sync`] for a thread outside the async runtime (it blocks).
    pub fn sync_blocking(&self) -> Option<u64> {
        let (reply, rx) = oneshot::channel();
        if !self.send(Input::Sync(reply)) {
            return None;
        }
        rx.blocking_recv().ok()
    }

    /// Waits, blocking this thread, until neither `core` nor the master has
    /// anything left to do (agents and frameworks aside): syncs the master,
    /// settles the core, and again until the master's count of requests to
    /// the core stops moving. An error when the master has stopped, or when
    /// they still move after `max_rounds` (a livelock). Not on the async
    /// runtime's threads.
    pub fn quiesce(&self, core: &Scheduler, max_rounds: usize) -> Result<(), String> {
        let stopped = || "the master thread has stopped".to_string();
        let mut sent = self.sync_blocking().ok_or_else(stopped)?;
        for _ in 0..max_rounds {
            core.settle();
            let now = self.sync_blocking().ok_or_else(stopped)?;
            if now == sent {
                return Ok(());
            }
            sent = now;
        }
        Err(format!(
            "the core and the master did not come to rest in {max_rounds} rounds (livelock?)"
        ))
    }

    /// Applies a new queue configuration text (hot reload).
    pub fn apply_config(&self, text: String) -> Result<(), String> {
        let (reply, rx) = oneshot::channel();
        if !self.send(Input::Config(text, reply)) {
            return Err("the master has stopped".to_string());
        }
        rx.blocking_recv()
            .unwrap_or_else(|_| Err("the master has stopped".to_string()))
    }

    /// Stops the master thread.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Input::Shutdown);
    }
}

/// Inputs of a batch (an `Input::Batch`, or the inputs the master's loop
/// takes in one turn) after which what they queued for the core goes ahead
/// of the batch's end (`CoreLink::flush_ahead`, under a hold that keeps any
/// allocation run from seeing part of the batch).
pub const FLUSH_AHEAD: usize = 256;

/// Inputs at the end of an `Input::Batch` that go to the core as a part of
/// their own: what the core still has to apply once the master is through
/// the batch (before an allocation run the batch asks for can start) is
/// this many inputs' changes, not up to `FLUSH_AHEAD`'s.
pub const FLUSH_TAIL: usize = 64;

/// True when what a batch's inputs queued for the core goes ahead once
/// `taken` of them are taken and `left` are still to come: every
/// `FLUSH_AHEAD` inputs, and when `FLUSH_TAIL` are left.
fn goes_ahead(taken: usize, left: usize) -> bool {
    taken.is_multiple_of(FLUSH_AHEAD) || left == FLUSH_TAIL
}

/// Most inputs applied before timers and the core get a turn.
const BATCH: usize = 1024;

fn run(mut master: state::Master, rx: Receiver<Input>) {
    // Inputs that came while an allocation run was open, in order.
    let mut deferred = VecDeque::new();
    loop {
        let wait = master
            .next_timer()
            .map(|at| Duration::from_nanos(at.saturating_sub(master.now())));
        let first = match wait {
            // While a run is open no timer fires: a due one must not turn
            // this wait into a busy loop until the run's next part comes.
            _ if master.run_open() => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) if master.clock.is_virtual() && d > Duration::ZERO => {
                // A virtual clock moves only when told; look again soon.
                rx.recv_timeout(Duration::from_millis(10))
            }
            Some(d) => rx.recv_timeout(d),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let mut stop = false;
        match first {
            Ok(input) => {
                stop |= master.take_input(input, &mut deferred);
                // Calls that queued up (a thousand frameworks' REVIVEs)
                // are taken as a batch: what they ask of the core goes
                // ahead as in `Input::Batch` (input `i` here is the turn's
                // `i + 2`th: one came first; those still queued, up to the
                // turn's `BATCH`, are the ones left).
                for (i, input) in rx.try_iter().take(BATCH).enumerate() {
                    stop |= master.take_input(input, &mut deferred);
                    let left = rx.len().min(BATCH - (i + 1));
                    if goes_ahead(i + 2, left) && !master.run_open() {
                        master.core.flush_ahead();
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => stop = true,
        }
        // While a run is open, the books are half way through it: no timer
        // fires and nothing goes to the core until its last part is in.
        if !master.run_open() {
            master.apply_deferred(&mut deferred);
            master.after_inputs();
        }
        if stop {
            master.shutdown();
            break;
        }
    }
}

impl state::Master {
    /// Runs `f`, turning a panic into a logged error: no panic escapes into
    /// the master thread's loop.
    fn guarded(&mut self, f: impl FnOnce(&mut Self)) {
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".to_string());
            tracing::error!(%reason, "the Mesos master panicked handling an input; state of that input may be partial");
        }
    }

    /// What follows every batch of inputs: due timers fire, broken streams
    /// close, queued requests go to the core.
    fn after_inputs(&mut self) {
        let now = self.now();
        for timer in self.due_timers(now) {
            self.guarded(|m| m.on_timer(timer));
        }
        self.guarded(|m| m.close_broken_streams());
        self.guarded(|m| m.check_draining());
        self.core.flush();
    }

    /// Takes one input in. While an allocation run sent in parts is open,
    /// only the run's parts are applied and any other input waits, so the
    /// run is applied as one step, as when it comes in one part; the inputs
    /// that waited go first once it is closed. True to stop.
    fn take_input(&mut self, input: Input, deferred: &mut VecDeque<Input>) -> bool {
        let input = match input {
            Input::Shutdown => return true,
            Input::Batch(inputs) => {
                tracing::trace!(target: "unisched::timeline", inputs = inputs.len(), "master: a batch of inputs");
                // Each in turn, as if each had come on its own in this
                // batch (a Shutdown among them stops after the batch).
                // While no run is open, what the inputs queued for the core
                // goes every `FLUSH_AHEAD` inputs and `FLUSH_TAIL` before
                // the end, so the core applies it while the master takes
                // the rest (a run's thousand REVIVEs) and has little left
                // when the master is through.
                let mut stop = false;
                let len = inputs.len();
                for (i, input) in inputs.into_iter().enumerate() {
                    stop |= self.take_input(input, deferred);
                    if goes_ahead(i + 1, len - (i + 1)) && !self.run_open() {
                        self.core.flush_ahead();
                    }
                }
                tracing::trace!(target: "unisched::timeline", "master: the batch is applied");
                return stop;
            }
            input => input,
        };
        if !self.run_open() {
            self.apply_deferred(deferred);
        } else if !matches!(input, Input::Core(CoreUpdate::Allocation(..))) {
            deferred.push_back(input);
            return false;
        }
        self.apply_guarded(input)
    }

    /// Applies the inputs that waited for a run to close (never a
    /// Shutdown: that is taken at once).
    fn apply_deferred(&mut self, deferred: &mut VecDeque<Input>) {
        while let Some(input) = deferred.pop_front() {
            self.apply_guarded(input);
        }
    }

    /// Applies one input; true to stop.
    fn apply_guarded(&mut self, input: Input) -> bool {
        if matches!(input, Input::Shutdown) {
            return true;
        }
        self.guarded(|m| m.apply(input));
        false
    }

    fn apply(&mut self, input: Input) {
        match input {
            Input::Subscribe {
                subscribe,
                stream_id,
                sink,
                pid,
            } => self.subscribe(*subscribe, stream_id, sink, pid),
            Input::Call {
                call,
                stream_id,
                principal,
                reply,
            } => {
                let outcome = self.call(call, stream_id, principal.as_deref());
                let _ = reply.send(outcome);
            }
            Input::StreamClosed {
                framework,
                stream_id,
            } => self.stream_closed(&framework, &stream_id),
            Input::ProviderSubscribe {
                endpoint,
                subscribe,
                stream_id,
                sink,
            } => self.provider_subscribe(endpoint, *subscribe, stream_id, sink),
            Input::ProviderCall {
                endpoint,
                call,
                stream_id,
                reply,
            } => {
                let outcome = self.provider_call(endpoint, *call, stream_id);
                let _ = reply.send(outcome);
            }
            Input::ProviderClosed {
                provider,
                stream_id,
            } => self.provider_closed(&provider, &stream_id),
            Input::Core(update) => self.core_update(update),
            Input::Agent(update) => self.agent_update(update),
            Input::AddAgent { spec, reply } => {
                let id = self.add_agent(spec);
                if let Some(reply) = reply {
                    let _ = reply.send(id);
                }
            }
            Input::RemoveAgent(id) => self.remove_agent(&id, "agent removed"),
            Input::Query(q) => self.answer(q),
            Input::Config(text, reply) => {
                let _ = reply.send(self.apply_config(&text));
            }
            Input::Sync(reply) => {
                self.after_inputs();
                let _ = reply.send(self.core.sent);
            }
            // Expanded by `take_input`; applied in order were one to come
            // here.
            Input::Batch(inputs) => {
                for input in inputs {
                    self.apply(input);
                }
            }
            Input::Shutdown => {}
        }
    }

    fn apply_config(&mut self, text: &str) -> Result<(), String> {
        let patched =
            config::mesos_partition_with(Some(text), &self.settings.weights, &self.quotas)?;
        self.core
            .scheduler
            .set_config(RM_ID, &patched)
            .map_err(|e| e.to_string())?;
        self.config_text = Some(text.to_string());
        Ok(())
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Heartbeat(fw, generation) => self.heartbeat(&fw, generation),
            Timer::Failover(fw) => self.failover_timer(&fw),
            Timer::StatusRetry(fw, task) => self.retry_status(&fw, &task),
            Timer::OfferTimeout(offer) => self.offer_timed_out(offer),
            Timer::OperationRetry(uuid) => self.retry_operation_status(&uuid),
            Timer::PublishTimeout(uuid) => self.provider_publish_status(
                &uuid,
                crate::v1::resource_provider::call::update_publish_resources_status::Status::Unknown,
            ),
            Timer::LoggingRevert => self.logging_revert(),
            Timer::AllocationTick => {
                self.core.offers(vec![OfferChange::Allocate]);
                let tick = self.settings.allocation_interval;
                self.after(tick, Timer::AllocationTick);
            }
        }
    }

    fn core_update(&mut self, update: CoreUpdate) {
        match update {
            CoreUpdate::Allocation(leases, received) => self.allocation_response(leases, received),
            CoreUpdate::Application(response) => self.application_response(response),
            CoreUpdate::Node(response) => {
                for r in response.rejected {
                    tracing::warn!(agent = %r.node_id, reason = %r.reason, "the core refused an agent");
                }
            }
        }
    }

    /// Stops: agents kill their tasks.
    fn shutdown(&mut self) {
        for agent in self.agents.values() {
            agent.backend.stop();
        }
    }
}

#[cfg(test)]
mod batch_tests {
    #[test]
    fn a_batch_goes_ahead_every_flush_ahead_inputs_and_flush_tail_before_its_end() {
        let points = |len: usize| -> Vec<usize> {
            (1..=len)
                .filter(|&taken| super::goes_ahead(taken, len - taken))
                .collect()
        };
        // W4's thousand REVIVEs: the core has 64 inputs' changes left to
        // apply once the master is through, not 232.
        assert_eq!(points(1000), vec![256, 512, 768, 936]);
        assert_eq!(points(600), vec![256, 512, 536]);
        assert_eq!(points(64), Vec::<usize>::new());
        assert_eq!(points(65), vec![1]);
        assert_eq!(points(320), vec![256]);
    }
}
