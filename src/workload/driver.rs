//! Drives a [`Workload`] through the public `SchedulerApi` of an in-process
//! core and times the answers.
//!
//! Ownership: a [`Cluster`] owns one `Scheduler` and the [`TimingCallback`]
//! registered with it. The callback runs on the core's dispatcher thread and
//! only appends to its own record under a mutex; the RM side reads that record
//! (`with_record`) and waits on its condvar. Nothing is shared with other runs:
//! every run starts a fresh scheduler.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_shim_api::{CallbackResult, ResourceManagerCallback, SchedulerApi, SchedulerError};
use unisched_si as si;

use super::{RM_ID, Workload};

/// Why a workload could not be run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The core refused a call (registration with an invalid configuration, ...).
    #[error("{step}: {source}")]
    Scheduler {
        /// What the RM was doing.
        step: &'static str,
        /// The core's answer.
        #[source]
        source: SchedulerError,
    },
    /// The core rejected applications or nodes the workload needs.
    #[error("{what} rejected by the core: {detail}")]
    Rejected {
        /// `applications` or `nodes`.
        what: &'static str,
        /// The first rejection and how many there were.
        detail: String,
    },
    /// Not every expected allocation arrived in time.
    #[error("timed out after {waited:?}: {received} of {expected} allocations received")]
    Timeout {
        /// Allocations expected.
        expected: usize,
        /// Allocations received.
        received: usize,
        /// How long the RM waited.
        waited: Duration,
    },
    /// The workload could not be set up (a front end did not start, ...).
    #[error("set-up failed: {0}")]
    Setup(String),
}

/// One allocation as the RM saw it arrive.
#[derive(Debug, Clone)]
pub struct ArrivedAllocation {
    /// The ask's allocation key.
    pub allocation_key: String,
    /// The allocation id (needed to release it).
    pub allocation_id: String,
    /// The application.
    pub application_id: String,
    /// Index into [`CallbackRecord::arrivals`]: when it arrived.
    pub arrival: u32,
}

/// What the callback has received so far.
#[derive(Debug, Default)]
pub struct CallbackRecord {
    /// Arrival time of each allocation response that carried new allocations.
    pub arrivals: Vec<Instant>,
    /// New allocations, in arrival order.
    pub allocations: Vec<ArrivedAllocation>,
    /// Allocation ids the core released (confirmations and its own decisions).
    pub released: Vec<String>,
    /// Asks the core rejected: (allocation key, reason).
    pub rejected_asks: Vec<(String, String)>,
    /// Applications the core rejected: (id, reason).
    pub rejected_apps: Vec<(String, String)>,
    /// Nodes the core rejected: (id, reason).
    pub rejected_nodes: Vec<(String, String)>,
}

/// An RM callback that timestamps each allocation response as it arrives and
/// keeps just enough of it to compute latency and release allocations later.
#[derive(Debug, Default)]
pub struct TimingCallback {
    record: Mutex<CallbackRecord>,
    changed: Condvar,
}

impl TimingCallback {
    /// An empty callback.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> MutexGuard<'_, CallbackRecord> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on what was received so far.
    pub fn with_record<T>(&self, f: impl FnOnce(&CallbackRecord) -> T) -> T {
        f(&self.lock())
    }

    /// Makes room for `allocations` more allocations in the record up front,
    /// so growing it does not stall the callback in a timed run.
    pub fn reserve(&self, allocations: usize) {
        let mut record = self.lock();
        record.allocations.reserve(allocations);
        record.arrivals.reserve(allocations);
        record.released.reserve(allocations);
    }

    /// Number of allocations received so far.
    pub fn allocation_count(&self) -> usize {
        self.lock().allocations.len()
    }

    /// Waits until `count` allocations have arrived or `timeout` passes;
    /// returns the number received.
    pub fn wait_for_allocations(&self, count: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock();
        while guard.allocations.len() < count {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            guard = self
                .changed
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        guard.allocations.len()
    }
}

impl ResourceManagerCallback for TimingCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        let now = Instant::now();
        let mut record = self.lock();
        if !response.new.is_empty() {
            let arrival = u32::try_from(record.arrivals.len()).unwrap_or(u32::MAX);
            record.arrivals.push(now);
            record
                .allocations
                .extend(response.new.into_iter().map(|a| ArrivedAllocation {
                    allocation_key: a.allocation_key,
                    allocation_id: a.allocation_id,
                    application_id: a.application_id,
                    arrival,
                }));
        }
        record
            .released
            .extend(response.released.into_iter().map(|r| r.allocation_id));
        record.rejected_asks.extend(
            response
                .rejected
                .into_iter()
                .map(|r| (r.allocation_key, r.reason)),
        );
        drop(record);
        self.changed.notify_all();
        Ok(())
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        let mut record = self.lock();
        record.rejected_apps.extend(
            response
                .rejected
                .into_iter()
                .map(|r| (r.application_id, r.reason)),
        );
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        let mut record = self.lock();
        record
            .rejected_nodes
            .extend(response.rejected.into_iter().map(|r| (r.node_id, r.reason)));
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
            success: false,
            old_config: String::new(),
            reason: "the simulated RM does not persist configurations".to_string(),
        })
    }
}

/// A fresh in-process core with a workload's configuration, apps and nodes in
/// place, ready for asks.
pub struct Cluster {
    /// The core.
    pub scheduler: Scheduler,
    /// The callback registered with it.
    pub callback: Arc<TimingCallback>,
    /// The workload's partition.
    pub partition: String,
}

impl Cluster {
    /// Starts a core, registers with `config`, adds `apps` then `nodes`, and
    /// waits until the core has applied them. Fails when registration fails or
    /// the core rejects any app or node.
    pub fn start(
        config: &str,
        partition: &str,
        apps: Vec<si::AddApplicationRequest>,
        nodes: Vec<si::NodeInfo>,
    ) -> Result<Self, WorkloadError> {
        let scheduler = Scheduler::start(SchedulerOptions::default());
        let callback = TimingCallback::new();
        let dyn_callback: Arc<dyn ResourceManagerCallback> = callback.clone();
        let register = si::RegisterResourceManagerRequest {
            rm_id: RM_ID.to_string(),
            policy_group: "queues".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            config: config.to_string(),
            ..Default::default()
        };
        let step = |step| move |source| WorkloadError::Scheduler { step, source };
        scheduler
            .register_resource_manager(register, dyn_callback)
            .map_err(step("registering the resource manager"))?;
        scheduler
            .update_application(si::ApplicationRequest {
                new: apps,
                rm_id: RM_ID.to_string(),
                ..Default::default()
            })
            .map_err(step("adding applications"))?;
        scheduler
            .update_node(si::NodeRequest {
                nodes,
                rm_id: RM_ID.to_string(),
            })
            .map_err(step("reporting nodes"))?;
        scheduler.settle();
        let cluster = Self {
            scheduler,
            callback,
            partition: partition.to_string(),
        };
        cluster.check_rejections()?;
        Ok(cluster)
    }

    fn check_rejections(&self) -> Result<(), WorkloadError> {
        let summarise = |list: &[(String, String)]| {
            list.first()
                .map(|(id, reason)| format!("{} in all, first {id}: {reason}", list.len()))
        };
        self.callback.with_record(|r| {
            if let Some(detail) = summarise(&r.rejected_apps) {
                return Err(WorkloadError::Rejected {
                    what: "applications",
                    detail,
                });
            }
            if let Some(detail) = summarise(&r.rejected_nodes) {
                return Err(WorkloadError::Rejected {
                    what: "nodes",
                    detail,
                });
            }
            Ok(())
        })
    }

    /// Submits one batch of asks; returns the instant just before the call.
    pub fn submit(&self, asks: Vec<si::AllocationAsk>) -> Result<Instant, WorkloadError> {
        let at = Instant::now();
        self.scheduler
            .update_allocation(si::AllocationRequest {
                asks,
                rm_id: RM_ID.to_string(),
                ..Default::default()
            })
            .map_err(|source| WorkloadError::Scheduler {
                step: "submitting asks",
                source,
            })?;
        Ok(at)
    }

    /// Releases allocations as the RM would when their containers finish.
    pub fn release(&self, allocations: &[ArrivedAllocation]) -> Result<(), WorkloadError> {
        let releases = allocations
            .iter()
            .map(|a| si::AllocationRelease {
                partition_name: self.partition.clone(),
                application_id: a.application_id.clone(),
                termination_type: si::TerminationType::StoppedByRm as i32,
                message: "container finished".to_string(),
                allocation_key: a.allocation_key.clone(),
                allocation_id: a.allocation_id.clone(),
            })
            .collect();
        self.scheduler
            .update_allocation(si::AllocationRequest {
                releases: Some(si::AllocationReleasesRequest {
                    allocations_to_release: releases,
                    ..Default::default()
                }),
                rm_id: RM_ID.to_string(),
                ..Default::default()
            })
            .map_err(|source| WorkloadError::Scheduler {
                step: "releasing allocations",
                source,
            })
    }
}

/// The outcome of one timed run.
#[derive(Debug, Clone)]
pub struct RunMeasurement {
    /// Workload name.
    pub workload: String,
    /// Nodes reported.
    pub nodes: usize,
    /// Asks submitted.
    pub asks: usize,
    /// Allocations received in the measured window.
    pub allocations: usize,
    /// Allocations the core released on its own (preemption victims).
    pub released: usize,
    /// From the end of submission to the last allocation needed (or, for a
    /// workload that leaves asks pending, until the core settled).
    pub elapsed: Duration,
    /// Latency from each ask's submission to the callback carrying its
    /// allocation, sorted ascending.
    pub latencies: Vec<Duration>,
}

impl RunMeasurement {
    /// Allocations per second over [`RunMeasurement::elapsed`].
    pub fn allocations_per_second(&self) -> f64 {
        self.allocations as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Latency quantile `q` in 0.0..=1.0 (zero when nothing was allocated).
    pub fn latency(&self, q: f64) -> Duration {
        quantile(&self.latencies, q)
    }
}

/// Quantile `q` of an ascending slice (nearest rank; zero when empty).
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    sorted[rank]
}

/// The asks of a run as the RM submitted them: which call carried each ask
/// key, and when each call was made.
#[derive(Debug, Default)]
pub struct Submitted {
    batch_of_key: HashMap<String, usize>,
    at: Vec<Instant>,
}

impl Submitted {
    /// An empty record, for a caller that paces its own calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty record with room for `asks` asks in `calls` calls.
    pub fn with_capacity(asks: usize, calls: usize) -> Self {
        Self {
            batch_of_key: HashMap::with_capacity(asks),
            at: Vec::with_capacity(calls),
        }
    }

    /// Submits each batch in its own call, one right after the other.
    pub fn all(
        cluster: &Cluster,
        batches: Vec<Vec<si::AllocationAsk>>,
    ) -> Result<Self, WorkloadError> {
        let mut submitted = Self::new();
        for batch in batches {
            submitted.submit(cluster, batch)?;
        }
        Ok(submitted)
    }

    /// Submits one batch in one call and notes when.
    pub fn submit(
        &mut self,
        cluster: &Cluster,
        batch: Vec<si::AllocationAsk>,
    ) -> Result<(), WorkloadError> {
        let b = self.at.len();
        self.batch_of_key
            .extend(batch.iter().map(|a| (a.allocation_key.clone(), b)));
        self.at.push(cluster.submit(batch)?);
        Ok(())
    }

    /// Distinct ask keys submitted.
    pub fn asks(&self) -> usize {
        self.batch_of_key.len()
    }

    /// Calls made.
    pub fn calls(&self) -> usize {
        self.at.len()
    }

    /// The allocations received so far and, sorted, the latency of each one of
    /// a submitted ask: from its call to the callback that carried it.
    pub fn latencies(&self, cluster: &Cluster) -> (usize, Vec<Duration>) {
        self.latencies_from(cluster, 0)
    }

    /// As [`Submitted::latencies`], counting only asks of call `first_call`
    /// and later (to leave a warm-up out).
    pub fn latencies_from(&self, cluster: &Cluster, first_call: usize) -> (usize, Vec<Duration>) {
        let (count, mut latencies) = cluster.callback.with_record(|r| {
            let latencies: Vec<Duration> = r
                .allocations
                .iter()
                .filter_map(|a| {
                    let batch = *self.batch_of_key.get(&a.allocation_key)?;
                    if batch < first_call {
                        return None;
                    }
                    let arrived = *r.arrivals.get(a.arrival as usize)?;
                    Some(arrived.saturating_duration_since(self.at[batch]))
                })
                .collect();
            (r.allocations.len(), latencies)
        });
        latencies.sort_unstable();
        (count, latencies)
    }
}

/// Runs a workload on a fresh core: set-up is untimed; the timer starts after
/// the last ask batch was handed over and stops when the callback holds every
/// expected allocation (or the core settled, for workloads that leave asks
/// pending).
pub fn run_measured(
    workload: Workload,
    timeout: Duration,
) -> Result<RunMeasurement, WorkloadError> {
    let Workload {
        name,
        config,
        partition,
        apps,
        nodes,
        ask_batches,
        expected_allocations,
    } = workload;
    let node_count = nodes.len();
    let cluster = Cluster::start(&config, &partition, apps, nodes)?;
    let submitted = Submitted::all(&cluster, ask_batches)?;
    let asks = submitted.asks();
    let start = Instant::now();
    let end = match expected_allocations {
        Some(expected) => {
            let received = cluster.callback.wait_for_allocations(expected, timeout);
            if received < expected {
                return Err(WorkloadError::Timeout {
                    expected,
                    received,
                    waited: timeout,
                });
            }
            cluster
                .callback
                .with_record(|r| r.arrivals.last().copied())
                .unwrap_or(start)
        }
        None => {
            cluster.scheduler.settle();
            Instant::now()
        }
    };
    let (allocations, latencies) = submitted.latencies(&cluster);
    let released = cluster.callback.with_record(|r| r.released.len());
    cluster.scheduler.shutdown();
    Ok(RunMeasurement {
        workload: name,
        nodes: node_count,
        asks,
        allocations,
        released,
        elapsed: end.saturating_duration_since(start),
        latencies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_picks_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        let sorted: Vec<_> = (1..=100).map(ms).collect();
        assert_eq!(quantile(&sorted, 0.5), ms(51));
        assert_eq!(quantile(&sorted, 0.99), ms(99));
        assert_eq!(quantile(&sorted, 1.0), ms(100));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn callback_timestamps_and_counts_allocations() {
        let cb = TimingCallback::new();
        let alloc = |key: &str| si::Allocation {
            allocation_key: key.to_string(),
            allocation_id: format!("{key}-0"),
            application_id: "app-1".to_string(),
            ..Default::default()
        };
        cb.update_allocation(si::AllocationResponse {
            new: vec![alloc("a"), alloc("b")],
            ..Default::default()
        })
        .unwrap();
        cb.update_allocation(si::AllocationResponse::default())
            .unwrap();
        cb.update_allocation(si::AllocationResponse {
            new: vec![alloc("c")],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(cb.wait_for_allocations(3, Duration::from_millis(1)), 3);
        cb.with_record(|r| {
            assert_eq!(r.arrivals.len(), 2);
            assert_eq!(r.allocations[2].arrival, 1);
            assert_eq!(r.allocations[1].allocation_id, "b-0");
        });
    }
}
