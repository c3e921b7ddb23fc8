//! What one replay found: time series sampled on the virtual clock, wait
//! times per queue, counts of what was refused and why, and final states.
//! Plain data; the report (`src/simulate/`) turns it into figures.

use std::collections::BTreeMap;
use std::time::Duration;

use unisched_core::snapshot::ResourceMap;

/// The state of the cluster at one moment of virtual time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Milliseconds since the trace's first record.
    pub time_ms: u64,
    /// Per leaf queue (index into [`Outcome::queues`]), resources allocated,
    /// dense over [`Outcome::resources`].
    pub allocated: Vec<Vec<i64>>,
    /// Per leaf queue, resources asked for and not yet allocated.
    pub pending: Vec<Vec<i64>>,
    /// Per leaf queue, allocations waiting.
    pub pending_tasks: Vec<u64>,
    /// Capacity of the nodes up, dense over [`Outcome::resources`].
    pub capacity: Vec<i64>,
    /// Allocated on those nodes.
    pub used: Vec<i64>,
    /// Dominant share (allocated over capacity, the fullest resource) of the
    /// nodes up: 10th, 50th, 90th percentile and maximum.
    pub node_share: [f64; 4],
    /// Nodes up.
    pub nodes_up: u32,
    /// Preemptions so far.
    pub preemptions: u64,
}

/// Counts by reason, each with one example (an application, ask or node id).
pub type Tally = BTreeMap<String, (u64, String)>;

/// Adds `n` to `reason` in `tally`, keeping the first example.
pub fn tally(tally: &mut Tally, reason: String, example: &str, n: u64) {
    let entry = tally
        .entry(reason)
        .or_insert_with(|| (0, example.to_string()));
    entry.0 += n;
}

/// A reason with the id of the thing it is about taken out, so one reason
/// given for many applications counts as one.
pub fn generic_reason(reason: &str, id: &str) -> String {
    if id.is_empty() {
        reason.to_string()
    } else {
        reason.replace(id, "<id>")
    }
}

/// Totals of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Asks sent to the core (a record, a resubmission).
    pub asks: u64,
    /// Allocations asked for in those asks.
    pub tasks: u64,
    /// Allocations the core made.
    pub allocations: u64,
    /// Allocations the RM released when their task finished.
    pub releases: u64,
    /// Allocations the core preempted.
    pub preemptions: u64,
    /// Placeholders replaced by a real allocation.
    pub placeholders_replaced: u64,
    /// Placeholders the core released when their time ran out.
    pub placeholders_timed_out: u64,
    /// Allocations lost with their node (resubmitted).
    pub lost_with_node: u64,
    /// Allocations still waiting when the replay ended.
    pub never_placed: u64,
    /// Allocations still running when the replay ended.
    pub still_running: u64,
    /// Steps of the virtual clock.
    pub steps: u64,
    /// `settle()` round trips.
    pub settles: u64,
}

/// A queue's configured limits, from the core's snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueLimits {
    /// Guaranteed (empty: none).
    pub guaranteed: ResourceMap,
    /// Maximum (empty: unlimited).
    pub max: ResourceMap,
}

/// Everything one replay recorded.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Resource type names, the order of every dense vector.
    pub resources: Vec<String>,
    /// Leaf queues applications ran in, in order of first sight.
    pub queues: Vec<String>,
    /// Limits of every queue the core had, parents too, by path.
    pub limits: BTreeMap<String, QueueLimits>,
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// Per leaf queue, milliseconds from ask to allocation of each allocation.
    pub waits_ms: Vec<Vec<u32>>,
    /// Per leaf queue, allocations preempted in it.
    pub preempted: Vec<u64>,
    /// Per leaf queue, preemptions made for its asks.
    pub preempting: Vec<u64>,
    /// Asks the core rejected, by reason.
    pub rejected_asks: Tally,
    /// Applications the core rejected, by reason.
    pub rejected_apps: Tally,
    /// Nodes the core rejected, by reason.
    pub rejected_nodes: Tally,
    /// Releases the core refused, by reason.
    pub rejected_releases: Tally,
    /// Allocations the RM never asked for, by reason (resources no node
    /// has, the application was rejected).
    pub not_submitted: Tally,
    /// Applications by their last state.
    pub app_states: BTreeMap<String, u64>,
    /// Totals.
    pub counts: Counts,
    /// Virtual time the replay ended at.
    pub end_ms: u64,
    /// Wall time of the replay (set-up and reading the trace excluded).
    pub wall: Duration,
}

impl Outcome {
    /// Allocation events (allocations made and released) per second of wall time.
    pub fn events_per_second(&self) -> f64 {
        let events = self.counts.allocations + self.counts.releases;
        events as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_count_generic_reasons_with_one_example() {
        let mut t = Tally::new();
        for app in ["app-1", "app-2"] {
            let reason = generic_reason(&format!("application {app} has no queue"), app);
            tally(&mut t, reason, app, 2);
        }
        assert_eq!(
            t.into_iter().collect::<Vec<_>>(),
            [(
                "application <id> has no queue".to_string(),
                (4, "app-1".to_string())
            )]
        );
        assert_eq!(generic_reason("no id", ""), "no id");
    }
}
