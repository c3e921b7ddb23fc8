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
    let files = Call {
        list_files: Some(call::ListFiles {
            path: "/".to_string(),
        }),
        ..op(call::Type::ListFiles)
    };
    let (status, body) = post(&m, "/api/v1", &files, ContentType::Json).await;
    assert_eq!(status, 501);
    assert!(String::from_utf8_lossy(&body).contains("LIST_FILES"));
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

/// A call that changes something: 200 with no body expected.
async fn change(m: &Master, c: Call, ct: ContentType) {
    let (status, body) = post(m, "/api/v1", &c, ct).await;
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (200, ""),
        "{:?}",
        c.r#type()
    );
}

/// A call refused with 400; its message.
async fn refused(m: &Master, c: Call, ct: ContentType) -> String {
    let (status, body) = post(m, "/api/v1", &c, ct).await;
    let text = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, 400, "{:?}: {text}", c.r#type());
    text
}

fn weights_call(pairs: &[(&str, f64)]) -> Call {
    Call {
        update_weights: Some(call::UpdateWeights {
            weight_infos: pairs
                .iter()
                .map(|(role, weight)| v1::WeightInfo {
                    weight: *weight,
                    role: Some(role.to_string()),
                })
                .collect(),
        }),
        ..op(call::Type::UpdateWeights)
    }
}

fn quota_config(
    role: &str,
    guarantees: &[(&str, f64)],
    limits: &[(&str, f64)],
) -> v1::quota::QuotaConfig {
    let map = |pairs: &[(&str, f64)]| {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v1::value::Scalar { value: *v }))
            .collect()
    };
    v1::quota::QuotaConfig {
        role: role.to_string(),
        guarantees: map(guarantees),
        limits: map(limits),
    }
}

fn quota_call(force: bool, configs: Vec<v1::quota::QuotaConfig>) -> Call {
    Call {
        update_quota: Some(call::UpdateQuota {
            force: Some(force),
            quota_configs: configs,
        }),
        ..op(call::Type::UpdateQuota)
    }
}

/// GET_QUOTA's configs by role: (guarantees, limits) as `name:value` lists.
async fn quotas(
    m: &Master,
    ct: ContentType,
) -> std::collections::BTreeMap<String, (Vec<String>, Vec<String>)> {
    let r = ask(m, op(call::Type::GetQuota), ct).await;
    let list = |map: &std::collections::BTreeMap<String, v1::value::Scalar>| {
        let mut v: Vec<String> = map
            .iter()
            .map(|(n, s)| format!("{n}:{}", s.value))
            .collect();
        v.sort();
        v
    };
    r.get_quota
        .unwrap()
        .status
        .configs
        .iter()
        .map(|c| (c.role.clone(), (list(&c.guarantees), list(&c.limits))))
        .collect()
}

/// UPDATE_WEIGHTS and UPDATE_QUOTA (and the older SET_QUOTA and
/// REMOVE_QUOTA) change the core's queues at run time, with Mesos' checks
/// and messages: the framework's offers are rescinded and come again under
/// the new limit, the consumption and capacity checks give way to `force`,
/// and a hot reload of the file keeps what the operator set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // SET_QUOTA and REMOVE_QUOTA, Mesos' older calls.
async fn weights_and_quota_change_at_run_time() {
    let config = "partitions:
  - name: mesos
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: capped
            resources:
              max: {vcore: 1500m}
";
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            config: Some(config.to_string()),
            ..Setup::default()
        })
        .await;
        let mut f = m.subscribe(framework("f", "web"), ct).await;
        assert_eq!(scalar(&f.offers().await[0], "cpus"), 2.0);

        // A weight of a role without frameworks leaves the offers out.
        change(&m, weights_call(&[(" eng/batch ", 0.5)]), ct).await;
        let rescind = unisched_mesos::v1::scheduler::event::Type::Rescind;
        assert!(f.maybe_next_of(rescind).await.is_none());
        // Weights: the offer goes back, the weight shows.
        change(&m, weights_call(&[("web", 2.5)]), ct).await;
        f.next_of(rescind).await;
        let r = ask(&m, op(call::Type::GetWeights), ct).await;
        let weights: Vec<(String, f64)> = r
            .get_weights
            .unwrap()
            .weight_infos
            .into_iter()
            .map(|w| (w.role.unwrap(), w.weight))
            .collect();
        assert_eq!(
            weights,
            [("eng/batch".to_string(), 0.5), ("web".to_string(), 2.5)]
        );
        let roles = ask(&m, op(call::Type::GetRoles), ct)
            .await
            .get_roles
            .unwrap();
        let web = roles.roles.iter().find(|r| r.name == "web").unwrap();
        assert_eq!(web.weight, 2.5);
        let e = refused(&m, weights_call(&[("web", 0.0)]), ct).await;
        assert_eq!(
            e,
            "Failed to validate update weights request JSON for role 'web': \
             Invalid weight '0': Weights must be positive"
        );
        let e = refused(&m, weights_call(&[("a//b", 1.0)]), ct).await;
        assert!(
            e.starts_with("Failed to validate update weights request JSON: Invalid role 'a//b': "),
            "{e}"
        );

        // Quota: the core holds the role to its new limit.
        m.allocate().await;
        f.offers().await;
        change(
            &m,
            quota_call(
                false,
                vec![quota_config("web", &[("cpus", 1.0)], &[("cpus", 1.0)])],
            ),
            ct,
        )
        .await;
        f.next_of(unisched_mesos::v1::scheduler::event::Type::Rescind)
            .await;
        m.allocate().await;
        let offer = f.offers().await.remove(0);
        assert_eq!(scalar(&offer, "cpus"), 1.0, "{offer:?}");
        let q = quotas(&m, ct).await;
        assert_eq!(
            q["web"],
            (vec!["cpus:1".to_string()], vec!["cpus:1".to_string()])
        );
        assert_eq!(q["capped"], (vec![], vec!["cpus:1.5".to_string()]));

        // A task holds 1 cpu: a lower limit needs force.
        assert_eq!(
            f.launch(&offer, vec![task("t1", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        let lower = || quota_call(false, vec![quota_config("web", &[], &[("cpus", 0.5)])]);
        let e = refused(&m, lower(), ct).await;
        assert_eq!(
            e,
            "Invalid QuotaConfig: Role 'web' is already consuming 'cpus:1; mem:64'; this is more \
             than the requested limits 'cpus:0.5' (use 'force' flag to bypass this check)"
        );
        let mut forced = lower();
        forced.update_quota.as_mut().unwrap().force = Some(true);
        change(&m, forced, ct).await;
        assert_eq!(
            quotas(&m, ct).await["web"],
            (vec![], vec!["cpus:0.5".to_string()])
        );

        // Guarantees: within the limits, and within the cluster unless forced.
        let e = refused(
            &m,
            quota_call(
                false,
                vec![quota_config("x", &[("cpus", 2.0)], &[("cpus", 1.0)])],
            ),
            ct,
        )
        .await;
        assert!(
            e.starts_with(
                "Invalid QuotaConfig: 'QuotaConfig.guarantees' {'cpus': 2} is not contained"
            ),
            "{e}"
        );
        let big = |force| quota_call(force, vec![quota_config("x", &[("cpus", 64.0)], &[])]);
        let e = refused(&m, big(false), ct).await;
        assert_eq!(
            e,
            "Invalid QuotaConfig: total quota guarantees 'cpus:64' exceed cluster capacity \
             'cpus:2; mem:1024' (use 'force' flag to bypass this check)"
        );
        change(&m, big(true), ct).await;
        assert_eq!(
            quotas(&m, ct).await["x"],
            (vec!["cpus:64".to_string()], vec![])
        );
        let e = refused(
            &m,
            quota_call(false, vec![quota_config("x", &[("cpus", f64::NAN)], &[])]),
            ct,
        )
        .await;
        assert!(e.contains("NaN not supported"), "{e}");

        // Empty configs remove quota: the operator's and the file's.
        change(
            &m,
            quota_call(
                false,
                vec![
                    quota_config("x", &[], &[]),
                    quota_config("capped", &[], &[]),
                ],
            ),
            ct,
        )
        .await;
        let q = quotas(&m, ct).await;
        assert_eq!(q.keys().collect::<Vec<_>>(), ["web"]);

        // The older calls: the guarantee is also the limit.
        let set = || Call {
            set_quota: Some(call::SetQuota {
                quota_request: v1::quota::QuotaRequest {
                    force: None,
                    role: Some("capped".to_string()),
                    guarantee: resources("cpus:0.5"),
                },
            }),
            ..op(call::Type::SetQuota)
        };
        change(&m, set(), ct).await;
        assert_eq!(
            quotas(&m, ct).await["capped"],
            (vec!["cpus:0.5".to_string()], vec!["cpus:0.5".to_string()])
        );
        let e = refused(&m, set(), ct).await;
        assert_eq!(
            e,
            "Failed to validate set quota request: Cannot set quota for role 'capped' which already has quota"
        );
        let remove = |role: &str| Call {
            remove_quota: Some(call::RemoveQuota {
                role: role.to_string(),
            }),
            ..op(call::Type::RemoveQuota)
        };
        let e = refused(&m, remove("nobody"), ct).await;
        assert_eq!(e, "Failed to remove quota: Role 'nobody' has no quota set");
        change(&m, remove("capped"), ct).await;

        // A reload of the file keeps the operator's quota and weights: the
        // file's quota of `capped` stays removed, `other` has the file's.
        let reloaded = format!(
            "{config}          - name: other\n            resources:\n              max: {{vcore: 1}}\n"
        );
        let handle = m.cluster.master.clone();
        tokio::task::spawn_blocking(move || handle.apply_config(reloaded))
            .await
            .unwrap()
            .unwrap();
        let q = quotas(&m, ct).await;
        assert_eq!(q.keys().collect::<Vec<_>>(), ["other", "web"]);
        assert_eq!(q["web"], (vec![], vec!["cpus:0.5".to_string()]));
        let snapshot = m.scheduler.snapshot("mesos").unwrap();
        let web = snapshot
            .queues
            .iter()
            .find(|q| q.path == "root.web")
            .unwrap();
        assert_eq!(web.max.get("vcore"), Some(&500), "{web:?}");
        let r = ask(&m, op(call::Type::GetWeights), ct).await;
        assert_eq!(r.get_weights.unwrap().weight_infos.len(), 2);
    }
}

/// `/weights` and `/quota`, Mesos' endpoints older than the operator API:
/// reads open, changes behind the token, and upstream's refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_and_quota_endpoints() {
    let m = Master::start(Setup {
        token: Some("s3cret".to_string()),
        ..Setup::default()
    })
    .await;
    let url = |path: &str| format!("{}{path}", m.url);
    let send = |method: reqwest::Method, path: &str, body: &str, token: bool| {
        let mut req = m.http.request(method, url(path)).body(body.to_string());
        if token {
            req = req.bearer_auth("s3cret");
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    use reqwest::Method as M;
    assert_eq!(
        send(M::GET, "/weights", "", false).await,
        (200, "[]".to_string())
    );
    let body = r#"[{"role":"web","weight":3}]"#;
    assert_eq!(send(M::PUT, "/weights", body, false).await.0, 401);
    assert_eq!(
        send(M::PUT, "/master/weights", body, true).await,
        (200, String::new())
    );
    let (status, got) = send(M::GET, "/master/weights", "", false).await;
    assert_eq!(status, 200);
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got, serde_json::json!([{"weight": 3.0, "role": "web"}]));
    let (status, e) = send(M::PUT, "/weights", "{nope", true).await;
    assert_eq!(status, 400);
    assert!(
        e.starts_with("Failed to parse update weights request JSON '{nope': "),
        "{e}"
    );
    let (status, e) = send(M::PUT, "/weights", r#"[{"role":"web"}]"#, true).await;
    assert_eq!(status, 400);
    assert!(
        e.starts_with("Failed to convert weights JSON array to protobuf"),
        "{e}"
    );
    let (status, e) = send(M::DELETE, "/weights", "", true).await;
    assert_eq!(
        (status, e.as_str()),
        (
            405,
            "Expecting one of { 'GET', 'PUT' }, but received 'DELETE'"
        )
    );

    let set =
        r#"{"role":"web","guarantee":[{"name":"cpus","type":"SCALAR","scalar":{"value":1}}]}"#;
    assert_eq!(send(M::POST, "/quota", set, false).await.0, 401);
    assert_eq!(
        send(M::POST, "/quota", set, true).await,
        (200, String::new())
    );
    let (status, got) = send(M::GET, "/quota", "", false).await;
    assert_eq!(status, 200);
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(
        got["configs"],
        serde_json::json!([{"role": "web", "guarantees": {"cpus": {"value": 1.0}}, "limits": {"cpus": {"value": 1.0}}}]),
        "{got}"
    );
    // The older form beside it, for older tools.
    assert_eq!(
        got["infos"],
        serde_json::json!([{"role": "web", "guarantee": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.0}}]}]),
        "{got}"
    );
    let (status, e) = send(M::POST, "/quota", set, true).await;
    assert_eq!(status, 400);
    assert!(e.ends_with("which already has quota"), "{e}");
    let (status, e) = send(M::POST, "/quota", "[]", true).await;
    assert_eq!(status, 400);
    assert!(
        e.starts_with("Failed to parse set quota request JSON '[]'"),
        "{e}"
    );
    assert_eq!(send(M::DELETE, "/quota/web", "", false).await.0, 401);
    assert_eq!(
        send(M::DELETE, "/master/quota/web", "", true).await,
        (200, String::new())
    );
    let (status, e) = send(M::DELETE, "/quota/web", "", true).await;
    assert_eq!(
        (status, e.as_str()),
        (400, "Failed to remove quota: Role 'web' has no quota set")
    );
    let (status, e) = send(M::DELETE, "/quota", "", true).await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(send(M::PATCH, "/quota", "", true).await.0, 405);
    // Nested roles have their path's tail as the role.
    let nested =
        r#"{"role":"eng/web","guarantee":[{"name":"mem","type":"SCALAR","scalar":{"value":64}}]}"#;
    assert_eq!(send(M::POST, "/quota", nested, true).await.0, 200);
    assert_eq!(
        send(M::DELETE, "/quota/eng/web", "", true).await,
        (200, String::new())
    );
    let (_, got) = send(M::GET, "/quota", "", false).await;
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["configs"], serde_json::Value::Null, "{got}");
}

async fn teardown(m: &Master, framework: &str, ct: ContentType) {
    let c = Call {
        teardown: Some(call::Teardown {
            framework_id: v1::FrameworkId {
                value: framework.to_string(),
            },
        }),
        ..op(call::Type::Teardown)
    };
    change(m, c, ct).await;
}

/// An operator call naming an agent: DEACTIVATE_AGENT, REACTIVATE_AGENT,
/// MARK_AGENT_GONE, or DRAIN_AGENT with its options.
fn agent_call(kind: call::Type, agent: &str) -> Call {
    let agent_id = v1::AgentId {
        value: agent.to_string(),
    };
    let mut c = op(kind);
    match kind {
        call::Type::DeactivateAgent => {
            c.deactivate_agent = Some(call::DeactivateAgent { agent_id })
        }
        call::Type::ReactivateAgent => {
            c.reactivate_agent = Some(call::ReactivateAgent { agent_id })
        }
        call::Type::MarkAgentGone => c.mark_agent_gone = Some(call::MarkAgentGone { agent_id }),
        _ => unreachable!("not an agent call here: {kind:?}"),
    }
    c
}

fn drain_call(agent: &str, max_grace: Option<Duration>, mark_gone: bool) -> Call {
    Call {
        drain_agent: Some(call::DrainAgent {
            agent_id: v1::AgentId {
                value: agent.to_string(),
            },
            max_grace_period: max_grace.map(|d| prost_types::Duration {
                seconds: d.as_secs() as i64,
                nanos: d.subsec_nanos() as i32,
            }),
            mark_gone: Some(mark_gone),
        }),
        ..op(call::Type::DrainAgent)
    }
}

/// The framework's first offers, one of each of two agents, by agent id.
async fn offers_of_two_agents(f: &mut Framework) -> Vec<v1::Offer> {
    let mut offers = f.offers().await;
    if offers.len() < 2 {
        offers.extend(f.offers().await);
    }
    offers.sort_by(|a, b| a.agent_id.value.cmp(&b.agent_id.value));
    offers
}

/// Acknowledges the framework's updates until its task runs.
async fn until_running(f: &mut Framework) {
    loop {
        let s = f.update().await;
        f.acknowledge(&s).await;
        if s.state() == v1::TaskState::TaskRunning {
            return;
        }
    }
}

/// `/state`'s entry of the agent.
async fn slave(m: &Master, agent: &str) -> serde_json::Value {
    let state = m.state().await;
    state["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == agent)
        .cloned()
        .unwrap_or_else(|| panic!("agent {agent} in /state: {state}"))
}

/// The agent's entry of GET_AGENTS.
async fn operator_agent(m: &Master, agent: &str, ct: ContentType) -> response::get_agents::Agent {
    let agents = ask(m, op(call::Type::GetAgents), ct)
        .await
        .get_agents
        .unwrap();
    agents
        .agents
        .into_iter()
        .find(|x| x.agent_info.id.as_ref().unwrap().value == agent)
        .unwrap_or_else(|| panic!("agent {agent} in GET_AGENTS"))
}

/// Whether the core's node of the agent's unreserved pool is schedulable.
fn core_node_schedulable(m: &Master, agent: &str) -> bool {
    m.scheduler.settle();
    let snap = m.scheduler.snapshot("mesos").expect("the Mesos partition");
    snap.nodes
        .iter()
        .find(|n| n.id == agent)
        .unwrap_or_else(|| panic!("node {agent}"))
        .schedulable
}

/// Waits (real time, within WAIT) for the agent's drain state in `/state`.
async fn drain_state(m: &Master, agent: &str, want: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = slave(m, agent).await;
        if s["drain_info"]["state"] == want {
            return s;
        }
        assert!(tokio::time::Instant::now() < deadline, "{want}: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_deactivates_drains_and_reactivates_agents() {
    use unisched_mesos::v1::scheduler::event::Type as E;
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agents: 2,
            executor: unisched_mesos::agent::ExecutorKind::Process,
            ..Setup::default()
        })
        .await;
        let mut f = m.subscribe(framework("f", "web"), ct).await;
        let offers = offers_of_two_agents(&mut f).await;
        let (a, b) = (
            offers[0].agent_id.value.clone(),
            offers[1].agent_id.value.clone(),
        );
        // On A, the whole agent: a task that ignores SIGTERM and asks 30 s
        // to stop.
        let mut t = task("stubborn", &offers[0], AGENT_A, None);
        t.command = Some(v1::CommandInfo {
            value: Some("trap '' TERM; sleep 60".to_string()),
            ..Default::default()
        });
        t.kill_policy = Some(v1::KillPolicy {
            grace_period: Some(v1::DurationInfo {
                nanoseconds: 30_000_000_000,
            }),
        });
        assert_eq!(f.launch(&offers[0], vec![t]).await, 202);
        until_running(&mut f).await;

        // DEACTIVATE_AGENT: B's offer is rescinded, nothing of B is offered.
        change(&m, agent_call(call::Type::DeactivateAgent, &b), ct).await;
        let rescind = f.next_of(E::Rescind).await.rescind.unwrap();
        assert_eq!(rescind.offer_id, offers[1].id);
        let s = slave(&m, &b).await;
        assert_eq!(
            (s["active"].clone(), s["deactivated"].clone()),
            (false.into(), true.into())
        );
        assert!(s.get("drain_info").is_none(), "{s}");
        let state = m.state().await;
        assert_eq!(
            (
                state["activated_slaves"].clone(),
                state["deactivated_slaves"].clone()
            ),
            (1.into(), 1.into())
        );
        let metrics = m.metrics().await;
        assert_eq!(metrics["master/slaves_active"], 1.0);
        assert_eq!(metrics["master/slaves_inactive"], 1.0);
        let got = operator_agent(&m, &b, ct).await;
        assert!(
            !got.active && got.deactivated == Some(true) && got.drain_info.is_none(),
            "{got:?}"
        );
        assert!(!core_node_schedulable(&m, &b), "the core's node is drained");
        m.allocate().await;
        assert!(
            f.maybe_next_of(E::Offers).await.is_none(),
            "a deactivated agent is not offered"
        );
        // Deactivating again changes nothing; REACTIVATE_AGENT offers it again.
        change(&m, agent_call(call::Type::DeactivateAgent, &b), ct).await;
        change(&m, agent_call(call::Type::ReactivateAgent, &b), ct).await;
        let back = f.offers().await;
        assert_eq!(back[0].agent_id.value, b);
        assert_eq!(
            refused(&m, agent_call(call::Type::ReactivateAgent, &b), ct).await,
            "Agent is not deactivated"
        );
        assert_eq!(slave(&m, &b).await["active"], true);
        assert!(core_node_schedulable(&m, &b));

        // DRAIN_AGENT A, grace periods capped at 1.5 s: the task gets its
        // SIGTERM, ignores it, and is killed 1.5 s later (not 30).
        let asked = std::time::Instant::now();
        change(
            &m,
            drain_call(&a, Some(Duration::from_millis(1500)), false),
            ct,
        )
        .await;
        let s = drain_state(&m, &a, "DRAINING").await;
        assert_eq!(
            s["drain_info"]["config"]["max_grace_period"]["nanoseconds"],
            1_500_000_000i64
        );
        assert_eq!(s["drain_info"]["config"]["mark_gone"], false);
        assert!(
            s["estimated_drain_start_time_seconds"].as_f64().unwrap() > 1e9,
            "{s}"
        );
        assert_eq!(
            refused(&m, agent_call(call::Type::ReactivateAgent, &a), ct).await,
            "Agent is still in the DRAINING state"
        );
        let killed = loop {
            let s = f.update().await;
            f.acknowledge(&s).await;
            if s.state() != v1::TaskState::TaskKilling {
                break s;
            }
            assert_eq!(s.reason(), v1::task_status::Reason::AgentDraining);
        };
        assert_eq!(killed.state(), v1::TaskState::TaskKilled, "{killed:?}");
        assert_eq!(killed.reason(), v1::task_status::Reason::AgentDraining);
        let took = asked.elapsed();
        assert!(
            took >= Duration::from_millis(1400) && took < Duration::from_secs(20),
            "killed after {took:?}"
        );
        let s = drain_state(&m, &a, "DRAINED").await;
        assert_eq!(s["used_resources"]["cpus"], 0.0, "{s}");
        let got = operator_agent(&m, &a, ct).await;
        let info = got.drain_info.as_ref().expect("drain info");
        assert_eq!(info.state(), v1::DrainState::Drained);
        assert!(got.estimated_drain_start_time.is_some() && !got.active);
        // Drained, it is still out of service until reactivated.
        m.allocate().await;
        assert!(f.maybe_next_of(E::Offers).await.is_none());
        change(&m, agent_call(call::Type::ReactivateAgent, &a), ct).await;
        let back = f.offers().await;
        assert_eq!(back[0].agent_id.value, a);
        assert!(slave(&m, &a).await.get("drain_info").is_none());

        // Unknown agents get upstream's answers.
        assert_eq!(
            refused(&m, drain_call("nope", None, false), ct).await,
            "Unknown agent"
        );
        assert_eq!(
            refused(&m, agent_call(call::Type::DeactivateAgent, "nope"), ct).await,
            "Unknown agent"
        );
        let (status, body) = post(
            &m,
            "/api/v1",
            &agent_call(call::Type::MarkAgentGone, "nope"),
            ct,
        )
        .await;
        assert_eq!(
            (status, String::from_utf8_lossy(&body).as_ref()),
            (404, "Agent 'nope' not found")
        );
        let (status, body) = post(&m, "/api/v1", &op(call::Type::DrainAgent), ct).await;
        assert_eq!(
            (status, String::from_utf8_lossy(&body).as_ref()),
            (
                400,
                "Failed to validate master::Call: Expecting 'drain_agent' to be present"
            )
        );
        // TEARDOWN: nothing is left on either agent.
        teardown(&m, &f.id, ct).await;
        m.expect_empty().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_marked_gone_end_their_tasks_by_operator() {
    use unisched_mesos::v1::scheduler::event::Type as E;
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agents: 2,
            ..Setup::default()
        })
        .await;
        let mut aware_info = framework("aware", "web");
        aware_info
            .capabilities
            .push(v1::framework_info::Capability {
                r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
            });
        let mut aware = m.subscribe(aware_info, ct).await;
        let offers = offers_of_two_agents(&mut aware).await;
        let (a, b) = (
            offers[0].agent_id.value.clone(),
            offers[1].agent_id.value.clone(),
        );
        let t = task("a1", &offers[0], AGENT_A, Some("1000"));
        assert_eq!(aware.launch(&offers[0], vec![t]).await, 202);
        assert_eq!(aware.decline(&offers[1], Some(1000.0)).await, 202);
        let mut old = m.subscribe(framework("old", "batch"), ct).await;
        m.allocate().await;
        let offer = old.offers().await.remove(0);
        assert_eq!(offer.agent_id.value, b);
        assert_eq!(
            old.launch(&offer, vec![task("o1", &offer, AGENT_A, Some("1000"))])
                .await,
            202
        );
        until_running(&mut aware).await;
        until_running(&mut old).await;

        // A drain that marks A gone: the partition-aware framework's task
        // ends TASK_GONE_BY_OPERATOR, then A leaves and both frameworks hear.
        change(&m, drain_call(&a, None, true), ct).await;
        let s = aware.update().await;
        assert_eq!(
            (s.state(), s.reason()),
            (
                v1::TaskState::TaskGoneByOperator,
                v1::task_status::Reason::AgentDraining
            ),
            "{s:?}"
        );
        aware.acknowledge(&s).await;
        for f in [&mut aware, &mut old] {
            let failure = f.next_of(E::Failure).await.failure.unwrap();
            assert_eq!(failure.agent_id.unwrap().value, a);
        }
        let state = m.state().await;
        assert_eq!(state["slaves"].as_array().unwrap().len(), 1, "{state}");
        // A gone agent stays gone: marking it again is 200, draining it 400.
        change(&m, agent_call(call::Type::MarkAgentGone, &a), ct).await;
        assert_eq!(
            refused(&m, drain_call(&a, None, false), ct).await,
            "Unknown agent"
        );

        // MARK_AGENT_GONE B at once: the other framework's task is lost.
        change(&m, agent_call(call::Type::MarkAgentGone, &b), ct).await;
        let s = old.update().await;
        assert_eq!(
            (s.state(), s.reason(), s.message()),
            (
                v1::TaskState::TaskLost,
                v1::task_status::Reason::AgentRemoved,
                "Agent has been marked gone"
            ),
        );
        assert_eq!(s.source(), v1::task_status::Source::Master);
        old.acknowledge(&s).await;
        let failure = aware.next_of(E::Failure).await.failure.unwrap();
        assert_eq!(failure.agent_id.unwrap().value, b);
        assert!(m.state().await["slaves"].as_array().unwrap().is_empty());
        assert_eq!(m.metrics().await["master/slaves_active"], 0.0);

        // Reconciliation knows the agents are gone.
        let reconcile = |task: &str, agent: &str| sched_call::Reconcile {
            tasks: vec![sched_call::reconcile::Task {
                task_id: v1::TaskId {
                    value: task.to_string(),
                },
                agent_id: Some(v1::AgentId {
                    value: agent.to_string(),
                }),
            }],
        };
        for (f, t, agent, want) in [
            (&mut aware, "a1", &a, v1::TaskState::TaskGoneByOperator),
            (&mut old, "o1", &b, v1::TaskState::TaskLost),
        ] {
            let c = unisched_mesos::v1::scheduler::Call {
                r#type: Some(sched_call::Type::Reconcile as i32),
                reconcile: Some(reconcile(t, agent)),
                ..Default::default()
            };
            assert_eq!(f.call(c).await.0, 202);
            let s = f.update().await;
            assert_eq!(
                (s.state(), s.message()),
                (want, "Reconciliation: Task is gone"),
                "{s:?}"
            );
        }
        teardown(&m, &aware.id, ct).await;
        teardown(&m, &old.id, ct).await;
        m.expect_empty().await;
    }
}

/// Records the levels the master sets.
#[derive(Default)]
struct Levels(std::sync::Mutex<Vec<u32>>);

impl unisched_mesos::master::logging::LogVerbosity for Levels {
    fn set_level(&self, level: u32) -> Result<(), String> {
        self.0.lock().unwrap().push(level);
        Ok(())
    }
}

fn set_level_call(level: u32, secs: i64) -> Call {
    Call {
        set_logging_level: Some(call::SetLoggingLevel {
            level,
            duration: v1::DurationInfo {
                nanoseconds: secs * 1_000_000_000,
            },
        }),
        ..op(call::Type::SetLoggingLevel)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_levels_are_set_for_a_while_then_revert() {
    for ct in ENCODINGS {
        let levels = std::sync::Arc::new(Levels::default());
        let m = Master::start(Setup {
            logging: Some(unisched_mesos::master::logging::LogControl(levels.clone())),
            ..Setup::default()
        })
        .await;
        let level = |r: Response| r.get_logging_level.unwrap().level;
        assert_eq!(level(ask(&m, op(call::Type::GetLoggingLevel), ct).await), 0);
        change(&m, set_level_call(2, 10), ct).await;
        assert_eq!(level(ask(&m, op(call::Type::GetLoggingLevel), ct).await), 2);
        // A second call before the first's time is up pushes the revert on.
        m.advance(Duration::from_secs(5)).await;
        change(&m, set_level_call(1, 10), ct).await;
        m.advance(Duration::from_secs(6)).await;
        assert_eq!(level(ask(&m, op(call::Type::GetLoggingLevel), ct).await), 1);
        assert_eq!(*levels.0.lock().unwrap(), [2, 1]);
        // Its own time up, the level goes back to the process's.
        m.advance(Duration::from_secs(5)).await;
        assert_eq!(level(ask(&m, op(call::Type::GetLoggingLevel), ct).await), 0);
        assert_eq!(*levels.0.lock().unwrap(), [2, 1, 0]);
        let (status, body) = post(&m, "/api/v1", &op(call::Type::SetLoggingLevel), ct).await;
        assert_eq!(
            (status, String::from_utf8_lossy(&body).as_ref()),
            (
                400,
                "Failed to validate master::Call: Expecting 'set_logging_level' to be present"
            )
        );

        // A master whose process gives it no control answers 501.
        let m = Master::start(Setup::default()).await;
        for c in [op(call::Type::GetLoggingLevel), set_level_call(1, 1)] {
            let (status, _) = post(&m, "/api/v1", &c, ct).await;
            assert_eq!(status, 501, "{:?}", c.r#type());
        }
    }
}
