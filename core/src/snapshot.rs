//! Immutable views of a partition for readers: scenario expectations, tests,
//! REST and metrics. A snapshot is built by the scheduling thread and handed out
//! by value; readers never see live state or hold a lock on it.

use std::collections::BTreeMap;

use serde::Serialize;

/// A sparse resource as readers see it: name to quantity (vcore in milli-cores).
/// Types with a zero quantity are left out.
pub type ResourceMap = BTreeMap<String, i64>;

/// One partition at one moment.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PartitionSnapshot {
    /// Qualified name, `[rmID]name`.
    pub name: String,
    /// The RM that owns the partition.
    pub rm_id: String,
    /// `fair` or `binpacking`.
    pub node_sort_policy: String,
    /// Sum of the capacities of all nodes.
    pub total_capacity: ResourceMap,
    /// Queues, parents before children, siblings by name.
    pub queues: Vec<QueueSnapshot>,
    /// Applications, by id.
    pub applications: Vec<ApplicationSnapshot>,
    /// Applications the partition refused, by id (the latest refusal of an
    /// id), state `Rejected` with the reason; never in `applications`.
    pub rejected_applications: Vec<ApplicationSnapshot>,
    /// Nodes, by id.
    pub nodes: Vec<NodeSnapshot>,
    /// Allocations, by allocation id.
    pub allocations: Vec<AllocationSnapshot>,
    /// Whether preemption runs in this partition.
    pub preemption_enabled: bool,
    /// Node sort weights by resource type, as configured (empty: the default,
    /// vcore 1 and memory 1).
    pub node_sort_weights: BTreeMap<String, f64>,
    /// Placement rules as configured (empty: the implicit `provided` rule).
    pub placement_rules: Vec<crate::config::PlacementRuleConfig>,
}

/// A queue.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct QueueSnapshot {
    /// Full path, e.g. `root.a`.
    pub path: String,
    /// True for a parent queue (it holds queues, never applications).
    pub parent: bool,
    /// `Active` or `Draining`.
    pub state: String,
    /// Created by a placement rule rather than the configuration.
    pub dynamic: bool,
    /// Configured guaranteed resources (empty when none).
    pub guaranteed: ResourceMap,
    /// Configured maximum (empty = unlimited; a type left out is unlimited).
    pub max: ResourceMap,
    /// Resources allocated to the queue and everything below it.
    pub allocated: ResourceMap,
    /// Resources asked for and not yet allocated, below this queue.
    pub pending: ResourceMap,
    /// Configured application limit (0 = unlimited).
    pub max_applications: u64,
    /// Applications below this queue that count against maxapplications.
    pub running_applications: u64,
    /// Effective properties after inheritance.
    pub properties: BTreeMap<String, String>,
    /// What dynamic children created under this queue get, when configured.
    pub child_template: Option<crate::config::ChildTemplateConfig>,
}

/// An application.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ApplicationSnapshot {
    /// Application id.
    pub id: String,
    /// Full path of the leaf queue it was placed in.
    pub queue: String,
    /// Owner.
    pub user: String,
    /// Groups of the owner.
    pub groups: Vec<String>,
    /// The one group whose limits and usage the application counts against
    /// (the first of the owner's groups with a limit on the queue path, as
    /// upstream tracks it), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_group: Option<String>,
    /// State name: New, Accepted, Running, Completing, Completed, Rejected, ...
    pub state: String,
    /// Resources allocated to the application's real allocations.
    pub allocated: ResourceMap,
    /// Resources held by the application's placeholders (not in
    /// `allocated`; its queue and nodes count both, as upstream).
    pub placeholder: ResourceMap,
    /// Resources asked for and not yet allocated.
    pub pending: ResourceMap,
    /// Pending asks (an ask counts once however many allocations it still wants).
    pub pending_asks: Vec<AskSnapshot>,
    /// Number of allocations.
    pub allocation_count: usize,
    /// Submission time, nanoseconds since the Unix epoch.
    pub submission_time: u64,
    /// Every state the application entered, oldest first, `New` included.
    pub state_log: Vec<StateChange>,
    /// Gang placeholders per task group (empty without gang scheduling).
    pub placeholders: Vec<PlaceholderSnapshot>,
    /// Why the application was rejected (empty unless its state is
    /// `Rejected`); for a rejected application `queue` is the queue it asked
    /// for.
    pub rejected_message: String,
}

/// An application state transition.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StateChange {
    /// The state entered.
    pub state: String,
    /// When, nanoseconds since the Unix epoch.
    pub time: u64,
}

/// The placeholders of one gang task group.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PlaceholderSnapshot {
    /// Task group name.
    pub task_group: String,
    /// Placeholders asked for.
    pub count: u32,
    /// Placeholders replaced by real allocations.
    pub replaced: u32,
    /// Placeholders that went otherwise (timed out, released, ask removed).
    pub timed_out: u32,
}

/// A pending ask.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AskSnapshot {
    /// Allocation key.
    pub allocation_key: String,
    /// Resources of one allocation.
    pub resource: ResourceMap,
    /// Allocations still wanted.
    pub pending_allocations: u32,
    /// Ask priority.
    pub priority: i32,
    /// Node reserved for this ask, if any.
    pub reserved_node: Option<String>,
    /// Arrival time, nanoseconds since the Unix epoch.
    pub created: u64,
    /// Tags from the RM.
    pub tags: BTreeMap<String, String>,
    /// Gang task group (empty when none).
    pub task_group: String,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Originator of its application.
    pub originator: bool,
}

/// A node.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct NodeSnapshot {
    /// Node id.
    pub id: String,
    /// False while draining.
    pub schedulable: bool,
    /// Schedulable capacity reported by the RM.
    pub capacity: ResourceMap,
    /// Used by something other than this scheduler.
    pub occupied: ResourceMap,
    /// Allocated by this scheduler.
    pub allocated: ResourceMap,
    /// capacity - occupied - allocated (may be negative after a shrink).
    pub available: ResourceMap,
    /// Number of allocations on the node.
    pub allocation_count: usize,
    /// Allocation key of the ask holding a reservation on the node, if any.
    pub reserved_by: Option<String>,
    /// Attributes reported by the RM.
    pub attributes: BTreeMap<String, String>,
}

/// An allocation.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AllocationSnapshot {
    /// Allocation key (the ask's).
    pub allocation_key: String,
    /// Allocation id, unique per allocation.
    pub allocation_id: String,
    /// Application id.
    pub application_id: String,
    /// Leaf queue path.
    pub queue: String,
    /// Node id.
    pub node_id: String,
    /// Resources.
    pub resource: ResourceMap,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Ask priority.
    pub priority: i32,
    /// When the allocation was made or recovered, nanoseconds since the epoch.
    pub created: u64,
    /// When its ask arrived (0 when the ask is gone, as for a recovered
    /// allocation), nanoseconds since the epoch.
    pub requested: u64,
    /// Gang task group (empty when none).
    pub task_group: String,
    /// Originator of its application.
    pub originator: bool,
    /// Tags copied from the ask.
    pub tags: BTreeMap<String, String>,
    /// Released by preemption, waiting for the RM's confirmation.
    pub preempted: bool,
}

impl PartitionSnapshot {
    /// The queue with this full path.
    pub fn queue(&self, path: &str) -> Option<&QueueSnapshot> {
        self.queues.iter().find(|q| q.path == path)
    }

    /// The application with this id.
    pub fn application(&self, id: &str) -> Option<&ApplicationSnapshot> {
        self.applications.iter().find(|a| a.id == id)
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&NodeSnapshot> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
