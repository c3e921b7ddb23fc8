//! The `serve` subcommand: the core behind gRPC (the SI) and REST (`/ws/v1`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_server::{
    DEFAULT_GRPC_ADDR, DEFAULT_HTTP_ADDR, DefaultConfig, ServerOptions, TlsIdentity, Token,
};

use crate::watch::{
    ConfigFileWatcher, FileConfigSource, WatchOptions, read_config_file, reload_default_config_rms,
};

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Queue configuration (YAML) for RMs that register without one; also what
    /// `update_configuration` re-reads. The file is watched: a change reloads
    /// every RM that registered without a configuration of its own.
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
    /// Certificate chain (PEM) to serve both ports over TLS; needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Most concurrent gRPC streams per connection.
    #[arg(long, default_value_t = unisched_server::DEFAULT_MAX_CONCURRENT_STREAMS)]
    pub max_concurrent_streams: u32,
}

/// Runs `serve` until SIGTERM or Ctrl-C.
pub fn run(args: ServeArgs) -> ExitCode {
    let mut options = SchedulerOptions::default();
    let mut default_config = None;
    if let Some(path) = &args.config {
        let text = match read_config_file(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("serve: {e}");
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
        default_config = Some((path.clone(), text));
        options.config_source = Some(Arc::new(FileConfigSource::new(path.clone())));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match (std::fs::read(cert), std::fs::read(key)) {
            (Ok(cert_pem), Ok(key_pem)) => Some(TlsIdentity { cert_pem, key_pem }),
            (Err(e), _) => {
                eprintln!("serve: cannot read {}: {e}", cert.display());
                return ExitCode::FAILURE;
            }
            (_, Err(e)) => {
                eprintln!("serve: cannot read {}: {e}", key.display());
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let scheduler = Scheduler::start(options);
    let (default_config, watcher) = match default_config {
        Some((path, text)) => {
            let (default, watcher) = watch_config(&scheduler, path, text);
            (Some(default), watcher)
        }
        None => (None, None),
    };
    let server_options = ServerOptions {
        grpc_addr: args.grpc_addr,
        http_addr: args.http_addr,
        token: Token::new(args.token.as_deref()),
        default_config,
        tls,
        max_concurrent_streams: args.max_concurrent_streams,
        ..ServerOptions::default()
    };
    let code = match unisched_server::serve_until_signal(scheduler.clone(), server_options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serve: {e}");
            ExitCode::FAILURE
        }
    };
    // Stop reloads before the core goes away.
    drop(watcher);
    scheduler.shutdown();
    code
}

/// The default configuration for RMs that register without one, and the
/// watcher that reloads it (and them) when `path` changes; no watcher when its
/// thread cannot start (serving goes on without reloads).
fn watch_config(
    scheduler: &Scheduler,
    path: PathBuf,
    text: String,
) -> (Arc<DefaultConfig>, Option<ConfigFileWatcher>) {
    let options = WatchOptions {
        applied_checksum: Some(unisched_core::config::checksum(&text)),
        ..WatchOptions::default()
    };
    let default = Arc::new(DefaultConfig::new(text));
    let (sched, def) = (scheduler.clone(), default.clone());
    let started = ConfigFileWatcher::start(path.clone(), options, move |text| {
        reload_default_config_rms(&sched, &def, text);
    });
    match started {
        Ok(watcher) => (default, Some(watcher)),
        Err(e) => {
            eprintln!("serve: not watching {}: {e}", path.display());
            (default, None)
        }
    }
}
