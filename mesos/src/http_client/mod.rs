//! What the clients of the master's v1 HTTP APIs share: the scheduler
//! client ([`crate::client`]) and the resource provider client
//! ([`crate::provider::client`]) both POST calls with [`Http`] (reqwest, one
//! connection pool, the bearer token, timeouts, 307s followed to the leader
//! and remembered), read the master's answers as typed [`ClientError`]s,
//! open subscriptions whose RecordIO bodies become [`EventStream`]s, and
//! back off with [`Backoff`] between attempts.
//!
//! Like its users this is the caller's side of the wire: it speaks only the
//! wire types and codecs, and never reaches into this crate's master.

mod backoff;
mod error;
mod events;
mod url;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderValue};

pub use self::backoff::{Backoff, jitter};
pub use self::error::{ClientError, StreamError};
pub use self::events::{DEFAULT_HEARTBEAT_MISSES, EventSource, EventStream, recordio_events};
pub use self::url::{endpoint, resolve_location};
use crate::codec::{self, ContentType};

/// The header naming a subscription's stream.
pub const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// How a client talks to the master.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Body encoding of calls and events (protobuf by default: smaller and
    /// cheaper to encode than Mesos' JSON).
    pub content_type: ContentType,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// A framework's credential, principal and secret, sent in HTTP Basic
    /// authentication when set (a master run with
    /// `--mesos-authenticate-http-frameworks`, or Mesos'
    /// `--authenticate_http_frameworks`); instead of the token.
    pub credential: Option<(String, String)>,
    /// Heartbeat intervals without any event before a scheduler's stream is
    /// declared dead (see [`EventStream`]; the resource provider API has no
    /// heartbeats).
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
            credential: None,
            heartbeat_misses: DEFAULT_HEARTBEAT_MISSES,
            subscribe_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_redirects: 5,
        }
    }
}

/// A client's latest subscription: its `Mesos-Stream-Id` and the id the
/// master gave (a framework's or a resource provider's), which later calls
/// carry. Clones of a client share one.
pub struct Session<I> {
    latest: Mutex<(Option<HeaderValue>, Option<I>)>,
}

impl<I: std::fmt::Debug> std::fmt::Debug for Session<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Session")
            .field("stream_id", &latest.0)
            .field("id", &latest.1)
            .finish()
    }
}

impl<I> Default for Session<I> {
    fn default() -> Self {
        Self {
            latest: Mutex::new((None, None)),
        }
    }
}

impl<I: Clone> Session<I> {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<HeaderValue>, Option<I>)> {
        // Plain data; a panic elsewhere cannot leave it half-written.
        self.latest.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new subscription.
    pub fn set(&self, stream_id: HeaderValue, id: I) {
        *self.lock() = (Some(stream_id), Some(id));
    }

    /// The id of the latest subscription.
    pub fn id(&self) -> Option<I> {
        self.lock().1.clone()
    }

    /// The stream id of the latest subscription, as text.
    pub fn stream_id(&self) -> Option<String> {
        self.lock()
            .0
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// What a call sends: the stream id and the id, taken together.
    pub fn for_call(&self) -> (Option<HeaderValue>, Option<I>) {
        self.lock().clone()
    }
}

/// The HTTP side of a client: the connection pool, the options, and the
/// endpoint calls go to (the leader's, once redirected).
pub struct Http {
    client: reqwest::Client,
    options: ClientOptions,
    endpoint: Mutex<reqwest::Url>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("endpoint", &self.endpoint().as_str())
            .finish()
    }
}

impl Http {
    /// Calls to `endpoint`.
    pub fn new(endpoint: reqwest::Url, options: ClientOptions) -> Result<Self, ClientError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.connect_timeout)
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(Self {
            client,
            options,
            endpoint: Mutex::new(endpoint),
        })
    }

    /// The options.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Where calls go.
    pub fn endpoint(&self) -> reqwest::Url {
        // A URL is plain data; a panic elsewhere cannot leave it half-written.
        self.endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// POSTs `body` in `content_type` (also the `Accept`), following
    /// redirects (the leader found is kept for later calls). `timed` bounds
    /// the whole exchange by the request timeout.
    pub async fn post(
        &self,
        body: Bytes,
        content_type: ContentType,
        stream_id: Option<&HeaderValue>,
        timed: bool,
    ) -> Result<reqwest::Response, ClientError> {
        let options = &self.options;
        let mut url = self.endpoint();
        for _ in 0..=options.max_redirects {
            let mut request = self
                .client
                .post(url.clone())
                .header(header::CONTENT_TYPE, content_type.mime())
                .header(header::ACCEPT, content_type.mime())
                .body(body.clone());
            if let Some(id) = stream_id {
                request = request.header(STREAM_ID_HEADER, id.clone());
            }
            if let Some((principal, secret)) = &options.credential {
                request = request.basic_auth(principal, Some(secret));
            } else if let Some(token) = &options.token {
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
            *self.endpoint.lock().unwrap_or_else(PoisonError::into_inner) = url.clone();
        }
        Err(ClientError::Redirect(format!(
            "more than {} redirects",
            options.max_redirects
        )))
    }

    /// POSTs a SUBSCRIBE and opens its event stream: the stream id and the
    /// events (not yet read), or the master's refusal. Bounded by `deadline`.
    pub async fn subscribe<E>(
        &self,
        body: Bytes,
        content_type: ContentType,
        deadline: tokio::time::Instant,
    ) -> Result<(HeaderValue, EventSource<E>), ClientError>
    where
        E: prost::Message + prost_reflect::ReflectMessage + Default + 'static,
    {
        let timeout = self.options.subscribe_timeout;
        let response =
            tokio::time::timeout_at(deadline, self.post(body, content_type, None, false))
                .await
                .map_err(|_| ClientError::Timeout(timeout))??;
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
        let content_type = content_type_of(&response).unwrap_or(content_type);
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(|e| error_chain(&e)));
        Ok((
            stream_id,
            events::RecordIoEvents::source(Box::pin(body), content_type),
        ))
    }

    /// POSTs any other call: its body when the master answered 200 (empty
    /// for 202), or the master's refusal.
    pub async fn call(
        &self,
        body: Bytes,
        content_type: ContentType,
        stream_id: Option<&HeaderValue>,
    ) -> Result<Reply, ClientError> {
        let response = self.post(body, content_type, stream_id, true).await?;
        match response.status().as_u16() {
            202 => {
                // Read to the end (empty) so the connection goes back to the pool.
                response.bytes().await.map_err(transport)?;
                Ok(Reply::Accepted)
            }
            200 => {
                let content_type = content_type_of(&response).unwrap_or(content_type);
                let body = response.bytes().await.map_err(transport)?;
                Ok(Reply::Ok(body, content_type))
            }
            _ => Err(error_of(response).await),
        }
    }
}

/// A successful answer to a call other than SUBSCRIBE, undecoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 202 Accepted.
    Accepted,
    /// 200 OK with its body (maybe empty) and its encoding.
    Ok(Bytes, ContentType),
}

/// The encoding a response names.
fn content_type_of(response: &reqwest::Response) -> Option<ContentType> {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| ContentType::from_content_type_header(v).ok())
}

/// A transport failure as a [`ClientError`].
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

/// Encodes a call for a request body.
pub fn body_of<T>(call: &T, content_type: ContentType) -> Bytes
where
    T: prost::Message + prost_reflect::ReflectMessage,
{
    Bytes::from(codec::encode(call, content_type))
}
