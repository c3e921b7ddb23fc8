//! JSON to protobuf wire bytes, the way stout's `protobuf::parse` reads a
//! message: keys are field names (unknown keys ignored), `null` leaves a
//! field unset, enums by name (an unknown name unsets an optional field and
//! fails a required one), bytes in base64, numbers and booleans also from
//! strings, a single value for a repeated field adds one element, and nested
//! arrays flatten.

use serde_json::{Map, Number, Value};

use super::plan::{FieldKind, FieldPlan, Plans, Scalar};
use super::wire::{put_len, put_tag, put_varint};

/// Why a JSON value does not map onto a message; `path` is filled in while
/// the error travels out (innermost field first).
#[derive(Debug)]
pub(crate) struct MappingError {
    path: Vec<String>,
    problem: Problem,
}

#[derive(Debug)]
enum Problem {
    NotObject,
    NotExpecting(&'static str),
    Base64(String),
    UnknownEnum(String),
    NotA {
        what: &'static str,
        text: String,
        error: String,
    },
}

impl MappingError {
    fn new(problem: Problem) -> Self {
        MappingError {
            path: Vec::new(),
            problem,
        }
    }

    /// The error text, naming the field by its dotted path.
    pub fn into_message(self) -> String {
        let path: Vec<&str> = self.path.iter().rev().map(String::as_str).collect();
        let field = path.join(".");
        match self.problem {
            Problem::NotObject => "Expecting a JSON object".to_string(),
            Problem::NotExpecting(what) => {
                format!("Not expecting a JSON {what} for field '{field}'")
            }
            Problem::Base64(e) => format!("Failed to base64 decode bytes field '{field}': {e}"),
            Problem::UnknownEnum(name) => {
                format!("Failed to find enum for '{name}' (field '{field}')")
            }
            Problem::NotA { what, text, error } => {
                format!("Failed to parse '{text}' as a JSON {what} for field '{field}': {error}")
            }
        }
    }
}

type Result<T> = std::result::Result<T, MappingError>;

/// Encodes a JSON value as the message `message`.
pub(crate) fn encode_value(plans: &Plans, message: usize, value: &Value) -> Result<Vec<u8>> {
    let Value::Object(object) = value else {
        return Err(MappingError::new(Problem::NotObject));
    };
    let mut out = Vec::new();
    encode_object(plans, message, object, &mut out)?;
    Ok(out)
}

fn encode_object(
    plans: &Plans,
    message: usize,
    object: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let plan = &plans.messages[message];
    for (name, value) in object {
        let Some(index) = plan.by_name(name) else {
            continue;
        };
        let field = &plan.fields[index];
        encode_field(plans, field, value, out).map_err(|mut e| {
            e.path.push(field.name.to_string());
            e
        })?;
    }
    Ok(())
}

fn not_expecting(what: &'static str) -> MappingError {
    MappingError::new(Problem::NotExpecting(what))
}

fn encode_field(plans: &Plans, field: &FieldPlan, value: &Value, out: &mut Vec<u8>) -> Result<()> {
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => {
            if !field.repeated {
                return Err(not_expecting("array"));
            }
            for item in items {
                encode_field(plans, field, item, out)?;
            }
            Ok(())
        }
        Value::Object(object) => {
            let FieldKind::Message(sub) = field.kind else {
                return Err(not_expecting("object"));
            };
            if field.map {
                encode_map(plans, field, sub, object, out)
            } else {
                let mut nested = Vec::new();
                encode_object(plans, sub, object, &mut nested)?;
                put_len(out, field.number, &nested);
                Ok(())
            }
        }
        Value::String(text) => encode_string(plans, field, text, out),
        Value::Number(number) => encode_number(field, number, out),
        Value::Bool(b) => match field.kind {
            FieldKind::Scalar(Scalar::Bool) => {
                put_tag(out, field.number, 0);
                put_varint(out, u64::from(*b));
                Ok(())
            }
            _ => Err(not_expecting("boolean")),
        },
    }
}

fn encode_map(
    plans: &Plans,
    field: &FieldPlan,
    entry: usize,
    object: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let entry_plan = &plans.messages[entry];
    let (Some(key_index), Some(value_index)) = (entry_plan.by_number(1), entry_plan.by_number(2))
    else {
        return Err(not_expecting("object"));
    };
    for (key, value) in object {
        let mut bytes = Vec::new();
        encode_string(plans, &entry_plan.fields[key_index], key, &mut bytes)?;
        encode_field(plans, &entry_plan.fields[value_index], value, &mut bytes)?;
        put_len(out, field.number, &bytes);
    }
    Ok(())
}

fn encode_string(plans: &Plans, field: &FieldPlan, text: &str, out: &mut Vec<u8>) -> Result<()> {
    match field.kind {
        FieldKind::Scalar(Scalar::String) => {
            put_len(out, field.number, text.as_bytes());
            Ok(())
        }
        FieldKind::Scalar(Scalar::Bytes) => {
            let bytes =
                super::base64::decode(text).map_err(|e| MappingError::new(Problem::Base64(e)))?;
            put_len(out, field.number, &bytes);
            Ok(())
        }
        FieldKind::Enum(e) => match plans.enums[e].number(text) {
            Some(number) => {
                put_tag(out, field.number, 0);
                put_varint(out, number as i64 as u64);
                Ok(())
            }
            None if field.required => Err(MappingError::new(Problem::UnknownEnum(text.into()))),
            // proto2 drops an unknown value of an optional or repeated enum.
            None => Ok(()),
        },
        FieldKind::Scalar(Scalar::Double | Scalar::Float) => {
            let number = match text {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                "NaN" => f64::NAN,
                _ => parse_number(text)?.as_f64().unwrap_or(0.0),
            };
            put_double(field, number, out);
            Ok(())
        }
        FieldKind::Scalar(Scalar::Bool) => {
            let b: bool = serde_json::from_str(text).map_err(|e| {
                MappingError::new(Problem::NotA {
                    what: "boolean",
                    text: text.into(),
                    error: e.to_string(),
                })
            })?;
            put_tag(out, field.number, 0);
            put_varint(out, u64::from(b));
            Ok(())
        }
        FieldKind::Scalar(_) => encode_number(field, &parse_number(text)?, out),
        FieldKind::Message(_) => Err(not_expecting("string")),
    }
}

fn parse_number(text: &str) -> Result<Number> {
    serde_json::from_str(text).map_err(|e| {
        MappingError::new(Problem::NotA {
            what: "number",
            text: text.into(),
            error: e.to_string(),
        })
    })
}

/// A JSON number in an integer type: integers convert with wrapping, as a
/// C++ cast does; fractions are truncated.
fn as_i64(number: &Number) -> i64 {
    if let Some(u) = number.as_u64() {
        u as i64
    } else if let Some(i) = number.as_i64() {
        i
    } else {
        number.as_f64().unwrap_or(0.0) as i64
    }
}

fn as_u64(number: &Number) -> u64 {
    if let Some(u) = number.as_u64() {
        u
    } else if let Some(i) = number.as_i64() {
        i as u64
    } else {
        number.as_f64().unwrap_or(0.0) as u64
    }
}

fn put_double(field: &FieldPlan, value: f64, out: &mut Vec<u8>) {
    if let FieldKind::Scalar(Scalar::Float) = field.kind {
        put_tag(out, field.number, 5);
        out.extend_from_slice(&(value as f32).to_le_bytes());
    } else {
        put_tag(out, field.number, 1);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn encode_number(field: &FieldPlan, number: &Number, out: &mut Vec<u8>) -> Result<()> {
    let FieldKind::Scalar(scalar) = field.kind else {
        return Err(not_expecting("number"));
    };
    let tag = field.number;
    match scalar {
        Scalar::Double | Scalar::Float => put_double(field, number.as_f64().unwrap_or(0.0), out),
        Scalar::Int32 => {
            put_tag(out, tag, 0);
            put_varint(out, as_i64(number) as i32 as i64 as u64);
        }
        Scalar::Int64 => {
            put_tag(out, tag, 0);
            put_varint(out, as_i64(number) as u64);
        }
        Scalar::Uint32 => {
            put_tag(out, tag, 0);
            put_varint(out, u64::from(as_u64(number) as u32));
        }
        Scalar::Uint64 => {
            put_tag(out, tag, 0);
            put_varint(out, as_u64(number));
        }
        Scalar::Sint32 => {
            let v = as_i64(number) as i32;
            put_tag(out, tag, 0);
            put_varint(out, u64::from(((v << 1) ^ (v >> 31)) as u32));
        }
        Scalar::Sint64 => {
            let v = as_i64(number);
            put_tag(out, tag, 0);
            put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
        }
        Scalar::Fixed32 => {
            put_tag(out, tag, 5);
            out.extend_from_slice(&(as_u64(number) as u32).to_le_bytes());
        }
        Scalar::Sfixed32 => {
            put_tag(out, tag, 5);
            out.extend_from_slice(&(as_i64(number) as i32).to_le_bytes());
        }
        Scalar::Fixed64 => {
            put_tag(out, tag, 1);
            out.extend_from_slice(&as_u64(number).to_le_bytes());
        }
        Scalar::Sfixed64 => {
            put_tag(out, tag, 1);
            out.extend_from_slice(&as_i64(number).to_le_bytes());
        }
        Scalar::Bool | Scalar::String | Scalar::Bytes => return Err(not_expecting("number")),
    }
    Ok(())
}
