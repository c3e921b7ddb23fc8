//! How a partition applies RM requests: applications, asks, releases, recovered
//! allocations and node actions. Each handler validates against current state,
//! changes nothing on rejection, and records its outcome in the outbox.

mod allocations;
mod apps;
mod asks;
mod nodes;
mod placement;
mod queues;
