//! The out-of-process front of unisched: the scheduler interface over gRPC, REST
//! under `/ws/v1` and Prometheus metrics, around one in-process core.
//!
//! # Who owns what
//! - The [`unisched_core::Scheduler`] owns all scheduling state; this crate only
//!   calls its `SchedulerApi` methods and reads snapshots.
//! - [`hub::Hub`] owns the per-RM outboxes between the core's callback threads and
//!   the gRPC stream tasks (see `hub.rs` for the protocol).
//! - [`RunningServer`] owns the two listeners' tasks and the shutdown signal.
//!
//! # Threads and tasks
//! Both servers run on the caller's tokio runtime: one task per connection and one
//! per open stream. Calls that wait for the scheduling thread (registration,
//! snapshots) run on `spawn_blocking`, so a slow core or client never stalls the
//! runtime. The core's per-RM dispatcher threads write into the outboxes.
//!
//! # Security
//! Both listeners are on loopback unless told otherwise. With
//! [`ServerOptions::tls`] both serve TLS (rustls with ring). Mutating calls need
//! the bearer token when one is set. Messages and bodies are size-limited, and
//! a gRPC connection may open at most [`ServerOptions::max_concurrent_streams`]
//! streams at once.
//!
//! # Shutdown
//! [`RunningServer::shutdown`] flips the stop signal: open streams end with
//! UNAVAILABLE, both listeners stop accepting, in-flight HTTP requests finish,
//! and the call returns once both servers stopped (at most [`SHUTDOWN_GRACE`]).
//!
//! **Architecture Invariant:** nothing here holds scheduling state or a lock the
//! core takes; the core knows nothing of this crate.

pub mod auth;
pub mod dashboard;
pub mod default_config;
pub mod grpc;
pub mod hub;
pub mod remote;
pub mod rest;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use unisched_core::Scheduler;
use unisched_si as si;

pub use auth::Token;
pub use default_config::DefaultConfig;
pub use remote::{ConnectOptions, RemoteScheduler};

/// Default gRPC address: loopback, port 9090 (YuniKorn has no gRPC front; 9090 is ours).
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:9090";
/// Default HTTP address: loopback, YuniKorn's REST port 9080.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:9080";
/// Largest gRPC message accepted or sent (the core's config limit is 4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Largest HTTP request body accepted.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// How long shutdown waits for connections to close.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Default limit of concurrent gRPC streams per connection.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 64;

/// A certificate chain and private key (PEM) to serve both ports over TLS.
#[derive(Clone)]
pub struct TlsIdentity {
    /// Certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// Private key, PEM.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("TlsIdentity")
    }
}

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where gRPC listens (port 0 picks a free one).
    pub grpc_addr: SocketAddr,
    /// Where HTTP listens (port 0 picks a free one).
    pub http_addr: SocketAddr,
    /// Bearer token required on mutating calls.
    pub token: Token,
    /// Configuration used when an RM registers with an empty `config`; also
    /// records which RMs took it (for reloads of `serve --config FILE`).
    pub default_config: Option<Arc<DefaultConfig>>,
    /// How long predicates and configuration persistence wait for the RM's
    /// reply; no reply in time counts as "no".
    pub reply_timeout: Duration,
    /// Serve gRPC and HTTP over TLS with this identity; plain text when `None`.
    pub tls: Option<TlsIdentity>,
    /// Most concurrent gRPC streams on one connection (HTTP/2
    /// `max_concurrent_streams` and a per-connection limit on requests).
    pub max_concurrent_streams: u32,
    /// A Mesos-compatible master (with embedded agents) on the same core,
    /// as an RM of its own; `None` serves no Mesos API.
    pub mesos: Option<unisched_mesos::local::LocalOptions>,
    /// How often the totals of `/ws/v1/history/*` are sampled (upstream:
    /// once a minute).
    pub history_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            grpc_addr: DEFAULT_GRPC_ADDR.parse().expect("valid default address"),
            http_addr: DEFAULT_HTTP_ADDR.parse().expect("valid default address"),
            token: Token::default(),
            default_config: None,
            reply_timeout: Duration::from_millis(500),
            tls: None,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            mesos: None,
            history_interval: rest::history::DEFAULT_INTERVAL,
        }
    }
}

/// A server that is listening.
pub struct RunningServer {
    /// The bound gRPC address.
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address.
    pub http_addr: SocketAddr,
    /// The Mesos-compatible master, when one was asked for.
    pub mesos: Option<unisched_mesos::local::LocalCluster>,
    stop: tokio::sync::watch::Sender<bool>,
    grpc: tokio::task::JoinHandle<()>,
    http: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("grpc_addr", &self.grpc_addr)
            .field("http_addr", &self.http_addr)
            .field("mesos_addr", &self.mesos.as_ref().map(|m| m.addr))
            .finish_non_exhaustive()
    }
}

/// Binds both listeners and starts serving `scheduler` on the current runtime.
pub async fn start(scheduler: Scheduler, options: ServerOptions) -> std::io::Result<RunningServer> {
    let grpc_listener = TcpListener::bind(options.grpc_addr).await?;
    let http_listener = TcpListener::bind(options.http_addr).await?;
    let grpc_addr = grpc_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;
    let (stop, stopping) = tokio::sync::watch::channel(false);

    let mesos = match options.mesos.clone() {
        Some(local) => Some(
            unisched_mesos::local::start(scheduler.clone(), local)
                .await
                .map_err(std::io::Error::other)?,
        ),
        None => None,
    };
    let hub = Arc::new(hub::Hub::new(options.reply_timeout));
    let service = grpc::SchedulerService::new(
        scheduler.clone(),
        hub,
        options.default_config.clone(),
        stopping.clone(),
    );
    let scheduler_svc = si::scheduler_server::SchedulerServer::new(service.clone())
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let callback_svc = si::scheduler_callback_server::SchedulerCallbackServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let interceptor = options.token.interceptor();
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(options.max_concurrent_streams))
        .concurrency_limit_per_connection(options.max_concurrent_streams as usize);
    if let Some(tls) = &options.tls {
        // ring is the only provider compiled in; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let identity = tonic::transport::Identity::from_pem(&tls.cert_pem, &tls.key_pem);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(std::io::Error::other)?;
    }
    let router = builder
        .add_service(tonic::service::interceptor::InterceptedService::new(
            scheduler_svc,
            interceptor.clone(),
        ))
        .add_service(tonic::service::interceptor::InterceptedService::new(
            callback_svc,
            interceptor,
        ));
    let mut grpc_stop = stopping.clone();
    let grpc = tokio::spawn(async move {
        let signal = async move {
            let _ = grpc_stop.wait_for(|s| *s).await;
        };
        if let Err(e) = router
            .serve_with_incoming_shutdown(TcpListenerStream::new(grpc_listener), signal)
            .await
        {
            tracing::error!(error = %e, "gRPC server failed");
        }
    });

    let history = Arc::new(rest::History::new(rest::history::DEFAULT_RECORDS));
    tokio::spawn(rest::history::run(
        history.clone(),
        scheduler.clone(),
        options.history_interval,
        stopping.clone(),
    ));
    let mesos_link = mesos.as_ref().map(|m| rest::MesosLink {
        master: m.master.clone(),
        addr: m.addr,
    });
    let state = rest::RestState::new(
        scheduler,
        options.token.clone(),
        stopping.clone(),
        history,
        mesos_link,
    );
    let app = dashboard::router(state.clone()).merge(rest::router(state));
    let mut http_stop = stopping;
    let http = match &options.tls {
        None => tokio::spawn(async move {
            let signal = async move {
                let _ = http_stop.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(http_listener, app)
                .with_graceful_shutdown(signal)
                .await
            {
                tracing::error!(error = %e, "HTTP server failed");
            }
        }),
        Some(tls) => {
            let config = axum_server::tls_rustls::RustlsConfig::from_pem(
                tls.cert_pem.clone(),
                tls.key_pem.clone(),
            )
            .await?;
            let server =
                axum_server::tls_rustls::from_tcp_rustls(http_listener.into_std()?, config)?;
            let handle = axum_server::Handle::new();
            let stopper = handle.clone();
            tokio::spawn(async move {
                let _ = http_stop.wait_for(|s| *s).await;
                stopper.graceful_shutdown(Some(SHUTDOWN_GRACE));
            });
            tokio::spawn(async move {
                if let Err(e) = server.handle(handle).serve(app.into_make_service()).await {
                    tracing::error!(error = %e, "HTTPS server failed");
                }
            })
        }
    };
    tracing::info!(%grpc_addr, %http_addr, "unisched server listening");
    Ok(RunningServer {
        grpc_addr,
        http_addr,
        mesos,
        stop,
        grpc,
        http,
    })
}

impl RunningServer {
    /// Stops both servers (see the module docs); returns once they stopped or
    /// [`SHUTDOWN_GRACE`] passed, aborting what is left.
    pub async fn shutdown(self) {
        if let Some(m) = self.mesos {
            m.stop();
        }
        let _ = self.stop.send(true);
        let grpc_abort = self.grpc.abort_handle();
        let http_abort = self.http.abort_handle();
        let both = async {
            let _ = self.grpc.await;
            let _ = self.http.await;
        };
        if tokio::time::timeout(SHUTDOWN_GRACE, both).await.is_err() {
            tracing::warn!("connections still open after the grace period; closing them");
            grpc_abort.abort();
            http_abort.abort();
        }
    }
}

/// Runs a server on a runtime of its own until SIGTERM or Ctrl-C, then shuts it
/// down gracefully. For the `serve` command; blocks the calling thread.
pub fn serve_until_signal(
    scheduler: Scheduler,
    options: ServerOptions,
    on_mesos: Option<Box<dyn Fn(unisched_mesos::master::MasterHandle) + Send>>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let server = start(scheduler, options).await?;
        eprintln!(
            "unisched serving gRPC on {} and HTTP on {} (Ctrl-C or SIGTERM stops)",
            server.grpc_addr, server.http_addr
        );
        if let Some(m) = &server.mesos {
            eprintln!(
                "Mesos-compatible master on http://{} with {} agent(s): point frameworks at {}",
                m.addr,
                m.agents.len(),
                m.addr
            );
            if let Some(ready) = &on_mesos {
                ready(m.master.clone());
            }
        }
        wait_for_signal().await;
        tracing::info!("shutting down");
        server.shutdown().await;
        Ok(())
    })
}

/// Waits for Ctrl-C (or SIGTERM on Unix).
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
