//! Results of a scenario run and how they are printed: one line per scenario,
//! then every failed check as expected vs actual, with the step it belongs to.

use std::fmt::{self, Display, Write as _};
use std::path::PathBuf;

/// Where a check was made: the setup (step 0) or a numbered step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRef {
    /// 0 for the setup, then 1, 2, ... in file order.
    pub index: usize,
    /// The step's action keyword (`expect` when it has none).
    pub kind: &'static str,
    /// The author's label, if any.
    pub label: Option<String>,
}

impl Display for StepRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.index == 0 {
            write!(f, "setup")?;
        } else {
            write!(f, "step {} ({})", self.index, self.kind)?;
        }
        if let Some(label) = &self.label {
            write!(f, " {label:?}")?;
        }
        Ok(())
    }
}

/// One check that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The step after which it was checked.
    pub step: StepRef,
    /// What was checked, e.g. `queue root.a allocated`.
    pub subject: String,
    /// What the scenario expects.
    pub expected: String,
    /// What the scheduler showed.
    pub actual: String,
}

/// The result of one scenario (or of a file that could not be run).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Scenario name (the file name when the file did not parse).
    pub name: String,
    /// The file it came from.
    pub file: Option<PathBuf>,
    /// Number of checks made.
    pub checks: usize,
    /// Checks that did not hold.
    pub failures: Vec<Failure>,
    /// Why the run stopped early (parse error, timeout, panic), if it did.
    pub aborted: Option<String>,
}

impl Outcome {
    /// True when the scenario ran to the end and every check held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.aborted.is_none()
    }

    /// `PASS name` or `FAIL name` followed by the diff of every failed check.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        let _ = write!(out, "{verdict} {}", self.name);
        if let Some(file) = &self.file {
            let _ = write!(out, " ({})", file.display());
        }
        let _ = writeln!(
            out,
            " [{} checks, {} failed]",
            self.checks,
            self.failures.len()
        );
        for failure in &self.failures {
            let _ = writeln!(out, "  {}: {}", failure.step, failure.subject);
            let _ = writeln!(out, "      expected: {}", failure.expected);
            let _ = writeln!(out, "      actual:   {}", failure.actual);
        }
        if let Some(reason) = &self.aborted {
            for (i, line) in reason.lines().enumerate() {
                let lead = if i == 0 { "  aborted: " } else { "           " };
                let _ = writeln!(out, "{lead}{line}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_prints_step_subject_and_both_sides() {
        let outcome = Outcome {
            name: "queue max".into(),
            file: Some("01.yaml".into()),
            checks: 3,
            failures: vec![Failure {
                step: StepRef {
                    index: 2,
                    kind: "add_asks",
                    label: Some("big asks".into()),
                },
                subject: "queue root.a allocated".into(),
                expected: "memory=120M".into(),
                actual: "memory=150M".into(),
            }],
            aborted: None,
        };
        assert_eq!(
            outcome.render(),
            "FAIL queue max (01.yaml) [3 checks, 1 failed]\n\
             \x20 step 2 (add_asks) \"big asks\": queue root.a allocated\n\
             \x20     expected: memory=120M\n\
             \x20     actual:   memory=150M\n"
        );
    }

    #[test]
    fn a_clean_run_passes_and_setup_is_named() {
        let outcome = Outcome {
            name: "ok".into(),
            checks: 1,
            ..Outcome::default()
        };
        assert!(outcome.passed());
        assert_eq!(outcome.render(), "PASS ok [1 checks, 0 failed]\n");
        let setup = StepRef {
            index: 0,
            kind: "setup",
            label: None,
        };
        assert_eq!(setup.to_string(), "setup");
    }

    #[test]
    fn an_abort_fails_even_without_failed_checks() {
        let outcome = Outcome {
            name: "x".into(),
            aborted: Some("timed out\nat step 3".into()),
            ..Outcome::default()
        };
        assert!(!outcome.passed());
        assert!(
            outcome
                .render()
                .ends_with("  aborted: timed out\n           at step 3\n")
        );
    }
}
