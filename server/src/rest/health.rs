//! `scheduler/healthcheck`: the invariants of a consistent core, checked on snapshots.

use std::collections::HashSet;

use serde::Serialize;
use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

use axum::extract::State;
use axum::response::IntoResponse;

use super::resources::add;
use super::{ApiResult, RestState, all_snapshots};

/// `GET /ws/v1/scheduler/healthcheck`.
pub async fn route(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(check_all(&snaps)))
}

/// `SchedulerHealthDAOInfo` (upstream's capitalised field names).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SchedulerHealth {
    healthy: bool,
    health_checks: Vec<HealthCheck>,
}

/// `HealthCheckInfo`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HealthCheck {
    name: &'static str,
    succeeded: bool,
    description: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    diagnosis_message: String,
}

fn check(name: &'static str, description: &'static str, problems: Vec<String>) -> HealthCheck {
    HealthCheck {
        name,
        succeeded: problems.is_empty(),
        description,
        diagnosis_message: problems.join("; "),
    }
}

fn negatives(what: String, r: &ResourceMap, out: &mut Vec<String>) {
    for (k, v) in r {
        if *v < 0 {
            out.push(format!("{what}: {k} = {v}"));
        }
    }
}

fn same(a: &ResourceMap, b: &ResourceMap) -> bool {
    let keys: HashSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .all(|k| a.get(k).copied().unwrap_or(0) == b.get(k).copied().unwrap_or(0))
}

/// Runs every check over `partitions`.
pub fn check_all(partitions: &[std::sync::Arc<PartitionSnapshot>]) -> SchedulerHealth {
    let mut negative = Vec::new();
    let mut capacity = Vec::new();
    let mut node_totals = Vec::new();
    let mut orphans = Vec::new();
    for p in partitions {
        negatives(
            format!("partition {} capacity", p.name),
            &p.total_capacity,
            &mut negative,
        );
        for q in &p.queues {
            negatives(
                format!("queue {} allocated", q.path),
                &q.allocated,
                &mut negative,
            );
            negatives(
                format!("queue {} pending", q.path),
                &q.pending,
                &mut negative,
            );
        }
        for a in &p.applications {
            negatives(
                format!("application {} allocated", a.id),
                &a.allocated,
                &mut negative,
            );
        }
        let mut sum = ResourceMap::new();
        for n in &p.nodes {
            add(&mut sum, &n.capacity);
            negatives(
                format!("node {} capacity", n.id),
                &n.capacity,
                &mut negative,
            );
            negatives(
                format!("node {} allocated", n.id),
                &n.allocated,
                &mut negative,
            );
            negatives(
                format!("node {} occupied", n.id),
                &n.occupied,
                &mut negative,
            );
            let mut parts = n.allocated.clone();
            add(&mut parts, &n.occupied);
            add(&mut parts, &n.available);
            if !same(&parts, &n.capacity) {
                node_totals.push(format!(
                    "node {}: capacity {:?} != allocated + occupied + available {parts:?}",
                    n.id, n.capacity
                ));
            }
        }
        if !same(&sum, &p.total_capacity) {
            capacity.push(format!(
                "partition {}: total {:?} != sum of node capacities {sum:?}",
                p.name, p.total_capacity
            ));
        }
        let nodes: HashSet<&str> = p.nodes.iter().map(|n| n.id.as_str()).collect();
        let apps: HashSet<&str> = p.applications.iter().map(|a| a.id.as_str()).collect();
        for a in &p.allocations {
            if !nodes.contains(a.node_id.as_str()) || !apps.contains(a.application_id.as_str()) {
                orphans.push(format!(
                    "allocation {} (app {}, node {}) in partition {}",
                    a.allocation_id, a.application_id, a.node_id, p.name
                ));
            }
        }
    }
    let checks = vec![
        check(
            "Negative resources",
            "Check for negative resources in partitions, queues, applications and nodes",
            negative,
        ),
        check(
            "Consistency of data",
            "Check that the partition total equals the sum of node capacities",
            capacity,
        ),
        check(
            "Node resources",
            "Check that each node's capacity equals allocated + occupied + available",
            node_totals,
        ),
        check(
            "Orphan allocations",
            "Check that every allocation has its node and application",
            orphans,
        ),
    ];
    SchedulerHealth {
        healthy: checks.iter().all(|c| c.succeeded),
        health_checks: checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unisched_core::snapshot::{AllocationSnapshot, NodeSnapshot};

    fn res(v: i64) -> ResourceMap {
        [("memory".to_string(), v)].into()
    }

    fn failing(p: PartitionSnapshot) -> Vec<&'static str> {
        check_all(&[std::sync::Arc::new(p)])
            .health_checks
            .into_iter()
            .filter(|c| !c.succeeded)
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn each_invariant_is_checked() {
        let node = NodeSnapshot {
            id: "n".into(),
            capacity: res(10),
            allocated: res(4),
            available: res(6),
            ..Default::default()
        };
        let good = PartitionSnapshot {
            name: "[rm]default".into(),
            total_capacity: res(10),
            nodes: vec![node.clone()],
            ..Default::default()
        };
        assert!(failing(good.clone()).is_empty());
        let mut p = good.clone();
        p.total_capacity = res(11);
        assert_eq!(failing(p), ["Consistency of data"]);
        let mut p = good.clone();
        p.nodes[0].available = res(5);
        assert_eq!(failing(p), ["Node resources"]);
        let mut p = good.clone();
        p.nodes[0].occupied = res(-1);
        p.nodes[0].available = res(7);
        assert_eq!(failing(p), ["Negative resources"]);
        let mut p = good;
        p.allocations.push(AllocationSnapshot {
            node_id: "gone".into(),
            ..Default::default()
        });
        assert_eq!(failing(p), ["Orphan allocations"]);
    }
}
