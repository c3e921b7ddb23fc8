//! Mesos' v1 operator API of the master (`POST /api/v1`) over real HTTP in
//! both encodings: the read-only calls, TEARDOWN, the event stream of
//! SUBSCRIBE, and bad calls with upstream's answers.

mod common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use unisched_mesos::codec::{self, ContentType};
use unisched_mesos::recordio;
use unisched_mesos::v1;
use unisched_mesos::v1::master::{Call, Event, Response, call, event, response};
use unisched_mesos::v1::scheduler::call as sched_call;

fn op(kind: call::Type) -> Call {
    Call {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// Posts `c` to `path`; the status and the body.
async fn post(m: &Master, path: &str, c: &Call, ct: ContentType) -> (u16, Vec<u8>) {
    let r = m
        .http
        .post(format!("{}{path}", m.url))
        .header("Content-Type", ct.mime())
        .header("Accept", ct.mime())
        .body(codec::encode(c, ct))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// A call's response (200 expected).
async fn ask(m: &Master, c: Call, ct: ContentType) -> Response {
    let (status, body) = post(m, "/api/v1", &c, ct).await;
    assert_eq!(
        status,
        200,
        "{:?}: {}",
        c.r#type(),
        String::from_utf8_lossy(&body)
    );
    codec::decode(&body, ct).expect("a Response")
}

/// An operator SUBSCRIBE's events, as they come.
async fn subscribe(m: &Master, ct: ContentType) -> mpsc::UnboundedReceiver<Event> {
    let resp = m
        .http
        .post(format!("{}/api/v1", m.url))
        .header("Content-Type", ct.mime())
        .header("Accept", ct.mime())
        .body(codec::encode(&op(call::Type::Subscribe), ct))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["Content-Type"], ct.mime());
    let (tx, rx) = mpsc::unbounded_channel();
    let mut body = resp.bytes_stream();
    tokio::spawn(async move {
        let mut decoder = recordio::Decoder::new(64 << 20);
        while let Some(Ok(chunk)) = body.next().await {
            for record in decoder.decode(&chunk).expect("RecordIO") {
                let e: Event = codec::decode(&record, ct).expect("an Event");
                if tx.send(e).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The next event that is not a HEARTBEAT, within WAIT.
async fn next(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    loop {
        let e = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        if e.r#type() != event::Type::Heartbeat {
            return e;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_calls_answer_from_the_masters_books() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agents: 2,
            weights: "r1=2",
            ..Setup::default()
        })
        .await;
        let health = ask(&m, op(call::Type::GetHealth), ct).await;
        assert_eq!(health.r#type(), response::Type::GetHealth);
        assert!(health.get_health.unwrap().healthy);
        let version = ask(&m, op(call::Type::GetVersion), ct).await;
        assert_eq!(
            version.get_version.unwrap().version_info.version,
            unisched_mesos::MESOS_VERSION
        );
        let flags = ask(&m, op(call::Type::GetFlags), ct)
            .await
            .get_flags
            .unwrap();
        assert!(
            flags
                .flags
                .iter()
                .any(|f| f.name == "allocation_interval" && f.value.as_deref() == Some("1secs")),
            "{flags:?}"
        );
        let master = ask(&m, op(call::Type::GetMaster), ct)
            .await
            .get_master
            .unwrap();
        assert_eq!(master.master_info.unwrap().pid, m.cluster.master.info().pid);
        let weights = ask(&m, op(call::Type::GetWeights), ct)
            .await
            .get_weights
            .unwrap();
        assert_eq!(weights.weight_infos.len(), 1);
        assert_eq!(weights.weight_infos[0].role.as_deref(), Some("r1"));
        assert_eq!(weights.weight_infos[0].weight, 2.0);

        // A framework with a running task and an offer out.
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let mut offers = f.offers().await;
        if offers.len() < 2 {
            offers.extend(f.offers().await);
        }
        let (used, kept) = (offers[0].clone(), offers[1].clone());
        assert_eq!(
            f.launch(&used, vec![task("t", &used, "cpus:1;mem:64", None)])
                .await,
            202
        );
        assert_eq!(f.update().await.state(), v1::TaskState::TaskRunning);

        let agents = ask(&m, op(call::Type::GetAgents), ct)
            .await
            .get_agents
            .unwrap();
        assert_eq!(agents.agents.len(), 2);
        let on = agents
            .agents
            .iter()
            .find(|a| a.agent_info.id.as_ref() == Some(&used.agent_id))
            .unwrap();
        assert!(on.active);
        assert!(on.pid.as_deref().unwrap().starts_with("slave("));
        assert!(!on.allocated_resources.is_empty(), "{on:?}");
        let other = agents
            .agents
            .iter()
            .find(|a| a.agent_info.id.as_ref() == Some(&kept.agent_id))
            .unwrap();
        assert!(!other.offered_resources.is_empty(), "{other:?}");

        let frameworks = ask(&m, op(call::Type::GetFrameworks), ct)
            .await
            .get_frameworks
            .unwrap();
        assert_eq!(frameworks.frameworks.len(), 1);
        let fw = &frameworks.frameworks[0];
        assert_eq!(fw.framework_info.id.as_ref().unwrap().value, f.id);
        assert!(fw.active && fw.connected);
        assert_eq!(fw.offers.len(), 1);
        assert_eq!(fw.offers[0].id, kept.id);
        assert!(!fw.allocated_resources.is_empty());

        let tasks = ask(&m, op(call::Type::GetTasks), ct)
            .await
            .get_tasks
            .unwrap();
        assert_eq!(tasks.tasks.len(), 1);
        assert_eq!(tasks.tasks[0].task_id.value, "t");
        assert_eq!(tasks.tasks[0].state(), v1::TaskState::TaskRunning);

        let roles = ask(&m, op(call::Type::GetRoles), ct)
            .await
            .get_roles
            .unwrap();
        let r1 = roles.roles.iter().find(|r| r.name == "r1").unwrap();
        assert_eq!(r1.weight, 2.0);
        assert_eq!(r1.frameworks.len(), 1);
        assert!(!r1.resources.is_empty());

        let metrics = ask(&m, op(call::Type::GetMetrics), ct)
            .await
            .get_metrics
            .unwrap();
        let active = metrics
            .metrics
            .iter()
            .find(|x| x.name == "master/frameworks_active")
            .unwrap();
        assert_eq!(active.value, Some(1.0));

        let state = ask(&m, op(call::Type::GetState), ct)
            .await
            .get_state
            .unwrap();
        assert_eq!(state.get_agents.unwrap().agents.len(), 2);
        assert_eq!(state.get_frameworks.unwrap().frameworks.len(), 1);
        assert_eq!(state.get_tasks.unwrap().tasks.len(), 1);
        assert!(state.get_executors.unwrap().executors.is_empty());

        // TEARDOWN: an unknown framework is a 400; a known one goes, its
        // task killed.
        let teardown = |id: &str| Call {
            teardown: Some(call::Teardown {
                framework_id: v1::FrameworkId {
                    value: id.to_string(),
                },
            }),
            ..op(call::Type::Teardown)
        };
        let (status, body) = post(&m, "/api/v1", &teardown("nobody"), ct).await;
        assert_eq!(status, 400);
        assert_eq!(
            String::from_utf8_lossy(&body),
            "No framework found with specified ID"
        );
        let (status, body) = post(&m, "/api/v1/operator", &teardown(&f.id), ct).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert!(body.is_empty());
        m.expect_empty().await;
        let tasks = ask(&m, op(call::Type::GetTasks), ct)
            .await
            .get_tasks
            .unwrap();
        assert!(tasks.tasks.is_empty());
        assert_eq!(tasks.completed_tasks.len(), 1);
        assert_eq!(tasks.completed_tasks[0].state(), v1::TaskState::TaskKilled);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_get_the_state_then_every_change() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agents: 1,
            heartbeat_interval: Some(Duration::from_millis(200)),
            ..Setup::default()
        })
        .await;
        let mut events = subscribe(&m, ct).await;
        let first = next(&mut events).await;
        assert_eq!(first.r#type(), event::Type::Subscribed);
        let subscribed = first.subscribed.unwrap();
        assert_eq!(subscribed.heartbeat_interval_seconds, Some(0.2));
        let state = subscribed.get_state.unwrap();
        assert_eq!(state.get_agents.unwrap().agents.len(), 1);
        // A HEARTBEAT comes within the interval (and then some).
        let beat = tokio::time::timeout(WAIT, events.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(beat.r#type(), event::Type::Heartbeat);

        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let added = next(&mut events).await;
        assert_eq!(added.r#type(), event::Type::FrameworkAdded);
        assert_eq!(
            added.framework_added.unwrap().framework.framework_info.name,
            "f"
        );
        let offer = f.offers().await.remove(0);
        assert_eq!(
            f.launch(&offer, vec![task("t", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        let e = next(&mut events).await;
        assert_eq!(e.r#type(), event::Type::TaskAdded);
        assert_eq!(e.task_added.unwrap().task.task_id.value, "t");
        let e = next(&mut events).await;
        assert_eq!(e.r#type(), event::Type::TaskUpdated);
        let updated = e.task_updated.unwrap();
        assert_eq!(updated.framework_id.value, f.id);
        assert_eq!(updated.state(), v1::TaskState::TaskRunning);
        // Kill it, then go away: the task's end, then the framework's.
        let kill = unisched_mesos::v1::scheduler::Call {
            r#type: Some(sched_call::Type::Kill as i32),
            kill: Some(sched_call::Kill {
                task_id: v1::TaskId {
                    value: "t".to_string(),
                },
                agent_id: Some(offer.agent_id.clone()),
                kill_policy: None,
            }),
            ..Default::default()
        };
        assert_eq!(f.call(kill).await.0, 202);
        let e = next(&mut events).await;
        assert_eq!(e.r#type(), event::Type::TaskUpdated);
        assert_eq!(e.task_updated.unwrap().state(), v1::TaskState::TaskKilled);
        assert_eq!(f.simple(sched_call::Type::Teardown).await, 202);
        let e = next(&mut events).await;
        assert_eq!(e.r#type(), event::Type::FrameworkRemoved);
        assert_eq!(e.framework_removed.unwrap().framework_info.name, "f");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_operator_calls_get_upstreams_answers() {
    let m = Master::start(Setup::default()).await;
    let url = format!("{}/api/v1", m.url);
    let get = m.http.get(&url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let (status, body) = post(&m, "/api/v1", &Call::default(), ContentType::Json).await;
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("Failed to validate master::Call"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, _) = post(
        &m,
        "/api/v1",
        &op(call::Type::Teardown),
        ContentType::Protobuf,
    )
    .await;
    assert_eq!(status, 400, "TEARDOWN without its message");
    let level = Call {
        set_logging_level: Some(call::SetLoggingLevel {
            level: 2,
            duration: v1::DurationInfo { nanoseconds: 1 },
        }),
        ..op(call::Type::SetLoggingLevel)
    };
    let (status, body) = post(&m, "/api/v1", &level, ContentType::Json).await;
    assert_eq!(status, 501);
    assert!(String::from_utf8_lossy(&body).contains("SET_LOGGING_LEVEL"));
    let wrong_type = m
        .http
        .post(&url)
        .header("Content-Type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_type.status().as_u16(), 415);
    let not_acceptable = m
        .http
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "text/html")
        .body(r#"{"type": "GET_HEALTH"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(not_acceptable.status().as_u16(), 406);
    // No Accept: JSON.
    let plain = m
        .http
        .post(&url)
        .header("Content-Type", "application/json")
        .body(r#"{"type": "GET_HEALTH"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status().as_u16(), 200);
    let v: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(v["get_health"]["healthy"], true);
    assert_eq!(v["type"], "GET_HEALTH");

    let guarded = Master::start(Setup {
        token: Some("s3cret".to_string()),
        ..Setup::default()
    })
    .await;
    let (status, _) = post(
        &guarded,
        "/api/v1",
        &op(call::Type::GetHealth),
        ContentType::Json,
    )
    .await;
    assert_eq!(status, 401);
}

/// GET_QUOTA: each queue with a guaranteed or a maximum is its role's
/// quota, in Mesos' names and units; a role nested in another (`eng/web`)
/// has its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_is_the_queues_guarantees_and_limits() {
    let config = "partitions:
  - name: mesos
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: capped
            resources:
              max: {vcore: 1500m, memory: 256Mi}
          - name: eng
            queues:
              - name: web
                resources:
                  guaranteed: {vcore: 2, memory: 1Gi}
                  max: {vcore: 4}
          - name: plain
";
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            config: Some(config.to_string()),
            ..Setup::default()
        })
        .await;
        let r = ask(&m, op(call::Type::GetQuota), ct).await;
        assert_eq!(r.r#type(), response::Type::GetQuota);
        let configs = r.get_quota.unwrap().status.configs;
        let roles: Vec<&str> = configs.iter().map(|c| c.role.as_str()).collect();
        assert_eq!(roles, ["capped", "eng/web"]);
        let scalar = |m: &std::collections::BTreeMap<String, v1::value::Scalar>, k: &str| {
            m.get(k).map(|s| s.value)
        };
        assert_eq!(scalar(&configs[0].limits, "cpus"), Some(1.5));
        assert_eq!(scalar(&configs[0].limits, "mem"), Some(256.0));
        assert!(configs[0].guarantees.is_empty());
        assert_eq!(scalar(&configs[1].guarantees, "cpus"), Some(2.0));
        assert_eq!(scalar(&configs[1].guarantees, "mem"), Some(1024.0));
        assert_eq!(scalar(&configs[1].limits, "cpus"), Some(4.0));

        // `/roles` (the v0 endpoint) shows the same quota beside a role's
        // frameworks and resources.
        let mut f = m.subscribe(framework("w", "eng/web"), ct).await;
        let offered = f.offers().await;
        assert!(!offered.is_empty());
        for path in ["/roles", "/master/roles"] {
            let roles: serde_json::Value = m
                .http
                .get(format!("{}{path}", m.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let names: Vec<&str> = roles["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["capped", "eng/web"], "{roles}");
            let capped = &roles["roles"][0];
            assert_eq!(capped["quota"]["limit"]["cpus"], 1.5);
            assert_eq!(capped["quota"]["limit"]["mem"], 256.0);
            assert_eq!(capped["frameworks"], serde_json::json!([]));
            assert_eq!(capped["weight"], 1.0);
            let web = &roles["roles"][1];
            assert_eq!(web["quota"]["role"], "eng/web");
            assert_eq!(web["quota"]["guarantee"]["cpus"], 2.0);
            assert_eq!(web["quota"]["limit"]["cpus"], 4.0);
            assert_eq!(web["frameworks"], serde_json::json!([f.id]));
            assert!(web["offered"]["cpus"].as_f64().unwrap() > 0.0, "{web}");
            assert_eq!(web["allocated"], serde_json::json!({}));
            assert_eq!(web["resources"], web["offered"]);
        }
    }
}
