//! Calls after SUBSCRIBE, and the life of tasks: status updates from agents
//! forwarded reliably, KILL, SHUTDOWN, ACKNOWLEDGE, RECONCILE, MESSAGE,
//! operation feedback calls.

use super::accept::master_status;
use super::state::{COMPLETED_TASKS_KEPT, Master, Timer, new_uuid, seconds};
use super::status::{Action, StreamState};
use super::units::app_id;
use super::{CallError, CallOutcome};
use crate::agent::AgentUpdate;
use crate::v1;
use crate::v1::scheduler::call::Type as CallType;
use crate::v1::scheduler::{Call, Event, event};

/// Mesos' name of a task state (`TASK_RUNNING`).
pub fn state_name(state: v1::TaskState) -> &'static str {
    state.as_str_name()
}

impl Master {
    /// Any call but SUBSCRIBE: the framework, its connection and the stream
    /// id are checked in Mesos' order, then the call is applied.
    pub(super) fn call(
        &mut self,
        mut call: Box<Call>,
        stream_id: Option<String>,
        principal: Option<&str>,
    ) -> Result<CallOutcome, CallError> {
        // Read where it lies: a `Call` holds every call's payload inline
        // (1.4 KB), and moving a copy out was the largest single cost of a
        // REVIVE (a fifth of the master's samples in a batch of them).
        let kind = call.r#type();
        let id = call
            .framework_id
            .take()
            .map(|f| f.value)
            .unwrap_or_default();
        let Some(f) = self.frameworks.get(&id) else {
            return Err(CallError::bad_request("Framework cannot be found"));
        };
        if let Some(p) = principal {
            let info = f.info.principal.as_deref().unwrap_or_default();
            if p != info {
                return Err(CallError::bad_request(
                    super::auth::http_principal_mismatch(p, info),
                ));
            }
        }
        if !f.connected() {
            return Err(CallError::forbidden("Framework is not subscribed"));
        }
        let Some(stream_id) = stream_id else {
            return Err(CallError::bad_request(
                "All non-subscribe calls should include the 'Mesos-Stream-Id' header",
            ));
        };
        if f.stream.as_ref().is_none_or(|s| s.id != stream_id) {
            return Err(CallError::bad_request(format!(
                "The stream ID '{stream_id}' included in this request didn't match the stream ID currently associated with framework ID {id}"
            )));
        }
        self.count_call(kind.as_str_name());
        match kind {
            CallType::Teardown => self.remove_framework(&id),
            CallType::Accept => {
                if let Some(a) = call.accept.take() {
                    self.accept(&id, a)
                }
            }
            CallType::Decline => {
                if let Some(d) = call.decline.take() {
                    self.decline(&id, d)
                }
            }
            CallType::Revive => {
                self.revive(&id, call.revive.take().map(|r| r.roles).unwrap_or_default())
            }
            CallType::Suppress => self.suppress(
                &id,
                call.suppress.take().map(|s| s.roles).unwrap_or_default(),
            ),
            CallType::Kill => {
                if let Some(k) = call.kill.take() {
                    self.kill(&id, k)
                }
            }
            CallType::Shutdown => {
                if let Some(s) = call.shutdown.take() {
                    self.shutdown_executor(&id, s)
                }
            }
            CallType::Acknowledge => {
                if let Some(a) = call.acknowledge.take() {
                    self.acknowledge(&id, a)
                }
            }
            CallType::Reconcile => {
                if let Some(r) = call.reconcile.take() {
                    self.reconcile(&id, r)
                }
            }
            CallType::Message => {
                if let Some(m) = call.message.take() {
                    self.message(&id, m)
                }
            }
            CallType::Request => {
                // Upstream hands requests to the allocator, which ignores them.
            }
            CallType::AcknowledgeOperationStatus => {
                if let Some(a) = call.acknowledge_operation_status.take() {
                    self.acknowledge_operation(&id, a)
                }
            }
            CallType::ReconcileOperations => {
                if let Some(r) = call.reconcile_operations.take() {
                    self.reconcile_operations(&id, r)
                }
            }
            CallType::UpdateFramework => {
                if let Some(u) = call.update_framework.take() {
                    return self.update_framework(&id, u);
                }
            }
            CallType::AcceptInverseOffers | CallType::DeclineInverseOffers => {
                // This master makes no inverse offers; there is nothing to answer.
            }
            CallType::Subscribe | CallType::Unknown => {
                return Err(CallError {
                    status: 501,
                    message: String::new(),
                });
            }
        }
        Ok(CallOutcome::Accepted)
    }

    /// A status update from an agent: recorded, resources given back at a
    /// terminal state, and forwarded to the framework reliably.
    pub(super) fn agent_update(&mut self, update: AgentUpdate) {
        match update {
            AgentUpdate::Status {
                agent_id,
                framework_id,
                mut status,
            } => {
                self.draining_update(&agent_id, &framework_id, &mut status);
                let key = (framework_id.clone(), status.task_id.value.clone());
                let now = self.now();
                let Some(task) = self.tasks.get_mut(&key) else {
                    tracing::debug!(framework = %framework_id, task = %key.1, "status update for a task the master does not know");
                    return;
                };
                if task.agent != agent_id || task.state.is_terminal() {
                    // Late updates of an ended task (or from another agent) are dropped.
                    return;
                }
                self.counters.valid_status_updates += 1;
                let state = status.state();
                status.agent_id = Some(v1::AgentId {
                    value: agent_id.clone(),
                });
                status.timestamp.get_or_insert(seconds(now));
                status
                    .source
                    .get_or_insert(v1::task_status::Source::Executor as i32);
                if status.uuid.is_none() {
                    status.uuid = Some(new_uuid());
                }
                task.state = state;
                task.statuses.push((*status).clone());
                if state.is_terminal() {
                    *self
                        .counters
                        .tasks_terminal
                        .entry(state_name(state))
                        .or_default() += 1;
                    self.give_back(&framework_id, &key.1);
                }
                self.publish_task_updated(&framework_id, &status, state);
                self.forward(&framework_id, &key.1, *status);
            }
            AgentUpdate::Message {
                agent_id,
                framework_id,
                executor_id,
                data,
            } => {
                let event = Event {
                    r#type: Some(event::Type::Message as i32),
                    message: Some(event::Message {
                        agent_id: v1::AgentId { value: agent_id },
                        executor_id: v1::ExecutorId { value: executor_id },
                        data,
                    }),
                    ..Default::default()
                };
                self.send(&framework_id, event);
            }
            AgentUpdate::ExecutorExited {
                agent_id,
                framework_id,
                executor_id,
                status,
            } => {
                if let Some(a) = self.agents.get_mut(&agent_id) {
                    a.executors
                        .remove(&(framework_id.clone(), executor_id.clone()));
                }
                self.release_executor(&framework_id, &executor_id, &agent_id);
                let event = Event {
                    r#type: Some(event::Type::Failure as i32),
                    failure: Some(event::Failure {
                        agent_id: Some(v1::AgentId { value: agent_id }),
                        executor_id: Some(v1::ExecutorId { value: executor_id }),
                        status: Some(status),
                    }),
                    ..Default::default()
                };
                self.send(&framework_id, event);
            }
        }
    }

    /// A task's resources go back to the core and its agent.
    fn give_back(&mut self, framework: &str, task: &str) {
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        if !std::mem::take(&mut t.holds) {
            return;
        }
        let allocations = std::mem::take(&mut t.allocations);
        let (agent, role, resources) = (t.agent.clone(), t.role.clone(), t.resources.clone());
        if let Some(a) = self.agents.get_mut(&agent) {
            a.give_back(&resources);
            a.tasks.remove(&key);
        }
        for allocation in allocations {
            self.core.release(app_id(framework, &role), allocation);
        }
    }

    /// Queues an update on the task's stream; sends it when nothing is in
    /// flight and the framework is connected.
    fn forward(&mut self, framework: &str, task: &str, status: v1::TaskStatus) {
        let now = self.now();
        let connected = self
            .frameworks
            .get(framework)
            .is_some_and(|f| f.connected());
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        let action = t.stream.push(status, now, connected);
        self.after_stream_action(framework, task, action);
    }

    fn after_stream_action(&mut self, framework: &str, task: &str, action: Action) {
        if let Action::Send(status) = action {
            self.send(framework, Self::update_event(*status));
        }
        let key = (framework.to_string(), task.to_string());
        if let Some(StreamState::AwaitingAck { retry_at, .. }) =
            self.tasks.get(&key).map(|t| t.stream.state())
        {
            self.at(
                retry_at,
                Timer::StatusRetry(framework.to_string(), task.to_string()),
            );
        }
    }

    /// A retry timer of a task's stream fired.
    pub(super) fn retry_status(&mut self, framework: &str, task: &str) {
        let now = self.now();
        let connected = self
            .frameworks
            .get(framework)
            .is_some_and(|f| f.connected());
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        let due = matches!(t.stream.state(), StreamState::AwaitingAck { retry_at, .. } if now >= retry_at);
        if !due {
            return;
        }
        let action = t.stream.retry(now, connected);
        self.after_stream_action(framework, task, action);
    }

    /// The framework came back: the task's update in flight goes out again.
    pub(super) fn resend_status(&mut self, framework: &str, task: &str) {
        let now = self.now();
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        let action = t.stream.reconnected(now);
        self.after_stream_action(framework, task, action);
    }

    /// ACKNOWLEDGE: the update in flight is done; a terminal one ends the task.
    fn acknowledge(&mut self, framework: &str, ack: v1::scheduler::call::Acknowledge) {
        let now = self.now();
        let key = (framework.to_string(), ack.task_id.value.clone());
        let Some(t) = self.tasks.get_mut(&key) else {
            self.counters.invalid_acknowledgements += 1;
            return;
        };
        if t.agent != ack.agent_id.value {
            self.counters.invalid_acknowledgements += 1;
            return;
        }
        let terminal = t
            .stream
            .in_flight()
            .is_some_and(|s| s.state().is_terminal());
        let (action, matched) = t.stream.acknowledge(&ack.uuid, now, true);
        if !matched {
            self.counters.invalid_acknowledgements += 1;
            return;
        }
        self.counters.valid_acknowledgements += 1;
        let idle = t.stream.is_idle();
        // The task's executor hears of it (a custom one: ACKNOWLEDGED).
        if let Some(executor) = &t.executor
            && let Some(a) = self.agents.get(&ack.agent_id.value)
        {
            a.backend
                .acknowledged(framework, &executor.executor_id.value, &key.1, &ack.uuid);
        }
        if terminal && idle {
            self.remove_task(framework, &key.1);
            return;
        }
        self.after_stream_action(framework, &key.1, action);
    }

    /// Takes a task out of the master (its resources back first).
    pub(super) fn remove_task(&mut self, framework: &str, task: &str) {
        self.give_back(framework, task);
        let key = (framework.to_string(), task.to_string());
        let Some(t) = self.tasks.remove(&key) else {
            return;
        };
        if let Some(a) = self.agents.get_mut(&t.agent) {
            a.tasks.remove(&key);
        }
        let record = self.task_record(&t);
        if let Some(f) = self.frameworks.get_mut(framework) {
            f.tasks.remove(task);
            f.completed_tasks.push_back(record);
            while f.completed_tasks.len() > COMPLETED_TASKS_KEPT {
                f.completed_tasks.pop_front();
            }
        }
    }

    /// A task of a framework being removed (TEARDOWN, its failover timeout):
    /// marked TASK_KILLED by the master, as Mesos marks it (reason
    /// REASON_FRAMEWORK_REMOVED), with no update sent (no framework is left
    /// to get it; its agents shut its tasks down), then moved to the
    /// framework's completed tasks. A task that already ended keeps its
    /// state.
    pub(super) fn remove_task_of_removed_framework(&mut self, framework: &str, task: &str) {
        let key = (framework.to_string(), task.to_string());
        let now = self.now();
        if let Some(t) = self.tasks.get_mut(&key)
            && !t.state.is_terminal()
        {
            let state = v1::TaskState::TaskKilled;
            let mut status = master_status(
                &t.info.task_id,
                Some(&v1::AgentId {
                    value: t.agent.clone(),
                }),
                state,
                v1::task_status::Reason::FrameworkRemoved,
                format!("Framework {framework} removed"),
                now,
            );
            status.executor_id = t.executor.as_ref().map(|e| e.executor_id.clone());
            // No uuid: it is never sent, so never acknowledged.
            t.state = state;
            t.statuses.push(status.clone());
            *self
                .counters
                .tasks_terminal
                .entry(state_name(state))
                .or_default() += 1;
            self.publish_task_updated(framework, &status, state);
        }
        self.remove_task(framework, task);
    }

    /// The task as `/state` and reconciliation describe it.
    pub(super) fn task_record(&self, t: &super::state::Task) -> v1::Task {
        v1::Task {
            name: t.info.name.clone(),
            task_id: t.info.task_id.clone(),
            framework_id: v1::FrameworkId {
                value: t.framework.clone(),
            },
            executor_id: t.executor.as_ref().map(|e| e.executor_id.clone()),
            agent_id: v1::AgentId {
                value: t.agent.clone(),
            },
            state: t.state as i32,
            resources: t.info.resources.clone(),
            statuses: t.statuses.clone(),
            status_update_state: t.stream.in_flight().map(|s| s.state),
            status_update_uuid: t.stream.in_flight().and_then(|s| s.uuid.clone()),
            labels: t.info.labels.clone(),
            discovery: t.info.discovery.clone(),
            container: t.info.container.clone(),
            health_check: t.info.health_check.clone(),
            kill_policy: t.info.kill_policy,
            user: None,
            limits: Default::default(),
        }
    }

    /// The state reconciliation reports: the update the framework is being
    /// told (in flight), else the latest.
    fn reported_state(t: &super::state::Task) -> v1::TaskState {
        t.stream.in_flight().map(|s| s.state()).unwrap_or(t.state)
    }

    /// KILL: an unknown task is reconciled instead; another agent's is ignored.
    fn kill(&mut self, framework: &str, kill: v1::scheduler::call::Kill) {
        let key = (framework.to_string(), kill.task_id.value.clone());
        let Some(t) = self.tasks.get(&key) else {
            self.reconcile(
                framework,
                v1::scheduler::call::Reconcile {
                    tasks: vec![v1::scheduler::call::reconcile::Task {
                        task_id: kill.task_id,
                        agent_id: kill.agent_id,
                    }],
                },
            );
            return;
        };
        if kill.agent_id.as_ref().is_some_and(|a| a.value != t.agent) || t.state.is_terminal() {
            return;
        }
        let grace = kill
            .kill_policy
            .as_ref()
            .or(t.info.kill_policy.as_ref())
            .and_then(|p| p.grace_period.as_ref())
            .map(super::units::duration)
            .unwrap_or(self.settings.kill_grace_period);
        if let Some(a) = self.agents.get(&t.agent) {
            a.backend.kill_task(framework, &kill.task_id.value, grace);
        }
    }

    /// SHUTDOWN: the executor's tasks are killed.
    fn shutdown_executor(&mut self, framework: &str, shutdown: v1::scheduler::call::Shutdown) {
        if let Some(a) = self.agents.get(&shutdown.agent_id.value) {
            a.backend
                .shutdown_executor(framework, &shutdown.executor_id.value);
        }
    }

    /// MESSAGE: handed to the agent, best effort.
    fn message(&mut self, framework: &str, message: v1::scheduler::call::Message) {
        if let Some(a) = self.agents.get(&message.agent_id.value) {
            a.backend
                .framework_message(framework, &message.executor_id.value, message.data);
        }
    }

    /// RECONCILE: implicit (every task the framework has) or explicit.
    fn reconcile(&mut self, framework: &str, reconcile: v1::scheduler::call::Reconcile) {
        let now = self.now();
        let aware = self.frameworks[framework].partition_aware();
        let mut updates = Vec::new();
        let reply = |t: &super::state::Task| {
            let mut s = master_status(
                &t.info.task_id,
                Some(&v1::AgentId {
                    value: t.agent.clone(),
                }),
                Self::reported_state(t),
                v1::task_status::Reason::Reconciliation,
                "Reconciliation: Latest task state".to_string(),
                now,
            );
            s.executor_id = t.executor.as_ref().map(|e| e.executor_id.clone());
            s
        };
        if reconcile.tasks.is_empty() {
            for task in &self.frameworks[framework].tasks {
                if let Some(t) = self.tasks.get(&(framework.to_string(), task.clone())) {
                    updates.push(reply(t));
                }
            }
        } else {
            for wanted in reconcile.tasks {
                let key = (framework.to_string(), wanted.task_id.value.clone());
                if let Some(t) = self.tasks.get(&key) {
                    updates.push(reply(t));
                    continue;
                }
                let (state, message) = match &wanted.agent_id {
                    Some(a) if self.agent_gone(&a.value) => (
                        if aware {
                            v1::TaskState::TaskGoneByOperator
                        } else {
                            v1::TaskState::TaskLost
                        },
                        "Reconciliation: Task is gone",
                    ),
                    Some(a) if self.agents.contains_key(&a.value) => (
                        if aware {
                            v1::TaskState::TaskGone
                        } else {
                            v1::TaskState::TaskLost
                        },
                        "Reconciliation: Task is unknown to the agent",
                    ),
                    _ => (
                        if aware {
                            v1::TaskState::TaskUnknown
                        } else {
                            v1::TaskState::TaskLost
                        },
                        "Reconciliation: Task is unknown",
                    ),
                };
                updates.push(master_status(
                    &wanted.task_id,
                    wanted.agent_id.as_ref(),
                    state,
                    v1::task_status::Reason::Reconciliation,
                    message.to_string(),
                    now,
                ));
            }
        }
        for status in updates {
            self.send(framework, Self::update_event(status));
        }
    }

    /// The core refused a task allocation (its node went away between the
    /// offer and the accept): the task is lost.
    pub(super) fn task_allocation_rejected(&mut self, allocation: &str, reason: &str) {
        let found = self
            .tasks
            .iter()
            .find(|(_, t)| t.allocations.iter().any(|a| a == allocation))
            .map(|(k, _)| k.clone());
        let Some((framework, task)) = found else {
            return;
        };
        tracing::warn!(%framework, %task, %reason, "the core refused a task's allocation");
        if let Some(t) = self.tasks.get_mut(&(framework.clone(), task.clone())) {
            // Nothing of it to give back to the core.
            t.allocations.retain(|a| a != allocation);
        }
        self.lose_task(
            &framework,
            &task,
            v1::task_status::Reason::ResourcesUnknown,
            reason,
        );
    }

    /// A task ends without its agent: TASK_GONE (partition aware) or
    /// TASK_LOST, its agent told to kill it, its resources given back.
    pub(super) fn lose_task(
        &mut self,
        framework: &str,
        task: &str,
        reason: v1::task_status::Reason,
        message: &str,
    ) {
        let aware = self
            .frameworks
            .get(framework)
            .is_some_and(|f| f.partition_aware());
        let state = if aware {
            v1::TaskState::TaskGone
        } else {
            v1::TaskState::TaskLost
        };
        self.fail_task(framework, task, state, reason, message);
    }

    /// A task ends in `state` by the master's decision (its agent told to
    /// kill it, its resources given back), the framework told reliably.
    pub(super) fn fail_task(
        &mut self,
        framework: &str,
        task: &str,
        state: v1::TaskState,
        reason: v1::task_status::Reason,
        message: &str,
    ) {
        let key = (framework.to_string(), task.to_string());
        let now = self.now();
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        if t.state.is_terminal() {
            return;
        }
        let mut status = master_status(
            &t.info.task_id,
            Some(&v1::AgentId {
                value: t.agent.clone(),
            }),
            state,
            reason,
            message.to_string(),
            now,
        );
        status.uuid = Some(new_uuid());
        t.state = state;
        t.statuses.push(status.clone());
        if let Some(a) = self.agents.get(&t.agent) {
            a.backend
                .kill_task(framework, task, std::time::Duration::ZERO);
        }
        *self
            .counters
            .tasks_terminal
            .entry(state_name(state))
            .or_default() += 1;
        self.give_back(framework, task);
        self.publish_task_updated(framework, &status, state);
        self.forward(framework, task, status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_are_the_upstream_ones() {
        use v1::TaskState::*;
        for s in [
            TaskStaging,
            TaskStarting,
            TaskRunning,
            TaskKilling,
            TaskUnreachable,
        ] {
            assert!(!s.is_terminal(), "{s:?}");
        }
        for s in [
            TaskFinished,
            TaskFailed,
            TaskKilled,
            TaskError,
            TaskLost,
            TaskDropped,
            TaskGone,
            TaskGoneByOperator,
            TaskUnknown,
        ] {
            assert!(s.is_terminal(), "{s:?}");
        }
    }
}
