//! Expectations: what an `expect` block may state, and how each statement is
//! checked against a partition snapshot and everything the RM callback recorded.
//!
//! Resource statements compare only the resource types they name (`memory: 0`
//! states that no memory is used); recorded callbacks are cumulative from the
//! start of the scenario.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::Deserialize;
use unisched_core::snapshot::{AskSnapshot, PartitionSnapshot};
use unisched_shim_api::recording::Recorded;
use unisched_si as si;

use super::quantity::{Resources, render_resources};
use super::report::{Failure, StepRef};

/// An `expect` block. Every field is optional; each one present is checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Number of allocations in the partition.
    pub allocations: Option<usize>,
    /// Allocations per node id (a node not listed is not checked).
    #[serde(default)]
    pub allocations_per_node: BTreeMap<String, usize>,
    /// Allocations per leaf queue path.
    #[serde(default)]
    pub allocations_per_queue: BTreeMap<String, usize>,
    /// Allocations per application id.
    #[serde(default)]
    pub allocations_per_app: BTreeMap<String, usize>,
    /// Queues by full path.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueExpect>,
    /// Nodes by id.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeExpect>,
    /// Applications by id.
    #[serde(default)]
    pub apps: BTreeMap<String, AppExpect>,
    /// Asks by allocation key.
    #[serde(default)]
    pub asks: BTreeMap<String, AskExpect>,
    /// Allocation count of every node, highest first (for packing and
    /// spreading, where which node gets what is a tie).
    pub node_allocation_counts: Option<Vec<usize>>,
    /// Number of nodes holding a reservation.
    pub reservations: Option<usize>,
    /// Number of pending asks holding a reservation.
    pub reserved_asks: Option<usize>,
    /// Each must match at least one rejected ask.
    #[serde(default)]
    pub rejected_asks: Vec<Rejection>,
    /// Each must match at least one rejected application.
    #[serde(default)]
    pub rejected_apps: Vec<Rejection>,
    /// Each must match at least one rejected node.
    #[serde(default)]
    pub rejected_nodes: Vec<Rejection>,
    /// Each must match at least one rejected allocation.
    #[serde(default)]
    pub rejected_allocations: Vec<Rejection>,
    /// Total number of rejections of every kind.
    pub rejections: Option<usize>,
    /// Application ids that must have been accepted.
    #[serde(default)]
    pub accepted_apps: Vec<String>,
    /// Node ids that must have been accepted.
    #[serde(default)]
    pub accepted_nodes: Vec<String>,
    /// Each must match at least one released allocation.
    #[serde(default)]
    pub released: Vec<ReleaseExpect>,
    /// Total number of released allocations reported to the RM.
    pub released_count: Option<usize>,
    /// The last scheduling state reported for an ask.
    #[serde(default)]
    pub scheduling_states: Vec<SchedulingStateExpect>,
    /// Event records sent to the RM: each must match a recorded event, in
    /// this order (other events may come between them).
    #[serde(default)]
    pub events: Vec<EventExpect>,
}

/// An event record to look for: every field given must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventExpect {
    /// `REQUEST`, `APP`, `NODE` or `QUEUE`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Object id (ask key, application, node or queue path).
    pub object: Option<String>,
    /// Reference id (the ask, allocation or application it concerns).
    pub reference: Option<String>,
    /// `NONE`, `SET`, `ADD` or `REMOVE`.
    pub change: Option<String>,
    /// Change detail by its wire name, e.g. `NODE_RESERVATION`.
    pub detail: Option<String>,
    /// Text the message must contain (case-insensitive).
    pub message: Option<String>,
}

/// Statements about a queue.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueExpect {
    /// False: the queue must not exist.
    pub exists: Option<bool>,
    /// `Active` or `Draining`.
    pub state: Option<String>,
    /// Allocated usage.
    pub allocated: Option<Resources>,
    /// Pending demand.
    pub pending: Option<Resources>,
    /// Configured max.
    pub max: Option<Resources>,
    /// Configured guaranteed.
    pub guaranteed: Option<Resources>,
    /// Applications counting against maxapplications.
    pub running_apps: Option<u64>,
}

/// Statements about a node.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeExpect {
    /// False: the node must not exist.
    pub exists: Option<bool>,
    /// False while draining.
    pub schedulable: Option<bool>,
    /// Allocated by the scheduler.
    pub allocated: Option<Resources>,
    /// Available.
    pub available: Option<Resources>,
    /// Capacity.
    pub capacity: Option<Resources>,
    /// Number of allocations.
    pub allocations: Option<usize>,
    /// True: some ask holds a reservation on the node; false: none does.
    pub reserved: Option<bool>,
    /// The allocation key holding the reservation.
    pub reserved_by: Option<String>,
}

/// Statements about an application.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppExpect {
    /// False: the application must not exist.
    pub exists: Option<bool>,
    /// Current state (from the snapshot).
    pub state: Option<String>,
    /// Every state reported through `UpdateApplication`, in order.
    pub states: Option<Vec<String>>,
    /// Leaf queue it was placed in.
    pub queue: Option<String>,
    /// Allocated usage of real allocations.
    pub allocated: Option<Resources>,
    /// Usage of placeholders (apart from `allocated`).
    pub placeholder: Option<Resources>,
    /// Pending demand.
    pub pending: Option<Resources>,
    /// Number of allocations.
    pub allocations: Option<usize>,
}

/// Statements about an ask.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskExpect {
    /// Application id (needed only when two apps use the same key).
    pub app: Option<String>,
    /// Allocations still wanted (0 = not pending).
    pub pending: Option<u32>,
    /// True: the ask holds a reservation; false: it holds none.
    pub reserved: Option<bool>,
    /// The node it reserved.
    pub reserved_node: Option<String>,
}

/// A rejection to look for: every field given must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// Allocation key (asks, allocations).
    pub key: Option<String>,
    /// Application id.
    pub app: Option<String>,
    /// Node id (nodes).
    pub node: Option<String>,
    /// Text the reason must contain (case-insensitive). Empty reasons never match.
    #[serde(default)]
    pub reason: String,
}

/// A released allocation to look for: every field given must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseExpect {
    /// Allocation key.
    pub key: Option<String>,
    /// Application id.
    pub app: Option<String>,
    /// `STOPPED_BY_RM`, `TIMEOUT`, `PREEMPTED_BY_SCHEDULER`, `PLACEHOLDER_REPLACED`.
    pub termination: Option<String>,
    /// How many releases must match (default: at least one).
    pub count: Option<usize>,
}

/// The last scheduling state reported for an ask.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingStateExpect {
    /// Allocation key.
    pub key: String,
    /// `SKIPPED`, `SCHEDULED`, `RESERVED`, `FAILED`.
    pub state: String,
    /// Text the reason must contain.
    pub reason: Option<String>,
}

/// Collects the outcome of checks made after one step.
#[derive(Debug)]
pub struct Checks {
    step: StepRef,
    /// Number of checks made.
    pub count: usize,
    /// Checks that did not hold.
    pub failures: Vec<Failure>,
}

impl Checks {
    /// Checks made after `step`.
    pub fn new(step: StepRef) -> Self {
        Self {
            step,
            count: 0,
            failures: Vec::new(),
        }
    }

    /// Records one check.
    pub fn check(
        &mut self,
        ok: bool,
        subject: impl Into<String>,
        expected: impl Display,
        actual: impl Display,
    ) {
        self.count += 1;
        if !ok {
            self.failures.push(Failure {
                step: self.step.clone(),
                subject: subject.into(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
    }

    /// Records one check whose description is built only when it fails: the
    /// invariants make thousands of checks per soak step, and formatting
    /// the ones that hold was most of their cost.
    pub fn check_lazy<S: Into<String>, E: Display, A: Display>(
        &mut self,
        ok: bool,
        describe: impl FnOnce() -> (S, E, A),
    ) {
        self.count += 1;
        if !ok {
            let (subject, expected, actual) = describe();
            self.failures.push(Failure {
                step: self.step.clone(),
                subject: subject.into(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
    }

    /// Records a check of two equal values.
    pub fn eq<T: PartialEq + Display>(
        &mut self,
        subject: impl Into<String>,
        expected: &T,
        actual: &T,
    ) {
        self.check(expected == actual, subject, expected, actual);
    }

    /// Records a check of the resource types `expected` names.
    pub fn resources(
        &mut self,
        subject: impl Into<String>,
        expected: &Resources,
        actual: &BTreeMap<String, i64>,
    ) {
        let ok = expected
            .0
            .iter()
            .all(|(name, value)| actual.get(name).copied().unwrap_or(0) == *value);
        self.check(
            ok,
            subject,
            render_resources(&expected.0),
            render_resources(actual),
        );
    }
}

/// Checks every statement of `expect`.
pub fn check(expect: &Expect, snapshot: &PartitionSnapshot, recorded: &Recorded, out: &mut Checks) {
    check_counts(expect, snapshot, out);
    for (path, want) in &expect.queues {
        check_queue(path, want, snapshot, out);
    }
    for (id, want) in &expect.nodes {
        check_node(id, want, snapshot, out);
    }
    for (id, want) in &expect.apps {
        check_app(id, want, snapshot, recorded, out);
    }
    for (key, want) in &expect.asks {
        check_ask(key, want, snapshot, out);
    }
    check_recorded(expect, recorded, out);
}

fn check_counts(expect: &Expect, snapshot: &PartitionSnapshot, out: &mut Checks) {
    let allocations = &snapshot.allocations;
    if let Some(want) = expect.allocations {
        out.eq("allocations in the partition", &want, &allocations.len());
    }
    let count = |pick: &dyn Fn(&unisched_core::snapshot::AllocationSnapshot) -> bool| {
        allocations.iter().filter(|a| pick(a)).count()
    };
    for (node, want) in &expect.allocations_per_node {
        out.eq(
            format!("allocations on node {node}"),
            want,
            &count(&|a| &a.node_id == node),
        );
    }
    for (queue, want) in &expect.allocations_per_queue {
        out.eq(
            format!("allocations in queue {queue}"),
            want,
            &count(&|a| &a.queue == queue),
        );
    }
    for (app, want) in &expect.allocations_per_app {
        out.eq(
            format!("allocations of app {app}"),
            want,
            &count(&|a| &a.application_id == app),
        );
    }
    if let Some(want) = &expect.node_allocation_counts {
        let mut counts: Vec<usize> = snapshot
            .nodes
            .iter()
            .map(|n| count(&|a| a.node_id == n.id))
            .collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        out.eq(
            "allocations per node, highest first",
            &format!("{want:?}"),
            &format!("{counts:?}"),
        );
    }
    if let Some(want) = expect.reserved_asks {
        let reserved = snapshot
            .applications
            .iter()
            .flat_map(|a| a.pending_asks.iter())
            .filter(|ask| ask.reserved_node.is_some())
            .count();
        out.eq("pending asks holding a reservation", &want, &reserved);
    }
    if let Some(want) = expect.reservations {
        let reserved = snapshot
            .nodes
            .iter()
            .filter(|n| n.reserved_by.is_some())
            .count();
        out.eq("nodes holding a reservation", &want, &reserved);
    }
}

/// Checks that an object exists (any statement about it but `exists: false`
/// says it does) or, with `exists: false`, that it does not; returns the
/// object when its other statements are to be checked. An absent object
/// fails here whatever else the block says about it.
fn present<'a, T>(
    out: &mut Checks,
    subject: String,
    want: Option<bool>,
    found: Option<&'a T>,
) -> Option<&'a T> {
    let want = want.unwrap_or(true);
    let shown = |b: bool| if b { "exists" } else { "does not exist" };
    let actual = match found {
        Some(_) => format!("{subject} exists"),
        None => format!("{subject} does not exist"),
    };
    out.check(want == found.is_some(), subject, shown(want), actual);
    found.filter(|_| want)
}

fn check_queue(path: &str, want: &QueueExpect, snapshot: &PartitionSnapshot, out: &mut Checks) {
    let queue = snapshot.queue(path);
    let Some(queue) = present(out, format!("queue {path}"), want.exists, queue) else {
        return;
    };
    if let Some(state) = &want.state {
        out.eq(format!("queue {path} state"), state, &queue.state);
    }
    let resources = [
        ("allocated", &want.allocated, &queue.allocated),
        ("pending", &want.pending, &queue.pending),
        ("max", &want.max, &queue.max),
        ("guaranteed", &want.guaranteed, &queue.guaranteed),
    ];
    for (what, expected, actual) in resources {
        if let Some(expected) = expected {
            out.resources(format!("queue {path} {what}"), expected, actual);
        }
    }
    if let Some(apps) = want.running_apps {
        out.eq(
            format!("queue {path} running applications"),
            &apps,
            &queue.running_applications,
        );
    }
}

fn check_node(id: &str, want: &NodeExpect, snapshot: &PartitionSnapshot, out: &mut Checks) {
    let node = snapshot.node(id);
    let Some(node) = present(out, format!("node {id}"), want.exists, node) else {
        return;
    };
    if let Some(schedulable) = want.schedulable {
        out.eq(
            format!("node {id} schedulable"),
            &schedulable,
            &node.schedulable,
        );
    }
    let resources = [
        ("allocated", &want.allocated, &node.allocated),
        ("available", &want.available, &node.available),
        ("capacity", &want.capacity, &node.capacity),
    ];
    for (what, expected, actual) in resources {
        if let Some(expected) = expected {
            out.resources(format!("node {id} {what}"), expected, actual);
        }
    }
    if let Some(count) = want.allocations {
        out.eq(
            format!("node {id} allocations"),
            &count,
            &node.allocation_count,
        );
    }
    let reserved_by = node
        .reserved_by
        .clone()
        .unwrap_or_else(|| "(none)".to_owned());
    if let Some(reserved) = want.reserved {
        let expected = if reserved { "a reservation" } else { "(none)" };
        out.check(
            reserved == node.reserved_by.is_some(),
            format!("node {id} reserved by"),
            expected,
            &reserved_by,
        );
    }
    if let Some(key) = &want.reserved_by {
        out.eq(format!("node {id} reserved by"), key, &reserved_by);
    }
}

fn check_app(
    id: &str,
    want: &AppExpect,
    snapshot: &PartitionSnapshot,
    recorded: &Recorded,
    out: &mut Checks,
) {
    if let Some(states) = &want.states {
        let actual = recorded.app_states(id);
        out.eq(
            format!("app {id} reported states"),
            &states.join(" → "),
            &actual.join(" → "),
        );
    }
    let app = snapshot.application(id);
    let Some(app) = present(out, format!("app {id}"), want.exists, app) else {
        return;
    };
    if let Some(state) = &want.state {
        out.eq(format!("app {id} state"), state, &app.state);
    }
    if let Some(queue) = &want.queue {
        out.eq(format!("app {id} queue"), queue, &app.queue);
    }
    if let Some(allocated) = &want.allocated {
        out.resources(format!("app {id} allocated"), allocated, &app.allocated);
    }
    if let Some(placeholder) = &want.placeholder {
        out.resources(
            format!("app {id} placeholder"),
            placeholder,
            &app.placeholder,
        );
    }
    if let Some(pending) = &want.pending {
        out.resources(format!("app {id} pending"), pending, &app.pending);
    }
    if let Some(count) = want.allocations {
        out.eq(
            format!("app {id} allocations"),
            &count,
            &app.allocation_count,
        );
    }
}

fn check_ask(key: &str, want: &AskExpect, snapshot: &PartitionSnapshot, out: &mut Checks) {
    let found: Vec<&AskSnapshot> = snapshot
        .applications
        .iter()
        .filter(|app| want.app.as_ref().is_none_or(|id| *id == app.id))
        .flat_map(|app| app.pending_asks.iter())
        .filter(|ask| ask.allocation_key == key)
        .collect();
    if found.len() > 1 {
        out.check(
            false,
            format!("ask {key}"),
            "one pending ask with this key",
            "several: name its app",
        );
        return;
    }
    let ask = found.first();
    if let Some(pending) = want.pending {
        let actual = ask.map_or(0, |a| a.pending_allocations);
        out.eq(format!("ask {key} pending allocations"), &pending, &actual);
    }
    let reserved_node = ask
        .and_then(|a| a.reserved_node.clone())
        .unwrap_or_else(|| "(none)".to_owned());
    if let Some(reserved) = want.reserved {
        let holds = ask.is_some_and(|a| a.reserved_node.is_some());
        let expected = if reserved { "a node" } else { "(none)" };
        out.check(
            reserved == holds,
            format!("ask {key} reserved node"),
            expected,
            &reserved_node,
        );
    }
    if let Some(node) = &want.reserved_node {
        out.eq(format!("ask {key} reserved node"), node, &reserved_node);
    }
}

/// One recorded rejection, flattened for matching.
struct Rejected<'a> {
    key: &'a str,
    app: &'a str,
    node: &'a str,
    reason: &'a str,
}

fn rejection_matches(want: &Rejection, got: &Rejected<'_>) -> bool {
    let same = |want: &Option<String>, got: &str| want.as_deref().is_none_or(|w| w == got);
    same(&want.key, got.key)
        && same(&want.app, got.app)
        && same(&want.node, got.node)
        && !got.reason.is_empty()
        && got
            .reason
            .to_lowercase()
            .contains(&want.reason.to_lowercase())
}

fn describe_rejection(r: &Rejection) -> String {
    let mut parts = Vec::new();
    for (name, value) in [("key", &r.key), ("app", &r.app), ("node", &r.node)] {
        if let Some(v) = value {
            parts.push(format!("{name}={v}"));
        }
    }
    parts.push(format!("reason contains {:?}", r.reason));
    parts.join(" ")
}

fn describe_rejected(all: &[Rejected<'_>]) -> String {
    if all.is_empty() {
        return "(none recorded)".to_owned();
    }
    let shown: Vec<String> = all
        .iter()
        .map(|r| {
            let id = [r.key, r.app, r.node]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            format!("{id}: {:?}", r.reason)
        })
        .collect();
    shown.join("; ")
}

fn check_rejections(kind: &str, wants: &[Rejection], got: &[Rejected<'_>], out: &mut Checks) {
    for want in wants {
        let ok = got.iter().any(|g| rejection_matches(want, g));
        out.check(
            ok,
            format!("rejected {kind}"),
            describe_rejection(want),
            describe_rejected(got),
        );
    }
}

fn check_recorded(expect: &Expect, recorded: &Recorded, out: &mut Checks) {
    let asks: Vec<Rejected<'_>> = recorded
        .rejected_asks()
        .map(|r| Rejected {
            key: &r.allocation_key,
            app: &r.application_id,
            node: "",
            reason: &r.reason,
        })
        .collect();
    let apps: Vec<Rejected<'_>> = recorded
        .rejected_applications()
        .map(|r| Rejected {
            key: "",
            app: &r.application_id,
            node: "",
            reason: &r.reason,
        })
        .collect();
    let nodes: Vec<Rejected<'_>> = recorded
        .rejected_nodes()
        .map(|r| Rejected {
            key: "",
            app: "",
            node: &r.node_id,
            reason: &r.reason,
        })
        .collect();
    let allocations: Vec<Rejected<'_>> = recorded
        .rejected_allocations()
        .map(|r| Rejected {
            key: &r.allocation_key,
            app: &r.application_id,
            node: "",
            reason: &r.reason,
        })
        .collect();
    check_rejections("asks", &expect.rejected_asks, &asks, out);
    check_rejections("apps", &expect.rejected_apps, &apps, out);
    check_rejections("nodes", &expect.rejected_nodes, &nodes, out);
    check_rejections(
        "allocations",
        &expect.rejected_allocations,
        &allocations,
        out,
    );
    if let Some(want) = expect.rejections {
        let all: Vec<&Rejected<'_>> = asks
            .iter()
            .chain(&apps)
            .chain(&nodes)
            .chain(&allocations)
            .collect();
        let shown: Vec<Rejected<'_>> = all
            .iter()
            .map(|r| Rejected {
                key: r.key,
                app: r.app,
                node: r.node,
                reason: r.reason,
            })
            .collect();
        out.check(
            want == all.len(),
            "rejections of any kind",
            want,
            format!("{} ({})", all.len(), describe_rejected(&shown)),
        );
    }
    for id in &expect.accepted_apps {
        let ok = recorded
            .accepted_applications()
            .any(|a| &a.application_id == id);
        out.check(
            ok,
            format!("app {id} accepted"),
            "accepted",
            if ok { "accepted" } else { "not accepted" },
        );
    }
    for id in &expect.accepted_nodes {
        let ok = recorded.accepted_nodes().any(|n| &n.node_id == id);
        out.check(
            ok,
            format!("node {id} accepted"),
            "accepted",
            if ok { "accepted" } else { "not accepted" },
        );
    }
    check_releases(expect, recorded, out);
    check_events(&expect.events, &recorded.events, out);
    for want in &expect.scheduling_states {
        let last = recorded
            .scheduling_states
            .iter()
            .rev()
            .find(|s| s.allocation_key == want.key);
        let actual = last.map_or_else(
            || "(none reported)".to_owned(),
            |s| format!("{} {:?}", scheduling_state_name(s.state), s.reason),
        );
        let ok = last.is_some_and(|s| {
            scheduling_state_name(s.state).eq_ignore_ascii_case(&want.state)
                && want
                    .reason
                    .as_ref()
                    .is_none_or(|r| s.reason.to_lowercase().contains(&r.to_lowercase()))
        });
        let expected = match &want.reason {
            Some(reason) => format!("{} (reason contains {reason:?})", want.state),
            None => want.state.clone(),
        };
        out.check(
            ok,
            format!("ask {} scheduling state", want.key),
            expected,
            actual,
        );
    }
}

fn check_releases(expect: &Expect, recorded: &Recorded, out: &mut Checks) {
    let released: Vec<&si::AllocationRelease> = recorded.released().collect();
    if let Some(want) = expect.released_count {
        out.eq("released allocations reported", &want, &released.len());
    }
    for want in &expect.released {
        let matching = released
            .iter()
            .filter(|r| {
                want.key.as_ref().is_none_or(|k| *k == r.allocation_key)
                    && want.app.as_ref().is_none_or(|a| *a == r.application_id)
                    && want.termination.as_ref().is_none_or(|t| {
                        termination_name(r.termination_type).eq_ignore_ascii_case(t)
                    })
            })
            .count();
        let mut subject = String::from("released allocations");
        for (name, value) in [
            ("key", &want.key),
            ("app", &want.app),
            ("termination", &want.termination),
        ] {
            if let Some(v) = value {
                subject.push_str(&format!(" {name}={v}"));
            }
        }
        match want.count {
            Some(count) => out.eq(subject, &count, &matching),
            None => out.check(matching > 0, subject, "at least 1", matching),
        }
    }
}

/// The wire names of an event record's type, change type and change detail.
fn event_names(e: &si::EventRecord) -> (&'static str, &'static str, &'static str) {
    use si::event_record::{ChangeDetail, ChangeType, Type};
    (
        Type::try_from(e.r#type).map_or("UNKNOWN", |t| t.as_str_name()),
        ChangeType::try_from(e.event_change_type).map_or("UNKNOWN", |t| t.as_str_name()),
        ChangeDetail::try_from(e.event_change_detail).map_or("UNKNOWN", |t| t.as_str_name()),
    )
}

fn event_matches(want: &EventExpect, got: &si::EventRecord) -> bool {
    let (kind, change, detail) = event_names(got);
    let name = |want: &Option<String>, got: &str| {
        want.as_ref().is_none_or(|w| w.eq_ignore_ascii_case(got))
    };
    let same = |want: &Option<String>, got: &str| want.as_deref().is_none_or(|w| w == got);
    name(&want.kind, kind)
        && name(&want.change, change)
        && name(&want.detail, detail)
        && same(&want.object, &got.object_id)
        && same(&want.reference, &got.reference_id)
        && want
            .message
            .as_ref()
            .is_none_or(|m| got.message.to_lowercase().contains(&m.to_lowercase()))
}

fn describe_event(e: &si::EventRecord) -> String {
    let (kind, change, detail) = event_names(e);
    format!(
        "{kind} {} {change} {detail} ref={:?} {:?}",
        e.object_id, e.reference_id, e.message
    )
}

fn describe_event_expect(e: &EventExpect) -> String {
    let mut parts = Vec::new();
    for (name, value) in [
        ("type", &e.kind),
        ("object", &e.object),
        ("reference", &e.reference),
        ("change", &e.change),
        ("detail", &e.detail),
        ("message contains", &e.message),
    ] {
        if let Some(v) = value {
            parts.push(format!("{name}={v}"));
        }
    }
    parts.join(" ")
}

/// Each expected event must match a recorded one after the match of the one
/// before it: the list is an ordered subsequence of what was sent.
fn check_events(wants: &[EventExpect], got: &[si::EventRecord], out: &mut Checks) {
    let mut from = 0;
    for (i, want) in wants.iter().enumerate() {
        let found = got[from..].iter().position(|e| event_matches(want, e));
        let subject = format!("event {} of {}", i + 1, wants.len());
        match found {
            Some(at) => {
                out.check(true, subject, "", "");
                from += at + 1;
            }
            None => {
                let after: Vec<String> = got[from..]
                    .iter()
                    .filter(|e| {
                        want.kind
                            .as_ref()
                            .is_none_or(|k| k.eq_ignore_ascii_case(event_names(e).0))
                    })
                    .map(describe_event)
                    .collect();
                let actual = if after.is_empty() {
                    "(no event of that type after the previous match)".to_owned()
                } else {
                    after.join("; ")
                };
                out.check(false, subject, describe_event_expect(want), actual);
                // Later expectations are judged after the same point.
            }
        }
    }
}

fn scheduling_state_name(state: i32) -> &'static str {
    si::update_container_scheduling_state_request::SchedulingState::try_from(state)
        .map_or("UNKNOWN", |s| s.as_str_name())
}

fn termination_name(termination: i32) -> &'static str {
    si::TerminationType::try_from(termination).map_or("UNKNOWN", |t| t.as_str_name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unisched_core::snapshot::{NodeSnapshot, QueueSnapshot};

    fn snapshot() -> PartitionSnapshot {
        PartitionSnapshot {
            queues: vec![QueueSnapshot {
                path: "root".into(),
                ..Default::default()
            }],
            nodes: vec![NodeSnapshot {
                id: "node-1".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The failures of `expect` (YAML) against the snapshot above and
    /// `events`, as `subject: actual` lines.
    fn check_yaml(expect: &str, events: Vec<si::EventRecord>) -> Vec<String> {
        let expect: Expect = serde_yaml::from_str(expect).expect("expectation parses");
        let recorded = Recorded {
            events,
            ..Default::default()
        };
        let mut out = Checks::new(StepRef {
            index: 1,
            kind: "expect",
            label: None,
        });
        check(&expect, &snapshot(), &recorded, &mut out);
        out.failures
            .iter()
            .map(|f| format!("{}: {}", f.subject, f.actual))
            .collect()
    }

    #[test]
    fn a_statement_about_an_absent_object_fails() {
        let cases: [(&str, &[&str]); 8] = [
            (
                "queues: {root.x: {exists: true}}",
                &["queue root.x: queue root.x does not exist"],
            ),
            (
                "queues: {root.x: {state: Active}}",
                &["queue root.x: queue root.x does not exist"],
            ),
            ("queues: {root.x: {exists: false}}", &[]),
            (
                "queues: {root: {exists: false}}",
                &["queue root: queue root exists"],
            ),
            ("queues: {root: {}}", &[]),
            (
                "nodes: {ghost: {allocations: 0}}",
                &["node ghost: node ghost does not exist"],
            ),
            (
                "nodes: {node-1: {exists: false}}",
                &["node node-1: node node-1 exists"],
            ),
            (
                "apps: {app-1: {state: Running}}",
                &["app app-1: app app-1 does not exist"],
            ),
        ];
        for (expect, failures) in cases {
            assert_eq!(check_yaml(expect, Vec::new()), failures, "{expect}");
        }
    }

    fn event(
        kind: si::event_record::Type,
        object: &str,
        detail: si::event_record::ChangeDetail,
    ) -> si::EventRecord {
        si::EventRecord {
            r#type: kind as i32,
            object_id: object.into(),
            event_change_type: si::event_record::ChangeType::Add as i32,
            event_change_detail: detail as i32,
            message: "node added".into(),
            ..Default::default()
        }
    }

    #[test]
    fn events_match_in_order() {
        use si::event_record::{ChangeDetail as D, Type as T};
        let recorded = || {
            vec![
                event(T::Node, "n1", D::DetailsNone),
                event(T::App, "a1", D::AppNew),
                event(T::Node, "n2", D::NodeReservation),
            ]
        };
        let ok = "events: [{type: NODE, object: n1, change: ADD}, {type: node, detail: NODE_RESERVATION, message: ADDED}]";
        assert!(check_yaml(ok, recorded()).is_empty());
        // The same two, the other way round: the second is not after the first.
        let reversed = "events: [{object: n2}, {object: n1}]";
        assert_eq!(check_yaml(reversed, recorded()).len(), 1);
        let absent = "events: [{type: QUEUE}]";
        assert_eq!(
            check_yaml(absent, recorded()),
            ["event 1 of 1: (no event of that type after the previous match)"]
        );
    }
}
