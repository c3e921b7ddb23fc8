//! The `soak` subcommand: runs the seeded deterministic simulation for one or
//! more seeds, prints steps/s and counts, and for a violation the seed, the
//! step and a shrunk reproduction as a command line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::soak::{self, Counts, SoakOptions};

/// Arguments of `soak`.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of seeds to run (seed, seed+1, ...).
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// Operations per seed.
    #[arg(long, default_value_t = 1_000)]
    pub steps: usize,
    /// Nodes that join at the start.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// Share of callback calls that fail or panic on purpose.
    #[arg(long, default_value_t = 0.05)]
    pub fault_rate: f64,
    /// Keep starting new seeds until this many seconds have passed (overrides --seeds).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// Run only these operation indices of the seed, e.g. `3,17,40-42` (a reproduction).
    #[arg(long, value_name = "LIST")]
    pub ops: Option<String>,
    /// Do not shrink a failing run.
    #[arg(long)]
    pub no_shrink: bool,
    /// Steer clear of the known core bugs (see RELIABILITY.md) to look past them.
    #[arg(long)]
    pub avoid_known_bugs: bool,
    /// Leave out the gang and preemption operations (the operation mix from
    /// before they were added).
    #[arg(long)]
    pub no_gang: bool,
    /// Stop at the first seed with a violation.
    #[arg(long)]
    pub fail_fast: bool,
    /// Mesos mode: frameworks, agents and resource providers against the
    /// Mesos master on the core (in process, virtual clock); `--nodes`,
    /// `--fault-rate`, `--no-gang` and `--avoid-known-bugs` do not apply.
    #[arg(long)]
    pub mesos: bool,
}

/// Runs `soak`.
pub fn run(args: SoakArgs) -> ExitCode {
    let only = match args.ops.as_deref().map(soak::parse_indices).transpose() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: --ops: {e}");
            return ExitCode::from(2);
        }
    };
    if args.mesos {
        return run_mesos(&args, only.as_deref());
    }
    let started = Instant::now();
    let deadline = args.duration.map(|s| started + Duration::from_secs(s));
    let mut totals = Counts::default();
    let (mut seeds_run, mut failed, mut busy) = (0u64, 0u64, Duration::ZERO);
    for seed in seeds(args.seed, args.seeds, deadline) {
        let options = SoakOptions {
            seed,
            steps: args.steps,
            nodes: args.nodes,
            fault_rate: args.fault_rate,
            avoid_known_bugs: args.avoid_known_bugs,
            gang_ops: !args.no_gang,
            ..Default::default()
        };
        let report = soak::run_seed(&options, only.as_deref(), !args.no_shrink);
        seeds_run += 1;
        busy += report.elapsed;
        totals.add(&report.execution.counts);
        match &report.execution.failure {
            None => println!(
                "seed {seed}: ok, {} steps in {:.2?}",
                report.execution.steps, report.elapsed
            ),
            Some(f) => {
                failed += 1;
                print_failure(&args, seed, f, &report);
                if args.fail_fast {
                    break;
                }
            }
        }
    }
    let secs = busy.as_secs_f64().max(1e-9);
    println!(
        "soak: {seeds_run} seeds, {} steps, {:.0} steps/s, {failed} seeds with violations",
        totals.steps,
        totals.steps as f64 / secs
    );
    println!(
        "  allocations {}, releases {}, rejections {}, reloads {} applied / {} refused, re-registrations {} ({} allocations recovered), callback faults {}",
        totals.allocations,
        totals.releases,
        totals.rejections,
        totals.reloads,
        totals.refused_reloads,
        totals.reregistrations,
        totals.recovered,
        totals.callback_faults
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_failure(args: &SoakArgs, seed: u64, f: &soak::Failure, report: &soak::SeedReport) {
    let op =
        f.op.as_ref()
            .map_or("setup".to_string(), ToString::to_string);
    println!("seed {seed}: VIOLATION at step {} ({op}):", f.step);
    for v in &f.violations {
        println!("    {v}");
    }
    let (Some(kept), Some(rf)) = (&report.reproduction, &report.reproduction_failure) else {
        return;
    };
    let all = soak::ops::generate(seed, args.steps, args.nodes);
    println!(
        "  minimal reproduction ({} operations, fails at step {}):",
        kept.len(),
        rf.step
    );
    println!(
        "    unisched soak --seed {seed} --steps {} --nodes {} --fault-rate {}{}{} --ops {}",
        args.steps,
        args.nodes,
        args.fault_rate,
        if args.avoid_known_bugs {
            " --avoid-known-bugs"
        } else {
            ""
        },
        if args.no_gang { " --no-gang" } else { "" },
        soak::format_indices(kept)
    );
    for &i in kept {
        println!("    [{i}] {}", all[i]);
    }
    for v in &rf.violations {
        println!("    -> {v}");
    }
}

/// The seeds to run from `first`: `count` of them, or as many as start
/// before `deadline` when one is given.
fn seeds(first: u64, count: u64, deadline: Option<Instant>) -> impl Iterator<Item = u64> {
    (first..)
        .enumerate()
        .take_while(move |&(i, _)| match deadline {
            Some(d) => Instant::now() < d,
            None => (i as u64) < count,
        })
        .map(|(_, seed)| seed)
}

/// `soak --mesos`: the Mesos-mode simulation over the seeds asked for.
fn run_mesos(args: &SoakArgs, only: Option<&[usize]>) -> ExitCode {
    use crate::soak::mesos::{self, MesosCounts, MesosOptions};
    let started = Instant::now();
    let deadline = args.duration.map(|s| started + Duration::from_secs(s));
    let mut totals = MesosCounts::default();
    let (mut seeds_run, mut failed, mut busy) = (0u64, 0u64, Duration::ZERO);
    for seed in seeds(args.seed, args.seeds, deadline) {
        let options = MesosOptions {
            seed,
            steps: args.steps,
            ..Default::default()
        };
        let report = mesos::run_seed(&options, only, !args.no_shrink);
        seeds_run += 1;
        busy += report.elapsed;
        totals.add(&report.execution.counts);
        match &report.execution.failure {
            None => println!(
                "seed {seed}: ok, {} steps in {:.2?}",
                report.execution.steps, report.elapsed
            ),
            Some(f) => {
                failed += 1;
                print_mesos_failure(args, seed, f, &report);
                if args.fail_fast {
                    break;
                }
            }
        }
    }
    let secs = busy.as_secs_f64().max(1e-9);
    println!(
        "soak --mesos: {seeds_run} seeds, {} steps, {:.0} steps/s, {failed} seeds with violations",
        totals.steps,
        totals.steps as f64 / secs
    );
    let t = &totals;
    println!(
        "  virtual seconds {}, offers {}, declines {}, accepts {} (+{} invalid), tasks launched {} ({} TASK_ERROR), status updates {}, acks {} sent / {} withheld, subscriptions {}, disconnects {}, frameworks removed {}, agent changes {}",
        t.seconds,
        t.offers,
        t.declines,
        t.accepts,
        t.invalid_accepts,
        t.launched,
        t.task_errors,
        t.updates,
        t.acks,
        t.acks_lost,
        t.subscriptions,
        t.disconnects,
        t.removals,
        t.agent_changes
    );
    println!(
        "  providers: subscriptions {}, drops {}, UPDATE_STATE {}; disk operations {} ({} dropped at a stale version), statuses {} ({} lost on the way), acknowledged by frameworks {}",
        t.provider_subscriptions,
        t.provider_drops,
        t.provider_updates,
        t.operations,
        t.operations_dropped,
        t.operation_statuses,
        t.operation_statuses_lost,
        t.operation_acks
    );
    println!(
        "  operator: weight and quota changes {}, refused {}",
        t.operator_changes, t.operator_refusals
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_mesos_failure(
    args: &SoakArgs,
    seed: u64,
    f: &crate::soak::mesos::MesosFailure,
    report: &crate::soak::mesos::MesosReport,
) {
    let op = match (&f.op, f.step) {
        (Some(op), _) => op.to_string(),
        (None, 0) => "setup".to_string(),
        (None, _) => "final drain or hang".to_string(),
    };
    println!("seed {seed}: VIOLATION at step {} ({op}):", f.step);
    for v in &f.violations {
        println!("    {v}");
    }
    let (Some(kept), Some(rf)) = (&report.reproduction, &report.reproduction_failure) else {
        return;
    };
    let all = crate::soak::mesos::ops::generate(seed, args.steps);
    println!(
        "  minimal reproduction ({} operations, fails at step {}):",
        kept.len(),
        rf.step
    );
    println!(
        "    unisched soak --mesos --seed {seed} --steps {} --ops {}",
        args.steps,
        soak::format_indices(kept)
    );
    for &i in kept {
        println!("    [{i}] {}", all[i]);
    }
    for v in &rf.violations {
        println!("    -> {v}");
    }
}
