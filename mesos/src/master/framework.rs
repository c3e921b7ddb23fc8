//! A framework as the master keeps it, and its connection state machine.
//!
//! ```text
//!              subscribe                 stream closes
//!   (new) ────────────────▶ Connected ───────────────────▶ Disconnected
//!                             ▲  │ subscribe again                │
//!                             │  └──(failover: old stream ERROR)  │ failover_timeout
//!                             └────────── subscribe ──────────────┤ passes, or
//!                                                                 ▼ TEARDOWN
//!                                                              Removed
//! ```
//! TEARDOWN (or an event stream that cannot keep up and is closed) also
//! leads from Connected; a removed framework's id is refused afterwards.

use std::collections::{BTreeMap, BTreeSet};

use tokio::sync::mpsc;

use super::stream::StreamEvent;
use crate::v1;

/// Where a framework's connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// An event stream is open.
    Connected,
    /// No stream; removed at `failover_deadline` unless it subscribes again.
    Disconnected {
        /// Clock time (ns) at which the framework is removed.
        failover_deadline: u64,
    },
    /// Torn down or failed over for good; kept only for reports.
    Removed,
}

/// What may happen to a framework's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// A SUBSCRIBE naming this framework (or creating it).
    Subscribe,
    /// Its event stream closed, at clock time `now`, with a failover timeout.
    StreamClosed {
        /// Clock time (ns).
        now: u64,
        /// `failover_timeout` in ns.
        timeout: u64,
    },
    /// The failover timer fired at clock time `now`.
    FailoverTimer {
        /// Clock time (ns).
        now: u64,
    },
    /// TEARDOWN (or removal by the operator).
    Teardown,
}

/// The result of a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Moved to this state.
    To(Connection),
    /// The event does not apply in this state; nothing changes.
    Ignored,
}

impl Connection {
    /// The one place where connection states change.
    pub fn on(self, event: ConnectionEvent) -> Transition {
        use Connection::*;
        use ConnectionEvent::*;
        match (self, event) {
            (Removed, _) => Transition::Ignored,
            (_, Teardown) => Transition::To(Removed),
            (Connected | Disconnected { .. }, Subscribe) => Transition::To(Connected),
            (Connected, StreamClosed { now, timeout }) => Transition::To(Disconnected {
                failover_deadline: now.saturating_add(timeout),
            }),
            (Disconnected { .. }, StreamClosed { .. }) => Transition::Ignored,
            (Disconnected { failover_deadline }, FailoverTimer { now })
                if now >= failover_deadline =>
            {
                Transition::To(Removed)
            }
            (_, FailoverTimer { .. }) => Transition::Ignored,
        }
    }
}

/// The open event stream of a subscribed framework.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The `Mesos-Stream-Id` of this subscription.
    pub id: String,
    /// Where its events go (the HTTP response task, or an in-process driver).
    pub sink: mpsc::Sender<StreamEvent>,
    /// Increases with every subscription, so timers of an old stream are ignored.
    pub generation: u64,
}

/// A framework known to the master.
#[derive(Debug)]
pub struct Framework {
    /// Its id.
    pub id: String,
    /// What it subscribed with (id filled in).
    pub info: v1::FrameworkInfo,
    /// Its roles (`roles` of a MULTI_ROLE framework, else `role`).
    pub roles: Vec<String>,
    /// Roles it does not want offers for.
    pub suppressed: BTreeSet<String>,
    /// Connection state.
    pub connection: Connection,
    /// The open stream while connected.
    pub stream: Option<Stream>,
    /// Outstanding offers.
    pub offers: OfferSet,
    /// Its tasks by task id (the key into the master's task table).
    pub tasks: BTreeSet<String>,
    /// Tasks that ended and were acknowledged, newest last (for reports).
    pub completed_tasks: std::collections::VecDeque<v1::Task>,
    /// Clock time (ns) of the first subscription.
    pub registered_time: u64,
    /// Clock time (ns) of the last resubscription.
    pub reregistered_time: Option<u64>,
    /// Clock time (ns) when it disconnected or was removed.
    pub unregistered_time: Option<u64>,
    /// Calls received, by type name (for metrics).
    pub calls: BTreeMap<&'static str, u64>,
    /// The scheduler's libprocess pid, for a framework registered over the
    /// libprocess protocol (its last registration's; kept while it is
    /// disconnected, as Mesos shows it).
    pub pid: Option<String>,
    /// Where an allocation run collects this framework's offers: the run's
    /// number and the index of its OFFERS event in that run's list. Stale
    /// once another run starts.
    pub(super) offer_run: (u64, usize),
}

impl Framework {
    /// True when the framework opted in to PARTITION_AWARE.
    pub fn partition_aware(&self) -> bool {
        has_capability(
            &self.info,
            v1::framework_info::capability::Type::PartitionAware,
        )
    }

    /// True while its stream is open.
    pub fn connected(&self) -> bool {
        self.connection == Connection::Connected
    }

    /// Sends an event on the open stream. False when there is no stream or
    /// the stream is full (a reader that does not keep up): the caller closes it.
    pub fn send(&self, event: impl Into<StreamEvent>) -> bool {
        match &self.stream {
            Some(s) => s.sink.try_send(event.into()).is_ok(),
            None => false,
        }
    }
}

/// A framework's outstanding offers, by number (`offer_book.rs`), in the
/// order they were made. An allocation run adds thousands, each
/// framework's in one go at the run's close: appended (numbers only grow),
/// not hashed one by one. A withdrawn offer stays listed until withdrawn
/// ones are about half the list, which is then cut down to the offers still
/// out; readers skip the withdrawn the same way (the books say which).
#[derive(Debug, Default)]
pub struct OfferSet {
    numbers: Vec<u64>,
    /// How many of `numbers` are still out (a count kept as offers come
    /// and go; exact again after each cut).
    out: usize,
}

impl OfferSet {
    /// Adds offers made after every offer already listed.
    pub fn extend(&mut self, numbers: &[u64]) {
        debug_assert!(
            numbers.windows(2).all(|w| w[0] < w[1])
                && self
                    .numbers
                    .last()
                    .zip(numbers.first())
                    .is_none_or(|(l, f)| l < f),
            "offers are listed in the order they were made"
        );
        self.numbers.extend_from_slice(numbers);
        self.out += numbers.len();
    }

    /// One of the offers was withdrawn; `outstanding` says which numbers
    /// are still out (the books, that offer already gone from them).
    pub fn remove(&mut self, outstanding: impl Fn(u64) -> bool) {
        self.out = self.out.saturating_sub(1);
        if self.numbers.len() > 2 * self.out + 32 {
            self.numbers.retain(|&n| outstanding(n));
            self.out = self.numbers.len();
        }
    }

    /// The listed offers `keep` holds (the caller's test of being still
    /// out, and any more it wants), in the order they were made.
    pub fn listed(&self, keep: impl Fn(u64) -> bool) -> Vec<u64> {
        self.numbers.iter().copied().filter(|&n| keep(n)).collect()
    }
}

/// True when the framework info lists the capability.
pub fn has_capability(
    info: &v1::FrameworkInfo,
    kind: v1::framework_info::capability::Type,
) -> bool {
    info.capabilities.iter().any(|c| c.r#type() == kind)
}

/// The single role of a framework that is not MULTI_ROLE capable (Mesos'
/// deprecated `FrameworkInfo.role`, still what such frameworks send).
#[allow(deprecated)]
pub fn legacy_role(info: &v1::FrameworkInfo) -> Option<&str> {
    info.role.as_deref()
}

/// The roles a framework info asks for.
pub fn roles_of(info: &v1::FrameworkInfo) -> Vec<String> {
    if has_capability(info, v1::framework_info::capability::Type::MultiRole) {
        info.roles.clone()
    } else {
        vec![legacy_role(info).unwrap_or("*").to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::Connection::*;
    use super::ConnectionEvent::*;
    use super::*;

    #[test]
    fn every_transition() {
        let closed = StreamClosed {
            now: 100,
            timeout: 50,
        };
        let d = Disconnected {
            failover_deadline: 150,
        };
        let cases = [
            (Connected, Subscribe, Transition::To(Connected)),
            (Connected, closed, Transition::To(d)),
            (Connected, FailoverTimer { now: 500 }, Transition::Ignored),
            (Connected, Teardown, Transition::To(Removed)),
            (d, Subscribe, Transition::To(Connected)),
            (d, closed, Transition::Ignored),
            (d, FailoverTimer { now: 149 }, Transition::Ignored),
            (d, FailoverTimer { now: 150 }, Transition::To(Removed)),
            (d, Teardown, Transition::To(Removed)),
            (Removed, Subscribe, Transition::Ignored),
            (Removed, closed, Transition::Ignored),
            (Removed, FailoverTimer { now: 1 }, Transition::Ignored),
            (Removed, Teardown, Transition::Ignored),
        ];
        for (from, event, expected) in cases {
            assert_eq!(from.on(event), expected, "{from:?} on {event:?}");
        }
    }

    #[test]
    fn an_offer_list_drops_withdrawn_offers_and_keeps_their_order() {
        use std::collections::BTreeSet;
        let mut list = OfferSet::default();
        let mut books: BTreeSet<u64> = BTreeSet::new();
        // Two runs' worth, then most withdrawn one by one in a scattered
        // order: the list must list exactly the books' offers, in order,
        // after every withdrawal, and shrink once most are gone.
        let first: Vec<u64> = (1..=60).collect();
        let second: Vec<u64> = (100..=160).step_by(2).collect();
        for run in [&first, &second] {
            list.extend(run);
            books.extend(run.iter().copied());
        }
        let all: Vec<u64> = books.iter().copied().collect();
        for (i, &n) in all.iter().enumerate().filter(|(i, _)| i % 7 != 3) {
            books.remove(&n);
            list.remove(|m| books.contains(&m));
            let listed = list.listed(|m| books.contains(&m));
            let expected: Vec<u64> = books.iter().copied().collect();
            assert_eq!(listed, expected, "after withdrawing {n} (the {i}th)");
        }
        assert!(
            list.numbers.len() <= 2 * books.len() + 32,
            "{} numbers kept for {} offers out",
            list.numbers.len(),
            books.len()
        );
        assert!(list.numbers.len() < all.len(), "the list was never cut");
        // Later offers still go after the survivors.
        list.extend(&[500, 501]);
        books.extend([500, 501]);
        let expected: Vec<u64> = books.iter().copied().collect();
        assert_eq!(list.listed(|m| books.contains(&m)), expected);
    }

    #[test]
    fn a_zero_failover_timeout_removes_at_the_first_timer() {
        let d = match Connected.on(StreamClosed { now: 7, timeout: 0 }) {
            Transition::To(d) => d,
            Transition::Ignored => panic!("must disconnect"),
        };
        assert_eq!(d.on(FailoverTimer { now: 7 }), Transition::To(Removed));
    }
}
