//! The framework operations of a step: SUBSCRIBE (a new framework, a
//! failover, a reconnection, a removed id), a stream that closes, TEARDOWN,
//! DECLINE, ACCEPT of every kind, SUPPRESS, REVIVE, UPDATE_FRAMEWORK, KILL,
//! RECONCILE, acknowledgements, calls on a wrong stream, a reader that
//! stalls; and an agent leaving. Each call's answer is checked, and what
//! the framework now expects is set down: offers it no longer holds,
//! filters, suppressed roles, tasks, and the updates without a uuid its
//! call calls for.

use std::collections::BTreeMap;

use tokio::sync::mpsc::error::TryRecvError;
use unisched_mesos::master::{CallError, CallOutcome, Input};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::TaskState;
use unisched_mesos::v1::scheduler::{Call, call};
use unisched_mesos::v1::task_status::Reason;

use super::STREAM_CAPACITY;
use super::agents::{PLAN_LABEL, Plan};
use super::frameworks::{Conn, Filter, Fw, FwTask, by_pool, core_scalars, filters_of, refuse_secs};
use super::ops::{AcceptKind, Refuse};
use super::providers::kind_of;
use super::sim::MesosSim;
use unisched_mesos::v1::resource::disk_info::source::Type as Kind;

/// What each custom executor of the soak's frameworks holds. The soak's
/// agents never end an executor by itself (a custom executor may live on
/// after its tasks): it holds this until its framework or agent goes.
pub const EXECUTOR_RESOURCES: &str = "cpus:0.1;mem:32";

/// Removed frameworks the master remembers (and refuses the ids of).
const REMOVED_KEPT: usize = 50;
/// Tasks a framework keeps at most; it launches no more past this.
const MAX_TASKS: usize = 40;

fn lost_state(aware: bool) -> TaskState {
    if aware {
        TaskState::TaskGone
    } else {
        TaskState::TaskLost
    }
}

/// A task's end on an agent an operator marked gone, and what
/// reconciliation says of a task there.
pub(super) fn gone_state(aware: bool) -> TaskState {
    if aware {
        TaskState::TaskGoneByOperator
    } else {
        TaskState::TaskLost
    }
}

fn unknown_state(aware: bool) -> TaskState {
    if aware {
        TaskState::TaskUnknown
    } else {
        TaskState::TaskLost
    }
}

/// A call of the framework in slot `f`.
fn call_of(f: &Fw, kind: call::Type) -> Call {
    Call {
        framework_id: f.id.clone().map(|value| v1::FrameworkId { value }),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

fn task_resources(size: u8, remaining: &Resources) -> Resources {
    let base = match size % 4 {
        0 => "cpus:0.1;mem:32",
        1 => "cpus:0.5;mem:128",
        2 => "cpus:1;mem:256",
        _ => "cpus:0.2;mem:64",
    };
    let mut r = Resources::parse(base).unwrap_or_default();
    if size % 4 == 3
        && let Some(port) = remaining.ranges("ports").first().map(|p| p.begin)
    {
        r.add(&Resources::parse(&format!("ports:[{port}-{port}]")).unwrap_or_default());
    }
    r
}

fn task_info(id: &str, agent: &str, resources: &Resources, plan: Plan) -> v1::TaskInfo {
    v1::TaskInfo {
        name: id.to_string(),
        task_id: v1::TaskId {
            value: id.to_string(),
        },
        agent_id: v1::AgentId {
            value: agent.to_string(),
        },
        resources: resources.to_vec(),
        command: Some(v1::CommandInfo {
            value: Some("true".to_string()),
            ..Default::default()
        }),
        labels: Some(v1::Labels {
            labels: vec![v1::Label {
                key: PLAN_LABEL.to_string(),
                value: Some(plan.label()),
            }],
        }),
        ..Default::default()
    }
}

fn launch_op(tasks: Vec<v1::TaskInfo>) -> v1::offer::Operation {
    v1::offer::Operation {
        r#type: Some(v1::offer::operation::Type::Launch as i32),
        launch: Some(v1::offer::operation::Launch { task_infos: tasks }),
        ..Default::default()
    }
}

impl MesosSim {
    fn expect_accepted(
        &self,
        i: usize,
        what: &str,
        r: Result<CallOutcome, CallError>,
    ) -> Vec<String> {
        match r {
            Ok(_) => Vec::new(),
            Err(e) => vec![format!("{}: {what} refused: {e}", self.fws[i].who())],
        }
    }

    fn send_call(&self, i: usize, call: Call) -> Result<CallOutcome, CallError> {
        self.world.call(call, self.fws[i].stream.clone())
    }

    /// SUBSCRIBE (see `MesosOp::Subscribe`).
    pub fn subscribe(&mut self, slot: u8, old_id: bool, mask: u8) -> Vec<String> {
        let i = slot as usize;
        match self.fws[i].conn {
            Conn::Subscribing => return Vec::new(),
            Conn::Removed => {
                let id = self.fws[i].id.clone();
                if let Some(id) = id.filter(|id| {
                    old_id
                        && self
                            .removed
                            .iter()
                            .rev()
                            .take(REMOVED_KEPT)
                            .any(|r| r == id)
                }) {
                    return self.subscribe_removed(i, &id);
                }
                let next = self.fws[i].incarnation + 1;
                self.fws[i] = Fw::new(self.seed, slot, next);
            }
            _ => {}
        }
        let f = &mut self.fws[i];
        let suppressed = f.spec.roles_of(mask);
        let info = f.spec.info(f.id.as_deref());
        let (stream, rx) = self.world.master.subscribe(
            call::Subscribe {
                framework_info: info,
                suppressed_roles: suppressed.clone(),
                offer_constraints: None,
            },
            STREAM_CAPACITY,
        );
        if f.connected() {
            f.old_rx = f.rx.take();
        }
        f.rx = Some(rx);
        f.stream = Some(stream);
        f.conn = Conn::Subscribing;
        f.offers.clear();
        f.filters.clear();
        f.acks.clear();
        f.op_acks.clear();
        f.suppressed = suppressed.into_iter().collect();
        self.counts.subscriptions += 1;
        Vec::new()
    }

    /// A removed framework's id subscribes again: ERROR, then the end.
    fn subscribe_removed(&mut self, i: usize, id: &str) -> Vec<String> {
        let info = self.fws[i].spec.info(Some(id));
        let (_stream, mut rx) = self.world.master.subscribe(
            call::Subscribe {
                framework_info: info,
                ..Default::default()
            },
            STREAM_CAPACITY,
        );
        if let Err(e) = self.world.quiesce() {
            return vec![e];
        }
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let closed = matches!(rx.try_recv(), Err(TryRecvError::Disconnected));
        let refused = events.len() == 1
            && events[0]
                .error
                .as_ref()
                .is_some_and(|e| e.message.contains("removed"));
        if refused && closed {
            Vec::new()
        } else {
            vec![format!(
                "{}: subscribing its removed id got {:?} (closed: {closed}), not ERROR 'Framework has been removed'",
                self.fws[i].who(),
                events
                    .iter()
                    .map(|e| e.r#type().as_str_name())
                    .collect::<Vec<_>>()
            )]
        }
    }

    /// The framework's event stream closes (its connection drops).
    pub fn disconnect(&mut self, slot: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let (Some(framework), Some(stream_id)) =
            (self.fws[i].id.clone(), self.fws[i].stream.clone())
        else {
            return Vec::new();
        };
        self.world.master.send(Input::StreamClosed {
            framework,
            stream_id,
        });
        let now = self.now();
        self.fws[i].lose_stream(now);
        self.counts.disconnects += 1;
        if self.fws[i].conn == Conn::Removed {
            self.note_removed(i);
        }
        Vec::new()
    }

    /// TEARDOWN.
    pub fn teardown(&mut self, slot: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let r = self.send_call(i, call_of(&self.fws[i], call::Type::Teardown));
        let v = self.expect_accepted(i, "TEARDOWN", r);
        self.fws[i].conn = Conn::Removed;
        self.note_removed(i);
        v
    }

    /// Filters what `resources` (of an offer to `role` on `agent`) hold, as
    /// a decline with `refuse` does.
    fn set_filters(
        &mut self,
        i: usize,
        role: &str,
        agent: &str,
        resources: &Resources,
        refuse: Refuse,
    ) {
        let Some(secs) = refuse_secs(refuse) else {
            return;
        };
        let until = self.now() + secs * 1_000_000_000;
        for (pool, part) in by_pool(&resources.unallocated()) {
            self.fws[i].filters.insert(
                (role.to_string(), agent.to_string(), pool),
                Filter {
                    refused: core_scalars(&part),
                    until,
                },
            );
        }
    }

    /// The framework no longer holds these offers.
    fn give_up(&mut self, i: usize, ids: &[String]) {
        for id in ids {
            self.fws[i].offers.remove(id);
            self.fws[i].used_offers.push(id.clone());
        }
        let used = &mut self.fws[i].used_offers;
        if used.len() > 64 {
            used.drain(..used.len() - 64);
        }
    }

    /// DECLINE.
    pub fn decline(&mut self, slot: u8, pick: u32, all: bool, refuse: Refuse) -> Vec<String> {
        let i = slot as usize;
        let f = &self.fws[i];
        if !f.connected() || f.offers.is_empty() {
            return Vec::new();
        }
        let ids: Vec<String> = if all {
            f.offers.keys().cloned().collect()
        } else {
            vec![
                f.offers
                    .keys()
                    .nth(pick as usize % f.offers.len())
                    .cloned()
                    .unwrap_or_default(),
            ]
        };
        let mut c = call_of(f, call::Type::Decline);
        c.decline = Some(call::Decline {
            offer_ids: ids
                .iter()
                .map(|v| v1::OfferId { value: v.clone() })
                .collect(),
            filters: filters_of(refuse),
        });
        let r = self.send_call(i, c);
        let v = self.expect_accepted(i, "DECLINE", r);
        for id in &ids {
            if let Some(o) = self.fws[i].offers.get(id).cloned() {
                self.set_filters(i, &o.role, &o.agent, &o.resources, refuse);
            }
        }
        self.give_up(i, &ids);
        self.counts.declines += 1;
        v
    }

    /// ACCEPT (see [`AcceptKind`]).
    #[allow(clippy::too_many_arguments)]
    pub fn accept(
        &mut self,
        slot: u8,
        pick: u32,
        kind: AcceptKind,
        ntasks: u8,
        size: u8,
        plan: u8,
        refuse: Refuse,
    ) -> Vec<String> {
        let i = slot as usize;
        let f = &self.fws[i];
        if !f.connected() || f.offers.is_empty() || f.live_tasks().count() >= MAX_TASKS {
            return Vec::new();
        }
        // A disk operation takes an offer holding a provider's disk of the
        // kind it works on, when the framework has one.
        let disk_kind = match kind {
            AcceptKind::CreateDisk => Some(Kind::Raw),
            AcceptKind::DestroyDisk => Some(Kind::Mount),
            _ => None,
        };
        let with_disk: Vec<&String> = f
            .offers
            .iter()
            .filter(|(_, h)| {
                h.resources
                    .iter()
                    .any(|r| r.provider_id.is_some() && kind_of(r) == disk_kind)
            })
            .map(|(id, _)| id)
            .collect();
        let ids: Vec<&String> = if with_disk.is_empty() {
            f.offers.keys().collect()
        } else {
            with_disk
        };
        let first = ids[pick as usize % ids.len()].clone();
        let o = f.offers[&first].clone();
        let same_agent = |role_same: bool| {
            f.offers
                .iter()
                .filter(|(id, h)| {
                    **id != first && h.agent == o.agent && (h.role == o.role) == role_same
                })
                .map(|(id, _)| id.clone())
                .next()
        };
        let mut invalid = true;
        let offer_ids: Vec<String> = match kind {
            AcceptKind::Reused if !f.used_offers.is_empty() => {
                vec![
                    first.clone(),
                    f.used_offers[pick as usize % f.used_offers.len()].clone(),
                ]
            }
            AcceptKind::TwoAgents => match f
                .offers
                .iter()
                .find(|(_, h)| h.agent != o.agent && h.role == o.role)
            {
                Some((other, _)) => vec![first.clone(), other.clone()],
                None => {
                    invalid = false;
                    vec![first.clone()]
                }
            },
            AcceptKind::TwoRoles => match same_agent(false) {
                Some(other) => vec![first.clone(), other],
                None => {
                    invalid = false;
                    vec![first.clone()]
                }
            },
            AcceptKind::Unknown => vec![first.clone(), format!("{first}-never")],
            AcceptKind::Aggregate => {
                invalid = false;
                let mut all = vec![first.clone()];
                while let Some(next) = f
                    .offers
                    .iter()
                    .find(|(id, h)| !all.contains(id) && h.agent == o.agent && h.role == o.role)
                    .map(|(id, _)| id.clone())
                {
                    all.push(next);
                }
                all
            }
            _ => {
                invalid = false;
                vec![first.clone()]
            }
        };
        let mut remaining = Resources::default();
        for id in &offer_ids {
            if let Some(h) = f.offers.get(id) {
                remaining.add(&h.resources.unallocated());
            }
        }
        let aware = f.spec.partition_aware;
        let role = o.role.clone();
        let agent = o.agent.clone();
        // A CREATE_DISK or DESTROY_DISK on a provider's disk in the offer
        // (with an operation id most of the time), before the tasks.
        let mut budget = remaining.clone();
        let mut disk_op: Option<(v1::offer::Operation, Option<String>, String)> = None;
        if let Some(want) = disk_kind {
            let found = o
                .resources
                .iter()
                .find(|r| r.provider_id.is_some() && kind_of(r) == Some(want))
                .cloned();
            if let Some(mut source) = found {
                let provider = source
                    .provider_id
                    .as_ref()
                    .map(|p| p.value.clone())
                    .unwrap_or_default();
                let op_id = (!pick.is_multiple_of(5))
                    .then(|| format!("o{}.{}.{}", slot, f.incarnation, f.next_operation));
                let mut op = v1::offer::Operation {
                    id: op_id.clone().map(|value| v1::OperationId { value }),
                    ..Default::default()
                };
                if kind == AcceptKind::CreateDisk {
                    let whole = source.scalar.as_ref().map_or(0.0, |x| x.value);
                    let part = (64.0 * f64::from(1 + size % 4)).min(whole);
                    source.scalar = Some(v1::value::Scalar { value: part });
                    op.r#type = Some(v1::offer::operation::Type::CreateDisk as i32);
                    op.create_disk = Some(v1::offer::operation::CreateDisk {
                        source: Box::new(source.clone()),
                        target_type: Kind::Mount as i32,
                        target_profile: None,
                    });
                } else {
                    op.r#type = Some(v1::offer::operation::Type::DestroyDisk as i32);
                    op.destroy_disk = Some(v1::offer::operation::DestroyDisk {
                        source: Box::new(source.clone()),
                    });
                }
                budget.subtract(&Resources::from_vec(vec![source]).unallocated());
                disk_op = Some((op, op_id, provider));
            }
        }
        // The tasks, and what the master is to make of each.
        let mut infos = Vec::new();
        let mut planned: Vec<(String, Result<Resources, ()>, Option<String>)> = Vec::new();
        let live: Vec<String> = f.live_tasks().map(|(id, _)| id.clone()).collect();
        let mut next = f.next_task;
        let mut executors = f.executors.clone();
        let count = if kind == AcceptKind::Empty {
            0
        } else {
            ntasks.max(1)
        };
        for n in 0..count {
            let mut id = format!("t{}.{}.{}", slot, f.incarnation, next);
            next += 1;
            if kind == AcceptKind::DuplicateId && n == 0 {
                if let Some(l) = live.first() {
                    id = l.clone();
                }
            } else if kind == AcceptKind::DuplicateId && n == 1 && live.is_empty() {
                id = planned[0].0.clone();
            }
            let mut resources = task_resources(size.wrapping_add(n), &budget);
            if kind == AcceptKind::TooLarge && n == 0 {
                let more = remaining.scalar("cpus") + 1.0;
                resources = Resources::parse(&format!("cpus:{more};mem:32")).unwrap_or_default();
            }
            let mut info = task_info(
                &id,
                &agent,
                &resources,
                Plan::from_byte(plan.wrapping_add(n)),
            );
            let mut total = resources.clone();
            let mut executor = None;
            if kind == AcceptKind::WithExecutor {
                let exec = if n % 2 == 0 {
                    "shared".to_string()
                } else {
                    format!("e-{id}")
                };
                let exec_resources = Resources::parse(EXECUTOR_RESOURCES).unwrap_or_default();
                info.command = None;
                info.executor = Some(Box::new(v1::ExecutorInfo {
                    r#type: Some(v1::executor_info::Type::Custom as i32),
                    executor_id: v1::ExecutorId {
                        value: exec.clone(),
                    },
                    command: Some(v1::CommandInfo {
                        value: Some("true".to_string()),
                        ..Default::default()
                    }),
                    resources: exec_resources.to_vec(),
                    ..Default::default()
                }));
                if !executors.contains(&(agent.clone(), exec.clone())) {
                    total.add(&exec_resources);
                }
                executor = Some(exec);
            }
            let duplicate =
                live.contains(&id) || planned.iter().any(|(p, r, _)| *p == id && r.is_ok());
            let outcome = if duplicate || !budget.contains(&total) {
                Err(())
            } else {
                budget.subtract(&total);
                if let Some(e) = &executor {
                    executors.insert((agent.clone(), e.clone()));
                }
                // The task holds its own; a new executor's are its own hold.
                Ok(resources.clone())
            };
            planned.push((id, outcome, executor));
            infos.push(info);
        }
        let mut c = call_of(f, call::Type::Accept);
        c.accept = Some(call::Accept {
            offer_ids: offer_ids
                .iter()
                .map(|v| v1::OfferId { value: v.clone() })
                .collect(),
            operations: disk_op
                .iter()
                .map(|(op, _, _)| op.clone())
                .chain((!infos.is_empty()).then(|| launch_op(infos)))
                .collect(),
            filters: filters_of(refuse),
        });
        let r = self.send_call(i, c);
        let mut v = self.expect_accepted(i, "ACCEPT", r);
        let now = self.now();
        let held: Vec<String> = offer_ids
            .iter()
            .filter(|id| self.fws[i].offers.contains_key(*id))
            .cloned()
            .collect();
        let f = &mut self.fws[i];
        f.next_task = next;
        if invalid {
            for (id, _, _) in &planned {
                let state = if aware {
                    TaskState::TaskDropped
                } else {
                    TaskState::TaskLost
                };
                f.plain_expected
                    .push((id.clone(), state, Some(Reason::InvalidOffers)));
            }
            self.counts.invalid_accepts += 1;
            self.give_up(i, &held);
            return v;
        }
        for (id, outcome, executor) in planned {
            match outcome {
                Ok(own) => {
                    if let Some(e) = executor {
                        f.executors.insert((agent.clone(), e));
                    }
                    f.tasks.insert(
                        id,
                        FwTask {
                            agent: agent.clone(),
                            role: role.clone(),
                            resources: own,
                            emitted: Vec::new(),
                            received: Vec::new(),
                            acked: 0,
                            last_sent: now,
                            master_terminal: None,
                            publishing: false,
                        },
                    );
                    self.counts.launched += 1;
                }
                Err(()) => {
                    f.plain_expected
                        .push((id, TaskState::TaskError, Some(Reason::TaskInvalid)));
                    self.counts.task_errors += 1;
                }
            }
        }
        if let Some((_, op_id, provider)) = disk_op {
            self.counts.operations += 1;
            self.fws[i].next_operation += 1;
            if let Some(op_id) = op_id {
                self.note_operation(i, &op_id, &agent, &provider);
            }
        }
        self.set_filters(i, &role, &agent, &budget, refuse);
        self.give_up(i, &held);
        self.counts.accepts += 1;
        if held.len() != offer_ids.len() {
            v.push(format!(
                "{}: accepted offers it did not hold",
                self.fws[i].who()
            ));
        }
        v
    }

    /// SUPPRESS.
    pub fn suppress(&mut self, slot: u8, mask: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let roles = self.fws[i].spec.roles_of(mask);
        let mut c = call_of(&self.fws[i], call::Type::Suppress);
        c.suppress = Some(call::Suppress {
            roles: roles.clone(),
        });
        let r = self.send_call(i, c);
        let v = self.expect_accepted(i, "SUPPRESS", r);
        let f = &mut self.fws[i];
        let named = if roles.is_empty() {
            f.spec.roles.clone()
        } else {
            roles
        };
        f.suppressed.extend(named);
        v
    }

    /// REVIVE: unsuppressed, filters gone.
    pub fn revive(&mut self, slot: u8, mask: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let roles = self.fws[i].spec.roles_of(mask);
        let mut c = call_of(&self.fws[i], call::Type::Revive);
        c.revive = Some(call::Revive {
            roles: roles.clone(),
        });
        let r = self.send_call(i, c);
        let v = self.expect_accepted(i, "REVIVE", r);
        let f = &mut self.fws[i];
        let named = if roles.is_empty() {
            f.spec.roles.clone()
        } else {
            roles
        };
        for role in &named {
            f.suppressed.remove(role);
        }
        f.filters.retain(|(role, _, _), _| !named.contains(role));
        v
    }

    /// UPDATE_FRAMEWORK with new suppressed roles (200 OK).
    pub fn update_framework(&mut self, slot: u8, mask: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let f = &self.fws[i];
        let suppressed = f.spec.roles_of(mask);
        let mut c = call_of(f, call::Type::UpdateFramework);
        c.update_framework = Some(call::UpdateFramework {
            framework_info: f.spec.info(f.id.as_deref()),
            suppressed_roles: suppressed.clone(),
            ..Default::default()
        });
        let mut v = Vec::new();
        match self.send_call(i, c) {
            Ok(CallOutcome::Ok) => {}
            other => v.push(format!(
                "{}: UPDATE_FRAMEWORK answered {other:?}, not 200",
                self.fws[i].who()
            )),
        }
        self.fws[i].suppressed = suppressed.into_iter().collect();
        v
    }

    /// What the master answers about a task it does not know, on `agent`.
    fn unknown_reply(&self, i: usize, agent: Option<&str>) -> TaskState {
        let aware = self.fws[i].spec.partition_aware;
        match agent {
            Some(a) if self.agents.live.contains_key(a) => lost_state(aware),
            Some(a) if self.gone_agents.contains(a) => gone_state(aware),
            _ => unknown_state(aware),
        }
    }

    /// A ghost task's agent: a live one, a removed one, or none.
    fn ghost_agent(&self, n: u32) -> Option<String> {
        match n % 3 {
            0 => self
                .agents
                .live
                .keys()
                .nth(n as usize % self.agents.live.len().max(1))
                .cloned(),
            1 => self.removed_agents.last().cloned(),
            _ => None,
        }
    }

    /// KILL (see `MesosOp::Kill`).
    pub fn kill(&mut self, slot: u8, pick: u32, unknown: bool) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let live: Vec<(String, String)> = self.fws[i]
            .live_tasks()
            .map(|(id, t)| (id.clone(), t.agent.clone()))
            .collect();
        if unknown || live.is_empty() {
            let agent = self.ghost_agent(pick);
            let id = format!("ghost-{pick}");
            return self.kill_task(i, &id, agent);
        }
        let (id, agent) = live[pick as usize % live.len()].clone();
        self.kill_task(i, &id, Some(agent))
    }

    /// KILL of task `id` (on `agent`): the master's answer for a task it
    /// does not know is a reconciliation of it.
    pub fn kill_task(&mut self, i: usize, id: &str, agent: Option<String>) -> Vec<String> {
        let known = self.fws[i].tasks.get(id).is_some_and(|t| !t.done());
        let agent = agent.or_else(|| self.fws[i].tasks.get(id).map(|t| t.agent.clone()));
        let mut c = call_of(&self.fws[i], call::Type::Kill);
        c.kill = Some(call::Kill {
            task_id: v1::TaskId {
                value: id.to_string(),
            },
            agent_id: agent.clone().map(|value| v1::AgentId { value }),
            kill_policy: None,
        });
        let r = self.send_call(i, c);
        let v = self.expect_accepted(i, "KILL", r);
        if !known {
            let state = self.unknown_reply(i, agent.as_deref());
            self.fws[i]
                .plain_expected
                .push((id.to_string(), state, Some(Reason::Reconciliation)));
        }
        v
    }

    /// RECONCILE (see `MesosOp::Reconcile`).
    pub fn reconcile(&mut self, slot: u8, kind: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let f = &self.fws[i];
        let mut asked: Vec<(String, Option<String>)> = Vec::new();
        let mut expected = Vec::new();
        match kind {
            0 => {
                for (id, t) in f.live_tasks() {
                    expected.push((id.clone(), t.reported(), Some(Reason::Reconciliation)));
                }
            }
            1 => {
                for (id, t) in f.tasks.iter().rev().take(4) {
                    asked.push((id.clone(), Some(t.agent.clone())));
                }
            }
            _ => {
                let n = f.next_task as u32;
                for k in 0..3 {
                    asked.push((format!("ghost-r{k}"), self.ghost_agent(n + k)));
                }
            }
        }
        for (id, agent) in &asked {
            match f.tasks.get(id).filter(|t| !t.done()) {
                Some(t) => expected.push((id.clone(), t.reported(), Some(Reason::Reconciliation))),
                None => expected.push((
                    id.clone(),
                    self.unknown_reply(i, agent.as_deref()),
                    Some(Reason::Reconciliation),
                )),
            }
        }
        let mut c = call_of(f, call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile {
            tasks: asked
                .iter()
                .map(|(id, agent)| call::reconcile::Task {
                    task_id: v1::TaskId { value: id.clone() },
                    agent_id: agent.clone().map(|value| v1::AgentId { value }),
                })
                .collect(),
        });
        let r = self.send_call(i, c);
        let v = self.expect_accepted(i, "RECONCILE", r);
        self.fws[i].plain_expected.extend(expected);
        v
    }

    /// Acknowledges every update in flight of the framework's tasks.
    pub fn ack_all(&mut self, slot: u8) -> Vec<String> {
        let i = slot as usize;
        let mut v = Vec::new();
        if !self.fws[i].connected() {
            return v;
        }
        let due: Vec<(String, Vec<u8>)> = self.fws[i]
            .tasks
            .iter()
            .filter_map(|(id, t)| {
                t.received
                    .get(t.acked)
                    .map(|(_, u)| (id.clone(), u.clone()))
            })
            .collect();
        for (task, uuid) in due {
            self.acknowledge(i, &task, uuid, &mut v);
        }
        let due: Vec<(String, Vec<u8>)> = self.fws[i]
            .operations
            .iter()
            .filter_map(|(id, o)| {
                o.received
                    .get(o.acked)
                    .map(|(_, u)| (id.clone(), u.clone()))
            })
            .collect();
        for (op, uuid) in due {
            self.acknowledge_operation(i, &op, uuid, &mut v);
        }
        v
    }

    /// A call the master must refuse: on a wrong stream id while connected
    /// (400), while disconnected (403), as a removed framework (400).
    pub fn bad_call(&mut self, slot: u8) -> Vec<String> {
        let i = slot as usize;
        let f = &self.fws[i];
        if f.id.is_none() {
            return Vec::new();
        }
        let (stream, want) = match f.conn {
            Conn::Connected { .. } => (Some("not-my-stream".to_string()), 400),
            Conn::Disconnected { .. } => (f.stream.clone(), 403),
            Conn::Removed => (f.stream.clone(), 400),
            _ => return Vec::new(),
        };
        let mut c = call_of(f, call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile { tasks: Vec::new() });
        match self.world.call(c, stream) {
            Err(e) if e.status == want => Vec::new(),
            other => vec![format!(
                "{}: a call on a wrong stream ({:?}) answered {other:?}, not {want}",
                f.who(),
                f.conn
            )],
        }
    }

    /// The framework stops reading while asking for more than its stream
    /// holds: the master closes the stream after the first
    /// `STREAM_CAPACITY` replies and disconnects it.
    pub fn stall(&mut self, slot: u8) -> Vec<String> {
        let i = slot as usize;
        if !self.fws[i].connected() {
            return Vec::new();
        }
        let asked = STREAM_CAPACITY + 40;
        let mut c = call_of(&self.fws[i], call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile {
            tasks: (0..asked)
                .map(|k| call::reconcile::Task {
                    task_id: v1::TaskId {
                        value: format!("stall-{k}"),
                    },
                    agent_id: None,
                })
                .collect(),
        });
        let r = self.send_call(i, c);
        let mut v = self.expect_accepted(i, "RECONCILE", r);
        if let Err(e) = self.world.quiesce() {
            v.push(e);
            return v;
        }
        let Some(mut rx) = self.fws[i].rx.take() else {
            return v;
        };
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let closed = matches!(rx.try_recv(), Err(TryRecvError::Disconnected));
        let want = unknown_state(self.fws[i].spec.partition_aware);
        let replies = events
            .iter()
            .filter(|e| {
                e.update
                    .as_ref()
                    .is_some_and(|u| u.status.uuid.is_none() && u.status.state() == want)
            })
            .count();
        if !closed || replies != STREAM_CAPACITY || events.len() != STREAM_CAPACITY {
            v.push(format!(
                "{}: a stalled stream got {} events ({replies} replies), closed: {closed}; expected {STREAM_CAPACITY} replies and the end",
                self.fws[i].who(),
                events.len()
            ));
        }
        let now = self.now();
        self.fws[i].lose_stream(now);
        self.counts.disconnects += 1;
        if self.fws[i].conn == Conn::Removed {
            self.note_removed(i);
        }
        v
    }

    /// An agent leaves: its tasks end as LOST (GONE for partition-aware
    /// frameworks) unless they ended already, its offers are rescinded, and
    /// every connected framework hears FAILURE.
    pub fn remove_agent(&mut self, pick: u32) -> Vec<String> {
        let Some(id) = self.live_agent(pick) else {
            return Vec::new();
        };
        self.world.remove_agent(&id);
        self.agent_left(id, lost_state);
        Vec::new()
    }

    /// The model of an agent the master removed: its tasks not yet ended
    /// end in `state(partition aware)`, every framework connected now
    /// hears FAILURE.
    pub fn agent_left(&mut self, id: String, state: fn(bool) -> TaskState) {
        let mut told = std::collections::BTreeSet::new();
        for f in &mut self.fws {
            if f.connected() {
                told.insert(f.slot);
            }
            let aware = f.spec.partition_aware;
            for t in f.tasks.values_mut().filter(|t| t.agent == id) {
                let ended = t.master_terminal.is_some()
                    || t.terminal().is_some()
                    || t.emitted.iter().any(|(s, _)| s.is_terminal());
                if !ended {
                    t.master_terminal = Some(state(aware));
                }
            }
            f.executors.retain(|(a, _)| *a != id);
        }
        if let Some(a) = self.agents.live.remove(&id) {
            self.agents.hosts[a.host].agent = None;
        }
        self.removed_agents.push(id.clone());
        self.failures_due.push((id, told));
        self.counts.agent_changes += 1;
    }
}

/// Offers held by `f` on `agent` for `role`, by id.
pub fn offers_on<'a>(f: &'a Fw, agent: &str, role: &str) -> BTreeMap<&'a String, &'a Resources> {
    f.offers
        .iter()
        .filter(|(_, h)| h.agent == agent && h.role == role)
        .map(|(id, h)| (id, &h.resources))
        .collect()
}
