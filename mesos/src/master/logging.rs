//! The operator API's GET_LOGGING_LEVEL and SET_LOGGING_LEVEL. Mesos sets
//! glog's verbosity for a while (`process::Logging::set_level`): level 0 is
//! what the process started with, a higher one lasts `duration` and then
//! reverts to 0, unless another SET_LOGGING_LEVEL came meanwhile. Here the
//! process's logging is `tracing`'s; a [`LogControl`] the embedding process
//! hands the master (`Settings::logging`; `unisched serve` gives one) turns
//! a level into its filter. Without one the calls get 501.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::CallError;
use super::state::{Master, Timer};

/// What turns a Mesos logging level into the process's log filter.
pub trait LogVerbosity: Send + Sync {
    /// Logs at `level`: 0 as at the start, 1 and up more and more.
    fn set_level(&self, level: u32) -> Result<(), String>;
}

/// A [`LogVerbosity`] the master may share.
#[derive(Clone)]
pub struct LogControl(pub Arc<dyn LogVerbosity>);

impl fmt::Debug for LogControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LogControl")
    }
}

impl Master {
    /// GET_LOGGING_LEVEL's level.
    pub(super) fn logging_level(&self) -> Result<u32, CallError> {
        self.log_control()?;
        Ok(self.log_level.0)
    }

    /// SET_LOGGING_LEVEL: `level` now; back to 0 after `duration` (when
    /// `level` is not 0 and no later call set it again).
    pub(super) fn set_logging_level(
        &mut self,
        level: u32,
        duration: Duration,
    ) -> Result<(), CallError> {
        let control = self.log_control()?;
        control.0.set_level(level).map_err(|e| CallError {
            status: 500,
            message: format!("Failed to set the logging level: {e}"),
        })?;
        tracing::info!(level, ?duration, "an operator set the logging level");
        let until = self.now().saturating_add(super::status::nanos(duration));
        self.log_level = (level, until);
        if level != 0 {
            self.at(until, Timer::LoggingRevert);
        }
        Ok(())
    }

    /// The revert timer: back to level 0 unless a later call pushed the
    /// time on (upstream's `Logging::revert`).
    pub(super) fn logging_revert(&mut self) {
        let (level, until) = self.log_level;
        if level == 0 || self.now() < until {
            return;
        }
        if let Ok(control) = self.log_control()
            && let Err(e) = control.0.set_level(0)
        {
            tracing::warn!(error = %e, "the logging level could not be reverted");
            return;
        }
        self.log_level = (0, until);
    }

    fn log_control(&self) -> Result<LogControl, CallError> {
        self.settings.logging.clone().ok_or_else(|| CallError {
            status: 501,
            message: "The logging level is not controlled by this master's process".to_string(),
        })
    }
}
