//! What a partition leaves for its RM: new allocations in their compact
//! form, and the outbox of responses and events waiting to be sent.

use std::borrow::Cow;
use std::sync::Arc;

use unisched_shim_api::Lease;
use unisched_si as si;

use crate::resources::{NameTable, Resource, ResourceNames};
use crate::scheduler::objects::{AppState, FastMap};

/// The wire form of each allocation size a lease carries: made once per
/// size on the scheduling thread, then shared by every [`Lease`] of that
/// size (a counted reference each). Allocations come in runs of one size,
/// so the last size is compared first, by address: sizes are interned
/// ([`crate::scheduler::objects::Sizes`]), one `Arc` per distinct size.
/// Before, a `Placed` record (the size as a 128-byte vector) went to the
/// dispatcher, which made the lease from it: a copy of every record and a
/// comparison of the sizes per allocation (186 instructions of a W4 lease,
/// on the scheduling thread since offer runs go inline).
#[derive(Debug, Default)]
pub struct WireSizes {
    table: NameTable,
    last: Option<(Arc<Resource>, Arc<si::Resource>)>,
    /// By the size's address; each entry holds the size, so no address is
    /// reused while it is here.
    by_size: FastMap<usize, (Arc<Resource>, Arc<si::Resource>)>,
}

/// Most sizes [`WireSizes`] keeps before it starts again (a cluster's
/// distinct allocation sizes are usually a handful).
const WIRE_SIZES_KEPT: usize = 1024;

impl WireSizes {
    /// The wire form of `size` (types with zero quantity left out).
    pub fn of(&mut self, size: &Arc<Resource>, names: &ResourceNames) -> Arc<si::Resource> {
        if let Some((last, wire)) = &self.last
            && Arc::ptr_eq(last, size)
        {
            return wire.clone();
        }
        let key = Arc::as_ptr(size) as usize;
        let wire = match self.by_size.get(&key) {
            Some((_, wire)) => wire.clone(),
            None => {
                if self.by_size.len() >= WIRE_SIZES_KEPT {
                    self.by_size.clear();
                }
                // Names only grow and never change index: a copy refreshed
                // now names every type the size can hold.
                self.table.refresh(names);
                let wire = Arc::new(self.table.to_si(size));
                self.by_size.insert(key, (size.clone(), wire.clone()));
                wire
            }
        };
        self.last = Some((size.clone(), wire.clone()));
        wire
    }
}

/// A release the core reports to the RM, left for the
/// dispatcher to put in wire form: the `si::AllocationRelease` and its
/// "allocation removed" event are both built from it on that thread.
#[derive(Debug, Clone)]
pub struct Released {
    /// Application id.
    pub app: Arc<str>,
    /// Allocation key.
    pub key: Arc<str>,
    /// Allocation id.
    pub id: Arc<str>,
    /// Why it ends.
    pub termination: si::TerminationType,
    /// The message for the RM and the event.
    pub message: Cow<'static, str>,
}

impl Released {
    /// The wire form.
    pub fn to_wire(&self, partition_name: &str) -> si::AllocationRelease {
        si::AllocationRelease {
            partition_name: partition_name.to_string(),
            application_id: String::from(&*self.app),
            termination_type: self.termination as i32,
            message: self.message.to_string(),
            allocation_key: String::from(&*self.key),
            allocation_id: String::from(&*self.id),
        }
    }

    /// The application event of the release.
    fn event(&self, now: u64) -> si::EventRecord {
        use si::event_record::{ChangeDetail, ChangeType, Type};
        let detail = match self.termination {
            si::TerminationType::PreemptedByScheduler => ChangeDetail::AllocPreempt,
            si::TerminationType::Timeout => ChangeDetail::AllocTimeout,
            si::TerminationType::PlaceholderReplaced => ChangeDetail::AllocReplaced,
            _ => ChangeDetail::AllocCancel,
        };
        event_record(
            now,
            Type::App,
            String::from(&*self.app),
            String::from(&*self.id),
            ChangeType::Remove,
            detail,
            self.message.to_string(),
        )
    }
}

/// An application's change of state as the scheduling thread leaves it:
/// the dispatcher makes it the response's `UpdatedApplication` and the
/// application event (three strings and a record each, which an offer run
/// made twice per framework on the scheduling thread).
#[derive(Debug, Clone)]
pub struct StateChange {
    /// Application id.
    pub app: Arc<str>,
    /// The state it is in now.
    pub state: AppState,
    /// When it changed.
    pub at: u64,
    /// Why.
    pub message: &'static str,
}

impl StateChange {
    /// The response's form.
    pub fn to_wire(&self) -> si::UpdatedApplication {
        si::UpdatedApplication {
            application_id: String::from(&*self.app),
            state: self.state.as_str().to_string(),
            state_transition_timestamp: i64::try_from(self.at).unwrap_or(i64::MAX),
            message: self.message.to_string(),
        }
    }

    /// The application event (`APP`, `SET`, the state's detail).
    fn event(&self) -> si::EventRecord {
        use si::event_record::{ChangeDetail, ChangeType, Type};
        let detail = match self.state {
            AppState::New => ChangeDetail::AppNew,
            AppState::Accepted => ChangeDetail::AppAccepted,
            AppState::Running => ChangeDetail::AppRunning,
            AppState::Completing => ChangeDetail::AppCompleting,
            AppState::Completed => ChangeDetail::AppCompleted,
            AppState::Rejected => ChangeDetail::AppReject,
            AppState::Failing => ChangeDetail::AppFailing,
            AppState::Failed => ChangeDetail::AppFailed,
            AppState::Resuming => ChangeDetail::AppResuming,
            AppState::Expired => ChangeDetail::AppExpired,
        };
        event_record(
            self.at,
            Type::App,
            String::from(&*self.app),
            String::new(),
            ChangeType::Set,
            detail,
            self.message.to_string(),
        )
    }
}

/// An event as the outbox keeps it: built, or a release's or a state
/// change's, built by the dispatcher. The order of the list is the order
/// the RM sees.
#[derive(Debug, Clone)]
pub enum PendingEvent {
    /// A finished record (boxed: the list's other kinds are half its size,
    /// and a run's list of state changes grows by copying).
    Record(Box<si::EventRecord>),
    /// The event of a release, at a time.
    Released(u64, Released),
    /// The event of an application's change of state.
    State(StateChange),
}

impl PendingEvent {
    /// The wire record.
    pub fn into_record(self) -> si::EventRecord {
        match self {
            PendingEvent::Record(r) => *r,
            PendingEvent::Released(at, r) => r.event(at),
            PendingEvent::State(c) => c.event(),
        }
    }
}

/// The application results of one flush: the response, and the changes of
/// state still to be put at the end of its `updated` list.
#[derive(Debug, Default)]
pub struct ApplicationBatch {
    /// Accepted and rejected applications (and nothing in `updated`).
    pub response: si::ApplicationResponse,
    /// Changes of state, in the order they happened.
    pub states: Vec<StateChange>,
}

impl ApplicationBatch {
    /// The wire response.
    pub fn into_response(self) -> si::ApplicationResponse {
        let mut response = self.response;
        response
            .updated
            .extend(self.states.iter().map(StateChange::to_wire));
        response
    }
}

fn event_record(
    now: u64,
    kind: si::event_record::Type,
    object_id: String,
    reference_id: String,
    change: si::event_record::ChangeType,
    detail: si::event_record::ChangeDetail,
    message: String,
) -> si::EventRecord {
    si::EventRecord {
        r#type: kind as i32,
        object_id,
        message,
        timestamp_nano: i64::try_from(now).unwrap_or(i64::MAX),
        event_change_type: change as i32,
        event_change_detail: detail as i32,
        reference_id,
        resource: None,
    }
}

/// The allocation results of one flush: the response, and the new
/// allocations as leases (the RM's [`Lease`]s; the wire `new` list, for an RM
/// that takes that form, is made from them on the dispatcher thread).
#[derive(Debug, Default)]
pub struct AllocationBatch {
    /// Releases, rejections (and nothing in `new`).
    pub response: si::AllocationResponse,
    /// New allocations, in the order they were made.
    pub placed: Vec<Lease>,
    /// Releases the core reports (before `response.released` in the wire form).
    pub released: Vec<Released>,
    /// The partition name without the RM prefix.
    pub partition_name: String,
    /// A part of an allocation run that is still going on (more follows).
    pub partial: bool,
}

/// Everything a partition produced for its RM since the last flush.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Allocation results (releases, rejections).
    pub allocation: si::AllocationResponse,
    /// New allocations, handed to the RM as leases by the dispatcher (or,
    /// for an offer run that goes inline, by the scheduling thread).
    pub placed: Vec<Lease>,
    /// Releases, turned into `allocation.released` by the dispatcher.
    pub released: Vec<Released>,
    /// Application results.
    pub application: si::ApplicationResponse,
    /// Changes of application state, turned into `application.updated` by
    /// the dispatcher.
    pub app_states: Vec<StateChange>,
    /// Node results.
    pub node: si::NodeResponse,
    /// Events, in order.
    pub events: Vec<PendingEvent>,
    /// Container scheduling states.
    pub states: Vec<si::UpdateContainerSchedulingStateRequest>,
}

impl Outbox {
    /// True when nothing is waiting.
    pub fn is_empty(&self) -> bool {
        !self.has_allocation()
            && !self.has_application()
            && !self.has_node()
            && self.events.is_empty()
            && self.states.is_empty()
    }

    /// True when the allocation response carries anything.
    pub fn has_allocation(&self) -> bool {
        let a = &self.allocation;
        !(a.new.is_empty()
            && self.placed.is_empty()
            && self.released.is_empty()
            && a.released.is_empty()
            && a.released_asks.is_empty()
            && a.rejected.is_empty()
            && a.rejected_allocations.is_empty())
    }

    /// True when the application response carries anything.
    pub fn has_application(&self) -> bool {
        let a = &self.application;
        !(a.accepted.is_empty()
            && a.rejected.is_empty()
            && a.updated.is_empty()
            && self.app_states.is_empty())
    }

    /// True when the node response carries anything.
    pub fn has_node(&self) -> bool {
        !(self.node.accepted.is_empty() && self.node.rejected.is_empty())
    }

    /// Records an event about a queue itself (no reference).
    pub fn queue_event(
        &mut self,
        now: u64,
        path: &str,
        change: si::event_record::ChangeType,
        detail: si::event_record::ChangeDetail,
        message: &str,
    ) {
        let kind = si::event_record::Type::Queue;
        self.event(now, kind, path, "", change, detail, message.to_string());
    }

    /// Records an event.
    #[allow(clippy::too_many_arguments)] // one argument per field of the record
    pub fn event(
        &mut self,
        now: u64,
        kind: si::event_record::Type,
        object: &str,
        reference: &str,
        change: si::event_record::ChangeType,
        detail: si::event_record::ChangeDetail,
        message: String,
    ) {
        self.events.push(PendingEvent::Record(Box::new(event_record(
            now,
            kind,
            object.to_string(),
            reference.to_string(),
            change,
            detail,
            message,
        ))));
    }

    /// Room for `n` more changes of application state (and their events).
    pub fn reserve_state_changes(&mut self, n: usize) {
        self.events.reserve(n);
        self.app_states.reserve(n);
    }

    /// Records an application's change of state for the RM and its event.
    pub fn state_change(&mut self, change: StateChange) {
        self.events.push(PendingEvent::State(change.clone()));
        self.app_states.push(change);
    }

    /// Records a release for the RM and its event.
    pub fn release(&mut self, now: u64, release: Released) {
        self.events
            .push(PendingEvent::Released(now, release.clone()));
        self.released.push(release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use si::event_record::{ChangeDetail, ChangeType, Type};

    /// A size is converted once and its map shared by every lease of it,
    /// found again by address after another size; a name registered after
    /// the first conversion shows in the next size that holds it; zeros
    /// are left out.
    #[test]
    fn each_size_is_converted_once_and_shared() {
        let names = ResourceNames::new();
        let vcore = names.intern("vcore").unwrap();
        let mut wire = WireSizes::default();
        let small = Arc::new(Resource::from_pairs(&[(vcore, 500)]));
        let first = wire.of(&small, &names);
        assert_eq!(first.resources.len(), 1);
        assert_eq!(first.resources["vcore"].value, 500);
        assert!(Arc::ptr_eq(&first, &wire.of(&small, &names)));
        let memory = names.intern("memory").unwrap();
        let large = Arc::new(Resource::from_pairs(&[(vcore, 0), (memory, 64)]));
        let other = wire.of(&large, &names);
        let keys: Vec<&String> = other.resources.keys().collect();
        assert_eq!(keys, ["memory"]);
        assert_eq!(other.resources["memory"].value, 64);
        assert!(
            Arc::ptr_eq(&first, &wire.of(&small, &names)),
            "found again by address"
        );
        // An equal size that is another allocation's (not interned) gets a
        // map of its own, with the same content.
        let twin = Arc::new(*small);
        let again = wire.of(&twin, &names);
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(*first, *again);
    }

    /// An outbox with a queue event, what `add` records, and another queue
    /// event, in that order; its event list made wire records, checked to
    /// keep that order. Returns the outbox (events taken) and the record
    /// of what `add` recorded (about `app-1`).
    fn between_two_events(add: impl FnOnce(&mut Outbox)) -> (Outbox, si::EventRecord) {
        let mut out = Outbox::default();
        out.queue_event(
            1,
            "root.a",
            ChangeType::Add,
            ChangeDetail::DetailsNone,
            "first",
        );
        add(&mut out);
        out.queue_event(
            3,
            "root.b",
            ChangeType::Remove,
            ChangeDetail::DetailsNone,
            "last",
        );
        let mut records: Vec<si::EventRecord> = std::mem::take(&mut out.events)
            .into_iter()
            .map(PendingEvent::into_record)
            .collect();
        let objects: Vec<&str> = records.iter().map(|r| r.object_id.as_str()).collect();
        assert_eq!(objects, ["root.a", "app-1", "root.b"]);
        (out, records.swap_remove(1))
    }

    #[test]
    fn a_release_keeps_its_place_among_the_events_and_its_wire_form() {
        let (out, release) = between_two_events(|out| {
            out.release(
                2,
                Released {
                    app: Arc::from("app-1"),
                    key: Arc::from("key-1"),
                    id: Arc::from("key-1-0"),
                    termination: si::TerminationType::PreemptedByScheduler,
                    message: Cow::Borrowed("preempted"),
                },
            )
        });
        assert!(out.has_allocation());
        assert_eq!(release.r#type, Type::App as i32);
        assert_eq!(release.reference_id, "key-1-0");
        assert_eq!(release.event_change_type, ChangeType::Remove as i32);
        assert_eq!(
            release.event_change_detail,
            ChangeDetail::AllocPreempt as i32
        );
        assert_eq!(release.message, "preempted");
        assert_eq!(release.timestamp_nano, 2);
        let wire = out.released[0].to_wire("default");
        assert_eq!(
            wire,
            si::AllocationRelease {
                partition_name: "default".to_string(),
                application_id: "app-1".to_string(),
                termination_type: si::TerminationType::PreemptedByScheduler as i32,
                message: "preempted".to_string(),
                allocation_key: "key-1".to_string(),
                allocation_id: "key-1-0".to_string(),
            }
        );
    }

    /// A change of state keeps its place among the events, and the
    /// dispatcher's forms (the event, the response's `updated` entry after
    /// what the response already had) say what upstream's would.
    #[test]
    fn a_state_change_keeps_its_place_and_its_wire_forms() {
        assert!(!Outbox::default().has_application());
        let (out, change) = between_two_events(|out| {
            out.state_change(StateChange {
                app: Arc::from("app-1"),
                state: AppState::Running,
                at: 2,
                message: "first offer",
            })
        });
        assert!(
            out.has_application(),
            "a change of state is an application result"
        );
        assert_eq!(change.r#type, Type::App as i32);
        assert_eq!(change.reference_id, "");
        assert_eq!(change.event_change_type, ChangeType::Set as i32);
        assert_eq!(change.event_change_detail, ChangeDetail::AppRunning as i32);
        assert_eq!(change.message, "first offer");
        assert_eq!(change.timestamp_nano, 2);
        let earlier = si::UpdatedApplication {
            application_id: "app-0".to_string(),
            ..Default::default()
        };
        let batch = ApplicationBatch {
            response: si::ApplicationResponse {
                updated: vec![earlier.clone()],
                ..Default::default()
            },
            states: out.app_states,
        };
        assert_eq!(
            batch.into_response().updated,
            [
                earlier,
                si::UpdatedApplication {
                    application_id: "app-1".to_string(),
                    state: "Running".to_string(),
                    state_transition_timestamp: 2,
                    message: "first offer".to_string(),
                }
            ]
        );
    }
}
