//! One `serve` process, both kinds of client: an SI RM over gRPC and a Mesos
//! framework on the Mesos front end share one core; `/ws/v1` and the
//! Prometheus text show the Mesos partition's roles (queues), frameworks
//! (applications) and agents (nodes) beside the RM's, and agree with the
//! master's `/state` once the framework has gone.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::local::LocalOptions;
use unisched_mesos::master::report::Query;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call, event};
use unisched_server::{RemoteScheduler, RunningServer, ServerOptions};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

const WAIT: Duration = Duration::from_secs(10);

async fn get(server: &RunningServer, path: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// GETs `path` until `done` holds for its JSON.
async fn json_until(
    server: &RunningServer,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = get(server, path).await;
        if status == 200 {
            let value: serde_json::Value = serde_json::from_str(&body).unwrap();
            if done(&value) {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path} never satisfied the condition; last: {value}"
            );
        } else {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path}: {status} {body}"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn si_resource(mem: i64, vcore: i64) -> Option<si::Resource> {
    Some(si::Resource {
        resources: [
            ("memory".to_string(), si::Quantity { value: mem }),
            ("vcore".to_string(), si::Quantity { value: vcore }),
        ]
        .into(),
    })
}

/// An SI RM over gRPC: one node, one application with two asks.
fn run_si_rm(endpoint: String) -> Arc<RecordingCallback> {
    let rm = Arc::new(RecordingCallback::new());
    let remote = RemoteScheduler::connect(&endpoint, None).expect("connect");
    remote
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: "k8s".to_string(),
                policy_group: "queues".to_string(),
                ..Default::default()
            },
            rm.clone(),
        )
        .expect("register");
    remote
        .update_node(si::NodeRequest {
            nodes: vec![si::NodeInfo {
                node_id: "si-node".to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: si_resource(8_000_000_000, 8000),
                ..Default::default()
            }],
            rm_id: "k8s".to_string(),
        })
        .unwrap();
    remote
        .update_application(si::ApplicationRequest {
            new: vec![si::AddApplicationRequest {
                application_id: "si-app".to_string(),
                queue_name: "root.default".to_string(),
                partition_name: "default".to_string(),
                ugi: Some(si::UserGroupInformation {
                    user: "alice".to_string(),
                    groups: vec![],
                }),
                ..Default::default()
            }],
            rm_id: "k8s".to_string(),
            ..Default::default()
        })
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while rm.recorded().accepted_applications().count() == 0 {
        assert!(std::time::Instant::now() < deadline, "application accepted");
        std::thread::sleep(Duration::from_millis(5));
    }
    remote
        .update_allocation(si::AllocationRequest {
            asks: vec![si::AllocationAsk {
                allocation_key: "ask".to_string(),
                application_id: "si-app".to_string(),
                partition_name: "default".to_string(),
                resource_ask: si_resource(1_000_000_000, 1000),
                max_allocations: 2,
                ..Default::default()
            }],
            rm_id: "k8s".to_string(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(rm.wait_for_allocations(2, WAIT), 2);
    rm
}

/// The next event of `kind` on a framework's stream.
async fn next(
    events: &mut unisched_mesos::master::EventReceiver,
    kind: event::Type,
) -> v1::scheduler::Event {
    loop {
        let e = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("an event in time")
            .expect("stream open");
        if e.r#type() == kind {
            return e;
        }
    }
}

#[allow(deprecated)] // A single-role framework names its role in `role`.
fn framework_info() -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "bob".to_string(),
        name: "spark".to_string(),
        role: Some("analytics".to_string()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_si_rms_and_mesos_frameworks_from_one_core() {
    // The queue cleaner removes a role's emptied queue; a short round keeps
    // the test quick.
    let scheduler = Scheduler::start(SchedulerOptions {
        queue_cleanup_interval: Duration::from_millis(200),
        ..SchedulerOptions::default()
    });
    let options = ServerOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        mesos: Some(LocalOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            agents: 2,
            agent_resources: Resources::parse("cpus:4;mem:4096").unwrap(),
            executor: ExecutorKind::Simulated,
            ..Default::default()
        }),
        ..ServerOptions::default()
    };
    let server = unisched_server::start(scheduler.clone(), options)
        .await
        .expect("server starts");
    let endpoint = format!("http://{}", server.grpc_addr);
    let si_rm = tokio::task::spawn_blocking(move || run_si_rm(endpoint))
        .await
        .unwrap();
    let master = server
        .mesos
        .as_ref()
        .expect("the Mesos front end")
        .master
        .clone();

    let (stream_id, mut events) = master.subscribe(
        call::Subscribe {
            framework_info: framework_info(),
            ..Default::default()
        },
        64,
    );
    let framework_id = next(&mut events, event::Type::Subscribed)
        .await
        .subscribed
        .unwrap()
        .framework_id;
    let offers = next(&mut events, event::Type::Offers)
        .await
        .offers
        .unwrap()
        .offers;
    assert_eq!(offers.len(), 2, "both agents offered: {offers:?}");
    let app = format!("{}|analytics", framework_id.value);

    // Both partitions, by plain name.
    let partitions = json_until(&server, "/ws/v1/partitions", |v| {
        v.as_array().is_some_and(|a| a.len() == 2)
    })
    .await;
    let mut names: Vec<&str> = partitions
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["default", "mesos"], "{partitions}");
    // The role is a queue holding the offered agents (offers count as allocated).
    let queues = json_until(&server, "/ws/v1/partition/mesos/queues", |q| {
        q["children"][0]["queuename"] == "root.analytics"
            && q["children"][0]["allocatedResource"]["vcore"] == 8000
    })
    .await;
    assert_eq!(
        queues["allocatedResource"]["memory"],
        2 * 4096 * 1048576_i64,
        "{queues}"
    );
    let apps = json_until(&server, "/ws/v1/partition/mesos/applications", |a| {
        a.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    assert_eq!(apps[0]["applicationID"], app.as_str(), "{apps}");
    assert_eq!(apps[0]["queueName"], "root.analytics");
    let nodes = json_until(&server, "/ws/v1/partition/mesos/nodes", |n| {
        n.as_array().is_some_and(|n| n.len() == 2)
    })
    .await;
    assert!(
        nodes[0]["hostName"].as_str().unwrap().contains("agent"),
        "{nodes}"
    );
    // The SI side is untouched: its own partition, node and allocations.
    let si_nodes = json_until(&server, "/ws/v1/partition/default/nodes", |n| {
        n.as_array().is_some_and(|n| n.len() == 1)
    })
    .await;
    assert_eq!(si_nodes[0]["nodeID"], "si-node");
    assert_eq!(si_rm.recorded().allocations().count(), 2);
    // Prometheus shows the Mesos partition's queue too.
    let (status, metrics) = get(&server, "/ws/v1/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("root.analytics"), "{metrics}");

    // TEARDOWN: nothing of the framework is left, in /state and in /ws/v1 alike.
    let outcome = master
        .call(
            Call {
                framework_id: Some(framework_id.clone()),
                r#type: Some(call::Type::Teardown as i32),
                ..Default::default()
            },
            Some(stream_id),
        )
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    let queues = json_until(&server, "/ws/v1/partition/mesos/queues", |q| {
        q.get("allocatedResource").is_none_or(|r| {
            r.as_object()
                .is_some_and(|m| m.values().all(|v| v.as_i64() == Some(0)))
        }) && q.get("children").is_none()
    })
    .await;
    assert!(
        queues.get("children").is_none(),
        "the role's queue went: {queues}"
    );
    let state = master.query(Query::State).await.expect("state");
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 0, "{state}");
    for slave in state["slaves"].as_array().unwrap() {
        assert_eq!(slave["used_resources"]["cpus"], 0.0);
        assert_eq!(slave["offered_resources"]["cpus"], 0.0);
    }
    server.shutdown().await;
}
