//! Subcommands of the `unisched` binary, one module each.

pub mod bench;
pub mod check_config;
pub mod framework;
pub mod provider;
pub mod scenario;
pub mod serve;
pub mod simulate;
pub mod soak;

/// The body encoding of `--content-type` (`framework`, `provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/x-protobuf`.
    Protobuf,
}

impl Encoding {
    /// The codec's content type.
    pub fn content_type(self) -> unisched_mesos::codec::ContentType {
        match self {
            Encoding::Json => unisched_mesos::codec::ContentType::Json,
            Encoding::Protobuf => unisched_mesos::codec::ContentType::Protobuf,
        }
    }
}

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
