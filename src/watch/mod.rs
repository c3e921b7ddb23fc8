//! Hot reload of the queue configuration from a file: a watcher that reports
//! each new version of the file once, and a `ConfigSource` that reads it.
//!
//! # Who owns what
//! - [`ConfigFileWatcher`] owns one thread. It alone reads the file for change
//!   detection and keeps the checksum of the last version it reported; it calls
//!   the callback on that thread, one call at a time.
//! - [`FileConfigSource`] is read by the core on whichever thread calls
//!   `update_configuration`; it keeps no state.
//! - [`reload_default_config_rms`] ties the two to `unisched serve --config
//!   FILE`: a reported change updates the server's default configuration and
//!   sends `update_configuration` for every RM that registered with it.
//!
//! # Why the directory is watched
//! Editors and deploy tools replace a file by renaming a new one over it, and a
//! Kubernetes ConfigMap volume swaps a `..data` symlink; a watch on the file
//! itself would miss both (it follows the old inode). Any event in the
//! directory only makes the watcher re-read the file; the checksum decides
//! whether anything changed.

mod file;
mod reload;
mod watcher;

pub use file::{ConfigReadError, FileConfigSource, read_config_file};
pub use reload::reload_default_config_rms;
pub use watcher::{ConfigFileWatcher, WatchMode, WatchOptions};
