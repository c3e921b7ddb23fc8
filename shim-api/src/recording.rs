//! A [`ResourceManagerCallback`] that records everything the core sends, for tests,
//! scenarios, the simulator and benchmarks. It answers predicates from a
//! configurable rule and confirms nothing on its own.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use unisched_si as si;

use crate::{CallbackError, CallbackResult, ResourceManagerCallback};

/// Everything received so far, in arrival order per kind.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    /// Every allocation response.
    pub allocation_responses: Vec<si::AllocationResponse>,
    /// Every application response.
    pub application_responses: Vec<si::ApplicationResponse>,
    /// Every node response.
    pub node_responses: Vec<si::NodeResponse>,
    /// Every predicates call.
    pub predicates: Vec<si::PredicatesArgs>,
    /// Every cache resync.
    pub resyncs: Vec<si::ReSyncSchedulerCacheArgs>,
    /// Every event, flattened.
    pub events: Vec<si::EventRecord>,
    /// Every container scheduling state update.
    pub scheduling_states: Vec<si::UpdateContainerSchedulingStateRequest>,
    /// Every configuration persistence request.
    pub configurations: Vec<si::UpdateConfigurationRequest>,
    /// The RM numbers each new allocation came back with, by allocation
    /// id: (node handle, application handle), 0 for none (`RM_HANDLE`;
    /// the wire form has no room for them).
    pub lease_handles: Vec<(String, u64, u64)>,
    /// Number of allocations received in `allocation_responses`.
    pub allocation_count: usize,
    /// Number of events received (also those a counting-only callback drops).
    pub event_count: usize,
    /// Number of container scheduling state updates received (also those a
    /// counting-only callback drops).
    pub scheduling_state_count: usize,
}

impl Recorded {
    /// All new allocations, flattened.
    pub fn allocations(&self) -> impl Iterator<Item = &si::Allocation> {
        self.allocation_responses.iter().flat_map(|r| r.new.iter())
    }

    /// All released allocations, flattened.
    pub fn released(&self) -> impl Iterator<Item = &si::AllocationRelease> {
        self.allocation_responses
            .iter()
            .flat_map(|r| r.released.iter())
    }

    /// All rejected asks, flattened.
    pub fn rejected_asks(&self) -> impl Iterator<Item = &si::RejectedAllocationAsk> {
        self.allocation_responses
            .iter()
            .flat_map(|r| r.rejected.iter())
    }

    /// All rejected allocations, flattened.
    pub fn rejected_allocations(&self) -> impl Iterator<Item = &si::RejectedAllocation> {
        self.allocation_responses
            .iter()
            .flat_map(|r| r.rejected_allocations.iter())
    }

    /// All rejected applications, flattened.
    pub fn rejected_applications(&self) -> impl Iterator<Item = &si::RejectedApplication> {
        self.application_responses
            .iter()
            .flat_map(|r| r.rejected.iter())
    }

    /// All accepted applications, flattened.
    pub fn accepted_applications(&self) -> impl Iterator<Item = &si::AcceptedApplication> {
        self.application_responses
            .iter()
            .flat_map(|r| r.accepted.iter())
    }

    /// The state changes of one application, in order.
    pub fn app_states(&self, app_id: &str) -> Vec<String> {
        self.application_responses
            .iter()
            .flat_map(|r| r.updated.iter())
            .filter(|u| u.application_id == app_id)
            .map(|u| u.state.clone())
            .collect()
    }

    /// All rejected nodes, flattened.
    pub fn rejected_nodes(&self) -> impl Iterator<Item = &si::RejectedNode> {
        self.node_responses.iter().flat_map(|r| r.rejected.iter())
    }

    /// All accepted nodes, flattened.
    pub fn accepted_nodes(&self) -> impl Iterator<Item = &si::AcceptedNode> {
        self.node_responses.iter().flat_map(|r| r.accepted.iter())
    }
}

/// Decides predicates: `None` passes everything.
type PredicateRule = Box<dyn Fn(&si::PredicatesArgs) -> bool + Send + Sync>;

/// A recording RM callback. Cheap enough for benchmarks: it keeps responses as
/// they arrive and counts allocations.
#[derive(Default)]
pub struct RecordingCallback {
    recorded: Mutex<Recorded>,
    changed: Condvar,
    predicate_rule: Option<PredicateRule>,
    counting_only: bool,
}

impl std::fmt::Debug for RecordingCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingCallback").finish_non_exhaustive()
    }
}

impl RecordingCallback {
    /// A callback that records everything and passes every predicate.
    pub fn new() -> Self {
        Self::default()
    }

    /// A callback whose predicates pass only when `rule` says so.
    pub fn with_predicates(
        rule: impl Fn(&si::PredicatesArgs) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            predicate_rule: Some(Box::new(rule)),
            ..Self::default()
        }
    }

    /// A callback that counts allocations, events and container scheduling
    /// states without keeping them (for benchmarks, where the RM's copies
    /// would be counted as the core's memory). Other responses are kept.
    pub fn counting_only() -> Self {
        Self {
            counting_only: true,
            ..Self::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of everything received so far.
    pub fn recorded(&self) -> Recorded {
        self.lock().clone()
    }

    /// Runs `f` on what was received so far without copying it.
    pub fn with_recorded<T>(&self, f: impl FnOnce(&Recorded) -> T) -> T {
        f(&self.lock())
    }

    /// Number of allocations received so far.
    pub fn allocation_count(&self) -> usize {
        self.lock().allocation_count
    }

    /// Forgets everything received so far.
    pub fn clear(&self) {
        *self.lock() = Recorded::default();
    }

    /// Waits until at least `count` allocations have arrived, or `timeout` passes.
    /// Returns the number received.
    pub fn wait_for_allocations(&self, count: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock();
        while guard.allocation_count < count {
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
        guard.allocation_count
    }

    fn record(&self, f: impl FnOnce(&mut Recorded)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }
}

impl ResourceManagerCallback for RecordingCallback {
    /// Notes each lease's RM handles, then takes the wire form as the
    /// trait's default does.
    fn update_leases(&self, leases: crate::Leases) -> CallbackResult<()> {
        if !self.counting_only {
            self.record(|r| {
                r.lease_handles.extend(
                    leases
                        .new
                        .iter()
                        .map(|l| (l.allocation_id.to_string(), l.node_handle, l.app_handle)),
                )
            });
        }
        if leases.partial {
            self.update_allocation_partial(leases.into_wire())
        } else {
            self.update_allocation(leases.into_wire())
        }
    }

    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        let keep = !self.counting_only;
        self.record(|r| {
            r.allocation_count += response.new.len();
            if keep {
                r.allocation_responses.push(response);
            }
        });
        Ok(())
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        self.record(|r| r.application_responses.push(response));
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        self.record(|r| r.node_responses.push(response));
        Ok(())
    }

    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()> {
        let pass = self.predicate_rule.as_ref().is_none_or(|rule| rule(&args));
        self.record(|r| r.predicates.push(args));
        if pass {
            Ok(())
        } else {
            Err(CallbackError::new("predicate rejected the node"))
        }
    }

    fn resync_scheduler_cache(&self, args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        self.record(|r| r.resyncs.push(args));
        Ok(())
    }

    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        let keep = !self.counting_only;
        self.record(|r| {
            r.event_count += events.len();
            if keep {
                r.events.extend(events);
            }
        });
        Ok(())
    }

    fn update_container_scheduling_state(
        &self,
        request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        let keep = !self.counting_only;
        self.record(|r| {
            r.scheduling_state_count += 1;
            if keep {
                r.scheduling_states.push(request);
            }
        });
        Ok(())
    }

    fn update_configuration(
        &self,
        request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        let old = self.lock().configurations.last().map(|c| c.config.clone());
        self.record(|r| r.configurations.push(request));
        Ok(si::UpdateConfigurationResponse {
            success: true,
            old_config: old.unwrap_or_default(),
            reason: String::new(),
        })
    }
}
