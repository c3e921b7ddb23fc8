//! The simulation's agents: an [`AgentBackend`] that only writes down what
//! the master asks of it (launch, kill, shutdown, stop) in one inbox shared
//! by every agent, and the tasks' lives decided from that inbox on the
//! virtual clock.
//!
//! The master calls the backends on its own thread, in its own order; the
//! simulation reads the inbox only between two quiescent points, so what an
//! agent does depends on nothing but the run so far. A task's updates carry
//! uuids the simulation makes, so the checks know every update an agent
//! sent and in which order.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use unisched_mesos::agent::{AgentBackend, Launch};
use unisched_mesos::master::AgentSpec;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::TaskState;

/// The label that carries a task's plan (see [`Plan`]).
pub const PLAN_LABEL: &str = "soak.plan";

/// What the master asked of an agent.
#[derive(Debug)]
pub enum Command {
    /// Start a task.
    Launch(Box<Launch>),
    /// Kill a task.
    Kill {
        /// Agent id.
        agent: String,
        /// Framework id.
        framework: String,
        /// Task id.
        task: String,
    },
    /// Kill an executor's tasks.
    ShutdownExecutor {
        /// Agent id.
        agent: String,
        /// Framework id.
        framework: String,
        /// Executor id.
        executor: String,
    },
    /// Forget a framework's tasks (TEARDOWN; no updates).
    ShutdownFramework {
        /// Agent id.
        agent: String,
        /// Framework id.
        framework: String,
    },
    /// The agent is going away.
    Stop {
        /// Agent id.
        agent: String,
    },
}

/// The inbox every simulated agent writes to.
#[derive(Debug, Default)]
pub struct Inbox(Mutex<Vec<Command>>);

impl Inbox {
    fn push(&self, c: Command) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c);
    }

    /// Everything asked so far, oldest first.
    pub fn take(&self) -> Vec<Command> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

struct Backend {
    agent: String,
    inbox: Arc<Inbox>,
}

impl AgentBackend for Backend {
    fn launch(&self, launch: Launch) {
        self.inbox.push(Command::Launch(Box::new(launch)));
    }

    fn kill_task(&self, framework_id: &str, task_id: &str, _grace: Duration) {
        self.inbox.push(Command::Kill {
            agent: self.agent.clone(),
            framework: framework_id.to_string(),
            task: task_id.to_string(),
        });
    }

    fn shutdown_executor(&self, framework_id: &str, executor_id: &str) {
        self.inbox.push(Command::ShutdownExecutor {
            agent: self.agent.clone(),
            framework: framework_id.to_string(),
            executor: executor_id.to_string(),
        });
    }

    fn shutdown_framework(&self, framework_id: &str) {
        self.inbox.push(Command::ShutdownFramework {
            agent: self.agent.clone(),
            framework: framework_id.to_string(),
        });
    }

    fn framework_message(&self, _framework_id: &str, _executor_id: &str, _data: Vec<u8>) {}

    fn stop(&self) {
        self.inbox.push(Command::Stop {
            agent: self.agent.clone(),
        });
    }
}

/// Resources (and occupied resources) of an agent of each size.
pub fn resources_of(size: u8) -> (&'static str, &'static str) {
    match size % 4 {
        0 => ("cpus:1;mem:512;ports:[31000-31004]", ""),
        1 => ("cpus:2;mem:1024;ports:[31000-31009]", ""),
        2 => ("cpus:4;mem:2048;disk:1024;ports:[31000-31019]", ""),
        _ => ("cpus:2;mem:1024;disk:512", "cpus:0.5;mem:128"),
    }
}

/// An agent's spec for the master; its backend writes to `inbox`.
pub fn spec(hostname: String, size: u8, inbox: Arc<Inbox>) -> AgentSpec {
    let (total, occupied) = resources_of(size);
    AgentSpec {
        hostname,
        resources: Resources::parse(total).unwrap_or_default(),
        occupied: Resources::parse(occupied).unwrap_or_default(),
        attributes: Vec::new(),
        backend: Box::new(move |id: &str| {
            Arc::new(Backend {
                agent: id.to_string(),
                inbox,
            }) as Arc<dyn AgentBackend>
        }),
    }
}

/// What a task does once launched, drawn from one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// TASK_STARTING before TASK_RUNNING.
    pub starting: bool,
    /// TASK_FAILED at once, never running.
    pub fail_at_start: bool,
    /// Ends by itself after this many seconds (`None`: runs until killed).
    pub runs: Option<u32>,
    /// Ends with TASK_FAILED rather than TASK_FINISHED.
    pub fails: bool,
    /// A kill takes 2 s (TASK_KILLING first when the framework wants it).
    pub slow_kill: bool,
}

impl Plan {
    /// The plan of byte `b`.
    pub fn from_byte(b: u8) -> Plan {
        Plan {
            starting: b & 1 != 0,
            fail_at_start: b.is_multiple_of(23),
            runs: match (b >> 1) % 8 {
                0 | 1 => None,
                2 => Some(1),
                3 => Some(2),
                4 => Some(5),
                5 => Some(12),
                6 => Some(30),
                _ => Some(200),
            },
            fails: (b >> 4).is_multiple_of(4),
            slow_kill: b & 0x80 != 0,
        }
    }

    /// As a label value.
    pub fn label(self) -> String {
        format!(
            "{}{}{}{}:{}",
            u8::from(self.starting),
            u8::from(self.fail_at_start),
            u8::from(self.fails),
            u8::from(self.slow_kill),
            self.runs.map_or(-1, i64::from)
        )
    }

    /// From a label value (a plan that runs forever when it does not parse).
    pub fn parse(text: &str) -> Plan {
        let mut plan = Plan {
            starting: false,
            fail_at_start: false,
            runs: None,
            fails: false,
            slow_kill: false,
        };
        let Some((flags, runs)) = text.split_once(':') else {
            return plan;
        };
        let f: Vec<bool> = flags.chars().map(|c| c == '1').collect();
        if f.len() == 4 {
            (
                plan.starting,
                plan.fail_at_start,
                plan.fails,
                plan.slow_kill,
            ) = (f[0], f[1], f[2], f[3]);
        }
        plan.runs = runs.parse::<u32>().ok();
        plan
    }

    /// The plan a launch carries.
    pub fn of(task: &v1::TaskInfo) -> Plan {
        task.labels
            .as_ref()
            .and_then(|l| l.labels.iter().find(|l| l.key == PLAN_LABEL))
            .and_then(|l| l.value.as_deref())
            .map_or_else(|| Plan::parse(""), Plan::parse)
    }
}

/// A task on a simulated agent.
#[derive(Debug, Clone)]
pub struct AgentTask {
    /// Its plan.
    pub plan: Plan,
    /// Its executor, if not a command task.
    pub executor: Option<String>,
    /// Its framework wants TASK_KILLING.
    pub killing_state: bool,
    /// Ends by itself at this clock second.
    pub ends_at: Option<u64>,
    /// A slow kill completes at this clock second.
    pub killed_at: Option<u64>,
}

/// An update an agent sends: (agent, framework, task, state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emission {
    /// Agent id.
    pub agent: String,
    /// Framework id.
    pub framework: String,
    /// Task id.
    pub task: String,
    /// The state.
    pub state: TaskState,
}

/// A live simulated agent.
#[derive(Debug, Clone, Default)]
pub struct Agent {
    /// Index of its host in [`Agents::hosts`].
    pub host: usize,
    /// Live tasks by (framework, task).
    pub tasks: BTreeMap<(String, String), AgentTask>,
    /// An operator deactivated or drained it (`service.rs`): nothing of it
    /// may be offered.
    pub out_of_service: bool,
}

/// A host: agents come and go on it.
#[derive(Debug, Clone)]
pub struct Host {
    /// Hostname.
    pub name: String,
    /// Agent size (see [`resources_of`]).
    pub size: u8,
    /// The id of the agent running on it now.
    pub agent: Option<String>,
}

/// Every host and live agent of the run.
#[derive(Debug, Default)]
pub struct Agents {
    /// Hosts in the order they joined.
    pub hosts: Vec<Host>,
    /// Live agents by id.
    pub live: BTreeMap<String, Agent>,
}

fn has_killing_state(f: &v1::FrameworkInfo) -> bool {
    f.capabilities
        .iter()
        .any(|c| c.r#type() == v1::framework_info::capability::Type::TaskKillingState)
}

impl Agents {
    /// Applies what the master asked; returns the updates to send now.
    pub fn apply(&mut self, commands: Vec<Command>, now: u64) -> Vec<Emission> {
        let mut out = Vec::new();
        for c in commands {
            match c {
                Command::Launch(launch) => self.launch(*launch, now, &mut out),
                Command::Kill {
                    agent,
                    framework,
                    task,
                } => self.kill(&agent, &framework, &task, now, &mut out),
                Command::ShutdownExecutor {
                    agent,
                    framework,
                    executor,
                } => {
                    let tasks: Vec<String> = self
                        .live
                        .get(&agent)
                        .map(|a| {
                            a.tasks
                                .iter()
                                .filter(|((f, _), t)| {
                                    *f == framework && t.executor.as_deref() == Some(&executor)
                                })
                                .map(|((_, t), _)| t.clone())
                                .collect()
                        })
                        .unwrap_or_default();
                    for t in tasks {
                        self.end(&agent, &framework, &t, TaskState::TaskKilled, &mut out);
                    }
                }
                Command::ShutdownFramework { agent, framework } => {
                    if let Some(a) = self.live.get_mut(&agent) {
                        a.tasks.retain(|(f, _), _| *f != framework);
                    }
                }
                Command::Stop { agent } => {
                    self.live.remove(&agent);
                }
            }
        }
        out
    }

    fn launch(&mut self, launch: Launch, now: u64, out: &mut Vec<Emission>) {
        let framework = launch
            .framework
            .id
            .as_ref()
            .map(|i| i.value.clone())
            .unwrap_or_default();
        let task = launch.task.task_id.value.clone();
        let Some(a) = self.live.get_mut(&launch.agent_id) else {
            return;
        };
        let key = (framework.clone(), task.clone());
        if a.tasks.contains_key(&key) {
            return;
        }
        let plan = Plan::of(&launch.task);
        let emit = |state| Emission {
            agent: launch.agent_id.clone(),
            framework: framework.clone(),
            task: task.clone(),
            state,
        };
        if plan.fail_at_start {
            out.push(emit(TaskState::TaskFailed));
            return;
        }
        if plan.starting {
            out.push(emit(TaskState::TaskStarting));
        }
        out.push(emit(TaskState::TaskRunning));
        a.tasks.insert(
            key,
            AgentTask {
                plan,
                executor: launch
                    .executor
                    .as_ref()
                    .map(|e| e.executor_id.value.clone()),
                killing_state: has_killing_state(&launch.framework),
                ends_at: plan.runs.map(|s| now + u64::from(s)),
                killed_at: None,
            },
        );
    }

    fn kill(
        &mut self,
        agent: &str,
        framework: &str,
        task: &str,
        now: u64,
        out: &mut Vec<Emission>,
    ) {
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.live.get_mut(agent).and_then(|a| a.tasks.get_mut(&key)) else {
            return;
        };
        if t.killed_at.is_some() {
            return;
        }
        let emit = |state| Emission {
            agent: agent.to_string(),
            framework: framework.to_string(),
            task: task.to_string(),
            state,
        };
        if t.killing_state {
            out.push(emit(TaskState::TaskKilling));
        }
        if t.plan.slow_kill {
            t.killed_at = Some(now + 2);
            return;
        }
        self.end(agent, framework, task, TaskState::TaskKilled, out);
    }

    /// A task ends in `state` (a terminal one) and leaves its agent.
    pub fn end(
        &mut self,
        agent: &str,
        framework: &str,
        task: &str,
        state: TaskState,
        out: &mut Vec<Emission>,
    ) {
        let key = (framework.to_string(), task.to_string());
        if let Some(a) = self.live.get_mut(agent)
            && a.tasks.remove(&key).is_some()
        {
            out.push(Emission {
                agent: agent.to_string(),
                framework: framework.to_string(),
                task: task.to_string(),
                state,
            });
        }
    }

    /// Tasks whose time has come end; slow kills complete.
    pub fn due(&mut self, now: u64) -> Vec<Emission> {
        let mut due = Vec::new();
        for (agent, a) in &self.live {
            for ((framework, task), t) in &a.tasks {
                let state = if t.killed_at.is_some_and(|at| at <= now) {
                    TaskState::TaskKilled
                } else if t.killed_at.is_none() && t.ends_at.is_some_and(|at| at <= now) {
                    if t.plan.fails {
                        TaskState::TaskFailed
                    } else {
                        TaskState::TaskFinished
                    }
                } else {
                    continue;
                };
                due.push((agent.clone(), framework.clone(), task.clone(), state));
            }
        }
        let mut out = Vec::new();
        for (agent, framework, task, state) in due {
            self.end(&agent, &framework, &task, state, &mut out);
        }
        out
    }

    /// Every live task, in a fixed order: (agent, framework, task).
    pub fn tasks(&self) -> Vec<(String, String, String)> {
        self.live
            .iter()
            .flat_map(|(agent, a)| {
                a.tasks
                    .keys()
                    .map(move |(f, t)| (agent.clone(), f.clone(), t.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_survive_their_label() {
        for b in 0..=255u8 {
            let plan = Plan::from_byte(b);
            assert_eq!(Plan::parse(&plan.label()), plan, "byte {b}");
        }
        assert_eq!(Plan::parse("nonsense").runs, None);
    }

    #[test]
    fn agent_sizes_parse() {
        for size in 0..4 {
            let (total, occupied) = resources_of(size);
            assert!(Resources::parse(total).is_ok());
            assert!(Resources::parse(occupied).is_ok());
        }
    }
}
