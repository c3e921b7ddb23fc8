//! The agent resource text, read as Mesos reads `--resources`: either a JSON
//! array of `Resource` objects, or `name(role):value` entries separated by
//! `;`, where a value is a scalar (`2`, `0.5`), ranges (`[31000-32000,
//! 33000-33010]`) or a set (`{a,b}`).

#![allow(deprecated)] // A JSON resource without reservations gets the legacy `role`.

use super::ResourceError;
use super::value::coalesce;
use crate::v1::resource::ReservationInfo;
use crate::v1::resource::reservation_info::Type as ReservationType;
use crate::v1::{Resource, value};

/// The resources of `text`, unvalidated, in the order written.
pub(super) fn parse_text(text: &str, default_role: &str) -> Result<Vec<Resource>, ResourceError> {
    if let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(text) {
        return items
            .iter()
            .map(|item| {
                let mut resource: Resource = crate::codec::from_json_value(item)
                    .map_err(|e| ResourceError::Json(strip_prefix(e.to_string())))?;
                if resource.role.is_none() && resource.reservations.is_empty() {
                    resource.role = Some(default_role.to_string());
                }
                Ok(resource)
            })
            .collect();
    }

    let mut resources = Vec::new();
    for entry in text.split(';').filter(|t| !t.is_empty()) {
        let parts: Vec<&str> = entry.split(':').filter(|p| !p.is_empty()).collect();
        let [head, value] = parts[..] else {
            return Err(ResourceError::Parse(format!(
                "Bad value for resources, missing or extra ':' in {entry}"
            )));
        };
        let (name, role) = match head.find('(') {
            None => (head.trim(), default_role),
            Some(open) => match head.find(')') {
                Some(close) if close > open => (head[..open].trim(), head[open + 1..close].trim()),
                _ => {
                    return Err(ResourceError::Parse(format!(
                        "Bad value for resources, mismatched parentheses in {entry}"
                    )));
                }
            },
        };
        resources.push(parse_resource(name, value, role)?);
    }
    Ok(resources)
}

/// The error text of the JSON mapping without the HTTP-body prefix.
fn strip_prefix(message: String) -> String {
    match message.split_once("protobuf: ") {
        Some((_, rest)) => rest.to_string(),
        None => message,
    }
}

/// One `name(role):value` entry.
fn parse_resource(name: &str, text: &str, role: &str) -> Result<Resource, ResourceError> {
    let parsed = parse_value(text).map_err(|e| {
        ResourceError::Parse(format!(
            "Failed to parse resource {name} value {text} error {e}"
        ))
    })?;
    let mut resource = Resource {
        name: name.to_string(),
        ..Default::default()
    };
    if role != "*" {
        resource.reservations.push(ReservationInfo {
            r#type: Some(ReservationType::Static as i32),
            role: Some(role.to_string()),
            ..Default::default()
        });
    }
    match parsed {
        Parsed::Scalar(v) => {
            resource.r#type = value::Type::Scalar as i32;
            resource.scalar = Some(value::Scalar { value: v });
        }
        Parsed::Ranges(range) => {
            resource.r#type = value::Type::Ranges as i32;
            resource.ranges = Some(value::Ranges { range });
        }
        Parsed::Set(item) => {
            resource.r#type = value::Type::Set as i32;
            resource.set = Some(value::Set { item });
        }
        Parsed::Text => {
            return Err(ResourceError::Parse(format!(
                "Bad type for resource {name} value {text} type TEXT"
            )));
        }
    }
    Ok(resource)
}

enum Parsed {
    Scalar(f64),
    Ranges(Vec<value::Range>),
    Set(Vec<String>),
    /// Anything else; not a resource value.
    Text,
}

/// A value as Mesos' value parser reads it (spaces ignored).
fn parse_value(text: &str) -> Result<Parsed, String> {
    let text: String = text.chars().filter(|&c| c != ' ').collect();
    if text.is_empty() {
        return Err("Expecting non-empty string".into());
    }
    if !brackets_match(&text, '{', '}')
        || !brackets_match(&text, '[', ']')
        || !brackets_match(&text, '(', ')')
    {
        return Err("Mismatched brackets".into());
    }
    let tokens = |separators: &[char]| -> Vec<String> {
        text.split(separators)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    match (text.find('['), text.find('{')) {
        (Some(0), _) => {
            let bounds = tokens(&['[', ']', '-', ',', '\n']);
            if bounds.len() % 2 != 0 {
                return Err("Expecting one or more \"ranges\"".into());
            }
            let mut ranges = Vec::with_capacity(bounds.len() / 2);
            for pair in bounds.chunks(2) {
                let (Ok(begin), Ok(end)) = (pair[0].parse::<u64>(), pair[1].parse::<u64>()) else {
                    return Err(format!("Expecting non-negative integers in '{}'", pair[0]));
                };
                ranges.push(value::Range { begin, end });
            }
            Ok(Parsed::Ranges(coalesce(&ranges)))
        }
        (Some(_), _) => Err("Unexpected '[' found".into()),
        (None, Some(0)) => Ok(Parsed::Set(tokens(&['{', '}', ',', '\n']))),
        (None, Some(_)) => Err("Unexpected '{' found".into()),
        (None, None) => match text.parse::<f64>() {
            Ok(v) if v.is_subnormal() => Err("Subnormal values not supported".into()),
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Parsed::Scalar(v)),
            // Negative, infinite, NaN or not a number: text.
            _ => Ok(Parsed::Text),
        },
    }
}

/// Whether every `close` follows a matching `open` and none is left open.
fn brackets_match(text: &str, open: char, close: char) -> bool {
    let mut depth = 0i64;
    for c in text.chars() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth < 0 {
                return false;
            }
        }
    }
    depth == 0
}
