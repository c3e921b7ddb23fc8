//! The gRPC services: `si.v1.Scheduler` and our `si.v1.SchedulerCallback`.
//!
//! # Streams
//! Each open stream is served by one tokio task that reads the RM's requests,
//! applies them to the core (the asynchronous `SchedulerApi` calls only queue
//! work, so they run on the task), and writes the responses of its kind from the
//! RM's outbox (see `hub.rs`). A stream is bound to an RM by the `rmid` request
//! metadata when present, else by the rmID of its first message; the stream that
//! bound last receives that kind of response. A core error ends the stream with
//! its status; the RM opens a new one.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use unisched_core::Scheduler;
use unisched_shim_api::{SchedulerApi, SchedulerError};
use unisched_si as si;

use crate::default_config::DefaultConfig;
use crate::hub::{Hub, Outbox, Pop, RmLink, StreamCallback};

/// Request metadata naming the RM a stream belongs to.
pub const RMID_METADATA: &str = "rmid";

/// Maps a core error to the gRPC status an RM sees.
pub fn status_of(err: &SchedulerError) -> Status {
    let msg = err.to_string();
    match err {
        SchedulerError::UnknownResourceManager { .. } => Status::failed_precondition(msg),
        SchedulerError::InvalidRequest { .. } | SchedulerError::InvalidConfiguration { .. } => {
            Status::invalid_argument(msg)
        }
        SchedulerError::ConfigurationUnavailable { .. } => Status::failed_precondition(msg),
        SchedulerError::Reentrant { .. } => Status::failed_precondition(msg),
        SchedulerError::ShutDown => Status::unavailable(msg),
    }
}

/// The `si.v1.Scheduler` and `si.v1.SchedulerCallback` services over one core.
#[derive(Clone)]
pub struct SchedulerService {
    scheduler: Scheduler,
    hub: Arc<Hub>,
    /// Configuration used when an RM registers with an empty `config`.
    default_config: Option<Arc<DefaultConfig>>,
    /// Turns true when the server shuts down; open streams end with UNAVAILABLE.
    stopping: tokio::sync::watch::Receiver<bool>,
}

impl SchedulerService {
    /// Services over `scheduler`, delivering callbacks through `hub`.
    /// Open streams end when `stopping` turns true.
    pub fn new(
        scheduler: Scheduler,
        hub: Arc<Hub>,
        default_config: Option<Arc<DefaultConfig>>,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            scheduler,
            hub,
            default_config,
            stopping,
        }
    }
}

/// One kind of bidirectional stream: what comes in, what goes out, and how.
trait StreamKind: Send + Sync + 'static {
    type In: Send + 'static;
    type Out: Send + 'static;
    fn rm_id(msg: &Self::In) -> &str;
    fn outbox(link: &RmLink) -> &Outbox<Self::Out>;
    fn apply(scheduler: &Scheduler, link: &RmLink, msg: Self::In) -> Result<(), Status>;
}

struct AllocationKind;
struct ApplicationKind;
struct NodeKind;
struct CallbackKind;

fn fill_rm(rm_id: &mut String, link: &RmLink) {
    if rm_id.is_empty() {
        rm_id.clone_from(&link.rm_id);
    }
}

impl StreamKind for AllocationKind {
    type In = si::AllocationRequest;
    type Out = si::AllocationResponse;
    fn rm_id(msg: &Self::In) -> &str {
        &msg.rm_id
    }
    fn outbox(link: &RmLink) -> &Outbox<Self::Out> {
        &link.allocations
    }
    fn apply(scheduler: &Scheduler, link: &RmLink, mut msg: Self::In) -> Result<(), Status> {
        fill_rm(&mut msg.rm_id, link);
        scheduler.update_allocation(msg).map_err(|e| status_of(&e))
    }
}

impl StreamKind for ApplicationKind {
    type In = si::ApplicationRequest;
    type Out = si::ApplicationResponse;
    fn rm_id(msg: &Self::In) -> &str {
        &msg.rm_id
    }
    fn outbox(link: &RmLink) -> &Outbox<Self::Out> {
        &link.applications
    }
    fn apply(scheduler: &Scheduler, link: &RmLink, mut msg: Self::In) -> Result<(), Status> {
        fill_rm(&mut msg.rm_id, link);
        scheduler.update_application(msg).map_err(|e| status_of(&e))
    }
}

impl StreamKind for NodeKind {
    type In = si::NodeRequest;
    type Out = si::NodeResponse;
    fn rm_id(msg: &Self::In) -> &str {
        &msg.rm_id
    }
    fn outbox(link: &RmLink) -> &Outbox<Self::Out> {
        &link.nodes
    }
    fn apply(scheduler: &Scheduler, link: &RmLink, mut msg: Self::In) -> Result<(), Status> {
        fill_rm(&mut msg.rm_id, link);
        scheduler.update_node(msg).map_err(|e| status_of(&e))
    }
}

impl StreamKind for CallbackKind {
    type In = si::CallbackReply;
    type Out = si::CallbackCall;
    fn rm_id(msg: &Self::In) -> &str {
        &msg.rm_id
    }
    fn outbox(link: &RmLink) -> &Outbox<Self::Out> {
        &link.calls
    }
    fn apply(_: &Scheduler, link: &RmLink, msg: Self::In) -> Result<(), Status> {
        // A reply without a payload only binds the stream (the "hello").
        if let Some(reply) = msg.reply {
            link.complete(msg.call_id, reply);
        }
        Ok(())
    }
}

/// The response stream handed to tonic.
pub type OutStream<T> = ReceiverStream<Result<T, Status>>;

fn rm_hint<T>(req: &Request<T>) -> Option<String> {
    req.metadata()
        .get(RMID_METADATA)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl SchedulerService {
    fn open<K: StreamKind>(&self, req: Request<Streaming<K::In>>) -> OutStream<K::Out> {
        let hint = rm_hint(&req);
        let inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(1);
        let scheduler = self.scheduler.clone();
        let hub = self.hub.clone();
        // Bind before answering, so the RM's stream is attached once its call returns.
        let bound = hint.map(|rm| {
            let link = hub.link(&rm);
            let generation = K::outbox(&link).attach();
            (link, generation)
        });
        let stopping = self.stopping.clone();
        tokio::spawn(serve::<K>(scheduler, hub, inbound, tx, bound, stopping));
        ReceiverStream::new(rx)
    }
}

async fn next_in<T>(inbound: &mut Option<Streaming<T>>) -> Result<Option<T>, Status> {
    match inbound {
        Some(s) => s.message().await,
        None => std::future::pending().await,
    }
}

/// Serves one stream until the RM goes away or a request fails.
async fn serve<K: StreamKind>(
    scheduler: Scheduler,
    hub: Arc<Hub>,
    inbound: Streaming<K::In>,
    tx: mpsc::Sender<Result<K::Out, Status>>,
    mut bound: Option<(Arc<RmLink>, u64)>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut inbound = Some(inbound);
    // False once a newer stream of this kind took over delivery.
    let mut delivering = true;
    loop {
        let incoming = match &bound {
            Some((link, generation)) if delivering => {
                let outbox = K::outbox(link);
                let notified = outbox.ready().notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                match outbox.pop(*generation) {
                    Pop::Item(item) => {
                        if let Err(mpsc::error::SendError(Ok(item))) = tx.send(Ok(item)).await {
                            outbox.unpop(item);
                            outbox.detach(*generation);
                            return;
                        }
                        continue;
                    }
                    Pop::Replaced => {
                        delivering = false;
                        continue;
                    }
                    Pop::Empty => {}
                }
                tokio::select! {
                    () = &mut notified => continue,
                    () = tx.closed() => None,
                    _ = stopping.wait_for(|s| *s) => Some(Err(shutting_down())),
                    msg = next_in(&mut inbound) => Some(msg),
                }
            }
            _ => {
                tokio::select! {
                    () = tx.closed() => None,
                    _ = stopping.wait_for(|s| *s) => Some(Err(shutting_down())),
                    msg = next_in(&mut inbound) => Some(msg),
                }
            }
        };
        let outcome = match incoming {
            // The RM dropped the response stream.
            None => Err(None),
            Some(Ok(None)) => {
                // The RM closed its side; keep delivering while it listens.
                inbound = None;
                Ok(())
            }
            Some(Err(status)) if status.code() == tonic::Code::Unavailable => Err(Some(status)),
            Some(Err(status)) => {
                tracing::debug!(%status, "stream from RM ended with an error");
                Err(None)
            }
            Some(Ok(Some(msg))) => handle::<K>(&scheduler, &hub, &mut bound, msg).map_err(Some),
        };
        if let Err(status) = outcome {
            if let Some((link, generation)) = &bound {
                K::outbox(link).detach(*generation);
            }
            if let Some(status) = status {
                let _ = tx.send(Err(status)).await;
            }
            return;
        }
    }
}

fn shutting_down() -> Status {
    Status::unavailable("the server is shutting down")
}

fn handle<K: StreamKind>(
    scheduler: &Scheduler,
    hub: &Hub,
    bound: &mut Option<(Arc<RmLink>, u64)>,
    msg: K::In,
) -> Result<(), Status> {
    let rm = K::rm_id(&msg);
    match bound {
        Some((link, _)) if !rm.is_empty() && rm != link.rm_id => {
            return Err(Status::invalid_argument(format!(
                "this stream belongs to RM {:?}, the message names {rm:?}",
                link.rm_id
            )));
        }
        Some(_) => {}
        None if rm.is_empty() => {
            return Err(Status::invalid_argument(
                "the first message of a stream must carry the rmID (or send rmid metadata)",
            ));
        }
        None => {
            let link = hub.link(rm);
            let generation = K::outbox(&link).attach();
            *bound = Some((link, generation));
        }
    }
    let Some((link, _)) = bound else {
        return Ok(());
    };
    K::apply(scheduler, link, msg)
}

type Boxed<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl si::scheduler_server::Scheduler for SchedulerService {
    async fn register_resource_manager(
        &self,
        request: Request<si::RegisterResourceManagerRequest>,
    ) -> Result<Response<si::RegisterResourceManagerResponse>, Status> {
        let mut request = request.into_inner();
        if request.rm_id.is_empty() {
            return Err(Status::invalid_argument("rmID is empty"));
        }
        let link = self.hub.link(&request.rm_id);
        let scheduler = self.scheduler.clone();
        let rm = request.rm_id.clone();
        let default_config = self.default_config.clone();
        // Registration waits for the scheduling thread: keep it off the runtime.
        let result = tokio::task::spawn_blocking(move || {
            let callback = Arc::new(StreamCallback::new(link));
            let rm_id = request.rm_id.clone();
            match default_config {
                // The default config is taken under its lock, so a reload of the
                // config file cannot slip between reading it and registering.
                Some(default) if request.config.trim().is_empty() => {
                    default.register(&rm_id, |text| {
                        request.config = text.to_string();
                        scheduler.register_resource_manager(request, callback)
                    })
                }
                Some(default) => {
                    let result = scheduler.register_resource_manager(request, callback);
                    if result.is_ok() {
                        default.forget(&rm_id);
                    }
                    result
                }
                None => scheduler.register_resource_manager(request, callback),
            }
        })
        .await
        .map_err(|e| Status::internal(format!("registration task failed: {e}")))?;
        match result {
            Ok(r) => {
                tracing::info!(rm, "resource manager registered over gRPC");
                Ok(Response::new(r))
            }
            Err(e) => Err(status_of(&e)),
        }
    }

    type UpdateAllocationStream = Boxed<si::AllocationResponse>;

    async fn update_allocation(
        &self,
        request: Request<Streaming<si::AllocationRequest>>,
    ) -> Result<Response<Self::UpdateAllocationStream>, Status> {
        Ok(Response::new(Box::pin(
            self.open::<AllocationKind>(request),
        )))
    }

    type UpdateApplicationStream = Boxed<si::ApplicationResponse>;

    async fn update_application(
        &self,
        request: Request<Streaming<si::ApplicationRequest>>,
    ) -> Result<Response<Self::UpdateApplicationStream>, Status> {
        Ok(Response::new(Box::pin(
            self.open::<ApplicationKind>(request),
        )))
    }

    type UpdateNodeStream = Boxed<si::NodeResponse>;

    async fn update_node(
        &self,
        request: Request<Streaming<si::NodeRequest>>,
    ) -> Result<Response<Self::UpdateNodeStream>, Status> {
        Ok(Response::new(Box::pin(self.open::<NodeKind>(request))))
    }
}

#[tonic::async_trait]
impl si::scheduler_callback_server::SchedulerCallback for SchedulerService {
    type CallbacksStream = Boxed<si::CallbackCall>;

    async fn callbacks(
        &self,
        request: Request<Streaming<si::CallbackReply>>,
    ) -> Result<Response<Self::CallbacksStream>, Status> {
        Ok(Response::new(Box::pin(self.open::<CallbackKind>(request))))
    }

    async fn update_configuration(
        &self,
        request: Request<si::ReloadConfigurationRequest>,
    ) -> Result<Response<si::ReloadConfigurationResponse>, Status> {
        let cluster_id = request.into_inner().cluster_id;
        let scheduler = self.scheduler.clone();
        // Waits for the scheduling thread: keep it off the runtime.
        tokio::task::spawn_blocking(move || scheduler.update_configuration(&cluster_id))
            .await
            .map_err(|e| Status::internal(format!("configuration task failed: {e}")))?
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(si::ReloadConfigurationResponse {}))
    }
}
