//! The dashboard's routes: the page and its assets, `/ui/info`, and the
//! Mesos master's state through `/ui/mesos/*` (with and without a master).
//! The page itself runs in a browser in the workspace's `tests/dashboard.rs`.

mod common;

use common::{get_json, http, request, start_with};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::local::LocalOptions;
use unisched_server::ServerOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_and_assets_are_served_from_the_binary() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    for (path, kind, marker) in [
        ("/", "text/html", "/dashboard/app.js"),
        (
            "/dashboard/app.js",
            "text/javascript",
            "/ws/v1/events/stream",
        ),
        ("/dashboard/app.css", "text/css", ".queue-tree"),
    ] {
        let a = request(&server, "GET", path, "", b"").await;
        assert_eq!(a.status, 200, "{path}");
        assert!(
            a.header("content-type")
                .is_some_and(|c| c.starts_with(kind)),
            "{path}: {}",
            a.head
        );
        assert!(a.body.contains(marker), "{path} lacks {marker}");
    }
    let info = get_json(&server, "/ui/info").await;
    assert!(info["mesos"].is_null());
    assert_eq!(info["eventTypes"]["2"], "APP");
    assert_eq!(info["changeDetails"]["206"], "APP_RUNNING");
    for path in ["/ui/mesos/state", "/ui/mesos/metrics"] {
        let (status, body) = http(&server, "GET", path, "", b"").await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains("--mesos-addr"), "{body}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesos_side_comes_from_the_master() {
    let (_s, server) = start_with(ServerOptions {
        mesos: Some(LocalOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            agents: 2,
            executor: ExecutorKind::Simulated,
            ..LocalOptions::default()
        }),
        ..ServerOptions::default()
    })
    .await;
    let mesos_addr = server.mesos.as_ref().expect("a master").addr;
    let info = get_json(&server, "/ui/info").await;
    assert_eq!(info["mesos"]["addr"], mesos_addr.to_string());
    assert_eq!(info["mesos"]["port"], mesos_addr.port());
    let state = get_json(&server, "/ui/mesos/state").await;
    assert_eq!(state["slaves"].as_array().unwrap().len(), 2);
    let metrics = get_json(&server, "/ui/mesos/metrics").await;
    assert_eq!(metrics["master/slaves_active"], 2.0);
    // The RM's diagnostics in the state dump are the master's own state.
    let dump = get_json(&server, "/debug/fullstatedump").await;
    assert_eq!(dump["rmDiagnostics"]["slaves"].as_array().unwrap().len(), 2);
    assert!(
        dump["config"]["Partitions"].is_array(),
        "the master's configuration: {}",
        dump["config"]
    );
    server.shutdown().await;
}
