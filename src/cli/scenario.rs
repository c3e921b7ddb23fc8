//! The `scenario` subcommand (not written yet).

use std::process::ExitCode;

/// Arguments of `scenario`.
#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {}

/// Runs `scenario`.
pub fn run(_args: ScenarioArgs) -> ExitCode {
    eprintln!("scenario: not available yet");
    ExitCode::FAILURE
}
