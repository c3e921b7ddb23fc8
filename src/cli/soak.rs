//! The `soak` subcommand (not written yet).

use std::process::ExitCode;

/// Arguments of `soak`.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {}

/// Runs `soak`.
pub fn run(_args: SoakArgs) -> ExitCode {
    eprintln!("soak: not available yet");
    ExitCode::FAILURE
}
