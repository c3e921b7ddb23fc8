//! `partitions`, `clusters` and `partition/{p}/placementrules`: upstream's
//! `PartitionInfo`, `ClusterDAOInfo` and `RuleDAO`.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use serde::Serialize;
use unisched_core::config::{FilterKind, PlacementRuleConfig, RuleKind};
use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

use super::resources::{abs_used, add};
use super::{ApiResult, RestState, all_snapshots, partition_labels, snapshot, unix_nanos};

/// `PartitionInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionInfo {
    cluster_id: String,
    name: String,
    capacity: PartitionCapacity,
    node_sorting_policy: NodeSortingPolicy,
    preemption_enabled: bool,
    /// Upstream's quota preemption (lowering a max preempts); not in this core.
    quota_preemption_enabled: bool,
    #[serde(skip_serializing_if = "is_zero")]
    total_nodes: usize,
    applications: BTreeMap<String, usize>,
    #[serde(skip_serializing_if = "is_zero")]
    total_containers: usize,
    state: &'static str,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartitionCapacity {
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    capacity: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    used_capacity: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    utilization: ResourceMap,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeSortingPolicy {
    #[serde(rename = "type")]
    kind: String,
    resource_weights: BTreeMap<String, f64>,
}

/// What the partition's nodes have allocated.
pub fn used_capacity(snap: &PartitionSnapshot) -> ResourceMap {
    let mut used = ResourceMap::new();
    for n in &snap.nodes {
        add(&mut used, &n.allocated);
    }
    used
}

/// The partition summary, named `label`.
pub fn partition(snap: &PartitionSnapshot, label: String) -> PartitionInfo {
    let used = used_capacity(snap);
    let mut applications = BTreeMap::new();
    applications.insert("total".to_string(), snap.applications.len());
    for a in &snap.applications {
        *applications.entry(a.state.clone()).or_insert(0) += 1;
    }
    // The weights in force: the configured ones, else the core's default.
    let resource_weights = if snap.node_sort_weights.is_empty() {
        [("memory".to_string(), 1.0), ("vcore".to_string(), 1.0)].into()
    } else {
        snap.node_sort_weights.clone()
    };
    PartitionInfo {
        cluster_id: snap.rm_id.clone(),
        name: label,
        capacity: PartitionCapacity {
            utilization: abs_used(&snap.total_capacity, &used),
            capacity: snap.total_capacity.clone(),
            used_capacity: used,
        },
        node_sorting_policy: NodeSortingPolicy {
            kind: snap.node_sort_policy.clone(),
            resource_weights,
        },
        preemption_enabled: snap.preemption_enabled,
        quota_preemption_enabled: false,
        total_nodes: snap.nodes.len(),
        applications,
        total_containers: snap.allocations.len(),
        state: "Active",
    }
}

/// Every partition's summary.
pub fn all_partitions(snaps: &[std::sync::Arc<PartitionSnapshot>]) -> Vec<PartitionInfo> {
    snaps
        .iter()
        .zip(partition_labels(snaps))
        .map(|(s, label)| partition(s, label))
        .collect()
}

/// `GET /ws/v1/partitions`.
pub async fn partitions(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(all_partitions(&snaps)))
}

/// `ClusterDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    start_time: u64,
    rm_build_information: Vec<BTreeMap<String, String>>,
    partition: String,
    cluster_name: String,
}

/// One entry per partition, as upstream. Upstream names every cluster
/// `kubernetes` (its only shim); here the cluster is the RM that owns the
/// partition, so its id is the name.
pub fn clusters(
    state: &RestState,
    snaps: &[std::sync::Arc<PartitionSnapshot>],
) -> Vec<ClusterInfo> {
    let build: Vec<BTreeMap<String, String>> = state
        .scheduler
        .resource_managers()
        .into_iter()
        .filter_map(|rm| {
            let mut info = state.scheduler.build_info(&rm)?;
            info.insert("rmId".to_string(), rm);
            Some(info)
        })
        .collect();
    snaps
        .iter()
        .zip(partition_labels(snaps))
        .map(|(s, label)| ClusterInfo {
            start_time: unix_nanos(state.started),
            rm_build_information: build.clone(),
            partition: label,
            cluster_name: s.rm_id.clone(),
        })
        .collect()
}

/// `GET /ws/v1/clusters`.
pub async fn clusters_route(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(clusters(&state, &snaps)))
}

/// `RuleDAO`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleInfo {
    name: &'static str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<FilterInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_rule: Option<Box<RuleInfo>>,
}

/// `FilterDAO`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FilterInfo {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    user_list: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    group_list: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    user_exp: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    group_exp: String,
}

/// Names as a list, or the one entry with regex characters as an expression
/// (how the core reads a filter).
fn names_or_exp(names: &[String]) -> (Vec<String>, String) {
    match names {
        [only] if unisched_core::config::names::has_regex_chars(only) => (Vec::new(), only.clone()),
        _ => (names.to_vec(), String::new()),
    }
}

fn rule_info(rule: &PlacementRuleConfig) -> RuleInfo {
    let mut parameters = BTreeMap::new();
    parameters.insert("create", rule.create.to_string());
    match rule.kind {
        RuleKind::Tag => {
            parameters.insert("tagName", rule.value.clone());
        }
        RuleKind::Fixed => {
            parameters.insert("queue", rule.value.clone());
            parameters.insert("qualified", rule.value.starts_with("root.").to_string());
        }
        RuleKind::Provided | RuleKind::User => {}
    }
    let f = &rule.filter;
    let filter = (!f.users.is_empty() || !f.groups.is_empty()).then(|| {
        let (user_list, user_exp) = names_or_exp(&f.users);
        let (group_list, group_exp) = names_or_exp(&f.groups);
        FilterInfo {
            kind: match f.kind {
                FilterKind::Allow => "allow",
                FilterKind::Deny => "deny",
            },
            user_list,
            group_list,
            user_exp,
            group_exp,
        }
    });
    RuleInfo {
        name: rule.kind.name(),
        parameters,
        filter,
        parent_rule: rule.parent.as_deref().map(|p| Box::new(rule_info(p))),
    }
}

/// The rules in force: the configured ones, or the implicit `provided` rule
/// without create, then, as upstream lists it, the internal `recovery` rule
/// that places forced applications no other rule placed in
/// `root.@recovery@` (a rule without parameters).
pub fn rules(snap: &PartitionSnapshot) -> Vec<RuleInfo> {
    let mut rules: Vec<RuleInfo> = if snap.placement_rules.is_empty() {
        let mut parameters = BTreeMap::new();
        parameters.insert("create", "false".to_string());
        vec![RuleInfo {
            name: RuleKind::Provided.name(),
            parameters,
            filter: None,
            parent_rule: None,
        }]
    } else {
        snap.placement_rules.iter().map(rule_info).collect()
    };
    rules.push(RuleInfo {
        name: "recovery",
        parameters: BTreeMap::new(),
        filter: None,
        parent_rule: None,
    });
    rules
}

/// `RuleDAOInfo`: the rules of one partition (the full state dump's form).
#[derive(Serialize)]
pub struct PartitionRules {
    partition: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rules: Vec<RuleInfo>,
}

/// The rules of every partition.
pub fn all_rules(snaps: &[std::sync::Arc<PartitionSnapshot>]) -> Vec<PartitionRules> {
    snaps
        .iter()
        .zip(partition_labels(snaps))
        .map(|(s, partition)| PartitionRules {
            partition,
            rules: rules(s),
        })
        .collect()
}

/// `GET /ws/v1/partition/{p}/placementrules`.
pub async fn placement_rules(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(rules(&snap)))
}
