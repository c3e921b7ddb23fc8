//! Wire types of the scheduler interface (package `si.v1`), generated from `si.proto`.
//!
//! This crate knows nothing of the scheduler: it is the contract between a resource
//! manager and the core, in-process (the types) and over gRPC (the services).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Generated messages and services of package `si.v1`.
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/si.v1.rs"));
}

pub use v1::*;

/// Well-known node attribute naming the partition a node belongs to.
pub const NODE_PARTITION_ATTRIBUTE: &str = "si/node-partition";
/// Well-known node attribute carrying the host name.
pub const HOSTNAME_ATTRIBUTE: &str = "si/hostname";
/// Resource name of memory.
pub const MEMORY: &str = "memory";
/// Resource name of CPU, in milli-cores on the wire.
pub const VCORE: &str = "vcore";
