//! The `scenario` subcommand: runs declarative scenario files (see
//! `tests/scenarios/README.md`) and prints PASS/FAIL with a diff per failed check.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::scenario;

/// Arguments of `scenario`.
#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// Scenario files, or directories whose `*.yaml` files are all run.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Seconds a single scenario may take before it counts as hung.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

/// Runs `scenario`: exit 0 only when every expectation of every file holds.
pub fn run(args: ScenarioArgs) -> ExitCode {
    let files = match scenario::discover(&args.files) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("scenario: {err}");
            return ExitCode::FAILURE;
        }
    };
    if files.is_empty() {
        eprintln!("scenario: no scenario files found");
        return ExitCode::FAILURE;
    }
    let timeout = Duration::from_secs(args.timeout);
    let mut failed = 0;
    for file in &files {
        let outcome = scenario::run_file(file, timeout);
        print!("{}", outcome.render());
        if !outcome.passed() {
            failed += 1;
        }
    }
    println!(
        "{} scenarios, {} passed, {failed} failed",
        files.len(),
        files.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
