//! Observability shared by the scheduling thread and readers: published
//! partition snapshots, a bounded event history with live subscribers, and
//! counters. Everything here is cheap for the loop when nobody reads.
//!
//! # Who writes what
//! - Published snapshots: only the scheduling thread stores them (one
//!   `ArcSwap`); readers load an `Arc` and never block the loop. The loop
//!   publishes only while someone read within [`READ_RECENTLY`], at most once per
//!   [`PUBLISH_INTERVAL`]; when it stopped publishing it marks the view stale and
//!   the next reader asks the loop for a fresh snapshot instead.
//! - Events and counters: the per-RM dispatcher threads, through
//!   [`ObservingCallback`], as they deliver results (so the loop copies nothing).
//!   The scheduling thread only adds pass latencies.
//! - Configuration texts: the scheduling thread, when it applies one.
//!
//! Locks here (the event log, the config map, the app state map) are leaves:
//! held for a copy, never across a call or another lock.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use unisched_shim_api::{CallbackResult, Leases, ResourceManagerCallback};
use unisched_si as si;

use crate::snapshot::PartitionSnapshot;

/// Events kept for `events_since`.
pub const EVENT_HISTORY: usize = 10_000;
/// Events a subscriber may fall behind by before it is cut off.
pub const SUBSCRIBER_BACKLOG: usize = 10_000;
/// Least time between two publications of snapshots.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);
/// How long after a read the loop keeps publishing.
pub const READ_RECENTLY: Duration = Duration::from_secs(10);
/// Upper bounds (milliseconds) of the scheduling latency histogram buckets.
pub const LATENCY_BUCKETS_MS: [f64; 8] = [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10_000.0, f64::MAX];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One event of the history, with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedEvent {
    /// Position in the history: ids increase by one per event, from 0.
    pub id: u64,
    /// The event as it went to the RM.
    pub record: si::EventRecord,
}

/// A slice of the event history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventBatch {
    /// Lowest id still kept (older ones were dropped from the ring).
    pub lowest_id: u64,
    /// Id the next event will get.
    pub next_id: u64,
    /// The events asked for, oldest first.
    pub events: Vec<ObservedEvent>,
}

struct EventLog {
    next_id: u64,
    ring: VecDeque<ObservedEvent>,
    subscribers: Vec<Sender<ObservedEvent>>,
}

/// Counters read by the metrics endpoint. Monotonic unless stated otherwise.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Allocations made.
    pub allocated: AtomicU64,
    /// Asks and allocations the core rejected.
    pub rejected: AtomicU64,
    /// Asks that fit no node although queue headroom allowed (FAILED states).
    pub failed: AtomicU64,
    /// Allocations released.
    pub released: AtomicU64,
    /// Applications accepted.
    pub apps_accepted: AtomicU64,
    /// Applications rejected.
    pub apps_rejected: AtomicU64,
    /// Nodes accepted.
    pub nodes_accepted: AtomicU64,
    /// Nodes rejected.
    pub nodes_rejected: AtomicU64,
    /// Scheduling passes timed.
    pub passes: AtomicU64,
    /// Sum of pass latencies, nanoseconds.
    pub pass_nanos: AtomicU64,
    /// Passes per latency bucket (non-cumulative), bounds in [`LATENCY_BUCKETS_MS`].
    pub pass_buckets: [AtomicU64; LATENCY_BUCKETS_MS.len()],
    /// Application state transitions reported, by lower-case state name.
    app_transitions: Mutex<BTreeMap<String, u64>>,
}

impl Metrics {
    /// Records one scheduling round's latency.
    pub fn observe_pass(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let ms = took.as_secs_f64() * 1000.0;
        let bucket = LATENCY_BUCKETS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(LATENCY_BUCKETS_MS.len() - 1);
        self.pass_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.pass_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Application state transitions so far, by lower-case state name.
    pub fn app_transitions(&self) -> BTreeMap<String, u64> {
        lock(&self.app_transitions).clone()
    }

    fn add(counter: &AtomicU64, n: usize) {
        if n > 0 {
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Published snapshots by qualified partition name.
pub type Published = BTreeMap<String, Arc<PartitionSnapshot>>;

/// The configuration an RM runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RmConfig {
    /// Policy group given at registration.
    pub policy_group: String,
    /// The configuration text in force.
    pub text: String,
    /// Build information the RM gave at registration (version, date, ...).
    pub build_info: BTreeMap<String, String>,
}

/// The shared observability state (see the module docs).
pub struct Observer {
    published: ArcSwap<Published>,
    /// True while the published view may be behind the loop's state.
    stale: AtomicBool,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last read, plus one (0 = never).
    last_read: AtomicU64,
    events: Mutex<EventLog>,
    configs: Mutex<HashMap<String, RmConfig>>,
    /// The counters.
    pub metrics: Metrics,
}

impl Default for Observer {
    fn default() -> Self {
        Self {
            published: ArcSwap::from_pointee(BTreeMap::new()),
            stale: AtomicBool::new(true),
            epoch: Instant::now(),
            last_read: AtomicU64::new(0),
            events: Mutex::new(EventLog {
                next_id: 0,
                ring: VecDeque::new(),
                subscribers: Vec::new(),
            }),
            configs: Mutex::new(HashMap::new()),
            metrics: Metrics::default(),
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

impl Observer {
    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Notes that someone read, so the loop keeps publishing.
    pub fn mark_read(&self) {
        self.last_read
            .store(self.millis().saturating_add(1), Ordering::Relaxed);
    }

    /// True when someone read within [`READ_RECENTLY`].
    pub fn read_recently(&self) -> bool {
        let last = self.last_read.load(Ordering::Relaxed);
        last != 0 && self.millis().saturating_add(1) - last <= READ_RECENTLY.as_millis() as u64
    }

    /// The published snapshots by qualified name, or `None` when the view is
    /// stale (then ask the loop). Counts as a read.
    pub fn view(&self) -> Option<Arc<Published>> {
        self.mark_read();
        if self.stale.load(Ordering::Acquire) {
            return None;
        }
        Some(self.published.load_full())
    }

    /// Scheduling thread: replaces the published view.
    pub fn publish(&self, partitions: Published) {
        self.published.store(Arc::new(partitions));
        self.stale.store(false, Ordering::Release);
    }

    /// Scheduling thread: the state changed and will not be published for now.
    pub fn mark_stale(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Records a batch of events and hands them to subscribers; a subscriber
    /// that fell [`SUBSCRIBER_BACKLOG`] behind is cut off.
    pub fn record_events(&self, events: &[si::EventRecord]) {
        if events.is_empty() {
            return;
        }
        let mut log = lock(&self.events);
        for record in events {
            let event = ObservedEvent {
                id: log.next_id,
                record: record.clone(),
            };
            log.next_id += 1;
            log.subscribers.retain(|s| match s.try_send(event.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            });
            if log.ring.len() == EVENT_HISTORY {
                log.ring.pop_front();
            }
            log.ring.push_back(event);
        }
    }

    /// Events with an id of at least `id`, at most `limit` of them.
    pub fn events_since(&self, id: u64, limit: usize) -> EventBatch {
        let log = lock(&self.events);
        let lowest_id = log.ring.front().map_or(log.next_id, |e| e.id);
        let skip = usize::try_from(id.saturating_sub(lowest_id)).unwrap_or(usize::MAX);
        EventBatch {
            lowest_id,
            next_id: log.next_id,
            events: log.ring.iter().skip(skip).take(limit).cloned().collect(),
        }
    }

    /// A live feed of events recorded from now on. The feed ends (disconnects)
    /// when the subscriber falls too far behind.
    pub fn subscribe(&self) -> Receiver<ObservedEvent> {
        let (tx, rx) = bounded(SUBSCRIBER_BACKLOG);
        lock(&self.events).subscribers.push(tx);
        rx
    }

    /// Scheduling thread: the configuration `rm_id` now runs with.
    pub fn set_config(&self, rm_id: &str, config: RmConfig) {
        lock(&self.configs).insert(rm_id.to_string(), config);
    }

    /// Scheduling thread: only the text changed.
    pub fn set_config_text(&self, rm_id: &str, text: &str) {
        if let Some(c) = lock(&self.configs).get_mut(rm_id) {
            c.text = text.to_string();
        }
    }

    /// The configuration `rm_id` runs with.
    pub fn config(&self, rm_id: &str) -> Option<RmConfig> {
        lock(&self.configs).get(rm_id).cloned()
    }
}

/// A partition of a published view by qualified name, or by plain name when
/// only one RM has it.
pub fn find(partitions: &Published, name: &str) -> Option<Arc<PartitionSnapshot>> {
    if let Some(p) = partitions.get(name) {
        return Some(p.clone());
    }
    let mut plain = partitions
        .iter()
        .filter(|(key, _)| {
            key.strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .is_some_and(|(_, n)| n == name)
        })
        .map(|(_, p)| p);
    let first = plain.next()?;
    plain.next().is_none().then(|| first.clone())
}

/// Wraps an RM's callback on its dispatcher thread: counts results and keeps
/// events, then delivers unchanged.
pub struct ObservingCallback {
    inner: Arc<dyn ResourceManagerCallback>,
    observer: Arc<Observer>,
}

impl ObservingCallback {
    /// A wrapper around `inner`.
    pub fn new(inner: Arc<dyn ResourceManagerCallback>, observer: Arc<Observer>) -> Self {
        Self { inner, observer }
    }
}

impl ObservingCallback {
    fn count_allocation(&self, response: &si::AllocationResponse) {
        let m = &self.observer.metrics;
        Metrics::add(&m.allocated, response.new.len());
        Metrics::add(
            &m.rejected,
            response.rejected.len() + response.rejected_allocations.len(),
        );
        Metrics::add(&m.released, response.released.len());
    }
}

impl ResourceManagerCallback for ObservingCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.count_allocation(&response);
        self.inner.update_allocation(response)
    }

    fn update_allocation_partial(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.count_allocation(&response);
        self.inner.update_allocation_partial(response)
    }

    fn update_leases(&self, leases: Leases) -> CallbackResult<()> {
        let m = &self.observer.metrics;
        Metrics::add(&m.allocated, leases.new.len());
        self.count_allocation(&leases.response);
        self.inner.update_leases(leases)
    }

    fn offer_runs_inline(&self) -> bool {
        self.inner.offer_runs_inline()
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        let m = &self.observer.metrics;
        Metrics::add(&m.apps_accepted, response.accepted.len());
        Metrics::add(&m.apps_rejected, response.rejected.len());
        if !response.updated.is_empty() {
            let mut states = lock(&m.app_transitions);
            for u in &response.updated {
                *states.entry(u.state.to_lowercase()).or_insert(0) += 1;
            }
        }
        self.inner.update_application(response)
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        let m = &self.observer.metrics;
        Metrics::add(&m.nodes_accepted, response.accepted.len());
        Metrics::add(&m.nodes_rejected, response.rejected.len());
        self.inner.update_node(response)
    }

    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()> {
        self.inner.predicates(args)
    }

    fn resync_scheduler_cache(&self, args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        self.inner.resync_scheduler_cache(args)
    }

    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        self.observer.record_events(&events);
        self.inner.send_event(events)
    }

    fn update_container_scheduling_state(
        &self,
        request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        if request.state
            == si::update_container_scheduling_state_request::SchedulingState::Failed as i32
        {
            self.observer.metrics.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.update_container_scheduling_state(request)
    }

    fn update_configuration(
        &self,
        request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        self.inner.update_configuration(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str) -> si::EventRecord {
        si::EventRecord {
            object_id: id.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn history_is_bounded_and_read_by_id() {
        let o = Observer::default();
        let batch: Vec<_> = (0..EVENT_HISTORY + 5)
            .map(|i| event(&i.to_string()))
            .collect();
        o.record_events(&batch);
        let all = o.events_since(0, usize::MAX);
        assert_eq!(all.lowest_id, 5);
        assert_eq!(all.next_id, EVENT_HISTORY as u64 + 5);
        assert_eq!(all.events.len(), EVENT_HISTORY);
        assert_eq!(all.events[0].record.object_id, "5");
        let tail = o.events_since(EVENT_HISTORY as u64 + 3, 10);
        let ids: Vec<u64> = tail.events.iter().map(|e| e.id).collect();
        assert_eq!(ids, [EVENT_HISTORY as u64 + 3, EVENT_HISTORY as u64 + 4]);
        assert!(o.events_since(u64::MAX, 10).events.is_empty());
    }

    #[test]
    fn slow_subscribers_are_cut_off_live_ones_fed() {
        let o = Observer::default();
        let slow = o.subscribe();
        let batch: Vec<_> = (0..SUBSCRIBER_BACKLOG)
            .map(|i| event(&i.to_string()))
            .collect();
        o.record_events(&batch);
        let live = o.subscribe();
        o.record_events(&[event("last")]);
        assert_eq!(live.try_recv().unwrap().record.object_id, "last");
        assert_eq!(slow.len(), SUBSCRIBER_BACKLOG);
        let drained: Vec<_> = slow.iter().collect();
        assert_eq!(drained.len(), SUBSCRIBER_BACKLOG, "then disconnected");
    }

    #[test]
    fn stale_view_reads_nothing_and_plain_names_resolve() {
        let o = Observer::default();
        assert!(!o.read_recently());
        assert!(o.view().is_none(), "nothing published yet");
        assert!(o.read_recently());
        let snap = Arc::new(PartitionSnapshot {
            name: "[rm]default".into(),
            ..Default::default()
        });
        o.publish([(snap.name.clone(), snap)].into());
        let view = o.view().unwrap();
        assert_eq!(find(&view, "default").unwrap().name, "[rm]default");
        assert!(find(&view, "[rm]default").is_some());
        assert!(find(&view, "other").is_none());
        o.mark_stale();
        assert!(o.view().is_none());
    }

    #[test]
    fn latency_lands_in_its_bucket() {
        let m = Metrics::default();
        m.observe_pass(Duration::from_micros(50));
        m.observe_pass(Duration::from_secs(100));
        let counts: Vec<u64> = m
            .pass_buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts, [0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(m.passes.load(Ordering::Relaxed), 2);
    }
}
