//! The `serve` subcommand: the core behind gRPC (the SI) and REST (`/ws/v1`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::master::MasterHandle;
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
    /// How often the totals behind /ws/v1/history/* and the dashboard's
    /// charts are sampled (e.g. `10s`); upstream samples once a minute.
    #[arg(long, default_value = "60s")]
    pub history_interval: String,
    /// Pins the scheduling thread to the first CPU this process may run on
    /// and (with --mesos-addr) the Mesos master's thread to the second, so
    /// that the two threads of an allocation run never share a CPU. Off by
    /// default; refused when the process may use fewer CPUs than that.
    #[arg(long)]
    pub pin_threads: bool,
    /// The Mesos-compatible master's flags.
    #[command(flatten)]
    pub mesos: MesosArgs,
}

/// The Mesos-compatible master of `serve`.
#[derive(Debug, clap::Args)]
pub struct MesosArgs {
    /// Serve Mesos' v1 scheduler API (and /state, /metrics/snapshot, /health)
    /// here, e.g. 127.0.0.1:5050: Mesos frameworks get offers from this core.
    #[arg(long)]
    pub mesos_addr: Option<std::net::SocketAddr>,
    /// Embedded agents to start (like mesos-local).
    #[arg(long, default_value_t = 1, requires = "mesos_addr")]
    pub agents: usize,
    /// Resources of each embedded agent, in Mesos' resource text.
    #[arg(long, default_value = unisched_mesos::local::DEFAULT_AGENT_RESOURCES, requires = "mesos_addr")]
    pub agent_resources: String,
    /// How embedded agents run tasks: `process` (/bin/sh -c in a sandbox) or
    /// `simulated` (no process; finished after the task's `unisched.duration` label).
    #[arg(long, default_value = "process", requires = "mesos_addr")]
    pub agent_executor: String,
    /// Where process agents make task sandboxes.
    #[arg(long, requires = "mesos_addr")]
    pub agent_work_dir: Option<PathBuf>,
    /// Role weights, e.g. `r1=2,r2=1` (queue weights of the roles' queues).
    #[arg(long, requires = "mesos_addr")]
    pub mesos_weights: Option<String>,
    /// How often an allocation run happens when nothing else triggers one (e.g. `1s`).
    #[arg(long, default_value = "1s", requires = "mesos_addr")]
    pub allocation_interval: String,
    /// Rescind offers not answered within this long (e.g. `30s`); never by default.
    #[arg(long, requires = "mesos_addr")]
    pub offer_timeout: Option<String>,
    /// Minimum resources an offer must hold, alternatives separated by `|`.
    #[arg(long, default_value = "cpus:0.01|mem:32", requires = "mesos_addr")]
    pub min_allocatable_resources: String,
    /// Mesos' credentials file (JSON: `{"credentials": [{"principal": "p",
    /// "secret": "s"}]}`; a path or a file:// URL): the principals frameworks
    /// authenticate as, with SASL CRAM-MD5 (libprocess) or HTTP Basic (v1).
    #[arg(long, requires = "mesos_addr")]
    pub mesos_credentials: Option<String>,
    /// Only frameworks that authenticated (SASL, against --mesos-credentials)
    /// may register over the libprocess protocol (Mesos' --authenticate_frameworks).
    #[arg(long, requires = "mesos_credentials")]
    pub mesos_authenticate_frameworks: bool,
    /// Every call of the v1 scheduler API must carry HTTP Basic credentials of
    /// --mesos-credentials (Mesos' --authenticate_http_frameworks); --token
    /// is still taken too.
    #[arg(long, requires = "mesos_credentials")]
    pub mesos_authenticate_http_frameworks: bool,
}

impl MesosArgs {
    /// The local cluster options, or why the flags are wrong.
    pub fn options(
        &self,
        config: Option<String>,
        token: Option<String>,
    ) -> Result<Option<unisched_mesos::local::LocalOptions>, String> {
        use unisched_core::config::properties::parse_duration;
        use unisched_mesos::resources::Resources;
        let Some(addr) = self.mesos_addr else {
            return Ok(None);
        };
        let mut options = unisched_mesos::local::LocalOptions {
            addr,
            config,
            token,
            agents: self.agents,
            ..Default::default()
        };
        options.agent_resources = Resources::parse(&self.agent_resources)
            .map_err(|e| format!("--agent-resources: {e}"))?;
        options.executor = match self.agent_executor.as_str() {
            "process" => unisched_mesos::agent::ExecutorKind::Process,
            "simulated" => unisched_mesos::agent::ExecutorKind::Simulated,
            other => {
                return Err(format!(
                    "--agent-executor: '{other}' is neither process nor simulated"
                ));
            }
        };
        if let Some(dir) = &self.agent_work_dir {
            options.work_dir = dir.clone();
        }
        if let Some(path) = &self.mesos_credentials {
            options.credentials = unisched_mesos::master::auth::Credentials::load(path)
                .map_err(|e| format!("--mesos-credentials: {e}"))?;
        }
        options.authenticate_frameworks = self.mesos_authenticate_frameworks;
        options.authenticate_http_frameworks = self.mesos_authenticate_http_frameworks;
        let s = &mut options.settings;
        s.logging = Some(super::log_control());
        if let Some(w) = &self.mesos_weights {
            s.weights = unisched_mesos::master::config::parse_weights(w)
                .map_err(|e| format!("--mesos-weights: {e}"))?;
        }
        s.allocation_interval = parse_duration(&self.allocation_interval)
            .map_err(|e| format!("--allocation-interval: {e}"))?;
        if let Some(t) = &self.offer_timeout {
            s.offer_timeout = Some(parse_duration(t).map_err(|e| format!("--offer-timeout: {e}"))?);
        }
        s.min_allocatable = self
            .min_allocatable_resources
            .split('|')
            .map(|part| {
                Resources::parse(part.trim())
                    .map_err(|e| format!("--min-allocatable-resources: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(options))
    }
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
    let mut mesos = match args.mesos.options(
        default_config.as_ref().map(|(_, text)| text.clone()),
        args.token.clone(),
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let history_interval =
        match unisched_core::config::properties::parse_duration(&args.history_interval) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                eprintln!("serve: --history-interval must be above zero");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("serve: --history-interval: {e}");
                return ExitCode::FAILURE;
            }
        };
    if args.pin_threads {
        let wanted = if mesos.is_some() { 2 } else { 1 };
        match unisched_core::affinity::spread(wanted) {
            Ok(cpus) => {
                options.cpu = cpus.first().copied();
                if let Some(m) = mesos.as_mut() {
                    m.settings.cpu = cpus.get(1).copied();
                }
            }
            Err(e) => {
                eprintln!("serve: --pin-threads: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let scheduler = Scheduler::start(options);
    // The Mesos master, once started, is reloaded with the file too.
    let master: Arc<OnceLock<MasterHandle>> = Arc::new(OnceLock::new());
    let (default_config, watcher) = match default_config {
        Some((path, text)) => {
            let (default, watcher) = watch_config(&scheduler, path, text, master.clone());
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
        mesos,
        history_interval,
        ..ServerOptions::default()
    };
    let on_mesos: Box<dyn Fn(MasterHandle) + Send> = Box::new(move |m| {
        let _ = master.set(m);
    });
    let code = match unisched_server::serve_until_signal(
        scheduler.clone(),
        server_options,
        Some(on_mesos),
    ) {
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
    master: Arc<OnceLock<MasterHandle>>,
) -> (Arc<DefaultConfig>, Option<ConfigFileWatcher>) {
    let options = WatchOptions {
        applied_checksum: Some(unisched_core::config::checksum(&text)),
        ..WatchOptions::default()
    };
    let default = Arc::new(DefaultConfig::new(text));
    let (sched, def) = (scheduler.clone(), default.clone());
    let started = ConfigFileWatcher::start(path.clone(), options, move |text| {
        if let Some(m) = master.get()
            && let Err(e) = m.apply_config(text.clone())
        {
            tracing::warn!(error = %e, "Mesos partition keeps its configuration");
        }
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
