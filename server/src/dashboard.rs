//! The built-in dashboard at `/` of the HTTP port: one page, a script and a
//! style sheet, compiled into the binary (no build step, nothing fetched).
//!
//! The page reads the same `/ws/v1` routes any client reads, follows
//! `/ws/v1/events/stream` for live updates, and reads the Mesos side
//! through the `/ui/mesos/*` routes here, which ask the master this server
//! runs (so the page needs no CORS and no second origin). `/ui/info` tells
//! the page what runs and names the event enums it shows.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};
use unisched_mesos::master::report::Query;
use unisched_si as si;

use crate::rest::{ApiError, RestState};

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/app.js");
const STYLE: &str = include_str!("dashboard/app.css");

/// The dashboard's routes.
pub fn router(state: RestState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/dashboard/app.js", get(script))
        .route("/dashboard/app.css", get(style))
        .route("/ui/info", get(info))
        .route("/ui/mesos/state", get(mesos_state))
        .route("/ui/mesos/metrics", get(mesos_metrics))
        .layer(axum::middleware::from_fn(crate::rest::contain_panics))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // The assets change only with the binary; revalidate on reload.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// Names of an SI enum's values, by number.
fn names(name_of: impl Fn(i32) -> Option<&'static str>) -> Value {
    let mut out = Map::new();
    for n in 0..1000 {
        if let Some(s) = name_of(n) {
            out.insert(n.to_string(), json!(s));
        }
    }
    Value::Object(out)
}

/// `GET /ui/info`: the server's version, whether a Mesos master runs (and
/// where its own endpoints are), and the event enums' names.
async fn info(State(state): State<RestState>) -> impl IntoResponse {
    use si::event_record::{ChangeDetail, ChangeType, Type};
    let mesos = state.mesos.as_ref().map(|m| {
        json!({
            "addr": m.addr.to_string(),
            "port": m.addr.port(),
            // An unspecified address is reached on the host the page came from.
            "unspecified": m.addr.ip().is_unspecified(),
        })
    });
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "mesos": mesos,
        "eventTypes": names(|n| Type::try_from(n).ok().map(|t| t.as_str_name())),
        "changeTypes": names(|n| ChangeType::try_from(n).ok().map(|t| t.as_str_name())),
        "changeDetails": names(|n| ChangeDetail::try_from(n).ok().map(|t| t.as_str_name())),
    }))
}

fn no_mesos() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no Mesos master runs in this server (serve --mesos-addr starts one)",
    )
}

fn master_gone() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the Mesos master has stopped",
    )
}

/// `GET /ui/mesos/state`: the master's `/state`.
async fn mesos_state(State(state): State<RestState>) -> Result<impl IntoResponse, ApiError> {
    let link = state.mesos.as_ref().ok_or_else(no_mesos)?;
    let value = link
        .master
        .query(Query::State)
        .await
        .ok_or_else(master_gone)?;
    Ok(axum::Json(value))
}

/// `GET /ui/mesos/metrics`: the master's `/metrics/snapshot`.
async fn mesos_metrics(State(state): State<RestState>) -> Result<impl IntoResponse, ApiError> {
    let link = state.mesos.as_ref().ok_or_else(no_mesos)?;
    let value = link
        .master
        .query(Query::Metrics)
        .await
        .ok_or_else(master_gone)?;
    Ok(axum::Json(value))
}
