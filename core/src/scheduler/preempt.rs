//! Preemption: freeing room for an ask whose queue is under its guarantee by
//! releasing allocations of queues over theirs.
//!
//! Only tried for an ask that just failed (no headroom or no node), that
//! allows preempting others, has waited `preemption.delay`, at most once every
//! 15 s per ask (as upstream), and only when the partition's preemption is
//! enabled: a cluster that never needs it pays a flag test per failed ask. The laws (spec §3) are checked per victim: never
//! within the ask's application, never a victim of higher priority, never
//! across a `fence`, never from a `disabled` queue, only from queues over their
//! guarantee and never taking one below it; the asking queue must stay within
//! its guarantee with the ask.
//!
//! Victims on one node are chosen in YuniKorn's order (allowPreemptSelf
//! first, non-originators first, newest first) until the ask fits the node and
//! the queue headroom. Between nodes, as upstream scores its solutions, a set
//! without opted-out victims wins over any with one, then a set without
//! originators, then the smaller set: opting out (allowPreemptSelf false) is a
//! strong suggestion, never an exclusion, so such an allocation is taken only
//! when no node frees enough without it. They are released with `PREEMPTED_BY_SCHEDULER` and
//! kept until the RM confirms; the ask reserves the node meanwhile, so it is
//! placed there (reserved asks go first) once the room is back.

use unisched_si as si;

use super::allocate::PassContext;
use super::objects::*;
use super::partition::Partition;
use crate::config::properties::{self, PreemptionPolicy};
use crate::resources::Resource;

/// How the release of a preemption victim starts its message; the rest is
/// `<ask key> of application <application id>`, the ask it makes room for.
pub const PREEMPTED_FOR: &str = "preempted by the scheduler to make room for ask";

/// Ask tag naming the only node an ask may use (daemon sets), as upstream's
/// `DomainYuniKorn + KeyRequiredNode`.
pub const REQUIRED_NODE_TAG: &str = "yunikorn.apache.org/requiredNode";

/// Shortest time between two preemption attempts of one ask, in nanoseconds
/// (upstream's `preemptAttemptFrequency`, 15 s).
pub const PREEMPT_ATTEMPT_INTERVAL: u64 = 15_000_000_000;

/// How bad a node's set of victims is, lowest best: any victim opted out of
/// preemption, any originator, then how many.
type VictimScore = (bool, bool, usize);

impl Partition {
    /// Tries to preempt for `ask`; true when victims were released and the
    /// ask now holds a reservation on their node.
    pub(super) fn try_preempt(
        &mut self,
        app: AppId,
        ask: AskId,
        ctx: &mut PassContext<'_>,
    ) -> bool {
        let a = &self.asks[ask];
        // An ask holding a reservation waits for its node; one that requires
        // its node holds that node's reservation while it preempts there.
        let waits_elsewhere = a.reserved_node.is_some() && a.required_node().is_none();
        if !a.allow_preempt_other || waits_elsewhere || a.pending == 0 {
            return false;
        }
        let leaf = self.apps[app].queue;
        let props = &self.queues[leaf].properties;
        let delay = properties::preemption_delay(props)
            .unwrap_or(properties::DEFAULT_PREEMPTION_DELAY)
            .as_nanos();
        let due = a
            .created
            .saturating_add(u64::try_from(delay).unwrap_or(u64::MAX));
        if ctx.now < due {
            ctx.wake_at(due);
            return false;
        }
        // As upstream (preemptAttemptFrequency): one attempt per ask every
        // PREEMPT_ATTEMPT_INTERVAL, whatever its outcome, so an ask that
        // cannot preempt does not repeat the walk over the nodes every pass.
        if a.preempt_checked_at() != 0 {
            let again = a
                .preempt_checked_at()
                .saturating_add(PREEMPT_ATTEMPT_INTERVAL);
            if ctx.now < again {
                ctx.wake_at(again);
                return false;
            }
        }
        let res = *a.resource;
        self.asks[ask].set_preempt_checked_at(ctx.now.max(1));
        self.exhausted_nodes.settle();
        let a = &self.asks[ask];
        // Law: only an ask whose queue stays within its guarantee may preempt.
        if !self.within_guarantee(leaf, &res) {
            return false;
        }
        let required = a.required_node().map(str::to_string);
        // Nodes in sort order, merged lazily from the index and the exhausted
        // set: the walk stops at the first node where a single victim that
        // allows preemption and is no originator suffices, since no later
        // node can beat it, so an attempt rarely visits every node.
        let nodes: Box<dyn Iterator<Item = NodeId> + '_> = match &required {
            Some(id) => Box::new(self.node_by_id.get(id.as_str()).copied().into_iter()),
            None => {
                let mut index = self.node_index.iter().peekable();
                let mut exhausted = self.exhausted_nodes.iter().peekable();
                Box::new(std::iter::from_fn(move || {
                    let next = match (index.peek(), exhausted.peek()) {
                        (Some(a), Some(b)) if b < *a => exhausted.next(),
                        (Some(_), _) => index.next().copied(),
                        (None, _) => exhausted.next(),
                    };
                    next.map(|k| k.node())
                }))
            }
        };
        // Upstream's choice between nodes: a set of victims that avoids
        // allocations opted out of preemption beats any that needs one, then
        // one that avoids originators, then the fewest victims; ties go to
        // the earlier node in sort order.
        const UNBEATABLE: VictimScore = (false, false, 1);
        let mut best: Option<(VictimScore, NodeId, Vec<AllocId>)> = None;
        let mut fences = Vec::new();
        for n in nodes {
            let node = &self.nodes[n];
            if !node.schedulable || node.reserved_by.is_some_and(|r| r != ask) {
                continue;
            }
            let Some(victims) = self.victims_on(n, app, ask, &res, &mut fences) else {
                continue;
            };
            let score = (
                victims.iter().any(|&v| !self.allows_preempt_self(v)),
                victims.iter().any(|&v| self.allocs[v].originator),
                victims.len(),
            );
            if best.as_ref().is_none_or(|(b, _, _)| score < *b)
                && self.predicate(ctx, ask, n, false)
            {
                best = Some((score, n, victims));
                if score == UNBEATABLE {
                    break;
                }
            }
        }
        let Some((_, node, victims)) = best else {
            return false;
        };
        // The release names the ask it makes room for, so the RM (and an
        // operator reading events) can tell why the victim went.
        let message = format!(
            "{PREEMPTED_FOR} {} of application {}",
            self.asks[ask].key, self.apps[app].id
        );
        for v in victims {
            self.release_with_confirmation(
                v,
                si::TerminationType::PreemptedByScheduler,
                message.clone(),
                ctx.now,
            );
        }
        self.reserve_node(ask, node, "preempting on node", ctx.now);
        true
    }

    /// Whether allocation `v` allows being preempted. Opting out is a strong
    /// suggestion, not a guarantee (the first law): such allocations are
    /// victims only when nothing else frees enough. Sent without a policy,
    /// an ask or recovered allocation allows it (upstream's
    /// `IsAllowPreemptSelf`).
    fn allows_preempt_self(&self, v: AllocId) -> bool {
        let al = &self.allocs[v];
        self.apps[al.app]
            .asks
            .get(&al.key)
            .is_none_or(|&a| self.asks[a].allow_preempt_self)
    }

    /// True when `res` more keeps `queue` within its guarantee (on the types
    /// it guarantees; a queue guaranteeing nothing is never under it).
    fn within_guarantee(&self, queue: QueueId, res: &Resource) -> bool {
        let q = &self.queues[queue];
        if !q.has_guarantee() {
            return false;
        }
        let after = q.allocated.plus(res);
        q.guaranteed()
            .0
            .iter()
            .zip(after.0.iter())
            .all(|(&g, &used)| g <= 0 || used <= g)
    }

    /// Whether `ancestor` is `queue` or above it.
    fn is_within(&self, queue: QueueId, ancestor: QueueId) -> bool {
        let mut q = Some(queue);
        while let Some(id) = q {
            if id == ancestor {
                return true;
            }
            q = self.queues[id].parent;
        }
        false
    }

    fn policy(&self, queue: QueueId) -> PreemptionPolicy {
        properties::preemption_policy(&self.queues[queue].properties).unwrap_or_default()
    }

    /// Queues from `queue` up to (not including) `stop`.
    fn path_below(&self, queue: QueueId, stop: QueueId) -> Vec<QueueId> {
        let mut out = Vec::new();
        let mut q = Some(queue);
        while let Some(id) = q {
            if id == stop {
                break;
            }
            out.push(id);
            q = self.queues[id].parent;
        }
        out
    }

    fn common_ancestor(&self, a: QueueId, b: QueueId) -> QueueId {
        let mut q = Some(a);
        while let Some(id) = q {
            if self.is_within(b, id) {
                return id;
            }
            q = self.queues[id].parent;
        }
        super::partition::ROOT
    }

    /// Victims on node `n` that make room for `res`, or `None` when the laws
    /// leave too few. `fences` caches, per victim queue, whether fences and
    /// disabled queues let it give victims to this ask.
    fn victims_on(
        &self,
        n: NodeId,
        app: AppId,
        ask: AskId,
        res: &Resource,
        fences: &mut Vec<(QueueId, bool)>,
    ) -> Option<Vec<AllocId>> {
        let leaf = self.apps[app].queue;
        let priority = self.asks[ask].priority;
        let ask_fenced = |stop: QueueId| {
            self.path_below(leaf, stop)
                .iter()
                .any(|&q| self.policy(q) == PreemptionPolicy::Fence)
        };
        let mut candidates: Vec<AllocId> = self.nodes[n]
            .allocations
            .iter()
            .copied()
            .filter(|&v| {
                let al = &self.allocs[v];
                // Upstream never takes an allocation that requires its node
                // (a daemon set's): it could run nowhere else.
                if al.app == app
                    || al.releasing.is_some()
                    || al.priority > priority
                    || al.tags.contains_key(REQUIRED_NODE_TAG)
                {
                    return false;
                }
                let vq = self.apps[al.app].queue;
                // Cheap necessary test first: the victim's own queue must stay
                // at or above its guarantee without it (ancestors are checked
                // with the whole selection below).
                let q = &self.queues[vq];
                let stays = q
                    .guaranteed()
                    .0
                    .iter()
                    .zip(q.allocated.0.iter().zip(al.resource.0.iter()))
                    .all(|(&g, (&used, &r))| g <= 0 || used.saturating_sub(r) >= g);
                if !stays {
                    return false;
                }
                // Fences and disabled queues depend on the queue only: decided
                // once per queue and attempt.
                if let Some(&(_, ok)) = fences.iter().find(|(q, _)| *q == vq) {
                    return ok;
                }
                let top = self.common_ancestor(vq, leaf);
                let ok = !ask_fenced(top)
                    && self.path_below(vq, top).iter().all(|&q| {
                        !matches!(
                            self.policy(q),
                            PreemptionPolicy::Fence | PreemptionPolicy::Disabled
                        )
                    });
                fences.push((vq, ok));
                ok
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        candidates.sort_by_cached_key(|&v| {
            let al = &self.allocs[v];
            (
                !self.allows_preempt_self(v),
                al.originator,
                std::cmp::Reverse((al.created, v)),
            )
        });
        let mut freed_node = Resource::ZERO;
        let mut removed: Vec<(QueueId, Resource)> = Vec::new();
        let mut chosen = Vec::new();
        for v in candidates {
            if self.room_after(n, leaf, res, &freed_node, &removed) {
                break;
            }
            let al = &self.allocs[v];
            let vq = self.apps[al.app].queue;
            if !self.victim_helps(n, leaf, res, &freed_node, &removed, vq, &al.resource) {
                continue;
            }
            let top = self.common_ancestor(vq, leaf);
            // Law: victims only from queues over their guarantee, and never
            // below it afterwards (each queue on the way to the common parent).
            let keeps_guarantee = self.path_below(vq, top).iter().all(|&q| {
                let queue = &self.queues[q];
                let mut after = queue.allocated.minus(&al.resource);
                for (rq, r) in &removed {
                    if self.is_within(*rq, q) {
                        after.sub_assign(r);
                    }
                }
                queue
                    .guaranteed()
                    .0
                    .iter()
                    .zip(after.0.iter())
                    .all(|(&g, &used)| g <= 0 || used >= g)
            });
            if !keeps_guarantee {
                continue;
            }
            freed_node.add_assign(&al.resource);
            removed.push((vq, *al.resource));
            chosen.push(v);
        }
        (self.room_after(n, leaf, res, &freed_node, &removed) && !chosen.is_empty())
            .then_some(chosen)
    }

    /// Whether releasing `victim` (of queue `vq`) lessens a shortfall that
    /// keeps `res` off node `n`: of the node's room, or of the headroom of a
    /// queue above `leaf` that the victim's queue is under.
    #[allow(clippy::too_many_arguments)] // the selection state, passed as is
    fn victim_helps(
        &self,
        n: NodeId,
        leaf: QueueId,
        res: &Resource,
        freed_node: &Resource,
        removed: &[(QueueId, Resource)],
        vq: QueueId,
        victim: &Resource,
    ) -> bool {
        let overlaps = |short: &Resource| {
            short
                .0
                .iter()
                .zip(victim.0.iter())
                .any(|(&s, &v)| s > 0 && v > 0)
        };
        let room = self.nodes[n].res.available().plus(freed_node);
        if overlaps(&res.minus(&room)) {
            return true;
        }
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.has_max && self.is_within(vq, id) {
                let mut after = queue.allocated.plus(res);
                for (rq, r) in removed {
                    if self.is_within(*rq, id) {
                        after.sub_assign(r);
                    }
                }
                let short = Resource(std::array::from_fn(|i| {
                    let max = queue.max.0[i];
                    if max == i64::MAX {
                        0
                    } else {
                        after.0[i].saturating_sub(max)
                    }
                }));
                if overlaps(&short) {
                    return true;
                }
            }
            q = queue.parent;
        }
        false
    }

    /// Whether `res` fits node `n` and the headroom of `leaf` once the
    /// chosen victims are gone.
    fn room_after(
        &self,
        n: NodeId,
        leaf: QueueId,
        res: &Resource,
        freed_node: &Resource,
        removed: &[(QueueId, Resource)],
    ) -> bool {
        if !res.fits_in(&self.nodes[n].res.available().plus(freed_node)) {
            return false;
        }
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.has_max {
                let mut after = queue.allocated.plus(res);
                for (rq, r) in removed {
                    if self.is_within(*rq, id) {
                        after.sub_assign(r);
                    }
                }
                if !after.fits_in(&queue.max) {
                    return false;
                }
            }
            q = queue.parent;
        }
        true
    }
}
