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

/// The log filter set at start and the handle that changes it (for the
/// Mesos operator API's SET_LOGGING_LEVEL, [`log_control`]).
static LOG_FILTER: std::sync::OnceLock<(String, FilterHandle)> = std::sync::OnceLock::new();

type FilterHandle =
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>;

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let base = std::env::var("RUST_LOG")
        .ok()
        .filter(|d| tracing_subscriber::EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| "warn".to_string());
    let filter = tracing_subscriber::EnvFilter::new(&base);
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = LOG_FILTER.set((base, handle));
    }
}

/// The log filter of a Mesos logging level: level 0 is the filter the
/// process started with, 1 adds debug and 2 or more trace for unisched's
/// crates (Mesos' glog verbosity levels, made `tracing`'s).
pub fn level_filter(base: &str, level: u32) -> String {
    let more = match level {
        0 => return base.to_string(),
        1 => "debug",
        _ => "trace",
    };
    let crates = [
        "unisched",
        "unisched_core",
        "unisched_server",
        "unisched_mesos",
    ];
    let extra: Vec<String> = crates.iter().map(|c| format!("{c}={more}")).collect();
    format!("{base},{}", extra.join(","))
}

struct CliLogLevels;

impl unisched_mesos::master::logging::LogVerbosity for CliLogLevels {
    fn set_level(&self, level: u32) -> Result<(), String> {
        let (base, handle) = LOG_FILTER
            .get()
            .ok_or("this process's logging is not set up by unisched")?;
        let filter = tracing_subscriber::EnvFilter::try_new(level_filter(base, level))
            .map_err(|e| e.to_string())?;
        handle.reload(filter).map_err(|e| e.to_string())
    }
}

/// What `unisched serve` gives its Mesos master to change the log filter
/// with (`init_tracing` set it up).
pub fn log_control() -> unisched_mesos::master::logging::LogControl {
    unisched_mesos::master::logging::LogControl(std::sync::Arc::new(CliLogLevels))
}

#[cfg(test)]
mod log_tests {
    use super::level_filter;

    #[test]
    fn logging_levels_add_to_the_filter_the_process_started_with() {
        assert_eq!(level_filter("warn", 0), "warn");
        let debug = level_filter("warn", 1);
        assert_eq!(
            debug,
            "warn,unisched=debug,unisched_core=debug,unisched_server=debug,unisched_mesos=debug"
        );
        assert!(level_filter("info", 7).ends_with("unisched_mesos=trace"));
        for level in 0..4 {
            let f = level_filter("warn,unisched_mesos::master=info", level);
            assert!(tracing_subscriber::EnvFilter::try_new(&f).is_ok(), "{f}");
        }
    }
}
