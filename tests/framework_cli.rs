//! `unisched framework` against a local Mesos cluster (process agents that
//! really run the command) over real HTTP: all tasks finished, a failed
//! task, a master that is not there, offers too small to use.

use std::time::Duration;

use unisched::cli::framework::batch::Outcome;
use unisched::cli::framework::{Encoding, FrameworkArgs, Summary, execute};
use unisched::core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::local::{self, LocalCluster, LocalOptions};
use unisched_mesos::resources::Resources;

async fn cluster(agents: usize, resources: &str) -> LocalCluster {
    let options = LocalOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        agents,
        agent_resources: Resources::parse(resources).unwrap(),
        executor: ExecutorKind::Process,
        work_dir: std::env::temp_dir()
            .join(format!("unisched-framework-cli-{}", std::process::id())),
        ..LocalOptions::default()
    };
    local::start(Scheduler::start(SchedulerOptions::default()), options)
        .await
        .expect("cluster starts")
}

fn args(master: String, tasks: usize, command: &str) -> FrameworkArgs {
    FrameworkArgs {
        master,
        tasks,
        cpus: 0.5,
        mem: 64.0,
        command: command.to_string(),
        role: "batch".to_string(),
        name: "cli-test".to_string(),
        content_type: Encoding::Protobuf,
        json: true,
        timeout: 30.0,
        master_timeout: 10.0,
        refuse_seconds: 5.0,
        token: None,
        principal: None,
        secret: None,
    }
}

/// Runs the framework off the test's runtime (it blocks).
async fn run(args: FrameworkArgs) -> Summary {
    tokio::task::spawn_blocking(move || execute(&args, |_| {}).expect("flags are valid"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_finishes_several_per_offer_and_the_framework_tears_down() {
    let c = cluster(2, "cpus:2;mem:1024").await;
    for encoding in [Encoding::Json, Encoding::Protobuf] {
        let mut a = args(format!("http://{}", c.addr), 6, "test -d .");
        a.content_type = encoding;
        let s = run(a).await;
        assert_eq!(s.outcome, Outcome::Finished, "{encoding:?}");
        assert_eq!(s.progress.launched, 6);
        assert_eq!(s.progress.finished, 6);
        // Two agents of four task slots each: one offer each is enough.
        assert_eq!(s.progress.offers_received, 2, "{:?}", s.progress);
        let json = s.to_json();
        assert_eq!(json["ok"], true);
        assert_eq!(json["states"]["TASK_FINISHED"], 6);
        assert_eq!(json["tasks"], 6);
        assert!(json["seconds"].as_f64().unwrap() > 0.0);
    }
    let state = c
        .master
        .query(unisched_mesos::master::report::Query::State)
        .await
        .unwrap();
    assert!(
        state["frameworks"].as_array().unwrap().is_empty(),
        "{state}"
    );
    assert_eq!(state["completed_frameworks"].as_array().unwrap().len(), 2);
    c.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_fails_the_run_with_its_reason() {
    let c = cluster(1, "cpus:2;mem:1024").await;
    let s = run(args(format!("{}", c.addr), 3, "exit 3")).await;
    match &s.outcome {
        Outcome::Failed(why) => {
            assert!(why.contains("TASK_FAILED") && why.contains("3"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert!(s.progress.final_states["TASK_FAILED"] >= 1);
    assert_eq!(s.to_json()["ok"], false);
    c.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_too_small_are_declined_until_the_timeout() {
    let c = cluster(1, "cpus:0.2;mem:1024").await;
    let mut a = args(format!("{}", c.addr), 1, "true");
    a.timeout = 1.5;
    a.refuse_seconds = 0.0;
    let s = run(a).await;
    match &s.outcome {
        Outcome::Failed(why) => assert!(why.starts_with("timed out"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(s.progress.offers_declined >= 1, "{:?}", s.progress);
    assert_eq!(s.progress.launched, 0);
    c.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_is_not_there_is_given_up() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut a = args(format!("127.0.0.1:{port}"), 1, "true");
    a.master_timeout = 0.5;
    let started = std::time::Instant::now();
    let s = run(a).await;
    match &s.outcome {
        Outcome::Failed(why) => assert!(why.starts_with("master gone"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn unusable_flags_are_refused() {
    let mut a = args("127.0.0.1:5050".to_string(), 0, "true");
    assert!(execute(&a, |_| {}).is_err());
    a.tasks = 1;
    a.cpus = -1.0;
    assert!(execute(&a, |_| {}).is_err());
    a.cpus = 1.0;
    a.master = "zk://zk:2181/mesos".to_string();
    assert!(execute(&a, |_| {}).is_err());
}

/// `--principal` and `--secret` against a master that requires HTTP Basic
/// credentials: the right ones run the batch as that principal, a wrong
/// secret is refused with the master's 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_and_secret_authenticate_the_framework() {
    let options = LocalOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        agents: 1,
        agent_resources: Resources::parse("cpus:2;mem:1024").unwrap(),
        executor: ExecutorKind::Process,
        work_dir: std::env::temp_dir().join(format!(
            "unisched-framework-cli-auth-{}",
            std::process::id()
        )),
        credentials: Some(unisched_mesos::master::auth::Credentials::from_pairs([(
            "batcher", "s3cret",
        )])),
        authenticate_http_frameworks: true,
        ..LocalOptions::default()
    };
    let c = local::start(Scheduler::start(SchedulerOptions::default()), options)
        .await
        .expect("cluster starts");
    let mut a = args(format!("http://{}", c.addr), 2, "true");
    a.principal = Some("batcher".to_string());
    a.secret = Some("nope".to_string());
    match run(a.clone()).await.outcome {
        Outcome::Failed(why) => assert!(why.contains("401"), "{why}"),
        other => panic!("{other:?}"),
    }
    a.secret = Some("s3cret".to_string());
    assert_eq!(run(a).await.outcome, Outcome::Finished);
    let state = c
        .master
        .query(unisched_mesos::master::report::Query::State)
        .await
        .expect("the master runs");
    let principals: Vec<&serde_json::Value> = state["completed_frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["principal"])
        .collect();
    assert!(!principals.is_empty(), "{state}");
    assert!(principals.iter().all(|p| *p == "batcher"), "{state}");
    c.stop();
}
