//! REST under `/ws/v1`, with YuniKorn's routes and JSON field names, built from
//! partition snapshots.
//!
//! Every read takes snapshots on a blocking task (`Scheduler::snapshot` waits for
//! the scheduling thread), so a slow scrape never stalls the runtime. Reads are
//! open; every other method needs the bearer token when one is set.

mod dao;
mod health;
mod metrics;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use unisched_core::{PartitionSnapshot, Scheduler};

use crate::auth::Token;

/// What the handlers share.
#[derive(Clone)]
pub struct RestState {
    scheduler: Scheduler,
    token: Token,
}

impl RestState {
    /// State over `scheduler`, guarding mutating methods with `token`.
    pub fn new(scheduler: Scheduler, token: Token) -> Self {
        Self { scheduler, token }
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
            "/ws/v1/partition/{p}/queue/{q}/applications",
            get(queue_applications),
        )
        .route("/ws/v1/partition/{p}/application/{a}", get(application))
        .route("/ws/v1/scheduler/healthcheck", get(healthcheck))
        .route("/ws/v1/validate-conf", post(validate_conf))
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

/// Runs a snapshot read on a blocking task.
async fn blocking<T: Send + 'static>(
    state: &RestState,
    f: impl FnOnce(&Scheduler) -> T + Send + 'static,
) -> ApiResult<T> {
    let scheduler = state.scheduler.clone();
    tokio::task::spawn_blocking(move || f(&scheduler))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

async fn all_snapshots(state: &RestState) -> ApiResult<Vec<PartitionSnapshot>> {
    blocking(state, |s| {
        s.partitions()
            .iter()
            .filter_map(|p| s.snapshot(p))
            .collect()
    })
    .await
}

async fn snapshot(state: &RestState, partition: String) -> ApiResult<PartitionSnapshot> {
    let name = partition.clone();
    blocking(state, move |s| s.snapshot(&name))
        .await?
        .ok_or_else(|| ApiError::not_found("partition", &partition))
}

async fn partitions(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(
        snaps.iter().map(dao::partition).collect::<Vec<_>>(),
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

async fn healthcheck(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    let snaps = all_snapshots(&state).await?;
    Ok(axum::Json(health::check_all(&snaps)))
}

async fn validate_conf(body: axum::body::Bytes) -> ApiResult<impl IntoResponse> {
    let text = std::str::from_utf8(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the configuration is not UTF-8 text: {e}"),
        )
    })?;
    let answer = match unisched_core::config::parse(text) {
        Ok(_) => serde_json::json!({ "allowed": true }),
        Err(errors) => serde_json::json!({ "allowed": false, "reason": errors.to_string() }),
    };
    Ok(axum::Json(answer))
}

async fn metrics(State(state): State<RestState>, headers: HeaderMap) -> ApiResult<Response> {
    let _ = headers;
    let snaps = all_snapshots(&state).await?;
    let text = metrics::render(&snaps)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
