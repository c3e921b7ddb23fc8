//! The resource provider side of Mesos' v1 resource provider API: a
//! [`client`] of the API, the [`ResourceProvider`] trait that a provider's
//! logic implements, the [`runner`] that owns the protocol for it, and a
//! working storage provider over a directory ([`storage`]).
//!
//! Like the framework side this works against any Mesos master and never
//! imports the master side (`mesos/tests/layering.rs` checks it).
//!
//! **Who owns what.** The runner is one tokio task. It owns the link (the
//! [`link::Link`] state machine), the kept provider id, the resource
//! version, the operations and their status deliveries ([`feedback`]) and
//! the checkpoint ([`checkpoint`]); it calls the provider on a blocking
//! thread, one call at a time, in event order, and contains its panics (an
//! operation whose provider panicked fails). A [`runner::RunnerHandle`]
//! only queues commands and reads a `watch` of the runner's status.
//!
//! **The protocol, as upstream's providers follow it.**
//! - SUBSCRIBE first without an id, then always with the id the master
//!   gave, kept in the state directory across reconnections and restarts.
//!   After SUBSCRIBED: UPDATE_STATE with the provider's total resources
//!   (each carrying its provider id, unallocated), its pending and
//!   unacknowledged operations, and a new resource version; then every
//!   unacknowledged status again.
//! - The resource version is a fresh uuid with every UPDATE_STATE (as
//!   upstream's storage provider does): at each subscription and whenever
//!   the provider's resources change other than by an operation (see
//!   [`runner::RunnerHandle::resources_changed`]). The conversions of
//!   operations do not change it: the master applies the converted
//!   resources of a status update itself, so its view stays in step.
//! - APPLY_OPERATION is applied only when its resource version is the
//!   current one; otherwise it is dropped (OPERATION_DROPPED, kept and
//!   retried like any status). Each status has a uuid and is retried with a
//!   doubling backoff until ACKNOWLEDGE_OPERATION_STATUS names it.
//! - RECONCILE_OPERATIONS: an operation the provider does not know gets
//!   OPERATION_DROPPED (no status uuid, not kept, as upstream), one it knows
//!   its latest status again.
//! - PUBLISH_RESOURCES: answered OK or FAILED from [`ResourceProvider::publish`].
//! - A stream that ends is resubscribed at once, then with backoff.
//! - **A master that does not know the id.** Upstream's manager drops a
//!   resubscription with an unknown id (no SUBSCRIBED) and keeps its
//!   registry of providers on disk, so the agent that assigned an id knows
//!   it after its restarts; upstream's provider retries its SUBSCRIBE every
//!   second, and starts afresh (no id) only when its agent has a new agent
//!   id, because it keeps its state under the agent id. This master keeps no
//!   registry: a restarted master (a new master id and new agent ids) does
//!   not know the id. The runner keeps resubscribing with its id, with
//!   backoff; after `forget_after` subscriptions in a row that the master
//!   answered and ended without SUBSCRIBED it takes the id as unknown to
//!   this master, subscribes without it, and keeps the new id. Its
//!   resources (volumes included) are reported again under the new id.

pub mod checkpoint;
pub mod client;
pub mod feedback;
pub mod link;
pub mod runner;
pub mod storage;

pub use self::client::{Endpoint, ProviderClient, ProviderSubscription};
pub use self::runner::{RunnerError, RunnerHandle, RunnerOptions, RunnerStatus};

use crate::v1;

/// An operation the master asks a provider to apply.
#[derive(Debug, Clone, Copy)]
pub struct Apply<'a> {
    /// The operation's uuid as text (a UUID): applying it again after a
    /// crash must give the same result.
    pub uuid: &'a str,
    /// The framework that asked, if any.
    pub framework_id: Option<&'a v1::FrameworkId>,
    /// The operation (CREATE_DISK, DESTROY_DISK, GROW_VOLUME, ... on this
    /// provider's resources, allocated to the framework's role).
    pub info: &'a v1::offer::Operation,
}

/// A resource provider's logic; the [`runner`] does the protocol.
///
/// Resources given back need no provider id (the runner stamps its own on
/// every resource it sends). Calls come one at a time on a blocking thread.
pub trait ResourceProvider: Send + 'static {
    /// The provider's total resources (unallocated).
    fn resources(&mut self) -> Vec<v1::Resource>;

    /// Applies an operation: the resources that take the place of what it
    /// consumed (keeping their allocation), or why it failed. It must be
    /// idempotent by `uuid`: after a crash the runner applies an operation
    /// that has no status yet again.
    fn apply(&mut self, operation: Apply<'_>) -> Result<Vec<v1::Resource>, String>;

    /// Makes resources ready for a task about to use them, or says why not.
    fn publish(&mut self, resources: &[v1::Resource]) -> Result<(), String>;
}
