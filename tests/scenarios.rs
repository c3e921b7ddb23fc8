//! Runs every scenario file in `tests/scenarios/` and fails with the diff of
//! every failed scenario. `UNISCHED_SCENARIO=text` runs only the files whose
//! name contains `text`.

use std::path::PathBuf;
use std::time::Duration;

use unisched::scenario;

/// A scenario that takes longer than this is reported as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn every_scenario_holds() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let files = scenario::discover(&[dir]).expect("tests/scenarios is readable");
    assert!(!files.is_empty(), "no scenario files in tests/scenarios");
    let only = std::env::var("UNISCHED_SCENARIO").unwrap_or_default();
    let mut ran = 0;
    let mut failed = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !name.contains(&only) {
            continue;
        }
        ran += 1;
        let outcome = scenario::run_file(file, TIMEOUT);
        let report = outcome.render();
        println!("{}", report.lines().next().unwrap_or_default());
        if !outcome.passed() {
            failed.push(report);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {ran} scenarios failed:\n\n{}",
        failed.len(),
        failed.join("\n")
    );
}
