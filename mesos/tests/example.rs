//! The example framework (`examples/hello_framework.rs`), compiled into
//! this test and run against a master with process agents.

mod common;

#[allow(dead_code)] // Its `main` is for `cargo run --example`.
#[path = "../examples/hello_framework.rs"]
mod hello_framework;

use common::*;
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::driver::Status;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_framework_runs_its_tasks_and_tears_down() {
    let m = Master::start(Setup {
        agents: 2,
        executor: ExecutorKind::Process,
        ..Setup::default()
    })
    .await;
    let url = m.url.clone();
    let framework = tokio::task::spawn_blocking(move || hello_framework::run(&url, 3));
    // The test master's clock moves only when told: allocation runs (offers
    // of what finished tasks freed) and heartbeats happen as it does.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !framework.is_finished() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the example ran too long"
        );
        m.allocate().await;
    }
    let outcome = framework
        .await
        .unwrap()
        .expect("the master address is valid");
    assert_eq!(outcome, (Status::DriverStopped, 3));
    let state = m.state().await;
    assert!(
        state["frameworks"].as_array().unwrap().is_empty(),
        "{state}"
    );
    let done = &state["completed_frameworks"][0];
    assert_eq!(done["name"], "hello");
    let finished = done["completed_tasks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(done["tasks"].as_array().unwrap())
        .filter(|t| t["state"] == "TASK_FINISHED")
        .count();
    assert_eq!(finished, 3, "{done}");
}
