//! REST under `/ws/v1`, with YuniKorn's routes and JSON field names, built from
//! the snapshots the core publishes.
//!
//! Reads never wait for the scheduling loop while its published view is fresh
//! (`Scheduler::published`); when it is stale the first read takes a snapshot
//! through the loop, on a blocking task so the runtime never stalls. Reads are
//! open; every other method needs the bearer token when one is set.

mod dao;
mod events;
mod health;
mod metrics;
mod usage;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use unisched_core::{PartitionSnapshot, Scheduler};
use unisched_shim_api::SchedulerError;

use crate::auth::Token;

/// What the handlers share.
#[derive(Clone)]
pub struct RestState {
    scheduler: Scheduler,
    token: Token,
    /// Turns true when the server shuts down; event streams end then.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// Open `events/stream` responses.
    streams: Arc<std::sync::atomic::AtomicUsize>,
}

impl RestState {
    /// State over `scheduler`, guarding mutating methods with `token`; open
    /// event streams end when `stopping` turns true.
    pub fn new(
        scheduler: Scheduler,
        token: Token,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            scheduler,
            token,
            stopping,
            streams: Arc::default(),
        }
    }
}

/// An error answer in YuniKorn's shape (`status_code`, `message`, `description`).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    fn not_found(what: &str, name: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("{what} {name} not found"))
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }

    fn of(e: &SchedulerError) -> Self {
        let status =
            match e {
                SchedulerError::UnknownResourceManager { .. } => StatusCode::NOT_FOUND,
                SchedulerError::InvalidRequest { .. }
                | SchedulerError::InvalidConfiguration { .. } => StatusCode::BAD_REQUEST,
                SchedulerError::ConfigurationUnavailable { .. }
                | SchedulerError::Reentrant { .. } => StatusCode::CONFLICT,
                SchedulerError::ShutDown => StatusCode::SERVICE_UNAVAILABLE,
            };
        Self::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "status_code": self.status.as_u16(),
            "message": self.message,
            "description": self.message,
        });
        (self.status, axum::Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router for `/ws/v1`.
pub fn router(state: RestState) -> Router {
    Router::new()
        .route("/ws/v1/partitions", get(partitions))
        .route("/ws/v1/partition/{p}/queues", get(queues))
        .route("/ws/v1/partition/{p}/queue/{q}", get(queue))
        .route("/ws/v1/partition/{p}/nodes", get(nodes))
        .route("/ws/v1/partition/{p}/node/{n}", get(node))
        .route("/ws/v1/partition/{p}/applications", get(applications))
        .route(
            "/ws/v1/partition/{p}/applications/{state}",
            get(applications_by_state),
        )
        .route(
            "/ws/v1/partition/{p}/queue/{q}/applications",
            get(queue_applications),
        )
        .route("/ws/v1/partition/{p}/application/{a}", get(application))
        .route("/ws/v1/partition/{p}/usage/users", get(usage_users))
        .route("/ws/v1/partition/{p}/usage/groups", get(usage_groups))
        .route("/ws/v1/partition/{p}/usage/user/{u}", get(usage_user))
        .route("/ws/v1/partition/{p}/usage/group/{g}", get(usage_group))
        .route("/ws/v1/config", get(get_config).put(put_config))
        .route("/ws/v1/scheduler/healthcheck", get(healthcheck))
        .route("/ws/v1/validate-conf", post(validate_conf))
        .route("/ws/v1/events/batch", get(events::batch))
        .route("/ws/v1/events/stream", get(events::stream))
        .route("/ws/v1/fullstatedump", get(fullstatedump))
        .route("/ws/v1/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(crate::MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

async fn require_token(State(state): State<RestState>, request: Request, next: Next) -> Response {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if reads.contains(request.method()) || state.token.admits(header) {
        next.run(request).await
    } else {
        ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response()
    }
}

/// Runs a call that may wait for the scheduling thread on a blocking task.
async fn blocking<T: Send + 'static>(
    state: &RestState,
    f: impl FnOnce(&Scheduler) -> T + Send + 'static,
) -> ApiResult<T> {
    let scheduler = state.scheduler.clone();
    tokio::task::spawn_blocking(move || f(&scheduler))
        .await
        .map_err(ApiError::internal)
}

async fn all_snapshots(state: &RestState) -> ApiResult<Vec<Arc<PartitionSnapshot>>> {
    blocking(state, Scheduler::published_all).await
}

async fn snapshot(state: &RestState, partition: String) -> ApiResult<Arc<PartitionSnapshot>> {
    let name = partition.clone();
    blocking(state, move |s| s.published(&name))
        .await?
        .ok_or_else(|| ApiError::not_found("partition", &partition))
}

async fn partitions(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(
        snaps.iter().map(|s| dao::partition(s)).collect::<Vec<_>>(),
    ))
}

async fn queues(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    dao::queue_tree(&snap, "root")
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("queue", "root"))
}

async fn queue(
    State(state): State<RestState>,
    Path((p, q)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    dao::queue_tree(&snap, &q)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("queue", &q))
}

async fn nodes(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(
        snap.nodes
            .iter()
            .map(|n| dao::node(&snap, n))
            .collect::<Vec<_>>(),
    ))
}

async fn node(
    State(state): State<RestState>,
    Path((p, n)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    snap.node(&n)
        .map(|node| axum::Json(dao::node(&snap, node)))
        .ok_or_else(|| ApiError::not_found("node", &n))
}

async fn applications(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(dao::applications(&snap, |_| true)))
}

/// States an application leaves for good; every other state is `active`.
const FINISHED_STATES: [&str; 4] = ["Completed", "Rejected", "Failed", "Expired"];

async fn applications_by_state(
    State(state): State<RestState>,
    Path((p, wanted)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    let wanted = wanted.to_lowercase();
    let apps = match wanted.as_str() {
        "active" => dao::applications(&snap, |a| {
            !FINISHED_STATES
                .iter()
                .any(|f| f.eq_ignore_ascii_case(&a.state))
        }),
        _ => dao::applications(&snap, |a| a.state.eq_ignore_ascii_case(&wanted)),
    };
    Ok(axum::Json(apps))
}

async fn queue_applications(
    State(state): State<RestState>,
    Path((p, q)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    if snap.queue(&q).is_none() {
        return Err(ApiError::not_found("queue", &q));
    }
    Ok(axum::Json(dao::applications(&snap, |a| a.queue == q)))
}

async fn application(
    State(state): State<RestState>,
    Path((p, a)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    let mut apps = dao::applications(&snap, |app| app.id == a);
    apps.pop()
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("application", &a))
}

async fn usage_users(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(usage::users(&snap)))
}

async fn usage_groups(
    State(state): State<RestState>,
    Path(p): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    Ok(axum::Json(usage::groups(&snap)))
}

async fn usage_user(
    State(state): State<RestState>,
    Path((p, u)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    usage::users(&snap)
        .into_iter()
        .find(|x| x.user_name == u)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("user", &u))
}

async fn usage_group(
    State(state): State<RestState>,
    Path((p, g)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let snap = snapshot(&state, p).await?;
    usage::groups(&snap)
        .into_iter()
        .find(|x| x.group_name == g)
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found("group", &g))
}

#[derive(serde::Deserialize)]
struct RmQuery {
    /// The RM whose configuration is meant; optional with a single RM.
    #[serde(rename = "rmID")]
    rm_id: Option<String>,
}

/// The RM a config call means: the one named, else the only one registered.
fn rm_of(scheduler: &Scheduler, query: RmQuery) -> ApiResult<String> {
    if let Some(rm) = query.rm_id {
        return Ok(rm);
    }
    let mut rms = scheduler.resource_managers();
    match rms.len() {
        1 => Ok(rms.remove(0)),
        0 => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no resource manager is registered",
        )),
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("several resource managers are registered ({rms:?}): name one with ?rmID="),
        )),
    }
}

/// `GET /ws/v1/config`: the configuration text in force (YAML), or, with
/// `Accept: application/json`, `{rmID, checksum, config}`.
async fn get_config(
    State(state): State<RestState>,
    Query(query): Query<RmQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let rm = rm_of(&state.scheduler, query)?;
    let text = state
        .scheduler
        .config(&rm)
        .ok_or_else(|| ApiError::not_found("resource manager", &rm))?;
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if json {
        let checksum = unisched_core::config::checksum(&text);
        return Ok(axum::Json(serde_json::json!({
            "rmID": rm,
            "checksum": checksum,
            "config": text,
        }))
        .into_response());
    }
    Ok(([(header::CONTENT_TYPE, "application/x-yaml")], text).into_response())
}

/// `PUT /ws/v1/config`: applies the YAML body, then asks the RM to persist it.
async fn put_config(
    State(state): State<RestState>,
    Query(query): Query<RmQuery>,
    body: axum::body::Bytes,
) -> ApiResult<impl IntoResponse> {
    let text = utf8(&body)?.to_string();
    let rm = rm_of(&state.scheduler, query)?;
    let answer = blocking(&state, move |s| s.set_config(&rm, &text))
        .await?
        .map_err(|e| ApiError::of(&e))?;
    if !answer.success {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the configuration was applied but the resource manager did not persist it: {}",
                answer.reason
            ),
        ));
    }
    Ok(axum::Json(serde_json::json!({
        "persisted": true,
        "oldConfig": answer.old_config,
    })))
}

fn utf8(body: &[u8]) -> ApiResult<&str> {
    std::str::from_utf8(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the configuration is not UTF-8 text: {e}"),
        )
    })
}

async fn healthcheck(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(health::check_all(&snaps)))
}

async fn validate_conf(body: axum::body::Bytes) -> ApiResult<impl IntoResponse> {
    let text = utf8(&body)?;
    let answer = match unisched_core::config::parse(text) {
        Ok(_) => serde_json::json!({ "allowed": true }),
        Err(errors) => serde_json::json!({ "allowed": false, "reason": errors.to_string() }),
    };
    Ok(axum::Json(answer))
}

/// `fullstatedump`: everything a bug report needs, in one document.
async fn fullstatedump(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    let scheduler = state.scheduler.clone();
    let configs: std::collections::BTreeMap<String, String> = scheduler
        .resource_managers()
        .into_iter()
        .filter_map(|rm| scheduler.config(&rm).map(|c| (rm, c)))
        .collect();
    let events = scheduler.events_since(0, usize::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(axum::Json(serde_json::json!({
        "timestamp": now,
        "partitions": snaps.iter().map(|s| dao::partition(s)).collect::<Vec<_>>(),
        "queues": snaps.iter().filter_map(|s| dao::queue_tree(s, "root")).collect::<Vec<_>>(),
        "applications": snaps.iter().flat_map(|s| dao::applications(s, |_| true)).collect::<Vec<_>>(),
        "nodes": snaps.iter().flat_map(|s| s.nodes.iter().map(|n| dao::node(s, n)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "userUsage": snaps.iter().flat_map(|s| usage::users(s)).collect::<Vec<_>>(),
        "groupUsage": snaps.iter().flat_map(|s| usage::groups(s)).collect::<Vec<_>>(),
        "schedulerHealth": health::check_all(&snaps),
        "config": configs,
        "eventStream": events::dao(&events),
    })))
}

async fn metrics(State(state): State<RestState>) -> ApiResult<Response> {
    let snaps = all_snapshots(&state).await?;
    let text = metrics::render(&snaps, state.scheduler.metrics()).map_err(ApiError::internal)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
