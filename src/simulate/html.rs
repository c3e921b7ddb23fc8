//! The HTML report: one self-contained page (inline CSS and SVG, no script,
//! nothing fetched) with the figures' charts and tables, the runs side by
//! side when two configurations were compared, sharing their y scales.

use std::fmt::Write as _;

use super::charts::{self, Frame, Series, Stroke};
use super::figures::{Figures, QueueFigures, RunFigures, WAIT_BUCKETS_S};
use super::report::{human, seconds};

/// Queues given their own usage charts, by peak usage.
const USAGE_CHART_QUEUES: usize = 12;
/// Leaf queues drawn in the charts with one line per queue.
const LINES_PER_CHART: usize = 8;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}\
h3{font-size:15px;margin:16px 0 4px}table{border-collapse:collapse;margin:8px 0}\
td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px;text-align:right}\
th{background:#f4f4f4}td.l,th.l{text-align:left}.runs{display:grid;gap:12px}\
.runs>div{min-width:0}.note{color:#666;font-size:13px}svg{max-width:100%;height:auto}";

/// Escapes text for HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// How a resource's quantities are shown: divisor and unit.
fn unit(resource: &str) -> (f64, &'static str) {
    match resource {
        "vcore" => (1000.0, "cores"),
        "memory" => ((1u64 << 30) as f64, "GiB"),
        _ => (1.0, "units"),
    }
}

/// The page for `f`.
pub fn render(f: &Figures) -> String {
    let mut page = String::with_capacity(1 << 20);
    let configs: Vec<String> = f.runs.iter().map(|r| escape(&r.config)).collect();
    let _ = write!(
        page,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>unisched simulate: {}</title><style>{STYLE}</style></head><body>",
        configs.join(" vs ")
    );
    let _ = write!(
        page,
        "<h1>unisched simulate: {}</h1><p class=\"note\">Trace {}: {} records, {} tasks, {} applications, \
         {} nodes over {:.1} h of virtual time. Samples are the state at each moment shown; \
         waits run from the trace's submission time to the allocation.</p>",
        configs.join(" <i>vs</i> "),
        escape(&f.trace.source),
        f.trace.records,
        f.trace.tasks,
        f.trace.applications,
        f.trace.nodes,
        f.trace.span_h
    );
    trace_notes(&mut page, f);
    summary_table(&mut page, &f.runs);
    usage(&mut page, &f.runs);
    section(
        &mut page,
        "Pending demand per queue",
        &f.runs,
        pending_chart,
    );
    waits(&mut page, &f.runs);
    section(
        &mut page,
        "Fairness: dominant share per queue",
        &f.runs,
        share_chart,
    );
    section(&mut page, "Node utilisation", &f.runs, node_chart);
    preemptions(&mut page, &f.runs);
    rejections(&mut page, &f.runs);
    section(
        &mut page,
        "Applications by final state",
        &f.runs,
        states_chart,
    );
    page.push_str("</body></html>\n");
    page
}

fn trace_notes(page: &mut String, f: &Figures) {
    let t = &f.trace;
    if t.bad_lines == 0 && t.left_out.is_empty() {
        return;
    }
    page.push_str("<h2>Input</h2><table><tr><th class=\"l\">what</th><th>count</th></tr>");
    if t.bad_lines > 0 {
        let _ = write!(
            page,
            "<tr><td class=\"l\">bad lines skipped</td><td>{}</td></tr>",
            t.bad_lines
        );
    }
    for (reason, n) in &t.left_out {
        let _ = write!(
            page,
            "<tr><td class=\"l\">left out: {}</td><td>{n}</td></tr>",
            escape(reason)
        );
    }
    page.push_str("</table>");
    for line in &t.bad_line_examples {
        let _ = write!(page, "<div class=\"note\">{}</div>", escape(line));
    }
}

fn summary_table(page: &mut String, runs: &[RunFigures]) {
    page.push_str("<h2>Summary</h2><table><tr><th class=\"l\"></th>");
    for r in runs {
        let _ = write!(page, "<th>{}</th>", escape(&r.config));
    }
    page.push_str("</tr>");
    type Cell = fn(&RunFigures) -> String;
    let rows: [(&str, Cell); 13] = [
        ("allocations", |r| r.summary.allocations.to_string()),
        ("released at task end", |r| r.summary.releases.to_string()),
        ("wait p50", |r| seconds(r.summary.wait_p50_s)),
        ("wait p99", |r| seconds(r.summary.wait_p99_s)),
        ("preemptions", |r| r.summary.preemptions.to_string()),
        ("placeholders replaced", |r| {
            r.summary.placeholders_replaced.to_string()
        }),
        ("placeholders timed out", |r| {
            r.summary.placeholders_timed_out.to_string()
        }),
        ("lost with their node", |r| {
            r.summary.lost_with_node.to_string()
        }),
        ("never placed", |r| r.summary.never_placed.to_string()),
        ("not submitted", |r| r.summary.not_submitted.to_string()),
        ("virtual time (h)", |r| format!("{:.1}", r.summary.end_h)),
        ("wall time (s)", |r| format!("{:.2}", r.summary.wall_s)),
        ("allocation events/s", |r| {
            format!("{:.0}", r.summary.events_per_second)
        }),
    ];
    for (name, cell) in rows {
        let _ = write!(page, "<tr><td class=\"l\">{name}</td>");
        for r in runs {
            let _ = write!(page, "<td>{}</td>", cell(r));
        }
        page.push_str("</tr>");
    }
    page.push_str("</table>");
}

/// A section with one chart per run, side by side.
fn section(
    page: &mut String,
    title: &str,
    runs: &[RunFigures],
    chart: fn(&RunFigures, Option<f64>) -> (String, f64),
) {
    let _ = write!(page, "<h2>{title}</h2>");
    // Draw once to find the shared scale, then again on it.
    let top = runs.iter().map(|r| chart(r, None).1).fold(0.0, f64::max);
    open_runs(page, runs.len());
    for r in runs {
        let _ = write!(
            page,
            "<div><h3>{}</h3>{}</div>",
            escape(&r.config),
            chart(r, Some(top)).0
        );
    }
    page.push_str("</div>");
}

fn open_runs(page: &mut String, n: usize) {
    let _ = write!(
        page,
        "<div class=\"runs\" style=\"grid-template-columns:repeat({n},1fr)\">"
    );
}

fn peak(q: &QueueFigures) -> f64 {
    q.dominant_share.iter().copied().fold(0.0, f64::max)
}

/// The leaf queues of a run, busiest first, at most `n`.
fn busiest_leaves(r: &RunFigures, n: usize) -> Vec<&QueueFigures> {
    let mut leaves: Vec<&QueueFigures> = r.queues.iter().filter(|q| q.leaf).collect();
    leaves.sort_by(|a, b| {
        peak(b)
            .total_cmp(&peak(a))
            .then_with(|| a.path.cmp(&b.path))
    });
    leaves.truncate(n);
    leaves.sort_by(|a, b| a.path.cmp(&b.path));
    leaves
}

fn usage(page: &mut String, runs: &[RunFigures]) {
    page.push_str("<h2>Usage against guaranteed and max, per queue</h2>");
    let Some(first) = runs.first() else { return };
    // Queues with a limit or a leaf, busiest first.
    let mut queues: Vec<&QueueFigures> = first
        .queues
        .iter()
        .filter(|q| q.leaf || !q.guaranteed.is_empty() || !q.max.is_empty())
        .collect();
    queues.sort_by(|a, b| {
        peak(b)
            .total_cmp(&peak(a))
            .then_with(|| a.path.cmp(&b.path))
    });
    if queues.len() > USAGE_CHART_QUEUES {
        let _ = write!(
            page,
            "<p class=\"note\">The {USAGE_CHART_QUEUES} busiest of {} queues; the JSON has all.</p>",
            queues.len()
        );
        queues.truncate(USAGE_CHART_QUEUES);
    }
    queues.sort_by(|a, b| a.path.cmp(&b.path));
    for q in queues {
        let _ = write!(page, "<h3>{}</h3>", escape(&q.path));
        for resource in &first.resources {
            let series_of = |r: &RunFigures| usage_series(r, &q.path, resource);
            let top = runs
                .iter()
                .map(|r| charts::top(&series_of(r)))
                .fold(0.0, f64::max);
            if top <= 0.0 {
                continue;
            }
            open_runs(page, runs.len());
            for r in runs {
                let (_, u) = unit(resource);
                let title = format!("{} {resource} ({})", q.path, r.config);
                let frame = Frame {
                    title: &title,
                    x_label: "hours",
                    y_label: &format!("{resource}, {u}"),
                    y_max: Some(top),
                };
                let _ = write!(
                    page,
                    "<div>{}</div>",
                    charts::lines(&frame, &r.time_h, &series_of(r))
                );
            }
            page.push_str("</div>");
        }
    }
}

/// Allocated, guaranteed and max of queue `path` for `resource`, in display units.
fn usage_series(r: &RunFigures, path: &str, resource: &str) -> Vec<Series> {
    let Some(q) = r.queues.iter().find(|q| q.path == path) else {
        return Vec::new();
    };
    let (d, _) = unit(resource);
    let n = r.time_h.len();
    let mut series = vec![Series {
        name: "allocated".to_string(),
        values: q
            .allocated
            .get(resource)
            .map_or_else(Vec::new, |v| v.iter().map(|x| *x as f64 / d).collect()),
        stroke: Stroke::Solid,
        colour: 0,
    }];
    if let Some(g) = q.guaranteed.get(resource) {
        series.push(Series {
            name: format!("guaranteed {}", human(resource, *g as f64)),
            values: vec![*g as f64 / d; n],
            stroke: Stroke::Dashed,
            colour: 2,
        });
    }
    if let Some(m) = q.max.get(resource) {
        series.push(Series {
            name: format!("max {}", human(resource, *m as f64)),
            values: vec![*m as f64 / d; n],
            stroke: Stroke::Dashed,
            colour: 1,
        });
    }
    series
}

fn per_leaf(r: &RunFigures, value: impl Fn(&QueueFigures) -> Vec<f64>) -> Vec<Series> {
    busiest_leaves(r, LINES_PER_CHART)
        .into_iter()
        .enumerate()
        .map(|(i, q)| Series {
            name: q.path.clone(),
            values: value(q),
            stroke: Stroke::Solid,
            colour: i,
        })
        .collect()
}

fn pending_chart(r: &RunFigures, y_max: Option<f64>) -> (String, f64) {
    let series = per_leaf(r, |q| q.pending_tasks.iter().map(|v| *v as f64).collect());
    let frame = Frame {
        title: "allocations waiting",
        x_label: "hours",
        y_label: "allocations",
        y_max,
    };
    (
        charts::lines(&frame, &r.time_h, &series),
        charts::top(&series),
    )
}

fn share_chart(r: &RunFigures, y_max: Option<f64>) -> (String, f64) {
    let series = per_leaf(r, |q| q.dominant_share.iter().map(|v| v * 100.0).collect());
    let frame = Frame {
        title: "dominant share of the cluster",
        x_label: "hours",
        y_label: "% of the cluster",
        y_max,
    };
    (
        charts::lines(&frame, &r.time_h, &series),
        charts::top(&series),
    )
}

fn node_chart(r: &RunFigures, y_max: Option<f64>) -> (String, f64) {
    let c = &r.cluster;
    let mut series = Vec::new();
    for (i, resource) in r.resources.iter().enumerate() {
        let (Some(used), Some(cap)) = (c.used.get(resource), c.capacity.get(resource)) else {
            continue;
        };
        if cap.iter().all(|v| *v == 0) {
            continue;
        }
        series.push(Series {
            name: format!("cluster {resource} used"),
            values: used
                .iter()
                .zip(cap)
                .map(|(u, c)| {
                    if *c > 0 {
                        *u as f64 * 100.0 / *c as f64
                    } else {
                        0.0
                    }
                })
                .collect(),
            stroke: Stroke::Solid,
            colour: i,
        });
    }
    for (i, (name, values)) in c.node_share.iter().enumerate() {
        series.push(Series {
            name: format!("node dominant share {name}"),
            values: values.iter().map(|v| v * 100.0).collect(),
            stroke: Stroke::Dashed,
            colour: 4 + i,
        });
    }
    let frame = Frame {
        title: "utilisation",
        x_label: "hours",
        y_label: "%",
        y_max: y_max.or(Some(100.0)),
    };
    (
        charts::lines(&frame, &r.time_h, &series),
        charts::top(&series),
    )
}

fn states_chart(r: &RunFigures, y_max: Option<f64>) -> (String, f64) {
    let labels: Vec<String> = r.apps_by_state.keys().cloned().collect();
    let values: Vec<f64> = r.apps_by_state.values().map(|v| *v as f64).collect();
    let frame = Frame {
        title: "applications",
        x_label: "last state",
        y_label: "applications",
        y_max,
    };
    let top = values.iter().copied().fold(0.0, f64::max);
    (charts::bars(&frame, &labels, &values, 0), top)
}

fn bucket_labels() -> Vec<String> {
    let mut labels: Vec<String> = WAIT_BUCKETS_S
        .iter()
        .map(|b| {
            if *b == 0.0 {
                "0".to_string()
            } else {
                format!("≤{}", seconds(*b))
            }
        })
        .collect();
    labels.push(">1d".to_string());
    labels
}

fn waits(page: &mut String, runs: &[RunFigures]) {
    page.push_str(
        "<h2>Wait from ask to allocation, per queue</h2><table><tr><th class=\"l\">queue</th>",
    );
    for r in runs {
        let _ = write!(
            page,
            "<th>{0}: count</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>max</th>",
            escape(&r.config)
        );
    }
    page.push_str("</tr>");
    let Some(first) = runs.first() else { return };
    for q in &first.queues {
        let _ = write!(page, "<tr><td class=\"l\">{}</td>", escape(&q.path));
        for r in runs {
            match r.queues.iter().find(|x| x.path == q.path) {
                Some(x) => {
                    let w = &x.wait;
                    let _ = write!(
                        page,
                        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                        w.count,
                        seconds(w.mean_s),
                        seconds(w.p50_s),
                        seconds(w.p90_s),
                        seconds(w.p99_s),
                        seconds(w.max_s)
                    );
                }
                None => page.push_str("<td colspan=\"6\">-</td>"),
            }
        }
        page.push_str("</tr>");
    }
    page.push_str("</table>");
    let labels = bucket_labels();
    for q in busiest_leaves(first, LINES_PER_CHART) {
        let values_of = |r: &RunFigures| -> Vec<f64> {
            r.queues
                .iter()
                .find(|x| x.path == q.path)
                .map_or_else(Vec::new, |x| {
                    x.wait.histogram.iter().map(|v| *v as f64).collect()
                })
        };
        let top = runs.iter().flat_map(values_of).fold(0.0, f64::max);
        let _ = write!(page, "<h3>{} wait histogram</h3>", escape(&q.path));
        open_runs(page, runs.len());
        for (i, r) in runs.iter().enumerate() {
            let title = format!("{} ({})", q.path, r.config);
            let frame = Frame {
                title: &title,
                x_label: "wait",
                y_label: "allocations",
                y_max: Some(top),
            };
            let _ = write!(
                page,
                "<div>{}</div>",
                charts::bars(&frame, &labels, &values_of(r), i)
            );
        }
        page.push_str("</div>");
    }
}

fn preemptions(page: &mut String, runs: &[RunFigures]) {
    let top = runs
        .iter()
        .flat_map(|r| r.cluster.preemptions.last().copied())
        .max()
        .unwrap_or(0) as f64;
    page.push_str("<h2>Preemptions</h2>");
    open_runs(page, runs.len());
    for r in runs {
        let series = [Series {
            name: "preemptions so far".to_string(),
            values: r.cluster.preemptions.iter().map(|v| *v as f64).collect(),
            stroke: Stroke::Solid,
            colour: 1,
        }];
        let frame = Frame {
            title: "preemptions",
            x_label: "hours",
            y_label: "allocations preempted",
            y_max: Some(top),
        };
        let _ = write!(
            page,
            "<div><h3>{}</h3>{}<table><tr><th class=\"l\">queue</th><th>preempted in it</th><th>made room for it</th></tr>",
            escape(&r.config),
            charts::lines(&frame, &r.time_h, &series)
        );
        for q in r
            .queues
            .iter()
            .filter(|q| q.leaf && (q.preempted > 0 || q.preempting > 0))
        {
            let _ = write!(
                page,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
                escape(&q.path),
                q.preempted,
                q.preempting
            );
        }
        page.push_str("</table></div>");
    }
    page.push_str("</div>");
}

fn rejections(page: &mut String, runs: &[RunFigures]) {
    page.push_str("<h2>Refused, with reasons</h2>");
    open_runs(page, runs.len());
    for r in runs {
        let _ = write!(page, "<div><h3>{}</h3>", escape(&r.config));
        if r.rejections.is_empty() {
            page.push_str("<p class=\"note\">Nothing was refused.</p></div>");
            continue;
        }
        page.push_str("<table><tr><th class=\"l\">what</th><th class=\"l\">reason</th><th>count</th><th class=\"l\">e.g.</th></tr>");
        for x in &r.rejections {
            let _ = write!(
                page,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                escape(&x.kind),
                escape(&x.reason),
                x.count,
                escape(&x.example)
            );
        }
        page.push_str("</table></div>");
    }
    page.push_str("</div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
