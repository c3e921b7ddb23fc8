//! `partition/{p}/queues` and `partition/{p}/queue/{q}`: upstream's
//! `PartitionQueueDAOInfo`, with what upstream derives from a queue
//! (headroom, absolute use, current priority, policies) worked out from the
//! snapshot the same way.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use serde::Serialize;
use unisched_core::config::properties::{
    AppSortPolicy, PreemptionPolicy, PriorityPolicy, QueueProperties,
};
use unisched_core::snapshot::{PartitionSnapshot, QueueSnapshot, ResourceMap};

use super::resources::{abs_used, add, component_wise_min, sub_only_existing};
use super::{ApiError, ApiResult, Params, RestState, snapshot, valid_queue_path};

/// `PartitionQueueDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueInfo {
    #[serde(rename = "queuename")]
    queue_name: String,
    status: String,
    /// Upstream fills this on the tree's root only; here every queue names
    /// its partition, so a queue read on its own says where it is.
    partition: String,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    pending_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    max_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    guaranteed_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    allocated_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    preempting_resource: ResourceMap,
    #[serde(rename = "headroom", skip_serializing_if = "ResourceMap::is_empty")]
    head_room: ResourceMap,
    is_leaf: bool,
    is_managed: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    parent: String,
    #[serde(rename = "template", skip_serializing_if = "Option::is_none")]
    template: Option<TemplateInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    children: Vec<QueueInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    child_names: Vec<String>,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    abs_used_capacity: ResourceMap,
    #[serde(skip_serializing_if = "is_zero")]
    max_running_apps: u64,
    #[serde(skip_serializing_if = "is_zero")]
    running_apps: u64,
    current_priority: i32,
    /// Upstream lists Accepted applications that have an allocation in
    /// flight; this core moves an application to Running in the pass that
    /// allocates it, so there are none to list (omitted, as upstream omits
    /// an empty list).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allocating_accepted_apps: Vec<String>,
    sorting_policy: &'static str,
    priority_sorting: bool,
    preemption_enabled: bool,
    is_preemption_fence: bool,
    preemption_delay: String,
    quota_preemption_delay: String,
    is_priority_fence: bool,
    #[serde(skip_serializing_if = "is_zero_i32")]
    priority_offset: i32,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

/// `TemplateInfo`: what dynamic children of a queue get.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TemplateInfo {
    #[serde(skip_serializing_if = "is_zero")]
    max_applications: u64,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    max_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    guaranteed_resource: ResourceMap,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
}

/// The queue tree of one snapshot, with what the DAO derives from it.
pub struct Tree<'a> {
    snap: &'a PartitionSnapshot,
    children: HashMap<&'a str, Vec<&'a QueueSnapshot>>,
    /// Per leaf: the highest priority among its applications' pending asks.
    leaf_priority: HashMap<&'a str, i32>,
    /// Per queue: resources of its allocations released by preemption and
    /// not yet confirmed.
    preempting: HashMap<String, ResourceMap>,
}

impl<'a> Tree<'a> {
    /// The tree of `snap`.
    pub fn new(snap: &'a PartitionSnapshot) -> Self {
        let mut children: HashMap<&str, Vec<&QueueSnapshot>> = HashMap::new();
        for q in &snap.queues {
            if let Some((parent, _)) = q.path.rsplit_once('.') {
                children.entry(parent).or_default().push(q);
            }
        }
        let mut leaf_priority: HashMap<&str, i32> = HashMap::new();
        for a in &snap.applications {
            if let Some(p) = a.pending_asks.iter().map(|k| k.priority).max() {
                let e = leaf_priority.entry(a.queue.as_str()).or_insert(i32::MIN);
                *e = (*e).max(p);
            }
        }
        let mut preempting: HashMap<String, ResourceMap> = HashMap::new();
        for al in snap.allocations.iter().filter(|a| a.preempted) {
            for path in ancestors(&al.queue) {
                add(
                    preempting.entry(path.to_string()).or_default(),
                    &al.resource,
                );
            }
        }
        Self {
            snap,
            children,
            leaf_priority,
            preempting,
        }
    }

    fn kids(&self, path: &str) -> &[&'a QueueSnapshot] {
        self.children.get(path).map_or(&[], Vec::as_slice)
    }

    /// The maximum as upstream shows it: the root's is the partition's size.
    fn max(&self, q: &QueueSnapshot) -> ResourceMap {
        if q.path == "root" && q.max.is_empty() {
            self.snap.total_capacity.clone()
        } else {
            q.max.clone()
        }
    }

    /// Upstream's `getHeadRoom`: max minus allocated for the limited types,
    /// the smaller of that and the parent's headroom; `None` when nothing on
    /// the path is limited.
    fn headroom(&self, path: &str) -> Option<ResourceMap> {
        let q = self.snap.queue(path)?;
        let parent = q.path.rsplit_once('.').and_then(|(p, _)| self.headroom(p));
        let max = self.max(q);
        if max.is_empty() {
            return parent;
        }
        component_wise_min(Some(sub_only_existing(&max, &q.allocated)), parent.as_ref())
    }

    /// The priority a queue has before its own offset and policy: its
    /// applications' (leaf) or its children's as they show it (parent);
    /// `i32::MIN` when nothing below is pending, as upstream.
    fn inner_priority(&self, q: &QueueSnapshot) -> i32 {
        if !q.parent {
            return self
                .leaf_priority
                .get(q.path.as_str())
                .copied()
                .unwrap_or(i32::MIN);
        }
        self.kids(&q.path)
            .iter()
            .map(|c| shown_priority(&props(c), self.inner_priority(c)))
            .max()
            .unwrap_or(i32::MIN)
    }

    /// The DAO of the queue at `path`, with its subtree when `subtree`.
    pub fn info(&self, path: &str, subtree: bool) -> Option<QueueInfo> {
        let q = self.snap.queue(path)?;
        Some(self.queue_info(q, subtree))
    }

    fn queue_info(&self, q: &QueueSnapshot, subtree: bool) -> QueueInfo {
        let kids = self.kids(&q.path);
        let p = props(q);
        let max = self.max(q);
        QueueInfo {
            queue_name: q.path.clone(),
            status: q.state.clone(),
            partition: self.snap.name.clone(),
            pending_resource: q.pending.clone(),
            abs_used_capacity: abs_used(&max, &q.allocated),
            max_resource: max,
            guaranteed_resource: q.guaranteed.clone(),
            allocated_resource: q.allocated.clone(),
            preempting_resource: self.preempting.get(&q.path).cloned().unwrap_or_default(),
            head_room: self.headroom(&q.path).unwrap_or_default(),
            is_leaf: !q.parent,
            is_managed: !q.dynamic,
            properties: q.properties.clone(),
            parent: q
                .path
                .rsplit_once('.')
                .map(|(p, _)| p.to_string())
                .unwrap_or_default(),
            template: q.child_template.as_ref().map(|t| TemplateInfo {
                max_applications: t.max_applications,
                max_resource: t.max.clone(),
                guaranteed_resource: t.guaranteed.clone(),
                properties: t.properties.clone(),
            }),
            children: if subtree {
                kids.iter().map(|c| self.queue_info(c, true)).collect()
            } else {
                Vec::new()
            },
            child_names: kids.iter().map(|c| c.path.clone()).collect(),
            max_running_apps: q.max_applications,
            running_apps: q.running_applications,
            current_priority: shown_priority(&p, self.inner_priority(q)),
            allocating_accepted_apps: Vec::new(),
            sorting_policy: match (q.parent, p.app_sort_policy) {
                (true, _) | (false, AppSortPolicy::Fair) => "fair",
                (false, AppSortPolicy::Fifo) => "fifo",
            },
            priority_sorting: p.app_sort_priority,
            preemption_enabled: p.preemption_policy != PreemptionPolicy::Disabled,
            is_preemption_fence: p.preemption_policy == PreemptionPolicy::Fence,
            preemption_delay: go_duration(p.preemption_delay),
            quota_preemption_delay: go_duration(Duration::ZERO),
            is_priority_fence: p.priority_policy == PriorityPolicy::Fence,
            priority_offset: p.priority_offset,
        }
    }
}

/// The queue and every ancestor, innermost first.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(path), |p| p.rsplit_once('.').map(|(a, _)| a))
}

/// The queue's typed properties (validated when the config was loaded).
fn props(q: &QueueSnapshot) -> QueueProperties {
    QueueProperties::from_map(&q.properties).unwrap_or_default()
}

/// Upstream's `priorityValueByPolicy`: what a queue shows its parent.
fn shown_priority(p: &QueueProperties, inner: i32) -> i32 {
    if inner == i32::MIN {
        return inner;
    }
    match p.priority_policy {
        PriorityPolicy::Fence => p.priority_offset,
        PriorityPolicy::Default => {
            let sum = i64::from(p.priority_offset) + i64::from(inner);
            i32::try_from(sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or(i32::MAX)
        }
    }
}

/// A duration as Go's `Duration.String` prints it (`30s`, `1m30s`, `1h0m0s`,
/// `250ms`), which is how upstream shows a queue's delays.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (unit, div) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, div));
    }
    let secs = nanos / 1_000_000_000;
    let (h, m) = (secs / 3600, secs % 3600 / 60);
    let s = decimal(
        (secs % 60) * 1_000_000_000 + nanos % 1_000_000_000,
        1_000_000_000,
    );
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// `value / div` with the fraction's trailing zeros dropped.
fn decimal(value: u128, div: u128) -> String {
    let (whole, rest) = (value / div, value % div);
    if rest == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let fraction = format!("{rest:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// `GET /ws/v1/partition/{p}/queues`: the whole tree from the root.
pub async fn queues(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Tree::new(&snap)
        .info("root", true)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("queue", "root"))
}

/// `GET /ws/v1/partition/{p}/queue/{q}`: one queue with its children's
/// names; with `?subtree` its children in full, as upstream.
pub async fn queue(
    State(state): State<RestState>,
    Path((p, q)): Path<(String, String)>,
    params: Params,
) -> ApiResult<impl IntoResponse> {
    valid_queue_path(&q)?;
    let snap = snapshot(&state, p).await?;
    Tree::new(&snap)
        .info(&q, params.contains_key("subtree"))
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("queue", &q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_does() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_micros(3), "3µs"),
        ] {
            assert_eq!(go_duration(d), text);
        }
    }

    #[test]
    fn priority_follows_policy_and_offset() {
        let mut p = QueueProperties::default();
        assert_eq!(shown_priority(&p, i32::MIN), i32::MIN);
        p.priority_offset = 5;
        assert_eq!(shown_priority(&p, 10), 15);
        assert_eq!(shown_priority(&p, i32::MAX), i32::MAX);
        p.priority_policy = PriorityPolicy::Fence;
        assert_eq!(shown_priority(&p, 10), 5);
    }
}
