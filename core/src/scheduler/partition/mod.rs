//! A partition: the arenas of queues, applications, asks, allocations and nodes,
//! the node index, and the bookkeeping that keeps usage totals and sort orders
//! up to date incrementally.
//!
//! Owned by the scheduling thread (see `engine.rs`); nothing here is shared or
//! locked. Every change of usage goes through `add_usage`/`remove_usage` and every
//! change of an ordering key through the `rekey_*` functions, so totals and sort
//! orders never need a rescan.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::sync::Arc;

use slab::Slab;

use super::heap::Slots;
use super::objects::*;
use crate::config::{NodeSortKind, PartitionConfig};
use crate::resources::{Lanes, Resource, ResourceNames};

mod configure;
mod exhausted;
mod ordering;
mod outbox;
mod readers;
mod usage;

pub use ordering::weighted;
pub use outbox::{
    AllocationBatch, ApplicationBatch, Outbox, PendingEvent, Released, StateChange, WireSizes,
};
pub use readers::RejectedApp;

/// Index of the root queue.
pub const ROOT: QueueId = 0;

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
    /// Owner's groups.
    pub groups: Vec<String>,
    /// Every state entered with its clock time, oldest first.
    pub state_log: Vec<(AppState, u64)>,
    /// Why it was rejected (empty unless `state` is `Rejected`).
    pub rejected_message: String,
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
    /// Refused applications kept for readers, oldest first, at most
    /// `completed_apps_kept`.
    pub rejected_apps: VecDeque<CompletedApp>,
    /// How many of them are kept.
    pub completed_apps_kept: usize,
    /// Asks.
    pub asks: Slab<Ask>,
    /// The distinct ask sizes the asks point at.
    pub sizes: Sizes,
    /// The wire form of each size a lease carries.
    pub wire_sizes: WireSizes,
    /// Allocations.
    pub allocs: Slab<Allocation>,
    /// Allocation by id, but for those in `unfiled_ids`: read it after
    /// [`Partition::file_ids`].
    pub alloc_by_id: FastMap<Arc<str>, AllocId>,
    /// Leases made in the current pass whose ids are not yet in
    /// `alloc_by_id` (see `place`): filed after the pass's results are
    /// sent, or before anything reads the map.
    pub unfiled_ids: Vec<(Arc<str>, AllocId)>,
    /// Nodes.
    pub nodes: Slab<Node>,
    /// Node by id.
    pub node_by_id: FastMap<Arc<str>, NodeId>,
    /// Schedulable nodes by usage score.
    pub node_index: BTreeSet<NodeKey>,
    /// Schedulable nodes where not even the smallest pending ask fits, by
    /// usage score. Kept out of `node_index` so placement never walks them
    /// (binpacking with most nodes full would otherwise scan them for every ask).
    pub exhausted_nodes: exhausted::ExhaustedNodes,
    /// A lower bound of every pending ask, type by type (`None` when nothing is
    /// pending). Only ever lowered while asks are pending, so it stays a bound.
    pub pending_floor: Option<Resource>,
    /// Asks with allocations still wanted.
    pub pending_ask_count: u64,
    /// Allocations the last scheduling pass made (room reserved for the
    /// next pass's results).
    pub last_pass_made: usize,
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
    /// Where an allocation id is put together before its `Arc` copy
    /// (`place`): kept so its room is reused.
    pub(crate) id_scratch: String,
    /// Queues parked (taken out of their parent's order) in the current pass.
    pub parked_queues: Vec<QueueId>,
    /// Applications parked in the current pass.
    pub parked_apps: Vec<AppId>,
    /// Grace period of a Completing application, in nanoseconds.
    pub completing_timeout: u64,
    /// Time between two rounds of the queue cleaner, in nanoseconds.
    pub queue_cleanup_interval: u64,
    /// When the next cleaner round is due (0: not scheduled yet).
    pub next_cleanup: u64,
    /// Some queue may be removable (draining or dynamic): the cleaner has
    /// work, and its rounds are due as timers.
    pub cleanup_wanted: bool,
    /// The scheduler's resource names.
    pub names: Arc<ResourceNames>,
    /// Applications whose asks changed since their last re-key.
    pub dirty_apps: Vec<AppId>,
    /// A reservation ended during the current pass, so a node that asks
    /// earlier in the pass passed over may now take them: another pass is due.
    pub freed_in_pass: bool,
    /// Parts of the current pass's results that went to the RM already (an
    /// offer run sent in parts): when there are any, the flush after the
    /// pass sends the last part, even an empty one, so the RM knows the run
    /// is over.
    pub parts_sent: u32,
    /// The pass's end (its parked queues and applications back in order,
    /// its exhausted nodes merged) waits until its results are sent: set
    /// by a pass that sent an offer run in parts, so the run's last part
    /// goes out without waiting for that bookkeeping
    /// ([`Partition::finish_pass`], after the flush).
    pub finish_after_flush: bool,
    /// The current pass's parts go to the RM on the scheduling thread
    /// (its callback's `offer_runs_inline`), the last one too.
    pub parts_inline: bool,
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
            rejected_apps: VecDeque::new(),
            completed_apps_kept: 10_000,
            asks: Slab::new(),
            sizes: Sizes::default(),
            wire_sizes: WireSizes::default(),
            allocs: Slab::new(),
            alloc_by_id: FastMap::default(),
            unfiled_ids: Vec::new(),
            nodes: Slab::new(),
            node_by_id: FastMap::default(),
            node_index: BTreeSet::new(),
            exhausted_nodes: exhausted::ExhaustedNodes::default(),
            pending_floor: None,
            pending_ask_count: 0,
            last_pass_made: 0,
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
            id_scratch: String::new(),
            parked_queues: Vec::new(),
            parked_apps: Vec::new(),
            completing_timeout: 30_000_000_000,
            queue_cleanup_interval: 10_000_000_000,
            next_cleanup: 0,
            cleanup_wanted: false,
            names,
            dirty_apps: Vec::new(),
            freed_in_pass: false,
            parts_sent: 0,
            finish_after_flush: false,
            parts_inline: false,
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
