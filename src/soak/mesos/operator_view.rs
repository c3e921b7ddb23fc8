//! The operator API's event stream, read beside the simulation: a
//! subscriber from the start, whose events are folded into a view of the
//! cluster (frameworks, agents, tasks with their latest state) that every
//! step compares with the master's `/state`. The stream must tell the same
//! story as the state: every framework and agent listed there and none
//! more, every live task with the state `/state` gives it, and a task the
//! state no longer lists ended in the view.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use tokio::sync::mpsc;
use unisched_mesos::master::MasterHandle;
use unisched_mesos::master::report::Query;
use unisched_mesos::v1::master::event::Type;
use unisched_mesos::v1::master::{Event, response};
use unisched_mesos::v1::{Task, TaskState};

/// Room for the events of one step (the master drops a subscriber that
/// cannot take one, which the check reports).
const CAPACITY: usize = 1 << 16;

/// A subscriber and what its events have said so far.
pub struct OperatorView {
    events: mpsc::Receiver<Event>,
    subscribed: bool,
    frameworks: BTreeSet<String>,
    agents: BTreeSet<String>,
    /// (framework id, task id) → latest state.
    tasks: BTreeMap<(String, String), TaskState>,
}

impl OperatorView {
    /// Subscribes to `master`'s operator events.
    pub fn subscribe(master: &MasterHandle) -> OperatorView {
        let (sink, events) = mpsc::channel(CAPACITY);
        master.send(unisched_mesos::master::Input::Query(
            Query::OperatorSubscribe(sink),
        ));
        OperatorView {
            events,
            subscribed: false,
            frameworks: BTreeSet::new(),
            agents: BTreeSet::new(),
            tasks: BTreeMap::new(),
        }
    }

    fn task(&mut self, t: &Task) {
        self.tasks.insert(
            (t.framework_id.value.clone(), t.task_id.value.clone()),
            t.state(),
        );
    }

    fn state(&mut self, s: &response::GetState) {
        for f in s.get_frameworks.iter().flat_map(|f| &f.frameworks) {
            if let Some(id) = &f.framework_info.id {
                self.frameworks.insert(id.value.clone());
            }
        }
        for a in s.get_agents.iter().flat_map(|a| &a.agents) {
            if let Some(id) = &a.agent_info.id {
                self.agents.insert(id.value.clone());
            }
        }
        for t in s.get_tasks.iter().flat_map(|t| &t.tasks) {
            self.task(t);
        }
    }

    /// Folds in the events that came; what was wrong with them.
    fn read(&mut self, v: &mut Vec<String>) {
        loop {
            let e = match self.events.try_recv() {
                Ok(e) => e,
                Err(mpsc::error::TryRecvError::Empty) => return,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    v.push("operator stream: the master dropped the subscriber".to_string());
                    return;
                }
            };
            match e.r#type() {
                Type::Subscribed => {
                    if self.subscribed {
                        v.push("operator stream: SUBSCRIBED twice".to_string());
                    }
                    self.subscribed = true;
                    if let Some(s) = e.subscribed.as_ref().and_then(|s| s.get_state.as_ref()) {
                        self.state(s);
                    }
                }
                _ if !self.subscribed => {
                    v.push(format!(
                        "operator stream: {:?} before SUBSCRIBED",
                        e.r#type()
                    ));
                }
                Type::FrameworkAdded | Type::FrameworkUpdated => {
                    let f = e
                        .framework_added
                        .map(|a| a.framework)
                        .or(e.framework_updated.map(|u| u.framework));
                    if let Some(id) = f.and_then(|f| f.framework_info.id) {
                        self.frameworks.insert(id.value);
                    }
                }
                Type::FrameworkRemoved => {
                    if let Some(id) = e.framework_removed.and_then(|r| r.framework_info.id) {
                        if !self.frameworks.remove(&id.value) {
                            v.push(format!(
                                "operator stream: {} removed, never added",
                                id.value
                            ));
                        }
                        self.tasks.retain(|(f, _), _| *f != id.value);
                    }
                }
                Type::AgentAdded => {
                    if let Some(id) = e.agent_added.and_then(|a| a.agent.agent_info.id) {
                        self.agents.insert(id.value);
                    }
                }
                Type::AgentRemoved => {
                    if let Some(r) = e.agent_removed
                        && !self.agents.remove(&r.agent_id.value)
                    {
                        v.push(format!(
                            "operator stream: agent {} removed, never added",
                            r.agent_id.value
                        ));
                    }
                }
                Type::TaskAdded => {
                    if let Some(a) = e.task_added {
                        self.task(&a.task);
                    }
                }
                Type::TaskUpdated => {
                    if let Some(u) = e.task_updated {
                        let key = (u.framework_id.value.clone(), u.status.task_id.value.clone());
                        match self.tasks.get_mut(&key) {
                            Some(s) => *s = u.state(),
                            None => v.push(format!(
                                "operator stream: task {} of {} updated, never added",
                                key.1, key.0
                            )),
                        }
                    }
                }
                Type::Heartbeat | Type::Unknown => {}
            }
        }
    }

    /// Reads what came and compares it with `state` (the live `/state`).
    pub fn check(&mut self, state: &Value) -> Vec<String> {
        let mut v = Vec::new();
        self.read(&mut v);
        if !self.subscribed {
            v.push("operator stream: no SUBSCRIBED".to_string());
            return v;
        }
        let ids = |key: &str| -> BTreeSet<String> {
            state[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        };
        let frameworks = ids("frameworks");
        if frameworks != self.frameworks {
            v.push(format!(
                "operator stream: frameworks {:?}, /state {:?}",
                self.frameworks, frameworks
            ));
        }
        let agents = ids("slaves");
        if agents != self.agents {
            v.push(format!(
                "operator stream: agents {:?}, /state {:?}",
                self.agents, agents
            ));
        }
        let mut live = BTreeSet::new();
        for f in state["frameworks"].as_array().into_iter().flatten() {
            let fid = f["id"].as_str().unwrap_or_default().to_string();
            for t in f["tasks"].as_array().into_iter().flatten() {
                let key = (
                    fid.clone(),
                    t["id"].as_str().unwrap_or_default().to_string(),
                );
                let listed = t["state"].as_str().unwrap_or_default();
                match self.tasks.get(&key) {
                    Some(s) if s.as_str_name() == listed => {}
                    Some(s) => v.push(format!(
                        "operator stream: task {} of {} is {}, /state says {listed}",
                        key.1,
                        key.0,
                        s.as_str_name()
                    )),
                    None => v.push(format!(
                        "operator stream: task {} of {} ({listed}) never added",
                        key.1, key.0
                    )),
                }
                live.insert(key);
            }
        }
        // A task /state no longer lists ended (it is among the completed).
        for (key, s) in &self.tasks {
            if !live.contains(key) && !is_terminal(*s) {
                v.push(format!(
                    "operator stream: task {} of {} gone from /state, still {}",
                    key.1,
                    key.0,
                    s.as_str_name()
                ));
            }
        }
        self.tasks
            .retain(|key, s| live.contains(key) || !is_terminal(*s));
        v
    }
}

fn is_terminal(s: TaskState) -> bool {
    matches!(
        s,
        TaskState::TaskFinished
            | TaskState::TaskFailed
            | TaskState::TaskKilled
            | TaskState::TaskError
            | TaskState::TaskLost
            | TaskState::TaskDropped
            | TaskState::TaskGone
            | TaskState::TaskGoneByOperator
    )
}
