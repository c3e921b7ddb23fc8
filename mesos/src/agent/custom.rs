//! Custom executors on the process agent: a framework's own executor program
//! (an `ExecutorInfo` of type CUSTOM, or of no type, with a command) runs in
//! its sandbox and talks to the agent through Mesos' v1 executor HTTP API
//! (`POST /api/v1/executor`), as executor libraries (pymesos'
//! `MesosExecutorDriver`, mesos-go's executor package) expect.
//!
//! The agent starts the program with Mesos' environment
//! (`MESOS_AGENT_ENDPOINT`, `MESOS_FRAMEWORK_ID`, `MESOS_EXECUTOR_ID`,
//! `MESOS_DIRECTORY`, `MESOS_SANDBOX`, `MESOS_CHECKPOINT`,
//! `MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`, ...). The executor SUBSCRIBEs;
//! the agent answers with a stream of events: SUBSCRIBED, then LAUNCH for
//! each task (those that came before the subscription wait for it), KILL,
//! MESSAGE (framework messages), ACKNOWLEDGED (when the scheduler
//! acknowledges an update) and SHUTDOWN. The executor reports each task's
//! states with UPDATE calls (its own uuid, which the scheduler acknowledges)
//! and sends framework messages with MESSAGE calls.
//!
//! As upstream: an executor that does not subscribe within a minute is
//! killed and its tasks fail (REASON_EXECUTOR_REGISTRATION_TIMEOUT); when
//! the executor's process ends, its unfinished tasks end TASK_FAILED,
//! REASON_EXECUTOR_TERMINATED ("Executor terminated"), and the framework
//! gets FAILURE with the exit status; SHUTDOWN gives the
//! executor its shutdown grace period to exit before its process group is
//! SIGKILLed. The endpoint is not authenticated (upstream's default,
//! `--authenticate_http_executors=false`); an executor is found by its
//! framework and executor ids, which only this agent's executors are given.
//!
//! Ownership: one supervisor (a tokio task) per executor owns its process,
//! its subscription stream, its queued and live tasks and their
//! unacknowledged updates. Everything reaches it through its inbox: the
//! agent's calls (launch, kill, shutdown, message, acknowledgement) and the
//! executor's own calls, which the HTTP edge hands over through the
//! [`ExecutorHub`] (calls that need an answer carry a oneshot for it).
//! Locks: the agent's table, then the hub's map (a launch that starts an
//! executor registers it in the hub while it holds the table), never the
//! other way round; each only to look up or change its maps, never across
//! an await.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::process::{
    End, Shared, check_containers, command_environment, mount_volumes, prepare_sandbox, spawn,
};
use super::simulated::{task_status, unix_seconds};
use super::{AgentUpdate, Launch};
use crate::v1;
use crate::v1::TaskState;
use crate::v1::executor::{Call, Event, call, event};
use crate::v1::task_status::Reason;

/// How long an executor has to subscribe (upstream's
/// `--executor_registration_timeout` default).
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(60);

/// How often a subscribed executor gets HEARTBEAT (upstream's
/// `DEFAULT_EXECUTOR_HEARTBEAT_INTERVAL`).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// Events an executor's stream holds before the executor is deemed not to
/// read it (the stream is then closed; the executor may subscribe again).
const STREAM_CAPACITY: usize = 1024;

/// (framework id, executor id).
type Key = (String, String);

/// Where the executor API finds the executors of every process agent of a
/// master (they share its HTTP port, as agents of `mesos-local` share their
/// process' port).
#[derive(Debug)]
pub struct ExecutorHub {
    /// `ip:port` executors are told to call (`MESOS_AGENT_ENDPOINT`).
    endpoint: SocketAddr,
    executors: Mutex<HashMap<Key, mpsc::UnboundedSender<Input>>>,
}

/// What an executor's call gets back.
#[derive(Debug)]
pub enum CallAnswer {
    /// 202.
    Accepted,
    /// 200 with this stream of events (SUBSCRIBE).
    Stream(mpsc::Receiver<Event>),
}

/// A refused call: HTTP status and message.
pub type CallRefusal = (u16, String);

impl ExecutorHub {
    /// A hub whose executors call the agent at `endpoint`.
    pub fn new(endpoint: SocketAddr) -> Arc<Self> {
        Arc::new(Self {
            endpoint,
            executors: Mutex::new(HashMap::new()),
        })
    }

    fn map(&self) -> MutexGuard<'_, HashMap<Key, mpsc::UnboundedSender<Input>>> {
        self.executors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands a validated call to its executor's supervisor (the HTTP edge
    /// encodes a SUBSCRIBE's stream).
    pub async fn call(&self, call: Call) -> Result<CallAnswer, CallRefusal> {
        let key = (
            call.framework_id.value.clone(),
            call.executor_id.value.clone(),
        );
        let inbox = {
            let map = self.map();
            match map.get(&key) {
                Some(inbox) => inbox.clone(),
                None if map.keys().any(|(f, _)| *f == key.0) => {
                    return Err((400, "Executor cannot be found".to_string()));
                }
                None => return Err((400, "Framework cannot be found".to_string())),
            }
        };
        let (reply, answer) = oneshot::channel();
        let gone = || (400, "Executor cannot be found".to_string());
        inbox
            .send(Input::Call {
                call: Box::new(call),
                reply,
            })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// The libprocess pid of agent `agent_id` (`slave(N)@ip:port`, the
    /// master's port), where executors on libmesos' executor driver
    /// register (MESOS_SLAVE_PID).
    pub fn agent_pid(&self, agent_id: &str) -> String {
        let n = crate::master::units::agent_process(agent_id).unwrap_or(1);
        self.process_pid(&format!("slave({n})"))
    }

    /// The pid of process `process` served on the agents' port (127.0.0.1
    /// for a port served on every address).
    pub fn process_pid(&self, process: &str) -> String {
        let ip = match self.endpoint.ip() {
            ip if ip.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
            ip => ip,
        };
        format!("{process}@{}", SocketAddr::new(ip, self.endpoint.port()))
    }

    fn register(&self, key: Key, inbox: mpsc::UnboundedSender<Input>) {
        self.map().insert(key, inbox);
    }

    fn unregister(&self, key: &Key, inbox: &mpsc::UnboundedSender<Input>) {
        let mut map = self.map();
        if map.get(key).is_some_and(|i| i.same_channel(inbox)) {
            map.remove(key);
        }
    }
}

/// What reaches an executor's supervisor.
#[derive(Debug)]
pub(super) enum Input {
    /// A task for the executor.
    Launch(Box<Launch>),
    /// KILL from the scheduler, with the grace period the master chose.
    Kill { task: String, grace: Duration },
    /// SHUTDOWN of the executor from the scheduler.
    Shutdown,
    /// A framework message for the executor.
    Message(Vec<u8>),
    /// The scheduler acknowledged the task's update `uuid`.
    Acknowledged { task: String, uuid: Vec<u8> },
    /// A call of the executor's.
    Call {
        call: Box<Call>,
        reply: oneshot::Sender<Result<CallAnswer, CallRefusal>>,
    },
    /// The framework is gone: shut down, report nothing.
    Discard,
    /// The agent is going away: SIGKILL now, report nothing.
    Stop,
}

/// Starts the supervisor of a new executor run for `launch` (its first
/// task), registered in the hub; its inbox.
pub(super) fn start(
    shared: Arc<Shared>,
    hub: Arc<ExecutorHub>,
    launch: &Launch,
    executor: v1::ExecutorInfo,
    run_dir: PathBuf,
) -> mpsc::UnboundedSender<Input> {
    let framework_id = super::simulated::framework_id(&launch.framework);
    let key = (framework_id.clone(), executor.executor_id.value.clone());
    let (inbox, receiver) = mpsc::unbounded_channel();
    hub.register(key.clone(), inbox.clone());
    let grace = executor
        .shutdown_grace_period
        .as_ref()
        .map_or(DEFAULT_SHUTDOWN_GRACE, |d| {
            Duration::from_nanos(d.nanoseconds.max(0).unsigned_abs())
        });
    let mut framework = launch.framework.clone();
    framework.id.get_or_insert_with(|| v1::FrameworkId {
        value: framework_id.clone(),
    });
    let supervisor = ExecutorSupervisor {
        shared: Arc::clone(&shared),
        hub,
        inbox: inbox.clone(),
        key,
        framework,
        executor,
        run_dir,
        grace,
        queued: Vec::new(),
        live: BTreeSet::new(),
        unacknowledged: BTreeMap::new(),
        seen: std::collections::HashSet::new(),
        stream: None,
        heartbeat_at: None,
        subscribed_once: false,
        ever_sent: false,
        shutting_down: false,
        quiet: false,
        process_group: None,
        escalate_at: None,
        finished: false,
    };
    shared.runtime.spawn(supervisor.run(receiver));
    inbox
}

/// Upstream's `--executor_shutdown_grace_period` default.
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Owns one executor run. See the module doc.
struct ExecutorSupervisor {
    shared: Arc<Shared>,
    hub: Arc<ExecutorHub>,
    /// Its own inbox's sender (to unregister exactly it).
    inbox: mpsc::UnboundedSender<Input>,
    key: Key,
    framework: v1::FrameworkInfo,
    executor: v1::ExecutorInfo,
    run_dir: PathBuf,
    grace: Duration,
    /// Tasks waiting for the executor to subscribe.
    queued: Vec<v1::TaskInfo>,
    /// Tasks handed to the executor and not ended.
    live: BTreeSet<String>,
    /// Per task, the uuids of its updates sent on and not yet acknowledged.
    unacknowledged: BTreeMap<String, VecDeque<Vec<u8>>>,
    /// Every update uuid sent on (an update comes once).
    seen: std::collections::HashSet<Vec<u8>>,
    /// The executor's event stream while it is subscribed.
    stream: Option<mpsc::Sender<Event>>,
    /// When the stream's next HEARTBEAT is due.
    heartbeat_at: Option<Instant>,
    subscribed_once: bool,
    /// A task has been handed to the executor.
    ever_sent: bool,
    /// SHUTDOWN (or a discard) is under way.
    shutting_down: bool,
    /// Nothing more is reported (discarded or stopped).
    quiet: bool,
    process_group: Option<Pid>,
    /// When the process group gets SIGKILL.
    escalate_at: Option<Instant>,
    /// Out of the hub and the table (`finish` ran).
    finished: bool,
}

fn never() -> Instant {
    Instant::now() + Duration::from_secs(365 * 24 * 3600)
}

impl ExecutorSupervisor {
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Input>) {
        let exit = match self.start_process(&mut inbox).await {
            Ok(child) => self.supervise(child, &mut inbox).await,
            Err(end) => {
                self.end_all(&end);
                Some(-1)
            }
        };
        self.finish(exit);
        // Out of the table now: nothing more is sent here. What came in the
        // meantime ends (a call's dropped answer tells its caller the
        // executor is gone).
        inbox.close();
        while let Ok(input) = inbox.try_recv() {
            if let Input::Launch(launch) = input {
                self.report(
                    &launch.task.task_id.value,
                    End::agent(
                        TaskState::TaskFailed,
                        Reason::ExecutorTerminated,
                        "The executor exited before it got the task",
                    ),
                );
            }
        }
    }

    /// Prepares the sandbox and starts the executor's command; takes the
    /// inputs that arrive meanwhile.
    async fn start_process(
        &mut self,
        inbox: &mut mpsc::UnboundedReceiver<Input>,
    ) -> Result<Child, End> {
        let Some(command) = self.executor.command.clone() else {
            return Err(End::agent(
                TaskState::TaskFailed,
                Reason::ExecutorTerminated,
                "The executor has no command",
            ));
        };
        let volumes = self
            .executor
            .resources
            .iter()
            .filter_map(|r| {
                let path = r.disk.as_ref()?.volume.as_ref()?.container_path.clone();
                Some((self.shared.volume_directory(r)?, path))
            })
            .collect::<Vec<_>>();
        let run_dir = self.run_dir.clone();
        let prepared = async {
            prepare_sandbox(&run_dir, &run_dir, &command.uris).await?;
            mount_volumes(&volumes, &run_dir).await
        };
        tokio::pin!(prepared);
        let prepared = loop {
            tokio::select! {
                prepared = &mut prepared => break prepared,
                input = inbox.recv() => match input {
                    Some(input) => {
                        if self.take_before_start(input) {
                            return Err(End::agent(
                                TaskState::TaskKilled,
                                Reason::ExecutorTerminated,
                                "The executor was shut down before it started",
                            ));
                        }
                    }
                    None => return Err(End::agent(
                        TaskState::TaskFailed,
                        Reason::ExecutorTerminated,
                        "The agent went away",
                    )),
                },
            }
        };
        if let Err(e) = prepared {
            return Err(End::agent(
                TaskState::TaskFailed,
                Reason::ContainerLaunchFailed,
                format!("Failed to launch container: {e}"),
            ));
        }
        let child = spawn(&command, self.environment(&command), &run_dir).map_err(|e| {
            End::agent(
                TaskState::TaskFailed,
                Reason::ContainerLaunchFailed,
                format!("Failed to launch executor: {e}"),
            )
        })?;
        self.process_group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        Ok(child)
    }

    /// An input before the process runs; true when the run is to end
    /// (shut down, discarded, stopped).
    fn take_before_start(&mut self, input: Input) -> bool {
        match input {
            Input::Launch(launch) => self.launch(*launch),
            Input::Kill { task, .. } => self.kill_queued(&task),
            Input::Shutdown => {
                self.shutting_down = true;
                return true;
            }
            Input::Discard | Input::Stop => {
                self.quiet = true;
                return true;
            }
            // The executor's calls, and messages and acknowledgements for
            // it, are taken as once it runs (a subscription may come first).
            other => self.take(other),
        }
        false
    }

    /// Runs until the executor's process ends; its wait status (`None`
    /// when it could not be read).
    async fn supervise(
        &mut self,
        mut child: Child,
        inbox: &mut mpsc::UnboundedReceiver<Input>,
    ) -> Option<i32> {
        let registration = Instant::now() + REGISTRATION_TIMEOUT;
        let mut inbox_open = true;
        let waited = loop {
            let stream_closed = async {
                match &self.stream {
                    Some(s) => s.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                waited = child.wait() => break waited,
                input = inbox.recv(), if inbox_open => match input {
                    Some(input) => self.take(input),
                    None => {
                        inbox_open = false;
                        self.stop();
                    }
                },
                () = stream_closed => {
                    // The executor hung up; it may subscribe again.
                    self.stream = None;
                }
                () = tokio::time::sleep_until(registration), if !self.subscribed_once && !self.shutting_down => {
                    self.registration_timed_out();
                }
                () = tokio::time::sleep_until(self.escalate_at.unwrap_or_else(never)), if self.escalate_at.is_some() => {
                    self.escalate_at = None;
                    self.signal(Signal::SIGKILL);
                }
                () = tokio::time::sleep_until(self.heartbeat_at.unwrap_or_else(never)), if self.heartbeat_at.is_some() && self.stream.is_some() => {
                    self.heartbeat_at = Some(Instant::now() + HEARTBEAT_INTERVAL);
                    self.event(Event {
                        r#type: Some(event::Type::Heartbeat as i32),
                        ..Default::default()
                    });
                }
            }
        };
        // Whatever the executor left in its group goes with it.
        self.signal(Signal::SIGKILL);
        self.process_group = None;
        // As upstream's agent reports the tasks an executor left unfinished
        // (shut down or not): failed, "Executor terminated".
        let (state, message) = (TaskState::TaskFailed, "Executor terminated".to_string());
        if let Err(e) = &waited {
            tracing::warn!(executor = %self.key.1, error = %e, "the executor's exit status could not be read");
        }
        self.end_all(&End::agent(state, Reason::ExecutorTerminated, message));
        use std::os::unix::process::ExitStatusExt as _;
        waited.ok().map(|s| s.into_raw())
    }

    fn take(&mut self, input: Input) {
        match input {
            Input::Launch(launch) => self.launch(*launch),
            Input::Kill { task, grace } => self.kill(&task, grace),
            Input::Shutdown => self.shutdown(),
            Input::Message(data) => {
                self.event(Event {
                    r#type: Some(event::Type::Message as i32),
                    message: Some(event::Message { data }),
                    ..Default::default()
                });
            }
            Input::Acknowledged { task, uuid } => self.acknowledged(&task, uuid),
            Input::Call { call, reply } => {
                let answer = self.executor_call(*call);
                let _ = reply.send(answer);
            }
            Input::Discard => {
                self.quiet = true;
                self.shutdown();
            }
            Input::Stop => self.stop(),
        }
    }

    /// A task for the executor: handed over now when it is subscribed,
    /// else when it subscribes.
    fn launch(&mut self, launch: Launch) {
        let task = launch.task;
        let task_id = task.task_id.value.clone();
        if self.shutting_down {
            self.report(
                &task_id,
                End::agent(
                    TaskState::TaskFailed,
                    Reason::ExecutorTerminated,
                    "The executor is shutting down",
                ),
            );
            self.forget_task(&task_id);
            return;
        }
        if let Err(end) = check_containers(&task, None) {
            self.report(&task_id, end);
            self.forget_task(&task_id);
            return;
        }
        if self.stream.is_some() {
            self.hand_over(task);
        } else {
            self.queued.push(task);
        }
    }

    fn hand_over(&mut self, task: v1::TaskInfo) {
        self.ever_sent = true;
        self.live.insert(task.task_id.value.clone());
        self.event(Event {
            r#type: Some(event::Type::Launch as i32),
            launch: Some(event::Launch { task }),
            ..Default::default()
        });
    }

    /// A task killed before the executor got it ends at once. An executor
    /// that never got a task and has none left waiting is shut down, as
    /// upstream's agent does.
    fn kill_queued(&mut self, task: &str) {
        if let Some(i) = self.queued.iter().position(|t| t.task_id.value == task) {
            self.queued.remove(i);
            self.report(
                task,
                End::agent(
                    TaskState::TaskKilled,
                    Reason::TaskKilledDuringLaunch,
                    "Killed before delivery to the executor",
                ),
            );
            self.forget_task(task);
            if !self.ever_sent && self.queued.is_empty() {
                self.shutdown();
            }
        }
    }

    fn kill(&mut self, task: &str, grace: Duration) {
        if self.queued.iter().any(|t| t.task_id.value == task) {
            return self.kill_queued(task);
        }
        if !self.live.contains(task) {
            return;
        }
        let nanoseconds = i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX);
        self.event(Event {
            r#type: Some(event::Type::Kill as i32),
            kill: Some(event::Kill {
                task_id: v1::TaskId {
                    value: task.to_string(),
                },
                kill_policy: Some(v1::KillPolicy {
                    grace_period: Some(v1::DurationInfo { nanoseconds }),
                }),
            }),
            ..Default::default()
        });
    }

    /// SHUTDOWN: the executor is told, and has its grace period to exit;
    /// one that never subscribed is signalled at once.
    fn shutdown(&mut self) {
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        let queued = std::mem::take(&mut self.queued);
        for task in queued {
            let id = task.task_id.value;
            self.report(
                &id,
                End::agent(
                    TaskState::TaskKilled,
                    Reason::ExecutorTerminated,
                    "The executor was shut down before it got the task",
                ),
            );
            self.forget_task(&id);
        }
        if self.stream.is_some() {
            self.event(Event {
                r#type: Some(event::Type::Shutdown as i32),
                ..Default::default()
            });
        } else {
            self.signal(Signal::SIGTERM);
        }
        self.escalate_at = Some(Instant::now() + self.grace);
    }

    fn stop(&mut self) {
        self.quiet = true;
        self.shutting_down = true;
        self.signal(Signal::SIGKILL);
    }

    fn registration_timed_out(&mut self) {
        let message = format!(
            "Executor did not register within {}",
            mesos_duration(REGISTRATION_TIMEOUT)
        );
        self.end_all(&End::agent(
            TaskState::TaskFailed,
            Reason::ExecutorRegistrationTimeout,
            message,
        ));
        self.shutting_down = true;
        self.signal(Signal::SIGKILL);
    }

    fn acknowledged(&mut self, task: &str, uuid: Vec<u8>) {
        let Some(pending) = self.unacknowledged.get_mut(task) else {
            return;
        };
        let Some(i) = pending.iter().position(|u| *u == uuid) else {
            return;
        };
        pending.remove(i);
        if pending.is_empty() {
            self.unacknowledged.remove(task);
        }
        self.event(Event {
            r#type: Some(event::Type::Acknowledged as i32),
            acknowledged: Some(event::Acknowledged {
                task_id: v1::TaskId {
                    value: task.to_string(),
                },
                uuid,
            }),
            ..Default::default()
        });
    }

    /// A call of the executor's (validated by the edge).
    fn executor_call(&mut self, call: Call) -> Result<CallAnswer, CallRefusal> {
        match call.r#type() {
            call::Type::Subscribe => {
                let resent = call.subscribe.map(|s| s.unacknowledged_updates);
                let events = self.subscribe();
                // Updates it holds unacknowledged that never reached the
                // agent (a call lost with its connection) count now; those
                // that did are not sent twice.
                for update in resent.into_iter().flatten() {
                    let status = update.status;
                    let valid = status.uuid.as_ref().is_some_and(|u| u.len() == 16)
                        && status.source() == v1::task_status::Source::Executor
                        && status.state() != TaskState::TaskStaging;
                    if valid {
                        self.update(status);
                    }
                }
                Ok(CallAnswer::Stream(events))
            }
            _ if !self.subscribed_once => Err((403, "Executor is not subscribed".to_string())),
            call::Type::Update => {
                let status = call.update.map(|u| u.status).unwrap_or_default();
                self.update(status);
                Ok(CallAnswer::Accepted)
            }
            call::Type::Message => {
                if !self.quiet {
                    (self.shared.sink)(AgentUpdate::Message {
                        agent_id: self.shared.agent_id.clone(),
                        framework_id: self.key.0.clone(),
                        executor_id: self.key.1.clone(),
                        data: call.message.map(|m| m.data).unwrap_or_default(),
                    });
                }
                Ok(CallAnswer::Accepted)
            }
            call::Type::Heartbeat | call::Type::Unknown => Ok(CallAnswer::Accepted),
        }
    }

    /// SUBSCRIBE: a new stream (an older one closes), SUBSCRIBED first,
    /// then the tasks that waited. An executor being shut down gets SHUTDOWN
    /// alone, and the stream ends, as upstream answers it.
    fn subscribe(&mut self) -> mpsc::Receiver<Event> {
        let (sender, events) = mpsc::channel(STREAM_CAPACITY);
        if self.shutting_down {
            let _ = sender.try_send(Event {
                r#type: Some(event::Type::Shutdown as i32),
                ..Default::default()
            });
            return events;
        }
        self.stream = Some(sender);
        self.subscribed_once = true;
        self.heartbeat_at = Some(Instant::now() + HEARTBEAT_INTERVAL);
        let mut executor = self.executor.clone();
        executor
            .framework_id
            .get_or_insert_with(|| v1::FrameworkId {
                value: self.key.0.clone(),
            });
        let run = self
            .run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.event(Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed {
                executor_info: executor,
                framework_info: self.framework.clone(),
                agent_info: v1::AgentInfo {
                    hostname: self.hub.endpoint.ip().to_string(),
                    id: Some(v1::AgentId {
                        value: self.shared.agent_id.clone(),
                    }),
                    port: Some(i32::from(self.hub.endpoint.port())),
                    ..Default::default()
                },
                container_id: Some(v1::ContainerId {
                    value: run,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        });
        for task in std::mem::take(&mut self.queued) {
            self.hand_over(task);
        }
        if !self.ever_sent {
            // Its tasks were all killed before it came.
            self.shutdown();
        }
        events
    }

    /// UPDATE: the task's state goes to the master with the executor's
    /// uuid; the scheduler's acknowledgement comes back as ACKNOWLEDGED.
    fn update(&mut self, mut status: v1::TaskStatus) {
        let task = status.task_id.value.clone();
        if status.uuid.as_ref().is_some_and(|u| self.seen.contains(u)) {
            return; // Sent on already.
        }
        if !self.live.contains(&task) {
            tracing::debug!(framework = %self.key.0, executor = %self.key.1, %task, "update for a task this executor does not run; ignored");
            return;
        }
        let state = status.state();
        status.agent_id = Some(v1::AgentId {
            value: self.shared.agent_id.clone(),
        });
        status.executor_id = Some(self.executor.executor_id.clone());
        status.timestamp.get_or_insert_with(unix_seconds);
        if let Some(uuid) = &status.uuid {
            self.seen.insert(uuid.clone());
            self.unacknowledged
                .entry(task.clone())
                .or_default()
                .push_back(uuid.clone());
        }
        if state.is_terminal() {
            self.live.remove(&task);
            self.forget_task(&task);
        }
        if !self.quiet {
            (self.shared.sink)(AgentUpdate::Status {
                agent_id: self.shared.agent_id.clone(),
                framework_id: self.key.0.clone(),
                status: Box::new(status),
            });
        }
    }

    /// Ends every task not ended yet with `end` (queued ones too).
    fn end_all(&mut self, end: &End) {
        let tasks: Vec<String> = self
            .queued
            .drain(..)
            .map(|t| t.task_id.value)
            .chain(std::mem::take(&mut self.live))
            .collect();
        for task in tasks {
            self.report(
                &task,
                End::agent(
                    end.state,
                    end.reason.unwrap_or(Reason::ExecutorTerminated),
                    end.message.clone(),
                ),
            );
            self.forget_task(&task);
        }
    }

    /// Sends a status the agent decided.
    fn report(&self, task: &str, end: End) {
        if self.quiet || self.shared.table().stopped {
            return;
        }
        let status = task_status(
            &self.shared.agent_id,
            task,
            &self.key.1,
            end.state,
            end.reason,
            Some(end.message),
            end.source,
            unix_seconds(),
        );
        (self.shared.sink)(AgentUpdate::Status {
            agent_id: self.shared.agent_id.clone(),
            framework_id: self.key.0.clone(),
            status: Box::new(status),
        });
    }

    /// The agent's table stops routing the task here.
    fn forget_task(&self, task: &str) {
        self.shared
            .table()
            .custom_tasks
            .remove(&(self.key.0.clone(), task.to_string()));
    }

    /// Queues an event on the stream, if there is one; a stream the
    /// executor does not read is closed.
    fn event(&mut self, event: Event) {
        let Some(stream) = &self.stream else { return };
        if stream.try_send(event).is_err() {
            tracing::warn!(framework = %self.key.0, executor = %self.key.1, "executor stream full or gone; closed");
            self.stream = None;
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(group) = self.process_group
            && let Err(e) = killpg(group, signal)
        {
            tracing::debug!(executor = %self.key.1, %signal, error = %e, "signal to the executor's process group failed");
        }
    }

    /// The executor's process ended (wait status `exit`): out of the hub
    /// and the agent's table; the framework hears of it (FAILURE).
    fn finish(&mut self, exit: Option<i32>) {
        self.finished = true;
        self.hub.unregister(&self.key, &self.inbox);
        let report = {
            let mut table = self.shared.table();
            if table
                .custom
                .get(&self.key)
                .is_some_and(|i| i.same_channel(&self.inbox))
            {
                table.custom.remove(&self.key);
            }
            let framework = self.key.0.clone();
            let executor = self.key.1.clone();
            table
                .custom_tasks
                .retain(|(f, _), e| *f != framework || *e != executor);
            !self.quiet && !table.stopped
        };
        self.stream = None;
        if report {
            (self.shared.sink)(AgentUpdate::ExecutorExited {
                agent_id: self.shared.agent_id.clone(),
                framework_id: self.key.0.clone(),
                executor_id: self.key.1.clone(),
                status: exit.unwrap_or(-1),
            });
        }
    }

    /// Mesos' variables for an executor, then the command's (which win).
    fn environment(&self, command: &v1::CommandInfo) -> Vec<(String, String)> {
        let directory = self.run_dir.to_string_lossy().into_owned();
        let mut env = vec![
            ("MESOS_FRAMEWORK_ID".to_string(), self.key.0.clone()),
            ("MESOS_EXECUTOR_ID".to_string(), self.key.1.clone()),
            ("MESOS_AGENT_ID".to_string(), self.shared.agent_id.clone()),
            ("MESOS_SLAVE_ID".to_string(), self.shared.agent_id.clone()),
            (
                "MESOS_AGENT_ENDPOINT".to_string(),
                self.hub.endpoint.to_string(),
            ),
            // For an executor on libmesos' (libprocess) executor driver.
            (
                "MESOS_SLAVE_PID".to_string(),
                self.hub.agent_pid(&self.shared.agent_id),
            ),
            ("MESOS_DIRECTORY".to_string(), directory.clone()),
            ("MESOS_SANDBOX".to_string(), directory),
            ("MESOS_CHECKPOINT".to_string(), "0".to_string()),
            ("MESOS_HTTP_COMMAND_EXECUTOR".to_string(), "0".to_string()),
            (
                "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD".to_string(),
                mesos_duration(self.grace),
            ),
        ];
        env.extend(command_environment(command, &self.key.1));
        env
    }
}

impl Drop for ExecutorSupervisor {
    /// A supervisor dropped before its end (the runtime shutting down, or a
    /// bug panicking) still kills its processes; after a panic its tasks
    /// are reported failed and the executor gone, so nothing hangs in the
    /// master.
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
        if std::thread::panicking() && !self.finished {
            self.end_all(&End::agent(
                TaskState::TaskFailed,
                Reason::ExecutorTerminated,
                "The embedded agent's supervisor of this executor failed",
            ));
            self.finish(None);
        }
    }
}

/// Checks an executor's call as upstream's agent does before it looks for
/// the executor: the reason for a 400 otherwise.
pub fn validate_call(call: &Call) -> Result<(), String> {
    let executor = &call.executor_id.value;
    let framework = &call.framework_id.value;
    match call.r#type() {
        call::Type::Unknown => Err("Expecting 'type' to be present".to_string()),
        call::Type::Subscribe if call.subscribe.is_none() => {
            Err("Expecting 'subscribe' to be present".to_string())
        }
        call::Type::Update => {
            let Some(update) = &call.update else {
                return Err("Expecting 'update' to be present".to_string());
            };
            let status = &update.status;
            let Some(uuid) = &status.uuid else {
                return Err("Expecting 'uuid' to be present".to_string());
            };
            if uuid.len() != 16 {
                return Err(format!("Not a UUID: {} bytes", uuid.len()));
            }
            if let Some(id) = &status.executor_id
                && id.value != *executor
            {
                return Err(format!(
                    "ExecutorID in Call: {executor} does not match ExecutorID in TaskStatus: {}",
                    id.value
                ));
            }
            if status.source() != v1::task_status::Source::Executor {
                return Err(format!(
                    "Received Call from executor {executor} of framework {framework} with invalid source, expecting 'SOURCE_EXECUTOR'"
                ));
            }
            if status.state() == TaskState::TaskStaging {
                return Err(format!(
                    "Received TASK_STAGING from executor {executor} of framework {framework} which is not allowed"
                ));
            }
            Ok(())
        }
        call::Type::Message if call.message.is_none() => {
            Err("Expecting 'message' to be present".to_string())
        }
        _ => Ok(()),
    }
}

/// A duration as Mesos writes one (`5secs`, `500ms`, `1mins`), which
/// executor libraries parse.
pub fn mesos_duration(d: Duration) -> String {
    const UNITS: [(u128, &str); 6] = [
        (86_400_000_000_000, "days"),
        (3_600_000_000_000, "hrs"),
        (60_000_000_000, "mins"),
        (1_000_000_000, "secs"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ];
    let ns = d.as_nanos();
    UNITS.iter().find(|(size, _)| ns >= *size).map_or_else(
        || format!("{ns}ns"),
        // A display value: the largest unit, as a decimal.
        #[allow(clippy::cast_precision_loss)]
        |(size, unit)| format!("{}{unit}", ns as f64 / *size as f64),
    )
}

#[cfg(test)]
mod tests {
    use super::mesos_duration;
    use std::time::Duration;

    #[test]
    fn durations_as_mesos_writes_them() {
        assert_eq!(mesos_duration(Duration::from_secs(5)), "5secs");
        assert_eq!(mesos_duration(Duration::from_secs(60)), "1mins");
        assert_eq!(mesos_duration(Duration::from_millis(1500)), "1.5secs");
        assert_eq!(mesos_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(mesos_duration(Duration::ZERO), "0ns");
    }
}
