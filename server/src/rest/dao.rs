//! REST objects (YuniKorn's DAO field names), built from snapshots.

use serde::Serialize;
use unisched_core::snapshot::{
    ApplicationSnapshot, NodeSnapshot, PartitionSnapshot, QueueSnapshot, ResourceMap,
};

/// The partition name without its `[rmID]` prefix.
pub fn plain_name(qualified: &str) -> &str {
    match qualified.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((_, name)) => name,
        None => qualified,
    }
}

/// `PartitionInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionInfo {
    cluster_id: String,
    name: String,
    capacity: PartitionCapacity,
    node_sorting_policy: NodeSortingPolicy,
    total_nodes: usize,
    applications: std::collections::BTreeMap<String, usize>,
    total_containers: usize,
    state: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartitionCapacity {
    capacity: ResourceMap,
    used_capacity: ResourceMap,
    /// Percent of capacity in use, per resource type.
    utilization: ResourceMap,
}

#[derive(Serialize)]
struct NodeSortingPolicy {
    #[serde(rename = "type")]
    kind: String,
}

/// The partition summary.
pub fn partition(snap: &PartitionSnapshot) -> PartitionInfo {
    let mut used = ResourceMap::new();
    for n in &snap.nodes {
        add(&mut used, &n.allocated);
    }
    let utilization = snap
        .total_capacity
        .iter()
        .filter(|(_, total)| **total > 0)
        .map(|(k, total)| (k.clone(), used.get(k).copied().unwrap_or(0) * 100 / total))
        .collect();
    let mut applications = std::collections::BTreeMap::new();
    applications.insert("total".to_string(), snap.applications.len());
    for a in &snap.applications {
        *applications.entry(a.state.clone()).or_insert(0) += 1;
    }
    PartitionInfo {
        cluster_id: snap.rm_id.clone(),
        name: plain_name(&snap.name).to_string(),
        capacity: PartitionCapacity {
            capacity: snap.total_capacity.clone(),
            used_capacity: used,
            utilization,
        },
        node_sorting_policy: NodeSortingPolicy {
            kind: snap.node_sort_policy.clone(),
        },
        total_nodes: snap.nodes.len(),
        applications,
        total_containers: snap.allocations.len(),
        state: "Active",
    }
}

/// Adds `b` into `a`.
pub fn add(a: &mut ResourceMap, b: &ResourceMap) {
    for (k, v) in b {
        *a.entry(k.clone()).or_insert(0) += v;
    }
}

/// `PartitionQueueDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueInfo {
    #[serde(rename = "queuename")]
    queue_name: String,
    status: String,
    partition: String,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    pending_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    max_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    guaranteed_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    allocated_resource: ResourceMap,
    is_leaf: bool,
    is_managed: bool,
    properties: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    parent: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    children: Vec<QueueInfo>,
    max_running_apps: u64,
    running_apps: u64,
}

/// The queue at `path` with everything below it, or `None` when it does not exist.
pub fn queue_tree(snap: &PartitionSnapshot, path: &str) -> Option<QueueInfo> {
    let q = snap.queue(path)?;
    Some(queue_info(snap, q))
}

fn queue_info(snap: &PartitionSnapshot, q: &QueueSnapshot) -> QueueInfo {
    let prefix = format!("{}.", q.path);
    let children = snap
        .queues
        .iter()
        .filter(|c| {
            c.path
                .strip_prefix(&prefix)
                .is_some_and(|rest| !rest.contains('.'))
        })
        .map(|c| queue_info(snap, c))
        .collect();
    QueueInfo {
        queue_name: q.path.clone(),
        status: q.state.clone(),
        partition: plain_name(&snap.name).to_string(),
        pending_resource: q.pending.clone(),
        max_resource: q.max.clone(),
        guaranteed_resource: q.guaranteed.clone(),
        allocated_resource: q.allocated.clone(),
        is_leaf: !q.parent,
        is_managed: !q.dynamic,
        properties: q.properties.clone(),
        parent: q
            .path
            .rsplit_once('.')
            .map(|(p, _)| p.to_string())
            .unwrap_or_default(),
        children,
        max_running_apps: q.max_applications,
        running_apps: q.running_applications,
    }
}

/// `AllocationDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationInfo {
    allocation_key: String,
    #[serde(rename = "allocationID")]
    allocation_id: String,
    resource: ResourceMap,
    priority: String,
    #[serde(rename = "nodeId")]
    node_id: String,
    #[serde(rename = "applicationId")]
    application_id: String,
    placeholder: bool,
}

fn allocations(snap: &PartitionSnapshot, keep: impl Fn(&str, &str) -> bool) -> Vec<AllocationInfo> {
    snap.allocations
        .iter()
        .filter(|a| keep(&a.application_id, &a.node_id))
        .map(|a| AllocationInfo {
            allocation_key: a.allocation_key.clone(),
            allocation_id: a.allocation_id.clone(),
            resource: a.resource.clone(),
            priority: a.priority.to_string(),
            node_id: a.node_id.clone(),
            application_id: a.application_id.clone(),
            placeholder: a.placeholder,
        })
        .collect()
}

/// `NodeDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    #[serde(rename = "nodeID")]
    node_id: String,
    host_name: String,
    attributes: std::collections::BTreeMap<String, String>,
    capacity: ResourceMap,
    allocated: ResourceMap,
    occupied: ResourceMap,
    available: ResourceMap,
    allocations: Vec<AllocationInfo>,
    schedulable: bool,
    is_reserved: bool,
    reservations: Vec<String>,
}

/// One node with its allocations.
pub fn node(snap: &PartitionSnapshot, n: &NodeSnapshot) -> NodeInfo {
    NodeInfo {
        node_id: n.id.clone(),
        host_name: n
            .attributes
            .get(unisched_si::HOSTNAME_ATTRIBUTE)
            .cloned()
            .unwrap_or_default(),
        attributes: n.attributes.clone(),
        capacity: n.capacity.clone(),
        allocated: n.allocated.clone(),
        occupied: n.occupied.clone(),
        available: n.available.clone(),
        allocations: allocations(snap, |_, node| node == n.id),
        schedulable: n.schedulable,
        is_reserved: n.reserved_by.is_some(),
        reservations: n.reserved_by.iter().cloned().collect(),
    }
}

/// `ApplicationDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationInfo {
    #[serde(rename = "applicationID")]
    application_id: String,
    used_resource: ResourceMap,
    /// Held by placeholders, apart from `usedResource` (upstream's field).
    placeholder_resource: ResourceMap,
    pending_resource: ResourceMap,
    partition: String,
    queue_name: String,
    submission_time: u64,
    requests: Vec<AskInfo>,
    allocations: Vec<AllocationInfo>,
    #[serde(rename = "applicationState")]
    state: String,
    user: String,
    groups: Vec<String>,
    has_reserved: bool,
}

/// `AllocationAskDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskInfo {
    allocation_key: String,
    resource: ResourceMap,
    pending_count: u32,
    priority: String,
}

/// The applications `keep` selects, with their asks and allocations.
pub fn applications(
    snap: &PartitionSnapshot,
    keep: impl Fn(&ApplicationSnapshot) -> bool,
) -> Vec<ApplicationInfo> {
    snap.applications
        .iter()
        .filter(|a| keep(a))
        .map(|a| ApplicationInfo {
            application_id: a.id.clone(),
            used_resource: a.allocated.clone(),
            placeholder_resource: a.placeholder.clone(),
            pending_resource: a.pending.clone(),
            partition: plain_name(&snap.name).to_string(),
            queue_name: a.queue.clone(),
            submission_time: a.submission_time,
            requests: a
                .pending_asks
                .iter()
                .map(|k| AskInfo {
                    allocation_key: k.allocation_key.clone(),
                    resource: k.resource.clone(),
                    pending_count: k.pending_allocations,
                    priority: k.priority.to_string(),
                })
                .collect(),
            allocations: allocations(snap, |app, _| app == a.id),
            state: a.state.clone(),
            user: a.user.clone(),
            groups: a.groups.clone(),
            has_reserved: a.pending_asks.iter().any(|k| k.reserved_node.is_some()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_reported_apart_from_used_resources() {
        let snap = PartitionSnapshot {
            name: "[rm]default".into(),
            applications: vec![ApplicationSnapshot {
                id: "app-1".into(),
                allocated: [("memory".to_string(), 10)].into(),
                placeholder: [("memory".to_string(), 30)].into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let json = serde_json::to_value(applications(&snap, |_| true)).unwrap();
        assert_eq!(json[0]["usedResource"], serde_json::json!({"memory": 10}));
        assert_eq!(
            json[0]["placeholderResource"],
            serde_json::json!({"memory": 30})
        );
    }

    #[test]
    fn plain_names() {
        for (q, p) in [
            ("[rm1]default", "default"),
            ("default", "default"),
            ("[x", "[x"),
        ] {
            assert_eq!(plain_name(q), p);
        }
    }
}
