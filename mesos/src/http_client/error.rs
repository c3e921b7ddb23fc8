//! What can go wrong talking to a master (through the scheduler or the
//! resource provider API): its HTTP answers as typed errors (upstream's
//! status codes and bodies), transport failures, and why an event stream
//! ended.

use crate::codec::DecodeError;
use crate::recordio::RecordIoError;

/// A call or subscription that did not get a 200 or 202.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The master URL cannot be used.
    #[error("invalid master address '{address}': {reason}")]
    InvalidMaster {
        /// The address as given.
        address: String,
        /// Why it is refused.
        reason: String,
    },
    /// 400: the call is malformed or invalid (unknown framework or
    /// provider, wrong stream id, validation); the master's message says which.
    #[error("400 Bad Request: {0}")]
    BadRequest(String),
    /// 401: the master wants credentials (a bearer token here).
    #[error("401 Unauthorized: {0}")]
    Unauthorized(String),
    /// 403: the framework is known but not subscribed, or not allowed.
    #[error("403 Forbidden: {0}")]
    Forbidden(String),
    /// 404: no such API at that address (yet), or no such agent.
    #[error("404 Not Found: {0}")]
    NotFound(String),
    /// 406: the master cannot answer in the encoding asked for.
    #[error("406 Not Acceptable: {0}")]
    NotAcceptable(String),
    /// 415: the master does not take the body's encoding.
    #[error("415 Unsupported Media Type: {0}")]
    UnsupportedMediaType(String),
    /// 503: the master is not the leader and knows none, or is recovering.
    #[error("503 Service Unavailable: {0}")]
    ServiceUnavailable(String),
    /// Redirected more often than allowed, or without a usable `Location`.
    #[error("redirect: {0}")]
    Redirect(String),
    /// Any other status.
    #[error("unexpected {status}: {body}")]
    Unexpected {
        /// HTTP status code.
        status: u16,
        /// The body.
        body: String,
    },
    /// The master could not be reached, or the connection failed.
    #[error("transport: {0}")]
    Transport(String),
    /// No answer in time.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The subscription's first event was ERROR (a removed framework, a
    /// refused framework info): the master's message.
    #[error("subscription refused: {0}")]
    Refused(String),
    /// The subscription's stream ended or failed before SUBSCRIBED.
    #[error("subscription stream: {0}")]
    Stream(#[from] StreamError),
    /// The master answered a resource provider's SUBSCRIBE but ended the
    /// stream (or kept it silent) without SUBSCRIBED: upstream's resource
    /// provider manager drops a resubscription whose id it does not know or
    /// whose type and name differ from what it has for that id.
    #[error("subscription dropped: {0}")]
    Dropped(String),
    /// An answer's body does not decode.
    #[error("undecodable answer: {0}")]
    Decode(#[from] DecodeError),
    /// A call that needs a subscription was made before one.
    #[error("not subscribed: no subscriber id or stream id yet")]
    NotSubscribed,
}

impl ClientError {
    /// The typed error of an HTTP status and body (`None` for 200 and 202).
    pub fn from_status(status: u16, body: String) -> Option<Self> {
        Some(match status {
            200 | 202 => return None,
            400 => ClientError::BadRequest(body),
            401 => ClientError::Unauthorized(body),
            403 => ClientError::Forbidden(body),
            404 => ClientError::NotFound(body),
            406 => ClientError::NotAcceptable(body),
            415 => ClientError::UnsupportedMediaType(body),
            503 => ClientError::ServiceUnavailable(body),
            status => ClientError::Unexpected { status, body },
        })
    }

    /// The HTTP status behind the error, if the master answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::BadRequest(_) => Some(400),
            ClientError::Unauthorized(_) => Some(401),
            ClientError::Forbidden(_) => Some(403),
            ClientError::NotFound(_) => Some(404),
            ClientError::NotAcceptable(_) => Some(406),
            ClientError::UnsupportedMediaType(_) => Some(415),
            ClientError::ServiceUnavailable(_) => Some(503),
            ClientError::Unexpected { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when trying again later may succeed (the master is away,
    /// electing, or still setting up); false when the call itself is wrong
    /// or refused, and retrying would only repeat the answer.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport(_)
            | ClientError::Timeout(_)
            | ClientError::ServiceUnavailable(_)
            | ClientError::NotFound(_)
            | ClientError::Redirect(_)
            | ClientError::Stream(_)
            | ClientError::Dropped(_) => true,
            ClientError::Unexpected { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// Why an event stream stopped delivering events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// No event (not even a heartbeat) for this long: the master or the
    /// connection is presumed gone.
    #[error("no event for {0:?}: heartbeats missed")]
    HeartbeatTimeout(std::time::Duration),
    /// The connection failed while reading.
    #[error("connection failed: {0}")]
    Transport(String),
    /// The RecordIO framing is broken; nothing after it can be read.
    #[error("RecordIO: {0}")]
    RecordIo(#[from] RecordIoError),
    /// The master closed the stream.
    #[error("the master closed the event stream")]
    Closed,
    /// One event did not decode (the stream goes on).
    #[error("undecodable event: {0}")]
    Decode(DecodeError),
}

impl StreamError {
    /// True when the stream has ended with this error; false for an event
    /// that did not decode, after which the stream goes on.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, StreamError::Decode(_))
    }
}
