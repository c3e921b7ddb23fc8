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

mod error;
mod events;
mod url;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderValue};

pub use self::error::{ClientError, StreamError};
pub use self::events::{DEFAULT_HEARTBEAT_MISSES, EventSource, EventStream, recordio_events};
pub use self::url::{SCHEDULER_PATH, endpoint, resolve_location};
use crate::codec::{self, ContentType};
use crate::v1;
use crate::v1::scheduler::{Call, Event, Response, call, event};

/// The header naming a subscription's stream.
pub const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// How a [`Client`] talks to the master.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Body encoding of calls and events (protobuf by default: smaller and
    /// cheaper to encode than Mesos' JSON).
    pub content_type: ContentType,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Heartbeat intervals without any event before the stream is declared
    /// dead (see [`EventStream`]).
    pub heartbeat_misses: u32,
    /// Longest wait for a subscription's SUBSCRIBED (or ERROR).
    pub subscribe_timeout: Duration,
    /// Longest wait for the answer to any other call.
    pub request_timeout: Duration,
    /// Longest wait for a TCP connection.
    pub connect_timeout: Duration,
    /// Redirects followed per call before giving up.
    pub max_redirects: u32,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            content_type: ContentType::Protobuf,
            token: None,
            heartbeat_misses: DEFAULT_HEARTBEAT_MISSES,
            subscribe_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_redirects: 5,
        }
    }
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
    http: reqwest::Client,
    options: ClientOptions,
    session: Mutex<Session>,
}

/// The latest subscription and where the leader is.
#[derive(Debug, Clone)]
struct Session {
    endpoint: reqwest::Url,
    stream_id: Option<HeaderValue>,
    framework_id: Option<v1::FrameworkId>,
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
            .field("session", &*self.session())
            .finish()
    }
}

impl Client {
    /// A client of the master at `master` (`host:port` or an `http://` URL).
    pub fn new(master: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let endpoint = endpoint(master)?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.connect_timeout)
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(Self {
            content_type: options.content_type,
            shared: Arc::new(Shared {
                http,
                options,
                session: Mutex::new(Session {
                    endpoint,
                    stream_id: None,
                    framework_id: None,
                }),
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
        self.session().endpoint.to_string()
    }

    /// The framework id of the latest subscription.
    pub fn framework_id(&self) -> Option<v1::FrameworkId> {
        self.session().framework_id.clone()
    }

    /// The stream id of the latest subscription.
    pub fn stream_id(&self) -> Option<String> {
        self.session()
            .stream_id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    fn session(&self) -> std::sync::MutexGuard<'_, Session> {
        // The session is plain data; a panic elsewhere cannot leave it half-written.
        self.shared
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// SUBSCRIBE: opens the event stream and waits for its SUBSCRIBED. A
    /// framework info with an id resubscribes (fails over) that framework.
    /// The stream id and framework id are kept for later calls.
    pub async fn subscribe(&self, subscribe: call::Subscribe) -> Result<Subscription, ClientError> {
        let options = &self.shared.options;
        let call = Call {
            framework_id: subscribe.framework_info.id.clone(),
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(subscribe),
            ..Default::default()
        };
        let body = Bytes::from(codec::encode(&call, self.content_type));
        let deadline = tokio::time::Instant::now() + options.subscribe_timeout;
        let response = tokio::time::timeout_at(deadline, self.post(body, None, false)).await;
        let response = response.map_err(|_| ClientError::Timeout(options.subscribe_timeout))??;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(error_of(response).await);
        }
        let stream_id = response
            .headers()
            .get(STREAM_ID_HEADER)
            .cloned()
            .ok_or_else(|| ClientError::Unexpected {
                status,
                body: format!("SUBSCRIBE answered without a {STREAM_ID_HEADER} header"),
            })?;
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| ContentType::from_content_type_header(v).ok())
            .unwrap_or(self.content_type);
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(|e| error_chain(&e)));
        let mut source = events::RecordIoEvents::source(Box::pin(body), content_type);
        let first = tokio::time::timeout_at(deadline, source.next())
            .await
            .map_err(|_| ClientError::Timeout(options.subscribe_timeout))?;
        let subscribed = subscribed_or_refused(first)?;
        {
            let mut session = self.session();
            session.stream_id = Some(stream_id.clone());
            session.framework_id = Some(subscribed.framework_id.clone());
        }
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
        let stream_id = {
            let session = self.session();
            if call.framework_id.is_none() {
                call.framework_id = session.framework_id.clone();
            }
            session.stream_id.clone()
        };
        if call.framework_id.is_none() || stream_id.is_none() {
            return Err(ClientError::NotSubscribed);
        }
        let body = Bytes::from(codec::encode(&call, self.content_type));
        let response = self.post(body, stream_id, true).await?;
        match response.status().as_u16() {
            202 => {
                // Read to the end (empty) so the connection goes back to the pool.
                response.bytes().await.map_err(transport)?;
                Ok(Answer::Accepted)
            }
            200 => {
                let content_type = response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| ContentType::from_content_type_header(v).ok())
                    .unwrap_or(self.content_type);
                let body = response.bytes().await.map_err(transport)?;
                if body.is_empty() {
                    Ok(Answer::Ok(None))
                } else {
                    Ok(Answer::Ok(Some(codec::decode(&body, content_type)?)))
                }
            }
            _ => Err(error_of(response).await),
        }
    }

    /// POSTs `body`, following redirects (the leader found is kept for
    /// later calls). `timed` bounds the whole exchange by the request timeout.
    async fn post(
        &self,
        body: Bytes,
        stream_id: Option<HeaderValue>,
        timed: bool,
    ) -> Result<reqwest::Response, ClientError> {
        let options = &self.shared.options;
        let mut url = self.session().endpoint.clone();
        for _ in 0..=options.max_redirects {
            let mut request = self
                .shared
                .http
                .post(url.clone())
                .header(header::CONTENT_TYPE, self.content_type.mime())
                .header(header::ACCEPT, self.content_type.mime())
                .body(body.clone());
            if let Some(id) = &stream_id {
                request = request.header(STREAM_ID_HEADER, id.clone());
            }
            if let Some(token) = &options.token {
                request = request.bearer_auth(token);
            }
            if timed {
                request = request.timeout(options.request_timeout);
            }
            let response = request.send().await.map_err(transport)?;
            if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
                return Ok(response);
            }
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    ClientError::Redirect(format!("{} without a Location", response.status()))
                })?;
            url = resolve_location(&url, location)?;
            tracing::info!(leader = %url, "redirected to the leading master");
            self.session().endpoint = url.clone();
        }
        Err(ClientError::Redirect(format!(
            "more than {} redirects",
            options.max_redirects
        )))
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

fn transport(e: reqwest::Error) -> ClientError {
    if e.is_timeout() {
        ClientError::Transport(format!("timed out: {e}"))
    } else {
        ClientError::Transport(error_chain(&e))
    }
}

/// An error and its sources in one line (reqwest's own text hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The typed error of a response that is not 200 or 202.
async fn error_of(response: reqwest::Response) -> ClientError {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    ClientError::from_status(status, body).unwrap_or(ClientError::Unexpected {
        status,
        body: "unexpected success".to_string(),
    })
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
