//! The `serve` subcommand: the core behind gRPC (the SI) and REST (`/ws/v1`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use unisched_core::{ConfigSource, Scheduler, SchedulerOptions};
use unisched_server::{DEFAULT_GRPC_ADDR, DEFAULT_HTTP_ADDR, ServerOptions, Token};

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Queue configuration (YAML) for RMs that register without one; also what
    /// `update_configuration` re-reads.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// gRPC listen address (scheduler interface).
    #[arg(long, default_value = DEFAULT_GRPC_ADDR)]
    pub grpc_addr: std::net::SocketAddr,
    /// HTTP listen address (REST under /ws/v1, metrics).
    #[arg(long, default_value = DEFAULT_HTTP_ADDR)]
    pub http_addr: std::net::SocketAddr,
    /// Bearer token required on mutating calls (gRPC and HTTP); none by default.
    #[arg(long)]
    pub token: Option<String>,
}

/// Reads the configuration file again on every `update_configuration`.
struct FileSource(PathBuf);

impl ConfigSource for FileSource {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        std::fs::read_to_string(&self.0).map_err(|e| format!("{}: {e}", self.0.display()))
    }
}

/// Runs `serve` until SIGTERM or Ctrl-C.
pub fn run(args: ServeArgs) -> ExitCode {
    let mut options = SchedulerOptions::default();
    let mut default_config = None;
    if let Some(path) = &args.config {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("serve: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        if let Err(errors) = unisched_core::config::parse(&text) {
            eprintln!(
                "serve: {} is not a valid configuration:\n{errors}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        default_config = Some(text);
        options.config_source = Some(Arc::new(FileSource(path.clone())));
    }
    let scheduler = Scheduler::start(options);
    let server_options = ServerOptions {
        grpc_addr: args.grpc_addr,
        http_addr: args.http_addr,
        token: Token::new(args.token.as_deref()),
        default_config,
        ..ServerOptions::default()
    };
    let code = match unisched_server::serve_until_signal(scheduler.clone(), server_options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serve: {e}");
            ExitCode::FAILURE
        }
    };
    scheduler.shutdown();
    code
}
