//! The simulation's resource providers: local storage providers on the
//! simulated agents, speaking Mesos' v1 resource provider API to the master
//! in process (`MasterHandle::provider_subscribe` and `provider_call`, the
//! calls and events of `POST /slave(N)/api/v1/resource_provider`), and the
//! framework side of their operations (CREATE_DISK and DESTROY_DISK with
//! operation feedback).
//!
//! A provider holds a RAW disk and the MOUNT disks made of it. It follows
//! the protocol as `unisched_mesos::provider` documents it: SUBSCRIBE (with
//! its id once it has one), then UPDATE_STATE with its resources, its
//! unfinished and unacknowledged operations and a new resource version, then
//! every unacknowledged status again; APPLY_OPERATION is applied only at the
//! current resource version (else OPERATION_DROPPED); each status is sent
//! until ACKNOWLEDGE_OPERATION_STATUS names it; RECONCILE_OPERATIONS gets
//! the latest status of an operation it knows and OPERATION_DROPPED without
//! a uuid for one it does not; PUBLISH_RESOURCES is answered OK.
//!
//! Faults: a provider's stream drops (and it resubscribes with its id, or
//! the agent it stood on goes and it is gone too), its RAW disk grows or
//! shrinks (a new resource version: offers holding it are rescinded, and
//! operations the master stamped with the old one are dropped), it stops
//! reading its events for a while (the master may close its stream), its
//! disk changes while an APPLY_OPERATION is on its way (the operation then
//! arrives stamped with the old resource version), it
//! answers its operations late, fails some, and loses some status updates
//! on the way (sent again later). Frameworks acknowledge operation statuses
//! with their acknowledgement policy, so some of those are late or lost too.
//!
//! Checks (besides the framework's on every status, `frameworks.rs`): an
//! APPLY_OPERATION at the current resource version names resources the
//! provider has and no other operation holds; every call is accepted; and,
//! in `checks.rs`, each agent's total is its own resources plus those of its
//! subscribed providers as they last reported them.

use std::collections::BTreeMap;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use unisched_mesos::master::{CallError, CallOutcome, Input};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::OperationState;
use unisched_mesos::v1::offer::operation::Type as Op;
use unisched_mesos::v1::resource::disk_info::source::Type as Kind;
use unisched_mesos::v1::resource_provider::{Call, Event, call, event};

use super::frameworks::{FwOperation, mix};
use super::sim::MesosSim;

/// Provider slots.
pub const PROVIDERS: u8 = 2;
/// The RAW disk a new provider starts with.
pub const RAW_START: f64 = 1024.0;
/// Events a provider's stream holds before the master closes it.
const STREAM_CAPACITY: usize = 64;
/// The provider type every simulated provider has.
const PROVIDER_TYPE: &str = "org.apache.mesos.rp.local.storage";

/// An operation the provider is applying.
#[derive(Debug, Clone)]
pub struct Applying {
    /// The framework that asked.
    pub framework: Option<String>,
    /// The operation.
    pub info: v1::offer::Operation,
}

/// The latest status of an operation, not yet acknowledged.
#[derive(Debug, Clone)]
pub struct Unacked {
    /// The framework that asked.
    pub framework: Option<String>,
    /// The operation.
    pub info: v1::offer::Operation,
    /// The status (with its uuid).
    pub status: v1::OperationStatus,
    /// Whether the master has it (a lost one is sent again later).
    pub delivered: bool,
}

/// One provider slot.
#[derive(Debug, Default)]
pub struct SimProvider {
    /// Slot number.
    pub slot: u8,
    /// The agent it stands on.
    pub agent: Option<String>,
    /// That agent's endpoint number (`/slave(N)`).
    pub pid: u32,
    /// Its id, once the master gave one.
    pub id: Option<String>,
    /// The stream id of its current (or last) subscription.
    pub stream: Option<String>,
    /// Its events while subscribed.
    pub rx: Option<mpsc::Receiver<Event>>,
    /// SUBSCRIBED arrived on the current stream.
    pub subscribed: bool,
    /// Its resource version.
    pub version: Vec<u8>,
    /// Versions it made so far.
    pub versions: u64,
    /// Its RAW disk (what operations it applies take included).
    pub raw: f64,
    /// Its MOUNT disks by id.
    pub volumes: BTreeMap<String, f64>,
    /// Volumes made so far.
    pub next_volume: u64,
    /// Operations it is applying, by operation uuid.
    pub pending: BTreeMap<Vec<u8>, Applying>,
    /// Latest statuses not acknowledged, by operation uuid.
    pub unacked: BTreeMap<Vec<u8>, Unacked>,
    /// The disk the master has of it (its last UPDATE_STATE; 0 while not subscribed).
    pub reported: f64,
    /// Reads no events before this step.
    pub paused_until: usize,
}

/// A disk resource of provider `id`: RAW without an id, or a MOUNT volume.
pub fn disk(id: &str, amount: f64, volume: Option<&str>) -> v1::Resource {
    let mut r = Resources::parse(&format!("disk:{amount}"))
        .unwrap_or_default()
        .into_vec()
        .remove(0);
    r.provider_id = Some(Box::new(v1::ResourceProviderId {
        value: id.to_string(),
    }));
    r.disk = Some(Box::new(v1::resource::DiskInfo {
        source: Some(v1::resource::disk_info::Source {
            r#type: match volume {
                Some(_) => Kind::Mount as i32,
                None => Kind::Raw as i32,
            },
            mount: volume.map(|v| v1::resource::disk_info::source::Mount {
                root: Some(format!("/soak/volumes/{v}")),
            }),
            id: volume.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }));
    r
}

/// The kind of a disk resource's source, if any.
pub fn kind_of(r: &v1::Resource) -> Option<Kind> {
    r.disk
        .as_ref()
        .and_then(|d| d.source.as_ref())
        .map(|s| s.r#type())
}

fn scalar(r: &v1::Resource) -> f64 {
    r.scalar.as_ref().map_or(0.0, |s| s.value)
}

fn uuid(value: Vec<u8>) -> v1::Uuid {
    v1::Uuid { value }
}

impl SimProvider {
    fn new(slot: u8) -> SimProvider {
        SimProvider {
            slot,
            ..Default::default()
        }
    }

    /// A label for messages.
    pub fn who(&self) -> String {
        format!(
            "provider {} ({})",
            self.slot,
            self.id.as_deref().unwrap_or("no id")
        )
    }

    /// Its resources as it reports them.
    pub fn resources(&self) -> Vec<v1::Resource> {
        let id = self.id.clone().unwrap_or_default();
        let mut out = Vec::new();
        if self.raw > 0.0 {
            out.push(disk(&id, self.raw, None));
        }
        for (v, size) in &self.volumes {
            out.push(disk(&id, *size, Some(v)));
        }
        out
    }

    /// Its disk in all.
    pub fn total(&self) -> f64 {
        self.raw + self.volumes.values().sum::<f64>()
    }

    /// RAW disk the operations it applies hold.
    fn raw_held(&self) -> f64 {
        self.pending
            .values()
            .filter(|a| a.info.r#type() == Op::CreateDisk)
            .filter_map(|a| a.info.create_disk.as_ref())
            .map(|c| scalar(&c.source))
            .sum()
    }

    /// Whether an operation it applies destroys volume `v`.
    fn destroying(&self, v: &str) -> bool {
        self.pending.values().any(|a| {
            a.info
                .destroy_disk
                .as_ref()
                .is_some_and(|d| volume_id(&d.source) == Some(v))
        })
    }

    fn call(&self, kind: call::Type) -> Call {
        Call {
            r#type: Some(kind as i32),
            resource_provider_id: self
                .id
                .clone()
                .map(|value| v1::ResourceProviderId { value }),
            ..Default::default()
        }
    }

    /// Its operations as UPDATE_STATE lists them.
    fn operations(&self) -> Vec<v1::Operation> {
        let mut out = Vec::new();
        let pending_status = |info: &v1::offer::Operation| v1::OperationStatus {
            operation_id: info.id.clone(),
            state: OperationState::OperationPending as i32,
            ..Default::default()
        };
        for (u, a) in &self.pending {
            out.push(v1::Operation {
                framework_id: a.framework.clone().map(|value| v1::FrameworkId { value }),
                info: Box::new(a.info.clone()),
                latest_status: pending_status(&a.info),
                uuid: uuid(u.clone()),
                ..Default::default()
            });
        }
        for (u, s) in &self.unacked {
            out.push(v1::Operation {
                framework_id: s.framework.clone().map(|value| v1::FrameworkId { value }),
                info: Box::new(s.info.clone()),
                latest_status: s.status.clone(),
                statuses: vec![s.status.clone()],
                uuid: uuid(u.clone()),
                ..Default::default()
            });
        }
        out
    }
}

/// The volume id a MOUNT disk resource names.
fn volume_id(r: &v1::Resource) -> Option<&str> {
    r.disk
        .as_ref()
        .and_then(|d| d.source.as_ref())
        .and_then(|s| s.id.as_deref())
}

/// Every provider slot.
#[derive(Debug)]
pub struct Providers {
    /// The slots.
    pub slots: Vec<SimProvider>,
}

impl Default for Providers {
    fn default() -> Self {
        Providers {
            slots: (0..PROVIDERS).map(SimProvider::new).collect(),
        }
    }
}

impl MesosSim {
    /// The endpoint number of a live agent, from the master's `/state`.
    fn agent_pid(&self, agent: &str) -> Option<u32> {
        let state = self.world.live_state()?;
        let pid = state["slaves"]
            .as_array()?
            .iter()
            .find(|s| s["id"] == agent)?["pid"]
            .as_str()?
            .to_string();
        pid.strip_prefix("slave(")?.split(')').next()?.parse().ok()
    }

    /// A call of provider `i` on its agent's endpoint; `None` when that agent
    /// is gone (a provider that has not read its closed stream yet, being
    /// paused, has nowhere to call: it learns when it reads).
    fn call_provider(&self, i: usize, c: Call) -> Option<Result<CallOutcome, CallError>> {
        let sp = &self.providers.slots[i];
        let live = sp
            .agent
            .as_ref()
            .is_some_and(|a| self.agents.live.contains_key(a));
        live.then(|| self.world.provider_call(sp.pid, c, sp.stream.clone()))
    }

    /// SUBSCRIBE of provider slot `p` (see `MesosOp::ProviderSubscribe`).
    pub fn provider_subscribe(&mut self, p: u8, pick: u32) -> Vec<String> {
        let i = p as usize;
        if self.providers.slots[i].rx.is_some() {
            return Vec::new();
        }
        let live_agent = self.providers.slots[i]
            .agent
            .as_ref()
            .is_some_and(|a| self.agents.live.contains_key(a));
        if !live_agent {
            // Gone with its agent (or never there): a new provider.
            if self.agents.live.is_empty() {
                return Vec::new();
            }
            let agent = self
                .agents
                .live
                .keys()
                .nth(pick as usize % self.agents.live.len())
                .cloned();
            let Some(pid) = agent.as_deref().and_then(|a| self.agent_pid(a)) else {
                return vec![format!("agent {agent:?} has no endpoint in /state")];
            };
            let mut fresh = SimProvider::new(p);
            fresh.agent = agent;
            fresh.pid = pid;
            fresh.raw = RAW_START;
            self.providers.slots[i] = fresh;
        }
        let sp = &mut self.providers.slots[i];
        let info = v1::ResourceProviderInfo {
            id: sp.id.clone().map(|value| v1::ResourceProviderId { value }),
            r#type: PROVIDER_TYPE.to_string(),
            name: format!("soak{p}"),
            ..Default::default()
        };
        let (stream, rx) = self.world.master.provider_subscribe(
            Some(sp.pid),
            call::Subscribe {
                resource_provider_info: info,
            },
            STREAM_CAPACITY,
        );
        sp.stream = Some(stream);
        sp.rx = Some(rx);
        sp.subscribed = false;
        self.counts.provider_subscriptions += 1;
        Vec::new()
    }

    /// The provider's stream closes (its connection drops).
    pub fn provider_drop(&mut self, p: u8) -> Vec<String> {
        let sp = &mut self.providers.slots[p as usize];
        let (Some(id), Some(stream_id)) = (sp.id.clone(), sp.stream.clone()) else {
            return Vec::new();
        };
        if sp.rx.take().is_none() {
            return Vec::new();
        }
        sp.subscribed = false;
        sp.reported = 0.0;
        for s in sp.unacked.values_mut() {
            s.delivered = false;
        }
        self.world.master.send(Input::ProviderClosed {
            provider: id,
            stream_id,
        });
        self.counts.provider_drops += 1;
        Vec::new()
    }

    /// The RAW disk changes: UPDATE_STATE with a new resource version.
    pub fn provider_change(&mut self, p: u8, grow: bool, amount: u8) -> Vec<String> {
        let sp = &mut self.providers.slots[p as usize];
        if !sp.subscribed {
            return Vec::new();
        }
        let by = 32.0 * f64::from(amount);
        if grow {
            sp.raw += by;
        } else {
            // What operations hold stays.
            sp.raw = (sp.raw - by).max(sp.raw_held());
        }
        let mut v = Vec::new();
        self.update_state(p as usize, &mut v);
        v
    }

    /// Answers one pending operation and sends again every status not
    /// delivered (see `MesosOp::ProviderAnswer`).
    pub fn provider_answer(&mut self, p: u8, pick: u32, outcome: u8) -> Vec<String> {
        let i = p as usize;
        let mut v = Vec::new();
        let sp = &self.providers.slots[i];
        if !sp.pending.is_empty() {
            let u = sp
                .pending
                .keys()
                .nth(pick as usize % sp.pending.len())
                .cloned()
                .unwrap_or_default();
            let (state, lost) = match outcome {
                0..=5 => (OperationState::OperationFinished, false),
                6 | 7 => (OperationState::OperationFailed, false),
                _ => (OperationState::OperationFinished, true),
            };
            self.finish_operation(i, &u, state, lost, &mut v);
        }
        self.resend_statuses(i, &mut v);
        v
    }

    /// The provider stops reading its events for `steps` steps.
    pub fn provider_pause(&mut self, p: u8, steps: u8) -> Vec<String> {
        let sp = &mut self.providers.slots[p as usize];
        if sp.rx.is_some() {
            sp.paused_until = self.step + usize::from(steps);
        }
        Vec::new()
    }

    /// Applies (or fails) pending operation `u`; its status goes to the
    /// master unless `lost`.
    fn finish_operation(
        &mut self,
        i: usize,
        u: &[u8],
        state: OperationState,
        lost: bool,
        v: &mut Vec<String>,
    ) {
        let sp = &mut self.providers.slots[i];
        let Some(a) = sp.pending.remove(u) else {
            return;
        };
        let mut converted = Vec::new();
        let mut message = None;
        let id = sp.id.clone().unwrap_or_default();
        if state == OperationState::OperationFinished {
            match a.info.r#type() {
                Op::CreateDisk => {
                    let source = a.info.create_disk.as_ref().map(|c| (*c.source).clone());
                    let size = source.as_ref().map_or(0.0, scalar);
                    sp.next_volume += 1;
                    let name = format!("v{}-{}", sp.slot, sp.next_volume);
                    sp.raw -= size;
                    sp.volumes.insert(name.clone(), size);
                    let mut r = disk(&id, size, Some(&name));
                    r.allocation_info = source.and_then(|s| s.allocation_info);
                    converted.push(r);
                }
                Op::DestroyDisk => {
                    let source = a.info.destroy_disk.as_ref().map(|d| (*d.source).clone());
                    let name = source
                        .as_ref()
                        .and_then(volume_id)
                        .unwrap_or_default()
                        .to_string();
                    let size = sp.volumes.remove(&name).unwrap_or(0.0);
                    sp.raw += size;
                    let mut r = disk(&id, size, None);
                    r.allocation_info = source.and_then(|s| s.allocation_info);
                    converted.push(r);
                }
                _ => {}
            }
        } else {
            message = Some("the simulated provider failed it".to_string());
        }
        let status = (state, message, converted);
        self.emit_status(i, u.to_vec(), (a.framework, a.info), status, lost, v);
    }

    /// A new status of operation `u`: kept until acknowledged, sent now
    /// unless `lost` (or the provider is not subscribed).
    fn emit_status(
        &mut self,
        i: usize,
        u: Vec<u8>,
        (framework, info): (Option<String>, v1::offer::Operation),
        (state, message, converted): (OperationState, Option<String>, Vec<v1::Resource>),
        lost: bool,
        v: &mut Vec<String>,
    ) {
        self.uuids += 1;
        let mut status_uuid = mix(self.seed, &[self.uuids, 3]).to_le_bytes().to_vec();
        status_uuid.extend(mix(self.seed, &[self.uuids, 4]).to_le_bytes());
        let sp = &self.providers.slots[i];
        let status = v1::OperationStatus {
            operation_id: info.id.clone(),
            state: state as i32,
            message,
            converted_resources: converted,
            uuid: Some(uuid(status_uuid.clone())),
            agent_id: sp.agent.clone().map(|value| v1::AgentId { value }),
            resource_provider_id: sp.id.clone().map(|value| v1::ResourceProviderId { value }),
        };
        // The framework's model learns what its provider sent.
        if let (Some(fw), Some(op)) = (framework.as_deref(), info.id.as_ref())
            && let Some(o) = self
                .fws
                .iter_mut()
                .find(|f| f.id.as_deref() == Some(fw))
                .and_then(|f| f.operations.get_mut(&op.value))
        {
            o.emitted.push((state, status_uuid));
        }
        self.counts.operation_statuses += 1;
        self.providers.slots[i].unacked.insert(
            u.clone(),
            Unacked {
                framework,
                info,
                status,
                delivered: false,
            },
        );
        if !lost {
            self.deliver_status(i, &u, v);
        } else {
            self.counts.operation_statuses_lost += 1;
        }
    }

    /// Sends the kept status of operation `u` to the master.
    fn deliver_status(&mut self, i: usize, u: &[u8], v: &mut Vec<String>) -> bool {
        let sp = &self.providers.slots[i];
        if !sp.subscribed {
            return false;
        }
        let Some(s) = sp.unacked.get(u) else {
            return false;
        };
        let mut c = sp.call(call::Type::UpdateOperationStatus);
        c.update_operation_status = Some(call::UpdateOperationStatus {
            framework_id: s.framework.clone().map(|value| v1::FrameworkId { value }),
            status: s.status.clone(),
            latest_status: Some(s.status.clone()),
            operation_uuid: uuid(u.to_vec()),
        });
        match self.call_provider(i, c) {
            None => false,
            Some(Ok(_)) => {
                if let Some(s) = self.providers.slots[i].unacked.get_mut(u) {
                    s.delivered = true;
                }
                true
            }
            Some(Err(e)) => {
                v.push(format!(
                    "{}: UPDATE_OPERATION_STATUS refused: {e}",
                    self.providers.slots[i].who()
                ));
                false
            }
        }
    }

    /// Every status the master does not have yet goes out again.
    fn resend_statuses(&mut self, i: usize, v: &mut Vec<String>) -> bool {
        let due: Vec<Vec<u8>> = self.providers.slots[i]
            .unacked
            .iter()
            .filter(|(_, s)| !s.delivered)
            .map(|(u, _)| u.clone())
            .collect();
        let mut sent = false;
        for u in due {
            sent |= self.deliver_status(i, &u, v);
        }
        sent
    }

    /// UPDATE_STATE with its resources, operations and a new version.
    fn update_state(&mut self, i: usize, v: &mut Vec<String>) {
        let seed = self.seed;
        let sp = &mut self.providers.slots[i];
        sp.versions += 1;
        let mut version = mix(seed, &[u64::from(sp.slot), sp.versions, 5])
            .to_le_bytes()
            .to_vec();
        version.extend(mix(seed, &[u64::from(sp.slot), sp.versions, 6]).to_le_bytes());
        sp.version = version.clone();
        let mut c = sp.call(call::Type::UpdateState);
        c.update_state = Some(call::UpdateState {
            operations: sp.operations(),
            resources: sp.resources(),
            resource_version_uuid: uuid(version),
        });
        let total = sp.total();
        match self.call_provider(i, c) {
            None => {}
            Some(Ok(_)) => {
                self.providers.slots[i].reported = total;
                self.counts.provider_updates += 1;
            }
            Some(Err(e)) => v.push(format!(
                "{}: UPDATE_STATE refused: {e}",
                self.providers.slots[i].who()
            )),
        }
    }

    /// Every provider reads what its stream holds and answers; true when
    /// one of them called the master.
    pub fn read_provider_events(&mut self, v: &mut Vec<String>) -> bool {
        let mut acted = false;
        for i in 0..self.providers.slots.len() {
            if self.providers.slots[i].paused_until > self.step {
                continue;
            }
            let Some(mut rx) = self.providers.slots[i].rx.take() else {
                continue;
            };
            let mut closed = false;
            let mut events = Vec::new();
            loop {
                match rx.try_recv() {
                    Ok(e) => events.push(e),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            if !closed {
                self.providers.slots[i].rx = Some(rx);
            }
            // Now and then the disk changed while an APPLY_OPERATION was on
            // its way: the new resource version goes out first, and the
            // operation arrives stamped with the old one.
            let applies = events
                .iter()
                .any(|e| e.r#type() == event::Type::ApplyOperation);
            if applies && mix(self.seed, &[self.step as u64, i as u64, 7]).is_multiple_of(4) {
                acted = true;
                v.extend(self.provider_change(i as u8, true, 1));
            }
            for e in events {
                acted |= self.provider_event(i, e, v);
            }
            if closed {
                let sp = &mut self.providers.slots[i];
                sp.rx = None;
                sp.subscribed = false;
                sp.reported = 0.0;
                for s in sp.unacked.values_mut() {
                    s.delivered = false;
                }
                let gone = sp
                    .agent
                    .as_ref()
                    .is_none_or(|a| !self.agents.live.contains_key(a));
                if gone {
                    // Its agent went and it with it: whatever it held is
                    // the master's business now (GONE_BY_OPERATOR).
                    self.providers.slots[i] = SimProvider::new(i as u8);
                }
            }
        }
        acted
    }

    /// One event of provider `i`; true when it called the master.
    fn provider_event(&mut self, i: usize, e: Event, v: &mut Vec<String>) -> bool {
        let who = self.providers.slots[i].who();
        if self.trace {
            eprintln!("    rp{i} <- {e:?}");
        }
        match e.r#type() {
            event::Type::Subscribed => {
                let id = e
                    .subscribed
                    .map(|s| s.provider_id.value)
                    .unwrap_or_default();
                let sp = &mut self.providers.slots[i];
                if sp.id.as_ref().is_some_and(|known| *known != id) {
                    v.push(format!("{who}: resubscribed as {id} instead of its id"));
                }
                sp.id = Some(id);
                sp.subscribed = true;
                self.update_state(i, v);
                self.resend_statuses(i, v);
                true
            }
            event::Type::ApplyOperation => {
                let Some(a) = e.apply_operation else {
                    return false;
                };
                self.provider_apply(i, a, v)
            }
            event::Type::AcknowledgeOperationStatus => {
                if let Some(ack) = e.acknowledge_operation_status {
                    let sp = &mut self.providers.slots[i];
                    let matches = sp.unacked.get(&ack.operation_uuid.value).is_some_and(|s| {
                        s.status.uuid.as_ref().map(|u| &u.value) == Some(&ack.status_uuid.value)
                    });
                    if matches {
                        sp.unacked.remove(&ack.operation_uuid.value);
                    }
                }
                false
            }
            event::Type::ReconcileOperations => {
                let wanted = e
                    .reconcile_operations
                    .map(|r| r.operation_uuids)
                    .unwrap_or_default();
                let mut sent = false;
                for u in wanted {
                    let sp = &self.providers.slots[i];
                    if sp.unacked.contains_key(&u.value) {
                        if let Some(s) = self.providers.slots[i].unacked.get_mut(&u.value) {
                            s.delivered = false;
                        }
                        sent |= self.deliver_status(i, &u.value, v);
                    } else if !sp.pending.contains_key(&u.value) {
                        sent |= self.drop_unknown(i, u.value, v);
                    }
                }
                sent
            }
            event::Type::PublishResources => {
                let Some(p) = e.publish_resources else {
                    return false;
                };
                let sp = &self.providers.slots[i];
                let mut c = sp.call(call::Type::UpdatePublishResourcesStatus);
                c.update_publish_resources_status = Some(call::UpdatePublishResourcesStatus {
                    uuid: p.uuid,
                    status: call::update_publish_resources_status::Status::Ok as i32,
                });
                if let Some(Err(e)) = self.call_provider(i, c) {
                    v.push(format!(
                        "{who}: UPDATE_PUBLISH_RESOURCES_STATUS refused: {e}"
                    ));
                }
                true
            }
            other => {
                v.push(format!("{who}: unexpected {} event", other.as_str_name()));
                false
            }
        }
    }

    /// APPLY_OPERATION: kept to be answered later at the current resource
    /// version, dropped at a stale one.
    fn provider_apply(&mut self, i: usize, a: event::ApplyOperation, v: &mut Vec<String>) -> bool {
        let sp = &self.providers.slots[i];
        let who = sp.who();
        let u = a.operation_uuid.value.clone();
        let framework = a.framework_id.map(|f| f.value);
        if sp.pending.contains_key(&u) || sp.unacked.contains_key(&u) {
            v.push(format!(
                "{who}: APPLY_OPERATION of an operation it has already"
            ));
            return false;
        }
        if a.resource_version_uuid.value != sp.version {
            self.counts.operations_dropped += 1;
            let status = (
                OperationState::OperationDropped,
                Some("stale resource version".to_string()),
                Vec::new(),
            );
            self.emit_status(i, u, (framework, a.info), status, false, v);
            return true;
        }
        // At the current version the master may only name what it has.
        let id = sp.id.clone().unwrap_or_default();
        let problem = match a.info.r#type() {
            Op::CreateDisk => a.info.create_disk.as_ref().and_then(|c| {
                let size = scalar(&c.source);
                let free = sp.raw - sp.raw_held();
                let ours = c.source.provider_id.as_ref().map(|p| p.value.as_str()) == Some(&id);
                (!ours || kind_of(&c.source) != Some(Kind::Raw) || size > free + 1e-9)
                    .then(|| format!("CREATE_DISK of {size} RAW with {free} free RAW"))
            }),
            Op::DestroyDisk => a.info.destroy_disk.as_ref().and_then(|d| {
                let name = volume_id(&d.source).unwrap_or_default();
                let known = sp.volumes.get(name).copied();
                let (asked, busy) = (scalar(&d.source), sp.destroying(name));
                (known != Some(asked) || busy).then(|| {
                    format!(
                        "DESTROY_DISK of {asked} of volume '{name}' (it has {known:?}; being destroyed: {busy})"
                    )
                })
            }),
            other => Some(format!(
                "an operation it does not apply: {}",
                other.as_str_name()
            )),
        };
        if let Some(p) = problem {
            v.push(format!(
                "{who}: APPLY_OPERATION at the current version: {p}"
            ));
        }
        self.providers.slots[i].pending.insert(
            u,
            Applying {
                framework,
                info: a.info,
            },
        );
        false
    }

    /// OPERATION_DROPPED (no uuid, not kept) for an operation it does not know.
    fn drop_unknown(&mut self, i: usize, u: Vec<u8>, v: &mut Vec<String>) -> bool {
        let sp = &self.providers.slots[i];
        let mut c = sp.call(call::Type::UpdateOperationStatus);
        let status = v1::OperationStatus {
            state: OperationState::OperationDropped as i32,
            message: Some("unknown operation".to_string()),
            agent_id: sp.agent.clone().map(|value| v1::AgentId { value }),
            resource_provider_id: sp.id.clone().map(|value| v1::ResourceProviderId { value }),
            ..Default::default()
        };
        c.update_operation_status = Some(call::UpdateOperationStatus {
            framework_id: None,
            status: status.clone(),
            latest_status: Some(status),
            operation_uuid: uuid(u),
        });
        // Whichever framework's operation it was may now hear it dropped.
        let provider = sp.id.clone().unwrap_or_default();
        for o in self.fws.iter_mut().flat_map(|f| f.operations.values_mut()) {
            if o.provider == provider {
                o.unstamped.push(OperationState::OperationDropped);
            }
        }
        if let Some(Err(e)) = self.call_provider(i, c) {
            v.push(format!(
                "{}: UPDATE_OPERATION_STATUS refused: {e}",
                self.providers.slots[i].who()
            ));
        }
        true
    }

    /// The end of a run: providers whose agent is live subscribe again,
    /// read their events, and finish every operation they apply.
    pub fn providers_finish(&mut self, v: &mut Vec<String>) {
        for i in 0..self.providers.slots.len() {
            self.providers.slots[i].paused_until = 0;
            let has_agent = self.providers.slots[i]
                .agent
                .as_ref()
                .is_some_and(|a| self.agents.live.contains_key(a));
            if has_agent && self.providers.slots[i].rx.is_none() {
                v.extend(self.provider_subscribe(i as u8, 0));
            }
        }
        if let Err(e) = self.react(v) {
            v.push(e);
            return;
        }
        for i in 0..self.providers.slots.len() {
            let pending: Vec<Vec<u8>> = self.providers.slots[i].pending.keys().cloned().collect();
            for u in pending {
                self.finish_operation(i, &u, OperationState::OperationFinished, false, v);
            }
            self.resend_statuses(i, v);
        }
    }

    /// The framework's model of a CREATE_DISK or DESTROY_DISK it asks for
    /// with `op_id` on provider resources of `agent`.
    pub fn note_operation(&mut self, i: usize, op_id: &str, agent: &str, provider: &str) {
        let now = self.now();
        self.fws[i].operations.insert(
            op_id.to_string(),
            FwOperation {
                agent: agent.to_string(),
                provider: provider.to_string(),
                emitted: Vec::new(),
                unstamped: Vec::new(),
                received: Vec::new(),
                acked: 0,
                last_sent: now,
            },
        );
    }

    /// Acknowledges `uuid` of operation `op` when it is the status in flight.
    pub fn acknowledge_operation(
        &mut self,
        i: usize,
        op: &str,
        status_uuid: Vec<u8>,
        v: &mut Vec<String>,
    ) -> bool {
        let f = &self.fws[i];
        let Some(o) = f.operations.get(op) else {
            return false;
        };
        if o.received.get(o.acked).map(|(_, u)| u) != Some(&status_uuid) {
            return false;
        }
        let call = v1::scheduler::Call {
            framework_id: f.id.clone().map(|value| v1::FrameworkId { value }),
            r#type: Some(v1::scheduler::call::Type::AcknowledgeOperationStatus as i32),
            acknowledge_operation_status: Some(v1::scheduler::call::AcknowledgeOperationStatus {
                agent_id: Some(v1::AgentId {
                    value: o.agent.clone(),
                }),
                resource_provider_id: Some(v1::ResourceProviderId {
                    value: o.provider.clone(),
                }),
                uuid: status_uuid,
                operation_id: v1::OperationId {
                    value: op.to_string(),
                },
            }),
            ..Default::default()
        };
        let stream = f.stream.clone();
        match self.world.call(call, stream) {
            Ok(_) => {
                if let Some(o) = self.fws[i].operations.get_mut(op) {
                    o.acked += 1;
                }
                self.counts.operation_acks += 1;
                true
            }
            Err(e) => {
                v.push(format!(
                    "{}: ACKNOWLEDGE_OPERATION_STATUS refused: {e}",
                    self.fws[i].who()
                ));
                false
            }
        }
    }
}
