//! `MesosSchedulerDriver` against our master: over HTTP in both encodings
//! (through a TCP proxy that can make the master go away) and in process.
//! Every driver method, the status transitions seen from outside, failover
//! after a lost stream, launching while disconnected, errors and aborts,
//! callbacks that use the driver, panicking callbacks.

mod common;
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use support::driver::*;
use support::{metric, metric_until, state_until};
use unisched_mesos::client::Client;
use unisched_mesos::driver::{DriverOptions, MesosSchedulerDriver, Status};
use unisched_mesos::v1;
use unisched_mesos::v1::task_status::{Reason, Source};
use v1::TaskState::*;

fn refuse(seconds: f64) -> Option<v1::Filters> {
    Some(v1::Filters {
        refuse_seconds: Some(seconds),
    })
}

fn with_failover(mut info: v1::FrameworkInfo, seconds: f64) -> v1::FrameworkInfo {
    info.failover_timeout = Some(seconds);
    info
}

/// The framework's entry in the master's state.
fn framework_of<'a>(state: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    state["frameworks"]
        .as_array()?
        .iter()
        .find(|f| f["id"] == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_launches_and_acknowledges_implicitly() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let mut r = registered(&m, via, framework("d", "r1"), fast_options(), None).await;
        assert_eq!(r.driver.framework_id().map(|f| f.value), Some(r.id.clone()));
        let offer = r.callbacks.offers().await.remove(0);
        let status = r.launch(
            &offer,
            vec![quick_task("t1", &offer), quick_task("t2", &offer)],
        );
        assert_eq!(status, Status::DriverRunning);
        // Each task's updates come in order, the two tasks' in any order.
        let mut finished = std::collections::BTreeSet::new();
        while finished.len() < 2 {
            let u = r.callbacks.update().await;
            if u.state() == TaskFinished {
                assert!(u.uuid.is_some(), "{via:?}: agent updates carry a uuid");
                finished.insert(u.task_id.value);
            }
        }
        assert_eq!(finished, ["t1", "t2"].map(String::from).into());
        // Every update acknowledged: the tasks are completed, none pending.
        let id = r.id.clone();
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| {
                f["completed_tasks"].as_array().unwrap().len() == 2
                    && f["tasks"].as_array().unwrap().is_empty()
            })
        })
        .await;
        assert_eq!(r.driver.stop(false), Status::DriverStopped);
        assert_eq!(join(&r.driver).await, Status::DriverStopped);
        let state = m.state().await;
        assert_eq!(
            state["completed_frameworks"][0]["id"],
            r.id.as_str(),
            "{via:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declines_with_filters_revives_and_suppresses() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let mut r = registered(&m, via, framework("d", "r1"), fast_options(), None).await;
        let offer = r.callbacks.offers().await.remove(0);
        assert_eq!(
            r.driver.decline_offer(&offer.id, refuse(3600.0)),
            Status::DriverRunning
        );
        m.allocate().await;
        assert!(
            r.callbacks
                .quiet_of(|s| matches!(s, Seen::Offers(_)))
                .await
                .is_none(),
            "{via:?}: filtered"
        );
        assert_eq!(r.driver.revive_offers(), Status::DriverRunning);
        let offer = r.callbacks.offers().await.remove(0);

        assert_eq!(r.driver.suppress_offers(), Status::DriverRunning);
        r.driver.decline_offer(&offer.id, refuse(0.0));
        m.allocate().await;
        assert!(
            r.callbacks
                .quiet_of(|s| matches!(s, Seen::Offers(_)))
                .await
                .is_none(),
            "{via:?}: suppressed"
        );
        // No roles: nothing to do.
        assert_eq!(r.driver.revive_offers_for(&[]), Status::DriverRunning);
        assert_eq!(
            r.driver.revive_offers_for(&["r1".to_string()]),
            Status::DriverRunning
        );
        r.callbacks.offers().await;
        assert_eq!(metric(&m, "master/messages_scheduler_revive").await, 2.0);
        assert_eq!(metric(&m, "master/messages_scheduler_suppress").await, 1.0);
        assert_eq!(metric(&m, "master/messages_scheduler_decline").await, 2.0);
        // Suppressing named roles only.
        assert_eq!(r.driver.suppress_offers_for(&[]), Status::DriverRunning);
        assert_eq!(
            r.driver.suppress_offers_for(&["r1".to_string()]),
            Status::DriverRunning
        );
        metric_until(&m, "master/messages_scheduler_suppress", 2.0).await;
        r.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_reconciles_messages_and_requests() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let mut r = registered(&m, via, framework("d", "r1"), fast_options(), None).await;
        let offer = r.run_long_task("t1").await;

        assert_eq!(r.driver.reconcile_tasks(&[]), Status::DriverRunning);
        let u = r.callbacks.update().await;
        assert_eq!(
            (u.task_id.value.as_str(), u.state(), u.reason()),
            ("t1", TaskRunning, Reason::Reconciliation),
            "{via:?}"
        );
        let ghost = v1::TaskStatus {
            task_id: v1::TaskId {
                value: "ghost".to_string(),
            },
            ..Default::default()
        };
        let running = v1::TaskStatus {
            task_id: v1::TaskId {
                value: "t1".to_string(),
            },
            agent_id: Some(offer.agent_id.clone()),
            ..Default::default()
        };
        r.driver.reconcile_tasks(&[running.clone(), ghost]);
        let mut seen = Vec::new();
        for _ in 0..2 {
            let u = r.callbacks.update().await;
            seen.push((u.task_id.value.clone(), u.state()));
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                ("ghost".to_string(), TaskLost),
                ("t1".to_string(), TaskRunning)
            ]
        );

        let executor = v1::ExecutorId {
            value: "t1".to_string(),
        };
        let agent = offer.agent_id.clone();
        assert_eq!(
            r.driver.send_framework_message(&executor, &agent, b"hello"),
            Status::DriverRunning
        );
        assert_eq!(
            r.driver.request_resources(vec![v1::Request {
                agent_id: Some(agent),
                resources: offer.resources.clone(),
            }]),
            Status::DriverRunning
        );
        assert_eq!(r.driver.kill_task(&running.task_id), Status::DriverRunning);
        r.callbacks.update_of("t1", TaskKilled).await;
        // Calls go out in the order they were made: message and request
        // were answered before the kill's update could come.
        assert_eq!(metric(&m, "master/messages_scheduler_message").await, 1.0);
        assert_eq!(metric(&m, "master/messages_scheduler_request").await, 1.0);
        assert_eq!(metric(&m, "master/messages_scheduler_kill").await, 1.0);

        let mut renamed = framework("renamed", "r1");
        renamed.id = r.driver.framework_id();
        assert_eq!(
            r.driver.update_framework(renamed, vec![]),
            Status::DriverRunning
        );
        let id = r.id.clone();
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| f["name"] == "renamed")
        })
        .await;
        r.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_acknowledgements_are_sent_only_when_asked() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let options = DriverOptions {
            implicit_acknowledgements: false,
            ..fast_options()
        };
        let mut r = registered(&m, via, framework("d", "r1"), options, None).await;
        let offer = r.callbacks.offers().await.remove(0);
        r.launch(&offer, vec![long_task("t1", &offer)]);
        let first = r.callbacks.update_of("t1", TaskRunning).await;
        // Not acknowledged: the master sends it again with the same uuid.
        m.advance(Duration::from_secs(11)).await;
        let again = r.callbacks.update_of("t1", TaskRunning).await;
        assert_eq!(again.uuid, first.uuid, "{via:?}");
        assert_eq!(
            r.driver.acknowledge_status_update(&again),
            Status::DriverRunning
        );
        metric_until(&m, "master/valid_status_update_acknowledgements", 1.0).await;
        m.advance(Duration::from_secs(30)).await;
        assert!(
            r.callbacks
                .quiet_of(|s| matches!(s, Seen::Update(_)))
                .await
                .is_none(),
            "{via:?}: acknowledged, not resent"
        );
        r.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledging_with_implicit_acknowledgements_aborts_with_an_error() {
    let m = Master::start(Setup::default()).await;
    let mut r = registered(&m, VIAS[1], framework("d", "r1"), fast_options(), None).await;
    let status = v1::TaskStatus::default();
    assert_eq!(
        r.driver.acknowledge_status_update(&status),
        Status::DriverRunning
    );
    let (message, status) = r.callbacks.error().await;
    assert!(message.contains("implicit acknowledgements"), "{message}");
    assert_eq!(status, Status::DriverAborted, "aborted before `error` runs");
    assert_eq!(join(&r.driver).await, Status::DriverAborted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_failover_leaves_the_framework_to_a_new_driver() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let info = with_failover(framework("d", "r1"), 60.0);
        let mut r = registered(&m, via, info.clone(), fast_options(), None).await;
        r.run_long_task("t1").await;
        assert_eq!(r.driver.stop(true), Status::DriverStopped);
        assert_eq!(join(&r.driver).await, Status::DriverStopped);
        let id = r.id.clone();
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| {
                f["connected"] == false && f["tasks"][0]["state"] == "TASK_RUNNING"
            })
        })
        .await;

        // A new scheduler takes over with the id: `registered` (a failover).
        let mut info = info;
        info.id = Some(v1::FrameworkId { value: id.clone() });
        let mut next = registered(&m, via, info, fast_options(), None).await;
        assert_eq!(next.id, id, "{via:?}");
        next.driver.reconcile_tasks(&[]);
        next.callbacks.update_of("t1", TaskRunning).await;
        assert!(
            r.callbacks.quiet().await.is_none(),
            "no callback after stop"
        );
        next.driver.stop(false);
        assert_eq!(join(&next.driver).await, Status::DriverStopped);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_stops_callbacks_returns_offers_and_a_later_stop_tears_down() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let mut r = registered(&m, via, framework("one", "r1"), fast_options(), None).await;
        r.callbacks.offers().await;
        assert_eq!(r.driver.abort(), Status::DriverAborted);
        assert_eq!(join(&r.driver).await, Status::DriverAborted);
        // The abort's DECLINE and SUPPRESS travel on the driver's call lane
        // after `join` returned. Declined resources wait for the next
        // allocation run (as in Mesos) and this master's clock stands
        // still, so the run that the second framework's SUBSCRIBE starts
        // must come after the master took them back.
        metric_until(&m, "master/messages_scheduler_suppress", 1.0).await;
        // What it held goes to another framework.
        let mut other = registered(&m, via, framework("two", "r1"), fast_options(), None).await;
        other.callbacks.offers().await;
        assert!(r.callbacks.quiet().await.is_none(), "{via:?}: no callbacks");
        let offer_id = v1::OfferId {
            value: "x".to_string(),
        };
        assert_eq!(
            r.driver.decline_offer(&offer_id, None),
            Status::DriverAborted
        );
        assert_eq!(r.driver.abort(), Status::DriverAborted);
        assert_eq!(r.driver.start(), Status::DriverAborted);
        // Stopping an aborted driver tears the framework down, and says it was aborted.
        assert_eq!(r.driver.stop(false), Status::DriverAborted);
        assert_eq!(r.driver.status(), Status::DriverStopped);
        assert_eq!(join(&r.driver).await, Status::DriverStopped);
        let id = r.id.clone();
        state_until(&m, |s| {
            s["completed_frameworks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["id"] == id.as_str())
        })
        .await;
        other.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_over_driver_gets_an_error_and_stays_away() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let info = with_failover(framework("d", "r1"), 60.0);
        let mut first = registered(&m, via, info.clone(), fast_options(), None).await;
        let mut info = info;
        info.id = Some(v1::FrameworkId {
            value: first.id.clone(),
        });
        let mut second = registered(&m, via, info, fast_options(), None).await;
        let (message, status) = first.callbacks.error().await;
        assert_eq!(message, "Framework failed over", "{via:?}");
        assert_eq!(status, Status::DriverAborted);
        assert_eq!(first.driver.status(), Status::DriverAborted);
        // The first does not come back and steal the framework.
        m.allocate().await;
        second.callbacks.offers().await;
        assert!(first.callbacks.quiet().await.is_none());
        assert!(
            second
                .callbacks
                .quiet_of(|s| matches!(s, Seen::Error(..)))
                .await
                .is_none(),
            "{via:?}: the framework stays with the second driver"
        );
        let id = second.id.clone();
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| f["connected"] == true)
        })
        .await;
        second.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_stream_is_resubscribed_and_the_tasks_are_still_there() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let info = with_failover(framework("d", "r1"), 60.0);
        let mut r = registered(&m, via, info, fast_options(), None).await;
        r.run_long_task("t1").await;

        r.link.drop_stream(&m);
        let after: Vec<&str> = [
            r.callbacks
                .until(|s| matches!(s, Seen::Disconnected).then_some("disconnected"))
                .await,
            r.callbacks
                .until(|s| matches!(s, Seen::Reregistered).then_some("reregistered"))
                .await,
        ]
        .into();
        assert_eq!(after, ["disconnected", "reregistered"], "{via:?}");
        assert_eq!(r.driver.framework_id().unwrap().value, r.id);
        // Offers come again on the new stream (the old ones were discarded);
        // an update whose acknowledgement the cut lost may come again first.
        r.callbacks
            .until(|s| match s {
                Seen::Offers(_) => Some(()),
                Seen::Update(u) if u.task_id.value == "t1" => None,
                other => panic!("{via:?}: {other:?}"),
            })
            .await;
        r.driver.reconcile_tasks(&[]);
        r.callbacks.update_of("t1", TaskRunning).await;
        let state = m.state().await;
        let f = framework_of(&state, &r.id).unwrap();
        assert_eq!(f["connected"], true);
        assert_eq!(f["tasks"][0]["id"], "t1");
        r.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launching_while_disconnected_answers_task_lost_locally() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let info = with_failover(framework("d", "r1"), 60.0);
        let mut r = registered(&m, via, info, fast_options(), None).await;
        let offer = r.callbacks.offers().await.remove(0);

        r.link.go_down(&m);
        r.callbacks.reach(|s| matches!(s, Seen::Disconnected)).await;
        assert_eq!(
            r.launch(&offer, vec![long_task("t1", &offer)]),
            Status::DriverRunning
        );
        let lost = r.callbacks.update().await;
        assert_eq!(
            (
                lost.task_id.value.as_str(),
                lost.state(),
                lost.reason(),
                lost.source()
            ),
            ("t1", TaskLost, Reason::MasterDisconnected, Source::Master),
            "{via:?}"
        );
        assert_eq!(lost.message.as_deref(), Some("Master disconnected"));
        assert!(lost.uuid.is_none() && lost.agent_id.is_none());
        // Other calls are dropped while disconnected; suppression is kept
        // for the next subscription.
        assert_eq!(
            r.driver.decline_offer(&offer.id, None),
            Status::DriverRunning
        );
        assert_eq!(r.driver.kill_task(&lost.task_id), Status::DriverRunning);

        r.link.come_back();
        r.callbacks.reach(|s| matches!(s, Seen::Reregistered)).await;
        let offer = r.callbacks.offers().await.remove(0);
        r.launch(&offer, vec![long_task("t2", &offer)]);
        r.callbacks.update_of("t2", TaskRunning).await;
        assert_eq!(metric(&m, "master/messages_scheduler_decline").await, 0.0);
        assert_eq!(metric(&m, "master/messages_scheduler_kill").await, 0.0);
        r.driver.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_aware_frameworks_get_task_dropped_while_disconnected() {
    let m = Master::start(Setup::default()).await;
    let mut info = with_failover(framework("d", "r1"), 60.0);
    info.capabilities = vec![v1::framework_info::Capability {
        r#type: Some(v1::framework_info::capability::Type::PartitionAware as i32),
    }];
    let mut r = registered(&m, Via::InProcess, info, fast_options(), None).await;
    let offer = r.callbacks.offers().await.remove(0);
    r.link.go_down(&m);
    r.callbacks.reach(|s| matches!(s, Seen::Disconnected)).await;
    r.launch(&offer, vec![long_task("t1", &offer)]);
    let u = r.callbacks.update().await;
    assert_eq!(
        (u.state(), u.reason()),
        (TaskDropped, Reason::MasterDisconnected)
    );
    r.driver.stop(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_master_is_retried_until_it_answers() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let (d, mut cb, link) = driver(&m, via, framework("d", "r1"), fast_options(), None).await;
        link.unreachable();
        assert_eq!(d.start(), Status::DriverRunning);
        assert!(
            cb.quiet().await.is_none(),
            "{via:?}: nobody to register with"
        );
        link.come_back();
        cb.reach(|s| matches!(s, Seen::Registered(_))).await;
        cb.offers().await;
        d.stop(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_refused_for_good_aborts_with_an_error() {
    let m = Master::start(Setup {
        token: Some("secret".to_string()),
        ..Setup::default()
    })
    .await;
    for via in [VIAS[0], VIAS[1]] {
        let (d, mut cb, _link) = driver(&m, via, framework("d", "r1"), fast_options(), None).await;
        d.start();
        let (message, status) = cb.error().await;
        assert!(message.contains("401"), "{message}");
        assert_eq!(status, Status::DriverAborted);
        assert_eq!(join(&d).await, Status::DriverAborted);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_a_driver_that_is_not_running_do_nothing() {
    let m = Master::start(Setup::default()).await;
    let (d, mut cb, _link) = driver(&m, VIAS[1], framework("d", "r1"), fast_options(), None).await;
    let offer = v1::OfferId {
        value: "o".to_string(),
    };
    let task_id = v1::TaskId {
        value: "t".to_string(),
    };
    let every_call = |d: &MesosSchedulerDriver| {
        [
            d.request_resources(vec![]),
            d.launch_tasks(std::slice::from_ref(&offer), vec![], None),
            d.kill_task(&task_id),
            d.accept_offers(std::slice::from_ref(&offer), vec![], None),
            d.decline_offer(&offer, None),
            d.revive_offers(),
            d.suppress_offers(),
            d.send_framework_message(&v1::ExecutorId::default(), &v1::AgentId::default(), b""),
            d.reconcile_tasks(&[]),
            d.update_framework(framework("d", "r1"), vec![]),
        ]
    };
    assert!(
        every_call(&d)
            .iter()
            .all(|s| *s == Status::DriverNotStarted)
    );
    assert_eq!(d.stop(false), Status::DriverNotStarted);
    assert_eq!(d.abort(), Status::DriverNotStarted);
    assert_eq!(d.join(), Status::DriverNotStarted, "never started: at once");
    assert_eq!(d.start(), Status::DriverRunning);
    cb.reach(|s| matches!(s, Seen::Registered(_))).await;
    assert_eq!(d.start(), Status::DriverRunning);
    assert_eq!(d.stop(false), Status::DriverStopped);
    assert!(every_call(&d).iter().all(|s| *s == Status::DriverStopped));
    assert_eq!(
        d.start(),
        Status::DriverStopped,
        "a driver never starts again"
    );
    assert_eq!(d.abort(), Status::DriverStopped);
    assert_eq!(join(&d).await, Status::DriverStopped);
    let metrics = m.metrics().await;
    // An offer that reached the driver before the stop may have been
    // declined on its way out; nothing else may have been sent.
    let declines = metrics["master/messages_scheduler_decline"]
        .as_f64()
        .unwrap_or(0.0);
    assert_eq!(
        metrics["master/valid_scheduler_calls"].as_f64(),
        Some(2.0 + declines),
        "SUBSCRIBE and TEARDOWN (and declines): {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_may_drive_the_driver_and_a_panic_does_not_stop_them() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let joined = Arc::new(Mutex::new(None));
        let j = joined.clone();
        let hook: Hook = Box::new(move |d, seen| match seen {
            Seen::Registered(_) => panic!("a scheduler bug"),
            Seen::Offers(offers) => {
                let o = &offers[0];
                d.launch_tasks(
                    std::slice::from_ref(&o.id),
                    vec![quick_task("t1", o)],
                    refuse(3600.0),
                );
            }
            Seen::Update(u) if u.state() == TaskFinished => {
                assert_eq!(d.stop(false), Status::DriverStopped);
                // On the callback thread join cannot wait: it answers at once.
                *j.lock().unwrap() = Some(d.join());
            }
            _ => {}
        });
        let (d, mut cb, _link) =
            driver(&m, via, framework("d", "r1"), fast_options(), Some(hook)).await;
        assert_eq!(d.start(), Status::DriverRunning);
        cb.update_of("t1", TaskFinished).await;
        assert_eq!(join(&d).await, Status::DriverStopped, "{via:?}");
        assert_eq!(*joined.lock().unwrap(), Some(Status::DriverStopped));
        let state = m.state().await;
        assert_eq!(state["completed_frameworks"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_closes_the_connection() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let info = with_failover(framework("d", "r1"), 60.0);
        let Running {
            driver,
            callbacks,
            id,
            link,
        } = registered(&m, via, info, fast_options(), None).await;
        let spare = driver.clone();
        drop(driver);
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| f["connected"] == true)
        })
        .await;
        drop(spare);
        // The link (proxy) stays up: only the driver can have closed it.
        state_until(&m, |s| {
            framework_of(s, &id).is_some_and(|f| f["connected"] == false)
        })
        .await;
        drop((callbacks, link));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_heartbeats_disconnect_and_the_driver_subscribes_again() {
    // A stand-in master: SUBSCRIBED (heartbeats every 50 ms), three
    // heartbeats, then silence on an open connection.
    let url = support::going_silent(3).await;
    for ct in ENCODINGS {
        let (recorder, mut cb) = recorder(None);
        let client = Client::new(&url, support::client_options(ct)).unwrap();
        let d = MesosSchedulerDriver::with_client(
            recorder,
            framework("d", "r1"),
            client,
            fast_options(),
        );
        d.start();
        cb.reach(|s| matches!(s, Seen::Registered(_))).await;
        let silent = std::time::Instant::now();
        cb.reach(|s| matches!(s, Seen::Disconnected)).await;
        assert!(silent.elapsed() < Duration::from_secs(3), "{ct:?}");
        cb.reach(|s| matches!(s, Seen::Reregistered)).await;
        d.stop(true);
        assert_eq!(join(&d).await, Status::DriverStopped);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_suppressed_from_the_start_get_offers_only_once_revived() {
    for via in VIAS {
        let m = Master::start(Setup::default()).await;
        let options = DriverOptions {
            suppressed_roles: vec!["r1".to_string()],
            ..fast_options()
        };
        let mut r = registered(&m, via, framework("d", "r1"), options, None).await;
        m.allocate().await;
        assert!(
            r.callbacks
                .quiet_of(|s| matches!(s, Seen::Offers(_)))
                .await
                .is_none(),
            "{via:?}"
        );
        r.driver.revive_offers();
        r.callbacks.offers().await;
        r.driver.stop(false);
    }
}
