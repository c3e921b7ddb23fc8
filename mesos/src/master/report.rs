//! What the master shows: `/state` (Mesos' master state JSON) and
//! `/metrics/snapshot` (Mesos' metric names), built on the master thread
//! from its state between two inputs.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::framework::Framework;
use super::state::{Master, seconds};
use super::tasks::state_name;
use crate::resources::Resources;
use crate::v1;

/// A question for the master thread.
pub enum Query {
    /// `/state`.
    State(oneshot::Sender<Value>),
    /// `/state` without what has ended: no `completed_frameworks`, and no
    /// `completed_tasks` in the frameworks (empty lists; the rest is the
    /// same). For checks that read the live part after every step.
    LiveState(oneshot::Sender<Value>),
    /// `/metrics/snapshot`.
    Metrics(oneshot::Sender<BTreeMap<String, f64>>),
    /// The known roles (`/roles`, with the core's quota added at the edge).
    Roles(oneshot::Sender<BTreeMap<String, super::operator::RoleUsage>>),
    /// An operator API subscriber (`super::operator::events`).
    OperatorSubscribe(super::operator::events::Sink),
    /// A call of the operator API (`super::operator`), validated.
    Operator(
        Box<crate::v1::master::Call>,
        oneshot::Sender<Result<crate::v1::master::Response, super::CallError>>,
    ),
}

/// Resources as Mesos' JSON models them: scalars as numbers (cpus, gpus,
/// mem and disk always present), ranges as `"[a-b, c-d]"`, sets as `"{a, b}"`.
pub fn resources_json(resources: &Resources) -> Value {
    let mut out = Map::new();
    for name in ["cpus", "gpus", "mem", "disk"] {
        out.insert(name.to_string(), json!(0.0));
    }
    let mut ranges: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut scalars: BTreeMap<String, f64> = BTreeMap::new();
    for r in resources.iter() {
        match r.r#type() {
            v1::value::Type::Scalar => {
                *scalars.entry(r.name.clone()).or_default() +=
                    r.scalar.as_ref().map_or(0.0, |s| s.value);
            }
            v1::value::Type::Ranges => ranges.entry(r.name.clone()).or_default().extend(
                r.ranges
                    .iter()
                    .flat_map(|rs| rs.range.iter().map(|x| (x.begin, x.end))),
            ),
            v1::value::Type::Set => sets
                .entry(r.name.clone())
                .or_default()
                .extend(r.set.iter().flat_map(|s| s.item.iter().cloned())),
            v1::value::Type::Text => {}
        }
    }
    for (name, v) in scalars {
        out.insert(name, json!((v * 1000.0).round() / 1000.0));
    }
    for (name, mut rs) in ranges {
        rs.sort_unstable();
        let text: Vec<String> = rs.iter().map(|(b, e)| format!("{b}-{e}")).collect();
        out.insert(name, json!(format!("[{}]", text.join(", "))));
    }
    for (name, items) in sets {
        out.insert(name, json!(format!("{{{}}}", items.join(", "))));
    }
    Value::Object(out)
}

fn status_json(s: &v1::TaskStatus) -> Value {
    let mut v = json!({
        "state": state_name(s.state()),
        "timestamp": s.timestamp.unwrap_or(0.0),
    });
    if let Some(h) = s.healthy {
        v["healthy"] = json!(h);
    }
    if let Some(labels) = &s.labels {
        v["labels"] = crate::codec::to_json_value(labels);
    }
    if let Some(c) = &s.container_status {
        v["container_status"] = crate::codec::to_json_value(c);
    }
    v
}

fn task_json(t: &v1::Task, role: &str) -> Value {
    let mut v = json!({
        "id": t.task_id.value,
        "name": t.name,
        "framework_id": t.framework_id.value,
        "executor_id": t.executor_id.as_ref().map(|e| e.value.clone()).unwrap_or_default(),
        "slave_id": t.agent_id.value,
        "state": state_name(t.state()),
        "resources": resources_json(&Resources::from_vec(t.resources.clone())),
        "role": role,
        "statuses": t.statuses.iter().map(status_json).collect::<Vec<_>>(),
    });
    if let Some(l) = &t.labels {
        v["labels"] = crate::codec::to_json_value(l);
    }
    if let Some(d) = &t.discovery {
        v["discovery"] = crate::codec::to_json_value(d);
    }
    if let Some(c) = &t.container {
        v["container"] = crate::codec::to_json_value(c);
    }
    if let Some(h) = &t.health_check {
        v["health_check"] = crate::codec::to_json_value(h);
    }
    v
}

impl Master {
    pub(super) fn answer(&mut self, query: Query) {
        match query {
            Query::State(reply) => {
                let _ = reply.send(self.state_json());
            }
            Query::LiveState(reply) => {
                let _ = reply.send(self.state_json_of(false));
            }
            Query::Metrics(reply) => {
                let _ = reply.send(self.metrics());
            }
            Query::OperatorSubscribe(sink) => self.operator_subscribe(sink),
            Query::Roles(reply) => {
                let _ = reply.send(self.role_usage());
            }
            Query::Operator(call, reply) => {
                let _ = reply.send(self.operator(&call));
            }
        }
    }

    fn framework_json(&self, f: &Framework, active: bool, ended: bool) -> Value {
        let mut used = Resources::default();
        let mut tasks = Vec::new();
        for id in &f.tasks {
            if let Some(t) = self.tasks.get(&(f.id.clone(), id.clone())) {
                if t.holds {
                    used.add(&t.resources);
                }
                tasks.push(task_json(&self.task_record(t), &t.role));
            }
        }
        for ((framework, _, _), hold) in &self.executor_holds {
            if *framework == f.id {
                used.add(&hold.resources);
            }
        }
        let mut offered = Resources::default();
        let offers: Vec<Value> = self
            .offers_out(f)
            .map(|(o, resources)| {
                offered.add(&resources);
                json!({
                    "id": self.offers.id_of(o.number),
                    "framework_id": &*o.framework,
                    "allocation_info": {"role": &*o.role},
                    "slave_id": &*o.agent,
                    "resources": resources_json(&resources),
                })
            })
            .collect();
        let mut all = used.clone();
        all.add(&offered);
        let role_of = |t: &v1::Task| {
            t.resources
                .first()
                .and_then(|r| r.allocation_info.as_ref())
                .and_then(|a| a.role.clone())
                .unwrap_or_else(|| f.roles.first().cloned().unwrap_or_default())
        };
        let completed: Vec<Value> = if ended {
            f.completed_tasks
                .iter()
                .map(|t| task_json(t, &role_of(t)))
                .collect()
        } else {
            Vec::new()
        };
        let executors: Vec<Value> = self
            .agents
            .values()
            .flat_map(|a| {
                a.executors
                    .iter()
                    .filter(|((fw, _), _)| *fw == f.id)
                    .map(|(_, e)| {
                        let mut v = json!({
                            "executor_id": e.executor_id.value,
                            "name": e.name.clone().unwrap_or_default(),
                            "framework_id": f.id,
                            "resources": resources_json(&Resources::from_vec(e.resources.clone())),
                            "slave_id": &*a.id,
                        });
                        if let Some(c) = &e.command {
                            v["command"] = crate::codec::to_json_value(c);
                        }
                        v
                    })
            })
            .collect();
        let multi_role = super::framework::has_capability(
            &f.info,
            v1::framework_info::capability::Type::MultiRole,
        );
        let mut v = json!({
            "id": f.id,
            "name": f.info.name,
            "used_resources": resources_json(&used),
            "offered_resources": resources_json(&offered),
            "capabilities": f.info.capabilities.iter().map(|c| c.r#type().as_str_name()).collect::<Vec<_>>(),
            "hostname": f.info.hostname.clone().unwrap_or_default(),
            "webui_url": f.info.webui_url.clone().unwrap_or_default(),
            "active": active && f.connected(),
            "connected": f.connected(),
            "recovered": false,
            "user": f.info.user,
            "failover_timeout": f.info.failover_timeout.unwrap_or(0.0),
            "checkpoint": f.info.checkpoint.unwrap_or(false),
            "registered_time": seconds(f.registered_time),
            "unregistered_time": f.unregistered_time.map_or(0.0, seconds),
            "resources": resources_json(&all),
            "tasks": tasks,
            "unreachable_tasks": [],
            "completed_tasks": completed,
            "offers": offers,
            "executors": executors,
        });
        if multi_role {
            v["roles"] = json!(f.info.roles);
        } else {
            v["role"] = json!(super::framework::legacy_role(&f.info).unwrap_or("*"));
        }
        if let Some(p) = &f.info.principal {
            v["principal"] = json!(p);
        }
        if let Some(p) = &f.pid {
            v["pid"] = json!(p);
        }
        if let Some(t) = f.reregistered_time {
            v["reregistered_time"] = json!(seconds(t));
        }
        if let Some(l) = &f.info.labels {
            v["labels"] = crate::codec::to_json_value(l);
        }
        v
    }

    /// What outstanding offers hold, by agent (unallocated form).
    /// The offers out to `f` (the books hold them, one look-up each), each
    /// with its resources in allocated form.
    pub(super) fn offers_out<'a>(
        &'a self,
        f: &Framework,
    ) -> impl Iterator<Item = (&'a super::state::Offer, Resources)> + 'a {
        f.offers
            .listed(|_| true)
            .into_iter()
            .filter_map(|n| self.offers.get_number(n))
            .map(|o| (o, o.resources.allocated(&o.role)))
    }

    fn offered_by_agent(&self) -> BTreeMap<&str, Resources> {
        let mut out: BTreeMap<&str, Resources> = BTreeMap::new();
        for o in self.offers.values() {
            out.entry(&*o.agent)
                .or_default()
                .add(&o.resources.unallocated());
        }
        out
    }

    /// The master state as Mesos' `/state` answers it.
    pub fn state_json(&self) -> Value {
        self.state_json_of(true)
    }

    /// [`Self::state_json`], with what has ended (completed frameworks and
    /// tasks) only when `ended`.
    fn state_json_of(&self, ended: bool) -> Value {
        let offered = self.offered_by_agent();
        let none = Resources::default();
        let mut agents: Vec<&super::state::Agent> = self.agents.values().collect();
        agents.sort_by(|a, b| a.id.cmp(&b.id));
        let slaves: Vec<Value> = agents
            .into_iter()
            .map(|a| {
                let mut slave = json!({
                    "id": &*a.id,
                    "hostname": a.info.hostname,
                    "port": a.info.port.unwrap_or(5051),
                    "attributes": attributes_json(&a.info.attributes),
                    "pid": format!("slave({})@{}:{}", a.pid, self.ip(), self.info.port),
                    "registered_time": seconds(a.registered_time),
                    "resources": resources_json(&a.total),
                    "used_resources": resources_json(&a.used),
                    "offered_resources": resources_json(offered.get(&*a.id).unwrap_or(&none)),
                    "reserved_resources": a.total.reservations().iter().map(|(role, r)| (role.clone(), resources_json(r))).collect::<Map<String, Value>>(),
                    "reserved_resources_full": a.total.reservations().iter().map(|(role, r)| (role.clone(), Value::Array(r.iter().map(crate::codec::to_json_value).collect()))).collect::<Map<String, Value>>(),
                    "unreserved_resources": resources_json(&a.total.unreserved()),
                    "resource_providers": self.providers.values().filter(|p| *p.agent == *a.id).map(|p| json!({
                        "resource_provider_info": crate::codec::to_json_value(&p.info),
                        "total_resources": resources_json(&p.resources),
                        "subscribed": p.stream.is_some(),
                    })).collect::<Vec<_>>(),
                    "operations": self.operations.values().filter(|o| *o.agent == *a.id).map(|o| json!({
                        "framework_id": {"value": o.framework},
                        "info": crate::codec::to_json_value(&o.info),
                        "latest_status": o.statuses.last().map(crate::codec::to_json_value),
                    })).collect::<Vec<_>>(),
                    "active": a.drain.is_none(),
                    "deactivated": a.drain.is_some(),
                    "version": crate::MESOS_VERSION,
                    "capabilities": ["MULTI_ROLE", "HIERARCHICAL_ROLE", "RESERVATION_REFINEMENT", "TASK_KILLING_STATE", "AGENT_DRAINING"],
                });
                // A drain's info and start, as upstream writes them.
                if let Some(drain) = &a.drain
                    && let Some(info) = &drain.info
                {
                    slave["drain_info"] = crate::codec::to_json_value(info);
                    if let Some(started) = drain.started {
                        slave["estimated_drain_start_time_seconds"] = json!(seconds(started));
                    }
                }
                slave
            })
            .collect();
        let deactivated = self.agents.values().filter(|a| a.drain.is_some()).count();
        let mut frameworks: Vec<&Framework> = self.frameworks.values().collect();
        frameworks.sort_by(|a, b| a.id.cmp(&b.id));
        let frameworks: Vec<Value> = frameworks
            .into_iter()
            .map(|f| self.framework_json(f, true, ended))
            .collect();
        let completed: Vec<Value> = if ended {
            self.completed_frameworks
                .iter()
                .map(|f| self.framework_json(f, false, true))
                .collect()
        } else {
            Vec::new()
        };
        let pid = self.info.pid.clone().unwrap_or_default();
        json!({
            "version": crate::MESOS_VERSION,
            "build_date": "",
            "build_time": 0,
            "build_user": "",
            "start_time": seconds(self.start_time),
            "elected_time": seconds(self.start_time),
            "id": self.info.id,
            "pid": pid,
            "hostname": self.info.hostname.clone().unwrap_or_default(),
            "capabilities": ["AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"],
            "activated_slaves": self.agents.len() - deactivated,
            "deactivated_slaves": deactivated,
            "unreachable_slaves": 0,
            "leader": pid,
            "leader_info": crate::codec::to_json_value(&self.info),
            "flags": {
                "allocation_interval": format!("{}secs", self.settings.allocation_interval.as_secs_f64()),
                "min_allocatable_resources": self.settings.min_allocatable.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("|"),
                "offer_timeout": self.settings.offer_timeout.map(|t| format!("{}secs", t.as_secs_f64())).unwrap_or_default(),
                "port": self.settings.port.to_string(),
                "hostname": self.settings.hostname,
            },
            "slaves": slaves,
            "recovered_slaves": [],
            "frameworks": frameworks,
            "completed_frameworks": completed,
            "orphan_tasks": [],
            "unregistered_frameworks": [],
        })
    }

    /// Metrics under Mesos' names.
    pub fn metrics(&self) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: f64| {
            m.insert(k.to_string(), v);
        };
        let now = self.now();
        put(
            "master/uptime_secs",
            seconds(now.saturating_sub(self.start_time)),
        );
        put("master/elected", 1.0);
        let connected = self.frameworks.values().filter(|f| f.connected()).count() as f64;
        let total = self.frameworks.len() as f64;
        put("master/frameworks_active", connected);
        put("master/frameworks_inactive", total - connected);
        put("master/frameworks_connected", connected);
        put("master/frameworks_disconnected", total - connected);
        let inactive = self.agents.values().filter(|a| a.drain.is_some()).count();
        put(
            "master/slaves_active",
            (self.agents.len() - inactive) as f64,
        );
        put("master/slaves_inactive", inactive as f64);
        put("master/slaves_connected", self.agents.len() as f64);
        put("master/slaves_disconnected", 0.0);
        put("master/slave_registrations", self.agents.len() as f64);
        put("master/outstanding_offers", self.offers.len() as f64);
        let mut by_state: BTreeMap<&str, f64> = BTreeMap::new();
        for t in self.tasks.values() {
            if !t.state.is_terminal() {
                *by_state.entry(state_name(t.state)).or_default() += 1.0;
            }
        }
        for s in [
            "TASK_STAGING",
            "TASK_STARTING",
            "TASK_RUNNING",
            "TASK_KILLING",
            "TASK_UNREACHABLE",
        ] {
            let key = format!(
                "master/tasks_{}",
                s.trim_start_matches("TASK_").to_lowercase()
            );
            put(&key, by_state.get(s).copied().unwrap_or(0.0));
        }
        for s in [
            "TASK_FINISHED",
            "TASK_FAILED",
            "TASK_KILLED",
            "TASK_ERROR",
            "TASK_LOST",
            "TASK_DROPPED",
            "TASK_GONE",
            "TASK_GONE_BY_OPERATOR",
        ] {
            let key = format!(
                "master/tasks_{}",
                s.trim_start_matches("TASK_").to_lowercase()
            );
            put(
                &key,
                self.counters.tasks_terminal.get(s).copied().unwrap_or(0) as f64,
            );
        }
        let mut totals = Resources::default();
        let mut used = Resources::default();
        let mut offered = Resources::default();
        for a in self.agents.values() {
            totals.add(&a.total);
            used.add(&a.used);
        }
        for o in self.offers.values() {
            offered.add(&o.resources.unallocated());
        }
        for name in ["cpus", "mem", "disk", "gpus"] {
            let t = totals.scalar(name);
            let u = used.scalar(name) + offered.scalar(name);
            put(&format!("master/{name}_total"), t);
            put(&format!("master/{name}_used"), u);
            put(
                &format!("master/{name}_percent"),
                if t > 0.0 { u / t } else { 0.0 },
            );
        }
        put(
            "master/messages_decline_offers",
            self.counters.offers_declined as f64,
        );
        put(
            "master/messages_launch_tasks",
            self.counters.offers_accepted as f64,
        );
        put("master/offers_sent", self.counters.offers_sent as f64);
        put(
            "master/offers_declined",
            self.counters.offers_declined as f64,
        );
        put(
            "master/offers_accepted",
            self.counters.offers_accepted as f64,
        );
        put(
            "master/offers_rescinded",
            self.counters.offers_rescinded as f64,
        );
        put(
            "master/offers_timed_out",
            self.counters.offers_timed_out as f64,
        );
        put(
            "master/valid_status_updates",
            self.counters.valid_status_updates as f64,
        );
        put(
            "master/valid_status_update_acknowledgements",
            self.counters.valid_acknowledgements as f64,
        );
        put(
            "master/invalid_status_update_acknowledgements",
            self.counters.invalid_acknowledgements as f64,
        );
        put(
            "master/dropped_messages",
            self.counters.dropped_events as f64,
        );
        put(
            "master/frameworks_removed",
            self.counters.frameworks_removed as f64,
        );
        put(
            "master/invalid_scheduler_calls",
            self.counters.invalid_calls as f64,
        );
        let mut calls = 0;
        for (kind, n) in &self.counters.calls {
            calls += n;
            put(
                &format!("master/messages_scheduler_{}", kind.to_lowercase()),
                *n as f64,
            );
        }
        put("master/valid_scheduler_calls", calls as f64);
        let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
        for ((kind, state), n) in &self.counters.operations {
            *by_state.entry(state.as_str()).or_default() += n;
            put(&format!("master/operations/{kind}/{state}"), *n as f64);
        }
        let mut total = 0;
        for (state, n) in by_state {
            total += n;
            put(&format!("master/operations/{state}"), n as f64);
        }
        put("master/operations/total", total as f64);
        put(
            "master/valid_operation_status_update_acknowledgements",
            self.counters.valid_operation_acknowledgements as f64,
        );
        put(
            "master/invalid_operation_status_update_acknowledgements",
            self.counters.invalid_operation_acknowledgements as f64,
        );
        put("master/event_queue_messages", 0.0);
        put(
            "allocator/mesos/allocation_runs",
            self.counters.allocation_runs as f64,
        );
        let mut runs: Vec<f64> = self.counters.allocation_run_ms.iter().copied().collect();
        runs.sort_by(f64::total_cmp);
        if let Some(&last) = self.counters.allocation_run_ms.back() {
            put("allocator/mesos/allocation_run_ms", last);
        }
        if !runs.is_empty() {
            let pct = |p: f64| runs[((runs.len() - 1) as f64 * p).round() as usize];
            put("allocator/mesos/allocation_run_ms/count", runs.len() as f64);
            put("allocator/mesos/allocation_run_ms/min", runs[0]);
            put(
                "allocator/mesos/allocation_run_ms/max",
                runs[runs.len() - 1],
            );
            put("allocator/mesos/allocation_run_ms/p50", pct(0.5));
            put("allocator/mesos/allocation_run_ms/p90", pct(0.9));
            put("allocator/mesos/allocation_run_ms/p99", pct(0.99));
        }
        m
    }
}

fn attributes_json(attributes: &[v1::Attribute]) -> Value {
    let mut out = Map::new();
    for a in attributes {
        let v = match a.r#type() {
            v1::value::Type::Scalar => json!(a.scalar.as_ref().map_or(0.0, |s| s.value)),
            v1::value::Type::Text => {
                json!(a.text.as_ref().map(|t| t.value.clone()).unwrap_or_default())
            }
            v1::value::Type::Ranges => json!(
                a.ranges
                    .as_ref()
                    .map(|r| r
                        .range
                        .iter()
                        .map(|x| format!("{}-{}", x.begin, x.end))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .map(|s| format!("[{s}]"))
                    .unwrap_or_default()
            ),
            v1::value::Type::Set => json!(
                a.set
                    .as_ref()
                    .map(|s| format!("{{{}}}", s.item.join(", ")))
                    .unwrap_or_default()
            ),
        };
        out.insert(a.name.clone(), v);
    }
    Value::Object(out)
}

/// Read-only views of `/state`, as Mesos' master serves them beside it:
/// `/frameworks`, `/slaves`, `/tasks`, `/flags` and `/version` (each also
/// under `/master/`), with their query parameters.
pub mod views {
    use std::collections::HashMap;

    use serde_json::{Value, json};

    /// Mesos' default `limit` of `/tasks`.
    pub const TASK_LIMIT: usize = 100;

    fn list<'a>(state: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + Clone {
        state[key].as_array().into_iter().flatten()
    }

    fn selected(query: &HashMap<String, String>, key: &str, item: &Value) -> bool {
        query.get(key).is_none_or(|id| item["id"] == id.as_str())
    }

    /// `/frameworks`: the registered and completed frameworks (one of them
    /// with `framework_id`).
    pub fn frameworks(state: &Value, query: &HashMap<String, String>) -> Value {
        let pick = |key: &str| -> Vec<Value> {
            list(state, key)
                .filter(|f| selected(query, "framework_id", f))
                .cloned()
                .collect()
        };
        json!({
            "frameworks": pick("frameworks"),
            "completed_frameworks": pick("completed_frameworks"),
            "unregistered_frameworks": [],
        })
    }

    /// `/slaves`: the agents (one of them with `slave_id`).
    pub fn slaves(state: &Value, query: &HashMap<String, String>) -> Value {
        let slaves: Vec<Value> = list(state, "slaves")
            .filter(|s| selected(query, "slave_id", s))
            .cloned()
            .collect();
        json!({ "slaves": slaves, "recovered_slaves": [] })
    }

    /// The earliest status timestamp of a task (0 without statuses).
    fn first_timestamp(task: &Value) -> f64 {
        task["statuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["timestamp"].as_f64())
            .fold(f64::INFINITY, f64::min)
            .clamp(0.0, f64::MAX)
    }

    /// `/tasks`: live, unreachable and completed tasks of every framework
    /// (`framework_id`, `task_id` select), ordered by their first status'
    /// time (`order=asc`, else newest first), `limit` (100) from `offset`
    /// (0). Bad numbers are taken as absent, as Mesos does.
    pub fn tasks(state: &Value, query: &HashMap<String, String>) -> Value {
        let number = |key: &str| query.get(key).and_then(|v| v.parse::<usize>().ok());
        let limit = number("limit").unwrap_or(TASK_LIMIT);
        let offset = number("offset").unwrap_or(0);
        let ascending = query.get("order").is_some_and(|o| o == "asc");
        let mut tasks: Vec<&Value> = list(state, "frameworks")
            .chain(list(state, "completed_frameworks"))
            .filter(|f| selected(query, "framework_id", f))
            .flat_map(|f| {
                ["tasks", "unreachable_tasks", "completed_tasks"]
                    .into_iter()
                    .flat_map(move |k| f[k].as_array().into_iter().flatten())
            })
            .filter(|t| selected(query, "task_id", t))
            .collect();
        tasks.sort_by(|a, b| {
            let (x, y) = (first_timestamp(a), first_timestamp(b));
            if ascending {
                x.total_cmp(&y)
            } else {
                y.total_cmp(&x)
            }
        });
        let page: Vec<Value> = tasks
            .into_iter()
            .skip(offset)
            .take(limit)
            .cloned()
            .collect();
        json!({ "tasks": page })
    }

    /// `/flags`.
    pub fn flags(state: &Value) -> Value {
        json!({ "flags": state["flags"].clone() })
    }

    /// A resource quantity object as Mesos writes one (`{"cpus": 1.5,
    /// "mem": 64}`): the scalars present, by name.
    fn quantities(r: &crate::resources::Resources) -> Value {
        let all = super::resources_json(r);
        let kept: serde_json::Map<String, Value> = all
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| v.as_f64().is_some_and(|x| x != 0.0))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Value::Object(kept)
    }

    /// `/roles`: every role with frameworks, a weight or a quota, with its
    /// weight, quota (guarantee, limit, and what it consumes: its tasks'),
    /// resources (allocated and offered), allocated, offered, reserved and
    /// frameworks, as Mesos writes them.
    pub fn roles(
        usage: &std::collections::BTreeMap<String, super::super::operator::RoleUsage>,
        quota: &crate::v1::quota::QuotaStatus,
    ) -> Value {
        let scalars = |m: &std::collections::BTreeMap<String, crate::v1::value::Scalar>| {
            let sorted: std::collections::BTreeMap<&String, f64> =
                m.iter().map(|(k, v)| (k, v.value)).collect();
            json!(sorted)
        };
        let mut names: std::collections::BTreeSet<&str> =
            usage.keys().map(String::as_str).collect();
        names.extend(quota.configs.iter().map(|c| c.role.as_str()));
        let fallback = super::super::operator::RoleUsage::default();
        let roles: Vec<Value> = names
            .into_iter()
            .map(|name| {
                let u = usage.get(name).unwrap_or(&fallback);
                let q = quota.configs.iter().find(|c| c.role == name);
                let mut both = u.allocated.clone();
                both.add(&u.offered);
                json!({
                    "name": name,
                    "weight": u.weight,
                    "quota": {
                        "role": name,
                        "guarantee": q.map(|q| scalars(&q.guarantees)).unwrap_or_else(|| json!({})),
                        "limit": q.map(|q| scalars(&q.limits)).unwrap_or_else(|| json!({})),
                        "consumed": quantities(&u.allocated),
                    },
                    "resources": quantities(&both),
                    "allocated": quantities(&u.allocated),
                    "offered": quantities(&u.offered),
                    "reserved": quantities(&u.reserved),
                    "frameworks": u.frameworks,
                })
            })
            .collect();
        json!({ "roles": roles })
    }

    /// `/version`.
    pub fn version(state: &Value) -> Value {
        json!({
            "version": state["version"],
            "build_date": state["build_date"],
            "build_time": state["build_time"],
            "build_user": state["build_user"],
        })
    }
}
