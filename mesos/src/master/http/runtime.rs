//! Mesos' `/weights`, `/quota`, `/reserve`, `/unreserve`,
//! `/create-volumes` and `/destroy-volumes` endpoints (the forms older
//! than the operator API's calls, which tools and scripts still use): read
//! weights and quota with GET, change them with `PUT /weights`,
//! `POST /quota` and `DELETE /quota/<role>`, and operate on an agent's
//! resources with a form POST. Each change is an operator call
//! (UPDATE_WEIGHTS, SET_QUOTA, REMOVE_QUOTA, RESERVE_RESOURCES, ...) made
//! on the master thread (`master::quota`, `master::agent_ops`), so both
//! forms are checked and applied alike. Reads are open, as `/state` is;
//! changes are behind `--token`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Edge, call_error, text, unauthorized};
use crate::v1;
use crate::v1::master::Call;
use crate::v1::master::call::Type;

/// 405 naming the methods an endpoint takes.
fn methods_only(allowed: &[&str], method: &Method) -> Response {
    let list = allowed
        .iter()
        .map(|m| format!("'{m}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Expecting one of {{ {list} }}, but received '{method}'"),
    );
    if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
        r.headers_mut().insert(header::ALLOW, v);
    }
    r
}

/// 401 unless the request carries the token (when one is set).
fn token_refused(edge: &Edge, headers: &HeaderMap) -> Option<Response> {
    (!edge.access.admits_token(headers)).then(|| {
        unauthorized(super::Unauthorized {
            challenges: vec!["Bearer realm=\"mesos\"".to_string()],
        })
    })
}

/// Makes an operator call on the master thread: 200 with `ok`'s body, or
/// the call's refusal.
async fn operator_call(
    edge: &Edge,
    call: Call,
    ok: impl FnOnce(v1::master::Response) -> Response,
) -> Response {
    let answer = edge
        .master
        .query(|reply| super::super::report::Query::Operator(Box::new(call), reply))
        .await;
    match answer {
        None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
        Some(Err(e)) => call_error(e),
        Some(Ok(r)) => ok(r),
    }
}

/// An operator call that changes something: 200 with no body.
async fn change(edge: &Edge, call: Call) -> Response {
    operator_call(edge, call, |_| StatusCode::OK.into_response()).await
}

/// 400 with upstream's message.
fn bad_request(message: String) -> Response {
    text(StatusCode::BAD_REQUEST, message)
}

fn call(kind: Type) -> Call {
    Call {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// `GET /weights`: a JSON array of WeightInfo; `PUT /weights` with one
/// sets them.
pub(super) async fn weights(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match method {
        Method::GET => {
            operator_call(&edge, call(Type::GetWeights), |r| {
                let infos: Vec<serde_json::Value> = r
                    .get_weights
                    .map(|w| w.weight_infos)
                    .unwrap_or_default()
                    .iter()
                    .map(crate::codec::to_json_value)
                    .collect();
                axum::Json(infos).into_response()
            })
            .await
        }
        Method::PUT => {
            if let Some(r) = token_refused(&edge, &headers) {
                return r;
            }
            let shown = String::from_utf8_lossy(&body);
            let array: Vec<serde_json::Value> = match serde_json::from_slice(&body) {
                Ok(a) => a,
                Err(e) => {
                    return bad_request(format!(
                        "Failed to parse update weights request JSON '{shown}': {e}"
                    ));
                }
            };
            let infos: Result<Vec<v1::WeightInfo>, _> =
                array.iter().map(crate::codec::from_json_value).collect();
            match infos {
                Ok(weight_infos) => {
                    let mut c = call(Type::UpdateWeights);
                    c.update_weights = Some(v1::master::call::UpdateWeights { weight_infos });
                    change(&edge, c).await
                }
                Err(e) => bad_request(format!(
                    "Failed to convert weights JSON array to protobuf '{shown}': {e}"
                )),
            }
        }
        other => methods_only(&["GET", "PUT"], &other),
    }
}

/// `GET /quota`: the QuotaStatus; `POST /quota` with a QuotaRequest sets a
/// role's quota (its guarantee also its limit, as this form means).
#[allow(deprecated)] // SET_QUOTA, the form this endpoint takes.
pub(super) async fn quota(
    State(edge): State<Edge>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match method {
        Method::GET => match edge.master.quota().await {
            Some(status) => axum::Json(crate::codec::to_json_value(&status)).into_response(),
            None => text(StatusCode::SERVICE_UNAVAILABLE, "the master has stopped"),
        },
        Method::POST => {
            if let Some(r) = token_refused(&edge, &headers) {
                return r;
            }
            let shown = String::from_utf8_lossy(&body);
            let value = match serde_json::from_slice::<serde_json::Value>(&body) {
                Ok(v) if v.is_object() => v,
                Ok(_) => {
                    return bad_request(format!(
                        "Failed to parse set quota request JSON '{shown}': not an object"
                    ));
                }
                Err(e) => {
                    return bad_request(format!(
                        "Failed to parse set quota request JSON '{shown}': {e}"
                    ));
                }
            };
            match crate::codec::from_json_value(&value) {
                Ok(quota_request) => {
                    let mut c = call(Type::SetQuota);
                    c.set_quota = Some(v1::master::call::SetQuota { quota_request });
                    change(&edge, c).await
                }
                Err(e) => bad_request(format!(
                    "Failed to validate set quota request JSON '{shown}': {e}"
                )),
            }
        }
        Method::DELETE => bad_request(
            "Failed to parse remove quota request for path '/quota': expected 3 tokens, found 1 tokens"
                .to_string(),
        ),
        other => methods_only(&["GET", "POST", "DELETE"], &other),
    }
}

/// `DELETE /quota/<role>`: the role's quota goes.
#[allow(deprecated)] // REMOVE_QUOTA, the form this endpoint takes.
pub(super) async fn quota_role(
    State(edge): State<Edge>,
    Path(role): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if method != Method::DELETE {
        return methods_only(&["GET", "POST", "DELETE"], &method);
    }
    if let Some(r) = token_refused(&edge, &headers) {
        return r;
    }
    let mut c = call(Type::RemoveQuota);
    c.remove_quota = Some(v1::master::call::RemoveQuota { role });
    change(&edge, c).await
}

/// The operation an older endpoint on an agent's resources stands for.
#[derive(Clone, Copy)]
pub(super) enum AgentEndpoint {
    /// `/reserve`: `slaveId`, `resources`, optional `source`.
    Reserve,
    /// `/unreserve`: `slaveId`, `resources`.
    Unreserve,
    /// `/create-volumes`: `slaveId`, `volumes`.
    CreateVolumes,
    /// `/destroy-volumes`: `slaveId`, `volumes`.
    DestroyVolumes,
}

/// A form field holding a JSON array of resources, as Mesos reads it.
fn resources_field(
    form: &std::collections::HashMap<String, String>,
    key: &str,
) -> Result<Vec<v1::Resource>, String> {
    let text = form
        .get(key)
        .ok_or_else(|| format!("Missing '{key}' query parameter in the request body"))?;
    let parse_error =
        |e: String| format!("Error parsing '{key}' query parameter in the request body: {e}");
    let array: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
    array
        .iter()
        .map(|v| crate::codec::from_json_value(v).map_err(|e| parse_error(e.to_string())))
        .collect()
}

/// Mesos' older endpoints on an agent's resources (`POST /reserve`,
/// `/unreserve`, `/create-volumes`, `/destroy-volumes`, with a form body:
/// `slaveId` and JSON arrays of resources): the operator API's calls, 202
/// when done. Behind `--token`.
pub(super) async fn agent_endpoint(
    edge: Edge,
    endpoint: AgentEndpoint,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use v1::master::call as c;
    if method != Method::POST {
        return methods_only(&["POST"], &method);
    }
    if let Some(r) = token_refused(&edge, &headers) {
        return r;
    }
    let form: std::collections::HashMap<String, String> =
        form_urlencoded::parse(&body).into_owned().collect();
    let Some(agent) = form.get("slaveId") else {
        return bad_request("Missing 'slaveId' query parameter in the request body".to_string());
    };
    let agent_id = v1::AgentId {
        value: agent.clone(),
    };
    let made = match endpoint {
        AgentEndpoint::Reserve => resources_field(&form, "resources").and_then(|resources| {
            let source = if form.contains_key("source") {
                resources_field(&form, "source")?
            } else {
                Vec::new()
            };
            let mut call = call(Type::ReserveResources);
            call.reserve_resources = Some(c::ReserveResources {
                agent_id,
                source,
                resources,
            });
            Ok(call)
        }),
        AgentEndpoint::Unreserve => resources_field(&form, "resources").map(|resources| {
            let mut call = call(Type::UnreserveResources);
            call.unreserve_resources = Some(c::UnreserveResources {
                agent_id,
                resources,
            });
            call
        }),
        AgentEndpoint::CreateVolumes => resources_field(&form, "volumes").map(|volumes| {
            let mut call = call(Type::CreateVolumes);
            call.create_volumes = Some(c::CreateVolumes { agent_id, volumes });
            call
        }),
        AgentEndpoint::DestroyVolumes => resources_field(&form, "volumes").map(|volumes| {
            let mut call = call(Type::DestroyVolumes);
            call.destroy_volumes = Some(c::DestroyVolumes { agent_id, volumes });
            call
        }),
    };
    match made {
        Ok(call) => operator_call(&edge, call, |_| StatusCode::ACCEPTED.into_response()).await,
        Err(message) => bad_request(message),
    }
}
