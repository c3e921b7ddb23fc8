//! Bad input at the scheduler API's HTTP edge, and clients that misbehave:
//! each gets upstream's answer (status code and message) or a clean close,
//! and never holds up the master, another framework or the core.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use unisched_mesos::codec::{self, ContentType};
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call, event};

fn subscribe_call(info: v1::FrameworkInfo) -> Call {
    Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: info,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One case: headers and body, the status and a piece of the body expected.
struct Case {
    what: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
    status: u16,
    says: &'static str,
}

fn json(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_upstreams_status_and_a_reason() {
    let m = Master::start(Setup::default()).await;
    let subscribe_json = codec::encode(&subscribe_call(framework("f", "r")), ContentType::Json);
    let cases = vec![
        Case {
            what: "no content type",
            headers: vec![],
            body: subscribe_json.clone(),
            status: 400,
            says: "Expecting 'Content-Type' to be present",
        },
        Case {
            what: "an unsupported content type",
            headers: vec![("Content-Type", "text/plain")],
            body: subscribe_json.clone(),
            status: 415,
            says: "application/json or application/x-protobuf",
        },
        Case {
            what: "an Accept allowing neither encoding",
            headers: vec![
                ("Content-Type", "application/json"),
                ("Accept", "text/html"),
            ],
            body: subscribe_json.clone(),
            status: 406,
            says: "Accept",
        },
        Case {
            what: "malformed JSON",
            headers: vec![("Content-Type", "application/json")],
            body: json("{\"type\": \"SUBSCRIBE\", "),
            status: 400,
            says: "JSON",
        },
        Case {
            what: "JSON that is not an object",
            headers: vec![("Content-Type", "application/json")],
            body: json("[1, 2]"),
            status: 400,
            says: "",
        },
        Case {
            // As stout's JSON parser: an enum name it does not know leaves
            // an optional field unset.
            what: "an unknown call type",
            headers: vec![("Content-Type", "application/json")],
            body: json("{\"type\": \"LAUNCH_ROCKETS\"}"),
            status: 400,
            says: "Expecting 'type' to be present",
        },
        Case {
            what: "a call without a type",
            headers: vec![("Content-Type", "application/json")],
            body: json("{}"),
            status: 400,
            says: "Expecting 'type' to be present",
        },
        Case {
            what: "SUBSCRIBE without its payload",
            headers: vec![("Content-Type", "application/json")],
            body: json("{\"type\": \"SUBSCRIBE\"}"),
            status: 400,
            says: "Expecting 'subscribe' to be present",
        },
        Case {
            what: "SUBSCRIBE without the required framework_info",
            headers: vec![("Content-Type", "application/json")],
            body: json("{\"type\": \"SUBSCRIBE\", \"subscribe\": {}}"),
            status: 400,
            says: "framework_info",
        },
        Case {
            what: "a wrong field type",
            headers: vec![("Content-Type", "application/json")],
            body: json(
                "{\"type\": \"SUBSCRIBE\", \"subscribe\": {\"framework_info\": {\"user\": 5, \"name\": \"x\"}}}",
            ),
            status: 400,
            says: "user",
        },
        Case {
            what: "garbage protobuf",
            headers: vec![("Content-Type", "application/x-protobuf")],
            body: vec![0xff, 0xff, 0xff, 0x01, 0x02],
            status: 400,
            says: "",
        },
        Case {
            what: "SUBSCRIBE with a stream id",
            headers: vec![
                ("Content-Type", "application/json"),
                ("Mesos-Stream-Id", "abc"),
            ],
            body: subscribe_json.clone(),
            status: 400,
            says: "should not include the 'Mesos-Stream-Id' header",
        },
        Case {
            what: "a call of an unknown framework",
            headers: vec![
                ("Content-Type", "application/json"),
                ("Mesos-Stream-Id", "abc"),
            ],
            body: json("{\"type\": \"REVIVE\", \"framework_id\": {\"value\": \"nobody\"}}"),
            status: 400,
            says: "Framework cannot be found",
        },
        Case {
            what: "a call without a framework id",
            headers: vec![("Content-Type", "application/json")],
            body: json("{\"type\": \"REVIVE\"}"),
            status: 400,
            says: "Expecting 'framework_id' to be present",
        },
        Case {
            what: "an ACKNOWLEDGE whose uuid is not a UUID",
            headers: vec![("Content-Type", "application/json")],
            body: json(
                "{\"type\": \"ACKNOWLEDGE\", \"framework_id\": {\"value\": \"x\"}, \"acknowledge\": {\"agent_id\": {\"value\": \"a\"}, \"task_id\": {\"value\": \"t\"}, \"uuid\": \"AAAA\"}}",
            ),
            status: 400,
            says: "UUID",
        },
        Case {
            what: "bytes that are not base64",
            headers: vec![("Content-Type", "application/json")],
            body: json(
                "{\"type\": \"ACKNOWLEDGE\", \"framework_id\": {\"value\": \"x\"}, \"acknowledge\": {\"agent_id\": {\"value\": \"a\"}, \"task_id\": {\"value\": \"t\"}, \"uuid\": \"%%%\"}}",
            ),
            status: 400,
            says: "",
        },
    ];
    for case in cases {
        let (status, body) = m.post(case.body, &case.headers).await;
        assert_eq!(status, case.status, "{}: {body}", case.what);
        assert!(body.contains(case.says), "{}: {body}", case.what);
        if status == 400 {
            assert!(!body.is_empty(), "{}: a 400 says why", case.what);
        }
    }
    // Nothing of it reached the master's state.
    let state = m.state().await;
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 0, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_tokens_and_huge_bodies() {
    let m = Master::start(Setup {
        token: Some("s3cret".to_string()),
        ..Setup::default()
    })
    .await;
    let url = format!("{}/api/v1/scheduler", m.url);
    let get = m.http.get(&url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
    assert_eq!(get.headers()["Allow"], "POST");
    let body = codec::encode(&subscribe_call(framework("f", "r")), ContentType::Json);
    let (status, _) = m
        .post(body.clone(), &[("Content-Type", "application/json")])
        .await;
    assert_eq!(status, 401, "no token");
    let (status, _) = m
        .post(
            body.clone(),
            &[
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer wrong"),
            ],
        )
        .await;
    assert_eq!(status, 401, "a wrong token");
    let resp = m
        .http
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Authorization", "Bearer s3cret")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "the right token subscribes");
    drop(resp);
    let huge = vec![b' '; unisched_mesos::master::http::MAX_BODY + 1];
    let (status, _) = m
        .post(
            huge,
            &[
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer s3cret"),
            ],
        )
        .await;
    assert_eq!(status, 413, "a body over the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_out_of_order_are_refused_or_ignored_as_upstream() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        // Before SUBSCRIBE: the framework is unknown.
        let ghost = Framework::detached(&m, ct, "ghost-id", "no-stream");
        assert_eq!(ghost.simple(call::Type::Revive).await, 400);
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        // An ACKNOWLEDGE of an update that never came is accepted and ignored.
        let bogus = v1::TaskStatus {
            task_id: v1::TaskId {
                value: "never".to_string(),
            },
            agent_id: Some(offer.agent_id.clone()),
            uuid: Some(vec![7; 16]),
            ..Default::default()
        };
        assert_eq!(f.acknowledge(&bogus).await, 202);
        // DECLINE of an unknown offer is ignored; the real one still works.
        let mut unknown = offer.clone();
        unknown.id.value = "no-such-offer".to_string();
        assert_eq!(f.decline(&unknown, None).await, 202);
        assert_eq!(
            f.launch(&offer, vec![task("t", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        assert_eq!(f.update().await.state(), v1::TaskState::TaskRunning);
        // After TEARDOWN the framework is gone: its calls are 400, and a
        // SUBSCRIBE with its id gets ERROR.
        assert_eq!(f.simple(call::Type::Teardown).await, 202);
        assert_eq!(f.simple(call::Type::Revive).await, 400);
        let mut info = framework("f", "r1");
        info.id = Some(v1::FrameworkId {
            value: f.id.clone(),
        });
        let mut again = m.subscribe(info, ct).await;
        let e = again.next_of(event::Type::Error).await;
        assert_eq!(e.error.unwrap().message, "Framework has been removed");
        assert!(again.closed().await);
        m.expect_empty().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_framework_gets_403_until_it_resubscribes() {
    let m = Master::start(Setup::default()).await;
    let mut info = framework("f", "r1");
    info.failover_timeout = Some(60.0);
    let f = m.subscribe(info.clone(), ContentType::Json).await;
    let (id, stream) = (f.id.clone(), f.stream_id.clone());
    f.disconnect();
    let detached = Framework::detached(&m, ContentType::Json, &id, &stream);
    let status = eventually(|| async { detached.simple(call::Type::Revive).await == 403 }).await;
    assert!(status, "a known framework without a stream is 403");
    info.id = Some(v1::FrameworkId { value: id.clone() });
    let mut back = m.subscribe(info, ContentType::Json).await;
    assert_eq!(back.id, id);
    assert!(!back.offers().await.is_empty());
    assert_eq!(back.simple(call::Type::Revive).await, 202);
    // The old stream id is not the current one any more.
    assert_eq!(detached.simple(call::Type::Revive).await, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_that_never_reads_is_closed_and_stalls_nobody() {
    let m = Master::start(Setup {
        agents: 2,
        stream_capacity: 16,
        ..Setup::default()
    })
    .await;
    // A client that subscribes over raw TCP and then never reads a byte.
    let mut info = framework("stuck", "r1");
    info.failover_timeout = Some(3600.0);
    let body = codec::encode(&subscribe_call(info), ContentType::Json);
    let mut stuck = tokio::net::TcpStream::connect(m.cluster.addr)
        .await
        .unwrap();
    let head = format!(
        "POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stuck.write_all(head.as_bytes()).await.unwrap();
    stuck.write_all(&body).await.unwrap();
    let mut first = [0u8; 4096];
    let n = stuck.read(&mut first).await.unwrap();
    let text = String::from_utf8_lossy(&first[..n]).to_string();
    let stream_id = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("mesos-stream-id: ")
                .or(l.strip_prefix("Mesos-Stream-Id: "))
        })
        .expect("stream id header")
        .trim()
        .to_string();
    let state = m.state().await;
    let id = state["frameworks"][0]["id"].as_str().unwrap().to_string();
    let stuck_fw = Framework::detached(&m, ContentType::Json, &id, &stream_id);
    // Many events for the stuck stream: explicit reconciliation of tasks it
    // does not have, one update each, until its stream is closed.
    let tasks: Vec<call::reconcile::Task> = (0..5000)
        .map(|i| call::reconcile::Task {
            task_id: v1::TaskId {
                value: format!("unknown-task-with-a-long-name-{i:06}"),
            },
            agent_id: None,
        })
        .collect();
    let closed = eventually(|| async {
        let (status, _) = stuck_fw
            .call(Call {
                r#type: Some(call::Type::Reconcile as i32),
                reconcile: Some(call::Reconcile {
                    tasks: tasks.clone(),
                }),
                ..Default::default()
            })
            .await;
        status == 403
    })
    .await;
    assert!(closed, "the stuck framework was disconnected");
    // Meanwhile another framework is served at once.
    let started = Instant::now();
    let mut other = m
        .subscribe(framework("other", "r2"), ContentType::Json)
        .await;
    let offers = other.offers().await;
    assert!(!offers.is_empty());
    assert!(started.elapsed() < WAIT);
    let metrics = m.metrics().await;
    assert!(
        metrics["master/dropped_messages"].as_f64().unwrap() > 0.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_floods_calls_or_hangs_up_mid_call_stalls_nobody() {
    let m = Master::start(Setup {
        agents: 2,
        ..Setup::default()
    })
    .await;
    let mut flood = m
        .subscribe(framework("flood", "r1"), ContentType::Protobuf)
        .await;
    for offer in flood.offers().await {
        assert_eq!(flood.decline(&offer, Some(3600.0)).await, 202);
    }
    // Half-sent requests, then hang up.
    for _ in 0..20 {
        let mut c = tokio::net::TcpStream::connect(m.cluster.addr)
            .await
            .unwrap();
        c.write_all(b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"type\":")
            .await
            .unwrap();
        drop(c);
    }
    // Thousands of calls at once from one framework.
    let flood = std::sync::Arc::new(flood);
    let mut calls = Vec::new();
    for i in 0..2000 {
        let f = flood.clone();
        calls.push(tokio::spawn(async move {
            if i % 2 == 0 {
                return f.simple(call::Type::Suppress).await;
            }
            let reconcile = Call {
                r#type: Some(call::Type::Reconcile as i32),
                reconcile: Some(call::Reconcile::default()),
                ..Default::default()
            };
            f.call(reconcile).await.0
        }));
    }
    // Another framework is served while the flood is on.
    let mut other = m
        .subscribe(framework("other", "r2"), ContentType::Json)
        .await;
    assert!(!other.offers().await.is_empty());
    for c in calls {
        assert_eq!(c.await.unwrap(), 202);
    }
    let state = m.state().await;
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 2, "{state}");
}

/// Polls `check` (every 20 ms, up to WAIT) until it holds.
async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
