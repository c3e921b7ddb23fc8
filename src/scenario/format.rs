//! The scenario file format: what an author writes, decoded strictly (an
//! unknown key is an error with its line). `tests/scenarios/README.md` is the
//! user's guide to these types.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::expect::Expect;
use super::quantity::{DurationText, Resources};

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name printed with PASS/FAIL.
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Queue configuration text (YAML), given at registration.
    pub config: String,
    /// RM id used to register; partitions become `[rm_id]name`.
    #[serde(default = "default_rm_id")]
    pub rm_id: String,
    /// Partition every node, app, ask and expectation refers to.
    #[serde(default = "default_partition")]
    pub partition: String,
    /// Scheduler settings that differ from the defaults.
    #[serde(default)]
    pub options: Options,
    /// Check the partition invariants after every step (default true).
    #[serde(default = "default_true")]
    pub check_invariants: bool,
    /// Predicate refusals: when given (even empty), the RM registers with
    /// predicates on and its callback refuses every (ask, node) a rule matches.
    pub predicates: Option<Vec<PredicateRule>>,
    /// Nodes added during setup (after the apps).
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Applications added during setup (first).
    #[serde(default)]
    pub apps: Vec<App>,
    /// Asks added during setup (last).
    #[serde(default)]
    pub asks: Vec<Ask>,
    /// What happens after setup, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

fn default_rm_id() -> String {
    "rm".to_owned()
}

fn default_partition() -> String {
    "default".to_owned()
}

fn default_true() -> bool {
    true
}

fn default_user() -> String {
    "testuser".to_owned()
}

fn default_count() -> i32 {
    1
}

/// One refusal of the RM's predicates callback: it matches a call when every
/// field given matches (a rule with only `node` refuses everything there).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredicateRule {
    /// Node refused.
    pub node: String,
    /// Only for this allocation key (default: every ask).
    pub key: Option<String>,
    /// Only for allocation (`true`) or only for reservation (`false`) checks
    /// (default: both).
    pub allocate: Option<bool>,
}

impl PredicateRule {
    /// Whether this rule refuses `args`.
    pub fn refuses(&self, args: &unisched_si::PredicatesArgs) -> bool {
        self.node == args.node_id
            && self.key.as_ref().is_none_or(|k| *k == args.allocation_key)
            && self.allocate.is_none_or(|a| a == args.allocate)
    }
}

/// Scheduler settings a scenario may change.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// How long an ask waits without a fit before it reserves a node.
    pub reservation_delay: Option<DurationText>,
    /// How long an app stays Completing before it is Completed.
    pub completing_timeout: Option<DurationText>,
    /// How long a reservation lasts while the queue headroom does not fit its ask.
    pub reservation_timeout: Option<DurationText>,
    /// How often empty draining and dynamic queues are removed.
    pub queue_cleanup_interval: Option<DurationText>,
}

/// A node as the RM reports it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Node id.
    pub id: String,
    /// Schedulable capacity.
    #[serde(default)]
    pub capacity: Resources,
    /// Used by something other than the scheduler.
    pub occupied: Option<Resources>,
    /// Extra attributes (`si/hostname` and `si/node-partition` are filled in).
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Allocations already running on the node (recovery).
    #[serde(default)]
    pub allocations: Vec<ExistingAllocation>,
    /// Add the node draining (CREATE_DRAIN) instead of schedulable.
    #[serde(default)]
    pub draining: bool,
}

/// An allocation that exists before the scheduler learns of it (recovery).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExistingAllocation {
    /// Allocation key.
    pub key: String,
    /// Application id.
    pub app: String,
    /// Resources.
    pub resource: Resources,
    /// Allocation id (default: the key).
    pub id: Option<String>,
    /// Node id; only for the `recover` step (a node's list implies its node).
    pub node: Option<String>,
    /// Priority.
    #[serde(default)]
    pub priority: i32,
    /// A gang placeholder.
    #[serde(default)]
    pub placeholder: bool,
    /// Gang task group (`taskGroupName`).
    #[serde(default)]
    pub task_group: String,
    /// Tags (`allocationTags`).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Originator of the application.
    #[serde(default)]
    pub originator: bool,
    /// `preemptionPolicy.allowPreemptSelf`; no policy is sent unless this or
    /// `allow_preempt_other` is given.
    pub allow_preempt_self: Option<bool>,
    /// `preemptionPolicy.allowPreemptOther`.
    pub allow_preempt_other: Option<bool>,
}

/// An application.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// Application id.
    pub id: String,
    /// Queue asked for (full path); may be empty when placement rules decide.
    #[serde(default)]
    pub queue: String,
    /// Submitting user.
    #[serde(default = "default_user")]
    pub user: String,
    /// Groups of the user.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Total resources of the gang's placeholders (`placeholderAsk`).
    pub placeholder_ask: Option<Resources>,
    /// Gang scheduling style: `Soft` (default) or `Hard`.
    #[serde(default)]
    pub gang_style: String,
    /// Execution timeout (`executionTimeoutMilliSeconds`); also the placeholder timeout.
    pub execution_timeout: Option<DurationText>,
}

/// An ask.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// Allocation key.
    pub key: String,
    /// Application id.
    pub app: String,
    /// Resources of one allocation.
    pub resource: Resources,
    /// Number of allocations wanted (`maxAllocations`).
    #[serde(default = "default_count")]
    pub count: i32,
    /// Priority.
    #[serde(default)]
    pub priority: i32,
    /// Gang task group (`taskGroupName`).
    #[serde(default)]
    pub task_group: String,
    /// A gang placeholder.
    #[serde(default)]
    pub placeholder: bool,
    /// Tags, e.g. `yunikorn.apache.org/requiredNode: node-1`.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `preemptionPolicy.allowPreemptSelf` (true when only the other field
    /// is given); no policy is sent unless one of the two is given.
    pub allow_preempt_self: Option<bool>,
    /// `preemptionPolicy.allowPreemptOther` (false when only the other field
    /// is given).
    pub allow_preempt_other: Option<bool>,
    /// Originator of the application.
    #[serde(default)]
    pub originator: bool,
}

/// A release of allocations: one key, one allocation id, or (neither) every
/// allocation of the app.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// Application id.
    pub app: String,
    /// Allocation key.
    pub key: Option<String>,
    /// Allocation id.
    pub id: Option<String>,
    /// Termination type sent (default `STOPPED_BY_RM`); the RM confirms a
    /// core's release by sending it back with the same type.
    pub termination: Option<Termination>,
}

/// A termination type, written by its wire name (`PLACEHOLDER_REPLACED`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Termination(pub unisched_si::TerminationType);

impl TryFrom<String> for Termination {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        unisched_si::TerminationType::from_str_name(&text.to_ascii_uppercase())
            .map(Self)
            .ok_or_else(|| {
                format!(
                    "unknown termination {text:?}: use STOPPED_BY_RM, TIMEOUT, \
                     PREEMPTED_BY_SCHEDULER or PLACEHOLDER_REPLACED"
                )
            })
    }
}

/// A release of asks: one key or (none) every ask of the app.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskRelease {
    /// Application id.
    pub app: String,
    /// Allocation key.
    pub key: Option<String>,
}

/// A node action sent with `NodeRequest`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAction {
    /// Node id.
    pub id: String,
    /// What to do.
    pub action: Action,
    /// New capacity (update).
    pub capacity: Option<Resources>,
    /// New occupied resources (update).
    pub occupied: Option<Resources>,
    /// Extra attributes.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
}

/// A node action: a name, or a raw wire number to send something invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ActionText")]
pub struct Action(pub unisched_si::node_info::ActionFromRm, pub i32);

/// A node action as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ActionText {
    /// `drain`, `DRAIN_NODE`, ...
    Name(String),
    /// A wire number, e.g. `99`.
    Code(i32),
}

impl TryFrom<ActionText> for Action {
    type Error = String;

    fn try_from(text: ActionText) -> Result<Self, String> {
        use unisched_si::node_info::ActionFromRm as A;
        match text {
            ActionText::Code(code) => Ok(Self(
                A::try_from(code).unwrap_or(A::UnknownActionFromRm),
                code,
            )),
            ActionText::Name(name) => {
                let action = match name.to_ascii_lowercase().as_str() {
                    "create" => A::Create,
                    "create_drain" => A::CreateDrain,
                    "update" => A::Update,
                    "drain" | "drain_node" => A::DrainNode,
                    "drain_to_schedulable" => A::DrainToSchedulable,
                    "decommission" | "decomission" => A::Decomission,
                    _ => {
                        return Err(format!(
                            "unknown node action {name:?}: use create, create_drain, update, \
                             drain, drain_to_schedulable, decommission or a wire number"
                        ));
                    }
                };
                Ok(Self(action, action as i32))
            }
        }
    }
}

/// One step: at most one action, then optional expectations checked once the
/// scheduler has settled.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawStep")]
pub struct Step {
    /// Printed with failures of this step.
    pub label: Option<String>,
    /// Partition the step's requests and expectations refer to (default: the
    /// scenario's).
    pub partition: Option<String>,
    /// What the step does, if anything.
    pub action: Option<StepAction>,
    /// The call of the action must fail with an error containing this text.
    pub error: Option<String>,
    /// Checked after the action, once the scheduler has settled.
    pub expect: Option<Expect>,
}

/// The action of a step.
#[derive(Debug, Clone)]
pub enum StepAction {
    /// Add (CREATE) nodes.
    AddNodes(Vec<Node>),
    /// Add applications.
    AddApps(Vec<App>),
    /// Add or update asks.
    AddAsks(Vec<Ask>),
    /// Report existing allocations through `AllocationRequest.allocations`.
    Recover(Vec<ExistingAllocation>),
    /// Release allocations.
    Release(Vec<Release>),
    /// Release asks.
    ReleaseAsks(Vec<AskRelease>),
    /// Node actions.
    Nodes(Vec<NodeAction>),
    /// Remove applications.
    RemoveApps(Vec<String>),
    /// Replace the configuration text and call `update_configuration`.
    Reload(String),
    /// Move the clock forward and wake the scheduler.
    Advance(DurationText),
}

impl StepAction {
    /// The key the action is written under.
    pub fn keyword(&self) -> &'static str {
        match self {
            Self::AddNodes(_) => "add_nodes",
            Self::AddApps(_) => "add_apps",
            Self::AddAsks(_) => "add_asks",
            Self::Recover(_) => "recover",
            Self::Release(_) => "release",
            Self::ReleaseAsks(_) => "release_asks",
            Self::Nodes(_) => "nodes",
            Self::RemoveApps(_) => "remove_apps",
            Self::Reload(_) => "reload",
            Self::Advance(_) => "advance",
        }
    }
}

/// A step as written, before checking it holds one action.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    label: Option<String>,
    partition: Option<String>,
    add_nodes: Option<Vec<Node>>,
    add_apps: Option<Vec<App>>,
    add_asks: Option<Vec<Ask>>,
    recover: Option<Vec<ExistingAllocation>>,
    release: Option<Vec<Release>>,
    release_asks: Option<Vec<AskRelease>>,
    nodes: Option<Vec<NodeAction>>,
    remove_apps: Option<Vec<String>>,
    reload: Option<String>,
    advance: Option<DurationText>,
    error: Option<String>,
    expect: Option<Expect>,
}

impl TryFrom<RawStep> for Step {
    type Error = String;

    fn try_from(raw: RawStep) -> Result<Self, String> {
        let actions: Vec<StepAction> = [
            raw.add_nodes.map(StepAction::AddNodes),
            raw.add_apps.map(StepAction::AddApps),
            raw.add_asks.map(StepAction::AddAsks),
            raw.recover.map(StepAction::Recover),
            raw.release.map(StepAction::Release),
            raw.release_asks.map(StepAction::ReleaseAsks),
            raw.nodes.map(StepAction::Nodes),
            raw.remove_apps.map(StepAction::RemoveApps),
            raw.reload.map(StepAction::Reload),
            raw.advance.map(StepAction::Advance),
        ]
        .into_iter()
        .flatten()
        .collect();
        if actions.len() > 1 {
            let names: Vec<_> = actions.iter().map(StepAction::keyword).collect();
            return Err(format!(
                "a step holds at most one action, found {}",
                names.join(", ")
            ));
        }
        let action = actions.into_iter().next();
        if action.is_none() && raw.expect.is_none() {
            return Err("a step needs an action or an expect block".to_owned());
        }
        if raw.error.is_some() && matches!(action, None | Some(StepAction::Advance(_))) {
            return Err("`error` needs an action that calls the scheduler".to_owned());
        }
        Ok(Self {
            label: raw.label,
            partition: raw.partition,
            action,
            error: raw.error,
            expect: raw.expect,
        })
    }
}

/// The preemption policy sent for `allow_preempt_self` / `allow_preempt_other`
/// as written: none when neither is given (the core then treats the ask as
/// upstream does), else the SI defaults for the one left out.
pub fn preemption_policy(
    allow_self: Option<bool>,
    allow_other: Option<bool>,
) -> Option<unisched_si::PreemptionPolicy> {
    (allow_self.is_some() || allow_other.is_some()).then(|| unisched_si::PreemptionPolicy {
        allow_preempt_self: allow_self.unwrap_or(true),
        allow_preempt_other: allow_other.unwrap_or(false),
    })
}
