//! How long to wait before trying again: upstream's registration backoff (a
//! random delay up to a bound that doubles per attempt), shared by the
//! driver's reconnections and a resource provider's.

use std::time::Duration;

/// Backoff settings (upstream's registration backoff: a random delay up to
/// a bound that doubles per attempt, capped at a minute and at a tenth of
/// the failover timeout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The bound after the first failed attempt.
    pub initial: Duration,
    /// The largest bound.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The bound of the delay after failed attempt `attempt` (1-based), for a
    /// framework with `failover_timeout` seconds.
    pub fn bound(&self, attempt: u32, failover_timeout: Option<f64>) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        let mut bound = self.initial.saturating_mul(1u32 << doublings).min(self.max);
        if let Some(tenth) = failover_timeout
            .filter(|t| t.is_finite() && *t > 0.0)
            .and_then(|t| Duration::try_from_secs_f64(t / 10.0).ok())
        {
            bound = bound.min(tenth);
        }
        bound
    }

    /// The delay after attempt `attempt`: `fraction` (in [0, 1]) of its bound.
    pub fn delay(&self, attempt: u32, failover_timeout: Option<f64>, fraction: f64) -> Duration {
        self.bound(attempt, failover_timeout)
            .mul_f64(fraction.clamp(0.0, 1.0))
    }
}

/// A fraction in [0, 1) that differs between calls and processes (spreads
/// reconnecting frameworks out), without a random number crate.
pub fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_caps() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let ms = |attempt, failover| b.bound(attempt, failover).as_millis();
        assert_eq!(ms(1, None), 100);
        assert_eq!(ms(2, None), 200);
        assert_eq!(ms(4, None), 800);
        assert_eq!(ms(5, None), 1000);
        assert_eq!(ms(u32::MAX, None), 1000);
        assert_eq!(ms(4, Some(3.0)), 300, "a tenth of the failover timeout");
        assert_eq!(ms(4, Some(0.0)), 800, "no failover timeout: no bound");
        assert_eq!(b.delay(3, None, 0.5).as_millis(), 200);
        assert_eq!(b.delay(3, None, 7.0).as_millis(), 400);
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
