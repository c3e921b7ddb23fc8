//! The unisched scheduling core: partitions of hierarchical queues, applications,
//! asks, allocations and nodes, and the allocation loop that matches them.
//!
//! The core knows nothing of gRPC, HTTP or the file system. An RM drives it
//! through [`unisched_shim_api::SchedulerApi`], implemented by [`Scheduler`];
//! results go back through the RM's [`unisched_shim_api::ResourceManagerCallback`].
//! See `ARCHITECTURE.md` at the repository root for ownership and data flow.

pub mod affinity;
pub mod clock;
pub mod config;
pub mod resources;
pub mod scheduler;
pub mod snapshot;

pub use clock::{Clock, ManualClock, SystemClock};
pub use scheduler::{ConfigSource, Scheduler, SchedulerOptions};
pub use snapshot::PartitionSnapshot;
