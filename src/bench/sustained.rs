//! Latency under a sustained ask rate: the RM submits asks at a fixed rate in
//! small batches (one `UpdateAllocation` call per tick) while the core
//! schedules, and every allocation's latency is measured from the call that
//! carried its ask to the callback that carried the allocation.
//!
//! The cluster is W1's (fair node sort, root.a and root.b with guarantees, two
//! apps, nodes sized so every ask of the run fits), so latency measures the
//! loop's reaction time and not a full cluster. Asks alternate between the two
//! apps. When a tick is late (the driver thread was not scheduled in time) the
//! next call carries the asks that were due, so the average rate holds; the
//! report gives the rate actually achieved.
//!
//! Steady state, as a running cluster has it: every allocation lives for
//! `lifetime` and is then released by the RM (one release call per tick, so
//! the core handles as many releases as asks), and asks submitted during the
//! first `warmup` (while the core's tables still grow to their working size)
//! are left out of the latency figures.

use std::time::{Duration, Instant};

use crate::workload::driver::{Cluster, Submitted, WorkloadError, quantile};
use crate::workload::shapes;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct SustainedOptions {
    /// Asks per second.
    pub rate: u64,
    /// How long to keep submitting.
    pub duration: Duration,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Time between two submissions.
    pub tick: Duration,
    /// How long to wait for the last allocations after the last submission.
    pub timeout: Duration,
    /// How long an allocation lives before the RM releases it.
    pub lifetime: Duration,
    /// Asks submitted during this first part of the run are not counted.
    pub warmup: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SustainedReport {
    /// Asks per second asked for.
    pub rate: u64,
    /// Asks per second actually submitted (asks over the submission time).
    pub achieved_rate: f64,
    /// Asks submitted.
    pub asks: usize,
    /// Allocations counted in the latency figures (asks after the warm-up).
    pub allocations: usize,
    /// Allocations the RM released during the run.
    pub released: usize,
    /// Submission calls made.
    pub calls: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Latency percentiles from submission to callback, in milliseconds.
    pub latency_p50_ms: f64,
    /// 99th percentile.
    pub latency_p99_ms: f64,
    /// 99.9th percentile.
    pub latency_p999_ms: f64,
    /// Largest latency.
    pub latency_max_ms: f64,
}

/// Runs the sustained-rate measurement once.
pub fn run(options: &SustainedOptions) -> Result<SustainedReport, WorkloadError> {
    let ticks = (options.duration.as_secs_f64() / options.tick.as_secs_f64().max(1e-6))
        .ceil()
        .max(1.0) as usize;
    let per_tick = (options.rate as f64 * options.tick.as_secs_f64()).max(1.0);
    let total = (per_tick * ticks as f64).round() as usize;
    // W1's cluster, its asks made tick by tick as an RM makes them when pods
    // arrive (building all of them up front left the RM thread freeing, and
    // the allocator returning to the OS, hundreds of megabytes during the
    // run: a stall of several milliseconds every second, in the RM's thread
    // and in the page faults of every other). Asks alternate between the two
    // apps: ask j is app-1's j/2th or app-2's.
    let workload = shapes::w1_cluster(options.nodes.max(1), total);
    let half = total / 2;
    let make_ask = |j: usize| {
        if j.is_multiple_of(2) {
            shapes::w1_ask("app-1", j / 2)
        } else {
            shapes::w1_ask("app-2", half + j / 2)
        }
    };
    // Tick i carries asks [round(i * per_tick), round((i + 1) * per_tick)).
    let tick_range = |i: usize| {
        let start = (i as f64 * per_tick).round() as usize;
        let end = (((i + 1) as f64 * per_tick).round() as usize).min(total);
        start..end.max(start)
    };
    let cluster = Cluster::start(
        &workload.config,
        &workload.partition,
        workload.apps,
        workload.nodes,
    )?;

    cluster.callback.reserve(total);
    let warmup_calls =
        (options.warmup.as_secs_f64() / options.tick.as_secs_f64().max(1e-6)).ceil() as usize;
    let start = Instant::now();
    let mut submitted = Submitted::with_capacity(total, ticks);
    let mut released = 0usize;
    for i in 0..ticks {
        let batch: Vec<_> = tick_range(i).map(make_ask).collect();
        let due = start + options.tick.mul_f64(i as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        submitted.submit(&cluster, batch)?;
        // Containers that ran their course finish: release every allocation
        // that arrived more than `lifetime` ago, oldest first.
        let cutoff = Instant::now().checked_sub(options.lifetime);
        let done = cluster.callback.with_record(|r| {
            r.allocations[released..]
                .iter()
                .take_while(|a| {
                    let arrived = r.arrivals.get(a.arrival as usize).copied();
                    matches!((arrived, cutoff), (Some(t), Some(c)) if t <= c)
                })
                .cloned()
                .collect::<Vec<_>>()
        });
        if !done.is_empty() {
            released += done.len();
            cluster.release(&done)?;
        }
    }
    let submitting = start.elapsed();
    let asks = submitted.asks();
    let received = cluster.callback.wait_for_allocations(asks, options.timeout);
    if received < asks {
        cluster.scheduler.shutdown();
        return Err(WorkloadError::Timeout {
            expected: asks,
            received,
            waited: options.timeout,
        });
    }
    let (_, latencies) = submitted.latencies_from(&cluster, warmup_calls);
    cluster.scheduler.shutdown();
    let ms = |q: f64| quantile(&latencies, q).as_secs_f64() * 1e3;
    Ok(SustainedReport {
        rate: options.rate,
        achieved_rate: asks as f64 / submitting.as_secs_f64().max(1e-9),
        asks,
        allocations: latencies.len(),
        released,
        calls: submitted.calls(),
        nodes: options.nodes.max(1),
        latency_p50_ms: ms(0.5),
        latency_p99_ms: ms(0.99),
        latency_p999_ms: ms(0.999),
        latency_max_ms: ms(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ask_submitted_at_the_rate_is_allocated_and_timed() {
        let report = run(&SustainedOptions {
            rate: 20_000,
            duration: Duration::from_millis(100),
            nodes: 50,
            tick: Duration::from_millis(1),
            timeout: Duration::from_secs(30),
            lifetime: Duration::from_millis(20),
            warmup: Duration::from_millis(50),
        })
        .expect("run");
        assert_eq!(report.asks, 2_000);
        // Calls 50-99 are counted: 1,000 asks.
        assert_eq!(report.allocations, 1_000);
        assert!(report.released > 0 && report.released < 2_000, "{report:?}");
        assert_eq!(report.calls, 100);
        assert!(report.latency_p50_ms <= report.latency_p99_ms);
        assert!(report.latency_p99_ms <= report.latency_max_ms);
        assert!(report.achieved_rate > 0.0);
    }
}
