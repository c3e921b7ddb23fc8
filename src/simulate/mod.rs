//! `unisched simulate`: what a queue configuration does to a workload. A
//! trace (generated, our own CSV/JSONL, or a public cluster trace) is
//! replayed on the virtual clock against one configuration, or two side by
//! side (`--against`), and the outcome is summarised for the terminal and as
//! figures (JSON) and charts (a self-contained HTML page).
//!
//! This module chooses the inputs and runs the replays; `src/trace/` reads
//! traces, `src/replay/` plays the RM, `figures.rs` computes what is shown,
//! `charts.rs` and `html.rs` draw it, `report.rs` prints the summary.

pub mod charts;
pub mod figures;
pub mod html;
pub mod report;

use std::path::PathBuf;

use crate::replay::{self, Outcome, Progress, ReplayError, ReplayOptions};
use crate::trace::generate::{self, GenerateOptions};
use crate::trace::{self, ImportOptions, Size, Trace, TraceBuilder, TraceError};

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

/// Where the trace comes from.
#[derive(Debug, Clone)]
pub enum TraceInput {
    /// The synthetic workload of [`generate`].
    Generate(GenerateOptions),
    /// Files the user gave.
    Files {
        /// How to read them.
        format: TraceFormat,
        /// Trace files (asks, and nodes in our format), read in order.
        traces: Vec<PathBuf>,
        /// Node files (`--machines`) in the matching format.
        machines: Vec<PathBuf>,
        /// Units and queues for the public traces.
        import: ImportOptions,
    },
}

/// Trace file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// By file name: `.jsonl`/`.ndjson` (optionally `.gz`) is JSONL, anything else CSV.
    Auto,
    /// Our CSV format.
    Csv,
    /// Our JSONL format.
    Jsonl,
    /// Google 2011 cluster trace: task_events (machine_events with --machines).
    Google,
    /// Alibaba cluster-trace-v2018: batch_task (machine_meta with --machines).
    Alibaba,
}

/// Nodes added at the start (`--nodes COUNT[:RESOURCES]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// How many.
    pub count: usize,
    /// Capacity of each, wire units; `None` for the generator's mix of sizes.
    pub capacity: Option<Size>,
}

impl std::str::FromStr for NodeSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (count, capacity) = match text.split_once(':') {
            Some((c, r)) => (c, Some(r)),
            None => (text, None),
        };
        let count = count
            .trim()
            .parse::<usize>()
            .map_err(|_| format!("{text:?}: expected COUNT or COUNT:vcore=16,memory=64Gi"))?;
        let capacity = capacity
            .map(|r| trace::own::parse_resources(&r.replace(',', ";")))
            .transpose()?;
        Ok(Self { count, capacity })
    }
}

/// A queue configuration and the name the report gives it.
#[derive(Debug, Clone)]
pub struct NamedConfig {
    /// File name, or `built-in`.
    pub name: String,
    /// YAML text.
    pub text: String,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// One configuration, or two to compare.
    pub configs: Vec<NamedConfig>,
    /// The trace.
    pub input: TraceInput,
    /// Nodes added at the start.
    pub nodes: Vec<NodeSpec>,
    /// Count bad trace lines instead of stopping at the first.
    pub skip_bad_lines: bool,
    /// Step of the virtual clock, milliseconds.
    pub tick_ms: u64,
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The configuration has no leaf queue to put generated applications in.
    #[error("{0}: the queue configuration has no leaf queue for applications")]
    NoLeafQueue(String),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The trace has no nodes and none were given.
    #[error("the trace has no nodes: give --nodes COUNT[:RESOURCES] or --machines FILE")]
    NoNodes,
    /// A replay failed.
    #[error("{config}: {source}")]
    Replay {
        /// The configuration replayed.
        config: String,
        /// What went wrong.
        #[source]
        source: ReplayError,
    },
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

/// The partition of a configuration (its first), `default` when it names none.
pub fn partition_of(config: &str) -> String {
    leaf_queues(config).map_or_else(|| "default".to_string(), |(p, _)| p)
}

/// Reads or generates the trace `options` describe, with its extra nodes.
pub fn load_trace(options: &SimulateOptions) -> Result<Trace, SimulateError> {
    let mut builder = match &options.input {
        TraceInput::Generate(g) => {
            let config = options
                .configs
                .first()
                .map_or(DEFAULT_CONFIG, |c| c.text.as_str());
            let name = options
                .configs
                .first()
                .map_or("built-in", |c| c.name.as_str());
            let leaves = match leaf_queues(config) {
                Some((_, leaves)) if leaves.is_empty() => {
                    return Err(SimulateError::NoLeafQueue(name.to_string()));
                }
                Some((_, leaves)) => leaves,
                // Not our shape of YAML: registration says what is wrong.
                None => vec!["root.default".to_string()],
            };
            let mut g = g.clone();
            if options.nodes.iter().any(|n| n.capacity.is_some()) {
                g.nodes = 0;
            }
            let generated = generate::generate(&g, &leaves);
            if options.nodes.iter().all(|n| n.capacity.is_none()) {
                return Ok(generated);
            }
            TraceBuilder::from_trace(generated)
        }
        TraceInput::Files {
            format,
            traces,
            machines,
            import,
        } => read_files(*format, traces, machines, import, options.skip_bad_lines)?,
    };
    let mut n = 0;
    for spec in &options.nodes {
        let capacity = spec.capacity.clone().unwrap_or_else(default_node);
        for _ in 0..spec.count {
            builder.node_at_start(&format!("sim-node-{n:05}"), capacity.clone());
            n += 1;
        }
    }
    let trace = builder.finish();
    if !trace
        .records
        .iter()
        .any(|r| matches!(r.event, trace::Event::NodeUp { .. }))
    {
        return Err(SimulateError::NoNodes);
    }
    Ok(trace)
}

/// Capacity of a `--nodes COUNT` node given without resources.
fn default_node() -> Size {
    vec![
        ("memory".to_string(), 64 << 30),
        ("vcore".to_string(), 16_000),
    ]
}

fn read_files(
    format: TraceFormat,
    traces: &[PathBuf],
    machines: &[PathBuf],
    import: &ImportOptions,
    skip_bad_lines: bool,
) -> Result<TraceBuilder, SimulateError> {
    let names: Vec<String> = traces.iter().map(|p| p.display().to_string()).collect();
    let mut b = TraceBuilder::new(names.join(", "), skip_bad_lines);
    let traces: Vec<&std::path::Path> = traces.iter().map(PathBuf::as_path).collect();
    let machines: Vec<&std::path::Path> = machines.iter().map(PathBuf::as_path).collect();
    match format {
        TraceFormat::Google => {
            trace::google::read_machine_events(&machines, import, &mut b)?;
            trace::google::read_task_events(&traces, import, &mut b)?;
        }
        TraceFormat::Alibaba => {
            trace::alibaba::read_machine_meta(&machines, import, &mut b)?;
            trace::alibaba::read_batch_tasks(&traces, import, &mut b)?;
        }
        own => {
            for path in machines.iter().chain(&traces) {
                let jsonl = match own {
                    TraceFormat::Jsonl => true,
                    TraceFormat::Csv => false,
                    _ => {
                        let name = path.to_string_lossy().to_ascii_lowercase();
                        let name = name.strip_suffix(".gz").unwrap_or(&name);
                        name.ends_with(".jsonl") || name.ends_with(".ndjson")
                    }
                };
                if jsonl {
                    trace::own::read_jsonl(path, &mut b)?;
                } else {
                    trace::own::read_csv(path, &mut b)?;
                }
            }
        }
    }
    Ok(b)
}

/// Replays `trace` against each configuration in turn; `on_progress` gets
/// the index of the configuration and the replay's progress.
pub fn run(
    options: &SimulateOptions,
    trace: &std::sync::Arc<Trace>,
    mut on_progress: impl FnMut(usize, Progress),
) -> Result<Vec<(String, Outcome)>, SimulateError> {
    let mut outcomes = Vec::new();
    for (i, config) in options.configs.iter().enumerate() {
        let replay_options = ReplayOptions {
            config: config.text.clone(),
            partition: partition_of(&config.text),
            tick_ms: options.tick_ms,
            ..ReplayOptions::default()
        };
        let outcome =
            replay::replay(trace, &replay_options, |p| on_progress(i, p)).map_err(|source| {
                SimulateError::Replay {
                    config: config.name.clone(),
                    source,
                }
            })?;
        outcomes.push((config.name.clone(), outcome));
    }
    Ok(outcomes)
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
    fn node_specs_read_a_count_and_resources() {
        assert_eq!(
            "12".parse::<NodeSpec>().unwrap(),
            NodeSpec {
                count: 12,
                capacity: None
            }
        );
        let spec: NodeSpec = "3:vcore=4,memory=1Gi".parse().unwrap();
        assert_eq!(
            spec.capacity.unwrap(),
            [
                ("vcore".to_string(), 4_000),
                ("memory".to_string(), 1 << 30)
            ]
        );
        assert!("many".parse::<NodeSpec>().is_err());
        assert!("3:vcore=lots".parse::<NodeSpec>().is_err());
    }

    #[test]
    fn generated_traces_need_a_leaf_queue() {
        let options = SimulateOptions {
            configs: vec![NamedConfig {
                name: "c.yaml".to_string(),
                text: "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                    .to_string(),
            }],
            input: TraceInput::Generate(GenerateOptions::default()),
            nodes: Vec::new(),
            skip_bad_lines: false,
            tick_ms: 1000,
        };
        assert!(matches!(
            load_trace(&options),
            Err(SimulateError::NoLeafQueue(_))
        ));
    }
}
