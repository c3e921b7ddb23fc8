//! A partition: the arenas of queues, applications, asks, allocations and nodes,
//! the node index, and the bookkeeping that keeps usage totals and sort orders
//! up to date incrementally.
//!
//! Owned by the scheduling thread (see `engine.rs`); nothing here is shared or
//! locked. Every change of usage goes through `add_usage`/`remove_usage` and every
//! change of an ordering key through the `rekey_*` functions, so totals and sort
//! orders never need a rescan.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::Arc;

use slab::Slab;
use unisched_si as si;

use super::heap::Slots;
use super::limits::QueueLimits;
use super::objects::*;
use crate::config::{NodeSortKind, PartitionConfig, QueueConfig};
use crate::resources::{Lanes, NameTable, Resource, ResourceNames, SHARE_SCALE};

/// Index of the root queue.
pub const ROOT: QueueId = 0;

/// How many completed applications a partition remembers for readers.
const COMPLETED_APPS_KEPT: usize = 10_000;

/// A new allocation as the scheduling thread leaves it for the RM's
/// dispatcher, which builds the wire `si::Allocation` from it on its own
/// thread: the strings and the resource map of the wire form are allocated
/// and freed there, not on the scheduling thread (where building them and
/// having another thread free them was about a third of an allocation's cost).
#[derive(Debug, Clone)]
pub struct Placed {
    /// Allocation key (the ask's).
    pub key: Arc<str>,
    /// Allocation id.
    pub id: Arc<str>,
    /// Node id.
    pub node: Arc<str>,
    /// Application id.
    pub app: Arc<str>,
    /// Resources held.
    pub size: Resource,
    /// Gang task group (empty for none).
    pub task_group: String,
    /// Tags copied from the ask.
    pub tags: BTreeMap<String, String>,
    /// Priority of the ask.
    pub priority: i32,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Originator.
    pub originator: bool,
    /// The ask's preemption policy.
    pub preemption: si::PreemptionPolicy,
}

impl Placed {
    /// The wire form, with the resource map `resource` (converted by the caller,
    /// which can reuse one conversion for a run of equal sizes).
    pub fn into_wire(self, partition_name: &str, resource: si::Resource) -> si::Allocation {
        si::Allocation {
            allocation_key: String::from(&*self.key),
            allocation_tags: self.tags.into_iter().collect(),
            resource_per_alloc: Some(resource),
            priority: self.priority,
            node_id: String::from(&*self.node),
            application_id: String::from(&*self.app),
            partition_name: partition_name.to_string(),
            task_group_name: self.task_group,
            placeholder: self.placeholder,
            allocation_id: String::from(&*self.id),
            originator: self.originator,
            preemption_policy: Some(self.preemption),
        }
    }
}

/// The allocation results of one flush: the response, and the new allocations
/// still to be turned into its `new` list (see [`Placed`]).
#[derive(Debug, Default)]
pub struct AllocationBatch {
    /// Releases, rejections (and nothing in `new`).
    pub response: si::AllocationResponse,
    /// New allocations, in the order they were made.
    pub placed: Vec<Placed>,
    /// The partition name without the RM prefix.
    pub partition_name: String,
}

/// Everything a partition produced for its RM since the last flush.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Allocation results (releases, rejections).
    pub allocation: si::AllocationResponse,
    /// New allocations, turned into `allocation.new` by the dispatcher.
    pub placed: Vec<Placed>,
    /// Application results.
    pub application: si::ApplicationResponse,
    /// Node results.
    pub node: si::NodeResponse,
    /// Events.
    pub events: Vec<si::EventRecord>,
    /// Container scheduling states.
    pub states: Vec<si::UpdateContainerSchedulingStateRequest>,
}

impl Outbox {
    /// True when nothing is waiting.
    pub fn is_empty(&self) -> bool {
        !self.has_allocation()
            && !self.has_application()
            && !self.has_node()
            && self.events.is_empty()
            && self.states.is_empty()
    }

    /// True when the allocation response carries anything.
    pub fn has_allocation(&self) -> bool {
        let a = &self.allocation;
        !(a.new.is_empty()
            && self.placed.is_empty()
            && a.released.is_empty()
            && a.released_asks.is_empty()
            && a.rejected.is_empty()
            && a.rejected_allocations.is_empty())
    }

    /// True when the application response carries anything.
    pub fn has_application(&self) -> bool {
        let a = &self.application;
        !(a.accepted.is_empty() && a.rejected.is_empty() && a.updated.is_empty())
    }

    /// True when the node response carries anything.
    pub fn has_node(&self) -> bool {
        !(self.node.accepted.is_empty() && self.node.rejected.is_empty())
    }

    /// Records an event.
    #[allow(clippy::too_many_arguments)] // one argument per field of the record
    pub fn event(
        &mut self,
        now: u64,
        kind: si::event_record::Type,
        object: &str,
        reference: &str,
        change: si::event_record::ChangeType,
        detail: si::event_record::ChangeDetail,
        message: String,
    ) {
        self.events.push(si::EventRecord {
            r#type: kind as i32,
            object_id: object.to_string(),
            message,
            timestamp_nano: i64::try_from(now).unwrap_or(i64::MAX),
            event_change_type: change as i32,
            event_change_detail: detail as i32,
            reference_id: reference.to_string(),
            resource: None,
        });
    }
}

/// A finished application kept for readers after it left its queue.
#[derive(Debug, Clone)]
pub struct CompletedApp {
    /// Application id.
    pub id: Arc<str>,
    /// Queue path it ran in.
    pub queue: Arc<str>,
    /// Owner.
    pub user: Arc<str>,
    /// Final state.
    pub state: AppState,
    /// Submission time.
    pub submission_time: u64,
}

/// One partition of one RM.
#[derive(Debug)]
pub struct Partition {
    /// Qualified name `[rmID]name`.
    pub name: Arc<str>,
    /// Where the name without the `[rmID]` prefix starts in `name`.
    pub plain_name_at: usize,
    /// Owning RM.
    pub rm_id: Arc<str>,
    /// Queue arena; `ROOT` is the root. Removed dynamic queues leave a tombstone.
    pub queues: Vec<Queue>,
    /// Queue by full path.
    pub queue_by_path: FastMap<Arc<str>, QueueId>,
    /// Applications.
    pub apps: Slab<App>,
    /// Application by id.
    pub app_by_id: FastMap<Arc<str>, AppId>,
    /// Applications that left their queue, newest last.
    pub completed_apps: VecDeque<CompletedApp>,
    /// Asks.
    pub asks: Slab<Ask>,
    /// The distinct ask sizes the asks point at.
    pub sizes: Sizes,
    /// Allocations.
    pub allocs: Slab<Allocation>,
    /// Allocation by id.
    pub alloc_by_id: FastMap<Arc<str>, AllocId>,
    /// Nodes.
    pub nodes: Slab<Node>,
    /// Node by id.
    pub node_by_id: FastMap<Arc<str>, NodeId>,
    /// Schedulable nodes by usage score.
    pub node_index: BTreeSet<NodeKey>,
    /// Schedulable nodes where not even the smallest pending ask fits, by
    /// usage score. Kept out of `node_index` so placement never walks them
    /// (binpacking with most nodes full would otherwise scan them for every ask).
    pub exhausted_nodes: BTreeSet<NodeKey>,
    /// A lower bound of every pending ask, type by type (`None` when nothing is
    /// pending). Only ever lowered while asks are pending, so it stays a bound.
    pub pending_floor: Option<Resource>,
    /// Asks with allocations still wanted.
    pub pending_ask_count: u64,
    /// The floor went down since exhausted nodes were last looked at.
    pub floor_lowered: bool,
    /// Fair (least used first) or binpacking (most used first).
    pub node_sort: NodeSortKind,
    /// Node score weights: (resource index, weight in 1/1000).
    pub node_weights: Vec<(usize, u64)>,
    /// Sum of node capacities.
    pub total_capacity: Resource,
    /// The configuration in force.
    pub config: PartitionConfig,
    /// Asks holding a reservation.
    pub reserved_asks: BTreeSet<AskId>,
    /// Completing applications waiting for their grace period: (deadline, app).
    pub completing_timers: BinaryHeap<Reverse<(u64, AppId)>>,
    /// Gang applications waiting for their placeholder timeout: (deadline, app).
    pub gang_timers: BinaryHeap<Reverse<(u64, AppId)>>,
    /// Sequence for submission and arrival order.
    pub next_seq: u64,
    /// Number of the current (or last) scheduling pass.
    pub pass: u64,
    /// Results waiting to be sent.
    pub outbox: Outbox,
    /// Queues parked (taken out of their parent's order) in the current pass.
    pub parked_queues: Vec<QueueId>,
    /// Applications parked in the current pass.
    pub parked_apps: Vec<AppId>,
    /// Grace period of a Completing application, in nanoseconds.
    pub completing_timeout: u64,
    /// The scheduler's resource names.
    pub names: Arc<ResourceNames>,
    /// Applications whose asks changed since their last re-key.
    pub dirty_apps: Vec<AppId>,
    /// A reservation ended during the current pass, so a node that asks
    /// earlier in the pass passed over may now take them: another pass is due.
    pub freed_in_pass: bool,
    /// Clock time of the request, timer or pass being applied (for events
    /// raised deep inside bookkeeping, such as a dropped reservation).
    pub now: u64,
    /// Where each queue sits in its parent's `child_order` heap.
    pub queue_slots: Slots,
    /// Where each application sits in its leaf's `app_order` heap.
    pub app_slots: Slots,
    /// Resource lanes in use (names interned so far): usage, fit and share
    /// arithmetic on the hot path runs over these only. Kept up to date by
    /// [`Partition::sync_lanes`] before each request and pass.
    pub lanes: Lanes,
    /// Offer settings; `Some` makes this an offer partition (see `offers.rs`).
    pub offers: Option<Box<super::offers::OfferPolicy>>,
    /// The total capacity changed since shares were last keyed (offer
    /// partitions key shares against it).
    pub shares_stale: bool,
}

/// Why a configuration could not be turned into queues.
pub type BuildError = String;

impl Partition {
    /// A partition built from its configuration.
    pub fn new(
        name: Arc<str>,
        rm_id: Arc<str>,
        config: PartitionConfig,
        names: Arc<ResourceNames>,
    ) -> Result<Self, BuildError> {
        let plain_name_at = name.rfind(']').map_or(0, |i| i + 1);
        let mut partition = Self {
            name,
            plain_name_at,
            rm_id,
            queues: Vec::new(),
            queue_by_path: FastMap::default(),
            apps: Slab::new(),
            app_by_id: FastMap::default(),
            completed_apps: VecDeque::new(),
            asks: Slab::new(),
            sizes: Sizes::default(),
            allocs: Slab::new(),
            alloc_by_id: FastMap::default(),
            nodes: Slab::new(),
            node_by_id: FastMap::default(),
            node_index: BTreeSet::new(),
            exhausted_nodes: BTreeSet::new(),
            pending_floor: None,
            pending_ask_count: 0,
            floor_lowered: false,
            node_sort: NodeSortKind::Fair,
            node_weights: Vec::new(),
            total_capacity: Resource::ZERO,
            config: config.clone(),
            reserved_asks: BTreeSet::new(),
            completing_timers: BinaryHeap::new(),
            gang_timers: BinaryHeap::new(),
            next_seq: 0,
            pass: 0,
            outbox: Outbox::default(),
            parked_queues: Vec::new(),
            parked_apps: Vec::new(),
            completing_timeout: 30_000_000_000,
            names,
            dirty_apps: Vec::new(),
            freed_in_pass: false,
            now: 0,
            lanes: Lanes::ALL,
            queue_slots: Slots::default(),
            app_slots: Slots::default(),
            offers: None,
            shares_stale: false,
        };
        partition.sync_lanes();
        partition.apply_config(config, 0)?;
        Ok(partition)
    }

    /// Applies a (new) configuration: updates queues in place, creates new ones,
    /// and marks configured queues that disappeared as draining. Usage is kept.
    pub fn apply_config(&mut self, config: PartitionConfig, now: u64) -> Result<(), BuildError> {
        // Convert everything first so a bad value changes nothing.
        let names = self.names.clone();
        let names = names.as_ref();
        let mut plan = Vec::new();
        plan_queue(&config.root, None, &BTreeMap::new(), names, &mut plan)?;
        // Partition limits are the root queue's.
        if !config.limits.is_empty()
            && let Some(root) = plan.first_mut()
        {
            let mut all = config.limits.clone();
            all.extend(config.root.limits.iter().cloned());
            root.limits = QueueLimits::from_config(&all, names)
                .map_err(|e| format!("partition limits: {e}"))?;
        }
        let weights = node_weights(&config, names)?;

        let mut seen = BTreeSet::new();
        for planned in plan {
            let id = match self.queue_by_path.get(planned.path.as_str()) {
                Some(&id) => id,
                None => {
                    let parent = planned
                        .parent_path
                        .as_deref()
                        .and_then(|p| self.queue_by_path.get(p).copied());
                    let id = self.create_queue(&planned.path, parent, planned.is_parent);
                    self.outbox.event(
                        now,
                        si::event_record::Type::Queue,
                        &planned.path,
                        "",
                        si::event_record::ChangeType::Add,
                        si::event_record::ChangeDetail::QueueConfig,
                        "queue created from configuration".to_string(),
                    );
                    id
                }
            };
            seen.insert(id);
            let q = &mut self.queues[id];
            q.is_parent = planned.is_parent || !q.children.is_empty();
            q.dynamic = false;
            q.state = QueueState::Active;
            q.guaranteed = planned.guaranteed;
            q.max = planned.max;
            q.has_max = planned.max != Resource::UNLIMITED;
            q.max_applications = planned.max_applications;
            q.app_sort = planned.app_sort;
            q.sort_priority = planned.sort_priority;
            q.properties = planned.properties;
            q.submit_acl = planned.submit_acl;
            q.admin_acl = planned.admin_acl;
            q.limits = planned.limits;
            q.read_properties();
        }
        for id in 0..self.queues.len() {
            let q = &self.queues[id];
            if !seen.contains(&id) && !q.dynamic && q.state == QueueState::Active {
                let path = q.path.clone();
                self.queues[id].state = QueueState::Draining;
                self.outbox.event(
                    now,
                    si::event_record::Type::Queue,
                    &path,
                    "",
                    si::event_record::ChangeType::Set,
                    si::event_record::ChangeDetail::QueueConfig,
                    "queue removed from configuration: draining".to_string(),
                );
            }
        }
        self.node_sort = config.node_sort_policy.kind;
        self.node_weights = weights;
        self.config = config;
        // Shares and sort policies may have changed: re-key everything.
        let node_ids: Vec<NodeId> = self.nodes.iter().map(|(id, _)| id).collect();
        for n in node_ids {
            self.rekey_node(n);
        }
        let app_ids: Vec<AppId> = self.apps.iter().map(|(id, _)| id).collect();
        for &a in &app_ids {
            self.rekey_app(a);
        }
        self.retrack_limits();
        Ok(())
    }

    /// Recomputes the usage tracked against user and group limits from the
    /// applications (after the limits changed).
    fn retrack_limits(&mut self) {
        for q in &mut self.queues {
            if let Some(l) = q.limits.as_mut() {
                l.clear_usage();
            }
        }
        let app_ids: Vec<AppId> = self.apps.iter().map(|(id, _)| id).collect();
        for app in app_ids {
            self.apps[app].limit_group = self.limit_group_for(app);
            let allocs = self.app_allocations(app);
            for alloc in allocs {
                let res = *self.allocs[alloc].resource;
                self.track_limits(app, &res, true);
            }
            if self.apps[app].counted_running {
                self.track_limit_apps(app, true);
            }
        }
    }

    /// The group whose limits an application's usage counts against: the first
    /// of the user's groups a limit on the queue path names, else (with a `*`
    /// group limit on the path) the user's first group.
    pub fn limit_group_for(&self, app: AppId) -> Option<Arc<str>> {
        let a = &self.apps[app];
        let mut wildcard = false;
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits {
                if let Some(g) = a.groups.iter().find(|g| l.names_group(g)) {
                    return Some(Arc::from(g.as_str()));
                }
                wildcard |= l.has_group_wildcard();
            }
            q = self.queues[id].parent;
        }
        if wildcard {
            a.groups.first().map(|g| Arc::from(g.as_str()))
        } else {
            None
        }
    }

    fn track_limits(&mut self, app: AppId, res: &Resource, add: bool) {
        // Borrowed, not cloned: this runs for every allocation.
        let a = &self.apps[app];
        let (user, group) = (&a.user, a.limit_group.as_ref());
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = self.queues[id].limits.as_mut() {
                l.track_resource(user, group, res, add);
            }
            q = self.queues[id].parent;
        }
    }

    fn track_limit_apps(&mut self, app: AppId, running: bool) {
        let a = &self.apps[app];
        let (user, group) = (a.user.clone(), a.limit_group.clone());
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = self.queues[id].limits.as_mut() {
                l.track_app(&user, group.as_ref(), running);
            }
            q = self.queues[id].parent;
        }
    }

    /// True when `res` more fits under every user and group limit on the path.
    pub fn fits_user_limits(&self, app: AppId, res: &Resource) -> bool {
        let a = &self.apps[app];
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits
                && !l.fits(&a.user, a.limit_group.as_deref(), res)
            {
                return false;
            }
            q = self.queues[id].parent;
        }
        true
    }

    /// True when the application may start running: queue maxapplications and
    /// user and group application limits on the path allow one more.
    pub fn can_start(&self, app: AppId) -> bool {
        let a = &self.apps[app];
        if a.counted_running {
            return true;
        }
        if !self.can_start_app(a.queue) {
            return false;
        }
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits
                && !l.can_start(&a.user, a.limit_group.as_deref())
            {
                return false;
            }
            q = self.queues[id].parent;
        }
        true
    }

    /// Adds a queue under `parent` (none only for the root).
    pub fn create_queue(
        &mut self,
        path: &str,
        parent: Option<QueueId>,
        is_parent: bool,
    ) -> QueueId {
        let id = self.queues.len();
        let path: Arc<str> = Arc::from(path);
        self.queues
            .push(Queue::new(path.clone(), parent, is_parent));
        self.queue_by_path.insert(path, id);
        if let Some(p) = parent {
            self.queues[p].children.push(id);
            self.queues[p].is_parent = true;
        }
        id
    }

    /// Allocates a sequence number.
    pub fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    // ---- usage accounting ------------------------------------------------

    /// Takes in resource names interned since the last call. A vector that
    /// uses a new name reaches this thread only in a request sent after the
    /// name was interned, so calling this before applying each request (and
    /// before each pass) keeps every value vector inside `lanes`.
    pub fn sync_lanes(&mut self) {
        self.lanes = self.names.lanes();
    }

    /// Adds `res` to the pending totals of an application and its queues.
    pub fn add_pending(&mut self, app: AppId, res: &Resource) {
        let lanes = self.lanes;
        self.apps[app].pending.add_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].pending.add_in(res, lanes);
            q = self.queues[id].parent;
        }
    }

    /// Removes `res` from the pending totals of an application and its queues.
    pub fn remove_pending(&mut self, app: AppId, res: &Resource) {
        let lanes = self.lanes;
        self.apps[app].pending.sub_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].pending.sub_in(res, lanes);
            q = self.queues[id].parent;
        }
    }

    /// Adds `res` to the allocated totals of an application, its queues and a node.
    pub fn add_usage(&mut self, app: AppId, node: NodeId, res: &Resource) {
        let lanes = self.lanes;
        self.track_limits(app, res, true);
        self.apps[app].allocated.add_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].allocated.add_in(res, lanes);
            q = self.queues[id].parent;
        }
        self.nodes[node].res.add_allocated(res, lanes);
        self.rekey_node(node);
    }

    /// Removes `res` from the allocated totals of an application, its queues and a node.
    pub fn remove_usage(&mut self, app: AppId, node: NodeId, res: &Resource) {
        let lanes = self.lanes;
        self.track_limits(app, res, false);
        self.apps[app].allocated.sub_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].allocated.sub_in(res, lanes);
            q = self.queues[id].parent;
        }
        self.nodes[node].res.sub_allocated(res, lanes);
        self.rekey_node(node);
    }

    /// Adds one to the running application count of a queue and its ancestors.
    pub fn count_running(&mut self, app: AppId, running: bool) {
        if self.apps[app].counted_running == running {
            return;
        }
        self.apps[app].counted_running = running;
        self.track_limit_apps(app, running);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            let c = &mut self.queues[id].running_apps;
            *c = if running { *c + 1 } else { c.saturating_sub(1) };
            q = self.queues[id].parent;
        }
    }

    /// True when `res` more fits under the max of the leaf and every ancestor.
    #[inline]
    pub fn fits_headroom(&self, leaf: QueueId, res: &Resource) -> bool {
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.has_max
                && !queue
                    .allocated
                    .plus(res)
                    .fits_in_lanes(&queue.max, self.lanes)
            {
                return false;
            }
            q = queue.parent;
        }
        true
    }

    /// True when another application may start running under `leaf`.
    pub fn can_start_app(&self, leaf: QueueId) -> bool {
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.max_applications > 0 && queue.running_apps >= queue.max_applications {
                return false;
            }
            q = queue.parent;
        }
        true
    }

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
        let n = &self.nodes[node];
        let exhausted = self.node_exhausted(node, &n.res);
        // A reserved node serves only the ask holding it, which tries it
        // first: kept out of the index, no search walks past it.
        let new_key = (n.schedulable && n.reserved_by.is_none())
            .then(|| (NodeKey::new(self.node_score(n), node), exhausted));
        let old_key = n.key_in_index;
        if old_key == new_key {
            return;
        }
        match old_key {
            Some((k, false)) => self.node_index.remove(&k),
            Some((k, true)) => self.exhausted_nodes.remove(&k),
            None => false,
        };
        match new_key {
            Some((k, false)) => self.node_index.insert(k),
            Some((k, true)) => self.exhausted_nodes.insert(k),
            None => false,
        };
        self.nodes[node].key_in_index = new_key;
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
        let nodes: Vec<NodeId> = self.exhausted_nodes.iter().map(|k| k.node()).collect();
        for n in nodes {
            self.rekey_node(n);
        }
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
            let below = (0..self.lanes.get()).any(|i| q.allocated.0[i] < q.guaranteed.0[i]);
            if below {
                q.allocated.dominant_share_in(&q.guaranteed, self.lanes)
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

    // ---- readers ---------------------------------------------------------

    /// Builds the immutable view of this partition.
    pub fn snapshot(&self, names: &NameTable) -> crate::snapshot::PartitionSnapshot {
        use crate::snapshot::*;
        let map = |r: &Resource| names.to_map(r);
        let mut queues: Vec<QueueSnapshot> = self
            .queue_by_path
            .values()
            .map(|&id| {
                let q = &self.queues[id];
                QueueSnapshot {
                    path: q.path.to_string(),
                    parent: q.is_parent,
                    state: match q.state {
                        QueueState::Active => "Active",
                        QueueState::Draining => "Draining",
                    }
                    .to_string(),
                    dynamic: q.dynamic,
                    guaranteed: map(&q.guaranteed),
                    max: map(&q.max),
                    allocated: map(&q.allocated),
                    pending: map(&q.pending),
                    max_applications: q.max_applications,
                    running_applications: q.running_apps,
                    properties: q.properties.clone(),
                }
            })
            .collect();
        queues.sort_by(|a, b| a.path.cmp(&b.path));
        let mut applications: Vec<ApplicationSnapshot> = self
            .apps
            .iter()
            .map(|(_, a)| {
                let mut pending_asks: Vec<AskSnapshot> = a
                    .pending_order
                    .iter()
                    .map(|k| {
                        let ask = &self.asks[k.2];
                        AskSnapshot {
                            allocation_key: String::from(&*ask.key),
                            resource: map(&ask.resource),
                            pending_allocations: ask.pending,
                            priority: ask.priority,
                            reserved_node: ask
                                .reserved_node
                                .map(|n| String::from(&*self.nodes[n].id)),
                        }
                    })
                    .collect();
                pending_asks.sort_by(|x, y| x.allocation_key.cmp(&y.allocation_key));
                ApplicationSnapshot {
                    id: String::from(&*a.id),
                    queue: self.queues[a.queue].path.to_string(),
                    user: a.user.to_string(),
                    groups: a.groups.clone(),
                    limit_group: a.limit_group.as_deref().map(str::to_string),
                    state: a.state.as_str().to_string(),
                    allocated: map(&a.allocated),
                    pending: map(&a.pending),
                    pending_asks,
                    allocation_count: a.allocation_count,
                    submission_time: a.submission_time,
                }
            })
            .collect();
        for c in &self.completed_apps {
            if !self.app_by_id.contains_key(&c.id) {
                applications.push(ApplicationSnapshot {
                    id: String::from(&*c.id),
                    queue: c.queue.to_string(),
                    user: c.user.to_string(),
                    state: c.state.as_str().to_string(),
                    submission_time: c.submission_time,
                    ..Default::default()
                });
            }
        }
        applications.sort_by(|a, b| a.id.cmp(&b.id));
        let mut nodes: Vec<NodeSnapshot> = self
            .nodes
            .iter()
            .map(|(_, n)| NodeSnapshot {
                id: String::from(&*n.id),
                schedulable: n.schedulable,
                capacity: map(&n.res.capacity()),
                occupied: map(&n.res.occupied()),
                allocated: map(&n.res.allocated()),
                available: map(&n.res.available()),
                allocation_count: n.allocations.len(),
                reserved_by: n.reserved_by.map(|a| String::from(&*self.asks[a].key)),
                attributes: n.attributes.clone(),
            })
            .collect();
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let mut allocations: Vec<AllocationSnapshot> = self
            .allocs
            .iter()
            .map(|(_, al)| AllocationSnapshot {
                allocation_key: String::from(&*al.key),
                allocation_id: String::from(&*al.id),
                application_id: String::from(&*self.apps[al.app].id),
                queue: self.queues[self.apps[al.app].queue].path.to_string(),
                node_id: String::from(&*self.nodes[al.node].id),
                resource: map(&al.resource),
                placeholder: al.placeholder,
                priority: al.priority,
            })
            .collect();
        allocations.sort_by(|a, b| a.allocation_id.cmp(&b.allocation_id));
        let plain = self.name.rsplit(']').next().unwrap_or(&self.name);
        PartitionSnapshot {
            name: plain.to_string(),
            rm_id: self.rm_id.to_string(),
            node_sort_policy: match self.node_sort {
                NodeSortKind::Fair => "fair",
                NodeSortKind::Binpacking => "binpacking",
            }
            .to_string(),
            total_capacity: map(&self.total_capacity),
            queues,
            applications,
            nodes,
            allocations,
        }
    }

    /// Remembers a finished application for readers.
    pub fn remember_completed(&mut self, app: &App) {
        self.completed_apps.push_back(CompletedApp {
            id: app.id.clone(),
            queue: self.queues[app.queue].path.clone(),
            user: app.user.clone(),
            state: app.state,
            submission_time: app.submission_time,
        });
        while self.completed_apps.len() > COMPLETED_APPS_KEPT {
            self.completed_apps.pop_front();
        }
    }
}

impl App {
    /// Whether asks of this application may be scheduled in its current state.
    pub fn state_allows_scheduling(&self) -> bool {
        !matches!(
            self.state,
            AppState::Completed
                | AppState::Rejected
                | AppState::Failing
                | AppState::Failed
                | AppState::Expired
        )
    }
}

/// A share divided by a weight in thousandths (1000 = 1, the common case,
/// costs nothing).
pub(super) fn weighted(share: u64, weight_milli: u64) -> u64 {
    if weight_milli == 1000 {
        return share;
    }
    let scaled = u128::from(share) * 1000 / u128::from(weight_milli.max(1));
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// A queue of the configuration, resolved to dense resources and effective properties.
struct PlannedQueue {
    path: String,
    parent_path: Option<String>,
    is_parent: bool,
    guaranteed: Resource,
    max: Resource,
    max_applications: u64,
    properties: BTreeMap<String, String>,
    app_sort: AppSortPolicy,
    sort_priority: bool,
    submit_acl: Option<String>,
    admin_acl: Option<String>,
    limits: Option<Box<QueueLimits>>,
}

/// Properties a child does not inherit from its parent.
const NOT_INHERITED: [&str; 4] = [
    "priority.policy",
    "priority.offset",
    "preemption.policy",
    crate::config::properties::QUEUE_WEIGHT,
];

fn plan_queue(
    q: &QueueConfig,
    parent_path: Option<&str>,
    inherited: &BTreeMap<String, String>,
    names: &ResourceNames,
    out: &mut Vec<PlannedQueue>,
) -> Result<(), BuildError> {
    let path = match parent_path {
        Some(p) => format!("{p}.{}", q.name),
        None => q.name.clone(),
    };
    let mut properties = inherited.clone();
    for (k, v) in &q.properties {
        properties.insert(k.clone(), v.clone());
    }
    let app_sort = match properties
        .get("application.sort.policy")
        .map(String::as_str)
    {
        Some("fair") => AppSortPolicy::Fair,
        _ => AppSortPolicy::Fifo,
    };
    let sort_priority = properties
        .get("application.sort.priority")
        .is_none_or(|v| v != "disabled");
    let guaranteed = names
        .from_map(&q.guaranteed)
        .map_err(|e| format!("queue {path}: guaranteed: {e}"))?;
    let max = names
        .limit_from_map(&q.max)
        .map_err(|e| format!("queue {path}: max: {e}"))?;
    let is_parent = q.parent || !q.queues.is_empty();
    out.push(PlannedQueue {
        path: path.clone(),
        parent_path: parent_path.map(str::to_string),
        is_parent,
        guaranteed,
        max,
        max_applications: q.max_applications,
        properties: properties.clone(),
        app_sort,
        sort_priority,
        submit_acl: q.submit_acl.clone(),
        admin_acl: q.admin_acl.clone(),
        limits: QueueLimits::from_config(&q.limits, names)
            .map_err(|e| format!("queue {path}: {e}"))?,
    });
    let mut for_children = properties;
    for key in NOT_INHERITED {
        for_children.remove(key);
    }
    if q.properties.get("preemption.policy").map(String::as_str) == Some("disabled") {
        for_children.insert("preemption.policy".to_string(), "disabled".to_string());
    }
    for child in &q.queues {
        plan_queue(child, Some(&path), &for_children, names, out)?;
    }
    Ok(())
}

fn node_weights(
    config: &PartitionConfig,
    names: &ResourceNames,
) -> Result<Vec<(usize, u64)>, BuildError> {
    let weights = &config.node_sort_policy.resource_weights;
    if weights.is_empty() {
        return Ok(vec![
            (crate::resources::VCORE, 1000),
            (crate::resources::MEMORY, 1000),
        ]);
    }
    let mut out = Vec::new();
    for (name, &w) in weights {
        let i = names.intern(name).map_err(|e| e.to_string())?;
        let w = (w * 1000.0).round();
        if w > 0.0 {
            out.push((i, w as u64));
        }
    }
    Ok(out)
}
