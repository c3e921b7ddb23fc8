//! `events/batch` and `events/stream`: the core's event history and live feed,
//! as YuniKorn's `EventRecordDAO` and newline-delimited event records.
//!
//! A stream is fed by one blocking task that moves events from the core's
//! subscription (bounded; the core cuts off a reader that falls too far behind)
//! into the response body (bounded). A slow client therefore only loses its own
//! stream; it never holds up the core. Streams end when the client goes, when
//! the core cuts them off, and when the server shuts down.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use unisched_core::scheduler::observe::{EventBatch, ObservedEvent};
use unisched_si as si;

use super::{ApiError, ApiResult, RestState};

/// Events returned by `events/batch` when `count` is not given.
pub const DEFAULT_BATCH: usize = 100;
/// Most `events/stream` responses open at once.
pub const MAX_STREAMS: usize = 32;
/// Largest `count` accepted.
const MAX_COUNT: usize = 10_000;

/// `si.EventRecord` with its JSON field names, plus its id in the history.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    id: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "objectID")]
    object_id: String,
    message: String,
    timestamp_nano: i64,
    event_change_type: &'static str,
    event_change_detail: &'static str,
    #[serde(rename = "referenceID")]
    reference_id: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    resource: std::collections::BTreeMap<String, i64>,
}

fn record(e: &ObservedEvent) -> EventRecord {
    let r = &e.record;
    EventRecord {
        id: e.id,
        kind: si::event_record::Type::try_from(r.r#type).map_or("UNKNOWN", |t| t.as_str_name()),
        object_id: r.object_id.clone(),
        message: r.message.clone(),
        timestamp_nano: r.timestamp_nano,
        event_change_type: si::event_record::ChangeType::try_from(r.event_change_type)
            .map_or("UNKNOWN", |t| t.as_str_name()),
        event_change_detail: si::event_record::ChangeDetail::try_from(r.event_change_detail)
            .map_or("UNKNOWN", |t| t.as_str_name()),
        reference_id: r.reference_id.clone(),
        resource: r
            .resource
            .as_ref()
            .map(|res| {
                res.resources
                    .iter()
                    .map(|(k, q)| (k.clone(), q.value))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `EventRecordDAO`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecordDao {
    #[serde(rename = "instanceUUID")]
    instance_uuid: String,
    #[serde(rename = "lowestID")]
    lowest_id: u64,
    #[serde(rename = "highestID")]
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

/// Identifies this process's history (ids restart with the process).
fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:032x}-{:08x}", std::process::id())
    })
}

/// Query of `events/batch` and `events/stream`.
#[derive(Debug, Deserialize)]
pub struct EventQuery {
    /// First id wanted (batch).
    start: Option<u64>,
    /// How many events (batch: at most; stream: history sent first).
    count: Option<usize>,
}

/// `GET events/batch?start=ID&count=N`.
pub async fn batch(
    State(state): State<RestState>,
    Query(q): Query<EventQuery>,
) -> ApiResult<impl IntoResponse> {
    let count = q.count.unwrap_or(DEFAULT_BATCH).min(MAX_COUNT);
    let batch = state.scheduler.events_since(q.start.unwrap_or(0), count);
    Ok(axum::Json(dao(&batch)))
}

struct StreamSlot(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `GET events/stream?count=N`: the last N events, then every new one, one
/// JSON record per line.
pub async fn stream(
    State(state): State<RestState>,
    Query(q): Query<EventQuery>,
) -> ApiResult<Response> {
    if state.streams.fetch_add(1, Ordering::AcqRel) >= MAX_STREAMS {
        state.streams.fetch_sub(1, Ordering::AcqRel);
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many event streams open (at most {MAX_STREAMS})"),
        ));
    }
    let slot = StreamSlot(state.streams.clone());
    // Subscribe before reading the history so nothing falls between them.
    let live = state.scheduler.subscribe_events();
    let history = q.count.unwrap_or(0).min(MAX_COUNT);
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
