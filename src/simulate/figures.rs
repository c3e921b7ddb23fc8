//! The figures of a simulation: what the report's charts and tables show,
//! computed once from the replays' outcomes and written as JSON (`--json`).
//! Quantities are in wire units (vcore in milli-cores, memory in bytes),
//! times in hours for series and seconds for waits.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::replay::Outcome;
use crate::replay::rm::dominant_share;
use crate::trace::Trace;

/// Upper bounds (seconds) of the wait-time histogram's buckets; a last
/// bucket holds everything longer.
pub const WAIT_BUCKETS_S: [f64; 14] = [
    0.0, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];

/// Everything the report shows.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// The trace replayed.
    pub trace: TraceFigures,
    /// One run per configuration, in the order given.
    pub runs: Vec<RunFigures>,
}

/// What was replayed.
#[derive(Debug, Clone, Serialize)]
pub struct TraceFigures {
    /// Where it came from.
    pub source: String,
    /// Records (asks and node changes).
    pub records: usize,
    /// Allocations asked for.
    pub tasks: u64,
    /// Applications.
    pub applications: usize,
    /// Nodes.
    pub nodes: usize,
    /// Time of the last record, hours.
    pub span_h: f64,
    /// Bad lines skipped.
    pub bad_lines: u64,
    /// The first few of them, as `file:line:column: message`.
    pub bad_line_examples: Vec<String>,
    /// Input rows left out on purpose, by reason.
    pub left_out: BTreeMap<String, u64>,
}

/// One configuration's replay.
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    /// Configuration name (its file).
    pub config: String,
    /// Totals.
    pub summary: Summary,
    /// Resource types of the series.
    pub resources: Vec<String>,
    /// Sample times, hours since the trace's first record.
    pub time_h: Vec<f64>,
    /// Every queue: leaves applications ran in, their parents, and the
    /// configured ones; parents before children.
    pub queues: Vec<QueueFigures>,
    /// The cluster as a whole.
    pub cluster: ClusterFigures,
    /// What was refused, and why.
    pub rejections: Vec<Rejection>,
    /// Applications by their last state.
    pub apps_by_state: BTreeMap<String, u64>,
}

/// Totals of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Asks sent.
    pub asks: u64,
    /// Allocations asked for (resubmissions included).
    pub tasks: u64,
    /// Allocations made.
    pub allocations: u64,
    /// Allocations released when their task finished.
    pub releases: u64,
    /// Allocations preempted.
    pub preemptions: u64,
    /// Placeholders replaced by real allocations.
    pub placeholders_replaced: u64,
    /// Placeholders that timed out.
    pub placeholders_timed_out: u64,
    /// Allocations lost with their node.
    pub lost_with_node: u64,
    /// Allocations still waiting at the end.
    pub never_placed: u64,
    /// Allocations still running at the end.
    pub still_running: u64,
    /// Allocations never asked for (see the rejections).
    pub not_submitted: u64,
    /// Wait from ask to allocation over all queues: median and 99th percentile, seconds.
    pub wait_p50_s: f64,
    /// See `wait_p50_s`.
    pub wait_p99_s: f64,
    /// Virtual time at the end, hours.
    pub end_h: f64,
    /// Wall time of the replay, seconds.
    pub wall_s: f64,
    /// Allocations made and released per wall second.
    pub events_per_second: f64,
    /// Virtual clock steps.
    pub steps: u64,
    /// `settle()` calls.
    pub settles: u64,
}

/// One queue over the run.
#[derive(Debug, Clone, Serialize)]
pub struct QueueFigures {
    /// Full path.
    pub path: String,
    /// Applications ran in it directly.
    pub leaf: bool,
    /// Configured guaranteed resources (missing: none).
    pub guaranteed: BTreeMap<String, i64>,
    /// Configured maximum (missing: unlimited).
    pub max: BTreeMap<String, i64>,
    /// Allocated per resource type, one value per sample.
    pub allocated: BTreeMap<String, Vec<i64>>,
    /// Pending per resource type, one value per sample.
    pub pending: BTreeMap<String, Vec<i64>>,
    /// Allocations waiting, per sample.
    pub pending_tasks: Vec<u64>,
    /// Dominant share of the cluster (allocated over capacity of the
    /// fullest resource), per sample.
    pub dominant_share: Vec<f64>,
    /// Wait from ask to allocation.
    pub wait: WaitFigures,
    /// Allocations preempted in this queue.
    pub preempted: u64,
    /// Preemptions made for this queue's asks.
    pub preempting: u64,
}

/// Wait times of one queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WaitFigures {
    /// Allocations made.
    pub count: u64,
    /// Mean, seconds.
    pub mean_s: f64,
    /// Median, seconds.
    pub p50_s: f64,
    /// 90th percentile, seconds.
    pub p90_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
    /// Longest, seconds.
    pub max_s: f64,
    /// Allocations per bucket; bucket `i` holds waits up to
    /// `WAIT_BUCKETS_S[i]` (above the previous bound), the last one the rest.
    pub histogram: Vec<u64>,
}

/// The cluster over the run.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterFigures {
    /// Capacity of the nodes up, per resource type, per sample.
    pub capacity: BTreeMap<String, Vec<i64>>,
    /// Allocated, per resource type, per sample.
    pub used: BTreeMap<String, Vec<i64>>,
    /// Nodes' dominant share: 10th, 50th, 90th percentile and maximum, per sample.
    pub node_share: BTreeMap<String, Vec<f64>>,
    /// Nodes up, per sample.
    pub nodes_up: Vec<u32>,
    /// Preemptions so far, per sample.
    pub preemptions: Vec<u64>,
}

/// A reason something was refused.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Rejection {
    /// `ask`, `application`, `node`, `release` (the core refused it) or
    /// `not submitted` (the RM did not send it).
    pub kind: String,
    /// Why, with the object's id written `<id>`.
    pub reason: String,
    /// How many (allocations for asks).
    pub count: u64,
    /// One object it happened to.
    pub example: String,
}

/// The figures of `runs` (configuration name, outcome) of `trace`.
pub fn figures(trace: &Trace, runs: &[(String, Outcome)]) -> Figures {
    Figures {
        trace: TraceFigures {
            source: trace.source.clone(),
            records: trace.records.len(),
            tasks: trace.task_count(),
            applications: trace.apps.len(),
            nodes: trace.nodes.len(),
            span_h: hours(trace.span_ms()),
            bad_lines: trace.bad_line_count,
            bad_line_examples: trace.bad_lines.iter().map(ToString::to_string).collect(),
            left_out: trace.left_out.clone(),
        },
        runs: runs.iter().map(|(name, o)| run_figures(name, o)).collect(),
    }
}

fn hours(ms: u64) -> f64 {
    ms as f64 / 3_600_000.0
}

/// Nearest-rank quantile of sorted milliseconds, in seconds.
fn quantile_s(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[rank]) / 1000.0
}

/// Wait figures of a sorted list of waits in milliseconds.
pub fn wait_figures(sorted: &[u32]) -> WaitFigures {
    let mut histogram = vec![0; WAIT_BUCKETS_S.len() + 1];
    for &w in sorted {
        let s = f64::from(w) / 1000.0;
        let bucket = WAIT_BUCKETS_S
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(WAIT_BUCKETS_S.len());
        histogram[bucket] += 1;
    }
    let sum: f64 = sorted.iter().map(|&w| f64::from(w)).sum();
    WaitFigures {
        count: sorted.len() as u64,
        mean_s: if sorted.is_empty() {
            0.0
        } else {
            sum / sorted.len() as f64 / 1000.0
        },
        p50_s: quantile_s(sorted, 0.5),
        p90_s: quantile_s(sorted, 0.9),
        p99_s: quantile_s(sorted, 0.99),
        max_s: quantile_s(sorted, 1.0),
        histogram,
    }
}

/// Every queue path to show: the configured ones, the leaves used and their
/// ancestors, sorted (so parents come before children).
fn queue_paths(o: &Outcome) -> Vec<String> {
    let mut paths: std::collections::BTreeSet<String> = o.limits.keys().cloned().collect();
    for leaf in &o.queues {
        let mut path = leaf.as_str();
        paths.insert(path.to_string());
        while let Some((parent, _)) = path.rsplit_once('.') {
            paths.insert(parent.to_string());
            path = parent;
        }
    }
    paths.into_iter().collect()
}

fn run_figures(name: &str, o: &Outcome) -> RunFigures {
    let series = |pick: &dyn Fn(&crate::replay::Sample) -> &[i64]| -> BTreeMap<String, Vec<i64>> {
        o.resources
            .iter()
            .enumerate()
            .map(|(r, n)| {
                (
                    n.clone(),
                    o.samples
                        .iter()
                        .map(|s| pick(s).get(r).copied().unwrap_or(0))
                        .collect(),
                )
            })
            .collect()
    };
    let queues = queue_paths(o)
        .into_iter()
        .map(|path| queue_figures(o, path))
        .collect();
    let shares = ["p10", "p50", "p90", "max"];
    let mut all_waits: Vec<u32> = o.waits_ms.iter().flatten().copied().collect();
    all_waits.sort_unstable();
    let c = &o.counts;
    let not_submitted = o.not_submitted.values().map(|(n, _)| n).sum();
    RunFigures {
        config: name.to_string(),
        summary: Summary {
            asks: c.asks,
            tasks: c.tasks,
            allocations: c.allocations,
            releases: c.releases,
            preemptions: c.preemptions,
            placeholders_replaced: c.placeholders_replaced,
            placeholders_timed_out: c.placeholders_timed_out,
            lost_with_node: c.lost_with_node,
            never_placed: c.never_placed,
            still_running: c.still_running,
            not_submitted,
            wait_p50_s: quantile_s(&all_waits, 0.5),
            wait_p99_s: quantile_s(&all_waits, 0.99),
            end_h: hours(o.end_ms),
            wall_s: o.wall.as_secs_f64(),
            events_per_second: o.events_per_second(),
            steps: c.steps,
            settles: c.settles,
        },
        resources: o.resources.clone(),
        time_h: o.samples.iter().map(|s| hours(s.time_ms)).collect(),
        queues,
        cluster: ClusterFigures {
            capacity: series(&|s| &s.capacity),
            used: series(&|s| &s.used),
            node_share: shares
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        n.to_string(),
                        o.samples.iter().map(|s| s.node_share[i]).collect(),
                    )
                })
                .collect(),
            nodes_up: o.samples.iter().map(|s| s.nodes_up).collect(),
            preemptions: o.samples.iter().map(|s| s.preemptions).collect(),
        },
        rejections: rejections(o),
        apps_by_state: o.app_states.clone(),
    }
}

fn queue_figures(o: &Outcome, path: String) -> QueueFigures {
    let prefix = format!("{path}.");
    let leaves: Vec<usize> = o
        .queues
        .iter()
        .enumerate()
        .filter(|(_, q)| **q == path || q.starts_with(&prefix))
        .map(|(i, _)| i)
        .collect();
    let width = o.resources.len();
    let sum = |pick: &dyn Fn(&crate::replay::Sample, usize) -> Vec<i64>| -> Vec<Vec<i64>> {
        o.samples
            .iter()
            .map(|s| {
                let mut total = vec![0; width];
                for &q in &leaves {
                    for (t, v) in total.iter_mut().zip(pick(s, q)) {
                        *t += v;
                    }
                }
                total
            })
            .collect()
    };
    let allocated = sum(&|s, q| s.allocated.get(q).cloned().unwrap_or_default());
    let pending = sum(&|s, q| s.pending.get(q).cloned().unwrap_or_default());
    let by_resource = |rows: &[Vec<i64>]| -> BTreeMap<String, Vec<i64>> {
        o.resources
            .iter()
            .enumerate()
            .map(|(r, n)| (n.clone(), rows.iter().map(|row| row[r]).collect()))
            .collect()
    };
    let mut waits: Vec<u32> = leaves
        .iter()
        .flat_map(|&q| o.waits_ms[q].iter().copied())
        .collect();
    waits.sort_unstable();
    let limits = o.limits.get(&path).cloned().unwrap_or_default();
    QueueFigures {
        leaf: o.queues.contains(&path),
        guaranteed: limits.guaranteed,
        max: limits.max,
        allocated: by_resource(&allocated),
        pending: by_resource(&pending),
        pending_tasks: o
            .samples
            .iter()
            .map(|s| {
                leaves
                    .iter()
                    .map(|&q| s.pending_tasks.get(q).copied().unwrap_or(0))
                    .sum()
            })
            .collect(),
        dominant_share: allocated
            .iter()
            .zip(&o.samples)
            .map(|(a, s)| dominant_share(a, &s.capacity))
            .collect(),
        wait: wait_figures(&waits),
        preempted: leaves.iter().map(|&q| o.preempted[q]).sum(),
        preempting: leaves.iter().map(|&q| o.preempting[q]).sum(),
        path,
    }
}

fn rejections(o: &Outcome) -> Vec<Rejection> {
    let kinds = [
        ("ask", &o.rejected_asks),
        ("application", &o.rejected_apps),
        ("node", &o.rejected_nodes),
        ("release", &o.rejected_releases),
        ("not submitted", &o.not_submitted),
    ];
    let mut out: Vec<Rejection> = kinds
        .iter()
        .flat_map(|(kind, tally)| {
            tally.iter().map(|(reason, (count, example))| Rejection {
                kind: kind.to_string(),
                reason: reason.clone(),
                count: *count,
                example: example.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_fall_into_buckets_with_nearest_rank_percentiles() {
        let waits: Vec<u32> = vec![0, 500, 1_000, 4_000, 90_000, 100_000_000];
        let w = wait_figures(&waits);
        assert_eq!(w.count, 6);
        assert_eq!(w.p50_s, 4.0);
        assert_eq!(w.max_s, 100_000.0);
        // 0 | (0,1] x2 | (1,5] | (60,120] | > 1 day
        assert_eq!(w.histogram[0], 1);
        assert_eq!(w.histogram[1], 2);
        assert_eq!(w.histogram[2], 1);
        assert_eq!(w.histogram[6], 1);
        assert_eq!(w.histogram[WAIT_BUCKETS_S.len()], 1);
        assert_eq!(w.histogram.iter().sum::<u64>(), 6);
        assert_eq!(wait_figures(&[]).p99_s, 0.0);
    }

    #[test]
    fn parents_sum_their_leaves() {
        let sample = |a: i64, b: i64| crate::replay::Sample {
            allocated: vec![vec![a, 0], vec![b, 0]],
            pending: vec![vec![0, 0], vec![0, 0]],
            pending_tasks: vec![1, 2],
            capacity: vec![100, 10],
            used: vec![a + b, 0],
            ..Default::default()
        };
        let o = Outcome {
            resources: vec!["memory".into(), "vcore".into()],
            queues: vec!["root.p.a".into(), "root.p.b".into()],
            samples: vec![sample(10, 20), sample(30, 40)],
            waits_ms: vec![vec![1000], vec![3000]],
            preempted: vec![1, 2],
            preempting: vec![0, 0],
            ..Default::default()
        };
        let f = run_figures("c", &o);
        let paths: Vec<&str> = f.queues.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(paths, ["root", "root.p", "root.p.a", "root.p.b"]);
        let parent = &f.queues[1];
        assert!(!parent.leaf);
        assert_eq!(parent.allocated["memory"], [30, 70]);
        assert_eq!(parent.pending_tasks, [3, 3]);
        assert_eq!(parent.dominant_share, [0.3, 0.7]);
        assert_eq!(parent.wait.count, 2);
        assert_eq!(parent.preempted, 3);
        assert_eq!(f.queues[2].allocated["memory"], [10, 30]);
    }
}
