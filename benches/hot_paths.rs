//! Criterion benches of the scheduling loop's hot pieces on a partition built
//! the way the loop builds it: the node index update every allocation and
//! release makes, the re-keying of an application and its queues (queue and
//! application ordering), and the headroom check up a limited queue path.
//! Throughput is in operations, so results read as operations per second.

use std::fmt::Write as _;

use criterion::{Criterion, Throughput, criterion_main};
use unisched::workload::wire;
use unisched_core::scheduler::bench_support::Fixture;

/// 100 leaves under 10 parents, each with a max, fair sorting at every level,
/// and `nodes` nodes of 64 vcore: W3's shape of queue tree.
fn fixture(nodes: usize) -> Fixture {
    let mut config = String::from(
        "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n",
    );
    for p in 0..10 {
        let _ = write!(
            config,
            "          - name: p{p}\n            resources:\n              max: {{vcore: 10000}}\n            queues:\n"
        );
        for l in 0..10 {
            let _ = write!(
                config,
                "              - name: l{l}\n                properties:\n                  application.sort.policy: fair\n                resources:\n                  guaranteed: {{vcore: 50}}\n                  max: {{vcore: 1000}}\n"
            );
        }
    }
    let nodes = (0..nodes)
        .map(|i| {
            wire::node(
                format!("node-{i}"),
                &[("vcore", 64_000), ("memory", 1 << 36)],
            )
        })
        .collect();
    let apps = (0..1_000)
        .map(|i| {
            let queue = format!("root.p{}.l{}", i % 10, (i / 10) % 10);
            wire::app(format!("app-{i}"), &queue, "default", "bench")
        })
        .collect();
    // One pending ask per app keeps every app and queue in the orderings.
    let asks = (0..1_000)
        .map(|i| {
            wire::ask(
                format!("ask-{i}"),
                &format!("app-{i}"),
                "default",
                &[("vcore", 1_000), ("memory", 1 << 20)],
                0,
            )
        })
        .collect();
    Fixture::new(
        &config,
        nodes,
        apps,
        asks,
        &[("vcore", 1_000), ("memory", 1 << 20)],
    )
    .expect("the bench partition builds")
}

fn hot_paths(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    group.throughput(Throughput::Elements(1));
    for nodes in [500, 5_000, 50_000] {
        let mut f = fixture(nodes);
        let mut i = 0usize;
        group.bench_function(format!("node_index_update_{nodes}_nodes"), |b| {
            b.iter(|| {
                i = i.wrapping_add(7919);
                f.node_index_update(i);
            });
        });
    }
    let mut f = fixture(500);
    let mut i = 0usize;
    group.bench_function("queue_app_reorder_1000_apps_100_leaves", |b| {
        b.iter(|| {
            i = i.wrapping_add(7);
            f.queue_order_update(i);
        });
    });
    let mut i = 0usize;
    group.bench_function("headroom_depth_3", |b| {
        b.iter(|| {
            i = i.wrapping_add(7);
            std::hint::black_box(f.headroom(i))
        });
    });
    group.finish();
    let mut group = c.benchmark_group("pass");
    group.throughput(Throughput::Elements(1));
    for backlog in [1_000, 100_000] {
        let mut f = at_max(backlog);
        let mut now = 1;
        group.bench_function(format!("queue_at_max_backlog_{backlog}"), |b| {
            b.iter(|| {
                now += 1;
                std::hint::black_box(f.schedule_pass(now))
            });
        });
    }
    group.finish();
}

/// One leaf at its max (10 vcore, used up by the first asks) whose one
/// application has `backlog` one-vcore asks waiting, on 100 nodes.
fn at_max(backlog: usize) -> Fixture {
    let config = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: a\n            resources:\n              max: {vcore: 10}\n";
    let nodes = (0..100)
        .map(|i| {
            wire::node(
                format!("node-{i}"),
                &[("vcore", 64_000), ("memory", 1 << 36)],
            )
        })
        .collect();
    let apps = vec![wire::app("app-0".to_string(), "root.a", "default", "bench")];
    let asks = (0..backlog + 10)
        .map(|i| {
            wire::ask(
                format!("ask-{i}"),
                "app-0",
                "default",
                &[("vcore", 1_000), ("memory", 1 << 20)],
                0,
            )
        })
        .collect();
    let mut f = Fixture::new(config, nodes, apps, asks, &[("vcore", 1_000)])
        .expect("the bench partition builds");
    // The first pass fills the queue; the bench measures the ones after.
    f.schedule_pass(1);
    f
}

mod groups {
    criterion::criterion_group!(benches, super::hot_paths);
}
criterion_main!(groups::benches);
