//! The `simulate` subcommand (not written yet).

use std::process::ExitCode;

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

/// Runs `simulate`.
pub fn run(_args: SimulateArgs) -> ExitCode {
    eprintln!("simulate: not available yet");
    ExitCode::FAILURE
}
