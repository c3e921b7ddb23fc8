//! Node routes: upstream's `NodeDAOInfo` per partition and node, and
//! `scheduler/node-utilizations` (nodes counted in ten utilisation buckets
//! per resource type).

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use serde::Serialize;
use unisched_core::snapshot::{NodeSnapshot, PartitionSnapshot, ResourceMap};

use super::apps::{AllocationInfo, allocations};
use super::resources::abs_used;
use super::{ApiError, ApiResult, RestState, all_snapshots, partition_labels, snapshot};

/// The node attribute upstream reads a node's rack from.
const RACK_ATTRIBUTE: &str = "si/rackname";

/// `NodeDAOInfo`. Upstream's `foreignAllocations` (pods it did not place) are
/// the `occupied` resources here, with no allocation records behind them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    #[serde(rename = "nodeID")]
    node_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    host_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    rack_name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    capacity: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    allocated: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    occupied: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    available: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    utilized: ResourceMap,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allocations: Vec<AllocationInfo>,
    schedulable: bool,
    is_reserved: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reservations: Vec<String>,
}

/// Upstream's `GetUtilizedResource`: percent used of each allocated type the
/// node has capacity of.
fn utilized(n: &NodeSnapshot) -> ResourceMap {
    let mut percent = abs_used(&n.capacity, &n.allocated);
    percent.retain(|k, _| n.capacity.get(k).is_some_and(|&c| c > 0));
    percent
}

/// One node with its allocations.
pub fn node(snap: &PartitionSnapshot, n: &NodeSnapshot) -> NodeInfo {
    let attr = |key: &str| n.attributes.get(key).cloned().unwrap_or_default();
    NodeInfo {
        node_id: n.id.clone(),
        host_name: attr(unisched_si::HOSTNAME_ATTRIBUTE),
        rack_name: attr(RACK_ATTRIBUTE),
        attributes: n.attributes.clone(),
        capacity: n.capacity.clone(),
        allocated: n.allocated.clone(),
        occupied: n.occupied.clone(),
        available: n.available.clone(),
        utilized: utilized(n),
        allocations: allocations(snap, |a| a.node_id == n.id),
        schedulable: n.schedulable,
        is_reserved: n.reserved_by.is_some(),
        reservations: n.reserved_by.iter().cloned().collect(),
    }
}

/// Every node of a partition.
pub fn all_nodes(snap: &PartitionSnapshot) -> Vec<NodeInfo> {
    snap.nodes.iter().map(|n| node(snap, n)).collect()
}

/// `NodesDAOInfo`: the nodes of one partition (the full state dump's form).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionNodes {
    partition_name: String,
    #[serde(rename = "nodesInfo", skip_serializing_if = "Vec::is_empty")]
    nodes: Vec<NodeInfo>,
}

/// The nodes of every partition.
pub fn nodes_by_partition(snaps: &[std::sync::Arc<PartitionSnapshot>]) -> Vec<PartitionNodes> {
    snaps
        .iter()
        .zip(partition_labels(snaps))
        .map(|(s, partition_name)| PartitionNodes {
            partition_name,
            nodes: all_nodes(s),
        })
        .collect()
}

/// `GET /ws/v1/partition/{p}/nodes`.
pub async fn nodes(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(all_nodes(&snap)))
}

/// `GET /ws/v1/partition/{p}/node/{n}`.
pub async fn node_route(
    State(state): State<RestState>,
    Path((p, n)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    snap.node(&n)
        .map(|node_snap| axum::Json(node(&snap, node_snap)))
        .ok_or_else(|| ApiError::not_found("node", &n))
}

/// `PartitionNodesUtilDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionUtilization {
    cluster_id: String,
    partition: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    utilizations: Vec<TypeUtilization>,
}

/// `NodesUtilDAOInfo`: one resource type's ten buckets.
#[derive(Serialize)]
pub struct TypeUtilization {
    #[serde(rename = "type")]
    kind: String,
    utilization: Vec<Bucket>,
}

/// `NodeUtilDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bucket {
    bucket_name: String,
    #[serde(skip_serializing_if = "is_zero")]
    num_of_nodes: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    node_names: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Nodes per utilisation bucket of every resource type a node has capacity
/// of: bucket k holds nodes above 10k % up to 10(k+1) % (0 % is in the first).
/// Upstream indexes past the last bucket for a node used above 100 %
/// (possible after a capacity shrink) and fails; such a node is in the last
/// bucket here.
pub fn utilization(snap: &PartitionSnapshot, label: String) -> PartitionUtilization {
    let mut buckets: BTreeMap<&str, Vec<Vec<String>>> = BTreeMap::new();
    for n in &snap.nodes {
        let used = abs_used(&n.capacity, &n.allocated);
        for kind in n.capacity.keys() {
            let percent = used.get(kind).copied().unwrap_or(0);
            let index = usize::try_from((percent + 9) / 10 - 1).unwrap_or(0).min(9);
            buckets
                .entry(kind.as_str())
                .or_insert_with(|| vec![Vec::new(); 10])[index]
                .push(n.id.clone());
        }
    }
    PartitionUtilization {
        cluster_id: snap.rm_id.clone(),
        partition: label,
        utilizations: buckets
            .into_iter()
            .map(|(kind, lists)| TypeUtilization {
                kind: kind.to_string(),
                utilization: lists
                    .into_iter()
                    .enumerate()
                    .map(|(k, names)| Bucket {
                        bucket_name: format!("{}-{}%", k * 10, (k + 1) * 10),
                        num_of_nodes: names.len(),
                        node_names: names,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// `GET /ws/v1/scheduler/node-utilizations`.
pub async fn utilizations(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(
        snaps
            .iter()
            .zip(partition_labels(&snaps))
            .map(|(s, label)| utilization(s, label))
            .collect::<Vec<_>>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, cap: i64, used: i64) -> NodeSnapshot {
        NodeSnapshot {
            id: id.into(),
            capacity: [("memory".to_string(), cap)].into(),
            allocated: if used == 0 {
                ResourceMap::new()
            } else {
                [("memory".to_string(), used)].into()
            },
            ..Default::default()
        }
    }

    #[test]
    fn nodes_fall_in_upstreams_buckets() {
        let snap = PartitionSnapshot {
            nodes: vec![
                node("idle", 100, 0),
                node("ten", 100, 10),
                node("eleven", 100, 11),
                node("full", 100, 100),
                node("over", 100, 150),
            ],
            ..Default::default()
        };
        let u = serde_json::to_value(utilization(&snap, "p".into())).unwrap();
        let b = &u["utilizations"][0]["utilization"];
        assert_eq!(u["utilizations"][0]["type"], "memory");
        assert_eq!(b.as_array().unwrap().len(), 10);
        assert_eq!(b[0]["bucketName"], "0-10%");
        assert_eq!(b[0]["nodeNames"], serde_json::json!(["idle", "ten"]));
        assert_eq!(b[1]["nodeNames"], serde_json::json!(["eleven"]));
        assert_eq!(b[9]["numOfNodes"], 2);
        assert!(
            b[5].get("numOfNodes").is_none(),
            "empty buckets omit counts"
        );
    }
}
