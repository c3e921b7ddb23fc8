//! The simulated agent: no process, only timed state changes, cheap enough
//! for benchmarks with hundreds of thousands of tasks.
//!
//! One tokio task, the simulation loop, owns every task's state and a heap
//! of deadlines. The agent's methods only post commands to it, so no lock is
//! shared and every update leaves in the order the loop decides it. A task
//! is TASK_RUNNING at once and TASK_FINISHED after the duration in its
//! `unisched.duration` label (decimal seconds such as `1.5`, or a Go
//! duration such as `2s`, `500ms`, `1m30s`); without the label it runs until
//! killed. A `max_completion_time` shorter than that fails the task with
//! REASON_MAX_COMPLETION_TIME_REACHED, as the command executor does.
//!
//! Time is read only through [`TimeSource`], so a virtual clock can take
//! tokio's place later.
//!
//! Shutdown: `stop()`, or dropping the agent, ends the loop; pending timers
//! go with it and nothing more is sent.
//!
//! The status helpers at the end are shared with the process agent.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{AgentBackend, AgentUpdate, Launch, UpdateSink};
use crate::v1;
use crate::v1::task_status::{Reason, Source};

/// The task label that says how long a simulated task runs.
pub const DURATION_LABEL: &str = "unisched.duration";

/// Commands the loop takes in one turn before it looks at due timers.
const BATCH: usize = 1024;

/// A task's key: (framework id, task id).
type Key = (String, String);

/// An agent whose tasks are timers. See the module doc.
#[derive(Debug)]
pub struct SimulatedAgent {
    commands: mpsc::UnboundedSender<Command>,
}

impl SimulatedAgent {
    /// Starts the agent's simulation loop on `runtime`.
    pub fn new(agent_id: String, sink: UpdateSink, runtime: tokio::runtime::Handle) -> Arc<Self> {
        let (commands, inbox) = mpsc::unbounded_channel();
        runtime.spawn(Simulation::new(agent_id, sink, TimeSource).run(inbox));
        Arc::new(Self { commands })
    }

    fn post(&self, command: Command) {
        // Fails only once the loop has ended (after `stop`): nothing to do then.
        let _ = self.commands.send(command);
    }
}

impl AgentBackend for SimulatedAgent {
    fn launch(&self, launch: Launch) {
        self.post(Command::Launch(Box::new(launch)));
    }

    fn kill_task(&self, framework_id: &str, task_id: &str, _grace: Duration) {
        self.post(Command::Kill((
            framework_id.to_string(),
            task_id.to_string(),
        )));
    }

    fn shutdown_executor(&self, framework_id: &str, executor_id: &str) {
        self.post(Command::ShutdownExecutor((
            framework_id.to_string(),
            executor_id.to_string(),
        )));
    }

    fn shutdown_framework(&self, framework_id: &str) {
        self.post(Command::ShutdownFramework(framework_id.to_string()));
    }

    fn framework_message(&self, framework_id: &str, executor_id: &str, data: Vec<u8>) {
        // There is no executor to hand it to.
        tracing::debug!(
            framework = framework_id,
            executor = executor_id,
            bytes = data.len(),
            "framework message dropped by the simulated agent"
        );
    }

    fn stop(&self) {
        self.post(Command::Stop);
    }
}

/// What the agent's methods ask of the loop.
enum Command {
    Launch(Box<Launch>),
    Kill(Key),
    /// (framework id, executor id).
    ShutdownExecutor(Key),
    ShutdownFramework(String),
    Stop,
}

/// Where the simulation reads time. Nothing else in this file looks at a
/// clock: injecting `unisched_core::clock::Clock` means changing these two
/// methods (and waking the loop when a virtual clock moves).
#[derive(Debug, Clone, Copy, Default)]
struct TimeSource;

impl TimeSource {
    fn now(self) -> Instant {
        Instant::now()
    }

    /// Seconds since the Unix epoch, for statuses.
    fn timestamp(self) -> f64 {
        unix_seconds()
    }
}

/// What happens to a task when its deadline comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Finish,
    /// Its `max_completion_time` ran out first.
    TimeOut,
}

/// A live task.
struct SimTask {
    /// The executor it runs under; `None` for a command task.
    executor_id: Option<String>,
    /// The framework hears TASK_KILLING.
    killing_state: bool,
    /// The timer that still counts for this task (0: none).
    timer: u64,
    ending: Ending,
}

/// An entry of the deadline heap; stale once its task is gone or has
/// another timer.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Deadline {
    at: Instant,
    timer: u64,
    key: Key,
}

/// The loop's state; owned by the loop alone.
struct Simulation {
    agent_id: String,
    sink: UpdateSink,
    time: TimeSource,
    tasks: BTreeMap<Key, SimTask>,
    /// Live tasks of each (framework, executor); command tasks are not here.
    executors: BTreeMap<Key, BTreeSet<String>>,
    deadlines: BinaryHeap<Reverse<Deadline>>,
    last_timer: u64,
}

impl Simulation {
    fn new(agent_id: String, sink: UpdateSink, time: TimeSource) -> Self {
        Self {
            agent_id,
            sink,
            time,
            tasks: BTreeMap::new(),
            executors: BTreeMap::new(),
            deadlines: BinaryHeap::new(),
            last_timer: 0,
        }
    }

    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Command>) {
        let sleep = tokio::time::sleep_until(self.time.now());
        tokio::pin!(sleep);
        loop {
            let next = self.deadlines.peek().map(|Reverse(d)| d.at);
            if let Some(at) = next
                && sleep.deadline() != at
            {
                sleep.as_mut().reset(at);
            }
            tokio::select! {
                command = inbox.recv() => {
                    let Some(command) = command else { return };
                    if !self.apply(command) {
                        return;
                    }
                    for _ in 1..BATCH {
                        let Ok(command) = inbox.try_recv() else { break };
                        if !self.apply(command) {
                            return;
                        }
                    }
                }
                () = &mut sleep, if next.is_some() => {}
            }
            self.fire_due();
        }
    }

    /// Applies a command; false once the loop must end.
    fn apply(&mut self, command: Command) -> bool {
        match command {
            Command::Launch(launch) => self.launch(*launch),
            Command::Kill(key) => self.kill(&key),
            Command::ShutdownExecutor(executor) => self.shutdown_executor(&executor),
            Command::ShutdownFramework(framework_id) => self.shutdown_framework(&framework_id),
            Command::Stop => return false,
        }
        true
    }

    fn launch(&mut self, launch: Launch) {
        let key = (
            framework_id(&launch.framework),
            launch.task.task_id.value.clone(),
        );
        if self.tasks.contains_key(&key) {
            tracing::warn!(framework = %key.0, task = %key.1, "task launched twice; ignored");
            return;
        }
        let executor_id = launch
            .executor
            .as_ref()
            .map(|e| e.executor_id.value.clone());
        if let Some(e) = &executor_id {
            self.executors
                .entry((key.0.clone(), e.clone()))
                .or_default()
                .insert(key.1.clone());
        }
        self.tasks.insert(
            key.clone(),
            SimTask {
                executor_id,
                killing_state: has_killing_state(&launch.framework),
                timer: 0,
                ending: Ending::Finish,
            },
        );
        let runs_for = match label_duration(&launch.task) {
            Ok(d) => d,
            Err(why) => {
                let message = format!("Invalid label '{DURATION_LABEL}': {why}");
                self.end(
                    &key,
                    v1::TaskState::TaskFailed,
                    Some(Reason::TaskInvalid),
                    message,
                    Source::Agent,
                );
                return;
            }
        };
        self.emit(
            &key,
            v1::TaskState::TaskRunning,
            None,
            None,
            Source::Executor,
        );
        let limit = launch
            .task
            .max_completion_time
            .as_ref()
            .filter(|d| d.nanoseconds > 0)
            .map(|d| Duration::from_nanos(d.nanoseconds.unsigned_abs()));
        let (after, ending) = match (runs_for, limit) {
            (Some(d), Some(limit)) if limit < d => (limit, Ending::TimeOut),
            (Some(d), _) => (d, Ending::Finish),
            (None, Some(limit)) => (limit, Ending::TimeOut),
            (None, None) => return,
        };
        // Past what an Instant can hold means never.
        if let Some(at) = self.time.now().checked_add(after) {
            self.last_timer += 1;
            let timer = self.last_timer;
            if let Some(task) = self.tasks.get_mut(&key) {
                task.timer = timer;
                task.ending = ending;
            }
            self.deadlines.push(Reverse(Deadline { at, timer, key }));
        }
    }

    /// Ends every task whose deadline has come.
    fn fire_due(&mut self) {
        let now = self.time.now();
        while self.deadlines.peek().is_some_and(|Reverse(d)| d.at <= now) {
            let Some(Reverse(due)) = self.deadlines.pop() else {
                break;
            };
            let Some(ending) = self
                .tasks
                .get(&due.key)
                .filter(|t| t.timer == due.timer)
                .map(|t| t.ending)
            else {
                continue;
            };
            match ending {
                Ending::Finish => self.end(
                    &due.key,
                    v1::TaskState::TaskFinished,
                    None,
                    "Command exited with status 0".to_string(),
                    Source::Executor,
                ),
                Ending::TimeOut => self.end(
                    &due.key,
                    v1::TaskState::TaskFailed,
                    Some(Reason::MaxCompletionTimeReached),
                    "Command terminated with signal Terminated".to_string(),
                    Source::Executor,
                ),
            }
        }
    }

    /// TASK_KILLING (when the framework hears it), then TASK_KILLED.
    fn kill(&mut self, key: &Key) {
        let Some(task) = self.tasks.get(key) else {
            return;
        };
        if task.killing_state {
            self.emit(
                key,
                v1::TaskState::TaskKilling,
                None,
                None,
                Source::Executor,
            );
        }
        self.end(
            key,
            v1::TaskState::TaskKilled,
            None,
            "Command terminated with signal Terminated".to_string(),
            Source::Executor,
        );
    }

    /// Kills the executor's tasks; it exits after the last. A command task's
    /// executor id is its task id, as upstream's command executor.
    fn shutdown_executor(&mut self, executor: &Key) {
        let tasks: Vec<String> = match self.executors.get(executor) {
            Some(tasks) => tasks.iter().cloned().collect(),
            None => vec![executor.1.clone()],
        };
        for task in tasks {
            let key = (executor.0.clone(), task);
            let own = self
                .tasks
                .get(&key)
                .is_some_and(|t| t.executor_id.as_deref().unwrap_or(&key.1) == executor.1);
            if own {
                self.kill(&key);
            }
        }
    }

    /// Forgets the framework's tasks and executors without a word: the
    /// master has removed them already.
    fn shutdown_framework(&mut self, framework_id: &str) {
        take_framework(&mut self.tasks, framework_id);
        take_framework(&mut self.executors, framework_id);
        // Their heap entries are stale now and are skipped when they come due.
    }

    /// Sends a state of a live task.
    fn emit(
        &self,
        key: &Key,
        state: v1::TaskState,
        reason: Option<Reason>,
        message: Option<String>,
        source: Source,
    ) {
        let Some(task) = self.tasks.get(key) else {
            return;
        };
        let executor_id = task.executor_id.as_deref().unwrap_or(&key.1);
        let status = task_status(
            &self.agent_id,
            &key.1,
            executor_id,
            state,
            reason,
            message,
            source,
            self.time.timestamp(),
        );
        (self.sink)(AgentUpdate::Status {
            agent_id: self.agent_id.clone(),
            framework_id: key.0.clone(),
            status: Box::new(status),
        });
    }

    /// Sends a terminal state and forgets the task; its executor exits
    /// after its last task.
    fn end(
        &mut self,
        key: &Key,
        state: v1::TaskState,
        reason: Option<Reason>,
        message: String,
        source: Source,
    ) {
        self.emit(key, state, reason, Some(message), source);
        let Some(task) = self.tasks.remove(key) else {
            return;
        };
        let Some(executor_id) = task.executor_id else {
            return;
        };
        let executor = (key.0.clone(), executor_id);
        let Some(tasks) = self.executors.get_mut(&executor) else {
            return;
        };
        tasks.remove(&key.1);
        if tasks.is_empty() {
            self.executors.remove(&executor);
            (self.sink)(AgentUpdate::ExecutorExited {
                agent_id: self.agent_id.clone(),
                framework_id: executor.0,
                executor_id: executor.1,
                status: 0,
            });
        }
    }
}

/// The task's `unisched.duration`: `Ok(None)` without the label.
fn label_duration(task: &v1::TaskInfo) -> Result<Option<Duration>, String> {
    let Some(label) = task
        .labels
        .as_ref()
        .and_then(|l| l.labels.iter().find(|l| l.key == DURATION_LABEL))
    else {
        return Ok(None);
    };
    let text = label.value.as_deref().ok_or("the label has no value")?;
    parse_duration(text).map(Some)
}

/// Decimal seconds (`1.5`) or a Go duration (`2s`, `500ms`, `1h30m`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".to_string());
    }
    let seconds = match text.parse::<f64>() {
        Ok(seconds) => seconds,
        Err(_) => {
            go_duration_seconds(text).map_err(|why| format!("invalid duration '{text}': {why}"))?
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("invalid duration '{text}': {e}"))
}

/// Seconds of a Go duration: numbers, each with a unit (ns, us, µs, ms, s,
/// m, h).
fn go_duration_seconds(text: &str) -> Result<f64, String> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return Err("negative".to_string());
    }
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_end == 0 {
            return Err(format!("expected a number at '{rest}'"));
        }
        let number: f64 = rest[..number_end]
            .parse()
            .map_err(|_| format!("bad number '{}'", &rest[..number_end]))?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err("missing unit".to_string()),
            unit => return Err(format!("unknown unit '{unit}'")),
        };
        seconds += number * scale;
        rest = &rest[unit_end..];
    }
    Ok(seconds)
}

// Shared with the process agent.

/// The framework's id as the master set it.
pub(super) fn framework_id(framework: &v1::FrameworkInfo) -> String {
    framework
        .id
        .as_ref()
        .map(|id| id.value.clone())
        .unwrap_or_default()
}

/// Takes the entries of one framework out of a map keyed by (framework, id).
pub(super) fn take_framework<V>(
    map: &mut BTreeMap<(String, String), V>,
    framework_id: &str,
) -> BTreeMap<(String, String), V> {
    let mut taken = map.split_off(&(framework_id.to_string(), String::new()));
    // No id sorts between `framework_id` and `framework_id\0`.
    let mut later = taken.split_off(&(format!("{framework_id}\0"), String::new()));
    map.append(&mut later);
    taken
}

/// Whether the framework declared TASK_KILLING_STATE (it then hears
/// TASK_KILLING before TASK_KILLED).
pub(super) fn has_killing_state(framework: &v1::FrameworkInfo) -> bool {
    framework
        .capabilities
        .iter()
        .any(|c| c.r#type() == v1::framework_info::capability::Type::TaskKillingState)
}

/// Now in seconds since the Unix epoch.
pub(super) fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A status as an agent or executor reports it; the master stamps the uuid.
#[allow(clippy::too_many_arguments)]
pub(super) fn task_status(
    agent_id: &str,
    task_id: &str,
    executor_id: &str,
    state: v1::TaskState,
    reason: Option<Reason>,
    message: Option<String>,
    source: Source,
    timestamp: f64,
) -> v1::TaskStatus {
    v1::TaskStatus {
        task_id: v1::TaskId {
            value: task_id.to_string(),
        },
        state: state as i32,
        message,
        source: Some(source as i32),
        reason: reason.map(|r| r as i32),
        agent_id: Some(v1::AgentId {
            value: agent_id.to_string(),
        }),
        executor_id: Some(v1::ExecutorId {
            value: executor_id.to_string(),
        }),
        timestamp: Some(timestamp),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: Result<f64, &str>) {
        let got = parse_duration(text).map(|d| d.as_secs_f64());
        match (got, expect) {
            (Ok(got), Ok(want)) => assert!((got - want).abs() < 1e-9, "{text}: {got} != {want}"),
            (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got:?} lacks {want:?}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn agent_duration_label_values() {
        check("1.5", Ok(1.5));
        check(" 2 ", Ok(2.0));
        check("0", Ok(0.0));
        check("2s", Ok(2.0));
        check("500ms", Ok(0.5));
        check("1m30s", Ok(90.0));
        check("1.5h", Ok(5400.0));
        check("250us", Ok(0.00025));
        check("250µs", Ok(0.00025));
        check("10ns", Ok(1e-8));
        check("+3s", Ok(3.0));
        check("", Err("empty"));
        check("abc", Err("expected a number"));
        check("5", Ok(5.0));
        check("5x", Err("unknown unit 'x'"));
        check("1s5", Err("missing unit"));
        check("-2s", Err("negative"));
        check("-1", Err("invalid duration '-1'"));
        check("NaN", Err("invalid duration"));
        check("1.2.3s", Err("bad number"));
    }
}
