//! The driver's link to the master: subscribing, connected, backing off
//! between attempts, closed; and how long to back off.
//!
//! ```text
//!          start          SUBSCRIBED
//!  Idle ──────────▶ Subscribing{n} ──────────▶ Connected
//!                     ▲      │ transient failure   │ stream lost (EOF, error,
//!      backoff elapsed│      ▼                     │ heartbeats missed)
//!                   Waiting{n}                     └──▶ Subscribing{1}
//!
//!  refused for good (401, 400, ERROR...) or close (stop, abort's end): Closed
//! ```
//! The driver is *connected* only in `Connected`: calls go to the master
//! then, and are answered locally (or dropped) otherwise.

use std::time::Duration;

/// Where the link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Not started.
    Idle,
    /// SUBSCRIBE number `attempt` (since the last connection) is in flight.
    Subscribing {
        /// 1 for the first attempt.
        attempt: u32,
    },
    /// SUBSCRIBED received; the event stream is open.
    Connected,
    /// Backing off before attempt `attempt + 1`.
    Waiting {
        /// The attempt that failed.
        attempt: u32,
    },
    /// Nothing more will be tried.
    Closed,
}

/// What happens to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// The driver starts.
    Start,
    /// SUBSCRIBED arrived.
    Subscribed,
    /// The subscription failed; `transient` when trying again may help
    /// (master unreachable, 503, a stream cut early).
    SubscribeFailed {
        /// Whether to try again.
        transient: bool,
    },
    /// The open stream ended.
    StreamLost,
    /// The backoff delay passed.
    BackoffElapsed,
    /// The driver stops, or gives up.
    Close,
}

/// The result of a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Moved to this state.
    To(Connection),
    /// The event does not apply in this state.
    Ignored,
}

impl Connection {
    /// The one place where the link changes.
    pub fn on(self, event: LinkEvent) -> Transition {
        use Connection::*;
        use LinkEvent::*;
        match (self, event) {
            (Closed, _) => Transition::Ignored,
            (_, Close) => Transition::To(Closed),
            (Idle, Start) => Transition::To(Subscribing { attempt: 1 }),
            (Subscribing { .. }, Subscribed) => Transition::To(Connected),
            (Subscribing { attempt }, SubscribeFailed { transient: true }) => {
                Transition::To(Waiting { attempt })
            }
            (Subscribing { .. }, SubscribeFailed { transient: false }) => Transition::To(Closed),
            (Waiting { attempt }, BackoffElapsed) => Transition::To(Subscribing {
                attempt: attempt.saturating_add(1),
            }),
            // Reconnect at once; back off only if that fails.
            (Connected, StreamLost) => Transition::To(Subscribing { attempt: 1 }),
            _ => Transition::Ignored,
        }
    }

    /// True while the event stream is open.
    pub fn is_connected(self) -> bool {
        self == Connection::Connected
    }
}

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
    use super::Connection::*;
    use super::LinkEvent::*;
    use super::*;

    #[test]
    fn every_transition() {
        let transient = SubscribeFailed { transient: true };
        let permanent = SubscribeFailed { transient: false };
        let s2 = Subscribing { attempt: 2 };
        let b2 = Waiting { attempt: 2 };
        let to = Transition::To;
        let ignored = Transition::Ignored;
        let cases = [
            (Idle, Start, to(Subscribing { attempt: 1 })),
            (Idle, Subscribed, ignored),
            (Idle, transient, ignored),
            (Idle, StreamLost, ignored),
            (Idle, BackoffElapsed, ignored),
            (Idle, Close, to(Closed)),
            (s2, Start, ignored),
            (s2, Subscribed, to(Connected)),
            (s2, transient, to(b2)),
            (s2, permanent, to(Closed)),
            (s2, StreamLost, ignored),
            (s2, BackoffElapsed, ignored),
            (s2, Close, to(Closed)),
            (Connected, Start, ignored),
            (Connected, Subscribed, ignored),
            (Connected, transient, ignored),
            (Connected, StreamLost, to(Subscribing { attempt: 1 })),
            (Connected, BackoffElapsed, ignored),
            (Connected, Close, to(Closed)),
            (b2, Start, ignored),
            (b2, Subscribed, ignored),
            (b2, transient, ignored),
            (b2, StreamLost, ignored),
            (b2, BackoffElapsed, to(Subscribing { attempt: 3 })),
            (b2, Close, to(Closed)),
            (Closed, Start, ignored),
            (Closed, Subscribed, ignored),
            (Closed, StreamLost, ignored),
            (Closed, BackoffElapsed, ignored),
            (Closed, Close, ignored),
        ];
        for (from, event, expected) in cases {
            assert_eq!(from.on(event), expected, "{from:?} on {event:?}");
        }
        assert!(Connected.is_connected());
        assert!(!s2.is_connected() && !b2.is_connected() && !Idle.is_connected());
    }

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
