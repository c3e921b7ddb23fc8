//! The benchmark workloads W1–W4 of `spec/performance.md`, as [`Workload`] data.
//!
//! Units: resources are wire units. vcore is in milli-cores on the wire, so a
//! queue guarantee of 10000 wire vcore is written `vcore: 10` in the YAML.

use std::fmt::Write as _;

use super::wire::{app, ask, existing_allocation, node, resource};
use super::{Rng, Workload};

/// The partition every workload uses.
pub const PARTITION: &str = "default";

const GIB: i64 = 1 << 30;

/// W1, YuniKorn's own core benchmark: `nodes` nodes sized so `asks` small asks
/// fit (k = asks/nodes + 1 slots each), two apps in root.a and root.b, each
/// with half the asks, submitted in two calls.
pub fn w1(nodes: usize, asks: usize) -> Workload {
    let mut workload = w1_cluster(nodes, asks);
    let first_half = asks / 2;
    let batch = |app_id: &str, range: std::ops::Range<usize>| {
        range.map(|i| w1_ask(app_id, i)).collect::<Vec<_>>()
    };
    workload.ask_batches = vec![
        batch("app-1", 0..first_half),
        batch("app-2", first_half..asks),
    ];
    workload
}

/// W1's cluster (configuration, the two apps, nodes sized for `asks` asks)
/// without the asks, for a driver that makes its asks as it goes.
pub fn w1_cluster(nodes: usize, asks: usize) -> Workload {
    let config = "\
partitions:
  - name: default
    nodesortpolicy:
      type: fair
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: a
            properties:
              application.sort.policy: fifo
            resources:
              guaranteed:
                memory: 100000
                vcore: 10
          - name: b
            properties:
              application.sort.policy: fifo
            resources:
              guaranteed:
                memory: 1000000
                vcore: 10
"
    .to_string();
    let slots = (asks / nodes.max(1) + 1) as i64;
    let nodes = (0..nodes)
        .map(|i| {
            node(
                format!("node-{i}:1234"),
                &[("vcore", slots), ("memory", 10 * slots)],
            )
        })
        .collect();
    Workload {
        name: "w1".to_string(),
        config,
        partition: PARTITION.to_string(),
        apps: vec![
            app("app-1".to_string(), "root.a", PARTITION, "testuser"),
            app("app-2".to_string(), "root.b", PARTITION, "testuser"),
        ],
        nodes,
        ask_batches: Vec::new(),
        expected_allocations: Some(asks),
    }
}

/// The `i`th W1 ask of `app_id`: memory 10, vcore 1, one allocation.
pub fn w1_ask(app_id: &str, i: usize) -> unisched_si::AllocationAsk {
    ask(
        format!("{app_id}-alloc-{i}"),
        app_id,
        PARTITION,
        &[("vcore", 1), ("memory", 10)],
        0,
    )
}

/// W2, many apps and queues: nodes of 16 vcore / 16 GiB / 110 pods; queues
/// root.a–root.e with `apps_per_queue` apps each; `asks` asks of 10 milli-vcore,
/// 1 MB and one pod spread evenly over the apps, one call per queue.
pub fn w2(nodes: usize, asks: usize, apps_per_queue: usize) -> Workload {
    const QUEUES: [&str; 5] = ["a", "b", "c", "d", "e"];
    let mut config = String::from(
        "partitions:\n  - name: default\n    nodesortpolicy:\n      type: fair\n    queues:\n      - name: root\n        submitacl: \"*\"\n        queues:\n",
    );
    for q in QUEUES {
        let _ = writeln!(config, "          - name: {q}");
    }
    let nodes = (0..nodes)
        .map(|i| {
            node(
                format!("node-{i}"),
                &[("vcore", 16_000), ("memory", 16 * GIB), ("pods", 110)],
            )
        })
        .collect();
    let apps_per_queue = apps_per_queue.max(1);
    let app_count = QUEUES.len() * apps_per_queue;
    let mut apps = Vec::with_capacity(app_count);
    for q in QUEUES {
        for a in 0..apps_per_queue {
            let user = format!("user-{}", a % 10);
            apps.push(app(
                format!("app-{q}-{a}"),
                &format!("root.{q}"),
                PARTITION,
                &user,
            ));
        }
    }
    let mut ask_batches = vec![Vec::new(); QUEUES.len()];
    for i in 0..asks {
        let app_index = i % app_count;
        let app_id = &apps[app_index].application_id;
        ask_batches[app_index / apps_per_queue].push(ask(
            format!("ask-{i}"),
            app_id,
            PARTITION,
            &[("vcore", 10), ("memory", 1_000_000), ("pods", 1)],
            0,
        ));
    }
    Workload {
        name: "w2".to_string(),
        config,
        partition: PARTITION.to_string(),
        apps,
        nodes,
        ask_batches,
        expected_allocations: Some(asks),
    }
}

/// W3, the hard case: binpacking with 80% of the nodes already full (an
/// existing allocation of their whole capacity, so they sort first), `leaves`
/// leaf queues under four parents with small max limits and a per-user limit,
/// mixed priorities. Many asks stay pending on purpose, so the run ends when
/// the core settles.
pub fn w3(nodes: usize, asks: usize, leaves: usize, seed: u64) -> Workload {
    w3_shape(nodes, asks, leaves, seed, false)
}

/// W3 with preemption at work (`bench --workload w3 --preemption`): the same
/// queues, apps and asks, but every leaf is guaranteed 20 vcore,
/// `preemption.delay` is 1 ms, every fourth ask allows preempting others, and
/// 99% of the nodes are full, so the free room (about 1,200 vcore at 5,000
/// nodes) runs out while leaves are still under their guarantee. The asks
/// that may preempt then release filler allocations (the filler queue has no
/// guarantee; they allow preemption, as the Kubernetes shim reports a pod that
/// does not opt out). `bench` plays the RM and confirms each release, so the
/// preempting asks are placed on the nodes they reserved.
pub fn w3_preemption(nodes: usize, asks: usize, leaves: usize, seed: u64) -> Workload {
    let mut w = w3_shape(nodes, asks, leaves, seed, true);
    w.name = "w3+preemption".to_string();
    w
}

fn w3_shape(nodes: usize, asks: usize, leaves: usize, seed: u64, preemption: bool) -> Workload {
    const PARENTS: usize = 4;
    const APPS_PER_LEAF: usize = 4;
    const USERS: usize = 8;
    let leaves = leaves.max(PARENTS);
    let per_parent = leaves.div_ceil(PARENTS);
    let mut rng = Rng::new(seed);
    let mut config = String::from(
        "partitions:\n  - name: default\n    nodesortpolicy:\n      type: binpacking\n    queues:\n      - name: root\n        submitacl: \"*\"\n",
    );
    if preemption {
        config.push_str("        properties:\n          preemption.delay: 1ms\n");
    }
    config.push_str("        queues:\n          - name: filler\n");
    let guarantee = if preemption {
        "                  guaranteed:\n                    vcore: 20\n"
    } else {
        ""
    };
    let full_share = if preemption { 0.99 } else { 0.8 };
    let mut leaf_paths = Vec::with_capacity(leaves);
    for p in 0..PARENTS {
        let _ = write!(
            config,
            "          - name: t{p}\n            limits:\n              - limit: per-user\n                users:\n                  - \"*\"\n                maxresources:\n                  vcore: {}\n            queues:\n",
            per_parent * 4
        );
        for l in 0..per_parent {
            if leaf_paths.len() == leaves {
                break;
            }
            let _ = write!(
                config,
                "              - name: q{l:03}\n                properties:\n                  application.sort.policy: fifo\n                resources:\n                  max:\n                    vcore: 40\n{guarantee}"
            );
            leaf_paths.push(format!("root.t{p}.q{l:03}"));
        }
    }
    let mut apps = vec![app(
        "w3-filler".to_string(),
        "root.filler",
        PARTITION,
        "system",
    )];
    for (li, leaf) in leaf_paths.iter().enumerate() {
        for a in 0..APPS_PER_LEAF {
            let user = format!("user-{}", (li + a) % USERS);
            apps.push(app(format!("app-{li}-{a}"), leaf, PARTITION, &user));
        }
    }
    let capacity = [("vcore", 32_000), ("memory", 128 * GIB)];
    let node_list = (0..nodes)
        .map(|i| {
            let id = format!("node-{i}");
            let used = if rng.chance(full_share) {
                32
            } else {
                rng.below(17) as i64
            };
            let mut n = node(id.clone(), &capacity);
            if used > 0 {
                let size = [("vcore", used * 1000), ("memory", used * 4 * GIB)];
                let mut fill =
                    existing_allocation(format!("fill-{i}"), "w3-filler", PARTITION, &id, &size);
                if preemption {
                    // As the Kubernetes shim sends it for a pod whose
                    // PriorityClass does not opt out; without a policy the
                    // allocation would count as opted out.
                    fill.preemption_policy = Some(unisched_si::PreemptionPolicy {
                        allow_preempt_self: true,
                        allow_preempt_other: false,
                    });
                }
                n.existing_allocations.push(fill);
            }
            n
        })
        .collect();
    let priorities = [0, 5, 10, 50];
    let mut ask_batches = vec![Vec::new(); PARENTS];
    let user_apps = apps.len() - 1;
    for i in 0..asks {
        let app_index = 1 + i % user_apps;
        let app_id = &apps[app_index].application_id;
        let parent = ((app_index - 1) / APPS_PER_LEAF) / per_parent;
        let memory = (1 + rng.below(4) as i64) * GIB;
        let mut a = ask(
            format!("ask-{i}"),
            app_id,
            PARTITION,
            &[("vcore", 1000), ("memory", memory)],
            *rng.pick(&priorities),
        );
        if preemption && i % 4 == 0 {
            a.preemption_policy = Some(unisched_si::PreemptionPolicy {
                allow_preempt_self: true,
                allow_preempt_other: true,
            });
        }
        ask_batches[parent.min(PARENTS - 1)].push(a);
    }
    Workload {
        name: "w3".to_string(),
        config,
        partition: PARTITION.to_string(),
        apps,
        nodes: node_list,
        ask_batches,
        expected_allocations: None,
    }
}

/// W4, a Mesos-style allocation run through the SI: nodes of 24 vcore / 4096
/// memory with 16 vcore occupied, `apps` apps each in its own queue, and one
/// 8-vcore ask per node, so the run places exactly one allocation per node.
pub fn w4(nodes: usize, apps: usize) -> Workload {
    let apps_count = apps.clamp(1, nodes.max(1));
    let mut config = String::from(
        "partitions:\n  - name: default\n    nodesortpolicy:\n      type: fair\n    queues:\n      - name: root\n        submitacl: \"*\"\n        queues:\n",
    );
    let mut app_list = Vec::with_capacity(apps_count);
    for a in 0..apps_count {
        let _ = writeln!(config, "          - name: fw{a:04}");
        app_list.push(app(
            format!("fw-{a}"),
            &format!("root.fw{a:04}"),
            PARTITION,
            "mesos",
        ));
    }
    let node_list = (0..nodes)
        .map(|i| {
            let mut n = node(format!("agent-{i}"), &[("vcore", 24_000), ("memory", 4096)]);
            n.occupied_resource = Some(resource(&[("vcore", 16_000)]));
            n
        })
        .collect();
    let asks = (0..nodes)
        .map(|i| {
            let app_id = &app_list[i % apps_count].application_id;
            ask(
                format!("task-{i}"),
                app_id,
                PARTITION,
                &[("vcore", 8_000), ("memory", 256)],
                0,
            )
        })
        .collect();
    Workload {
        name: "w4".to_string(),
        config,
        partition: PARTITION.to_string(),
        apps: app_list,
        nodes: node_list,
        ask_batches: vec![asks],
        expected_allocations: Some(nodes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantity(r: &Option<unisched_si::Resource>, name: &str) -> i64 {
        r.as_ref()
            .and_then(|r| r.resources.get(name))
            .map_or(0, |q| q.value)
    }

    #[test]
    fn w1_matches_yunikorn_benchmark_shape() {
        let w = w1(500, 10_000);
        assert_eq!(w.nodes.len(), 500);
        assert_eq!(quantity(&w.nodes[0].schedulable_resource, "vcore"), 21);
        assert_eq!(quantity(&w.nodes[0].schedulable_resource, "memory"), 210);
        assert_eq!(w.ask_batches.len(), 2);
        assert_eq!(w.ask_batches[0].len(), 5_000);
        assert_eq!(w.ask_batches[1].len(), 5_000);
        assert_eq!(w.ask_batches[1][0].application_id, "app-2");
        assert_eq!(w.expected_allocations, Some(10_000));
        assert!(w.config.contains("vcore: 10\n"));
        let keys: std::collections::HashSet<_> = w
            .ask_batches
            .iter()
            .flatten()
            .map(|a| &a.allocation_key)
            .collect();
        assert_eq!(keys.len(), 10_000);
    }

    #[test]
    fn w2_spreads_asks_over_queues_and_apps() {
        let w = w2(5_000, 50_000, 80);
        assert_eq!(w.apps.len(), 400);
        assert_eq!(w.ask_batches.len(), 5);
        assert!(w.ask_batches.iter().all(|b| b.len() == 10_000));
        assert_eq!(quantity(&w.nodes[0].schedulable_resource, "pods"), 110);
        let per_app = w
            .ask_batches
            .iter()
            .flatten()
            .filter(|a| a.application_id == "app-c-7")
            .count();
        assert_eq!(per_app, 125);
    }

    #[test]
    fn w3_prefills_most_nodes_and_limits_leaves() {
        let w = w3(1_000, 12_000, 120, 1);
        let full = w
            .nodes
            .iter()
            .filter(|n| {
                n.existing_allocations
                    .first()
                    .is_some_and(|a| quantity(&a.resource_per_alloc, "vcore") == 32_000)
            })
            .count();
        assert!((700..900).contains(&full), "{full} full nodes");
        assert_eq!(w.config.matches("max:").count(), 120);
        assert!(w.config.contains("binpacking"));
        assert_eq!(w.ask_count(), 12_000);
        assert_eq!(w.apps.len(), 1 + 120 * 4);
    }

    #[test]
    fn w3_preemption_guarantees_leaves_and_lets_a_quarter_preempt() {
        let w = w3_preemption(1_000, 12_000, 120, 1);
        assert_eq!(w.config.matches("guaranteed:").count(), 120);
        assert!(w.config.contains("preemption.delay: 1ms"));
        let preempting = w
            .ask_batches
            .iter()
            .flatten()
            .filter(|a| {
                a.preemption_policy
                    .as_ref()
                    .is_some_and(|p| p.allow_preempt_other)
            })
            .count();
        assert_eq!(preempting, 3_000);
        let full = w
            .nodes
            .iter()
            .filter(|n| {
                n.existing_allocations
                    .first()
                    .is_some_and(|a| quantity(&a.resource_per_alloc, "vcore") == 32_000)
            })
            .count();
        assert!(full >= 970, "{full} full nodes");
    }

    #[test]
    fn w4_has_one_ask_per_node_and_a_queue_per_app() {
        let w = w4(10_000, 1_000);
        assert_eq!(w.ask_count(), 10_000);
        assert_eq!(w.apps.len(), 1_000);
        assert_eq!(w.config.matches("- name: fw").count(), 1_000);
        assert_eq!(quantity(&w.nodes[9].occupied_resource, "vcore"), 16_000);
    }
}
