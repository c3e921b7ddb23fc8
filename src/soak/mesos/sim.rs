//! One Mesos-mode run: the world, the simulated frameworks and agents, one
//! operation per step, the reactions that follow it
//! until everything is at rest, and the checks.
//!
//! A step: apply the operation (calls to the master, agents joining or
//! leaving, time passing one second at a time); then until nothing more
//! happens: make the core and master quiescent, let frameworks read their
//! events (each checked as it arrives), agents act on what the master asked
//! and frameworks send the acknowledgements that are due; then check the
//! invariants against the master's `/state` and the core's snapshot.
//! Framework operations are in `fw_ops.rs`, the checks in `checks.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use unisched_mesos::agent::AgentUpdate;
use unisched_mesos::master::Input;
use unisched_mesos::v1;
use unisched_mesos::v1::TaskState;
use unisched_mesos::v1::scheduler::{Call, call};

use super::agents::{self, Agents, Emission, Inbox};
use super::frameworks::{Conn, Context, Fw, hash_bytes, mix};
use super::ops::{FRAMEWORKS, MesosOp};
use super::providers::Providers;
use super::world::World;

/// What a run did, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MesosCounts {
    /// Steps run (the final drain included).
    pub steps: u64,
    /// Seconds of virtual time.
    pub seconds: u64,
    /// Offers received.
    pub offers: u64,
    /// DECLINE calls.
    pub declines: u64,
    /// ACCEPT calls (valid offers).
    pub accepts: u64,
    /// ACCEPT calls with invalid offers.
    pub invalid_accepts: u64,
    /// Tasks launched.
    pub launched: u64,
    /// Tasks refused with TASK_ERROR.
    pub task_errors: u64,
    /// Status updates with a uuid received (retries included).
    pub updates: u64,
    /// Acknowledgements sent.
    pub acks: u64,
    /// Acknowledgements a framework chose not to send.
    pub acks_lost: u64,
    /// Subscriptions (new frameworks, failovers and reconnections).
    pub subscriptions: u64,
    /// Streams closed (by the framework or, for a stalled one, the master).
    pub disconnects: u64,
    /// Frameworks removed (teardown, failover timeout).
    pub removals: u64,
    /// Agents added and removed.
    pub agent_changes: u64,
    /// Resource provider subscriptions (new and again).
    pub provider_subscriptions: u64,
    /// Provider streams dropped.
    pub provider_drops: u64,
    /// UPDATE_STATE calls.
    pub provider_updates: u64,
    /// CREATE_DISK and DESTROY_DISK asked for.
    pub operations: u64,
    /// Operation statuses providers made.
    pub operation_statuses: u64,
    /// Of those, lost on the way (sent again later).
    pub operation_statuses_lost: u64,
    /// Operations dropped for a stale resource version.
    pub operations_dropped: u64,
    /// ACKNOWLEDGE_OPERATION_STATUS calls.
    pub operation_acks: u64,
    /// Weights and quota an operator changed.
    pub operator_changes: u64,
    /// Quota changes refused (a limit below what the role holds, guarantees
    /// beyond the cluster) without force.
    pub operator_refusals: u64,
}

impl MesosCounts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, o: &MesosCounts) {
        self.steps += o.steps;
        self.seconds += o.seconds;
        self.offers += o.offers;
        self.declines += o.declines;
        self.accepts += o.accepts;
        self.invalid_accepts += o.invalid_accepts;
        self.launched += o.launched;
        self.task_errors += o.task_errors;
        self.updates += o.updates;
        self.acks += o.acks;
        self.acks_lost += o.acks_lost;
        self.subscriptions += o.subscriptions;
        self.disconnects += o.disconnects;
        self.removals += o.removals;
        self.agent_changes += o.agent_changes;
        self.provider_subscriptions += o.provider_subscriptions;
        self.provider_drops += o.provider_drops;
        self.provider_updates += o.provider_updates;
        self.operations += o.operations;
        self.operation_statuses += o.operation_statuses;
        self.operation_statuses_lost += o.operation_statuses_lost;
        self.operations_dropped += o.operations_dropped;
        self.operation_acks += o.operation_acks;
        self.operator_changes += o.operator_changes;
        self.operator_refusals += o.operator_refusals;
    }
}

/// Most reaction rounds in one step before it counts as a livelock.
const MAX_REACTIONS: usize = 2_000;
/// Live agents at most.
pub const MAX_AGENTS: usize = 6;

/// One run.
pub struct MesosSim {
    /// The core and master.
    pub world: World,
    /// The run's seed.
    pub seed: u64,
    /// What the simulated agents were asked.
    pub inbox: Arc<Inbox>,
    /// Hosts and live agents.
    pub agents: Agents,
    /// Agent ids that were removed.
    pub removed_agents: Vec<String>,
    /// Agent ids an operator marked gone (`service.rs`).
    pub gone_agents: BTreeSet<String>,
    /// Framework slots.
    pub fws: Vec<Fw>,
    /// Ids of removed frameworks, in order of removal.
    pub removed: Vec<String>,
    /// What happened.
    pub counts: MesosCounts,
    /// The step being run.
    pub step: usize,
    /// Agents removed this step: every framework connected then hears FAILURE.
    pub failures_due: Vec<(String, BTreeSet<u8>)>,
    /// Resource provider slots.
    pub providers: Providers,
    /// Uuids made so far (status updates of agents and providers).
    pub(super) uuids: u64,
    /// A hash of every event the frameworks received, in order.
    print: u64,
    /// Prints each operation (`UNISCHED_SOAK_TRACE`).
    pub trace: bool,
    /// Quota limits set below what a role held, by (queue, resource): the
    /// most the queue may hold until it is back within its limit
    /// (`quota.rs`, M14).
    pub ceilings: BTreeMap<(String, String), i64>,
}

impl std::fmt::Debug for MesosSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MesosSim")
            .field("seed", &self.seed)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl MesosSim {
    /// A fresh run: a core, a master, three agents, empty framework slots.
    pub fn start(seed: u64) -> Result<MesosSim, String> {
        let offer_timeout = seed.is_multiple_of(3).then(|| Duration::from_secs(20));
        let world = World::start(seed, offer_timeout)?;
        let mut sim = MesosSim {
            world,
            seed,
            inbox: Arc::new(Inbox::default()),
            agents: Agents::default(),
            removed_agents: Vec::new(),
            gone_agents: BTreeSet::new(),
            fws: (0..FRAMEWORKS).map(|s| Fw::new(seed, s, 0)).collect(),
            removed: Vec::new(),
            counts: MesosCounts::default(),
            step: 0,
            failures_due: Vec::new(),
            providers: Providers::default(),
            uuids: 0,
            print: 0,
            trace: std::env::var_os("UNISCHED_SOAK_TRACE").is_some(),
            ceilings: BTreeMap::new(),
        };
        for size in [1, 2, 0] {
            sim.add_host(size);
        }
        // A provider on each of the first two agents.
        for p in 0..super::providers::PROVIDERS {
            sim.provider_subscribe(p, u32::from(p));
        }
        Ok(sim)
    }

    /// Clock time in ns.
    pub fn now(&self) -> u64 {
        self.world.now()
    }

    /// A new host with an agent of `size`.
    pub fn add_host(&mut self, size: u8) {
        let name = format!("host-{}", self.agents.hosts.len());
        self.agents.hosts.push(agents::Host {
            name,
            size,
            agent: None,
        });
        self.start_agent(self.agents.hosts.len() - 1);
    }

    /// The id of a live agent, picked by `pick`; none when none is live.
    pub fn live_agent(&self, pick: u32) -> Option<String> {
        let n = self.agents.live.len();
        (n > 0).then(|| self.agents.live.keys().nth(pick as usize % n).cloned())?
    }

    /// Starts an agent on host `h`.
    pub fn start_agent(&mut self, h: usize) {
        let host = &self.agents.hosts[h];
        let spec = agents::spec(host.name.clone(), host.size, self.inbox.clone());
        if let Some(id) = self.world.add_agent(spec) {
            self.agents.hosts[h].agent = Some(id.clone());
            self.agents.live.insert(
                id,
                agents::Agent {
                    host: h,
                    tasks: Default::default(),
                    out_of_service: false,
                },
            );
            self.counts.agent_changes += 1;
        }
    }

    /// Runs one operation and checks everything; the violations found.
    pub fn step(&mut self, step: usize, op: &MesosOp) -> Vec<String> {
        self.step = step;
        self.counts.steps += 1;
        if self.trace {
            eprintln!("[{step}] t={}s {op}", self.world.secs());
        }
        let mut v = self.apply(op);
        if let Err(e) = self.react(&mut v) {
            v.push(e);
            return v;
        }
        v.extend(self.check());
        v
    }

    fn apply(&mut self, op: &MesosOp) -> Vec<String> {
        match *op {
            MesosOp::Subscribe {
                fw,
                old_id,
                suppressed,
            } => self.subscribe(fw, old_id, suppressed),
            MesosOp::Disconnect { fw } => self.disconnect(fw),
            MesosOp::Teardown { fw } => self.teardown(fw),
            MesosOp::Decline {
                fw,
                offer,
                all,
                refuse,
            } => self.decline(fw, offer, all, refuse),
            MesosOp::Accept {
                fw,
                offer,
                kind,
                tasks,
                size,
                plan,
                refuse,
            } => self.accept(fw, offer, kind, tasks, size, plan, refuse),
            MesosOp::Suppress { fw, roles } => self.suppress(fw, roles),
            MesosOp::Revive { fw, roles } => self.revive(fw, roles),
            MesosOp::UpdateFramework { fw, suppressed } => self.update_framework(fw, suppressed),
            MesosOp::Kill { fw, task, unknown } => self.kill(fw, task, unknown),
            MesosOp::Reconcile { fw, kind } => self.reconcile(fw, kind),
            MesosOp::AckAll { fw } => self.ack_all(fw),
            MesosOp::BadCall { fw } => self.bad_call(fw),
            MesosOp::Stall { fw } => self.stall(fw),
            MesosOp::AgentAdd { size } => {
                if self.agents.live.len() < MAX_AGENTS {
                    self.add_host(size);
                }
                Vec::new()
            }
            MesosOp::AgentRemove { agent } => self.remove_agent(agent),
            MesosOp::AgentReturn { host } => {
                let idle: Vec<usize> = (0..self.agents.hosts.len())
                    .filter(|h| self.agents.hosts[*h].agent.is_none())
                    .collect();
                if !idle.is_empty() && self.agents.live.len() < MAX_AGENTS {
                    self.start_agent(idle[host as usize % idle.len()]);
                }
                Vec::new()
            }
            MesosOp::TaskEnds { task, failed } => {
                let all = self.agents.tasks();
                if !all.is_empty() {
                    let (a, f, t) = &all[task as usize % all.len()];
                    let state = if failed {
                        TaskState::TaskFailed
                    } else {
                        TaskState::TaskFinished
                    };
                    let mut out = Vec::new();
                    self.agents.end(a, f, t, state, &mut out);
                    self.emit(out);
                }
                Vec::new()
            }
            MesosOp::ProviderSubscribe { p, agent } => self.provider_subscribe(p, agent),
            MesosOp::ProviderDrop { p } => self.provider_drop(p),
            MesosOp::ProviderChange { p, grow, amount } => self.provider_change(p, grow, amount),
            MesosOp::ProviderAnswer { p, pick, outcome } => self.provider_answer(p, pick, outcome),
            MesosOp::ProviderPause { p, steps } => self.provider_pause(p, steps),
            MesosOp::Operator {
                role,
                kind,
                force,
                agent,
            } => {
                if kind >= 5 {
                    self.operator_reservation(role, kind == 5, agent)
                } else {
                    self.operator_change(role, kind, force)
                }
            }
            MesosOp::AgentService { agent, kind } => self.agent_service(agent, kind),
            MesosOp::Advance { secs } => self.advance(secs),
        }
    }

    /// Virtual time passes, a second at a time, with everything reacting.
    pub fn advance(&mut self, secs: u32) -> Vec<String> {
        let mut v = Vec::new();
        for _ in 0..secs {
            if let Err(e) = self.world.tick() {
                v.push(e);
                return v;
            }
            self.counts.seconds += 1;
            let now = self.now();
            for i in 0..self.fws.len() {
                if let Conn::Disconnected { deadline, .. } = self.fws[i].conn
                    && deadline <= now
                {
                    self.fws[i].conn = Conn::Removed;
                    self.note_removed(i);
                }
            }
            let due = self.agents.due(self.world.secs());
            // The tick left the core and the master at rest: unless agents
            // just reported, reacting need not make them quiescent again.
            let at_rest = !self.emit(due);
            if let Err(e) = self.react_from(&mut v, at_rest) {
                v.push(e);
                return v;
            }
        }
        v
    }

    /// Records the removal of slot `i`'s framework.
    pub fn note_removed(&mut self, i: usize) {
        if let Some(id) = self.fws[i].id.clone() {
            self.removed.push(id);
            self.counts.removals += 1;
        }
        self.fws[i].rx = None;
        self.fws[i].offers.clear();
        self.fws[i].acks.clear();
    }

    /// Sends agents' updates to the master (with uuids of the simulation's
    /// own), noting them on the frameworks' tasks.
    pub fn emit(&mut self, emissions: Vec<Emission>) -> bool {
        let any = !emissions.is_empty();
        for e in emissions {
            self.uuids += 1;
            let mut uuid = mix(self.seed, &[self.uuids, 1]).to_le_bytes().to_vec();
            uuid.extend(mix(self.seed, &[self.uuids, 2]).to_le_bytes());
            if let Some(t) = self
                .fws
                .iter_mut()
                .find(|f| f.id.as_deref() == Some(e.framework.as_str()))
                .and_then(|f| f.tasks.get_mut(&e.task))
            {
                t.emitted.push((e.state, uuid.clone()));
            }
            self.world.master.send(Input::Agent(AgentUpdate::Status {
                agent_id: e.agent,
                framework_id: e.framework,
                status: Box::new(v1::TaskStatus {
                    task_id: v1::TaskId { value: e.task },
                    state: e.state as i32,
                    uuid: Some(uuid),
                    source: Some(v1::task_status::Source::Executor as i32),
                    ..Default::default()
                }),
            }));
        }
        any
    }

    /// Until nothing more happens: quiesce, frameworks read their events,
    /// agents act, due acknowledgements go out.
    pub fn react(&mut self, v: &mut Vec<String>) -> Result<(), String> {
        self.react_from(v, false)
    }

    /// [`MesosSim::react`], the first quiescence left out when `at_rest`
    /// (the core and master were just made quiescent and nothing was sent
    /// them since).
    fn react_from(&mut self, v: &mut Vec<String>, at_rest: bool) -> Result<(), String> {
        for round in 0..MAX_REACTIONS {
            if !(at_rest && round == 0) {
                self.world.quiesce()?;
            }
            self.read_events(v);
            let mut acted = self.read_provider_events(v);
            let commands = self.inbox.take();
            if !commands.is_empty() {
                let out = self.agents.apply(commands, self.world.secs());
                acted |= self.emit(out);
            }
            acted |= self.send_due_acks(v);
            if !acted {
                return Ok(());
            }
        }
        Err(format!(
            "step {}: frameworks, agents and the master did not come to rest in {MAX_REACTIONS} rounds",
            self.step
        ))
    }

    /// Every framework reads what its stream holds.
    fn read_events(&mut self, v: &mut Vec<String>) {
        let agents: BTreeSet<String> = self.agents.live.keys().cloned().collect();
        let now = self.now();
        for i in 0..self.fws.len() {
            let cx = Context {
                seed: self.seed,
                step: self.step,
                now,
                agents: &agents,
            };
            if let Some(mut old) = self.fws[i].old_rx.take() {
                let events: Vec<_> = std::iter::from_fn(|| old.try_recv().ok()).collect();
                let kinds: Vec<&str> = events.iter().map(|e| e.r#type().as_str_name()).collect();
                let closed = matches!(
                    old.try_recv(),
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
                );
                let error = events.first().and_then(|e| e.error.as_ref());
                if events.len() != 1
                    || !error.is_some_and(|e| e.message.contains("failed over"))
                    || !closed
                {
                    v.push(format!(
                        "{}: its stream before the failover got {kinds:?} (closed: {closed}), not ERROR 'Framework failed over' and the end",
                        self.fws[i].who()
                    ));
                }
            }
            let Some(mut rx) = self.fws[i].rx.take() else {
                continue;
            };
            let mut closed = false;
            let before = (self.fws[i].updates_seen, self.fws[i].acks_lost);
            loop {
                match rx.try_recv() {
                    Ok(e) => {
                        if self.trace {
                            eprintln!("    fw{i} <- {e:?}");
                        }
                        self.print = mix(
                            self.print,
                            &[i as u64, hash_bytes(format!("{e:?}").as_bytes())],
                        );
                        let count = e.offers.as_ref().map_or(0, |o| o.offers.len());
                        self.counts.offers += count as u64;
                        v.extend(self.fws[i].on_event(e, &cx));
                    }
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            let f = &mut self.fws[i];
            self.counts.updates += f.updates_seen.saturating_sub(before.0);
            self.counts.acks_lost += f.acks_lost.saturating_sub(before.1);
            if closed {
                if f.conn != Conn::Removed {
                    v.push(format!("{}: its stream closed while {:?}", f.who(), f.conn));
                    f.lose_stream(now);
                }
            } else {
                f.rx = Some(rx);
            }
        }
    }

    /// Acknowledgements due now (connected frameworks only; the others'
    /// were lost with their stream).
    fn send_due_acks(&mut self, v: &mut Vec<String>) -> bool {
        let mut sent = false;
        for i in 0..self.fws.len() {
            if !self.fws[i].connected() {
                continue;
            }
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.fws[i].acks)
                .into_iter()
                .partition(|a| a.due <= self.step);
            self.fws[i].acks = later;
            for a in due {
                sent |= self.acknowledge(i, &a.task, a.uuid, v);
            }
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.fws[i].op_acks)
                .into_iter()
                .partition(|a| a.due <= self.step);
            self.fws[i].op_acks = later;
            for a in due {
                sent |= self.acknowledge_operation(i, &a.task, a.uuid, v);
            }
        }
        sent
    }

    /// Acknowledges `uuid` of `task` when it is the update in flight.
    pub fn acknowledge(
        &mut self,
        i: usize,
        task: &str,
        uuid: Vec<u8>,
        v: &mut Vec<String>,
    ) -> bool {
        let f = &self.fws[i];
        let Some(t) = f.tasks.get(task) else {
            return false;
        };
        if t.received.get(t.acked).map(|(_, u)| u) != Some(&uuid) {
            return false;
        }
        let call = Call {
            framework_id: f.id.clone().map(|value| v1::FrameworkId { value }),
            r#type: Some(call::Type::Acknowledge as i32),
            acknowledge: Some(call::Acknowledge {
                agent_id: v1::AgentId {
                    value: t.agent.clone(),
                },
                task_id: v1::TaskId {
                    value: task.to_string(),
                },
                uuid,
            }),
            ..Default::default()
        };
        let stream = f.stream.clone();
        match self.world.call(call, stream) {
            Ok(_) => {
                if let Some(t) = self.fws[i].tasks.get_mut(task) {
                    t.acked += 1;
                }
                self.counts.acks += 1;
                true
            }
            Err(e) => {
                v.push(format!("{}: ACKNOWLEDGE refused: {e}", self.fws[i].who()));
                false
            }
        }
    }

    /// A hash of every event the frameworks received and the master's
    /// `/state` now: the same for every run of a seed.
    pub fn fingerprint(&self) -> u64 {
        let state = self
            .world
            .state()
            .map(|s| s.to_string())
            .unwrap_or_default();
        mix(self.print, &[hash_bytes(state.as_bytes())])
    }

    /// The end of a run: every framework still known reconnects and
    /// acknowledges at once, every task is killed, time passes; then every
    /// task a connected framework launched must have ended, and the
    /// framework must know.
    pub fn finish(&mut self, step: usize) -> Vec<String> {
        self.step = step;
        self.counts.steps += 1;
        let mut v = Vec::new();
        for i in 0..self.fws.len() {
            self.fws[i].spec.ack = super::frameworks::AckPolicy::Immediate;
            if matches!(self.fws[i].conn, Conn::Disconnected { .. }) {
                v.extend(self.subscribe(i as u8, false, 0));
            }
        }
        if let Err(e) = self.react(&mut v) {
            v.push(e);
            return v;
        }
        self.providers_finish(&mut v);
        if let Err(e) = self.react(&mut v) {
            v.push(e);
            return v;
        }
        for i in 0..self.fws.len() {
            v.extend(self.ack_all(i as u8));
        }
        for i in 0..self.fws.len() {
            if !self.fws[i].connected() {
                // Removed (torn down, or past a failover timeout of 0):
                // the master has nothing of it left to kill.
                continue;
            }
            let live: Vec<String> = self.fws[i]
                .live_tasks()
                .filter(|(_, t)| t.terminal().is_none())
                .map(|(id, _)| id.clone())
                .collect();
            for t in live {
                v.extend(self.kill_task(i, &t, None));
            }
        }
        v.extend(self.advance(90));
        if let Err(e) = self.react(&mut v) {
            v.push(e);
            return v;
        }
        v.extend(self.check());
        for f in &self.fws {
            if !f.connected() {
                continue;
            }
            for (id, o) in &f.operations {
                if !o.done() {
                    v.push(format!(
                        "{}: operation {id} never ended with the framework told (received {:?}, {} acknowledged)",
                        f.who(),
                        o.received
                            .iter()
                            .map(|(s, _)| s.as_str_name())
                            .collect::<Vec<_>>(),
                        o.acked
                    ));
                }
            }
            for (id, t) in &f.tasks {
                if !t.done() {
                    v.push(format!(
                        "{}: task {id} never ended with the framework told (received {:?}, {} acknowledged)",
                        f.who(),
                        t.received
                            .iter()
                            .map(|(s, _)| s.as_str_name())
                            .collect::<Vec<_>>(),
                        t.acked
                    ));
                }
            }
        }
        v
    }
}
