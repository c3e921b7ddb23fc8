//! Custom executors on the process agent, over the executor HTTP API
//! (`POST /api/v1/executor`): the test plays the executor (the agent starts
//! its command, which only sleeps; the test subscribes in its place) and the
//! scheduler, in both encodings; and bad input at the executor API gets
//! upstream's answers.

mod common;

use common::*;
use futures_util::StreamExt as _;
use tokio::sync::mpsc;
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::codec::{self, ContentType};
use unisched_mesos::recordio;
use unisched_mesos::v1;
use unisched_mesos::v1::executor::{Call, Event, call, event};
use unisched_mesos::v1::scheduler::event as sched_event;

/// A task on the offer's agent run by executor `executor` (its command
/// sleeps: the test speaks for it).
fn executor_task(id: &str, offer: &v1::Offer, executor: &str) -> v1::TaskInfo {
    let mut task = task(id, offer, "cpus:0.5;mem:64", None);
    task.command = None;
    task.executor = Some(Box::new(v1::ExecutorInfo {
        executor_id: v1::ExecutorId {
            value: executor.to_string(),
        },
        command: Some(v1::CommandInfo {
            value: Some("exec sleep 600".to_string()),
            ..Default::default()
        }),
        resources: with_role(
            unisched_mesos::resources::Resources::parse("cpus:0.1;mem:32")
                .unwrap()
                .to_vec(),
            offer,
        ),
        shutdown_grace_period: Some(v1::DurationInfo {
            nanoseconds: 200_000_000,
        }),
        ..Default::default()
    }));
    task
}

async fn post(m: &Master, call: &Call, ct: ContentType) -> reqwest::Response {
    m.http
        .post(format!("{}/api/v1/executor", m.url))
        .header("Content-Type", ct.mime())
        .header("Accept", ct.mime())
        .body(codec::encode(call, ct))
        .send()
        .await
        .unwrap()
}

fn executor_call(framework: &str, executor: &str, kind: call::Type) -> Call {
    Call {
        executor_id: v1::ExecutorId {
            value: executor.to_string(),
        },
        framework_id: v1::FrameworkId {
            value: framework.to_string(),
        },
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// Subscribes as the executor; its events.
async fn subscribe(
    m: &Master,
    framework: &str,
    executor: &str,
    ct: ContentType,
) -> mpsc::UnboundedReceiver<Event> {
    let mut c = executor_call(framework, executor, call::Type::Subscribe);
    c.subscribe = Some(call::Subscribe::default());
    open_stream(m, &c, ct).await
}

/// Sends SUBSCRIBE call `c`; the events of its stream.
async fn open_stream(m: &Master, c: &Call, ct: ContentType) -> mpsc::UnboundedReceiver<Event> {
    let resp = post(m, c, ct).await;
    assert_eq!(resp.status().as_u16(), 200, "SUBSCRIBE answers 200");
    let (tx, rx) = mpsc::unbounded_channel();
    let mut body = resp.bytes_stream();
    tokio::spawn(async move {
        let mut decoder = recordio::Decoder::new(1 << 20);
        while let Some(Ok(chunk)) = body.next().await {
            for record in decoder.decode(&chunk).expect("RecordIO") {
                let e: Event = codec::decode(&record, ct).expect("event decodes");
                if tx.send(e).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

async fn next(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an executor event in time")
        .expect("the stream is open")
}

fn update(framework: &str, executor: &str, task: &str, state: v1::TaskState) -> Call {
    let mut c = executor_call(framework, executor, call::Type::Update);
    c.update = Some(call::Update {
        status: v1::TaskStatus {
            task_id: v1::TaskId {
                value: task.to_string(),
            },
            state: state as i32,
            source: Some(v1::task_status::Source::Executor as i32),
            uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
            ..Default::default()
        },
    });
    c
}

/// A scheduler's KILL of a task on the offer's agent.
fn kill(task: &str, offer: &v1::Offer) -> v1::scheduler::Call {
    v1::scheduler::Call {
        r#type: Some(v1::scheduler::call::Type::Kill as i32),
        kill: Some(v1::scheduler::call::Kill {
            task_id: v1::TaskId {
                value: task.to_string(),
            },
            agent_id: Some(offer.agent_id.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn process_agent() -> Master {
    Master::start(Setup {
        executor: ExecutorKind::Process,
        ..Default::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_executor_runs_tasks_through_the_executor_api() {
    for ct in [ContentType::Json, ContentType::Protobuf] {
        let m = process_agent().await;
        let mut f = m.subscribe(framework("custom", "r"), ct).await;
        let offer = f.offers().await.remove(0);
        let first = executor_task("t1", &offer, "runner");
        let second = executor_task("t2", &offer, "runner");
        assert_eq!(f.launch(&offer, vec![first, second]).await, 202);

        // Before it subscribes, the executor's other calls are refused.
        let early = update(&f.id, "runner", "t1", v1::TaskState::TaskRunning);
        let resp = post(&m, &early, ct).await;
        assert_eq!(resp.status().as_u16(), 403, "{ct:?}");
        assert_eq!(resp.text().await.unwrap(), "Executor is not subscribed");

        // SUBSCRIBED, then both tasks (they waited for the subscription).
        let mut events = subscribe(&m, &f.id, "runner", ct).await;
        let subscribed = next(&mut events).await;
        assert_eq!(subscribed.r#type(), event::Type::Subscribed);
        let s = subscribed.subscribed.unwrap();
        assert_eq!(s.executor_info.executor_id.value, "runner");
        assert_eq!(s.framework_info.id.unwrap().value, f.id);
        assert_eq!(s.agent_info.id.unwrap(), offer.agent_id);
        for id in ["t1", "t2"] {
            let e = next(&mut events).await;
            assert_eq!(e.r#type(), event::Type::Launch);
            assert_eq!(e.launch.unwrap().task.task_id.value, id);
        }

        // An update reaches the scheduler with the executor's uuid; the
        // acknowledgement comes back to the executor.
        let running = update(&f.id, "runner", "t1", v1::TaskState::TaskRunning);
        let uuid = running.update.as_ref().unwrap().status.uuid.clone();
        assert_eq!(post(&m, &running, ct).await.status().as_u16(), 202);
        // The same update again (a retry) is not sent twice.
        assert_eq!(post(&m, &running, ct).await.status().as_u16(), 202);
        let status = f.update().await;
        assert_eq!(status.state(), v1::TaskState::TaskRunning);
        assert_eq!(status.uuid, uuid);
        assert_eq!(status.executor_id.as_ref().unwrap().value, "runner");
        assert_eq!(f.acknowledge(&status).await, 202);
        let ack = next(&mut events).await;
        assert_eq!(ack.r#type(), event::Type::Acknowledged);
        let ack = ack.acknowledged.unwrap();
        assert_eq!((ack.task_id.value.as_str(), Some(ack.uuid)), ("t1", uuid));

        // The executor subscribes again (its connection broke), naming the
        // updates it holds unacknowledged: t1's RUNNING, which the agent
        // had (not sent again), and t2's RUNNING, whose call was lost (it
        // counts now). The stream starts over; nothing is launched twice.
        let t2_running = update(&f.id, "runner", "t2", v1::TaskState::TaskRunning);
        let t2_uuid = t2_running.update.as_ref().unwrap().status.uuid.clone();
        let mut again = executor_call(&f.id, "runner", call::Type::Subscribe);
        again.subscribe = Some(call::Subscribe {
            unacknowledged_tasks: Vec::new(),
            unacknowledged_updates: vec![
                running.update.clone().unwrap(),
                t2_running.update.clone().unwrap(),
            ],
        });
        drop(events);
        let mut events = open_stream(&m, &again, ct).await;
        assert_eq!(next(&mut events).await.r#type(), event::Type::Subscribed);
        let status = f.update().await;
        assert_eq!(
            (status.task_id.value.as_str(), status.uuid.clone()),
            ("t2", t2_uuid)
        );
        assert_eq!(f.acknowledge(&status).await, 202);
        assert_eq!(next(&mut events).await.r#type(), event::Type::Acknowledged);

        // Messages both ways.
        let mut message = executor_call(&f.id, "runner", call::Type::Message);
        message.message = Some(call::Message {
            data: b"from the executor".to_vec(),
        });
        assert_eq!(post(&m, &message, ct).await.status().as_u16(), 202);
        let got = f.next_of(sched_event::Type::Message).await.message.unwrap();
        assert_eq!(got.data, b"from the executor");
        assert_eq!(got.executor_id.value, "runner");
        let to_executor = v1::scheduler::Call {
            r#type: Some(v1::scheduler::call::Type::Message as i32),
            message: Some(v1::scheduler::call::Message {
                agent_id: offer.agent_id.clone(),
                executor_id: v1::ExecutorId {
                    value: "runner".to_string(),
                },
                data: b"from the scheduler".to_vec(),
            }),
            ..Default::default()
        };
        assert_eq!(f.call(to_executor).await.0, 202);
        let e = next(&mut events).await;
        assert_eq!(e.message.unwrap().data, b"from the scheduler");

        // KILL goes to the executor, which reports the end.
        assert_eq!(f.call(kill("t1", &offer)).await.0, 202);
        let e = next(&mut events).await;
        assert_eq!(e.r#type(), event::Type::Kill);
        assert_eq!(e.kill.unwrap().task_id.value, "t1");
        let killed = update(&f.id, "runner", "t1", v1::TaskState::TaskKilled);
        assert_eq!(post(&m, &killed, ct).await.status().as_u16(), 202);
        let status = f.update().await;
        assert_eq!(status.state(), v1::TaskState::TaskKilled);
        assert_eq!(f.acknowledge(&status).await, 202);
        // The executor holds its own resources apart from its tasks': with
        // t1 ended, t2's and the executor's are in use, on the agent, in
        // the framework and in the core.
        let used = |state: &serde_json::Value, what: &str| {
            let v = match what {
                "slave" => &state["slaves"][0]["used_resources"],
                _ => &state["frameworks"][0]["used_resources"],
            };
            (v["cpus"].as_f64().unwrap(), v["mem"].as_f64().unwrap())
        };
        let state = m.state().await;
        assert_eq!(used(&state, "slave"), (0.6, 96.0), "{state}");
        assert_eq!(used(&state, "framework"), (0.6, 96.0), "{state}");
        m.scheduler.settle();
        let node = m.scheduler.snapshot("mesos").unwrap().nodes.remove(0);
        assert_eq!(node.allocated.get("vcore"), Some(&600), "{node:?}");

        // SHUTDOWN: the executor is told; it does not exit, so after its
        // grace period its process is killed, t2 (which it never ended)
        // fails as upstream's agent fails it, and the framework hears the
        // executor is gone.
        let shutdown = v1::scheduler::Call {
            r#type: Some(v1::scheduler::call::Type::Shutdown as i32),
            shutdown: Some(v1::scheduler::call::Shutdown {
                executor_id: v1::ExecutorId {
                    value: "runner".to_string(),
                },
                agent_id: offer.agent_id.clone(),
            }),
            ..Default::default()
        };
        assert_eq!(f.call(shutdown).await.0, 202);
        loop {
            let e = next(&mut events).await;
            if e.r#type() == event::Type::Shutdown {
                break;
            }
            assert_eq!(e.r#type(), event::Type::Acknowledged, "{e:?}");
        }
        let status = f.update().await;
        assert_eq!(status.task_id.value, "t2");
        assert_eq!(status.state(), v1::TaskState::TaskFailed);
        assert_eq!(status.message(), "Executor terminated");
        assert_eq!(status.reason(), v1::task_status::Reason::ExecutorTerminated);
        assert_eq!(status.source(), v1::task_status::Source::Agent);
        let failure = f.next_of(sched_event::Type::Failure).await.failure.unwrap();
        assert_eq!(failure.executor_id.unwrap().value, "runner");
        // Killed by SIGKILL after the grace period: a signalled wait status.
        assert_eq!(failure.status, Some(9), "{ct:?}");
        assert_eq!(f.acknowledge(&status).await, 202);

        // Nothing is held any more: not the tasks', not the executor's.
        let state = m.state().await;
        assert_eq!(used(&state, "slave"), (0.0, 0.0), "{state}");
        assert_eq!(used(&state, "framework"), (0.0, 0.0), "{state}");

        // Gone from the executor API too (the agent keeps no framework
        // without executors, as upstream's cleans one up).
        let resp = post(&m, &early, ct).await;
        assert_eq!(resp.status().as_u16(), 400);
        assert_eq!(resp.text().await.unwrap(), "Framework cannot be found");
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_whose_tasks_were_all_killed_before_delivery_is_shut_down() {
    let m = process_agent().await;
    let mut f = m
        .subscribe(framework("silent", "r"), ContentType::Json)
        .await;
    let offer = f.offers().await.remove(0);
    let t = executor_task("t1", &offer, "silent");
    assert_eq!(f.launch(&offer, vec![t]).await, 202);
    // A KILL before the executor subscribed ends the task at once.
    assert_eq!(f.call(kill("t1", &offer)).await.0, 202);
    let status = f.update().await;
    assert_eq!(status.state(), v1::TaskState::TaskKilled);
    assert_eq!(
        status.reason(),
        v1::task_status::Reason::TaskKilledDuringLaunch
    );
    assert_eq!(f.acknowledge(&status).await, 202);
    // It never got a task and has none waiting: it is shut down, as
    // upstream's agent does (signalled, since it never subscribed), and its
    // resources come back.
    let failure = f.next_of(sched_event::Type::Failure).await.failure.unwrap();
    assert_eq!(failure.executor_id.unwrap().value, "silent");
    let state = m.state().await;
    assert_eq!(
        state["slaves"][0]["used_resources"]["cpus"].as_f64(),
        Some(0.0),
        "{state}"
    );
    // Another task of the same executor id starts it again; TEARDOWN takes
    // it (its `sleep`) down with the framework.
    m.allocate().await;
    let offer = f.offers().await.remove(0);
    let t = executor_task("t2", &offer, "silent");
    assert_eq!(f.launch(&offer, vec![t]).await, 202);
    let state = m.state().await;
    assert_eq!(
        state["slaves"][0]["used_resources"]["cpus"].as_f64(),
        Some(0.6),
        "{state}"
    );
    assert_eq!(f.simple(v1::scheduler::call::Type::Teardown).await, 202);
    m.expect_empty().await;
    m.cluster.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_at_the_executor_api_gets_upstreams_answers() {
    let m = process_agent().await;
    let url = format!("{}/api/v1/executor", m.url);
    let get = m.http.get(&url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("no content type", "", b"{}".to_vec(), 400, "Expecting 'Content-Type'"),
        (
            "text",
            "text/plain",
            b"{}".to_vec(),
            415,
            "Expecting 'Content-Type' of application/json or application/x-protobuf",
        ),
        ("malformed JSON", "application/json", b"{".to_vec(), 400, "JSON"),
        (
            "no ids",
            "application/json",
            br#"{"type":"SUBSCRIBE","subscribe":{}}"#.to_vec(),
            400,
            "executor_id",
        ),
        (
            "no type",
            "application/json",
            br#"{"executor_id":{"value":"e"},"framework_id":{"value":"f"}}"#.to_vec(),
            400,
            "Expecting 'type' to be present",
        ),
        (
            "update without uuid",
            "application/json",
            br#"{"type":"UPDATE","executor_id":{"value":"e"},"framework_id":{"value":"f"},
                "update":{"status":{"task_id":{"value":"t"},"state":"TASK_RUNNING","source":"SOURCE_EXECUTOR"}}}"#
                .to_vec(),
            400,
            "Expecting 'uuid' to be present",
        ),
        (
            "unknown framework",
            "application/json",
            br#"{"type":"SUBSCRIBE","executor_id":{"value":"e"},"framework_id":{"value":"f"},"subscribe":{}}"#
                .to_vec(),
            400,
            "Framework cannot be found",
        ),
    ];
    for (what, content_type, body, status, says) in cases {
        let mut request = m.http.post(&url).body(body);
        if !content_type.is_empty() {
            request = request.header("Content-Type", content_type);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{what}");
        let text = resp.text().await.unwrap();
        assert!(text.contains(says), "{what}: {text}");
    }
    // An update with a non-executor source.
    let mut c = update("f", "e", "t", v1::TaskState::TaskRunning);
    c.update.as_mut().unwrap().status.source = Some(v1::task_status::Source::Master as i32);
    let resp = post(&m, &c, ContentType::Protobuf).await;
    assert_eq!(resp.status().as_u16(), 400);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("with invalid source, expecting 'SOURCE_EXECUTOR'")
    );
    m.cluster.stop();
}
