//! What `unisched serve --config FILE` does when the file changes.

use std::sync::Arc;

use unisched_core::Scheduler;
use unisched_server::DefaultConfig;
use unisched_shim_api::SchedulerApi;

/// Applies a new version of the `--config` file: a text that does not parse is
/// logged and ignored (the old configuration stays, for the RMs and for new
/// registrations); otherwise it becomes the default configuration and every
/// RM registered with the default gets `update_configuration`, which the core
/// reads from the file through its `FileConfigSource`. Returns the RMs updated.
/// Blocks until the core has applied each; never call it on the scheduling thread.
pub fn reload_default_config_rms(
    scheduler: &Scheduler,
    default: &Arc<DefaultConfig>,
    text: String,
) -> Vec<String> {
    if let Err(errors) = unisched_core::config::parse(&text) {
        tracing::warn!(%errors, "changed configuration file is invalid; keeping the old configuration");
        return Vec::new();
    }
    let mut updated = Vec::new();
    for rm in default.replace(text) {
        match scheduler.update_configuration(&rm) {
            Ok(()) => {
                tracing::info!(rm = %rm, "configuration reloaded");
                updated.push(rm);
            }
            Err(e) => tracing::warn!(rm = %rm, error = %e, "configuration reload refused"),
        }
    }
    updated
}
