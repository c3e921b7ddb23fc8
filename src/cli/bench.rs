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
    /// W4: Mesos-style allocation run through the Mesos front end (offers).
    W4,
    /// W4's shape through the SI instead (one 8-cpu ask per node).
    W4si,
    /// All four (W4 through the Mesos front end), one after the other.
    All,
    /// K frameworks over loopback HTTP launching short simulated tasks
    /// against an in-process master with simulated agents (`--frameworks`,
    /// `--agents`, `--task-duration`, `--allocation-interval`, `--seconds`).
    Mesos,
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
    /// Asks (default: the workload's size; W4 always asks one per node, and
    /// through the Mesos front end this is the number of frameworks).
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
    /// W4 only: allocation runs each repeat's master makes, and its
    /// frameworks decline, before the timed run (the master's run in
    /// steady state, as a master allocating every second makes them);
    /// 0 times a fresh master's first run.
    #[arg(long, default_value_t = 0)]
    pub warm_runs: usize,
    /// Instead of a workload: keep this many asks pending on a core with no
    /// nodes and report the resident memory they take per ask.
    #[arg(long, value_name = "ASKS")]
    pub pending_memory: Option<usize>,
    /// Instead of a workload: run the machine probes this many times (about
    /// 0.2 s a round) and print each round and their medians: how fast this
    /// VM's memory and each of two vCPUs are just now, to read the
    /// benchmarks' figures against.
    #[arg(long, value_name = "ROUNDS", conflicts_with_all = ["rate", "pending_memory", "growth"])]
    pub machine: Option<usize>,
    /// Instead of a workload: submit this many asks per second (one call per
    /// millisecond) to W1's cluster for `--seconds` and report the latency
    /// from submission to allocation callback.
    #[arg(long, value_name = "ASKS_PER_SEC")]
    pub rate: Option<u64>,
    /// Instead of one workload: W1 over a grid of node counts (500 to 50,000)
    /// and ask counts (10,000 to 1,000,000), reporting time per allocation.
    #[arg(long, conflicts_with_all = ["rate", "pending_memory"])]
    pub growth: bool,
    /// How long `--rate` keeps submitting, or `--workload mesos` measures.
    #[arg(long, default_value_t = 6.0)]
    pub seconds: f64,
    /// `--workload mesos`: frameworks (each its own role and HTTP client).
    #[arg(long, default_value_t = 10)]
    pub frameworks: usize,
    /// `--workload mesos`: simulated agents.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// `--workload mesos`: resources of each agent (Mesos resource text).
    #[arg(long, default_value = "cpus:8;mem:8192")]
    pub agent_resources: String,
    /// `--workload mesos`: resources of each task (Mesos resource text).
    #[arg(long, default_value = "cpus:1;mem:1024")]
    pub task_resources: String,
    /// `--workload mesos`: seconds each simulated task runs (its
    /// `unisched.duration` label).
    #[arg(long, default_value_t = 0.1)]
    pub task_duration: f64,
    /// `--workload mesos`: the master's allocation interval in seconds
    /// (resources that came back are offered on it, as in Mesos).
    #[arg(long, default_value_t = 0.1)]
    pub allocation_interval: f64,
    /// With `--rate`: seconds an allocation lives before the RM releases it.
    #[arg(long, default_value_t = 1.0, requires = "rate")]
    pub lifetime: f64,
    /// With `--rate`: seconds at the start whose asks are not counted (at
    /// most half of `--seconds`). The default is twice the default lifetime:
    /// the live allocations reach their working set after one lifetime, and
    /// the core's tables make their last doublings around then.
    #[arg(long, default_value_t = 2.0, requires = "rate")]
    pub warmup: f64,
    /// `--workload w4` and `--workload mesos`: pins the scheduling thread to
    /// the first CPU this process may run on and the Mesos master's thread
    /// to the second, as `serve --pin-threads` does.
    #[arg(long)]
    pub pin_threads: bool,
}

/// The CPUs of `--pin-threads` (scheduling thread, master), or why not.
fn pinned_cpus(args: &BenchArgs) -> Result<Option<(usize, usize)>, String> {
    if !args.pin_threads {
        return Ok(None);
    }
    if !matches!(args.workload, WorkloadArg::W4 | WorkloadArg::Mesos) {
        return Err(
            "--pin-threads applies to the workloads through the Mesos front end (w4, mesos)"
                .to_string(),
        );
    }
    let cpus = unisched_core::affinity::spread(2).map_err(|e| format!("--pin-threads: {e}"))?;
    Ok(Some((cpus[0], cpus[1])))
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
    if let Some(rounds) = args.machine {
        return run_machine(rounds);
    }
    if let Some(rate) = args.rate {
        return run_sustained(&args, rate);
    }
    if args.growth {
        return run_growth(&args);
    }
    let pinned = match pinned_cpus(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some((sched, master)) = pinned {
        eprintln!(
            "bench: the scheduling thread pinned to CPU {sched}, the Mesos master's thread to CPU {master}"
        );
    }
    if args.workload == WorkloadArg::Mesos {
        return run_mesos(&args, pinned);
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
        WorkloadArg::W4si => vec![WorkloadKind::W4si],
        WorkloadArg::All => WorkloadKind::ALL.to_vec(),
        WorkloadArg::Mesos => unreachable!("handled above"),
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
            warm_runs: args.warm_runs,
            pinned,
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

/// Runs `bench --rate`: one sustained-rate run per repeat.
fn run_sustained(args: &BenchArgs, rate: u64) -> ExitCode {
    let positive = |v: f64| v > 0.0 && v.is_finite();
    if rate == 0
        || !positive(args.seconds)
        || !positive(args.lifetime)
        || args.warmup.is_nan()
        || args.warmup < 0.0
    {
        eprintln!(
            "bench: --rate, --seconds and --lifetime must be positive, --warmup not negative"
        );
        return ExitCode::from(2);
    }
    let options = bench::sustained::SustainedOptions {
        rate,
        duration: Duration::from_secs_f64(args.seconds),
        nodes: args.nodes.unwrap_or(if args.quick { 50 } else { 5_000 }),
        tick: Duration::from_millis(1),
        timeout: Duration::from_secs(args.timeout),
        lifetime: Duration::from_secs_f64(args.lifetime),
        warmup: Duration::from_secs_f64(args.warmup.min(args.seconds / 2.0)),
    };
    if !args.json {
        println!(
            "{:>9} {:>11} {:>8} {:>6} {:>8} {:>8} {:>9} {:>8}",
            "rate", "achieved", "asks", "nodes", "p50 ms", "p99 ms", "p99.9 ms", "max ms"
        );
    }
    for _ in 0..args.repeat.max(1) {
        match bench::sustained::run(&options) {
            Ok(r) if args.json => {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            }
            Ok(r) => println!(
                "{:>9} {:>11.0} {:>8} {:>6} {:>8.3} {:>8.3} {:>9.3} {:>8.3}",
                r.rate,
                r.achieved_rate,
                r.asks,
                r.nodes,
                r.latency_p50_ms,
                r.latency_p99_ms,
                r.latency_p999_ms,
                r.latency_max_ms
            ),
            Err(e) => {
                eprintln!("bench: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Runs `bench --workload mesos`: one run per repeat, then the medians.
fn run_mesos(args: &BenchArgs, pinned: Option<(usize, usize)>) -> ExitCode {
    let positive = |v: f64| v > 0.0 && v.is_finite();
    if args.frameworks == 0
        || args.agents == 0
        || !positive(args.seconds)
        || !positive(args.task_duration)
        || !positive(args.allocation_interval)
    {
        eprintln!(
            "bench: --frameworks, --agents, --seconds, --task-duration and --allocation-interval must be positive"
        );
        return ExitCode::from(2);
    }
    let (frameworks, agents, seconds) = if args.quick {
        (
            args.frameworks.min(2),
            args.agents.min(4),
            args.seconds.min(0.5),
        )
    } else {
        (args.frameworks, args.agents, args.seconds)
    };
    let options = bench::mesos_http::MesosOptions {
        frameworks,
        agents,
        agent_resources: args.agent_resources.clone(),
        task_resources: args.task_resources.clone(),
        task_duration: Duration::from_secs_f64(args.task_duration),
        allocation_interval: Duration::from_secs_f64(args.allocation_interval),
        seconds,
        pinned,
    };
    let mut reports = Vec::new();
    for repeat in 1..=args.repeat.max(1) {
        match bench::mesos_http::run(&options) {
            Ok(r) => {
                eprintln!(
                    "mesos repeat {repeat}: {} tasks finished ({:.0}/s), {} offers ({:.0}/s), offer to TASK_RUNNING p50 {:.2} ms p99 {:.2} ms",
                    r.finished,
                    r.tasks_per_second,
                    r.offers,
                    r.offers_per_second,
                    r.latency_p50_ms,
                    r.latency_p99_ms
                );
                reports.push(r);
            }
            Err(e) => {
                eprintln!("bench: mesos: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let median = |f: &dyn Fn(&bench::mesos_http::MesosReport) -> f64| {
        bench::Spread::of(&reports.iter().map(f).collect::<Vec<_>>()).median
    };
    let mut summary = reports.last().cloned().expect("at least one repeat");
    summary.tasks_per_second = median(&|r| r.tasks_per_second);
    summary.offers_per_second = median(&|r| r.offers_per_second);
    summary.latency_p50_ms = median(&|r| r.latency_p50_ms);
    summary.latency_p99_ms = median(&|r| r.latency_p99_ms);
    print!("{}", bench::mesos_http::format_report(&summary));
    if reports.iter().any(|r| r.finished == 0) {
        eprintln!("bench: mesos: a repeat finished no task");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Runs `bench --growth`: W1's cost per allocation as nodes and asks grow.
fn run_growth(args: &BenchArgs) -> ExitCode {
    let (nodes, asks): (&[usize], &[usize]) = if args.quick {
        (&[50, 500], &[1_000, 5_000])
    } else {
        (&[500, 5_000, 50_000], &[10_000, 100_000, 1_000_000])
    };
    println!(
        "{:>7} {:>9} {:>12} {:>12} {:>12}",
        "nodes", "asks", "allocs/s med", "ns/alloc", "wall ms"
    );
    for &n in nodes {
        for &p in asks {
            let options = BenchOptions {
                kind: WorkloadKind::W1,
                nodes: Some(n),
                asks: Some(p),
                repeat: args.repeat.max(1),
                quick: false,
                seed: args.seed,
                timeout: Duration::from_secs(args.timeout),
                preemption: false,
                warm_runs: 0,
                pinned: None,
            };
            match bench::run(&options, |_| {}) {
                // Peak RSS is left out: one process runs every cell, and
                // the allocator keeps the pages of the larger ones.
                Ok(r) => println!(
                    "{:>7} {:>9} {:>12.0} {:>12.0} {:>12.2}",
                    n,
                    p,
                    r.allocations_per_second.median,
                    1e9 / r.allocations_per_second.median.max(1e-9),
                    r.wall_ms.median,
                ),
                Err(err) => {
                    eprintln!("error: W1 {n} x {p}: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

/// `bench --machine ROUNDS`: the probes of `bench::probe`, round by round.
fn run_machine(rounds: usize) -> ExitCode {
    let mut all = Vec::with_capacity(rounds);
    for i in 0..rounds.max(1) {
        let p = bench::probe::run();
        println!(
            "round {}: pointer chase {:.1} ns a step, multiply-add {:.2} ns, four multiply-add chains on two threads {:.2} / {:.2} ns",
            i + 1,
            p.chase_ns,
            p.alu_ns,
            p.pair_ns[0],
            p.pair_ns[1]
        );
        all.push(p);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let fastest = all
        .iter()
        .map(|p| p.pair_ns[1])
        .fold(f64::INFINITY, f64::min);
    let slow = all.iter().filter(|p| p.pair_ns[0] >= 1.5 * fastest).count();
    println!(
        "medians of {} rounds: pointer chase {:.1} ns, multiply-add {:.2} ns, four chains {:.2} / {:.2} ns; rounds with a vCPU at 1.5x the fastest four chains or slower: {slow}",
        all.len(),
        median(all.iter().map(|p| p.chase_ns).collect()),
        median(all.iter().map(|p| p.alu_ns).collect()),
        median(all.iter().map(|p| p.pair_ns[0]).collect()),
        median(all.iter().map(|p| p.pair_ns[1]).collect()),
    );
    ExitCode::SUCCESS
}
