//! unisched: a cluster scheduler core. This facade re-exports the workspace
//! crates and holds the command-line tools built on them.

pub use unisched_core as core;
pub use unisched_shim_api as shim_api;
pub use unisched_si as si;

pub mod bench;
pub mod cli;
pub mod replay;
pub mod scenario;
pub mod simulate;
pub mod soak;
pub mod trace;
pub mod watch;
pub mod workload;

/// The README's embedding example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
