//! The driver's link to the master: subscribing, connected, backing off
//! between attempts, closed. How long to back off ([`Backoff`]) is shared
//! with the resource provider side.
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

pub use crate::http_client::{Backoff, jitter};

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
}
