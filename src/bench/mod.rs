//! `unisched bench`: runs the workloads W1–W4 of `spec/performance.md` on a
//! fresh core per repeat and reports throughput, wall time, peak RSS and
//! submission→callback latency, as a table or as JSON.

pub mod mesos_http;
pub mod mesos_w4;
pub mod pending;
pub mod preempt;
pub mod probe;
pub mod sustained;

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::workload::{self, RunMeasurement, Workload, WorkloadError, shapes};

/// Which workload to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// YuniKorn's core benchmark.
    W1,
    /// Many apps and queues.
    W2,
    /// Binpacking, full nodes, queue and user limits.
    W3,
    /// Mesos-style allocation run through the Mesos front end: agents
    /// offered to frameworks (asks = frameworks).
    W4,
    /// W4's shape through the SI: one 8-vcore ask per node.
    W4si,
}

impl WorkloadKind {
    /// All workloads, in order.
    pub const ALL: [Self; 4] = [Self::W1, Self::W2, Self::W3, Self::W4];

    /// True for the workloads that run through the Mesos front end.
    pub fn through_mesos(self) -> bool {
        self == Self::W4
    }

    /// Default (nodes, asks) for a full or a quick run.
    pub fn default_size(self, quick: bool) -> (usize, usize) {
        match (self, quick) {
            (Self::W1, false) => (5_000, 10_000),
            (Self::W2, false) => (5_000, 50_000),
            (Self::W3, false) => (5_000, 14_400),
            (Self::W4, false) => (10_000, 1_000),
            (Self::W4si, false) => (10_000, 10_000),
            (Self::W1, true) => (100, 1_000),
            (Self::W2, true) => (100, 1_000),
            (Self::W3, true) => (200, 480),
            (Self::W4, true) => (200, 20),
            (Self::W4si, true) => (200, 200),
        }
    }

    /// Builds the workload with `nodes` nodes and `asks` asks (W4 always has
    /// one ask per node and ignores `asks`).
    pub fn build(self, nodes: usize, asks: usize, quick: bool, seed: u64) -> Workload {
        match self {
            Self::W1 => shapes::w1(nodes, asks),
            Self::W2 => shapes::w2(nodes, asks, if quick { 4 } else { 80 }),
            Self::W3 => shapes::w3(nodes, asks, Self::w3_leaves(quick), seed),
            Self::W4 | Self::W4si => shapes::w4(nodes, if quick { 20 } else { 1_000 }),
        }
    }

    fn w3_leaves(quick: bool) -> usize {
        if quick { 12 } else { 120 }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The workload.
    pub kind: WorkloadKind,
    /// Nodes (default per workload).
    pub nodes: Option<usize>,
    /// Asks (default per workload).
    pub asks: Option<usize>,
    /// Fresh-core repeats.
    pub repeat: usize,
    /// Small sizes for a smoke run.
    pub quick: bool,
    /// Seed for the workloads that draw random sizes.
    pub seed: u64,
    /// Longest wait for the allocations of one repeat.
    pub timeout: Duration,
    /// W3 only: the variant with guarantees and asks that preempt
    /// ([`shapes::w3_preemption`]).
    pub preemption: bool,
    /// W4 through the Mesos front end: allocation runs the master makes (and
    /// the frameworks decline) before the timed one, on the same master and
    /// core; 0 times the master's first run.
    pub warm_runs: usize,
    /// W4 through the Mesos front end: the CPUs the scheduling thread and
    /// the master's thread are pinned to (`--pin-threads`); `None`: the
    /// kernel places them.
    pub pinned: Option<(usize, usize)>,
}

/// Median, minimum and maximum of a series.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero when empty).
    pub fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.to_vec();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return Self::default();
        }
        let mid = v.len() / 2;
        let median = if v.len().is_multiple_of(2) {
            (v[mid - 1] + v[mid]) / 2.0
        } else {
            v[mid]
        };
        Self {
            median,
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// The result of all repeats of one workload.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The workload.
    pub workload: WorkloadKind,
    /// Nodes.
    pub nodes: usize,
    /// Asks submitted.
    pub asks: usize,
    /// Allocations received (last repeat).
    pub allocations: usize,
    /// W3 with preemption ([`BenchOptions::preemption`]).
    pub preemption: bool,
    /// Allocations the core released as preemption victims, each confirmed
    /// by the RM (last repeat).
    pub preempted: usize,
    /// Repeats run.
    pub repeats: usize,
    /// Allocations per second over repeats.
    pub allocations_per_second: Spread,
    /// Measured time of a repeat, in milliseconds.
    pub wall_ms: Spread,
    /// Peak resident set size of the process during a repeat (VmHWM), in MiB;
    /// `None` when /proc is not readable.
    pub peak_rss_mib: Option<f64>,
    /// Median latency (submission → callback) over repeats, in milliseconds.
    pub latency_p50_ms: Spread,
    /// 99th percentile latency over repeats, in milliseconds.
    pub latency_p99_ms: Spread,
}

/// Peak RSS so far in KiB, from `VmHWM` in /proc/self/status.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resets the kernel's peak RSS mark to the current RSS (Linux ≥ 4.0), so each
/// repeat reports its own peak. Best effort.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Runs the repeats of one workload.
pub fn run(
    options: &BenchOptions,
    mut on_repeat: impl FnMut(&RunMeasurement),
) -> Result<BenchReport, WorkloadError> {
    let (default_nodes, default_asks) = options.kind.default_size(options.quick);
    let nodes = options.nodes.unwrap_or(default_nodes).max(1);
    let asks = options.asks.unwrap_or(default_asks);
    let mut runs = Vec::with_capacity(options.repeat);
    let mut peak_kib: Option<u64> = None;
    for _ in 0..options.repeat.max(1) {
        let preemption = options.preemption && options.kind == WorkloadKind::W3;
        reset_peak_rss();
        let run = if options.kind.through_mesos() {
            mesos_w4::run(
                nodes,
                asks.max(1),
                options.warm_runs,
                options.timeout,
                options.pinned,
            )?
        } else if preemption {
            let leaves = WorkloadKind::w3_leaves(options.quick);
            preempt::run_confirming(shapes::w3_preemption(nodes, asks, leaves, options.seed))?
        } else {
            let workload = options.kind.build(nodes, asks, options.quick, options.seed);
            workload::driver::run_measured(workload, options.timeout)?
        };
        peak_kib = peak_kib.max(peak_rss_kib());
        on_repeat(&run);
        runs.push(run);
    }
    let series =
        |f: &dyn Fn(&RunMeasurement) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
    let last = runs.last().expect("at least one repeat");
    Ok(BenchReport {
        workload: options.kind,
        nodes: last.nodes,
        asks: last.asks,
        allocations: last.allocations,
        preemption: options.preemption,
        preempted: last.released,
        repeats: runs.len(),
        allocations_per_second: series(&|r| r.allocations_per_second()),
        wall_ms: series(&|r| r.elapsed.as_secs_f64() * 1e3),
        peak_rss_mib: peak_kib.map(|k| k as f64 / 1024.0),
        latency_p50_ms: series(&|r| r.latency(0.5).as_secs_f64() * 1e3),
        latency_p99_ms: series(&|r| r.latency(0.99).as_secs_f64() * 1e3),
    })
}

/// The reports as an aligned text table.
pub fn format_table(reports: &[BenchReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>6} {:>7} {:>7} {:>12} {:>12} {:>12} {:>10} {:>9} {:>9} {:>9}",
        "workload",
        "nodes",
        "asks",
        "allocs",
        "allocs/s med",
        "min",
        "max",
        "wall ms",
        "rss MiB",
        "p50 ms",
        "p99 ms"
    );
    for r in reports {
        let rss = r
            .peak_rss_mib
            .map_or_else(|| "n/a".to_string(), |m| format!("{m:.1}"));
        let _ = writeln!(
            out,
            "{:<8} {:>6} {:>7} {:>7} {:>12.0} {:>12.0} {:>12.0} {:>10.2} {:>9} {:>9.3} {:>9.3}",
            format!("{:?}{}", r.workload, if r.preemption { "+p" } else { "" }).to_lowercase(),
            r.nodes,
            r.asks,
            r.allocations,
            r.allocations_per_second.median,
            r.allocations_per_second.min,
            r.allocations_per_second.max,
            r.wall_ms.median,
            rss,
            r.latency_p50_ms.median,
            r.latency_p99_ms.median,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_odd_and_even_series() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn peak_rss_is_readable_on_linux() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(peak_rss_kib().is_some_and(|k| k > 0));
        }
    }

    #[test]
    fn table_has_a_row_per_report() {
        let report = BenchReport {
            workload: WorkloadKind::W1,
            nodes: 10,
            asks: 100,
            allocations: 100,
            preemption: false,
            preempted: 0,
            repeats: 1,
            allocations_per_second: Spread::of(&[1000.0]),
            wall_ms: Spread::of(&[100.0]),
            peak_rss_mib: None,
            latency_p50_ms: Spread::default(),
            latency_p99_ms: Spread::default(),
        };
        let table = format_table(&[report]);
        assert_eq!(table.lines().count(), 2);
        assert!(table.lines().nth(1).unwrap().starts_with("w1 "));
    }

    #[test]
    fn quick_sizes_are_small() {
        for kind in WorkloadKind::ALL {
            let (n, p) = kind.default_size(true);
            let w = kind.build(n, p, true, 1);
            assert!(w.nodes.len() <= 200 && w.ask_count() <= 1_000, "{kind:?}");
        }
    }
}
