//! Fuzz target: scheduler-interface requests fed to an in-process `Scheduler`.
//!
//! One scheduler per process (restarted every [`RESTART_EVERY`] inputs so the
//! interned resource names and the virtual clock stay bounded); each input first
//! re-registers the RM, which wipes its state, so an input replays on its own.
//!
//! Input layout: byte 0 picks the registration (bits 0-1 config, bit 2 predicates
//! on, bit 3 the mode). Mode raw: the rest is frames `[kind, len_lo, len_hi,
//! bytes...]`, each decoded with prost as an `AllocationRequest`, `NodeRequest`,
//! `ApplicationRequest` or `RegisterResourceManagerRequest` (kind % 4; bit 7 of
//! kind keeps the decoded rmID, else it is replaced by the registered one).
//! Mode structured: the rest drives `arbitrary` into operations over a small
//! vocabulary of ids, queues and quantities, so they hit live objects.
//!
//! Checked: no panic anywhere (libfuzzer-sys aborts on a panic in any thread,
//! including those the scheduling loop would catch); after `settle()` every
//! partition answers `snapshot()`, and the snapshot keeps RELIABILITY.md's
//! invariants 1-2 (nothing negative, no orphan allocation, node allocated =
//! sum of its allocations, app allocated and placeholder = sums of its real
//! allocations and of its placeholders).

#![no_main]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use unisched_core::{ConfigSource, ManualClock, PartitionSnapshot, Scheduler, SchedulerOptions};
use unisched_shim_api::{
    CallbackError, CallbackResult, PREDICATES_EXTRA_CONFIG, ResourceManagerCallback, SchedulerApi,
};
use unisched_si as si;

const RM: &str = "rm-fuzz";
const RESTART_EVERY: u64 = 5_000;
const MAX_OPS: usize = 48;
const MAX_ITEMS: usize = 12;

/// Valid configurations the RM registers with and reloads to.
const CONFIGS: [&str; 4] = [
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: a
            resources: {max: {memory: 100M, vcore: 10}, guaranteed: {vcore: 2}}
            maxapplications: 3
          - name: b
            properties: {application.sort.policy: fifo}
          - name: parent
            parent: true
            queues:
              - name: x
                resources: {max: {vcore: 4}}
",
    "partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
      - name: user
        create: true
        parent: {name: fixed, value: root.users}
      - name: tag
        value: namespace
        create: true
    nodesortpolicy: {type: binpacking}
    limits:
      - limit: alice cap
        users: [alice]
        maxresources: {vcore: 4}
        maxapplications: 2
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: a
          - name: users
            parent: true
            childtemplate:
              maxapplications: 2
              resources: {max: {memory: 50M}}
  - name: gpu
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: a
            resources: {max: {gpu: 2}}
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: parent
            resources: {max: {memory: 10M, vcore: 2}}
            queues:
              - name: x
                resources: {max: {memory: 10M, vcore: 1}, guaranteed: {vcore: 1}}
                limits:
                  - limit: everyone
                    users: [\"*\"]
                    maxapplications: 1
          - name: b
            maxapplications: 1
",
    "partitions:
  - name: default
    queues:
      - name: a
      - name: b
        queues:
          - name: c
            submitacl: \"*\"
",
];

/// Texts `update_configuration` may read besides [`CONFIGS`]: invalid ones.
const BAD_CONFIGS: [&str; 2] = [
    "partitions:\n  - name: default\n    queues:\n      - name: root\n        unknownkey: 1\n",
    "partitions: [",
];

const APPS: usize = 6;
const KEYS: usize = 10;
const NODES: usize = 5;
const QUEUES: [&str; 10] = [
    "root.a",
    "root.b",
    "root.parent.x",
    "root.parent",
    "root",
    "root.unknown",
    "",
    "a",
    "root.users.alice",
    "root.b.c",
];
const USERS: [&str; 4] = ["alice", "bob", "", "carol"];
const PARTITIONS: [&str; 5] = ["default", "", "gpu", "[rm-fuzz]default", "nowhere"];
const RESOURCE_NAMES: [&str; 6] = ["memory", "vcore", "gpu", "ephemeral-storage", "pods", ""];
const SPECIAL: [i64; 10] = [
    0,
    -1,
    1,
    i64::MAX,
    i64::MIN,
    1 << 53,
    (1 << 53) + 1,
    (1 << 53) - 1,
    i64::MAX / 2,
    1000,
];

/// A quantity: mostly small, sometimes on an edge.
#[derive(Arbitrary, Debug)]
enum Qty {
    Small(u8),
    Mega(u16),
    Special(u8),
    Any(i64),
}

impl Qty {
    fn value(&self) -> i64 {
        match *self {
            Qty::Small(v) => i64::from(v) * 100,
            Qty::Mega(v) => i64::from(v) * 1_000_000,
            Qty::Special(i) => SPECIAL[usize::from(i) % SPECIAL.len()],
            Qty::Any(v) => v,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Res {
    memory: Qty,
    vcore: Qty,
    extra: Option<(u8, Qty)>,
}

impl Res {
    fn wire(&self) -> Option<si::Resource> {
        let mut resources = HashMap::new();
        resources.insert(
            "memory".to_string(),
            si::Quantity {
                value: self.memory.value(),
            },
        );
        resources.insert(
            "vcore".to_string(),
            si::Quantity {
                value: self.vcore.value(),
            },
        );
        if let Some((name, q)) = &self.extra {
            let name = RESOURCE_NAMES[usize::from(*name) % RESOURCE_NAMES.len()];
            resources.insert(name.to_string(), si::Quantity { value: q.value() });
        }
        Some(si::Resource { resources })
    }
}

#[derive(Arbitrary, Debug)]
struct Ask {
    key: u8,
    app: u8,
    res: Res,
    max: i8,
    priority: i8,
    placeholder: bool,
    originator: bool,
    timeout_ms: i16,
    partition: u8,
}

#[derive(Arbitrary, Debug)]
struct Alloc {
    key: u8,
    app: u8,
    node: u8,
    id: u8,
    res: Res,
    partition: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    AddApp {
        app: u8,
        queue: u8,
        user: u8,
        partition: u8,
        tag: Option<u8>,
        timeout_ms: i16,
    },
    RemoveApp {
        app: u8,
        partition: u8,
    },
    Node {
        node: u8,
        action: u8,
        cap: Res,
        occupied: Option<Res>,
        partition: Option<u8>,
        existing: Vec<Alloc>,
    },
    Asks(Vec<Ask>),
    Recover(Vec<Alloc>),
    ReleaseAllocation {
        app: Option<u8>,
        key: Option<u8>,
        id: Option<u8>,
        partition: u8,
        termination: u8,
    },
    ReleaseAsk {
        app: u8,
        key: Option<u8>,
        partition: u8,
    },
    Advance(u16),
    Reload(u8),
    Reregister(u8),
    Settle,
    Raw {
        kind: u8,
        bytes: Vec<u8>,
    },
}

fn pick<'a>(list: &[&'a str], i: u8) -> &'a str {
    list[usize::from(i) % list.len()]
}

fn app_id(i: u8) -> String {
    format!("app-{}", usize::from(i) % APPS)
}

fn key(i: u8) -> String {
    format!("ask-{}", usize::from(i) % KEYS)
}

fn node_id(i: u8) -> String {
    format!("node-{}", usize::from(i) % NODES)
}

fn alloc_id(key_i: u8, n: u8) -> String {
    format!("{}-{}", key(key_i), n % 4)
}

fn allocation(a: &Alloc) -> si::Allocation {
    si::Allocation {
        allocation_key: key(a.key),
        resource_per_alloc: a.res.wire(),
        node_id: node_id(a.node),
        application_id: app_id(a.app),
        partition_name: pick(&PARTITIONS, a.partition).to_string(),
        allocation_id: alloc_id(a.key, a.id),
        ..Default::default()
    }
}

/// Which text `update_configuration` reads: an index into CONFIGS then BAD_CONFIGS,
/// anything past them is a source failure.
struct Source(AtomicUsize);

impl ConfigSource for Source {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        let i = self.0.load(Ordering::Relaxed);
        CONFIGS
            .iter()
            .chain(BAD_CONFIGS.iter())
            .nth(i)
            .map(|s| s.to_string())
            .ok_or_else(|| "source unavailable".to_string())
    }
}

/// An RM that keeps nothing; its predicates refuse a fixed share of placements.
struct Rm;

impl ResourceManagerCallback for Rm {
    fn update_allocation(&self, _: si::AllocationResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn update_application(&self, _: si::ApplicationResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn update_node(&self, _: si::NodeResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()> {
        if (args.allocation_key.len() + args.node_id.len() + usize::from(args.allocate)) % 3 == 0 {
            Err(CallbackError::new("refused by the fuzz RM"))
        } else {
            Ok(())
        }
    }
    fn resync_scheduler_cache(&self, _: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }
    fn send_event(&self, _: Vec<si::EventRecord>) -> CallbackResult<()> {
        Ok(())
    }
    fn update_container_scheduling_state(
        &self,
        _: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }
    fn update_configuration(
        &self,
        _: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse {
            success: true,
            ..Default::default()
        })
    }
}

struct Harness {
    sched: Scheduler,
    clock: Arc<ManualClock>,
    source: Arc<Source>,
    rm: Arc<Rm>,
    runs: u64,
}

impl Harness {
    fn new() -> Self {
        let clock = ManualClock::new(1_000_000_000);
        let source = Arc::new(Source(AtomicUsize::new(0)));
        let sched = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            config_source: Some(source.clone()),
            ..Default::default()
        });
        Self {
            sched,
            clock,
            source,
            rm: Arc::new(Rm),
            runs: 0,
        }
    }

    fn register(&self, config: usize, predicates: bool) {
        let config = CONFIGS[config % CONFIGS.len()];
        let mut extra_config = HashMap::new();
        if predicates {
            extra_config.insert(PREDICATES_EXTRA_CONFIG.to_string(), "true".to_string());
        }
        self.sched
            .register_resource_manager(
                si::RegisterResourceManagerRequest {
                    rm_id: RM.to_string(),
                    policy_group: "queues".to_string(),
                    config: config.to_string(),
                    extra_config,
                    ..Default::default()
                },
                self.rm.clone(),
            )
            .unwrap_or_else(|e| panic!("registering a valid config failed: {e}"));
    }

    fn raw(&self, kind: u8, bytes: &[u8]) {
        let keep_rm = kind & 0x80 != 0;
        let fix = |rm_id: &mut String| {
            if !keep_rm {
                *rm_id = RM.to_string();
            }
        };
        let s = &self.sched;
        match kind % 4 {
            0 => {
                if let Ok(mut r) = si::AllocationRequest::decode(bytes) {
                    fix(&mut r.rm_id);
                    let _ = s.update_allocation(r);
                }
            }
            1 => {
                if let Ok(mut r) = si::NodeRequest::decode(bytes) {
                    fix(&mut r.rm_id);
                    let _ = s.update_node(r);
                }
            }
            2 => {
                if let Ok(mut r) = si::ApplicationRequest::decode(bytes) {
                    fix(&mut r.rm_id);
                    let _ = s.update_application(r);
                }
            }
            _ => {
                if let Ok(mut r) = si::RegisterResourceManagerRequest::decode(bytes) {
                    fix(&mut r.rm_id);
                    let _ = s.register_resource_manager(r, self.rm.clone());
                }
            }
        }
    }

    fn apply(&self, op: Op) {
        let s = &self.sched;
        let rm_id = RM.to_string();
        match op {
            Op::AddApp {
                app,
                queue,
                user,
                partition,
                tag,
                timeout_ms,
            } => {
                let mut tags = HashMap::new();
                if let Some(t) = tag {
                    tags.insert("namespace".to_string(), format!("ns{}", t % 3));
                }
                let _ = s.update_application(si::ApplicationRequest {
                    new: vec![si::AddApplicationRequest {
                        application_id: app_id(app),
                        queue_name: pick(&QUEUES, queue).to_string(),
                        partition_name: pick(&PARTITIONS, partition).to_string(),
                        ugi: Some(si::UserGroupInformation {
                            user: pick(&USERS, user).to_string(),
                            groups: vec!["dev".to_string()],
                        }),
                        tags,
                        execution_timeout_milli_seconds: i64::from(timeout_ms),
                        ..Default::default()
                    }],
                    remove: vec![],
                    rm_id,
                });
            }
            Op::RemoveApp { app, partition } => {
                let _ = s.update_application(si::ApplicationRequest {
                    new: vec![],
                    remove: vec![si::RemoveApplicationRequest {
                        application_id: app_id(app),
                        partition_name: pick(&PARTITIONS, partition).to_string(),
                    }],
                    rm_id,
                });
            }
            Op::Node {
                node,
                action,
                cap,
                occupied,
                partition,
                existing,
            } => {
                let mut attributes = HashMap::new();
                if let Some(p) = partition {
                    attributes.insert(
                        si::NODE_PARTITION_ATTRIBUTE.to_string(),
                        pick(&PARTITIONS, p).to_string(),
                    );
                }
                let _ = s.update_node(si::NodeRequest {
                    nodes: vec![si::NodeInfo {
                        node_id: node_id(node),
                        // 0..=6 are the defined actions; 7 is an unknown value.
                        action: i32::from(action % 8),
                        attributes,
                        schedulable_resource: cap.wire(),
                        occupied_resource: occupied.and_then(|o| o.wire()),
                        existing_allocations: existing
                            .iter()
                            .take(MAX_ITEMS)
                            .map(allocation)
                            .collect(),
                    }],
                    rm_id,
                });
            }
            Op::Asks(asks) => {
                let asks = asks
                    .iter()
                    .take(MAX_ITEMS)
                    .map(|a| si::AllocationAsk {
                        allocation_key: key(a.key),
                        application_id: app_id(a.app),
                        partition_name: pick(&PARTITIONS, a.partition).to_string(),
                        resource_ask: a.res.wire(),
                        max_allocations: i32::from(a.max),
                        priority: i32::from(a.priority),
                        execution_timeout_milli_seconds: i64::from(a.timeout_ms),
                        placeholder: a.placeholder,
                        originator: a.originator,
                        ..Default::default()
                    })
                    .collect();
                let _ = s.update_allocation(si::AllocationRequest {
                    asks,
                    rm_id,
                    ..Default::default()
                });
            }
            Op::Recover(allocs) => {
                let _ = s.update_allocation(si::AllocationRequest {
                    allocations: allocs.iter().take(MAX_ITEMS).map(allocation).collect(),
                    rm_id,
                    ..Default::default()
                });
            }
            Op::ReleaseAllocation {
                app,
                key: k,
                id,
                partition,
                termination,
            } => {
                let release = si::AllocationRelease {
                    partition_name: pick(&PARTITIONS, partition).to_string(),
                    application_id: app.map(app_id).unwrap_or_default(),
                    termination_type: i32::from(termination % 6),
                    allocation_key: k.map(key).unwrap_or_default(),
                    allocation_id: match (k, id) {
                        (Some(k), Some(id)) => alloc_id(k, id),
                        (None, Some(id)) => alloc_id(id / 4, id),
                        _ => String::new(),
                    },
                    ..Default::default()
                };
                let _ = s.update_allocation(si::AllocationRequest {
                    releases: Some(si::AllocationReleasesRequest {
                        allocations_to_release: vec![release],
                        allocation_asks_to_release: vec![],
                    }),
                    rm_id,
                    ..Default::default()
                });
            }
            Op::ReleaseAsk {
                app,
                key: k,
                partition,
            } => {
                let release = si::AllocationAskRelease {
                    partition_name: pick(&PARTITIONS, partition).to_string(),
                    application_id: app_id(app),
                    allocation_key: k.map(key).unwrap_or_default(),
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                };
                let _ = s.update_allocation(si::AllocationRequest {
                    releases: Some(si::AllocationReleasesRequest {
                        allocations_to_release: vec![],
                        allocation_asks_to_release: vec![release],
                    }),
                    rm_id,
                    ..Default::default()
                });
            }
            Op::Advance(ms) => {
                // Up to about 18 minutes: past the reservation delay, the Completing
                // grace and the execution timeouts above.
                self.clock
                    .advance(Duration::from_millis(u64::from(ms) * 16));
                s.wake();
            }
            Op::Reload(i) => {
                self.source.0.store(
                    usize::from(i) % (CONFIGS.len() + BAD_CONFIGS.len() + 1),
                    Ordering::Relaxed,
                );
                let _ = s.update_configuration(RM);
            }
            Op::Reregister(i) => self.register(usize::from(i), i & 0x80 != 0),
            Op::Settle => s.settle(),
            Op::Raw { kind, bytes } => self.raw(kind, &bytes),
        }
    }

    /// After settling, every partition answers a snapshot that keeps invariants 1-2.
    fn check(&self) {
        self.sched.settle();
        let partitions = self.sched.partitions();
        for p in &partitions {
            let snap = self
                .sched
                .snapshot(p)
                .unwrap_or_else(|| panic!("partition {p} listed but no snapshot"));
            check_snapshot(&snap);
        }
        if partitions.is_empty() {
            // A raw registration may have failed and left the RM unregistered; a
            // valid one must still work.
            self.register(0, false);
            assert!(
                self.sched.snapshot("default").is_some(),
                "no snapshot after registering again"
            );
        }
    }
}

fn add_into(sum: &mut BTreeMap<String, i128>, r: &BTreeMap<String, i64>) {
    for (k, v) in r {
        *sum.entry(k.clone()).or_default() += i128::from(*v);
    }
}

fn same(sum: &BTreeMap<String, i128>, r: &BTreeMap<String, i64>) -> bool {
    let nonzero = |m: &BTreeMap<String, i128>| {
        m.iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect::<BTreeMap<_, _>>()
    };
    let r: BTreeMap<String, i128> = r.iter().map(|(k, v)| (k.clone(), i128::from(*v))).collect();
    nonzero(sum) == nonzero(&r)
}

fn check_snapshot(snap: &PartitionSnapshot) {
    let negative = |what: &str, r: &BTreeMap<String, i64>| {
        assert!(
            r.values().all(|v| *v >= 0),
            "partition {}: {what} negative: {r:?}",
            snap.name
        );
    };
    let mut per_node: HashMap<&str, BTreeMap<String, i128>> = HashMap::new();
    let mut per_app: HashMap<&str, BTreeMap<String, i128>> = HashMap::new();
    // An application's placeholders count in its `placeholder` total, not in
    // `allocated` (upstream's allocatedPlaceholder); its nodes count both.
    let mut per_app_placeholder: HashMap<&str, BTreeMap<String, i128>> = HashMap::new();
    for a in &snap.allocations {
        assert!(
            snap.node(&a.node_id).is_some(),
            "partition {}: allocation {} on unknown node {}",
            snap.name,
            a.allocation_id,
            a.node_id
        );
        assert!(
            snap.application(&a.application_id).is_some(),
            "partition {}: allocation {} of unknown app {}",
            snap.name,
            a.allocation_id,
            a.application_id
        );
        add_into(per_node.entry(&a.node_id).or_default(), &a.resource);
        let app_sums = if a.placeholder {
            &mut per_app_placeholder
        } else {
            &mut per_app
        };
        add_into(app_sums.entry(&a.application_id).or_default(), &a.resource);
    }
    // A total the snapshot reports agrees with the sum of its parts.
    let agrees =
        |owner: String, total: &BTreeMap<String, i64>, parts: &str, sum: BTreeMap<String, i128>| {
            assert!(
                same(&sum, total),
                "partition {}: {owner} {total:?} but its {parts} sum to {sum:?}",
                snap.name
            );
        };
    for n in &snap.nodes {
        negative(&format!("node {} allocated", n.id), &n.allocated);
        let sum = per_node.remove(n.id.as_str()).unwrap_or_default();
        agrees(
            format!("node {} allocated", n.id),
            &n.allocated,
            "allocations",
            sum,
        );
    }
    for a in &snap.applications {
        negative(&format!("app {} allocated", a.id), &a.allocated);
        negative(&format!("app {} pending", a.id), &a.pending);
        negative(&format!("app {} placeholder", a.id), &a.placeholder);
        let sum = per_app.remove(a.id.as_str()).unwrap_or_default();
        agrees(
            format!("app {} allocated", a.id),
            &a.allocated,
            "allocations",
            sum,
        );
        let sum = per_app_placeholder
            .remove(a.id.as_str())
            .unwrap_or_default();
        agrees(
            format!("app {} placeholder", a.id),
            &a.placeholder,
            "placeholders",
            sum,
        );
    }
    for q in &snap.queues {
        negative(&format!("queue {} allocated", q.path), &q.allocated);
        negative(&format!("queue {} pending", q.path), &q.pending);
    }
}

static HARNESS: Mutex<Option<Harness>> = Mutex::new(None);

/// `UNISCHED_FUZZ_TRACE=1` prints each structured operation as it is applied,
/// to read what a crash input does.
fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("UNISCHED_FUZZ_TRACE").is_some())
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_none_or(|h| h.runs >= RESTART_EVERY) {
        *guard = None; // shut the old scheduler down before starting the next
        *guard = Some(Harness::new());
    }
    let h = guard.as_mut().expect("just set");
    h.runs += 1;
    h.source.0.store(0, Ordering::Relaxed);
    h.register(usize::from(head & 3), head & 4 != 0);
    if head & 8 != 0 {
        let mut rest = rest;
        while rest.len() >= 3 {
            let kind = rest[0];
            let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
            h.raw(kind, &rest[3..3 + len]);
            rest = &rest[3 + len..];
        }
    } else {
        let mut u = Unstructured::new(rest);
        for _ in 0..MAX_OPS {
            if u.is_empty() {
                break;
            }
            match Op::arbitrary(&mut u) {
                Ok(op) => {
                    if trace() {
                        eprintln!("{op:?}");
                    }
                    h.apply(op)
                }
                Err(_) => break,
            }
        }
    }
    h.check();
});
