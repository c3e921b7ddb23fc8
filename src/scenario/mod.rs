//! Declarative scenarios: YAML files that set up a cluster, drive the core
//! step by step through the SI and state what must hold after each step.
//!
//! A file is decoded strictly ([`format`]), run against a fresh in-process
//! scheduler with a virtual clock ([`driver`]), checked against snapshots and
//! recorded callbacks ([`expect`], [`invariants`]) and reported as PASS/FAIL
//! with a diff of every failed check ([`report`]). The format is documented in
//! `tests/scenarios/README.md`.
//!
//! Each run owns its scheduler on a thread of its own; a watchdog turns a hang
//! or a panic into a failed outcome instead of stalling the caller.

pub mod driver;
pub mod expect;
pub mod format;
pub mod invariants;
pub mod quantity;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub use format::Scenario;
pub use report::Outcome;

/// Why a scenario file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not a valid scenario (the message carries line and column).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong and where.
        message: String,
    },
}

/// Decodes a scenario from YAML text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    // The decoder's message ends with "at line L column C".
    serde_yaml::from_str(text).map_err(|err| ScenarioError::Parse {
        path: origin.to_owned(),
        message: err.to_string(),
    })
}

/// Reads and decodes a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

/// The scenario files named by `paths`: files as given, directories expanded to
/// their `*.yaml` / `*.yml` files in name order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ScenarioError> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Runs a scenario on its own thread; a panic or a run longer than `timeout`
/// becomes an aborted outcome naming the step it stopped in.
pub fn run(scenario: Scenario, timeout: Duration) -> Outcome {
    let name = scenario.name.clone();
    let progress = Arc::new(AtomicUsize::new(0));
    let (done, result) = mpsc::channel();
    let watched = progress.clone();
    let spawned = std::thread::Builder::new()
        .name(unisched_core::scheduler::thread_name("scenario ", &name))
        .spawn(move || {
            let outcome = driver::run(&scenario, &watched);
            let _ = done.send(outcome);
        });
    let handle = match spawned {
        Ok(handle) => handle,
        Err(err) => return aborted(name, format!("cannot start a thread: {err}")),
    };
    let where_ = |step: usize| match step {
        0 => "setup".to_owned(),
        n => format!("step {n}"),
    };
    match result.recv_timeout(timeout) {
        Ok(outcome) => {
            let _ = handle.join();
            outcome
        }
        Err(mpsc::RecvTimeoutError::Timeout) => aborted(
            name,
            format!(
                "timed out after {timeout:?} in {} (settle() never returned?)",
                where_(progress.load(Ordering::SeqCst))
            ),
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let message = match handle.join() {
                Err(payload) => payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".to_owned()),
                Ok(()) => "(no outcome)".to_owned(),
            };
            aborted(
                name,
                format!(
                    "panicked in {}: {message}",
                    where_(progress.load(Ordering::SeqCst))
                ),
            )
        }
    }
}

/// Loads and runs one file; a file that does not load is a failed outcome.
pub fn run_file(path: &Path, timeout: Duration) -> Outcome {
    let mut outcome = match load(path) {
        Ok(scenario) => run(scenario, timeout),
        Err(err) => aborted(
            path.file_stem().map_or_else(
                || path.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            ),
            err.to_string(),
        ),
    };
    outcome.file = Some(path.to_path_buf());
    outcome
}

fn aborted(name: String, reason: String) -> Outcome {
    Outcome {
        name,
        aborted: Some(reason),
        ..Outcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::format::StepAction;

    const MINIMAL: &str = "
name: minimal
config: |
  partitions:
    - name: default
      queues: [{name: root}]
nodes:
  - {id: n1, capacity: {memory: 100M, vcore: 10}}
asks:
  - {key: a1, app: app-1, resource: {memory: 10M, vcore: 1}, count: 2}
steps:
  - advance: 31s
  - nodes: [{id: n1, action: drain}]
    expect:
      allocations: 2
      queues:
        root: {allocated: {memory: 20M}}
  - label: raw action
    nodes: [{id: n1, action: 99}]
    error: invalid
";

    #[test]
    fn a_scenario_decodes_with_units_converted() {
        let s = parse(MINIMAL, "inline").expect("parses");
        assert_eq!(s.rm_id, "rm");
        assert_eq!(s.nodes[0].capacity.0["vcore"], 10_000);
        assert_eq!(s.asks[0].resource.0["memory"], 10_000_000);
        assert_eq!(s.steps.len(), 3);
        assert!(
            matches!(s.steps[0].action, Some(StepAction::Advance(d)) if d.0 == Duration::from_secs(31))
        );
        let expect = s.steps[1].expect.as_ref().expect("expect block");
        assert_eq!(expect.allocations, Some(2));
        assert!(matches!(&s.steps[2].action, Some(StepAction::Nodes(a)) if a[0].action.1 == 99));
    }

    fn error_of(text: &str) -> String {
        parse(text, "f.yaml")
            .expect_err("must not parse")
            .to_string()
    }

    #[test]
    fn unknown_keys_are_errors_with_a_line() {
        let text = MINIMAL.replace("count: 2", "count: 2, colour: red");
        let err = error_of(&text);
        assert!(
            err.starts_with("f.yaml: asks[0]: unknown field `colour`"),
            "{err}"
        );
        assert!(err.ends_with("at line 10 column 72"), "{err}");
        assert!(err.contains("colour"), "{err}");
        let err = error_of(&MINIMAL.replace("allocations: 2", "allocation: 2"));
        assert!(
            err.contains("line 15") && err.contains("allocation"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_are_errors_with_a_line() {
        let err = error_of(&MINIMAL.replace("memory: 100M", "memory: 100Q"));
        assert!(
            err.contains("line 8") && err.contains("unknown suffix"),
            "{err}"
        );
        let err = error_of(&MINIMAL.replace("action: drain", "action: melt"));
        assert!(
            err.contains("line 13") && err.contains("unknown node action"),
            "{err}"
        );
        let err = error_of(&MINIMAL.replace("advance: 31s", "advance: soon"));
        assert!(err.contains("line 12") && err.contains("duration"), "{err}");
    }

    #[test]
    fn a_step_holds_one_action() {
        let err =
            error_of(&MINIMAL.replace("- advance: 31s", "- {advance: 31s, remove_apps: [x]}"));
        assert!(err.contains("at most one action"), "{err}");
        let err = error_of(&MINIMAL.replace("- advance: 31s", "- {label: nothing}"));
        assert!(err.contains("an action or an expect"), "{err}");
        let err = error_of(&MINIMAL.replace("- advance: 31s", "- {advance: 31s, error: x}"));
        assert!(err.contains("`error` needs"), "{err}");
    }
}
