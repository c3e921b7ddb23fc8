//! Workloads shared by `unisched simulate`, `unisched bench` and the criterion
//! benches: what the simulated RM reports (queue configuration, applications,
//! nodes, asks) and the driver that feeds it to the core through the public
//! `SchedulerApi` and times the answers.
//!
//! A [`Workload`] is plain data built from a seed; building one never touches
//! the core, so builders are unit-tested without it. The [`driver`] owns the
//! in-process scheduler and the callback for one run.

pub mod driver;
pub mod rng;
pub mod shapes;
pub mod wire;

use unisched_si as si;

pub use driver::{Cluster, RunMeasurement, TimingCallback, WorkloadError};
pub use rng::Rng;

/// The rmID every workload registers as.
pub const RM_ID: &str = "unisched-workload";

/// Everything a simulated RM sends, in the order it sends it: register with
/// `config`, add `apps`, report `nodes`, then submit each of `ask_batches` in
/// its own `UpdateAllocation` call.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Short name for reports, e.g. `w1`.
    pub name: String,
    /// Queue configuration YAML given at registration.
    pub config: String,
    /// Partition the apps, nodes and asks belong to.
    pub partition: String,
    /// Applications, added in one call before the nodes.
    pub apps: Vec<si::AddApplicationRequest>,
    /// Nodes, reported in one call (with any existing allocations).
    pub nodes: Vec<si::NodeInfo>,
    /// Asks, one `UpdateAllocation` call per batch.
    pub ask_batches: Vec<Vec<si::AllocationAsk>>,
    /// How many allocations the run must receive to be complete. `None` when
    /// limits keep part of the asks pending: the run ends when the core settles.
    pub expected_allocations: Option<usize>,
}

impl Workload {
    /// Number of asks over all batches.
    pub fn ask_count(&self) -> usize {
        self.ask_batches.iter().map(Vec::len).sum()
    }
}
