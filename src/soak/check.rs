//! Checks on one snapshot after a step: the scenario invariants (health check of
//! spec section 4 and the bookkeeping that ties queues, apps, nodes and
//! allocations together), queue totals against their children and apps, limits
//! respected by allocations made in the step, and liveness.

use std::collections::BTreeMap;

use unisched_core::PartitionSnapshot;
use unisched_core::snapshot::{QueueSnapshot, ResourceMap};

use crate::scenario::expect::Checks;
use crate::scenario::invariants;
use crate::scenario::report::StepRef;

use super::callback::predicate_allows;

fn get(m: &ResourceMap, name: &str) -> i64 {
    m.get(name).copied().unwrap_or(0)
}

fn sum_into(into: &mut ResourceMap, from: &ResourceMap) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
    into.retain(|_, v| *v != 0);
}

fn parent_of(path: &str) -> Option<&str> {
    path.rsplit_once('.').map(|(p, _)| p)
}

/// The queues from root down to `leaf`.
fn chain<'a>(snap: &'a PartitionSnapshot, leaf: &str) -> Vec<&'a QueueSnapshot> {
    let mut out = Vec::new();
    let mut path = Some(leaf);
    while let Some(p) = path {
        if let Some(q) = snap.queue(p) {
            out.push(q);
        }
        path = parent_of(p);
    }
    out.reverse();
    out
}

/// True when `extra` more fits under every max of the chain.
fn within_max(chain: &[&QueueSnapshot], extra: &ResourceMap) -> bool {
    chain.iter().all(|q| {
        q.max
            .iter()
            .all(|(name, max)| get(&q.allocated, name) + get(extra, name) <= *max)
    })
}

/// The health-check and bookkeeping invariants, reusing the scenario checks.
pub fn invariants(snap: &PartitionSnapshot, step: usize) -> Vec<String> {
    let mut checks = Checks::new(StepRef {
        index: step,
        kind: "soak",
        label: None,
    });
    invariants::check(snap, &mut checks);
    let mut out: Vec<String> = checks
        .failures
        .into_iter()
        .map(|f| format!("{}: expected {}, got {}", f.subject, f.expected, f.actual))
        .collect();
    // A queue's usage is the sum of its children's and its applications':
    // the sums are gathered in one walk over queues and one over apps.
    let mut sums: BTreeMap<&str, ResourceMap> = BTreeMap::new();
    for c in &snap.queues {
        if let Some(parent) = parent_of(&c.path) {
            sum_into(sums.entry(parent).or_default(), &c.allocated);
        }
    }
    for a in &snap.applications {
        let sum = sums.entry(a.queue.as_str()).or_default();
        sum_into(sum, &a.allocated);
        sum_into(sum, &a.placeholder);
    }
    for q in &snap.queues {
        let sum = sums.remove(q.path.as_str()).unwrap_or_default();
        let mut mine = q.allocated.clone();
        mine.retain(|_, v| *v != 0);
        if sum != mine {
            out.push(format!(
                "queue {} allocated {mine:?} != children + apps {sum:?}",
                q.path
            ));
        }
    }
    out
}

/// The limits a step starts under (those the step before ended with): each
/// queue's max and each node's room for this scheduler (capacity less
/// occupied). A step may lower them after it has allocated under them (a
/// node update or removal shrinks the root's max, the cluster's capacity,
/// and the node's room); [`limits`] judges its allocations by both.
#[derive(Debug, Default, Clone)]
pub struct StepLimits {
    queues: BTreeMap<String, ResourceMap>,
    nodes: BTreeMap<String, ResourceMap>,
}

impl StepLimits {
    /// The limits as `snap` shows them.
    pub fn of(snap: &PartitionSnapshot) -> Self {
        Self {
            queues: snap
                .queues
                .iter()
                .map(|q| (q.path.clone(), q.max.clone()))
                .collect(),
            nodes: snap
                .nodes
                .iter()
                .map(|n| {
                    let mut room = n.capacity.clone();
                    for (name, v) in &n.occupied {
                        *room.entry(name.clone()).or_insert(0) -= v;
                    }
                    (n.id.clone(), room)
                })
                .collect(),
        }
    }
}

/// True when `used` is within `max` (a type `max` does not name is
/// unlimited).
fn within(used: &ResourceMap, max: &ResourceMap) -> bool {
    max.iter().all(|(name, m)| get(used, name) <= *m)
}

/// True when `used` is within `room` for every type either names (a type
/// the room does not name has none).
fn within_room(used: &ResourceMap, room: &ResourceMap) -> bool {
    used.iter().all(|(name, v)| *v <= get(room, name)) && within(used, room)
}

/// Allocations made by the scheduler in this step (`(node, app)` pairs) must
/// have fitted: their node is within capacity and every queue above their app
/// within its max. Recovery may exceed both, so only new allocations count.
///
/// `before` holds the limits the step started under. An allocation made
/// under them stays legal when the same step then lowers them (the core
/// takes a step's inputs and its own timers in an order of its own), so a
/// queue or node is judged over only when it is over both its limit after
/// the step and the one before (a queue or node new in the step, or no
/// `before`: after alone).
pub fn limits(
    snap: &PartitionSnapshot,
    new: &[(String, String)],
    before: Option<&StepLimits>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (node_id, app_id) in new {
        if let Some(n) = snap.node(node_id)
            && n.available.values().any(|v| *v < 0)
            && before
                .and_then(|b| b.nodes.get(node_id))
                .is_none_or(|room| !within_room(&n.allocated, room))
        {
            out.push(format!(
                "node {node_id} got an allocation and is over capacity: available {:?}",
                n.available
            ));
        }
        if let Some(a) = snap.application(app_id) {
            let over: Vec<_> = chain(snap, &a.queue)
                .into_iter()
                .filter(|q| {
                    !within(&q.allocated, &q.max)
                        && before
                            .and_then(|b| b.queues.get(&q.path))
                            .is_none_or(|max| !within(&q.allocated, max))
                })
                .map(|q| format!("{} allocated {:?} max {:?}", q.path, q.allocated, q.max))
                .collect();
            if !over.is_empty() {
                out.push(format!(
                    "application {app_id} got an allocation above a queue max: {over:?}"
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Liveness: after settle, no pending ask may fit a schedulable node (not
/// reserved by another ask, predicates passing when in use) within its queues'
/// headroom. Apps held back by maxapplications are not judged.
pub fn liveness(snap: &PartitionSnapshot, predicates: bool) -> Vec<String> {
    liveness_except(snap, predicates, &std::collections::BTreeSet::new())
}

/// [`liveness`], not judging the asks of `waiting` ((application, key): real
/// asks that wait for a placeholder of their task group to replace).
pub fn liveness_except(
    snap: &PartitionSnapshot,
    predicates: bool,
    waiting: &std::collections::BTreeSet<(String, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for app in &snap.applications {
        if !matches!(
            app.state.as_str(),
            "New" | "Accepted" | "Running" | "Completing"
        ) {
            continue;
        }
        let c = chain(snap, &app.queue);
        let limited_start = c.iter().any(|q| q.max_applications > 0);
        if limited_start && app.state != "Running" {
            continue;
        }
        for ask in &app.pending_asks {
            if waiting.contains(&(app.id.clone(), ask.allocation_key.clone())) {
                continue;
            }
            if !within_max(&c, &ask.resource) {
                continue;
            }
            let fits = snap.nodes.iter().find(|n| {
                n.schedulable
                    && n.reserved_by
                        .as_ref()
                        .is_none_or(|k| *k == ask.allocation_key)
                    && ask
                        .resource
                        .iter()
                        .all(|(name, v)| *v <= get(&n.available, name))
                    && (!predicates || predicate_allows(&ask.allocation_key, &n.id))
            });
            if let Some(n) = fits {
                out.push(format!(
                    "liveness: ask {} of {} ({:?}) fits node {} (available {:?}) within the headroom of {} but is still pending",
                    ask.allocation_key, app.id, ask.resource, n.id, n.available, app.queue
                ));
            }
        }
    }
    out
}

/// Queue limits as configured: used to show an invalid reload changed nothing.
pub fn queue_limits(snap: &PartitionSnapshot) -> BTreeMap<String, (ResourceMap, ResourceMap, u64)> {
    snap.queues
        .iter()
        .map(|q| {
            (
                q.path.clone(),
                (q.max.clone(), q.guaranteed.clone(), q.max_applications),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use unisched_core::snapshot::{ApplicationSnapshot, NodeSnapshot};

    use super::*;

    fn res(memory: i64) -> ResourceMap {
        BTreeMap::from([("memory".to_string(), memory)])
    }

    /// One node of `capacity`, root with that max, `root.a` holding app-1,
    /// `allocated` on all three.
    fn partition(capacity: i64, allocated: i64) -> PartitionSnapshot {
        let queue = |path: &str| QueueSnapshot {
            path: path.to_string(),
            max: if path == "root" {
                res(capacity)
            } else {
                ResourceMap::new()
            },
            allocated: res(allocated),
            ..Default::default()
        };
        PartitionSnapshot {
            queues: vec![queue("root"), queue("root.a")],
            applications: vec![ApplicationSnapshot {
                id: "app-1".to_string(),
                queue: "root.a".to_string(),
                ..Default::default()
            }],
            nodes: vec![NodeSnapshot {
                id: "node-1".to_string(),
                capacity: res(capacity),
                allocated: res(allocated),
                available: res(capacity - allocated),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn an_allocation_is_judged_by_the_limits_before_and_after_its_step() {
        let new = [("node-1".to_string(), "app-1".to_string())];
        // Within the limits: nothing to say, with or without a before.
        let fits = partition(100, 80);
        assert!(limits(&fits, &new, None).is_empty());
        assert!(limits(&fits, &new, Some(&StepLimits::of(&fits))).is_empty());
        // Over the limits the step ended with, and no record of those it
        // started under: the node and the root are over.
        let shrunk = partition(70, 80);
        let strict = limits(&shrunk, &new, None);
        assert_eq!(strict.len(), 2, "{strict:?}");
        assert!(strict[0].contains("above a queue max") && strict[0].contains("root allocated"));
        assert!(strict[1].contains("node node-1") && strict[1].contains("over capacity"));
        // The step started at 100 and shrank to 70 after allocating 80:
        // legal when made.
        let before = StepLimits::of(&partition(100, 0));
        assert!(limits(&shrunk, &new, Some(&before)).is_empty());
        // Over both (the step started at 75): still a violation.
        let before = StepLimits::of(&partition(75, 0));
        assert_eq!(limits(&shrunk, &new, Some(&before)), strict);
        // Occupied space counts against the node's room before the step.
        let mut occupied = partition(100, 0);
        occupied.nodes[0].occupied = res(25);
        let before = StepLimits::of(&occupied);
        let over = limits(&shrunk, &new, Some(&before));
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].contains("node node-1"));
    }
}
