//! Stress: many RM threads call the API at once (asks, releases, node updates,
//! drains) while the scheduling loop runs; afterwards the accounting must add
//! up. Every wait goes through a watchdog, so a deadlock fails the test with a
//! message instead of hanging CI.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use unisched::core::{ManualClock, Scheduler, SchedulerOptions};
use unisched::shim_api::SchedulerApi;
use unisched::shim_api::recording::RecordingCallback;
use unisched::si;
use unisched::si::node_info::ActionFromRm;
use unisched::soak::check;
use unisched::workload::rng::Rng;

const RM: &str = "stress-rm";
const THREADS: usize = 8;
const ROUNDS: usize = 400;
const DEADLINE: Duration = Duration::from_secs(60);

const CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {memory: 3000}
          - name: b
";

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

/// Runs `f` on its own thread; fails the test if it does not return in time.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not return within {DEADLINE:?}: deadlock in the core?"),
    }
}

/// One RM thread: its own app and node, asks, releases and node changes.
fn rm_thread(sched: Scheduler, t: usize) {
    let mut rng = Rng::new(t as u64 + 1);
    let app = format!("app-{t}");
    let node = format!("node-{t}");
    sched
        .update_application(si::ApplicationRequest {
            new: vec![si::AddApplicationRequest {
                application_id: app.clone(),
                queue_name: if t.is_multiple_of(2) {
                    "root.a"
                } else {
                    "root.b"
                }
                .to_string(),
                partition_name: "default".to_string(),
                ugi: Some(si::UserGroupInformation {
                    user: format!("user-{t}"),
                    groups: vec![],
                }),
                ..Default::default()
            }],
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
    let node_req = |action: ActionFromRm, capacity: Option<si::Resource>| si::NodeRequest {
        nodes: vec![si::NodeInfo {
            node_id: node.clone(),
            action: action as i32,
            schedulable_resource: capacity,
            ..Default::default()
        }],
        rm_id: RM.to_string(),
    };
    sched
        .update_node(node_req(ActionFromRm::Create, res(1000, 100_000)))
        .unwrap();
    for round in 0..ROUNDS {
        let key = format!("{app}-ask-{round}");
        let asks = vec![si::AllocationAsk {
            allocation_key: key,
            application_id: app.clone(),
            partition_name: "default".to_string(),
            resource_ask: res(10 + 10 * rng.below(5) as i64, 1000),
            max_allocations: 1 + rng.below(2) as i32,
            ..Default::default()
        }];
        sched
            .update_allocation(si::AllocationRequest {
                asks,
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
        if round >= 3 && rng.chance(0.6) {
            let old = round - 1 - rng.below(3) as usize;
            let release = si::AllocationRelease {
                partition_name: "default".to_string(),
                application_id: app.clone(),
                allocation_key: format!("{app}-ask-{old}"),
                termination_type: si::TerminationType::StoppedByRm as i32,
                ..Default::default()
            };
            sched
                .update_allocation(si::AllocationRequest {
                    releases: Some(si::AllocationReleasesRequest {
                        allocations_to_release: vec![release],
                        ..Default::default()
                    }),
                    rm_id: RM.to_string(),
                    ..Default::default()
                })
                .unwrap();
        }
        match rng.below(10) {
            0 => sched
                .update_node(node_req(
                    ActionFromRm::Update,
                    res(500 + 100 * rng.below(10) as i64, 100_000),
                ))
                .unwrap(),
            1 => sched
                .update_node(node_req(ActionFromRm::DrainNode, None))
                .unwrap(),
            2 => sched
                .update_node(node_req(ActionFromRm::DrainToSchedulable, None))
                .unwrap(),
            _ => {}
        }
    }
}

#[test]
fn concurrent_rms_keep_the_accounting_straight() {
    let clock = ManualClock::new(1_000_000_000);
    let sched = Scheduler::start(SchedulerOptions {
        clock,
        ..Default::default()
    });
    let rm = Arc::new(RecordingCallback::new());
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                config: CONFIG.to_string(),
                ..Default::default()
            },
            rm.clone(),
        )
        .unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let s = sched.clone();
            std::thread::spawn(move || rm_thread(s, t))
        })
        .collect();
    // Readers racing the writers: settles and snapshots while requests flow.
    let reader = {
        let s = sched.clone();
        std::thread::spawn(move || {
            for _ in 0..20 {
                s.settle();
                let _ = s.snapshot("default");
            }
        })
    };
    within("the RM threads", move || {
        for w in workers {
            w.join().expect("an RM thread panicked");
        }
        reader.join().expect("the reader panicked");
    });
    let s = sched.clone();
    let snap = within("settle and snapshot", move || {
        s.settle();
        s.snapshot("default").expect("partition default")
    });

    let mut problems = check::invariants(&snap, 1);
    problems.extend(check::liveness(&snap, false));
    let rec = rm.recorded();
    let mut live = BTreeSet::new();
    for r in &rec.allocation_responses {
        for a in &r.new {
            if !live.insert(a.allocation_id.clone()) {
                problems.push(format!("allocation {} reported twice", a.allocation_id));
            }
        }
        for rel in &r.released {
            if !live.remove(&rel.allocation_id) {
                problems.push(format!("release of unknown {}", rel.allocation_id));
            }
        }
    }
    let core: BTreeSet<String> = snap
        .allocations
        .iter()
        .map(|a| a.allocation_id.clone())
        .collect();
    if core != live {
        problems.push(format!(
            "the RM's live allocations differ from the core's: only RM {:?}, only core {:?}",
            live.difference(&core).collect::<Vec<_>>(),
            core.difference(&live).collect::<Vec<_>>()
        ));
    }
    assert!(
        rec.allocation_count > THREADS * 10,
        "too few allocations: {}",
        rec.allocation_count
    );
    assert!(problems.is_empty(), "{problems:#?}");
}
