//! Memory per pending ask: how much resident memory the core holds for asks
//! that wait, measured as the growth of RSS while a core with no nodes takes
//! `asks` asks and keeps them pending.

use std::sync::Arc;

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

use crate::workload::wire;

const RM: &str = "bench-pending";
const CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
";

/// Current resident set size in KiB, from `VmRSS` in /proc/self/status.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What one measurement found.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PendingMemory {
    /// Asks left pending.
    pub asks: usize,
    /// RSS growth over the asks, in KiB.
    pub rss_growth_kib: u64,
    /// RSS growth per pending ask, in bytes.
    pub bytes_per_ask: f64,
}

/// Submits `asks` asks (in batches of 10,000, 10 apps) to a core with no
/// nodes, so every ask stays pending, and measures the RSS growth. The asks are
/// generated batch by batch so the benchmark's own copies stay small.
pub fn measure(asks: usize) -> Result<PendingMemory, String> {
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let rm = Arc::new(RecordingCallback::counting_only());
    scheduler
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                policy_group: "queues".to_string(),
                config: CONFIG.to_string(),
                ..Default::default()
            },
            rm,
        )
        .map_err(|e| e.to_string())?;
    let apps = 10;
    scheduler
        .update_application(si::ApplicationRequest {
            new: (0..apps)
                .map(|i| wire::app(format!("app-{i}"), "root.a", "default", "bench"))
                .collect(),
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .map_err(|e| e.to_string())?;
    scheduler.settle();
    let before = rss_kib().ok_or("VmRSS is not readable")?;
    let mut sent = 0;
    while sent < asks {
        let n = (asks - sent).min(10_000);
        let batch = (sent..sent + n)
            .map(|i| {
                wire::ask(
                    format!("pending-ask-{i}"),
                    &format!("app-{}", i % apps),
                    "default",
                    &[("memory", 10), ("vcore", 1000)],
                    0,
                )
            })
            .collect();
        scheduler
            .update_allocation(si::AllocationRequest {
                asks: batch,
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .map_err(|e| e.to_string())?;
        scheduler.settle();
        sent += n;
    }
    let after = rss_kib().ok_or("VmRSS is not readable")?;
    let growth = after.saturating_sub(before);
    Ok(PendingMemory {
        asks,
        rss_growth_kib: growth,
        bytes_per_ask: growth as f64 * 1024.0 / asks.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_asks_cost_memory_that_is_measured() {
        let m = measure(20_000).expect("measured");
        assert_eq!(m.asks, 20_000);
        // The figure itself is for BENCHMARKS.md; here only that it is sane.
        assert!(m.bytes_per_ask > 0.0 && m.bytes_per_ask < 10_000.0, "{m:?}");
    }
}
