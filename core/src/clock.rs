//! Time as the core sees it: a [`Clock`] passed in, real or virtual.
//!
//! Nothing in the core reads the system time directly, so scenarios and the
//! deterministic simulation drive time by hand and never sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, in nanoseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in nanoseconds since the Unix epoch.
    fn now_nanos(&self) -> u64;

    /// True for a clock that only moves when told to. The scheduling loop then
    /// never waits on a timer: it looks at the clock when it is woken.
    fn is_virtual(&self) -> bool {
        false
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_nanos(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only through [`ManualClock::advance`].
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A virtual clock starting at `start_nanos`.
    pub fn new(start_nanos: u64) -> Arc<Self> {
        Arc::new(Self {
            nanos: AtomicU64::new(start_nanos),
        })
    }

    /// Moves the clock forward. Wake the scheduler afterwards so it sees the new time.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }

    fn is_virtual(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_nanos(), 1_000);
        clock.advance(Duration::from_millis(2));
        assert_eq!(clock.now_nanos(), 2_001_000);
        assert!(clock.is_virtual());
        assert!(!SystemClock.is_virtual());
    }
}
