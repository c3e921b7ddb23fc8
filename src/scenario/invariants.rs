//! Partition invariants checked after every step (unless a scenario opts out):
//! the health-check rules of the spec plus the bookkeeping that ties queues,
//! applications, nodes and allocations together.

use std::collections::{BTreeMap, BTreeSet};

use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

use super::expect::Checks;
use super::quantity::render_resources;

fn add(into: &mut ResourceMap, from: &ResourceMap) {
    for (name, value) in from {
        *into.entry(name.clone()).or_insert(0) += value;
    }
}

/// Equal as sparse resources: a missing type equals zero.
fn same(a: &ResourceMap, b: &ResourceMap) -> bool {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .all(|n| a.get(n).copied().unwrap_or(0) == b.get(n).copied().unwrap_or(0))
}

fn equal(
    out: &mut Checks,
    subject: impl FnOnce() -> String,
    expected: &ResourceMap,
    actual: &ResourceMap,
) {
    out.check_lazy(same(expected, actual), || {
        (
            subject(),
            render_resources(expected),
            render_resources(actual),
        )
    });
}

fn not_negative(out: &mut Checks, subject: impl FnOnce() -> String, resources: &ResourceMap) {
    let ok = resources.values().all(|v| *v >= 0);
    out.check_lazy(ok, || {
        (
            subject(),
            "no negative quantity".to_owned(),
            render_resources(resources),
        )
    });
}

fn equal_count(out: &mut Checks, subject: impl FnOnce() -> String, expected: usize, actual: usize) {
    out.check_lazy(expected == actual, || (subject(), expected, actual));
}

/// Checks the invariants of one partition snapshot.
pub fn check(snapshot: &PartitionSnapshot, out: &mut Checks) {
    let mut total = ResourceMap::new();
    let mut by_node: BTreeMap<&str, (ResourceMap, usize)> = BTreeMap::new();
    // Per application: real allocations, placeholders, count.
    let mut by_app: BTreeMap<&str, (ResourceMap, ResourceMap, usize)> = BTreeMap::new();
    let mut by_queue: BTreeMap<&str, ResourceMap> = BTreeMap::new();
    // Sets of what exists, so each allocation is looked up in O(log n): the
    // soak runs this after every step of long runs.
    let nodes: BTreeSet<&str> = snapshot.nodes.iter().map(|n| n.id.as_str()).collect();
    let apps: BTreeSet<&str> = snapshot
        .applications
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    let queues: BTreeSet<&str> = snapshot.queues.iter().map(|q| q.path.as_str()).collect();
    for alloc in &snapshot.allocations {
        let orphan = !nodes.contains(alloc.node_id.as_str())
            || !apps.contains(alloc.application_id.as_str())
            || !queues.contains(alloc.queue.as_str());
        out.check_lazy(!orphan, || {
            (
                format!(
                    "allocation {} ({})",
                    alloc.allocation_id, alloc.allocation_key
                ),
                "its node, app and queue exist",
                format!(
                    "node {}, app {}, queue {}",
                    alloc.node_id, alloc.application_id, alloc.queue
                ),
            )
        });
        let node = by_node.entry(&alloc.node_id).or_default();
        add(&mut node.0, &alloc.resource);
        node.1 += 1;
        let app = by_app.entry(&alloc.application_id).or_default();
        add(
            if alloc.placeholder {
                &mut app.1
            } else {
                &mut app.0
            },
            &alloc.resource,
        );
        app.2 += 1;
        add(by_queue.entry(&alloc.queue).or_default(), &alloc.resource);
    }
    let empty = (ResourceMap::new(), 0);
    for node in &snapshot.nodes {
        add(&mut total, &node.capacity);
        let (allocated, count) = by_node.get(node.id.as_str()).unwrap_or(&empty);
        equal(
            out,
            || format!("node {} allocated = sum of its allocations", node.id),
            allocated,
            &node.allocated,
        );
        equal_count(
            out,
            || format!("node {} allocation count", node.id),
            *count,
            node.allocation_count,
        );
        let mut used = node.allocated.clone();
        add(&mut used, &node.occupied);
        add(&mut used, &node.available);
        equal(
            out,
            || {
                format!(
                    "node {} capacity = allocated + occupied + available",
                    node.id
                )
            },
            &node.capacity,
            &used,
        );
        not_negative(
            out,
            || format!("node {} allocated", node.id),
            &node.allocated,
        );
    }
    equal(
        out,
        || "partition total = sum of node capacities".to_owned(),
        &total,
        &snapshot.total_capacity,
    );
    let none = (ResourceMap::new(), ResourceMap::new(), 0);
    for app in &snapshot.applications {
        let (allocated, placeholders, count) = by_app.get(app.id.as_str()).unwrap_or(&none);
        equal(
            out,
            || format!("app {} allocated = sum of its real allocations", app.id),
            allocated,
            &app.allocated,
        );
        equal(
            out,
            || format!("app {} placeholder = sum of its placeholders", app.id),
            placeholders,
            &app.placeholder,
        );
        equal_count(
            out,
            || format!("app {} allocation count", app.id),
            *count,
            app.allocation_count,
        );
        not_negative(out, || format!("app {} pending", app.id), &app.pending);
    }
    check_queues(snapshot, &by_queue, out);
}

/// A queue's allocation is the sum of its own allocations and its children's.
fn check_queues(
    snapshot: &PartitionSnapshot,
    by_queue: &BTreeMap<&str, ResourceMap>,
    out: &mut Checks,
) {
    for queue in &snapshot.queues {
        let prefix = format!("{}.", queue.path);
        let mut expected = ResourceMap::new();
        for (path, resources) in by_queue {
            if *path == queue.path || path.starts_with(&prefix) {
                add(&mut expected, resources);
            }
        }
        equal(
            out,
            || {
                format!(
                    "queue {} allocated = sum of allocations below it",
                    queue.path
                )
            },
            &expected,
            &queue.allocated,
        );
        not_negative(
            out,
            || format!("queue {} allocated", queue.path),
            &queue.allocated,
        );
        not_negative(
            out,
            || format!("queue {} pending", queue.path),
            &queue.pending,
        );
    }
}

#[cfg(test)]
mod tests {
    use unisched_core::snapshot::{
        AllocationSnapshot, ApplicationSnapshot, NodeSnapshot, QueueSnapshot,
    };

    use super::*;
    use crate::scenario::report::StepRef;

    fn res(memory: i64) -> ResourceMap {
        [("memory".to_owned(), memory)].into_iter().collect()
    }

    fn snapshot(node_allocated: i64) -> PartitionSnapshot {
        PartitionSnapshot {
            total_capacity: res(100),
            queues: vec![
                QueueSnapshot {
                    path: "root".into(),
                    allocated: res(10),
                    ..Default::default()
                },
                QueueSnapshot {
                    path: "root.a".into(),
                    allocated: res(10),
                    ..Default::default()
                },
            ],
            applications: vec![ApplicationSnapshot {
                id: "app".into(),
                allocated: res(10),
                allocation_count: 1,
                ..Default::default()
            }],
            nodes: vec![NodeSnapshot {
                id: "n".into(),
                capacity: res(100),
                allocated: res(node_allocated),
                available: res(100 - node_allocated),
                allocation_count: 1,
                ..Default::default()
            }],
            allocations: vec![AllocationSnapshot {
                allocation_key: "k".into(),
                allocation_id: "k-0".into(),
                application_id: "app".into(),
                queue: "root.a".into(),
                node_id: "n".into(),
                resource: res(10),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn failures(snapshot: &PartitionSnapshot) -> Vec<String> {
        let mut checks = Checks::new(StepRef {
            index: 1,
            kind: "expect",
            label: None,
        });
        check(snapshot, &mut checks);
        checks.failures.into_iter().map(|f| f.subject).collect()
    }

    #[test]
    fn consistent_bookkeeping_passes() {
        assert_eq!(failures(&snapshot(10)), Vec::<String>::new());
    }

    #[test]
    fn node_usage_that_disagrees_with_allocations_fails() {
        assert_eq!(
            failures(&snapshot(20)),
            vec!["node n allocated = sum of its allocations".to_owned()]
        );
    }
}
