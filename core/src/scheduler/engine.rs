//! The scheduling thread: sole owner of all mutable scheduling state.
//!
//! # Ownership
//! The [`Engine`] owns every partition (queues, applications, asks,
//! allocations, nodes, reservations) and the registered RMs. Nothing else can
//! reach them: API threads only send [`Command`]s down a channel and, for the
//! calls that wait, block on a reply channel. So the hot path takes no locks and
//! there is no lock order to get wrong. The only shared state is the resource
//! name registry (a read-mostly `RwLock`, never held across a call) and the set
//! of registered RM ids the API threads check (a concurrent set).
//!
//! # The loop
//! 1. Wait for a command (or a timer when the clock is real).
//! 2. Apply every command that is queued, in order.
//! 3. Fire timers (Completing applications whose grace is over).
//! 4. Run scheduling passes until one makes no allocation or its budget is used.
//! 5. Hand each partition's results to its RM's dispatcher (one response of a
//!    kind per pass).
//! 6. When nothing more can be scheduled, answer waiting settles and snapshots.
//! 7. When someone read recently, publish snapshots of every partition for
//!    readers (at most every `PUBLISH_INTERVAL`; see `observe.rs`), else mark
//!    the published view stale. The round's latency goes into the histogram.
//!
//! A panic while applying a command or scheduling is caught and logged; the loop
//! goes on. Callbacks never run here except `predicates` (see shim-api docs).

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use dashmap::DashSet;
use unisched_shim_api::{
    PREDICATES_EXTRA_CONFIG, ResourceManagerCallback, SchedulerError, SchedulerResult,
};
use unisched_si as si;

use super::SchedulerOptions;
use super::allocate::PassContext;
use super::command::{Command, PreparedAllocationRequest, PreparedAsk, PreparedNode};
use super::dispatch::{Dispatcher, Outgoing, guarded, panic_message};
use super::observe::{Observer, ObservingCallback, PUBLISH_INTERVAL, Published, RmConfig};
use super::partition::{AllocationBatch, ApplicationBatch, Partition};
use super::spin::{self, Polled};
use crate::config;
use crate::resources::{NameTable, ResourceNames};
use crate::snapshot::PartitionSnapshot;

thread_local! {
    static ON_SCHEDULING_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// True on the scheduling thread (where a waiting call would deadlock).
pub fn on_scheduling_thread() -> bool {
    ON_SCHEDULING_THREAD.with(Cell::get)
}

/// Configuration used when an RM registers without one: a root that everyone
/// may submit to, with a `default` leaf.
pub const DEFAULT_CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
";

struct RmEntry {
    callback: Arc<dyn ResourceManagerCallback>,
    dispatcher: Dispatcher,
    config_text: String,
    predicates: bool,
}

/// Waiting requests answered once scheduling is quiescent.
enum Deferred {
    Settle(Sender<()>),
    Snapshot(String, Sender<Option<PartitionSnapshot>>),
    Partitions(Sender<Vec<String>>),
}

/// The scheduling thread's state.
pub struct Engine {
    options: SchedulerOptions,
    names: Arc<ResourceNames>,
    table: NameTable,
    rms: HashMap<Arc<str>, RmEntry>,
    partitions: BTreeMap<Arc<str>, Partition>,
    registered: Arc<DashSet<String>>,
    deferred: Vec<Deferred>,
    next_wake: Option<u64>,
    observer: Arc<Observer>,
    /// State may have changed since the last publication.
    dirty: bool,
    last_publish: Option<Instant>,
}

/// Qualified partition name: `[rm]name`; an empty name means `default`.
pub fn qualify(rm_id: &str, name: &str) -> String {
    if name.starts_with('[') {
        name.to_string()
    } else if name.is_empty() {
        format!("[{rm_id}]default")
    } else {
        format!("[{rm_id}]{name}")
    }
}

impl Engine {
    /// A new engine.
    pub fn new(
        options: SchedulerOptions,
        names: Arc<ResourceNames>,
        registered: Arc<DashSet<String>>,
        observer: Arc<Observer>,
    ) -> Self {
        Self {
            options,
            names,
            table: NameTable::default(),
            rms: HashMap::new(),
            partitions: BTreeMap::new(),
            registered,
            deferred: Vec::new(),
            next_wake: None,
            observer,
            dirty: true,
            last_publish: None,
        }
    }

    fn now(&self) -> u64 {
        self.options.clock.now_nanos()
    }

    /// Runs until shutdown or until every sender is gone.
    pub fn run(mut self, rx: Receiver<Command>) {
        ON_SCHEDULING_THREAD.with(|c| c.set(true));
        let mut more_work = false;
        loop {
            let first = if more_work {
                rx.try_recv().ok()
            } else {
                match spin::poll_for(&rx, self.options.spin_before_park) {
                    Polled::Got(c) => Some(c),
                    Polled::Closed => break,
                    Polled::Nothing => match self.wait_duration() {
                        None => match rx.recv() {
                            Ok(c) => Some(c),
                            Err(_) => break,
                        },
                        Some(d) => match rx.recv_timeout(d) {
                            Ok(c) => Some(c),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break,
                        },
                    },
                }
            };
            let mut stop = false;
            if let Some(cmd) = first {
                stop |= self.apply_guarded(cmd);
                // Apply what else is queued, bounded so scheduling is not starved.
                for _ in 0..4096 {
                    match rx.try_recv() {
                        Ok(cmd) => stop |= self.apply_guarded(cmd),
                        Err(_) => break,
                    }
                }
            }
            if stop {
                break;
            }
            let now = self.now();
            for p in self.partitions.values_mut() {
                p.process_timers(now);
            }
            let started = Instant::now();
            more_work = self.schedule_guarded();
            self.observer.metrics.observe_pass(started.elapsed());
            self.flush();
            if !more_work {
                self.answer_deferred_guarded();
            }
            self.dirty = true;
            self.publish_guarded();
        }
        self.flush();
        self.answer_deferred_guarded();
        self.registered.clear();
    }

    /// How long to wait for a command before timers need attention.
    fn wait_duration(&self) -> Option<Duration> {
        let publish = self.publish_due_in();
        if self.options.clock.is_virtual() {
            return publish;
        }
        let timers = self.partitions.values().filter_map(Partition::next_timer);
        let Some(next) = timers.chain(self.next_wake).min() else {
            return publish;
        };
        let now = self.now();
        let timer = Duration::from_nanos(next.saturating_sub(now)).max(Duration::from_millis(1));
        Some(publish.map_or(timer, |p| p.min(timer)))
    }

    /// How long until a held-back publication is due (real time, whatever the
    /// clock), or `None` when none is waiting.
    fn publish_due_in(&self) -> Option<Duration> {
        let last = self.last_publish?;
        (self.dirty && self.observer.read_recently()).then(|| {
            PUBLISH_INTERVAL
                .saturating_sub(last.elapsed())
                .max(Duration::from_millis(1))
        })
    }

    /// Publishes snapshots for readers when someone read recently and the last
    /// publication is old enough; otherwise marks the published view stale.
    fn publish_guarded(&mut self) {
        if !self.dirty {
            return;
        }
        if !self.observer.read_recently() {
            self.observer.mark_stale();
            return;
        }
        if self
            .last_publish
            .is_some_and(|t| t.elapsed() < PUBLISH_INTERVAL)
        {
            // Held back: the view is at most PUBLISH_INTERVAL behind, and
            // `wait_duration` wakes the loop to publish.
            return;
        }
        self.table.refresh(&self.names);
        let built = catch_unwind(AssertUnwindSafe(|| {
            self.partitions
                .iter()
                .map(|(name, p)| (name.to_string(), Arc::new(p.snapshot(&self.table))))
                .collect::<Published>()
        }));
        match built {
            Ok(view) => self.observer.publish(view),
            Err(panic) => {
                tracing::error!(reason = %panic_message(panic.as_ref()), "publishing snapshots panicked");
                self.observer.mark_stale();
            }
        }
        self.dirty = false;
        self.last_publish = Some(Instant::now());
    }

    fn apply_guarded(&mut self, cmd: Command) -> bool {
        match catch_unwind(AssertUnwindSafe(|| self.apply(cmd))) {
            Ok(stop) => stop,
            Err(panic) => {
                tracing::error!(reason = %panic_message(panic.as_ref()), "applying a request panicked; state of the request may be partial");
                false
            }
        }
    }

    /// Applies one command; true to stop the loop.
    fn apply(&mut self, cmd: Command) -> bool {
        let now = self.now();
        // Names this request uses were interned before it was sent.
        let lanes = self.names.lanes();
        for p in self.partitions.values_mut() {
            p.now = now;
            p.lanes = lanes;
        }
        match cmd {
            Command::Register {
                request,
                callback,
                reply,
            } => {
                let _ = reply.send(self.register(request, callback));
            }
            Command::Allocation(req) => self.allocation_request(req, now),
            Command::Application(req) => self.application_request(req, now),
            Command::Node { rm_id, nodes } => self.node_request(&rm_id, nodes, now),
            Command::Offers(req) => self.offer_request(req, now),
            Command::UpdateConfiguration { rm_id, text, reply } => {
                let _ = reply.send(self.update_configuration(&rm_id, text, now));
            }
            Command::SetConfiguration {
                rm_id,
                text,
                reply,
                persisted,
            } => {
                let applied = self.update_configuration(&rm_id, Ok(text.clone()), now);
                if applied.is_ok()
                    && let Some(rm) = self.rms.get(rm_id.as_str())
                {
                    let policy_group = self
                        .observer
                        .config(&rm_id)
                        .map(|c| c.policy_group)
                        .unwrap_or_default();
                    let request = si::UpdateConfigurationRequest {
                        rm_id,
                        policy_group,
                        config: text,
                        extra_config: Default::default(),
                    };
                    rm.dispatcher
                        .send(Outgoing::Configuration(request, persisted));
                }
                let _ = reply.send(applied);
            }
            Command::Settle(tx) => self.deferred.push(Deferred::Settle(tx)),
            Command::Snapshot { partition, reply } => {
                self.deferred.push(Deferred::Snapshot(partition, reply))
            }
            Command::Partitions(reply) => self.deferred.push(Deferred::Partitions(reply)),
            Command::Tick => {}
            Command::Shutdown => return true,
        }
        false
    }

    fn register(
        &mut self,
        request: si::RegisterResourceManagerRequest,
        callback: Arc<dyn ResourceManagerCallback>,
    ) -> SchedulerResult<()> {
        let rm_id = request.rm_id.clone();
        if rm_id.is_empty() {
            return Err(SchedulerError::InvalidRequest {
                reason: "rmID is empty".to_string(),
            });
        }
        let text = if request.config.trim().is_empty() {
            DEFAULT_CONFIG.to_string()
        } else {
            request.config.clone()
        };
        let partitions = self.build_partitions(&rm_id, &text)?;
        // Re-registration wipes what the RM had: flush its old results first.
        if let Some(old) = self.rms.remove(rm_id.as_str()) {
            self.flush_rm(&rm_id, &old);
            drop(old);
        }
        self.partitions
            .retain(|_, p| p.rm_id.as_ref() != rm_id.as_str());
        for p in partitions {
            self.partitions.insert(p.name.clone(), p);
        }
        let predicates = request
            .extra_config
            .get(PREDICATES_EXTRA_CONFIG)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let observed = Arc::new(ObservingCallback::new(
            callback.clone(),
            self.observer.clone(),
        ));
        let dispatcher = Dispatcher::start(&rm_id, observed, self.options.spin_before_park);
        self.observer.set_config(
            &rm_id,
            RmConfig {
                policy_group: request.policy_group.clone(),
                text: text.clone(),
                build_info: request
                    .build_info
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
        );
        self.rms.insert(
            Arc::from(rm_id.as_str()),
            RmEntry {
                callback,
                dispatcher,
                config_text: text,
                predicates,
            },
        );
        self.registered.insert(rm_id.clone());
        tracing::info!(rm = %rm_id, "resource manager registered");
        Ok(())
    }

    fn build_partitions(&self, rm_id: &str, text: &str) -> SchedulerResult<Vec<Partition>> {
        let parsed = config::parse(text).map_err(|e| SchedulerError::InvalidConfiguration {
            reason: e.to_string(),
        })?;
        let mut out = Vec::new();
        for pc in parsed.partitions {
            let name: Arc<str> = Arc::from(qualify(rm_id, &pc.name));
            out.push(self.new_partition(name, rm_id, pc)?);
        }
        Ok(out)
    }

    /// A partition of `rm_id` built from `pc`, with the scheduler's timers.
    fn new_partition(
        &self,
        name: Arc<str>,
        rm_id: &str,
        pc: config::PartitionConfig,
    ) -> SchedulerResult<Partition> {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let mut p = Partition::new(name, Arc::from(rm_id), pc, self.names.clone())
            .map_err(|reason| SchedulerError::InvalidConfiguration { reason })?;
        p.completing_timeout = nanos(self.options.completing_timeout);
        p.queue_cleanup_interval = nanos(self.options.queue_cleanup_interval).max(1);
        p.completed_apps_kept = self.options.completed_apps_kept;
        Ok(p)
    }

    fn update_configuration(
        &mut self,
        rm_id: &str,
        text: Result<String, String>,
        now: u64,
    ) -> SchedulerResult<()> {
        let Some(rm) = self.rms.get(rm_id) else {
            return Err(SchedulerError::UnknownResourceManager {
                rm_id: rm_id.to_string(),
            });
        };
        let text = match text {
            Ok(t) => t,
            Err(reason) if reason.is_empty() => rm.config_text.clone(),
            Err(reason) => {
                return Err(SchedulerError::ConfigurationUnavailable {
                    cluster_id: rm_id.to_string(),
                    reason,
                });
            }
        };
        // The same text again changes nothing (YuniKorn compares checksums).
        if config::checksum(&text) == config::checksum(&rm.config_text) {
            return Ok(());
        }
        let parsed = config::parse(&text).map_err(|e| SchedulerError::InvalidConfiguration {
            reason: e.to_string(),
        })?;
        // Check every partition converts before changing any.
        for pc in &parsed.partitions {
            Partition::new(
                Arc::from("check"),
                Arc::from(rm_id),
                pc.clone(),
                self.names.clone(),
            )
            .map_err(|reason| SchedulerError::InvalidConfiguration { reason })?;
        }
        for pc in parsed.partitions {
            let name = qualify(rm_id, &pc.name);
            match self.partitions.get_mut(name.as_str()) {
                Some(p) => p
                    .apply_config(pc, now)
                    .map_err(|reason| SchedulerError::InvalidConfiguration { reason })?,
                None => {
                    let name: Arc<str> = Arc::from(name);
                    let p = self.new_partition(name.clone(), rm_id, pc)?;
                    self.partitions.insert(name, p);
                }
            }
        }
        self.observer.set_config_text(rm_id, &text);
        if let Some(rm) = self.rms.get_mut(rm_id) {
            rm.config_text = text;
        }
        Ok(())
    }

    /// The partition an RM means by `name` (plain, qualified, or empty for
    /// `default`). A scan of a handful of partitions, without building the
    /// qualified name: this runs once per ask.
    fn partition_mut(&mut self, rm_id: &str, name: &str) -> Option<&mut Partition> {
        let key = self.partition_key(rm_id, name)?;
        self.partitions.get_mut(&key)
    }

    /// The map key of the RM's partition called `name` (plain or qualified).
    fn partition_key(&self, rm_id: &str, name: &str) -> Option<Arc<str>> {
        let name = if name.is_empty() { "default" } else { name };
        if name.starts_with('[') {
            return self.partitions.get_key_value(name).map(|(k, _)| k.clone());
        }
        self.partitions
            .iter()
            .find(|(_, p)| p.rm_id.as_ref() == rm_id && p.plain_name() == name)
            .map(|(k, _)| k.clone())
    }

    fn allocation_request(&mut self, req: PreparedAllocationRequest, now: u64) {
        let rm_id = req.rm_id.clone();
        let mut last = LastPartition::default();
        let total = req.asks.len();
        for (i, asks) in req.asks.into_iter().enumerate() {
            let (key, fresh) = last.key(self, &rm_id, &asks.partition_name);
            if fresh {
                // Room for the rest of the batch at once: the ask arena
                // would otherwise double (and copy) its way up to it.
                if let Some(p) = key.as_ref().and_then(|k| self.partitions.get_mut(k)) {
                    p.asks.reserve(total - i);
                }
            }
            match key.and_then(|k| self.partitions.get_mut(&k)) {
                Some(p) => p.update_ask(asks, now),
                None => self.reject_ask_no_partition(&rm_id, asks),
            }
        }
        for (alloc, res) in req.allocations {
            match self.partition_mut(&rm_id, &alloc.partition_name) {
                Some(p) => p.recover_allocation(alloc, res, now),
                None => {
                    let reason = format!("partition {:?} does not exist", alloc.partition_name);
                    self.with_any_partition(&rm_id, |p| {
                        p.outbox
                            .allocation
                            .rejected_allocations
                            .push(si::RejectedAllocation {
                                allocation_key: alloc.allocation_key.clone(),
                                application_id: alloc.application_id.clone(),
                                reason,
                            })
                    });
                }
            }
        }
        let mut last = LastPartition::default();
        let total = req.releases.allocations_to_release.len();
        for (i, rel) in req.releases.allocations_to_release.into_iter().enumerate() {
            let (key, fresh) = last.key(self, &rm_id, &rel.partition_name);
            if fresh {
                // Each release is reported back with an event: room for the
                // rest of the batch at once, as for the asks, and for the
                // events of applications the releases leave with nothing
                // (one more event would double a full list: a copy of it).
                if let Some(p) = key.as_ref().and_then(|k| self.partitions.get_mut(k)) {
                    let rest = total - i;
                    p.outbox.released.reserve(rest);
                    p.outbox.events.reserve(rest + rest / 4 + 16);
                }
            }
            match key.and_then(|k| self.partitions.get_mut(&k)) {
                Some(p) => p.release_allocations(rel, now),
                None => {
                    let reason = format!(
                        "cannot release: partition {:?} does not exist",
                        rel.partition_name
                    );
                    self.with_any_partition(&rm_id, |p| {
                        p.outbox
                            .allocation
                            .rejected_allocations
                            .push(si::RejectedAllocation {
                                allocation_key: rel.allocation_key.clone(),
                                application_id: rel.application_id.clone(),
                                reason,
                            })
                    });
                }
            }
        }
        for rel in req.releases.allocation_asks_to_release {
            match self.partition_mut(&rm_id, &rel.partition_name) {
                Some(p) => p.release_asks(rel, now),
                None => {
                    let reason = format!(
                        "cannot release ask: partition {:?} does not exist",
                        rel.partition_name
                    );
                    self.with_any_partition(&rm_id, |p| {
                        p.outbox
                            .allocation
                            .rejected
                            .push(si::RejectedAllocationAsk {
                                allocation_key: rel.allocation_key.clone(),
                                application_id: rel.application_id.clone(),
                                reason,
                            })
                    });
                }
            }
        }
    }

    fn reject_ask_no_partition(&mut self, rm_id: &str, ask: PreparedAsk) {
        let reason = format!(
            "ask {}: partition {:?} does not exist",
            ask.key, ask.partition_name
        );
        self.with_any_partition(rm_id, |p| {
            p.outbox
                .allocation
                .rejected
                .push(si::RejectedAllocationAsk {
                    allocation_key: String::from(&*ask.key),
                    application_id: ask.application_id,
                    reason,
                })
        });
    }

    /// Runs `f` on some partition of the RM, to carry a rejection in its outbox.
    fn with_any_partition(&mut self, rm_id: &str, f: impl FnOnce(&mut Partition)) {
        if let Some(p) = self
            .partitions
            .values_mut()
            .find(|p| p.rm_id.as_ref() == rm_id)
        {
            f(p);
        }
    }

    fn application_request(&mut self, req: si::ApplicationRequest, now: u64) {
        let rm_id = req.rm_id.clone();
        for add in req.new {
            match self.partition_mut(&rm_id, &add.partition_name) {
                Some(p) => p.add_application(add, now),
                None => {
                    let reason = format!("partition {:?} does not exist", add.partition_name);
                    self.with_any_partition(&rm_id, |p| {
                        p.outbox.application.rejected.push(si::RejectedApplication {
                            application_id: add.application_id.clone(),
                            reason,
                        })
                    });
                }
            }
        }
        for remove in req.remove {
            match self.partition_mut(&rm_id, &remove.partition_name) {
                Some(p) => p.remove_application(&remove.application_id, now),
                None => {
                    let reason = format!(
                        "cannot remove application: partition {:?} does not exist",
                        remove.partition_name
                    );
                    self.with_any_partition(&rm_id, |p| {
                        p.outbox.application.rejected.push(si::RejectedApplication {
                            application_id: remove.application_id.clone(),
                            reason,
                        })
                    });
                }
            }
        }
    }

    fn offer_request(&mut self, req: super::offers::PreparedOffers, now: u64) {
        let (rm_id, name) = (req.rm_id, req.partition_name);
        match self.partition_mut(&rm_id, &name) {
            Some(p) => p.apply_offers(req.changes, now),
            None => {
                let reason = format!("offers: partition {name:?} does not exist");
                self.with_any_partition(&rm_id, |p| {
                    p.outbox
                        .allocation
                        .rejected
                        .push(si::RejectedAllocationAsk {
                            allocation_key: String::new(),
                            application_id: String::new(),
                            reason,
                        })
                });
            }
        }
    }

    fn node_request(&mut self, rm_id: &str, nodes: Vec<PreparedNode>, now: u64) {
        for node in nodes {
            let named = node
                .info
                .attributes
                .get(si::NODE_PARTITION_ATTRIBUTE)
                .cloned();
            let target = match named {
                Some(name) => qualify(rm_id, &name),
                None => self
                    .partitions
                    .values()
                    .find(|p| {
                        p.rm_id.as_ref() == rm_id
                            && p.node_by_id.contains_key(node.info.node_id.as_str())
                    })
                    .map(|p| p.name.to_string())
                    .unwrap_or_else(|| qualify(rm_id, "default")),
            };
            match self.partitions.get_mut(target.as_str()) {
                Some(p) => p.node_action(node, now),
                None => {
                    let reason = format!(
                        "node {}: partition {target} does not exist",
                        node.info.node_id
                    );
                    self.with_any_partition(rm_id, |p| {
                        p.outbox.node.rejected.push(si::RejectedNode {
                            node_id: node.info.node_id.clone(),
                            reason,
                        })
                    });
                }
            }
        }
    }

    /// Schedules every partition; true when a budget ran out (more may fit).
    fn schedule_guarded(&mut self) -> bool {
        self.table.refresh(&self.names);
        let now = self.now();
        let budget = self.options.max_allocations_per_pass.max(1);
        let delay = u64::try_from(self.options.reservation_delay.as_nanos()).unwrap_or(u64::MAX);
        let reservation_timeout =
            u64::try_from(self.options.reservation_timeout.as_nanos()).unwrap_or(u64::MAX);
        let mut more = false;
        self.next_wake = None;
        for p in self.partitions.values_mut() {
            let predicates_cb = self
                .rms
                .get(&p.rm_id)
                .filter(|rm| rm.predicates)
                .map(|rm| rm.callback.clone());
            let pred_fn = predicates_cb.as_ref().map(|cb| {
                move |args: &si::PredicatesArgs| guarded(|| cb.predicates(args.clone())).is_ok()
            });
            let pred_ref: Option<&dyn Fn(&si::PredicatesArgs) -> bool> = pred_fn
                .as_ref()
                .map(|f| f as &dyn Fn(&si::PredicatesArgs) -> bool);
            // An offer partition's pass is one whole allocation run.
            let budget = if p.offers.is_some() {
                usize::MAX
            } else {
                budget
            };
            let mut ctx = PassContext::new(now, budget, delay, pred_ref);
            ctx.reservation_timeout = reservation_timeout;
            // An offer run goes to its RM in parts while it is made: from
            // this thread, when the RM takes runs inline and nothing it was
            // sent before is still on its way to it.
            let rm = self.rms.get(&p.rm_id).filter(|_| p.offers.is_some());
            p.parts_inline = rm
                .as_ref()
                .is_some_and(|rm| rm.dispatcher.can_deliver_inline());
            let inline = p.parts_inline;
            let mut send_part = rm.map(|rm| {
                let (dispatcher, name) = (&rm.dispatcher, p.plain_name().to_string());
                move |out| send_outbox(dispatcher, out, &name, RunPart::More, inline)
            });
            ctx.send_part = send_part
                .as_mut()
                .map(|f| f as &mut dyn FnMut(super::partition::Outbox));
            let result = catch_unwind(AssertUnwindSafe(|| p.schedule(&mut ctx)));
            p.end_offer_run();
            match result {
                // A reservation freed mid-pass may let asks the pass already
                // passed over fit: schedule again before calling it quiet.
                Ok(made) => more |= made >= budget || p.freed_in_pass,
                Err(panic) => {
                    tracing::error!(partition = %p.name, reason = %panic_message(panic.as_ref()), "scheduling pass panicked");
                    p.abandon_pass();
                }
            }
            if let Some(w) = ctx.next_wake {
                self.next_wake = Some(self.next_wake.map_or(w, |x| x.min(w)));
            }
        }
        more
    }

    /// Hands every partition's results to its RM's dispatcher.
    fn flush(&mut self) {
        for p in self.partitions.values_mut() {
            let in_parts = std::mem::take(&mut p.parts_sent) > 0;
            let inline = std::mem::take(&mut p.parts_inline) && in_parts;
            if p.outbox.is_empty() && !in_parts {
                continue;
            }
            let out = std::mem::take(&mut p.outbox);
            let Some(rm) = self.rms.get(&p.rm_id) else {
                continue;
            };
            let part = if in_parts {
                RunPart::Last
            } else {
                RunPart::Whole
            };
            send_outbox(&rm.dispatcher, out, p.plain_name(), part, inline);
        }
        // The pass's lease ids go into their map now that its results are
        // on their way (the map's writes no longer before the last part).
        // So does the end of a pass whose offer run went out in parts.
        for p in self.partitions.values_mut() {
            p.file_ids();
            if p.finish_after_flush
                && let Err(panic) = catch_unwind(AssertUnwindSafe(|| p.finish_pass()))
            {
                tracing::error!(partition = %p.name, reason = %panic_message(panic.as_ref()), "ending a scheduling pass panicked");
                p.abandon_pass();
            }
        }
    }

    fn flush_rm(&mut self, rm_id: &str, rm: &RmEntry) {
        for p in self.partitions.values_mut() {
            if p.rm_id.as_ref() == rm_id && !p.outbox.is_empty() {
                let out = std::mem::take(&mut p.outbox);
                send_outbox(&rm.dispatcher, out, p.plain_name(), RunPart::Whole, false);
            }
        }
    }

    fn answer_deferred_guarded(&mut self) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.answer_deferred())) {
            tracing::error!(reason = %panic_message(panic.as_ref()), "answering a snapshot or settle panicked");
            // Dropping what is left answers the waiters (with nothing).
            self.deferred.clear();
        }
    }

    fn answer_deferred(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        self.table.refresh(&self.names);
        for d in std::mem::take(&mut self.deferred) {
            match d {
                Deferred::Settle(token) => {
                    for rm in self.rms.values() {
                        rm.dispatcher.send(Outgoing::Barrier(token.clone()));
                    }
                    drop(token);
                }
                Deferred::Snapshot(name, reply) => {
                    let _ = reply.send(self.find_partition(&name).map(|p| p.snapshot(&self.table)));
                }
                Deferred::Partitions(reply) => {
                    let _ = reply.send(self.partitions.keys().map(|k| k.to_string()).collect());
                }
            }
        }
    }

    fn find_partition(&self, name: &str) -> Option<&Partition> {
        if let Some(p) = self.partitions.get(name) {
            return Some(p);
        }
        let mut matches = self.partitions.values().filter(|p| p.plain_name() == name);
        let first = matches.next()?;
        matches.next().is_none().then_some(first)
    }
}

/// The last partition name a request's items named, and its map key: the
/// asks and releases of one request nearly always name one partition, so it
/// is resolved once per distinct name in a row, not once per item.
#[derive(Default)]
struct LastPartition(Option<(String, Option<Arc<str>>)>);

impl LastPartition {
    /// The key of `name` for `rm_id`, and whether it was looked up afresh.
    fn key(&mut self, engine: &Engine, rm_id: &str, name: &str) -> (Option<Arc<str>>, bool) {
        if let Some((last, key)) = &self.0
            && last == name
        {
            return (key.clone(), false);
        }
        let key = engine.partition_key(rm_id, name);
        self.0 = Some((name.to_string(), key.clone()));
        (key, true)
    }
}

/// Which part of a pass's results an outbox is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RunPart {
    /// All of them.
    Whole,
    /// A part of an offer run, more to follow.
    More,
    /// The last part of an offer run sent in parts: its allocation response
    /// goes out even when empty, to end the run.
    Last,
}

/// Sends a partition's results to its RM's dispatcher; with `inline` (only
/// ever for a part of a run), the allocation results go to the RM from this
/// thread ([`Dispatcher::deliver_inline`]).
fn send_outbox(
    dispatcher: &Dispatcher,
    out: super::partition::Outbox,
    partition_name: &str,
    part: RunPart,
    inline: bool,
) {
    let (nodes, apps) = (out.has_node(), out.has_application());
    let allocs = out.has_allocation() || part == RunPart::Last;
    if nodes {
        dispatcher.send(Outgoing::Node(out.node));
    }
    if apps {
        dispatcher.send(Outgoing::Application(ApplicationBatch {
            response: out.application,
            states: out.app_states,
        }));
    }
    if allocs {
        let batch = AllocationBatch {
            response: out.allocation,
            placed: out.placed,
            released: out.released,
            partition_name: partition_name.to_string(),
            partial: part == RunPart::More,
        };
        if inline {
            dispatcher.deliver_inline(batch);
        } else {
            dispatcher.send(Outgoing::Allocation(batch));
        }
    }
    for s in out.states {
        dispatcher.send(Outgoing::State(s));
    }
    if !out.events.is_empty() {
        dispatcher.send(Outgoing::Events(out.events));
    }
}
