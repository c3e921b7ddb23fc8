//! `config` (GET and PUT) and `validate-conf`.
//!
//! `GET /ws/v1/config` answers with the configuration text in force (YAML,
//! comments and all, so it can be edited and PUT back) or, with `Accept:
//! application/json`, upstream's `ConfigDAOInfo`: the parsed configuration
//! under Go's field names (`Partitions`, `Queues`, `SubmitACL`, ...), its
//! `Checksum`, and the deadlock detection fields. Upstream answers YAML with
//! its own re-rendering of that object; the text as written says the same
//! and stays loadable. Before any RM registered both answer 200 with no
//! configuration, as upstream.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use serde_yaml::Value as Yaml;

use super::{ApiError, ApiResult, Params, RestState, blocking};
use unisched_core::Scheduler;

/// The RM a config call means: the one named by `?rmID=`, else the only one
/// registered; `Ok(None)` when none is.
fn rm_of(scheduler: &Scheduler, params: &Params) -> ApiResult<Option<String>> {
    if let Some(rm) = params.get("rmID") {
        return Ok(Some(rm.clone()));
    }
    let mut rms = scheduler.resource_managers();
    match rms.len() {
        0 => Ok(None),
        1 => Ok(Some(rms.remove(0))),
        _ => Err(ApiError::bad_request(format!(
            "several resource managers are registered ({rms:?}): name one with ?rmID="
        ))),
    }
}

/// How each object of upstream's configuration names its fields: the YAML
/// key, Go's field name, and what the value is.
#[derive(Clone, Copy)]
enum Shape {
    Config,
    Partition,
    Queue,
    Resources,
    Template,
    Rule,
    Filter,
    Limit,
    Preemption,
    NodeSort,
    Resolver,
    /// A map whose keys are data (properties, quantities, weights).
    Strings,
    Numbers,
    /// A list of names.
    Names,
    Plain,
}

/// (YAML key, Go field, shape, value when the key is absent and Go has no
/// `omitempty` for it).
type Field = (&'static str, &'static str, Shape, Option<fn() -> Value>);

fn fields(shape: Shape) -> &'static [Field] {
    use Shape::*;
    match shape {
        Config => &[
            ("partitions", "Partitions", Partition, Some(|| Value::Null)),
            ("checksum", "Checksum", Plain, None),
        ],
        Partition => &[
            ("name", "Name", Plain, Some(|| json!(""))),
            ("queues", "Queues", Queue, Some(|| Value::Null)),
            ("placementrules", "PlacementRules", Rule, None),
            ("limits", "Limits", Limit, None),
            ("preemption", "Preemption", Preemption, Some(|| json!({}))),
            (
                "nodesortpolicy",
                "NodeSortPolicy",
                NodeSort,
                Some(|| json!({"Type": ""})),
            ),
            (
                "usergroupresolver",
                "UserGroupResolver",
                Resolver,
                Some(|| json!({})),
            ),
        ],
        Queue => &[
            ("name", "Name", Plain, Some(|| json!(""))),
            ("parent", "Parent", Plain, None),
            ("resources", "Resources", Resources, Some(|| json!({}))),
            ("maxapplications", "MaxApplications", Plain, None),
            ("properties", "Properties", Strings, None),
            ("adminacl", "AdminACL", Plain, None),
            ("submitacl", "SubmitACL", Plain, None),
            (
                "childtemplate",
                "ChildTemplate",
                Template,
                Some(|| json!({"Resources": {}})),
            ),
            ("queues", "Queues", Queue, None),
            ("limits", "Limits", Limit, None),
        ],
        Resources => &[
            ("guaranteed", "Guaranteed", Strings, None),
            ("max", "Max", Strings, None),
        ],
        Template => &[
            ("maxapplications", "MaxApplications", Plain, None),
            ("properties", "Properties", Strings, None),
            ("resources", "Resources", Resources, Some(|| json!({}))),
        ],
        Rule => &[
            ("name", "Name", Plain, Some(|| json!(""))),
            ("create", "Create", Plain, None),
            ("filter", "Filter", Filter, Some(|| json!({"Type": ""}))),
            ("parent", "Parent", Rule, None),
            ("value", "Value", Plain, None),
        ],
        Filter => &[
            ("type", "Type", Plain, Some(|| json!(""))),
            ("users", "Users", Names, None),
            ("groups", "Groups", Names, None),
        ],
        Limit => &[
            ("limit", "Limit", Plain, Some(|| json!(""))),
            ("users", "Users", Names, None),
            ("groups", "Groups", Names, None),
            ("maxresources", "MaxResources", Strings, None),
            ("maxapplications", "MaxApplications", Plain, None),
        ],
        Preemption => &[
            ("enabled", "Enabled", Plain, None),
            (
                "quotapreemptionenabled",
                "QuotaPreemptionEnabled",
                Plain,
                None,
            ),
        ],
        NodeSort => &[
            ("type", "Type", Plain, Some(|| json!(""))),
            ("resourceweights", "ResourceWeights", Numbers, None),
        ],
        Resolver => &[("type", "type", Plain, None)],
        Strings | Numbers | Names | Plain => &[],
    }
}

/// A YAML scalar as text (`10` in a resource map is the string "10" upstream).
fn text(v: &Yaml) -> Value {
    match v {
        Yaml::String(s) => json!(s),
        Yaml::Number(n) => json!(n.to_string()),
        Yaml::Bool(b) => json!(b.to_string()),
        other => plain(other),
    }
}

fn plain(v: &Yaml) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `v` in upstream's JSON shape for `shape`.
fn go_shape(v: &Yaml, shape: Shape) -> Value {
    match (shape, v) {
        (_, Yaml::Sequence(items)) => {
            Value::Array(items.iter().map(|i| go_shape(i, shape)).collect())
        }
        (Shape::Strings, Yaml::Mapping(m)) => Value::Object(
            m.iter()
                .map(|(k, v)| (key(k), text(v)))
                .collect::<Map<_, _>>(),
        ),
        (Shape::Names, other) => text(other),
        (Shape::Numbers | Shape::Plain, other) => plain(other),
        (_, Yaml::Mapping(m)) => {
            let mut out = Map::new();
            for &(yaml_key, go_name, inner, absent) in fields(shape) {
                let found = m
                    .iter()
                    .find(|(k, _)| key(k).eq_ignore_ascii_case(yaml_key))
                    .map(|(_, v)| v);
                match (found, absent) {
                    (Some(value), _) => {
                        out.insert(go_name.to_string(), go_shape(value, inner));
                    }
                    (None, Some(default)) => {
                        out.insert(go_name.to_string(), default());
                    }
                    (None, None) => {}
                }
            }
            Value::Object(out)
        }
        (_, other) => plain(other),
    }
}

fn key(k: &Yaml) -> String {
    match k {
        Yaml::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// Upstream's `ConfigDAOInfo` of `text` (`None`: no configuration yet). This
/// core has no locks to watch, so deadlock detection is off, with no timeout.
pub fn config_dao(text: Option<&str>) -> Value {
    let mut out = match text.map(serde_yaml::from_str::<Yaml>) {
        Some(Ok(doc)) => match go_shape(&doc, Shape::Config) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    if let Some(t) = text {
        out.insert(
            "Checksum".to_string(),
            json!(unisched_core::config::checksum(t)),
        );
    }
    out.insert("DeadlockDetectionEnabled".to_string(), json!(false));
    out.insert("DeadlockTimeoutSeconds".to_string(), json!(0));
    Value::Object(out)
}

/// The configuration text of the RM `params` mean (`None` before any RM
/// registered).
fn text_in_force(scheduler: &Scheduler, params: &Params) -> ApiResult<Option<String>> {
    match rm_of(scheduler, params)? {
        None => Ok(None),
        Some(rm) => scheduler
            .config(&rm)
            .map(Some)
            .ok_or_else(|| ApiError::not_found("resource manager", &rm)),
    }
}

/// `GET /ws/v1/config`.
pub async fn get_config(
    State(state): State<RestState>,
    params: Params,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let text = text_in_force(&state.scheduler, &params)?;
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if json {
        return Ok(axum::Json(config_dao(text.as_deref())).into_response());
    }
    Ok((
        [(header::CONTENT_TYPE, "application/x-yaml; charset=UTF-8")],
        text.unwrap_or_default(),
    )
        .into_response())
}

/// `PUT /ws/v1/config`: applies the YAML body, then asks the RM to persist
/// it. Upstream dropped this route; it stays here because the RM persistence
/// callback (`UpdateConfiguration`) is part of this SI line.
pub async fn put_config(
    State(state): State<RestState>,
    params: Params,
    body: axum::body::Bytes,
) -> ApiResult<impl IntoResponse> {
    let text = utf8(&body)?.to_string();
    let rm = rm_of(&state.scheduler, &params)?
        .ok_or_else(|| ApiError::not_found("resource manager", "(none registered)"))?;
    let answer = blocking(&state, move |s| s.set_config(&rm, &text))
        .await?
        .map_err(|e| ApiError::of(&e))?;
    if !answer.success {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the configuration was applied but the resource manager did not persist it: {}",
                answer.reason
            ),
        ));
    }
    Ok(axum::Json(json!({
        "persisted": true,
        "oldConfig": answer.old_config,
    })))
}

fn utf8(body: &[u8]) -> ApiResult<&str> {
    std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("the configuration is not UTF-8 text: {e}")))
}

/// `POST /ws/v1/validate-conf`: `ValidateConfResponse`.
pub async fn validate_conf(body: axum::body::Bytes) -> ApiResult<impl IntoResponse> {
    let text = utf8(&body)?;
    let answer = match unisched_core::config::parse(text) {
        Ok(_) => json!({ "allowed": true }),
        Err(errors) => json!({ "allowed": false, "reason": errors.to_string() }),
    };
    Ok(axum::Json(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_dao_uses_gos_field_names() {
        let dao = config_dao(Some(
            "partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
        properties: {application.sort.policy: fair}
        queues:
          - name: a
            maxapplications: 3
            resources: {guaranteed: {vcore: 10, memory: 1G}}
",
        ));
        let p = &dao["Partitions"][0];
        assert_eq!(p["Name"], "default");
        assert_eq!(p["Preemption"], json!({}));
        assert_eq!(p["NodeSortPolicy"], json!({"Type": ""}));
        assert_eq!(p["PlacementRules"][0]["Value"], "namespace");
        assert_eq!(p["PlacementRules"][0]["Create"], true);
        assert_eq!(p["PlacementRules"][0]["Filter"], json!({"Type": ""}));
        let root = &p["Queues"][0];
        assert_eq!(root["SubmitACL"], "*");
        assert_eq!(root["Properties"]["application.sort.policy"], "fair");
        let a = &root["Queues"][0];
        assert_eq!(a["MaxApplications"], 3);
        assert_eq!(
            a["Resources"]["Guaranteed"],
            json!({"vcore": "10", "memory": "1G"})
        );
        assert_eq!(a["ChildTemplate"], json!({"Resources": {}}));
        assert!(dao["Checksum"].as_str().is_some_and(|c| c.len() == 64));
        assert_eq!(dao["DeadlockDetectionEnabled"], false);
    }

    #[test]
    fn no_configuration_yet() {
        assert_eq!(
            config_dao(None),
            json!({"DeadlockDetectionEnabled": false, "DeadlockTimeoutSeconds": 0})
        );
    }
}
