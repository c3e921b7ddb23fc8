//! The terminal summary of `unisched simulate`: one column per configuration,
//! totals, per-queue waits and peak usage, the most frequent refusals.

use std::fmt::Write as _;

use super::figures::{Figures, QueueFigures, RunFigures};

/// A quantity for people: vcore in cores, memory in GiB, others as they are.
pub fn human(name: &str, value: f64) -> String {
    match name {
        "vcore" => format!("{:.1}", value / 1000.0),
        "memory" => format!("{:.1}Gi", value / (1u64 << 30) as f64),
        _ => format!("{value:.0}"),
    }
}

/// Seconds for people.
pub fn seconds(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1}s")
    } else if s < 7200.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

/// A row of the totals table: its name and how a run's cell reads.
type Cell = fn(&RunFigures) -> String;

fn row(out: &mut String, name: &str, cells: impl Iterator<Item = String>) {
    let _ = write!(out, "  {name:<28}");
    for c in cells {
        let _ = write!(out, " {c:>20}");
    }
    let _ = writeln!(out);
}

fn peak(q: &QueueFigures, resource: &str) -> i64 {
    q.allocated
        .get(resource)
        .and_then(|v| v.iter().max().copied())
        .unwrap_or(0)
}

/// The summary as text for stdout.
pub fn summary(f: &Figures) -> String {
    let mut out = String::new();
    let t = &f.trace;
    let _ = writeln!(out, "unisched simulate: {}", t.source);
    let _ = writeln!(
        out,
        "  trace: {} records, {} tasks, {} applications, {} nodes, {:.1} h",
        t.records, t.tasks, t.applications, t.nodes, t.span_h
    );
    if t.bad_lines > 0 {
        let _ = writeln!(
            out,
            "  bad lines skipped: {} (first: {})",
            t.bad_lines,
            t.bad_line_examples.first().map_or("", String::as_str)
        );
    }
    for (reason, n) in &t.left_out {
        let _ = writeln!(out, "  left out of the trace: {n} ({reason})");
    }
    let _ = writeln!(out);
    let runs = &f.runs;
    row(&mut out, "", runs.iter().map(|r| r.config.clone()));
    let totals: [(&str, Cell); 11] = [
        ("allocations", |r| r.summary.allocations.to_string()),
        ("allocation events/s", |r| {
            format!("{:.0}", r.summary.events_per_second)
        }),
        ("wall time", |r| format!("{:.2} s", r.summary.wall_s)),
        ("virtual time", |r| format!("{:.1} h", r.summary.end_h)),
        ("wait p50 / p99", |r| {
            format!(
                "{} / {}",
                seconds(r.summary.wait_p50_s),
                seconds(r.summary.wait_p99_s)
            )
        }),
        ("preemptions", |r| r.summary.preemptions.to_string()),
        ("never placed", |r| r.summary.never_placed.to_string()),
        ("not submitted", |r| r.summary.not_submitted.to_string()),
        ("rejected (core)", |r| {
            r.rejections
                .iter()
                .filter(|x| x.kind != "not submitted")
                .map(|x| x.count)
                .sum::<u64>()
                .to_string()
        }),
        ("lost with node", |r| r.summary.lost_with_node.to_string()),
        ("apps completed", |r| {
            r.apps_by_state
                .get("Completed")
                .copied()
                .unwrap_or(0)
                .to_string()
        }),
    ];
    for (name, cell) in totals {
        row(&mut out, name, runs.iter().map(cell));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  wait p50 / p99 and peak vcore used (guaranteed, max) per leaf queue:"
    );
    let Some(first) = runs.first() else {
        return out;
    };
    for q in first.queues.iter().filter(|q| q.leaf) {
        let cells = runs
            .iter()
            .map(|r| match r.queues.iter().find(|x| x.path == q.path) {
                Some(x) => format!("{} / {}", seconds(x.wait.p50_s), seconds(x.wait.p99_s)),
                None => "-".to_string(),
            });
        row(&mut out, &q.path, cells);
        let usage = runs
            .iter()
            .map(|r| match r.queues.iter().find(|x| x.path == q.path) {
                Some(x) => {
                    let limit = |m: &std::collections::BTreeMap<String, i64>| {
                        m.get("vcore")
                            .map_or("-".to_string(), |v| human("vcore", *v as f64))
                    };
                    format!(
                        "{} ({}, {})",
                        human("vcore", peak(x, "vcore") as f64),
                        limit(&x.guaranteed),
                        limit(&x.max)
                    )
                }
                None => "-".to_string(),
            });
        row(&mut out, "", usage);
    }
    for r in runs {
        if r.rejections.is_empty() {
            continue;
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "  refused ({}):", r.config);
        for x in r.rejections.iter().take(5) {
            let _ = writeln!(
                out,
                "    {:>8}  {}: {} (e.g. {})",
                x.count, x.kind, x.reason, x.example
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_times_read_as_people_write_them() {
        assert_eq!(human("vcore", 1500.0), "1.5");
        assert_eq!(human("memory", 3.0 * (1u64 << 30) as f64), "3.0Gi");
        assert_eq!(human("gpu", 2.0), "2");
        assert_eq!(seconds(3.25), "3.2s");
        assert_eq!(seconds(600.0), "10.0m");
        assert_eq!(seconds(36_000.0), "10.0h");
    }
}
