//! `events/batch` and `events/stream`: the core's event history and live feed,
//! as YuniKorn's `EventRecordDAO` and newline-delimited event records.
//!
//! A stream is fed by one blocking task that moves events from the core's
//! subscription (bounded; the core cuts off a reader that falls too far behind)
//! into the response body (bounded). A slow client therefore only loses its own
//! stream; it never holds up the core. Streams end when the client goes, when
//! the core cuts them off, and when the server shuts down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use unisched_core::scheduler::observe::{EventBatch, ObservedEvent};

use super::{ApiError, ApiResult, Params, RestState};

/// Most `events/stream` responses open at once.
pub const MAX_STREAMS: usize = 32;
/// Largest `count` answered (upstream's default REST response size); also
/// what `events/batch` answers without a `count`, as upstream.
const MAX_COUNT: usize = 10_000;

/// `si.EventRecord` as Go's encoding/json writes it, which is what
/// upstream sends: the enums as numbers, zero values left out, the resource
/// as `{"resources": {name: {"value": n}}}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    #[serde(rename = "type", skip_serializing_if = "is_zero")]
    kind: i32,
    #[serde(rename = "objectID", skip_serializing_if = "String::is_empty")]
    object_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    timestamp_nano: i64,
    #[serde(skip_serializing_if = "is_zero")]
    event_change_type: i32,
    #[serde(skip_serializing_if = "is_zero")]
    event_change_detail: i32,
    #[serde(rename = "referenceID", skip_serializing_if = "String::is_empty")]
    reference_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<Resource>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// `si.Resource` under Go's encoding.
#[derive(Debug, Serialize)]
pub struct Resource {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    resources: BTreeMap<String, Quantity>,
}

/// `si.Quantity` under Go's encoding.
#[derive(Debug, Serialize)]
pub struct Quantity {
    #[serde(skip_serializing_if = "is_zero_i64")]
    value: i64,
}

fn record(e: &ObservedEvent) -> EventRecord {
    let r = &e.record;
    EventRecord {
        kind: r.r#type,
        object_id: r.object_id.clone(),
        message: r.message.clone(),
        timestamp_nano: r.timestamp_nano,
        event_change_type: r.event_change_type,
        event_change_detail: r.event_change_detail,
        reference_id: r.reference_id.clone(),
        resource: r.resource.as_ref().map(|res| Resource {
            resources: res
                .resources
                .iter()
                .map(|(k, q)| (k.clone(), Quantity { value: q.value }))
                .collect(),
        }),
    }
}

/// `EventRecordDAO` (Go field names: upstream gives it no JSON tags).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EventRecordDao {
    #[serde(rename = "InstanceUUID")]
    instance_uuid: String,
    #[serde(rename = "LowestID")]
    lowest_id: u64,
    #[serde(rename = "HighestID")]
    highest_id: u64,
    event_records: Vec<EventRecord>,
}

/// The DAO of a slice of the history.
pub fn dao(batch: &EventBatch) -> EventRecordDao {
    EventRecordDao {
        instance_uuid: instance_id().to_string(),
        lowest_id: batch.lowest_id,
        // Like upstream: the id after the newest event.
        highest_id: batch.next_id,
        event_records: batch.events.iter().map(record).collect(),
    }
}

/// Identifies this process's history (ids restart with the process), as
/// upstream's instance UUID does.
fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().to_string())
}

/// A count or id from the query string, or upstream's 400 for a bad one.
fn number(params: &Params, name: &str) -> ApiResult<Option<u64>> {
    params
        .get(name)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<u64>()
                .map_err(|e| ApiError::bad_request(format!("{name} '{v}': {e}")))
        })
        .transpose()
}

/// `GET events/batch?start=ID&count=N`.
pub async fn batch(State(state): State<RestState>, params: Params) -> ApiResult<impl IntoResponse> {
    let count = match number(&params, "count")? {
        Some(0) => {
            return Err(ApiError::bad_request(
                "0 is not a valid value for \"count\"",
            ));
        }
        Some(n) => usize::try_from(n).unwrap_or(MAX_COUNT).min(MAX_COUNT),
        None => MAX_COUNT,
    };
    let start = number(&params, "start")?.unwrap_or(0);
    let batch = state.scheduler.events_since(start, count);
    Ok(axum::Json(dao(&batch)))
}

/// The open `events/stream` responses: who asked and since when (the full
/// state dump lists them, as upstream's `eventStreams`).
#[derive(Clone, Default)]
pub struct OpenStreams(Arc<Mutex<BTreeMap<u64, StreamInfo>>>, Arc<AtomicU64>);

/// `EventStreamData`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamInfo {
    name: String,
    /// RFC 3339, as Go writes a `time.Time`.
    created_at: String,
}

impl OpenStreams {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, StreamInfo>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a stream for `name` unless [`MAX_STREAMS`] are open.
    fn open(&self, name: String) -> Option<StreamSlot> {
        let mut open = self.lock();
        if open.len() >= MAX_STREAMS {
            return None;
        }
        let id = self.1.fetch_add(1, Ordering::Relaxed);
        open.insert(
            id,
            StreamInfo {
                name,
                created_at: rfc3339(std::time::SystemTime::now()),
            },
        );
        Some(StreamSlot(self.clone(), id))
    }

    /// The open streams, oldest first.
    pub fn list(&self) -> Vec<StreamInfo> {
        self.lock().values().cloned().collect()
    }
}

/// A time as RFC 3339 in UTC with nanoseconds.
fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// An open stream's place in [`OpenStreams`], given up when dropped.
struct StreamSlot(OpenStreams, u64);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

/// `GET events/stream?count=N`: a first line naming the instance
/// (`{"InstanceUUID": ...}`), the last N events, then every new one, one
/// JSON record per line, as upstream.
pub async fn stream(
    State(state): State<RestState>,
    params: Params,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let history = number(&params, "count")?.unwrap_or(0);
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    let slot = state.streams.open(host).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many event streams open (at most {MAX_STREAMS})"),
        )
    })?;
    // Subscribe before reading the history so nothing falls between them.
    let live = state.scheduler.subscribe_events();
    let history = usize::try_from(history).unwrap_or(MAX_COUNT).min(MAX_COUNT);
    let past = if history > 0 {
        let newest = state.scheduler.events_since(u64::MAX, 0).next_id;
        state
            .scheduler
            .events_since(newest.saturating_sub(history as u64), history)
            .events
    } else {
        Vec::new()
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(256);
    let stopping = state.stopping.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let first = serde_json::json!({ "InstanceUUID": instance_id() }).to_string() + "\n";
        if tx.blocking_send(Ok(first)).is_err() {
            return;
        }
        let mut last = None;
        for e in past {
            last = Some(e.id);
            if tx.blocking_send(Ok(line(&e))).is_err() {
                return;
            }
        }
        loop {
            if *stopping.borrow() || tx.is_closed() {
                return;
            }
            match live.recv_timeout(Duration::from_millis(200)) {
                Ok(e) => {
                    if last.is_some_and(|l| e.id <= l) {
                        continue;
                    }
                    if tx.blocking_send(Ok(line(&e))).is_err() {
                        return;
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

fn line(e: &ObservedEvent) -> String {
    let mut text = serde_json::to_string(&record(e)).unwrap_or_default();
    text.push('\n');
    text
}
