//! The REST routes of the scheduler as a service (configuration,
//! validation, health, history, events, the debug routes and their old
//! places, CORS), one test each, with upstream's field names pinned.

mod common;

use std::time::Duration;

use common::cluster::{CONFIG, cluster, default_cluster, fails, has_fields};
use common::{
    get_json, get_json_until, get_json_with, http, open_get, read_until, request, start_with,
};
use serde_json::{Value, json};
use unisched_server::ServerOptions;
use unisched_si as si;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_before_any_rm_registered() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let (status, text) = http(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!((status, text.as_str()), (200, ""));
    let json = get_json_with(&server, "/ws/v1/config", "Accept: application/json\r\n").await;
    assert_eq!(
        json,
        json!({"DeadlockDetectionEnabled": false, "DeadlockTimeoutSeconds": 0})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_in_force() {
    let (_s, server) = default_cluster().await;
    let a = request(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body, CONFIG);
    assert!(a.header("content-type").is_some_and(|c| c.contains("yaml")));
    let json = get_json_with(&server, "/ws/v1/config", "Accept: application/json\r\n").await;
    has_fields(
        &json,
        &[
            "Checksum",
            "DeadlockDetectionEnabled",
            "DeadlockTimeoutSeconds",
            "Partitions",
        ],
    );
    assert_eq!(json["Checksum"], unisched_core::config::checksum(CONFIG));
    let batch = &json["Partitions"][0]["Queues"][0]["Queues"][1];
    assert_eq!(batch["Name"], "batch");
    assert_eq!(
        batch["Resources"]["Max"],
        json!({"memory": "3000", "vcore": "8"})
    );
    assert_eq!(batch["Limits"][0]["Groups"], json!(["dev"]));
    let (status, _) = http(&server, "GET", "/ws/v1/config?rmID=nope", "", b"").await;
    assert_eq!(status, 404);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_conf() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let (status, body) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        CONFIG.as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"allowed": true})
    );
    let (_, body) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        b"partitions: [",
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    has_fields(&v, &["allowed", "reason"]);
    assert_eq!(v["allowed"], false);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/scheduler/healthcheck").await;
    has_fields(&v, &["HealthChecks", "Healthy"]);
    assert_eq!(v["Healthy"], true);
    has_fields(&v["HealthChecks"][0], &["Description", "Name", "Succeeded"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_of_apps_and_containers() {
    let (_s, server) = cluster(ServerOptions {
        history_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    })
    .await;
    let apps = get_json_until(&server, "/ws/v1/history/apps", |v| {
        v.as_array()
            .and_then(|a| a.last())
            .is_some_and(|r| r["totalApplications"] == "1")
    })
    .await;
    has_fields(&apps[0], &["timestamp", "totalApplications"]);
    let first = apps[0]["timestamp"].as_u64().unwrap();
    let last = apps.as_array().unwrap().last().unwrap()["timestamp"]
        .as_u64()
        .unwrap();
    assert!(first <= last, "oldest first");
    let containers = get_json_until(&server, "/ws/v1/history/containers", |v| {
        v.as_array()
            .and_then(|a| a.last())
            .is_some_and(|r| r["totalContainers"] == "2")
    })
    .await;
    has_fields(&containers[0], &["timestamp", "totalContainers"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_batch() {
    let (_s, server) = default_cluster().await;
    let v = get_json_until(&server, "/ws/v1/events/batch?count=1000", |v| {
        v["EventRecords"].as_array().is_some_and(|e| e.len() > 3)
    })
    .await;
    has_fields(
        &v,
        &["EventRecords", "HighestID", "InstanceUUID", "LowestID"],
    );
    assert_eq!(v["InstanceUUID"].as_str().unwrap().len(), 36, "a UUID");
    // The application events of app-1, in Go's encoding: enums as numbers.
    let app = v["EventRecords"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["objectID"] == "app-1" && e["type"] == si::event_record::Type::App as i32)
        .expect("an APP event of app-1");
    assert!(app["timestampNano"].is_i64());
    assert!(app["eventChangeDetail"].is_i64());
    let one = get_json(&server, "/ws/v1/events/batch?start=1&count=1").await;
    assert_eq!(one["EventRecords"].as_array().unwrap().len(), 1);
    assert_eq!(one["EventRecords"][0], v["EventRecords"][1]);
    fails(&server, "/ws/v1/events/batch?count=abc", 400).await;
    fails(&server, "/ws/v1/events/batch?count=0", 400).await;
    fails(&server, "/ws/v1/events/batch?start=-1", 400).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_starts_with_the_instance() {
    let (_s, server) = default_cluster().await;
    let mut conn = open_get(&server, "/ws/v1/events/stream?count=2").await;
    let mut seen = Vec::new();
    // Head, the instance line and the two events of the history.
    read_until(&mut conn, &mut seen, "the history", |t| {
        t.matches("\"objectID\"").count() >= 2
    })
    .await;
    let text = String::from_utf8_lossy(&seen);
    let first = text
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let first: Value = serde_json::from_str(first).unwrap();
    has_fields(&first, &["InstanceUUID"]);
    drop(conn);
    fails(&server, "/ws/v1/events/stream?count=x", 400).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_and_its_old_place() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let moved = request(&server, "GET", "/ws/v1/stack", "", b"").await;
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), Some("/debug/stack"));
    let (status, text) = http(&server, "GET", "/debug/stack", "", b"").await;
    assert_eq!(status, 200);
    assert!(text.contains("backtrace of the answering thread"), "{text}");
    if cfg!(target_os = "linux") {
        assert!(
            text.contains(" threads\n") && text.contains("tokio"),
            "{text}"
        );
    }
    fails(&server, "/debug/pprof/heap", 501).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_state_dump_and_its_old_place() {
    let (_s, server) = cluster(ServerOptions {
        history_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    })
    .await;
    let moved = request(&server, "GET", "/ws/v1/fullstatedump", "", b"").await;
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), Some("/debug/fullstatedump"));
    get_json_until(&server, "/ws/v1/history/apps", |v| {
        !v.as_array().unwrap().is_empty()
    })
    .await;
    let dump = get_json(&server, "/debug/fullstatedump").await;
    has_fields(
        &dump,
        &[
            "appHistory",
            "applications",
            "clusterInfo",
            "config",
            "containerHistory",
            "logLevel",
            "nodes",
            "partitions",
            "placementRules",
            "queues",
            "rmDiagnostics",
            "timestamp",
        ],
    );
    has_fields(&dump["nodes"][0], &["nodesInfo", "partitionName"]);
    assert_eq!(dump["nodes"][0]["nodesInfo"].as_array().unwrap().len(), 2);
    has_fields(&dump["placementRules"][0], &["partition", "rules"]);
    assert_eq!(dump["queues"][0]["queuename"], "root");
    assert_eq!(dump["applications"].as_array().unwrap().len(), 2);
    assert_eq!(
        dump["rmDiagnostics"],
        json!({"empty": "Resource Manager did not register callback"})
    );
    assert_eq!(dump["config"]["Partitions"][0]["Name"], "default");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_lets_another_origin_read() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let get = request(
        &server,
        "GET",
        "/ws/v1/partitions",
        "Origin: http://ui:8080\r\n",
        b"",
    )
    .await;
    assert_eq!(get.status, 200);
    assert_eq!(get.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        get.header("access-control-allow-methods"),
        Some("GET, OPTIONS")
    );
    assert!(
        get.header("access-control-allow-headers")
            .is_some_and(|h| h.starts_with("X-Requested-With,Content-Type,Accept,Origin"))
    );
    let preflight = request(
        &server,
        "OPTIONS",
        "/ws/v1/validate-conf",
        "Origin: http://ui:8080\r\nAccess-Control-Request-Method: POST\r\n",
        b"",
    )
    .await;
    assert!(preflight.status == 204, "{}", preflight.status);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    let post = request(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        b"partitions: []",
    )
    .await;
    assert_eq!(
        post.header("access-control-allow-methods"),
        Some("OPTIONS, POST")
    );
    // Errors carry them too, so a UI can read the message.
    let missing = request(&server, "GET", "/ws/v1/partition/x/nodes", "", b"").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("access-control-allow-origin"), Some("*"));
    fails(&server, "/ws/v1/no-such-route", 404).await;
    server.shutdown().await;
}
