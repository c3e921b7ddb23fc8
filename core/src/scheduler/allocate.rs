//! One scheduling pass over a partition.
//!
//! Order: asks holding a reservation first, then a depth-first walk of the
//! queue tree. At every level the walk takes the first entry of an ordered set
//! (children with pending demand by fair share; applications by fifo or fair
//! key; asks by priority then age), so choosing costs O(log n). An entry that
//! cannot allocate is *parked* (taken out of its set) for the rest of the pass,
//! and an application keeps a cursor past asks that failed, so nothing is tried
//! twice in a pass: the cost of one allocation does not grow with the number of
//! pending asks. Within a pass resources only shrink (no releases happen in the
//! middle of one), which is what makes parking and the failure memos sound.

use std::ops::Bound;

use si::update_container_scheduling_state_request::SchedulingState;
use unisched_si as si;

use super::objects::*;
use super::partition::{Partition, ROOT};
use crate::config::NodeSortKind;
use crate::resources::{Lanes, Resource};

/// Most resource sizes remembered per memo in one pass.
const MEMO_LIMIT: usize = 32;

/// Inputs and running state of one pass.
pub struct PassContext<'a> {
    /// Clock time of the pass.
    pub now: u64,
    /// Most allocations this pass may make.
    pub budget: usize,
    /// Allocations made so far.
    pub made: usize,
    /// How long an ask waits before it reserves a node, in nanoseconds.
    pub reservation_delay: u64,
    /// How long a reservation lasts while the headroom does not fit its ask.
    pub reservation_timeout: u64,
    /// The RM's predicates, when it asked for them.
    pub predicates: Option<&'a dyn Fn(&si::PredicatesArgs) -> bool>,
    /// Earliest time a waiting ask becomes due for a reservation.
    pub next_wake: Option<u64>,
    /// Resources were freed in the middle of the pass (a placeholder too small
    /// for its real ask): run another pass, the failure memos no longer hold.
    pub rerun: bool,
    /// Sizes that fit no node in this pass.
    node_memo: Vec<Resource>,
    /// Sizes that found no node to reserve in this pass.
    reserve_memo: Vec<Resource>,
    /// (leaf, size, short of the root's max only) of asks that failed the
    /// headroom check in this pass.
    headroom_memo: Vec<(QueueId, Resource, bool)>,
    /// Asks tried one by one so far (what a pass costs, for tests).
    pub asks_tried: usize,
    /// Applications passed over because no pending ask fits their queue
    /// headroom (see `Partition::no_pending_ask_fits`).
    pub apps_passed_over: usize,
    /// Where an offer run sends its results in parts while it goes on (the
    /// RM's dispatcher), so the RM turns the first leases into offers while
    /// the core makes the rest. None: everything goes at the flush.
    pub send_part: Option<&'a mut dyn FnMut(super::partition::Outbox)>,
}

/// Leases an offer run makes before it sends them as a part of the run, at
/// most: 1,024, or `UNISCHED_OFFER_RUN_PART` (read once; the soak sets it
/// small so that its runs are sent in parts).
pub fn offer_run_part() -> usize {
    static PART: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PART.get_or_init(|| {
        std::env::var("UNISCHED_OFFER_RUN_PART")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1024)
    })
}

/// The first part of an offer run: small, so that the RM starts turning
/// leases into offers while the core makes the rest (the RM is the slower
/// of the two at Mesos' scale); each later part twice the one before, up to
/// [`offer_run_part`], so a long run is sent in few parts.
const FIRST_OFFER_RUN_PART: usize = 64;

/// Leases of part `sent` (counted from 0) of an offer run.
pub fn offer_run_part_size(sent: u32) -> usize {
    // Shifted at most 32 places: 64 << 32 still fits.
    offer_run_part().min(FIRST_OFFER_RUN_PART << sent.min(32))
}

/// The most leases a part of an offer run holds while `left` nodes are in
/// the index (at most one lease each to come): a quarter of them, and never
/// fewer than the first part's. Near its end a run is sent in ever smaller
/// parts, so what the RM still has to do once the core is done (turning the
/// last part into offers) is a small part, not one of the largest.
pub fn offer_run_tail_part(left: usize) -> usize {
    FIRST_OFFER_RUN_PART.max(left / 4)
}

impl<'a> PassContext<'a> {
    /// A context for one pass.
    pub fn new(
        now: u64,
        budget: usize,
        reservation_delay: u64,
        predicates: Option<&'a dyn Fn(&si::PredicatesArgs) -> bool>,
    ) -> Self {
        Self {
            now,
            budget,
            made: 0,
            reservation_delay,
            reservation_timeout: u64::MAX,
            predicates,
            next_wake: None,
            rerun: false,
            node_memo: Vec::new(),
            reserve_memo: Vec::new(),
            headroom_memo: Vec::new(),
            asks_tried: 0,
            apps_passed_over: 0,
            send_part: None,
        }
    }

    /// Forgets what failed: the memos hold while resources only shrink.
    fn clear_memos(&mut self) {
        self.node_memo.clear();
        self.reserve_memo.clear();
        self.headroom_memo.clear();
    }

    pub(super) fn wake_at(&mut self, t: u64) {
        self.next_wake = Some(self.next_wake.map_or(t, |w| w.min(t)));
    }
}

fn remember(memo: &mut Vec<Resource>, res: Resource) {
    if memo.len() < MEMO_LIMIT {
        memo.push(res);
    }
}

/// What looking for a node found.
enum NodeSearch {
    Found(NodeId),
    /// Nothing fits; `clean` when no node was passed over for a reason specific
    /// to this ask (a reservation of another ask, a failed predicate).
    NotFound {
        clean: bool,
    },
}

/// Most allocation slots a pass reserves ahead for pending asks.
const ARENA_RESERVE_CAP: usize = 1 << 16;

impl Partition {
    /// Runs one pass; returns the number of allocations made.
    pub fn schedule(&mut self, ctx: &mut PassContext<'_>) -> usize {
        self.now = ctx.now;
        self.sync_lanes();
        tracing::trace!(target: "unisched::timeline", dirty = self.dirty_apps.len(), "core: a pass starts");
        self.refresh_shares();
        self.rekey_dirty();
        self.recheck_exhausted();
        if self.idle_offer_partition() {
            // Nothing to place and no allocation run asked for: no walk.
            return 0;
        }
        // Room for the results up front instead of growing by doubling (which
        // copies the arena and touches twice the memory): this pass's in the
        // outbox, and in the arenas for every pending ask (up to a cap, so a
        // huge backlog that does not fit reserves no more than that).
        let mut pending = usize::try_from(self.pending_ask_count).unwrap_or(usize::MAX);
        if self
            .offers
            .as_ref()
            .is_some_and(|p| p.runs_now() && p.active_apps > 0)
        {
            // An allocation run leases each node in the index at most once
            // (the whole remainder goes to one application).
            pending = pending.saturating_add(self.node_index.len());
        }
        // An ask may want many allocations: the last pass's count is the
        // better guess while it is larger than the asks waiting (and
        // nothing is reserved while nothing waits).
        if pending > 0 {
            self.outbox
                .placed
                .reserve(ctx.budget.min(pending.max(self.last_pass_made)));
        }
        let arena = pending.min(ARENA_RESERVE_CAP);
        self.allocs.reserve(arena);
        self.alloc_by_id.reserve(arena);
        if self.offers.is_some() {
            // A run's lease ids wait here until its results are sent.
            self.unfiled_ids.reserve(arena);
        }
        self.freed_in_pass = false;
        self.pass += 1;
        // The memos hold for one pass only: a rerun comes after reservations
        // were dropped (their nodes back in the index) or resources freed.
        ctx.clear_memos();
        let reserved: Vec<AskId> = self.reserved_asks.iter().copied().collect();
        for ask in reserved {
            if ctx.made >= ctx.budget {
                break;
            }
            self.try_reserved_ask(ask, ctx);
        }
        tracing::trace!(target: "unisched::timeline", "core: the pass walks the queues");
        while ctx.made < ctx.budget && self.pick_from(ROOT, ctx) {}
        tracing::trace!(target: "unisched::timeline", made = ctx.made, "core: the walk ends");
        self.expire_blocked_reservations(ctx);
        let rerun = std::mem::take(&mut ctx.rerun) && ctx.made < ctx.budget;
        if rerun || self.parts_sent == 0 {
            self.finish_pass();
            if rerun {
                return self.schedule(ctx);
            }
        } else {
            // An offer run that went out in parts ends here: its last part
            // (the flush's) goes out first, and the RM closes the run while
            // this thread puts the run's thousand parked applications back
            // in order (about 0.2 ms of a W4 run that waited for it).
            self.finish_after_flush = true;
        }
        self.last_pass_made = ctx.made;
        ctx.made
    }

    /// Ends a pass: the queues and applications it parked go back in
    /// order, and the nodes it exhausted join the exhausted set.
    pub fn finish_pass(&mut self) {
        self.finish_after_flush = false;
        self.unpark_all();
        self.exhausted_nodes.settle();
    }

    /// Forgets what a pass that panicked (or whose end panicked) parked,
    /// and any end it left to do: the engine's way out of a broken pass.
    pub fn abandon_pass(&mut self) {
        self.finish_after_flush = false;
        self.parked_apps.clear();
        self.parked_queues.clear();
    }

    /// Allocations made after the reserved asks were tried may have used up
    /// the headroom a reservation waits for: look again at the end of the
    /// pass, so a reservation that is now blocked and past its timeout is
    /// cancelled (which asks for another pass) and one not yet due gets its
    /// wake-up, instead of the next pass finding either with nothing new.
    fn expire_blocked_reservations(&mut self, ctx: &mut PassContext<'_>) {
        if ctx.reservation_timeout == u64::MAX || ctx.made == 0 {
            return;
        }
        let reserved: Vec<AskId> = self.reserved_asks.iter().copied().collect();
        for ask in reserved {
            let Some(a) = self.asks.get(ask) else {
                continue;
            };
            let (app, res) = (a.app, *a.resource);
            if a.pending == 0 || !self.apps[app].state_allows_scheduling() {
                continue;
            }
            let leaf = self.apps[app].queue;
            if !self.fits_headroom(leaf, &res) || !self.fits_user_limits(app, &res) {
                self.reservation_blocked(ask, ctx);
            }
        }
    }

    fn try_reserved_ask(&mut self, ask: AskId, ctx: &mut PassContext<'_>) {
        let Some(a) = self.asks.get(ask) else { return };
        let (app, res, reserved) = (a.app, *a.resource, a.reserved_node);
        if a.pending == 0 || !self.apps[app].state_allows_scheduling() {
            return;
        }
        let leaf = self.apps[app].queue;
        if !self.fits_headroom(leaf, &res) || !self.fits_user_limits(app, &res) {
            return self.reservation_blocked(ask, ctx);
        }
        if !self.can_start(app) {
            return;
        }
        let on_reserved = reserved.filter(|&n| {
            let node = &self.nodes[n];
            node.schedulable && node.res.fits(&res, Lanes::ALL) && self.predicate(ctx, ask, n, true)
        });
        if self.asks[ask].required_node().is_some() {
            // Its own node or nothing; room there may take preemption.
            match on_reserved {
                Some(n) => self.allocate(app, ask, n, ctx),
                None => {
                    self.try_required_node(app, ask, &res, ctx);
                }
            }
            return;
        }
        let node = match on_reserved {
            Some(n) => Some(n),
            None => match self.find_node(ask, &res, ctx) {
                NodeSearch::Found(n) => Some(n),
                NodeSearch::NotFound { .. } => None,
            },
        };
        if let Some(n) = node {
            self.allocate(app, ask, n, ctx);
        }
    }

    /// A reserved ask whose queue (or user) headroom does not fit: the
    /// reservation is cancelled once it is older than the timeout.
    fn reservation_blocked(&mut self, ask: AskId, ctx: &mut PassContext<'_>) {
        let expires = self.asks[ask]
            .reserved_since
            .saturating_add(ctx.reservation_timeout);
        if ctx.now >= expires {
            self.unreserve_because(
                ask,
                "reservation timed out: the queue headroom does not fit",
            );
        } else {
            ctx.wake_at(expires);
        }
    }

    /// Allocates one ask somewhere below queue `q`; false when nothing below can.
    fn pick_from(&mut self, q: QueueId, ctx: &mut PassContext<'_>) -> bool {
        if self.queues[q].is_parent {
            while let Some(&(.., child)) = self.queues[q].child_order.first() {
                if self.pick_from(child, ctx) {
                    return true;
                }
                self.park_queue(child);
            }
        } else {
            while let Some(&(.., app)) = self.queues[q].app_order.first() {
                if self.try_app(app, ctx) {
                    return true;
                }
                self.park_app(app);
            }
        }
        false
    }

    fn park_queue(&mut self, q: QueueId) {
        let queue = &mut self.queues[q];
        queue.blocked_in_pass = self.pass;
        if let (Some(k), Some(parent)) = (queue.key_in_parent.take(), queue.parent) {
            self.queues[parent]
                .child_order
                .remove(&k, &mut self.queue_slots);
        }
        self.parked_queues.push(q);
    }

    fn park_app(&mut self, app: AppId) {
        let a = &mut self.apps[app];
        a.blocked_in_pass = self.pass;
        if let Some(k) = a.key_in_queue.take() {
            let leaf = a.queue;
            self.queues[leaf].app_order.remove(&k, &mut self.app_slots);
        }
        self.parked_apps.push(app);
    }

    /// Tries the application's asks in order from its cursor; true on an allocation.
    fn try_app(&mut self, app: AppId, ctx: &mut PassContext<'_>) -> bool {
        if self.apps[app].offers.is_some() && self.try_offer(app, ctx) {
            return true;
        }
        if !self.can_start(app) {
            return false;
        }
        if self.apps[app].cursor_pass != self.pass {
            let a = &mut self.apps[app];
            a.cursor_pass = self.pass;
            a.cursor = None;
            a.walk_floor = Resource::UNLIMITED;
            a.walk_preempts = false;
        }
        if self.no_pending_ask_fits(app) {
            ctx.apps_passed_over += 1;
            return false;
        }
        loop {
            let a = &self.apps[app];
            let next = match a.cursor {
                None => a.pending_order.first().copied(),
                Some(c) => a
                    .pending_order
                    .range((Bound::Excluded(c), Bound::Unbounded))
                    .next()
                    .copied(),
            };
            let Some(key) = next else {
                // Every pending ask was tried (or added) in this pass: the
                // floor is exact again.
                let a = &mut self.apps[app];
                a.pending_floor = a.walk_floor;
                a.floor_preempts = a.walk_preempts;
                return false;
            };
            let ask = &self.asks[key.2];
            let (res, preempts) = (*ask.resource, ask.allow_preempt_other);
            let a = &mut self.apps[app];
            a.walk_floor = a.walk_floor.min(&res);
            a.walk_preempts |= preempts;
            ctx.asks_tried += 1;
            if self.try_ask(app, key.2, ctx) {
                return true;
            }
            self.apps[app].cursor = Some(key);
        }
    }

    /// True when trying the application's asks one by one would fail every
    /// one of them at the headroom check with nothing else to do: its
    /// smallest pending ask (the floor) does not fit under the max of its
    /// leaf or of an ancestor below the root (so no ask waits for the
    /// cluster to grow and none is reported so), none of its asks may
    /// preempt, and it is no gang (whose asks may replace placeholders).
    /// What `try_ask` would do for each ask is then nothing, so a queue at
    /// its max costs one check per application and pass, not a walk of its
    /// backlog.
    fn no_pending_ask_fits(&self, app: AppId) -> bool {
        let a = &self.apps[app];
        if a.gang.is_some() || (self.config.preemption.enabled && a.floor_preempts) {
            return false;
        }
        !self.fits_headroom_below_root(a.queue, &a.pending_floor)
    }

    fn try_ask(&mut self, app: AppId, ask: AskId, ctx: &mut PassContext<'_>) -> bool {
        if self.apps[app].gang.is_some() && self.gang_waits(app, ask) {
            return self.try_replace(app, ask, ctx);
        }
        let res = *self.asks[ask].resource;
        let leaf = self.apps[app].queue;
        if let Some(&(.., cluster_only)) = ctx
            .headroom_memo
            .iter()
            .find(|(q, r, _)| *q == leaf && res.dominates(r))
        {
            if cluster_only && self.fits_headroom_below_root(leaf, &res) {
                self.report_waits_for_cluster(ask);
            }
            return false;
        }
        // User and group limits first, then the queue headroom. A user limit
        // failure is specific to the application: not remembered for the leaf.
        if !self.fits_user_limits(app, &res) {
            return false;
        }
        if !self.fits_headroom(leaf, &res) {
            // Short of the root's max alone: the cluster is too small, which
            // is the autoscaler's signal (the root's max is the cluster size).
            let cluster_only = self.fits_headroom_below_root(leaf, &res);
            if cluster_only {
                self.report_waits_for_cluster(ask);
            }
            if ctx.headroom_memo.len() < MEMO_LIMIT {
                ctx.headroom_memo.push((leaf, res, cluster_only));
            }
            if self.config.preemption.enabled && self.asks[ask].allow_preempt_other {
                self.try_preempt(app, ask, ctx);
            }
            return false;
        }
        if self.asks[ask].required_node().is_some() {
            return self.try_required_node(app, ask, &res, ctx);
        }
        let search = if ctx.node_memo.iter().any(|r| res.dominates(r)) {
            NodeSearch::NotFound { clean: true }
        } else {
            self.find_node(ask, &res, ctx)
        };
        match search {
            NodeSearch::Found(n) => {
                self.allocate(app, ask, n, ctx);
                true
            }
            NodeSearch::NotFound { clean } => {
                if clean {
                    remember(&mut ctx.node_memo, res);
                }
                if self.asks[ask].reserved_node.is_none() {
                    self.report_waits_for_cluster(ask);
                    let preempted = self.config.preemption.enabled
                        && self.asks[ask].allow_preempt_other
                        && self.try_preempt(app, ask, ctx);
                    if !preempted {
                        self.maybe_reserve(ask, &res, ctx);
                    }
                }
                false
            }
        }
    }

    /// An ask that requires a node, as upstream's `tryRequiredNode`: the
    /// reservations of that node held by asks that do not require it give
    /// way, then the ask is placed there if it fits; if not, it reserves the
    /// node at once (no reservation delay), so that no other ask takes the
    /// room it waits for. One reservation per node: a node another
    /// required-node ask holds is not reserved again. True on an allocation.
    fn try_required_node(
        &mut self,
        app: AppId,
        ask: AskId,
        res: &Resource,
        ctx: &mut PassContext<'_>,
    ) -> bool {
        let required = self.asks[ask].required_node().unwrap_or_default();
        let Some(n) = self.node_by_id.get(required).copied() else {
            // Not registered (yet): nothing to try.
            return false;
        };
        if let Some(holder) = self.nodes[n]
            .reserved_by
            .filter(|&h| h != ask && self.asks[h].required_node().is_none())
        {
            self.unreserve_because(holder, "reservation cancelled: an ask requires the node");
        }
        if let Some(other) = self.asks[ask].reserved_node.filter(|&r| r != n) {
            // Its tag named another node when it reserved that one.
            self.unreserve(other);
        }
        if let NodeSearch::Found(n) = self.find_node(ask, res, ctx) {
            self.allocate(app, ask, n, ctx);
            return true;
        }
        let node = &self.nodes[n];
        if self.asks[ask].reserved_node.is_none()
            && node.reserved_by.is_none()
            && node.schedulable
            && res.fits_in(&node.res.capacity().minus(&node.res.occupied()))
        {
            self.reserve_node(ask, n, "reserved required node", ctx.now);
        }
        if self.config.preemption.enabled && self.asks[ask].allow_preempt_other {
            self.try_preempt(app, ask, ctx);
        }
        false
    }

    /// Reports FAILED for an ask that waits for the cluster to grow: no node
    /// or not enough nodes for it although its queue headroom allows it. An
    /// ask that requires a node is no such signal (upstream leaves those out
    /// of its outstanding requests): adding nodes would not help it.
    fn report_waits_for_cluster(&mut self, ask: AskId) {
        if self.asks[ask].required_node().is_some() {
            return;
        }
        self.report_scheduling_state(
            ask,
            SchedulingState::Failed,
            "the cluster has no room for the ask although the queue headroom allows it",
        );
    }

    pub(super) fn predicate(
        &self,
        ctx: &PassContext<'_>,
        ask: AskId,
        node: NodeId,
        allocate: bool,
    ) -> bool {
        match ctx.predicates {
            None => true,
            Some(pred) => pred(&si::PredicatesArgs {
                allocation_key: String::from(&*self.asks[ask].key),
                node_id: String::from(&*self.nodes[node].id),
                allocate,
            }),
        }
    }

    /// The first node in sort order where the ask fits.
    /// Nodes passed over because not even the smallest pending ask fits are
    /// moved to the exhausted set afterwards, so no later search walks them.
    fn find_node(&mut self, ask: AskId, res: &Resource, ctx: &PassContext<'_>) -> NodeSearch {
        // An ask naming its node (as daemon sets do) goes there or nowhere; its
        // failure says nothing about other asks, so it is never "clean".
        if let Some(required) = self.asks[ask].required_node() {
            let fits = self.node_by_id.get(required).copied().filter(|&n| {
                let node = &self.nodes[n];
                node.schedulable
                    && node.reserved_by.is_none_or(|r| r == ask)
                    && node.res.fits(res, Lanes::ALL)
                    && self.predicate(ctx, ask, n, true)
            });
            return match fits {
                Some(n) => NodeSearch::Found(n),
                None => NodeSearch::NotFound { clean: false },
            };
        }
        let mut clean = true;
        let floor = self.pending_floor;
        let lanes = self.lanes;
        let mut exhausted = Vec::new();
        let mut check = |k: &NodeKey| -> bool {
            let n = k.node();
            let node = &self.nodes[n];
            if node.reserved_by.is_some_and(|r| r != ask) {
                clean = false;
                return false;
            }
            if !node.res.fits(res, lanes) {
                if floor.is_some_and(|f| !node.res.fits(&f, lanes)) {
                    exhausted.push(n);
                }
                return false;
            }
            if !self.predicate(ctx, ask, n, true) {
                clean = false;
                return false;
            }
            true
        };
        let found = match self.node_sort {
            NodeSortKind::Fair => self.node_index.iter().find(|k| check(k)),
            NodeSortKind::Binpacking => self.node_index.iter().rev().find(|k| check(k)),
        }
        .map(|k| k.node());
        for n in exhausted {
            self.rekey_node(n);
        }
        match found {
            Some(n) => NodeSearch::Found(n),
            None => NodeSearch::NotFound { clean },
        }
    }

    /// Reserves the first unreserved node that could hold the ask once emptied,
    /// when the ask has waited long enough.
    fn maybe_reserve(&mut self, ask: AskId, res: &Resource, ctx: &mut PassContext<'_>) {
        // A required-node ask waits for (or preempts on) its node; it does not
        // hold another one.
        if self.asks[ask].required_node().is_some() {
            return;
        }
        let created = self.asks[ask].created;
        let due = created.saturating_add(ctx.reservation_delay);
        if ctx.now < due {
            ctx.wake_at(due);
            return;
        }
        if ctx.reserve_memo.iter().any(|r| res.dominates(r)) {
            return;
        }
        self.exhausted_nodes.settle();
        let candidate = |k: &&NodeKey| {
            let n = k.node();
            let node = &self.nodes[n];
            node.reserved_by.is_none()
                && res.fits_in(&node.res.capacity().minus(&node.res.occupied()))
                && self.predicate(ctx, ask, n, false)
        };
        // Exhausted nodes are candidates too: a reservation waits for room.
        let found = match self.node_sort {
            NodeSortKind::Fair => {
                let a = self.node_index.iter().find(candidate).copied();
                let b = self.exhausted_nodes.iter().find(|k| candidate(&k));
                a.into_iter().chain(b).min()
            }
            NodeSortKind::Binpacking => {
                let a = self.node_index.iter().rev().find(candidate).copied();
                let b = self.exhausted_nodes.iter().rev().find(|k| candidate(&k));
                a.into_iter().chain(b).max()
            }
        };
        let Some(n) = found.map(|k| k.node()) else {
            remember(&mut ctx.reserve_memo, *res);
            return;
        };
        self.reserve_node(ask, n, "reserved node", ctx.now);
    }

    /// Records that `ask` holds `node`, reports RESERVED to the RM and the
    /// event stream. `why` starts the message ("reserved node", ...).
    pub(super) fn reserve_node(&mut self, ask: AskId, node: NodeId, why: &str, now: u64) {
        self.nodes[node].reserved_by = Some(ask);
        self.rekey_node(node);
        let a = &mut self.asks[ask];
        a.reserved_node = Some(node);
        a.reserved_since = now;
        self.reserved_asks.insert(ask);
        let (node_id, key) = (self.nodes[node].id.clone(), self.asks[ask].key.clone());
        self.report_scheduling_state(ask, SchedulingState::Reserved, &format!("{why} {node_id}"));
        self.outbox.event(
            now,
            si::event_record::Type::Node,
            &node_id,
            &key,
            si::event_record::ChangeType::Add,
            si::event_record::ChangeDetail::NodeReservation,
            format!("{why} {node_id}"),
        );
    }

    /// Places one allocation of `ask` on `node`.
    fn allocate(&mut self, app: AppId, ask: AskId, node: NodeId, ctx: &mut PassContext<'_>) {
        let a = &mut self.asks[ask];
        let order_key = a.order_key(ask);
        a.pending -= 1;
        a.allocated_total += 1;
        let done = a.pending == 0;
        let (res, size) = (*a.resource, a.resource.clone());
        let meta = AllocMeta {
            priority: a.priority,
            placeholder: a.placeholder,
            task_group: a.task_group().to_string(),
            originator: a.originator,
            tags: a.tags().clone(),
        };
        let had_state = a.reported_state;
        if done && self.apps[app].pending_order.remove(&order_key) {
            self.pending_ask_removed();
        }
        self.unreserve(ask);
        self.remove_pending(app, &res);
        // A real ask the pass already passed over may replace this placeholder:
        // another round, so a settled core has nothing left to do.
        ctx.rerun |= meta.placeholder && self.gang_real_ask_pending(app, &meta.task_group);
        let placeholder = meta.placeholder;
        self.place(app, ask, node, size, meta, ctx.now);
        if had_state != 0 {
            self.report_scheduling_state(ask, SchedulingState::Scheduled, "allocated");
        }
        self.progress_on_allocation(app, placeholder, ctx.now, "first allocation");
        self.rekey_app(app);
        ctx.made += 1;
    }
}

impl Partition {
    /// Records an allocation of `ask` on `node` and queues it for the RM: a
    /// fresh id (never one a recovered allocation holds), the record, and the
    /// [`Lease`](unisched_shim_api::Lease) the RM gets (its resource map
    /// shared by every lease of the size, [`super::partition::WireSizes`]).
    pub(super) fn place(
        &mut self,
        app: AppId,
        ask: AskId,
        node: NodeId,
        size: std::sync::Arc<Resource>,
        meta: AllocMeta,
        now: u64,
    ) -> AllocId {
        let key = self.asks[ask].key.clone();
        let mut number = self.asks[ask].next_id;
        // An ask keyed by its application's id (an offer's lease ask) gets
        // the first id free in `alloc_by_id`, and the id waits in
        // `unfiled_ids` until the pass's results are sent: an insert writes
        // a line of a table as large as the run, which the next counted
        // reference then waited for (an eighth of a W4 run's scheduling
        // thread), where a miss reads the group of control bytes alone.
        // No other id of the pass can be the same: an id is `key-number`,
        // one key is one application's, and an application's numbers only
        // grow (`next_id`). Any other ask's id goes in at once, after the
        // waiting ones (ids of other keys it could meet).
        let unfiled = std::sync::Arc::ptr_eq(&key, &self.apps[app].id);
        let id = if unfiled {
            loop {
                let id = allocation_id(&mut self.id_scratch, &key, number);
                if !self.alloc_by_id.contains_key(&id) {
                    break id;
                }
                number += 1;
            }
        } else {
            self.file_ids();
            // The first free id of the ask, put in `alloc_by_id` as it is
            // found (one hash of it, not one to look and one to insert),
            // under the number the record below gets.
            loop {
                let id = allocation_id(&mut self.id_scratch, &key, number);
                match self.alloc_by_id.entry(id) {
                    std::collections::hash_map::Entry::Occupied(_) => number += 1,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let id = v.key().clone();
                        v.insert(self.allocs.vacant_key());
                        break id;
                    }
                }
            }
        };
        self.asks[ask].next_id = number + 1;
        let a = &self.asks[ask];
        let placed = unisched_shim_api::Lease {
            allocation_key: key,
            allocation_id: id.clone(),
            node_id: self.nodes[node].id.clone(),
            application_id: self.apps[app].id.clone(),
            resource: self.wire_sizes.of(&size, &self.names),
            task_group_name: meta.task_group.clone(),
            tags: meta.tags.clone(),
            priority: meta.priority,
            placeholder: meta.placeholder,
            originator: meta.originator,
            preemption_policy: si::PreemptionPolicy {
                allow_preempt_self: a.allow_preempt_self,
                allow_preempt_other: a.allow_preempt_other,
            },
            node_handle: self.nodes[node].rm_handle,
            app_handle: self.apps[app].rm_handle,
        };
        let alloc = if unfiled {
            let alloc = self.record_allocation(app, ask, node, id.clone(), size, meta, now);
            self.unfiled_ids.push((id, alloc));
            alloc
        } else {
            self.record_allocation(app, ask, node, id, size, meta, now)
        };
        debug_assert!(
            unfiled || self.alloc_by_id.get(&*placed.allocation_id).copied() == Some(alloc),
            "the allocation is under its id"
        );
        self.outbox.placed.push(placed);
        alloc
    }
}

/// `key-number`, the id of the `number`th allocation of an ask (as upstream
/// numbers them). Built by hand: this runs once per allocation. It is put
/// together in `scratch` (a buffer kept for this, so its room is reused)
/// and copied once into its `Arc`: one allocation an id, not two.
fn allocation_id(scratch: &mut String, key: &str, number: u32) -> std::sync::Arc<str> {
    let mut digits = [0u8; 10];
    let mut n = number;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    scratch.clear();
    scratch.push_str(key);
    scratch.push('-');
    for &d in &digits[i..] {
        scratch.push(char::from(d));
    }
    std::sync::Arc::from(scratch.as_str())
}

#[cfg(test)]
mod tests {
    use super::allocation_id;

    #[test]
    fn offer_run_parts_double_from_64_up_to_the_most_and_shrink_near_the_end() {
        let most = super::offer_run_part();
        let sizes: Vec<usize> = (0..8).map(super::offer_run_part_size).collect();
        let expected: Vec<usize> = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
            .iter()
            .map(|&n: &usize| n.min(most))
            .collect();
        assert_eq!(sizes, expected);
        assert_eq!(super::offer_run_part_size(u32::MAX), most);
        // Near the end of a run: a quarter of the nodes left, at least 64.
        assert_eq!(super::offer_run_tail_part(4096), 1024);
        assert_eq!(super::offer_run_tail_part(1000), 250);
        assert_eq!(super::offer_run_tail_part(100), 64);
        assert_eq!(super::offer_run_tail_part(0), 64);
    }

    #[test]
    fn allocation_ids_number_from_zero() {
        let mut scratch = String::new();
        assert_eq!(&*allocation_id(&mut scratch, "task", 0), "task-0");
        assert_eq!(&*allocation_id(&mut scratch, "a-b", 17), "a-b-17");
        // The buffer's earlier content does not show through.
        assert_eq!(&*allocation_id(&mut scratch, "k", u32::MAX), "k-4294967295");
        assert_eq!(&*allocation_id(&mut scratch, "k", 3), "k-3");
    }
}
