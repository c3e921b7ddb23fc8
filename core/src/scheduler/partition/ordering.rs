//! Ordering keys: the node index, queue and application order, and the
//! re-keying that keeps them current after a change.

use std::cmp::Reverse;

use super::super::objects::*;
use super::*;
use crate::resources::{Resource, SHARE_SCALE};

impl Partition {
    // ---- ordering keys ---------------------------------------------------

    fn node_score(&self, node: &Node) -> u64 {
        let mut score: u64 = 0;
        let mut weight_sum: u64 = 0;
        for &(i, w) in &self.node_weights {
            let cap = node.res.capacity_of(i);
            if cap <= 0 {
                continue;
            }
            let used = node.res.used_of(i).max(0);
            let share = (used as f64 / cap as f64 * SHARE_SCALE as f64) as u64;
            score = score.saturating_add((share / 1000).saturating_mul(w));
            weight_sum += w;
        }
        score.checked_div(weight_sum).unwrap_or(0)
    }

    /// Puts a node at its place in the node index (or out of it when it cannot
    /// take allocations).
    pub fn rekey_node(&mut self, node: NodeId) {
        let new_key = self.index_key(node);
        self.move_node(node, new_key);
    }

    /// Moves a node from where it is to `new_key` (its [`Self::index_key`]).
    fn move_node(&mut self, node: NodeId, new_key: Option<(NodeKey, bool)>) {
        let old_key = self.nodes[node].key_in_index;
        if old_key == new_key {
            return;
        }
        match old_key {
            // An allocation run leases the first node of the index again and
            // again: taking it off the front needs no search.
            Some((k, false)) if self.node_index.first() == Some(&k) => {
                self.node_index.pop_first().is_some()
            }
            Some((k, false)) => self.node_index.remove(&k),
            Some((k, true)) => self.exhausted_nodes.remove(&k),
            None => false,
        };
        match new_key {
            Some((k, false)) => self.node_index.insert(k),
            Some((k, true)) => {
                self.exhausted_nodes.insert(k);
                true
            }
            None => false,
        };
        self.nodes[node].key_in_index = new_key;
    }

    /// Where a node belongs: its key and whether it is exhausted (in
    /// `exhausted_nodes` rather than the index), or nowhere.
    fn index_key(&self, node: NodeId) -> Option<(NodeKey, bool)> {
        let n = &self.nodes[node];
        // A reserved node serves only the ask holding it, which tries it
        // first: kept out of the index, no search walks past it.
        (n.schedulable && n.reserved_by.is_none()).then(|| {
            (
                NodeKey::new(self.node_score(n), node),
                self.node_exhausted(node),
            )
        })
    }

    /// Notes an ask that starts wanting allocations of size `res`.
    pub fn pending_ask_added(&mut self, res: &Resource) {
        self.pending_ask_count += 1;
        match &mut self.pending_floor {
            Some(floor) if res.dominates(floor) => {}
            Some(floor) => {
                *floor = floor.min(res);
                self.floor_lowered = true;
            }
            None => {
                self.pending_floor = Some(*res);
                self.floor_lowered = true;
            }
        }
    }

    /// Notes an ask that no longer wants allocations.
    pub fn pending_ask_removed(&mut self) {
        self.pending_ask_count = self.pending_ask_count.saturating_sub(1);
        if self.pending_ask_count == 0 {
            self.pending_floor = None;
        }
    }

    /// After the floor went down, gives exhausted nodes their place back where
    /// the smallest pending ask may now fit.
    pub fn recheck_exhausted(&mut self) {
        if !std::mem::take(&mut self.floor_lowered) {
            return;
        }
        let nodes: Vec<NodeId> = self
            .exhausted_nodes
            .ordered()
            .iter()
            .map(|k| k.node())
            .collect();
        // Nodes that are no longer exhausted under the same key go back
        // into the index in one merge instead of a remove and an insert
        // each: after nobody wanted offers, a REVIVE brings every node of
        // the cluster back at once. In key order, as the set gave them.
        let mut back = Vec::new();
        for n in nodes {
            match (self.nodes[n].key_in_index, self.index_key(n)) {
                (Some((old, true)), Some((new, false))) if old == new => back.push(old),
                (_, new) => self.move_node(n, new),
            }
        }
        if back.is_empty() {
            return;
        }
        for k in &back {
            self.nodes[k.node()].key_in_index = Some((*k, false));
        }
        let mut moved: BTreeSet<NodeKey> = back.into_iter().collect();
        if moved.len() == self.exhausted_nodes.len() {
            self.exhausted_nodes.clear();
        } else {
            let left = self
                .exhausted_nodes
                .ordered()
                .difference(&moved)
                .copied()
                .collect();
            self.exhausted_nodes.replace(left);
        }
        self.node_index.append(&mut moved);
        debug_assert!(self.node_sets_agree(), "node index and node keys disagree");
    }

    /// True when every node's recorded key is in the set it names and the two
    /// sets hold nothing else.
    fn node_sets_agree(&self) -> bool {
        let mut keyed = 0;
        let all_found = self.nodes.iter().all(|(_, n)| match n.key_in_index {
            Some((k, false)) => {
                keyed += 1;
                self.node_index.contains(&k)
            }
            Some((k, true)) => {
                keyed += 1;
                self.exhausted_nodes.contains(&k)
            }
            None => true,
        });
        all_found && keyed == self.node_index.len() + self.exhausted_nodes.len()
    }

    fn app_key(&self, app: AppId) -> Option<AppKey> {
        let a = &self.apps[app];
        let wants_offers = a.offers.as_ref().is_some_and(|o| o.active);
        if (a.pending_order.is_empty() && !wants_offers) || !a.state_allows_scheduling() {
            return None;
        }
        let q = &self.queues[a.queue];
        let priority = if q.sort_priority { a.priority() } else { 0 };
        let policy_key = if self.offers.is_some() {
            self.cluster_share(&a.allocated, 1000)
        } else {
            match q.app_sort {
                AppSortPolicy::Fifo => a.seq,
                AppSortPolicy::Fair => a.allocated.dominant_share_in(q.share_base(), self.lanes),
            }
        };
        Some((Reverse(priority), policy_key, a.seq, app))
    }

    /// Puts an application at its place in its queue's order, then re-keys the
    /// queues above it.
    pub fn rekey_app(&mut self, app: AppId) {
        let new_key = self.app_key(app);
        let a = &self.apps[app];
        let leaf = a.queue;
        let parked = a.blocked_in_pass == self.pass && self.pass != 0;
        let target = if parked { None } else { new_key };
        // A fifo app's key rarely changes with an allocation: skip the set then.
        if a.key_in_queue != target {
            let order = &mut self.queues[leaf].app_order;
            match (a.key_in_queue, target) {
                (Some(old), Some(new)) => order.replace(&old, new, &mut self.app_slots),
                (Some(old), None) => {
                    order.remove(&old, &mut self.app_slots);
                }
                (None, Some(new)) => order.insert(new, &mut self.app_slots),
                (None, None) => {}
            }
            self.apps[app].key_in_queue = target;
        }
        self.rekey_queue_chain(leaf);
    }

    /// The highest priority below a queue: of its children as each shows it
    /// (offset and fence applied), or of its applications.
    fn queue_priority(&self, id: QueueId) -> i32 {
        let q = &self.queues[id];
        if q.is_parent {
            q.child_order.iter().map(|k| k.1.0).max().unwrap_or(0)
        } else if q.sort_priority {
            q.app_order.first().map_or(0, |k| k.0.0)
        } else {
            q.app_order
                .iter()
                .map(|k| self.apps[k.3].priority())
                .max()
                .unwrap_or(0)
        }
    }

    fn queue_key(&self, id: QueueId) -> Option<QueueKey> {
        let q = &self.queues[id];
        let has_work = if q.is_parent {
            !q.child_order.is_empty()
        } else {
            !q.app_order.is_empty()
        };
        if !has_work {
            return None;
        }
        let base = q.share_base();
        let share = if self.offers.is_some() {
            // Below its guarantee (a Mesos quota guarantee) first, by how far
            // below; then every other queue by weighted dominant share.
            let below = q.has_guarantee()
                && (0..self.lanes.get()).any(|i| q.allocated.0[i] < q.guaranteed().0[i]);
            if below {
                q.allocated.dominant_share_in(q.guaranteed(), self.lanes)
            } else {
                (1 << 63)
                    | self
                        .cluster_share(&q.allocated, q.weight_milli)
                        .min((1 << 63) - 1)
            }
        } else {
            weighted(
                q.allocated.dominant_share_in(base, self.lanes),
                q.weight_milli,
            )
        };
        Some((
            share,
            Reverse(q.priority_seen_by_parent(self.queue_priority(id))),
            Reverse(q.pending.dominant_share_in(base, self.lanes)),
            id,
        ))
    }

    /// Re-keys the applications whose asks changed in a batch of requests.
    pub fn rekey_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty_apps);
        dirty.sort_unstable();
        dirty.dedup();
        for app in dirty {
            if self.apps.contains(app) {
                self.rekey_app(app);
            }
        }
    }

    /// Re-keys `id` and every ancestor in their parents' orders.
    pub fn rekey_queue_chain(&mut self, id: QueueId) {
        let mut cur = id;
        while let Some(parent) = self.queues[cur].parent {
            let new_key = self.queue_key(cur);
            let q = &self.queues[cur];
            let parked = q.blocked_in_pass == self.pass && self.pass != 0;
            let target = if parked { None } else { new_key };
            let current = q.key_in_parent;
            if current != target {
                let order = &mut self.queues[parent].child_order;
                match (current, target) {
                    (Some(old), Some(new)) => order.replace(&old, new, &mut self.queue_slots),
                    (Some(old), None) => {
                        order.remove(&old, &mut self.queue_slots);
                    }
                    (None, Some(new)) => order.insert(new, &mut self.queue_slots),
                    (None, None) => {}
                }
                self.queues[cur].key_in_parent = target;
            }
            cur = parent;
        }
    }

    /// Puts every queue and application parked in this pass back in order.
    pub fn unpark_all(&mut self) {
        let pass = self.pass;
        // Forget the pass first so re-keying inserts them again.
        for &a in &self.parked_apps {
            if self.apps.contains(a) && self.apps[a].blocked_in_pass == pass {
                self.apps[a].blocked_in_pass = 0;
            }
        }
        for &q in &self.parked_queues {
            if self.queues[q].blocked_in_pass == pass {
                self.queues[q].blocked_in_pass = 0;
            }
        }
        let apps = std::mem::take(&mut self.parked_apps);
        for a in apps {
            if self.apps.contains(a) {
                self.rekey_app(a);
            }
        }
        let queues = std::mem::take(&mut self.parked_queues);
        for q in queues {
            self.rekey_queue_chain(q);
        }
    }
}

/// A share divided by a weight in thousandths (1000 = 1, the common case,
/// costs nothing).
pub fn weighted(share: u64, weight_milli: u64) -> u64 {
    if weight_milli == 1000 {
        return share;
    }
    let scaled = u128::from(share) * 1000 / u128::from(weight_milli.max(1));
    u64::try_from(scaled).unwrap_or(u64::MAX)
}
