//! The `simulate` subcommand: runs the built-in simulated cluster (or one with
//! the given queue configuration) against the core and prints a summary.

use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::simulate::{self, SimulateOptions};

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Asks submitted over the run.
    #[arg(long, default_value_t = 50_000)]
    pub asks: usize,
    /// Applications the asks are spread over.
    #[arg(long, default_value_t = 20)]
    pub apps: usize,
    /// Queue configuration (YuniKorn YAML) replacing the built-in one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Seed for sizes, priorities and releases.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Batches the asks are submitted in.
    #[arg(long, default_value_t = 10)]
    pub batches: usize,
}

/// Runs `simulate`.
pub fn run(args: SimulateArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(err) => {
                eprintln!(
                    "error: cannot read queue configuration {}: {err}",
                    path.display()
                );
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let options = SimulateOptions {
        nodes: args.nodes,
        asks: args.asks,
        apps: args.apps,
        seed: args.seed,
        config,
        batches: args.batches,
    };
    let bar = ProgressBar::with_draw_target(Some(args.asks as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} allocated {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = simulate::run(&options, |p| {
        bar.set_position(p.allocations as u64);
        bar.set_message(format!(
            "round {}, {} submitted, {} running",
            p.round, p.submitted, p.running
        ));
    });
    bar.finish_and_clear();
    match result {
        Ok(report) => {
            print!("{}", report.to_table());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
