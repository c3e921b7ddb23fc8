//! Integration tests of the core through `SchedulerApi`, with a recording RM.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_shim_api::recording::RecordingCallback;
use unisched_shim_api::{SchedulerApi, SchedulerError};
use unisched_si as si;

const RM: &str = "rm-1";

fn res(pairs: &[(&str, i64)]) -> Option<si::Resource> {
    Some(si::Resource {
        resources: pairs
            .iter()
            .map(|&(n, v)| (n.to_string(), si::Quantity { value: v }))
            .collect(),
    })
}

struct Harness {
    sched: Scheduler,
    rm: Arc<RecordingCallback>,
    clock: Arc<ManualClock>,
}

impl Harness {
    fn new(config: &str) -> Self {
        Self::with_rm(config, RecordingCallback::new(), HashMap::new())
    }

    fn with_rm(config: &str, rm: RecordingCallback, extra: HashMap<String, String>) -> Self {
        let clock = ManualClock::new(1_000_000_000);
        let sched = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let rm = Arc::new(rm);
        sched
            .register_resource_manager(
                si::RegisterResourceManagerRequest {
                    rm_id: RM.to_string(),
                    policy_group: "queues".to_string(),
                    config: config.to_string(),
                    extra_config: extra,
                    ..Default::default()
                },
                rm.clone(),
            )
            .expect("register");
        Self { sched, rm, clock }
    }

    fn nodes(&self, nodes: &[(&str, i64, i64)]) {
        let nodes = nodes
            .iter()
            .map(|&(id, mem, vcore)| si::NodeInfo {
                node_id: id.to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: res(&[("memory", mem), ("vcore", vcore)]),
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

    fn node_action(&self, id: &str, action: si::node_info::ActionFromRm) {
        self.sched
            .update_node(si::NodeRequest {
                nodes: vec![si::NodeInfo {
                    node_id: id.to_string(),
                    action: action as i32,
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
            })
            .unwrap();
    }

    fn app(&self, id: &str, queue: &str) {
        self.sched
            .update_application(si::ApplicationRequest {
                new: vec![si::AddApplicationRequest {
                    application_id: id.to_string(),
                    queue_name: queue.to_string(),
                    partition_name: "default".to_string(),
                    ugi: Some(si::UserGroupInformation {
                        user: "alice".to_string(),
                        groups: vec![],
                    }),
                    ..Default::default()
                }],
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    fn asks(&self, app: &str, prefix: &str, n: usize, mem: i64, vcore: i64) {
        let asks = (0..n)
            .map(|i| si::AllocationAsk {
                allocation_key: format!("{prefix}-{i}"),
                application_id: app.to_string(),
                partition_name: "default".to_string(),
                resource_ask: res(&[("memory", mem), ("vcore", vcore)]),
                max_allocations: 1,
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

    fn release(&self, rel: si::AllocationRelease) {
        self.sched
            .update_allocation(si::AllocationRequest {
                releases: Some(si::AllocationReleasesRequest {
                    allocations_to_release: vec![rel],
                    ..Default::default()
                }),
                rm_id: RM.to_string(),
                ..Default::default()
            })
            .unwrap();
    }

    fn snapshot(&self) -> unisched_core::PartitionSnapshot {
        self.sched.settle();
        self.sched.snapshot("default").expect("partition default")
    }
}

const TWO_LEAVES: &str = "
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {memory: 150, vcore: 20}
          - name: b
";

#[test]
fn asks_are_allocated_and_reported_in_one_batch() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 10_000), ("n2", 100, 10_000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 10, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 10);
    let rec = h.rm.recorded();
    assert_eq!(rec.allocations().count(), 10);
    assert_eq!(rec.app_states("app-1"), ["Accepted", "Running"]);
    assert_eq!(rec.accepted_nodes().count(), 2);
    let q = snap.queue("root.b").unwrap();
    assert_eq!(q.allocated["memory"], 100);
    assert_eq!(q.allocated["vcore"], 10_000);
    // fair node sort spreads: 5 on each node
    for n in &snap.nodes {
        assert_eq!(n.allocation_count, 5, "{n:?}");
    }
}

#[test]
fn queue_max_limits_allocations() {
    // Acceptance scenario 1 in raw units: leaf max memory 150.
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 100_000), ("n2", 100, 100_000)]);
    h.app("app-1", "root.a");
    h.asks("app-1", "small", 2, 10, 1000);
    assert_eq!(h.snapshot().allocations.len(), 2);
    h.asks("app-1", "half", 2, 50, 1000);
    h.asks("app-1", "full", 2, 100, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 4);
    assert_eq!(snap.queue("root.a").unwrap().allocated["memory"], 120);
    assert_eq!(snap.queue("root.a").unwrap().pending["memory"], 200);
}

#[test]
fn release_by_key_and_by_app_and_completing() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 100_000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 4, 10, 1000);
    assert_eq!(h.snapshot().allocations.len(), 4);
    h.release(si::AllocationRelease {
        partition_name: "default".to_string(),
        application_id: "app-1".to_string(),
        allocation_key: "k-0".to_string(),
        termination_type: si::TerminationType::StoppedByRm as i32,
        ..Default::default()
    });
    assert_eq!(h.snapshot().allocations.len(), 3);
    h.release(si::AllocationRelease {
        partition_name: "default".to_string(),
        application_id: "app-1".to_string(),
        ..Default::default()
    });
    let snap = h.snapshot();
    assert!(snap.allocations.is_empty());
    assert!(snap.queue("root").unwrap().allocated.is_empty());
    assert_eq!(snap.application("app-1").unwrap().state, "Completing");
    assert_eq!(h.rm.recorded().released().count(), 4);
    h.clock.advance(Duration::from_secs(31));
    h.sched.wake();
    let snap = h.snapshot();
    assert_eq!(snap.application("app-1").unwrap().state, "Completed");
    assert_eq!(
        h.rm.recorded().app_states("app-1"),
        ["Accepted", "Running", "Completing", "Completed"]
    );
}

#[test]
fn bad_input_is_rejected_with_reasons() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 100_000)]);
    h.app("app-1", "root.b");
    h.app("app-1", "root.b"); // duplicate
    h.app("app-2", "root.nope"); // unknown queue
    h.app("app-3", "root"); // parent queue
    h.asks("ghost", "g", 1, 10, 1000); // unknown app
    h.sched
        .update_allocation(si::AllocationRequest {
            asks: vec![si::AllocationAsk {
                allocation_key: "neg".to_string(),
                application_id: "app-1".to_string(),
                resource_ask: res(&[("memory", -5)]),
                ..Default::default()
            }],
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
    h.node_action("n-unknown", si::node_info::ActionFromRm::Update);
    h.sched
        .update_node(si::NodeRequest {
            nodes: vec![si::NodeInfo {
                node_id: "n1".to_string(),
                action: 42,
                ..Default::default()
            }],
            rm_id: RM.to_string(),
        })
        .unwrap();
    h.release(si::AllocationRelease {
        partition_name: "default".to_string(),
        application_id: "app-1".to_string(),
        allocation_id: "nothing-0".to_string(),
        ..Default::default()
    });
    let snap = h.snapshot();
    let rec = h.rm.recorded();
    let apps: Vec<_> = rec
        .rejected_applications()
        .map(|r| r.reason.clone())
        .collect();
    assert_eq!(apps.len(), 3, "{apps:?}");
    assert!(apps[0].contains("already exists"), "{apps:?}");
    let asks: Vec<_> = rec.rejected_asks().map(|r| r.reason.clone()).collect();
    assert_eq!(asks.len(), 2, "{asks:?}");
    assert!(asks.iter().any(|r| r.contains("not found")), "{asks:?}");
    assert!(asks.iter().any(|r| r.contains("negative")), "{asks:?}");
    let nodes: Vec<_> = rec.rejected_nodes().map(|r| r.reason.clone()).collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(
        nodes.iter().any(|r| r.contains("unknown node action")),
        "{nodes:?}"
    );
    // A release of an allocation the core does not have is ignored, as
    // upstream ignores it (it races with the core's own releases).
    assert_eq!(rec.rejected_allocations().count(), 0);
    assert_eq!(rec.released().count(), 0);
    // Nothing else changed.
    assert_eq!(snap.applications.len(), 1);
    assert!(snap.allocations.is_empty());
    assert_eq!(snap.nodes.len(), 1);
    // Unregistered RM: an error from the call itself.
    let err = h
        .sched
        .update_node(si::NodeRequest {
            nodes: vec![],
            rm_id: "nobody".to_string(),
        })
        .unwrap_err();
    assert!(matches!(err, SchedulerError::UnknownResourceManager { .. }));
}

#[test]
fn drain_and_decommission() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 100_000), ("n2", 100, 100_000)]);
    h.node_action("n2", si::node_info::ActionFromRm::DrainNode);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 4, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.node("n1").unwrap().allocation_count, 4);
    assert_eq!(snap.node("n2").unwrap().allocation_count, 0);
    h.node_action("n2", si::node_info::ActionFromRm::DrainToSchedulable);
    h.asks("app-1", "j", 2, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.node("n2").unwrap().allocation_count, 2);
    h.node_action("n1", si::node_info::ActionFromRm::Decomission);
    let snap = h.snapshot();
    assert!(snap.node("n1").is_none());
    assert_eq!(snap.allocations.len(), 2);
    assert_eq!(snap.queue("root.b").unwrap().allocated["memory"], 20);
    let released: Vec<_> = h.rm.recorded().released().cloned().collect();
    assert_eq!(released.len(), 4);
    assert!(
        released
            .iter()
            .all(|r| r.termination_type == si::TerminationType::StoppedByRm as i32)
    );
}

#[test]
fn predicates_are_called_only_when_asked_for() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 100, 100_000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 2, 10, 1000);
    h.snapshot();
    assert!(h.rm.recorded().predicates.is_empty());

    let rm = RecordingCallback::with_predicates(|args| args.node_id == "n2");
    let extra = HashMap::from([(
        unisched_shim_api::PREDICATES_EXTRA_CONFIG.to_string(),
        "true".to_string(),
    )]);
    let h = Harness::with_rm(TWO_LEAVES, rm, extra);
    h.nodes(&[("n1", 100, 100_000), ("n2", 100, 100_000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 2, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.node("n2").unwrap().allocation_count, 2);
    assert!(!h.rm.recorded().predicates.is_empty());
}

#[test]
fn a_panicking_callback_does_not_stop_scheduling() {
    struct Panicky(RecordingCallback);
    impl unisched_shim_api::ResourceManagerCallback for Panicky {
        fn update_allocation(
            &self,
            r: si::AllocationResponse,
        ) -> unisched_shim_api::CallbackResult<()> {
            self.0.update_allocation(r)?;
            panic!("RM bug");
        }
        fn update_application(
            &self,
            r: si::ApplicationResponse,
        ) -> unisched_shim_api::CallbackResult<()> {
            self.0.update_application(r)
        }
        fn update_node(&self, r: si::NodeResponse) -> unisched_shim_api::CallbackResult<()> {
            self.0.update_node(r)
        }
        fn predicates(&self, _: si::PredicatesArgs) -> unisched_shim_api::CallbackResult<()> {
            panic!("predicates bug")
        }
        fn resync_scheduler_cache(
            &self,
            a: si::ReSyncSchedulerCacheArgs,
        ) -> unisched_shim_api::CallbackResult<()> {
            self.0.resync_scheduler_cache(a)
        }
        fn send_event(&self, e: Vec<si::EventRecord>) -> unisched_shim_api::CallbackResult<()> {
            self.0.send_event(e)
        }
        fn update_container_scheduling_state(
            &self,
            r: si::UpdateContainerSchedulingStateRequest,
        ) -> unisched_shim_api::CallbackResult<()> {
            self.0.update_container_scheduling_state(r)
        }
        fn update_configuration(
            &self,
            r: si::UpdateConfigurationRequest,
        ) -> unisched_shim_api::CallbackResult<si::UpdateConfigurationResponse> {
            self.0.update_configuration(r)
        }
    }
    let clock = ManualClock::new(0);
    let sched = Scheduler::start(SchedulerOptions {
        clock,
        ..Default::default()
    });
    let rm = Arc::new(Panicky(RecordingCallback::new()));
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                config: TWO_LEAVES.to_string(),
                ..Default::default()
            },
            rm.clone(),
        )
        .unwrap();
    let h = Harness {
        sched,
        rm: Arc::new(RecordingCallback::new()),
        clock: ManualClock::new(0),
    };
    h.nodes(&[("n1", 100, 100_000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "k", 2, 10, 1000);
    h.snapshot();
    h.asks("app-1", "j", 2, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 4);
    assert_eq!(rm.0.allocation_count(), 4);
}

#[test]
fn user_limit_blocks_the_second_app_of_the_same_user() {
    // Acceptance scenario 12: a user limit of 3 vcore on the leaf.
    let config = "
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: leaf
            limits:
              - limit: per user
                users: ['*']
                maxresources: {vcore: 3}
";
    let h = Harness::new(config);
    h.nodes(&[("n1", 1000, 100_000)]);
    h.app("app-1", "root.leaf");
    h.asks("app-1", "a", 1, 10, 3000);
    assert_eq!(h.snapshot().allocations.len(), 1);
    h.app("app-2", "root.leaf");
    h.asks("app-2", "b", 1, 10, 3000);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 1, "alice is at her 3 vcore limit");
    assert_eq!(snap.application("app-2").unwrap().state, "Accepted");
    h.release(si::AllocationRelease {
        partition_name: "default".to_string(),
        application_id: "app-1".to_string(),
        ..Default::default()
    });
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 1);
    assert_eq!(snap.allocations[0].application_id, "app-2");
}

#[test]
fn queue_max_applications_holds_back_a_second_app() {
    let config = "
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: parent
            maxapplications: 1
            queues:
              - name: leaf
                maxapplications: 1
";
    let h = Harness::new(config);
    h.nodes(&[("n1", 1000, 100_000)]);
    h.app("app-1", "root.parent.leaf");
    h.asks("app-1", "a", 1, 10, 1000);
    h.app("app-2", "root.parent.leaf");
    h.asks("app-2", "b", 1, 10, 1000);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 1);
    assert_eq!(snap.application("app-1").unwrap().state, "Running");
    assert_eq!(snap.application("app-2").unwrap().state, "Accepted");
}

/// Registers node `id` with `size`.
fn typed_node(h: &Harness, id: &str, size: &[(&str, i64)]) {
    let node = si::NodeInfo {
        node_id: id.to_string(),
        action: si::node_info::ActionFromRm::Create as i32,
        schedulable_resource: res(size),
        ..Default::default()
    };
    h.sched
        .update_node(si::NodeRequest {
            nodes: vec![node],
            rm_id: RM.to_string(),
        })
        .unwrap();
}

/// Three asks of `size` for `app`, keys `prefix-0..2`, in one call.
fn typed_asks(h: &Harness, app: &str, prefix: &str, size: &[(&str, i64)]) {
    let asks = (0..3)
        .map(|i| si::AllocationAsk {
            allocation_key: format!("{prefix}-{i}"),
            application_id: app.to_string(),
            partition_name: "default".to_string(),
            resource_ask: res(size),
            max_allocations: 1,
            ..Default::default()
        })
        .collect();
    h.sched
        .update_allocation(si::AllocationRequest {
            asks,
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
}

/// The hot path does its arithmetic over the resource types seen so far only:
/// a type first named after scheduling started (nodes, then asks, then a
/// queue max with a third and a fourth type) must still count everywhere.
#[test]
fn resource_types_named_late_are_enforced() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[("n1", 1000, 1000)]);
    h.app("app-1", "root.b");
    h.asks("app-1", "plain", 2, 10, 10);
    assert_eq!(h.snapshot().allocations.len(), 2);
    // A node with 2 gpus, then asks for 1 gpu each: only two fit, on it.
    fn with_type(name: &'static str, amount: i64) -> [(&'static str, i64); 3] {
        [("memory", 1000), ("vcore", 1000), (name, amount)]
    }
    fn one_of(name: &'static str) -> [(&'static str, i64); 3] {
        [("memory", 1), ("vcore", 1), (name, 1)]
    }
    typed_node(&h, "g1", &with_type("gpu", 2));
    typed_asks(&h, "app-1", "g", &one_of("gpu"));
    let snap = h.snapshot();
    let on_gpu = snap
        .allocations
        .iter()
        .filter(|a| a.node_id == "g1")
        .count();
    assert_eq!(snap.allocations.len(), 4, "{:?}", snap.allocations);
    assert_eq!(on_gpu, 2);
    let q = snap.queue("root.b").unwrap();
    assert_eq!(q.allocated["gpu"], 2);
    assert_eq!(q.pending["gpu"], 1);
    // A queue max on a type nobody has asked for yet, then asks for it.
    let limited = TWO_LEAVES.replace(
        "max: {memory: 150, vcore: 20}",
        "max: {memory: 150, vcore: 20, fpga: 1}",
    );
    h.sched.set_config(RM, &limited).unwrap();
    h.app("app-2", "root.a");
    typed_node(&h, "f1", &with_type("fpga", 8));
    typed_asks(&h, "app-2", "f", &one_of("fpga"));
    let snap = h.snapshot();
    let q = snap.queue("root.a").unwrap();
    assert_eq!(q.allocated["fpga"], 1, "the queue max allows one fpga");
    assert_eq!(q.pending["fpga"], 2);
    let f1 = snap.nodes.iter().find(|n| n.id == "f1").unwrap();
    assert_eq!(f1.allocation_count, 1);
}

/// Found by the si_requests fuzz target: an RM id with a NUL byte became the
/// name of its callback thread, which std refuses with a panic, and the
/// scheduling loop died with it.
#[test]
fn an_rm_id_with_control_characters_does_not_stop_the_scheduler() {
    let weird = "rm\u{0}-1\n";
    let sched = Scheduler::start(SchedulerOptions {
        clock: ManualClock::new(0),
        ..Default::default()
    });
    let rm = Arc::new(RecordingCallback::new());
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: weird.to_string(),
                config: TWO_LEAVES.to_string(),
                ..Default::default()
            },
            rm.clone(),
        )
        .expect("register");
    sched
        .update_node(si::NodeRequest {
            nodes: vec![si::NodeInfo {
                node_id: "n1".to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: res(&[("memory", 100), ("vcore", 1000)]),
                ..Default::default()
            }],
            rm_id: weird.to_string(),
        })
        .expect("update_node");
    sched.settle();
    let snap = sched.snapshot("default").expect("partition default");
    assert_eq!(snap.nodes.len(), 1);
    assert_eq!(rm.recorded().accepted_nodes().count(), 1);
}

#[test]
fn thread_names_lose_their_control_characters() {
    let name = unisched_core::scheduler::thread_name("p-", "a\u{0}b\tc");
    assert_eq!(name, "p-a?b?c");
}

#[test]
fn nodes_set_aside_as_too_small_come_back_when_smaller_asks_arrive() {
    let h = Harness::new(TWO_LEAVES);
    h.nodes(&[
        ("n1", 30, 1000),
        ("n2", 30, 1000),
        ("n3", 10, 1000),
        ("n4", 10, 1000),
    ]);
    h.app("app-1", "root.b");
    // Fits no node: every node is set aside as exhausted.
    h.asks("app-1", "big", 1, 50, 10);
    assert_eq!(h.snapshot().allocations.len(), 0);
    // The floor drops to 20: n1 and n2 come back, n3 and n4 stay aside.
    h.asks("app-1", "mid", 2, 20, 10);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 2);
    for n in ["n1", "n2"] {
        assert_eq!(snap.node(n).unwrap().allocation_count, 1, "{n}");
    }
    // The floor drops to 10: every node has room for one more.
    h.asks("app-1", "small", 4, 10, 10);
    let snap = h.snapshot();
    assert_eq!(snap.allocations.len(), 6);
    for n in ["n1", "n2", "n3", "n4"] {
        let node = snap.node(n).unwrap();
        assert_eq!(
            node.allocated["memory"], node.capacity["memory"],
            "{n}: {node:?}"
        );
    }
    assert_eq!(snap.queue("root.b").unwrap().pending["memory"], 50);
}
