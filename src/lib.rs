//! unisched: a cluster scheduler core. This facade re-exports the workspace
//! crates and holds the command-line tools built on them.

pub use unisched_core as core;
pub use unisched_shim_api as shim_api;
pub use unisched_si as si;

pub mod cli;
