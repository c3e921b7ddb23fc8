//! Reload under load: RM threads keep sending asks and releasing allocations
//! while the queue configuration is reloaded 200 times (a leaf's max toggling,
//! a queue dropped and listed again). After every reload the RMs pause, the
//! core settles, and the ledger of what the RM was told must match the
//! snapshot exactly: no allocation lost or duplicated, node, queue and app
//! usage equal to the sum of their allocations. Every wait is bounded.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::time::{Duration, Instant};

use unisched::core::snapshot::ResourceMap;
use unisched::core::{ConfigSource, PartitionSnapshot, Scheduler, SchedulerOptions};
use unisched::shim_api::{CallbackResult, ResourceManagerCallback, SchedulerApi};
use unisched::si;
use unisched::workload::rng::Rng;

const RM: &str = "reload-rm";
const PARTITION: &str = "[reload-rm]default";
const RM_THREADS: usize = 3;
const RELOADS: usize = 200;
/// Most asks an app has waiting before its RM stops adding more.
const MAX_PENDING_PER_APP: usize = 4;
const DEADLINE: Duration = Duration::from_secs(120);
const QUEUES: [&str; 3] = ["root.a", "root.b", "root.c"];

/// Reload `i`'s configuration: even ones give `a` 4000 memory and list `c`;
/// odd ones lower `a` to 1500 and drop `c` (which then drains).
fn config(i: usize) -> String {
    let (a_max, c) = if i.is_multiple_of(2) {
        (4000, "\n          - name: c")
    } else {
        (1500, "")
    };
    format!(
        "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {{memory: {a_max}}}
          - name: b{c}
"
    )
}

/// The configuration `update_configuration` reads; the test switches it.
#[derive(Default)]
struct Switchable(Mutex<String>);

impl ConfigSource for Switchable {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        Ok(self.0.lock().unwrap().clone())
    }
}

/// What the RM was told, kept by its callback.
#[derive(Default)]
struct Ledger(Mutex<LedgerState>);

#[derive(Default)]
struct LedgerState {
    /// Every allocation id ever reported as new.
    told: BTreeSet<String>,
    /// Allocations reported and not released: id → (app, key).
    live: BTreeMap<String, (String, String)>,
    /// Per app: allocations not yet handed to its RM thread for release.
    inbox: HashMap<String, VecDeque<(String, String)>>,
    /// Per app: allocations reported so far.
    allocated: HashMap<String, usize>,
    problems: Vec<String>,
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, LedgerState> {
        self.0.lock().unwrap()
    }
}

impl ResourceManagerCallback for Ledger {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        let mut s = self.lock();
        for a in response.new {
            if !s.told.insert(a.allocation_id.clone()) {
                s.problems
                    .push(format!("allocation {} reported twice", a.allocation_id));
            }
            let entry = (a.application_id.clone(), a.allocation_key.clone());
            s.live.insert(a.allocation_id.clone(), entry);
            s.inbox
                .entry(a.application_id.clone())
                .or_default()
                .push_back((a.allocation_key.clone(), a.allocation_id.clone()));
            *s.allocated.entry(a.application_id).or_default() += 1;
        }
        for r in response.released {
            if s.live.remove(&r.allocation_id).is_none() {
                s.problems.push(format!(
                    "release of allocation {:?} (key {}) that was not live",
                    r.allocation_id, r.allocation_key
                ));
            }
        }
        for r in response.rejected {
            s.problems
                .push(format!("ask {} rejected: {}", r.allocation_key, r.reason));
        }
        Ok(())
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        for r in response.rejected {
            let problem = format!("app {} rejected: {}", r.application_id, r.reason);
            self.lock().problems.push(problem);
        }
        Ok(())
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        for r in response.rejected {
            let problem = format!("node {} rejected: {}", r.node_id, r.reason);
            self.lock().problems.push(problem);
        }
        Ok(())
    }

    fn predicates(&self, _args: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn send_event(&self, _events: Vec<si::EventRecord>) -> CallbackResult<()> {
        Ok(())
    }

    fn update_container_scheduling_state(
        &self,
        _request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }

    fn update_configuration(
        &self,
        _request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse::default())
    }
}

fn res(memory: i64, vcore: i64) -> Option<si::Resource> {
    Some(si::Resource {
        resources: [
            ("memory".to_string(), si::Quantity { value: memory }),
            ("vcore".to_string(), si::Quantity { value: vcore }),
        ]
        .into_iter()
        .collect(),
    })
}

/// Shared by the RM threads and the test's reload loop.
struct Shared {
    scheduler: Scheduler,
    ledger: Arc<Ledger>,
    /// RM threads hold it for reading while they send; the reload loop takes
    /// it for writing to check a quiescent state.
    pause: RwLock<()>,
    rounds: AtomicUsize,
    stop: AtomicBool,
}

/// One RM thread: an app in each queue; each round adds asks to apps with few
/// waiting and releases some of the allocations it was told about.
fn rm_thread(shared: &Shared, t: usize) {
    let sched = &shared.scheduler;
    let mut rng = Rng::new(t as u64 + 7);
    let apps: Vec<String> = QUEUES.iter().map(|q| format!("{q}-app-{t}")).collect();
    let mut asked: HashMap<String, usize> = HashMap::new();
    let mut round = 0usize;
    while !shared.stop.load(Ordering::Relaxed) {
        let _sending = shared.pause.read().unwrap();
        let mut asks = Vec::new();
        let mut releases = Vec::new();
        {
            let mut ledger = shared.ledger.lock();
            for app in &apps {
                let allocated = ledger.allocated.get(app).copied().unwrap_or(0);
                let n = asked.entry(app.clone()).or_default();
                if *n - allocated < MAX_PENDING_PER_APP {
                    *n += 1;
                    asks.push(si::AllocationAsk {
                        allocation_key: format!("{app}-ask-{round}"),
                        application_id: app.clone(),
                        partition_name: "default".to_string(),
                        resource_ask: res(100 + 100 * rng.below(4) as i64, 100),
                        max_allocations: 1,
                        ..Default::default()
                    });
                }
                let inbox = ledger.inbox.entry(app.clone()).or_default();
                for _ in 0..rng.below(3) {
                    let Some((key, id)) = inbox.pop_front() else {
                        break;
                    };
                    releases.push(si::AllocationRelease {
                        partition_name: "default".to_string(),
                        application_id: app.clone(),
                        allocation_key: key,
                        allocation_id: id,
                        termination_type: si::TerminationType::StoppedByRm as i32,
                        ..Default::default()
                    });
                }
            }
        }
        sched
            .update_allocation(si::AllocationRequest {
                asks,
                releases: Some(si::AllocationReleasesRequest {
                    allocations_to_release: releases,
                    ..Default::default()
                }),
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
        round += 1;
        shared.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

fn setup(shared: &Shared) {
    let sched = &shared.scheduler;
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                policy_group: "queues".to_string(),
                config: config(0),
                ..Default::default()
            },
            shared.ledger.clone(),
        )
        .unwrap();
    let nodes = (0..2)
        .map(|n| si::NodeInfo {
            node_id: format!("node-{n}"),
            action: si::node_info::ActionFromRm::Create as i32,
            schedulable_resource: res(8000, 1_000_000),
            ..Default::default()
        })
        .collect();
    sched
        .update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        })
        .unwrap();
    let apps = (0..RM_THREADS)
        .flat_map(|t| {
            QUEUES.iter().map(move |q| si::AddApplicationRequest {
                application_id: format!("{q}-app-{t}"),
                queue_name: q.to_string(),
                partition_name: "default".to_string(),
                ugi: Some(si::UserGroupInformation {
                    user: format!("user-{t}"),
                    groups: vec![],
                }),
                ..Default::default()
            })
        })
        .collect();
    sched
        .update_application(si::ApplicationRequest {
            new: apps,
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
}

/// `map` without zero entries, so "no memory" and "memory 0" compare equal.
fn nonzero(map: &ResourceMap) -> ResourceMap {
    map.iter()
        .filter(|(_, v)| **v != 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn add(sum: &mut ResourceMap, r: &ResourceMap) {
    for (k, v) in r {
        *sum.entry(k.clone()).or_default() += v;
    }
}

/// Everything that must hold in a quiescent state after reload `i`.
fn check(snap: &PartitionSnapshot, ledger: &Ledger, i: usize) -> Vec<String> {
    let mut problems = Vec::new();
    let s = ledger.lock();
    problems.extend(s.problems.iter().cloned());
    let in_core: BTreeSet<&String> = snap.allocations.iter().map(|a| &a.allocation_id).collect();
    let told: BTreeSet<&String> = s.live.keys().collect();
    let lost: Vec<_> = told.difference(&in_core).take(5).collect();
    let unknown: Vec<_> = in_core.difference(&told).take(5).collect();
    if !lost.is_empty() {
        problems.push(format!(
            "allocations the RM holds but the core lost: {lost:?}"
        ));
    }
    if !unknown.is_empty() {
        problems.push(format!(
            "allocations the RM was never told about: {unknown:?}"
        ));
    }
    if in_core.len() != snap.allocations.len() {
        problems.push("an allocation id appears twice in the core".to_string());
    }

    let mut by_node: BTreeMap<&str, (ResourceMap, usize)> = BTreeMap::new();
    let mut by_app: BTreeMap<&str, (ResourceMap, usize)> = BTreeMap::new();
    // An application's `allocated` counts its real allocations; its
    // placeholders count in `placeholder` (none in this test's asks).
    let mut app_placeholders: BTreeMap<&str, ResourceMap> = BTreeMap::new();
    for a in &snap.allocations {
        let e = by_node.entry(a.node_id.as_str()).or_default();
        add(&mut e.0, &a.resource);
        e.1 += 1;
        let e = by_app.entry(a.application_id.as_str()).or_default();
        if a.placeholder {
            add(
                app_placeholders.entry(&a.application_id).or_default(),
                &a.resource,
            );
        } else {
            add(&mut e.0, &a.resource);
        }
        e.1 += 1;
    }
    for n in &snap.nodes {
        let (sum, count) = by_node.remove(n.id.as_str()).unwrap_or_default();
        if nonzero(&n.allocated) != nonzero(&sum) || n.allocation_count != count {
            problems.push(format!(
                "node {}: allocated {:?} in {} allocations, the allocations sum to {sum:?} in {count}",
                n.id, n.allocated, n.allocation_count
            ));
        }
        let mut used = n.allocated.clone();
        add(&mut used, &n.occupied);
        add(&mut used, &n.available);
        if nonzero(&used) != nonzero(&n.capacity) {
            problems.push(format!(
                "node {}: allocated + occupied + available != capacity",
                n.id
            ));
        }
    }
    if !by_node.is_empty() {
        problems.push(format!(
            "allocations on unknown nodes: {:?}",
            by_node.keys()
        ));
    }
    for app in &snap.applications {
        let (sum, count) = by_app.remove(app.id.as_str()).unwrap_or_default();
        if nonzero(&app.allocated) != nonzero(&sum) || app.allocation_count != count {
            problems.push(format!(
                "app {}: allocated {:?} in {}, the allocations sum to {sum:?} in {count}",
                app.id, app.allocated, app.allocation_count
            ));
        }
        let placeholders = app_placeholders.remove(app.id.as_str()).unwrap_or_default();
        if nonzero(&app.placeholder) != nonzero(&placeholders) {
            problems.push(format!(
                "app {}: placeholder {:?}, its placeholders sum to {placeholders:?}",
                app.id, app.placeholder
            ));
        }
    }
    for q in &snap.queues {
        let mut sum = ResourceMap::new();
        let prefix = format!("{}.", q.path);
        for a in &snap.allocations {
            if a.queue == q.path || a.queue.starts_with(&prefix) {
                add(&mut sum, &a.resource);
            }
        }
        if nonzero(&q.allocated) != nonzero(&sum) {
            problems.push(format!(
                "queue {}: allocated {:?}, its allocations sum to {sum:?}",
                q.path, q.allocated
            ));
        }
        if q.allocated
            .values()
            .chain(q.pending.values())
            .any(|v| *v < 0)
        {
            problems.push(format!(
                "queue {}: negative usage {:?}",
                q.path, q.allocated
            ));
        }
    }

    // The reload itself took effect.
    let queue = |path: &str| snap.queues.iter().find(|q| q.path == path);
    let a_max = queue("root.a").and_then(|q| q.max.get("memory").copied());
    let want_max = if i.is_multiple_of(2) { 4000 } else { 1500 };
    if a_max != Some(want_max) {
        problems.push(format!(
            "root.a max memory {a_max:?}, configured {want_max}"
        ));
    }
    let c_state = queue("root.c").map(|q| q.state.as_str());
    let want_state = if i.is_multiple_of(2) {
        "Active"
    } else {
        "Draining"
    };
    if c_state != Some(want_state) {
        problems.push(format!("root.c is {c_state:?}, expected {want_state}"));
    }
    problems
        .into_iter()
        .map(|p| format!("after reload {i}: {p}"))
        .collect()
}

/// Spins (yielding) until the RM threads completed `target` rounds.
fn wait_for_rounds(shared: &Shared, target: usize) {
    let deadline = Instant::now() + DEADLINE;
    while shared.rounds.load(Ordering::Relaxed) < target {
        assert!(
            Instant::now() < deadline,
            "the RM threads stopped making progress"
        );
        std::thread::yield_now();
    }
}

fn run() -> Vec<String> {
    let source = Arc::new(Switchable(Mutex::new(config(0))));
    let shared = Arc::new(Shared {
        scheduler: Scheduler::start(SchedulerOptions {
            config_source: Some(source.clone()),
            ..SchedulerOptions::default()
        }),
        ledger: Arc::new(Ledger::default()),
        pause: RwLock::new(()),
        rounds: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    setup(&shared);
    let threads: Vec<_> = (0..RM_THREADS)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || rm_thread(&shared, t))
        })
        .collect();
    let mut problems = Vec::new();
    for i in 1..=RELOADS {
        // Let the RMs work, then reload while they keep sending.
        wait_for_rounds(&shared, shared.rounds.load(Ordering::Relaxed) + RM_THREADS);
        *source.0.lock().unwrap() = config(i);
        shared.scheduler.update_configuration(RM).unwrap();
        let _paused = shared.pause.write().unwrap();
        shared.scheduler.settle();
        let snap = shared.scheduler.snapshot(PARTITION).expect("partition");
        problems.extend(check(&snap, &shared.ledger, i));
        if !problems.is_empty() {
            break;
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("an RM thread panicked");
    }
    shared.scheduler.settle();
    let snap = shared.scheduler.snapshot(PARTITION).expect("partition");
    problems.extend(check(&snap, &shared.ledger, RELOADS));
    let ledger = shared.ledger.lock();
    let released = ledger.told.len() - ledger.live.len();
    assert!(
        ledger.told.len() > 1000 && released > 500,
        "too little traffic to mean anything: {} allocations, {released} released",
        ledger.told.len()
    );
    problems
}

#[test]
fn reloads_under_load_lose_and_duplicate_nothing() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run());
    });
    let problems = rx
        .recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("no result within {DEADLINE:?}: deadlock or a panic above"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
