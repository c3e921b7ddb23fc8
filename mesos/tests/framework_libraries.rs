//! A real Mesos framework library against the master: pymesos 0.3.15 (the
//! scheduler driver Python frameworks use) launches command tasks through
//! `POST /api/v1/scheduler`, on agents that run them with `/bin/sh -c`.
//!
//! pymesos needs Python 3.10 or older (its http-parser dependency). `.ci/run`
//! makes a virtualenv with it at `target/pymesos-venv`; elsewhere point
//! `UNISCHED_PYMESOS_PYTHON` at such a python. Without one the test says so
//! and passes, unless `UNISCHED_REQUIRE_PYMESOS=1` (set by CI) makes that a
//! failure.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::local::{self, LocalOptions};
use unisched_mesos::resources::Resources;

/// A python that can import pymesos, if there is one.
fn pymesos_python() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/pymesos-venv/bin/python");
    let candidate = std::env::var_os("UNISCHED_PYMESOS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or(venv);
    let works = Command::new(&candidate)
        .args(["-c", "import pymesos"])
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(candidate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_runs_command_tasks_to_completion() {
    let Some(python) = pymesos_python() else {
        assert!(
            std::env::var_os("UNISCHED_REQUIRE_PYMESOS").is_none(),
            "UNISCHED_REQUIRE_PYMESOS is set but no python with pymesos was found"
        );
        eprintln!(
            "SKIPPED: no python with pymesos (see the module docs of mesos/tests/pymesos.rs)"
        );
        return;
    };
    let work_dir = std::env::temp_dir().join(format!("unisched-pymesos-{}", std::process::id()));
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let cluster = local::start(
        scheduler.clone(),
        LocalOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            agents: 2,
            agent_resources: Resources::parse("cpus:2;mem:1024").unwrap(),
            executor: ExecutorKind::Process,
            work_dir: work_dir.clone(),
            ..Default::default()
        },
    )
    .await
    .expect("master starts");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/pymesos/framework.py");
    let master = cluster.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(master)
            .arg("6")
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "pymesos framework failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(summary["finished"], 6, "{summary}");
    // Each task wrote into its own sandbox.
    let outputs = common::walk(&work_dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "out.txt"))
        .count();
    assert_eq!(outputs, 6);
    // Torn down: nothing of it is left in the master or the core.
    let state: serde_json::Value = reqwest::get(format!("http://{}/state", cluster.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 0, "{state}");
    assert_eq!(state["completed_frameworks"].as_array().unwrap().len(), 1);
    for slave in state["slaves"].as_array().unwrap() {
        assert_eq!(slave["used_resources"]["cpus"], 0.0, "{slave}");
        assert_eq!(slave["offered_resources"]["cpus"], 0.0, "{slave}");
    }
    scheduler.settle();
    let snap = scheduler.snapshot("mesos").expect("the Mesos partition");
    assert!(
        snap.nodes.iter().all(|n| n.allocated.is_empty()),
        "{:?}",
        snap.nodes
    );
    cluster.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _ = std::fs::remove_dir_all(work_dir);
}
