//! ACCEPT: offers checked as Mesos checks them, operations applied in
//! order, tasks turned into core allocations taken from the offers' leases
//! in one request, and what is left declined with the call's filters.

use super::state::{Master, Task};
use super::status::StatusStream;
use super::subscribe::validate_id;
use super::units::{app_id, executor_allocation_id, task_allocation_id, to_core};
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

/// A task recorded in an ACCEPT, to be committed once its operations are
/// applied.
struct PendingLaunch {
    framework: String,
    task: String,
    launch: Launch,
    /// The executor it starts, whose resources take their own core
    /// allocations first (`executor_holds`).
    starts_executor: Option<String>,
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

/// What an operation that a resource provider applies consumes: CREATE_DISK
/// and DESTROY_DISK of provider disks, GROW_VOLUME and SHRINK_VOLUME of a
/// provider's volume (upstream refuses those; here the provider decides).
/// `None` for an operation the master applies itself.
fn provider_operation(op: &v1::offer::Operation) -> Option<Resources> {
    let provided = |r: &v1::Resource| r.provider_id.is_some();
    let resources: Vec<v1::Resource> = match op.r#type() {
        Op::CreateDisk => vec![(*op.create_disk.as_ref()?.source).clone()],
        Op::DestroyDisk => vec![(*op.destroy_disk.as_ref()?.source).clone()],
        Op::GrowVolume => {
            let g = op.grow_volume.as_ref()?;
            vec![(*g.volume).clone(), (*g.addition).clone()]
        }
        Op::ShrinkVolume => vec![(*op.shrink_volume.as_ref()?.volume).clone()],
        _ => return None,
    };
    resources
        .iter()
        .all(provided)
        .then(|| Resources::from_vec(resources))
}

/// Checks an operation a provider applies as upstream does.
fn validate_provider_operation(op: &v1::offer::Operation) -> Result<(), String> {
    use v1::resource::disk_info::source::Type as Source;
    let source_type = |r: &v1::Resource| {
        r.disk
            .as_ref()
            .and_then(|d| d.source.as_ref())
            .map(|s| s.r#type())
    };
    match op.r#type() {
        Op::CreateDisk => {
            let c = op.create_disk.as_ref().ok_or("Missing 'create_disk'")?;
            Resources::validate(std::slice::from_ref(&*c.source))
                .map_err(|e| format!("Invalid resource in the 'source' field: {e}"))?;
            if c.source.name != "disk" {
                return Err("'source' is not a disk resource".to_string());
            }
            if source_type(&c.source) != Some(Source::Raw) {
                return Err("'source' is not a RAW disk resource".to_string());
            }
            if !matches!(c.target_type(), Source::Mount | Source::Block) {
                return Err("'target_type' is neither MOUNT or BLOCK".to_string());
            }
            Ok(())
        }
        Op::DestroyDisk => {
            let d = op.destroy_disk.as_ref().ok_or("Missing 'destroy_disk'")?;
            Resources::validate(std::slice::from_ref(&*d.source))
                .map_err(|e| format!("Invalid resource in the 'source' field: {e}"))?;
            if d.source
                .disk
                .as_ref()
                .is_some_and(|x| x.persistence.is_some())
            {
                return Err("A disk resource containing a persistent volume cannot be destroyed directly. Please destroy the persistent volume first then destroy the disk resource".to_string());
            }
            match source_type(&d.source) {
                Some(Source::Mount | Source::Block) => Ok(()),
                Some(Source::Raw)
                    if d.source
                        .disk
                        .as_ref()
                        .and_then(|x| x.source.as_ref())
                        .is_some_and(|s| s.id.is_some()) =>
                {
                    Ok(())
                }
                _ => Err(
                    "'source' is neither a MOUNT, a BLOCK nor a RAW disk with an id".to_string(),
                ),
            }
        }
        _ => Ok(()),
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
            let Some(offer) = self.offers.get(id.value.as_str()) else {
                return Err(format!("Offer {} is no longer valid", id.value));
            };
            if *offer.framework != *framework {
                return Err(format!(
                    "Offer {} has invalid framework {} while framework {framework} is expected",
                    id.value, offer.framework
                ));
            }
            match role {
                Some(r) if r != &*offer.role => {
                    return Err(format!(
                        "Aggregated offers must be allocated to the same role. Offer {} uses role '{}' but another is using role '{r}'",
                        id.value, offer.role
                    ));
                }
                _ => role = Some(&offer.role),
            }
            match agent {
                Some(a) if a != &*offer.agent => {
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
                if let Some(number) = self.offers.number(&id.value)
                    && self
                        .offers
                        .get_number(number)
                        .is_some_and(|o| *o.framework == *framework)
                {
                    self.rescind(number, false);
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
            .filter_map(|id| {
                let number = self.offers.number(&id.value)?;
                self.withdraw_offer(number)
            })
            .collect();
        let role = offers[0].role.clone();
        let agent_id = offers[0].agent.clone();
        for op in &mut accept.operations {
            inject_allocation(op, &role);
        }
        let mut remaining = Resources::default();
        for o in &offers {
            remaining.add(&o.resources.allocated(&o.role));
        }
        let mut launches: Vec<PendingLaunch> = Vec::new();
        let mut pools_changed = false;
        for op in &accept.operations {
            if let Some(id) = &op.id
                && self
                    .operation_ids
                    .contains_key(&(framework.to_string(), id.value.clone()))
            {
                self.drop_operation(
                    framework,
                    op,
                    &format!("Operation ID '{}' is already in use", id.value),
                );
                continue;
            }
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
                                // A new executor's resources are its own hold.
                                let starts = task.executor.as_deref().and_then(|e| {
                                    self.hold_executor(framework, &role, &agent_id, e)
                                });
                                let own = Resources::from_vec(task.resources.clone());
                                launches.push(self.record_task(
                                    framework, &role, &agent_id, task, None, own, starts,
                                ));
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
                            // A new executor's resources are its own hold,
                            // taken with the first task.
                            let mut starts =
                                self.hold_executor(framework, &role, &agent_id, &group.executor);
                            for task in group.task_group.tasks {
                                let own = Resources::from_vec(task.resources.clone());
                                launches.push(self.record_task(
                                    framework,
                                    &role,
                                    &agent_id,
                                    task,
                                    Some((*group.executor).clone()),
                                    own,
                                    starts.take(),
                                ));
                            }
                            remaining.subtract(&consumed);
                        }
                        Err(message) => {
                            for task in &group.task_group.tasks {
                                self.task_error(framework, task, &agent_id, message.clone());
                            }
                        }
                    }
                }
                Op::CreateDisk | Op::DestroyDisk | Op::GrowVolume | Op::ShrinkVolume
                    if provider_operation(op).is_some() =>
                {
                    let consumed = provider_operation(op).unwrap_or_default();
                    let checked = validate_provider_operation(op).and_then(|()| {
                        if remaining.contains(&consumed) {
                            Ok(())
                        } else {
                            Err(format!(
                                "Invalid {} operation: {consumed} are not available in the offered resources {remaining}",
                                op.r#type().as_str_name()
                            ))
                        }
                    });
                    match checked.and_then(|()| {
                        self.apply_provider_operation(framework, &agent_id, op, &consumed)
                    }) {
                        Ok(()) => {
                            remaining.subtract(&consumed);
                            // Held by the operation from now on: occupied on
                            // the provider's pool node before the lease goes
                            // (the core never sees it free in between).
                            self.sync_pools(&agent_id);
                        }
                        Err(message) => self.drop_operation(framework, op, &message),
                    }
                }
                Op::Reserve
                | Op::Unreserve
                | Op::Create
                | Op::Destroy
                | Op::GrowVolume
                | Op::ShrinkVolume => {
                    match self.apply_speculative(framework, &agent_id, op, &mut remaining) {
                        Ok(moved) => pools_changed |= moved,
                        Err(message) => self.drop_operation(framework, op, &message),
                    }
                }
                Op::CreateDisk | Op::DestroyDisk => self.drop_operation(
                    framework,
                    op,
                    &format!(
                        "Invalid {} operation: its 'source' is not a resource provider's disk",
                        op.r#type().as_str_name()
                    ),
                ),
                Op::Unknown => self.drop_operation(framework, op, "Unknown operation"),
            }
        }
        if launches.is_empty() {
            self.counters.offers_declined += offers.len() as u64;
        }
        // What is left goes back to the agent; the filter for it is set below.
        if let Some(a) = self.agents.get_mut(&agent_id) {
            a.unoffer(&remaining);
        }
        if pools_changed {
            // Resources moved between pools: the leases go first, then the
            // pools' nodes change, then the tasks take their allocations.
            for o in &offers {
                self.release_leases(o);
            }
            self.sync_pools(&agent_id);
            for launch in launches {
                self.commit_launch(launch);
            }
        } else {
            // Leases go back in the same request that takes the tasks'
            // allocations from them.
            for launch in launches {
                self.commit_launch(launch);
            }
            for o in &offers {
                self.release_leases(o);
            }
        }
        self.decline_resources(
            framework,
            &role,
            &agent_id,
            &remaining,
            accept.filters.as_ref(),
        );
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
        if self.agents.get(agent).is_some_and(|a| a.external) {
            return Err(format!(
                "Agent {agent} stands for the resources of an external resource provider and runs no tasks"
            ));
        }
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

    /// Records a task (staging) and what it holds of its agent; its core
    /// allocations and its start on the agent follow in [`Self::commit_launch`].
    #[allow(clippy::too_many_arguments)] // one per part of the record
    fn record_task(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        task: v1::TaskInfo,
        group_executor: Option<v1::ExecutorInfo>,
        resources: Resources,
        starts_executor: Option<String>,
    ) -> PendingLaunch {
        let executor = group_executor.or_else(|| task.executor.as_deref().cloned());
        if let Some(e) = &executor {
            let key = (framework.to_string(), e.executor_id.value.clone());
            let a = self.agents.get_mut(agent).expect("agent exists");
            a.executors.entry(key).or_insert_with(|| e.clone());
        }
        let task_id = task.task_id.value.clone();
        let a = self.agents.get_mut(agent).expect("agent exists");
        a.launch_from_offer(&resources);
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
            (framework.to_string(), task_id.clone()),
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
                allocations: Vec::new(),
                holds: true,
            },
        );
        self.publish_task_added(framework, &task_id);
        PendingLaunch {
            framework: framework.to_string(),
            task: task_id,
            launch,
            starts_executor,
        }
    }

    /// When `executor` is not running on the agent yet: records what it
    /// holds of the agent (its core allocations follow with its first
    /// task's, in [`Self::commit_launch`]); its id.
    fn hold_executor(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        executor: &v1::ExecutorInfo,
    ) -> Option<String> {
        if !self.new_executor(framework, agent, executor) {
            return None;
        }
        let key = (
            framework.to_string(),
            executor.executor_id.value.clone(),
            agent.to_string(),
        );
        let resources = Resources::from_vec(executor.resources.clone());
        let a = self.agents.get_mut(agent).expect("agent exists");
        a.launch_from_offer(&resources);
        self.executor_holds.insert(
            key,
            super::state::ExecutorHold {
                role: role.to_string(),
                resources,
                allocations: Vec::new(),
            },
        );
        Some(executor.executor_id.value.clone())
    }

    /// The core allocations of `resources` on `agent` for the framework's
    /// `role`, one per pool of the agent they use, named `base` (and
    /// `base@<node>` off the agent's own node).
    fn allocate_in_core(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        resources: &Resources,
        base: &str,
    ) -> Vec<String> {
        let mut allocations = Vec::new();
        for (pool, part) in super::pools::split(resources) {
            let Some(node) = self
                .agents
                .get(agent)
                .and_then(|a| a.pools.get(&pool))
                .map(|p| p.node.clone())
            else {
                continue;
            };
            let scalars = to_core(part.iter());
            if scalars.resources.is_empty() {
                continue;
            }
            let id = if node == agent {
                base.to_string()
            } else {
                format!("{base}@{node}")
            };
            self.core
                .allocate(app_id(framework, role), id.clone(), node, scalars);
            allocations.push(id);
        }
        allocations
    }

    /// Releases every executor hold whose (framework, executor, agent)
    /// key `which` picks.
    pub(super) fn release_executors_where(
        &mut self,
        which: impl Fn(&(String, String, String)) -> bool,
    ) {
        let keys: Vec<(String, String, String)> = self
            .executor_holds
            .keys()
            .filter(|k| which(k))
            .cloned()
            .collect();
        for (framework, executor, agent) in keys {
            self.release_executor(&framework, &executor, &agent);
        }
    }

    /// An executor's resources go back to its agent and the core (it
    /// exited, or its framework or agent went).
    pub(super) fn release_executor(&mut self, framework: &str, executor: &str, agent: &str) {
        let Some(hold) = self.executor_holds.remove(&(
            framework.to_string(),
            executor.to_string(),
            agent.to_string(),
        )) else {
            return;
        };
        if let Some(a) = self.agents.get_mut(agent) {
            a.give_back(&hold.resources);
        }
        for allocation in hold.allocations {
            self.core.release(app_id(framework, &hold.role), allocation);
        }
    }

    /// A recorded task takes its core allocations (one per pool of the agent
    /// it uses) and starts on its agent.
    fn commit_launch(&mut self, pending: PendingLaunch) {
        let PendingLaunch {
            framework,
            task,
            launch,
            starts_executor,
        } = pending;
        let agent = self
            .tasks
            .get(&(framework.clone(), task.clone()))
            .map(|t| t.agent.clone());
        if let (Some(executor), Some(agent)) = (starts_executor, agent) {
            let key = (framework.clone(), executor, agent);
            if let Some(hold) = self.executor_holds.get(&key) {
                let (role, resources) = (hold.role.clone(), hold.resources.clone());
                let (executor, agent) = (&key.1, &key.2);
                let base = executor_allocation_id(&framework, executor, agent);
                let allocations =
                    self.allocate_in_core(&framework, &role, agent, &resources, &base);
                if let Some(hold) = self.executor_holds.get_mut(&key) {
                    hold.allocations = allocations;
                }
            }
        }
        let key = (framework.clone(), task.clone());
        let Some(t) = self.tasks.get(&key) else {
            return;
        };
        let (agent, role, resources) = (t.agent.clone(), t.role.clone(), t.resources.clone());
        let base = task_allocation_id(&framework, &task);
        let allocations = self.allocate_in_core(&framework, &role, &agent, &resources, &base);
        let provided: Vec<v1::Resource> = self
            .tasks
            .get(&key)
            .map(|t| {
                t.resources
                    .iter()
                    .filter(|r| r.provider_id.is_some())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if let Some(t) = self.tasks.get_mut(&key) {
            t.allocations = allocations;
        }
        if let Some(provider) = provided
            .first()
            .and_then(|r| r.provider_id.as_ref())
            .map(|p| p.value.clone())
        {
            // Provider resources are published before the task starts.
            self.publish_then_launch(&provider, &framework, &task, provided, launch);
        } else if let Some(a) = self.agents.get(&agent) {
            a.backend.launch(launch);
        }
    }
}
