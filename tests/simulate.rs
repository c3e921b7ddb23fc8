//! `unisched simulate` on the small traces of `tests/traces/`, whose outcomes
//! are known by hand: a queue at its max waits, a guarantee is met soon after
//! preemption, bad input is counted and never stops the replay, and a trace
//! line that does not parse names its file, line and column.

use std::path::PathBuf;

use serde_json::Value;
use unisched::simulate::{
    self, NamedConfig, SimulateOptions, TraceFormat, TraceInput, figures::Figures,
};
use unisched::trace::ImportOptions;

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/traces")
}

fn options(trace: &str, configs: &[&str]) -> SimulateOptions {
    SimulateOptions {
        configs: configs
            .iter()
            .map(|c| NamedConfig {
                name: (*c).to_string(),
                text: std::fs::read_to_string(traces().join(c)).expect("config"),
            })
            .collect(),
        input: TraceInput::Files {
            format: TraceFormat::Auto,
            traces: vec![traces().join(trace)],
            machines: Vec::new(),
            import: ImportOptions {
                vcore_unit: 1000,
                memory_unit: 1 << 30,
                queue_template: None,
            },
        },
        nodes: Vec::new(),
        skip_bad_lines: false,
        tick_ms: 1000,
    }
}

/// Replays and returns the figures, and the same figures as JSON.
fn simulate(trace: &str, configs: &[&str]) -> (Figures, Value) {
    let options = options(trace, configs);
    let trace = std::sync::Arc::new(simulate::load_trace(&options).expect("trace loads"));
    let runs = simulate::run(&options, &trace, |_, _| {}).expect("replay runs");
    let figures = simulate::figures::figures(&trace, &runs);
    let json = serde_json::to_value(&figures).expect("figures encode");
    (figures, json)
}

fn queue<'a>(run: &'a Value, path: &str) -> &'a Value {
    run["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["path"] == path))
        .unwrap_or_else(|| panic!("no queue {path} in {run}"))
}

fn max_of(series: &Value) -> i64 {
    series
        .as_array()
        .map_or(0, |v| v.iter().filter_map(Value::as_i64).max().unwrap_or(0))
}

#[test]
fn a_queue_at_its_max_waits() {
    let (_, json) = simulate("queue-at-max.csv", &["queue-at-max.yaml"]);
    let run = &json["runs"][0];
    let capped = queue(run, "root.capped");
    // Four 1-core tasks under a 2-core max: two wait for the first two to end.
    assert_eq!(capped["max"]["vcore"], 2000);
    assert_eq!(max_of(&capped["allocated"]["vcore"]), 2000);
    assert_eq!(capped["wait"]["count"], 4);
    assert_eq!(capped["wait"]["max_s"], 60.0);
    assert_eq!(capped["wait"]["histogram"][0], 2, "two placed at once");
    assert_eq!(max_of(&capped["pending_tasks"]), 2);
    let free = queue(run, "root.free");
    assert_eq!(free["wait"]["max_s"], 0.0);
    assert_eq!(run["summary"]["allocations"], 6);
    assert_eq!(run["summary"]["releases"], 6);
    assert_eq!(run["summary"]["never_placed"], 0);
    assert_eq!(run["apps_by_state"]["Completed"], 2);
    // The parent sums its leaves.
    assert_eq!(max_of(&queue(run, "root")["allocated"]["vcore"]), 4000);
    assert_eq!(run["rejections"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_guarantee_is_met_within_seconds_by_preemption() {
    let (_, json) = simulate("preemption.jsonl", &["preemption.yaml"]);
    let run = &json["runs"][0];
    let prod = queue(run, "root.prod");
    let batch = queue(run, "root.batch");
    // batch fills both nodes; prod's two tasks arrive at 10 s, wait out the
    // 1 s preemption delay, and two batch tasks make room.
    assert_eq!(run["summary"]["preemptions"], 2);
    assert_eq!(batch["preempted"], 2);
    assert_eq!(prod["preempting"], 2);
    assert_eq!(prod["wait"]["count"], 2);
    let waited = prod["wait"]["max_s"].as_f64().unwrap_or(f64::MAX);
    assert!((1.0..=5.0).contains(&waited), "prod waited {waited} s");
    // The preempted batch tasks run again once prod is done.
    assert_eq!(batch["wait"]["count"], 6);
    assert_eq!(run["summary"]["never_placed"], 0);
    assert_eq!(run["summary"]["releases"], 6);
    // Preemptions show over time, ending at 2.
    let over_time = run["cluster"]["preemptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(over_time.first(), Some(&Value::from(0)));
    assert_eq!(over_time.last(), Some(&Value::from(2)));
}

#[test]
fn the_same_trace_replays_to_the_same_figures_and_configs_compare() {
    let (a, _) = simulate(
        "preemption.jsonl",
        &["preemption.yaml", "queue-at-max.yaml"],
    );
    let (b, _) = simulate(
        "preemption.jsonl",
        &["preemption.yaml", "queue-at-max.yaml"],
    );
    let strip = |f: &Figures| {
        let mut v = serde_json::to_value(f).unwrap();
        for run in v["runs"].as_array_mut().unwrap() {
            for key in ["wall_s", "events_per_second"] {
                run["summary"][key] = Value::Null;
            }
        }
        v
    };
    assert_eq!(strip(&a), strip(&b));
    assert_eq!(a.runs.len(), 2);
    // Without queues of those names, every application is rejected.
    let other = &a.runs[1];
    assert_eq!(other.summary.allocations, 0);
    assert_eq!(other.apps_by_state.get("Rejected"), Some(&2));
    assert!(other.rejections.iter().any(|r| r.kind == "application"));
}

#[test]
fn bad_input_is_counted_and_the_replay_goes_on() {
    let (f, json) = simulate("bad-input.csv", &["bad-input.yaml"]);
    let run = &f.runs[0];
    let reasons: Vec<(&str, &str, u64)> = run
        .rejections
        .iter()
        .map(|r| (r.kind.as_str(), r.reason.as_str(), r.count))
        .collect();
    let has = |kind: &str, text: &str, count: u64| {
        reasons
            .iter()
            .any(|(k, r, c)| *k == kind && r.contains(text) && *c == count)
    };
    assert!(
        has("not submitted", "asks for gpu, which no node has", 1),
        "{reasons:?}"
    );
    assert!(
        has("not submitted", "asks for more vcore than any node has", 1),
        "{reasons:?}"
    );
    assert!(
        has("not submitted", "its application was rejected", 2),
        "{reasons:?}"
    );
    assert!(has("application", "root.nowhere", 1), "{reasons:?}");
    assert_eq!(run.summary.not_submitted, 4);
    assert_eq!(run.apps_by_state.get("Rejected"), Some(&1));
    // The gang's two placeholders are replaced by its real tasks.
    assert_eq!(run.summary.placeholders_replaced, 2);
    // A node leaves at 30 s with tasks on it; they start over elsewhere.
    assert!(run.summary.lost_with_node >= 1, "{:?}", run.summary);
    assert_eq!(run.summary.never_placed, 0);
    assert_eq!(run.summary.still_running, 0);
    assert_eq!(
        json["runs"][0]["cluster"]["nodes_up"]
            .as_array()
            .and_then(|v| v.last()),
        Some(&Value::from(1))
    );
    assert_eq!(json["trace"]["nodes"], 2);
}

#[test]
fn a_bad_line_names_file_line_and_column_or_is_skipped() {
    let mut strict = options("bad-line.csv", &["bad-input.yaml"]);
    let err = simulate::load_trace(&strict)
        .expect_err("bad line")
        .to_string();
    assert!(
        err.ends_with("bad-line.csv:3:21: count \"two\" is not a whole number of at least 1"),
        "{err}"
    );
    strict.skip_bad_lines = true;
    strict.nodes = vec!["1".parse().unwrap()];
    let trace = std::sync::Arc::new(simulate::load_trace(&strict).expect("bad lines skipped"));
    assert_eq!(trace.bad_line_count, 2);
    assert!(
        trace.bad_lines[1]
            .to_string()
            .contains("bad-line.csv:4:13: "),
        "{}",
        trace.bad_lines[1]
    );
    let runs = simulate::run(&strict, &trace, |_, _| {}).unwrap();
    let f = simulate::figures::figures(&trace, &runs);
    assert_eq!(f.trace.bad_lines, 2);
    assert_eq!(f.runs[0].summary.allocations, 2);
}

/// Runs the `unisched` binary with `args`.
fn unisched(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_unisched"))
        .args(args)
        .current_dir(traces())
        .output()
        .expect("unisched runs")
}

#[test]
fn the_command_writes_a_report_and_its_json_and_compares_configs() {
    let dir = std::env::temp_dir().join(format!("unisched-simulate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.html");
    let out = unisched(&[
        "simulate",
        "--config",
        "preemption.yaml",
        "--against",
        "queue-at-max.yaml",
        "--trace",
        "preemption.jsonl",
        "--report",
        report.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("preemption.yaml") && stdout.contains("queue-at-max.yaml"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&report).unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["runs"][0]["summary"]["preemptions"], 2);
    // Self-contained: nothing to fetch, nothing to run.
    for banned in ["<script", "<link", "src=", "url(", "https://"] {
        assert!(!html.contains(banned), "the report contains {banned}");
    }
    for section in [
        "Usage against guaranteed and max",
        "Pending demand",
        "Wait from ask",
        "dominant share",
        "Node utilisation",
        "Preemptions",
        "Refused, with reasons",
        "Applications by final state",
    ] {
        assert!(html.contains(section), "no section {section}");
    }
    assert!(html.matches("<svg").count() >= 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_command_stops_at_a_bad_line_with_its_position() {
    let out = unisched(&[
        "simulate",
        "--config",
        "bad-input.yaml",
        "--trace",
        "bad-line.csv",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad-line.csv:3:21: count \"two\""),
        "{stderr}"
    );
    let out = unisched(&[
        "simulate",
        "--config",
        "bad-input.yaml",
        "--trace",
        "bad-line.csv",
        "--nodes",
        "2",
        "--skip-bad-lines",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("bad lines skipped: 2"), "{stdout}");
    let out = unisched(&["simulate", "--config", "no-such.yaml", "--quiet"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn public_trace_layouts_replay_through_the_command() {
    let dir = std::env::temp_dir().join(format!("unisched-simulate-public-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let config = write(
        "bands.yaml",
        "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: \"*\"\n        queues:\n          - name: batch\n          - name: production\n",
    );
    // Google: two machines; a batch task of 30 s, a production task of 60 s,
    // a free-band task whose queue does not exist.
    let tasks = write(
        "task_events.csv",
        "0,,1,0,,0,u,0,4,0.25,0.25,0,0\n0,,1,0,5,1,u,0,4,,,,\n30000000,,1,0,5,4,u,0,4,,,,\n\
         0,,2,0,,0,u,0,9,0.5,0.5,0,0\n0,,2,0,6,1,u,0,9,,,,\n60000000,,2,0,6,4,u,0,9,,,,\n\
         0,,3,0,,0,u,0,0,0.1,0.1,0,0\n0,,3,0,6,1,u,0,0,,,,\n10000000,,3,0,6,4,u,0,0,,,,\n",
    );
    let machines = write("machine_events.csv", "0,5,0,p,1,1\n0,6,0,p,1,1\n");
    let json = dir.join("figures.json");
    // Replays the trace files in `format` and returns the figures.
    let replay = |format: &str, tasks: &str, machines: &str, extra: &[&str]| -> Value {
        let mut args = vec![
            "simulate",
            "--config",
            &config,
            "--format",
            format,
            "--trace",
            tasks,
            "--machines",
            machines,
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let out = unisched(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let f = replay(
        "google",
        &tasks,
        &machines,
        &["--unit", "vcore=8,memory=32Gi"],
    );
    let run = &f["runs"][0];
    assert_eq!(run["summary"]["allocations"], 2);
    assert_eq!(
        max_of(&queue(run, "root.production")["allocated"]["vcore"]),
        4000
    );
    assert_eq!(
        max_of(&queue(run, "root.batch")["allocated"]["memory"]),
        8 << 30
    );
    assert_eq!(
        run["apps_by_state"]["Rejected"], 1,
        "root.free does not exist"
    );
    // Alibaba: one machine, a task of 3 instances running 20 s.
    let tasks = write("batch_task.csv", "M1,3,j_1,1,Terminated,100,120,100,1\n");
    let machines = write("machine_meta.csv", "m_1,0,1,a,4,100,USING\n");
    let f = replay(
        "alibaba",
        &tasks,
        &machines,
        &["--queue-template", "root.batch"],
    );
    let batch = queue(&f["runs"][0], "root.batch");
    assert_eq!(batch["wait"]["count"], 3);
    assert_eq!(max_of(&batch["allocated"]["vcore"]), 3000);
    std::fs::remove_dir_all(&dir).unwrap();
}
