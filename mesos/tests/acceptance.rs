//! Acceptance scenarios 1–15 of spec/mesos.md §6 over real HTTP on an
//! ephemeral port, each in both encodings (JSON and protobuf).

mod common;

use std::time::Duration;

use common::*;
use unisched_mesos::codec::ContentType;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call, event};

async fn each_encoding<F, Fut>(f: F)
where
    F: Fn(ContentType) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for ct in ENCODINGS {
        f(ct).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s01_subscribe_assigns_an_id_and_a_wrong_stream_id_is_refused() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let f = m.subscribe(framework("one", "r1"), ct).await;
        assert!(f.id.starts_with(&m.cluster.master.info().id), "{}", f.id);
        let (status, body) = f
            .call_with_stream(
                Call {
                    framework_id: Some(v1::FrameworkId {
                        value: f.id.clone(),
                    }),
                    r#type: Some(call::Type::Revive as i32),
                    ..Default::default()
                },
                Some("not-the-stream"),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("didn't match the stream ID"), "{body}");
        let (status, body) = f
            .call_with_stream(
                Call {
                    framework_id: Some(v1::FrameworkId {
                        value: f.id.clone(),
                    }),
                    r#type: Some(call::Type::Revive as i32),
                    ..Default::default()
                },
                None,
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(f.simple(call::Type::Revive).await, 202);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s02_resubscribing_fails_over_and_keeps_tasks() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut old = m.subscribe(framework("fo", "r1"), ct).await;
        let offer = old.offers().await.remove(0);
        assert_eq!(
            old.launch(&offer, vec![task("t1", &offer, "cpus:1;mem:128", None)])
                .await,
            202
        );
        let running = old.update().await;
        let mut info = framework("fo", "r1");
        info.id = Some(v1::FrameworkId {
            value: old.id.clone(),
        });
        let mut new = m.subscribe(info, ct).await;
        assert_eq!(new.id, old.id);
        let e = old.next_of(event::Type::Error).await;
        assert_eq!(e.error.unwrap().message, "Framework failed over");
        assert!(old.closed().await, "the old stream closes");
        // The new stream gets offers (the old one was discarded and offered again),
        // and the task is untouched.
        let offers = new.offers().await;
        assert!(
            (scalar(&offers[0], "cpus") - 1.0).abs() < 1e-9,
            "{offers:?}"
        );
        let state = m.state().await;
        let tasks = &state["frameworks"][0]["tasks"];
        assert_eq!(tasks.as_array().unwrap().len(), 1, "{state}");
        assert_eq!(tasks[0]["state"], running.state().as_str_name());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s03_one_offer_of_the_whole_agent_and_nothing_for_a_second_framework() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f1 = m.subscribe(framework("f1", "r1"), ct).await;
        let offers = f1.offers().await;
        assert_eq!(offers.len(), 1);
        assert_eq!(scalar(&offers[0], "cpus"), 2.0);
        assert_eq!(scalar(&offers[0], "mem"), 1024.0);
        // As in Mesos, the offer names where its agent is reached: here the
        // master's address, which serves the agent's endpoints under
        // /slave(1) (the pid /state shows for it).
        let url = offers[0].url.as_ref().expect("the agent's URL");
        assert_eq!(url.scheme, "http");
        assert_eq!(url.address.ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(url.address.port, i32::from(m.cluster.addr.port()));
        assert_eq!(url.path.as_deref(), Some("/slave(1)"));
        assert_eq!(url.address.hostname.as_deref(), Some(&*offers[0].hostname));
        let mut f2 = m.subscribe(framework("f2", "r2"), ct).await;
        m.allocate().await;
        assert!(f2.maybe_next().await.is_none(), "nothing of A for f2");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_a_declined_agent_goes_to_the_other_framework_at_the_next_run() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f1 = m.subscribe(framework("f1", "r1"), ct).await;
        let offer = f1.offers().await.remove(0);
        let mut f2 = m.subscribe(framework("f2", "r2"), ct).await;
        assert_eq!(f1.decline(&offer, Some(5.0)).await, 202);
        m.allocate().await;
        let offers = f2.offers().await;
        assert_eq!(offers[0].agent_id, offer.agent_id);
        assert_eq!(scalar(&offers[0], "cpus"), 2.0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s05_a_filter_holds_for_its_time_and_revive_ends_it() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        assert_eq!(f.decline(&offer, Some(5.0)).await, 202);
        for _ in 0..4 {
            m.allocate().await;
        }
        assert!(f.maybe_next().await.is_none(), "filtered for 5 s");
        // The filter counts from the master's decline (OfferChange::Filter
        // `since`), not from when the core gets to it: at 5 s exactly.
        m.allocate().await;
        let again = f.offers().await.remove(0);
        assert_eq!(again.agent_id, offer.agent_id);
        assert_ne!(again.id, offer.id, "offer ids are not reused");
        assert_eq!(f.decline(&again, Some(5.0)).await, 202);
        m.allocate().await;
        assert!(f.maybe_next().await.is_none());
        assert_eq!(f.simple(call::Type::Revive).await, 202);
        assert_eq!(
            f.offers().await[0].agent_id,
            offer.agent_id,
            "REVIVE offers at once"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s06_launch_runs_the_task_and_declines_the_rest_with_the_filter() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let mut other = m.subscribe(framework("other", "r2"), ct).await;
        let offer = f.offers().await.remove(0);
        let t = task("t1", &offer, "cpus:1;mem:128", None);
        assert_eq!(
            f.accept(&[&offer], vec![launch(vec![t])], Some(3600.0))
                .await,
            202
        );
        let mut states = Vec::new();
        loop {
            let s = f.update().await;
            assert_eq!(f.acknowledge(&s).await, 202);
            states.push(s.state());
            if s.state() == v1::TaskState::TaskRunning {
                break;
            }
        }
        assert!(!states.contains(&v1::TaskState::TaskStaging), "{states:?}");
        // The remainder (cpus 1, mem 896) is filtered for f: it goes to `other`.
        m.allocate().await;
        let rest = other.offers().await.remove(0);
        assert_eq!(scalar(&rest, "cpus"), 1.0);
        assert_eq!(scalar(&rest, "mem"), 896.0);
        assert!(f.maybe_next().await.is_none());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s07_an_accepted_offer_cannot_be_used_again() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        assert_eq!(
            f.launch(&offer, vec![task("t1", &offer, "cpus:1;mem:128", None)])
                .await,
            202
        );
        assert_eq!(
            f.launch(&offer, vec![task("t2", &offer, "cpus:1;mem:128", None)])
                .await,
            202
        );
        let lost = loop {
            let s = f.update().await;
            if s.task_id.value == "t2" {
                break s;
            }
        };
        assert_eq!(lost.state(), v1::TaskState::TaskLost);
        assert_eq!(lost.reason(), v1::task_status::Reason::InvalidOffers);
        assert!(lost.uuid.is_none());
        // Partition aware: TASK_DROPPED.
        let mut info = framework("pa", "r2");
        info.capabilities.push(v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
        });
        let pa = m.subscribe(info, ct).await;
        assert_eq!(
            pa.launch(&offer, vec![task("t3", &offer, "cpus:1", None)])
                .await,
            202
        );
        let mut pa = pa;
        let s = pa.update().await;
        assert_eq!(s.state(), v1::TaskState::TaskDropped);
        assert_eq!(s.reason(), v1::task_status::Reason::InvalidOffers);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s08_offers_of_two_agents_in_one_accept_are_invalid() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup {
            agents: 2,
            ..Setup::default()
        })
        .await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let mut offers = f.offers().await;
        if offers.len() < 2 {
            offers.extend(f.offers().await);
        }
        assert_eq!(offers.len(), 2);
        let t = task("t1", &offers[0], "cpus:1", None);
        assert_eq!(
            f.accept(
                &[&offers[0], &offers[1]],
                vec![launch(vec![t])],
                Some(3600.0)
            )
            .await,
            202
        );
        let s = f.update().await;
        assert_eq!(s.state(), v1::TaskState::TaskLost);
        assert_eq!(s.reason(), v1::task_status::Reason::InvalidOffers);
        // Both come back unfiltered at the next run.
        m.allocate().await;
        let mut back = f.offers().await;
        if back.len() < 2 {
            back.extend(f.offers().await);
        }
        assert_eq!(back.len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s09_too_large_or_duplicate_tasks_get_task_error() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        let big = task("big", &offer, "cpus:3;mem:128", None);
        let ok = task("ok", &offer, "cpus:1;mem:128", None);
        let dup = task("ok", &offer, "cpus:0.5;mem:64", None);
        assert_eq!(f.launch(&offer, vec![big, ok, dup]).await, 202);
        let mut errors = Vec::new();
        let mut running = false;
        while errors.len() < 2 || !running {
            let s = f.update().await;
            match s.state() {
                v1::TaskState::TaskError => {
                    assert_eq!(s.reason(), v1::task_status::Reason::TaskInvalid);
                    errors.push(s.message.clone().unwrap_or_default());
                }
                v1::TaskState::TaskRunning => running = true,
                _ => {}
            }
            if s.uuid.is_some() {
                f.acknowledge(&s).await;
            }
        }
        assert!(errors[0].contains("more than available"), "{errors:?}");
        assert!(errors[1].contains("duplicate ID"), "{errors:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_killing_an_unknown_task_reconciles_it() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let kill = |id: &str| Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: v1::TaskId {
                    value: id.to_string(),
                },
                agent_id: None,
                kill_policy: None,
            }),
            ..Default::default()
        };
        assert_eq!(f.call(kill("nope")).await.0, 202);
        let s = f.update().await;
        assert_eq!(s.state(), v1::TaskState::TaskLost);
        assert_eq!(s.reason(), v1::task_status::Reason::Reconciliation);
        let mut info = framework("pa", "r2");
        info.capabilities.push(v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
        });
        let mut pa = m.subscribe(info, ct).await;
        assert_eq!(pa.call(kill("nope")).await.0, 202);
        assert_eq!(pa.update().await.state(), v1::TaskState::TaskUnknown);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_unacknowledged_updates_are_retried_in_order() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        // Finishes 50 ms (real time) after it starts running.
        let t = task("t1", &offer, "cpus:1;mem:128", Some("0.05"));
        assert_eq!(f.launch(&offer, vec![t]).await, 202);
        let first = f.update().await;
        assert!(first.uuid.is_some());
        assert_eq!(first.state(), v1::TaskState::TaskRunning);
        // The terminal update waits behind the unacknowledged one (its
        // resources come back at once: offers may come meanwhile).
        assert!(f.maybe_next_of(event::Type::Update).await.is_none());
        // After 10 s the first is sent again, with the same uuid; then after 20 s more.
        m.advance(Duration::from_secs(10)).await;
        let again = f.update().await;
        assert_eq!(again.uuid, first.uuid, "redelivered with the same uuid");
        assert_eq!(again.state(), first.state());
        m.advance(Duration::from_secs(10)).await;
        let e = f.maybe_next_of(event::Type::Update).await;
        assert!(e.is_none(), "the interval doubled: {e:?}");
        m.advance(Duration::from_secs(10)).await;
        assert_eq!(f.update().await.uuid, first.uuid);
        assert_eq!(f.acknowledge(&first).await, 202);
        let next = f.update().await;
        assert_eq!(next.state(), v1::TaskState::TaskFinished);
        assert_ne!(next.uuid, first.uuid);
        assert_eq!(f.acknowledge(&next).await, 202);
        let state = m.state().await;
        assert_eq!(
            state["frameworks"][0]["tasks"].as_array().unwrap().len(),
            0,
            "{state}"
        );
        assert_eq!(
            state["frameworks"][0]["completed_tasks"][0]["state"],
            "TASK_FINISHED"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_implicit_reconciliation_reports_every_task() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut f = m.subscribe(framework("f", "r1"), ct).await;
        let offer = f.offers().await.remove(0);
        let tasks = vec![
            task("a", &offer, "cpus:0.5;mem:64", None),
            task("b", &offer, "cpus:0.5;mem:64", None),
        ];
        assert_eq!(f.launch(&offer, tasks).await, 202);
        let mut acked = 0;
        while acked < 2 {
            let s = f.update().await;
            f.acknowledge(&s).await;
            if s.state() == v1::TaskState::TaskRunning {
                acked += 1;
            }
        }
        let (status, _) = f
            .call(Call {
                r#type: Some(call::Type::Reconcile as i32),
                reconcile: Some(call::Reconcile { tasks: vec![] }),
                ..Default::default()
            })
            .await;
        assert_eq!(status, 202);
        let mut seen = Vec::new();
        for _ in 0..2 {
            let s = f.update().await;
            assert_eq!(s.reason(), v1::task_status::Reason::Reconciliation);
            assert!(s.uuid.is_none());
            assert_eq!(s.state(), v1::TaskState::TaskRunning);
            seen.push(s.task_id.value);
        }
        seen.sort();
        assert_eq!(seen, ["a", "b"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_suppress_and_revive_per_role() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup {
            agents: 2,
            ..Setup::default()
        })
        .await;
        let mut info = v1::FrameworkInfo {
            user: "tester".to_string(),
            name: "multi".to_string(),
            ..Default::default()
        };
        info.roles = vec!["r1".to_string(), "r2".to_string()];
        info.capabilities.push(v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::MultiRole as i32),
        });
        let mut f = m
            .subscribe_with(
                call::Subscribe {
                    framework_info: info,
                    suppressed_roles: vec!["r1".to_string()],
                    ..Default::default()
                },
                ct,
            )
            .await;
        let mut offers = f.offers().await;
        if offers.len() < 2 {
            offers.extend(f.offers().await);
        }
        for o in &offers {
            assert_eq!(
                o.allocation_info.as_ref().unwrap().role.as_deref(),
                Some("r2")
            );
        }
        for o in &offers {
            f.decline(o, Some(3600.0)).await;
        }
        let (status, _) = f
            .call(Call {
                r#type: Some(call::Type::Revive as i32),
                revive: Some(call::Revive {
                    roles: vec!["r1".to_string()],
                }),
                ..Default::default()
            })
            .await;
        assert_eq!(status, 202);
        let again = f.offers().await;
        assert!(
            again
                .iter()
                .all(|o| o.allocation_info.as_ref().unwrap().role.as_deref() == Some("r1"))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_weights_share_agents_two_to_one() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup {
            agents: 0,
            weights: "r1=2,r2=1",
            ..Setup::default()
        })
        .await;
        let mut f1 = m.subscribe(framework("f1", "r1"), ct).await;
        let mut f2 = m.subscribe(framework("f2", "r2"), ct).await;
        for i in 0..3 {
            m.cluster
                .master
                .add_agent(unisched_mesos::master::AgentSpec {
                    hostname: format!("h{i}"),
                    resources: unisched_mesos::resources::Resources::parse(AGENT_A).unwrap(),
                    occupied: Default::default(),
                    attributes: Vec::new(),
                    backend: Box::new(|_: &str| {
                        std::sync::Arc::new(NullAgent)
                            as std::sync::Arc<dyn unisched_mesos::agent::AgentBackend>
                    }),
                })
                .await;
        }
        let mut n1 = 0;
        let mut n2 = 0;
        while n1 + n2 < 3 {
            tokio::select! {
                e = f1.next_of(event::Type::Offers) => n1 += e.offers.unwrap().offers.len(),
                e = f2.next_of(event::Type::Offers) => n2 += e.offers.unwrap().offers.len(),
            }
        }
        assert_eq!((n1, n2), (2, 1));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s15_failover_timeout_keeps_or_ends_tasks() {
    each_encoding(|ct| async move {
        let m = Master::start(Setup::default()).await;
        let mut info = framework("f", "r1");
        info.failover_timeout = Some(10.0);
        let mut f = m.subscribe(info.clone(), ct).await;
        let offer = f.offers().await.remove(0);
        assert_eq!(
            f.launch(&offer, vec![task("t1", &offer, "cpus:1;mem:128", None)])
                .await,
            202
        );
        loop {
            let s = f.update().await;
            f.acknowledge(&s).await;
            if s.state() == v1::TaskState::TaskRunning {
                break;
            }
        }
        let id = f.id.clone();
        f.disconnect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        m.advance(Duration::from_secs(5)).await;
        info.id = Some(v1::FrameworkId { value: id.clone() });
        let f = m.subscribe(info.clone(), ct).await;
        assert_eq!(f.id, id);
        let state = m.state().await;
        assert_eq!(
            state["frameworks"][0]["tasks"][0]["state"], "TASK_RUNNING",
            "{state}"
        );
        // Gone past the timeout: removed, tasks killed, a later SUBSCRIBE refused.
        f.disconnect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        m.advance(Duration::from_secs(11)).await;
        let state = m.state().await;
        assert!(
            state["frameworks"].as_array().unwrap().is_empty(),
            "{state}"
        );
        assert_eq!(state["completed_frameworks"][0]["id"], id.as_str());
        assert_eq!(state["slaves"][0]["used_resources"]["cpus"], 0.0);
        let mut again = m.subscribe(info, ct).await;
        let e = again.next().await;
        assert_eq!(e.error.unwrap().message, "Framework has been removed");
    })
    .await;
}

/// An agent that runs nothing.
struct NullAgent;

impl unisched_mesos::agent::AgentBackend for NullAgent {
    fn launch(&self, _: unisched_mesos::agent::Launch) {}
    fn kill_task(&self, _: &str, _: &str, _: Duration) {}
    fn shutdown_executor(&self, _: &str, _: &str) {}
    fn shutdown_framework(&self, _: &str) {}
    fn framework_message(&self, _: &str, _: &str, _: Vec<u8>) {}
    fn stop(&self) {}
}
