//! The soak simulation in CI: a few seeds of a few hundred steps each must show
//! no violation, and regression tests for the core bugs the soak found
//! (recorded in RELIABILITY.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use unisched::core::{ManualClock, PartitionSnapshot, Scheduler, SchedulerOptions};
use unisched::shim_api::SchedulerApi;
use unisched::shim_api::recording::RecordingCallback;
use unisched::si;
use unisched::soak::{self, SoakOptions};

fn check(seed: u64, steps: usize, avoid_known_bugs: bool, gang_ops: bool) {
    let options = SoakOptions {
        seed,
        steps,
        avoid_known_bugs,
        gang_ops,
        ..Default::default()
    };
    let report = soak::run_seed(&options, None, false);
    if let Some(f) = &report.execution.failure {
        panic!(
            "seed {seed}: violation at step {} ({:?}):\n  {}\nreproduce: cargo run --release -- soak --seed {seed} --steps {steps}{}",
            f.step,
            f.op,
            f.violations.join("\n  "),
            if avoid_known_bugs {
                " --avoid-known-bugs"
            } else if !gang_ops {
                " --no-gang"
            } else {
                ""
            }
        );
    }
    assert_eq!(report.execution.steps, steps);
    assert!(
        report.execution.counts.allocations > 0,
        "seed {seed} allocated nothing"
    );
}

#[test]
fn seeds_hold() {
    for seed in 1..=4 {
        check(seed, 300, false, true);
    }
}

#[test]
fn seeds_hold_without_gang_operations() {
    for seed in 1..=2 {
        check(seed, 300, false, false);
    }
}

// ---- regressions: core bugs found by the soak, fixed ------------------------

const RM: &str = "rm";
const CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
";

fn res(memory: i64) -> Option<si::Resource> {
    Some(si::Resource {
        resources: HashMap::from([("memory".to_string(), si::Quantity { value: memory })]),
    })
}

struct Rm {
    sched: Scheduler,
    clock: Arc<ManualClock>,
    rec: Arc<RecordingCallback>,
}

impl Rm {
    fn new() -> Self {
        let clock = ManualClock::new(1_000_000_000);
        let sched = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let rec = Arc::new(RecordingCallback::new());
        let rm = Self { sched, clock, rec };
        rm.register();
        rm
    }

    fn register(&self) {
        self.sched
            .register_resource_manager(
                si::RegisterResourceManagerRequest {
                    rm_id: RM.to_string(),
                    config: CONFIG.to_string(),
                    ..Default::default()
                },
                self.rec.clone(),
            )
            .unwrap();
    }

    fn app(&self) {
        self.sched
            .update_application(si::ApplicationRequest {
                new: vec![si::AddApplicationRequest {
                    application_id: "app".to_string(),
                    queue_name: "root.a".to_string(),
                    partition_name: "default".to_string(),
                    ugi: Some(si::UserGroupInformation {
                        user: "u".to_string(),
                        groups: vec![],
                    }),
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    fn node(&self, memory: i64, existing: Vec<si::Allocation>) {
        self.node_named("n", memory, existing);
    }

    fn node_named(&self, id: &str, memory: i64, existing: Vec<si::Allocation>) {
        self.sched
            .update_node(si::NodeRequest {
                nodes: vec![si::NodeInfo {
                    node_id: id.to_string(),
                    action: si::node_info::ActionFromRm::Create as i32,
                    schedulable_resource: res(memory),
                    existing_allocations: existing,
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
            })
            .unwrap();
    }

    fn ask(&self, key: &str, memory: i64, max: i32) {
        self.sched
            .update_allocation(si::AllocationRequest {
                asks: vec![si::AllocationAsk {
                    allocation_key: key.to_string(),
                    application_id: "app".to_string(),
                    partition_name: "default".to_string(),
                    resource_ask: res(memory),
                    max_allocations: max,
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    fn send_releases(&self, releases: si::AllocationReleasesRequest) {
        self.sched
            .update_allocation(si::AllocationRequest {
                releases: Some(releases),
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    fn release_id(&self, id: &str) {
        self.send_releases(si::AllocationReleasesRequest {
            allocations_to_release: vec![si::AllocationRelease {
                partition_name: "default".to_string(),
                application_id: "app".to_string(),
                allocation_id: id.to_string(),
                ..Default::default()
            }],
            ..Default::default()
        });
    }

    fn snapshot(&self) -> Option<PartitionSnapshot> {
        self.sched.settle();
        self.sched.snapshot("default")
    }
}

/// Core bug 1: allocation ids are `{key}-{n}` with `n` the number of
/// allocations the ask has had. After re-registration that count restarts at
/// the number of allocations recovered, not at the highest id: with only `k-1`
/// still running, the ask's next allocation is `k-1` again and two live
/// allocations share one id (releases by id then hit the wrong one).
#[test]
fn regression_no_duplicate_allocation_id_after_recovery() {
    let rm = Rm::new();
    rm.app();
    rm.node(100, vec![]);
    rm.ask("k", 10, 2);
    assert_eq!(rm.snapshot().unwrap().allocations.len(), 2);
    // The RM registers again and re-reports: app, node with k-1 (k-0 finished),
    // then k wanting one more next to the one running.
    rm.register();
    rm.app();
    rm.node(
        100,
        vec![si::Allocation {
            allocation_key: "k".to_string(),
            allocation_id: "k-1".to_string(),
            resource_per_alloc: res(10),
            node_id: "n".to_string(),
            application_id: "app".to_string(),
            partition_name: "default".to_string(),
            ..Default::default()
        }],
    );
    rm.ask("k", 10, 2);
    let snap = rm.snapshot().unwrap();
    let ids: Vec<_> = snap
        .allocations
        .iter()
        .map(|a| a.allocation_id.as_str())
        .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "allocation ids are not unique: {ids:?}");
}

/// Core bug 2: an ask whose maxAllocations is lowered to what it already has
/// keeps its reservation; once its last allocation is released the ask is
/// dropped but the node still names it, and the next snapshot panics on the
/// scheduling thread (`partition.rs`, `self.asks[a]` in the node snapshot),
/// which ends the thread: every later call fails.
#[test]
fn regression_no_dangling_reservation_after_ask_shrinks() {
    let rm = Rm::new();
    rm.app();
    rm.node(100, vec![]);
    // A second, smaller node: the root's max (the cluster's capacity) then
    // has room for a second allocation that no node can hold.
    rm.node_named("m", 50, vec![]);
    rm.ask("k", 60, 2);
    assert_eq!(rm.snapshot().unwrap().allocations.len(), 1);
    // The second allocation does not fit; after the delay the ask reserves n.
    rm.clock.advance(Duration::from_secs(3));
    rm.sched.wake();
    let snap = rm.snapshot().unwrap();
    assert_eq!(snap.node("n").unwrap().reserved_by.as_deref(), Some("k"));
    // Lower max to 1: nothing pending, but the reservation stays; then release k-0.
    rm.ask("k", 60, 1);
    rm.release_id("k-0");
    let snap = rm.snapshot();
    assert!(snap.is_some(), "the scheduling thread died");
    assert_eq!(snap.unwrap().node("n").unwrap().reserved_by, None);
}

/// Finding 5 (RELIABILITY.md), with the reservation timeout on: a pass tried
/// the reserved asks first, while their queue headroom still fitted, then
/// placed other asks of the same queue, which used that headroom up. The
/// reservation was now blocked and long past its timeout, but only the next
/// pass looked again: the core reported itself settled, and the next request
/// of any kind cancelled the reservation and placed an ask on the freed node.
#[test]
fn regression_reservation_blocked_within_a_pass_times_out_before_settle() {
    let clock = ManualClock::new(1_000_000_000);
    let sched = Scheduler::start(SchedulerOptions {
        clock: clock.clone(),
        reservation_timeout: Duration::from_secs(60),
        ..Default::default()
    });
    let rec = Arc::new(RecordingCallback::new());
    let config = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {memory: 100}
";
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                config: config.to_string(),
                ..Default::default()
            },
            rec.clone(),
        )
        .unwrap();
    let rm = Rm {
        sched,
        clock,
        rec: rec.clone(),
    };
    rm.app();
    // Node x has 30 free, node y 15; the queue holds 55 of its 100.
    let existing = |key: &str, node: &str, memory: i64| si::Allocation {
        allocation_key: key.to_string(),
        allocation_id: format!("{key}-0"),
        resource_per_alloc: res(memory),
        node_id: node.to_string(),
        application_id: "app".to_string(),
        partition_name: "default".to_string(),
        ..Default::default()
    };
    let node = |id: &str, held: si::Allocation| si::NodeInfo {
        node_id: id.to_string(),
        action: si::node_info::ActionFromRm::Create as i32,
        schedulable_resource: res(50),
        existing_allocations: vec![held],
        ..Default::default()
    };
    rm.sched
        .update_node(si::NodeRequest {
            nodes: vec![
                node("x", existing("ex", "x", 20)),
                node("y", existing("ey", "y", 35)),
            ],
            rm_id: RM.to_string(),
        })
        .unwrap();
    // r (40) fits the headroom but no node: after the delay it reserves x.
    rm.ask("r", 40, 1);
    rm.sched.settle();
    rm.clock.advance(Duration::from_secs(3));
    rm.sched.wake();
    let snap = rm.snapshot().unwrap();
    assert_eq!(snap.node("x").unwrap().reserved_by.as_deref(), Some("r"));
    // Long past the timeout, but r's headroom still fits: it keeps x.
    rm.clock.advance(Duration::from_secs(61));
    rm.sched.wake();
    let snap = rm.snapshot().unwrap();
    assert_eq!(snap.node("x").unwrap().reserved_by.as_deref(), Some("r"));
    // One pass: r (tried first) still fits the headroom; h takes 10 on y and
    // leaves r's headroom short (65 + 40 > 100); w (10) fits only x.
    rm.sched
        .update_allocation(si::AllocationRequest {
            asks: ["h", "w"]
                .iter()
                .map(|key| si::AllocationAsk {
                    allocation_key: key.to_string(),
                    application_id: "app".to_string(),
                    partition_name: "default".to_string(),
                    resource_ask: res(10),
                    max_allocations: 1,
                    ..Default::default()
                })
                .collect(),
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
    rm.sched.settle();
    let placed = |rec: &RecordingCallback| {
        let mut keys: Vec<String> =
            rec.with_recorded(|r| r.allocations().map(|a| a.allocation_key.clone()).collect());
        keys.sort();
        keys
    };
    let settled = placed(&rec);
    assert_eq!(
        settled,
        ["h", "w"],
        "the core settled with r's timed-out reservation still holding x"
    );
    // A settled core places nothing more without a new request.
    rm.sched.settle();
    assert_eq!(placed(&rec), settled);
    let snap = rm.snapshot().unwrap();
    assert_eq!(snap.node("x").unwrap().reserved_by, None);
}

// ---- gang scheduling: core bugs found by the gang soak operations -----------

impl Rm {
    /// A gang application whose placeholders total `placeholders` memory.
    fn gang_app(&self, placeholders: i64) {
        self.sched
            .update_application(si::ApplicationRequest {
                new: vec![si::AddApplicationRequest {
                    application_id: "app".to_string(),
                    queue_name: "root.a".to_string(),
                    partition_name: "default".to_string(),
                    ugi: Some(si::UserGroupInformation {
                        user: "u".to_string(),
                        groups: vec![],
                    }),
                    placeholder_ask: res(placeholders),
                    gang_scheduling_style: "Soft".to_string(),
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    /// Asks of task group `tg`: `(key, memory, max, placeholder)`.
    fn group_asks(&self, asks: &[(&str, i64, i32, bool)]) {
        let asks = asks
            .iter()
            .map(|&(key, memory, max, placeholder)| si::AllocationAsk {
                allocation_key: key.to_string(),
                application_id: "app".to_string(),
                partition_name: "default".to_string(),
                resource_ask: res(memory),
                max_allocations: max,
                task_group_name: "tg".to_string(),
                placeholder,
                ..Default::default()
            })
            .collect();
        self.sched
            .update_allocation(si::AllocationRequest {
                asks,
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    /// The RM confirms the core's PLACEHOLDER_REPLACED release of `id`.
    /// A gang app with two placeholders replaced by a real ask of two
    /// allocations, the first replacement confirmed (real-0 made), the
    /// second still in flight.
    fn two_replacements_first_confirmed() -> Self {
        let rm = Rm::new();
        rm.gang_app(20);
        rm.node(100, vec![]);
        rm.group_asks(&[("ph", 10, 2, true), ("real", 10, 2, false)]);
        rm.sched.settle();
        assert_eq!(rm.replaced().len(), 2);
        rm.confirm_replaced("ph-0");
        rm
    }

    fn confirm_replaced(&self, id: &str) {
        self.send_releases(si::AllocationReleasesRequest {
            allocations_to_release: vec![si::AllocationRelease {
                partition_name: "default".to_string(),
                application_id: "app".to_string(),
                allocation_key: "ph".to_string(),
                allocation_id: id.to_string(),
                termination_type: si::TerminationType::PlaceholderReplaced as i32,
                ..Default::default()
            }],
            ..Default::default()
        });
    }

    fn release_ask(&self, key: &str) {
        self.send_releases(si::AllocationReleasesRequest {
            allocation_asks_to_release: vec![si::AllocationAskRelease {
                partition_name: "default".to_string(),
                application_id: "app".to_string(),
                allocation_key: key.to_string(),
                ..Default::default()
            }],
            ..Default::default()
        });
    }

    /// Allocation ids the core reported released with PLACEHOLDER_REPLACED.
    fn replaced(&self) -> Vec<String> {
        let recorded = self.rec.recorded();
        recorded
            .released()
            .filter(|r| r.termination_type == si::TerminationType::PlaceholderReplaced as i32)
            .map(|r| r.allocation_id.clone())
            .collect()
    }

    /// Pending allocations of ask `key`, 0 when it is not listed.
    fn pending(&self, key: &str) -> u32 {
        self.snapshot().unwrap().applications[0]
            .pending_asks
            .iter()
            .find(|k| k.allocation_key == key)
            .map_or(0, |k| k.pending_allocations)
    }
}

/// Core bug 6: the real allocation of a replacement took the size of its ask
/// when the RM confirmed, not when the replacement started. An ask sent again
/// larger in between got an allocation larger than the placeholder it
/// replaced, placed with no node or queue check.
#[test]
fn regression_replacement_keeps_its_size() {
    let rm = Rm::new();
    rm.gang_app(10);
    rm.node(100, vec![]);
    rm.group_asks(&[("ph", 10, 1, true), ("real", 10, 1, false)]);
    rm.sched.settle();
    assert_eq!(rm.replaced(), ["ph-0"]);
    rm.group_asks(&[("real", 30, 1, false)]);
    rm.confirm_replaced("ph-0");
    let snap = rm.snapshot().unwrap();
    let real = snap.allocations.iter().find(|a| a.allocation_key == "real");
    assert_eq!(real.map(|a| a.resource["memory"]), Some(10));
}

/// Core bug 7: a real ask the RM released while a replacement for it was in
/// flight kept that replacement counted as made; sent again, it wanted one
/// allocation too few.
#[test]
fn regression_forgotten_replacement_is_not_counted() {
    let rm = Rm::two_replacements_first_confirmed();
    // real-0 made; the replacement of ph-1 is in flight when the ask goes.
    rm.release_ask("real");
    rm.group_asks(&[("real", 10, 2, false)]);
    assert_eq!(rm.pending("real"), 1);
}

/// Core bug 8: a settled core could still have a replacement to start. A real
/// ask the pass passed over before a placeholder of its group was placed
/// waited for the next pass, which only a later request (or a snapshot) ran:
/// the RM never heard of the replacement at the settle point.
#[test]
fn regression_settle_starts_the_replacement() {
    let rm = Rm::new();
    rm.gang_app(10);
    // The real ask comes first (a recovered allocation makes its record), so
    // a pass tries it before the placeholder.
    let recovered = si::Allocation {
        allocation_key: "real".to_string(),
        allocation_id: "real-0".to_string(),
        resource_per_alloc: res(10),
        node_id: "n".to_string(),
        application_id: "app".to_string(),
        partition_name: "default".to_string(),
        task_group_name: "tg".to_string(),
        ..Default::default()
    };
    rm.node(100, vec![recovered]);
    rm.group_asks(&[("ph", 10, 1, true), ("real", 10, 2, false)]);
    rm.sched.settle();
    assert_eq!(rm.replaced(), ["ph-0"]);
}

/// Core bug 9: a real ask whose last allocation was released while a
/// replacement for it was in flight was dropped; sent again, it started over
/// at maxAllocations, and the confirmed replacement then came on top.
#[test]
fn regression_ask_outlives_its_replacement_in_flight() {
    let rm = Rm::two_replacements_first_confirmed();
    rm.release_id("real-0");
    rm.group_asks(&[("real", 10, 2, false)]);
    assert_eq!(rm.pending("real"), 0);
    rm.confirm_replaced("ph-1");
    let snap = rm.snapshot().unwrap();
    let reals = snap
        .allocations
        .iter()
        .filter(|a| a.allocation_key == "real")
        .count();
    assert_eq!((reals, rm.pending("real")), (1, 0));
}

/// Core bug 10: a pass that runs again (`rerun`: a placeholder placed, a
/// placeholder too small released) kept the failure memos of the pass before.
/// Reservations dropped in between put their nodes back in the index, where
/// sizes the memo said fit no node now fit; the rerun skipped them and, its
/// own pass freeing nothing, the core called itself settled. Found as
/// "allocation in the core never reported to the RM" (seeds 201855 and 202527
/// of `soak --steps 1000`).
#[test]
fn regression_rerun_forgets_the_failures_of_the_pass_before() {
    for seed in [201855, 202527] {
        check(seed, 1000, false, true);
    }
}

/// Core bug 11 (this session's recovered-placeholder counting): a
/// placeholder the RM recovered counted once more in its task group when the
/// RM had re-sent its ask first (`maxAllocations` counting the live ones), so
/// after every placeholder was replaced the group still had placeholders
/// "outstanding" and the next real ask of the group waited forever. Found as
/// a liveness violation at step 328,770 of `soak --seed 1 --steps 1000000`.
/// Each placeholder ask now counts what it stands for once, in either order.
#[test]
fn regression_a_recovered_placeholder_counts_once() {
    for asks_first in [true, false] {
        let rm = Rm::new();
        rm.gang_app(20);
        let recovered = |id: &str| si::Allocation {
            allocation_key: "ph".to_string(),
            allocation_id: id.to_string(),
            resource_per_alloc: res(10),
            node_id: "n".to_string(),
            application_id: "app".to_string(),
            partition_name: "default".to_string(),
            task_group_name: "tg".to_string(),
            placeholder: true,
            ..Default::default()
        };
        // Both placeholders run already: the ask wants 2, both are live.
        if asks_first {
            rm.group_asks(&[("ph", 10, 2, true)]);
            rm.node(100, vec![recovered("ph-0"), recovered("ph-1")]);
        } else {
            rm.node(100, vec![recovered("ph-0"), recovered("ph-1")]);
            rm.group_asks(&[("ph", 10, 2, true)]);
        }
        rm.group_asks(&[("real", 10, 2, false)]);
        rm.sched.settle();
        assert_eq!(rm.replaced().len(), 2, "asks first: {asks_first}");
        rm.confirm_replaced("ph-0");
        rm.confirm_replaced("ph-1");
        // Nothing of the group is left to replace: the next real ask of the
        // group is scheduled normally.
        rm.group_asks(&[("more", 10, 1, false)]);
        assert_eq!(rm.pending("more"), 0, "asks first: {asks_first}");
    }
}
