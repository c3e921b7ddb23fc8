//! The runner: a tokio task that does a [`ResourceProvider`]'s side of the
//! protocol (see the module doc of [`crate::provider`] for what it does and
//! what it owns), and the handle that starts, watches and stops it.
//!
//! ```no_run
//! # async fn demo(pool: unisched_mesos::provider::storage::DirectoryPool) -> Result<(), unisched_mesos::provider::RunnerError> {
//! use unisched_mesos::provider::{Endpoint, RunnerOptions, runner};
//!
//! let options = RunnerOptions::new(
//!     "127.0.0.1:5050",
//!     Endpoint::Agent(1),
//!     "org.unisched.rp.storage.directory",
//!     "pool",
//!     "/var/lib/pool".into(),
//! );
//! let handle = runner::spawn(pool, options)?;
//! // ... until the operator stops it:
//! handle.stop().await
//! # }
//! ```

mod actor;

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::ResourceProvider;
use super::checkpoint::{Checkpoint, CheckpointError};
use super::client::{Endpoint, ProviderClient};
use super::feedback::{Operations, RetryPolicy};
use super::link::Link;
use crate::http_client::{Backoff, ClientError, ClientOptions};
use crate::v1;

/// How a runner reaches the master and behaves.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// The master (`host:port` or an `http://` URL).
    pub master: String,
    /// The master's endpoint (external provider) or an agent's (local).
    pub endpoint: Endpoint,
    /// Type and name (and attributes, default reservations) of the
    /// provider; its id is the runner's business.
    pub info: v1::ResourceProviderInfo,
    /// Where the id and the operations are kept.
    pub state_dir: PathBuf,
    /// Encoding, token, timeouts.
    pub client: ClientOptions,
    /// Waits between subscription attempts.
    pub backoff: Backoff,
    /// Waits between status update retries.
    pub retry: RetryPolicy,
    /// Subscriptions with the kept id in a row that the master may drop
    /// before the runner takes the id as unknown and subscribes without it.
    pub forget_after: u32,
}

impl RunnerOptions {
    /// Options with upstream's defaults for a provider of `provider_type`
    /// named `name` keeping its state in `state_dir`.
    pub fn new(
        master: &str,
        endpoint: Endpoint,
        provider_type: &str,
        name: &str,
        state_dir: PathBuf,
    ) -> Self {
        Self {
            master: master.to_string(),
            endpoint,
            info: v1::ResourceProviderInfo {
                r#type: provider_type.to_string(),
                name: name.to_string(),
                ..Default::default()
            },
            state_dir,
            client: ClientOptions {
                subscribe_timeout: Duration::from_secs(10),
                ..ClientOptions::default()
            },
            backoff: Backoff {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(30),
            },
            retry: RetryPolicy::default(),
            forget_after: 3,
        }
    }
}

/// Why a runner could not start, or stopped by itself.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The master refused the provider for good (400, 401, 403, 406, 415),
    /// or the master address is unusable.
    #[error("master: {0}")]
    Master(#[from] ClientError),
    /// The state directory cannot be read or written.
    #[error("state: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// The provider failed where the protocol cannot go on without it
    /// (its total resources).
    #[error("provider: {0}")]
    Provider(String),
    /// The runner's task ended abnormally.
    #[error("the runner's task failed: {0}")]
    Task(String),
}

/// What a runner shows of itself (through [`RunnerHandle::status`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerStatus {
    /// Where the link is.
    pub link: Link,
    /// The id the master gave (kept across restarts), if any.
    pub provider_id: Option<String>,
    /// SUBSCRIBED events received.
    pub subscriptions: u64,
    /// Subscriptions the master answered but ended without SUBSCRIBED.
    pub dropped_subscriptions: u64,
    /// Ids given up because the master did not know them.
    pub forgotten_ids: Vec<String>,
    /// The resource version last sent.
    pub resource_version: Vec<u8>,
    /// UPDATE_STATE calls the master took.
    pub state_updates: u64,
    /// UPDATE_OPERATION_STATUS calls sent (retries included).
    pub status_updates: u64,
    /// Operations whose status waits for an acknowledgement.
    pub unacknowledged: usize,
    /// Operations applied (finished or failed).
    pub applied: u64,
    /// Operations dropped for a stale resource version.
    pub dropped_operations: u64,
    /// PUBLISH_RESOURCES answered.
    pub publishes: u64,
    /// Why the runner closed by itself.
    pub error: Option<String>,
}

impl Default for RunnerStatus {
    fn default() -> Self {
        Self {
            link: Link::Idle,
            provider_id: None,
            subscriptions: 0,
            dropped_subscriptions: 0,
            forgotten_ids: Vec::new(),
            resource_version: Vec::new(),
            state_updates: 0,
            status_updates: 0,
            unacknowledged: 0,
            applied: 0,
            dropped_operations: 0,
            publishes: 0,
            error: None,
        }
    }
}

/// What a handle asks of the runner.
#[derive(Debug)]
enum Command {
    /// The provider's resources changed: report them with a new version.
    ResourcesChanged,
    /// Close the stream and end.
    Stop,
}

/// A running provider: its status, and commands to it.
#[derive(Debug)]
pub struct RunnerHandle {
    commands: mpsc::UnboundedSender<Command>,
    status: watch::Receiver<RunnerStatus>,
    task: tokio::task::JoinHandle<Result<(), RunnerError>>,
}

impl RunnerHandle {
    /// The runner's status now.
    pub fn status(&self) -> RunnerStatus {
        self.status.borrow().clone()
    }

    /// Waits until the status satisfies `condition` (or the runner ended:
    /// then the last status).
    pub async fn wait_for(&self, condition: impl FnMut(&RunnerStatus) -> bool) -> RunnerStatus {
        let mut status = self.status.clone();
        match status.wait_for(condition).await {
            Ok(s) => s.clone(),
            Err(_) => self.status(),
        }
    }

    /// The provider's resources changed other than by an operation: the
    /// runner reports them (UPDATE_STATE) with a new resource version, which
    /// rescinds the offers holding them.
    pub fn resources_changed(&self) {
        let _ = self.commands.send(Command::ResourcesChanged);
    }

    /// True once the runner has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Closes the stream and waits for the runner to end.
    pub async fn stop(self) -> Result<(), RunnerError> {
        let _ = self.commands.send(Command::Stop);
        self.join().await
    }

    /// Waits for the runner to end by itself (a fatal refusal or failure).
    pub async fn join(self) -> Result<(), RunnerError> {
        self.task
            .await
            .unwrap_or_else(|e| Err(RunnerError::Task(e.to_string())))
    }
}

/// Starts a runner for `provider` on the current tokio runtime: its state
/// is recovered from `options.state_dir` first (an error if it belongs to
/// another provider or does not read).
pub fn spawn<P: ResourceProvider>(
    provider: P,
    options: RunnerOptions,
) -> Result<RunnerHandle, RunnerError> {
    let client = ProviderClient::new(&options.master, options.endpoint, options.client.clone())?;
    let checkpoint = Checkpoint::in_dir(&options.state_dir)?;
    let mut state = checkpoint.load(&options.info.r#type, &options.info.name)?;
    let mut book = Operations::new(options.retry);
    book.recover(std::mem::take(&mut state.operations));
    let (commands, inbox) = mpsc::unbounded_channel();
    let (status_tx, status) = watch::channel(RunnerStatus {
        provider_id: state.provider_id.clone(),
        unacknowledged: book.unacknowledged(),
        ..RunnerStatus::default()
    });
    tracing::info!(
        provider_type = %options.info.r#type,
        name = %options.info.name,
        id = ?state.provider_id,
        operations = book.all().len(),
        master = %client.endpoint(),
        "resource provider starting"
    );
    let actor = actor::Actor::new(
        provider, options, client, checkpoint, state, book, status_tx, inbox,
    );
    Ok(RunnerHandle {
        commands,
        status,
        task: tokio::spawn(actor.run()),
    })
}
