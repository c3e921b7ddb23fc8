//! Mesos' `/weights` and `/quota` endpoints (the forms older than the
//! operator API's calls, which tools and scripts still use): read them
//! with GET, change them with `PUT /weights`, `POST /quota` and
//! `DELETE /quota/<role>`. A change is an operator call
//! (UPDATE_WEIGHTS, SET_QUOTA, REMOVE_QUOTA) made on the master thread
//! (`master::quota`), so both forms are checked and applied alike. Reads
//! are open, as `/state` is; changes are behind `--token`.

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
