//! The simulated RM's callback: it only files what the core sends, so the
//! core's dispatcher thread spends no time on the replay's bookkeeping.
//!
//! Ownership: the dispatcher thread appends under the mutex; the replay thread
//! takes everything out after each `settle()`, when nothing more is on its
//! way, and does all the work on its own thread.

use std::sync::{Mutex, MutexGuard, PoisonError};

use unisched_shim_api::{CallbackResult, ResourceManagerCallback};
use unisched_si as si;

/// Everything received since the last [`ReplayCallback::take`].
#[derive(Debug, Default)]
pub struct Inbox {
    /// Allocation responses, in arrival order.
    pub allocations: Vec<si::AllocationResponse>,
    /// Application responses, in arrival order.
    pub applications: Vec<si::ApplicationResponse>,
    /// Node responses, in arrival order.
    pub nodes: Vec<si::NodeResponse>,
    /// (application, queue path) of each application placed in a queue, from
    /// the core's events: the only way the RM learns where a placement rule
    /// put an application.
    pub placed: Vec<(String, String)>,
}

/// The callback registered by the replay.
#[derive(Debug, Default)]
pub struct ReplayCallback {
    inbox: Mutex<Inbox>,
}

impl ReplayCallback {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes what was received so far.
    pub fn take(&self) -> Inbox {
        std::mem::take(&mut *self.lock())
    }
}

impl ResourceManagerCallback for ReplayCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.lock().allocations.push(response);
        Ok(())
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        self.lock().applications.push(response);
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        self.lock().nodes.push(response);
        Ok(())
    }

    fn predicates(&self, _args: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        use si::event_record::{ChangeDetail, ChangeType, Type};
        let placed: Vec<(String, String)> = events
            .into_iter()
            .filter(|e| {
                e.r#type == Type::Queue as i32
                    && e.event_change_type == ChangeType::Add as i32
                    && e.event_change_detail == ChangeDetail::QueueApp as i32
            })
            .map(|e| (e.reference_id, e.object_id))
            .collect();
        if !placed.is_empty() {
            self.lock().placed.extend(placed);
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
    use si::event_record::{ChangeDetail, ChangeType, Type};

    #[test]
    fn only_queue_placements_are_kept_from_events() {
        let cb = ReplayCallback::default();
        let event = |kind: Type, change: ChangeType, detail: ChangeDetail| si::EventRecord {
            r#type: kind as i32,
            object_id: "root.a".into(),
            reference_id: "app-1".into(),
            event_change_type: change as i32,
            event_change_detail: detail as i32,
            ..Default::default()
        };
        cb.send_event(vec![
            event(Type::Queue, ChangeType::Add, ChangeDetail::QueueApp),
            event(Type::Queue, ChangeType::Remove, ChangeDetail::QueueApp),
            event(Type::App, ChangeType::Add, ChangeDetail::AppNew),
        ])
        .unwrap();
        cb.update_allocation(si::AllocationResponse::default())
            .unwrap();
        let inbox = cb.take();
        assert_eq!(inbox.placed, [("app-1".to_string(), "root.a".to_string())]);
        assert_eq!(inbox.allocations.len(), 1);
        assert!(cb.take().placed.is_empty());
    }
}
