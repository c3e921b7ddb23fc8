//! Mesos' older scheduler protocol (libprocess messages), which frameworks
//! on libmesos' native driver and mesos-go's v0 driver speak. The test
//! plays such a scheduler: a process with an HTTP server of its own, to
//! which the master POSTs its messages, run on a runtime of its own so that
//! ending it closes every socket it had, as a process' exit does.

mod common;

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::{Master, Setup, WAIT};
use prost::Message;
use tokio::sync::mpsc;
use unisched_mesos::internal as msg;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call};

/// A message the scheduler got: its name, its sender, its body.
type Got = (String, String, Bytes);

/// A scheduler process speaking libprocess.
struct Scheduler {
    pid: String,
    got: mpsc::UnboundedReceiver<Got>,
    /// Set: the process takes messages and never answers them.
    hang: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Messages skipped by [`Scheduler::next_of`], for later ones.
    backlog: std::collections::VecDeque<(String, Bytes)>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    http: reqwest::Client,
    master: String,
    /// Whom its messages come from: the master, or an executor's agent.
    peer: String,
}

impl Scheduler {
    fn start(m: &Master, id: &str) -> Scheduler {
        let (tx, got) = mpsc::unbounded_channel::<Got>();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let process = id.to_string();
        let hung = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hang = std::sync::Arc::clone(&hung);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                port_tx.send(listener.local_addr().unwrap().port()).unwrap();
                let app = Router::new().route(
                    "/{process}/{message}",
                    post(
                        move |Path((to, name)): Path<(String, String)>,
                              headers: HeaderMap,
                              body: Bytes| {
                            let tx = tx.clone();
                            let process = process.clone();
                            let hung = std::sync::Arc::clone(&hung);
                            async move {
                                if hung.load(std::sync::atomic::Ordering::Relaxed) {
                                    // Takes the message and never answers.
                                    std::future::pending::<()>().await;
                                }
                                if to != process {
                                    return StatusCode::NOT_FOUND;
                                }
                                let from = headers
                                    .get("Libprocess-From")
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or_default()
                                    .to_string();
                                let _ = tx.send((name, from, body));
                                StatusCode::ACCEPTED
                            }
                        },
                    ),
                );
                tokio::spawn(async move { axum::serve(listener, app).await });
                // Runs until told to stop; the runtime's end then closes
                // every connection, as the process' exit would.
                tokio::task::spawn_blocking(move || {
                    let _ = stopped.recv();
                })
                .await
                .unwrap();
            });
        });
        let port = port_rx.recv().unwrap();
        Scheduler {
            pid: format!("{id}@127.0.0.1:{port}"),
            got,
            hang,
            backlog: Default::default(),
            stop: Some(stop),
            thread: Some(thread),
            http: reqwest::Client::new(),
            master: m.url.clone(),
            peer: format!("master@{}", m.url.trim_start_matches("http://")),
        }
    }

    /// Ends the process: its server and every connection to it close.
    fn exit(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    /// Sends `message` named `name` to the master's process `to`.
    async fn send_to(&self, to: &str, name: &str, body: Vec<u8>) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}/{to}/{name}", self.master))
            .header("Libprocess-From", &self.pid)
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    async fn send(&self, name: &str, body: Vec<u8>) {
        let (status, text) = self.send_to("master", name, body).await;
        assert_eq!(status, 202, "{name}: {text}");
    }

    async fn call(&self, c: Call) {
        self.send("mesos.scheduler.Call", c.encode_to_vec()).await;
    }

    /// The next message; its sender must be the master.
    async fn next(&mut self) -> (String, Bytes) {
        let (name, from, body) = tokio::time::timeout(WAIT, self.got.recv())
            .await
            .expect("a message in time")
            .expect("the scheduler runs");
        assert_eq!(from, self.peer, "{name}'s sender");
        (name, body)
    }

    /// The next message with its sender, whoever sent it.
    async fn next_from(&mut self) -> Got {
        tokio::time::timeout(WAIT, self.got.recv())
            .await
            .expect("a message in time")
            .expect("the process runs")
    }

    /// The first message named `name`, of those kept back or coming
    /// (others before it are kept back for later).
    async fn next_of<M: Message + Default>(&mut self, name: &str) -> M {
        let name = format!("mesos.internal.{name}");
        if let Some(i) = self.backlog.iter().position(|(n, _)| *n == name) {
            let (_, body) = self.backlog.remove(i).expect("found");
            return M::decode(body).expect("the message decodes");
        }
        loop {
            let (n, body) = self.next().await;
            if n == name {
                return M::decode(body).expect("the message decodes");
            }
            self.backlog.push_back((n, body));
        }
    }

    /// No message kept back, and none within a short while.
    async fn quiet(&mut self) {
        assert!(self.backlog.is_empty(), "{:?}", self.backlog);
        if let Ok(Some((name, _, _))) = tokio::time::timeout(common::QUIET, self.got.recv()).await {
            panic!("unexpected {name}");
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.exit();
    }
}

fn id(value: &str) -> v1::FrameworkId {
    v1::FrameworkId {
        value: value.to_string(),
    }
}

fn scheduler_call(framework: &str, kind: call::Type) -> Call {
    Call {
        framework_id: Some(id(framework)),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// Sends `ReregisterFrameworkMessage` for framework `f` of `info`.
async fn reregister(s: &Scheduler, info: &v1::FrameworkInfo, f: &str, failover: bool) {
    let framework = v1::FrameworkInfo {
        id: Some(id(f)),
        ..info.clone()
    };
    s.send(
        "mesos.internal.ReregisterFrameworkMessage",
        msg::ReregisterFrameworkMessage {
            framework,
            failover,
        }
        .encode_to_vec(),
    )
    .await;
}

/// Registers a framework named `name` (RegisterFrameworkMessage); its id.
async fn register(s: &mut Scheduler, name: &str) -> String {
    let register = msg::RegisterFrameworkMessage {
        framework: framework_info(name, None),
    };
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        register.encode_to_vec(),
    )
    .await;
    registered(s).await
}

async fn registered(s: &mut Scheduler) -> String {
    let r: msg::FrameworkRegisteredMessage = s.next_of("FrameworkRegisteredMessage").await;
    assert_eq!(
        r.master_info.pid(),
        format!("master@{}", s.master.trim_start_matches("http://"))
    );
    r.framework_id.value
}

async fn offers(s: &mut Scheduler) -> msg::ResourceOffersMessage {
    let o: msg::ResourceOffersMessage = s.next_of("ResourceOffersMessage").await;
    assert_eq!(o.offers.len(), o.pids.len(), "a pid per offer");
    let at = format!("@{}", s.master.trim_start_matches("http://"));
    for pid in &o.pids {
        assert!(
            pid.starts_with("slave(") && pid.ends_with(&at),
            "an agent's pid: {pid}"
        );
    }
    o
}

async fn update(s: &mut Scheduler) -> msg::StatusUpdateMessage {
    s.next_of("StatusUpdateMessage").await
}

fn framework_info(name: &str, failover_timeout: Option<f64>) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        failover_timeout,
        ..common::framework(name, "*")
    }
}

/// libmesos 1.x's driver: SUBSCRIBE, ACCEPT, ACKNOWLEDGE, KILL, DECLINE and
/// TEARDOWN as `mesos.scheduler.Call` messages; offers and updates as the
/// older messages, updates from an agent naming it in `pid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_driver_runs_tasks_through_scheduler_calls() {
    let m = Master::start(Setup::default()).await;
    let mut s = Scheduler::start(&m, "scheduler-4a1c");
    s.call(Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: framework_info("native", None),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    let f = registered(&mut s).await;
    m.allocate().await;
    let o = offers(&mut s).await;
    let offer = &o.offers[0];
    assert_eq!(offer.framework_id.value, f);
    assert_eq!(common::scalar(offer, "cpus"), 2.0);

    // The framework's calls at the v1 endpoint: refused as Mesos does.
    let stray = scheduler_call(&f, call::Type::Revive);
    let (status, text) = m
        .post(
            stray.encode_to_vec(),
            &[("Content-Type", "application/x-protobuf")],
        )
        .await;
    assert_eq!(
        (status, text.as_str()),
        (403, "Framework is not connected via HTTP")
    );

    let t = common::task("t1", offer, "cpus:1;mem:128", None);
    s.call(Call {
        accept: Some(call::Accept {
            offer_ids: vec![offer.id.clone()],
            operations: vec![common::launch(vec![t])],
            filters: None,
        }),
        ..scheduler_call(&f, call::Type::Accept)
    })
    .await;
    let u = update(&mut s).await;
    assert_eq!(u.update.status.state(), v1::TaskState::TaskRunning);
    assert_eq!(u.update.framework_id.value, f);
    assert_eq!(u.update.slave_id.as_ref(), Some(&offer.agent_id));
    let uuid = u.update.uuid.clone().expect("an update to acknowledge");
    assert_eq!(u.update.status.uuid.as_ref(), Some(&uuid));
    assert_eq!(
        u.pid.as_deref(),
        Some(o.pids[0].as_str()),
        "the agent's pid"
    );
    let state = m.state().await;
    assert_eq!(state["frameworks"][0]["tasks"][0]["state"], "TASK_RUNNING");
    assert_eq!(state["frameworks"][0]["used_resources"]["cpus"], 1.0);

    s.call(Call {
        acknowledge: Some(call::Acknowledge {
            agent_id: offer.agent_id.clone(),
            task_id: u.update.status.task_id.clone(),
            uuid,
        }),
        ..scheduler_call(&f, call::Type::Acknowledge)
    })
    .await;
    s.call(Call {
        kill: Some(call::Kill {
            task_id: u.update.status.task_id.clone(),
            agent_id: None,
            kill_policy: None,
        }),
        ..scheduler_call(&f, call::Type::Kill)
    })
    .await;
    let killed = update(&mut s).await;
    assert_eq!(killed.update.status.state(), v1::TaskState::TaskKilled);
    assert!(killed.pid.is_some(), "from the agent: acknowledged");

    // The remainder came back; declined with no filter, it is offered again.
    m.allocate().await;
    let again = offers(&mut s).await;
    s.call(Call {
        decline: Some(call::Decline {
            offer_ids: vec![again.offers[0].id.clone()],
            filters: Some(v1::Filters {
                refuse_seconds: Some(0.0),
            }),
        }),
        ..scheduler_call(&f, call::Type::Decline)
    })
    .await;
    m.allocate().await;
    offers(&mut s).await;

    s.call(scheduler_call(&f, call::Type::Teardown)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.expect_empty().await;
    assert_eq!(m.state().await["completed_frameworks"][0]["id"], f.as_str());
}

/// mesos-go's v0 driver and older libmesos: the older messages both ways;
/// a registration sent again is answered again; failover to another
/// scheduler process; deactivation, re-registration and unregistration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_messages_failover_and_deactivation() {
    let m = Master::start(Setup::default()).await;
    let mut s = Scheduler::start(&m, "scheduler(1)");
    let info = framework_info("old", Some(3600.0));
    let register = msg::RegisterFrameworkMessage {
        framework: info.clone(),
    };
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        register.encode_to_vec(),
    )
    .await;
    let f = registered(&mut s).await;
    // A driver retries until answered: the same framework, answered again.
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        register.encode_to_vec(),
    )
    .await;
    assert_eq!(registered(&mut s).await, f);
    assert_eq!(m.state().await["frameworks"].as_array().unwrap().len(), 1);

    s.send(
        "mesos.internal.ResourceRequestMessage",
        msg::ResourceRequestMessage {
            framework_id: id(&f),
            requests: vec![],
        }
        .encode_to_vec(),
    )
    .await;
    m.allocate().await;
    let o = offers(&mut s).await;
    let offer = &o.offers[0];
    let launch = msg::LaunchTasksMessage {
        framework_id: id(&f),
        tasks: vec![
            common::task("a", offer, "cpus:0.5;mem:64", None),
            common::task("b", offer, "cpus:0.5;mem:64", None),
        ],
        filters: v1::Filters {
            refuse_seconds: Some(0.0),
        },
        offer_ids: vec![offer.id.clone()],
    };
    s.send("mesos.internal.LaunchTasksMessage", launch.encode_to_vec())
        .await;
    for _ in 0..2 {
        let u = update(&mut s).await;
        assert_eq!(u.update.status.state(), v1::TaskState::TaskRunning);
        let ack = msg::StatusUpdateAcknowledgementMessage {
            slave_id: offer.agent_id.clone(),
            framework_id: id(&f),
            task_id: u.update.status.task_id.clone(),
            uuid: u.update.uuid.clone().expect("uuid"),
        };
        // Older drivers send acknowledgements to the agent's pid.
        let agent = u
            .pid
            .as_deref()
            .unwrap()
            .split('@')
            .next()
            .unwrap()
            .to_string();
        let (status, text) = s
            .send_to(
                &agent,
                "mesos.internal.StatusUpdateAcknowledgementMessage",
                ack.encode_to_vec(),
            )
            .await;
        assert_eq!(status, 202, "{text}");
    }

    // Reconciliation: the master's own updates name no agent pid (drivers
    // must not acknowledge them).
    s.send(
        "mesos.internal.ReconcileTasksMessage",
        msg::ReconcileTasksMessage {
            framework_id: id(&f),
            statuses: vec![],
            framework: None,
        }
        .encode_to_vec(),
    )
    .await;
    for _ in 0..2 {
        let u = update(&mut s).await;
        assert_eq!(u.update.status.state(), v1::TaskState::TaskRunning);
        assert_eq!(u.pid, None);
        assert_eq!(u.update.uuid, None);
        assert_eq!(
            u.update.status.reason(),
            v1::task_status::Reason::Reconciliation
        );
    }
    let unknown = v1::TaskStatus {
        task_id: v1::TaskId {
            value: "never".to_string(),
        },
        state: v1::TaskState::TaskStaging as i32,
        ..Default::default()
    };
    s.send(
        "mesos.internal.ReconcileTasksMessage",
        msg::ReconcileTasksMessage {
            framework_id: id(&f),
            statuses: vec![unknown],
            framework: None,
        }
        .encode_to_vec(),
    )
    .await;
    let u = update(&mut s).await;
    assert_eq!(u.update.status.state(), v1::TaskState::TaskLost);
    assert_eq!(u.pid, None);

    // Failover to another scheduler process.
    let mut s2 = Scheduler::start(&m, "scheduler(1)");
    reregister(&s2, &info, &f, true).await;
    let e: msg::FrameworkErrorMessage = s.next_of("FrameworkErrorMessage").await;
    assert_eq!(e.message, "Framework failed over");
    assert_eq!(registered(&mut s2).await, f);
    // The old process is no longer the framework's scheduler.
    let kill_a = msg::KillTaskMessage {
        framework_id: id(&f),
        task_id: v1::TaskId {
            value: "a".to_string(),
        },
        kill_policy: None,
    };
    let (status, _) = s
        .send_to(
            "master",
            "mesos.internal.KillTaskMessage",
            kill_a.encode_to_vec(),
        )
        .await;
    assert_eq!(status, 403);
    s2.send("mesos.internal.KillTaskMessage", kill_a.encode_to_vec())
        .await;
    let u = update(&mut s2).await;
    assert_eq!(u.update.status.task_id.value, "a");
    assert_eq!(u.update.status.state(), v1::TaskState::TaskKilled);

    // `stop(failover)`: the framework is disconnected, its tasks stay.
    s2.send(
        "mesos.internal.DeactivateFrameworkMessage",
        msg::DeactivateFrameworkMessage {
            framework_id: id(&f),
        }
        .encode_to_vec(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = m.state().await;
    assert_eq!(state["frameworks"][0]["active"], false, "{state}");
    let running: Vec<_> = state["frameworks"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "TASK_RUNNING")
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(running, vec![serde_json::json!("b")]);
    // ... and comes back from the same process: re-registered.
    reregister(&s2, &info, &f, false).await;
    let r: msg::FrameworkReregisteredMessage = s2.next_of("FrameworkReregisteredMessage").await;
    assert_eq!(r.framework_id.value, f);
    assert_eq!(m.state().await["frameworks"][0]["active"], true);

    s2.send(
        "mesos.internal.UnregisterFrameworkMessage",
        msg::UnregisterFrameworkMessage {
            framework_id: id(&f),
        }
        .encode_to_vec(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.expect_empty().await;
    s.quiet().await;
}

/// A scheduler process that exits is disconnected, as libprocess' `exited`
/// tells Mesos: with no failover timeout its framework is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_that_exits_is_disconnected() {
    // On another address than 127.0.0.1: the master's pid, and its agents',
    // name the address it serves on, which drivers check.
    let m = Master::start(Setup {
        addr: Some("127.0.0.2:0".parse().unwrap()),
        ..Setup::default()
    })
    .await;
    let mut s = Scheduler::start(&m, "scheduler(1)");
    let f = register(&mut s, "gone").await;
    m.allocate().await;
    let o = offers(&mut s).await;
    let launch = msg::LaunchTasksMessage {
        framework_id: id(&f),
        tasks: vec![common::task("t", &o.offers[0], "cpus:1;mem:64", None)],
        filters: v1::Filters::default(),
        offer_ids: vec![o.offers[0].id.clone()],
    };
    s.send("mesos.internal.LaunchTasksMessage", launch.encode_to_vec())
        .await;
    update(&mut s).await;
    s.exit();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        m.advance(Duration::from_millis(100)).await;
        let state = m.state().await;
        if state["frameworks"].as_array().unwrap().is_empty() {
            assert_eq!(state["completed_frameworks"][0]["id"], f.as_str());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still there: {state}"
        );
    }
    m.expect_empty().await;
}

/// Messages the master cannot take get a 4xx with the reason, and change
/// nothing; with `--token` the protocol (which cannot carry it) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_libprocess_messages_are_refused_with_a_reason() {
    let m = Master::start(Setup::default()).await;
    let s = Scheduler::start(&m, "scheduler(1)");
    let url = |name: &str| format!("{}/master/{name}", m.url);
    let no_sender = m
        .http
        .post(url("mesos.internal.RegisterFrameworkMessage"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_sender.status().as_u16(), 400);
    assert!(no_sender.text().await.unwrap().contains("sender"));
    let (status, text) = s
        .send_to(
            "master",
            "mesos.internal.RegisterFrameworkMessage",
            vec![0xff, 0x01],
        )
        .await;
    assert_eq!(status, 400);
    assert!(text.contains("Failed to parse"), "{text}");
    let (status, text) = s
        .send_to("master", "mesos.internal.NoSuchMessage", vec![])
        .await;
    assert_eq!(status, 400);
    assert!(text.contains("Unknown message"), "{text}");
    let (status, _) = s
        .send_to("nobody", "mesos.internal.RegisterFrameworkMessage", vec![])
        .await;
    assert_eq!(status, 404);
    let get = m
        .http
        .get(url("mesos.internal.RegisterFrameworkMessage"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 404);
    // A call of a framework this scheduler never registered.
    let (status, text) = s
        .send_to(
            "master",
            "mesos.scheduler.Call",
            scheduler_call("someone-else", call::Type::Revive).encode_to_vec(),
        )
        .await;
    assert_eq!(status, 403, "{text}");
    // A call that fails validation.
    let (status, text) = s
        .send_to(
            "master",
            "mesos.scheduler.Call",
            Call::default().encode_to_vec(),
        )
        .await;
    assert_eq!(status, 400);
    assert!(text.contains("type"), "{text}");
    assert!(m.state().await["frameworks"].as_array().unwrap().is_empty());

    let guarded = Master::start(Setup {
        token: Some("secret".to_string()),
        ..Setup::default()
    })
    .await;
    let mut s = Scheduler::start(&guarded, "scheduler(1)");
    let (status, text) = s
        .send_to(
            "master",
            "mesos.internal.RegisterFrameworkMessage",
            msg::RegisterFrameworkMessage {
                framework: framework_info("x", None),
            }
            .encode_to_vec(),
        )
        .await;
    assert_eq!(status, 401);
    assert!(text.contains("--token"), "{text}");
    // A scheduler's message to an agent's process too; an executor's is
    // not behind the token.
    let to_executor = msg::FrameworkToExecutorMessage {
        slave_id: v1::AgentId::default(),
        framework_id: id("f"),
        executor_id: v1::ExecutorId::default(),
        data: Vec::new(),
    };
    let (status, _) = s
        .send_to(
            "slave(1)",
            "mesos.internal.FrameworkToExecutorMessage",
            to_executor.encode_to_vec(),
        )
        .await;
    assert_eq!(status, 401);
    let register = msg::RegisterExecutorMessage {
        framework_id: id("f"),
        executor_id: v1::ExecutorId::default(),
    };
    let (status, text) = s
        .send_to(
            "slave(1)",
            "mesos.internal.RegisterExecutorMessage",
            register.encode_to_vec(),
        )
        .await;
    assert_eq!(status, 202, "{text}");
    // An executor its agent does not know is shut down, as upstream's agent
    // does.
    s.peer = format!("slave(1)@{}", guarded.url.trim_start_matches("http://"));
    let shutdown: msg::ShutdownExecutorMessage = s.next_of("ShutdownExecutorMessage").await;
    assert_eq!(shutdown.framework_id, Some(id("f")));
    assert!(
        guarded.state().await["frameworks"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Messages written byte for byte as libprocess writes them (both sender
/// headers, a `Host`, a chunked body, several on one kept connection whose
/// answers the sender never reads) are taken in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_as_libprocess_writes_them_are_taken_in_order() {
    use tokio::io::AsyncWriteExt;
    let m = Master::start(Setup::default()).await;
    let mut s = Scheduler::start(&m, "scheduler-0c7d");
    let pid = s.pid.clone();
    let encode = |name: &str, body: &[u8]| {
        let mut out = format!(
            "POST /master/{name} HTTP/1.1\r\nUser-Agent: libprocess/{pid}\r\nLibprocess-From: {pid}\r\nConnection: Keep-Alive\r\nHost: {host}\r\n",
            host = m.url.trim_start_matches("http://"),
        )
        .into_bytes();
        if body.is_empty() {
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(
                format!("Transfer-Encoding: chunked\r\n\r\n{:x}\r\n", body.len()).as_bytes(),
            );
            out.extend_from_slice(body);
            out.extend_from_slice(b"\r\n0\r\n\r\n");
        }
        out
    };
    let register = Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: framework_info("raw", None),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut link = tokio::net::TcpStream::connect(m.url.trim_start_matches("http://"))
        .await
        .unwrap();
    link.write_all(&encode("mesos.scheduler.Call", &register.encode_to_vec()))
        .await
        .unwrap();
    let f = registered(&mut s).await;
    m.allocate().await;
    let o = offers(&mut s).await;
    // Two messages in one write: a launch, then a kill of what it launched.
    let launch = msg::LaunchTasksMessage {
        framework_id: id(&f),
        tasks: vec![common::task("t", &o.offers[0], "cpus:1;mem:64", None)],
        filters: v1::Filters::default(),
        offer_ids: vec![o.offers[0].id.clone()],
    };
    let kill = msg::KillTaskMessage {
        framework_id: id(&f),
        task_id: v1::TaskId {
            value: "t".to_string(),
        },
        kill_policy: None,
    };
    let mut both = encode("mesos.internal.LaunchTasksMessage", &launch.encode_to_vec());
    both.extend(encode(
        "mesos.internal.KillTaskMessage",
        &kill.encode_to_vec(),
    ));
    link.write_all(&both).await.unwrap();
    let running = update(&mut s).await;
    assert_eq!(running.update.status.state(), v1::TaskState::TaskRunning);
    // The kill's update waits for this one's acknowledgement (one update
    // of a task in flight at a time).
    s.send(
        "mesos.internal.StatusUpdateAcknowledgementMessage",
        msg::StatusUpdateAcknowledgementMessage {
            slave_id: o.offers[0].agent_id.clone(),
            framework_id: id(&f),
            task_id: running.update.status.task_id.clone(),
            uuid: running.update.uuid.clone().expect("uuid"),
        }
        .encode_to_vec(),
    )
    .await;
    let killed = update(&mut s).await;
    assert_eq!(killed.update.status.state(), v1::TaskState::TaskKilled);
    // An empty body is a message too (it fails to parse here: 400 on the
    // same connection, which goes on).
    link.write_all(&encode("mesos.internal.UnregisterFrameworkMessage", &[]))
        .await
        .unwrap();
    link.write_all(&encode(
        "mesos.internal.UnregisterFrameworkMessage",
        &msg::UnregisterFrameworkMessage {
            framework_id: id(&f),
        }
        .encode_to_vec(),
    ))
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !m.state().await["frameworks"].as_array().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "not torn down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    m.expect_empty().await;
}

/// A scheduler that stops answering the master's messages stalls nothing:
/// another framework is served meanwhile, and once a message has waited its
/// time (10 s) the hung scheduler is taken as gone (no failover timeout:
/// its framework is removed, and the agents it was offered go to the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_that_never_answers_stalls_nothing() {
    let m = Master::start(Setup {
        agents: 2,
        ..Setup::default()
    })
    .await;
    let mut s = Scheduler::start(&m, "scheduler(1)");
    let hung = register(&mut s, "hung").await;
    m.allocate().await;
    assert_eq!(offers(&mut s).await.offers.len(), 2);
    s.hang.store(true, std::sync::atomic::Ordering::Relaxed);
    // Something for the master to tell it: its message now waits.
    s.send(
        "mesos.internal.ReconcileTasksMessage",
        msg::ReconcileTasksMessage {
            framework_id: id(&hung),
            statuses: vec![v1::TaskStatus {
                task_id: v1::TaskId {
                    value: "never".to_string(),
                },
                state: v1::TaskState::TaskStaging as i32,
                ..Default::default()
            }],
            framework: None,
        }
        .encode_to_vec(),
    )
    .await;
    let started = tokio::time::Instant::now();
    let mut other = m
        .subscribe(
            common::framework("other", "*"),
            unisched_mesos::codec::ContentType::Json,
        )
        .await;
    assert_eq!(m.state().await["frameworks"].as_array().unwrap().len(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "served while the other hangs"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut agents = std::collections::BTreeSet::new();
    while agents.len() < 2 {
        m.allocate().await;
        if let Some(e) = other
            .maybe_next_of(v1::scheduler::event::Type::Offers)
            .await
        {
            agents.extend(
                e.offers
                    .unwrap()
                    .offers
                    .into_iter()
                    .map(|o| o.agent_id.value),
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hung scheduler is still there"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "given its time"
    );
    let state = m.state().await;
    assert_eq!(state["completed_frameworks"][0]["id"], hung.as_str());
}

/// An executor on libmesos' executor driver (the older protocol): the test
/// plays it. The agent starts its command with MESOS_SLAVE_PID naming the
/// agent's process; the executor registers there and gets its tasks, kills,
/// acknowledgements, framework messages and shutdown as the older messages,
/// and its updates and messages reach the scheduler (a v1 one here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_on_the_native_executor_driver_runs_tasks() {
    use unisched_mesos::v1::scheduler::event;
    let m = Master::start(Setup {
        executor: unisched_mesos::agent::ExecutorKind::Process,
        ..Setup::default()
    })
    .await;
    let mut f = m
        .subscribe(
            common::framework("native-executor", "*"),
            unisched_mesos::codec::ContentType::Json,
        )
        .await;
    let offer = f.offers().await.remove(0);
    let mut t = common::task("t1", &offer, "cpus:0.5;mem:64", None);
    t.command = None;
    t.executor = Some(Box::new(v1::ExecutorInfo {
        executor_id: v1::ExecutorId {
            value: "runner".to_string(),
        },
        command: Some(v1::CommandInfo {
            value: Some("echo \"$MESOS_SLAVE_PID\" > slave_pid; exec sleep 600".to_string()),
            ..Default::default()
        }),
        shutdown_grace_period: Some(v1::DurationInfo {
            nanoseconds: 200_000_000,
        }),
        ..Default::default()
    }));
    assert_eq!(f.launch(&offer, vec![t]).await, 202);

    // The agent told the executor where it is.
    let agent = format!("slave(1)@{}", m.url.trim_start_matches("http://"));
    let deadline = tokio::time::Instant::now() + WAIT;
    let told = loop {
        let found = common::walk(&m.work_dir)
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == "slave_pid"))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .filter(|t| t.ends_with('\n'));
        if let Some(t) = found {
            break t;
        }
        assert!(tokio::time::Instant::now() < deadline, "no MESOS_SLAVE_PID");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(told.trim(), agent);

    let mut e = Scheduler::start(&m, "executor(1)");
    e.peer = agent.clone();
    let framework_id = id(&f.id);
    let executor_id = v1::ExecutorId {
        value: "runner".to_string(),
    };
    // Its updates before it registered are refused.
    let exec_pid = e.pid.clone();
    let update = |state: v1::TaskState, uuid: u8| msg::StatusUpdateMessage {
        update: msg::StatusUpdate {
            framework_id: framework_id.clone(),
            executor_id: Some(executor_id.clone()),
            slave_id: Some(offer.agent_id.clone()),
            status: v1::TaskStatus {
                task_id: v1::TaskId {
                    value: "t1".to_string(),
                },
                state: state as i32,
                ..Default::default()
            },
            timestamp: 1.0,
            uuid: Some(vec![uuid; 16]),
            latest_state: None,
        },
        pid: Some(exec_pid.clone()),
    };
    let (status, _) = e
        .send_to(
            "slave(1)",
            "mesos.internal.StatusUpdateMessage",
            update(v1::TaskState::TaskRunning, 1).encode_to_vec(),
        )
        .await;
    assert_eq!(status, 403);
    let register = msg::RegisterExecutorMessage {
        framework_id: framework_id.clone(),
        executor_id: executor_id.clone(),
    };
    let (status, _) = e
        .send_to(
            "slave(1)",
            "mesos.internal.RegisterExecutorMessage",
            register.encode_to_vec(),
        )
        .await;
    assert_eq!(status, 202);
    let r: msg::ExecutorRegisteredMessage = e.next_of("ExecutorRegisteredMessage").await;
    assert_eq!(r.executor_info.executor_id, executor_id);
    assert_eq!(r.framework_id, framework_id);
    assert_eq!(r.slave_id, offer.agent_id);
    assert_eq!(r.framework_info.id.as_ref(), Some(&framework_id));
    let run: msg::RunTaskMessage = e.next_of("RunTaskMessage").await;
    assert_eq!(run.task.task_id.value, "t1");
    assert_eq!(run.framework.id.as_ref(), Some(&framework_id));

    // An update with the executor's uuid; the acknowledgement comes back.
    let http = e.http.clone();
    let send = |name: &'static str, body: Vec<u8>| {
        let (http, url, pid) = (http.clone(), m.url.clone(), exec_pid.clone());
        async move {
            let r = http
                .post(format!("{url}/slave(1)/{name}"))
                .header("Libprocess-From", pid)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 202, "{name}");
        }
    };
    send(
        "mesos.internal.StatusUpdateMessage",
        update(v1::TaskState::TaskRunning, 7).encode_to_vec(),
    )
    .await;
    let running = f.update().await;
    assert_eq!(running.state(), v1::TaskState::TaskRunning);
    assert_eq!(running.uuid.as_deref(), Some(&[7u8; 16][..]));
    assert_eq!(running.source(), v1::task_status::Source::Executor);
    assert_eq!(f.acknowledge(&running).await, 202);
    let ack: msg::StatusUpdateAcknowledgementMessage =
        e.next_of("StatusUpdateAcknowledgementMessage").await;
    assert_eq!(
        (ack.task_id.value.as_str(), ack.uuid),
        ("t1", vec![7u8; 16])
    );

    // Messages both ways.
    send(
        "mesos.internal.ExecutorToFrameworkMessage",
        msg::ExecutorToFrameworkMessage {
            slave_id: offer.agent_id.clone(),
            framework_id: framework_id.clone(),
            executor_id: executor_id.clone(),
            data: b"up".to_vec(),
        }
        .encode_to_vec(),
    )
    .await;
    let got = f.next_of(event::Type::Message).await.message.unwrap();
    assert_eq!(got.data, b"up");
    let down = Call {
        message: Some(call::Message {
            agent_id: offer.agent_id.clone(),
            executor_id: executor_id.clone(),
            data: b"down".to_vec(),
        }),
        ..scheduler_call(&f.id, call::Type::Message)
    };
    assert_eq!(f.call(down).await.0, 202);
    let m2: msg::FrameworkToExecutorMessage = e.next_of("FrameworkToExecutorMessage").await;
    assert_eq!(m2.data, b"down");

    // KILL reaches the executor, which reports the end.
    let kill = Call {
        kill: Some(call::Kill {
            task_id: v1::TaskId {
                value: "t1".to_string(),
            },
            agent_id: Some(offer.agent_id.clone()),
            kill_policy: None,
        }),
        ..scheduler_call(&f.id, call::Type::Kill)
    };
    assert_eq!(f.call(kill).await.0, 202);
    let k: msg::KillTaskMessage = e.next_of("KillTaskMessage").await;
    assert_eq!(k.task_id.value, "t1");
    send(
        "mesos.internal.StatusUpdateMessage",
        update(v1::TaskState::TaskKilled, 8).encode_to_vec(),
    )
    .await;
    let killed = f.update().await;
    assert_eq!(killed.state(), v1::TaskState::TaskKilled);
    assert_eq!(f.acknowledge(&killed).await, 202);
    e.next_of::<msg::StatusUpdateAcknowledgementMessage>("StatusUpdateAcknowledgementMessage")
        .await;

    // SHUTDOWN of the executor: the message, then its process is ended.
    let shutdown = Call {
        shutdown: Some(call::Shutdown {
            executor_id: executor_id.clone(),
            agent_id: offer.agent_id.clone(),
        }),
        ..scheduler_call(&f.id, call::Type::Shutdown)
    };
    assert_eq!(f.call(shutdown).await.0, 202);
    let s: msg::ShutdownExecutorMessage = e.next_of("ShutdownExecutorMessage").await;
    assert_eq!(s.executor_id.as_ref(), Some(&executor_id));
    let failure = f.next_of(event::Type::Failure).await.failure.unwrap();
    assert_eq!(failure.executor_id.as_ref(), Some(&executor_id));
    assert_eq!(f.simple(call::Type::Teardown).await, 202);
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.expect_empty().await;
}

/// Plays a driver's authenticatee process `a` through SASL CRAM-MD5 for
/// the scheduler `client` with `principal` and `secret`: the name of the
/// message that ends it.
async fn authenticate(a: &mut Scheduler, client: &str, principal: &str, secret: &str) -> String {
    use hmac::{Hmac, Mac};
    a.send(
        "mesos.internal.AuthenticateMessage",
        msg::AuthenticateMessage {
            pid: client.to_string(),
        }
        .encode_to_vec(),
    )
    .await;
    let (name, session, body) = a.next_from().await;
    assert_eq!(name, "mesos.internal.AuthenticationMechanismsMessage");
    let at = format!("@{}", a.master.trim_start_matches("http://"));
    assert!(
        session.starts_with("crammd5-authenticator-session(") && session.ends_with(&at),
        "{session}"
    );
    let m = msg::AuthenticationMechanismsMessage::decode(body).unwrap();
    assert_eq!(m.mechanisms, vec!["CRAM-MD5".to_string()]);
    let process = session.split('@').next().unwrap().to_string();
    let start = msg::AuthenticationStartMessage {
        mechanism: "CRAM-MD5".to_string(),
        data: None,
    };
    let (status, text) = a
        .send_to(
            &process,
            "mesos.internal.AuthenticationStartMessage",
            start.encode_to_vec(),
        )
        .await;
    assert_eq!(status, 202, "{text}");
    let (name, from, body) = a.next_from().await;
    assert_eq!(
        (name.as_str(), from.as_str()),
        ("mesos.internal.AuthenticationStepMessage", session.as_str())
    );
    let challenge = msg::AuthenticationStepMessage::decode(body).unwrap().data;
    let mut mac = Hmac::<md5::Md5>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&challenge);
    let digest: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (status, text) = a
        .send_to(
            &process,
            "mesos.internal.AuthenticationStepMessage",
            msg::AuthenticationStepMessage {
                data: format!("{principal} {digest}").into_bytes(),
            }
            .encode_to_vec(),
        )
        .await;
    assert_eq!(status, 202, "{text}");
    let (name, from, _) = a.next_from().await;
    assert_eq!(from, session);
    name
}

/// Framework authentication on the libprocess protocol (SASL CRAM-MD5),
/// as a Mesos master with `--credentials` and `--authenticate_frameworks`:
/// a registration needs it, the principal must match, and under `--token`
/// an authenticated scheduler is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frameworks_authenticate_with_sasl_before_registering() {
    let m = Master::start(Setup {
        credentials: &[("fw", "s3cret")],
        authenticate_frameworks: true,
        ..Setup::default()
    })
    .await;
    let mut s = Scheduler::start(&m, "scheduler(1)");
    let mut a = Scheduler::start(&m, "sasl_authenticatee(1)");
    let registration = |principal: Option<&str>| msg::RegisterFrameworkMessage {
        framework: v1::FrameworkInfo {
            principal: principal.map(str::to_string),
            ..framework_info("sasl", None)
        },
    };
    // Not authenticated: refused with upstream's message.
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        registration(None).encode_to_vec(),
    )
    .await;
    let e: msg::FrameworkErrorMessage = s.next_of("FrameworkErrorMessage").await;
    assert_eq!(
        e.message,
        format!("Framework at {} is not authenticated", s.pid)
    );
    // A wrong secret fails; the scheduler is still not authenticated.
    assert_eq!(
        authenticate(&mut a, &s.pid, "fw", "wrong").await,
        "mesos.internal.AuthenticationFailedMessage"
    );
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        registration(None).encode_to_vec(),
    )
    .await;
    let _: msg::FrameworkErrorMessage = s.next_of("FrameworkErrorMessage").await;
    // Authenticated, but naming another principal.
    assert_eq!(
        authenticate(&mut a, &s.pid, "fw", "s3cret").await,
        "mesos.internal.AuthenticationCompletedMessage"
    );
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        registration(Some("other")).encode_to_vec(),
    )
    .await;
    let e: msg::FrameworkErrorMessage = s.next_of("FrameworkErrorMessage").await;
    assert_eq!(
        e.message,
        "Framework principal 'other' does not match authenticated principal 'fw'"
    );
    // With no principal it registers as the authenticated one.
    s.send(
        "mesos.internal.RegisterFrameworkMessage",
        registration(None).encode_to_vec(),
    )
    .await;
    let f = registered(&mut s).await;
    let state = m.state().await;
    assert_eq!(state["frameworks"][0]["id"], f.as_str());
    assert_eq!(state["frameworks"][0]["principal"], "fw");
    // As Mesos shows a framework on the libprocess protocol: its pid.
    assert_eq!(state["frameworks"][0]["pid"], s.pid.as_str());
    s.send(
        "mesos.internal.UnregisterFrameworkMessage",
        msg::UnregisterFrameworkMessage {
            framework_id: id(&f),
        }
        .encode_to_vec(),
    )
    .await;
    until(&m, "torn down", |st| {
        st["frameworks"].as_array().unwrap().is_empty()
    })
    .await;

    // Under --token: an authenticated scheduler is admitted, others not.
    let guarded = Master::start(Setup {
        token: Some("secret".to_string()),
        credentials: &[("fw", "s3cret")],
        ..Setup::default()
    })
    .await;
    let mut s = Scheduler::start(&guarded, "scheduler(1)");
    let mut a = Scheduler::start(&guarded, "sasl_authenticatee(1)");
    let (status, text) = s
        .send_to(
            "master",
            "mesos.internal.RegisterFrameworkMessage",
            registration(None).encode_to_vec(),
        )
        .await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("authenticate"), "{text}");
    assert_eq!(
        authenticate(&mut a, &s.pid, "fw", "s3cret").await,
        "mesos.internal.AuthenticationCompletedMessage"
    );
    let f = register(&mut s, "guarded").await;
    s.exit();
    // No failover timeout: the exit removes it.
    until(&guarded, "removed", |st| {
        st["completed_frameworks"][0]["id"] == f.as_str()
            && st["completed_frameworks"][0]["principal"] == "fw"
    })
    .await;

    // No credentials: an authentication is answered with an error, as a
    // Mesos master with none answers it.
    let open = Master::start(Setup::default()).await;
    let mut a = Scheduler::start(&open, "sasl_authenticatee(1)");
    a.send(
        "mesos.internal.AuthenticateMessage",
        msg::AuthenticateMessage {
            pid: "scheduler(1)@127.0.0.1:9".to_string(),
        }
        .encode_to_vec(),
    )
    .await;
    let e: msg::AuthenticationErrorMessage = a.next_of("AuthenticationErrorMessage").await;
    assert_eq!(e.error.as_deref(), Some("No authenticator loaded"));
    // A session that does not exist.
    let (status, _) = a
        .send_to(
            "crammd5-authenticator-session(99)",
            "mesos.internal.AuthenticationStepMessage",
            Vec::new(),
        )
        .await;
    assert_eq!(status, 404);
}

/// Waits (within WAIT) until the master's state satisfies `ok`.
async fn until(m: &Master, what: &str, ok: impl Fn(&serde_json::Value) -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let state = m.state().await;
        if ok(&state) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
