//! The `bench` subcommand (not written yet).

use std::process::ExitCode;

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `bench`.
pub fn run(_args: BenchArgs) -> ExitCode {
    eprintln!("bench: not available yet");
    ExitCode::FAILURE
}
