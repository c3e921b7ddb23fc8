//! Allocations: releases named by the RM, recovered allocations, and the
//! record of an allocation with its usage.

use std::borrow::Cow;
use std::sync::Arc;

use unisched_si as si;

use super::super::objects::*;
use super::super::partition::{Partition, Released};
use crate::resources::Resource;

impl Partition {
    pub(super) fn reject_allocation(&mut self, key: &str, app: &str, reason: String) {
        self.outbox
            .allocation
            .rejected_allocations
            .push(si::RejectedAllocation {
                allocation_key: key.to_string(),
                application_id: app.to_string(),
                reason,
            });
    }

    /// Releases allocations named by an RM: by id, by key, or all of the
    /// application. A release naming an application or allocation the core
    /// does not have is ignored, as upstream ignores it: it races with the
    /// core's own releases (a node removed, an application failed, a
    /// confirmation sent twice), and an RM that treats a rejected allocation
    /// as a failed task (upstream's k8shim rejects the task) would fail one
    /// that is only finishing.
    pub fn release_allocations(&mut self, rel: si::AllocationRelease, now: u64) {
        let (app_id, key) = (rel.application_id.as_str(), rel.allocation_key.as_str());
        let ignored = |why: &str| {
            tracing::debug!(
                application = app_id,
                allocation_key = key,
                allocation_id = %rel.allocation_id,
                "release ignored: {why}"
            );
        };
        let Some(&app) = self.app_by_id.get(app_id) else {
            return ignored("no such application");
        };
        self.file_ids();
        let targets: Vec<AllocId> = if !rel.allocation_id.is_empty() {
            match self.alloc_by_id.get(rel.allocation_id.as_str()) {
                Some(&a) if self.allocs[a].app == app => vec![a],
                _ => return ignored("no such allocation in the application"),
            }
        } else if !key.is_empty() {
            match self.apps[app].asks.get(key).map(|&a| &self.asks[a].allocs) {
                Some(list) if !list.is_empty() => list.to_vec(),
                _ => return ignored("no allocation with this key in the application"),
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
        message: impl Into<Cow<'static, str>>,
        now: u64,
    ) {
        let alloc = self.remove_allocation(id, termination);
        let message = message.into();
        self.report_release(alloc.app, alloc.key, alloc.id, termination, message, now);
    }

    /// Tells the RM (and the event stream) that an allocation is released.
    pub(in crate::scheduler) fn report_release(
        &mut self,
        app: AppId,
        key: Arc<str>,
        alloc_id: Arc<str>,
        termination: si::TerminationType,
        message: Cow<'static, str>,
        now: u64,
    ) {
        let release = Released {
            app: self.apps[app].id.clone(),
            key,
            id: alloc_id,
            termination,
            message,
        };
        self.outbox.release(now, release);
    }

    /// Removes one allocation and gives its resources back, without telling
    /// the RM (the caller reports it, or the RM itself asked for it).
    pub fn remove_allocation(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
    ) -> Allocation {
        self.file_ids();
        let alloc = self.allocs.remove(id);
        self.alloc_by_id.remove(&alloc.id);
        self.remove_usage(alloc.app, alloc.node, &alloc.resource, alloc.placeholder);
        let node = &mut self.nodes[alloc.node];
        node.allocations.swap_remove(alloc.node_slot);
        if let Some(&moved) = node.allocations.get(alloc.node_slot) {
            self.allocs[moved].node_slot = alloc.node_slot;
        }
        let app = &mut self.apps[alloc.app];
        app.allocation_count -= 1;
        if let Some(&ask) = app.asks.get(&alloc.key) {
            let a = &mut self.asks[ask];
            // Ids are unique in the list: stop at the one, keep the order
            // (releases by key and of a whole application follow it).
            if let Some(i) = a.allocs.iter().position(|x| *x == id) {
                a.allocs.remove(i);
            }
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
        self.file_ids();
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
                let pref = alloc
                    .preemption_policy
                    .unwrap_or(super::asks::NO_PREEMPTION_POLICY);
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
        let placeholder = meta.placeholder;
        let alloc = self.record_allocation(app, ask, node, id.clone(), size, meta, now);
        self.alloc_by_id.insert(id, alloc);
        if self.asks[ask].placeholder {
            self.sync_placeholder_count(ask, now);
        }
        self.progress_on_allocation(app, placeholder, now, "allocation recovered");
        self.rekey_app(app);
    }

    /// Puts the ids of the leases made since the last call into
    /// `alloc_by_id`. Each was free in the map when made, and the leases of
    /// one pass have distinct ids (see `place`).
    pub fn file_ids(&mut self) {
        for (id, alloc) in self.unfiled_ids.drain(..) {
            let previous = self.alloc_by_id.insert(id, alloc);
            // Not reached: an id is made only when free in the map and in
            // the pass. Were it, the later allocation keeps the id.
            debug_assert!(
                previous.is_none(),
                "allocation {alloc}'s id was {previous:?}'s"
            );
            if let Some(other) = previous {
                tracing::error!(
                    allocation = alloc,
                    other,
                    "an allocation id was made twice; the later allocation keeps it"
                );
            }
        }
    }

    /// Records an allocation and its usage. Not under its id in
    /// `alloc_by_id`: the caller puts it there (a new allocation's id goes
    /// in as it is found free, under `self.allocs.vacant_key()`, the number
    /// this gives the record).
    #[allow(clippy::too_many_arguments)] // one per part of the record
    pub(crate) fn record_allocation(
        &mut self,
        app: AppId,
        ask: AskId,
        node: NodeId,
        id: Arc<str>,
        resource: Arc<Resource>,
        meta: AllocMeta,
        now: u64,
    ) -> AllocId {
        self.add_usage(app, node, &resource, meta.placeholder);
        let key = self.asks[ask].key.clone();
        let alloc = self.allocs.insert(Allocation {
            key,
            id,
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
        let a = &mut self.apps[app];
        self.asks[ask].allocs.push(alloc);
        a.allocation_count += 1;
        self.nodes[node].allocations.push(alloc);
        alloc
    }
}
