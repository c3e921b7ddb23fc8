//! How a partition applies RM requests: applications, asks, releases, recovered
//! allocations and node actions. Each handler validates against current state,
//! changes nothing on rejection, and records its outcome in the outbox.

use std::collections::BTreeMap;
use std::sync::Arc;

use si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use si::node_info::ActionFromRm;
use si::update_container_scheduling_state_request::SchedulingState;
use unisched_si as si;

use super::command::PreparedAsk;
use super::objects::*;
use super::partition::{Partition, ROOT};
use crate::config::acl::Acl;
use crate::resources::Resource;

impl Partition {
    // ---- applications ----------------------------------------------------

    fn reject_app(&mut self, now: u64, id: &str, reason: String) {
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

    /// Adds an application: placement, ACL check, then state New.
    pub fn add_application(&mut self, req: si::AddApplicationRequest, now: u64) {
        let id = req.application_id.clone();
        if id.is_empty() {
            return self.reject_app(now, &id, "application id is empty".to_string());
        }
        if self.app_by_id.contains_key(id.as_str()) {
            return self.reject_app(
                now,
                &id,
                format!("application {id} already exists in partition {}", self.name),
            );
        }
        let Some(ugi) = req.ugi.as_ref().filter(|u| !u.user.is_empty()) else {
            return self.reject_app(
                now,
                &id,
                format!("application {id} has no user (ugi.user is empty)"),
            );
        };
        let (user, groups) = (ugi.user.clone(), ugi.groups.clone());
        let tags: BTreeMap<String, String> = req.tags.into_iter().collect();
        let queue = match self.place_application(&id, &req.queue_name, &user, &groups, &tags) {
            Ok(q) => q,
            Err(reason) => return self.reject_app(now, &id, reason),
        };
        let gang = match self.gang_for_new_app(
            &id,
            queue,
            req.placeholder_ask.as_ref(),
            &req.gang_scheduling_style,
            req.execution_timeout_milli_seconds,
        ) {
            Ok(g) => g,
            Err(reason) => {
                self.remove_empty_dynamic(queue);
                return self.reject_app(now, &id, reason);
            }
        };
        let seq = self.seq();
        let app_id: Arc<str> = Arc::from(id.as_str());
        let app = self.apps.insert(App {
            id: app_id.clone(),
            queue,
            user: Arc::from(user.as_str()),
            groups,
            limit_group: None,
            tags,
            state: AppState::New,
            state_since: now,
            state_log: vec![(AppState::New, now)],
            submission_time: now,
            seq,
            allocated: Resource::ZERO,
            pending: Resource::ZERO,
            asks: Default::default(),
            pending_order: Default::default(),
            allocation_count: 0,
            key_in_queue: None,
            blocked_in_pass: 0,
            cursor_pass: 0,
            cursor: None,
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

    /// Chooses the leaf queue for an application, or says why there is none.
    fn place_application(
        &mut self,
        app_id: &str,
        requested: &str,
        user: &str,
        groups: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<QueueId, String> {
        let placement = crate::config::placement::Placer::new(&self.config.placement_rules).place(
            &crate::config::placement::AppPlacementInput {
                app_id,
                requested_queue: requested,
                user,
                groups,
                tags,
            },
            &PartitionQueues(self),
        )?;
        match self.queue_by_path.get(placement.queue_path.as_str()) {
            Some(&q) => Ok(q),
            None if placement.create => Ok(self.create_dynamic_path(&placement.queue_path)),
            None => Err(format!(
                "application {app_id}: queue {} does not exist",
                placement.queue_path
            )),
        }
    }

    /// Creates the missing queues of `path` as dynamic queues taking their
    /// parent's child template, and returns the leaf.
    fn create_dynamic_path(&mut self, path: &str) -> QueueId {
        let mut current = ROOT;
        let mut so_far = String::new();
        let parts: Vec<&str> = path.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if i == 0 {
                so_far.push_str(part);
                continue;
            }
            so_far.push('.');
            so_far.push_str(part);
            current = match self.queue_by_path.get(so_far.as_str()) {
                Some(&q) => q,
                None => {
                    let is_leaf = i == parts.len() - 1;
                    let q = self.create_queue(&so_far, Some(current), !is_leaf);
                    self.apply_child_template(current, q);
                    self.queues[q].dynamic = true;
                    q
                }
            };
        }
        current
    }

    fn apply_child_template(&mut self, parent: QueueId, child: QueueId) {
        let parent_path = self.queues[parent].path.to_string();
        let template = self
            .config
            .root
            .find(&parent_path)
            .and_then(|c| c.child_template.clone());
        let inherited = self.queues[parent].properties.clone();
        let q = &mut self.queues[child];
        q.properties = inherited;
        for key in [
            "priority.policy",
            "priority.offset",
            crate::config::properties::QUEUE_WEIGHT,
        ] {
            q.properties.remove(key);
        }
        if let Some(t) = template {
            let q = &mut self.queues[child];
            q.max_applications = t.max_applications;
            for (k, v) in &t.properties {
                q.properties.insert(k.clone(), v.clone());
            }
            let names = self.names.clone();
            let q = &mut self.queues[child];
            if let Ok(g) = names.from_map(&t.guaranteed) {
                q.guaranteed = g;
            }
            if let Ok(m) = names.limit_from_map(&t.max) {
                q.has_max = m != Resource::UNLIMITED;
                q.max = m;
            }
        }
        let q = &mut self.queues[child];
        q.app_sort = match q
            .properties
            .get("application.sort.policy")
            .map(String::as_str)
        {
            Some("fair") => AppSortPolicy::Fair,
            _ => AppSortPolicy::Fifo,
        };
        q.sort_priority = q
            .properties
            .get("application.sort.priority")
            .is_none_or(|v| v != "disabled");
        q.read_properties();
    }

    /// Every allocation of an application.
    pub fn app_allocations(&self, app: AppId) -> Vec<AllocId> {
        self.apps[app]
            .asks
            .values()
            .flat_map(|&a| self.asks[a].allocs.iter().copied())
            .collect()
    }

    /// Whether `user` may submit to `queue`: its submit or admin ACL, or an ancestor's.
    pub fn submit_allowed(&self, queue: QueueId, user: &str, groups: &[String]) -> bool {
        let mut q = Some(queue);
        while let Some(id) = q {
            let queue = &self.queues[id];
            for acl in [&queue.submit_acl, &queue.admin_acl].into_iter().flatten() {
                if Acl::parse(acl).is_ok_and(|a| a.allows(user, groups)) {
                    return true;
                }
            }
            q = queue.parent;
        }
        false
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
    pub(super) fn drop_app(&mut self, app: AppId, now: u64) {
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
        self.remove_empty_dynamic(a.queue);
    }

    /// Removes dynamic queues that hold nothing any more, bottom up.
    fn remove_empty_dynamic(&mut self, mut q: QueueId) {
        loop {
            let queue = &self.queues[q];
            if !queue.dynamic || !queue.apps.is_empty() || !queue.children.is_empty() || q == ROOT {
                return;
            }
            let Some(parent) = queue.parent else { return };
            let path = queue.path.clone();
            if let Some(k) = self.queues[q].key_in_parent.take() {
                self.queues[parent]
                    .child_order
                    .remove(&k, &mut self.queue_slots);
            }
            self.queues[parent].children.retain(|&c| c != q);
            self.queue_by_path.remove(&path);
            // The arena slot stays as a tombstone: ids are never reused.
            self.queues[q].parent = None;
            q = parent;
        }
    }

    /// Moves an application to `to` if the state machine allows it, and reports it.
    pub fn set_app_state(&mut self, app: AppId, to: AppState, now: u64, message: &str) {
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
        self.report_state_change(app, now, message.to_string());
    }

    fn report_state_change(&mut self, app: AppId, now: u64, message: String) {
        let a = &self.apps[app];
        let state = a.state;
        let id = a.id.clone();
        self.outbox
            .application
            .updated
            .push(si::UpdatedApplication {
                application_id: id.to_string(),
                state: state.as_str().to_string(),
                state_transition_timestamp: i64::try_from(now).unwrap_or(i64::MAX),
                message: message.clone(),
            });
        let detail = match state {
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
        self.outbox.event(
            now,
            EventType::App,
            &id,
            "",
            ChangeType::Set,
            detail,
            message,
        );
    }

    /// Moves an application that has nothing pending or allocated to Completing.
    pub fn check_completing(&mut self, app: AppId, now: u64) {
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
    }

    /// Earliest pending timer.
    pub fn next_timer(&self) -> Option<u64> {
        let completing = self.completing_timers.peek().map(|r| r.0.0);
        let gang = self.gang_timers.peek().map(|r| r.0.0);
        completing
            .into_iter()
            .chain(gang)
            .chain(self.next_filter_timer())
            .min()
    }

    // ---- asks ------------------------------------------------------------

    fn reject_ask(&mut self, key: &str, app: &str, reason: String) {
        self.outbox
            .allocation
            .rejected
            .push(si::RejectedAllocationAsk {
                allocation_key: key.to_string(),
                application_id: app.to_string(),
                reason,
            });
    }

    /// Adds an ask, or updates the ask with the same key.
    pub fn update_ask(&mut self, ask: PreparedAsk, now: u64) {
        let (key, app_id) = (&*ask.key, ask.application_id.as_str());
        let resource = match ask.resource {
            Ok(r) => r,
            Err(reason) => return self.reject_ask(key, app_id, format!("ask {key}: {reason}")),
        };
        if key.is_empty() {
            return self.reject_ask(key, app_id, "ask has an empty allocation key".to_string());
        }
        let Some(&app) = self.app_by_id.get(app_id) else {
            return self.reject_ask(
                key,
                app_id,
                format!(
                    "ask {key}: application {app_id} not found in partition {}",
                    self.name
                ),
            );
        };
        if !self.apps[app].state_allows_scheduling() {
            let state = self.apps[app].state.as_str();
            return self.reject_ask(
                key,
                app_id,
                format!("ask {key}: application {app_id} is {state} and takes no asks"),
            );
        }
        if ask.max_allocations < 0 {
            return self.reject_ask(
                key,
                app_id,
                format!(
                    "ask {key}: maxAllocations {} is negative",
                    ask.max_allocations
                ),
            );
        }
        if resource.is_zero() {
            return self.reject_ask(key, app_id, format!("ask {key}: asks for no resources"));
        }
        let wanted = u32::try_from(ask.max_allocations.max(1)).unwrap_or(1);
        let existing = self.apps[app].asks.get(key).copied();
        let id = match existing {
            Some(id) => {
                self.remove_pending_of_ask(id);
                let a = &mut self.asks[id];
                a.resource = self.sizes.intern(resource);
                a.priority = ask.priority;
                a.pending = wanted.saturating_sub(a.allocated_total);
                a.set_tags(ask.extra.map(|e| e.tags).unwrap_or_default());
                if a.pending == 0 {
                    self.unreserve(id);
                }
                id
            }
            None => {
                let seq = self.seq();
                let key = ask.key.clone();
                // Upstream: without a policy an ask may be preempted for its own
                // app but triggers no preemption.
                let pref = ask.preemption_policy.unwrap_or(si::PreemptionPolicy {
                    allow_preempt_self: true,
                    allow_preempt_other: false,
                });
                let resource = self.sizes.intern(resource);
                let id = self.asks.insert(Ask {
                    key: key.clone(),
                    app,
                    resource,
                    pending: wanted,
                    allocated_total: 0,
                    next_id: 0,
                    allocs: Default::default(),
                    priority: ask.priority,
                    seq,
                    created: now,
                    extra: ask.extra,
                    placeholder: ask.placeholder,
                    originator: ask.originator,
                    allow_preempt_self: pref.allow_preempt_self,
                    allow_preempt_other: pref.allow_preempt_other,
                    reserved_node: None,
                    reserved_since: 0,
                    reported_state: 0,
                });
                self.apps[app].asks.insert(key, id);
                id
            }
        };
        self.add_pending_of_ask(id);
        if existing.is_none() && self.asks[id].placeholder {
            self.gang_placeholder_asked(app, id, now);
        }
        match self.apps[app].state {
            AppState::New => self.set_app_state(app, AppState::Accepted, now, "first ask"),
            AppState::Completing => self.set_app_state(app, AppState::Running, now, "new ask"),
            _ => {}
        }
        // Re-keyed once per batch of asks (see `rekey_dirty`), not per ask.
        self.dirty_apps.push(app);
    }

    pub(super) fn add_pending_of_ask(&mut self, id: AskId) {
        let a = &self.asks[id];
        if a.pending == 0 {
            return;
        }
        let (app, total, key) = (
            a.app,
            a.resource.times(i64::from(a.pending)),
            a.order_key(id),
        );
        let res = *a.resource;
        if self.apps[app].pending_order.insert(key) {
            self.pending_ask_added(&res);
        }
        self.add_pending(app, &total);
    }

    pub(super) fn remove_pending_of_ask(&mut self, id: AskId) {
        let a = &self.asks[id];
        let (app, total, key) = (
            a.app,
            a.resource.times(i64::from(a.pending)),
            a.order_key(id),
        );
        if self.apps[app].pending_order.remove(&key) {
            self.pending_ask_removed();
            self.remove_pending(app, &total);
        }
    }

    /// Drops an ask's pending part; the ask itself goes once no allocation of it is left.
    pub(super) fn remove_ask(&mut self, id: AskId, _now: u64) {
        if self.asks[id].placeholder {
            self.gang_placeholder_ask_dropped(id);
        }
        let (app, key) = (self.asks[id].app, self.asks[id].key.clone());
        self.forget_replacements_for(app, &key);
        self.remove_pending_of_ask(id);
        self.unreserve(id);
        let a = &mut self.asks[id];
        a.pending = 0;
        if a.allocs.is_empty() {
            let a = self.asks.remove(id);
            self.apps[a.app].asks.remove(&a.key);
        }
    }

    /// Releases asks by key, or every ask of the application.
    pub fn release_asks(&mut self, rel: si::AllocationAskRelease, now: u64) {
        let Some(&app) = self.app_by_id.get(rel.application_id.as_str()) else {
            let reason = format!(
                "cannot release asks: application {} not found in partition {}",
                rel.application_id, self.name
            );
            return self.reject_ask(&rel.allocation_key, &rel.application_id, reason);
        };
        let asks: Vec<AskId> = if rel.allocation_key.is_empty() {
            self.apps[app].asks.values().copied().collect()
        } else {
            match self.apps[app].asks.get(rel.allocation_key.as_str()) {
                Some(&a) => vec![a],
                None => {
                    let reason = format!(
                        "cannot release ask {}: not found in application {}",
                        rel.allocation_key, rel.application_id
                    );
                    return self.reject_ask(&rel.allocation_key, &rel.application_id, reason);
                }
            }
        };
        for ask in asks {
            let key = self.asks[ask].key.clone();
            self.outbox.event(
                now,
                EventType::Request,
                &key,
                &rel.application_id,
                ChangeType::Remove,
                ChangeDetail::RequestCancel,
                "ask released by the RM".to_string(),
            );
            self.remove_ask(ask, now);
        }
        self.rekey_app(app);
        self.check_completing(app, now);
    }

    // ---- allocations -----------------------------------------------------

    fn reject_allocation(&mut self, key: &str, app: &str, reason: String) {
        self.outbox
            .allocation
            .rejected_allocations
            .push(si::RejectedAllocation {
                allocation_key: key.to_string(),
                application_id: app.to_string(),
                reason,
            });
    }

    /// Releases allocations named by an RM: by id, by key, or all of the application.
    pub fn release_allocations(&mut self, rel: si::AllocationRelease, now: u64) {
        let (app_id, key) = (rel.application_id.as_str(), rel.allocation_key.as_str());
        let Some(&app) = self.app_by_id.get(app_id) else {
            let reason = format!(
                "cannot release: application {app_id} not found in partition {}",
                self.name
            );
            return self.reject_allocation(key, app_id, reason);
        };
        let targets: Vec<AllocId> = if !rel.allocation_id.is_empty() {
            match self.alloc_by_id.get(rel.allocation_id.as_str()) {
                Some(&a) if self.allocs[a].app == app => vec![a],
                _ => {
                    let reason = format!(
                        "cannot release allocation {}: not found in application {app_id}",
                        rel.allocation_id
                    );
                    return self.reject_allocation(key, app_id, reason);
                }
            }
        } else if !key.is_empty() {
            match self.apps[app].asks.get(key).map(|&a| &self.asks[a].allocs) {
                Some(list) if !list.is_empty() => list.to_vec(),
                _ => {
                    let reason = format!(
                        "cannot release allocation key {key}: no allocation in application {app_id}"
                    );
                    return self.reject_allocation(key, app_id, reason);
                }
            }
        } else {
            self.app_allocations(app)
        };
        let termination = si::TerminationType::try_from(rel.termination_type)
            .ok()
            .filter(|t| *t != si::TerminationType::UnknownTerminationType)
            .unwrap_or(si::TerminationType::StoppedByRm);
        for a in targets {
            if self.allocs[a]
                .releasing
                .as_ref()
                .is_some_and(|r| r.termination == termination)
            {
                // The RM confirms a release the core asked for.
                self.confirm_release(a, termination, now);
            } else {
                self.release_allocation(a, termination, "released by the RM", now);
            }
        }
        if self.apps.contains(app) {
            self.check_completing(app, now);
        }
    }

    /// Removes one allocation, gives its resources back and reports the release.
    pub fn release_allocation(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
        message: &str,
        now: u64,
    ) {
        let alloc = self.remove_allocation(id, termination);
        self.report_release(alloc.app, &alloc.key, &alloc.id, termination, message, now);
    }

    /// Tells the RM (and the event stream) that an allocation is released.
    pub(super) fn report_release(
        &mut self,
        app: AppId,
        key: &str,
        alloc_id: &str,
        termination: si::TerminationType,
        message: &str,
        now: u64,
    ) {
        let app_id = String::from(&*self.apps[app].id);
        let detail = match termination {
            si::TerminationType::PreemptedByScheduler => ChangeDetail::AllocPreempt,
            si::TerminationType::Timeout => ChangeDetail::AllocTimeout,
            si::TerminationType::PlaceholderReplaced => ChangeDetail::AllocReplaced,
            _ => ChangeDetail::AllocCancel,
        };
        self.outbox.event(
            now,
            EventType::App,
            &app_id,
            alloc_id,
            ChangeType::Remove,
            detail,
            message.to_string(),
        );
        self.outbox.allocation.released.push(si::AllocationRelease {
            partition_name: self.plain_name().to_string(),
            application_id: app_id,
            termination_type: termination as i32,
            message: message.to_string(),
            allocation_key: key.to_string(),
            allocation_id: alloc_id.to_string(),
        });
    }

    /// Removes one allocation and gives its resources back, without telling
    /// the RM (the caller reports it, or the RM itself asked for it).
    pub fn remove_allocation(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
    ) -> Allocation {
        let alloc = self.allocs.remove(id);
        self.alloc_by_id.remove(&alloc.id);
        self.remove_usage(alloc.app, alloc.node, &alloc.resource);
        let node = &mut self.nodes[alloc.node];
        node.allocations.swap_remove(alloc.node_slot);
        if let Some(&moved) = node.allocations.get(alloc.node_slot) {
            self.allocs[moved].node_slot = alloc.node_slot;
        }
        let app = &mut self.apps[alloc.app];
        app.allocation_count -= 1;
        if let Some(&ask) = app.asks.get(&alloc.key) {
            let a = &mut self.asks[ask];
            a.allocs.retain(|x| *x != id);
            if a.allocs.is_empty()
                && a.pending == 0
                && !self.replacement_in_flight(alloc.app, &alloc.key)
            {
                self.unreserve(ask);
                let a = self.asks.remove(ask);
                self.apps[a.app].asks.remove(&a.key);
            }
        }
        if alloc.placeholder || alloc.releasing.is_some() {
            self.gang_allocation_removed(&alloc, termination);
        }
        self.rekey_app(alloc.app);
        alloc
    }

    /// The partition name without the RM prefix.
    pub fn plain_name(&self) -> &str {
        &self.name[self.plain_name_at..]
    }

    /// Adds an allocation that already exists on the RM side (recovery). It counts
    /// at once, even above a queue's max.
    pub fn recover_allocation(
        &mut self,
        alloc: si::Allocation,
        resource: Result<Resource, String>,
        now: u64,
    ) {
        let (key, app_id) = (alloc.allocation_key.clone(), alloc.application_id.clone());
        let resource = match resource {
            Ok(r) => r,
            Err(reason) => {
                return self.reject_allocation(
                    &key,
                    &app_id,
                    format!("allocation {key}: {reason}"),
                );
            }
        };
        if key.is_empty() {
            return self.reject_allocation(
                &key,
                &app_id,
                "allocation has an empty allocation key".to_string(),
            );
        }
        let Some(&app) = self.app_by_id.get(app_id.as_str()) else {
            return self.reject_allocation(
                &key,
                &app_id,
                format!(
                    "allocation {key}: application {app_id} not found in partition {}",
                    self.name
                ),
            );
        };
        let Some(&node) = self.node_by_id.get(alloc.node_id.as_str()) else {
            return self.reject_allocation(
                &key,
                &app_id,
                format!(
                    "allocation {key}: node {:?} not found in partition {}",
                    alloc.node_id, self.name
                ),
            );
        };
        let id: Arc<str> = if alloc.allocation_id.is_empty() {
            Arc::from(format!("{key}-0"))
        } else {
            Arc::from(alloc.allocation_id.as_str())
        };
        if self.alloc_by_id.contains_key(&id) {
            return self.reject_allocation(
                &key,
                &app_id,
                format!("allocation {id} already exists"),
            );
        }
        let key: Arc<str> = Arc::from(key.as_str());
        // An ask with the same key is satisfied by this allocation; without one,
        // the allocation gets an ask record that wants nothing more.
        let ask = match self.apps[app].asks.get(&key) {
            Some(&ask) => {
                self.remove_pending_of_ask(ask);
                let a = &mut self.asks[ask];
                a.pending = a.pending.saturating_sub(1);
                a.allocated_total += 1;
                self.add_pending_of_ask(ask);
                ask
            }
            None => {
                let seq = self.seq();
                let pref = alloc.preemption_policy.unwrap_or_default();
                let resource = self.sizes.intern(resource);
                let ask = self.asks.insert(Ask {
                    key: key.clone(),
                    app,
                    resource,
                    pending: 0,
                    allocated_total: 1,
                    next_id: 0,
                    allocs: Default::default(),
                    priority: alloc.priority,
                    seq,
                    created: now,
                    extra: AskExtra::boxed(
                        alloc
                            .allocation_tags
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                        alloc.task_group_name.clone(),
                    ),
                    placeholder: alloc.placeholder,
                    originator: alloc.originator,
                    allow_preempt_self: pref.allow_preempt_self,
                    allow_preempt_other: pref.allow_preempt_other,
                    reserved_node: None,
                    reserved_since: 0,
                    reported_state: 0,
                });
                self.apps[app].asks.insert(key.clone(), ask);
                ask
            }
        };
        // New allocation ids of this ask continue after every id recovered, so
        // an id the RM saw before a restart is never handed out again.
        let next = id
            .strip_prefix(key.as_ref())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u32>().ok())
            .map_or(0, |n| n.saturating_add(1));
        let a = &mut self.asks[ask];
        a.next_id = a.next_id.max(next);
        let size = self.sizes.intern(resource);
        let meta = AllocMeta {
            priority: alloc.priority,
            placeholder: alloc.placeholder,
            task_group: alloc.task_group_name,
            originator: alloc.originator,
            tags: alloc.allocation_tags.into_iter().collect(),
        };
        self.insert_allocation(app, ask, node, id, size, meta, now);
        if matches!(
            self.apps[app].state,
            AppState::New | AppState::Accepted | AppState::Completing | AppState::Resuming
        ) {
            self.set_app_state(app, AppState::Running, now, "allocation recovered");
        }
        self.rekey_app(app);
    }

    /// Records an allocation and its usage.
    #[allow(clippy::too_many_arguments)] // one per part of the record
    pub fn insert_allocation(
        &mut self,
        app: AppId,
        ask: AskId,
        node: NodeId,
        id: Arc<str>,
        resource: Arc<Resource>,
        meta: AllocMeta,
        now: u64,
    ) -> AllocId {
        self.add_usage(app, node, &resource);
        let key = self.asks[ask].key.clone();
        let alloc = self.allocs.insert(Allocation {
            key,
            id: id.clone(),
            app,
            node,
            resource,
            priority: meta.priority,
            placeholder: meta.placeholder,
            task_group: meta.task_group,
            originator: meta.originator,
            tags: meta.tags,
            created: now,
            node_slot: self.nodes[node].allocations.len(),
            releasing: None,
        });
        self.alloc_by_id.insert(id, alloc);
        let a = &mut self.apps[app];
        self.asks[ask].allocs.push(alloc);
        a.allocation_count += 1;
        self.nodes[node].allocations.push(alloc);
        alloc
    }

    // ---- nodes -------------------------------------------------------------

    fn reject_node(&mut self, id: &str, reason: String) {
        self.outbox.node.rejected.push(si::RejectedNode {
            node_id: id.to_string(),
            reason,
        });
    }

    fn accept_node(&mut self, id: &str) {
        self.outbox.node.accepted.push(si::AcceptedNode {
            node_id: id.to_string(),
        });
    }

    /// Applies one node action.
    pub fn node_action(&mut self, node: super::command::PreparedNode, now: u64) {
        let super::command::PreparedNode {
            info,
            capacity,
            occupied,
            existing,
        } = node;
        let id = info.node_id.clone();
        if id.is_empty() {
            return self.reject_node(&id, "node id is empty".to_string());
        }
        let action =
            ActionFromRm::try_from(info.action).unwrap_or(ActionFromRm::UnknownActionFromRm);
        let known = self.node_by_id.get(id.as_str()).copied();
        match (action, known) {
            (ActionFromRm::Create | ActionFromRm::CreateDrain, Some(_)) => self.reject_node(
                &id,
                format!("node {id} already exists in partition {}", self.name),
            ),
            (ActionFromRm::Create | ActionFromRm::CreateDrain, None) => {
                let capacity = match capacity {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        return self
                            .reject_node(&id, format!("node {id}: schedulable resource: {e}"));
                    }
                    None => Resource::ZERO,
                };
                let occupied = match occupied {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        return self.reject_node(&id, format!("node {id}: occupied resource: {e}"));
                    }
                    None => Resource::ZERO,
                };
                let node_id: Arc<str> = Arc::from(id.as_str());
                let node = Node {
                    id: node_id.clone(),
                    attributes: info.attributes.into_iter().collect(),
                    res: NodeResources::new(&capacity, &occupied),
                    schedulable: action == ActionFromRm::Create,
                    allocations: Default::default(),
                    reserved_by: None,
                    key_in_index: None,
                };
                let n = self.nodes.insert(node);
                self.node_by_id.insert(node_id, n);
                self.total_capacity.add_assign(&capacity);
                self.shares_stale = true;
                self.rekey_node(n);
                self.accept_node(&id);
                self.outbox.event(
                    now,
                    EventType::Node,
                    &id,
                    "",
                    ChangeType::Add,
                    ChangeDetail::DetailsNone,
                    "node added".to_string(),
                );
                for (alloc, res) in existing {
                    self.recover_allocation(alloc, res, now);
                }
            }
            (_, None) => {
                let what = if action == ActionFromRm::UnknownActionFromRm {
                    format!("node {id}: unknown node action {}", info.action)
                } else {
                    format!("node {id} not found in partition {}", self.name)
                };
                self.reject_node(&id, what)
            }
            (ActionFromRm::UnknownActionFromRm, Some(_)) => self.reject_node(
                &id,
                format!("node {id}: unknown node action {}", info.action),
            ),
            (ActionFromRm::Update, Some(n)) => {
                let capacity = match capacity.transpose() {
                    Ok(c) => c,
                    Err(e) => {
                        return self
                            .reject_node(&id, format!("node {id}: schedulable resource: {e}"));
                    }
                };
                let occupied = match occupied.transpose() {
                    Ok(c) => c,
                    Err(e) => {
                        return self.reject_node(&id, format!("node {id}: occupied resource: {e}"));
                    }
                };
                let node = &mut self.nodes[n];
                if let Some(c) = capacity {
                    self.total_capacity.sub_assign(&node.res.capacity());
                    self.total_capacity.add_assign(&c);
                    self.shares_stale = true;
                    node.res.set_capacity(&c);
                    self.outbox.event(
                        now,
                        EventType::Node,
                        &id,
                        "",
                        ChangeType::Set,
                        ChangeDetail::NodeCapacity,
                        "capacity changed".to_string(),
                    );
                }
                let node = &mut self.nodes[n];
                if let Some(o) = occupied {
                    node.res.set_occupied(&o);
                }
                if !info.attributes.is_empty() {
                    node.attributes = info.attributes.into_iter().collect();
                }
                self.rekey_node(n);
                self.accept_node(&id);
            }
            (ActionFromRm::DrainNode, Some(n)) => {
                self.set_schedulable(n, false, now);
                self.accept_node(&id);
            }
            (ActionFromRm::DrainToSchedulable, Some(n)) => {
                if self.nodes[n].schedulable {
                    return self.reject_node(&id, format!("node {id} is not draining"));
                }
                self.set_schedulable(n, true, now);
                self.accept_node(&id);
            }
            (ActionFromRm::Decomission, Some(n)) => {
                self.remove_node(n, now);
                self.accept_node(&id);
            }
        }
    }

    fn set_schedulable(&mut self, n: NodeId, schedulable: bool, now: u64) {
        self.nodes[n].schedulable = schedulable;
        if !schedulable && let Some(ask) = self.nodes[n].reserved_by {
            self.unreserve(ask);
        }
        self.rekey_node(n);
        let id = self.nodes[n].id.clone();
        let msg = if schedulable {
            "node schedulable"
        } else {
            "node draining"
        };
        self.outbox.event(
            now,
            EventType::Node,
            &id,
            "",
            ChangeType::Set,
            ChangeDetail::NodeSchedulable,
            msg.to_string(),
        );
    }

    /// Removes a node, releasing (and reporting) its allocations.
    pub fn remove_node(&mut self, n: NodeId, now: u64) {
        if let Some(ask) = self.nodes[n].reserved_by {
            self.unreserve(ask);
        }
        let allocs: Vec<AllocId> = self.nodes[n].allocations.clone();
        let mut touched = Vec::new();
        for a in allocs {
            touched.push(self.allocs[a].app);
            self.release_allocation(
                a,
                si::TerminationType::StoppedByRm,
                "node decommissioned",
                now,
            );
        }
        self.nodes[n].schedulable = false;
        self.rekey_node(n);
        let node = self.nodes.remove(n);
        self.node_by_id.remove(&node.id);
        self.total_capacity.sub_assign(&node.res.capacity());
        self.shares_stale = true;
        self.forget_node_filters(n);
        self.outbox.event(
            now,
            EventType::Node,
            &node.id,
            "",
            ChangeType::Remove,
            ChangeDetail::NodeDecomission,
            "node removed".to_string(),
        );
        for app in touched {
            if self.apps.contains(app) {
                self.check_completing(app, now);
            }
        }
    }

    // ---- reservations ------------------------------------------------------

    /// Drops the reservation an ask holds, if any.
    pub fn unreserve(&mut self, ask: AskId) {
        self.unreserve_because(ask, "reservation removed");
    }

    /// Drops the reservation an ask holds, if any, and reports why in an
    /// event (timestamped with the request or pass being applied).
    pub fn unreserve_because(&mut self, ask: AskId, why: &str) {
        let Some(a) = self.asks.get_mut(ask) else {
            return;
        };
        let Some(n) = a.reserved_node.take() else {
            return;
        };
        let key = a.key.clone();
        self.reserved_asks.remove(&ask);
        self.freed_in_pass = true;
        if let Some(node) = self.nodes.get_mut(n)
            && node.reserved_by == Some(ask)
        {
            node.reserved_by = None;
            self.rekey_node(n);
        }
        if let Some(node) = self.nodes.get(n) {
            let node_id = node.id.clone();
            self.outbox.event(
                self.now,
                EventType::Node,
                &node_id,
                &key,
                ChangeType::Remove,
                ChangeDetail::NodeReservation,
                why.to_string(),
            );
        }
    }

    /// Reports an ask's scheduling state to the RM when it changed.
    pub fn report_scheduling_state(&mut self, ask: AskId, state: SchedulingState, reason: &str) {
        let a = &mut self.asks[ask];
        if a.reported_state == state as i32 {
            return;
        }
        a.reported_state = state as i32;
        let app = String::from(&*self.apps[a.app].id);
        let key = String::from(&*a.key);
        self.outbox
            .states
            .push(si::UpdateContainerSchedulingStateRequest {
                application_id: app,
                allocation_key: key,
                state: state as i32,
                reason: reason.to_string(),
            });
    }
}

/// The partition's queues as the placement rules see them.
struct PartitionQueues<'a>(&'a Partition);

impl crate::config::placement::QueueLookup for PartitionQueues<'_> {
    fn lookup(&self, path: &str) -> Option<crate::config::placement::QueueInfo> {
        let &id = self.0.queue_by_path.get(path)?;
        let q = &self.0.queues[id];
        Some(crate::config::placement::QueueInfo {
            leaf: !q.is_parent,
            draining: q.state == QueueState::Draining,
        })
    }

    fn submit_allowed(&self, path: &str, user: &str, groups: &[String]) -> bool {
        self.0
            .queue_by_path
            .get(path)
            .is_some_and(|&id| self.0.submit_allowed(id, user, groups))
    }
}
