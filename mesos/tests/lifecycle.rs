//! The life of frameworks, agents, offers and tasks beyond the acceptance
//! scenarios: agents that leave, offer timeouts, quota limits and
//! guarantees from the queue configuration, MULTI_ROLE and UPDATE_FRAMEWORK,
//! heartbeats, kills, task groups, metrics, and that nothing is left behind
//! after TEARDOWN or a failover timeout.

mod common;

use std::time::Duration;

use common::*;
use unisched_mesos::codec::ContentType;
use unisched_mesos::master::Input;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call, event};

fn partition_aware(mut info: v1::FrameworkInfo) -> v1::FrameworkInfo {
    info.capabilities.push(v1::framework_info::Capability {
        r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
    });
    info
}

fn multi_role(name: &str, roles: &[&str]) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "tester".to_string(),
        name: name.to_string(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        capabilities: vec![v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::MultiRole as i32),
        }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_leaves_loses_its_tasks_and_rescinds_its_offers() {
    for (aware, lost) in [
        (false, v1::TaskState::TaskLost),
        (true, v1::TaskState::TaskGone),
    ] {
        let m = Master::start(Setup {
            agents: 2,
            ..Setup::default()
        })
        .await;
        let info = framework("f", "r1");
        let info = if aware { partition_aware(info) } else { info };
        let mut f = m.subscribe(info, ContentType::Json).await;
        let mut offers = f.offers().await;
        if offers.len() < 2 {
            offers.extend(f.offers().await);
        }
        let (run_on, keep) = (offers[0].clone(), offers[1].clone());
        assert_eq!(
            f.launch(&run_on, vec![task("t", &run_on, "cpus:1;mem:64", None)])
                .await,
            202
        );
        let running = f.update().await;
        assert_eq!(running.state(), v1::TaskState::TaskRunning);
        assert_eq!(f.acknowledge(&running).await, 202);
        // The other agent's offer stands; then that agent goes.
        m.cluster
            .master
            .send(Input::RemoveAgent(keep.agent_id.value.clone()));
        let rescind = f.next_of(event::Type::Rescind).await;
        assert_eq!(rescind.rescind.unwrap().offer_id, keep.id);
        let failure = f.next_of(event::Type::Failure).await.failure.unwrap();
        assert_eq!(failure.agent_id.unwrap(), keep.agent_id);
        // The agent running the task goes: the task is lost (gone).
        m.cluster
            .master
            .send(Input::RemoveAgent(run_on.agent_id.value.clone()));
        let update = f.update().await;
        assert_eq!(update.state(), lost);
        assert_eq!(update.reason(), v1::task_status::Reason::AgentRemoved);
        assert!(update.uuid.is_some(), "sent reliably");
        assert_eq!(f.acknowledge(&update).await, 202);
        let state = m.state().await;
        assert_eq!(state["slaves"].as_array().unwrap().len(), 0, "{state}");
        assert_eq!(state["frameworks"][0]["tasks"].as_array().unwrap().len(), 0);
        m.scheduler.settle();
        let snap = m.scheduler.snapshot("mesos").unwrap();
        assert!(snap.nodes.is_empty() && snap.allocations.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_time_out_with_a_rescind_and_come_back_unfiltered() {
    let m = Master::start(Setup {
        offer_timeout: Some(Duration::from_secs(10)),
        ..Setup::default()
    })
    .await;
    let mut f = m
        .subscribe(framework("f", "r1"), ContentType::Protobuf)
        .await;
    let offer = f.offers().await.remove(0);
    m.advance(Duration::from_secs(9)).await;
    assert!(f.maybe_next_of(event::Type::Rescind).await.is_none());
    m.advance(Duration::from_secs(1)).await;
    let rescind = f.next_of(event::Type::Rescind).await.rescind.unwrap();
    assert_eq!(rescind.offer_id, offer.id);
    // No filter: the agent is offered again in the next run (the one that
    // follows the rescind at once, or the one after it).
    m.allocate().await;
    let again = f.offers().await.remove(0);
    assert_eq!(again.agent_id, offer.agent_id);
    assert_ne!(again.id, offer.id);
    let metrics = m.metrics().await;
    assert_eq!(metrics["master/offers_timed_out"], 1.0, "{metrics}");
}

const QUOTA: &str = "
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: capped
            resources:
              max: {vcore: 1, memory: 256Mi}
          - name: vip
            resources:
              guaranteed: {vcore: 2}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_limits_trim_offers() {
    let m = Master::start(Setup {
        agents: 2,
        config: Some(QUOTA.to_string()),
        ..Setup::default()
    })
    .await;
    let mut capped = m
        .subscribe(framework("capped", "capped"), ContentType::Json)
        .await;
    let offers = capped.offers().await;
    assert_eq!(
        offers.len(),
        1,
        "the limit is used up by one offer: {offers:?}"
    );
    assert_eq!(scalar(&offers[0], "cpus"), 1.0);
    assert_eq!(scalar(&offers[0], "mem"), 256.0);
    // A second framework in the limited role gets nothing while the first holds the limit.
    let mut second = m
        .subscribe(framework("second", "capped"), ContentType::Json)
        .await;
    m.allocate().await;
    assert!(second.maybe_next_of(event::Type::Offers).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_under_its_guarantee_is_offered_first() {
    let m = Master::start(Setup {
        config: Some(QUOTA.to_string()),
        ..Setup::default()
    })
    .await;
    // With shares equal (nothing held), the fair order alone would pick
    // `other` (fewer allocations, then name); `vip` is under its guarantee.
    let mut other = m
        .subscribe(framework("other", "other"), ContentType::Json)
        .await;
    let held = other.offers().await;
    let mut vip = m
        .subscribe(framework("vip", "vip"), ContentType::Json)
        .await;
    assert_eq!(other.decline(&held[0], Some(0.0)).await, 202);
    m.allocate().await;
    let got = vip.offers().await;
    assert_eq!(got[0].agent_id, held[0].agent_id);
    assert!(other.maybe_next_of(event::Type::Offers).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_role_frameworks_change_roles_with_update_framework() {
    let m = Master::start(Setup {
        agents: 2,
        ..Setup::default()
    })
    .await;
    let mut f = m
        .subscribe(multi_role("mr", &["a"]), ContentType::Protobuf)
        .await;
    let mut offers = f.offers().await;
    if offers.len() < 2 {
        offers.extend(f.offers().await);
    }
    for o in &offers {
        assert_eq!(o.allocation_info.as_ref().unwrap().role(), "a");
        for r in &o.resources {
            assert_eq!(r.allocation_info.as_ref().unwrap().role(), "a");
        }
    }
    // Role `a` leaves, `b` comes: `a`'s offers are rescinded, `b` is offered.
    let mut info = multi_role("mr", &["b"]);
    info.id = Some(v1::FrameworkId {
        value: f.id.clone(),
    });
    let (status, body) = f
        .call(Call {
            r#type: Some(call::Type::UpdateFramework as i32),
            update_framework: Some(call::UpdateFramework {
                framework_info: info,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await;
    assert_eq!(status, 200, "{body}");
    let mut rescinded = 0;
    let mut new_offers = Vec::new();
    while rescinded < 2 || new_offers.len() < 2 {
        let e = f.next().await;
        match e.r#type() {
            event::Type::Rescind => rescinded += 1,
            event::Type::Offers => new_offers.extend(e.offers.unwrap().offers),
            _ => {}
        }
    }
    for o in &new_offers {
        assert_eq!(o.allocation_info.as_ref().unwrap().role(), "b");
    }
    // A MULTI_ROLE framework may not set the legacy role; bad updates are 400.
    #[allow(deprecated)]
    let bad = v1::FrameworkInfo {
        role: Some("x".to_string()),
        id: Some(v1::FrameworkId {
            value: f.id.clone(),
        }),
        ..multi_role("mr", &["b"])
    };
    let (status, body) = f
        .call(Call {
            r#type: Some(call::Type::UpdateFramework as i32),
            update_framework: Some(call::UpdateFramework {
                framework_info: bad,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await;
    assert_eq!(status, 400, "{body}");
    let state = m.state().await;
    assert_eq!(state["frameworks"][0]["roles"], serde_json::json!(["b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_come_every_interval() {
    let m = Master::start(Setup::default()).await;
    let mut f = m.subscribe(framework("f", "r1"), ContentType::Json).await;
    for _ in 0..2 {
        m.advance(Duration::from_secs(15)).await;
        f.heartbeat().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_a_running_task_and_frees_its_resources_at_the_terminal_update() {
    let m = Master::start(Setup::default()).await;
    let mut f = m.subscribe(framework("f", "r1"), ContentType::Json).await;
    let offer = f.offers().await.remove(0);
    assert_eq!(
        f.launch(&offer, vec![task("t", &offer, "cpus:2;mem:1024", None)])
            .await,
        202
    );
    let running = f.update().await;
    assert_eq!(running.state(), v1::TaskState::TaskRunning);
    assert_eq!(f.acknowledge(&running).await, 202);
    let metrics = m.metrics().await;
    assert_eq!(metrics["master/tasks_running"], 1.0, "{metrics}");
    assert_eq!(metrics["master/cpus_used"], 2.0, "{metrics}");
    let (status, _) = f
        .call(Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: running.task_id.clone(),
                agent_id: running.agent_id.clone(),
                kill_policy: None,
            }),
            ..Default::default()
        })
        .await;
    assert_eq!(status, 202);
    let killed = f.update().await;
    assert_eq!(killed.state(), v1::TaskState::TaskKilled);
    assert_eq!(f.acknowledge(&killed).await, 202);
    m.allocate().await;
    let back = f.offers().await.remove(0);
    assert_eq!(scalar(&back, "cpus"), 2.0, "the task's resources came back");
    let metrics = m.metrics().await;
    assert_eq!(metrics["master/tasks_killed"], 1.0, "{metrics}");
    assert_eq!(metrics["master/tasks_running"], 0.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_group_launches_atomically_under_one_executor() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        let executor = v1::ExecutorInfo {
            r#type: Some(v1::executor_info::Type::Default as i32),
            executor_id: v1::ExecutorId {
                value: "group-executor".to_string(),
            },
            framework_id: Some(v1::FrameworkId {
                value: f.id.clone(),
            }),
            resources: resources("cpus:0.1;mem:32"),
            ..Default::default()
        };
        let tasks = vec![
            task_without_command("a", &offer, "cpus:0.5;mem:64"),
            task_without_command("b", &offer, "cpus:0.5;mem:64"),
        ];
        let group = v1::offer::Operation {
            r#type: Some(v1::offer::operation::Type::LaunchGroup as i32),
            launch_group: Some(v1::offer::operation::LaunchGroup {
                executor: Box::new(executor.clone()),
                task_group: v1::TaskGroupInfo { tasks },
            }),
            ..Default::default()
        };
        assert_eq!(f.accept(&[&offer], vec![group], Some(0.0)).await, 202);
        let mut running = Vec::new();
        while running.len() < 2 {
            let s = f.update().await;
            if s.state() == v1::TaskState::TaskRunning {
                assert_eq!(s.executor_id.as_ref().unwrap().value, "group-executor");
                running.push(s.task_id.value.clone());
            }
            f.acknowledge(&s).await;
        }
        running.sort();
        assert_eq!(running, ["a", "b"]);
        // A group that does not fit fails whole: no task of it runs.
        m.allocate().await;
        let rest = f.offers().await.remove(0);
        let too_big = v1::offer::Operation {
            r#type: Some(v1::offer::operation::Type::LaunchGroup as i32),
            launch_group: Some(v1::offer::operation::LaunchGroup {
                executor: Box::new(executor),
                task_group: v1::TaskGroupInfo {
                    tasks: vec![
                        task_without_command("c", &rest, "cpus:0.5;mem:64"),
                        task_without_command("d", &rest, "cpus:5;mem:64"),
                    ],
                },
            }),
            ..Default::default()
        };
        assert_eq!(f.accept(&[&rest], vec![too_big], None).await, 202);
        for _ in 0..2 {
            let s = f.update().await;
            assert_eq!(s.state(), v1::TaskState::TaskError, "{s:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_left_after_teardown_or_a_failover_timeout() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agents: 2,
            ..Setup::default()
        })
        .await;
        // Torn down with a running task and an outstanding offer.
        let mut a = m.subscribe(framework("a", "r1"), ct).await;
        let offer = a.offers().await.remove(0);
        assert_eq!(
            a.launch(&offer, vec![task("t", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        assert_eq!(a.update().await.state(), v1::TaskState::TaskRunning);
        assert_eq!(a.simple(call::Type::Teardown).await, 202);
        assert!(a.closed().await, "TEARDOWN ends the stream");
        m.expect_empty().await;
        // As in Mesos, its task ended killed by the master (the last of
        // its statuses; /state shows a status's state and time only).
        let state = m.state().await;
        let ended = &state["completed_frameworks"][0]["completed_tasks"][0];
        assert_eq!(ended["state"], "TASK_KILLED", "{ended}");
        let statuses = ended["statuses"].as_array().unwrap();
        assert_eq!(statuses.len(), 2, "{ended}");
        assert_eq!(statuses[0]["state"], "TASK_RUNNING", "{ended}");
        assert_eq!(statuses[1]["state"], "TASK_KILLED", "{ended}");
        // Gone for good after its failover timeout, with a task running.
        let mut info = framework("b", "r2");
        info.failover_timeout = Some(5.0);
        let mut b = m.subscribe(info, ct).await;
        let offer = b.offers().await.remove(0);
        assert_eq!(
            b.launch(&offer, vec![task("t", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        assert_eq!(b.update().await.state(), v1::TaskState::TaskRunning);
        b.disconnect();
        assert!(
            eventually_disconnected(&m).await,
            "the master sees the stream go"
        );
        m.advance(Duration::from_secs(6)).await;
        let removed = eventually_removed(&m).await;
        assert!(
            removed,
            "the framework is removed after its failover timeout"
        );
        m.expect_empty().await;
        let state = m.state().await;
        let ended = &state["completed_frameworks"][1]["completed_tasks"][0];
        assert_eq!(ended["state"], "TASK_KILLED", "{ended}");
        let metrics = m.metrics().await;
        assert_eq!(metrics["master/frameworks_removed"], 2.0, "{metrics}");
        assert_eq!(metrics["master/tasks_killed"], 2.0, "{metrics}");
    }
}

async fn eventually_disconnected(m: &Master) -> bool {
    for _ in 0..200 {
        let state = m.state().await;
        if state["frameworks"][0]["connected"] == false {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn eventually_removed(m: &Master) -> bool {
    for _ in 0..200 {
        let state = m.state().await;
        if state["frameworks"].as_array().unwrap().is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_carry_mesos_names() {
    let m = Master::start(Setup::default()).await;
    let mut f = m.subscribe(framework("f", "r1"), ContentType::Json).await;
    let _ = f.offers().await;
    let metrics = m.metrics().await;
    for name in [
        "master/frameworks_active",
        "master/frameworks_inactive",
        "master/slaves_active",
        "master/tasks_running",
        "master/tasks_finished",
        "master/outstanding_offers",
        "master/offers_sent",
        "master/offers_declined",
        "master/cpus_total",
        "master/mem_used",
        "master/uptime_secs",
        "master/elected",
        "allocator/mesos/allocation_runs",
        "allocator/mesos/allocation_run_ms",
    ] {
        assert!(metrics.get(name).is_some(), "{name} missing: {metrics}");
    }
    assert_eq!(metrics["master/frameworks_active"], 1.0);
    assert_eq!(metrics["master/slaves_active"], 1.0);
    assert_eq!(metrics["master/outstanding_offers"], 1.0);
    let health = m
        .http
        .get(format!("{}/health", m.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

/// The master's read-only endpoints beside `/state`, as Mesos serves them:
/// `/frameworks`, `/slaves`, `/tasks` (selection, order, paging), `/flags`
/// and `/version`, also under `/master/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_endpoints_select_order_and_page_as_mesos() {
    let m = Master::start(Setup {
        agents: 2,
        ..Setup::default()
    })
    .await;
    let get = |path: &str| {
        let url = format!("{}{path}", m.url);
        let http = m.http.clone();
        async move {
            let r = http.get(&url).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200, "{url}");
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let mut f = m.subscribe(framework("f", "r1"), ContentType::Json).await;
    let mut offers = f.offers().await;
    if offers.len() < 2 {
        offers.extend(f.offers().await);
    }
    // Three tasks launched a second apart: their first statuses' times
    // order them.
    let mut launched = Vec::new();
    for (i, offer) in offers.iter().chain(std::iter::once(&offers[0])).enumerate() {
        let id = format!("t{i}");
        if i == 2 {
            f.call(Call {
                r#type: Some(call::Type::Revive as i32),
                ..Default::default()
            })
            .await;
            let again = f.offers().await.remove(0);
            assert_eq!(
                f.launch(&again, vec![task(&id, &again, "cpus:0.5;mem:64", None)])
                    .await,
                202
            );
        } else {
            assert_eq!(
                f.launch(offer, vec![task(&id, offer, "cpus:0.5;mem:64", None)])
                    .await,
                202
            );
        }
        let running = f.update().await;
        assert_eq!(running.state(), v1::TaskState::TaskRunning);
        launched.push(id);
        m.advance(Duration::from_secs(1)).await;
    }
    let framework_id = f.id.clone();
    for prefix in ["", "/master"] {
        let all = get(&format!("{prefix}/frameworks")).await;
        assert_eq!(all["frameworks"][0]["id"], framework_id.as_str());
        assert_eq!(all["unregistered_frameworks"], serde_json::json!([]));
        let none = get(&format!("{prefix}/frameworks?framework_id=nobody")).await;
        assert!(none["frameworks"].as_array().unwrap().is_empty());
        let slaves = get(&format!("{prefix}/slaves")).await;
        let ids: Vec<&str> = slaves["slaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 2);
        let one = get(&format!("{prefix}/slaves?slave_id={}", ids[1])).await;
        assert_eq!(one["slaves"].as_array().unwrap().len(), 1);
        assert_eq!(one["slaves"][0]["id"], ids[1]);
        let ids_of = |v: &serde_json::Value| -> Vec<String> {
            v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_string())
                .collect()
        };
        // Newest first by default; oldest first with order=asc.
        let tasks = get(&format!("{prefix}/tasks")).await;
        assert_eq!(ids_of(&tasks), ["t2", "t1", "t0"]);
        let asc = get(&format!("{prefix}/tasks?order=asc")).await;
        assert_eq!(ids_of(&asc), ["t0", "t1", "t2"]);
        let page = get(&format!("{prefix}/tasks?order=asc&limit=1&offset=1")).await;
        assert_eq!(ids_of(&page), ["t1"]);
        let bad = get(&format!("{prefix}/tasks?limit=many&offset=-1")).await;
        assert_eq!(ids_of(&bad).len(), 3, "bad numbers are taken as absent");
        let one = get(&format!(
            "{prefix}/tasks?task_id=t0&framework_id={framework_id}"
        ))
        .await;
        assert_eq!(ids_of(&one), ["t0"]);
        assert_eq!(tasks["tasks"][0]["state"], "TASK_RUNNING");
        let flags = get(&format!("{prefix}/flags")).await;
        assert_eq!(flags["flags"]["allocation_interval"], "1secs");
    }
    let version = get("/version").await;
    assert_eq!(version["version"], unisched_mesos::MESOS_VERSION);
    // Ended tasks are listed too, after their framework is gone.
    assert_eq!(f.simple(call::Type::Teardown).await, 202);
    m.allocate().await;
    let tasks = get("/tasks").await;
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 3, "{tasks}");
    assert!(
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "TASK_KILLED"),
        "{tasks}"
    );
}
