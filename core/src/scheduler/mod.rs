//! The scheduler handle: the in-process implementation of `SchedulerApi`.

use std::sync::Arc;
use std::time::Duration;

use unisched_shim_api::{
    ResourceManagerCallback, SchedulerApi, SchedulerError, SchedulerResult,
};
use unisched_si as si;

use crate::clock::{Clock, SystemClock};
use crate::snapshot::PartitionSnapshot;

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
    /// Most allocations made before the loop looks for new requests and sends
    /// results out (bounds callback latency under load).
    pub max_allocations_per_pass: usize,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            config_source: None,
            completing_timeout: Duration::from_secs(30),
            reservation_delay: Duration::from_secs(2),
            max_allocations_per_pass: 16_384,
        }
    }
}

/// The in-process scheduler core. Cheap to clone; every clone talks to the same
/// scheduling thread. Dropping the last clone shuts it down.
#[derive(Clone)]
pub struct Scheduler {
    _private: (),
}

impl Scheduler {
    /// Starts the scheduling thread.
    pub fn start(options: SchedulerOptions) -> Self {
        let _ = options;
        unimplemented!()
    }

    /// Waits until every request sent before this call has been applied, the
    /// loop has scheduled until nothing more can be placed, and every callback
    /// that produced has been delivered.
    pub fn settle(&self) {
        unimplemented!()
    }

    /// Tells the loop to look at the clock again (after advancing a virtual clock).
    pub fn wake(&self) {
        unimplemented!()
    }

    /// The clock this scheduler reads.
    pub fn clock(&self) -> Arc<dyn Clock> {
        unimplemented!()
    }

    /// A snapshot of a partition, by qualified name (`[rmID]name`) or by plain
    /// name when only one RM has it. `None` when there is no such partition.
    pub fn snapshot(&self, partition: &str) -> Option<PartitionSnapshot> {
        let _ = partition;
        unimplemented!()
    }

    /// Qualified names of all partitions.
    pub fn partitions(&self) -> Vec<String> {
        unimplemented!()
    }

    /// Stops the scheduling thread; later calls return `SchedulerError::ShutDown`.
    pub fn shutdown(&self) {
        unimplemented!()
    }
}

impl SchedulerApi for Scheduler {
    fn register_resource_manager(
        &self,
        request: si::RegisterResourceManagerRequest,
        callback: Arc<dyn ResourceManagerCallback>,
    ) -> SchedulerResult<si::RegisterResourceManagerResponse> {
        let _ = (request, callback);
        Err(SchedulerError::ShutDown)
    }

    fn update_allocation(&self, request: si::AllocationRequest) -> SchedulerResult<()> {
        let _ = request;
        Err(SchedulerError::ShutDown)
    }

    fn update_application(&self, request: si::ApplicationRequest) -> SchedulerResult<()> {
        let _ = request;
        Err(SchedulerError::ShutDown)
    }

    fn update_node(&self, request: si::NodeRequest) -> SchedulerResult<()> {
        let _ = request;
        Err(SchedulerError::ShutDown)
    }

    fn update_configuration(&self, cluster_id: &str) -> SchedulerResult<()> {
        let _ = cluster_id;
        Err(SchedulerError::ShutDown)
    }
}
