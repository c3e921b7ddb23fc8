//! The framework side (client, driver), the provider side (provider) and
//! what they share (http_client) never import the master side (master,
//! agents, the local cluster) nor the unisched core: they must work against
//! any Mesos master. `in_process.rs` is the one module that may see both.

use std::path::Path;

/// Paths the framework side must not name.
const FORBIDDEN: [&str; 7] = [
    "crate::master",
    "crate::agent",
    "crate::local",
    "crate::in_process",
    "unisched_core",
    "unisched_si",
    "unisched_shim_api",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_framework_and_provider_sides_do_not_import_the_master_side() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["client", "driver", "http_client", "provider"] {
        let before = files.len();
        rust_files(&src.join(dir), &mut files);
        assert!(files.len() > before, "no sources under src/{dir}");
    }
    assert!(files.len() >= 20, "found {files:?}");
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue; // Docs may point at the other side.
            }
            // `super::super::master` and the like would reach it too.
            let reaches_up = line.contains("super::super::")
                && FORBIDDEN
                    .iter()
                    .any(|f| line.contains(f.trim_start_matches("crate::")));
            if FORBIDDEN.iter().any(|f| line.contains(f)) || reaches_up {
                offences.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}
