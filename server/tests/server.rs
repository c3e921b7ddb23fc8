//! End-to-end tests of the server on ephemeral loopback ports: gRPC streams, the
//! remote client, REST routes and the bearer token.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::cluster::res;
use common::{
    WAIT, get_json, get_json_until, get_json_with, http, open_get, read_until, start_with,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Request;
use unisched_core::{Scheduler, SchedulerOptions};
use unisched_server::{RemoteScheduler, RunningServer, ServerOptions, Token};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;
use unisched_si::scheduler_client::SchedulerClient;

const RM: &str = "rm-1";

fn nodes(ids: &[&str]) -> si::NodeRequest {
    si::NodeRequest {
        nodes: ids
            .iter()
            .map(|id| si::NodeInfo {
                node_id: id.to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: res(1000, 4000),
                ..Default::default()
            })
            .collect(),
        rm_id: RM.to_string(),
    }
}

fn app(id: &str) -> si::ApplicationRequest {
    si::ApplicationRequest {
        new: vec![si::AddApplicationRequest {
            application_id: id.to_string(),
            queue_name: "root.default".to_string(),
            partition_name: "default".to_string(),
            ugi: Some(si::UserGroupInformation {
                user: "alice".to_string(),
                groups: vec![],
            }),
            ..Default::default()
        }],
        rm_id: RM.to_string(),
        ..Default::default()
    }
}

fn asks(app: &str, n: usize) -> si::AllocationRequest {
    si::AllocationRequest {
        asks: (0..n)
            .map(|i| si::AllocationAsk {
                allocation_key: format!("{app}-{i}"),
                application_id: app.to_string(),
                partition_name: "default".to_string(),
                resource_ask: res(100, 100),
                max_allocations: 1,
                ..Default::default()
            })
            .collect(),
        rm_id: RM.to_string(),
        ..Default::default()
    }
}

fn register() -> si::RegisterResourceManagerRequest {
    si::RegisterResourceManagerRequest {
        rm_id: RM.to_string(),
        policy_group: "queues".to_string(),
        ..Default::default()
    }
}

async fn start(token: Option<&str>) -> (Scheduler, RunningServer) {
    start_with(ServerOptions {
        token: Token::new(token),
        ..ServerOptions::default()
    })
    .await
}

async fn client(server: &RunningServer) -> SchedulerClient<tonic::transport::Channel> {
    SchedulerClient::connect(format!("http://{}", server.grpc_addr))
        .await
        .expect("connect")
}

/// A stream of requests for a bidirectional call, and its sender.
fn outgoing<T>() -> (tokio::sync::mpsc::Sender<T>, ReceiverStream<T>) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    (tx, ReceiverStream::new(rx))
}

/// Registers, reports nodes, an app and asks over the streams, and waits for
/// `n` allocations on the UpdateAllocation stream.
async fn allocate_over_grpc(server: &RunningServer, n: usize) -> Vec<si::Allocation> {
    let mut c = client(server).await;
    c.register_resource_manager(register())
        .await
        .expect("register");
    // The node stream binds by its first message; the others by metadata.
    let (node_tx, node_out) = outgoing();
    node_tx.send(nodes(&["n1", "n2"])).await.unwrap();
    let mut node_in = c.update_node(node_out).await.unwrap().into_inner();
    // Responses to an earlier stream of the RM that went away may come first.
    let mut accepted = Vec::new();
    while !(accepted.contains(&"n1".to_string()) && accepted.contains(&"n2".to_string())) {
        let resp = tokio::time::timeout(WAIT, node_in.message())
            .await
            .expect("nodes accepted in time")
            .unwrap()
            .expect("stream open");
        accepted.extend(resp.accepted.into_iter().map(|a| a.node_id));
    }

    let (app_tx, app_out) = outgoing();
    let mut req = Request::new(app_out);
    req.metadata_mut().insert("rmid", RM.parse().unwrap());
    let mut app_in = c.update_application(req).await.unwrap().into_inner();
    app_tx.send(app("app-1")).await.unwrap();
    let app_resp = app_in.message().await.unwrap().unwrap();
    assert_eq!(app_resp.accepted.len(), 1, "{app_resp:?}");

    let (alloc_tx, alloc_out) = outgoing();
    let mut alloc_in = c.update_allocation(alloc_out).await.unwrap().into_inner();
    alloc_tx.send(asks("app-1", n)).await.unwrap();
    let mut got = Vec::new();
    while got.len() < n {
        let resp = tokio::time::timeout(WAIT, alloc_in.message())
            .await
            .expect("allocations in time")
            .unwrap()
            .expect("stream open");
        got.extend(resp.new);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_streams_carry_requests_in_and_allocations_out() {
    let (_sched, server) = start(None).await;
    let allocs = allocate_over_grpc(&server, 3).await;
    assert_eq!(allocs.len(), 3);
    assert!(
        allocs
            .iter()
            .all(|a| a.application_id == "app-1" && !a.node_id.is_empty())
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_before_the_stream_opens_are_buffered() {
    let (sched, server) = start(None).await;
    let mut c = client(&server).await;
    c.register_resource_manager(register()).await.unwrap();
    // The node goes in while no node stream of the RM is open (straight into
    // the core, which answers through the server's callback for the RM)...
    let core = sched.clone();
    tokio::task::spawn_blocking(move || {
        core.update_node(nodes(&["n1"])).unwrap();
        core.settle();
    })
    .await
    .unwrap();
    // ...and the acceptance arrives on the first node stream the RM opens.
    let (_tx, out) = outgoing::<si::NodeRequest>();
    let mut req = Request::new(out);
    req.metadata_mut().insert("rmid", RM.parse().unwrap());
    let mut stream = c.update_node(req).await.unwrap().into_inner();
    let resp = tokio::time::timeout(WAIT, stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(resp.accepted[0].node_id, "n1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_rm_ends_the_stream_with_failed_precondition() {
    let (_sched, server) = start(None).await;
    let mut c = client(&server).await;
    let (tx, out) = outgoing();
    tx.send(nodes(&["n1"])).await.unwrap();
    let mut stream = c.update_node(out).await.unwrap().into_inner();
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    let bad = si::RegisterResourceManagerRequest {
        config: "partitions: [".to_string(),
        ..register()
    };
    let err = c.register_resource_manager(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_scheduler_round_trip() {
    let (_sched, server) = start(Some("t0ken")).await;
    let endpoint = format!("http://{}", server.grpc_addr);
    let rm = Arc::new(RecordingCallback::new());
    let cb = rm.clone();
    let count = tokio::task::spawn_blocking(move || {
        let remote = RemoteScheduler::connect(&endpoint, Some("t0ken")).expect("connect");
        let api: &dyn SchedulerApi = &remote;
        api.register_resource_manager(register(), cb.clone())
            .expect("register");
        api.update_node(nodes(&["n1"])).unwrap();
        api.update_application(app("app-1")).unwrap();
        // The three kinds of request travel on separate streams, so (like any
        // RM) wait for the application to be accepted before asking for it.
        let deadline = std::time::Instant::now() + WAIT;
        while cb.recorded().accepted_applications().count() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "application accepted in time"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        api.update_allocation(asks("app-1", 4)).unwrap();
        let n = cb.wait_for_allocations(4, WAIT);
        let unknown = api.update_node(si::NodeRequest {
            rm_id: "other".to_string(),
            ..Default::default()
        });
        assert!(matches!(
            unknown,
            Err(unisched_shim_api::SchedulerError::UnknownResourceManager { .. })
        ));
        n
    })
    .await
    .unwrap();
    assert_eq!(count, 4);
    let recorded = rm.recorded();
    assert_eq!(recorded.accepted_nodes().count(), 1);
    assert_eq!(recorded.accepted_applications().count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_is_required_when_set() {
    let (_sched, server) = start(Some("s3cret")).await;
    let mut c = client(&server).await;
    let err = c.register_resource_manager(register()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let mut wrong = Request::new(register());
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer nope".parse().unwrap());
    let err = c.register_resource_manager(wrong).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    // Nothing was applied: no partition exists.
    assert_eq!(
        get_json(&server, "/ws/v1/partitions").await,
        serde_json::json!([])
    );
    let mut right = Request::new(register());
    right
        .metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    c.register_resource_manager(right).await.expect("admitted");

    let (status, _) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        b"partitions: []",
    )
    .await;
    assert_eq!(status, 401);
    let auth = "Authorization: Bearer s3cret\r\n";
    let (status, _) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        auth,
        b"partitions: []",
    )
    .await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_not_panics() {
    let (_sched, server) = start(None).await;
    for (method, path, body, want) in [
        ("POST", "/ws/v1/validate-conf", &b"\xff\xfe"[..], 400),
        ("GET", "/ws/v1/partition/nope/nodes", &b""[..], 404),
        ("GET", "/ws/v1/partition/nope/queues", &b""[..], 404),
        ("GET", "/ws/v1/no-such-route", &b""[..], 404),
        ("GET", "/ws/v1/validate-conf", &b""[..], 405),
    ] {
        let (status, body) = http(&server, method, path, "", body).await;
        assert_eq!(status, want, "{method} {path}: {body}");
    }
    let big = vec![b'#'; unisched_server::MAX_BODY_BYTES + 1];
    let (status, _) = http(&server, "POST", "/ws/v1/validate-conf", "", &big).await;
    assert_eq!(status, 413);
    let (status, _) = http(&server, "GET", "/ws/v1/scheduler/healthcheck", "", b"").await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnecting_mid_stream_leaves_server_healthy() {
    let (_sched, server) = start(None).await;
    {
        // A client that registers, opens a stream, sends, and vanishes.
        let mut c = client(&server).await;
        c.register_resource_manager(register()).await.unwrap();
        let (tx, out) = outgoing();
        let _stream = c.update_node(out).await.unwrap().into_inner();
        tx.send(nodes(&["n0"])).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A new connection works end to end, and the core is consistent.
    let allocs = allocate_over_grpc(&server, 1).await;
    assert_eq!(allocs.len(), 1);
    let health = get_json(&server, "/ws/v1/scheduler/healthcheck").await;
    assert_eq!(health["Healthy"], true, "{health}");
    server.shutdown().await;
}

/// GETs `/ws/v1/metrics` until it contains `line`.
async fn metrics_until(server: &RunningServer, line: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, text) = http(server, "GET", "/ws/v1/metrics", "", b"").await;
        assert_eq!(status, 200);
        if text.contains(line) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "metrics never showed {line:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_counters_move() {
    let (_sched, server) = start(None).await;
    allocate_over_grpc(&server, 3).await;
    let text = metrics_until(
        &server,
        "yunikorn_scheduler_container_allocation_attempt_total{state=\"allocated\"} 3",
    )
    .await;
    for line in [
        "yunikorn_scheduler_application_submission_total{result=\"accepted\"} 1",
        "yunikorn_scheduler_node{state=\"active\"} 2",
        "yunikorn_scheduler_application_total{state=\"running\"} 1",
        "# TYPE yunikorn_scheduler_scheduling_latency_milliseconds histogram",
        "yunikorn_queue_app{",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    let count = |text: &str| -> u64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix("yunikorn_scheduler_scheduling_latency_milliseconds_count ")
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let before = count(&text);
    assert!(before > 0, "{text}");
    // More work moves the counters on.
    let mut c = client(&server).await;
    let (tx, out) = outgoing();
    let mut req = Request::new(out);
    req.metadata_mut().insert("rmid", RM.parse().unwrap());
    let mut alloc_in = c.update_allocation(req).await.unwrap().into_inner();
    tx.send(si::AllocationRequest {
        asks: asks("app-1", 5).asks.into_iter().skip(3).collect(),
        ..asks("app-1", 0)
    })
    .await
    .unwrap();
    let mut got = 0;
    while got < 2 {
        got += tokio::time::timeout(WAIT, alloc_in.message())
            .await
            .expect("allocations in time")
            .unwrap()
            .unwrap()
            .new
            .len();
    }
    let text = metrics_until(
        &server,
        "yunikorn_scheduler_container_allocation_attempt_total{state=\"allocated\"} 5",
    )
    .await;
    assert!(count(&text) > before, "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_put_applies_then_asks_the_rm_to_persist() {
    let (sched, server) = start(Some("s3cret")).await;
    let endpoint = format!("http://{}", server.grpc_addr);
    let rm = Arc::new(RecordingCallback::new());
    let cb = rm.clone();
    let remote = tokio::task::spawn_blocking(move || {
        let remote = RemoteScheduler::connect(&endpoint, Some("s3cret")).expect("connect");
        remote
            .register_resource_manager(register(), cb)
            .expect("register");
        // Our UpdateConfiguration rpc: without a source, the text in force is re-applied.
        remote.update_configuration(RM).expect("reload over gRPC");
        let unknown = remote.update_configuration("nope");
        assert!(
            matches!(
                unknown,
                Err(unisched_shim_api::SchedulerError::UnknownResourceManager { .. })
            ),
            "{unknown:?}"
        );
        remote
    })
    .await
    .unwrap();

    let (status, text) = http(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!(status, 200);
    assert_eq!(text, unisched_core::scheduler::DEFAULT_CONFIG);
    let json = get_json_with(&server, "/ws/v1/config", "Accept: application/json\r\n").await;
    assert_eq!(json["Partitions"][0]["Name"], "default");

    let new_config = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
          - name: batch
";
    let (status, _) = http(&server, "PUT", "/ws/v1/config", "", new_config.as_bytes()).await;
    assert_eq!(status, 401, "PUT needs the token");
    let auth = "Authorization: Bearer s3cret\r\n";
    let (status, body) = http(&server, "PUT", "/ws/v1/config", auth, b"partitions: [").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = http(&server, "PUT", "/ws/v1/config", auth, new_config.as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["persisted"], true);

    // Applied in the core, and the RM was asked to persist exactly that text.
    let persisted = rm.recorded().configurations.clone();
    assert_eq!(persisted.len(), 1, "{persisted:?}");
    assert_eq!(persisted[0].config, new_config);
    assert_eq!(persisted[0].rm_id, RM);
    assert_eq!(persisted[0].policy_group, "queues");
    let (status, text) = http(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!(status, 200);
    assert_eq!(text, new_config);
    get_json_until(&server, "/ws/v1/partition/default/queue/root.batch", |q| {
        q["queuename"] == "root.batch"
    })
    .await;
    let core = sched.clone();
    let snapshot = tokio::task::spawn_blocking(move || core.snapshot("default"))
        .await
        .unwrap()
        .unwrap();
    assert!(snapshot.queue("root.batch").is_some());
    tokio::task::spawn_blocking(move || drop(remote))
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_delivers_live_events_and_survives_disconnects() {
    let (_sched, server) = start(None).await;
    // A client that opens the stream and vanishes at once.
    drop(open_get(&server, "/ws/v1/events/stream").await);
    let mut conn = open_get(&server, "/ws/v1/events/stream").await;
    // Wait for the response head, so the subscription exists before the work.
    let mut seen = Vec::new();
    read_until(&mut conn, &mut seen, "the response head", |t| {
        t.contains("\r\n\r\n")
    })
    .await;
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    allocate_over_grpc(&server, 1).await;
    read_until(&mut conn, &mut seen, "a live event", |t| {
        t.contains("\"objectID\"")
    })
    .await;
    drop(conn);
    let health = get_json(&server, "/ws/v1/scheduler/healthcheck").await;
    assert_eq!(health["Healthy"], true, "{health}");
    // Shutdown ends streams still open instead of waiting for them.
    let mut lingering = open_get(&server, "/ws/v1/events/stream?count=5").await;
    read_until(&mut lingering, &mut Vec::new(), "the response head", |t| {
        !t.is_empty()
    })
    .await;
    tokio::time::timeout(unisched_server::SHUTDOWN_GRACE, server.shutdown())
        .await
        .expect("shutdown does not wait for the grace period");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_both_ports() {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_pem = key.cert.pem();
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let options = ServerOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        tls: Some(unisched_server::TlsIdentity {
            cert_pem: cert_pem.clone().into_bytes(),
            key_pem: key.signing_key.serialize_pem().into_bytes(),
        }),
        ..ServerOptions::default()
    };
    let server = unisched_server::start(scheduler, options).await.unwrap();

    // gRPC: the remote client verifies the server against the CA.
    let endpoint = format!("https://{}", server.grpc_addr);
    let ca = cert_pem.clone().into_bytes();
    tokio::task::spawn_blocking(move || {
        let remote = RemoteScheduler::connect_with(
            &endpoint,
            unisched_server::ConnectOptions {
                ca_pem: Some(ca),
                tls_domain: Some("localhost".to_string()),
                ..Default::default()
            },
        )
        .expect("TLS connect");
        remote
            .register_resource_manager(register(), Arc::new(RecordingCallback::new()))
            .expect("register over TLS");
    })
    .await
    .unwrap();

    // HTTPS: a rustls client that trusts only the generated certificate.
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(key.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    tls.write_all(
        b"GET /ws/v1/partitions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"clusterId\":\"rm-1\""), "{text}");

    // Plain text on the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    plain
        .write_all(b"GET /ws/v1/partitions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(WAIT, plain.read_to_end(&mut raw)).await;
    assert!(!String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 200"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_protobuf_is_an_error_not_a_panic() {
    let (_sched, server) = start(None).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // Field 1 as a varint where the server expects rmID, a string: undecodable.
    let codec =
        tonic_prost::ProstCodec::<si::Quantity, si::RegisterResourceManagerResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/si.v1.Scheduler/RegisterResourceManager",
    );
    let err = grpc
        .unary(Request::new(si::Quantity { value: 7 }), path, codec)
        .await
        .unwrap_err();
    assert_ne!(err.code(), tonic::Code::Ok);
    // The server goes on serving, and nothing was registered.
    assert_eq!(
        get_json(&server, "/ws/v1/partitions").await,
        serde_json::json!([])
    );
    assert_eq!(allocate_over_grpc(&server, 1).await.len(), 1);
    server.shutdown().await;
}

/// A node stream of the RM, kept open until its sender and response stream
/// are dropped.
async fn open_node_stream(
    c: &mut SchedulerClient<tonic::transport::Channel>,
) -> (
    tokio::sync::mpsc::Sender<si::NodeRequest>,
    tonic::Streaming<si::NodeResponse>,
) {
    let (tx, out) = outgoing::<si::NodeRequest>();
    let mut req = Request::new(out);
    req.metadata_mut().insert("rmid", RM.parse().unwrap());
    let stream = tokio::time::timeout(WAIT, c.update_node(req))
        .await
        .expect("a stream within the limit opens")
        .expect("stream accepted")
        .into_inner();
    (tx, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_beyond_the_connection_limit_wait_for_a_free_slot() {
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let options = ServerOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        max_concurrent_streams: 2,
        ..ServerOptions::default()
    };
    let server = unisched_server::start(scheduler.clone(), options)
        .await
        .expect("server starts");
    let mut c = client(&server).await;
    c.register_resource_manager(register()).await.unwrap();
    let first = open_node_stream(&mut c).await;
    let _second = open_node_stream(&mut c).await;
    // Both slots are taken: a third call on the same connection is held back
    // by the server, not served.
    let mut third_client = c.clone();
    let third = tokio::spawn(async move {
        third_client
            .register_resource_manager(register())
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !third.is_finished(),
        "a third call ran beyond the limit of 2"
    );
    // Closing one stream frees a slot and the waiting call goes through.
    drop(first);
    tokio::time::timeout(WAIT, third)
        .await
        .expect("the held call runs once a slot is free")
        .unwrap()
        .expect("registered");
    server.shutdown().await;
}
