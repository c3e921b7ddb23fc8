//! Application routes: upstream's `ApplicationDAOInfo` with its asks
//! (`AllocationAskDAOInfo`) and allocations (`AllocationDAOInfo`), by
//! partition, by queue, by state and one at a time.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use serde::Serialize;
use unisched_core::snapshot::{
    AllocationSnapshot, ApplicationSnapshot, AskSnapshot, PartitionSnapshot, ResourceMap,
};

use super::{ApiError, ApiResult, Params, RestState, snapshot, valid_queue_path};

/// The core's tag naming the node an ask must go on (upstream's
/// `requiredNodeId`).
const REQUIRED_NODE_TAG: &str = "yunikorn.apache.org/requiredNode";

/// `AllocationDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationInfo {
    allocation_key: String,
    /// Not in upstream's DAO, where one allocation is one ask: in this SI
    /// line an ask may hold several allocations, and the id tells them apart.
    #[serde(rename = "allocationID")]
    allocation_id: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    allocation_tags: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "is_zero")]
    request_time: u64,
    #[serde(skip_serializing_if = "is_zero")]
    allocation_time: u64,
    #[serde(skip_serializing_if = "is_zero")]
    allocation_delay: u64,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    resource: ResourceMap,
    priority: String,
    #[serde(rename = "nodeId", skip_serializing_if = "String::is_empty")]
    node_id: String,
    #[serde(rename = "applicationId", skip_serializing_if = "String::is_empty")]
    application_id: String,
    #[serde(skip_serializing_if = "is_false")]
    placeholder: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    task_group_name: String,
    #[serde(skip_serializing_if = "is_false")]
    preempted: bool,
    #[serde(skip_serializing_if = "is_false")]
    originator: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One allocation.
pub fn allocation(a: &AllocationSnapshot) -> AllocationInfo {
    // A recovered allocation has no ask of its own: it was requested when made.
    let requested = if a.requested == 0 {
        a.created
    } else {
        a.requested
    };
    AllocationInfo {
        allocation_key: a.allocation_key.clone(),
        allocation_id: a.allocation_id.clone(),
        allocation_tags: a.tags.clone(),
        request_time: requested,
        allocation_time: a.created,
        allocation_delay: a.created.saturating_sub(requested),
        resource: a.resource.clone(),
        priority: a.priority.to_string(),
        node_id: a.node_id.clone(),
        application_id: a.application_id.clone(),
        placeholder: a.placeholder,
        task_group_name: a.task_group.clone(),
        preempted: a.preempted,
        originator: a.originator,
    }
}

/// The allocations of `snap` that `keep` selects.
pub fn allocations(
    snap: &PartitionSnapshot,
    keep: impl Fn(&AllocationSnapshot) -> bool,
) -> Vec<AllocationInfo> {
    snap.allocations
        .iter()
        .filter(|a| keep(a))
        .map(allocation)
        .collect()
}

/// `AllocationAskDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AskInfo {
    allocation_key: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    allocation_tags: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "is_zero")]
    request_time: u64,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    resource: ResourceMap,
    /// Not in upstream's DAO (one ask is one allocation there): how many
    /// allocations this ask still wants.
    pending_count: u32,
    priority: String,
    #[serde(rename = "requiredNodeId", skip_serializing_if = "String::is_empty")]
    required_node_id: String,
    #[serde(rename = "applicationId")]
    application_id: String,
    #[serde(skip_serializing_if = "is_false")]
    placeholder: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    task_group_name: String,
    #[serde(skip_serializing_if = "is_false")]
    originator: bool,
}

fn ask(app: &str, k: &AskSnapshot) -> AskInfo {
    AskInfo {
        allocation_key: k.allocation_key.clone(),
        allocation_tags: k.tags.clone(),
        request_time: k.created,
        resource: k.resource.clone(),
        pending_count: k.pending_allocations,
        priority: k.priority.to_string(),
        required_node_id: k.tags.get(REQUIRED_NODE_TAG).cloned().unwrap_or_default(),
        application_id: app.to_string(),
        placeholder: k.placeholder,
        task_group_name: k.task_group.clone(),
        originator: k.originator,
    }
}

/// `StateDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateInfo {
    time: u64,
    application_state: String,
}

/// `PlaceholderDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlaceholderInfo {
    task_group_name: String,
    #[serde(skip_serializing_if = "is_zero_u32")]
    count: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    replaced: u32,
    #[serde(rename = "timedout", skip_serializing_if = "is_zero_u32")]
    timed_out: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// `ResourceHistory`: upstream's time-weighted usage per resource, which
/// this core does not track; present and empty, as upstream shows it for an
/// application that has none.
#[derive(Serialize)]
struct ResourceHistory {}

/// `ApplicationDAOInfo`. Upstream's `maxUsedResource` is not tracked by the
/// core and is left out, as upstream leaves it out when empty.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationInfo {
    #[serde(rename = "applicationID")]
    application_id: String,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    used_resource: ResourceMap,
    /// Held by placeholders, apart from `usedResource` (upstream's
    /// allocatedPlaceholder).
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    placeholder_resource: ResourceMap,
    #[serde(skip_serializing_if = "ResourceMap::is_empty")]
    pending_resource: ResourceMap,
    partition: String,
    queue_name: String,
    #[serde(skip_serializing_if = "is_zero")]
    submission_time: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_time: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    requests: Vec<AskInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allocations: Vec<AllocationInfo>,
    #[serde(rename = "applicationState")]
    state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    user: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    state_log: Vec<StateInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    placeholder_data: Vec<PlaceholderInfo>,
    #[serde(skip_serializing_if = "String::is_empty")]
    rejected_message: String,
    #[serde(skip_serializing_if = "is_false")]
    has_reserved: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reservations: Vec<String>,
    #[serde(skip_serializing_if = "is_zero_i32")]
    max_request_priority: i32,
    /// Milliseconds, as upstream.
    #[serde(skip_serializing_if = "is_zero")]
    start_time: u64,
    resource_history: ResourceHistory,
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

/// States an application leaves for good.
const FINISHED_STATES: [&str; 4] = ["Completed", "Rejected", "Failed", "Expired"];

fn finished(state: &str) -> bool {
    FINISHED_STATES
        .iter()
        .any(|f| f.eq_ignore_ascii_case(state))
}

/// One application with its asks and allocations.
pub fn application(snap: &PartitionSnapshot, a: &ApplicationSnapshot) -> ApplicationInfo {
    let finished_time = finished(&a.state)
        .then(|| a.state_log.last().map(|s| s.time))
        .flatten();
    let start_time = a
        .state_log
        .iter()
        .rev()
        .find(|s| s.state == "Running")
        .map_or(0, |s| s.time / 1_000_000);
    ApplicationInfo {
        application_id: a.id.clone(),
        used_resource: a.allocated.clone(),
        placeholder_resource: a.placeholder.clone(),
        pending_resource: a.pending.clone(),
        partition: snap.name.clone(),
        queue_name: a.queue.clone(),
        submission_time: a.submission_time,
        finished_time,
        requests: a.pending_asks.iter().map(|k| ask(&a.id, k)).collect(),
        allocations: allocations(snap, |al| al.application_id == a.id),
        state: a.state.clone(),
        user: a.user.clone(),
        groups: a.groups.clone(),
        state_log: a
            .state_log
            .iter()
            .map(|s| StateInfo {
                time: s.time,
                application_state: s.state.clone(),
            })
            .collect(),
        placeholder_data: a
            .placeholders
            .iter()
            .map(|p| PlaceholderInfo {
                task_group_name: p.task_group.clone(),
                count: p.count,
                replaced: p.replaced,
                timed_out: p.timed_out,
            })
            .collect(),
        rejected_message: a.rejected_message.clone(),
        has_reserved: a.pending_asks.iter().any(|k| k.reserved_node.is_some()),
        reservations: a
            .pending_asks
            .iter()
            .filter(|k| k.reserved_node.is_some())
            .map(|k| k.allocation_key.clone())
            .collect(),
        // Upstream's value with nothing pending is the lowest priority.
        max_request_priority: a
            .pending_asks
            .iter()
            .map(|k| k.priority)
            .max()
            .unwrap_or(i32::MIN),
        start_time,
        resource_history: ResourceHistory {},
    }
}

/// The applications `keep` selects.
pub fn applications(
    snap: &PartitionSnapshot,
    keep: impl Fn(&ApplicationSnapshot) -> bool,
) -> Vec<ApplicationInfo> {
    snap.applications
        .iter()
        .filter(|a| keep(a))
        .map(|a| application(snap, a))
        .collect()
}

/// States `?status=` may name for active applications, as upstream.
const ACTIVE_STATUSES: [&str; 6] = [
    "new",
    "accepted",
    "running",
    "completing",
    "failing",
    "resuming",
];

/// Which applications a route keeps.
type Selection = Box<dyn Fn(&ApplicationSnapshot) -> bool + Send>;

/// What `{state}` and `?status=` select, or why they are refused.
fn state_filter(state: &str, params: &Params, allowed: &[&str]) -> ApiResult<Selection> {
    let state = state.to_lowercase();
    if !allowed.contains(&state.as_str()) {
        return Err(ApiError::bad_request(format!(
            "Only following application states are allowed: {}",
            allowed.join(", ")
        )));
    }
    let status = params.get("status").map(|s| s.to_lowercase());
    if let Some(s) = &status
        && !s.is_empty()
        && !ACTIVE_STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "Only following active statuses are allowed: {}",
            ACTIVE_STATUSES.join(",")
        )));
    }
    Ok(match state.as_str() {
        "active" => Box::new(move |a: &ApplicationSnapshot| {
            !finished(&a.state)
                && status
                    .as_ref()
                    .is_none_or(|s| s.is_empty() || a.state.eq_ignore_ascii_case(s))
        }),
        "rejected" => Box::new(|a: &ApplicationSnapshot| a.state == "Rejected"),
        _ => Box::new(|a: &ApplicationSnapshot| finished(&a.state) && a.state != "Rejected"),
    })
}

/// `GET /ws/v1/partition/{p}/applications`: every application. Not one of
/// upstream's routes (it has them by state only); kept for scripts that
/// want the lot in one call.
pub async fn partition_apps(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(applications(&snap, |_| true)))
}

/// `GET /ws/v1/partition/{p}/applications/{state}`: `active` (with an
/// optional `?status=`), `rejected` or `completed`.
pub async fn partition_apps_by_state(
    State(state): State<RestState>,
    Path((p, wanted)): Path<(String, String)>,
    params: Params,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    let keep = state_filter(&wanted, &params, &["active", "rejected", "completed"])?;
    if wanted.eq_ignore_ascii_case("rejected") {
        // Refused applications are kept apart, as upstream keeps them.
        let rejected = snap.rejected_applications.iter().filter(|a| keep(a));
        return Ok(axum::Json(
            rejected.map(|a| application(&snap, a)).collect::<Vec<_>>(),
        ));
    }
    Ok(axum::Json(applications(&snap, keep)))
}

/// The snapshot and the queue path of a `queue/{q}` route, checked.
async fn queue_snapshot(
    state: &RestState,
    p: String,
    q: &str,
) -> ApiResult<std::sync::Arc<PartitionSnapshot>> {
    valid_queue_path(q)?;
    let snap = snapshot(state, p).await?;
    if snap.queue(q).is_none() {
        return Err(ApiError::not_found("queue", q));
    }
    Ok(snap)
}

/// `GET /ws/v1/partition/{p}/queue/{q}/applications`.
pub async fn queue_apps(
    State(state): State<RestState>,
    Path((p, q)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = queue_snapshot(&state, p, &q).await?;
    Ok(axum::Json(applications(&snap, |a| a.queue == q)))
}

/// `GET /ws/v1/partition/{p}/queue/{q}/applications/{state}`: `active`
/// only, as upstream, with an optional `?status=`.
pub async fn queue_apps_by_state(
    State(state): State<RestState>,
    Path((p, q, wanted)): Path<(String, String, String)>,
    params: Params,
) -> ApiResult<impl IntoResponse> {
    let snap = queue_snapshot(&state, p, &q).await?;
    let keep = state_filter(&wanted, &params, &["active"])?;
    Ok(axum::Json(applications(&snap, |a| a.queue == q && keep(a))))
}

/// `GET /ws/v1/partition/{p}/queue/{q}/application/{a}`.
pub async fn queue_app(
    State(state): State<RestState>,
    Path((p, q, a)): Path<(String, String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = queue_snapshot(&state, p, &q).await?;
    snap.applications
        .iter()
        .find(|app| app.id == a && app.queue == q)
        .map(|app| axum::Json(application(&snap, app)))
        .ok_or_else(|| ApiError::not_found("application", &a))
}

/// `GET /ws/v1/partition/{p}/application/{a}`.
pub async fn app(
    State(state): State<RestState>,
    Path((p, a)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    snap.application(&a)
        .map(|app| axum::Json(application(&snap, app)))
        .ok_or_else(|| ApiError::not_found("application", &a))
}
