//! The `provider` subcommand: a storage resource provider on
//! `unisched_mesos::provider` that offers a directory-backed pool of disk
//! (`provider::storage::DirectoryPool`) through any Mesos master's v1
//! resource provider API, local to an agent (`--agent`) or external, until
//! Ctrl-C or SIGTERM. Its id, its unacknowledged operations and its volumes
//! are kept under `--root`, so a restart resubscribes with the same id and
//! offers the same volumes.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

use unisched_mesos::http_client::ClientError;
use unisched_mesos::provider::link::Link;
use unisched_mesos::provider::storage::{DirectoryPool, StorageError};
use unisched_mesos::provider::{
    Endpoint, RunnerError, RunnerHandle, RunnerOptions, RunnerStatus, runner,
};

use super::Encoding;

/// The provider type `--type` defaults to.
pub const DEFAULT_TYPE: &str = "org.unisched.rp.storage.directory";

/// Arguments of `provider`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// The master: `host:port` or `http://host:port`.
    #[arg(long)]
    pub master: String,
    /// The agent this provider is local to: its id (looked up in the
    /// master's /state) or N of `slave(N)`. Without it the provider is an
    /// external one, on the master's own endpoint.
    #[arg(long)]
    pub agent: Option<String>,
    /// The provider's name (with its type, what the master knows it by).
    #[arg(long)]
    pub name: String,
    /// The provider's type.
    #[arg(long = "type", default_value = DEFAULT_TYPE)]
    pub provider_type: String,
    /// The pool: disk only, e.g. `disk:10240` or `disk(db):1024;disk:512`.
    #[arg(long)]
    pub resources: String,
    /// Where the volumes (`volumes/`) and the provider's state
    /// (`provider.json`) are kept.
    #[arg(long)]
    pub root: PathBuf,
    /// Body encoding of calls and events.
    #[arg(long, value_enum, default_value = "protobuf")]
    pub content_type: Encoding,
    /// Bearer token for the resource provider API.
    #[arg(long)]
    pub token: Option<String>,
}

/// Why the provider could not run, or stopped by itself.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// A flag is unusable.
    #[error("{0}")]
    Flag(String),
    /// The pool cannot be opened under `--root`.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `--agent` names no agent the master knows (or the master cannot be asked).
    #[error("--agent: {0}")]
    Agent(ClientError),
    /// The runner could not start or gave up.
    #[error(transparent)]
    Runner(#[from] RunnerError),
}

/// Runs `provider` until Ctrl-C or SIGTERM: 0 when stopped so, 1 when the
/// master refused it for good, 2 for unusable flags.
pub fn run(args: ProviderArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = unisched_server::wait_for_signal();
    match runtime.block_on(serve(&args, stop, |line| println!("{line}"))) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e @ ProviderError::Runner(RunnerError::Master(_) | RunnerError::Provider(_))) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the provider until `stop` is ready (or the runner gives up); `say`
/// gets a line at each subscription, once its UPDATE_STATE is taken. The
/// runner's last status.
pub async fn serve(
    args: &ProviderArgs,
    stop: impl Future<Output = ()>,
    say: impl Fn(String),
) -> Result<RunnerStatus, ProviderError> {
    let handle = start(args).await?;
    let shown = format!("{} '{}'", args.provider_type, args.name);
    tokio::pin!(stop);
    // Shown once a subscription's UPDATE_STATE is in: the master has the pool.
    let (mut subscriptions, mut updates) = (0, 0);
    loop {
        let news = |s: &RunnerStatus| {
            (s.subscriptions > subscriptions && s.state_updates > updates) || s.link == Link::Closed
        };
        let ended = tokio::select! {
            () = &mut stop => false,
            status = handle.wait_for(news) => {
                if status.link == Link::Closed {
                    true
                } else {
                    (subscriptions, updates) = (status.subscriptions, status.state_updates);
                    say(format!(
                        "resource provider {shown} subscribed as {} ({} operations unacknowledged)",
                        status.provider_id.as_deref().unwrap_or("?"),
                        status.unacknowledged,
                    ));
                    continue;
                }
            }
        };
        let last = handle.status();
        if ended {
            handle.join().await?;
        } else {
            handle.stop().await?;
        }
        return Ok(last);
    }
}

/// Opens the pool, finds the endpoint and starts the runner.
async fn start(args: &ProviderArgs) -> Result<RunnerHandle, ProviderError> {
    let flag = |m: &str| Err(ProviderError::Flag(m.to_string()));
    if args.name.trim().is_empty() {
        return flag("--name must not be empty");
    }
    if args.provider_type.trim().is_empty() {
        return flag("--type must not be empty");
    }
    let pool = DirectoryPool::open(&args.root, &args.resources)?;
    let mut options = RunnerOptions::new(
        &args.master,
        Endpoint::Master,
        &args.provider_type,
        &args.name,
        args.root.clone(),
    );
    options.client.content_type = args.content_type.content_type();
    options.client.token = args.token.clone();
    if let Some(agent) = &args.agent {
        let (address, endpoint) = Endpoint::of_agent(&args.master, agent, &options.client)
            .await
            .map_err(ProviderError::Agent)?;
        options.master = address;
        options.endpoint = endpoint;
    }
    Ok(runner::spawn(pool, options)?)
}
