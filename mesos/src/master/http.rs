//! The master's HTTP edge: `POST /api/v1/scheduler` (Mesos' v1 scheduler
//! API), `POST /api/v1` (the operator API, `super::operator`), the executor
//! and resource provider APIs, libprocess messages (`super::libprocess`),
//! `/state` and its views (`/frameworks`, `/slaves`, `/tasks`, `/roles`,
//! `/flags`, `/version`), `/metrics/snapshot`, `/health`, `/master/redirect`.
//!
//! Handlers check what needs no state (method, authentication (`--token`,
//! or a framework's credentials, `super::auth`), content types, body,
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
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use tokio::sync::mpsc;

use super::auth::{Access, Unauthorized};
use super::{CallError, CallOutcome, Input, MasterHandle};
use crate::agent::custom::{CallAnswer, ExecutorHub};
use crate::codec::ContentType;
use crate::v1::scheduler::Call;
use crate::v1::scheduler::call::Type as CallType;

mod runtime;

/// The stream id header.
pub const STREAM_ID: &str = "Mesos-Stream-Id";

/// Largest request body taken (larger: 413).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// State of the HTTP edge.
#[derive(Clone)]
pub struct Edge {
    master: MasterHandle,
    access: Arc<Access>,
    stream_capacity: usize,
    executors: Option<Arc<ExecutorHub>>,
    libprocess: Arc<super::libprocess::Libprocess>,
}

/// The router of the master's endpoints; with `executors`, also the
/// executor API of its process agents (`/api/v1/executor`, and under each
/// agent's `/slave(N)/`).
pub fn router(
    master: MasterHandle,
    access: Access,
    stream_capacity: usize,
    executors: Option<Arc<ExecutorHub>>,
) -> Router {
    let access = Arc::new(access);
    let edge = Edge {
        libprocess: super::libprocess::Libprocess::new(
            master.clone(),
            stream_capacity,
            executors.clone(),
            Arc::clone(&access),
        ),
        master,
        access,
        stream_capacity,
        executors,
    };
    Router::new()
        .route("/api/v1/scheduler", any(scheduler))
        .route("/api/v1", any(operator_api))
        .route("/api/v1/operator", any(operator_api))
        .route("/api/v1/executor", any(executor_api))
        .route("/{process}/api/v1/executor", any(executor_api_agent))
        .route("/api/v1/resource_provider", any(resource_provider_master))
        .route(
            "/{process}/api/v1/resource_provider",
            any(resource_provider_agent),
        )
        .route("/state", get(state))
        .route("/state.json", get(state))
        .route("/master/state", get(state))
        .route("/master/state.json", get(state))
        .route("/metrics/snapshot", get(metrics))
        .route("/frameworks", get(frameworks_view))
        .route("/master/frameworks", get(frameworks_view))
        .route("/slaves", get(slaves_view))
        .route("/master/slaves", get(slaves_view))
        .route("/tasks", get(tasks_view))
        .route("/master/tasks", get(tasks_view))
        .route("/flags", get(flags_view))
        .route("/master/flags", get(flags_view))
        .route("/version", get(version_view))
        .route("/weights", any(runtime::weights))
        .route("/master/weights", any(runtime::weights))
        .route("/quota", any(runtime::quota))
        .route("/master/quota", any(runtime::quota))
        .route("/quota/{*role}", any(runtime::quota_role))
        .route("/master/quota/{*role}", any(runtime::quota_role))
        .route("/reserve", agent_route(runtime::AgentEndpoint::Reserve))
        .route(
            "/master/reserve",
            agent_route(runtime::AgentEndpoint::Reserve),
        )
        .route("/unreserve", agent_route(runtime::AgentEndpoint::Unreserve))
        .route(
            "/master/unreserve",
            agent_route(runtime::AgentEndpoint::Unreserve),
        )
        .route(
            "/create-volumes",
            agent_route(runtime::AgentEndpoint::CreateVolumes),
        )
        .route(
            "/master/create-volumes",
            agent_route(runtime::AgentEndpoint::CreateVolumes),
        )
        .route(
            "/destroy-volumes",
            agent_route(runtime::AgentEndpoint::DestroyVolumes),
        )
        .route(
            "/master/destroy-volumes",
            agent_route(runtime::AgentEndpoint::DestroyVolumes),
        )
        .route("/roles", get(roles_view))
        .route("/master/roles", get(roles_view))
        .route("/health", get(health))
        .route("/master/health", get(health))
        .route("/master/redirect", get(redirect))
        .route("/redirect", get(redirect))
        .route("/{process}/{message}", any(libprocess_message))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(edge)
}

/// Serves the master's endpoints on `addr` until the listener fails.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    axum::serve(listen(addr)?, router).await
}

/// Connections that may wait to be accepted: frameworks open many at once
/// (a flood of calls, each on a connection of its own), and a full queue
/// makes the kernel drop or reset them while the accept loop is behind.
/// The kernel caps it at `net.core.somaxconn`.
const ACCEPT_BACKLOG: u32 = 4096;

/// A listener on `addr` with the master's accept backlog.
pub fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
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

/// Upstream's validation error of a call missing the message `name`.
pub(super) fn expecting(present: bool, name: &str) -> Result<(), String> {
    if present {
        Ok(())
    } else {
        Err(format!("Expecting '{name}' to be present"))
    }
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
    let missing = expecting;
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

/// Which authentication a call of the v1 APIs needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Realm {
    /// The scheduler API: `--token`, or Basic credentials under
    /// `--mesos-authenticate-http-frameworks`.
    Scheduler,
    /// The resource provider API: `--token` alone.
    Token,
}

/// 401 with the challenges that would admit the call.
fn unauthorized(u: Unauthorized) -> Response {
    let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized");
    for c in u.challenges {
        if let Ok(v) = HeaderValue::from_str(&c) {
            r.headers_mut().append(header::WWW_AUTHENTICATE, v);
        }
    }
    r
}

/// What every call of the v1 APIs is checked for before its body means
/// anything: method, authentication, content type, body; then the body
/// decoded, with the call's authenticated principal.
fn decode_call<T>(
    edge: &Edge,
    realm: Realm,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(T, Option<String>), Box<Response>>
where
    T: prost::Message + prost_reflect::ReflectMessage + Default,
{
    if *method != Method::POST {
        return Err(Box::new(post_only(method)));
    }
    let principal = match realm {
        Realm::Scheduler => edge.access.scheduler_principal(headers),
        Realm::Token if edge.access.admits_token(headers) => Ok(None),
        Realm::Token => Err(Unauthorized {
            challenges: vec!["Bearer realm=\"mesos\"".to_string()],
        }),
    }
    .map_err(|u| Box::new(unauthorized(u)))?;
    Ok((decode_body(headers, body)?, principal))
}

/// 405 for an endpoint that takes only POST.
fn post_only(method: &Method) -> Response {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Expecting one of {{ 'POST' }}, but received '{method}'"),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

/// The body of a POST as a message of its `Content-Type`'s encoding.
fn decode_body<T>(headers: &HeaderMap, body: &Bytes) -> Result<T, Box<Response>>
where
    T: prost::Message + prost_reflect::ReflectMessage + Default,
{
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "Expecting 'Content-Type' to be present",
        )));
    };
    let Ok(content_type) = content_type
        .to_str()
        .map_err(|_| ())
        .and_then(|c| ContentType::from_content_type_header(c).map_err(|_| ()))
    else {
        return Err(Box::new(text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Expecting 'Content-Type' of application/json or application/x-protobuf",
        )));
    };
    crate::codec::decode(body, content_type)
        .map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, e.to_string())))
}

/// The encoding a SUBSCRIBE's `Accept` chooses, or 406; and 400 when the
/// SUBSCRIBE carries a stream id.
fn subscribe_checks(headers: &HeaderMap) -> Result<ContentType, Box<Response>> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let Some(accept) = crate::codec::accept_negotiation(accept) else {
        return Err(Box::new(text(
            StatusCode::NOT_ACCEPTABLE,
            "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'",
        )));
    };
    if headers.get(STREAM_ID).is_some() {
        return Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "Subscribe calls should not include the 'Mesos-Stream-Id' header",
        )));
    }
    Ok(accept)
}

fn stream_id_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(STREAM_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn outcome(result: Result<CallOutcome, CallError>) -> Response {
    match result {
        Ok(CallOutcome::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(CallOutcome::Ok) => StatusCode::OK.into_response(),
        Err(e) => call_error(e),
    }
}

async fn scheduler(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut call, principal): (Call, _) =
        match decode_call(&edge, Realm::Scheduler, &method, &headers, &body) {
            Ok(c) => c,
            Err(r) => return *r,
        };
    if let Err(e) = validate_call(&call).and_then(|()| check_principal(&call, &principal)) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate scheduler::Call: {e}"),
        );
    }
    let kind = call.r#type();
    if kind == CallType::Subscribe {
        let accept = match subscribe_checks(&headers) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        let mut subscribe = call.subscribe.take().unwrap_or_default();
        if subscribe.framework_info.principal.is_none() {
            // Mesos sets an authenticated framework's principal.
            subscribe.framework_info.principal = principal;
        }
        return subscribe_stream(&edge, subscribe, accept);
    }
    if kind == CallType::ReconcileOperations {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        if crate::codec::accept_negotiation(accept).is_none() {
            return text(
                StatusCode::NOT_ACCEPTABLE,
                "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'",
            );
        }
    }
    if let Some(f) = &call.framework_id
        && edge.libprocess.serves(&f.value)
    {
        // Registered over libprocess: its calls come as messages (mesos-go's
        // v0 driver POSTs some here; Mesos answers so too).
        return text(StatusCode::FORBIDDEN, "Framework is not connected via HTTP");
    }
    outcome(
        edge.master
            .call_as(call, stream_id_of(&headers), principal)
            .await,
    )
}

/// A SUBSCRIBE's `FrameworkInfo.principal` must be the principal it
/// authenticated as, if both are there.
fn check_principal(call: &Call, principal: &Option<String>) -> Result<(), String> {
    let info = call.subscribe.as_ref().map(|s| &s.framework_info);
    match (principal, info.and_then(|i| i.principal.as_ref())) {
        (Some(p), Some(i)) if p != i => Err(super::auth::http_principal_mismatch(p, i)),
        _ => Ok(()),
    }
}

/// Mesos' operator API of the master (`/api/v1`; pymesos' operator driver
/// posts to `/api/v1/operator`, which Mesos routes there too): see
/// `super::operator`. Behind `--token`, as the other APIs.
async fn operator_api(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use crate::v1::master::Call as OpCall;
    let call: OpCall = match decode_call(&edge, Realm::Token, &method, &headers, &body) {
        Ok((c, _)) => c,
        Err(r) => return *r,
    };
    if let Err(e) = super::operator::validate(&call) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate master::Call: {e}"),
        );
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let Some(accept) = crate::codec::accept_negotiation(accept) else {
        return text(
            StatusCode::NOT_ACCEPTABLE,
            "Expecting 'Accept' to allow 'application/json' or 'application/x-protobuf'",
        );
    };
    if call.r#type() == crate::v1::master::call::Type::Subscribe {
        return operator_events(&edge, accept);
    }
    let kind = call.r#type();
    let answer = if kind == crate::v1::master::call::Type::GetQuota {
        // Only the core knows its queues' limits.
        edge.master.quota().await.map(|status| {
            Ok(crate::v1::master::Response {
                r#type: Some(crate::v1::master::response::Type::GetQuota as i32),
                get_quota: Some(crate::v1::master::response::GetQuota { status }),
                ..Default::default()
            })
        })
    } else {
        edge.master
            .query(|reply| super::report::Query::Operator(Box::new(call), reply))
            .await
    };
    match answer {
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
        Some(Err(e)) => call_error(e),
        Some(Ok(_)) if let Some(status) = super::operator::empty_answer(kind) => {
            StatusCode::from_u16(status)
                .unwrap_or(StatusCode::OK)
                .into_response()
        }
        Some(Ok(response)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, accept.mime())],
            crate::codec::encode(&response, accept),
        )
            .into_response(),
    }
}

/// The operator API's SUBSCRIBE: a RecordIO stream of `master::Event`s
/// (`super::operator::events`), with a HEARTBEAT every heartbeat interval
/// made here. The master holds the only sender: when it drops a subscriber
/// (too slow) or stops, the stream ends.
fn operator_events(edge: &Edge, accept: ContentType) -> Response {
    let (sink, events) = mpsc::channel(edge.stream_capacity.max(1));
    if !edge
        .master
        .send(Input::Query(super::report::Query::OperatorSubscribe(sink)))
    {
        return text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped");
    }
    let interval = edge.master.heartbeat_interval();
    let ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let body =
        futures_util::stream::unfold((events, ticks), move |(mut events, mut ticks)| async move {
            let event = tokio::select! {
                e = events.recv() => e?,
                _ = ticks.tick() => super::operator::events::heartbeat(),
            };
            let record = crate::recordio::encode_record(&crate::codec::encode(&event, accept));
            Some((
                Ok::<Bytes, Infallible>(Bytes::from(record)),
                (events, ticks),
            ))
        });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(accept.mime()),
    );
    response
}

/// `/api/v1/resource_provider` of the master: external providers.
async fn resource_provider_master(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    resource_provider(edge, None, method, headers, body).await
}

/// `/slave(N)/api/v1/resource_provider`: agent N's local providers.
async fn resource_provider_agent(
    State(edge): State<Edge>,
    Path(process): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = process
        .strip_prefix("slave(")
        .and_then(|r| r.strip_suffix(')'))
        .and_then(|n| n.parse::<u32>().ok());
    match n {
        Some(n) => resource_provider(edge, Some(n), method, headers, body).await,
        None => text(StatusCode::NOT_FOUND, format!("No process '{process}'")),
    }
}

async fn resource_provider(
    edge: Edge,
    endpoint: Option<u32>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use crate::v1::resource_provider::{Call as RpCall, call::Type as RpType};
    let call: RpCall = match decode_call(&edge, Realm::Token, &method, &headers, &body) {
        Ok((c, _)) => c,
        Err(r) => return *r,
    };
    if let Err(e) = super::providers::validate_call(&call) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate resource_provider::Call: {e}"),
        );
    }
    if call.r#type() == RpType::Subscribe {
        let accept = match subscribe_checks(&headers) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        let subscribe = call.subscribe.unwrap_or_default();
        let (sink, events) = mpsc::channel(edge.stream_capacity.max(1));
        let stream_id = uuid::Uuid::new_v4().to_string();
        edge.master.send(Input::ProviderSubscribe {
            endpoint,
            subscribe: Box::new(subscribe),
            stream_id: stream_id.clone(),
            sink,
        });
        let master = edge.master.clone();
        let id = stream_id.clone();
        return event_stream(
            events,
            accept,
            &stream_id,
            move |e: &crate::v1::resource_provider::Event| {
                e.subscribed.as_ref().map(|s| {
                    let (master, provider, stream_id) =
                        (master.clone(), s.provider_id.value.clone(), id.clone());
                    Box::new(move || {
                        master.send(Input::ProviderClosed {
                            provider,
                            stream_id,
                        });
                    }) as Box<dyn FnOnce() + Send>
                })
            },
        );
    }
    outcome(
        edge.master
            .provider_call(endpoint, call, stream_id_of(&headers))
            .await,
    )
}

/// Runs `on_close` when the response stream of a subscription goes away
/// (the client hung up), unless the master closed it itself.
struct StreamGuard {
    on_close: Option<Box<dyn FnOnce() + Send>>,
}

impl StreamGuard {
    /// The master closed the stream itself (ERROR, removal): nothing to report.
    fn disarm(&mut self) {
        self.on_close = None;
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(f) = self.on_close.take() {
            f();
        }
    }
}

/// An event a stream carries, as one RecordIO record's body.
trait StreamRecord {
    fn record(&self, accept: ContentType) -> Vec<u8>;
}

impl StreamRecord for super::StreamEvent {
    fn record(&self, accept: ContentType) -> Vec<u8> {
        self.encode(accept)
    }
}

impl StreamRecord for crate::v1::resource_provider::Event {
    fn record(&self, accept: ContentType) -> Vec<u8> {
        crate::codec::encode(self, accept)
    }
}

/// A 200 response streaming `events` as RecordIO in `accept`'s encoding;
/// `arm` looks at each event and, at the first that identifies the
/// subscriber, gives what to run when the client goes away.
fn event_stream<E, A>(
    events: mpsc::Receiver<E>,
    accept: ContentType,
    stream_id: &str,
    arm: A,
) -> Response
where
    E: StreamRecord + Send + 'static,
    A: Fn(&E) -> Option<Box<dyn FnOnce() + Send>> + Send + 'static,
{
    let guard = StreamGuard { on_close: None };
    let body = futures_util::stream::unfold(
        (events, guard, arm),
        move |(mut events, mut guard, arm)| async move {
            match events.recv().await {
                Some(event) => {
                    if guard.on_close.is_none()
                        && let Some(f) = arm(&event)
                    {
                        guard.on_close = Some(f);
                    }
                    let record = event.record(accept);
                    let bytes = Bytes::from(crate::recordio::encode_record(&record));
                    Some((Ok::<Bytes, Infallible>(bytes), (events, guard, arm)))
                }
                None => {
                    guard.disarm();
                    None
                }
            }
        },
    );
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(accept.mime()),
    );
    if !stream_id.is_empty()
        && let Ok(v) = HeaderValue::from_str(stream_id)
    {
        headers.insert(STREAM_ID, v);
    }
    response
}

impl StreamRecord for crate::v1::executor::Event {
    fn record(&self, accept: ContentType) -> Vec<u8> {
        crate::codec::encode(self, accept)
    }
}

async fn executor_api_agent(
    State(edge): State<Edge>,
    Path(process): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !process.starts_with("slave(") {
        return text(StatusCode::NOT_FOUND, format!("No process '{process}'"));
    }
    executor_api(State(edge), method, headers, body).await
}

/// `POST /api/v1/executor`: the executor API of the process agents' custom
/// executors (see `agent::custom`). Not behind the token: executors are
/// not given it (upstream's default leaves executors unauthenticated).
async fn executor_api(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use crate::v1::executor::{Call as ExecCall, call::Type as ExecType};
    if method != Method::POST {
        return post_only(&method);
    }
    let call: ExecCall = match decode_body(&headers, &body) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if let Err(e) = crate::agent::custom::validate_call(&call) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate Executor::Call: {e}"),
        );
    }
    let accept = if call.r#type() == ExecType::Subscribe {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        match crate::codec::accept_negotiation(accept) {
            Some(a) => a,
            None => {
                return text(
                    StatusCode::NOT_ACCEPTABLE,
                    "Expecting 'Accept' to allow 'application/x-protobuf' or 'application/json'",
                );
            }
        }
    } else if call.r#type() == ExecType::Heartbeat {
        return StatusCode::ACCEPTED.into_response();
    } else {
        ContentType::Json
    };
    let Some(hub) = &edge.executors else {
        return text(StatusCode::BAD_REQUEST, "Framework cannot be found");
    };
    match hub.call(call).await {
        Ok(CallAnswer::Accepted) => StatusCode::ACCEPTED.into_response(),
        Ok(CallAnswer::Stream(events)) => event_stream(events, accept, "", |_| None),
        Err((status, message)) => text(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            message,
        ),
    }
}

fn subscribe_stream(
    edge: &Edge,
    subscribe: crate::v1::scheduler::call::Subscribe,
    accept: ContentType,
) -> Response {
    let (sink, events) = mpsc::channel::<super::StreamEvent>(edge.stream_capacity.max(1));
    let stream_id = uuid::Uuid::new_v4().to_string();
    edge.master.send(Input::Subscribe {
        subscribe: Box::new(subscribe),
        stream_id: stream_id.clone(),
        sink,
        pid: None,
    });
    let master = edge.master.clone();
    let id = stream_id.clone();
    event_stream(events, accept, &stream_id, move |e: &super::StreamEvent| {
        e.subscribed().map(|s| {
            let (master, framework, stream_id) =
                (master.clone(), s.framework_id.value.clone(), id.clone());
            Box::new(move || {
                master.send(Input::StreamClosed {
                    framework,
                    stream_id,
                });
            }) as Box<dyn FnOnce() + Send>
        })
    })
}

/// A libprocess message (`/master/mesos.internal.RegisterFrameworkMessage`,
/// ...): the older protocol of libmesos' native drivers. It cannot carry
/// the `--token`, so with one set a scheduler's messages are refused unless
/// it authenticated (SASL); an executor's are not (as the executor API,
/// which executors are not given the token for). See `Libprocess::receive`.
async fn libprocess_message(
    State(edge): State<Edge>,
    Path((process, message)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (status, reason) = edge
        .libprocess
        .receive(&process, &message, &method, &headers, &body);
    if reason.is_empty() {
        status.into_response()
    } else {
        text(status, reason)
    }
}

async fn state(State(edge): State<Edge>) -> Response {
    match edge.master.query(super::report::Query::State).await {
        Some(v) => axum::Json(v).into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
    }
}

/// A view of `/state` (see `report::views`).
async fn state_view(
    edge: &Edge,
    view: impl FnOnce(&serde_json::Value) -> serde_json::Value,
) -> Response {
    match edge.master.query(super::report::Query::State).await {
        Some(v) => axum::Json(view(&v)).into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
    }
}

type Params = axum::extract::Query<std::collections::HashMap<String, String>>;

async fn frameworks_view(State(edge): State<Edge>, axum::extract::Query(q): Params) -> Response {
    state_view(&edge, |s| super::report::views::frameworks(s, &q)).await
}

async fn slaves_view(State(edge): State<Edge>, axum::extract::Query(q): Params) -> Response {
    state_view(&edge, |s| super::report::views::slaves(s, &q)).await
}

async fn tasks_view(State(edge): State<Edge>, axum::extract::Query(q): Params) -> Response {
    state_view(&edge, |s| super::report::views::tasks(s, &q)).await
}

async fn flags_view(State(edge): State<Edge>) -> Response {
    state_view(&edge, super::report::views::flags).await
}

async fn roles_view(State(edge): State<Edge>) -> Response {
    let usage = edge.master.query(super::report::Query::Roles).await;
    let quota = edge.master.quota().await;
    match (usage, quota) {
        (Some(usage), Some(quota)) => {
            axum::Json(super::report::views::roles(&usage, &quota)).into_response()
        }
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
    }
}

/// The route of one of Mesos' older endpoints on an agent's resources.
fn agent_route(endpoint: runtime::AgentEndpoint) -> axum::routing::MethodRouter<Edge> {
    any(
        move |State(edge): State<Edge>, method: Method, headers: HeaderMap, body: Bytes| {
            runtime::agent_endpoint(edge, endpoint, method, headers, body)
        },
    )
}

async fn version_view(State(edge): State<Edge>) -> Response {
    state_view(&edge, super::report::views::version).await
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
