//! A provider's link to the master: subscribing, connected, backing off
//! between attempts, closed; and how many resubscriptions in a row the
//! master dropped.
//!
//! ```text
//!          start          SUBSCRIBED
//!  Idle ──────────▶ Subscribing{n,d} ─────────▶ Connected
//!                     ▲     │ transport failure,     │ stream lost: Subscribing{1,0}
//!      backoff elapsed│     │ 5xx: d = 0             │ UPDATE_STATE failed:
//!                     │     │ dropped: d + 1         │ Waiting{1,0}
//!                   Waiting{n,d} ◀┘◀─────────────────┘
//!
//!  refused for good (400, 401, 403, 406, 415), a fatal call failure, or stop: Closed
//! ```
//! `d` counts SUBSCRIBEs the master answered but ended without SUBSCRIBED
//! (upstream drops a resubscription whose id it does not know). After
//! `forget_after` of them the runner takes the id as unknown to this master
//! (a new master, which keeps no record of providers) and subscribes
//! without it; see the module doc of [`super`].

/// Where the link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Not started.
    Idle,
    /// SUBSCRIBE number `attempt` (since the last connection) is in flight.
    Subscribing {
        /// 1 for the first attempt.
        attempt: u32,
        /// Dropped subscriptions in a row before this one.
        drops: u32,
    },
    /// SUBSCRIBED received; the event stream is open.
    Connected,
    /// Backing off before attempt `attempt + 1`.
    Waiting {
        /// The attempt that failed.
        attempt: u32,
        /// Dropped subscriptions in a row so far.
        drops: u32,
    },
    /// Nothing more will be tried.
    Closed,
}

/// What happens to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// The runner starts.
    Start,
    /// SUBSCRIBED arrived.
    Subscribed,
    /// The SUBSCRIBE failed; `transient` when trying again may help (the
    /// master unreachable, 503, 404 of an agent not there yet).
    Failed {
        /// Whether to try again.
        transient: bool,
    },
    /// The master answered the SUBSCRIBE but ended it without SUBSCRIBED.
    Dropped,
    /// The open stream ended, or a call on it failed in a way that a new
    /// subscription may mend.
    StreamLost,
    /// The backoff delay passed.
    BackoffElapsed,
    /// The runner stops, or gives up (a fatal refusal).
    Close,
}

/// The result of a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Moved to this state.
    To(Link),
    /// The event does not apply in this state.
    Ignored,
}

impl Link {
    /// The one place where the link changes.
    pub fn on(self, event: LinkEvent) -> Transition {
        use Link::*;
        use LinkEvent::*;
        match (self, event) {
            (Closed, _) => Transition::Ignored,
            (_, Close) => Transition::To(Closed),
            (Idle, Start) => Transition::To(Subscribing {
                attempt: 1,
                drops: 0,
            }),
            (Subscribing { .. }, Subscribed) => Transition::To(Connected),
            (Subscribing { attempt, .. }, Failed { transient: true }) => {
                Transition::To(Waiting { attempt, drops: 0 })
            }
            (Subscribing { .. }, Failed { transient: false }) => Transition::To(Closed),
            (Subscribing { attempt, drops }, Dropped) => Transition::To(Waiting {
                attempt,
                drops: drops.saturating_add(1),
            }),
            (Waiting { attempt, drops }, BackoffElapsed) => Transition::To(Subscribing {
                attempt: attempt.saturating_add(1),
                drops,
            }),
            // Resubscribe at once; back off only if that fails.
            (Connected, StreamLost) => Transition::To(Subscribing {
                attempt: 1,
                drops: 0,
            }),
            // A call on the stream failed (UPDATE_STATE): back off first, so
            // a master that takes subscriptions but not the state is not
            // asked in a tight loop.
            (Connected, Failed { transient: true }) => Transition::To(Waiting {
                attempt: 1,
                drops: 0,
            }),
            (Connected, Failed { transient: false }) => Transition::To(Closed),
            _ => Transition::Ignored,
        }
    }

    /// True while the event stream is open.
    pub fn is_connected(self) -> bool {
        self == Link::Connected
    }

    /// Dropped subscriptions in a row.
    pub fn drops(self) -> u32 {
        match self {
            Link::Subscribing { drops, .. } | Link::Waiting { drops, .. } => drops,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Link::*;
    use super::LinkEvent::*;
    use super::*;

    #[test]
    fn every_transition() {
        let transient = Failed { transient: true };
        let permanent = Failed { transient: false };
        let s = Subscribing {
            attempt: 2,
            drops: 1,
        };
        let w = Waiting {
            attempt: 2,
            drops: 1,
        };
        let first = Subscribing {
            attempt: 1,
            drops: 0,
        };
        let to = Transition::To;
        let ignored = Transition::Ignored;
        let events = [
            Start,
            Subscribed,
            transient,
            permanent,
            Dropped,
            StreamLost,
            BackoffElapsed,
            Close,
        ];
        let table: [(Link, [Transition; 8]); 5] = [
            (
                Idle,
                [
                    to(first),
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    to(Closed),
                ],
            ),
            (
                s,
                [
                    ignored,
                    to(Connected),
                    to(Waiting {
                        attempt: 2,
                        drops: 0,
                    }),
                    to(Closed),
                    to(Waiting {
                        attempt: 2,
                        drops: 2,
                    }),
                    ignored,
                    ignored,
                    to(Closed),
                ],
            ),
            (
                Connected,
                [
                    ignored,
                    ignored,
                    to(Waiting {
                        attempt: 1,
                        drops: 0,
                    }),
                    to(Closed),
                    ignored,
                    to(first),
                    ignored,
                    to(Closed),
                ],
            ),
            (
                w,
                [
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    ignored,
                    to(Subscribing {
                        attempt: 3,
                        drops: 1,
                    }),
                    to(Closed),
                ],
            ),
            (Closed, [ignored; 8]),
        ];
        for (from, expected) in table {
            for (event, expect) in events.iter().zip(expected) {
                assert_eq!(from.on(*event), expect, "{from:?} on {event:?}");
            }
        }
        assert!(Connected.is_connected());
        assert!(!s.is_connected() && !w.is_connected() && !Idle.is_connected());
        assert_eq!((s.drops(), w.drops(), Connected.drops()), (1, 1, 0));
    }
}
