//! `unisched simulate`: an in-process simulated RM that runs a cluster against
//! the core through the public `SchedulerApi` and summarises what happened.
//!
//! The RM registers a queue configuration, adds its applications and nodes,
//! then works in rounds: submit the next batch of asks, wait until the core
//! settles, and release a quarter of the running allocations (containers that
//! finished) so pending asks get placed on the freed space. Everything random
//! comes from one seed; the RM sorts what it sees before choosing, so a run is
//! as repeatable as the core's own decisions.

pub mod report;

use std::time::Instant;

use crate::workload::driver::ArrivedAllocation;
use crate::workload::wire::{app, ask, node};
use crate::workload::{Cluster, Rng, WorkloadError};

pub use report::{QueueUsage, SimulationReport};

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// The queue configuration used without `--config`: three leaf queues under
/// root with guarantees that add up to most of the default cluster.
pub const DEFAULT_CONFIG: &str = "\
partitions:
  - name: default
    nodesortpolicy:
      type: fair
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: production
            resources:
              guaranteed:
                vcore: 8000
                memory: 35184372088832
          - name: batch
            resources:
              guaranteed:
                vcore: 5000
                memory: 21990232555520
          - name: dev
            resources:
              guaranteed:
                vcore: 2000
                memory: 8796093022208
              max:
                vcore: 4000
                memory: 17592186044416
";

/// Share of running allocations the RM releases after each round.
const RELEASE_SHARE: f64 = 0.25;
/// Upper bound on rounds, in case the core never places some asks.
const MAX_ROUNDS: usize = 500;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Asks submitted over the run.
    pub asks: usize,
    /// Applications the asks are spread over.
    pub apps: usize,
    /// Seed for node and ask sizes and for the releases.
    pub seed: u64,
    /// Queue configuration YAML (the built-in one when `None`).
    pub config: Option<String>,
    /// Batches the asks are submitted in.
    pub batches: usize,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        Self {
            nodes: 1_000,
            asks: 50_000,
            apps: 20,
            seed: 42,
            config: None,
            batches: 10,
        }
    }
}

/// Why a simulation stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The configuration has no leaf queue to put applications in.
    #[error("the queue configuration has no leaf queue for applications")]
    NoLeafQueue,
    /// The core refused the workload.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The core has no snapshot of the partition after the run.
    #[error("partition {0:?} not found after the run")]
    NoPartition(String),
}

/// Progress of a running simulation, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Round just finished.
    pub round: usize,
    /// Asks submitted so far.
    pub submitted: usize,
    /// Allocations received so far.
    pub allocations: usize,
    /// Allocations running now.
    pub running: usize,
}

/// The partition and leaf queue paths of a YuniKorn queue configuration (the
/// first partition). `None` when the text is not YAML of that shape; the core
/// reports the details when it is registered.
pub fn leaf_queues(config: &str) -> Option<(String, Vec<String>)> {
    let doc: serde_yaml::Value = serde_yaml::from_str(config).ok()?;
    let partition = doc.get("partitions")?.as_sequence()?.first()?;
    let name = partition
        .get("name")
        .and_then(|n| n.as_str())
        .unwrap_or("default")
        .to_string();
    let mut leaves = Vec::new();
    for queue in partition.get("queues")?.as_sequence()? {
        collect_leaves(queue, "", &mut leaves);
    }
    Some((name, leaves))
}

fn collect_leaves(queue: &serde_yaml::Value, prefix: &str, leaves: &mut Vec<String>) {
    let Some(name) = queue.get("name").and_then(|n| n.as_str()) else {
        return;
    };
    let path = if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    };
    let children = queue.get("queues").and_then(|q| q.as_sequence());
    match children {
        Some(children) if !children.is_empty() => {
            for child in children {
                collect_leaves(child, &path, leaves);
            }
        }
        _ => {
            let declared_parent = queue.get("parent").and_then(|p| p.as_bool()) == Some(true);
            if !declared_parent && path != "root" {
                leaves.push(path);
            }
        }
    }
}

/// The simulated cluster: apps round-robin over the leaf queues, nodes of
/// three sizes, asks of varied sizes and priorities in `batches` batches.
pub struct SimulatedCluster {
    /// Queue configuration.
    pub config: String,
    /// Partition.
    pub partition: String,
    /// Applications.
    pub apps: Vec<unisched_si::AddApplicationRequest>,
    /// Nodes.
    pub nodes: Vec<unisched_si::NodeInfo>,
    /// Ask batches, in submission order.
    pub ask_batches: Vec<Vec<unisched_si::AllocationAsk>>,
}

/// Builds the simulated cluster for `options`.
pub fn build(options: &SimulateOptions) -> Result<SimulatedCluster, SimulateError> {
    let config = options
        .config
        .clone()
        .unwrap_or_else(|| DEFAULT_CONFIG.to_string());
    let (partition, leaves) = match leaf_queues(&config) {
        Some((_, leaves)) if leaves.is_empty() => return Err(SimulateError::NoLeafQueue),
        Some(found) => found,
        // Not our shape of YAML: let registration explain what is wrong.
        None => ("default".to_string(), vec!["root.default".to_string()]),
    };
    let mut rng = Rng::new(options.seed);
    let node_shapes = [(8_000, 32 * GIB), (16_000, 64 * GIB), (32_000, 128 * GIB)];
    let nodes = (0..options.nodes)
        .map(|i| {
            let (vcore, memory) = *rng.pick(&node_shapes);
            let mut n = node(
                format!("node-{i:05}"),
                &[("vcore", vcore), ("memory", memory)],
            );
            n.attributes
                .insert("rack".to_string(), format!("rack-{}", i % 20));
            n
        })
        .collect();
    let app_count = options.apps.max(1);
    let apps: Vec<_> = (0..app_count)
        .map(|i| {
            let queue = &leaves[i % leaves.len()];
            app(
                format!("app-{i:03}"),
                queue,
                &partition,
                &format!("user-{}", i % 5),
            )
        })
        .collect();
    let vcores = [250, 500, 1_000, 1_000, 2_000, 4_000];
    let memories = [256 * MIB, 512 * MIB, GIB, 2 * GIB, 4 * GIB, 8 * GIB];
    let priorities = [0, 0, 10, 100];
    let batch_size = options.asks.div_ceil(options.batches.max(1)).max(1);
    let mut ask_batches: Vec<Vec<_>> = Vec::new();
    for i in 0..options.asks {
        if i % batch_size == 0 {
            ask_batches.push(Vec::with_capacity(batch_size));
        }
        let app_id = &apps[rng.below(app_count as u64) as usize].application_id;
        let size = [
            ("vcore", *rng.pick(&vcores)),
            ("memory", *rng.pick(&memories)),
        ];
        let priority = *rng.pick(&priorities);
        if let Some(batch) = ask_batches.last_mut() {
            batch.push(ask(
                format!("ask-{i:06}"),
                app_id,
                &partition,
                &size,
                priority,
            ));
        }
    }
    Ok(SimulatedCluster {
        config,
        partition,
        apps,
        nodes,
        ask_batches,
    })
}

/// Runs a simulation; `on_progress` is called after every round.
pub fn run(
    options: &SimulateOptions,
    mut on_progress: impl FnMut(Progress),
) -> Result<SimulationReport, SimulateError> {
    let sim = build(options)?;
    let node_count = sim.nodes.len();
    let app_count = sim.apps.len();
    let cluster = Cluster::start(&sim.config, &sim.partition, sim.apps, sim.nodes)?;
    let mut rng = Rng::new(options.seed ^ 0x5EED_0F7E_1EA5_E5E5);
    let mut batches = sim.ask_batches.into_iter();
    let start = Instant::now();
    let mut submitted = 0;
    let mut seen = 0;
    let mut released = 0;
    let mut running: Vec<ArrivedAllocation> = Vec::new();
    let mut round = 0;
    let mut exhausted = false;
    loop {
        round += 1;
        match batches.next() {
            Some(batch) => {
                submitted += batch.len();
                cluster.submit(batch)?;
            }
            None => exhausted = true,
        }
        cluster.scheduler.settle();
        let (new, rejected) = cluster
            .callback
            .with_record(|r| (r.allocations[seen..].to_vec(), r.rejected_asks.len()));
        seen += new.len();
        let placed_now = new.len();
        running.extend(new);
        on_progress(Progress {
            round,
            submitted,
            allocations: seen,
            running: running.len(),
        });
        let pending = submitted.saturating_sub(seen + rejected);
        let stuck = placed_now == 0 && running.is_empty();
        if (exhausted && (pending == 0 || stuck)) || round >= MAX_ROUNDS {
            break;
        }
        // Containers finish: release a share of the running allocations.
        running.sort_unstable_by(|a, b| a.allocation_key.cmp(&b.allocation_key));
        let (finished, still): (Vec<_>, Vec<_>) =
            running.drain(..).partition(|_| rng.chance(RELEASE_SHARE));
        running = still;
        if !finished.is_empty() {
            released += finished.len();
            cluster.release(&finished)?;
        }
    }
    let wall = start.elapsed();
    let snapshot = cluster
        .scheduler
        .snapshot(&sim.partition)
        .ok_or_else(|| SimulateError::NoPartition(sim.partition.clone()))?;
    let rejected = cluster.callback.with_record(|r| r.rejected_asks.len());
    cluster.scheduler.shutdown();
    Ok(report::summarise(
        report::RunTotals {
            nodes: node_count,
            apps: app_count,
            asks: submitted,
            seed: options.seed,
            rounds: round,
            allocations: seen,
            released,
            rejected,
            wall,
        },
        &snapshot,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_queues_of_the_default_config() {
        let (partition, leaves) = leaf_queues(DEFAULT_CONFIG).unwrap();
        assert_eq!(partition, "default");
        assert_eq!(leaves, ["root.production", "root.batch", "root.dev"]);
    }

    #[test]
    fn leaf_queues_skip_declared_parents_and_nest() {
        let yaml = "partitions:\n  - name: p1\n    queues:\n      - name: root\n        queues:\n          - name: a\n            queues:\n              - name: x\n          - name: b\n            parent: true\n          - name: c\n";
        let (partition, leaves) = leaf_queues(yaml).unwrap();
        assert_eq!(partition, "p1");
        assert_eq!(leaves, ["root.a.x", "root.c"]);
        assert!(leaf_queues("not: [yaml").is_none());
    }

    #[test]
    fn build_is_deterministic_and_sized() {
        let options = SimulateOptions {
            nodes: 50,
            asks: 1_001,
            apps: 7,
            ..SimulateOptions::default()
        };
        let a = build(&options).unwrap();
        let b = build(&options).unwrap();
        assert_eq!(a.nodes, b.nodes);
        assert_eq!(a.ask_batches, b.ask_batches);
        assert_eq!(a.apps.len(), 7);
        assert_eq!(a.ask_batches.len(), 10);
        assert_eq!(a.ask_batches.iter().map(Vec::len).sum::<usize>(), 1_001);
        let queues: std::collections::BTreeSet<_> =
            a.apps.iter().map(|a| a.queue_name.as_str()).collect();
        assert_eq!(queues.len(), 3);
    }

    #[test]
    fn config_without_leaves_is_refused() {
        let options = SimulateOptions {
            config: Some(
                "partitions:\n  - name: default\n    queues:\n      - name: root\n".to_string(),
            ),
            ..SimulateOptions::default()
        };
        assert!(matches!(build(&options), Err(SimulateError::NoLeafQueue)));
    }
}
