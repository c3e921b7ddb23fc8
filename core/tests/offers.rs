//! Offers through the core (`Scheduler::update_offers`): leases of a node's
//! whole remainder in weighted DRF order, decline filters, suppression,
//! quota limits and guarantees, and turning a lease into task allocations.

use std::sync::Arc;
use std::time::Duration;

use unisched_core::scheduler::offers::{OfferChange, OfferRequest};
use unisched_core::{Clock, ManualClock, Scheduler, SchedulerOptions};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

const RM: &str = "mesos";

fn res(pairs: &[(&str, i64)]) -> si::Resource {
    si::Resource {
        resources: pairs
            .iter()
            .map(|&(n, v)| (n.to_string(), si::Quantity { value: v }))
            .collect(),
    }
}

/// An offer-based RM on a manual clock.
struct Rm {
    sched: Scheduler,
    rec: Arc<RecordingCallback>,
    clock: Arc<ManualClock>,
}

impl Rm {
    fn new(config: &str) -> Self {
        let clock = ManualClock::new(1_000_000_000);
        let sched = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let rec = Arc::new(RecordingCallback::new());
        sched
            .register_resource_manager(
                si::RegisterResourceManagerRequest {
                    rm_id: RM.to_string(),
                    policy_group: "queues".to_string(),
                    config: config.to_string(),
                    ..Default::default()
                },
                rec.clone(),
            )
            .expect("register");
        let rm = Self { sched, rec, clock };
        // Mesos' default minimum: cpus 0.01 or mem 32 MB.
        rm.offers(vec![OfferChange::Policy {
            min_allocatable: vec![res(&[("vcore", 10)]), res(&[("memory", 32)])],
        }]);
        rm
    }

    fn offers(&self, changes: Vec<OfferChange>) {
        self.sched
            .update_offers(OfferRequest {
                rm_id: RM.to_string(),
                partition_name: "default".to_string(),
                changes,
            })
            .unwrap();
    }

    fn agents(&self, agents: &[(&str, i64, i64)]) {
        let nodes = agents
            .iter()
            .map(|&(id, vcore, mem)| si::NodeInfo {
                node_id: id.to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: Some(res(&[("vcore", vcore), ("memory", mem)])),
                ..Default::default()
            })
            .collect();
        self.sched
            .update_node(si::NodeRequest {
                nodes,
                rm_id: RM.to_string(),
            })
            .unwrap();
    }

    /// A framework in a role: an application that wants offers.
    fn framework(&self, id: &str, queue: &str) {
        self.sched
            .update_application(si::ApplicationRequest {
                new: vec![si::AddApplicationRequest {
                    application_id: id.to_string(),
                    queue_name: queue.to_string(),
                    partition_name: "default".to_string(),
                    ugi: Some(si::UserGroupInformation {
                        user: "mesos".to_string(),
                        groups: vec![],
                    }),
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
        self.demand(id, true);
    }

    fn demand(&self, app: &str, active: bool) {
        self.offers(vec![OfferChange::Demand {
            application_id: app.to_string(),
            active,
        }]);
    }

    fn allocation_request(&self, request: si::AllocationRequest) {
        self.sched
            .update_allocation(si::AllocationRequest {
                rm_id: RM.to_string(),
                ..request
            })
            .unwrap();
    }

    fn release(&self, lease: &si::Allocation) -> si::AllocationRelease {
        si::AllocationRelease {
            partition_name: "default".to_string(),
            application_id: lease.application_id.clone(),
            allocation_id: lease.allocation_id.clone(),
            termination_type: si::TerminationType::StoppedByRm as i32,
            ..Default::default()
        }
    }

    /// Declines a lease: releases it and filters its node for the app.
    fn decline(&self, lease: &si::Allocation, refuse: Duration) {
        self.offers(vec![OfferChange::Filter {
            application_id: lease.application_id.clone(),
            node_id: lease.node_id.clone(),
            refused: lease.resource_per_alloc.clone().unwrap(),
            duration: refuse,
            since: None,
        }]);
        self.allocation_request(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: vec![self.release(lease)],
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    /// Leases currently held (granted and not released) after an
    /// allocation run.
    fn leases(&self) -> Vec<si::Allocation> {
        self.offers(vec![OfferChange::Allocate]);
        self.held()
    }

    /// Leases currently held, without asking for an allocation run.
    fn held(&self) -> Vec<si::Allocation> {
        self.sched.settle();
        let rec = self.rec.recorded();
        let released: std::collections::HashSet<&str> =
            rec.released().map(|r| r.allocation_id.as_str()).collect();
        rec.allocations()
            .filter(|a| a.allocation_key == a.application_id)
            .filter(|a| !released.contains(a.allocation_id.as_str()))
            .cloned()
            .collect()
    }

    fn leases_of(&self, app: &str) -> Vec<si::Allocation> {
        self.leases()
            .into_iter()
            .filter(|l| l.application_id == app)
            .collect()
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
        self.sched.wake();
    }
}

fn quantity(a: &si::Allocation, name: &str) -> i64 {
    a.resource_per_alloc.as_ref().unwrap().resources[name].value
}

const ROLES: &str = "
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: r1
            properties: {weight: 2}
          - name: r2
          - name: capped
            resources:
              max: {vcore: 1500m}
          - name: guaranteed
            resources:
              guaranteed: {vcore: 4}
";

#[test]
fn one_framework_is_offered_a_whole_agent() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let leases = rm.leases();
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].node_id, "a");
    assert_eq!(quantity(&leases[0], "vcore"), 2000);
    assert_eq!(quantity(&leases[0], "memory"), 1024);
    assert_eq!(rm.rec.recorded().app_states("fw1"), ["Accepted", "Running"]);
    // A second framework gets nothing of it while the offer is outstanding.
    rm.framework("fw2", "root.r2");
    assert!(rm.leases_of("fw2").is_empty());
    let snap = rm.sched.snapshot("default").unwrap();
    assert_eq!(snap.queue("root.r2").unwrap().allocated["vcore"], 2000);
}

#[test]
fn a_declined_agent_goes_to_the_next_framework_and_not_back() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let lease = rm.leases_of("fw1").remove(0);
    rm.framework("fw2", "root.r2");
    rm.decline(&lease, Duration::from_secs(5));
    let to_fw2 = rm.leases_of("fw2");
    assert_eq!(to_fw2.len(), 1, "{:?}", rm.leases());
    // fw2 declines without a filter: fw1's filter still holds, so fw2 gets it again.
    rm.allocation_request(si::AllocationRequest {
        releases: Some(si::AllocationReleasesRequest {
            allocations_to_release: vec![rm.release(&to_fw2[0])],
            ..Default::default()
        }),
        ..Default::default()
    });
    assert!(rm.leases_of("fw1").is_empty());
    assert_eq!(rm.leases_of("fw2").len(), 1);
}

#[test]
fn a_filter_holds_for_its_time_and_revive_clears_it() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let lease = rm.leases_of("fw1").remove(0);
    rm.decline(&lease, Duration::from_secs(5));
    assert!(rm.leases().is_empty());
    rm.advance(Duration::from_secs(4));
    assert!(rm.leases().is_empty());
    rm.advance(Duration::from_secs(1));
    let again = rm.leases_of("fw1");
    assert_eq!(again.len(), 1);
    assert_ne!(
        again[0].allocation_id, lease.allocation_id,
        "ids never repeat"
    );
    rm.decline(&again[0], Duration::from_secs(3600));
    assert!(rm.leases().is_empty());
    rm.offers(vec![OfferChange::ClearFilters {
        application_id: "fw1".to_string(),
    }]);
    assert_eq!(rm.leases_of("fw1").len(), 1);
}

#[test]
fn a_filter_counts_from_when_the_rm_declined_not_from_when_the_core_got_it() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let lease = rm.leases_of("fw1").remove(0);
    let declined_at = rm.clock.now_nanos();
    // The core hears of the decline 3 s after the RM took it.
    rm.advance(Duration::from_secs(3));
    rm.offers(vec![OfferChange::Filter {
        application_id: "fw1".to_string(),
        node_id: "a".to_string(),
        refused: lease.resource_per_alloc.clone().unwrap(),
        duration: Duration::from_secs(5),
        since: Some(declined_at),
    }]);
    rm.allocation_request(si::AllocationRequest {
        releases: Some(si::AllocationReleasesRequest {
            allocations_to_release: vec![rm.release(&lease)],
            ..Default::default()
        }),
        ..Default::default()
    });
    rm.advance(Duration::from_secs(1));
    assert!(rm.leases().is_empty(), "4 s after the decline");
    rm.advance(Duration::from_secs(1));
    assert_eq!(rm.leases_of("fw1").len(), 1, "5 s after the decline");
}

#[test]
fn a_filter_matches_only_a_subset_of_what_was_refused() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let lease = rm.leases_of("fw1").remove(0);
    // Accept part of it as a task, decline the rest with a long filter.
    rm.allocation_request(si::AllocationRequest {
        allocations: vec![si::Allocation {
            allocation_key: "task-1".to_string(),
            allocation_id: "task-1".to_string(),
            application_id: "fw1".to_string(),
            partition_name: "default".to_string(),
            node_id: "a".to_string(),
            resource_per_alloc: Some(res(&[("vcore", 1000), ("memory", 512)])),
            ..Default::default()
        }],
        ..Default::default()
    });
    rm.decline(&lease, Duration::ZERO);
    let rest = rm.leases_of("fw1").remove(0);
    assert_eq!(quantity(&rest, "vcore"), 1000);
    rm.decline(&rest, Duration::from_secs(3600));
    assert!(rm.leases().is_empty());
    // The task ends: the remainder is no longer within what was refused.
    rm.allocation_request(si::AllocationRequest {
        releases: Some(si::AllocationReleasesRequest {
            allocations_to_release: vec![si::AllocationRelease {
                partition_name: "default".to_string(),
                application_id: "fw1".to_string(),
                allocation_id: "task-1".to_string(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    let whole = rm.leases_of("fw1");
    assert_eq!(whole.len(), 1);
    assert_eq!(quantity(&whole[0], "vcore"), 2000);
}

#[test]
fn accepting_turns_a_lease_into_tasks_atomically() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    rm.framework("fw2", "root.r2");
    let lease = rm.leases().remove(0);
    let owner = lease.application_id.clone();
    let other = if owner == "fw1" { "fw2" } else { "fw1" };
    rm.decline(&lease, Duration::from_secs(5));
    // The other framework holds it now; it launches a task and declines the rest
    // with a filter, in one request.
    let lease = rm.leases_of(other).remove(0);
    rm.offers(vec![OfferChange::Filter {
        application_id: other.to_string(),
        node_id: "a".to_string(),
        refused: res(&[("vcore", 1500), ("memory", 896)]),
        duration: Duration::from_secs(60),
        since: None,
    }]);
    rm.allocation_request(si::AllocationRequest {
        allocations: vec![si::Allocation {
            allocation_key: "t1".to_string(),
            allocation_id: "t1".to_string(),
            application_id: other.to_string(),
            partition_name: "default".to_string(),
            node_id: "a".to_string(),
            resource_per_alloc: Some(res(&[("vcore", 500), ("memory", 128)])),
            ..Default::default()
        }],
        releases: Some(si::AllocationReleasesRequest {
            allocations_to_release: vec![rm.release(&lease)],
            ..Default::default()
        }),
        ..Default::default()
    });
    // Both filter it now; once the first filter is over, the remainder goes
    // to the framework that set it.
    assert!(rm.leases().is_empty());
    rm.advance(Duration::from_secs(5));
    let rest = rm.leases();
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].application_id, owner);
    assert_eq!(quantity(&rest[0], "vcore"), 1500);
    assert_eq!(quantity(&rest[0], "memory"), 896);
    let snap = rm.sched.snapshot("default").unwrap();
    let node = snap.nodes.iter().find(|n| n.id == "a").unwrap();
    assert_eq!(node.allocated["vcore"], 2000);
    assert_eq!(node.allocation_count, 2);
}

/// A batch the RM sends in parts under a hold: no allocation run starts
/// while it is held, not even one already due when the hold began, and the
/// run at its end sees all of it (both frameworks get an agent; a run after
/// the first part alone would have given fw1 both).
#[test]
fn no_run_sees_part_of_a_held_batch() {
    let rm = Rm::new(ROLES);
    rm.framework("fw1", "root.r2");
    rm.framework("fw2", "root.r3");
    rm.demand("fw1", false);
    rm.demand("fw2", false);
    rm.agents(&[("a", 2000, 1024), ("b", 2000, 1024)]);
    assert!(rm.leases().is_empty(), "nobody wants offers");
    rm.offers(vec![
        OfferChange::Allocate,
        OfferChange::Hold { held: true },
        OfferChange::Demand {
            application_id: "fw1".to_string(),
            active: true,
        },
    ]);
    assert!(
        rm.held().is_empty(),
        "the due run waits for the batch's end"
    );
    rm.offers(vec![
        OfferChange::Demand {
            application_id: "fw2".to_string(),
            active: true,
        },
        OfferChange::Hold { held: false },
    ]);
    assert_eq!(rm.held().len(), 2, "the held run comes at the batch's end");
    assert_eq!(rm.leases_of("fw1").len(), 1);
    assert_eq!(rm.leases_of("fw2").len(), 1);
}

#[test]
fn suppressed_frameworks_get_no_offers_until_revived() {
    let rm = Rm::new(ROLES);
    rm.framework("fw1", "root.r1");
    rm.framework("fw2", "root.r2");
    rm.demand("fw1", false);
    rm.agents(&[("a", 2000, 1024), ("b", 2000, 1024)]);
    let leases = rm.leases();
    assert_eq!(leases.len(), 2);
    assert!(leases.iter().all(|l| l.application_id == "fw2"));
    // Outstanding offers stay; new resources go to fw1 once it wants them.
    rm.demand("fw1", true);
    rm.agents(&[("c", 2000, 1024)]);
    assert_eq!(rm.leases_of("fw1").len(), 1);
    assert_eq!(rm.leases_of("fw2").len(), 2);
    // A suppressed framework stays Running with nothing held.
    rm.demand("fw2", false);
    for l in rm.leases_of("fw2") {
        rm.decline(&l, Duration::ZERO);
    }
    rm.advance(Duration::from_secs(60));
    let snap = rm.sched.snapshot("default").unwrap();
    assert_eq!(snap.application("fw2").unwrap().state, "Running");
}

#[test]
fn weights_share_agents_two_to_one() {
    let rm = Rm::new(ROLES);
    rm.framework("fw1", "root.r1");
    rm.framework("fw2", "root.r2");
    rm.agents(&[("a", 2000, 1024), ("b", 2000, 1024), ("c", 2000, 1024)]);
    assert_eq!(rm.leases_of("fw1").len(), 2);
    assert_eq!(rm.leases_of("fw2").len(), 1);
}

#[test]
fn quota_limits_trim_offers_and_guarantees_come_first() {
    let rm = Rm::new(ROLES);
    rm.framework("capped", "root.capped");
    rm.agents(&[("a", 2000, 1024)]);
    let l = rm.leases_of("capped");
    assert_eq!(l.len(), 1);
    assert_eq!(quantity(&l[0], "vcore"), 1500);
    assert_eq!(quantity(&l[0], "memory"), 1024);
    // The rest of the agent (500 millicores, no memory) is above the
    // minimum (cpus 0.01), so another framework gets it.
    rm.framework("fw2", "root.r2");
    let rest = rm.leases_of("fw2");
    assert_eq!(rest.len(), 1);
    assert_eq!(quantity(&rest[0], "vcore"), 500);
    // A role below its guarantee comes before a role with less usage.
    rm.framework("g", "root.guaranteed");
    rm.agents(&[("b", 2000, 1024), ("c", 2000, 1024)]);
    assert_eq!(rm.leases_of("g").len(), 2, "{:?}", rm.leases());
}

#[test]
fn remainders_below_the_minimum_are_not_offered() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("tiny", 5, 16), ("ok", 5, 64)]);
    rm.framework("fw1", "root.r2");
    let l = rm.leases();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].node_id, "ok");
}

#[test]
fn agents_and_frameworks_that_leave_take_their_leases() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024), ("b", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    assert_eq!(rm.leases().len(), 2);
    rm.sched
        .update_node(si::NodeRequest {
            nodes: vec![si::NodeInfo {
                node_id: "a".to_string(),
                action: si::node_info::ActionFromRm::Decomission as i32,
                ..Default::default()
            }],
            rm_id: RM.to_string(),
        })
        .unwrap();
    assert_eq!(rm.leases().len(), 1);
    rm.sched
        .update_application(si::ApplicationRequest {
            remove: vec![si::RemoveApplicationRequest {
                application_id: "fw1".to_string(),
                partition_name: "default".to_string(),
            }],
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
    assert!(rm.leases().is_empty());
    let snap = rm.sched.snapshot("default").unwrap();
    assert!(
        snap.queue("root")
            .unwrap()
            .allocated
            .values()
            .all(|&v| v == 0)
    );
    // The agent's remainder goes to a framework that comes later.
    rm.framework("fw2", "root.r2");
    assert_eq!(rm.leases_of("fw2").len(), 1);
}

#[test]
fn resources_that_come_back_wait_for_the_next_run() {
    let rm = Rm::new(ROLES);
    rm.agents(&[("a", 2000, 1024)]);
    rm.framework("fw1", "root.r2");
    let lease = rm.leases_of("fw1").remove(0);
    rm.decline(&lease, Duration::ZERO);
    assert!(rm.held().is_empty(), "no run asked for: nothing offered");
    assert_eq!(rm.leases_of("fw1").len(), 1);
}

#[test]
fn offer_changes_naming_unknown_things_are_rejected_with_reasons() {
    let rm = Rm::new(ROLES);
    rm.demand("nobody", true);
    rm.sched.settle();
    let rec = rm.rec.recorded();
    let reasons: Vec<&str> = rec.rejected_asks().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("nobody"), "{reasons:?}");
}

#[test]
fn a_restricted_node_is_offered_only_to_its_queue_subtree() {
    let rm = Rm::new(ROLES);
    // `res` stands for resources reserved to role `team`; `shared` for anyone's.
    rm.agents(&[("res", 2000, 1024), ("shared", 2000, 1024)]);
    rm.offers(vec![OfferChange::NodeTerms {
        node_id: "res".to_string(),
        queue: Some("root.team".to_string()),
        any_remainder: false,
    }]);
    rm.framework("outsider", "root.r2");
    let leases = rm.leases_of("outsider");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].node_id, "shared");
    // A framework below root.team may take it.
    rm.framework("insider", "root.team.a");
    let leases = rm.leases_of("insider");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].node_id, "res");
    // Lifted: after its lease goes back, anyone may be offered it.
    rm.offers(vec![OfferChange::Demand {
        application_id: "insider".to_string(),
        active: false,
    }]);
    rm.decline(&leases[0], Duration::ZERO);
    rm.offers(vec![OfferChange::NodeTerms {
        node_id: "res".to_string(),
        queue: None,
        any_remainder: false,
    }]);
    rm.framework("other", "root.r2");
    let leases = rm.leases_of("other");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].node_id, "res");
    // A restriction of a node that is not there is refused with a reason.
    rm.offers(vec![OfferChange::NodeTerms {
        node_id: "nowhere".to_string(),
        queue: Some("root.r1".to_string()),
        any_remainder: false,
    }]);
    rm.sched.settle();
    let rejected: Vec<String> = rm
        .rec
        .recorded()
        .rejected_asks()
        .map(|r| r.reason.clone())
        .collect();
    assert!(
        rejected
            .iter()
            .any(|r| r.contains("node nowhere not found")),
        "{rejected:?}"
    );
}

#[test]
fn a_node_with_any_remainder_terms_is_offered_below_the_minimum() {
    let rm = Rm::new(ROLES);
    // Only disk: below the minimum (cpus 0.01 or mem 32).
    rm.sched
        .update_node(si::NodeRequest {
            nodes: vec![si::NodeInfo {
                node_id: "disk-only".to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: Some(res(&[("disk", 1 << 30)])),
                ..Default::default()
            }],
            rm_id: RM.to_string(),
        })
        .unwrap();
    rm.framework("fw1", "root.r2");
    assert!(rm.leases_of("fw1").is_empty(), "below the minimum");
    rm.offers(vec![OfferChange::NodeTerms {
        node_id: "disk-only".to_string(),
        queue: None,
        any_remainder: true,
    }]);
    let leases = rm.leases_of("fw1");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(quantity(&leases[0], "disk"), 1 << 30);
}

#[test]
fn leases_carry_back_the_numbers_the_rm_gave_its_nodes_and_applications() {
    let rm = Rm::new(ROLES);
    let sched = &rm.sched;
    let handle = |n: &str| {
        [(unisched_shim_api::RM_HANDLE.to_string(), n.to_string())]
            .into_iter()
            .collect()
    };
    // Node "a" carries number 7, "b" an unreadable one, "c" none.
    let nodes = [
        ("a", handle("7")),
        ("b", handle("x")),
        ("c", Default::default()),
    ]
    .into_iter()
    .map(|(id, attributes)| si::NodeInfo {
        node_id: id.to_string(),
        action: si::node_info::ActionFromRm::Create as i32,
        attributes,
        schedulable_resource: Some(res(&[("vcore", 1000), ("memory", 512)])),
        ..Default::default()
    })
    .collect();
    sched
        .update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        })
        .unwrap();
    for (id, tags) in [("fw1", handle("42")), ("fw2", Default::default())] {
        sched
            .update_application(si::ApplicationRequest {
                new: vec![si::AddApplicationRequest {
                    application_id: id.to_string(),
                    queue_name: "root.r2".to_string(),
                    partition_name: "default".to_string(),
                    ugi: Some(si::UserGroupInformation {
                        user: "mesos".to_string(),
                        groups: vec![],
                    }),
                    tags,
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }
    rm.demand("fw1", true);
    rm.demand("fw2", true);
    rm.offers(vec![OfferChange::Allocate]);
    sched.settle();
    let recorded = rm.rec.recorded();
    let handles = &recorded.lease_handles;
    assert_eq!(handles.len(), 3, "{handles:?}");
    for (id, node_handle, app_handle) in handles {
        let (node, app) = recorded
            .allocations()
            .find(|a| a.allocation_id == *id)
            .map(|a| (a.node_id.clone(), a.application_id.clone()))
            .expect("the lease on the wire too");
        let expected_node = if node == "a" { 7 } else { 0 };
        let expected_app = if app == "fw1" { 42 } else { 0 };
        assert_eq!(
            (*node_handle, *app_handle),
            (expected_node, expected_app),
            "{node} {app}"
        );
    }
}
