//! The scheduling objects: queues, applications, asks, allocations and nodes,
//! with the sort keys that order them. Plain data, owned by a `Partition`;
//! cross references are arena indices, never pointers or locks.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::heap::{HeapKey, KeyHeap};
use crate::resources::{Lanes, MAX_RESOURCE_TYPES, Resource};

/// Hash map used for the core's lookups: much faster than the standard hasher.
/// Its seed is fixed so that iteration order (and so the order of releases,
/// arena slot reuse and tie-breaks) is the same in every run: the deterministic
/// simulation depends on it. RMs are trusted callers; a hostile one could at
/// worst slow its own scheduler.
pub type FastMap<K, V> = std::collections::HashMap<K, V, FixedState>;

/// A fixed-seed ahash builder.
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedState;

impl std::hash::BuildHasher for FixedState {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        ahash::RandomState::with_seeds(
            0x243f_6a88_85a3_08d3,
            0x1319_8a2e_0370_7344,
            0xa409_3822_299f_31d0,
            0x082e_fa98_ec4e_6c89,
        )
        .build_hasher()
    }
}

/// Index of a queue in its partition's queue arena.
pub type QueueId = usize;
/// Index of an application in its partition's arena.
pub type AppId = usize;
/// Index of an ask in its partition's arena.
pub type AskId = usize;
/// Index of an allocation in its partition's arena.
pub type AllocId = usize;
/// Index of a node in its partition's arena.
pub type NodeId = usize;

/// How a leaf orders its applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppSortPolicy {
    /// By submission time (oldest first).
    #[default]
    Fifo,
    /// By dominant share of usage against the queue's guarantee (smallest first).
    Fair,
}

/// Whether a queue takes new applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// Takes new applications.
    Active,
    /// Removed from the configuration: running applications go on, no new ones.
    Draining,
}

/// Order of a queue among its siblings: smallest dominant share first, then
/// highest priority, then largest pending share, then creation order.
pub type QueueKey = (u64, Reverse<i32>, Reverse<u64>, QueueId);

/// Order of an application in its leaf: priority first (when enabled), then the
/// policy's key (submission sequence for fifo, dominant share for fair), then
/// submission sequence.
pub type AppKey = (Reverse<i32>, u64, u64, AppId);

impl HeapKey for QueueKey {
    fn id(&self) -> usize {
        self.3
    }
}

impl HeapKey for AppKey {
    fn id(&self) -> usize {
        self.3
    }
}

/// Order of an ask in its application: highest priority first, then oldest.
pub type AskKey = (Reverse<i32>, u64, AskId);

/// Order of a node in the partition's node index: weighted usage in fixed
/// point, then node id, packed into one word (score in the high half, id in
/// the low half) so the index compares single integers and holds twice as
/// many keys per cache line. Scores above `u32::MAX` (nodes used far beyond
/// their capacity) tie at the top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeKey(u64);

impl NodeKey {
    /// The key of `node` with usage score `score`.
    pub fn new(score: u64, node: NodeId) -> Self {
        debug_assert!(u32::try_from(node).is_ok(), "node arena beyond 2^32 slots");
        let score = score.min(u64::from(u32::MAX));
        Self(score << 32 | (node as u64 & u64::from(u32::MAX)))
    }

    /// The node.
    pub fn node(self) -> NodeId {
        (self.0 & u64::from(u32::MAX)) as NodeId
    }
}

/// A queue in the hierarchy.
#[derive(Debug)]
// Laid out by hand (`repr(C)`), each record starting a cache line
// (`align(64)`): an allocation run visits a leaf queue once per lease it
// makes there, long after its last visit, so every line of the record it
// reads is a miss. What a visit reads comes first and together: the first
// line of `allocated`, `max` and `pending` (a partition with up to eight
// resource types reads no further), then the scalars, the queue's key and
// its order of applications. The rest (names, configuration, children) is
// read when the queue is configured or shown. `layout_keeps_the_walk_together`
// pins it.
#[repr(C, align(64))]
pub struct Queue {
    /// Allocated below this queue.
    pub allocated: Resource,
    /// Maximum (unlimited types are `i64::MAX`).
    pub max: Resource,
    /// Pending below this queue.
    pub pending: Resource,
    /// Parent queue (none for root).
    pub parent: Option<QueueId>,
    /// Scheduling pass in which this queue was found unable to allocate.
    pub blocked_in_pass: u64,
    /// `weight` in thousandths (1000 = 1): fair shares are divided by it.
    pub weight_milli: u64,
    /// User and group limits, with the usage tracked against them.
    pub limits: Option<Box<super::limits::QueueLimits>>,
    /// `priority.offset`: added to the priority this queue shows its parent.
    pub priority_offset: i32,
    /// True for a parent queue (never holds applications).
    pub is_parent: bool,
    /// Active or draining.
    pub state: QueueState,
    /// True when `guaranteed` is not zero: a queue's ordering key asks at
    /// every re-key, and the 128 bytes of `guaranteed` were two lines of
    /// memory to wait for each time, where most queues guarantee nothing.
    has_guarantee: bool,
    /// True when some type of `max` is limited.
    pub has_max: bool,
    /// Leaf: whether application priority orders first.
    pub sort_priority: bool,
    /// `priority.policy: fence`: the parent sees only the offset.
    pub priority_fence: bool,
    /// The key under which this queue sits in its parent's `child_order`.
    pub key_in_parent: Option<QueueKey>,
    /// Leaf: applications with pending demand, in sort order.
    pub app_order: KeyHeap<AppKey>,
    /// Parent: children with pending demand, in sort order.
    pub child_order: KeyHeap<QueueKey>,
    /// Applications below this queue that count against maxapplications.
    pub running_apps: u64,
    /// Application limit (0 = none).
    pub max_applications: u64,
    /// Guaranteed resources (0 = none): set through
    /// [`Queue::set_guaranteed`], which keeps `has_guarantee` with it.
    guaranteed: Resource,
    /// Full path, e.g. `root.a`.
    pub path: Arc<str>,
    /// Child queues, in creation order.
    pub children: Vec<QueueId>,
    /// Created by placement rather than configuration.
    pub dynamic: bool,
    /// Leaf: how applications are ordered.
    pub app_sort: AppSortPolicy,
    /// Effective properties after inheritance.
    pub properties: BTreeMap<String, String>,
    /// Submit ACL text as configured.
    pub submit_acl: Option<String>,
    /// Admin ACL text as configured.
    pub admin_acl: Option<String>,
    /// Leaf: every application placed here.
    pub apps: BTreeSet<AppId>,
}

impl Queue {
    /// A queue with no resources configured.
    pub fn new(path: Arc<str>, parent: Option<QueueId>, is_parent: bool) -> Self {
        Self {
            path,
            parent,
            children: Vec::new(),
            is_parent,
            dynamic: false,
            state: QueueState::Active,
            guaranteed: Resource::ZERO,
            has_guarantee: false,
            max: Resource::UNLIMITED,
            has_max: false,
            max_applications: 0,
            running_apps: 0,
            properties: BTreeMap::new(),
            app_sort: AppSortPolicy::Fifo,
            sort_priority: true,
            limits: None,
            submit_acl: None,
            admin_acl: None,
            allocated: Resource::ZERO,
            pending: Resource::ZERO,
            child_order: KeyHeap::default(),
            app_order: KeyHeap::default(),
            apps: BTreeSet::new(),
            key_in_parent: None,
            blocked_in_pass: 0,
            priority_offset: 0,
            priority_fence: false,
            weight_milli: 1000,
        }
    }

    /// Reads `priority.offset`, `priority.policy` and `weight` from the
    /// effective properties (values were checked when the configuration was
    /// parsed).
    pub fn read_properties(&mut self) {
        use crate::config::properties as p;
        self.priority_offset = p::priority_offset(&self.properties).unwrap_or(0);
        self.priority_fence =
            p::priority_policy(&self.properties).is_ok_and(|x| x == p::PriorityPolicy::Fence);
        self.weight_milli = p::weight_milli(&self.properties).unwrap_or(1000);
    }

    /// The priority this queue shows its parent, given the highest priority
    /// below it: with a fence only the offset, else that priority plus the offset.
    pub fn priority_seen_by_parent(&self, below: i32) -> i32 {
        if self.priority_fence {
            self.priority_offset
        } else {
            below.saturating_add(self.priority_offset)
        }
    }

    /// The base against which this queue's usage share is computed: the
    /// guarantee, or the max where nothing is guaranteed.
    pub fn share_base(&self) -> &Resource {
        if self.has_guarantee {
            &self.guaranteed
        } else {
            &self.max
        }
    }

    /// Guaranteed resources (0 = none).
    pub fn guaranteed(&self) -> &Resource {
        &self.guaranteed
    }

    /// True when the queue guarantees something.
    pub fn has_guarantee(&self) -> bool {
        self.has_guarantee
    }

    /// Sets the guaranteed resources.
    pub fn set_guaranteed(&mut self, guaranteed: Resource) {
        self.guaranteed = guaranteed;
        self.has_guarantee = !guaranteed.is_zero();
    }
}

/// Application states, as YuniKorn names them. Failing, Failed, Resuming and
/// Expired are entered by gang scheduling and retention, which build on this.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppState {
    /// Added, no ask yet.
    New,
    /// Has asks, nothing allocated yet.
    Accepted,
    /// Has (had) allocations.
    Running,
    /// Nothing pending or allocated; completes after a grace period.
    Completing,
    /// Done.
    Completed,
    /// Refused at submission.
    Rejected,
    /// Gang (hard style) placeholders timed out; failing.
    Failing,
    /// Failed.
    Failed,
    /// Gang (soft style) placeholders timed out; going back to normal scheduling.
    Resuming,
    /// Removed after the retention period.
    Expired,
}

impl AppState {
    /// The state name on the wire and in snapshots.
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::New => "New",
            AppState::Accepted => "Accepted",
            AppState::Running => "Running",
            AppState::Completing => "Completing",
            AppState::Completed => "Completed",
            AppState::Rejected => "Rejected",
            AppState::Failing => "Failing",
            AppState::Failed => "Failed",
            AppState::Resuming => "Resuming",
            AppState::Expired => "Expired",
        }
    }

    /// Whether the state machine allows going from `self` to `to`.
    pub fn can_move_to(self, to: AppState) -> bool {
        use AppState::*;
        matches!(
            (self, to),
            (New, Accepted)
                | (New, Rejected)
                | (New, Running)
                | (New, Failing)
                | (Accepted, Running)
                | (Accepted, Completing)
                | (Accepted, Failing)
                | (Accepted, Resuming)
                | (Running, Completing)
                | (Running, Failing)
                | (Completing, Running)
                | (Completing, Completed)
                | (Completing, Failing)
                | (Resuming, Accepted)
                | (Resuming, Running)
                | (Failing, Failed)
                | (Completed, Expired)
                | (Failed, Expired)
                | (Rejected, Expired)
        )
    }

    /// True while the application counts against maxapplications.
    pub fn is_running(self) -> bool {
        matches!(
            self,
            AppState::Running | AppState::Completing | AppState::Failing
        )
    }
}

/// An application.
#[derive(Debug)]
// Laid out by hand (`repr(C)`, `align(64)`), as `Queue` is: what an
// allocation run reads of an application at each of its leases comes first
// (the first line of `allocated`, the ids, the state and the key), in four
// lines; the rest is read when its asks change or it is shown.
#[repr(C, align(64))]
pub struct App {
    /// Allocated to this application's real (not placeholder) allocations.
    pub allocated: Resource,
    /// Application id.
    pub id: Arc<str>,
    /// Owner.
    pub user: Arc<str>,
    /// The group whose limits apply to this application, if any.
    pub limit_group: Option<Arc<str>>,
    /// Offer demand and decline filters, for applications of an offer-based RM.
    pub offers: Option<Box<super::offers::AppOffers>>,
    /// Leaf queue.
    pub queue: QueueId,
    /// Asks with allocations still wanted, in order.
    pub pending_order: BTreeSet<AskKey>,
    /// Submission order within the partition.
    pub seq: u64,
    /// The RM's number of the application (tag `RM_HANDLE`), 0 for none:
    /// handed back on its leases.
    pub rm_handle: u64,
    /// Scheduling pass in which the app was found unable to allocate.
    pub blocked_in_pass: u64,
    /// Number of allocations.
    pub allocation_count: usize,
    /// Current state.
    pub state: AppState,
    /// Whether it counts in its queues' `running_apps`.
    pub counted_running: bool,
    /// Some ask that may preempt others may be pending (set as such asks
    /// come in, made exact again with `pending_floor`).
    pub floor_preempts: bool,
    /// See `walk_floor`.
    pub walk_preempts: bool,
    /// The key under which the app sits in its queue's `app_order`.
    pub key_in_queue: Option<AppKey>,
    /// Scheduling pass the cursor belongs to.
    pub cursor_pass: u64,
    /// Gang scheduling state; `None` for an application that never used
    /// placeholders (the common case costs nothing).
    pub gang: Option<Box<super::gang::Gang>>,
    /// Clock time of the last transition.
    pub state_since: u64,
    /// Pending for this application.
    pub pending: Resource,
    /// Asks up to and including this key failed in `cursor_pass`.
    pub cursor: Option<AskKey>,
    /// Clock time of submission.
    pub submission_time: u64,
    /// Held by this application's placeholders, tracked apart from
    /// `allocated` as upstream's `allocatedPlaceholder` (queues and nodes
    /// count both).
    pub placeholder: Resource,
    /// A lower bound of the pending asks' sizes, type by type: every ask in
    /// `pending_order` is at least this (lowered as asks come in, made exact
    /// again by a pass that tried every pending ask). While the queue
    /// headroom below the root cannot take it, no pending ask fits and the
    /// application is passed over without a walk of its asks.
    pub pending_floor: Resource,
    /// The floor and preemption flag of the asks tried (or added) in
    /// `cursor_pass` so far.
    pub walk_floor: Resource,
    /// Every ask by key, including fully allocated ones still holding
    /// allocations (a recovered allocation gets an ask record of its own).
    pub asks: FastMap<Arc<str>, AskId>,
    /// Owner's groups.
    pub groups: Vec<String>,
    /// Tags given at submission.
    #[allow(dead_code)] // read by placement and gang scheduling
    pub tags: BTreeMap<String, String>,
    /// Every state entered with its clock time, oldest first (for readers;
    /// an application makes a handful of transitions in its life).
    pub state_log: Vec<(AppState, u64)>,
}

impl App {
    /// Highest priority among pending asks (0 when none).
    pub fn priority(&self) -> i32 {
        self.pending_order.first().map_or(0, |k| k.0.0)
    }
}

/// An ask: a request for one or more allocations of the same size.
#[derive(Debug)]
pub struct Ask {
    /// Allocation key.
    pub key: Arc<str>,
    /// Owning application.
    pub app: AppId,
    /// Size of one allocation, shared with every other pending ask of the
    /// same size in the partition (see [`Sizes`]).
    pub resource: Arc<Resource>,
    /// Allocations still wanted.
    pub pending: u32,
    /// Allocations made (or recovered) so far, against maxAllocations.
    pub allocated_total: u32,
    /// Number of the next allocation id (`key-N`); only grows, so an id is
    /// never handed out twice for the same ask record.
    pub next_id: u32,
    /// Allocations of this ask that still exist (most asks have one).
    pub allocs: smallvec::SmallVec<[AllocId; 1]>,
    /// Priority.
    pub priority: i32,
    /// Arrival order within the partition.
    pub seq: u64,
    /// Clock time of arrival.
    pub created: u64,
    /// Tags and gang task group, out of line because most asks have neither.
    pub extra: Option<Box<AskExtra>>,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Application originator.
    pub originator: bool,
    /// May be preempted for asks of its own app.
    pub allow_preempt_self: bool,
    /// May trigger preemption.
    pub allow_preempt_other: bool,
    /// Node reserved for this ask.
    pub reserved_node: Option<NodeId>,
    /// Clock time the reservation was made.
    pub reserved_since: u64,
    /// Last scheduling state reported to the RM (si enum value, 0 = none).
    pub reported_state: i32,
}

/// The rarely set parts of an ask.
#[derive(Debug, Default)]
pub struct AskExtra {
    /// Tags from the RM.
    pub tags: BTreeMap<String, String>,
    /// Gang task group.
    pub task_group: String,
    /// Clock time of the last preemption attempt for the ask (0 = none).
    pub preempt_checked_at: u64,
    /// A placeholder ask: how many placeholders its task group counts for it.
    pub placeholders_counted: u32,
}

impl AskExtra {
    /// The out-of-line part for these tags and task group, `None` when both
    /// are empty.
    pub fn boxed(tags: BTreeMap<String, String>, task_group: String) -> Option<Box<Self>> {
        (!tags.is_empty() || !task_group.is_empty()).then(|| {
            Box::new(Self {
                tags,
                task_group,
                preempt_checked_at: 0,
                placeholders_counted: 0,
            })
        })
    }
}

/// No tags.
static NO_TAGS: BTreeMap<String, String> = BTreeMap::new();

impl Ask {
    /// Tags from the RM.
    pub fn tags(&self) -> &BTreeMap<String, String> {
        self.extra.as_ref().map_or(&NO_TAGS, |e| &e.tags)
    }

    /// The node the ask must run on (its required-node tag), if any.
    pub fn required_node(&self) -> Option<&str> {
        self.tags()
            .get(super::preempt::REQUIRED_NODE_TAG)
            .map(String::as_str)
    }

    /// Gang task group (empty when none).
    pub fn task_group(&self) -> &str {
        self.extra.as_ref().map_or("", |e| e.task_group.as_str())
    }

    /// Replaces the tags, keeping the rest.
    pub fn set_tags(&mut self, tags: BTreeMap<String, String>) {
        match &mut self.extra {
            Some(extra) => extra.tags = tags,
            None => self.extra = AskExtra::boxed(tags, String::new()),
        }
    }

    /// Clock time of the last preemption attempt for the ask (0 = none).
    pub fn preempt_checked_at(&self) -> u64 {
        self.extra.as_ref().map_or(0, |e| e.preempt_checked_at)
    }

    /// Records a preemption attempt (only asks allowed to preempt make one,
    /// so the out-of-line part is allocated for those alone).
    pub fn set_preempt_checked_at(&mut self, at: u64) {
        self.extra
            .get_or_insert_with(Box::default)
            .preempt_checked_at = at;
    }

    /// The ask's key in its application's `pending_order`.
    pub fn order_key(&self, id: AskId) -> AskKey {
        (Reverse(self.priority), self.seq, id)
    }
}

/// Interned ask sizes of a partition. Most asks share a handful of sizes, so
/// each ask points at one shared copy instead of carrying its own 128-byte
/// vector. Sizes no ask uses any more are dropped in sweeps that run when the
/// table has doubled since the last one, so the table stays proportional to
/// the number of distinct sizes in use.
#[derive(Debug, Default)]
pub struct Sizes {
    table: FastMap<Resource, Arc<Resource>>,
    last: Option<Arc<Resource>>,
    next_sweep: usize,
}

impl Sizes {
    /// The shared copy of `size`.
    pub fn intern(&mut self, size: Resource) -> Arc<Resource> {
        // Asks arrive in runs of one size: compare with the last one first.
        if let Some(last) = &self.last
            && **last == size
        {
            return last.clone();
        }
        let shared = match self.table.get(&size) {
            Some(s) => s.clone(),
            None => {
                if self.table.len() >= self.next_sweep {
                    self.table.retain(|_, s| Arc::strong_count(s) > 1);
                    self.next_sweep = (self.table.len() * 2).max(64);
                }
                let s = Arc::new(size);
                self.table.insert(size, s.clone());
                s
            }
        };
        self.last = Some(shared.clone());
        shared
    }

    /// [`Sizes::intern`], leaving the size compared first as it was: for a
    /// size taken once among a run of another (an application's new lease
    /// ask, of size zero, between the offers of an allocation run).
    pub fn intern_aside(&mut self, size: Resource) -> Arc<Resource> {
        let last = self.last.take();
        let shared = self.intern(size);
        self.last = last;
        shared
    }

    /// Number of sizes in the table (some may no longer be used).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.len()
    }
}

/// An allocation of one ask on one node. Task group, originator, tags and
/// creation time are what preemption and gang scheduling choose victims by.
#[allow(dead_code)]
#[derive(Debug)]
pub struct Allocation {
    /// Allocation key (the ask's).
    pub key: Arc<str>,
    /// Unique allocation id.
    pub id: Arc<str>,
    /// Application.
    pub app: AppId,
    /// Node.
    pub node: NodeId,
    /// Resources held (shared with the ask's interned size).
    pub resource: Arc<Resource>,
    /// Priority of the ask.
    pub priority: i32,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Gang task group.
    pub task_group: String,
    /// Originator.
    pub originator: bool,
    /// Tags copied from the ask.
    pub tags: BTreeMap<String, String>,
    /// Clock time it was made or recovered.
    pub created: u64,
    /// Index in the node's `allocations`.
    pub node_slot: usize,
    /// A release the core sent and the RM has not confirmed yet; the
    /// allocation holds its resources until then. Boxed: rare, and the
    /// allocation record stays small.
    pub releasing: Option<Box<PendingRelease>>,
}

/// What an allocation record keeps of the ask (or recovered allocation) it
/// came from.
#[derive(Debug, Clone, Default)]
pub struct AllocMeta {
    /// Priority of the ask.
    pub priority: i32,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Gang task group.
    pub task_group: String,
    /// Originator.
    pub originator: bool,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// A release decided by the core (placeholder replaced, preempted) waiting for
/// the RM's confirming `AllocationRelease`.
#[derive(Debug, Clone)]
pub struct PendingRelease {
    /// The termination type sent to the RM.
    pub termination: unisched_si::TerminationType,
    /// Key of the real ask that takes a replaced placeholder's place, and
    /// the size its allocation was decided with.
    pub replacement: Option<(Arc<str>, Resource)>,
}

/// A node.
#[derive(Debug)]
pub struct Node {
    /// Node id.
    pub id: Arc<str>,
    /// Attributes reported by the RM.
    pub attributes: BTreeMap<String, String>,
    /// Capacity, occupied, allocated and available.
    pub res: NodeResources,
    /// False while draining.
    pub schedulable: bool,
    /// Allocations on the node; each allocation knows its slot here, so adding
    /// and removing are O(1).
    pub allocations: Vec<AllocId>,
    /// Ask holding a reservation on the node.
    pub reserved_by: Option<AskId>,
    /// The key under which the node sits in the node index, or (with `true`)
    /// in the set of exhausted nodes; `None` while draining or reserved.
    pub key_in_index: Option<(NodeKey, bool)>,
    /// The RM's number of the node (attribute `RM_HANDLE`), 0 for none:
    /// handed back on its leases.
    pub rm_handle: u64,
}

/// A node's capacity, occupied, allocated and available resources, type by
/// type: the four quantities of the first [`NODE_INLINE_TYPES`] types inline
/// (128 bytes, where four 16-type vectors were 512), the other types in a box
/// made only when a node or an allocation uses one. Nodes are the largest
/// population of the core (W4 walks 10,000 of them once each), and their
/// size, not the instructions spent on them, is what an allocation waits on.
#[derive(Debug, Clone, Default)]
pub struct NodeResources {
    head: [[i64; 4]; NODE_INLINE_TYPES],
    tail: Option<Box<[[i64; 4]; MAX_RESOURCE_TYPES - NODE_INLINE_TYPES]>>,
}

/// Resource types a node keeps inline.
pub const NODE_INLINE_TYPES: usize = 4;

const CAPACITY: usize = 0;
const OCCUPIED: usize = 1;
const ALLOCATED: usize = 2;
const AVAILABLE: usize = 3;

impl NodeResources {
    /// A node with nothing allocated.
    pub fn new(capacity: &Resource, occupied: &Resource) -> Self {
        let mut out = Self::default();
        out.set_column(CAPACITY, capacity);
        out.set_column(OCCUPIED, occupied);
        out
    }

    fn lane(&self, i: usize) -> [i64; 4] {
        if i < NODE_INLINE_TYPES {
            self.head[i]
        } else {
            self.tail
                .as_ref()
                .map_or([0; 4], |t| t[i - NODE_INLINE_TYPES])
        }
    }

    fn lane_mut(&mut self, i: usize) -> &mut [i64; 4] {
        if i < NODE_INLINE_TYPES {
            &mut self.head[i]
        } else {
            &mut self
                .tail
                .get_or_insert_with(|| Box::new([[0; 4]; MAX_RESOURCE_TYPES - NODE_INLINE_TYPES]))
                [i - NODE_INLINE_TYPES]
        }
    }

    fn column(&self, q: usize) -> Resource {
        let mut out = Resource::ZERO;
        for (i, v) in out.0.iter_mut().enumerate() {
            *v = self.lane(i)[q];
        }
        out
    }

    /// Writes one quantity for every type, then recomputes what is available.
    fn set_column(&mut self, q: usize, r: &Resource) {
        for (i, &v) in r.0.iter().enumerate() {
            if v != 0 || self.lane(i)[q] != 0 {
                let lane = self.lane_mut(i);
                lane[q] = v;
                refresh(lane);
            }
        }
    }

    /// Schedulable capacity.
    pub fn capacity(&self) -> Resource {
        self.column(CAPACITY)
    }

    /// Used by others.
    pub fn occupied(&self) -> Resource {
        self.column(OCCUPIED)
    }

    /// Allocated by this scheduler.
    pub fn allocated(&self) -> Resource {
        self.column(ALLOCATED)
    }

    /// Capacity − occupied − allocated.
    pub fn available(&self) -> Resource {
        self.column(AVAILABLE)
    }

    /// Capacity of type `i`.
    pub fn capacity_of(&self, i: usize) -> i64 {
        self.lane(i)[CAPACITY]
    }

    /// Occupied plus allocated of type `i`.
    pub fn used_of(&self, i: usize) -> i64 {
        let lane = self.lane(i);
        lane[ALLOCATED].saturating_add(lane[OCCUPIED])
    }

    /// Sets the capacity.
    pub fn set_capacity(&mut self, capacity: &Resource) {
        self.set_column(CAPACITY, capacity);
    }

    /// Sets what others use.
    pub fn set_occupied(&mut self, occupied: &Resource) {
        self.set_column(OCCUPIED, occupied);
    }

    /// Adds an allocation of `res` (a value vector: 0 past `lanes`).
    #[inline]
    pub fn add_allocated(&mut self, res: &Resource, lanes: Lanes) {
        self.change_allocated(res, lanes, i64::saturating_add);
    }

    /// Takes an allocation of `res` (a value vector: 0 past `lanes`) off.
    #[inline]
    pub fn sub_allocated(&mut self, res: &Resource, lanes: Lanes) {
        self.change_allocated(res, lanes, i64::saturating_sub);
    }

    #[inline]
    fn change_allocated(&mut self, res: &Resource, lanes: Lanes, op: fn(i64, i64) -> i64) {
        let n = lanes.get();
        let inline = n.min(NODE_INLINE_TYPES);
        for (lane, &v) in self.head[..inline].iter_mut().zip(res.0.iter()) {
            lane[ALLOCATED] = op(lane[ALLOCATED], v);
            refresh(lane);
        }
        for i in NODE_INLINE_TYPES..n {
            if res.0[i] != 0 {
                let lane = self.lane_mut(i);
                lane[ALLOCATED] = op(lane[ALLOCATED], res.0[i]);
                refresh(lane);
            }
        }
    }

    /// True when `res` (a value vector: 0 past `lanes`) fits in what is
    /// available.
    #[inline]
    pub fn fits(&self, res: &Resource, lanes: Lanes) -> bool {
        let n = lanes.get();
        let inline = n.min(NODE_INLINE_TYPES);
        self.head[..inline]
            .iter()
            .zip(res.0.iter())
            .all(|(lane, &v)| v <= lane[AVAILABLE])
            && (NODE_INLINE_TYPES..n).all(|i| res.0[i] <= self.lane(i)[AVAILABLE])
    }
}

/// Recomputes what one type has available.
#[inline]
fn refresh(lane: &mut [i64; 4]) {
    lane[AVAILABLE] = lane[CAPACITY]
        .saturating_sub(lane[OCCUPIED])
        .saturating_sub(lane[ALLOCATED]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(memory: i64) -> Resource {
        Resource::from_pairs(&[(0, memory), (1, 1)])
    }

    /// Checks that bytes `first..end` of a record cover `lines` cache lines
    /// (of 64 bytes, from the record's start) and hold every field at `at`.
    fn assert_together(first: usize, end: usize, lines: usize, at: &[usize]) {
        assert_eq!((end - 1) / 64 - first / 64 + 1, lines, "{first}..{end}");
        for a in at {
            assert!((first..end).contains(a), "{a} outside {first}..{end}");
        }
    }

    #[test]
    fn layout_keeps_the_walk_together() {
        use std::mem::{offset_of, size_of};
        // Each record starts a line; the resource vectors start lines, so
        // their first eight types are one line.
        assert_eq!(std::mem::align_of::<Queue>(), 64);
        assert_eq!(std::mem::align_of::<App>(), 64);
        for at in [
            offset_of!(Queue, allocated),
            offset_of!(Queue, max),
            offset_of!(Queue, pending),
            offset_of!(App, allocated),
        ] {
            assert_eq!(at % 64, 0, "a resource vector starts a line");
        }
        // A leaf queue's scalars, key and order of applications: three lines.
        assert_together(
            offset_of!(Queue, parent),
            offset_of!(Queue, app_order) + size_of::<KeyHeap<AppKey>>(),
            3,
            &[
                offset_of!(Queue, blocked_in_pass),
                offset_of!(Queue, weight_milli),
                offset_of!(Queue, limits),
                offset_of!(Queue, priority_offset),
                offset_of!(Queue, is_parent),
                offset_of!(Queue, has_guarantee),
                offset_of!(Queue, sort_priority),
                offset_of!(Queue, key_in_parent),
            ],
        );
        // An application's ids, state and key: three lines after `allocated`.
        assert_together(
            offset_of!(App, id),
            offset_of!(App, state_since) + size_of::<u64>(),
            3,
            &[
                offset_of!(App, offers),
                offset_of!(App, queue),
                offset_of!(App, pending_order),
                offset_of!(App, seq),
                offset_of!(App, rm_handle),
                offset_of!(App, blocked_in_pass),
                offset_of!(App, state),
                offset_of!(App, counted_running),
                offset_of!(App, key_in_queue),
            ],
        );
    }

    #[test]
    fn a_queue_knows_whether_it_guarantees_anything() {
        let mut q = Queue::new("root.a".into(), Some(0), false);
        assert!(!q.has_guarantee());
        assert_eq!(
            q.share_base(),
            &Resource::UNLIMITED,
            "no guarantee: the max"
        );
        q.set_guaranteed(size(512));
        assert!(q.has_guarantee());
        assert_eq!(q.guaranteed(), &size(512));
        assert_eq!(q.share_base(), &size(512), "a guarantee is the share base");
        q.set_guaranteed(Resource::ZERO);
        assert!(!q.has_guarantee(), "a guarantee taken away is none");
        assert_eq!(q.share_base(), &Resource::UNLIMITED);
    }

    #[test]
    fn equal_sizes_share_one_copy() {
        let mut sizes = Sizes::default();
        let a = sizes.intern(size(10));
        let b = sizes.intern(size(20));
        let c = sizes.intern(size(10));
        assert!(Arc::ptr_eq(&a, &c));
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(*b, size(20));
    }

    #[test]
    fn a_size_interned_aside_shares_the_table_and_leaves_the_first_compared() {
        let mut sizes = Sizes::default();
        let run = sizes.intern(size(10));
        let zero = sizes.intern_aside(Resource::ZERO);
        assert!(Arc::ptr_eq(&zero, &sizes.intern_aside(Resource::ZERO)));
        let first = sizes.last.clone().expect("a size compared first");
        assert!(Arc::ptr_eq(&first, &run), "the run's size is still first");
        assert!(Arc::ptr_eq(&zero, &sizes.intern(Resource::ZERO)));
    }

    #[test]
    fn unused_sizes_are_swept() {
        let mut sizes = Sizes::default();
        for m in 1..=1000 {
            drop(sizes.intern(size(m)));
        }
        // Sweeps keep the table within twice the sizes still referenced (here
        // only the last one), plus the first sweep's threshold.
        assert!(sizes.len() <= 64, "{} sizes kept", sizes.len());
        let kept = sizes.intern(size(5000));
        for m in 1..=1000 {
            drop(sizes.intern(size(m)));
        }
        assert!(Arc::ptr_eq(&kept, &sizes.intern(size(5000))));
    }

    #[test]
    fn node_keys_order_by_score_then_node() {
        assert!(NodeKey::new(1, 5) < NodeKey::new(2, 0));
        assert!(NodeKey::new(1, 3) < NodeKey::new(1, 4));
        assert_eq!(NodeKey::new(7, 42).node(), 42);
        // Scores beyond 32 bits tie at the top instead of wrapping around.
        assert!(NodeKey::new(u64::MAX, 0) > NodeKey::new(u64::from(u32::MAX) - 1, 9));
        assert_eq!(
            NodeKey::new(u64::MAX, 3),
            NodeKey::new(u64::from(u32::MAX), 3)
        );
    }

    #[test]
    fn ask_records_stay_small() {
        // Memory per pending ask is a target (spec/performance.md); the record
        // is most of it.
        assert!(
            std::mem::size_of::<Ask>() <= 128,
            "{}",
            std::mem::size_of::<Ask>()
        );
    }

    proptest::proptest! {
        /// The packed node resources give what four plain vectors give, for
        /// types inline and past them, whatever the order of the changes.
        #[test]
        fn node_resources_match_plain_vectors(
            cap in proptest::collection::vec(0i64..1000, MAX_RESOURCE_TYPES),
            occ in proptest::collection::vec(0i64..300, MAX_RESOURCE_TYPES),
            ops in proptest::collection::vec(
                (proptest::bool::ANY, 1usize..=MAX_RESOURCE_TYPES, 0usize..MAX_RESOURCE_TYPES, 0i64..50),
                0..60,
            ),
        ) {
            let to_res = |v: &[i64]| {
                let mut r = Resource::ZERO;
                r.0.copy_from_slice(v);
                r
            };
            let (capacity, occupied) = (to_res(&cap), to_res(&occ));
            let mut node = NodeResources::new(&Resource::ZERO, &Resource::ZERO);
            node.set_capacity(&capacity);
            node.set_occupied(&occupied);
            let mut allocated = Resource::ZERO;
            // Names of the node's capacity and occupied are interned too.
            let mut in_use = (0..MAX_RESOURCE_TYPES)
                .filter(|&t| cap[t] != 0 || occ[t] != 0)
                .map(|t| t + 1)
                .max()
                .unwrap_or(0);
            for (add, lanes, i, v) in ops {
                // The types in use only grow, and cover every vector seen.
                in_use = in_use.max(lanes).max(i + 1);
                let lanes = Lanes::new(in_use);
                let res = Resource::from_pairs(&[(i, v)]);
                let available = capacity.minus(&occupied).minus(&allocated);
                proptest::prop_assert_eq!(node.fits(&res, lanes), res.fits_in(&available));
                if add {
                    node.add_allocated(&res, lanes);
                    allocated.add_assign(&res);
                } else {
                    node.sub_allocated(&res, lanes);
                    allocated.sub_assign(&res);
                }
                proptest::prop_assert_eq!(node.allocated(), allocated);
                proptest::prop_assert_eq!(node.available(), capacity.minus(&occupied).minus(&allocated));
                proptest::prop_assert_eq!(node.capacity(), capacity);
                proptest::prop_assert_eq!(node.occupied(), occupied);
                for t in 0..MAX_RESOURCE_TYPES {
                    proptest::prop_assert_eq!(node.capacity_of(t), capacity.0[t]);
                    proptest::prop_assert_eq!(node.used_of(t), allocated.0[t].saturating_add(occupied.0[t]));
                }
            }
        }
    }

    #[test]
    fn nodes_stay_small() {
        // Nodes are the largest population; their resources are packed (the
        // first types inline, the rest boxed when used).
        assert!(
            std::mem::size_of::<Node>() <= 256,
            "{}",
            std::mem::size_of::<Node>()
        );
    }

    #[test]
    fn allocation_records_stay_small() {
        // Every allocation writes one (and the arena copies them as it grows):
        // the size (interned) and a pending release (rare) are out of line.
        assert!(
            std::mem::size_of::<Allocation>() <= 160,
            "{}",
            std::mem::size_of::<Allocation>()
        );
    }
}
