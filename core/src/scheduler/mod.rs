//! The scheduler handle: the in-process implementation of `SchedulerApi`.
//!
//! API calls run on the caller's thread: they check what needs no scheduling
//! state (the RM is registered), convert resources to dense vectors, and send a
//! command to the scheduling thread (`engine.rs`), which owns all state. Calls
//! that wait block on a reply channel; calling them from the scheduling thread
//! (inside `predicates`) is refused rather than deadlocking.
//!
//! # Observing without a round trip
//! [`Scheduler::published`] and [`Scheduler::published_all`] read snapshots the
//! loop publishes (see `observe.rs`): a read costs an atomic load, never waits
//! for the loop, and sees a state at most about 100 ms old while someone keeps
//! reading. When nobody read for a while the loop stops publishing; the first
//! read after that takes a fresh snapshot through the loop instead.
//! [`Scheduler::events_since`] and [`Scheduler::subscribe_events`] read the last
//! events sent to RMs; [`Scheduler::metrics`] the counters.
//!
//! # Configuration changed through the core
//! [`Scheduler::config`] is the text an RM runs with. [`Scheduler::set_config`]
//! validates a new text and applies it between two passes exactly like
//! `update_configuration` (an invalid text is an error and the old one stays);
//! once applied, the RM's dispatcher thread (never the scheduling thread) asks
//! the RM to persist it through `ResourceManagerCallback::update_configuration`,
//! and `set_config` returns the RM's answer. An RM that refuses or fails to
//! persist does not undo the change in memory: the answer says so, and the RM's
//! own source wins at its next `update_configuration` or registration.

mod allocate;
#[doc(hidden)]
pub mod bench_support;
mod command;
mod dispatch;
mod engine;
mod gang;
mod heap;
mod limits;
mod objects;
pub mod observe;
pub mod offers;
mod ops;
mod partition;
mod placeholder_timeout;
mod preempt;
mod spin;

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Sender, bounded, unbounded};
use dashmap::DashSet;
use unisched_shim_api::{ResourceManagerCallback, SchedulerApi, SchedulerError, SchedulerResult};
use unisched_si as si;

use crate::clock::{Clock, SystemClock};
use crate::resources::ResourceNames;
use crate::snapshot::PartitionSnapshot;
use command::Command;
pub use dispatch::thread_name;
pub use engine::{DEFAULT_CONFIG, qualify};
use observe::{EventBatch, Metrics, ObservedEvent, Observer};
pub use preempt::PREEMPTED_FOR;

/// Where `update_configuration(cluster_id)` reads a cluster's queue configuration.
pub trait ConfigSource: Send + Sync {
    /// The current configuration text of `cluster_id`, or why it cannot be read.
    fn load(&self, cluster_id: &str) -> Result<String, String>;
}

/// Settings of a [`Scheduler`].
#[derive(Clone)]
pub struct SchedulerOptions {
    /// The clock; a `ManualClock` makes time virtual.
    pub clock: Arc<dyn Clock>,
    /// Source of configurations for `update_configuration`. Without one, the
    /// text given at registration is re-applied.
    pub config_source: Option<Arc<dyn ConfigSource>>,
    /// How long an app stays Completing before it is Completed.
    pub completing_timeout: Duration,
    /// How long an ask waits without fitting any node before it reserves one.
    pub reservation_delay: Duration,
    /// How long a reservation is kept while the queue (or user) headroom
    /// does not fit its ask; then it is cancelled and the node is free for
    /// other asks again. Default 60 s; `Duration::MAX` turns it off.
    pub reservation_timeout: Duration,
    /// Most allocations made before the loop looks for new requests and sends
    /// results out (bounds callback latency under load).
    pub max_allocations_per_pass: usize,
    /// How often a partition removes its empty draining queues and empty
    /// dynamic queues (upstream's partition manager: every 10 s).
    pub queue_cleanup_interval: Duration,
    /// How many finished applications a partition keeps for readers
    /// (snapshots, REST), newest last.
    pub completed_apps_kept: usize,
    /// How long the scheduling thread, the callback threads and `settle`
    /// poll their channel before they park (zero: they park at once). For a
    /// caller that hands the core one batch at a time and waits for it, as
    /// `unisched simulate` does: see `spin.rs`.
    pub spin_before_park: Duration,
    /// Pins the scheduling thread to this CPU (`unisched serve
    /// --pin-threads`; see [`crate::affinity`]). `None` (the default): the
    /// kernel places it.
    pub cpu: Option<usize>,
}

/// A [`SchedulerOptions::spin_before_park`] for a caller that drives the
/// core one step at a time on a virtual clock and waits for each (`unisched
/// simulate`, the soaks): longer than a step's hand-offs take, short enough
/// that an idle core parks within a third of a millisecond.
pub const STEPPED_SPIN: Duration = Duration::from_micros(300);

/// Default of [`SchedulerOptions::queue_cleanup_interval`].
pub const DEFAULT_QUEUE_CLEANUP_INTERVAL: Duration = Duration::from_secs(10);

/// Default of [`SchedulerOptions::reservation_timeout`].
pub const DEFAULT_RESERVATION_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            config_source: None,
            completing_timeout: Duration::from_secs(30),
            reservation_delay: Duration::from_secs(2),
            reservation_timeout: DEFAULT_RESERVATION_TIMEOUT,
            max_allocations_per_pass: 512,
            queue_cleanup_interval: DEFAULT_QUEUE_CLEANUP_INTERVAL,
            completed_apps_kept: 10_000,
            spin_before_park: Duration::ZERO,
            cpu: None,
        }
    }
}

impl std::fmt::Debug for SchedulerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerOptions")
            .field("clock", &self.clock)
            .field("completing_timeout", &self.completing_timeout)
            .field("reservation_delay", &self.reservation_delay)
            .field("reservation_timeout", &self.reservation_timeout)
            .field("max_allocations_per_pass", &self.max_allocations_per_pass)
            .field("queue_cleanup_interval", &self.queue_cleanup_interval)
            .field("completed_apps_kept", &self.completed_apps_kept)
            .field("spin_before_park", &self.spin_before_park)
            .field("cpu", &self.cpu)
            .finish_non_exhaustive()
    }
}

struct Inner {
    tx: Sender<Command>,
    names: Arc<ResourceNames>,
    registered: Arc<DashSet<String>>,
    observer: Arc<Observer>,
    options: SchedulerOptions,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Shutdown);
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }
}

/// The in-process scheduler core. Cheap to clone; every clone talks to the same
/// scheduling thread. Dropping the last clone shuts it down.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Starts the scheduling thread.
    pub fn start(options: SchedulerOptions) -> Self {
        let (tx, rx) = unbounded();
        let names = Arc::new(ResourceNames::new());
        let registered = Arc::new(DashSet::new());
        let observer = Arc::new(Observer::default());
        let engine = engine::Engine::new(
            options.clone(),
            names.clone(),
            registered.clone(),
            observer.clone(),
        );
        let cpu = options.cpu;
        let thread = std::thread::Builder::new()
            .name("unisched-scheduler".to_string())
            .spawn(move || {
                crate::affinity::pin_or_warn(cpu, "unisched-scheduler");
                engine.run(rx)
            })
            .expect("the scheduling thread must start");
        Self {
            inner: Arc::new(Inner {
                tx,
                names,
                registered,
                observer,
                options,
                thread: std::sync::Mutex::new(Some(thread)),
            }),
        }
    }

    fn send(&self, cmd: Command) -> SchedulerResult<()> {
        self.inner
            .tx
            .send(cmd)
            .map_err(|_| SchedulerError::ShutDown)
    }

    fn check_registered(&self, rm_id: &str) -> SchedulerResult<()> {
        if self.inner.registered.contains(rm_id) {
            Ok(())
        } else {
            Err(SchedulerError::UnknownResourceManager {
                rm_id: rm_id.to_string(),
            })
        }
    }

    fn check_wait_allowed(call: &'static str) -> SchedulerResult<()> {
        if engine::on_scheduling_thread() {
            Err(SchedulerError::Reentrant { call })
        } else {
            Ok(())
        }
    }

    /// Waits until every request sent before this call has been applied, the
    /// loop has scheduled until nothing more can be placed, and every callback
    /// that produced has been delivered. Returns at once on the scheduling thread.
    pub fn settle(&self) {
        if engine::on_scheduling_thread() {
            return;
        }
        let (tx, rx) = bounded::<()>(0);
        if self.send(Command::Settle(tx)).is_err() {
            return;
        }
        // Every holder of the token drops it when done; recv fails then.
        if let spin::Polled::Closed = spin::poll_for(&rx, self.inner.options.spin_before_park) {
            return;
        }
        while rx.recv().is_ok() {}
    }

    /// Tells the loop to look at the clock again (after advancing a virtual clock).
    pub fn wake(&self) {
        let _ = self.send(Command::Tick);
    }

    /// The clock this scheduler reads.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.inner.options.clock.clone()
    }

    /// A snapshot of a partition, by qualified name (`[rmID]name`) or by plain
    /// name when only one RM has it, taken once scheduling is quiescent. `None`
    /// when there is no such partition.
    pub fn snapshot(&self, partition: &str) -> Option<PartitionSnapshot> {
        if engine::on_scheduling_thread() {
            return None;
        }
        let (tx, rx) = bounded(1);
        self.send(Command::Snapshot {
            partition: partition.to_string(),
            reply: tx,
        })
        .ok()?;
        rx.recv().ok().flatten()
    }

    /// Qualified names of all partitions.
    pub fn partitions(&self) -> Vec<String> {
        if engine::on_scheduling_thread() {
            return Vec::new();
        }
        let (tx, rx) = bounded(1);
        if self.send(Command::Partitions(tx)).is_err() {
            return Vec::new();
        }
        rx.recv().unwrap_or_default()
    }

    /// The published snapshot of a partition (qualified name, or plain name
    /// when only one RM has it), without waiting for the loop unless the
    /// published view is stale (see the module docs). `None` when there is no
    /// such partition.
    pub fn published(&self, partition: &str) -> Option<Arc<PartitionSnapshot>> {
        match self.inner.observer.view() {
            Some(view) => observe::find(&view, partition),
            None => self.snapshot(partition).map(Arc::new),
        }
    }

    /// Published snapshots of every partition, by qualified name.
    pub fn published_all(&self) -> Vec<Arc<PartitionSnapshot>> {
        match self.inner.observer.view() {
            Some(view) => view.values().cloned().collect(),
            None => self
                .partitions()
                .iter()
                .filter_map(|p| self.snapshot(p).map(Arc::new))
                .collect(),
        }
    }

    /// Events sent to RMs with an id of at least `id` (at most `limit`), from
    /// a history of the last `observe::EVENT_HISTORY`.
    pub fn events_since(&self, id: u64, limit: usize) -> EventBatch {
        self.inner.observer.events_since(id, limit)
    }

    /// A live feed of the events sent to RMs from now on. The feed disconnects
    /// when its reader falls `observe::SUBSCRIBER_BACKLOG` events behind, so a
    /// slow reader never holds anything up.
    pub fn subscribe_events(&self) -> crossbeam_channel::Receiver<ObservedEvent> {
        self.inner.observer.subscribe()
    }

    /// The counters (allocations, applications, nodes, pass latency).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.observer.metrics
    }

    /// Ids of the registered RMs, sorted.
    pub fn resource_managers(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.inner.registered.iter().map(|r| r.clone()).collect();
        ids.sort();
        ids
    }

    /// The configuration text `rm_id` runs with, or `None` for an unknown RM.
    pub fn config(&self, rm_id: &str) -> Option<String> {
        self.check_registered(rm_id).ok()?;
        self.inner.observer.config(rm_id).map(|c| c.text)
    }

    /// The build information `rm_id` gave at registration, or `None` for an
    /// unknown RM.
    pub fn build_info(&self, rm_id: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.check_registered(rm_id).ok()?;
        self.inner.observer.config(rm_id).map(|c| c.build_info)
    }

    /// Applies `text` as the configuration of `rm_id`, then asks the RM to
    /// persist it and returns its answer (see the module docs). Errors: unknown
    /// RM, invalid configuration (nothing changed), shut down, reentrant call.
    pub fn set_config(
        &self,
        rm_id: &str,
        text: &str,
    ) -> SchedulerResult<si::UpdateConfigurationResponse> {
        Self::check_wait_allowed("set_config")?;
        self.check_registered(rm_id)?;
        let (tx, rx) = bounded(1);
        let (persisted_tx, persisted_rx) = bounded(1);
        self.send(Command::SetConfiguration {
            rm_id: rm_id.to_string(),
            text: text.to_string(),
            reply: tx,
            persisted: persisted_tx,
        })?;
        rx.recv().map_err(|_| SchedulerError::ShutDown)??;
        let answer = persisted_rx
            .recv()
            .unwrap_or_else(|_| Err("the RM's callback thread is gone".to_string()));
        Ok(
            answer.unwrap_or_else(|reason| si::UpdateConfigurationResponse {
                success: false,
                old_config: String::new(),
                reason,
            }),
        )
    }

    /// Offer demand, decline filters and the offer policy of an offer-based
    /// RM (see [`offers`]). Returns at once; a change naming an unknown
    /// application comes back as a rejected ask keyed by the application id.
    pub fn update_offers(&self, request: offers::OfferRequest) -> SchedulerResult<()> {
        self.check_registered(&request.rm_id)?;
        let prepared = offers::prepare(&self.inner.names, request);
        self.send(Command::Offers(prepared))
    }

    /// Stops the scheduling thread; later calls return `SchedulerError::ShutDown`.
    pub fn shutdown(&self) {
        let _ = self.send(Command::Shutdown);
    }
}

impl SchedulerApi for Scheduler {
    fn register_resource_manager(
        &self,
        request: si::RegisterResourceManagerRequest,
        callback: Arc<dyn ResourceManagerCallback>,
    ) -> SchedulerResult<si::RegisterResourceManagerResponse> {
        Self::check_wait_allowed("register_resource_manager")?;
        let (tx, rx) = bounded(1);
        self.send(Command::Register {
            request,
            callback,
            reply: tx,
        })?;
        rx.recv().map_err(|_| SchedulerError::ShutDown)??;
        Ok(si::RegisterResourceManagerResponse {})
    }

    fn update_allocation(&self, request: si::AllocationRequest) -> SchedulerResult<()> {
        self.check_registered(&request.rm_id)?;
        let prepared = command::prepare_allocation_request(&self.inner.names, request);
        self.send(Command::Allocation(prepared))
    }

    fn update_application(&self, request: si::ApplicationRequest) -> SchedulerResult<()> {
        self.check_registered(&request.rm_id)?;
        self.send(Command::Application(request))
    }

    fn update_node(&self, request: si::NodeRequest) -> SchedulerResult<()> {
        self.check_registered(&request.rm_id)?;
        let rm_id = request.rm_id.clone();
        let nodes = command::prepare_nodes(&self.inner.names, request);
        self.send(Command::Node { rm_id, nodes })
    }

    fn update_configuration(&self, cluster_id: &str) -> SchedulerResult<()> {
        Self::check_wait_allowed("update_configuration")?;
        self.check_registered(cluster_id)?;
        // Read the source on the caller's thread: the core does no I/O of its own.
        let text = match &self.inner.options.config_source {
            Some(source) => source.load(cluster_id),
            None => Err(String::new()),
        };
        let (tx, rx) = bounded(1);
        self.send(Command::UpdateConfiguration {
            rm_id: cluster_id.to_string(),
            text,
            reply: tx,
        })?;
        rx.recv().map_err(|_| SchedulerError::ShutDown)?
    }
}
