//! A provider's operations and their status updates: each operation the
//! master sent (or the provider dropped) is kept until the master
//! acknowledges its terminal status, which the provider sends with a status
//! uuid and retries with a doubling backoff (upstream's status update
//! manager: 10 s, doubling, at most 10 min) while connected.
//!
//! ```text
//!            decided (connected: sent)        acknowledged (status uuid matches)
//!  Applying ─────────────────────────▶ Unacknowledged ──────────────────▶ Acknowledged
//!                                       │  ▲ due: sent again, backoff doubled
//!                                       └──┘ paused (disconnected): no retries;
//!                                            resumed: sent at once, backoff reset
//! ```
//! Every status this provider makes is terminal (an operation is applied,
//! fails or is dropped in one step), so an operation has one status to
//! deliver and is forgotten once it is acknowledged.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::v1;
use crate::v1::resource_provider::call;

/// How status updates are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first wait for an acknowledgement.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// Upstream's `STATUS_UPDATE_RETRY_INTERVAL_MIN` and `_MAX`.
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(600),
        }
    }
}

/// Where an operation's status stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Being applied: no status yet.
    Applying,
    /// The status waits for the master's acknowledgement.
    Unacknowledged {
        /// Its uuid, which the acknowledgement names.
        status_uuid: Vec<u8>,
        /// When it goes out again; `None` while disconnected.
        retry_at: Option<Instant>,
        /// The wait before that retry.
        backoff: Duration,
    },
    /// Acknowledged: the operation is done with.
    Acknowledged,
}

/// What happens to a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryEvent<'a> {
    /// The operation's status is decided; `connected` when it can go out now.
    Decided {
        /// The status's uuid.
        status_uuid: &'a [u8],
        /// Whether the master can be told now.
        connected: bool,
    },
    /// A retry timer fired.
    Due,
    /// ACKNOWLEDGE_OPERATION_STATUS naming this status uuid.
    Acknowledged(&'a [u8]),
    /// The master asked (RECONCILE_OPERATIONS).
    Asked,
    /// The stream is gone.
    Paused,
    /// Subscribed again.
    Resumed,
}

/// What the runner does after a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// Send the status (UPDATE_OPERATION_STATUS).
    Send,
    /// The operation is done with: forget it.
    Forget,
}

impl Delivery {
    /// The one place where a delivery changes, at `now`.
    pub fn on(
        &self,
        event: DeliveryEvent<'_>,
        now: Instant,
        policy: RetryPolicy,
    ) -> (Delivery, Action) {
        use DeliveryEvent as E;
        let unacknowledged = |status_uuid: &[u8], retry_at, backoff| Delivery::Unacknowledged {
            status_uuid: status_uuid.to_vec(),
            retry_at,
            backoff,
        };
        match (self, event) {
            (
                Delivery::Applying,
                E::Decided {
                    status_uuid,
                    connected,
                },
            ) => {
                let retry_at = connected.then(|| now + policy.initial);
                let action = if connected {
                    Action::Send
                } else {
                    Action::None
                };
                (
                    unacknowledged(status_uuid, retry_at, policy.initial),
                    action,
                )
            }
            (
                Delivery::Unacknowledged {
                    status_uuid,
                    retry_at: Some(at),
                    backoff,
                },
                E::Due,
            ) if now >= *at => {
                let backoff = (*backoff * 2).min(policy.max);
                (
                    unacknowledged(status_uuid, Some(now + backoff), backoff),
                    Action::Send,
                )
            }
            (Delivery::Unacknowledged { status_uuid, .. }, E::Acknowledged(acked))
                if status_uuid.as_slice() == acked =>
            {
                (Delivery::Acknowledged, Action::Forget)
            }
            (
                Delivery::Unacknowledged {
                    retry_at: Some(_), ..
                },
                E::Asked,
            ) => (self.clone(), Action::Send),
            (
                Delivery::Unacknowledged {
                    status_uuid,
                    backoff,
                    ..
                },
                E::Paused,
            ) => (unacknowledged(status_uuid, None, *backoff), Action::None),
            (Delivery::Unacknowledged { status_uuid, .. }, E::Resumed) => (
                unacknowledged(status_uuid, Some(now + policy.initial), policy.initial),
                Action::Send,
            ),
            _ => (self.clone(), Action::None),
        }
    }

    /// When this delivery wants a `Due`.
    pub fn retry_at(&self) -> Option<Instant> {
        match self {
            Delivery::Unacknowledged { retry_at, .. } => *retry_at,
            _ => None,
        }
    }
}

/// An operation kept by the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The operation, its latest status last in `statuses`.
    pub operation: v1::Operation,
    /// Where its status stands.
    pub delivery: Delivery,
}

impl Record {
    /// The UPDATE_OPERATION_STATUS of its latest status.
    pub fn update(&self) -> call::UpdateOperationStatus {
        call::UpdateOperationStatus {
            framework_id: self.operation.framework_id.clone(),
            status: self.operation.latest_status.clone(),
            latest_status: Some(self.operation.latest_status.clone()),
            operation_uuid: self.operation.uuid.clone(),
        }
    }
}

/// The provider's operations by uuid.
#[derive(Debug, Default)]
pub struct Operations {
    records: BTreeMap<Vec<u8>, Record>,
    policy: RetryPolicy,
}

impl Operations {
    /// No operations yet; status updates retried as `policy` says.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            records: BTreeMap::new(),
            policy,
        }
    }

    /// Operations recovered from a checkpoint: those with a terminal latest
    /// status wait for their acknowledgement (sent once subscribed), the
    /// others are to be applied again.
    pub fn recover(&mut self, operations: Vec<v1::Operation>) {
        for operation in operations {
            let delivery = match operation.latest_status.uuid.as_ref() {
                Some(uuid) if operation.latest_status.state().is_terminal() => {
                    Delivery::Unacknowledged {
                        status_uuid: uuid.value.clone(),
                        retry_at: None,
                        backoff: self.policy.initial,
                    }
                }
                _ => Delivery::Applying,
            };
            self.records.insert(
                operation.uuid.value.clone(),
                Record {
                    operation,
                    delivery,
                },
            );
        }
    }

    /// The operation of `uuid`.
    pub fn get(&self, uuid: &[u8]) -> Option<&Record> {
        self.records.get(uuid)
    }

    /// Every operation, for UPDATE_STATE and the checkpoint.
    pub fn all(&self) -> Vec<v1::Operation> {
        self.records.values().map(|r| r.operation.clone()).collect()
    }

    /// Operations still to be applied (recovered while applying).
    pub fn applying(&self) -> Vec<Vec<u8>> {
        self.records
            .iter()
            .filter(|(_, r)| r.delivery == Delivery::Applying)
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// Operations waiting for an acknowledgement.
    pub fn unacknowledged(&self) -> usize {
        self.records
            .values()
            .filter(|r| matches!(r.delivery, Delivery::Unacknowledged { .. }))
            .count()
    }

    /// Keeps an operation that is about to be applied.
    pub fn insert(&mut self, operation: v1::Operation) {
        self.records.insert(
            operation.uuid.value.clone(),
            Record {
                operation,
                delivery: Delivery::Applying,
            },
        );
    }

    /// The operation's (terminal, uuid-carrying) status; the update to send
    /// when `connected`.
    pub fn decide(
        &mut self,
        uuid: &[u8],
        status: v1::OperationStatus,
        connected: bool,
        now: Instant,
    ) -> Option<call::UpdateOperationStatus> {
        let status_uuid = status.uuid.as_ref()?.value.clone();
        let record = self.records.get_mut(uuid)?;
        record.operation.statuses.push(status.clone());
        record.operation.latest_status = status;
        let event = DeliveryEvent::Decided {
            status_uuid: &status_uuid,
            connected,
        };
        self.step(uuid, event, now)
    }

    /// ACKNOWLEDGE_OPERATION_STATUS; true when it ended an operation.
    pub fn acknowledge(&mut self, uuid: &[u8], status_uuid: &[u8], now: Instant) -> bool {
        self.step(uuid, DeliveryEvent::Acknowledged(status_uuid), now);
        !self.records.contains_key(uuid)
    }

    /// The status of a known operation again (RECONCILE_OPERATIONS).
    pub fn ask(&mut self, uuid: &[u8], now: Instant) -> Option<call::UpdateOperationStatus> {
        self.step(uuid, DeliveryEvent::Asked, now)
    }

    /// Retries that are due.
    pub fn due(&mut self, now: Instant) -> Vec<call::UpdateOperationStatus> {
        self.step_all(DeliveryEvent::Due, now)
    }

    /// The stream is gone: no retries until [`Self::resume`].
    pub fn pause(&mut self, now: Instant) {
        self.step_all(DeliveryEvent::Paused, now);
    }

    /// Subscribed again: every unacknowledged status goes out now.
    pub fn resume(&mut self, now: Instant) -> Vec<call::UpdateOperationStatus> {
        self.step_all(DeliveryEvent::Resumed, now)
    }

    /// The earliest retry.
    pub fn next_retry(&self) -> Option<Instant> {
        self.records
            .values()
            .filter_map(|r| r.delivery.retry_at())
            .min()
    }

    fn step_all(
        &mut self,
        event: DeliveryEvent<'_>,
        now: Instant,
    ) -> Vec<call::UpdateOperationStatus> {
        let uuids: Vec<Vec<u8>> = self.records.keys().cloned().collect();
        uuids
            .iter()
            .filter_map(|u| self.step(u, event, now))
            .collect()
    }

    fn step(
        &mut self,
        uuid: &[u8],
        event: DeliveryEvent<'_>,
        now: Instant,
    ) -> Option<call::UpdateOperationStatus> {
        let record = self.records.get_mut(uuid)?;
        let (delivery, action) = record.delivery.on(event, now, self.policy);
        record.delivery = delivery;
        match action {
            Action::None => None,
            Action::Send => Some(record.update()),
            Action::Forget => {
                self.records.remove(uuid);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transition() {
        let policy = RetryPolicy {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(25),
        };
        let t0 = Instant::now();
        let s = |n: u64| Duration::from_secs(n);
        let u = |retry_at: Option<Instant>, backoff| Delivery::Unacknowledged {
            status_uuid: b"s1".to_vec(),
            retry_at,
            backoff,
        };
        let on = |d: &Delivery, e| d.on(e, t0 + s(10), policy);
        let decided = |connected| DeliveryEvent::Decided {
            status_uuid: b"s1",
            connected,
        };
        let waiting = u(Some(t0 + s(10)), s(10));
        let paused = u(None, s(20));
        let cases: Vec<(Delivery, DeliveryEvent<'_>, (Delivery, Action))> = vec![
            // Applying: only the decision moves it.
            (
                Delivery::Applying,
                decided(true),
                (u(Some(t0 + s(20)), s(10)), Action::Send),
            ),
            (
                Delivery::Applying,
                decided(false),
                (u(None, s(10)), Action::None),
            ),
            (
                Delivery::Applying,
                DeliveryEvent::Due,
                (Delivery::Applying, Action::None),
            ),
            (
                Delivery::Applying,
                DeliveryEvent::Acknowledged(b"s1"),
                (Delivery::Applying, Action::None),
            ),
            (
                Delivery::Applying,
                DeliveryEvent::Resumed,
                (Delivery::Applying, Action::None),
            ),
            // Waiting: due at t0+10 (now): resent, backoff doubled.
            (
                waiting.clone(),
                DeliveryEvent::Due,
                (u(Some(t0 + s(30)), s(20)), Action::Send),
            ),
            (
                waiting.clone(),
                decided(true),
                (waiting.clone(), Action::None),
            ),
            (
                waiting.clone(),
                DeliveryEvent::Acknowledged(b"other"),
                (waiting.clone(), Action::None),
            ),
            (
                waiting.clone(),
                DeliveryEvent::Acknowledged(b"s1"),
                (Delivery::Acknowledged, Action::Forget),
            ),
            (
                waiting.clone(),
                DeliveryEvent::Asked,
                (waiting.clone(), Action::Send),
            ),
            (
                waiting.clone(),
                DeliveryEvent::Paused,
                (u(None, s(10)), Action::None),
            ),
            (
                waiting.clone(),
                DeliveryEvent::Resumed,
                (u(Some(t0 + s(20)), s(10)), Action::Send),
            ),
            // Not due yet.
            (
                u(Some(t0 + s(11)), s(10)),
                DeliveryEvent::Due,
                (u(Some(t0 + s(11)), s(10)), Action::None),
            ),
            // The backoff is capped.
            (
                u(Some(t0), s(20)),
                DeliveryEvent::Due,
                (u(Some(t0 + s(35)), s(25)), Action::Send),
            ),
            // Paused: no retries, not sent when asked; resumed with a fresh backoff.
            (
                paused.clone(),
                DeliveryEvent::Due,
                (paused.clone(), Action::None),
            ),
            (
                paused.clone(),
                DeliveryEvent::Asked,
                (paused.clone(), Action::None),
            ),
            (
                paused.clone(),
                DeliveryEvent::Acknowledged(b"s1"),
                (Delivery::Acknowledged, Action::Forget),
            ),
            (
                paused.clone(),
                DeliveryEvent::Resumed,
                (u(Some(t0 + s(20)), s(10)), Action::Send),
            ),
            // Acknowledged: final.
            (
                Delivery::Acknowledged,
                DeliveryEvent::Due,
                (Delivery::Acknowledged, Action::None),
            ),
            (
                Delivery::Acknowledged,
                DeliveryEvent::Resumed,
                (Delivery::Acknowledged, Action::None),
            ),
            (
                Delivery::Acknowledged,
                DeliveryEvent::Acknowledged(b"s1"),
                (Delivery::Acknowledged, Action::None),
            ),
        ];
        for (from, event, expected) in cases {
            assert_eq!(on(&from, event), expected, "{from:?} on {event:?}");
        }
    }

    fn operation(
        uuid: &[u8],
        state: v1::OperationState,
        status_uuid: Option<&[u8]>,
    ) -> v1::Operation {
        v1::Operation {
            uuid: v1::Uuid {
                value: uuid.to_vec(),
            },
            latest_status: v1::OperationStatus {
                state: state as i32,
                uuid: status_uuid.map(|u| v1::Uuid { value: u.to_vec() }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_book_sends_retries_and_forgets_when_acknowledged() {
        let policy = RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(4),
        };
        let t0 = Instant::now();
        let mut book = Operations::new(policy);
        book.insert(operation(
            b"op1",
            v1::OperationState::OperationPending,
            None,
        ));
        assert_eq!(book.applying(), vec![b"op1".to_vec()]);
        let finished = operation(b"op1", v1::OperationState::OperationFinished, Some(b"st1"));
        let sent = book.decide(b"op1", finished.latest_status.clone(), true, t0);
        assert_eq!(
            sent.map(|u| u.status.state()),
            Some(v1::OperationState::OperationFinished)
        );
        assert_eq!(book.next_retry(), Some(t0 + Duration::from_secs(1)));
        assert!(book.due(t0).is_empty());
        assert_eq!(book.due(t0 + Duration::from_secs(1)).len(), 1);
        assert_eq!(book.next_retry(), Some(t0 + Duration::from_secs(3)));
        book.pause(t0);
        assert_eq!(book.next_retry(), None);
        assert_eq!(book.resume(t0).len(), 1);
        assert!(!book.acknowledge(b"op1", b"wrong", t0));
        assert!(book.acknowledge(b"op1", b"st1", t0));
        assert!(book.get(b"op1").is_none() && book.unacknowledged() == 0);
    }

    #[test]
    fn recovered_operations_wait_or_are_applied_again() {
        let mut book = Operations::new(RetryPolicy::default());
        book.recover(vec![
            operation(b"done", v1::OperationState::OperationFinished, Some(b"s")),
            operation(b"half", v1::OperationState::OperationPending, None),
        ]);
        assert_eq!(book.applying(), vec![b"half".to_vec()]);
        assert_eq!(book.unacknowledged(), 1);
        assert_eq!(
            book.next_retry(),
            None,
            "nothing is sent before a subscription"
        );
        assert_eq!(book.resume(Instant::now()).len(), 1);
    }
}
