//! `usage/users` and `usage/groups`: resources and running applications per
//! user and per group, as a queue tree (YuniKorn's `UserResourceUsageDAOInfo`,
//! `GroupResourceUsageDAOInfo`, `ResourceUsageDAOInfo`), built from a snapshot.
//!
//! An application counts for its user and, as upstream tracks it, for at most
//! one group: the first of the user's groups with a limit on the queue path
//! (`limit_group` in the snapshot). Its usage is what it has allocated, summed
//! up the queue path.

use std::collections::BTreeMap;

use serde::Serialize;
use unisched_core::snapshot::{ApplicationSnapshot, PartitionSnapshot, ResourceMap};

use axum::extract::{Path, State};
use axum::response::IntoResponse;

use super::resources::add;
use super::{ApiError, ApiResult, RestState, snapshot};

/// `ResourceUsageDAOInfo`: one queue of a user's or group's tree.
#[derive(Debug, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    queue_path: String,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    resource_usage: ResourceMap,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    running_applications: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    children: Vec<ResourceUsage>,
}

/// `UserResourceUsageDAOInfo`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserUsage {
    /// The user.
    pub user_name: String,
    /// Application id to the group it counts for.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    groups: BTreeMap<String, String>,
    queues: ResourceUsage,
}

/// `GroupResourceUsageDAOInfo`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupUsage {
    /// The group.
    pub group_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    applications: Vec<String>,
    queues: ResourceUsage,
}

fn running(a: &ApplicationSnapshot) -> bool {
    !["Completed", "Rejected", "Failed", "Expired"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&a.state))
}

/// The queue tree holding `apps`, usage summed up from the leaves.
fn tree(apps: &[&ApplicationSnapshot]) -> ResourceUsage {
    let mut root = ResourceUsage {
        queue_path: "root".to_string(),
        ..ResourceUsage::default()
    };
    for a in apps {
        let mut node = &mut root;
        add_app(node, a);
        let mut path = String::from("root");
        for part in a.queue.split('.').skip(1) {
            path.push('.');
            path.push_str(part);
            let i = match node.children.iter().position(|c| c.queue_path == path) {
                Some(i) => i,
                None => {
                    node.children.push(ResourceUsage {
                        queue_path: path.clone(),
                        ..ResourceUsage::default()
                    });
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
            add_app(node, a);
        }
    }
    root
}

fn add_app(node: &mut ResourceUsage, a: &ApplicationSnapshot) {
    add(&mut node.resource_usage, &a.allocated);
    node.resource_usage.retain(|_, v| *v != 0);
    if running(a) {
        node.running_applications.push(a.id.clone());
    }
}

/// Usage of every user with an application in the partition.
pub fn users(snap: &PartitionSnapshot) -> Vec<UserUsage> {
    let mut by_user: BTreeMap<&str, Vec<&ApplicationSnapshot>> = BTreeMap::new();
    for a in &snap.applications {
        by_user.entry(a.user.as_str()).or_default().push(a);
    }
    by_user
        .into_iter()
        .map(|(user, apps)| UserUsage {
            user_name: user.to_string(),
            groups: apps
                .iter()
                .filter_map(|a| a.limit_group.clone().map(|g| (a.id.clone(), g)))
                .collect(),
            queues: tree(&apps),
        })
        .collect()
}

/// Usage of every group with an application in the partition.
pub fn groups(snap: &PartitionSnapshot) -> Vec<GroupUsage> {
    let mut by_group: BTreeMap<&str, Vec<&ApplicationSnapshot>> = BTreeMap::new();
    for a in &snap.applications {
        if let Some(g) = &a.limit_group {
            by_group.entry(g.as_str()).or_default().push(a);
        }
    }
    by_group
        .into_iter()
        .map(|(group, apps)| GroupUsage {
            group_name: group.to_string(),
            applications: apps.iter().map(|a| a.id.clone()).collect(),
            queues: tree(&apps),
        })
        .collect()
}

/// `GET /ws/v1/partition/{p}/usage/users`.
pub async fn users_route(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(users(&snap)))
}

/// `GET /ws/v1/partition/{p}/usage/groups`.
pub async fn groups_route(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(groups(&snap)))
}

/// `GET /ws/v1/partition/{p}/usage/user/{u}`: 400 for a name no user can
/// have, as upstream.
pub async fn user_route(
    State(state): State<RestState>,
    Path((p, u)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    if !unisched_core::config::names::is_valid_user_name(&u) {
        return Err(ApiError::bad_request(format!("invalid user name '{u}'")));
    }
    let snap = snapshot(&state, p).await?;
    users(&snap)
        .into_iter()
        .find(|x| x.user_name == u)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("user", &u))
}

/// `GET /ws/v1/partition/{p}/usage/group/{g}`.
pub async fn group_route(
    State(state): State<RestState>,
    Path((p, g)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    if !unisched_core::config::names::is_valid_group_name(&g) {
        return Err(ApiError::bad_request(format!("invalid group name '{g}'")));
    }
    let snap = snapshot(&state, p).await?;
    groups(&snap)
        .into_iter()
        .find(|x| x.group_name == g)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("group", &g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(
        id: &str,
        user: &str,
        groups: &[&str],
        limit_group: Option<&str>,
        queue: &str,
        mem: i64,
    ) -> ApplicationSnapshot {
        ApplicationSnapshot {
            id: id.into(),
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            limit_group: limit_group.map(str::to_string),
            queue: queue.into(),
            state: "Running".into(),
            allocated: [("memory".to_string(), mem)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn usage_sums_up_the_queue_path_and_counts_one_group_per_app() {
        let snap = PartitionSnapshot {
            applications: vec![
                app("a1", "alice", &["dev"], Some("dev"), "root.x.y", 10),
                // Limited as "ops" (dev has no limit on its path): counts for
                // ops only, not for both of alice's groups.
                app("a2", "alice", &["dev", "ops"], Some("ops"), "root.z", 5),
                app("b1", "bob", &["ops"], Some("ops"), "root.x.y", 1),
                // No group limit on the path: counts for its user only.
                app("c1", "carol", &["dev"], None, "root.z", 7),
            ],
            ..Default::default()
        };
        let users = serde_json::to_value(users(&snap)).unwrap();
        assert_eq!(users[0]["userName"], "alice");
        assert_eq!(users[0]["queues"]["resourceUsage"]["memory"], 15);
        assert_eq!(users[0]["queues"]["children"][0]["queuePath"], "root.x");
        assert_eq!(
            users[0]["queues"]["children"][0]["children"][0]["runningApplications"],
            serde_json::json!(["a1"])
        );
        assert_eq!(users[0]["groups"]["a2"], "ops");
        assert_eq!(users[2]["userName"], "carol");
        assert!(users[2].get("groups").is_none(), "empty maps are left out");
        let groups = serde_json::to_value(groups(&snap)).unwrap();
        assert_eq!(groups.as_array().unwrap().len(), 2);
        assert_eq!(groups[0]["groupName"], "dev");
        assert_eq!(groups[0]["applications"], serde_json::json!(["a1"]));
        assert_eq!(groups[0]["queues"]["resourceUsage"]["memory"], 10);
        assert_eq!(groups[1]["groupName"], "ops");
        assert_eq!(groups[1]["applications"], serde_json::json!(["a2", "b1"]));
        assert_eq!(groups[1]["queues"]["resourceUsage"]["memory"], 6);
    }
}
