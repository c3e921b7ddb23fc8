//! `history/apps` and `history/containers`: totals over time, as upstream's
//! internal metrics history (one record a minute, the last 1440, i.e. a day,
//! for the web UI's front page).
//!
//! The server's history task is the only writer: it samples the published
//! snapshots on its interval (the first sample at start, so a fresh page has
//! a point to draw). Readers copy the records under the lock.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::response::IntoResponse;
use serde::Serialize;
use unisched_core::Scheduler;

use super::{ApiResult, RestState, unix_nanos};

/// Upstream's sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Upstream's number of records kept.
pub const DEFAULT_RECORDS: usize = 1440;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// When, nanoseconds since the Unix epoch.
    pub timestamp: u64,
    /// Applications running (upstream's `TotalApplicationsRunning`).
    pub applications: usize,
    /// Allocations held (upstream's allocated minus released containers).
    pub containers: usize,
}

/// The bounded history of samples.
#[derive(Debug)]
pub struct History {
    records: Mutex<VecDeque<Record>>,
    limit: usize,
}

impl History {
    /// A history keeping the last `limit` records.
    pub fn new(limit: usize) -> Self {
        Self {
            records: Mutex::new(VecDeque::with_capacity(limit.min(DEFAULT_RECORDS))),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Record>> {
        // A panic while holding this lock leaves a valid deque behind.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a record, dropping the oldest past the limit.
    pub fn push(&self, record: Record) {
        let mut records = self.lock();
        if records.len() == self.limit {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// The records, oldest first.
    pub fn records(&self) -> Vec<Record> {
        self.lock().iter().copied().collect()
    }

    /// Samples `scheduler`'s state now. The snapshots are taken through the
    /// loop rather than read from the published view: a read of that view
    /// keeps the loop publishing for a while, which a sample once a minute
    /// should not cause.
    pub fn sample(&self, scheduler: &Scheduler) {
        let snaps: Vec<_> = scheduler
            .partitions()
            .iter()
            .filter_map(|p| scheduler.snapshot(p))
            .collect();
        self.push(Record {
            timestamp: unix_nanos(SystemTime::now()),
            applications: snaps
                .iter()
                .flat_map(|s| &s.applications)
                .filter(|a| a.state == "Running")
                .count(),
            containers: snaps.iter().map(|s| s.allocations.len()).sum(),
        });
    }
}

/// Samples every `interval` until `stopping` turns true; the sampling (which
/// may wait for the scheduling loop) runs on a blocking task.
pub async fn run(
    history: std::sync::Arc<History>,
    scheduler: Scheduler,
    interval: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
        let (h, s) = (history.clone(), scheduler.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || h.sample(&s)).await {
            tracing::warn!(error = %e, "history sample failed");
        }
    }
}

/// `ApplicationHistoryDAOInfo` (upstream sends the count as a string).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppHistory {
    timestamp: u64,
    total_applications: String,
}

/// `ContainerHistoryDAOInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerHistory {
    timestamp: u64,
    total_containers: String,
}

/// The application history.
pub fn app_history(history: &History) -> Vec<AppHistory> {
    history
        .records()
        .into_iter()
        .map(|r| AppHistory {
            timestamp: r.timestamp,
            total_applications: r.applications.to_string(),
        })
        .collect()
}

/// The container history.
pub fn container_history(history: &History) -> Vec<ContainerHistory> {
    history
        .records()
        .into_iter()
        .map(|r| ContainerHistory {
            timestamp: r.timestamp,
            total_containers: r.containers.to_string(),
        })
        .collect()
}

/// `GET /ws/v1/history/apps`.
pub async fn apps(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    Ok(axum::Json(app_history(&state.history)))
}

/// `GET /ws/v1/history/containers`.
pub async fn containers(State(state): State<RestState>) -> ApiResult<impl IntoResponse> {
    Ok(axum::Json(container_history(&state.history)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_records_in_order() {
        let h = History::new(2);
        for i in 0..3 {
            h.push(Record {
                timestamp: i,
                applications: i as usize,
                containers: 10 + i as usize,
            });
        }
        let json = serde_json::to_value(app_history(&h)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"timestamp": 1, "totalApplications": "1"},
                {"timestamp": 2, "totalApplications": "2"},
            ])
        );
        let json = serde_json::to_value(container_history(&h)).unwrap();
        assert_eq!(json[1]["totalContainers"], "12");
    }
}
