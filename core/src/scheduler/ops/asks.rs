//! Asks: adding and updating them, their pending totals, and releases of
//! asks by the RM.

use si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use unisched_si as si;

use super::super::command::PreparedAsk;
use super::super::objects::*;
use super::super::partition::Partition;

/// What an ask or recovered allocation sent without a preemption policy
/// allows, as upstream's `IsAllowPreemptSelf` / `IsAllowPreemptOther` read a
/// missing policy: it may be preempted, and preempts nothing.
pub(super) const NO_PREEMPTION_POLICY: si::PreemptionPolicy = si::PreemptionPolicy {
    allow_preempt_self: true,
    allow_preempt_other: false,
};

impl Partition {
    pub(super) fn reject_ask(&mut self, key: &str, app: &str, reason: String) {
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
                let pref = ask.preemption_policy.unwrap_or(NO_PREEMPTION_POLICY);
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
        if self.asks[id].placeholder {
            self.sync_placeholder_count(id, now);
        }
        match self.apps[app].state {
            AppState::New => self.set_app_state(app, AppState::Accepted, now, "first ask"),
            AppState::Completing => self.set_app_state(app, AppState::Running, now, "new ask"),
            _ => {}
        }
        // Re-keyed once per batch of asks (see `rekey_dirty`), not per ask.
        self.dirty_apps.push(app);
    }

    pub(in crate::scheduler) fn add_pending_of_ask(&mut self, id: AskId) {
        let a = &self.asks[id];
        if a.pending == 0 {
            return;
        }
        let (app, total, key) = (
            a.app,
            a.resource.times(i64::from(a.pending)),
            a.order_key(id),
        );
        let (res, preempts) = (*a.resource, a.allow_preempt_other);
        let book = &mut self.apps[app];
        if book.pending_order.insert(key) {
            // Keep the floor a lower bound of every pending ask, and the
            // floor of this pass's walk too (the ask may sit behind its cursor).
            book.pending_floor = book.pending_floor.min(&res);
            book.walk_floor = book.walk_floor.min(&res);
            book.floor_preempts |= preempts;
            book.walk_preempts |= preempts;
            self.pending_ask_added(&res);
        }
        self.add_pending(app, &total);
    }

    pub(in crate::scheduler) fn remove_pending_of_ask(&mut self, id: AskId) {
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
    pub(in crate::scheduler) fn remove_ask(&mut self, id: AskId, _now: u64) {
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
}
