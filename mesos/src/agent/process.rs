//! The process agent: each task runs as a process in a sandbox directory,
//! as Mesos' command executor (and, for task groups, its default executor)
//! runs it: `/bin/sh -c <value>`, or `value` executed with `arguments`, in a
//! process group of its own, stdout and stderr to files of the sandbox.
//!
//! Sandboxes: `<work_dir>/<agent>/frameworks/<framework>/executors/<executor>/runs/<uuid>`,
//! the executor of a command task being the task itself (its executor id is
//! its task id, as upstream's command executor). A task of a DEFAULT executor
//! gets `tasks/<task>` under its executor's run, as upstream nests it.
//!
//! Ownership: one supervisor (a tokio task) per task owns that task's process
//! and sends every update of it, so a task's updates leave in order. The
//! agent's [`Table`] maps tasks to their supervisors' control channels and
//! executors to their run directories and live tasks; its lock is never held
//! across an await or while the sink is called.
//!
//! Killing: SIGTERM to the process group, SIGKILL after the grace period; the
//! group is SIGKILLed once the command has exited too, so nothing it left
//! behind outlives the task (upstream destroys the container).
//!
//! Shutdown: `stop()` (or dropping the agent) marks the table stopped,
//! empties it, and tells every supervisor to SIGKILL its group and send
//! nothing more.
//!
//! Persistent volumes: a task (or its executor) holding a volume sees it at
//! its `container_path` in the sandbox, a link to the volume's directory
//! `<work_dir>/<agent>/volumes/roles/<role>/<persistence id>`, which lives on
//! across tasks until the volume is destroyed (then it is removed).
//!
//! Custom executors (a framework's own executor program) run as their own
//! process and talk to the agent through the executor HTTP API: see
//! [`super::custom`] (an agent made without an executor hub fails their
//! tasks at launch).
//!
//! Not supported, and failed at launch: docker containers, container
//! images, and fetching URIs other than local files.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::custom::{self, ExecutorHub};
use super::simulated::{
    framework_id, has_killing_state, take_framework, task_status, unix_seconds,
};
use super::{AgentBackend, AgentUpdate, Launch, UpdateSink};
use crate::v1;
use crate::v1::TaskState;
use crate::v1::task_status::{Reason, Source};

/// Grace period when an executor or framework is shut down and the executor
/// names none: upstream's 5 s executor shutdown grace period less the 2 s
/// the command executor keeps for itself.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Where framework messages to an executor are appended, in its run directory.
pub const FRAMEWORK_MESSAGES_FILE: &str = "framework_messages";

/// (framework id, task id) or (framework id, executor id).
type Key = (String, String);

/// An agent that runs every task as a process. See the module doc.
pub struct ProcessAgent {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProcessAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessAgent")
            .field("agent_id", &self.shared.agent_id)
            .field("work_dir", &self.shared.work_dir)
            .finish_non_exhaustive()
    }
}

impl ProcessAgent {
    /// An agent making sandboxes under `work_dir/agent_id`, running its
    /// supervisors on `runtime`.
    pub fn new(
        agent_id: String,
        work_dir: PathBuf,
        sink: UpdateSink,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Self> {
        Self::with_executors(agent_id, work_dir, sink, runtime, None)
    }

    /// An agent that also runs custom executors, found by the executor API
    /// through `hub`.
    pub fn with_executors(
        agent_id: String,
        work_dir: PathBuf,
        sink: UpdateSink,
        runtime: tokio::runtime::Handle,
        hub: Option<Arc<ExecutorHub>>,
    ) -> Arc<Self> {
        let (messages, inbox) = mpsc::unbounded_channel();
        runtime.spawn(write_messages(inbox));
        Arc::new(Self {
            shared: Arc::new(Shared {
                agent_id,
                work_dir,
                sink,
                runtime,
                table: Mutex::new(Table::default()),
                hub,
                messages,
            }),
        })
    }

    /// A task of a custom executor: to its supervisor (started with the
    /// executor's first task).
    fn launch_custom(&self, hub: &Arc<ExecutorHub>, launch: Launch, executor: v1::ExecutorInfo) {
        let framework_id = framework_id(&launch.framework);
        let task_id = launch.task.task_id.value.clone();
        let executor_id = executor.executor_id.value.clone();
        let mut table = self.shared.table();
        if table.stopped {
            return;
        }
        let task_key = (framework_id.clone(), task_id);
        if table.tasks.contains_key(&task_key) || table.custom_tasks.contains_key(&task_key) {
            tracing::warn!(framework = %task_key.0, task = %task_key.1, "task launched twice; ignored");
            return;
        }
        table.custom_tasks.insert(task_key, executor_id.clone());
        let key = (framework_id.clone(), executor_id.clone());
        let inbox = match table.custom.get(&key) {
            Some(inbox) if !inbox.is_closed() => inbox.clone(),
            _ => {
                let run_dir = self.shared.run_directory(&framework_id, &executor_id);
                let inbox = custom::start(
                    Arc::clone(&self.shared),
                    Arc::clone(hub),
                    &launch,
                    executor,
                    run_dir,
                );
                table.custom.insert(key, inbox.clone());
                inbox
            }
        };
        // Sent under the table's lock: a supervisor that is ending takes
        // itself out of the table under it, then drains its inbox.
        let _ = inbox.send(custom::Input::Launch(Box::new(launch)));
        drop(table);
    }

    /// The supervisor of a custom executor, if this agent runs it.
    fn custom_executor(
        &self,
        framework_id: &str,
        executor_id: &str,
    ) -> Option<mpsc::UnboundedSender<custom::Input>> {
        self.shared
            .table()
            .custom
            .get(&(framework_id.to_string(), executor_id.to_string()))
            .cloned()
    }
}

impl Drop for ProcessAgent {
    fn drop(&mut self) {
        self.stop();
    }
}

impl AgentBackend for ProcessAgent {
    fn launch(&self, launch: Launch) {
        if let (Some(hub), Some(executor)) = (&self.shared.hub, &launch.executor)
            && executor.r#type() != v1::executor_info::Type::Default
        {
            let executor = executor.clone();
            return self.launch_custom(hub, launch, executor);
        }
        let framework_id = framework_id(&launch.framework);
        let task_id = launch.task.task_id.value.clone();
        let (kind, executor_id, shutdown_grace) = match &launch.executor {
            None => (RunKind::Command, task_id.clone(), SHUTDOWN_GRACE),
            Some(e) => (
                if e.r#type() == v1::executor_info::Type::Default {
                    RunKind::Default
                } else {
                    RunKind::Custom
                },
                e.executor_id.value.clone(),
                e.shutdown_grace_period
                    .as_ref()
                    .map_or(SHUTDOWN_GRACE, |d| {
                        Duration::from_nanos(d.nanoseconds.max(0).unsigned_abs())
                    }),
            ),
        };
        let (control, inbox) = mpsc::unbounded_channel();
        let (generation, run_dir) = {
            let mut table = self.shared.table();
            let key = (framework_id.clone(), task_id.clone());
            if table.stopped {
                return;
            }
            if table.tasks.contains_key(&key) {
                tracing::warn!(framework = %key.0, task = %key.1, "task launched twice; ignored");
                return;
            }
            table.last_generation += 1;
            let generation = table.last_generation;
            let run = table
                .executors
                .entry((framework_id.clone(), executor_id.clone()))
                .or_insert_with(|| ExecutorRun {
                    kind,
                    directory: self.shared.run_directory(&framework_id, &executor_id),
                    shutdown_grace,
                    tasks: BTreeSet::new(),
                });
            run.tasks.insert(task_id.clone());
            let run_dir = run.directory.clone();
            table.tasks.insert(
                key,
                TaskEntry {
                    generation,
                    shutdown_grace,
                    control,
                },
            );
            (generation, run_dir)
        };
        let supervisor = Supervisor {
            shared: Arc::clone(&self.shared),
            framework_id,
            task_id,
            executor_id,
            kind,
            generation,
            killing_state: has_killing_state(&launch.framework),
            quiet: false,
            done: false,
            process_group: None,
        };
        self.shared
            .runtime
            .spawn(supervisor.run(launch, run_dir, inbox));
    }

    fn kill_task(&self, framework_id: &str, task_id: &str, grace: Duration) {
        let table = self.shared.table();
        let key = (framework_id.to_string(), task_id.to_string());
        if let Some(task) = table.tasks.get(&key) {
            let _ = task.control.send(Control::Kill(grace));
        } else if let Some(inbox) = table
            .custom_tasks
            .get(&key)
            .and_then(|e| table.custom.get(&(key.0.clone(), e.clone())))
        {
            let _ = inbox.send(custom::Input::Kill { task: key.1, grace });
        }
    }

    fn acknowledged(&self, framework_id: &str, executor_id: &str, task_id: &str, uuid: &[u8]) {
        if let Some(inbox) = self.custom_executor(framework_id, executor_id) {
            let _ = inbox.send(custom::Input::Acknowledged {
                task: task_id.to_string(),
                uuid: uuid.to_vec(),
            });
        }
    }

    fn shutdown_executor(&self, framework_id: &str, executor_id: &str) {
        if let Some(inbox) = self.custom_executor(framework_id, executor_id) {
            let _ = inbox.send(custom::Input::Shutdown);
            return;
        }
        let table = self.shared.table();
        let Some(run) = table
            .executors
            .get(&(framework_id.to_string(), executor_id.to_string()))
        else {
            return;
        };
        for task in &run.tasks {
            if let Some(entry) = table.tasks.get(&(framework_id.to_string(), task.clone())) {
                let _ = entry.control.send(Control::Kill(run.shutdown_grace));
            }
        }
    }

    fn shutdown_framework(&self, framework_id: &str) {
        let (tasks, custom) = {
            let mut table = self.shared.table();
            take_framework(&mut table.executors, framework_id);
            take_framework(&mut table.custom_tasks, framework_id);
            (
                take_framework(&mut table.tasks, framework_id),
                take_framework(&mut table.custom, framework_id),
            )
        };
        for task in tasks.into_values() {
            let _ = task.control.send(Control::Discard(task.shutdown_grace));
        }
        for inbox in custom.into_values() {
            let _ = inbox.send(custom::Input::Discard);
        }
    }

    fn framework_message(&self, framework_id: &str, executor_id: &str, data: Vec<u8>) {
        if let Some(inbox) = self.custom_executor(framework_id, executor_id) {
            let _ = inbox.send(custom::Input::Message(data));
            return;
        }
        let directory = self
            .shared
            .table()
            .executors
            .get(&(framework_id.to_string(), executor_id.to_string()))
            .map(|run| run.directory.clone());
        match directory {
            Some(d) => {
                let _ = self
                    .shared
                    .messages
                    .send((d.join(FRAMEWORK_MESSAGES_FILE), data));
            }
            None => tracing::debug!(
                framework = framework_id,
                executor = executor_id,
                "framework message for an executor this agent does not run; dropped"
            ),
        }
    }

    fn destroy_volumes(&self, volumes: &[v1::Resource]) {
        for v in volumes {
            if let Some(dir) = self.shared.volume_directory(v)
                && let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a destroyed volume's directory");
            }
        }
    }

    fn stop(&self) {
        let (tasks, custom) = {
            let mut table = self.shared.table();
            table.stopped = true;
            table.executors.clear();
            table.custom_tasks.clear();
            (
                std::mem::take(&mut table.tasks),
                std::mem::take(&mut table.custom),
            )
        };
        for task in tasks.into_values() {
            let _ = task.control.send(Control::Stop);
        }
        for inbox in custom.into_values() {
            let _ = inbox.send(custom::Input::Stop);
        }
    }
}

/// What the agent and its supervisors share.
pub(super) struct Shared {
    pub(super) agent_id: String,
    work_dir: PathBuf,
    pub(super) sink: UpdateSink,
    pub(super) runtime: tokio::runtime::Handle,
    table: Mutex<Table>,
    /// Where custom executors are found by the executor API; `None`: the
    /// agent runs none (their tasks fail at launch).
    hub: Option<Arc<ExecutorHub>>,
    /// To the writer of framework messages (file, data), which keeps their order.
    messages: mpsc::UnboundedSender<(PathBuf, Vec<u8>)>,
}

impl Shared {
    pub(super) fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The directory of a persistent volume; `None` for a resource that is not one.
    pub(super) fn volume_directory(&self, resource: &v1::Resource) -> Option<PathBuf> {
        let id = &resource.disk.as_ref()?.persistence.as_ref()?.id;
        let role = crate::resources::reservation_role(resource).unwrap_or("*");
        Some(
            self.work_dir
                .join(path_component(&self.agent_id))
                .join("volumes")
                .join("roles")
                .join(path_component(role))
                .join(path_component(id)),
        )
    }

    /// A new run directory of an executor (not created yet).
    fn run_directory(&self, framework_id: &str, executor_id: &str) -> PathBuf {
        self.work_dir
            .join(path_component(&self.agent_id))
            .join("frameworks")
            .join(path_component(framework_id))
            .join("executors")
            .join(path_component(executor_id))
            .join("runs")
            .join(uuid::Uuid::new_v4().to_string())
    }
}

/// The agent's view of its tasks and executors.
#[derive(Default)]
pub(super) struct Table {
    /// Set by `stop`: nothing more is launched or sent.
    pub(super) stopped: bool,
    last_generation: u64,
    /// Live tasks by (framework, task).
    tasks: BTreeMap<Key, TaskEntry>,
    /// Executors with live tasks by (framework, executor); a command task is
    /// its own executor.
    executors: BTreeMap<Key, ExecutorRun>,
    /// Custom executors' supervisors by (framework, executor).
    pub(super) custom: BTreeMap<Key, mpsc::UnboundedSender<custom::Input>>,
    /// Tasks of custom executors not ended, by (framework, task): their
    /// executor's id.
    pub(super) custom_tasks: BTreeMap<Key, String>,
}

/// A live task as the table knows it.
struct TaskEntry {
    /// Tells this launch from a later one of the same task id.
    generation: u64,
    shutdown_grace: Duration,
    control: mpsc::UnboundedSender<Control>,
}

/// A run of an executor: its directory and the tasks still in it.
struct ExecutorRun {
    kind: RunKind,
    directory: PathBuf,
    shutdown_grace: Duration,
    tasks: BTreeSet<String>,
}

/// What runs a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    /// The task's own command (upstream's command executor).
    Command,
    /// An executor of type DEFAULT (task groups): each task its own process.
    Default,
    /// A framework's executor program: not supported here.
    Custom,
}

/// What the agent tells a supervisor.
#[derive(Debug)]
enum Control {
    /// Kill with this grace period, reporting as usual.
    Kill(Duration),
    /// Kill with this grace period; the master has forgotten the task, so
    /// nothing more is sent.
    Discard(Duration),
    /// SIGKILL now and send nothing more: the agent is going away.
    Stop,
}

/// A task's terminal status before it is sent.
pub(super) struct End {
    pub(super) state: TaskState,
    pub(super) reason: Option<Reason>,
    pub(super) message: String,
    pub(super) source: Source,
}

impl End {
    /// The agent decided it (the task never ran).
    pub(super) fn agent(state: TaskState, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            state,
            reason: Some(reason),
            message: message.into(),
            source: Source::Agent,
        }
    }
}

/// Owns one task's process and sends its updates. See the module doc.
struct Supervisor {
    shared: Arc<Shared>,
    framework_id: String,
    task_id: String,
    executor_id: String,
    kind: RunKind,
    generation: u64,
    killing_state: bool,
    /// Set once the task is not to be reported any more.
    quiet: bool,
    /// Set once the task has been taken out of the table.
    done: bool,
    process_group: Option<Pid>,
}

impl Supervisor {
    async fn run(
        mut self,
        launch: Launch,
        run_dir: PathBuf,
        mut inbox: mpsc::UnboundedReceiver<Control>,
    ) {
        if let Some(end) = self.execute(launch, run_dir, &mut inbox).await {
            self.send(end.state, end.reason, Some(end.message), end.source);
        }
        self.finish();
    }

    /// Runs the task to its end; `None` when it is not to be reported.
    async fn execute(
        &mut self,
        launch: Launch,
        run_dir: PathBuf,
        inbox: &mut mpsc::UnboundedReceiver<Control>,
    ) -> Option<End> {
        let Launch { task, executor, .. } = launch;
        if let Err(end) = check_supported(self.kind, &task, executor.as_ref()) {
            return Some(end);
        }
        let Some(command) = task.command.clone() else {
            return Some(End::agent(
                TaskState::TaskFailed,
                Reason::TaskInvalid,
                "The task has no command",
            ));
        };
        let sandbox = match self.kind {
            RunKind::Default => run_dir.join("tasks").join(path_component(&self.task_id)),
            RunKind::Command | RunKind::Custom => run_dir.clone(),
        };

        let volumes = task
            .resources
            .iter()
            .chain(executor.iter().flat_map(|e| e.resources.iter()))
            .filter_map(|r| {
                let path = r.disk.as_ref()?.volume.as_ref()?.container_path.clone();
                Some((self.shared.volume_directory(r)?, path))
            })
            .collect::<Vec<_>>();
        tokio::select! {
            prepared = async {
                prepare_sandbox(&run_dir, &sandbox, &command.uris).await?;
                mount_volumes(&volumes, &sandbox).await
            } => {
                if let Err(e) = prepared {
                    return Some(End::agent(
                        TaskState::TaskFailed,
                        Reason::ContainerLaunchFailed,
                        format!("Failed to launch container: {e}"),
                    ));
                }
            }
            control = inbox.recv() => {
                return match control {
                    Some(Control::Kill(_)) => Some(End::agent(
                        TaskState::TaskKilled,
                        Reason::TaskKilledDuringLaunch,
                        "Killed before delivery to the executor",
                    )),
                    Some(Control::Discard(_) | Control::Stop) | None => {
                        self.quiet = true;
                        None
                    }
                };
            }
        }

        self.send(TaskState::TaskStarting, None, None, Source::Executor);
        let child = match spawn(
            &command,
            self.environment(&task, &command, &sandbox),
            &sandbox,
        ) {
            Ok(child) => child,
            Err(e) => {
                let message = format!("Failed to launch task subprocess: {e}");
                append_best_effort(&sandbox.join("stderr"), format!("{message}\n").as_bytes());
                return Some(End::agent(
                    TaskState::TaskFailed,
                    Reason::ExecutorTerminated,
                    message,
                ));
            }
        };
        self.process_group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        self.send(TaskState::TaskRunning, None, None, Source::Executor);
        let limit = task
            .max_completion_time
            .as_ref()
            .filter(|d| d.nanoseconds > 0)
            .map(|d| Duration::from_nanos(d.nanoseconds.unsigned_abs()));
        self.watch(child, limit, inbox).await
    }

    /// Waits for the process while taking kills; the terminal status follows
    /// upstream's command executor.
    async fn watch(
        &mut self,
        mut child: Child,
        limit: Option<Duration>,
        inbox: &mut mpsc::UnboundedReceiver<Control>,
    ) -> Option<End> {
        let mut kill = KillState::default();
        let mut completion_at = limit.and_then(|l| Instant::now().checked_add(l));
        let mut timed_out = false;
        let mut inbox_open = true;
        let waited = loop {
            tokio::select! {
                waited = child.wait() => break waited,
                control = inbox.recv(), if inbox_open => match control {
                    Some(Control::Kill(grace)) => self.kill(&mut kill, grace),
                    Some(Control::Discard(grace)) => {
                        self.quiet = true;
                        self.kill(&mut kill, grace);
                    }
                    Some(Control::Stop) | None => {
                        inbox_open = control.is_some();
                        self.quiet = true;
                        self.signal(Signal::SIGKILL);
                        kill.started.get_or_insert_with(Instant::now);
                        kill.escalate_at = None;
                    }
                },
                () = tokio::time::sleep_until(at_or_never(kill.escalate_at)), if kill.escalate_at.is_some() => {
                    self.signal(Signal::SIGKILL);
                    kill.escalate_at = None;
                }
                () = tokio::time::sleep_until(at_or_never(completion_at)), if completion_at.is_some() => {
                    completion_at = None;
                    if kill.started.is_none() {
                        // As upstream: no TASK_KILLING, no grace period.
                        timed_out = true;
                        self.signal(Signal::SIGTERM);
                        let now = Instant::now();
                        kill.started = Some(now);
                        kill.escalate_at = Some(now);
                    }
                }
            }
        };
        // Whatever the command left in its group goes with it.
        self.signal(Signal::SIGKILL);
        self.process_group = None;
        if self.quiet {
            return None;
        }
        let end = match waited {
            Err(e) => End {
                state: TaskState::TaskFailed,
                reason: None,
                message: format!("Failed to get exit status for Command: {e}"),
                source: Source::Executor,
            },
            Ok(status) => {
                let (state, reason) = if timed_out {
                    (
                        TaskState::TaskFailed,
                        Some(Reason::MaxCompletionTimeReached),
                    )
                } else if kill.started.is_some() {
                    (TaskState::TaskKilled, None)
                } else if status.success() {
                    (TaskState::TaskFinished, None)
                } else {
                    (TaskState::TaskFailed, None)
                };
                End {
                    state,
                    reason,
                    message: format!("Command {}", describe_exit(status)),
                    source: Source::Executor,
                }
            }
        };
        Some(end)
    }

    /// The first kill sends TASK_KILLING (if the framework hears it) and
    /// SIGTERM; a later one may only shorten the grace period, as upstream.
    fn kill(&self, kill: &mut KillState, grace: Duration) {
        match kill.started {
            None => {
                if self.killing_state {
                    self.send(TaskState::TaskKilling, None, None, Source::Executor);
                }
                self.signal(Signal::SIGTERM);
                let now = Instant::now();
                kill.started = Some(now);
                kill.escalate_at =
                    Some(now.checked_add(grace).unwrap_or_else(|| at_or_never(None)));
            }
            Some(started) => {
                if let (Some(sooner), Some(at)) = (started.checked_add(grace), kill.escalate_at)
                    && sooner < at
                {
                    kill.escalate_at = Some(sooner);
                }
            }
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(group) = self.process_group
            && let Err(e) = killpg(group, signal)
        {
            tracing::debug!(task = %self.task_id, %signal, error = %e, "signal to the task's process group failed");
        }
    }

    /// The process's environment on top of the agent's own: Mesos' variables,
    /// then the command's (which win, as upstream).
    fn environment(
        &self,
        task: &v1::TaskInfo,
        command: &v1::CommandInfo,
        sandbox: &Path,
    ) -> Vec<(String, String)> {
        let sandbox = sandbox.to_string_lossy().into_owned();
        let mut env = vec![
            ("MESOS_FRAMEWORK_ID".to_string(), self.framework_id.clone()),
            ("MESOS_AGENT_ID".to_string(), self.shared.agent_id.clone()),
            ("MESOS_EXECUTOR_ID".to_string(), self.executor_id.clone()),
            ("MESOS_TASK_ID".to_string(), self.task_id.clone()),
            ("MESOS_SANDBOX".to_string(), sandbox.clone()),
            ("MESOS_DIRECTORY".to_string(), sandbox),
        ];
        if let Some(role) = task
            .resources
            .iter()
            .find_map(|r| r.allocation_info.as_ref()?.role.clone())
        {
            env.push(("MESOS_ALLOCATION_ROLE".to_string(), role));
        }
        env.extend(command_environment(command, &self.task_id));
        env
    }

    fn send(
        &self,
        state: TaskState,
        reason: Option<Reason>,
        message: Option<String>,
        source: Source,
    ) {
        if self.quiet || self.shared.table().stopped {
            return;
        }
        let status = task_status(
            &self.shared.agent_id,
            &self.task_id,
            &self.executor_id,
            state,
            reason,
            message,
            source,
            unix_seconds(),
        );
        (self.shared.sink)(AgentUpdate::Status {
            agent_id: self.shared.agent_id.clone(),
            framework_id: self.framework_id.clone(),
            status: Box::new(status),
        });
    }

    /// Takes the task out of the table; its executor exits after its last
    /// task (a command task's executor is not one the master knows).
    fn finish(&mut self) {
        self.done = true;
        let exited = {
            let mut table = self.shared.table();
            let key = (self.framework_id.clone(), self.task_id.clone());
            if table
                .tasks
                .get(&key)
                .is_none_or(|t| t.generation != self.generation)
            {
                return; // Forgotten by shutdown_framework or stop.
            }
            table.tasks.remove(&key);
            let executor = (self.framework_id.clone(), self.executor_id.clone());
            let Some(run) = table.executors.get_mut(&executor) else {
                return;
            };
            run.tasks.remove(&self.task_id);
            if !run.tasks.is_empty() {
                return;
            }
            let kind = run.kind;
            table.executors.remove(&executor);
            (!self.quiet && !table.stopped).then_some(kind)
        };
        let status = match exited {
            None | Some(RunKind::Command) => return,
            // The default executor exits with EXIT_SUCCESS once its tasks end.
            Some(RunKind::Default) => 0,
            // Never started: upstream reports -1 when a container has no exit status.
            Some(RunKind::Custom) => -1,
        };
        (self.shared.sink)(AgentUpdate::ExecutorExited {
            agent_id: self.shared.agent_id.clone(),
            framework_id: self.framework_id.clone(),
            executor_id: self.executor_id.clone(),
            status,
        });
    }
}

impl Drop for Supervisor {
    /// A supervisor dropped before its end (the runtime shutting down, or a
    /// bug panicking) still kills its processes; after a panic the task is
    /// reported failed so it does not hang in the master.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.signal(Signal::SIGKILL);
        if std::thread::panicking() {
            self.send(
                TaskState::TaskFailed,
                Some(Reason::ExecutorTerminated),
                Some("The embedded agent's supervisor of this task failed".to_string()),
                Source::Agent,
            );
            self.finish();
        }
    }
}

/// A kill in progress.
#[derive(Debug, Default)]
struct KillState {
    started: Option<Instant>,
    /// When SIGKILL follows; `None` once sent.
    escalate_at: Option<Instant>,
}

/// A deadline, or one that never comes in practice.
fn at_or_never(at: Option<Instant>) -> Instant {
    at.unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
}

/// Fails what this agent cannot run, with the status the agent sends.
fn check_supported(
    kind: RunKind,
    task: &v1::TaskInfo,
    executor: Option<&v1::ExecutorInfo>,
) -> Result<(), End> {
    if kind == RunKind::Custom {
        return Err(End::agent(
            TaskState::TaskFailed,
            Reason::ExecutorTerminated,
            "custom executors are not supported by this agent",
        ));
    }
    check_containers(task, executor)
}

/// Fails a task whose container (or executor's container) this agent cannot
/// make: docker, or a container image.
pub(super) fn check_containers(
    task: &v1::TaskInfo,
    executor: Option<&v1::ExecutorInfo>,
) -> Result<(), End> {
    let containers = task
        .container
        .iter()
        .chain(executor.and_then(|e| e.container.as_ref()));
    for container in containers {
        if container.r#type() == v1::container_info::Type::Docker {
            return Err(End::agent(
                TaskState::TaskFailed,
                Reason::ContainerLaunchFailed,
                "docker containers are not supported by the embedded agent",
            ));
        }
        if container.mesos.as_ref().is_some_and(|m| m.image.is_some()) {
            return Err(End::agent(
                TaskState::TaskFailed,
                Reason::ContainerLaunchFailed,
                "container images are not supported by the embedded agent",
            ));
        }
    }
    Ok(())
}

/// Creates the sandbox, points `runs/latest` at the run, fetches the URIs.
pub(super) async fn prepare_sandbox(
    run_dir: &Path,
    sandbox: &Path,
    uris: &[v1::command_info::Uri],
) -> Result<(), String> {
    tokio::fs::create_dir_all(sandbox)
        .await
        .map_err(|e| format!("Failed to create sandbox '{}': {e}", sandbox.display()))?;
    if let (Some(runs), Some(run)) = (run_dir.parent(), run_dir.file_name()) {
        // Best effort, for people browsing the work directory.
        let latest = runs.join("latest");
        let _ = tokio::fs::remove_file(&latest).await;
        let _ = tokio::fs::symlink(run, &latest).await;
    }
    for uri in uris {
        fetch(uri, sandbox)
            .await
            .map_err(|e| format!("Failed to fetch '{}': {e}", uri.value))?;
    }
    Ok(())
}

/// Makes each volume's directory and links it at its container path in the
/// sandbox (a relative path that stays inside the sandbox).
pub(super) async fn mount_volumes(
    volumes: &[(PathBuf, String)],
    sandbox: &Path,
) -> Result<(), String> {
    for (dir, container_path) in volumes {
        let relative = Path::new(container_path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(format!(
                "Volume container path '{container_path}' must be relative and stay in the sandbox (no container image here)"
            ));
        }
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| format!("Failed to create volume '{}': {e}", dir.display()))?;
        let target = sandbox.join(relative);
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| format!("Failed to create '{}': {e}", parent.display()))?;
        }
        if tokio::fs::symlink_metadata(&target).await.is_err() {
            tokio::fs::symlink(dir, &target).await.map_err(|e| {
                format!(
                    "Failed to mount volume '{}' at '{}': {e}",
                    dir.display(),
                    target.display()
                )
            })?;
        }
    }
    Ok(())
}

/// Fetches a local URI into the sandbox as upstream's fetcher does: copied
/// under its base name (or `output_file`), then made executable or
/// extracted.
async fn fetch(uri: &v1::command_info::Uri, sandbox: &Path) -> Result<(), String> {
    let source = local_source(uri.value.trim_start())?;
    let name = match &uri.output_file {
        Some(file) => {
            let file = PathBuf::from(file);
            if !file.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(format!(
                    "output_file '{}' leaves the sandbox",
                    file.display()
                ));
            }
            file
        }
        None => PathBuf::from(source.file_name().ok_or("the URI names no file")?),
    };
    let destination = sandbox.join(name);
    if let Some(parent) = destination.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("Failed to create '{}': {e}", parent.display()))?;
    }
    tokio::fs::copy(&source, &destination)
        .await
        .map_err(|e| format!("Failed to copy '{}': {e}", source.display()))?;
    if uri.executable() {
        tokio::fs::set_permissions(&destination, std::fs::Permissions::from_mode(0o755))
            .await
            .map_err(|e| {
                format!(
                    "Failed to chmod executable '{}': {e}",
                    destination.display()
                )
            })?;
    } else if uri.extract() {
        extract(&destination, sandbox).await?;
    }
    Ok(())
}

/// The local file a URI names: `file://` or an absolute path.
fn local_source(uri: &str) -> Result<PathBuf, String> {
    let path = match uri.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => rest,
        Some((scheme, _))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            return Err("fetching http URIs is not supported by the embedded agent".to_string());
        }
        Some((scheme, _)) => {
            return Err(format!(
                "fetching {scheme} URIs is not supported by the embedded agent"
            ));
        }
        None => uri,
    };
    if !path.starts_with('/') {
        return Err(format!(
            "'{uri}' is not an absolute path (the embedded agent has no frameworks home)"
        ));
    }
    Ok(PathBuf::from(path))
}

/// Extracts an archive into the sandbox with the system's `tar`, `unzip` or
/// `gzip`, by the suffixes upstream's fetcher knows; other files stay as
/// copied.
async fn extract(archive: &Path, into: &Path) -> Result<(), String> {
    const TAR: &[&str] = &[
        ".tar", ".tgz", ".tar.gz", ".tbz2", ".tar.bz2", ".txz", ".tar.xz",
    ];
    let name = archive.to_string_lossy();
    let mut tool = if TAR.iter().any(|s| name.ends_with(s)) {
        let mut tool = Command::new("tar");
        tool.arg("-C").arg(into).arg("-xf").arg(archive);
        tool.stdout(Stdio::null());
        tool
    } else if name.ends_with(".zip") {
        let mut tool = Command::new("unzip");
        tool.args(["-o", "-q", "-d"]).arg(into).arg(archive);
        tool.stdout(Stdio::null());
        tool
    } else if let Some(stem) = name.strip_suffix(".gz") {
        let target = into.join(
            Path::new(stem)
                .file_name()
                .ok_or("the archive names no file")?,
        );
        let out = std::fs::File::create(&target)
            .map_err(|e| format!("Failed to create '{}': {e}", target.display()))?;
        let mut tool = Command::new("gzip");
        tool.args(["-d", "-c"]).arg(archive);
        tool.stdout(out);
        tool
    } else {
        return Ok(());
    };
    let output = tool
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("Failed to extract '{name}': {e}"))?
        .wait_with_output()
        .await
        .map_err(|e| format!("Failed to extract '{name}': {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "Failed to extract '{name}': {}: {}",
            describe_exit(output.status),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

/// Starts the command in the sandbox, in a process group of its own.
pub(super) fn spawn(
    command: &v1::CommandInfo,
    environment: Vec<(String, String)>,
    sandbox: &Path,
) -> std::io::Result<Child> {
    let mut process = if command.shell() {
        let mut process = Command::new("/bin/sh");
        process.arg("-c").arg(command.value());
        process
    } else {
        // As upstream's execvp: `arguments` is the whole argv, argv[0] first.
        let mut process = Command::new(command.value());
        if let Some((argv0, rest)) = command.arguments.split_first() {
            process.arg0(argv0).args(rest);
        }
        process
    };
    let output = |name: &str| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(sandbox.join(name))
    };
    process
        .current_dir(sandbox)
        .envs(environment)
        .stdin(Stdio::null())
        .stdout(output("stdout")?)
        .stderr(output("stderr")?)
        .process_group(0)
        .kill_on_drop(true);
    process.spawn()
}

/// A command's own environment variables (`who` names the task or
/// executor in the warning for a secret one, which is skipped).
pub(super) fn command_environment(command: &v1::CommandInfo, who: &str) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for variable in command.environment.iter().flat_map(|e| &e.variables) {
        if variable.r#type() == v1::environment::variable::Type::Secret {
            tracing::warn!(%who, name = %variable.name, "secret environment variables are not supported by the embedded agent; skipped");
            continue;
        }
        env.push((
            variable.name.clone(),
            variable.value.clone().unwrap_or_default(),
        ));
    }
    env
}

/// Appends to a file, ignoring failure.
fn append_best_effort(path: &Path, data: &[u8]) {
    use std::io::Write as _;
    if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
        let _ = file.write_all(data);
    }
}

/// Appends each framework message, then a newline, to its file, in order.
async fn write_messages(mut inbox: mpsc::UnboundedReceiver<(PathBuf, Vec<u8>)>) {
    while let Some((path, data)) = inbox.recv().await {
        let written = async {
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent).await?;
            }
            let mut file = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .await?;
            file.write_all(&data).await?;
            file.write_all(b"\n").await?;
            file.flush().await
        }
        .await;
        if let Err(e) = written {
            tracing::debug!(file = %path.display(), error = %e, "framework message not written");
        }
    }
}

/// An id as one path component: `/`, `.` and `..` cannot escape the work
/// directory (the master validates ids; this is a second fence).
fn path_component(id: &str) -> String {
    match id {
        "" => "%".to_string(),
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => id
            .replace('%', "%25")
            .replace('/', "%2F")
            .replace('\0', "%00"),
    }
}

/// A wait status as upstream words it after "Command ": "exited with status
/// 3", "terminated with signal Killed".
pub fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else if let Some(signal) = status.signal() {
        let core = if status.core_dumped() {
            " (core dumped)"
        } else {
            ""
        };
        format!(
            "terminated with signal {}{core}",
            signal_description(signal)
        )
    } else if let Some(signal) = status.stopped_signal() {
        format!("stopped on signal {}", signal_description(signal))
    } else {
        format!("wait status {}", status.into_raw())
    }
}

/// What `strsignal(3)` says of a signal on Linux (glibc).
fn signal_description(number: i32) -> String {
    use Signal::*;
    let text = match Signal::try_from(number) {
        Ok(SIGHUP) => "Hangup",
        Ok(SIGINT) => "Interrupt",
        Ok(SIGQUIT) => "Quit",
        Ok(SIGILL) => "Illegal instruction",
        Ok(SIGTRAP) => "Trace/breakpoint trap",
        Ok(SIGABRT) => "Aborted",
        Ok(SIGBUS) => "Bus error",
        Ok(SIGFPE) => "Floating point exception",
        Ok(SIGKILL) => "Killed",
        Ok(SIGUSR1) => "User defined signal 1",
        Ok(SIGSEGV) => "Segmentation fault",
        Ok(SIGUSR2) => "User defined signal 2",
        Ok(SIGPIPE) => "Broken pipe",
        Ok(SIGALRM) => "Alarm clock",
        Ok(SIGTERM) => "Terminated",
        Ok(SIGCHLD) => "Child exited",
        Ok(SIGCONT) => "Continued",
        Ok(SIGSTOP) => "Stopped (signal)",
        Ok(SIGTSTP) => "Stopped",
        Ok(SIGTTIN) => "Stopped (tty input)",
        Ok(SIGTTOU) => "Stopped (tty output)",
        Ok(SIGURG) => "Urgent I/O condition",
        Ok(SIGXCPU) => "CPU time limit exceeded",
        Ok(SIGXFSZ) => "File size limit exceeded",
        Ok(SIGVTALRM) => "Virtual timer expired",
        Ok(SIGPROF) => "Profiling timer expired",
        Ok(SIGWINCH) => "Window changed",
        Ok(SIGIO) => "I/O possible",
        Ok(SIGSYS) => "Bad system call",
        Ok(other) => return other.as_str().to_string(),
        Err(_) => return format!("Unknown signal {number}"),
    };
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_exit(raw: i32, expect: &str) {
        assert_eq!(describe_exit(ExitStatus::from_raw(raw)), expect);
    }

    #[test]
    fn agent_exit_descriptions_follow_upstream() {
        check_exit(0, "exited with status 0");
        check_exit(3 << 8, "exited with status 3");
        check_exit(9, "terminated with signal Killed");
        check_exit(15, "terminated with signal Terminated");
        check_exit(
            11 | 0x80,
            "terminated with signal Segmentation fault (core dumped)",
        );
    }

    fn check_source(uri: &str, expect: Result<&str, &str>) {
        match (local_source(uri), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, PathBuf::from(want)),
            (Err(got), Err(want)) => assert!(got.contains(want), "{uri}: {got}"),
            (got, want) => panic!("{uri}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn agent_local_uri_sources() {
        check_source("/opt/app.tgz", Ok("/opt/app.tgz"));
        check_source("file:///opt/app.tgz", Ok("/opt/app.tgz"));
        check_source("FILE:///x", Ok("/x"));
        check_source(
            "http://example.invalid/a",
            Err("fetching http URIs is not supported"),
        );
        check_source(
            "https://example.invalid/a",
            Err("fetching http URIs is not supported"),
        );
        check_source("hdfs://nn/a", Err("fetching hdfs URIs"));
        check_source("relative/a", Err("not an absolute path"));
    }

    #[test]
    fn agent_ids_stay_one_path_component() {
        assert_eq!(path_component("a/b"), "a%2Fb");
        assert_eq!(path_component(".."), "%2E%2E");
        assert_eq!(path_component("task-1"), "task-1");
    }
}
