//! Subcommands of the `unisched` binary, one module each.

pub mod bench;
pub mod check_config;
pub mod framework;
pub mod scenario;
pub mod serve;
pub mod simulate;
pub mod soak;

/// Version string with the git revision the binary was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("UNISCHED_GIT_REVISION"),
    ", ",
    env!("UNISCHED_BUILD_PROFILE"),
    ")"
);

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
