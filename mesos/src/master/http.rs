//! The master's HTTP edge: `POST /api/v1/scheduler` (Mesos' v1 scheduler
//! API), `/state`, `/metrics/snapshot`, `/health`, `/master/redirect`.
//!
//! Handlers check what needs no state (method, token, content types, body,
//! call validation, `Accept`) and hand the call to the master thread; a
//! SUBSCRIBE answers 200 at once with a chunked RecordIO stream that the
//! response task fills from the subscription's channel, encoding each event
//! in the type `Accept` chose. When the client goes away, the response task's
//! guard tells the master (the framework is then disconnected).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use tokio::sync::mpsc;

use super::{CallError, CallOutcome, Input, MasterHandle};
use crate::codec::ContentType;
use crate::v1::scheduler::call::Type as CallType;
use crate::v1::scheduler::{Call, Event};

/// The stream id header.
pub const STREAM_ID: &str = "Mesos-Stream-Id";

/// Largest request body taken (larger: 413).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// State of the HTTP edge.
#[derive(Clone)]
pub struct Edge {
    master: MasterHandle,
    token: Option<Arc<str>>,
    stream_capacity: usize,
}

/// The router of the master's endpoints.
pub fn router(master: MasterHandle, token: Option<&str>, stream_capacity: usize) -> Router {
    let edge = Edge {
        master,
        token: token.filter(|t| !t.is_empty()).map(Arc::from),
        stream_capacity,
    };
    Router::new()
        .route("/api/v1/scheduler", any(scheduler))
        .route("/state", get(state))
        .route("/state.json", get(state))
        .route("/master/state", get(state))
        .route("/master/state.json", get(state))
        .route("/metrics/snapshot", get(metrics))
        .route("/health", get(health))
        .route("/master/health", get(health))
        .route("/master/redirect", get(redirect))
        .route("/redirect", get(redirect))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(edge)
}

/// Serves the master's endpoints on `addr` until the listener fails.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router).await
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

fn call_error(e: CallError) -> Response {
    text(
        StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        e.message,
    )
}

/// True when the request carries the token (or none is required); compared
/// without returning early on the first differing byte.
fn admits(token: &Option<Arc<str>>, headers: &HeaderMap) -> bool {
    let Some(expected) = token else { return true };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    given.is_some_and(|g| {
        g.len() == expected.len()
            && g.iter()
                .zip(expected.as_bytes())
                .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                == 0
    })
}

/// Checks a call as Mesos does before it reaches the master.
pub fn validate_call(call: &Call) -> Result<(), String> {
    let Some(kind) = call.r#type.and_then(|t| CallType::try_from(t).ok()) else {
        return Err("Expecting 'type' to be present".to_string());
    };
    if kind == CallType::Subscribe {
        let Some(sub) = &call.subscribe else {
            return Err("Expecting 'subscribe' to be present".to_string());
        };
        if sub.framework_info.id != call.framework_id {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".to_string());
        }
        return Ok(());
    }
    if call.framework_id.is_none() {
        return Err("Expecting 'framework_id' to be present".to_string());
    }
    let missing = |present: bool, name: &str| {
        if present {
            Ok(())
        } else {
            Err(format!("Expecting '{name}' to be present"))
        }
    };
    let uuid_ok = |uuid: &[u8]| {
        if uuid.len() == 16 {
            Ok(())
        } else {
            Err(format!(
                "Invalid UUID: expected 16 bytes, got {}",
                uuid.len()
            ))
        }
    };
    match kind {
        CallType::Accept => missing(call.accept.is_some(), "accept"),
        CallType::Decline => missing(call.decline.is_some(), "decline"),
        CallType::AcceptInverseOffers => missing(
            call.accept_inverse_offers.is_some(),
            "accept_inverse_offers",
        ),
        CallType::DeclineInverseOffers => missing(
            call.decline_inverse_offers.is_some(),
            "decline_inverse_offers",
        ),
        CallType::Kill => missing(call.kill.is_some(), "kill"),
        CallType::Shutdown => missing(call.shutdown.is_some(), "shutdown"),
        CallType::Acknowledge => match &call.acknowledge {
            None => missing(false, "acknowledge"),
            Some(a) => uuid_ok(&a.uuid),
        },
        CallType::AcknowledgeOperationStatus => match &call.acknowledge_operation_status {
            None => missing(false, "acknowledge_operation_status"),
            Some(a) => {
                uuid_ok(&a.uuid)?;
                missing(a.agent_id.is_some(), "agent_id")
            }
        },
        CallType::Reconcile => missing(call.reconcile.is_some(), "reconcile"),
        CallType::ReconcileOperations => {
            missing(call.reconcile_operations.is_some(), "reconcile_operations")
        }
        CallType::Message => missing(call.message.is_some(), "message"),
        CallType::Request => missing(call.request.is_some(), "request"),
        CallType::UpdateFramework => match &call.update_framework {
            None => missing(false, "update_framework"),
            Some(u) if u.framework_info.id != call.framework_id => {
                Err("'framework_id' differs from 'update_framework.framework_info.id'".to_string())
            }
            Some(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

async fn scheduler(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("Expecting one of {{ 'POST' }}, but received '{method}'"),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    if !admits(&edge.token, &headers) {
        let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mesos\""),
        );
        return r;
    }
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return text(
            StatusCode::BAD_REQUEST,
            "Expecting 'Content-Type' to be present",
        );
    };
    let Ok(content_type) = content_type
        .to_str()
        .map_err(|_| ())
        .and_then(|c| ContentType::from_content_type_header(c).map_err(|_| ()))
    else {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Expecting 'Content-Type' of application/json or application/x-protobuf",
        );
    };
    let call: Call = match crate::codec::decode(&body, content_type) {
        Ok(c) => c,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if let Err(e) = validate_call(&call) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate scheduler::Call: {e}"),
        );
    }
    let kind = call.r#type();
    let accept = if matches!(kind, CallType::Subscribe | CallType::ReconcileOperations) {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        match crate::codec::accept_negotiation(accept) {
            Some(t) => Some(t),
            None => {
                return text(
                    StatusCode::NOT_ACCEPTABLE,
                    "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'",
                );
            }
        }
    } else {
        None
    };
    let stream_id = headers
        .get(STREAM_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if kind == CallType::Subscribe {
        if stream_id.is_some() {
            return text(
                StatusCode::BAD_REQUEST,
                "Subscribe calls should not include the 'Mesos-Stream-Id' header",
            );
        }
        let subscribe = call.subscribe.unwrap_or_default();
        return subscribe_stream(&edge, subscribe, accept.unwrap_or(ContentType::Json));
    }
    match edge.master.call(call, stream_id).await {
        Ok(CallOutcome::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(CallOutcome::Ok) => StatusCode::OK.into_response(),
        Err(e) => call_error(e),
    }
}

/// Tells the master when the response stream of a subscription goes away.
struct StreamGuard {
    master: MasterHandle,
    stream_id: String,
    framework: Option<String>,
}

impl StreamGuard {
    /// The master closed the stream itself (ERROR, removal): nothing to report.
    fn disarm(&mut self) {
        self.framework = None;
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(framework) = self.framework.take() {
            self.master.send(Input::StreamClosed {
                framework,
                stream_id: self.stream_id.clone(),
            });
        }
    }
}

fn subscribe_stream(
    edge: &Edge,
    subscribe: crate::v1::scheduler::call::Subscribe,
    accept: ContentType,
) -> Response {
    let (sink, events) = mpsc::channel::<Event>(edge.stream_capacity.max(1));
    let stream_id = uuid::Uuid::new_v4().to_string();
    edge.master.send(Input::Subscribe {
        subscribe: Box::new(subscribe),
        stream_id: stream_id.clone(),
        sink,
    });
    let guard = StreamGuard {
        master: edge.master.clone(),
        stream_id: stream_id.clone(),
        framework: None,
    };
    let body =
        futures_util::stream::unfold((events, guard), move |(mut events, mut guard)| async move {
            match events.recv().await {
                Some(event) => {
                    if let Some(s) = &event.subscribed {
                        guard.framework = Some(s.framework_id.value.clone());
                    }
                    let record = crate::codec::encode(&event, accept);
                    let bytes = Bytes::from(crate::recordio::encode_record(&record));
                    Some((Ok::<Bytes, Infallible>(bytes), (events, guard)))
                }
                None => {
                    guard.disarm();
                    None
                }
            }
        });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(accept.mime()),
    );
    if let Ok(v) = HeaderValue::from_str(&stream_id) {
        headers.insert(STREAM_ID, v);
    }
    response
}

async fn state(State(edge): State<Edge>) -> Response {
    match edge.master.query(super::report::Query::State).await {
        Some(v) => axum::Json(v).into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
    }
}

async fn metrics(State(edge): State<Edge>) -> Response {
    match edge.master.query(super::report::Query::Metrics).await {
        Some(v) => axum::Json(v).into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
    }
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn redirect(State(edge): State<Edge>, headers: HeaderMap) -> Response {
    // This master is always the leader: point back at ourselves.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| {
            let info = edge.master.info();
            format!(
                "{}:{}",
                info.hostname.clone().unwrap_or_default(),
                info.port
            )
        });
    let mut r = StatusCode::TEMPORARY_REDIRECT.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("//{host}")) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}
