//! Gang scheduling: placeholders, their replacement by real asks, and the
//! placeholder timeout.
//!
//! An application takes part when it is submitted with a placeholder ask, a
//! gang style or an execution timeout, or when its first placeholder ask
//! arrives; every other application has `App::gang == None` and pays nothing.
//! Per task group the application counts the placeholders asked for, those
//! replaced by a real ask and those gone otherwise (timed out, released). While
//! a group has outstanding placeholders, its real asks are not scheduled
//! normally: each waits for a placeholder of its group to replace.
//!
//! Replacement follows YuniKorn: the core sends the placeholder's release with
//! `PLACEHOLDER_REPLACED` and keeps it (and its resources) until the RM
//! confirms with a release of the same type; then the real allocation is made
//! on the placeholder's node and sent. A real ask larger than its placeholder
//! releases that placeholder (`TIMEOUT`), which also holds its resources until
//! the RM confirms. The placeholder timeout is in `placeholder_timeout.rs`.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use unisched_si as si;

use super::allocate::PassContext;
use super::objects::*;
use super::partition::Partition;
use crate::resources::Resource;

/// Placeholder timeout when the application sets no execution timeout.
pub const DEFAULT_PLACEHOLDER_TIMEOUT: u64 = 15 * 60 * 1_000_000_000;

/// Placeholders of one task group.
#[derive(Debug, Default, Clone, Copy)]
pub struct GroupCount {
    /// Placeholders asked for.
    pub count: u32,
    /// Placeholders replaced by a real allocation.
    pub replaced: u32,
    /// Placeholders that went otherwise (timed out, released, ask removed).
    pub gone: u32,
}

impl GroupCount {
    /// Placeholders still to be allocated or replaced.
    pub fn outstanding(&self) -> u32 {
        self.count
            .saturating_sub(self.replaced.saturating_add(self.gone))
    }
}

/// The gang scheduling state of one application.
#[derive(Debug, Clone)]
pub struct Gang {
    /// Hard style: a timeout fails the application.
    pub hard: bool,
    /// Placeholder timeout in nanoseconds.
    pub timeout: u64,
    /// When the running placeholder timer fires.
    pub deadline: Option<u64>,
    /// Per task group counts.
    pub groups: BTreeMap<String, GroupCount>,
    /// The application's `placeholderAsk`: the total of all its
    /// placeholders (zero when it gave none).
    pub placeholder_ask: Resource,
}

impl Gang {
    fn new(hard: bool, timeout_ms: i64, placeholder_ask: Resource) -> Self {
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map_or(DEFAULT_PLACEHOLDER_TIMEOUT, |ms| {
                ms.saturating_mul(1_000_000)
            });
        Self {
            hard,
            timeout,
            deadline: None,
            groups: BTreeMap::new(),
            placeholder_ask,
        }
    }
}

impl Partition {
    /// The gang state of an application being added to `queue`, or why the
    /// application is refused (a gang app in a fair leaf, or placeholders
    /// larger than a queue's max).
    pub(super) fn gang_for_new_app(
        &self,
        id: &str,
        queue: QueueId,
        placeholder_ask: Option<&si::Resource>,
        style: &str,
        timeout_ms: i64,
    ) -> Result<Option<Box<Gang>>, String> {
        let ask = match placeholder_ask {
            Some(r) if !r.resources.is_empty() => self
                .names
                .from_si(Some(r))
                .map_err(|e| format!("application {id}: placeholder ask: {e}"))?,
            _ => Resource::ZERO,
        };
        let hard = style.eq_ignore_ascii_case("hard");
        if ask.is_zero() {
            return Ok((hard || timeout_ms > 0)
                .then(|| Box::new(Gang::new(hard, timeout_ms, Resource::ZERO))));
        }
        let leaf = &self.queues[queue];
        if leaf.app_sort == AppSortPolicy::Fair {
            return Err(format!(
                "application {id}: gang scheduling needs a fifo queue, {} sorts applications fair",
                leaf.path
            ));
        }
        let mut q = Some(queue);
        while let Some(qid) = q {
            let queue = &self.queues[qid];
            if queue.has_max && !ask.fits_in(&queue.max) {
                return Err(format!(
                    "application {id}: placeholder ask exceeds the max of queue {}",
                    queue.path
                ));
            }
            q = queue.parent;
        }
        Ok(Some(Box::new(Gang::new(hard, timeout_ms, ask))))
    }

    /// Keeps a placeholder ask's task group count equal to what the ask
    /// stands for: the placeholders it made (or the RM recovered for its
    /// key) plus those it still wants. Called whenever the RM sends the ask
    /// or recovers one of its allocations, in whatever order: a count kept
    /// per ask makes each placeholder count once (a recovered placeholder
    /// counts as one asked for, as upstream counts a recovered placeholder
    /// ask, so a real ask of its group replaces it). Starts the placeholder
    /// timer if it is not running.
    pub(super) fn sync_placeholder_count(&mut self, ask: AskId, now: u64) {
        let a = &mut self.asks[ask];
        let (app, group) = (a.app, a.task_group().to_string());
        let stands_for = a.allocated_total.saturating_add(a.pending);
        let extra = a.extra.get_or_insert_with(Box::default);
        let counted = std::mem::replace(&mut extra.placeholders_counted, stands_for);
        if stands_for > counted {
            self.count_placeholders(app, group, stands_for - counted, now);
        } else if let Some(c) = self.apps[app]
            .gang
            .as_mut()
            .and_then(|g| g.groups.get_mut(&group))
        {
            // The RM lowered what the ask wants.
            c.count = c.count.saturating_sub(counted - stands_for);
        }
    }

    fn count_placeholders(&mut self, app: AppId, group: String, wanted: u32, now: u64) {
        let gang = self.apps[app]
            .gang
            .get_or_insert_with(|| Box::new(Gang::new(false, 0, Resource::ZERO)));
        let count = &mut gang.groups.entry(group).or_default().count;
        *count = count.saturating_add(wanted);
        if gang.deadline.is_none() {
            let deadline = now.saturating_add(gang.timeout);
            gang.deadline = Some(deadline);
            self.gang_timers.push(Reverse((deadline, app)));
        }
    }

    /// True when the application's placeholders add up to its placeholder
    /// ask (upstream compares the totals for equality): the gang is
    /// complete and the application runs. Never without a placeholder ask.
    pub(super) fn all_placeholders_allocated(&self, app: AppId) -> bool {
        let a = &self.apps[app];
        a.gang
            .as_ref()
            .is_some_and(|g| !g.placeholder_ask.is_zero() && g.placeholder_ask == a.placeholder)
    }

    /// True when `ask` is a real ask whose task group still has placeholders
    /// to replace: it must not be scheduled normally.
    pub(super) fn gang_waits(&self, app: AppId, ask: AskId) -> bool {
        let a = &self.asks[ask];
        if a.placeholder || a.task_group().is_empty() {
            return false;
        }
        self.apps[app]
            .gang
            .as_ref()
            .and_then(|g| g.groups.get(a.task_group()))
            .is_some_and(|c| c.outstanding() > 0)
    }

    /// True when a real ask of `group` has something pending: a placeholder
    /// of the group just placed may be what it waits for, even if the pass
    /// already passed over it.
    pub(super) fn gang_real_ask_pending(&self, app: AppId, group: &str) -> bool {
        self.apps[app].asks.values().any(|&a| {
            let a = &self.asks[a];
            !a.placeholder && a.pending > 0 && a.task_group() == group
        })
    }

    /// Placeholder allocations of an application not being released, oldest first.
    pub(super) fn live_placeholders(&self, app: AppId, group: Option<&str>) -> Vec<AllocId> {
        let mut out: Vec<AllocId> = self.apps[app]
            .asks
            .values()
            .map(|&a| &self.asks[a])
            .filter(|a| a.placeholder && group.is_none_or(|g| a.task_group() == g))
            .flat_map(|a| a.allocs.iter().copied())
            .filter(|&al| self.allocs[al].releasing.is_none())
            .collect();
        out.sort_unstable_by_key(|&al| (self.allocs[al].created, al));
        out
    }

    /// Tries to start replacing a placeholder of the ask's task group; true
    /// when a replacement started (the ask's pending count went down).
    pub(super) fn try_replace(
        &mut self,
        app: AppId,
        ask: AskId,
        ctx: &mut PassContext<'_>,
    ) -> bool {
        let group = self.asks[ask].task_group().to_string();
        for ph in self.live_placeholders(app, Some(&group)) {
            let res = *self.asks[ask].resource;
            if !res.fits_in(&self.allocs[ph].resource) {
                // As upstream: the placeholder is released (TIMEOUT) and
                // keeps its resources until the RM confirms; the real ask
                // waits for that, then is scheduled normally.
                self.release_with_confirmation(
                    ph,
                    si::TerminationType::Timeout,
                    "real ask larger than its placeholder",
                    ctx.now,
                );
                continue;
            }
            let node = self.allocs[ph].node;
            if !self.predicate(ctx, ask, node, true) {
                continue;
            }
            self.take_one_pending(app, ask);
            self.allocs[ph].releasing = Some(Box::new(PendingRelease {
                termination: si::TerminationType::PlaceholderReplaced,
                replacement: Some((self.asks[ask].key.clone(), res)),
            }));
            self.send_release(
                ph,
                si::TerminationType::PlaceholderReplaced,
                "placeholder replaced by a real allocation".into(),
                ctx.now,
            );
            self.rekey_app(app);
            return true;
        }
        false
    }

    /// One allocation of `ask` is spoken for outside the normal path.
    pub(super) fn take_one_pending(&mut self, app: AppId, ask: AskId) {
        let a = &mut self.asks[ask];
        let order_key = a.order_key(ask);
        a.pending -= 1;
        // Counted as made now, so an update of the ask while the RM confirms
        // the placeholder's release cannot ask for one allocation too many.
        a.allocated_total += 1;
        let (res, done) = (*a.resource, a.pending == 0);
        if done && self.apps[app].pending_order.remove(&order_key) {
            self.pending_ask_removed();
        }
        self.unreserve(ask);
        self.remove_pending(app, &res);
    }

    /// The RM released a real ask while a placeholder's release for it was in
    /// flight: the placeholder still goes when confirmed, but nothing takes its
    /// place and the ask is not given its allocation back. The allocation
    /// counted as made when the replacement started was never made.
    pub(super) fn forget_replacements_for(&mut self, app: AppId, key: &str) {
        if self.apps[app].gang.is_none() {
            return;
        }
        let mut forgotten = 0;
        for id in self.app_allocations(app) {
            if let Some(r) = self.allocs[id].releasing.as_mut()
                && r.replacement.as_ref().is_some_and(|(k, _)| &**k == key)
            {
                r.replacement = None;
                forgotten += 1;
            }
        }
        if let Some(&ask) = self.apps[app].asks.get(key) {
            let a = &mut self.asks[ask];
            a.allocated_total = a.allocated_total.saturating_sub(forgotten);
        }
    }

    /// True while a placeholder's replacement by the real ask `key` waits for
    /// the RM's confirmation: that ask must live until then, even with
    /// nothing pending and no allocation left.
    pub(super) fn replacement_in_flight(&self, app: AppId, key: &str) -> bool {
        self.apps[app].gang.is_some()
            && self.app_allocations(app).into_iter().any(|id| {
                self.allocs[id]
                    .releasing
                    .as_ref()
                    .and_then(|r| r.replacement.as_ref())
                    .is_some_and(|(k, _)| &**k == key)
            })
    }

    /// Undoes `take_one_pending` (a replacement or preemption fell through).
    pub(super) fn give_back_pending(&mut self, app: AppId, ask: AskId) {
        self.remove_pending_of_ask(ask);
        let a = &mut self.asks[ask];
        a.pending += 1;
        a.allocated_total = a.allocated_total.saturating_sub(1);
        self.add_pending_of_ask(ask);
        self.rekey_app(app);
    }

    /// Releases an allocation the way the core decides releases: marked as
    /// releasing and reported to the RM with `termination`; it keeps its
    /// resources until the RM confirms with a release of the same type.
    pub(super) fn release_with_confirmation(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
        message: impl Into<std::borrow::Cow<'static, str>>,
        now: u64,
    ) {
        self.allocs[id].releasing = Some(Box::new(PendingRelease {
            termination,
            replacement: None,
        }));
        self.send_release(id, termination, message.into(), now);
    }

    /// Tells the RM the core releases an allocation (it stays until removed).
    pub(super) fn send_release(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
        message: std::borrow::Cow<'static, str>,
        now: u64,
    ) {
        let alloc = &self.allocs[id];
        let (app, key, alloc_id) = (alloc.app, alloc.key.clone(), alloc.id.clone());
        self.report_release(app, key, alloc_id, termination, message, now);
    }

    /// The RM confirms a release the core asked for: the allocation goes, and
    /// a replaced placeholder's real allocation is made on its node.
    pub(super) fn confirm_release(
        &mut self,
        id: AllocId,
        termination: si::TerminationType,
        now: u64,
    ) {
        let replacement = self.allocs[id]
            .releasing
            .as_ref()
            .and_then(|r| r.replacement.clone());
        let alloc = self.remove_allocation(id, termination);
        if termination == si::TerminationType::PlaceholderReplaced
            && let Some((key, res)) = replacement
        {
            self.place_replacement(alloc.app, &key, res, alloc.node, now);
        }
    }

    /// Bookkeeping when an allocation that is a placeholder, or that waits
    /// for a release confirmation, goes.
    pub(super) fn gang_allocation_removed(
        &mut self,
        alloc: &Allocation,
        termination: si::TerminationType,
    ) {
        let replacement = alloc
            .releasing
            .as_ref()
            .and_then(|r| r.replacement.as_ref().map(|(k, _)| k));
        let replaced =
            termination == si::TerminationType::PlaceholderReplaced && replacement.is_some();
        if let Some(key) = replacement
            && !replaced
            && let Some(&ask) = self.apps[alloc.app].asks.get(key)
        {
            // The placeholder went another way: the real ask is pending again.
            self.give_back_pending(alloc.app, ask);
        }
        if alloc.placeholder
            && let Some(c) = self.apps[alloc.app]
                .gang
                .as_mut()
                .and_then(|g| g.groups.get_mut(&alloc.task_group))
        {
            if replaced {
                c.replaced += 1;
            } else {
                c.gone += 1;
            }
        }
    }

    /// A placeholder ask's pending part is dropped: those placeholders are gone.
    pub(super) fn gang_placeholder_ask_dropped(&mut self, ask: AskId) {
        let a = &self.asks[ask];
        let (app, pending) = (a.app, a.pending);
        if pending == 0 {
            return;
        }
        if let Some(c) = self.apps[app]
            .gang
            .as_mut()
            .and_then(|g| g.groups.get_mut(a.task_group()))
        {
            c.gone = c.gone.saturating_add(pending);
        }
        // What the ask still stands for: its allocations (sent again, it
        // counts what it then wants on top).
        if let Some(extra) = self.asks[ask].extra.as_mut() {
            extra.placeholders_counted = extra.placeholders_counted.saturating_sub(pending);
        }
    }

    /// Makes the real allocation of a confirmed replacement on `node`, of the
    /// size decided when the replacement started: the ask may have been sent
    /// again larger since, and the allocation must not outgrow its placeholder.
    fn place_replacement(
        &mut self,
        app: AppId,
        key: &Arc<str>,
        res: Resource,
        node: NodeId,
        now: u64,
    ) {
        let Some(&ask) = self.apps[app].asks.get(key) else {
            return;
        };
        let a = &self.asks[ask];
        let meta = AllocMeta {
            priority: a.priority,
            placeholder: false,
            task_group: a.task_group().to_string(),
            originator: a.originator,
            tags: a.tags().clone(),
        };
        let size = self.sizes.intern(res);
        // As upstream: the first real allocation that replaces a placeholder
        // leaves the state alone (the gang's last placeholder moved it
        // already), unless the application is Completing.
        let progresses =
            !self.apps[app].allocated.is_zero() || self.apps[app].state == AppState::Completing;
        self.place(app, ask, node, size, meta, now);
        if progresses {
            self.progress_on_allocation(app, false, now, "placeholder replaced");
        }
        if self.asks[ask].reported_state != 0 {
            self.report_scheduling_state(
                ask,
                si::update_container_scheduling_state_request::SchedulingState::Scheduled,
                "placeholder replaced",
            );
        }
        self.rekey_app(app);
    }
}
