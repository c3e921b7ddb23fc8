//! The `check-config` subcommand: validates queue configuration files.
//!
//! Each valid file gets one summary line on stdout; each problem of an invalid or
//! unreadable file gets one line on stderr, as `FILE:LINE:COL: message` when the
//! position is known and `FILE: message` otherwise. The exit code is 0 only when every
//! file is valid.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use unisched_core::config::{self, SchedulerConfig};

/// Arguments of `check-config`.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// Queue configuration files (YuniKorn YAML) to validate.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs `check-config`.
pub fn run(args: CheckConfigArgs) -> ExitCode {
    let mut all_valid = true;
    for path in &args.files {
        match check_file(path) {
            Ok(summary) => println!("{summary}"),
            Err(lines) => {
                all_valid = false;
                for line in lines {
                    eprintln!("{line}");
                }
            }
        }
    }
    if all_valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Checks one file: its summary line, or one line per problem.
fn check_file(path: &Path) -> Result<String, Vec<String>> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| vec![format!("{name}: cannot read file: {e}")])?;
    if bytes.len() > config::MAX_CONFIG_BYTES {
        // Refuse before decoding, like `parse` would after.
        return Err(vec![format!(
            "{name}: file is {} bytes, more than the limit of {} bytes",
            bytes.len(),
            config::MAX_CONFIG_BYTES
        )]);
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        vec![format!(
            "{name}: file is not valid UTF-8 (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )]
    })?;
    match config::parse(&text) {
        Ok(parsed) => Ok(format!("{name}: ok: {}", summarize(&parsed))),
        Err(errors) => Err(errors
            .0
            .iter()
            .map(|e| match (e.line, e.column) {
                (Some(l), Some(c)) => format!("{name}:{l}:{c}: {}", e.describe()),
                (Some(l), None) => format!("{name}:{l}: {}", e.describe()),
                _ => format!("{name}: {}", e.describe()),
            })
            .collect()),
    }
}

/// `1 partition, 5 queues, 2 placement rules`, counted over every partition.
fn summarize(c: &SchedulerConfig) -> String {
    let partitions = c.partitions.len();
    let queues: usize = c.partitions.iter().map(|p| p.root.queue_count()).sum();
    let rules: usize = c.partitions.iter().map(|p| p.placement_rules.len()).sum();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {}, {}",
        plural(partitions, "partition"),
        plural(queues, "queue"),
        plural(rules, "placement rule")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: &str) {
        let dir =
            std::env::temp_dir().join(format!("unisched-check-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("t{}.yaml", expect.len()));
        std::fs::write(&file, text).unwrap();
        let got = match check_file(&file) {
            Ok(s) => s,
            Err(lines) => lines.join("\n"),
        };
        let _ = std::fs::remove_file(&file);
        assert_eq!(got, expect.replace("FILE", &file.display().to_string()));
    }

    #[test]
    fn summaries_and_errors() {
        check(
            "partitions:\n- name: default\n  placementrules: [{name: provided}, {name: user, create: true}]\n  queues:\n  - name: root\n    queues: [{name: a}, {name: b, queues: [{name: c}, {name: d}]}]\n",
            "FILE: ok: 1 partition, 5 queues, 2 placement rules",
        );
        check(
            "partitions: [{queues: [{name: root, queues: [{name: 'a b'}]}]}]\n",
            "FILE:1:53: partition default: queue root.a b: invalid queue name 'a b': use 1 to 64 characters from a-z, A-Z, 0-9 and _ : # / @ -",
        );
        check("", "FILE: configuration is empty");
    }

    #[test]
    fn not_utf8() {
        let file = std::env::temp_dir().join(format!(
            "unisched-check-config-{}-bin.yaml",
            std::process::id()
        ));
        std::fs::write(&file, b"partitions: \xff").unwrap();
        let err = check_file(&file).unwrap_err();
        let _ = std::fs::remove_file(&file);
        assert_eq!(
            err,
            vec![format!(
                "{}: file is not valid UTF-8 (first bad byte at offset 12)",
                file.display()
            )]
        );
    }

    #[test]
    fn unreadable_file() {
        let missing = Path::new("/nonexistent/unisched/config.yaml");
        let err = check_file(missing).unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(
            err[0].starts_with("/nonexistent/unisched/config.yaml: cannot read file:"),
            "{err:?}"
        );
    }
}
