//! The simulated RM's callback: the RM's ears. It absorbs each response into
//! the RM's books ([`Rm`]) as the core's dispatcher thread delivers it, so
//! the bookkeeping of allocations runs beside the scheduling thread instead
//! of after it.
//!
//! Ownership: the books sit behind one mutex. The dispatcher thread holds it
//! while it absorbs a response; the replay thread holds it between settles,
//! when every response of the step has been delivered and none is on its way,
//! so the two never wait on each other in practice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use unisched_shim_api::{CallbackResult, ResourceManagerCallback};
use unisched_si as si;

use super::rm::Rm;

/// The callback registered by the replay.
pub struct ReplayCallback {
    books: Mutex<Rm>,
    /// Virtual time of the step under way, milliseconds.
    now_ms: AtomicU64,
}

impl ReplayCallback {
    /// A callback keeping `books`.
    pub fn new(books: Rm) -> Self {
        Self {
            books: Mutex::new(books),
            now_ms: AtomicU64::new(0),
        }
    }

    /// The RM's books.
    pub fn books(&self) -> MutexGuard<'_, Rm> {
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the virtual time responses are absorbed at (before the step's
    /// requests go out).
    pub fn set_now(&self, ms: u64) {
        self.now_ms.store(ms, Ordering::SeqCst);
    }
}

impl ResourceManagerCallback for ReplayCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        let now = self.now_ms.load(Ordering::SeqCst);
        self.books().absorb_allocations(response, now);
        Ok(())
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        self.books().absorb_applications(response);
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        self.books().absorb_nodes(response);
        Ok(())
    }

    fn predicates(&self, _args: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }

    /// The core's events are the only way the RM learns where a placement
    /// rule put an application: the queue's "application added" event.
    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        use si::event_record::{ChangeDetail, ChangeType, Type};
        let mut placed = events.iter().filter(|e| {
            e.r#type == Type::Queue as i32
                && e.event_change_type == ChangeType::Add as i32
                && e.event_change_detail == ChangeDetail::QueueApp as i32
        });
        if let Some(first) = placed.next() {
            let mut books = self.books();
            books.placed(&first.reference_id, &first.object_id);
            for e in placed {
                books.placed(&e.reference_id, &e.object_id);
            }
        }
        Ok(())
    }

    fn update_container_scheduling_state(
        &self,
        _request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }

    fn update_configuration(
        &self,
        _request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse {
            success: false,
            old_config: String::new(),
            reason: "the simulated RM does not persist configurations".to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceApp, TraceBuilder};
    use si::event_record::{ChangeDetail, ChangeType, Type};

    #[test]
    fn only_queue_placements_are_taken_from_events() {
        let mut b = TraceBuilder::new("t", false);
        b.app(TraceApp {
            id: "app-1".into(),
            ..TraceApp::default()
        });
        let cb = ReplayCallback::new(Rm::new(std::sync::Arc::new(b.finish()), "default"));
        let event =
            |kind: Type, change: ChangeType, detail: ChangeDetail, queue: &str| si::EventRecord {
                r#type: kind as i32,
                object_id: queue.into(),
                reference_id: "app-1".into(),
                event_change_type: change as i32,
                event_change_detail: detail as i32,
                ..Default::default()
            };
        cb.send_event(vec![
            event(
                Type::Queue,
                ChangeType::Remove,
                ChangeDetail::QueueApp,
                "root.gone",
            ),
            event(Type::App, ChangeType::Add, ChangeDetail::AppNew, "root.app"),
            event(
                Type::Queue,
                ChangeType::Add,
                ChangeDetail::QueueApp,
                "root.a",
            ),
        ])
        .unwrap();
        assert_eq!(cb.books().out.queues, ["root.a"]);
    }
}
