//! The `bench` subcommand: runs the W1–W4 workloads of `spec/performance.md`
//! on a fresh core per repeat and prints a table or JSON.

use std::process::ExitCode;
use std::time::Duration;

use crate::bench::{self, BenchOptions, WorkloadKind};

/// Which workloads `bench` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadArg {
    /// W1: YuniKorn's core benchmark.
    W1,
    /// W2: many apps and queues.
    W2,
    /// W3: binpacking, full nodes, queue and user limits.
    W3,
    /// W4: Mesos-style allocation run.
    W4,
    /// All four, one after the other.
    All,
}

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Workload to run.
    #[arg(long, value_enum, default_value = "w1")]
    pub workload: WorkloadArg,
    /// Nodes (default: the workload's size in performance.md).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Asks (default: the workload's size; W4 always asks one per node).
    #[arg(long)]
    pub asks: Option<usize>,
    /// Repeats, each on a fresh core.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Small sizes, for a smoke run.
    #[arg(long)]
    pub quick: bool,
    /// Seed for workloads with random sizes.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Seconds to wait for the allocations of one repeat.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// W3 only: guarantees, preemption.delay 1ms and a quarter of the asks
    /// allowed to preempt, on a cluster 99% full (see `shapes::w3_preemption`).
    #[arg(long)]
    pub preemption: bool,
    /// Instead of a workload: keep this many asks pending on a core with no
    /// nodes and report the resident memory they take per ask.
    #[arg(long, value_name = "ASKS")]
    pub pending_memory: Option<usize>,
}

/// Runs `bench`.
pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(asks) = args.pending_memory {
        return match bench::pending::measure(asks) {
            Ok(m) if args.json => {
                println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
                ExitCode::SUCCESS
            }
            Ok(m) => {
                println!(
                    "pending asks {}: RSS grew {} KiB, {:.0} bytes per pending ask",
                    m.asks, m.rss_growth_kib, m.bytes_per_ask
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.preemption && args.workload != WorkloadArg::W3 {
        eprintln!("bench: --preemption applies to --workload w3 only");
        return ExitCode::FAILURE;
    }
    let kinds: Vec<WorkloadKind> = match args.workload {
        WorkloadArg::W1 => vec![WorkloadKind::W1],
        WorkloadArg::W2 => vec![WorkloadKind::W2],
        WorkloadArg::W3 => vec![WorkloadKind::W3],
        WorkloadArg::W4 => vec![WorkloadKind::W4],
        WorkloadArg::All => WorkloadKind::ALL.to_vec(),
    };
    let mut reports = Vec::new();
    for kind in kinds {
        let options = BenchOptions {
            kind,
            nodes: args.nodes,
            asks: args.asks,
            repeat: args.repeat.max(1),
            quick: args.quick,
            seed: args.seed,
            timeout: Duration::from_secs(args.timeout),
            preemption: args.preemption,
        };
        let mut repeat = 0;
        let result = bench::run(&options, |m| {
            repeat += 1;
            eprintln!(
                "{} repeat {repeat}: {} allocations in {:.3} ms ({:.0}/s), {} released by the core",
                m.workload,
                m.allocations,
                m.elapsed.as_secs_f64() * 1e3,
                m.allocations_per_second(),
                m.released
            );
        });
        match result {
            Ok(report) => reports.push(report),
            Err(err) => {
                eprintln!("error: {kind:?}: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    if args.json {
        match serde_json::to_string_pretty(&reports) {
            Ok(text) => println!("{text}"),
            Err(err) => {
                eprintln!("error: cannot encode the results: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", bench::format_table(&reports));
    }
    ExitCode::SUCCESS
}
