//! REST under `/ws/v1` and `/debug`: every route of YuniKorn's web service,
//! with its JSON field names and shapes, built from the snapshots the core
//! publishes.
//!
//! Reads never wait for the scheduling loop while its published view is fresh
//! (`Scheduler::published`); when it is stale the first read takes a snapshot
//! through the loop, on a blocking task so the runtime never stalls. Reads are
//! open; every other method needs the bearer token when one is set. Every
//! answer carries the CORS headers upstream sends, so a web UI served from
//! another origin (YuniKorn's own) can read the API.
//!
//! Where the answer differs from upstream on purpose, the handler says why
//! (and `server/REST.md` lists it).

mod apps;
mod config;
mod debug;
mod events;
mod health;
pub mod history;
mod metrics;
mod nodes;
mod partitions;
mod queues;
mod resources;
mod usage;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use unisched_core::{PartitionSnapshot, Scheduler};
use unisched_mesos::master::MasterHandle;
use unisched_shim_api::SchedulerError;

use crate::auth::Token;

pub use events::OpenStreams;
pub use history::History;

/// What the handlers share.
#[derive(Clone)]
pub struct RestState {
    pub(crate) scheduler: Scheduler,
    token: Token,
    /// Turns true when the server shuts down; event streams end then.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// Open `events/stream` responses.
    streams: OpenStreams,
    /// Totals over time for `history/apps` and `history/containers`.
    pub(crate) history: Arc<History>,
    /// When the server started (the clusters' `startTime`).
    pub(crate) started: SystemTime,
    /// The Mesos-compatible master, when the server runs one.
    pub(crate) mesos: Option<MesosLink>,
}

/// The Mesos-compatible master the server runs, and where its own HTTP
/// endpoints listen.
#[derive(Clone)]
pub struct MesosLink {
    /// The master.
    pub master: MasterHandle,
    /// Its HTTP address (`/state`, `/metrics/snapshot`, `/health`, ...).
    pub addr: std::net::SocketAddr,
}

impl RestState {
    /// State over `scheduler`, guarding mutating methods with `token`; open
    /// event streams end when `stopping` turns true.
    pub fn new(
        scheduler: Scheduler,
        token: Token,
        stopping: tokio::sync::watch::Receiver<bool>,
        history: Arc<History>,
        mesos: Option<MesosLink>,
    ) -> Self {
        Self {
            scheduler,
            token,
            stopping,
            streams: OpenStreams::default(),
            history,
            started: SystemTime::now(),
            mesos,
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
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(what: &str, name: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("{what} {name} not found"))
    }

    pub(crate) fn internal(e: impl std::fmt::Display) -> Self {
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

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The query string as name to value; parsing a value is the handler's job,
/// so a bad one is answered in YuniKorn's error shape.
pub(crate) type Params = axum::extract::Query<HashMap<String, String>>;

/// The router for `/ws/v1` and `/debug`.
pub fn router(state: RestState) -> Router {
    Router::new()
        .route("/ws/v1/clusters", get(partitions::clusters_route))
        .route("/ws/v1/partitions", get(partitions::partitions))
        .route(
            "/ws/v1/partition/{p}/placementrules",
            get(partitions::placement_rules),
        )
        .route("/ws/v1/partition/{p}/queues", get(queues::queues))
        .route("/ws/v1/partition/{p}/queue/{q}", get(queues::queue))
        .route("/ws/v1/partition/{p}/nodes", get(nodes::nodes))
        .route("/ws/v1/partition/{p}/node/{n}", get(nodes::node_route))
        .route(
            "/ws/v1/partition/{p}/applications",
            get(apps::partition_apps),
        )
        .route(
            "/ws/v1/partition/{p}/applications/{state}",
            get(apps::partition_apps_by_state),
        )
        .route(
            "/ws/v1/partition/{p}/queue/{q}/applications",
            get(apps::queue_apps),
        )
        .route(
            "/ws/v1/partition/{p}/queue/{q}/applications/{state}",
            get(apps::queue_apps_by_state),
        )
        .route(
            "/ws/v1/partition/{p}/queue/{q}/application/{a}",
            get(apps::queue_app),
        )
        .route("/ws/v1/partition/{p}/application/{a}", get(apps::app))
        .route("/ws/v1/partition/{p}/usage/users", get(usage::users_route))
        .route(
            "/ws/v1/partition/{p}/usage/groups",
            get(usage::groups_route),
        )
        .route(
            "/ws/v1/partition/{p}/usage/user/{u}",
            get(usage::user_route),
        )
        .route(
            "/ws/v1/partition/{p}/usage/group/{g}",
            get(usage::group_route),
        )
        .route(
            "/ws/v1/config",
            get(config::get_config).put(config::put_config),
        )
        .route("/ws/v1/validate-conf", post(config::validate_conf))
        .route("/ws/v1/scheduler/healthcheck", get(health::route))
        .route(
            "/ws/v1/scheduler/node-utilizations",
            get(nodes::utilizations),
        )
        .route("/ws/v1/history/apps", get(history::apps))
        .route("/ws/v1/history/containers", get(history::containers))
        .route("/ws/v1/events/batch", get(events::batch))
        .route("/ws/v1/events/stream", get(events::stream))
        .route("/ws/v1/metrics", get(metrics::route))
        .route("/ws/v1/stack", get(debug::moved))
        .route("/ws/v1/fullstatedump", get(debug::moved))
        .route("/debug/stack", get(debug::stack))
        .route("/debug/fullstatedump", get(debug::full_state_dump))
        .route("/debug/pprof", get(debug::pprof))
        .route("/debug/pprof/{*profile}", get(debug::pprof))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(crate::MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(middleware::from_fn(cors))
        .layer(middleware::from_fn(contain_panics))
        .with_state(state)
}

/// A handler that panics answers 500 with the panic's message; the
/// connection's task goes on and nothing escapes into the runtime.
pub(crate) async fn contain_panics(request: Request, next: Next) -> Response {
    use futures_util::FutureExt as _;
    match std::panic::AssertUnwindSafe(next.run(request))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!(%message, "REST handler panicked");
            ApiError::internal(format!("the handler failed: {message}")).into_response()
        }
    }
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route {} {}", request.method(), request.uri().path()),
    )
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

/// Upstream's CORS headers on every answer (any origin; GET and OPTIONS, or
/// POST and OPTIONS for a POST). A preflight is answered here: upstream's
/// router answers OPTIONS without these headers, which leaves a preflighted
/// request (one sending our bearer token, say) unable to pass, so this one
/// also allows `Authorization`, the header the token travels in.
async fn cors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let mut response = if method == Method::OPTIONS {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    let methods = if method == Method::POST {
        "OPTIONS, POST"
    } else {
        "GET, OPTIONS"
    };
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(methods),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("X-Requested-With,Content-Type,Accept,Origin,Authorization"),
    );
    response
}

/// Runs a call that may wait for the scheduling thread on a blocking task.
pub(crate) async fn blocking<T: Send + 'static>(
    state: &RestState,
    f: impl FnOnce(&Scheduler) -> T + Send + 'static,
) -> ApiResult<T> {
    let scheduler = state.scheduler.clone();
    tokio::task::spawn_blocking(move || f(&scheduler))
        .await
        .map_err(ApiError::internal)
}

pub(crate) async fn all_snapshots(state: &RestState) -> ApiResult<Vec<Arc<PartitionSnapshot>>> {
    blocking(state, Scheduler::published_all).await
}

/// The partition named in a path: qualified (`[rmID]name`) or plain when
/// only one RM has it.
pub(crate) async fn snapshot(
    state: &RestState,
    partition: String,
) -> ApiResult<Arc<PartitionSnapshot>> {
    let name = partition.clone();
    blocking(state, move |s| s.published(&name))
        .await?
        .ok_or_else(|| ApiError::not_found("partition", &partition))
}

/// Checks a queue path from a URL the way upstream does: each part a valid
/// queue name.
pub(crate) fn valid_queue_path(path: &str) -> ApiResult<()> {
    match path
        .split('.')
        .find(|part| !unisched_core::config::names::is_valid_queue_name(part))
    {
        Some(part) => Err(ApiError::bad_request(format!(
            "invalid queue name '{part}' in '{path}'"
        ))),
        None => Ok(()),
    }
}

/// Nanoseconds since the Unix epoch.
pub(crate) fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// How lists of partitions name each one: plainly, as upstream, unless
/// another RM has a partition of the same name; then `[rmID]name`, which
/// routes taking `{p}` accept, so a client that builds URLs from the names
/// (YuniKorn's web UI does) reaches the right one.
pub(crate) fn partition_labels(snaps: &[Arc<PartitionSnapshot>]) -> Vec<String> {
    snaps
        .iter()
        .map(|s| {
            let shared = snaps.iter().filter(|o| o.name == s.name).nth(1).is_some();
            if shared {
                format!("[{}]{}", s.rm_id, s.name)
            } else {
                s.name.clone()
            }
        })
        .collect()
}

/// The partition name without its `[rmID]` prefix.
pub fn plain_name(qualified: &str) -> &str {
    match qualified.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((_, name)) => name,
        None => qualified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn a_panicking_handler_answers_500_and_the_server_goes_on() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        async fn boom() -> &'static str {
            panic!("kaboom")
        }
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|| async { "fine" }))
            .layer(middleware::from_fn(contain_panics));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        for (path, want) in [("/boom", "500"), ("/ok", "200"), ("/boom", "500")] {
            let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            conn.write_all(request.as_bytes()).await.unwrap();
            let mut text = String::new();
            conn.read_to_string(&mut text).await.unwrap();
            assert_eq!(&text[9..12], want, "{path}: {text}");
            if want == "500" {
                assert!(text.contains("kaboom"), "{text}");
            }
        }
    }

    #[test]
    fn queue_paths_are_checked_part_by_part() {
        assert!(valid_queue_path("root.a-b.c_d").is_ok());
        assert!(valid_queue_path("root..a").is_err());
        assert!(valid_queue_path("root.a b").is_err());
    }
}
