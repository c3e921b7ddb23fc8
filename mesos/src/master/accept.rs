//! ACCEPT: offers checked as Mesos checks them, operations applied in
//! order, tasks turned into core allocations taken from the offers' leases
//! in one request, and what is left declined with the call's filters.

use super::state::{Master, Task};
use super::status::StatusStream;
use super::subscribe::validate_id;
use super::units::{app_id, task_allocation_id, to_core};
use crate::agent::Launch;
use crate::resources::Resources;
use crate::v1;
use crate::v1::offer::operation::Type as Op;

/// A status update the master makes itself (no uuid: never retried or acknowledged).
pub fn master_status(
    task_id: &v1::TaskId,
    agent: Option<&v1::AgentId>,
    state: v1::TaskState,
    reason: v1::task_status::Reason,
    message: String,
    now: u64,
) -> v1::TaskStatus {
    v1::TaskStatus {
        task_id: task_id.clone(),
        state: state as i32,
        message: Some(message),
        source: Some(v1::task_status::Source::Master as i32),
        reason: Some(reason as i32),
        agent_id: agent.cloned(),
        timestamp: Some(super::state::seconds(now)),
        ..Default::default()
    }
}

/// Gives every resource without an allocation role the offer's `role`, as
/// upstream does for schedulers that leave it out (those written before
/// MULTI_ROLE).
fn inject_allocation(op: &mut v1::offer::Operation, role: &str) {
    fn fill(resources: &mut [v1::Resource], role: &str) {
        for r in resources {
            if r.allocation_info.is_none() {
                r.allocation_info = Some(v1::resource::AllocationInfo {
                    role: Some(role.to_string()),
                });
            }
        }
    }
    if let Some(launch) = &mut op.launch {
        for task in &mut launch.task_infos {
            fill(&mut task.resources, role);
            if let Some(e) = &mut task.executor {
                fill(&mut e.resources, role);
            }
        }
    }
    if let Some(group) = &mut op.launch_group {
        fill(&mut group.executor.resources, role);
        for task in &mut group.task_group.tasks {
            fill(&mut task.resources, role);
        }
    }
}

/// The tasks of a LAUNCH or LAUNCH_GROUP operation.
fn launched_tasks(op: &v1::offer::Operation) -> Vec<&v1::TaskInfo> {
    match op.r#type() {
        Op::Launch => op
            .launch
            .as_ref()
            .map(|l| l.task_infos.iter().collect())
            .unwrap_or_default(),
        Op::LaunchGroup => op
            .launch_group
            .as_ref()
            .map(|l| l.task_group.tasks.iter().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

impl Master {
    /// Checks the offers of an ACCEPT as Mesos does (unique, outstanding,
    /// the caller's, one role, one agent).
    fn validate_offers(&self, framework: &str, ids: &[v1::OfferId]) -> Result<(), String> {
        if ids.is_empty() {
            return Err("No offers specified".to_string());
        }
        let mut seen = std::collections::BTreeSet::new();
        for id in ids {
            if !seen.insert(&id.value) {
                return Err(format!("Duplicate offer {} in offer list", id.value));
            }
        }
        let mut role: Option<&str> = None;
        let mut agent: Option<&str> = None;
        for id in ids {
            let Some(offer) = self.offers.get(&id.value) else {
                return Err(format!("Offer {} is no longer valid", id.value));
            };
            if offer.framework != framework {
                return Err(format!(
                    "Offer {} has invalid framework {} while framework {framework} is expected",
                    id.value, offer.framework
                ));
            }
            match role {
                Some(r) if r != offer.role => {
                    return Err(format!(
                        "Aggregated offers must be allocated to the same role. Offer {} uses role '{}' but another is using role '{r}'",
                        id.value, offer.role
                    ));
                }
                _ => role = Some(&offer.role),
            }
            match agent {
                Some(a) if a != offer.agent => {
                    return Err(format!(
                        "Aggregated offers must belong to one single agent. Offer {} uses agent {} and agent {a}",
                        id.value, offer.agent
                    ));
                }
                _ => agent = Some(&offer.agent),
            }
        }
        Ok(())
    }

    /// ACCEPT.
    pub(super) fn accept(&mut self, framework: &str, mut accept: v1::scheduler::call::Accept) {
        let now = self.now();
        if let Err(error) = self.validate_offers(framework, &accept.offer_ids) {
            tracing::warn!(%framework, %error, "ACCEPT with invalid offers");
            // Valid offers among them go back without a filter.
            for id in &accept.offer_ids {
                if self
                    .offers
                    .get(&id.value)
                    .is_some_and(|o| o.framework == framework)
                {
                    self.rescind(&id.value, false);
                }
            }
            let state = if self.frameworks[framework].partition_aware() {
                v1::TaskState::TaskDropped
            } else {
                v1::TaskState::TaskLost
            };
            for op in &accept.operations {
                if !matches!(op.r#type(), Op::Launch | Op::LaunchGroup) {
                    self.drop_operation(
                        framework,
                        op,
                        &format!("Operation attempted with invalid offers: {error}"),
                    );
                    continue;
                }
                for task in launched_tasks(op) {
                    let status = master_status(
                        &task.task_id,
                        Some(&task.agent_id),
                        state,
                        v1::task_status::Reason::InvalidOffers,
                        format!("Task launched with invalid offers: {error}"),
                        now,
                    );
                    self.send(framework, Self::update_event(status));
                }
            }
            return;
        }
        self.counters.offers_accepted += accept.offer_ids.len() as u64;
        let offers: Vec<_> = accept
            .offer_ids
            .iter()
            .filter_map(|id| self.take_offer(&id.value))
            .collect();
        let role = offers[0].role.clone();
        let agent_id = offers[0].agent.clone();
        let app = app_id(framework, &role);
        for op in &mut accept.operations {
            inject_allocation(op, &role);
        }
        let mut remaining = Resources::default();
        for o in &offers {
            remaining.add(&o.resources);
        }
        let mut launched_any = false;
        for op in &accept.operations {
            match op.r#type() {
                Op::Launch => {
                    let tasks = op
                        .launch
                        .as_ref()
                        .map(|l| l.task_infos.clone())
                        .unwrap_or_default();
                    for task in tasks {
                        let checked = self
                            .validate_task(framework, &agent_id, &task, None)
                            .and_then(|total| {
                                if remaining.contains(&total) {
                                    Ok(total)
                                } else {
                                    Err(format!(
                                        "Total resources {total} required by task and its executor is more than available {remaining}"
                                    ))
                                }
                            });
                        match checked {
                            Ok(consumed) => {
                                remaining.subtract(&consumed);
                                self.launch(framework, &role, &agent_id, task, None, consumed);
                                launched_any = true;
                            }
                            Err(message) => self.task_error(framework, &task, &agent_id, message),
                        }
                    }
                }
                Op::LaunchGroup => {
                    let Some(group) = op.launch_group.clone() else {
                        continue;
                    };
                    match self.validate_group(framework, &agent_id, &group, &remaining) {
                        Ok(consumed) => {
                            let mut first = true;
                            for task in group.task_group.tasks {
                                // The executor's resources count once, with the first task.
                                let mut mine = Resources::from_vec(task.resources.clone());
                                if first && self.new_executor(framework, &agent_id, &group.executor)
                                {
                                    mine.add(&Resources::from_vec(
                                        group.executor.resources.clone(),
                                    ));
                                }
                                first = false;
                                self.launch(
                                    framework,
                                    &role,
                                    &agent_id,
                                    task,
                                    Some((*group.executor).clone()),
                                    mine,
                                );
                            }
                            remaining.subtract(&consumed);
                            launched_any = true;
                        }
                        Err(message) => {
                            for task in &group.task_group.tasks {
                                self.task_error(framework, task, &agent_id, message.clone());
                            }
                        }
                    }
                }
                _ => self.drop_operation(
                    framework,
                    op,
                    "Operation is not supported by this master yet",
                ),
            }
        }
        if !launched_any {
            self.counters.offers_declined += offers.len() as u64;
        }
        // Leases go back in the same request that takes the tasks' allocations
        // from them; the filter for the rest goes first.
        self.decline_resources(
            framework,
            &role,
            &agent_id,
            &remaining,
            accept.filters.as_ref(),
        );
        for o in offers {
            self.core.release(app.clone(), o.lease);
        }
    }

    /// Whether launching under `executor` starts a new executor on the agent.
    fn new_executor(&self, framework: &str, agent: &str, executor: &v1::ExecutorInfo) -> bool {
        !self.agents[agent]
            .executors
            .contains_key(&(framework.to_string(), executor.executor_id.value.clone()))
    }

    /// Checks one task against the framework and agent; returns the
    /// resources it takes (its own, plus its executor's when that starts with
    /// it). Whether they fit in the offers is the caller's check.
    fn validate_task(
        &self,
        framework: &str,
        agent: &str,
        task: &v1::TaskInfo,
        group_executor: Option<&v1::ExecutorInfo>,
    ) -> Result<Resources, String> {
        validate_id(&task.task_id.value).map_err(|e| format!("Task has an invalid TaskID: {e}"))?;
        if self.frameworks[framework]
            .tasks
            .contains(&task.task_id.value)
        {
            return Err(format!("Task has duplicate ID: {}", task.task_id.value));
        }
        if task.agent_id.value != agent {
            return Err(format!(
                "Task uses invalid agent {} while agent {agent} is expected",
                task.agent_id.value
            ));
        }
        if let Some(kp) = &task.kill_policy
            && kp.grace_period.as_ref().is_some_and(|g| g.nanoseconds < 0)
        {
            return Err("Task's 'kill_policy.grace_period' must be non-negative".to_string());
        }
        if task.resources.is_empty() {
            return Err("Task uses no resources".to_string());
        }
        Resources::validate(&task.resources)
            .map_err(|e| format!("Task uses invalid resources: {e}"))?;
        let mut total = Resources::from_vec(task.resources.clone());
        if group_executor.is_none() {
            if task.executor.is_some() == task.command.is_some() {
                return Err(
                    "Task should have at least one (but not both) of CommandInfo or ExecutorInfo present"
                        .to_string(),
                );
            }
            if let Some(executor) = &task.executor {
                validate_id(&executor.executor_id.value)
                    .map_err(|e| format!("Executor has an invalid ExecutorID: {e}"))?;
                if executor.command.is_none() {
                    return Err("'ExecutorInfo.command' must be set".to_string());
                }
                Resources::validate(&executor.resources)
                    .map_err(|e| format!("Executor uses invalid resources: {e}"))?;
                if self.new_executor(framework, agent, executor) {
                    total.add(&Resources::from_vec(executor.resources.clone()));
                }
            }
        }
        Ok(total)
    }

    /// Checks a LAUNCH_GROUP: every task, the executor, and the total.
    fn validate_group(
        &self,
        framework: &str,
        agent: &str,
        group: &v1::offer::operation::LaunchGroup,
        remaining: &Resources,
    ) -> Result<Resources, String> {
        let executor = &group.executor;
        if executor.r#type.is_none() {
            return Err("'ExecutorInfo.type' must be set".to_string());
        }
        validate_id(&executor.executor_id.value)
            .map_err(|e| format!("Executor has an invalid ExecutorID: {e}"))?;
        Resources::validate(&executor.resources)
            .map_err(|e| format!("Executor uses invalid resources: {e}"))?;
        let mut total = Resources::default();
        if self.new_executor(framework, agent, executor) {
            total.add(&Resources::from_vec(executor.resources.clone()));
        }
        let mut ids = std::collections::BTreeSet::new();
        for task in &group.task_group.tasks {
            if !ids.insert(&task.task_id.value) {
                return Err(format!("Task has duplicate ID: {}", task.task_id.value));
            }
            if task.executor.is_some() {
                return Err(format!(
                    "Task '{}' is invalid: 'TaskInfo.executor' must not be set",
                    task.task_id.value
                ));
            }
            let t = self
                .validate_task(framework, agent, task, Some(executor))
                .map_err(|e| format!("Task '{}' is invalid: {e}", task.task_id.value))?;
            total.add(&t);
        }
        if !remaining.contains(&total) {
            return Err(format!(
                "Total resources {total} required by task group and its executor are more than available {remaining}"
            ));
        }
        Ok(total)
    }

    /// TASK_ERROR for a task that cannot be launched.
    fn task_error(&mut self, framework: &str, task: &v1::TaskInfo, agent: &str, message: String) {
        let status = master_status(
            &task.task_id,
            Some(&v1::AgentId {
                value: agent.to_string(),
            }),
            v1::TaskState::TaskError,
            v1::task_status::Reason::TaskInvalid,
            message,
            self.now(),
        );
        *self
            .counters
            .tasks_terminal
            .entry("TASK_ERROR")
            .or_default() += 1;
        self.send(framework, Self::update_event(status));
    }

    /// Records a task (staging), takes its core allocation from the offers'
    /// leases, and hands it to the agent.
    fn launch(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        task: v1::TaskInfo,
        group_executor: Option<v1::ExecutorInfo>,
        resources: Resources,
    ) {
        let executor = group_executor.or_else(|| task.executor.as_deref().cloned());
        if let Some(e) = &executor {
            let key = (framework.to_string(), e.executor_id.value.clone());
            let a = self.agents.get_mut(agent).expect("agent exists");
            a.executors.entry(key).or_insert_with(|| e.clone());
        }
        let task_id = task.task_id.value.clone();
        let allocation = task_allocation_id(framework, &task_id);
        self.core.allocate(
            app_id(framework, role),
            allocation.clone(),
            agent.to_string(),
            to_core(resources.iter()),
        );
        let a = self.agents.get_mut(agent).expect("agent exists");
        a.take(&resources);
        a.tasks.insert((framework.to_string(), task_id.clone()));
        let f = self
            .frameworks
            .get_mut(framework)
            .expect("framework exists");
        f.tasks.insert(task_id.clone());
        let launch = Launch {
            framework: f.info.clone(),
            agent_id: agent.to_string(),
            task: task.clone(),
            executor: executor.clone(),
        };
        self.tasks.insert(
            (framework.to_string(), task_id),
            Task {
                framework: framework.to_string(),
                agent: agent.to_string(),
                role: role.to_string(),
                info: task,
                executor,
                state: v1::TaskState::TaskStaging,
                statuses: Vec::new(),
                stream: StatusStream::default(),
                resources,
                allocation: Some(allocation),
            },
        );
        self.agents[agent].backend.launch(launch);
    }

    /// An operation that is not applied: with an operation id, the framework
    /// gets OPERATION_ERROR (as upstream drops operations); without, it is
    /// only logged.
    fn drop_operation(&mut self, framework: &str, op: &v1::offer::Operation, message: &str) {
        tracing::warn!(%framework, op = ?op.r#type(), %message, "operation dropped");
        let Some(id) = &op.id else { return };
        let event = v1::scheduler::Event {
            r#type: Some(v1::scheduler::event::Type::UpdateOperationStatus as i32),
            update_operation_status: Some(v1::scheduler::event::UpdateOperationStatus {
                status: v1::OperationStatus {
                    operation_id: Some(id.clone()),
                    state: v1::OperationState::OperationError as i32,
                    message: Some(message.to_string()),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        self.send(framework, event);
    }
}
