//! [`RemoteScheduler`]: `SchedulerApi` over gRPC, so an RM switches between the
//! in-process core and a remote one by changing the line that builds it.
//!
//! # Threads and tasks
//! A `RemoteScheduler` owns a small tokio runtime (two worker threads) for its
//! connection; its methods block the calling thread on it. Call them from plain
//! threads, never from inside an async task (use `spawn_blocking` there): blocking
//! inside a runtime panics.
//!
//! Registering an RM opens its four streams (UpdateAllocation, UpdateApplication,
//! UpdateNode, Callbacks), each bound by `rmid` metadata, and starts one delivery
//! thread per RM that calls the RM's [`ResourceManagerCallback`] in arrival order,
//! like the in-process dispatcher. It answers predicates and configuration
//! persistence on the Callbacks stream. Order is kept within each kind of
//! response, not across kinds (they travel on separate streams).
//!
//! # Errors
//! The asynchronous calls queue the request on the RM's stream and return. When
//! the server refused one (e.g. it forgot the RM) it ends that stream with a
//! status, which is logged; later calls on the stream return
//! `SchedulerError::ShutDown` until the RM registers again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};
use unisched_shim_api::{ResourceManagerCallback, SchedulerApi, SchedulerError, SchedulerResult};
use unisched_si as si;
use unisched_si::callback_call::Call;
use unisched_si::callback_reply::Reply;
use unisched_si::scheduler_callback_client::SchedulerCallbackClient;
use unisched_si::scheduler_client::SchedulerClient;

use crate::MAX_MESSAGE_BYTES;
use crate::grpc::RMID_METADATA;

/// Requests queued per stream before a call blocks the caller.
const STREAM_QUEUE: usize = 1024;

/// Why a [`RemoteScheduler`] could not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The runtime for the connection could not start.
    #[error("cannot start the client runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The address is not a valid URI, or the server cannot be reached.
    #[error("cannot connect: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The token cannot be sent as metadata.
    #[error("the token is not valid ASCII metadata")]
    Token,
}

/// Maps a gRPC status back to the core error it stands for.
pub fn error_of(status: &Status) -> SchedulerError {
    let reason = status.message().to_string();
    match status.code() {
        Code::FailedPrecondition if reason.contains("not registered") => {
            SchedulerError::UnknownResourceManager { rm_id: reason }
        }
        Code::InvalidArgument if reason.starts_with("invalid configuration") => {
            SchedulerError::InvalidConfiguration { reason }
        }
        Code::Unavailable => SchedulerError::ShutDown,
        _ => SchedulerError::InvalidRequest { reason },
    }
}

enum Delivery {
    Allocation(si::AllocationResponse),
    Application(si::ApplicationResponse),
    Node(si::NodeResponse),
    Call(si::CallbackCall),
}

struct RmSession {
    allocations: mpsc::Sender<si::AllocationRequest>,
    applications: mpsc::Sender<si::ApplicationRequest>,
    nodes: mpsc::Sender<si::NodeRequest>,
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for RmSession {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The core behind a gRPC connection. See the module docs for threading.
pub struct RemoteScheduler {
    runtime: tokio::runtime::Runtime,
    scheduler: SchedulerClient<Channel>,
    callbacks: SchedulerCallbackClient<Channel>,
    token: Option<AsciiMetadataValue>,
    sessions: Mutex<HashMap<String, RmSession>>,
}

impl std::fmt::Debug for RemoteScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteScheduler").finish_non_exhaustive()
    }
}

/// How a [`RemoteScheduler`] connects.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Bearer token sent on every call.
    pub token: Option<String>,
    /// For `https://` endpoints: the CA certificate (PEM) the server's
    /// certificate must chain to.
    pub ca_pem: Option<Vec<u8>>,
    /// For `https://` endpoints: the name the server's certificate must carry,
    /// when not the endpoint's host.
    pub tls_domain: Option<String>,
}

impl RemoteScheduler {
    /// Connects to `endpoint` (e.g. `http://127.0.0.1:9090`), sending `token` as
    /// a bearer token on every call when given. Blocks until connected.
    pub fn connect(endpoint: &str, token: Option<&str>) -> Result<Self, ConnectError> {
        Self::connect_with(
            endpoint,
            ConnectOptions {
                token: token.map(str::to_string),
                ..ConnectOptions::default()
            },
        )
    }

    /// Connects with TLS and token settings; blocks until connected.
    pub fn connect_with(endpoint: &str, options: ConnectOptions) -> Result<Self, ConnectError> {
        let token = options.token.as_deref();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("unisched-remote")
            .enable_all()
            .build()?;
        let token = token
            .map(|t| AsciiMetadataValue::try_from(format!("Bearer {t}")))
            .transpose()
            .map_err(|_| ConnectError::Token)?;
        let mut endpoint = Endpoint::from_shared(endpoint.to_string())?;
        if options.ca_pem.is_some() || options.tls_domain.is_some() {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut tls = tonic::transport::ClientTlsConfig::new();
            if let Some(ca) = &options.ca_pem {
                tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(ca));
            }
            if let Some(domain) = &options.tls_domain {
                tls = tls.domain_name(domain.clone());
            }
            endpoint = endpoint.tls_config(tls)?;
        }
        let channel = runtime.block_on(endpoint.connect())?;
        let scheduler = SchedulerClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let callbacks = SchedulerCallbackClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self {
            runtime,
            scheduler,
            callbacks,
            token,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    fn decorate(&self, metadata: &mut MetadataMap, rm_id: Option<&str>) {
        if let Some(t) = &self.token {
            metadata.insert("authorization", t.clone());
        }
        if let Some(rm) = rm_id.and_then(|r| AsciiMetadataValue::try_from(r).ok()) {
            metadata.insert(RMID_METADATA, rm);
        }
    }

    async fn open_session(
        &self,
        rm_id: &str,
        callback: Arc<dyn ResourceManagerCallback>,
    ) -> Result<RmSession, Status> {
        let (deliver, deliveries) = std::sync::mpsc::channel::<Delivery>();
        let (reply_tx, reply_rx) = mpsc::channel::<si::CallbackReply>(STREAM_QUEUE);
        let mut tasks = Vec::new();

        let mut client = self.scheduler.clone();
        let (allocations, task) = self
            .open(
                rm_id,
                deliver.clone(),
                Delivery::Allocation,
                |r| async move { client.update_allocation(r).await },
            )
            .await?;
        tasks.push(task);
        let mut client = self.scheduler.clone();
        let (applications, task) = self
            .open(
                rm_id,
                deliver.clone(),
                Delivery::Application,
                |r| async move { client.update_application(r).await },
            )
            .await?;
        tasks.push(task);
        let mut client = self.scheduler.clone();
        let (nodes, task) = self
            .open(rm_id, deliver.clone(), Delivery::Node, |r| async move {
                client.update_node(r).await
            })
            .await?;
        tasks.push(task);
        let mut client = self.callbacks.clone();
        let task = self
            .open_with(rm_id, reply_rx, deliver, Delivery::Call, |r| async move {
                client.callbacks(r).await
            })
            .await?;
        tasks.push(task);

        let rm = rm_id.to_string();
        std::thread::Builder::new()
            .name(unisched_core::scheduler::thread_name(
                "unisched-remote-",
                rm_id,
            ))
            .spawn(move || deliver_all(&rm, callback.as_ref(), deliveries, reply_tx))
            .map_err(|e| Status::internal(format!("cannot start the delivery thread: {e}")))?;
        Ok(RmSession {
            allocations,
            applications,
            nodes,
            tasks,
        })
    }

    async fn open<In, Out, F, Fut>(
        &self,
        rm_id: &str,
        deliver: std::sync::mpsc::Sender<Delivery>,
        wrap: fn(Out) -> Delivery,
        call: F,
    ) -> Result<(mpsc::Sender<In>, tokio::task::AbortHandle), Status>
    where
        In: Send + 'static,
        Out: Send + 'static,
        F: FnOnce(Request<ReceiverStream<In>>) -> Fut,
        Fut: Future<Output = Result<Response<Streaming<Out>>, Status>>,
    {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let task = self.open_with(rm_id, rx, deliver, wrap, call).await?;
        Ok((tx, task))
    }

    async fn open_with<In, Out, F, Fut>(
        &self,
        rm_id: &str,
        outgoing: mpsc::Receiver<In>,
        deliver: std::sync::mpsc::Sender<Delivery>,
        wrap: fn(Out) -> Delivery,
        call: F,
    ) -> Result<tokio::task::AbortHandle, Status>
    where
        In: Send + 'static,
        Out: Send + 'static,
        F: FnOnce(Request<ReceiverStream<In>>) -> Fut,
        Fut: Future<Output = Result<Response<Streaming<Out>>, Status>>,
    {
        let mut request = Request::new(ReceiverStream::new(outgoing));
        self.decorate(request.metadata_mut(), Some(rm_id));
        let mut incoming = call(request).await?.into_inner();
        let rm = rm_id.to_string();
        let task = tokio::spawn(async move {
            loop {
                match incoming.message().await {
                    Ok(Some(msg)) => {
                        if deliver.send(wrap(msg)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(status) => {
                        tracing::warn!(rm, %status, "stream to the scheduler ended");
                        return;
                    }
                }
            }
        });
        Ok(task.abort_handle())
    }

    fn with_session<T>(
        &self,
        rm_id: &str,
        f: impl FnOnce(&RmSession) -> SchedulerResult<T>,
    ) -> SchedulerResult<T> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        match sessions.get(rm_id) {
            Some(s) => f(s),
            None => Err(SchedulerError::UnknownResourceManager {
                rm_id: rm_id.to_string(),
            }),
        }
    }
}

fn queue<T>(tx: &mpsc::Sender<T>, msg: T) -> SchedulerResult<()> {
    tx.blocking_send(msg).map_err(|_| SchedulerError::ShutDown)
}

impl SchedulerApi for RemoteScheduler {
    fn register_resource_manager(
        &self,
        request: si::RegisterResourceManagerRequest,
        callback: Arc<dyn ResourceManagerCallback>,
    ) -> SchedulerResult<si::RegisterResourceManagerResponse> {
        let rm_id = request.rm_id.clone();
        let mut grpc = Request::new(request);
        self.decorate(grpc.metadata_mut(), None);
        let mut client = self.scheduler.clone();
        let response = self
            .runtime
            .block_on(client.register_resource_manager(grpc))
            .map_err(|s| error_of(&s))?
            .into_inner();
        // Replace the streams of an earlier registration of the same RM.
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&rm_id);
        let session = self
            .runtime
            .block_on(self.open_session(&rm_id, callback))
            .map_err(|s| error_of(&s))?;
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(rm_id, session);
        Ok(response)
    }

    fn update_allocation(&self, request: si::AllocationRequest) -> SchedulerResult<()> {
        let tx = self.with_session(&request.rm_id, |s| Ok(s.allocations.clone()))?;
        queue(&tx, request)
    }

    fn update_application(&self, request: si::ApplicationRequest) -> SchedulerResult<()> {
        let tx = self.with_session(&request.rm_id, |s| Ok(s.applications.clone()))?;
        queue(&tx, request)
    }

    fn update_node(&self, request: si::NodeRequest) -> SchedulerResult<()> {
        let tx = self.with_session(&request.rm_id, |s| Ok(s.nodes.clone()))?;
        queue(&tx, request)
    }

    /// Calls our `SchedulerCallback.UpdateConfiguration` (upstream's
    /// `si.v1.Scheduler` has no configuration call) and waits for the result.
    fn update_configuration(&self, cluster_id: &str) -> SchedulerResult<()> {
        let mut grpc = Request::new(si::ReloadConfigurationRequest {
            cluster_id: cluster_id.to_string(),
        });
        self.decorate(grpc.metadata_mut(), Some(cluster_id));
        let mut client = self.callbacks.clone();
        self.runtime
            .block_on(client.update_configuration(grpc))
            .map_err(|s| match error_of(&s) {
                SchedulerError::InvalidRequest { reason }
                    if s.code() == Code::FailedPrecondition =>
                {
                    SchedulerError::ConfigurationUnavailable {
                        cluster_id: cluster_id.to_string(),
                        reason,
                    }
                }
                e => e,
            })?;
        Ok(())
    }
}

/// The delivery thread of one RM: calls its callback in arrival order and
/// answers the calls that need an answer.
fn deliver_all(
    rm: &str,
    callback: &dyn ResourceManagerCallback,
    deliveries: std::sync::mpsc::Receiver<Delivery>,
    replies: mpsc::Sender<si::CallbackReply>,
) {
    for delivery in deliveries {
        let (what, result) = match delivery {
            Delivery::Allocation(r) => ("update_allocation", callback.update_allocation(r)),
            Delivery::Application(r) => ("update_application", callback.update_application(r)),
            Delivery::Node(r) => ("update_node", callback.update_node(r)),
            Delivery::Call(call) => {
                let call_id = call.call_id;
                let reply = match call.call {
                    Some(Call::Predicates(args)) => Some(Reply::Predicates(si::PredicatesResult {
                        error: callback
                            .predicates(args)
                            .err()
                            .map(|e| e.reason)
                            .unwrap_or_default(),
                    })),
                    Some(Call::UpdateConfiguration(req)) => Some(Reply::UpdateConfiguration(
                        callback.update_configuration(req).unwrap_or_else(|e| {
                            si::UpdateConfigurationResponse {
                                success: false,
                                old_config: String::new(),
                                reason: e.reason,
                            }
                        }),
                    )),
                    Some(Call::ReSyncSchedulerCache(args)) => {
                        log_failure(
                            rm,
                            "resync_scheduler_cache",
                            callback.resync_scheduler_cache(args),
                        );
                        None
                    }
                    Some(Call::SendEvent(batch)) => {
                        log_failure(rm, "send_event", callback.send_event(batch.events));
                        None
                    }
                    Some(Call::UpdateContainerSchedulingState(s)) => {
                        log_failure(
                            rm,
                            "update_container_scheduling_state",
                            callback.update_container_scheduling_state(s),
                        );
                        None
                    }
                    None => None,
                };
                if let Some(reply) = reply {
                    let msg = si::CallbackReply {
                        call_id,
                        rm_id: rm.to_string(),
                        reply: Some(reply),
                    };
                    if replies.blocking_send(msg).is_err() {
                        return;
                    }
                }
                continue;
            }
        };
        log_failure(rm, what, result);
    }
}

fn log_failure(rm: &str, what: &str, result: unisched_shim_api::CallbackResult<()>) {
    if let Err(e) = result {
        tracing::warn!(rm, callback = what, reason = %e, "RM callback failed");
    }
}
