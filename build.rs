//! Records build information (git revision, build profile) for `unisched --version`
//! and the build info an RM sees.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The git directory of this checkout: `.git` itself, or where a `.git`
/// file points (a worktree); `None` outside git (an exported tree).
fn git_dir() -> Option<PathBuf> {
    let dot_git = Path::new(".git");
    if dot_git.is_dir() {
        return Some(dot_git.to_path_buf());
    }
    let text = std::fs::read_to_string(dot_git).ok()?;
    let dir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    dir.is_dir().then_some(dir)
}

fn main() {
    // Watched only where they exist: Cargo reruns a build script whose
    // watched path is missing on every build, and with it rebuilds this
    // crate for every cargo command (a worktree's `.git` is a file; an
    // exported tree has none).
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(git) = git_dir() {
        println!("cargo:rerun-if-changed={}", git.join("HEAD").display());
        // A worktree's branches live in the main repository's directory.
        let common = std::fs::read_to_string(git.join("commondir"))
            .map(|c| git.join(c.trim()))
            .unwrap_or(git);
        let refs = common.join("refs");
        if refs.is_dir() {
            println!("cargo:rerun-if-changed={}", refs.display());
        }
    }
    let revision = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=UNISCHED_GIT_REVISION={revision}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=UNISCHED_BUILD_PROFILE={profile}");
}
