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

/// Allocations made by the scheduler in this step (`(node, app)` pairs) must
/// have fitted: their node is within capacity and every queue above their app
/// within its max. Recovery may exceed both, so only new allocations count.
pub fn limits(snap: &PartitionSnapshot, new: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let none = ResourceMap::new();
    for (node_id, app_id) in new {
        if let Some(n) = snap.node(node_id)
            && n.available.values().any(|v| *v < 0)
        {
            out.push(format!(
                "node {node_id} got an allocation and is over capacity: available {:?}",
                n.available
            ));
        }
        if let Some(a) = snap.application(app_id) {
            let c = chain(snap, &a.queue);
            if !within_max(&c, &none) {
                let over: Vec<_> = c
                    .iter()
                    .filter(|q| !within_max(&[q], &none))
                    .map(|q| format!("{} allocated {:?} max {:?}", q.path, q.allocated, q.max))
                    .collect();
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
