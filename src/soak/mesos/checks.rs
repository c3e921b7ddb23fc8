//! The invariants checked at the end of every step, against three views:
//! the model (what frameworks were told and did, what agents sent), the
//! master's `/state`, and the core's snapshot of the partition `mesos`.
//!
//! - M1 offers: no resource is offered to two frameworks at once, and what
//!   is offered and used on an agent fits in its total (scalars summed,
//!   port ranges disjoint); each framework holds exactly the offers the
//!   master has outstanding for it, with the same resources.
//! - M5 updates: while a framework is connected, no status update waits
//!   for it: either one is in flight (unacknowledged, and sent again within
//!   the 10 minute retry cap) or the framework has every update the master
//!   recorded for the task, in the master's order.
//! - M6 frameworks: the master knows exactly the frameworks that are
//!   subscribed or within their failover timeout (none torn down or past
//!   it), each with exactly the tasks not yet acknowledged as ended; a
//!   removed framework leaves nothing (no offer, task, core application or
//!   allocation).
//! - M7 usage: per agent, the core's allocations on its nodes equal the
//!   offers and the tasks holding resources there (the model's, and the
//!   master's), and its nodes' capacity equals the agent's total.
//! - M8 the core's own invariants (`soak::check::invariants`).
//! - M9 providers: an agent's total is its own resources and those its
//!   subscribed providers last reported; an operation status a connected
//!   framework has not acknowledged is sent again within the retry cap
//!   (more provider checks in `providers.rs` and `frameworks.rs`).
//! - M14 limits (`quota.rs`): no queue holds more than its maximum (a
//!   role's quota limit), unless a forced limit came below what it held;
//!   then it holds no more than it did, until it is within the limit.
//! - M15 service (`service.rs`): an agent is deactivated exactly when the
//!   model took it out of service, none of it is offered then, and a
//!   DRAINED agent uses nothing.
//! - Heartbeats every 15 s, FAILURE to every connected framework when an
//!   agent goes, SUBSCRIBED after every SUBSCRIBE, and the updates without
//!   a uuid the step's calls called for.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use unisched_core::PartitionSnapshot;
use unisched_mesos::resources::Resources;

use super::frameworks::{Conn, Fw, core_scalars};
use super::sim::MesosSim;

/// The node attribute naming the agent of a pool's node (the master's
/// `pools::AGENT_ATTRIBUTE`).
const AGENT_ATTRIBUTE: &str = "mesos/agent";
/// Heartbeat interval of the master (its default).
const HEARTBEAT_SECS: u64 = 15;
/// The longest a framework waits for an unacknowledged update to come again.
const RETRY_CAP_SECS: u64 = 600;

/// Scalars of a `/state` resources object in core units.
fn state_scalars(v: &Value) -> BTreeMap<String, i64> {
    let mut r = Resources::default();
    if let Some(m) = v.as_object() {
        for (name, value) in m {
            if let Some(x) = value.as_f64()
                && x != 0.0
                && let Ok(p) = Resources::parse(&format!("{name}:{x}"))
            {
                r.add(&p);
            }
        }
    }
    core_scalars(&r)
}

fn add(into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn same(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> bool {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .all(|k| a.get(k).copied().unwrap_or(0) == b.get(k).copied().unwrap_or(0))
}

fn ids(list: Option<&Value>, key: &str) -> BTreeSet<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.get(key).and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the master still holds a task's resources (no terminal state
/// reached it: from the agent, or made by the master itself).
pub fn holds(t: &super::frameworks::FwTask) -> bool {
    t.master_terminal.is_none()
        && t.terminal().is_none()
        && !t.emitted.iter().any(|(s, _)| s.is_terminal())
}

impl MesosSim {
    /// Every invariant of the step; what did not hold.
    pub fn check(&mut self) -> Vec<String> {
        let mut v = Vec::new();
        let now = self.now();
        for f in &mut self.fws {
            v.extend(f.check_plain());
            if f.conn == Conn::Subscribing {
                v.push(format!("{}: no SUBSCRIBED after SUBSCRIBE", f.who()));
            }
            if f.connected()
                && now.saturating_sub(f.last_heartbeat) >= HEARTBEAT_SECS * 1_000_000_000
            {
                v.push(format!(
                    "{}: no HEARTBEAT for {} s",
                    f.who(),
                    (now - f.last_heartbeat) / 1_000_000_000
                ));
            }
        }
        for (agent, told) in std::mem::take(&mut self.failures_due) {
            for f in self.fws.iter_mut() {
                let heard = f.failures.remove(&agent);
                if told.contains(&f.slot) && f.connected() && !heard {
                    v.push(format!("{}: no FAILURE for removed agent {agent}", f.who()));
                }
            }
        }
        for f in self.fws.iter_mut() {
            f.failures.clear();
        }
        let Some(state) = self.world.live_state() else {
            v.push("the master did not answer /state".to_string());
            return v;
        };
        let Some(snap) = self.world.snapshot() else {
            v.push("the core has no partition mesos".to_string());
            return v;
        };
        self.check_frameworks(&state, &mut v);
        self.check_agents(&state, &snap, &mut v);
        self.check_core(&state, &snap, &mut v);
        self.check_limits(&snap, &mut v);
        self.check_service(&state, &mut v);
        v.extend(self.world.operator.check(&state));
        v
    }

    fn check_frameworks(&self, state: &Value, v: &mut Vec<String>) {
        let now = self.now();
        let listed: BTreeMap<String, &Value> = state["frameworks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| Some((f["id"].as_str()?.to_string(), f)))
                    .collect()
            })
            .unwrap_or_default();
        let live: BTreeMap<&String, &Fw> = self
            .fws
            .iter()
            .filter(|f| matches!(f.conn, Conn::Connected { .. } | Conn::Disconnected { .. }))
            .filter_map(|f| Some((f.id.as_ref()?, f)))
            .collect();
        for id in listed.keys() {
            if !live.contains_key(id) {
                let why = self
                    .fws
                    .iter()
                    .find(|f| f.id.as_ref() == Some(id))
                    .map_or("unknown to the frameworks".to_string(), |f| {
                        format!("{:?}", f.conn)
                    });
                v.push(format!("the master still has framework {id} ({why})"));
            }
        }
        for (id, f) in &live {
            let Some(s) = listed.get(*id) else {
                v.push(format!("{}: the master lost it ({:?})", f.who(), f.conn));
                continue;
            };
            if s["connected"].as_bool() != Some(f.connected()) {
                v.push(format!(
                    "{}: the master has it connected: {}, the framework: {:?}",
                    f.who(),
                    s["connected"],
                    f.conn
                ));
            }
            // Offers.
            let offers = ids(s.get("offers"), "id");
            let held: BTreeSet<String> = f.offers.keys().cloned().collect();
            if offers != held {
                v.push(format!(
                    "{}: the master has offers {offers:?} outstanding, the framework holds {held:?}",
                    f.who()
                ));
            }
            for o in s["offers"].as_array().into_iter().flatten() {
                let Some(h) = o["id"].as_str().and_then(|id| f.offers.get(id)) else {
                    continue;
                };
                if !same(&state_scalars(&o["resources"]), &core_scalars(&h.resources)) {
                    v.push(format!(
                        "{}: offer {} holds {} in the master, {} as sent",
                        f.who(),
                        o["id"],
                        o["resources"],
                        h.resources
                    ));
                }
            }
            // Tasks.
            let tasks: BTreeMap<String, &Value> = s["tasks"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| Some((t["id"].as_str()?.to_string(), t)))
                        .collect()
                })
                .unwrap_or_default();
            let mine: BTreeSet<String> = f.live_tasks().map(|(id, _)| id.clone()).collect();
            let theirs: BTreeSet<String> = tasks.keys().cloned().collect();
            if mine != theirs {
                v.push(format!(
                    "{}: the master has tasks {:?} the framework does not, and not {:?}",
                    f.who(),
                    theirs.difference(&mine).collect::<Vec<_>>(),
                    mine.difference(&theirs).collect::<Vec<_>>()
                ));
            }
            for (id, t) in f.live_tasks() {
                let Some(st) = tasks.get(id) else { continue };
                let statuses: Vec<&str> = st["statuses"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|x| x["state"].as_str()).collect())
                    .unwrap_or_default();
                let got: Vec<&str> = t.received.iter().map(|(s, _)| s.as_str_name()).collect();
                if statuses.len() < got.len() || statuses[..got.len()] != got[..] {
                    v.push(format!(
                        "{}: task {id}: the master recorded {statuses:?}, the framework got {got:?}",
                        f.who()
                    ));
                    continue;
                }
                if !f.connected() {
                    continue;
                }
                if t.acked < t.received.len() {
                    let waited = now.saturating_sub(t.last_sent) / 1_000_000_000;
                    if waited > RETRY_CAP_SECS {
                        v.push(format!(
                            "{}: task {id}: update {} unacknowledged and not sent again for {waited} s",
                            f.who(),
                            t.received[t.acked].0.as_str_name()
                        ));
                    }
                } else if statuses.len() > got.len() {
                    v.push(format!(
                        "{}: task {id}: updates {:?} recorded by the master never sent though nothing is in flight",
                        f.who(),
                        &statuses[got.len()..]
                    ));
                }
            }
            if f.connected() {
                for (id, o) in &f.operations {
                    if o.acked < o.received.len() {
                        let waited = now.saturating_sub(o.last_sent) / 1_000_000_000;
                        if waited > RETRY_CAP_SECS {
                            v.push(format!(
                                "{}: operation {id}: status {} unacknowledged and not sent again for {waited} s",
                                f.who(),
                                o.received[o.acked].0.as_str_name()
                            ));
                        }
                    }
                }
            }
        }
    }

    fn check_agents(&self, state: &Value, snap: &PartitionSnapshot, v: &mut Vec<String>) {
        let slaves: BTreeMap<String, &Value> = state["slaves"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| Some((s["id"].as_str()?.to_string(), s)))
                    .collect()
            })
            .unwrap_or_default();
        let expected: BTreeSet<String> = self.agents.live.keys().cloned().collect();
        let listed: BTreeSet<String> = slaves.keys().cloned().collect();
        if listed != expected {
            v.push(format!(
                "the master has agents {listed:?}, the simulation {expected:?}"
            ));
        }
        // What the model says each agent holds: offers and tasks.
        let mut model: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
        let mut ports: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
        for f in &self.fws {
            for (id, o) in &f.offers {
                add(
                    model.entry(o.agent.as_str()).or_default(),
                    &core_scalars(&o.resources),
                );
                for r in o.resources.ranges("ports") {
                    ports.entry(o.agent.clone()).or_default().push((
                        r.begin,
                        r.end,
                        format!("offer {id}"),
                    ));
                }
            }
            if !matches!(f.conn, Conn::Connected { .. } | Conn::Disconnected { .. }) {
                continue;
            }
            // Its executors hold their own, from their first task on.
            let executor = Resources::parse(super::fw_ops::EXECUTOR_RESOURCES).unwrap_or_default();
            for (agent, _) in &f.executors {
                add(
                    model.entry(agent.as_str()).or_default(),
                    &core_scalars(&executor),
                );
            }
            for (id, t) in f.tasks.iter().filter(|(_, t)| holds(t)) {
                add(
                    model.entry(t.agent.as_str()).or_default(),
                    &core_scalars(&t.resources),
                );
                for r in t.resources.ranges("ports") {
                    ports.entry(t.agent.clone()).or_default().push((
                        r.begin,
                        r.end,
                        format!("task {id}"),
                    ));
                }
            }
        }
        let mut core_alloc: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut core_cap: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for n in &snap.nodes {
            let agent = n
                .attributes
                .get(AGENT_ATTRIBUTE)
                .cloned()
                .unwrap_or_default();
            add(core_alloc.entry(agent.clone()).or_default(), &n.allocated);
            add(core_cap.entry(agent).or_default(), &n.capacity);
        }
        // Each agent's total: its own resources and its subscribed
        // providers' as they last reported them.
        let mut expected_total: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
        for (id, a) in &self.agents.live {
            let (own, _) = super::agents::resources_of(self.agents.hosts[a.host].size);
            let mut r = Resources::parse(own).unwrap_or_default();
            for p in &self.providers.slots {
                if p.agent.as_deref() == Some(id.as_str()) && p.reported > 0.0 {
                    r.add(&Resources::parse(&format!("disk:{}", p.reported)).unwrap_or_default());
                }
            }
            expected_total.insert(id.as_str(), core_scalars(&r));
        }
        let none = BTreeMap::new();
        for (id, s) in &slaves {
            let total = state_scalars(&s["resources"]);
            let want = expected_total.get(id.as_str()).unwrap_or(&none);
            if !same(want, &total) {
                v.push(format!(
                    "agent {id}: its total is {total:?}, its own resources and its providers' {want:?}"
                ));
            }
            let used = state_scalars(&s["used_resources"]);
            let offered = state_scalars(&s["offered_resources"]);
            let mut both = used.clone();
            add(&mut both, &offered);
            for (k, x) in &both {
                if *x > total.get(k).copied().unwrap_or(0) {
                    v.push(format!(
                        "agent {id}: {k} used {} + offered {} above its total {}",
                        used.get(k).copied().unwrap_or(0),
                        offered.get(k).copied().unwrap_or(0),
                        total.get(k).copied().unwrap_or(0)
                    ));
                }
            }
            let m = model.get(id.as_str()).unwrap_or(&none);
            if !same(m, &both) {
                v.push(format!(
                    "agent {id}: frameworks hold {m:?} in offers and tasks, the master has {both:?} used and offered"
                ));
            }
            let c = core_alloc.get(id).unwrap_or(&none);
            if !same(c, &both) {
                v.push(format!(
                    "agent {id}: the core has {c:?} allocated, the master {both:?} used and offered"
                ));
            }
            let cap = core_cap.get(id).unwrap_or(&none);
            if !same(cap, &total) {
                v.push(format!(
                    "agent {id}: the core's nodes hold {cap:?}, the agent {total:?}"
                ));
            }
            let mut held = ports.remove(id).unwrap_or_default();
            held.sort();
            for w in held.windows(2) {
                if w[1].0 <= w[0].1 {
                    v.push(format!(
                        "agent {id}: ports {}-{} of {} and {}-{} of {} overlap",
                        w[0].0, w[0].1, w[0].2, w[1].0, w[1].1, w[1].2
                    ));
                }
            }
        }
        for (agent, _) in ports {
            v.push(format!(
                "frameworks hold ports on agent {agent} the master does not have"
            ));
        }
        for a in core_alloc.keys() {
            if !slaves.contains_key(a) {
                v.push(format!(
                    "the core has nodes of agent {a:?} the master does not"
                ));
            }
        }
    }

    fn check_core(&self, state: &Value, snap: &PartitionSnapshot, v: &mut Vec<String>) {
        let live: BTreeSet<String> = ids(state.get("frameworks"), "id");
        for a in &snap.applications {
            let framework = a.id.split('|').next().unwrap_or_default();
            if !live.contains(framework) {
                v.push(format!(
                    "the core still has application {} ({}) of a framework the master removed",
                    a.id, a.state
                ));
            }
        }
        for a in &snap.allocations {
            let framework = a.application_id.split('|').next().unwrap_or_default();
            if !live.contains(framework) {
                v.push(format!(
                    "the core still has allocation {} of a removed framework",
                    a.allocation_id
                ));
            }
        }
        v.extend(crate::soak::check::invariants(snap, self.step));
    }
}
