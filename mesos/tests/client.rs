//! The v1 scheduler client (`unisched_mesos::client`) against our master
//! over real HTTP, in both encodings: every call, the master's refusals as
//! typed errors; and against stand-in masters for what ours never does
//! (redirects, 503, odd statuses, a master that goes silent).

mod common;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use common::*;
use unisched_mesos::client::{Client, ClientError, ClientOptions, StreamError, Subscription};
use unisched_mesos::codec::ContentType;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, Event, call, event};

fn subscribe_call(info: v1::FrameworkInfo) -> call::Subscribe {
    call::Subscribe {
        framework_info: info,
        ..Default::default()
    }
}

/// The next event of `kind` (others skipped), within WAIT.
async fn next_of(s: &mut Subscription, kind: event::Type) -> Event {
    tokio::time::timeout(WAIT, async {
        loop {
            let e = s.events.next().await.expect("stream open").expect("event");
            if e.r#type() == kind {
                return e;
            }
        }
    })
    .await
    .expect("event in time")
}

async fn next_offer(s: &mut Subscription) -> v1::Offer {
    next_of(s, event::Type::Offers)
        .await
        .offers
        .unwrap()
        .offers
        .remove(0)
}

async fn next_update(s: &mut Subscription) -> v1::TaskStatus {
    next_of(s, event::Type::Update).await.update.unwrap().status
}

fn ack(status: &v1::TaskStatus) -> call::Acknowledge {
    call::Acknowledge {
        agent_id: status.agent_id.clone().unwrap(),
        task_id: status.task_id.clone(),
        uuid: status.uuid.clone().unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_reaches_the_master_in_both_encodings() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let client = Client::new(&m.url, support::client_options(ct)).unwrap();
        assert_eq!(client.content_type(), ct);
        let mut s = client
            .subscribe(subscribe_call(framework("c", "r1")))
            .await
            .unwrap();
        let id = s.subscribed.framework_id.clone();
        assert_eq!(client.framework_id(), Some(id.clone()));
        assert_eq!(client.stream_id().as_deref(), Some(s.stream_id.as_str()));
        assert_eq!(s.subscribed.heartbeat_interval_seconds, Some(15.0));

        let offer = next_offer(&mut s).await;
        client
            .accept(call::Accept {
                offer_ids: vec![offer.id.clone()],
                operations: vec![launch(vec![task("t1", &offer, "cpus:1;mem:128", None)])],
                filters: None,
            })
            .await
            .unwrap();
        let running = next_update(&mut s).await;
        assert_eq!(running.state(), v1::TaskState::TaskRunning);
        client.acknowledge(ack(&running)).await.unwrap();

        client.reconcile(call::Reconcile::default()).await.unwrap();
        let reconciled = next_update(&mut s).await;
        assert_eq!(reconciled.reason(), v1::task_status::Reason::Reconciliation);
        assert!(reconciled.uuid.is_none());

        let agent = offer.agent_id.clone();
        let executor = v1::ExecutorId {
            value: "e1".to_string(),
        };
        client
            .message(call::Message {
                agent_id: agent.clone(),
                executor_id: executor.clone(),
                data: b"hi".to_vec(),
            })
            .await
            .unwrap();
        client
            .request(call::Request {
                requests: vec![v1::Request::default()],
            })
            .await
            .unwrap();
        client
            .shutdown(call::Shutdown {
                executor_id: executor,
                agent_id: agent.clone(),
            })
            .await
            .unwrap();
        client
            .acknowledge_operation_status(call::AcknowledgeOperationStatus {
                agent_id: Some(agent.clone()),
                resource_provider_id: None,
                uuid: vec![1; 16],
                operation_id: v1::OperationId {
                    value: "op".to_string(),
                },
            })
            .await
            .unwrap();
        assert_eq!(
            client
                .reconcile_operations(call::ReconcileOperations::default())
                .await
                .unwrap(),
            None
        );
        client
            .suppress(call::Suppress {
                roles: vec!["r1".to_string()],
            })
            .await
            .unwrap();
        client.revive(call::Revive::default()).await.unwrap();

        client
            .kill(call::Kill {
                task_id: running.task_id.clone(),
                agent_id: None,
                kill_policy: None,
            })
            .await
            .unwrap();
        let killed = loop {
            let u = next_update(&mut s).await;
            if u.uuid.is_some() {
                client.acknowledge(ack(&u)).await.unwrap();
            }
            if u.state() == v1::TaskState::TaskKilled {
                break u;
            }
        };
        assert_eq!(killed.task_id.value, "t1");

        m.allocate().await;
        let offer = next_offer(&mut s).await;
        client
            .decline(call::Decline {
                offer_ids: vec![offer.id],
                filters: Some(v1::Filters {
                    refuse_seconds: Some(0.0),
                }),
            })
            .await
            .unwrap();

        let mut info = framework("renamed", "r1");
        info.id = Some(id.clone());
        client
            .update_framework(call::UpdateFramework {
                framework_info: info,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(m.state().await["frameworks"][0]["name"], "renamed");

        let metrics = m.metrics().await;
        for kind in [
            "accept",
            "acknowledge",
            "reconcile",
            "message",
            "request",
            "shutdown",
            "acknowledge_operation_status",
            "reconcile_operations",
            "suppress",
            "revive",
            "kill",
            "decline",
            "update_framework",
        ] {
            let name = format!("master/messages_scheduler_{kind}");
            assert!(
                metrics[&name].as_f64().unwrap_or(0.0) >= 1.0,
                "{name}: {metrics}"
            );
        }

        client.teardown().await.unwrap();
        let state = m.state().await;
        assert_eq!(state["completed_frameworks"][0]["id"], id.value.as_str());
        // The master ended the stream: one Closed, then nothing.
        let end = tokio::time::timeout(WAIT, async {
            loop {
                match s.events.next().await {
                    Some(Ok(_)) => continue,
                    other => return other,
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(end, Some(Err(StreamError::Closed)));
        assert!(s.events.next().await.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_masters_refusals_are_typed_errors() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let opts = support::client_options(ct);

        let fresh = Client::new(&m.url, opts.clone()).unwrap();
        assert_eq!(
            fresh.revive(call::Revive::default()).await,
            Err(ClientError::NotSubscribed)
        );

        let one = Client::new(&m.url, opts.clone()).unwrap();
        let mut info = framework("one", "r1");
        info.failover_timeout = Some(60.0);
        let s1 = one.subscribe(subscribe_call(info.clone())).await.unwrap();
        let two = Client::new(&m.url, opts.clone()).unwrap();
        let _s2 = two
            .subscribe(subscribe_call(framework("two", "r1")))
            .await
            .unwrap();

        // Framework one's id with framework two's stream id.
        let mut foreign = Call {
            framework_id: Some(s1.subscribed.framework_id.clone()),
            r#type: Some(call::Type::Revive as i32),
            ..Default::default()
        };
        match two.call(foreign.clone()).await {
            Err(ClientError::BadRequest(m)) => assert!(m.contains("didn't match"), "{m}"),
            other => panic!("{other:?}"),
        }
        foreign.framework_id = Some(v1::FrameworkId {
            value: "nope".to_string(),
        });
        assert_eq!(
            two.call(foreign).await,
            Err(ClientError::BadRequest(
                "Framework cannot be found".to_string()
            ))
        );

        // Known but not connected: 403.
        let one_id = s1.subscribed.framework_id.value.clone();
        drop(s1);
        support::state_until(&m, |s| {
            s["frameworks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["id"] == one_id.as_str() && f["connected"] == false)
        })
        .await;
        let e = one.revive(call::Revive::default()).await.unwrap_err();
        assert_eq!(
            e,
            ClientError::Forbidden("Framework is not subscribed".to_string())
        );
        assert_eq!(e.status(), Some(403));
        assert!(!e.is_transient());

        // An invalid call: 400 with the validation message.
        let bad = one
            .call(Call {
                r#type: Some(call::Type::Acknowledge as i32),
                acknowledge: Some(call::Acknowledge {
                    uuid: vec![1, 2, 3],
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await;
        match bad {
            Err(ClientError::BadRequest(m)) => assert!(m.contains("Invalid UUID"), "{m}"),
            other => panic!("{other:?}"),
        }

        // A removed framework cannot come back: the first event is ERROR.
        let three = Client::new(&m.url, opts.clone()).unwrap();
        let s3 = three
            .subscribe(subscribe_call(framework("three", "r1")))
            .await
            .unwrap();
        let removed = s3.subscribed.framework_id.clone();
        three.teardown().await.unwrap();
        let mut again = framework("three", "r1");
        again.id = Some(removed);
        assert_eq!(
            three.subscribe(subscribe_call(again)).await.unwrap_err(),
            ClientError::Refused("Framework has been removed".to_string())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_sent_and_a_missing_one_is_unauthorized() {
    let m = Master::start(Setup {
        token: Some("secret".to_string()),
        ..Setup::default()
    })
    .await;
    for ct in ENCODINGS {
        let without = Client::new(&m.url, support::client_options(ct)).unwrap();
        let e = without
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Unauthorized(_)), "{e:?}");
        assert!(!e.is_transient());
        let with = Client::new(
            &m.url,
            ClientOptions {
                token: Some("secret".to_string()),
                ..support::client_options(ct)
            },
        )
        .unwrap();
        let _open = with
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap();
        with.revive(call::Revive::default()).await.unwrap();
    }
}

/// `--mesos-authenticate-http-frameworks`: HTTP Basic credentials of
/// `--mesos-credentials`, Mesos' 401 challenge and principal checks; the
/// token still admits a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frameworks_authenticate_with_basic_credentials_as_in_mesos() {
    use base64::Engine as _;
    let m = Master::start(Setup {
        token: Some("secret".to_string()),
        credentials: &[("alice", "wonder:land"), ("bob", "builder")],
        authenticate_http_frameworks: true,
        ..Setup::default()
    })
    .await;
    // "wonder:land" holds a ':', which Basic cannot carry (as in Mesos).
    let m2 = Master::start(Setup {
        credentials: &[("alice", "wonderland"), ("bob", "builder")],
        authenticate_http_frameworks: true,
        ..Setup::default()
    })
    .await;
    let basic = |p: &str, s: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{p}:{s}"))
        )
    };
    let raw = m2
        .http
        .post(format!("{}/api/v1/scheduler", m2.url))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 401);
    assert_eq!(
        raw.headers()["WWW-Authenticate"],
        "Basic realm=\"mesos-master-scheduler\""
    );
    let e = Client::new(
        &m.url,
        ClientOptions {
            credential: Some(("alice".into(), "wonder:land".into())),
            ..support::client_options(ContentType::Json)
        },
    )
    .unwrap()
    .subscribe(subscribe_call(framework("f", "r1")))
    .await
    .unwrap_err();
    assert!(matches!(e, ClientError::Unauthorized(_)), "{e:?}");
    for (n, ct) in ENCODINGS.into_iter().enumerate() {
        let client = |p: &str, s: &str| {
            Client::new(
                &m2.url,
                ClientOptions {
                    credential: Some((p.to_string(), s.to_string())),
                    ..support::client_options(ct)
                },
            )
            .unwrap()
        };
        for (p, s) in [("alice", "wonder"), ("carol", "wonderland"), ("", "")] {
            let e = client(p, s)
                .subscribe(subscribe_call(framework("f", "r1")))
                .await
                .unwrap_err();
            assert!(matches!(e, ClientError::Unauthorized(_)), "{p}: {e:?}");
        }
        // FrameworkInfo.principal must be the authenticated one.
        let mut as_bob = framework("f", "r1");
        as_bob.principal = Some("bob".to_string());
        let e = client("alice", "wonderland")
            .subscribe(subscribe_call(as_bob))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(400), "{e:?}");
        assert!(
            e.to_string().contains(
                "Authenticated principal 'alice' does not match principal 'bob' set in `FrameworkInfo`"
            ),
            "{e}"
        );
        // Left out, it is set to it.
        let alice = client("alice", "wonderland");
        let mut sub = alice
            .subscribe(subscribe_call(framework(&format!("alice-{n}"), "r1")))
            .await
            .unwrap();
        let id = alice.framework_id().unwrap();
        next_of(&mut sub, event::Type::Offers).await;
        let state = m2.state().await;
        let f = state["frameworks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id.value.as_str())
            .unwrap()
            .clone();
        assert_eq!(f["principal"], "alice");
        assert!(f.get("pid").is_none(), "no pid over HTTP: {f}");
        alice.revive(call::Revive::default()).await.unwrap();
        // Bob's credential on alice's framework's stream.
        let revive = Call {
            framework_id: Some(id.clone()),
            r#type: Some(call::Type::Revive as i32),
            ..Default::default()
        };
        let body = unisched_mesos::codec::encode(&revive, ContentType::Json);
        let stream = alice.stream_id().unwrap();
        let (status, text) = m2
            .post(
                body.clone(),
                &[
                    ("Content-Type", "application/json"),
                    ("Mesos-Stream-Id", &stream),
                    ("Authorization", &basic("bob", "builder")),
                ],
            )
            .await;
        assert_eq!(status, 400, "{text}");
        assert_eq!(
            text,
            "Authenticated principal 'bob' does not match principal 'alice' set in `FrameworkInfo`"
        );
        alice.teardown().await.unwrap();
    }
    // The token admits a call with no principal to check.
    let with_token = Client::new(
        &m.url,
        ClientOptions {
            token: Some("secret".to_string()),
            ..support::client_options(ContentType::Protobuf)
        },
    )
    .unwrap();
    let _open = with_token
        .subscribe(subscribe_call(framework("t", "r1")))
        .await
        .unwrap();
    with_token.revive(call::Revive::default()).await.unwrap();
    // Without credentials the flag is refused at start, as Mesos exits.
    let e = Master::try_start(Setup {
        authenticate_http_frameworks: true,
        ..Setup::default()
    })
    .await
    .err()
    .expect("refused");
    assert!(e.to_string().contains("--mesos-credentials"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_content_type_shares_the_session_and_switches_the_encoding() {
    let m = Master::start(Setup::default()).await;
    let json = Client::new(&m.url, support::client_options(ContentType::Json)).unwrap();
    let _s = json
        .subscribe(subscribe_call(framework("f", "r1")))
        .await
        .unwrap();
    let proto = json.with_content_type(ContentType::Protobuf);
    assert_eq!(proto.content_type(), ContentType::Protobuf);
    assert_eq!(proto.stream_id(), json.stream_id());
    proto.suppress(call::Suppress::default()).await.unwrap();
    json.revive(call::Revive::default()).await.unwrap();
    assert_eq!(
        support::metric(&m, "master/messages_scheduler_suppress").await,
        1.0
    );
    assert_eq!(
        support::metric(&m, "master/messages_scheduler_revive").await,
        1.0
    );
}

/// A stand-in master answering every POST with `status` and `body`.
async fn answering(status: Arc<AtomicU16>, body: &'static str) -> String {
    let router = axum::Router::new().route(
        "/api/v1/scheduler",
        post(move || {
            let status = status.load(Ordering::SeqCst);
            async move { (StatusCode::from_u16(status).unwrap(), body).into_response() }
        }),
    );
    support::serve(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_maps_to_its_error() {
    let status = Arc::new(AtomicU16::new(400));
    let url = answering(status.clone(), "the body").await;
    let client = Client::new(&url, ClientOptions::default()).unwrap();
    let body = || "the body".to_string();
    let cases = [
        (400, ClientError::BadRequest(body()), false),
        (401, ClientError::Unauthorized(body()), false),
        (403, ClientError::Forbidden(body()), false),
        (404, ClientError::NotFound(body()), true),
        (406, ClientError::NotAcceptable(body()), false),
        (415, ClientError::UnsupportedMediaType(body()), false),
        (503, ClientError::ServiceUnavailable(body()), true),
        (
            500,
            ClientError::Unexpected {
                status: 500,
                body: body(),
            },
            true,
        ),
        (
            418,
            ClientError::Unexpected {
                status: 418,
                body: body(),
            },
            false,
        ),
        (
            200,
            ClientError::Unexpected {
                status: 200,
                body: "SUBSCRIBE answered without a Mesos-Stream-Id header".to_string(),
            },
            false,
        ),
    ];
    for (code, expected, transient) in cases {
        status.store(code, Ordering::SeqCst);
        let e = client
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap_err();
        assert_eq!(e, expected, "{code}");
        assert_eq!(e.is_transient(), transient, "{code}");
        if code != 200 {
            assert_eq!(e.status(), Some(code));
        }
    }
    let e = Client::new("http://127.0.0.1:1", ClientOptions::default())
        .unwrap()
        .subscribe(subscribe_call(framework("f", "r1")))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Transport(_)) && e.is_transient(),
        "{e:?}"
    );
}

/// A standby that redirects every POST to `location`; counts the POSTs.
async fn standby(location: String, hits: Arc<AtomicUsize>) -> String {
    let router = axum::Router::new().route(
        "/api/v1/scheduler",
        post(move || {
            hits.fetch_add(1, Ordering::SeqCst);
            let location = location.clone();
            async move {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, location)],
                    "",
                )
                    .into_response()
            }
        }),
    );
    support::serve(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_followed_to_the_leader_and_remembered() {
    let m = Master::start(Setup::default()).await;
    let leader = m.url.trim_start_matches("http://").to_string();
    for (location, ct) in [
        (format!("//{leader}/api/v1/scheduler"), ContentType::Json),
        (leader.clone(), ContentType::Protobuf),
    ] {
        let hits = Arc::new(AtomicUsize::new(0));
        let url = standby(location, hits.clone()).await;
        let client = Client::new(&url, support::client_options(ct)).unwrap();
        let mut s = client
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap();
        assert_eq!(
            client.endpoint(),
            format!("http://{leader}/api/v1/scheduler")
        );
        next_of(&mut s, event::Type::Offers).await;
        client.revive(call::Revive::default()).await.unwrap();
        assert_eq!(
            hits.load(Ordering::SeqCst),
            1,
            "only the first call was redirected"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_is_given_up() {
    let hits = Arc::new(AtomicUsize::new(0));
    let loop_url = Arc::new(std::sync::Mutex::new(String::new()));
    let (h, l) = (hits.clone(), loop_url.clone());
    let router = axum::Router::new().route(
        "/api/v1/scheduler",
        post(move || {
            h.fetch_add(1, Ordering::SeqCst);
            let location = l.lock().unwrap().clone();
            async move {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, location)],
                    "",
                )
                    .into_response()
            }
        }),
    );
    let url = support::serve(router).await;
    *loop_url.lock().unwrap() = url.clone();
    let client = Client::new(
        &url,
        ClientOptions {
            max_redirects: 2,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let e = client
        .subscribe(subscribe_call(framework("f", "r1")))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        ClientError::Redirect("more than 2 redirects".to_string())
    );
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_ends_a_stream_whose_heartbeats_stop() {
    for ct in ENCODINGS {
        let url = support::going_silent(10).await;
        let client = Client::new(&url, support::client_options(ct)).unwrap();
        let mut s = client
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap();
        assert_eq!(s.stream_id, "s-1");
        let started = Instant::now();
        let mut heartbeats = 0;
        let end = loop {
            match tokio::time::timeout(WAIT, s.events.next()).await.unwrap() {
                Some(Ok(e)) => {
                    assert_eq!(e.r#type(), event::Type::Heartbeat);
                    heartbeats += 1;
                }
                other => break other,
            }
        };
        // 3 missed intervals of 50 ms; heartbeats every 20 ms kept it alive before.
        assert_eq!(heartbeats, 10, "{ct:?}");
        assert_eq!(
            end,
            Some(Err(StreamError::HeartbeatTimeout(Duration::from_millis(
                150
            ))))
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(s.events.next().await.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_reuse_one_connection() {
    let m = Master::start(Setup::default()).await;
    let proxy = support::Proxy::start(&m.url).await;
    for ct in ENCODINGS {
        let before = proxy.accepted();
        let client = Client::new(&proxy.url, support::client_options(ct)).unwrap();
        let _s = client
            .subscribe(subscribe_call(framework("f", "r1")))
            .await
            .unwrap();
        for _ in 0..200 {
            client.revive(call::Revive::default()).await.unwrap();
        }
        // One connection holds the event stream; the calls share one or two
        // (a call may start before the previous one's is back in the pool).
        let opened = proxy.accepted() - before;
        assert!((2..=4).contains(&opened), "{ct:?}: {opened} connections");
    }
}
