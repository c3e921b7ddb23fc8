//! `/debug`: the stack listing, the full state dump, and the permanent
//! redirects from their old `/ws/v1` places, as upstream.

use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{ApiError, ApiResult, Params, RestState, all_snapshots, unix_nanos};

/// `/ws/v1/stack` and `/ws/v1/fullstatedump`: moved to `/debug` (301 with
/// the query kept), as upstream.
pub async fn moved(request: Request) -> Response {
    let uri = request.uri();
    let path = uri.path().replacen("/ws/v1", "/debug", 1);
    let target = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let body = format!("<a href=\"{target}\">Moved Permanently</a>.\n");
    (
        StatusCode::MOVED_PERMANENTLY,
        [
            (header::LOCATION, target),
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
        ],
        body,
    )
        .into_response()
}

/// `GET /debug/stack`: upstream prints every goroutine's stack. A Rust
/// process cannot walk other threads' stacks, so this lists every thread
/// of the process with its name, scheduler state and what the kernel has it
/// waiting on (Linux `/proc`), then the backtrace of the thread answering.
pub async fn stack() -> ApiResult<Response> {
    // Resolving a backtrace's symbols takes a while: not on a runtime thread.
    let out = tokio::task::spawn_blocking(|| {
        let mut out = threads();
        out.push_str("\nbacktrace of the answering thread:\n");
        out.push_str(&std::backtrace::Backtrace::force_capture().to_string());
        out
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response())
}

fn threads() -> String {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return "thread listing needs /proc (Linux); not available here\n".to_string();
    };
    let read = |tid: &str, file: &str| {
        std::fs::read_to_string(format!("/proc/self/task/{tid}/{file}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mut tids: Vec<u64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut out = format!("{} threads\n", tids.len());
    for tid in tids {
        let tid = tid.to_string();
        // The state is the field after the parenthesised command name.
        let stat = read(&tid, "stat");
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .unwrap_or("?")
            .to_string();
        let wchan = read(&tid, "wchan");
        out.push_str(&format!(
            "thread {tid} [{}] state {state} waiting in {}\n",
            read(&tid, "comm"),
            if wchan.is_empty() || wchan == "0" {
                "-"
            } else {
                &wchan
            }
        ));
    }
    out
}

/// One dump at a time, as upstream: a dump reads everything and is large.
static DUMPING: Mutex<()> = Mutex::new(());

/// `GET /debug/fullstatedump`: upstream's `AggregatedStateInfo`, pretty
/// printed. `rmDiagnostics` is the Mesos master's own state when the server
/// runs one (the RM's state dump, as a shim gives upstream), else upstream's
/// note that no RM gave one.
pub async fn full_state_dump(
    State(state): State<RestState>,
    params: Params,
) -> ApiResult<Response> {
    let snaps = all_snapshots(&state).await?;
    let rm_diagnostics = match &state.mesos {
        Some(link) => link
            .master
            .query(unisched_mesos::master::report::Query::State)
            .await
            .unwrap_or_else(|| json!({"Error": "the Mesos master has stopped"})),
        None => json!({"empty": "Resource Manager did not register callback"}),
    };
    // Upstream has one configuration; with several RMs the dump shows the
    // one `?rmID=` names, else the first RM's, rather than none.
    let rm = params
        .get("rmID")
        .cloned()
        .or_else(|| state.scheduler.resource_managers().into_iter().next());
    let config = rm.and_then(|rm| state.scheduler.config(&rm));
    let _one_at_a_time = DUMPING.lock().unwrap_or_else(|e| e.into_inner());
    let mut dump = json!({
        "timestamp": unix_nanos(std::time::SystemTime::now()),
        "partitions": super::partitions::all_partitions(&snaps),
        "applications": snaps.iter().flat_map(|s| super::apps::applications(s, |_| true)).collect::<Vec<_>>(),
        "appHistory": super::history::app_history(&state.history),
        "nodes": super::nodes::nodes_by_partition(&snaps),
        "clusterInfo": super::partitions::clusters(&state, &snaps),
        "containerHistory": super::history::container_history(&state.history),
        "queues": snaps.iter().filter_map(|s| super::queues::Tree::new(s).info("root", true)).collect::<Vec<_>>(),
        "rmDiagnostics": rm_diagnostics,
        "logLevel": tracing::level_filters::LevelFilter::current().to_string().to_lowercase(),
        "config": super::config::config_dao(config.as_deref()),
        "placementRules": super::partitions::all_rules(&snaps),
        "eventStreams": state.streams.list(),
    });
    // Upstream's fields are `omitempty`: empty lists are left out.
    if let Value::Object(fields) = &mut dump {
        fields.retain(|_, v| !(v.is_null() || v.as_array().is_some_and(Vec::is_empty)));
    }
    let text = serde_json::to_string_pretty(&dump).map_err(ApiError::internal)?;
    Ok((
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        text,
    )
        .into_response())
}

/// `/debug/pprof/...`: Go runtime profiles, which a Rust process does not
/// have; answered with a reason instead of a bare 404.
pub async fn pprof() -> ApiError {
    ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "pprof profiles come from Go's runtime; unisched is not a Go program (profile it with perf)",
    )
}
