//! Mesos' older scheduler protocol, which frameworks on libmesos' native
//! scheduler driver (Spark's and Flink's Mesos back ends, Marathon,
//! Aurora, Chronos) and mesos-go's v0 driver speak: libprocess messages.
//!
//! A libprocess message is one HTTP POST to `/<process>/<message name>`
//! (`/master/mesos.internal.RegisterFrameworkMessage`), its body the
//! message in protobuf, its sender's process named by the `Libprocess-From`
//! header (or a `User-Agent` of `libprocess/<pid>`), a pid being
//! `<id>@<host>:<port>`. There are no responses to wait for: the receiver
//! answers 202 at once and the reply, if any, is a message of its own, sent
//! the same way to the sender's pid.
//!
//! Each registered scheduler is a **session** of this edge, which plays a
//! v1 client of the master on its behalf: its registration becomes a
//! SUBSCRIBE (through [`MasterHandle::subscribe`], so failover, failover
//! timeouts, offers and updates are the master's, shared with HTTP
//! frameworks), its messages become v1 calls on the subscription's stream
//! id, and the stream's events become the messages a v0 driver installs
//! (`FrameworkRegisteredMessage`, `ResourceOffersMessage`,
//! `StatusUpdateMessage`, ...), POSTed in order to the scheduler's pid.
//!
//! Executors on libmesos' executor driver speak the same protocol to their
//! agent's process (`slave(N)`, which the agent names in MESOS_SLAVE_PID):
//! an executor session subscribes such an executor to its supervisor
//! through the [`ExecutorHub`], as the v1 executor API does, and turns its
//! messages into that API's calls and the subscription's events into the
//! messages the executor driver installs.
//!
//! Ownership: one tokio task a session owns the subscription's receiver,
//! the outgoing messages and the link to the scheduler (a TCP connection
//! held open to its pid's address: when it closes and the address no
//! longer takes connections, the scheduler has exited, as libprocess'
//! `exited` says, and the framework is disconnected: its failover timeout
//! starts). The table of sessions (by pid and by framework id) is behind a
//! plain mutex taken only for lookups and updates, never across an await;
//! handlers reach a session through its control channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use prost::Message as _;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};

use super::auth::Access;
use super::sasl;
use super::{CallError, CallOutcome, Input, MasterHandle};
use crate::agent::custom::{CallAnswer, ExecutorHub};
use crate::internal as msg;
use crate::v1;
use crate::v1::executor;
use crate::v1::scheduler::call::Type as CallType;
use crate::v1::scheduler::event::Type as EventType;
use crate::v1::scheduler::{Call, Event, call};

/// A libprocess process address: `<id>@<host>:<port>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Upid {
    /// The process id (`scheduler(1)`, `scheduler-<uuid>`).
    pub id: String,
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Upid {
    /// Parses `<id>@<host>:<port>` (an IPv6 host in brackets).
    pub fn parse(text: &str) -> Option<Upid> {
        let (id, address) = text.trim().split_once('@')?;
        let (host, port) = address.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if id.is_empty() || host.is_empty() || id.contains('/') {
            return None;
        }
        Some(Upid {
            id: id.to_string(),
            host: host.to_string(),
            port: port.parse().ok().filter(|p| *p != 0)?,
        })
    }

    /// The URL a message named `name` is POSTed to.
    fn url(&self, name: &str) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}/{}/{name}", self.host, self.port, self.id)
        } else {
            format!("http://{}:{}/{}/{name}", self.host, self.port, self.id)
        }
    }
}

impl std::fmt::Display for Upid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}@[{}]:{}", self.id, self.host, self.port)
        } else {
            write!(f, "{}@{}:{}", self.id, self.host, self.port)
        }
    }
}

/// The sender of a libprocess message: `Libprocess-From`, else a
/// `User-Agent` of `libprocess/<pid>`.
pub fn sender(headers: &HeaderMap) -> Option<Upid> {
    if let Some(from) = headers.get("Libprocess-From") {
        return from.to_str().ok().and_then(Upid::parse);
    }
    headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|agent| agent.strip_prefix("libprocess/"))
        .and_then(Upid::parse)
}

/// True for the messages an executor sends its agent (which, as the
/// executor API, are not behind `--token`).
pub fn from_executor(name: &str) -> bool {
    matches!(
        name,
        "mesos.internal.RegisterExecutorMessage"
            | "mesos.internal.StatusUpdateMessage"
            | "mesos.internal.ExecutorToFrameworkMessage"
    )
}

/// How long one message may take to be taken by the scheduler.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection to a scheduler is kept unused.
const IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// A pause between two links to a scheduler that closed the last one.
const RELINK_PAUSE: Duration = Duration::from_millis(100);

/// What a handler asks of a live session.
enum Control {
    /// The scheduler registered again from the same pid: answer again.
    Registered,
    /// The scheduler deactivated its framework (`stop(failover)`): the
    /// framework is disconnected, the session ends.
    Deactivate,
}

/// How a registration was asked for, which says what its answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registration {
    /// A new framework, or one failing over: `FrameworkRegisteredMessage`.
    Registered,
    /// A framework re-registering: `FrameworkReregisteredMessage`.
    Reregistered,
}

/// A session in the table.
struct Entry {
    pid: Upid,
    stream_id: String,
    framework: Option<String>,
    control: mpsc::UnboundedSender<Control>,
}

struct Sessions {
    next: u64,
    by_key: HashMap<u64, Entry>,
    by_pid: HashMap<Upid, u64>,
    by_framework: HashMap<String, u64>,
    /// Framework authentication: sessions in progress, authenticated pids.
    auth: sasl::Authenticator,
}

/// The libprocess edge of the master (one a router).
pub struct Libprocess {
    master: MasterHandle,
    access: Arc<Access>,
    client: reqwest::Client,
    sessions: Mutex<Sessions>,
    stream_capacity: usize,
    /// The process agents' custom executors, for executors on libmesos'
    /// executor driver (`None`: no process agents).
    hub: Option<Arc<ExecutorHub>>,
    /// Registered libprocess executors by (framework, executor) id.
    executors: Mutex<HashMap<(String, String), ExecutorEntry>>,
}

/// A registered libprocess executor: its session's inbox of calls.
struct ExecutorEntry {
    key: u64,
    calls: mpsc::UnboundedSender<executor::Call>,
}

/// The answer to a message: a status and a reason.
pub type Answer = (StatusCode, String);

fn accepted() -> Answer {
    (StatusCode::ACCEPTED, String::new())
}

fn bad(reason: impl Into<String>) -> Answer {
    (StatusCode::BAD_REQUEST, reason.into())
}

fn decode<M: prost::Message + Default>(name: &str, body: &[u8]) -> Result<M, Answer> {
    M::decode(body).map_err(|e| bad(format!("Failed to parse {name}: {e}")))
}

fn new_call(kind: CallType, framework: &v1::FrameworkId) -> Call {
    Call {
        framework_id: Some(framework.clone()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

impl Libprocess {
    /// The edge for `master`; each session's subscription holds
    /// `stream_capacity` events.
    pub fn new(
        master: MasterHandle,
        stream_capacity: usize,
        hub: Option<Arc<ExecutorHub>>,
        access: Arc<Access>,
    ) -> Arc<Self> {
        // Connections are kept between messages (one a message would leave
        // a socket in TIME_WAIT for each, and a busy framework would run
        // out of ports), but not long: a scheduler closes idle ones
        // (mesos-go's after ten seconds), and a message sent on one it is
        // closing fails and is sent again (`Session::send`).
        let client = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()
            .unwrap_or_default();
        let sessions = Sessions {
            next: 0,
            by_key: HashMap::new(),
            by_pid: HashMap::new(),
            by_framework: HashMap::new(),
            auth: sasl::Authenticator::new(access.credentials.clone()),
        };
        Arc::new(Libprocess {
            master,
            access,
            client,
            sessions: Mutex::new(sessions),
            stream_capacity,
            hub,
            executors: Mutex::new(HashMap::new()),
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // A panic elsewhere while holding the lock leaves the table whole
        // (each update is one insert or remove): go on with it.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This master's pid, as every message it sends names it.
    fn pid(&self) -> String {
        self.master
            .info()
            .pid
            .clone()
            .unwrap_or_else(|| format!("master@127.0.0.1:{}", self.master.info().port))
    }

    /// Takes one message POSTed to `/<process>/<name>`.
    pub fn receive(
        self: &Arc<Self>,
        process: &str,
        name: &str,
        method: &Method,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Answer {
        if method != Method::POST {
            return (StatusCode::NOT_FOUND, String::new());
        }
        let Some(from) = sender(headers) else {
            return bad("Failed to determine sender from request headers");
        };
        let session = sasl::session_process(process);
        if process != "master" && !is_agent_process(process) && session.is_none() {
            return (
                StatusCode::NOT_FOUND,
                format!("no process '{process}' here"),
            );
        }
        if self.access.token.is_some()
            && !from_executor(name)
            && !sasl::is_authentication(name)
            && self.sessions().auth.principal(&from).is_none()
        {
            return (
                StatusCode::UNAUTHORIZED,
                "This master requires a token (--token), which the libprocess protocol cannot carry: authenticate first (SASL CRAM-MD5, a principal of --mesos-credentials), or use the v1 scheduler API (/api/v1/scheduler)".to_string(),
            );
        }
        tracing::debug!(%from, name, "libprocess message");
        if let Some(n) = session {
            let hostname = self.master.info().hostname.clone().unwrap_or_default();
            let reply = self.sessions().auth.step(n, &from, name, body, &hostname);
            return match reply {
                Ok(reply) => {
                    self.send_detached(reply);
                    accepted()
                }
                Err(a) => a,
            };
        }
        match name {
            "mesos.internal.AuthenticateMessage" => {
                let started = self.sessions().auth.authenticate(from, body);
                match started {
                    Ok((n, reply)) => {
                        if let Some(n) = n {
                            let edge = Arc::downgrade(self);
                            tokio::spawn(async move {
                                tokio::time::sleep(sasl::TIMEOUT).await;
                                if let Some(edge) = edge.upgrade() {
                                    edge.sessions().auth.expire(n);
                                }
                            });
                        }
                        self.send_detached(reply);
                        accepted()
                    }
                    Err(a) => a,
                }
            }
            "mesos.internal.RegisterFrameworkMessage" => {
                let m: msg::RegisterFrameworkMessage = match decode(name, body) {
                    Ok(m) => m,
                    Err(a) => return a,
                };
                self.register(from, subscribe_of(m.framework), None)
            }
            "mesos.internal.ReregisterFrameworkMessage" => {
                let m: msg::ReregisterFrameworkMessage = match decode(name, body) {
                    Ok(m) => m,
                    Err(a) => return a,
                };
                self.register(from, subscribe_of(m.framework), Some(m.failover))
            }
            "mesos.scheduler.Call" => {
                let call: Call = match decode(name, body) {
                    Ok(c) => c,
                    Err(a) => return a,
                };
                if let Err(e) = super::http::validate_call(&call) {
                    return bad(format!("Failed to validate scheduler::Call: {e}"));
                }
                if call.r#type() == CallType::Subscribe {
                    let force = msg::SchedulerCallForce::decode(body)
                        .ok()
                        .and_then(|c| c.subscribe)
                        .and_then(|s| s.force);
                    return self.register(from, call.subscribe.unwrap_or_default(), force);
                }
                self.forward(&from, call)
            }
            "mesos.internal.RegisterExecutorMessage" => {
                match decode::<msg::RegisterExecutorMessage>(name, body) {
                    Ok(m) => self.register_executor(from, process, m),
                    Err(a) => a,
                }
            }
            "mesos.internal.StatusUpdateMessage" | "mesos.internal.ExecutorToFrameworkMessage" => {
                match executor_call(name, body) {
                    Ok(call) => self.executor_call(call),
                    Err(a) => a,
                }
            }
            "mesos.internal.DeactivateFrameworkMessage" => {
                match decode::<msg::DeactivateFrameworkMessage>(name, body) {
                    Ok(m) => self.deactivate(&from, &m.framework_id.value),
                    Err(a) => a,
                }
            }
            _ => match Self::translate(name, body) {
                Ok(call) => self.forward(&from, call),
                Err(a) => a,
            },
        }
    }

    /// The v1 call of an old-style message.
    fn translate(name: &str, body: &[u8]) -> Result<Call, Answer> {
        let call = match name {
            "mesos.internal.UnregisterFrameworkMessage" => {
                let m: msg::UnregisterFrameworkMessage = decode(name, body)?;
                new_call(CallType::Teardown, &m.framework_id)
            }
            "mesos.internal.ResourceRequestMessage" => {
                let m: msg::ResourceRequestMessage = decode(name, body)?;
                Call {
                    request: Some(call::Request {
                        requests: m.requests,
                    }),
                    ..new_call(CallType::Request, &m.framework_id)
                }
            }
            "mesos.internal.LaunchTasksMessage" => {
                let m: msg::LaunchTasksMessage = decode(name, body)?;
                // Upstream turns it into an ACCEPT of one LAUNCH; with no
                // tasks that is a decline with the message's filters.
                let operations = if m.tasks.is_empty() {
                    Vec::new()
                } else {
                    vec![v1::offer::Operation {
                        r#type: Some(v1::offer::operation::Type::Launch as i32),
                        launch: Some(v1::offer::operation::Launch {
                            task_infos: m.tasks,
                        }),
                        ..Default::default()
                    }]
                };
                Call {
                    accept: Some(call::Accept {
                        offer_ids: m.offer_ids,
                        operations,
                        filters: Some(m.filters),
                    }),
                    ..new_call(CallType::Accept, &m.framework_id)
                }
            }
            "mesos.internal.ReviveOffersMessage" => {
                let m: msg::ReviveOffersMessage = decode(name, body)?;
                Call {
                    revive: Some(call::Revive { roles: m.roles }),
                    ..new_call(CallType::Revive, &m.framework_id)
                }
            }
            "mesos.internal.KillTaskMessage" => {
                let m: msg::KillTaskMessage = decode(name, body)?;
                Call {
                    kill: Some(call::Kill {
                        task_id: m.task_id,
                        agent_id: None,
                        kill_policy: m.kill_policy,
                    }),
                    ..new_call(CallType::Kill, &m.framework_id)
                }
            }
            "mesos.internal.StatusUpdateAcknowledgementMessage" => {
                let m: msg::StatusUpdateAcknowledgementMessage = decode(name, body)?;
                Call {
                    acknowledge: Some(call::Acknowledge {
                        agent_id: m.slave_id,
                        task_id: m.task_id,
                        uuid: m.uuid,
                    }),
                    ..new_call(CallType::Acknowledge, &m.framework_id)
                }
            }
            "mesos.internal.FrameworkToExecutorMessage" => {
                let m: msg::FrameworkToExecutorMessage = decode(name, body)?;
                Call {
                    message: Some(call::Message {
                        agent_id: m.slave_id,
                        executor_id: m.executor_id,
                        data: m.data,
                    }),
                    ..new_call(CallType::Message, &m.framework_id)
                }
            }
            "mesos.internal.ReconcileTasksMessage" => {
                let m: msg::ReconcileTasksMessage = decode(name, body)?;
                let tasks = m
                    .statuses
                    .into_iter()
                    .map(|s| call::reconcile::Task {
                        task_id: s.task_id,
                        agent_id: s.agent_id,
                    })
                    .collect();
                Call {
                    reconcile: Some(call::Reconcile { tasks }),
                    ..new_call(CallType::Reconcile, &m.framework_id)
                }
            }
            _ => return Err(bad(format!("Unknown message '{name}'"))),
        };
        super::http::validate_call(&call)
            .map_err(|e| bad(format!("Failed to validate {name}: {e}")))?;
        Ok(call)
    }

    /// The stream id and control channel of `framework`'s session, if
    /// `from` is its scheduler.
    fn session_of(
        &self,
        from: &Upid,
        framework: &str,
    ) -> Result<(String, mpsc::UnboundedSender<Control>), Answer> {
        let sessions = self.sessions();
        let entry = sessions
            .by_framework
            .get(framework)
            .and_then(|k| sessions.by_key.get(k));
        match entry {
            Some(e) if &e.pid == from => Ok((e.stream_id.clone(), e.control.clone())),
            Some(e) => {
                tracing::warn!(%from, framework, registered = %e.pid, "libprocess: a message not from the framework's scheduler, dropped");
                Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Framework {framework} is registered from {}, not {from}",
                        e.pid
                    ),
                ))
            }
            None => {
                tracing::warn!(%from, framework, "libprocess: a message of a framework not registered here, dropped");
                Err((
                    StatusCode::FORBIDDEN,
                    format!("Framework {framework} is not registered from {from}"),
                ))
            }
        }
    }

    /// Hands a call of a registered scheduler to the master, in the order
    /// messages came; its outcome is logged (a libprocess sender reads no
    /// answers).
    fn forward(&self, from: &Upid, call: Call) -> Answer {
        let framework = call
            .framework_id
            .as_ref()
            .map(|f| f.value.clone())
            .unwrap_or_default();
        let stream_id = match self.session_of(from, &framework) {
            Ok((stream_id, _)) => stream_id,
            Err(a) => return a,
        };
        let kind = call.r#type();
        let (reply, outcome) = oneshot::channel();
        if !self.master.send(Input::Call {
            call: Box::new(call),
            stream_id: Some(stream_id),
            principal: None,
            reply,
        }) {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the master has stopped".to_string(),
            );
        }
        tokio::spawn(async move {
            match outcome.await {
                Ok(Ok(CallOutcome::Accepted | CallOutcome::Ok)) | Err(_) => {}
                Ok(Err(CallError { status, message })) => {
                    tracing::warn!(framework, call = ?kind, status, message, "libprocess: a call the master refused");
                }
            }
        });
        accepted()
    }

    /// `DeactivateFrameworkMessage`: the scheduler stops for a failover.
    fn deactivate(&self, from: &Upid, framework: &str) -> Answer {
        match self.session_of(from, framework) {
            Ok((_, control)) => {
                let _ = control.send(Control::Deactivate);
                accepted()
            }
            Err(a) => a,
        }
    }

    /// A registration (either message, or a SUBSCRIBE call) from `from`;
    /// `failover` when the scheduler says it fails over.
    fn register(
        self: &Arc<Self>,
        from: Upid,
        mut subscribe: call::Subscribe,
        failover: Option<bool>,
    ) -> Answer {
        let wanted = subscribe
            .framework_info
            .id
            .as_ref()
            .map(|f| f.value.clone());
        let kind = match (&wanted, failover) {
            (None, _) | (Some(_), Some(true)) => Registration::Registered,
            (Some(_), _) => Registration::Reregistered,
        };
        let mut sessions = self.sessions();
        let info = &mut subscribe.framework_info;
        if let Err(why) = self.check_authentication(&sessions.auth, &from, info) {
            drop(sessions);
            tracing::info!(%from, why, "libprocess: a registration refused");
            self.send_detached(sasl::Reply {
                to: from,
                process: None,
                name: "mesos.internal.FrameworkErrorMessage",
                body: msg::FrameworkErrorMessage { message: why }.encode_to_vec(),
            });
            return accepted();
        }
        if let Some(entry) = sessions
            .by_pid
            .get(&from)
            .and_then(|k| sessions.by_key.get(k))
        {
            // The same scheduler again: a driver retries its registration
            // until it is answered. Answer again once subscribed, for the
            // framework it has; wait for the answer on the way otherwise.
            match (&entry.framework, &wanted) {
                (Some(have), Some(w)) if have != w => {}
                (Some(_), _) => {
                    let _ = entry.control.send(Control::Registered);
                    return accepted();
                }
                (None, _) => return accepted(),
            }
        }
        let (stream_id, events) =
            self.master
                .subscribe_from(subscribe, self.stream_capacity, Some(from.to_string()));
        let (control, controls) = mpsc::unbounded_channel();
        sessions.next += 1;
        let key = sessions.next;
        sessions.by_key.insert(
            key,
            Entry {
                pid: from.clone(),
                stream_id: stream_id.clone(),
                framework: None,
                control,
            },
        );
        if let Some(old) = sessions.by_pid.insert(from.clone(), key)
            && let Some(e) = sessions.by_key.get(&old)
        {
            // That scheduler's earlier framework is replaced from the same
            // process: the master fails it over or keeps it as it decides.
            let _ = e.control.send(Control::Deactivate);
        }
        drop(sessions);
        tracing::info!(%from, framework = ?wanted, "libprocess: a scheduler registers");
        let edge = Arc::clone(self);
        tokio::spawn(async move {
            let session = Session {
                edge: Arc::clone(&edge),
                key,
                pid: from,
                stream_id,
                kind,
                framework: None,
                agents: HashMap::new(),
            };
            session.run(events, controls).await;
        });
        accepted()
    }

    /// Mesos' checks of a registration's authentication: it must have
    /// authenticated when `--mesos-authenticate-frameworks` says so, and
    /// its `FrameworkInfo.principal` must be the principal it did as (set
    /// to it when absent).
    fn check_authentication(
        &self,
        auth: &sasl::Authenticator,
        from: &Upid,
        info: &mut v1::FrameworkInfo,
    ) -> Result<(), String> {
        if auth.authenticating(from) {
            return Err("Re-authentication in progress".to_string());
        }
        let principal = auth.principal(from);
        if self.access.authenticate_frameworks && principal.is_none() {
            return Err(format!("Framework at {from} is not authenticated"));
        }
        match (principal, &info.principal) {
            (Some(p), Some(i)) if p != i => Err(format!(
                "Framework principal '{i}' does not match authenticated principal '{p}'"
            )),
            (Some(p), None) => {
                info.principal = Some(p.to_string());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Sends `reply` from the master (or its named process) without
    /// waiting: an authentication's steps and refusals, each the answer to
    /// a message whose sender waits for it before sending the next.
    fn send_detached(&self, reply: sasl::Reply) {
        let master = self.pid();
        let from = match &reply.process {
            None => master,
            Some(p) => {
                let address = master.split_once('@').map_or("", |(_, a)| a);
                format!("{p}@{address}")
            }
        };
        let client = self.client.clone();
        tokio::spawn(async move {
            post(&client, &reply.to, &from, reply.name, reply.body).await;
        });
    }

    fn executor_sessions(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), ExecutorEntry>> {
        self.executors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `RegisterExecutorMessage` from an executor of a process agent, sent
    /// to the agent's process (`slave(N)`, from its MESOS_SLAVE_PID): a
    /// session subscribes it to its supervisor as an HTTP executor would.
    /// A registration again replaces the session (the supervisor takes the
    /// new subscription in place of the old).
    fn register_executor(
        self: &Arc<Self>,
        from: Upid,
        process: &str,
        m: msg::RegisterExecutorMessage,
    ) -> Answer {
        let Some(hub) = self.hub.clone() else {
            return (
                StatusCode::NOT_FOUND,
                "no agent here runs executors".to_string(),
            );
        };
        if !is_agent_process(process) {
            return bad("Executors register with their agent's process (MESOS_SLAVE_PID)");
        }
        let id = (m.framework_id.value.clone(), m.executor_id.value.clone());
        let (calls, inbox) = mpsc::unbounded_channel();
        let key = {
            let mut sessions = self.sessions();
            sessions.next += 1;
            sessions.next
        };
        self.executor_sessions()
            .insert(id.clone(), ExecutorEntry { key, calls });
        let agent = hub.process_pid(process);
        tracing::info!(%from, framework = id.0, executor = id.1, "libprocess: an executor registers");
        let session = ExecutorSession {
            edge: Arc::clone(self),
            hub,
            key,
            pid: from,
            agent,
            framework: m.framework_id,
            executor: m.executor_id,
            framework_info: None,
            agent_id: None,
        };
        tokio::spawn(session.run(inbox));
        accepted()
    }

    /// An executor's call (its update or its message), to its session,
    /// which makes it in the order they came.
    fn executor_call(&self, call: executor::Call) -> Answer {
        let id = (
            call.framework_id.value.clone(),
            call.executor_id.value.clone(),
        );
        match self.executor_sessions().get(&id) {
            Some(e) if e.calls.send(call).is_ok() => accepted(),
            _ => (
                StatusCode::FORBIDDEN,
                "Executor is not registered".to_string(),
            ),
        }
    }

    /// True when `framework` is registered through this edge.
    pub fn serves(&self, framework: &str) -> bool {
        self.sessions().by_framework.contains_key(framework)
    }
}

/// `slave(N)`: an agent's process, to which a driver sends the messages it
/// has the agent's pid for (an executor's data, acknowledgements).
fn is_agent_process(process: &str) -> bool {
    process
        .strip_prefix("slave(")
        .and_then(|r| r.strip_suffix(')'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn subscribe_of(framework_info: v1::FrameworkInfo) -> call::Subscribe {
    call::Subscribe {
        framework_info,
        ..Default::default()
    }
}

/// Why a session ended.
enum End {
    /// The master closed the subscription (teardown, removal, failover to
    /// another subscriber, or it stopped): nothing to tell it.
    ByMaster,
    /// The scheduler went away or deactivated: its framework is disconnected.
    ByScheduler,
}

/// One registered scheduler (see the module's documentation).
struct Session {
    edge: Arc<Libprocess>,
    key: u64,
    pid: Upid,
    stream_id: String,
    kind: Registration,
    framework: Option<(v1::FrameworkId, v1::MasterInfo)>,
    /// Agent id → the agent's pid, from the offers seen.
    agents: HashMap<String, String>,
}

impl Session {
    async fn run(
        mut self,
        mut events: super::stream::EventReceiver,
        mut controls: mpsc::UnboundedReceiver<Control>,
    ) {
        let link = gone(self.pid.clone());
        tokio::pin!(link);
        let end = loop {
            tokio::select! {
                event = events.recv_raw() => {
                    let Some(event) = event else { break End::ByMaster };
                    if !self.deliver(event.into_event()).await {
                        break End::ByScheduler;
                    }
                }
                control = controls.recv() => match control {
                    Some(Control::Registered) => {
                        if let Some((id, info)) = self.framework.clone()
                            && !self.send_registered(id, info).await
                        {
                            break End::ByScheduler;
                        }
                    }
                    Some(Control::Deactivate) | None => break End::ByScheduler,
                },
                () = &mut link => {
                    tracing::info!(pid = %self.pid, "libprocess: the scheduler exited");
                    break End::ByScheduler;
                }
            }
        };
        let framework = self.framework.as_ref().map(|(id, _)| id.value.clone());
        if let (End::ByScheduler, Some(framework)) = (end, &framework) {
            self.edge.master.send(Input::StreamClosed {
                framework: framework.clone(),
                stream_id: self.stream_id.clone(),
            });
        }
        let mut sessions = self.edge.sessions();
        sessions.by_key.remove(&self.key);
        if sessions.by_pid.get(&self.pid) == Some(&self.key) {
            sessions.by_pid.remove(&self.pid);
            // As Mesos on a disconnection: a driver authenticates again
            // before it registers again.
            sessions.auth.forget(&self.pid);
        }
        if let Some(f) = framework
            && sessions.by_framework.get(&f) == Some(&self.key)
        {
            sessions.by_framework.remove(&f);
        }
    }

    /// Sends what a v0 driver gets for `event`; false when the scheduler
    /// could not be reached.
    async fn deliver(&mut self, event: Event) -> bool {
        let framework = self.framework.as_ref().map(|(id, _)| id.clone());
        match event.r#type() {
            EventType::Subscribed => {
                let Some(s) = event.subscribed else {
                    return true;
                };
                let info = s
                    .master_info
                    .unwrap_or_else(|| self.edge.master.info().clone());
                let id = s.framework_id;
                {
                    let mut sessions = self.edge.sessions();
                    sessions.by_framework.insert(id.value.clone(), self.key);
                    if let Some(e) = sessions.by_key.get_mut(&self.key) {
                        e.framework = Some(id.value.clone());
                    }
                }
                self.framework = Some((id.clone(), info.clone()));
                self.send_registered(id, info).await
            }
            EventType::Offers => {
                let offers = event.offers.map(|o| o.offers).unwrap_or_default();
                let pids = offers
                    .iter()
                    .map(|o| {
                        let pid = agent_pid(o).unwrap_or_else(|| self.edge.pid());
                        self.agents.insert(o.agent_id.value.clone(), pid.clone());
                        pid
                    })
                    .collect();
                self.send(
                    "mesos.internal.ResourceOffersMessage",
                    msg::ResourceOffersMessage { offers, pids }.encode_to_vec(),
                )
                .await
            }
            EventType::Rescind => match event.rescind {
                Some(r) => {
                    self.send(
                        "mesos.internal.RescindResourceOfferMessage",
                        msg::RescindResourceOfferMessage {
                            offer_id: r.offer_id,
                        }
                        .encode_to_vec(),
                    )
                    .await
                }
                None => true,
            },
            EventType::Update => match (event.update, framework) {
                (Some(u), Some(framework_id)) => {
                    let m = self.status_update(u.status, framework_id);
                    self.send("mesos.internal.StatusUpdateMessage", m.encode_to_vec())
                        .await
                }
                _ => true,
            },
            EventType::Message => match (event.message, framework) {
                (Some(m), Some(framework_id)) => {
                    let body = msg::ExecutorToFrameworkMessage {
                        slave_id: m.agent_id,
                        framework_id,
                        executor_id: m.executor_id,
                        data: m.data,
                    };
                    self.send(
                        "mesos.internal.ExecutorToFrameworkMessage",
                        body.encode_to_vec(),
                    )
                    .await
                }
                _ => true,
            },
            EventType::Failure => match (event.failure, framework) {
                (Some(f), Some(framework_id)) => match (f.agent_id, f.executor_id) {
                    (Some(slave_id), Some(executor_id)) => {
                        let body = msg::ExitedExecutorMessage {
                            slave_id,
                            framework_id,
                            executor_id,
                            status: f.status.unwrap_or(0),
                        };
                        self.send("mesos.internal.ExitedExecutorMessage", body.encode_to_vec())
                            .await
                    }
                    (Some(slave_id), None) => {
                        self.send(
                            "mesos.internal.LostSlaveMessage",
                            msg::LostSlaveMessage { slave_id }.encode_to_vec(),
                        )
                        .await
                    }
                    _ => true,
                },
                _ => true,
            },
            EventType::Error => {
                let message = event.error.map(|e| e.message).unwrap_or_default();
                self.send(
                    "mesos.internal.FrameworkErrorMessage",
                    msg::FrameworkErrorMessage { message }.encode_to_vec(),
                )
                .await
            }
            // No heartbeats in this protocol (the link says the scheduler
            // is there), and v0 drivers have no callback for operation
            // feedback or inverse offers.
            other => {
                tracing::trace!(pid = %self.pid, event = ?other, "libprocess: an event with no v0 message");
                true
            }
        }
    }

    /// A v1 update as the master's `StatusUpdateMessage`: `pid` names the
    /// agent when the update wants an acknowledgement, and is left out for
    /// the master's own updates (reconciliation, invalid offers), which
    /// drivers must not acknowledge.
    fn status_update(
        &self,
        status: v1::TaskStatus,
        framework_id: v1::FrameworkId,
    ) -> msg::StatusUpdateMessage {
        let uuid = status.uuid.clone();
        let pid = uuid.as_ref().map(|_| {
            status
                .agent_id
                .as_ref()
                .and_then(|a| self.agents.get(&a.value).cloned())
                .unwrap_or_else(|| self.edge.pid())
        });
        let timestamp = status.timestamp.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        });
        msg::StatusUpdateMessage {
            update: msg::StatusUpdate {
                framework_id,
                executor_id: status.executor_id.clone(),
                slave_id: status.agent_id.clone(),
                timestamp,
                uuid,
                latest_state: None,
                status,
            },
            pid,
        }
    }

    async fn send_registered(
        &self,
        framework_id: v1::FrameworkId,
        master_info: v1::MasterInfo,
    ) -> bool {
        let (name, body) = match self.kind {
            Registration::Registered => (
                "mesos.internal.FrameworkRegisteredMessage",
                msg::FrameworkRegisteredMessage {
                    framework_id,
                    master_info,
                }
                .encode_to_vec(),
            ),
            Registration::Reregistered => (
                "mesos.internal.FrameworkReregisteredMessage",
                msg::FrameworkReregisteredMessage {
                    framework_id,
                    master_info,
                }
                .encode_to_vec(),
            ),
        };
        self.send(name, body).await
    }

    /// POSTs one message to the scheduler ([`post`]); false when it
    /// cannot be reached.
    async fn send(&self, name: &str, body: Vec<u8>) -> bool {
        post(&self.edge.client, &self.pid, &self.edge.pid(), name, body).await
    }
}

/// POSTs one message named `name` from process `from` to `to`; false when
/// `to` cannot be reached (a process that answers but refuses the message
/// only loses it, as libprocess drops a message its receiver does not
/// take). A failed send is tried once more, on a new connection when the
/// failure was a kept one the receiver closed; a message that did arrive
/// before its answer was lost then arrives twice, which the messages allow
/// (an update is delivered at least once, an offer or a registration again
/// is the same one).
async fn post(client: &reqwest::Client, to: &Upid, from: &str, name: &str, body: Vec<u8>) -> bool {
    let body = Bytes::from(body);
    let attempt = || {
        client
            .post(to.url(name))
            .header("Libprocess-From", from)
            // As libprocess writes it: mesos-go's server keeps the
            // connection only when told so in these very letters.
            .header(axum::http::header::CONNECTION, "Keep-Alive")
            .header(axum::http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body.clone())
            .send()
    };
    let sent = match attempt().await {
        Err(e) if !e.is_timeout() => {
            tracing::debug!(%to, name, error = ?e, "libprocess: a send failed, tried again");
            attempt().await
        }
        other => other,
    };
    match sent {
        Ok(r) if r.status().is_success() => true,
        Ok(r) => {
            tracing::warn!(%to, name, status = %r.status(), "libprocess: a message refused");
            true
        }
        Err(e) => {
            tracing::info!(%to, name, error = ?e, "libprocess: a process cannot be reached");
            false
        }
    }
}

/// The executor API call of an executor's older message: its
/// `StatusUpdateMessage` (UPDATE, with the update's uuid and the executor
/// as the status' source, as upstream's agent sets them) or its
/// `ExecutorToFrameworkMessage` (MESSAGE).
fn executor_call(name: &str, body: &[u8]) -> Result<executor::Call, Answer> {
    let call = if name == "mesos.internal.StatusUpdateMessage" {
        let m: msg::StatusUpdateMessage = decode(name, body)?;
        let update = m.update;
        let executor_id = update.executor_id.clone().unwrap_or_default();
        let mut status = update.status;
        status.uuid = update.uuid;
        status.source = Some(v1::task_status::Source::Executor as i32);
        status.executor_id = Some(executor_id.clone());
        if status.agent_id.is_none() {
            status.agent_id = update.slave_id;
        }
        executor::Call {
            executor_id,
            framework_id: update.framework_id,
            r#type: Some(executor::call::Type::Update as i32),
            update: Some(executor::call::Update { status }),
            ..Default::default()
        }
    } else {
        let m: msg::ExecutorToFrameworkMessage = decode(name, body)?;
        executor::Call {
            executor_id: m.executor_id,
            framework_id: m.framework_id,
            r#type: Some(executor::call::Type::Message as i32),
            message: Some(executor::call::Message { data: m.data }),
            ..Default::default()
        }
    };
    crate::agent::custom::validate_call(&call)
        .map_err(|e| bad(format!("Failed to validate {name}: {e}")))?;
    Ok(call)
}

/// A libprocess executor: its subscription to its supervisor, its calls,
/// and the messages its driver installs, POSTed in order from its agent's
/// process.
struct ExecutorSession {
    edge: Arc<Libprocess>,
    hub: Arc<ExecutorHub>,
    key: u64,
    pid: Upid,
    /// The agent's pid, as the executor was told it (MESOS_SLAVE_PID).
    agent: String,
    framework: v1::FrameworkId,
    executor: v1::ExecutorId,
    /// From SUBSCRIBED: what each RunTaskMessage carries.
    framework_info: Option<v1::FrameworkInfo>,
    agent_id: Option<v1::AgentId>,
}

impl ExecutorSession {
    async fn run(mut self, mut calls: mpsc::UnboundedReceiver<executor::Call>) {
        let subscribe = executor::Call {
            executor_id: self.executor.clone(),
            framework_id: self.framework.clone(),
            r#type: Some(executor::call::Type::Subscribe as i32),
            subscribe: Some(executor::call::Subscribe::default()),
            ..Default::default()
        };
        match self.hub.call(subscribe).await {
            Ok(CallAnswer::Stream(mut events)) => loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(e) => {
                            if !self.deliver(e).await {
                                break;
                            }
                        }
                        None => break,
                    },
                    call = calls.recv() => match call {
                        Some(c) => {
                            let kind = c.r#type();
                            if let Err((status, message)) = self.hub.call(c).await {
                                tracing::warn!(pid = %self.pid, call = ?kind, status, message, "libprocess: an executor's call refused");
                            }
                        }
                        // Registered again: the new session has it.
                        None => break,
                    },
                }
            },
            Ok(CallAnswer::Accepted) => {}
            Err((status, message)) => {
                // Upstream's agent shuts an executor it does not know down.
                tracing::warn!(pid = %self.pid, status, message, "libprocess: an executor's registration refused");
                self.shutdown().await;
            }
        }
        let mut sessions = self.edge.executor_sessions();
        let id = (self.framework.value.clone(), self.executor.value.clone());
        if sessions.get(&id).is_some_and(|e| e.key == self.key) {
            sessions.remove(&id);
        }
    }

    async fn shutdown(&self) -> bool {
        let body = msg::ShutdownExecutorMessage {
            executor_id: Some(self.executor.clone()),
            framework_id: Some(self.framework.clone()),
        };
        self.send(
            "mesos.internal.ShutdownExecutorMessage",
            body.encode_to_vec(),
        )
        .await
    }

    async fn send(&self, name: &str, body: Vec<u8>) -> bool {
        post(&self.edge.client, &self.pid, &self.agent, name, body).await
    }

    /// Sends what a v0 executor driver gets for `event`; false when the
    /// executor cannot be reached.
    async fn deliver(&mut self, event: executor::Event) -> bool {
        use executor::event::Type;
        let slave_id = self.agent_id.clone().unwrap_or_default();
        match event.r#type() {
            Type::Subscribed => {
                let Some(s) = event.subscribed else {
                    return true;
                };
                let slave_id = s.agent_info.id.clone().unwrap_or_default();
                self.agent_id = Some(slave_id.clone());
                self.framework_info = Some(s.framework_info.clone());
                let body = msg::ExecutorRegisteredMessage {
                    executor_info: s.executor_info,
                    framework_id: self.framework.clone(),
                    framework_info: s.framework_info,
                    slave_id,
                    slave_info: s.agent_info,
                };
                self.send(
                    "mesos.internal.ExecutorRegisteredMessage",
                    body.encode_to_vec(),
                )
                .await
            }
            Type::Launch => match event.launch {
                Some(l) => {
                    let body = msg::RunTaskMessage {
                        framework_id: Some(self.framework.clone()),
                        framework: self.framework_info.clone().unwrap_or_default(),
                        pid: Some(self.edge.pid()),
                        task: l.task,
                    };
                    self.send("mesos.internal.RunTaskMessage", body.encode_to_vec())
                        .await
                }
                None => true,
            },
            Type::Kill => match event.kill {
                Some(k) => {
                    let body = msg::KillTaskMessage {
                        framework_id: self.framework.clone(),
                        task_id: k.task_id,
                        kill_policy: k.kill_policy,
                    };
                    self.send("mesos.internal.KillTaskMessage", body.encode_to_vec())
                        .await
                }
                None => true,
            },
            Type::Acknowledged => match event.acknowledged {
                Some(a) => {
                    let body = msg::StatusUpdateAcknowledgementMessage {
                        slave_id,
                        framework_id: self.framework.clone(),
                        task_id: a.task_id,
                        uuid: a.uuid,
                    };
                    self.send(
                        "mesos.internal.StatusUpdateAcknowledgementMessage",
                        body.encode_to_vec(),
                    )
                    .await
                }
                None => true,
            },
            Type::Message => match event.message {
                Some(m) => {
                    let body = msg::FrameworkToExecutorMessage {
                        slave_id,
                        framework_id: self.framework.clone(),
                        executor_id: self.executor.clone(),
                        data: m.data,
                    };
                    self.send(
                        "mesos.internal.FrameworkToExecutorMessage",
                        body.encode_to_vec(),
                    )
                    .await
                }
                None => true,
            },
            Type::Shutdown => self.shutdown().await,
            // Task groups go only to executors of the v1 API (upstream's
            // default executor); heartbeats are the link's business.
            other => {
                tracing::debug!(pid = %self.pid, event = ?other, "libprocess: an executor event with no v0 message");
                true
            }
        }
    }
}

/// An agent's pid from its offer's URL (`/slave(N)` at the master's address).
fn agent_pid(offer: &v1::Offer) -> Option<String> {
    let url = offer.url.as_ref()?;
    let process = url.path.as_deref()?.trim_start_matches('/');
    let address = &url.address;
    let host = address.ip.as_deref().or(address.hostname.as_deref())?;
    Some(format!("{process}@{host}:{}", address.port))
}

/// Resolves once the scheduler at `pid` has exited: a connection to its
/// address closed, and a new one is refused. A scheduler that closes idle
/// connections (mesos-go's closes them after ten seconds) is linked again.
async fn gone(pid: Upid) {
    loop {
        let Ok(mut link) = tokio::net::TcpStream::connect((pid.host.as_str(), pid.port)).await
        else {
            return;
        };
        let mut buf = [0u8; 512];
        loop {
            match link.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        tokio::time::sleep(RELINK_PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_parse_and_print() {
        let p = Upid::parse("scheduler(1)@127.0.0.1:45678").expect("parses");
        assert_eq!(p.id, "scheduler(1)");
        assert_eq!(p.host, "127.0.0.1");
        assert_eq!(p.port, 45678);
        assert_eq!(p.to_string(), "scheduler(1)@127.0.0.1:45678");
        assert_eq!(
            p.url("mesos.internal.FrameworkRegisteredMessage"),
            "http://127.0.0.1:45678/scheduler(1)/mesos.internal.FrameworkRegisteredMessage"
        );
        let v6 = Upid::parse("scheduler-9@[::1]:5051").expect("parses");
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.to_string(), "scheduler-9@[::1]:5051");
        for bad in [
            "", "nohost", "@h:1", "a@h", "a@h:0", "a@h:x", "a@:5", "a/b@h:1",
        ] {
            assert!(Upid::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn the_sender_comes_from_either_header() {
        let mut h = HeaderMap::new();
        assert!(sender(&h).is_none());
        h.insert(
            "User-Agent",
            "libprocess/scheduler(2)@10.0.0.1:7000".parse().unwrap(),
        );
        assert_eq!(sender(&h).map(|p| p.id), Some("scheduler(2)".to_string()));
        h.insert(
            "Libprocess-From",
            "scheduler(3)@10.0.0.1:7000".parse().unwrap(),
        );
        assert_eq!(sender(&h).map(|p| p.id), Some("scheduler(3)".to_string()));
    }

    /// libmesos parses with protobuf's C++ library, which refuses a message
    /// missing a `required` field: those are written even when zero.
    #[test]
    fn required_fields_are_written_even_when_zero() {
        let update = msg::StatusUpdate {
            framework_id: v1::FrameworkId::default(),
            status: v1::TaskStatus::default(),
            timestamp: 0.0,
            ..Default::default()
        };
        let bytes = update.encode_to_vec();
        // framework_id (1), status (4) and timestamp (5, a 64-bit double).
        assert_eq!(bytes.first(), Some(&0x0a));
        assert!(bytes.contains(&0x22));
        assert!(
            bytes
                .windows(9)
                .any(|w| w == [0x29, 0, 0, 0, 0, 0, 0, 0, 0])
        );
        let reregister = msg::ReregisterFrameworkMessage {
            framework: v1::FrameworkInfo::default(),
            failover: false,
        };
        assert!(reregister.encode_to_vec().ends_with(&[0x18, 0x00]));
    }

    /// Whatever a body holds, an old-style message becomes a valid call or
    /// a 400 with a reason; nothing panics.
    #[test]
    fn any_body_of_any_message_is_a_valid_call_or_a_reason() {
        let names = [
            "mesos.internal.UnregisterFrameworkMessage",
            "mesos.internal.ResourceRequestMessage",
            "mesos.internal.LaunchTasksMessage",
            "mesos.internal.ReviveOffersMessage",
            "mesos.internal.KillTaskMessage",
            "mesos.internal.StatusUpdateAcknowledgementMessage",
            "mesos.internal.FrameworkToExecutorMessage",
            "mesos.internal.ReconcileTasksMessage",
        ];
        // Bodies: random bytes, and real messages cut short or changed in
        // one byte (which mostly still parse).
        let launch = msg::LaunchTasksMessage {
            framework_id: v1::FrameworkId {
                value: "f".to_string(),
            },
            tasks: vec![v1::TaskInfo::default()],
            filters: v1::Filters::default(),
            offer_ids: vec![v1::OfferId {
                value: "o".to_string(),
            }],
        }
        .encode_to_vec();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut valid, mut refused) = (0, 0);
        for round in 0..20_000 {
            let body: Vec<u8> = if round % 2 == 0 {
                (0..next() % 64).map(|_| next() as u8).collect()
            } else {
                let mut b = launch.clone();
                let cut = (next() as usize) % (b.len() + 1);
                b.truncate(cut);
                if let Some(byte) = b.get_mut((next() as usize) % cut.max(1)) {
                    *byte = next() as u8;
                }
                b
            };
            let name = names[(next() as usize) % names.len()];
            match Libprocess::translate(name, &body) {
                Ok(call) => {
                    assert!(super::super::http::validate_call(&call).is_ok());
                    valid += 1;
                }
                Err((status, reason)) => {
                    assert_eq!(status, StatusCode::BAD_REQUEST);
                    assert!(!reason.is_empty());
                    refused += 1;
                }
            }
        }
        assert!(
            valid > 100 && refused > 100,
            "{valid} valid, {refused} refused"
        );
        let unknown = Libprocess::translate("mesos.internal.Nothing", &[]);
        assert!(unknown.is_err_and(|(_, r)| r.contains("Unknown message")));
    }

    #[test]
    fn agent_processes() {
        assert!(is_agent_process("slave(1)"));
        assert!(is_agent_process("slave(12)"));
        for no in ["slave()", "slave(x)", "slave", "master", "slave(1"] {
            assert!(!is_agent_process(no), "{no}");
        }
    }
}
