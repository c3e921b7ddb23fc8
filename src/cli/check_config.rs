//! The `check_config` subcommand (not written yet).

use std::process::ExitCode;

/// Arguments of `check_config`.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {}

/// Runs `check_config`.
pub fn run(_args: CheckConfigArgs) -> ExitCode {
    eprintln!("check_config: not available yet");
    ExitCode::FAILURE
}
