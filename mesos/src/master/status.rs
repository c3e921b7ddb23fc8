//! A task's stream of status updates (or an operation's stream of operation
//! status updates) to its framework: ordered, at least once, one in flight.
//!
//! Every update that carries a uuid is retried until the framework
//! acknowledges that uuid: first after 10 s, then after twice as long each
//! time, at most 10 min apart (upstream's status update manager). Only the
//! oldest unacknowledged update is in flight; later ones wait behind it, so a
//! framework sees a task's states in order. While the framework is
//! disconnected nothing is sent; on reconnection the update in flight is sent
//! again at once.
//!
//! The stream is a small state machine, [`StreamState`]; every transition is
//! in [`StatusStream`] and covered by the table test below.

use std::collections::VecDeque;
use std::time::Duration;

use crate::v1;

/// First retry interval of an unacknowledged update.
pub const RETRY_MIN: Duration = Duration::from_secs(10);
/// Longest retry interval.
pub const RETRY_MAX: Duration = Duration::from_secs(600);

/// Where a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// Nothing waits for an acknowledgement.
    Idle,
    /// The front update was sent (or is due to be) and waits for its
    /// acknowledgement; `retry_at` is when it is sent again.
    AwaitingAck {
        /// Clock time (ns) of the next send.
        retry_at: u64,
        /// Interval before the retry after that.
        backoff: Duration,
    },
}

/// An update that is sent reliably: it carries a uuid the framework
/// acknowledges (updates without one are never retried).
pub trait Reliable: Clone {
    /// The update's uuid.
    fn uuid(&self) -> Option<&[u8]>;
}

impl Reliable for v1::TaskStatus {
    fn uuid(&self) -> Option<&[u8]> {
        self.uuid.as_deref()
    }
}

impl Reliable for v1::OperationStatus {
    fn uuid(&self) -> Option<&[u8]> {
        self.uuid.as_ref().map(|u| u.value.as_slice())
    }
}

/// What the caller must do after a transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<S = v1::TaskStatus> {
    /// Nothing.
    None,
    /// Send this update to the framework now (and arm a timer for `retry_at`).
    Send(Box<S>),
}

/// The pending updates of one task (or operation).
#[derive(Debug, Clone)]
pub struct StatusStream<S = v1::TaskStatus> {
    pending: VecDeque<S>,
    state: StreamState,
}

impl<S> Default for StatusStream<S> {
    fn default() -> Self {
        Self {
            pending: VecDeque::new(),
            state: StreamState::Idle,
        }
    }
}

/// A duration in clock nanoseconds, saturating.
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<S: Reliable> StatusStream<S> {
    /// The current state.
    pub fn state(&self) -> StreamState {
        self.state
    }

    /// Updates not yet acknowledged, oldest (in flight) first.
    pub fn pending(&self) -> impl Iterator<Item = &S> {
        self.pending.iter()
    }

    /// The update in flight.
    pub fn in_flight(&self) -> Option<&S> {
        self.pending.front()
    }

    /// True when nothing waits for an acknowledgement.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Queues an update (which carries its uuid). Sent at once when nothing
    /// else is in flight and the framework is `connected`.
    pub fn push(&mut self, status: S, now: u64, connected: bool) -> Action<S> {
        self.pending.push_back(status);
        match self.state {
            StreamState::Idle => self.send_front(now, RETRY_MIN, connected),
            StreamState::AwaitingAck { .. } => Action::None,
        }
    }

    /// An acknowledgement of `uuid`: when it is the update in flight, that
    /// one is done and the next (if any) goes out. Returns the action and
    /// whether the uuid matched.
    pub fn acknowledge(&mut self, uuid: &[u8], now: u64, connected: bool) -> (Action<S>, bool) {
        let matches = self
            .pending
            .front()
            .and_then(|s| s.uuid())
            .is_some_and(|u| u == uuid);
        if !matches {
            return (Action::None, false);
        }
        self.pending.pop_front();
        if self.pending.is_empty() {
            self.state = StreamState::Idle;
            return (Action::None, true);
        }
        (self.send_front(now, RETRY_MIN, connected), true)
    }

    /// A timer fired: resend the update in flight when its retry is due.
    pub fn retry(&mut self, now: u64, connected: bool) -> Action<S> {
        match self.state {
            StreamState::AwaitingAck { retry_at, backoff } if now >= retry_at => {
                self.send_front(now, (backoff * 2).min(RETRY_MAX), connected)
            }
            _ => Action::None,
        }
    }

    /// The framework (re)connected: the update in flight goes out again now.
    pub fn reconnected(&mut self, now: u64) -> Action<S> {
        match self.state {
            StreamState::AwaitingAck { .. } => self.send_front(now, RETRY_MIN, true),
            StreamState::Idle => Action::None,
        }
    }

    fn send_front(&mut self, now: u64, backoff: Duration, connected: bool) -> Action<S> {
        let Some(front) = self.pending.front() else {
            self.state = StreamState::Idle;
            return Action::None;
        };
        self.state = StreamState::AwaitingAck {
            retry_at: now.saturating_add(nanos(backoff)),
            backoff,
        };
        if connected {
            Action::Send(Box::new(front.clone()))
        } else {
            Action::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(state: v1::TaskState, uuid: u8) -> v1::TaskStatus {
        v1::TaskStatus {
            task_id: v1::TaskId {
                value: "t".to_string(),
            },
            state: state as i32,
            uuid: Some(vec![uuid; 16]),
            ..Default::default()
        }
    }

    enum Step {
        Push(u8),
        Ack(u8),
        Retry(u64),
        Reconnect(u64),
    }

    /// (step, connected, expected send (uuid byte), expected state after)
    fn check(steps: &[(Step, bool, Option<u8>, StreamState)]) {
        let mut s = StatusStream::<v1::TaskStatus>::default();
        for (i, (step, connected, sent, state)) in steps.iter().enumerate() {
            let action = match step {
                Step::Push(u) => s.push(update(v1::TaskState::TaskRunning, *u), 0, *connected),
                Step::Ack(u) => s.acknowledge(&[*u; 16], 0, *connected).0,
                Step::Retry(now) => s.retry(*now, *connected),
                Step::Reconnect(now) => s.reconnected(*now),
            };
            let got = match action {
                Action::Send(st) => st.uuid.map(|u| u[0]),
                Action::None => None,
            };
            assert_eq!(got, *sent, "step {i}: sent");
            assert_eq!(s.state(), *state, "step {i}: state");
        }
    }

    const S: u64 = 1_000_000_000;

    fn awaiting(retry_at: u64, backoff_s: u64) -> StreamState {
        StreamState::AwaitingAck {
            retry_at,
            backoff: Duration::from_secs(backoff_s),
        }
    }

    #[test]
    fn every_transition() {
        use Step::*;
        check(&[
            // Idle + push → sent, awaiting.
            (Push(1), true, Some(1), awaiting(10 * S, 10)),
            // Awaiting + push → queued behind it.
            (Push(2), true, None, awaiting(10 * S, 10)),
            // A wrong uuid changes nothing.
            (Ack(2), true, None, awaiting(10 * S, 10)),
            // Retry before it is due: nothing.
            (Retry(5 * S), true, None, awaiting(10 * S, 10)),
            // Due: resent with the backoff doubled.
            (Retry(10 * S), true, Some(1), awaiting(30 * S, 20)),
            (Retry(30 * S), true, Some(1), awaiting(70 * S, 40)),
            // Ack of the front: the next goes out with a fresh backoff.
            (Ack(1), true, Some(2), awaiting(10 * S, 10)),
            // Ack of the last: idle.
            (Ack(2), true, None, StreamState::Idle),
            // Retry and reconnect while idle: nothing.
            (Retry(100 * S), true, None, StreamState::Idle),
            (Reconnect(100 * S), true, None, StreamState::Idle),
            // Disconnected push: nothing sent, but awaiting.
            (Push(3), false, None, awaiting(10 * S, 10)),
            // Reconnect: sent at once.
            (Reconnect(3 * S), true, Some(3), awaiting(13 * S, 10)),
        ]);
    }

    #[test]
    fn backoff_is_capped_at_ten_minutes() {
        let mut s = StatusStream::<v1::TaskStatus>::default();
        s.push(update(v1::TaskState::TaskRunning, 1), 0, true);
        let mut now = 0;
        for _ in 0..20 {
            if let StreamState::AwaitingAck { retry_at, .. } = s.state() {
                now = retry_at;
            }
            assert!(matches!(s.retry(now, true), Action::Send(_)));
        }
        assert!(matches!(
            s.state(),
            StreamState::AwaitingAck { backoff, .. } if backoff == RETRY_MAX
        ));
    }
}
