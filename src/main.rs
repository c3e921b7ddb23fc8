//! The `unisched` command line: simulate, scenario, check-config, bench, soak, serve, framework, provider.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use unisched::cli;

// The core allocates small objects at a high rate (allocation records, wire
// messages); mimalloc halves the time spent in the allocator (BENCHMARKS.md).
// Built without transparent huge pages (`no_thp`): a first touch then zeroes
// 4 KiB, not 2 MiB, which halves peak RSS and takes the multi-millisecond page
// faults out of the latency tail, at no measurable cost in throughput.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// unisched: a cluster scheduler core.
#[derive(Debug, Parser)]
#[command(name = "unisched", version = cli::VERSION, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an in-process simulated RM against the core and print a summary.
    Simulate(cli::simulate::SimulateArgs),
    /// Run declarative scenario files and check their expectations.
    Scenario(cli::scenario::ScenarioArgs),
    /// Validate queue configuration files.
    CheckConfig(cli::check_config::CheckConfigArgs),
    /// Run a throughput benchmark workload.
    Bench(cli::bench::BenchArgs),
    /// Run the seeded deterministic simulation with fault injection and invariant checks.
    Soak(cli::soak::SoakArgs),
    /// Serve the scheduler over gRPC and REST (and, with --mesos-addr, as a Mesos master).
    Serve(Box<cli::serve::ServeArgs>),
    /// Run N tasks as a Mesos framework on any Mesos master; exit 0 once all finished.
    Framework(Box<cli::framework::FrameworkArgs>),
    /// Offer a directory-backed pool of disk as a Mesos resource provider until Ctrl-C.
    Provider(Box<cli::provider::ProviderArgs>),
}

fn main() -> ExitCode {
    cli::init_tracing();
    let args = Args::parse();
    match args.command {
        Command::Simulate(a) => cli::simulate::run(a),
        Command::Scenario(a) => cli::scenario::run(a),
        Command::CheckConfig(a) => cli::check_config::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Soak(a) => cli::soak::run(a),
        Command::Serve(a) => cli::serve::run(*a),
        Command::Framework(a) => cli::framework::run(*a),
        Command::Provider(a) => cli::provider::run(*a),
    }
}
