//! The two traits between a resource manager (RM) shim and the unisched core.
//!
//! An RM calls the core through [`SchedulerApi`]; the core answers through the
//! [`ResourceManagerCallback`] the RM handed over at registration. Both speak the
//! wire types of `unisched-si`, so an in-process RM and one behind gRPC see the
//! same messages. This crate knows nothing of how the core schedules.
//!
//! # Which calls wait
//! - [`SchedulerApi::register_resource_manager`] and
//!   [`SchedulerApi::update_configuration`] wait until the core has applied them
//!   and return the outcome.
//! - [`SchedulerApi::update_allocation`], [`SchedulerApi::update_application`] and
//!   [`SchedulerApi::update_node`] check what needs no scheduler state (the RM is
//!   registered, the request is well formed), queue the request and return at once.
//!   Their outcome (accepted, rejected with a reason, allocated) arrives through
//!   the callback.
//!
//! # Which thread runs a callback
//! Every callback except [`ResourceManagerCallback::predicates`] runs on a
//! dispatcher thread owned by the core, one per registered RM, in the order the
//! core produced the results. A slow callback delays only that RM's later
//! callbacks; it never stalls scheduling. `predicates` must answer before the
//! core can place an ask, so it runs on the scheduling thread itself, and only
//! for RMs that asked for it at registration (see [`PREDICATES_EXTRA_CONFIG`]).
//!
//! # What a callback may do
//! A callback may call any asynchronous method of [`SchedulerApi`] (they only
//! queue work). From a dispatcher thread it may also call the waiting methods.
//! From inside `predicates` the waiting methods return
//! [`SchedulerError::Reentrant`] instead of deadlocking the scheduling thread.
//! A callback that panics or returns an error is logged and the core goes on.

use unisched_si as si;

pub mod leases;
pub mod recording;

pub use leases::{Lease, Leases, RM_HANDLE, rm_handle};

/// `extraConfig` key of [`si::RegisterResourceManagerRequest`]: set to `"true"`
/// when the RM wants [`ResourceManagerCallback::predicates`] called before each
/// placement. Without it the core never calls predicates, and an embedding RM
/// that needs none pays nothing for them.
pub const PREDICATES_EXTRA_CONFIG: &str = "unisched.predicates";

/// Why a call to the core failed. Each variant names something the caller can fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    /// The request named an RM that has not registered (or registered again and
    /// is being reset).
    #[error("resource manager {rm_id:?} is not registered: call register_resource_manager first")]
    UnknownResourceManager {
        /// The rmID the request carried.
        rm_id: String,
    },
    /// A required field is missing or malformed; nothing of the request was applied.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong with the request.
        reason: String,
    },
    /// The queue configuration could not be used; the previous one stays in force.
    #[error("invalid configuration: {reason}")]
    InvalidConfiguration {
        /// Every problem found, one per line.
        reason: String,
    },
    /// The configuration source for the cluster could not be read.
    #[error("configuration source for {cluster_id:?} unavailable: {reason}")]
    ConfigurationUnavailable {
        /// The cluster whose configuration was asked for.
        cluster_id: String,
        /// What went wrong reading it.
        reason: String,
    },
    /// A waiting call was made from inside `predicates`, on the scheduling thread;
    /// waiting there would deadlock. Make the call from another thread.
    #[error("{call} cannot be called from inside a predicates callback")]
    Reentrant {
        /// The call that was refused.
        call: &'static str,
    },
    /// The core has been shut down; no further requests are taken.
    #[error("the scheduler has shut down")]
    ShutDown,
}

/// Result of the calls into the core.
pub type SchedulerResult<T> = Result<T, SchedulerError>;

/// Why an RM-side callback failed. The core logs it and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct CallbackError {
    /// A human-readable reason.
    pub reason: String,
}

impl CallbackError {
    /// An error with the given reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Result of the RM-side callbacks.
pub type CallbackResult<T> = Result<T, CallbackError>;

/// The core, as seen by an RM shim. Implemented by the in-process core and by a
/// remote client; an RM switches between them without other changes.
pub trait SchedulerApi: Send + Sync {
    /// Registers an RM and its queue configuration (`request.config`). Waits until
    /// the partitions and queues exist. Registering again with the same `rmID`
    /// wipes that RM's state; the RM then reports nodes, applications and asks
    /// again. Errors: an empty rmID, or an invalid configuration.
    fn register_resource_manager(
        &self,
        request: si::RegisterResourceManagerRequest,
        callback: std::sync::Arc<dyn ResourceManagerCallback>,
    ) -> SchedulerResult<si::RegisterResourceManagerResponse>;

    /// New and updated asks, releases of allocations and asks, and allocations
    /// that already exist (recovery). Returns at once; outcomes arrive through
    /// [`ResourceManagerCallback::update_allocation`].
    fn update_allocation(&self, request: si::AllocationRequest) -> SchedulerResult<()>;

    /// Adds and removes applications. Returns at once; outcomes arrive through
    /// [`ResourceManagerCallback::update_application`].
    fn update_application(&self, request: si::ApplicationRequest) -> SchedulerResult<()>;

    /// Node changes (create, update, drain, decommission). Returns at once;
    /// outcomes arrive through [`ResourceManagerCallback::update_node`].
    fn update_node(&self, request: si::NodeRequest) -> SchedulerResult<()>;

    /// Re-reads the queue configuration of `cluster_id` (an rmID) from its source
    /// and applies it between two scheduling passes. Waits for the result: an
    /// invalid configuration is an error and the running one stays.
    fn update_configuration(&self, cluster_id: &str) -> SchedulerResult<()>;
}

/// The RM, as seen by the core. Implemented by every RM shim. All methods have
/// to be safe to call from a thread the RM does not own.
pub trait ResourceManagerCallback: Send + Sync {
    /// New allocations, released allocations (confirmations and core decisions),
    /// released asks and rejections. One call carries all the allocations of a
    /// scheduling pass, or the last of them (see
    /// [`update_allocation_partial`](Self::update_allocation_partial)).
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()>;

    /// Part of a long allocation run that is still going on: more of the same
    /// pass follows, and its last part comes through
    /// [`update_allocation`](Self::update_allocation). Only an offer
    /// partition's run (one whole allocation run per pass) is sent in parts,
    /// so that the RM can work on the first leases while the core makes the
    /// rest. By default the part is handled as a response of its own.
    fn update_allocation_partial(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.update_allocation(response)
    }

    /// What [`update_allocation`](Self::update_allocation) and
    /// [`update_allocation_partial`](Self::update_allocation_partial) carry,
    /// with the new allocations as [`Lease`]s that share their ids and
    /// resource maps with the core: the core calls this for every
    /// allocation result. An RM in the core's process that handles many
    /// allocations a pass takes them here without their wire copies; by
    /// default they are put in wire form and go to those two methods.
    fn update_leases(&self, leases: Leases) -> CallbackResult<()> {
        if leases.partial {
            self.update_allocation_partial(leases.into_wire())
        } else {
            self.update_allocation(leases.into_wire())
        }
    }

    /// True when this RM's [`update_leases`](Self::update_leases) only hands
    /// the leases on (to a channel its own thread reads) and returns at once.
    /// The core asks once, at registration. When true, each part of an
    /// allocation run sent in parts (an offer partition's run, see
    /// [`update_allocation_partial`](Self::update_allocation_partial)),
    /// the last one included, goes to `update_leases` on the scheduling
    /// thread as soon as it is made, instead of through the RM's dispatcher
    /// thread: on two cores the run's leases then reach the RM without
    /// waiting for a third thread to get a CPU. What that changes for the RM:
    /// - The core does this only for a run that starts when every
    ///   allocation result made before it has been delivered (otherwise the
    ///   run goes through the dispatcher, in order, as for any RM), so
    ///   allocation results still come in the order they were made, and
    ///   never two calls of the allocation methods at once.
    /// - The run's other results (the applications' changes of state, the
    ///   events) still go through the dispatcher thread, in order among
    ///   themselves; they, and application, node and event results made
    ///   before the run, may reach the RM after the run's leases.
    /// - `update_leases` may run while the RM's other callbacks run on its
    ///   dispatcher thread.
    /// - It must not block: the scheduling thread waits for it. A panic or
    ///   an error is logged and scheduling goes on; a call into the core
    ///   that waits for an answer is refused there
    ///   ([`SchedulerError::Reentrant`]).
    fn offer_runs_inline(&self) -> bool {
        false
    }

    /// Accepted and rejected applications, and application state changes.
    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()>;

    /// Accepted and rejected nodes.
    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()>;

    /// May the ask go on the node (`allocate = true`) or reserve it (`false`)?
    /// An error means no. Only called for RMs that asked for it at registration;
    /// runs on the scheduling thread, so it has to be quick.
    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()>;

    /// Core-side cache changes (assumed allocations, forgotten assumptions) for
    /// the RM's own cache.
    fn resync_scheduler_cache(&self, args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()>;

    /// A batch of events about requests, applications, nodes and queues.
    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()>;

    /// The scheduling state of one ask (skipped, scheduled, reserved, failed).
    /// May be called even when nothing changed.
    fn update_container_scheduling_state(
        &self,
        request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()>;

    /// Asks the RM to persist a configuration changed through the core; the
    /// response says whether it did, and carries the configuration it replaced.
    fn update_configuration(
        &self,
        request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse>;
}
