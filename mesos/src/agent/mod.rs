//! Agents, where tasks run: the trait the master drives them through, and
//! the embedded kinds (`process`: a process per task in a sandbox directory;
//! `simulated`: no process, timed state changes).
//!
//! The master calls an agent only with methods that return at once; the
//! agent reports back through the [`UpdateSink`] it was made with, from any
//! thread, in the order things happened to each task.

pub mod custom;
pub mod process;
pub mod simulated;

use std::sync::Arc;
use std::time::Duration;

use crate::v1;

/// What the master hands an agent to start a task.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The framework (id set).
    pub framework: v1::FrameworkInfo,
    /// This agent's id.
    pub agent_id: String,
    /// The task (resources, command or executor, labels, ...).
    pub task: v1::TaskInfo,
    /// The executor it runs under: the task's own, or a task group's; `None`
    /// for a command task.
    pub executor: Option<v1::ExecutorInfo>,
}

/// What an agent reports to the master.
#[derive(Debug, Clone)]
pub enum AgentUpdate {
    /// A task's state changed. The master stamps the uuid, agent id and
    /// timestamp when they are missing.
    Status {
        /// Agent id.
        agent_id: String,
        /// Framework id.
        framework_id: String,
        /// The new status (task id, state, message, reason, source, ...).
        status: Box<v1::TaskStatus>,
    },
    /// An executor sent its framework a message.
    Message {
        /// Agent id.
        agent_id: String,
        /// Framework id.
        framework_id: String,
        /// Executor id.
        executor_id: String,
        /// The data.
        data: Vec<u8>,
    },
    /// An executor ended (its framework gets FAILURE).
    ExecutorExited {
        /// Agent id.
        agent_id: String,
        /// Framework id.
        framework_id: String,
        /// Executor id.
        executor_id: String,
        /// Its exit status (wait status as upstream reports it).
        status: i32,
    },
}

/// Where an agent sends its updates.
pub type UpdateSink = Arc<dyn Fn(AgentUpdate) + Send + Sync>;

/// An agent as the master drives it. Every method returns at once; outcomes
/// arrive as [`AgentUpdate`]s.
pub trait AgentBackend: Send + Sync {
    /// Starts a task: TASK_STARTING (optional) and TASK_RUNNING follow, then
    /// a terminal state.
    fn launch(&self, launch: Launch);
    /// Kills a task: TASK_KILLED once it is gone (SIGTERM, SIGKILL after
    /// `grace`). Unknown or ended tasks are ignored.
    fn kill_task(&self, framework_id: &str, task_id: &str, grace: Duration);
    /// Kills every task of an executor; the executor then exits.
    fn shutdown_executor(&self, framework_id: &str, executor_id: &str);
    /// Kills every task of a framework (TEARDOWN); no updates are needed.
    fn shutdown_framework(&self, framework_id: &str);
    /// The scheduler acknowledged the update `uuid` of a task of executor
    /// `executor_id` (a custom executor hears of it, even after the task
    /// ended). Agents whose executors need no acknowledgements ignore it.
    fn acknowledged(&self, _framework_id: &str, _executor_id: &str, _task_id: &str, _uuid: &[u8]) {}
    /// Delivers a framework message to an executor (best effort).
    fn framework_message(&self, framework_id: &str, executor_id: &str, data: Vec<u8>);
    /// Kills everything; the agent is going away.
    fn stop(&self);
    /// Persistent volumes were destroyed (DESTROY): their data goes. Agents
    /// that keep no volume data ignore it.
    fn destroy_volumes(&self, _volumes: &[v1::Resource]) {}
}

/// Which embedded agent `unisched serve --agents N` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutorKind {
    /// `/bin/sh -c` per task, in a sandbox directory.
    #[default]
    Process,
    /// No process: running at once, finished after the task's
    /// `unisched.duration` label (never without one).
    Simulated,
}
