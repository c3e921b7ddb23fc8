//! Applications: submission (placement, gang checks), removal, the state
//! machine and its timers.

use std::collections::BTreeMap;
use std::sync::Arc;

use si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use unisched_si as si;

use super::super::objects::*;
use super::super::partition::{Partition, RejectedApp, StateChange};
use crate::config::placement;
use crate::resources::Resource;

/// The user a forced application without one runs as (upstream's anonymous user).
const ANONYMOUS_USER: &str = "nobody";
/// The group of [`ANONYMOUS_USER`].
const ANONYMOUS_GROUP: &str = "nogroup";

impl Partition {
    pub(super) fn reject_app(&mut self, now: u64, id: &str, reason: String) {
        self.outbox.event(
            now,
            EventType::App,
            id,
            "",
            ChangeType::None,
            ChangeDetail::AppReject,
            reason.clone(),
        );
        self.outbox
            .application
            .rejected
            .push(si::RejectedApplication {
                application_id: id.to_string(),
                reason,
            });
    }

    /// Rejects an application the RM asked to add and keeps it for readers
    /// (upstream's `AddRejectedApplication`).
    fn reject_new_app(&mut self, now: u64, app: RejectedApp<'_>, reason: String) {
        self.remember_rejected(app, now, &reason);
        self.reject_app(now, app.id, reason);
    }

    /// Adds an application: placement, ACL check, then state New.
    pub fn add_application(&mut self, req: si::AddApplicationRequest, now: u64) {
        let id = req.application_id.clone();
        if id.is_empty() {
            return self.reject_app(now, &id, "application id is empty".to_string());
        }
        if self.app_by_id.contains_key(id.as_str()) {
            let reason = format!("application {id} already exists in partition {}", self.name);
            let asked = RejectedApp::new(
                &id,
                &req.queue_name,
                req.ugi.as_ref().map_or("", |u| u.user.as_str()),
                req.ugi.as_ref().map_or(&[], |u| u.groups.as_slice()),
            );
            return self.reject_new_app(now, asked, reason);
        }
        let tags: BTreeMap<String, String> = req.tags.into_iter().collect();
        let forced = placement::is_create_forced(&tags);
        let (user, groups) = match req.ugi.as_ref().filter(|u| !u.user.is_empty()) {
            Some(ugi) => (ugi.user.clone(), ugi.groups.clone()),
            // A forced application runs already: as upstream, it gets the
            // anonymous user rather than a refusal.
            None if forced => (
                ANONYMOUS_USER.to_string(),
                vec![ANONYMOUS_GROUP.to_string()],
            ),
            None => {
                let asked = RejectedApp::new(&id, &req.queue_name, "", &[]);
                let reason = format!("application {id} has no user (ugi.user is empty)");
                return self.reject_new_app(now, asked, reason);
            }
        };
        let queue = match self.place_application(&id, &req.queue_name, &user, &groups, &tags) {
            Ok(q) => q,
            Err(reason) => {
                let asked = RejectedApp::new(&id, &req.queue_name, &user, &groups);
                return self.reject_new_app(now, asked, reason);
            }
        };
        self.apply_namespace_tags(queue, &tags, now);
        let gang = match self.gang_for_new_app(
            &id,
            queue,
            req.placeholder_ask.as_ref(),
            &req.gang_scheduling_style,
            req.execution_timeout_milli_seconds,
        ) {
            Ok(g) => g,
            // A queue placement created stays for the cleaner, as upstream.
            Err(reason) => {
                let asked = RejectedApp::new(&id, &req.queue_name, &user, &groups);
                return self.reject_new_app(now, asked, reason);
            }
        };
        let seq = self.seq();
        let app_id: Arc<str> = Arc::from(id.as_str());
        let app = self.apps.insert(App {
            id: app_id.clone(),
            rm_handle: unisched_shim_api::rm_handle(tags.iter()),
            queue,
            user: Arc::from(user.as_str()),
            groups,
            limit_group: None,
            tags,
            state: AppState::New,
            state_since: now,
            // Room for the usual life (New, Accepted, Running, Completing):
            // a log of one grew on the first change, in the middle of a pass.
            state_log: {
                let mut log = Vec::with_capacity(4);
                log.push((AppState::New, now));
                log
            },
            submission_time: now,
            seq,
            allocated: Resource::ZERO,
            placeholder: Resource::ZERO,
            pending: Resource::ZERO,
            asks: Default::default(),
            pending_order: Default::default(),
            allocation_count: 0,
            key_in_queue: None,
            blocked_in_pass: 0,
            cursor_pass: 0,
            cursor: None,
            pending_floor: Resource::UNLIMITED,
            floor_preempts: false,
            walk_floor: Resource::UNLIMITED,
            walk_preempts: false,
            counted_running: false,
            gang,
            offers: None,
        });
        self.app_by_id.insert(app_id, app);
        self.apps[app].limit_group = self.limit_group_for(app);
        self.queues[queue].apps.insert(app);
        self.outbox
            .application
            .accepted
            .push(si::AcceptedApplication {
                application_id: id.clone(),
            });
        let path = self.queues[queue].path.clone();
        self.outbox.event(
            now,
            EventType::Queue,
            &path,
            &id,
            ChangeType::Add,
            ChangeDetail::QueueApp,
            "application added".to_string(),
        );
        // New is the starting state, not a transition: only the event says so.
        self.outbox.event(
            now,
            EventType::App,
            &id,
            "",
            ChangeType::Add,
            ChangeDetail::AppNew,
            "application added".to_string(),
        );
    }

    /// Every allocation of an application.
    pub fn app_allocations(&self, app: AppId) -> Vec<AllocId> {
        self.apps[app]
            .asks
            .values()
            .flat_map(|&a| self.asks[a].allocs.iter().copied())
            .collect()
    }

    /// Removes an application: its allocations are released and reported, its
    /// asks dropped.
    pub fn remove_application(&mut self, id: &str, now: u64) {
        let Some(&app) = self.app_by_id.get(id) else {
            self.reject_app(
                now,
                id,
                format!(
                    "cannot remove application {id}: not found in partition {}",
                    self.name
                ),
            );
            return;
        };
        let allocs = self.app_allocations(app);
        for a in allocs {
            self.release_allocation(
                a,
                si::TerminationType::StoppedByRm,
                "application removed",
                now,
            );
        }
        let asks: Vec<AskId> = self.apps[app].asks.values().copied().collect();
        for ask in asks {
            self.remove_ask(ask, now);
        }
        if self.apps[app].state.can_move_to(AppState::Completing) {
            self.set_app_state(
                app,
                AppState::Completing,
                now,
                "application removed by the RM",
            );
        }
        self.drop_app(app, now);
    }

    /// Takes an application out of its queue and the arenas.
    pub(in crate::scheduler) fn drop_app(&mut self, app: AppId, now: u64) {
        self.count_running(app, false);
        self.forget_demand(app);
        if let Some(k) = self.apps[app].key_in_queue.take() {
            let q = self.apps[app].queue;
            self.queues[q].app_order.remove(&k, &mut self.app_slots);
        }
        let a = self.apps.remove(app);
        self.queues[a.queue].apps.remove(&app);
        self.app_by_id.remove(&a.id);
        self.rekey_queue_chain(a.queue);
        let path = self.queues[a.queue].path.clone();
        self.outbox.event(
            now,
            EventType::Queue,
            &path,
            &a.id,
            ChangeType::Remove,
            ChangeDetail::QueueApp,
            "application removed".to_string(),
        );
        self.remember_completed(&a);
        // An empty dynamic queue stays until the queue cleaner's next round
        // (`ops/queues.rs`), as upstream.
        self.cleanup_wanted = true;
    }

    /// Moves an application to `to` if the state machine allows it, and reports it.
    pub fn set_app_state(&mut self, app: AppId, to: AppState, now: u64, message: &'static str) {
        let from = self.apps[app].state;
        if from == to {
            return;
        }
        if !from.can_move_to(to) {
            tracing::warn!(app = %self.apps[app].id, ?from, ?to, "illegal application transition ignored");
            return;
        }
        let a = &mut self.apps[app];
        a.state = to;
        a.state_since = now;
        a.state_log.push((to, now));
        if to == AppState::Completing {
            self.completing_timers
                .push(std::cmp::Reverse((now + self.completing_timeout, app)));
        }
        if to.is_running() {
            self.count_running(app, true);
        } else if !matches!(to, AppState::Resuming) {
            self.count_running(app, false);
        }
        self.report_state_change(app, now, message);
    }

    pub(super) fn report_state_change(&mut self, app: AppId, now: u64, message: &'static str) {
        let a = &self.apps[app];
        self.outbox.state_change(StateChange {
            app: a.id.clone(),
            state: a.state,
            at: now,
            message,
        });
    }

    /// Moves an application to Running after an allocation, as upstream's
    /// `addAllocationInternal`: a real allocation does at once; a
    /// placeholder only once the application's placeholders add up to its
    /// placeholder ask (all of them are allocated), else a New application
    /// (recovered) becomes Accepted.
    pub(in crate::scheduler) fn progress_on_allocation(
        &mut self,
        app: AppId,
        placeholder: bool,
        now: u64,
        message: &'static str,
    ) {
        let state = self.apps[app].state;
        let startable = matches!(
            state,
            AppState::New | AppState::Accepted | AppState::Resuming | AppState::Completing
        );
        if !startable {
            return;
        }
        if !placeholder || self.all_placeholders_allocated(app) {
            self.set_app_state(app, AppState::Running, now, message);
        } else if state == AppState::New {
            self.set_app_state(app, AppState::Accepted, now, message);
        }
    }

    /// Moves an application that has nothing pending or allocated to Completing.
    pub fn check_completing(&mut self, app: AppId, now: u64) {
        if self.apps[app].gang.is_some() && self.settle_placeholder_timeout(app, now) {
            return;
        }
        let a = &self.apps[app];
        // An application of an offer-based RM lives until the RM removes it.
        if a.pending_order.is_empty()
            && a.offers.is_none()
            && a.allocation_count == 0
            && matches!(a.state, AppState::Running | AppState::Accepted)
        {
            self.set_app_state(
                app,
                AppState::Completing,
                now,
                "nothing pending or allocated",
            );
        }
    }

    /// Completes applications whose grace period is over.
    pub fn process_timers(&mut self, now: u64) {
        self.now = now;
        while let Some(&std::cmp::Reverse((deadline, app))) = self.completing_timers.peek() {
            if deadline > now {
                break;
            }
            self.completing_timers.pop();
            let Some(a) = self.apps.get(app) else {
                continue;
            };
            if a.state == AppState::Completing && a.state_since + self.completing_timeout <= now {
                self.set_app_state(app, AppState::Completed, now, "grace period over");
                self.drop_app(app, now);
            }
        }
        if !self.gang_timers.is_empty() {
            self.process_gang_timers(now);
        }
        self.expire_filters(now);
        self.clean_queues_when_due(now);
    }

    /// Earliest pending timer.
    pub fn next_timer(&self) -> Option<u64> {
        let completing = self.completing_timers.peek().map(|r| r.0.0);
        let gang = self.gang_timers.peek().map(|r| r.0.0);
        completing
            .into_iter()
            .chain(gang)
            .chain(self.next_queue_cleanup())
            .chain(self.next_filter_timer())
            .min()
    }
}
