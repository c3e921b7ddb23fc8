//! The scheduler side of Mesos' v1 HTTP API (`POST /api/v1/scheduler`) as an
//! async client: one method per call, JSON or protobuf bodies, the master's
//! answers as typed errors ([`ClientError`]), 307 redirects followed to the
//! leading master, the `Mesos-Stream-Id` kept from SUBSCRIBE and sent with
//! every later call, and a heartbeat watchdog on the event stream
//! ([`EventStream`]).
//!
//! This is the framework side: it speaks only the wire types of [`crate::v1`]
//! and the codecs, and works against any Mesos master (it never reaches into
//! this crate's master).
//!
//! A [`Client`] is cheap to clone; clones share one connection pool and one
//! session (the leader's endpoint, the stream id and the framework id of the
//! latest subscription). [`Client::with_content_type`] makes a clone that
//! encodes in the other encoding. Each call is encoded once (a redirect
//! resends the same bytes); calls do not wait for each other, so a caller
//! that needs calls to arrive in order awaits each before the next.
//!
//! ```no_run
//! # async fn demo() -> Result<(), unisched_mesos::client::ClientError> {
//! use unisched_mesos::client::{Client, ClientOptions};
//! use unisched_mesos::v1;
//! use unisched_mesos::v1::scheduler::call;
//!
//! let client = Client::new("127.0.0.1:5050", ClientOptions::default())?;
//! let info = v1::FrameworkInfo { user: "me".into(), name: "demo".into(), ..Default::default() };
//! let mut subscription = client
//!     .subscribe(call::Subscribe { framework_info: info, ..Default::default() })
//!     .await?;
//! while let Some(event) = subscription.events.next().await {
//!     let Ok(event) = event else { break };
//!     if let Some(offers) = event.offers {
//!         let offer_ids = offers.offers.into_iter().map(|o| o.id).collect();
//!         client.decline(call::Decline { offer_ids, filters: None }).await?;
//!     }
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;

use crate::codec::{self, ContentType};
pub use crate::http_client::{
    ClientError, ClientOptions, DEFAULT_HEARTBEAT_MISSES, EventSource, EventStream,
    STREAM_ID_HEADER, StreamError, recordio_events, resolve_location,
};
use crate::http_client::{Http, Reply, Session, body_of};
use crate::v1;
use crate::v1::scheduler::{Call, Event, Response, call, event};

/// The path of the scheduler API.
pub const SCHEDULER_PATH: &str = "/api/v1/scheduler";

/// The scheduler endpoint of a master address (`host:port`, `http://...`).
pub fn endpoint(master: &str) -> Result<reqwest::Url, ClientError> {
    crate::http_client::endpoint(master, SCHEDULER_PATH)
}

/// A successful answer to a call other than SUBSCRIBE.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// 202 Accepted: the master took the call (its effects come as events).
    Accepted,
    /// 200 OK, with the body's `Response` when there is one.
    Ok(Option<Response>),
}

/// An open subscription.
#[derive(Debug)]
pub struct Subscription {
    /// The SUBSCRIBED event (framework id, heartbeat interval, master info).
    pub subscribed: event::Subscribed,
    /// This subscription's `Mesos-Stream-Id`.
    pub stream_id: String,
    /// The events after SUBSCRIBED.
    pub events: EventStream,
}

/// What clones of a client share.
struct Shared {
    http: Http,
    session: Session<v1::FrameworkId>,
}

/// An async client of a master's scheduler API. See the module doc.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    content_type: ContentType,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("content_type", &self.content_type)
            .field("endpoint", &self.endpoint())
            .field("session", &self.shared.session)
            .finish()
    }
}

impl Client {
    /// A client of the master at `master` (`host:port` or an `http://` URL).
    pub fn new(master: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let content_type = options.content_type;
        let http = Http::new(endpoint(master)?, options)?;
        Ok(Self {
            content_type,
            shared: Arc::new(Shared {
                http,
                session: Session::default(),
            }),
        })
    }

    /// The encoding of this handle's calls.
    pub fn content_type(&self) -> ContentType {
        self.content_type
    }

    /// A handle on the same session and connections that encodes in `content_type`.
    pub fn with_content_type(&self, content_type: ContentType) -> Client {
        Client {
            shared: self.shared.clone(),
            content_type,
        }
    }

    /// The scheduler endpoint calls go to (the leader, once redirected).
    pub fn endpoint(&self) -> String {
        self.shared.http.endpoint().to_string()
    }

    /// The framework id of the latest subscription.
    pub fn framework_id(&self) -> Option<v1::FrameworkId> {
        self.shared.session.id()
    }

    /// The stream id of the latest subscription.
    pub fn stream_id(&self) -> Option<String> {
        self.shared.session.stream_id()
    }

    /// SUBSCRIBE: opens the event stream and waits for its SUBSCRIBED. A
    /// framework info with an id resubscribes (fails over) that framework.
    /// The stream id and framework id are kept for later calls.
    pub async fn subscribe(&self, subscribe: call::Subscribe) -> Result<Subscription, ClientError> {
        let options = self.shared.http.options();
        let call = Call {
            framework_id: subscribe.framework_info.id.clone(),
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(subscribe),
            ..Default::default()
        };
        let body = body_of(&call, self.content_type);
        let deadline = tokio::time::Instant::now() + options.subscribe_timeout;
        let (stream_id, mut source) = self
            .shared
            .http
            .subscribe::<Event>(body, self.content_type, deadline)
            .await?;
        let first = tokio::time::timeout_at(deadline, futures_util::StreamExt::next(&mut source))
            .await
            .map_err(|_| ClientError::Timeout(options.subscribe_timeout))?;
        let subscribed = subscribed_or_refused(first)?;
        self.shared
            .session
            .set(stream_id.clone(), subscribed.framework_id.clone());
        let window = EventStream::window_for(
            subscribed.heartbeat_interval_seconds,
            options.heartbeat_misses,
        );
        Ok(Subscription {
            stream_id: stream_id.to_str().unwrap_or_default().to_string(),
            events: EventStream::new(source, window),
            subscribed,
        })
    }

    /// Sends any call but SUBSCRIBE with the stream id, filling in the
    /// framework id of the subscription when the call has none.
    pub async fn call(&self, mut call: Call) -> Result<Answer, ClientError> {
        let (stream_id, framework_id) = self.shared.session.for_call();
        if call.framework_id.is_none() {
            call.framework_id = framework_id;
        }
        if call.framework_id.is_none() || stream_id.is_none() {
            return Err(ClientError::NotSubscribed);
        }
        let body = body_of(&call, self.content_type);
        match self
            .shared
            .http
            .call(body, self.content_type, stream_id.as_ref())
            .await?
        {
            Reply::Accepted => Ok(Answer::Accepted),
            Reply::Ok(body, _) if body.is_empty() => Ok(Answer::Ok(None)),
            Reply::Ok(body, content_type) => {
                Ok(Answer::Ok(Some(codec::decode(&body, content_type)?)))
            }
        }
    }

    async fn typed(
        &self,
        kind: call::Type,
        fill: impl FnOnce(&mut Call),
    ) -> Result<(), ClientError> {
        let mut call = Call {
            r#type: Some(kind as i32),
            ..Default::default()
        };
        fill(&mut call);
        self.call(call).await.map(drop)
    }

    /// TEARDOWN: the framework ends; its tasks are killed.
    pub async fn teardown(&self) -> Result<(), ClientError> {
        self.typed(call::Type::Teardown, |_| {}).await
    }

    /// ACCEPT: operations on offers; what is left is declined with the filters.
    pub async fn accept(&self, accept: call::Accept) -> Result<(), ClientError> {
        self.typed(call::Type::Accept, |c| c.accept = Some(accept))
            .await
    }

    /// DECLINE: offers back, filtered for `filters.refuse_seconds`.
    pub async fn decline(&self, decline: call::Decline) -> Result<(), ClientError> {
        self.typed(call::Type::Decline, |c| c.decline = Some(decline))
            .await
    }

    /// REVIVE: clears filters and unsuppresses `roles` (all when empty).
    pub async fn revive(&self, revive: call::Revive) -> Result<(), ClientError> {
        self.typed(call::Type::Revive, |c| c.revive = Some(revive))
            .await
    }

    /// SUPPRESS: no offers for `roles` (all when empty) until REVIVE.
    pub async fn suppress(&self, suppress: call::Suppress) -> Result<(), ClientError> {
        self.typed(call::Type::Suppress, |c| c.suppress = Some(suppress))
            .await
    }

    /// KILL: kills a task.
    pub async fn kill(&self, kill: call::Kill) -> Result<(), ClientError> {
        self.typed(call::Type::Kill, |c| c.kill = Some(kill)).await
    }

    /// SHUTDOWN: shuts an executor down.
    pub async fn shutdown(&self, shutdown: call::Shutdown) -> Result<(), ClientError> {
        self.typed(call::Type::Shutdown, |c| c.shutdown = Some(shutdown))
            .await
    }

    /// ACKNOWLEDGE: a status update with a uuid was handled.
    pub async fn acknowledge(&self, acknowledge: call::Acknowledge) -> Result<(), ClientError> {
        self.typed(call::Type::Acknowledge, |c| {
            c.acknowledge = Some(acknowledge)
        })
        .await
    }

    /// RECONCILE: the latest state of `tasks` (of every task when empty).
    pub async fn reconcile(&self, reconcile: call::Reconcile) -> Result<(), ClientError> {
        self.typed(call::Type::Reconcile, |c| c.reconcile = Some(reconcile))
            .await
    }

    /// MESSAGE: data for an executor (delivered at most once).
    pub async fn message(&self, message: call::Message) -> Result<(), ClientError> {
        self.typed(call::Type::Message, |c| c.message = Some(message))
            .await
    }

    /// REQUEST: a hint of the resources wanted.
    pub async fn request(&self, request: call::Request) -> Result<(), ClientError> {
        self.typed(call::Type::Request, |c| c.request = Some(request))
            .await
    }

    /// ACKNOWLEDGE_OPERATION_STATUS: an operation status update was handled.
    pub async fn acknowledge_operation_status(
        &self,
        acknowledge: call::AcknowledgeOperationStatus,
    ) -> Result<(), ClientError> {
        self.typed(call::Type::AcknowledgeOperationStatus, |c| {
            c.acknowledge_operation_status = Some(acknowledge)
        })
        .await
    }

    /// RECONCILE_OPERATIONS: the latest status of operations (as events, or
    /// in the answer's body from masters that still send one).
    pub async fn reconcile_operations(
        &self,
        reconcile: call::ReconcileOperations,
    ) -> Result<Option<Response>, ClientError> {
        let call = Call {
            r#type: Some(call::Type::ReconcileOperations as i32),
            reconcile_operations: Some(reconcile),
            ..Default::default()
        };
        match self.call(call).await? {
            Answer::Accepted => Ok(None),
            Answer::Ok(response) => Ok(response),
        }
    }

    /// UPDATE_FRAMEWORK: new framework info and suppressed roles. The info
    /// must carry the framework's id.
    pub async fn update_framework(&self, update: call::UpdateFramework) -> Result<(), ClientError> {
        let framework_id = update.framework_info.id.clone();
        self.typed(call::Type::UpdateFramework, |c| {
            c.framework_id = framework_id;
            c.update_framework = Some(update);
        })
        .await
    }
}

/// SUBSCRIBED from a subscription's first event, or why there is none.
pub fn subscribed_or_refused(
    first: Option<Result<Event, StreamError>>,
) -> Result<event::Subscribed, ClientError> {
    match first {
        None => Err(ClientError::Stream(StreamError::Closed)),
        Some(Err(e)) => Err(ClientError::Stream(e)),
        Some(Ok(event)) => {
            if let Some(subscribed) = event.subscribed {
                Ok(subscribed)
            } else if let Some(error) = event.error {
                Err(ClientError::Refused(error.message))
            } else {
                Err(ClientError::Unexpected {
                    status: 200,
                    body: format!(
                        "the first event of a subscription is {:?}, not SUBSCRIBED",
                        event.r#type()
                    ),
                })
            }
        }
    }
}
