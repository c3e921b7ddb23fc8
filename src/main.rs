//! The `unisched` command line: simulate, scenario, check-config, bench.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use unisched::cli;

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
}

fn main() -> ExitCode {
    cli::init_tracing();
    let args = Args::parse();
    match args.command {
        Command::Simulate(a) => cli::simulate::run(a),
        Command::Scenario(a) => cli::scenario::run(a),
        Command::CheckConfig(a) => cli::check_config::run(a),
        Command::Bench(a) => cli::bench::run(a),
    }
}
