//! The end-of-run summary of `unisched simulate`, computed from the RM's own
//! counts and a snapshot of the partition.

use std::fmt::Write as _;
use std::time::Duration;

use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

/// What the simulated RM counted during the run.
#[derive(Debug, Clone, Copy)]
pub struct RunTotals {
    /// Nodes reported.
    pub nodes: usize,
    /// Applications added.
    pub apps: usize,
    /// Asks submitted.
    pub asks: usize,
    /// Seed of the run.
    pub seed: u64,
    /// Rounds the RM ran.
    pub rounds: usize,
    /// Allocations received.
    pub allocations: usize,
    /// Allocations the RM released.
    pub released: usize,
    /// Asks the core rejected.
    pub rejected: usize,
    /// From the first ask batch to the end of the last round.
    pub wall: Duration,
}

/// One queue's usage against its guarantee.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueUsage {
    /// Full path.
    pub path: String,
    /// Allocated resources.
    pub allocated: ResourceMap,
    /// Guaranteed resources (empty when none).
    pub guaranteed: ResourceMap,
}

/// The summary printed at the end of a simulation.
#[derive(Debug, Clone)]
pub struct SimulationReport {
    /// The RM's counts.
    pub totals: RunTotals,
    /// Every queue, parents first.
    pub queues: Vec<QueueUsage>,
    /// Node utilisation (dominant share of allocated over capacity, 0..=1):
    /// minimum, median, maximum.
    pub node_utilisation: (f64, f64, f64),
    /// Allocations still wanted by pending asks, from the snapshot.
    pub pending: u64,
}

/// The report of a finished run.
pub fn summarise(totals: RunTotals, snapshot: &PartitionSnapshot) -> SimulationReport {
    let queues = snapshot
        .queues
        .iter()
        .map(|q| QueueUsage {
            path: q.path.clone(),
            allocated: q.allocated.clone(),
            guaranteed: q.guaranteed.clone(),
        })
        .collect();
    let mut shares: Vec<f64> = snapshot
        .nodes
        .iter()
        .map(|n| dominant_share(&n.allocated, &n.capacity))
        .collect();
    shares.sort_by(f64::total_cmp);
    let node_utilisation = match shares.as_slice() {
        [] => (0.0, 0.0, 0.0),
        s => (s[0], s[s.len() / 2], s[s.len() - 1]),
    };
    let pending = snapshot
        .applications
        .iter()
        .flat_map(|a| a.pending_asks.iter())
        .map(|ask| u64::from(ask.pending_allocations))
        .sum();
    SimulationReport {
        totals,
        queues,
        node_utilisation,
        pending,
    }
}

/// The largest share `used / capacity` over the resource types of `capacity`.
pub fn dominant_share(used: &ResourceMap, capacity: &ResourceMap) -> f64 {
    capacity
        .iter()
        .filter(|(_, cap)| **cap > 0)
        .map(|(name, cap)| used.get(name).copied().unwrap_or(0) as f64 / *cap as f64)
        .fold(0.0, f64::max)
}

/// A quantity for people: vcore in cores, memory in GiB, others as they are.
fn human(name: &str, value: i64) -> String {
    match name {
        "vcore" => format!("{:.1}", value as f64 / 1000.0),
        "memory" => format!("{:.1}Gi", value as f64 / (1u64 << 30) as f64),
        _ => value.to_string(),
    }
}

fn usage_cell(name: &str, queue: &QueueUsage) -> String {
    let used = queue.allocated.get(name).copied().unwrap_or(0);
    match queue.guaranteed.get(name).copied() {
        Some(g) if g > 0 => format!(
            "{} / {} ({:.0}%)",
            human(name, used),
            human(name, g),
            used as f64 * 100.0 / g as f64
        ),
        _ => format!("{} / -", human(name, used)),
    }
}

impl SimulationReport {
    /// Allocations per second over the wall time.
    pub fn allocations_per_second(&self) -> f64 {
        self.totals.allocations as f64 / self.totals.wall.as_secs_f64().max(1e-9)
    }

    /// The summary as text for stdout.
    pub fn to_table(&self) -> String {
        let t = &self.totals;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "unisched simulate: {} nodes, {} apps, {} asks, seed {}",
            t.nodes, t.apps, t.asks, t.seed
        );
        let rows: [(&str, String); 7] = [
            ("allocations", t.allocations.to_string()),
            (
                "allocations/s",
                format!("{:.0}", self.allocations_per_second()),
            ),
            ("wall time", format!("{:.3} s", t.wall.as_secs_f64())),
            ("rounds", t.rounds.to_string()),
            ("released by the RM", t.released.to_string()),
            ("rejected asks", t.rejected.to_string()),
            ("pending left", self.pending.to_string()),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "  {name:<20} {value:>14}");
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:<24} {:>28} {:>32}",
            "queue", "vcore used / guaranteed", "memory used / guaranteed"
        );
        for q in &self.queues {
            let _ = writeln!(
                out,
                "  {:<24} {:>28} {:>32}",
                q.path,
                usage_cell("vcore", q),
                usage_cell("memory", q)
            );
        }
        let (min, median, max) = self.node_utilisation;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  node utilisation (dominant share): min {:.1}%  median {:.1}%  max {:.1}%",
            min * 100.0,
            median * 100.0,
            max * 100.0
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unisched_core::snapshot::{NodeSnapshot, QueueSnapshot};

    fn map(pairs: &[(&str, i64)]) -> ResourceMap {
        pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
    }

    #[test]
    fn dominant_share_takes_the_fullest_resource() {
        let cap = map(&[("vcore", 1000), ("memory", 100)]);
        assert_eq!(
            dominant_share(&map(&[("vcore", 500), ("memory", 80)]), &cap),
            0.8
        );
        assert_eq!(dominant_share(&map(&[]), &cap), 0.0);
    }

    #[test]
    fn summary_reads_queues_nodes_and_pending() {
        let node = |id: &str, used: i64| NodeSnapshot {
            id: id.to_string(),
            capacity: map(&[("vcore", 1000)]),
            allocated: map(&[("vcore", used)]),
            ..Default::default()
        };
        let snapshot = PartitionSnapshot {
            queues: vec![QueueSnapshot {
                path: "root.a".to_string(),
                allocated: map(&[("vcore", 1500)]),
                guaranteed: map(&[("vcore", 3000)]),
                ..Default::default()
            }],
            nodes: vec![node("n1", 0), node("n2", 500), node("n3", 1000)],
            ..Default::default()
        };
        let totals = RunTotals {
            nodes: 3,
            apps: 1,
            asks: 10,
            seed: 1,
            rounds: 2,
            allocations: 4,
            released: 1,
            rejected: 0,
            wall: Duration::from_secs(2),
        };
        let report = summarise(totals, &snapshot);
        assert_eq!(report.node_utilisation, (0.0, 0.5, 1.0));
        assert_eq!(report.allocations_per_second(), 2.0);
        let table = report.to_table();
        assert!(table.contains("1.5 / 3.0 (50%)"), "{table}");
        assert!(table.contains("median 50.0%"), "{table}");
    }
}
