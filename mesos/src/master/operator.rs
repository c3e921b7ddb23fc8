//! Mesos' v1 operator API of the master (`POST /api/v1`): the read-only
//! calls an operator's tools make (GET_HEALTH, GET_FLAGS, GET_VERSION,
//! GET_METRICS, GET_STATE, GET_AGENTS, GET_FRAMEWORKS, GET_EXECUTORS,
//! GET_TASKS, GET_ROLES, GET_WEIGHTS, GET_MASTER) and TEARDOWN, answered on
//! the master thread from its books, in `mesos.v1.master.Response`.
//!
//! GET_QUOTA reads the core's queues (see [`quota_status`]; the HTTP edge
//! answers it, as only the core knows them). UPDATE_WEIGHTS, UPDATE_QUOTA,
//! SET_QUOTA and REMOVE_QUOTA change the queue configuration the core has
//! (`super::quota`). RESERVE_RESOURCES, UNRESERVE_RESOURCES,
//! CREATE_VOLUMES, DESTROY_VOLUMES, GROW_VOLUME and SHRINK_VOLUME apply to
//! an agent's free resources (`super::agent_ops`). DEACTIVATE_AGENT,
//! REACTIVATE_AGENT, DRAIN_AGENT and MARK_AGENT_GONE take agents out of
//! service (`super::drain`). GET_LOGGING_LEVEL and SET_LOGGING_LEVEL go
//! to the process's log filter (`super::logging`). Calls this master does
//! not serve (the files API, maintenance) get 501 with the call's name.

use std::collections::BTreeMap;

use super::CallError;
use super::framework::Framework;
use super::state::{Master, seconds};
use crate::resources::Resources;
use crate::v1;
use crate::v1::master::call::Type as CallType;
use crate::v1::master::response::{self, Type as ResponseType};
use crate::v1::master::{Call, Response};

/// Mesos quota of the core's queues: each queue below `root` with a
/// guaranteed or a maximum is its role's quota (`root.a.b` is `a/b`), in
/// Mesos' names and units (`vcore` thousandths as `cpus`, bytes as MB); in
/// `configs`, and in the older `infos` (guarantees only) as Mesos fills it.
pub fn quota_status(snapshot: &unisched_core::PartitionSnapshot) -> v1::quota::QuotaStatus {
    let scalars = |map: &BTreeMap<String, i64>| {
        map.iter()
            .map(|(name, value)| {
                let (name, value) = super::units::scalar_from_core(name, *value);
                (name, v1::value::Scalar { value })
            })
            .collect()
    };
    let mut configs: Vec<v1::quota::QuotaConfig> = snapshot
        .queues
        .iter()
        .filter(|q| !q.guaranteed.is_empty() || !q.max.is_empty())
        .filter_map(|q| {
            Some(v1::quota::QuotaConfig {
                role: super::units::queue_role(&q.path)?,
                guarantees: scalars(&q.guaranteed),
                limits: scalars(&q.max),
            })
        })
        .collect();
    configs.sort_by(|a, b| a.role.cmp(&b.role));
    // The older form beside it, as Mesos writes it for older tools: each
    // role's guarantees as scalar resources.
    let infos = configs
        .iter()
        .map(|c| v1::quota::QuotaInfo {
            role: Some(c.role.clone()),
            principal: None,
            guarantee: c
                .guarantees
                .iter()
                .map(|(name, scalar)| v1::Resource {
                    name: name.clone(),
                    r#type: v1::value::Type::Scalar as i32,
                    scalar: Some(*scalar),
                    ..Default::default()
                })
                .collect(),
        })
        .collect();
    #[allow(deprecated)] // `infos`, Mesos' older form, still written.
    v1::quota::QuotaStatus { infos, configs }
}

/// How a call of the operator API went wrong: 400, 501, with a reason.
fn not_served(kind: CallType) -> CallError {
    CallError {
        status: 501,
        message: format!(
            "{} is not served by this master (see README, 'Not served')",
            kind.as_str_name()
        ),
    }
}

/// The status of a call's answer when it has no body (as upstream answers
/// the calls that change something): 200, or 202 for the operations on an
/// agent's resources; `None` for calls answered with a Response.
#[allow(deprecated)] // SET_QUOTA and REMOVE_QUOTA, Mesos' older quota calls.
pub fn empty_answer(kind: CallType) -> Option<u16> {
    match kind {
        CallType::Teardown
        | CallType::SetLoggingLevel
        | CallType::DrainAgent
        | CallType::DeactivateAgent
        | CallType::ReactivateAgent
        | CallType::MarkAgentGone
        | CallType::UpdateWeights
        | CallType::UpdateQuota
        | CallType::SetQuota
        | CallType::RemoveQuota => Some(200),
        CallType::ReserveResources
        | CallType::UnreserveResources
        | CallType::CreateVolumes
        | CallType::DestroyVolumes
        | CallType::GrowVolume
        | CallType::ShrinkVolume => Some(202),
        _ => None,
    }
}

/// Checks a call as Mesos does before it reaches the master: its type,
/// and the message its type needs.
#[allow(deprecated)] // SET_QUOTA and REMOVE_QUOTA, Mesos' older quota calls.
pub fn validate(call: &Call) -> Result<(), String> {
    let Some(kind) = call.r#type.and_then(|t| CallType::try_from(t).ok()) else {
        return Err("Expecting 'type' to be present".to_string());
    };
    let need = super::http::expecting;
    match kind {
        CallType::Unknown => Err("Expecting 'type' to be present".to_string()),
        CallType::Teardown => need(call.teardown.is_some(), "teardown"),
        CallType::SetLoggingLevel => need(call.set_logging_level.is_some(), "set_logging_level"),
        CallType::ListFiles => need(call.list_files.is_some(), "list_files"),
        CallType::ReadFile => need(call.read_file.is_some(), "read_file"),
        CallType::UpdateWeights => need(call.update_weights.is_some(), "update_weights"),
        CallType::UpdateQuota => need(call.update_quota.is_some(), "update_quota"),
        CallType::SetQuota => need(call.set_quota.is_some(), "set_quota"),
        CallType::RemoveQuota => need(call.remove_quota.is_some(), "remove_quota"),
        CallType::ReserveResources => need(call.reserve_resources.is_some(), "reserve_resources"),
        CallType::UnreserveResources => {
            need(call.unreserve_resources.is_some(), "unreserve_resources")
        }
        CallType::CreateVolumes => need(call.create_volumes.is_some(), "create_volumes"),
        CallType::DestroyVolumes => need(call.destroy_volumes.is_some(), "destroy_volumes"),
        CallType::MarkAgentGone => need(call.mark_agent_gone.is_some(), "mark_agent_gone"),
        CallType::DrainAgent => need(call.drain_agent.is_some(), "drain_agent"),
        CallType::DeactivateAgent => need(call.deactivate_agent.is_some(), "deactivate_agent"),
        CallType::ReactivateAgent => need(call.reactivate_agent.is_some(), "reactivate_agent"),
        CallType::GrowVolume => need(call.grow_volume.is_some(), "grow_volume"),
        CallType::ShrinkVolume => need(call.shrink_volume.is_some(), "shrink_volume"),
        _ => Ok(()),
    }
}

fn time(nanos: u64) -> v1::TimeInfo {
    v1::TimeInfo {
        nanoseconds: i64::try_from(nanos).unwrap_or(i64::MAX),
    }
}

impl Master {
    /// Answers an operator call (validated).
    #[allow(deprecated)] // SET_QUOTA and REMOVE_QUOTA, Mesos' older quota calls.
    pub(super) fn operator(&mut self, call: &Call) -> Result<Response, CallError> {
        let kind = call.r#type();
        self.count_call(kind.as_str_name());
        let mut r = Response::default();
        let set = |r: &mut Response, t: ResponseType| r.r#type = Some(t as i32);
        match kind {
            CallType::GetHealth => {
                set(&mut r, ResponseType::GetHealth);
                r.get_health = Some(response::GetHealth { healthy: true });
            }
            CallType::GetFlags => {
                set(&mut r, ResponseType::GetFlags);
                let state = self.state_json();
                let flags = state["flags"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, value)| v1::Flag {
                        name: name.clone(),
                        value: Some(
                            value
                                .as_str()
                                .map_or_else(|| value.to_string(), str::to_string),
                        ),
                    })
                    .collect();
                r.get_flags = Some(response::GetFlags { flags });
            }
            CallType::GetVersion => {
                set(&mut r, ResponseType::GetVersion);
                r.get_version = Some(response::GetVersion {
                    version_info: v1::VersionInfo {
                        version: crate::MESOS_VERSION.to_string(),
                        ..Default::default()
                    },
                });
            }
            CallType::GetMetrics => {
                set(&mut r, ResponseType::GetMetrics);
                let metrics = self
                    .metrics()
                    .into_iter()
                    .map(|(name, value)| v1::Metric {
                        name,
                        value: Some(value),
                    })
                    .collect();
                r.get_metrics = Some(response::GetMetrics { metrics });
            }
            CallType::GetState => {
                set(&mut r, ResponseType::GetState);
                r.get_state = Some(self.operator_state());
            }
            CallType::GetAgents => {
                set(&mut r, ResponseType::GetAgents);
                r.get_agents = Some(self.operator_agents());
            }
            CallType::GetFrameworks => {
                set(&mut r, ResponseType::GetFrameworks);
                r.get_frameworks = Some(self.operator_frameworks());
            }
            CallType::GetExecutors => {
                set(&mut r, ResponseType::GetExecutors);
                r.get_executors = Some(self.operator_executors());
            }
            CallType::GetTasks => {
                set(&mut r, ResponseType::GetTasks);
                r.get_tasks = Some(self.operator_tasks());
            }
            CallType::GetRoles => {
                set(&mut r, ResponseType::GetRoles);
                r.get_roles = Some(self.operator_roles());
            }
            CallType::GetWeights => {
                set(&mut r, ResponseType::GetWeights);
                let weight_infos = self
                    .settings
                    .weights
                    .iter()
                    .map(|(role, weight)| v1::WeightInfo {
                        weight: *weight,
                        role: Some(role.clone()),
                    })
                    .collect();
                r.get_weights = Some(response::GetWeights { weight_infos });
            }
            CallType::GetMaster => {
                set(&mut r, ResponseType::GetMaster);
                r.get_master = Some(response::GetMaster {
                    master_info: Some(self.info.clone()),
                    start_time: Some(seconds(self.start_time)),
                    elected_time: Some(seconds(self.start_time)),
                });
            }
            CallType::Teardown => {
                let id = call
                    .teardown
                    .as_ref()
                    .map(|t| t.framework_id.value.clone())
                    .unwrap_or_default();
                if !self.frameworks.contains_key(&id) {
                    return Err(CallError::bad_request(
                        "No framework found with specified ID",
                    ));
                }
                tracing::info!(framework = id, "operator API: teardown");
                self.remove_framework(&id);
                // 200 with no body, as upstream.
                return Ok(Response::default());
            }
            CallType::ReserveResources
            | CallType::UnreserveResources
            | CallType::CreateVolumes
            | CallType::DestroyVolumes
            | CallType::GrowVolume
            | CallType::ShrinkVolume => {
                if let Some(found) = super::agent_ops::operation_of(call) {
                    let (agent, op) = found?;
                    self.operator_operation(&agent, &op)?;
                }
                return Ok(Response::default());
            }
            CallType::GetLoggingLevel => {
                set(&mut r, ResponseType::GetLoggingLevel);
                r.get_logging_level = Some(response::GetLoggingLevel {
                    level: self.logging_level()?,
                });
            }
            CallType::SetLoggingLevel => {
                if let Some(s) = &call.set_logging_level {
                    let duration = super::units::duration(&s.duration);
                    self.set_logging_level(s.level, duration)?;
                }
                return Ok(Response::default());
            }
            CallType::DrainAgent => {
                if let Some(drain) = &call.drain_agent {
                    self.drain_agent(drain)?;
                }
                return Ok(Response::default());
            }
            CallType::DeactivateAgent | CallType::ReactivateAgent | CallType::MarkAgentGone => {
                type Act = fn(&mut Master, &str) -> Result<(), CallError>;
                let (agent, act): (Option<&v1::AgentId>, Act) = match kind {
                    CallType::DeactivateAgent => (
                        call.deactivate_agent.as_ref().map(|c| &c.agent_id),
                        Master::deactivate_agent,
                    ),
                    CallType::ReactivateAgent => (
                        call.reactivate_agent.as_ref().map(|c| &c.agent_id),
                        Master::reactivate_agent,
                    ),
                    _ => (
                        call.mark_agent_gone.as_ref().map(|c| &c.agent_id),
                        Master::mark_agent_gone,
                    ),
                };
                act(self, agent.map_or("", |a| a.value.as_str()))?;
                return Ok(Response::default());
            }
            CallType::UpdateWeights => {
                let infos = call.update_weights.as_ref().map(|u| &u.weight_infos[..]);
                self.update_weights(infos.unwrap_or_default())?;
                return Ok(Response::default());
            }
            CallType::UpdateQuota => {
                let (configs, force) = call
                    .update_quota
                    .as_ref()
                    .map_or((&[][..], false), |u| (&u.quota_configs[..], u.force()));
                self.update_quota(configs, force)?;
                return Ok(Response::default());
            }
            CallType::SetQuota => {
                let request = call.set_quota.as_ref().map(|s| &s.quota_request);
                self.set_quota(&request.cloned().unwrap_or_default())?;
                return Ok(Response::default());
            }
            CallType::RemoveQuota => {
                let role = call.remove_quota.as_ref().map(|r| r.role.as_str());
                self.remove_quota(role.unwrap_or_default(), "Failed to remove quota")?;
                return Ok(Response::default());
            }
            other => return Err(not_served(other)),
        }
        Ok(r)
    }

    /// GET_STATE: tasks, executors, frameworks and agents together.
    pub(super) fn operator_state(&self) -> response::GetState {
        response::GetState {
            get_tasks: Some(self.operator_tasks()),
            get_executors: Some(self.operator_executors()),
            get_frameworks: Some(self.operator_frameworks()),
            get_agents: Some(self.operator_agents()),
        }
    }

    /// What is offered, by agent id, in allocated form.
    fn offered_allocated(&self) -> BTreeMap<String, Resources> {
        let mut by_agent: BTreeMap<String, Resources> = BTreeMap::new();
        for f in self.frameworks.values() {
            for (o, resources) in self.offers_out(f) {
                by_agent
                    .entry(o.agent.to_string())
                    .or_default()
                    .add(&resources);
            }
        }
        by_agent
    }

    /// The agent's entry of GET_AGENTS.
    pub(super) fn operator_agent(
        &self,
        a: &super::state::Agent,
        offered: Option<&Resources>,
    ) -> response::get_agents::Agent {
        use v1::agent_info::capability::Type as Cap;
        let mut allocated = Resources::default();
        for (framework, task) in &a.tasks {
            if let Some(t) = self.tasks.get(&(framework.clone(), task.clone()))
                && t.holds
            {
                allocated.add(&t.resources.allocated(&t.role));
            }
        }
        response::get_agents::Agent {
            agent_info: a.info.clone(),
            active: a.drain.is_none(),
            deactivated: Some(a.drain.is_some()),
            drain_info: a.drain.as_ref().and_then(|d| d.info),
            estimated_drain_start_time: a
                .drain
                .as_ref()
                .and_then(|d| d.info.as_ref().and(d.started))
                .map(time),
            version: crate::MESOS_VERSION.to_string(),
            pid: Some(format!("slave({})@{}:{}", a.pid, self.ip(), self.info.port)),
            registered_time: Some(time(a.registered_time)),
            reregistered_time: None,
            total_resources: a.total.to_vec(),
            allocated_resources: allocated.to_vec(),
            offered_resources: offered.map(Resources::to_vec).unwrap_or_default(),
            capabilities: [
                Cap::MultiRole,
                Cap::HierarchicalRole,
                Cap::ReservationRefinement,
                Cap::AgentDraining,
            ]
            .into_iter()
            .map(|t| v1::agent_info::Capability {
                r#type: Some(t as i32),
            })
            .collect(),
            resource_providers: self
                .providers
                .values()
                .filter(|p| *p.agent == *a.id)
                .map(|p| response::get_agents::agent::ResourceProvider {
                    resource_provider_info: p.info.clone(),
                    total_resources: p.resources.to_vec(),
                })
                .collect(),
        }
    }

    fn operator_agents(&self) -> response::GetAgents {
        let offered = self.offered_allocated();
        let mut agents: Vec<&super::state::Agent> = self.agents.values().collect();
        agents.sort_by(|a, b| a.id.cmp(&b.id));
        response::GetAgents {
            agents: agents
                .into_iter()
                .map(|a| self.operator_agent(a, offered.get(&*a.id)))
                .collect(),
            recovered_agents: Vec::new(),
        }
    }

    /// A framework's entry of GET_FRAMEWORKS.
    pub(super) fn operator_framework(
        &self,
        f: &Framework,
        registered: bool,
    ) -> response::get_frameworks::Framework {
        let mut allocated = Resources::default();
        for id in &f.tasks {
            if let Some(t) = self.tasks.get(&(f.id.clone(), id.clone()))
                && t.holds
            {
                allocated.add(&t.resources.allocated(&t.role));
            }
        }
        let mut offered = Resources::default();
        let offers: Vec<v1::Offer> = self
            .offers_out(f)
            .map(|(o, resources)| {
                offered.add(&resources);
                v1::Offer {
                    id: v1::OfferId {
                        value: self.offers.id_of(o.number).to_string(),
                    },
                    framework_id: v1::FrameworkId {
                        value: o.framework.to_string(),
                    },
                    agent_id: v1::AgentId {
                        value: o.agent.to_string(),
                    },
                    hostname: self
                        .agents
                        .get(&o.agent)
                        .map(|a| a.info.hostname.clone())
                        .unwrap_or_default(),
                    resources: resources.to_vec(),
                    allocation_info: Some(v1::resource::AllocationInfo {
                        role: Some(o.role.to_string()),
                    }),
                    ..Default::default()
                }
            })
            .collect();
        response::get_frameworks::Framework {
            framework_info: f.info.clone(),
            active: registered && f.connected(),
            connected: registered && f.connected(),
            recovered: false,
            registered_time: Some(time(f.registered_time)),
            reregistered_time: f.reregistered_time.map(time),
            unregistered_time: f.unregistered_time.map(time),
            offers,
            inverse_offers: Vec::new(),
            allocated_resources: allocated.to_vec(),
            offered_resources: offered.to_vec(),
            offer_constraints: None,
        }
    }

    fn operator_frameworks(&self) -> response::GetFrameworks {
        let mut frameworks: Vec<&Framework> = self.frameworks.values().collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        response::GetFrameworks {
            frameworks: frameworks
                .into_iter()
                .map(|f| self.operator_framework(f, true))
                .collect(),
            completed_frameworks: self
                .completed_frameworks
                .iter()
                .map(|f| self.operator_framework(f, false))
                .collect(),
            ..Default::default()
        }
    }

    fn operator_executors(&self) -> response::GetExecutors {
        let mut executors = Vec::new();
        let mut agents: Vec<&super::state::Agent> = self.agents.values().collect();
        agents.sort_by(|a, b| a.id.cmp(&b.id));
        for a in agents {
            for info in a.executors.values() {
                executors.push(response::get_executors::Executor {
                    executor_info: info.clone(),
                    agent_id: v1::AgentId {
                        value: a.id.to_string(),
                    },
                });
            }
        }
        response::GetExecutors {
            executors,
            ..Default::default()
        }
    }

    fn operator_tasks(&self) -> response::GetTasks {
        let mut frameworks: Vec<&Framework> = self.frameworks.values().collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        let mut tasks = Vec::new();
        for f in &frameworks {
            for id in &f.tasks {
                if let Some(t) = self.tasks.get(&(f.id.clone(), id.clone())) {
                    tasks.push(self.task_record(t));
                }
            }
        }
        let completed_tasks = frameworks
            .iter()
            .copied()
            .chain(self.completed_frameworks.iter())
            .flat_map(|f| f.completed_tasks.iter().cloned())
            .collect();
        response::GetTasks {
            tasks,
            completed_tasks,
            ..Default::default()
        }
    }

    /// The known roles (those of registered frameworks and those
    /// weighted), each with its weight, frameworks, and what its tasks
    /// hold and its offers offer (allocated form).
    pub(super) fn role_usage(&self) -> BTreeMap<String, RoleUsage> {
        let mut roles: BTreeMap<String, RoleUsage> = self
            .settings
            .weights
            .iter()
            .map(|(r, w)| {
                (
                    r.clone(),
                    RoleUsage {
                        weight: *w,
                        ..RoleUsage::default()
                    },
                )
            })
            .collect();
        let mut frameworks: Vec<&Framework> = self.frameworks.values().collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        for f in frameworks {
            for role in &f.roles {
                roles
                    .entry(role.clone())
                    .or_default()
                    .frameworks
                    .push(f.id.clone());
            }
        }
        for t in self.tasks.values().filter(|t| t.holds) {
            if let Some(r) = roles.get_mut(&t.role) {
                r.allocated.add(&t.resources.allocated(&t.role));
            }
        }
        for f in self.frameworks.values() {
            for (o, resources) in self.offers_out(f) {
                if let Some(r) = roles.get_mut(&*o.role) {
                    r.offered.add(&resources);
                }
            }
        }
        for a in self.agents.values() {
            for (role, reserved) in a.total.reservations() {
                if let Some(r) = roles.get_mut(&role) {
                    r.reserved.add(&reserved);
                }
            }
        }
        roles
    }

    fn operator_roles(&self) -> response::GetRoles {
        response::GetRoles {
            roles: self
                .role_usage()
                .into_iter()
                .map(|(name, r)| {
                    let mut resources = r.allocated;
                    resources.add(&r.offered);
                    v1::Role {
                        name,
                        weight: r.weight,
                        frameworks: r
                            .frameworks
                            .into_iter()
                            .map(|value| v1::FrameworkId { value })
                            .collect(),
                        resources: resources.to_vec(),
                    }
                })
                .collect(),
        }
    }
}

/// A role as the master sees it (see [`Master::role_usage`]).
#[derive(Debug, Clone)]
pub struct RoleUsage {
    /// Its weight (1 unless `--mesos-weights` names it).
    pub weight: f64,
    /// Its registered frameworks' ids.
    pub frameworks: Vec<String>,
    /// What its tasks hold.
    pub allocated: Resources,
    /// What its offers offer.
    pub offered: Resources,
    /// What the agents reserve for it.
    pub reserved: Resources,
}

impl Default for RoleUsage {
    fn default() -> Self {
        RoleUsage {
            weight: 1.0,
            frameworks: Vec::new(),
            allocated: Resources::default(),
            offered: Resources::default(),
            reserved: Resources::default(),
        }
    }
}

/// The operator API's event stream (SUBSCRIBE): SUBSCRIBED with the whole
/// state first, then TASK_ADDED, TASK_UPDATED, FRAMEWORK_ADDED,
/// FRAMEWORK_UPDATED, FRAMEWORK_REMOVED, AGENT_ADDED and AGENT_REMOVED as
/// the master's books change (HEARTBEATs are added by the HTTP edge). A
/// subscriber whose stream cannot take an event (too slow, or gone) is
/// dropped, which ends its stream, as a slow scheduler's is. Nothing is
/// built while there are no subscribers.
pub mod events {
    use tokio::sync::mpsc;

    use super::super::state::Master;
    use crate::v1;
    use crate::v1::master::Event;
    use crate::v1::master::event::{self, Type};

    /// Where a subscriber's events go.
    pub type Sink = mpsc::Sender<Event>;

    fn of(kind: Type) -> Event {
        Event {
            r#type: Some(kind as i32),
            ..Default::default()
        }
    }

    /// A HEARTBEAT.
    pub fn heartbeat() -> Event {
        of(Type::Heartbeat)
    }

    impl Master {
        /// A new subscriber: SUBSCRIBED with the state, then every change.
        pub(in crate::master) fn operator_subscribe(&mut self, sink: Sink) {
            let subscribed = Event {
                subscribed: Some(event::Subscribed {
                    get_state: Some(self.operator_state()),
                    heartbeat_interval_seconds: Some(
                        self.settings.heartbeat_interval.as_secs_f64(),
                    ),
                }),
                ..of(Type::Subscribed)
            };
            if sink.try_send(subscribed).is_ok() {
                self.operator_streams.push(sink);
            }
        }

        fn publish(&mut self, event: Event) {
            self.operator_streams
                .retain(|s| match s.try_send(event.clone()) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::info!(error = %e, "operator API: a subscriber dropped");
                        false
                    }
                });
        }

        /// TASK_ADDED for a task just launched.
        pub(in crate::master) fn publish_task_added(&mut self, framework: &str, task: &str) {
            if self.operator_streams.is_empty() {
                return;
            }
            let Some(t) = self.tasks.get(&(framework.to_string(), task.to_string())) else {
                return;
            };
            let task = self.task_record(t);
            self.publish(Event {
                task_added: Some(event::TaskAdded { task }),
                ..of(Type::TaskAdded)
            });
        }

        /// TASK_UPDATED: a task's new status, and its latest state.
        pub(in crate::master) fn publish_task_updated(
            &mut self,
            framework: &str,
            status: &v1::TaskStatus,
            state: v1::TaskState,
        ) {
            if self.operator_streams.is_empty() {
                return;
            }
            self.publish(Event {
                task_updated: Some(event::TaskUpdated {
                    framework_id: v1::FrameworkId {
                        value: framework.to_string(),
                    },
                    status: status.clone(),
                    state: state as i32,
                }),
                ..of(Type::TaskUpdated)
            });
        }

        /// FRAMEWORK_ADDED (`added`) or FRAMEWORK_UPDATED (it failed over,
        /// disconnected or changed).
        pub(in crate::master) fn publish_framework(&mut self, id: &str, added: bool) {
            if self.operator_streams.is_empty() {
                return;
            }
            let Some(f) = self.frameworks.get(id) else {
                return;
            };
            let framework = self.operator_framework(f, true);
            self.publish(if added {
                Event {
                    framework_added: Some(event::FrameworkAdded { framework }),
                    ..of(Type::FrameworkAdded)
                }
            } else {
                Event {
                    framework_updated: Some(event::FrameworkUpdated { framework }),
                    ..of(Type::FrameworkUpdated)
                }
            });
        }

        /// FRAMEWORK_REMOVED.
        pub(in crate::master) fn publish_framework_removed(&mut self, info: &v1::FrameworkInfo) {
            if self.operator_streams.is_empty() {
                return;
            }
            self.publish(Event {
                framework_removed: Some(event::FrameworkRemoved {
                    framework_info: info.clone(),
                }),
                ..of(Type::FrameworkRemoved)
            });
        }

        /// AGENT_ADDED.
        pub(in crate::master) fn publish_agent_added(&mut self, id: &str) {
            if self.operator_streams.is_empty() {
                return;
            }
            let Some(a) = self.agents.get(id) else {
                return;
            };
            let agent = self.operator_agent(a, None);
            self.publish(Event {
                agent_added: Some(event::AgentAdded { agent }),
                ..of(Type::AgentAdded)
            });
        }

        /// AGENT_REMOVED.
        pub(in crate::master) fn publish_agent_removed(&mut self, id: &str) {
            if self.operator_streams.is_empty() {
                return;
            }
            self.publish(Event {
                agent_removed: Some(event::AgentRemoved {
                    agent_id: v1::AgentId {
                        value: id.to_string(),
                    },
                }),
                ..of(Type::AgentRemoved)
            });
        }
    }
}
