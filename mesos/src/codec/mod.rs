//! Bodies of the Mesos v1 HTTP APIs: JSON exactly as Mesos maps it (stout's
//! protobuf/JSON code) and protobuf, content-type and `Accept` handling as
//! upstream does it, and decode errors worded for an HTTP 400 body.
//!
//! JSON, as Mesos writes and reads it:
//! - object keys are the proto field names (`framework_id`, not `frameworkId`),
//!   written in declaration order;
//! - only set fields and non-empty repeated fields are written, plus unset
//!   singular fields that declare a non-deprecated default (stout writes those
//!   with the default, e.g. `"failover_timeout":0.0`, `"shell":true`);
//! - enums by name, bytes as standard base64, 64-bit integers as numbers,
//!   maps as objects;
//! - on input unknown keys are ignored, `null` means unset, numbers and
//!   booleans may come as strings, unknown enum names unset an optional field,
//!   and every required field must be present (as after protobuf's parse).
//!
//! Protobuf input is checked for required fields too (prost does not check
//! them), using the descriptors.
//!
//! The JSON encoder walks the bytes prost writes with tables built once from
//! the descriptors (`plan.rs`), so an event costs one protobuf encode and one
//! pass; decoding goes JSON → wire bytes → prost.

mod base64;
mod json_in;
mod json_out;
mod plan;
mod wire;

use prost::Message;
use prost_reflect::ReflectMessage;

use self::json_out::JsonWriter;
use self::plan::plans_for;

/// `application/json`.
pub const APPLICATION_JSON: &str = "application/json";
/// `application/x-protobuf`.
pub const APPLICATION_PROTOBUF: &str = "application/x-protobuf";
/// `application/recordio`, the streaming media type of newer clients.
pub const APPLICATION_RECORDIO: &str = "application/recordio";

/// The two body encodings of the v1 APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentType {
    /// `application/json`, Mesos' JSON mapping.
    Json,
    /// `application/x-protobuf`.
    Protobuf,
}

impl ContentType {
    /// The media type, as sent in `Content-Type`.
    pub const fn mime(self) -> &'static str {
        match self {
            ContentType::Json => APPLICATION_JSON,
            ContentType::Protobuf => APPLICATION_PROTOBUF,
        }
    }

    /// The encoding named by a `Content-Type` header. Parameters (such as
    /// `; charset=utf-8`) and case are ignored; upstream compares the whole
    /// header exactly, which we relax.
    pub fn from_content_type_header(value: &str) -> Result<ContentType, UnsupportedMediaType> {
        let media_type = value.split(';').next().unwrap_or("").trim();
        if media_type.eq_ignore_ascii_case(APPLICATION_JSON) {
            Ok(ContentType::Json)
        } else if media_type.eq_ignore_ascii_case(APPLICATION_PROTOBUF) {
            Ok(ContentType::Protobuf)
        } else {
            Err(UnsupportedMediaType {
                content_type: value.to_string(),
            })
        }
    }
}

impl std::fmt::Display for ContentType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mime())
    }
}

/// A `Content-Type` that is neither JSON nor protobuf (HTTP 415).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Expecting 'Content-Type' of application/json or application/x-protobuf")]
pub struct UnsupportedMediaType {
    /// The header as received.
    pub content_type: String,
}

/// The response encoding for an `Accept` header, as the master picks it:
/// JSON whenever JSON is acceptable, else protobuf if that is, else `None`
/// (the server answers 406). A missing header accepts everything.
///
/// Like upstream, q-values only matter when they are zero (not acceptable):
/// JSON wins over protobuf even with a lower q.
pub fn accept_negotiation(accept: Option<&str>) -> Option<ContentType> {
    if accepts_media_type(accept, APPLICATION_JSON) {
        Some(ContentType::Json)
    } else if accepts_media_type(accept, APPLICATION_PROTOBUF) {
        Some(ContentType::Protobuf)
    } else {
        None
    }
}

/// Whether an `Accept`-style header allows `media_type` (libprocess' rule):
/// no header allows everything; otherwise the most specific of `type/sub`,
/// `type/*` and `*/*` that the header lists decides, and it allows unless
/// its `q` is zero (or not a number).
pub fn accepts_media_type(header: Option<&str>, media_type: &str) -> bool {
    let Some((kind, _)) = media_type.split_once('/') else {
        return false;
    };
    let Some(header) = header else {
        return true;
    };
    let header: String = header
        .chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\n'))
        .collect();
    let wildcard = format!("{kind}/*");
    for candidate in [media_type, wildcard.as_str(), "*/*"] {
        for range in header.split(',').filter(|r| !r.is_empty()) {
            let mut parts = range.split(';').filter(|p| !p.is_empty());
            let Some(name) = parts.next() else {
                continue;
            };
            if !name.eq_ignore_ascii_case(candidate) {
                continue;
            }
            let q: Vec<&str> = parts
                .filter_map(|p| p.split_once('='))
                .filter(|(k, v)| *k == "q" && !v.is_empty() && !v.contains('='))
                .map(|(_, v)| v)
                .collect();
            return match q[..] {
                [q] => q.parse::<f64>().is_ok_and(|q| q > 0.0),
                _ => true, // No q, or more than one: acceptable.
            };
        }
    }
    false
}

/// A body that does not decode into the expected message; the text is meant
/// for an HTTP 400 body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body is not JSON.
    #[error("Failed to parse body into JSON: {detail}")]
    Json {
        /// What the JSON parser said.
        detail: String,
    },
    /// The JSON does not map onto the message.
    #[error("Failed to convert JSON into {message} protobuf: {detail}")]
    JsonMapping {
        /// Short name of the message ("Call").
        message: String,
        /// Which field and why.
        detail: String,
    },
    /// The body is not a valid protobuf encoding of the message.
    #[error("Failed to parse body into {message} protobuf: {detail}")]
    Protobuf {
        /// Short name of the message ("Call").
        message: String,
        /// What prost said.
        detail: String,
    },
    /// Required fields are missing.
    #[error(
        "{}: Missing required fields: {}",
        missing_prefix(*.content_type, message),
        .fields.join(", ")
    )]
    MissingRequired {
        /// Short name of the message ("Call").
        message: String,
        /// How the body was encoded.
        content_type: ContentType,
        /// Paths of the missing fields (`subscribe.framework_info.user`).
        fields: Vec<String>,
    },
}

fn missing_prefix(content_type: ContentType, message: &str) -> String {
    match content_type {
        ContentType::Json => format!("Failed to convert JSON into {message} protobuf"),
        ContentType::Protobuf => format!("Failed to parse body into {message} protobuf"),
    }
}

/// Decodes a body of the given encoding.
pub fn decode<T>(body: &[u8], content_type: ContentType) -> Result<T, DecodeError>
where
    T: Message + ReflectMessage + Default,
{
    match content_type {
        ContentType::Json => decode_json(body),
        ContentType::Protobuf => decode_protobuf(body),
    }
}

/// Encodes a message in the given encoding.
pub fn encode<T>(message: &T, content_type: ContentType) -> Vec<u8>
where
    T: Message + ReflectMessage,
{
    match content_type {
        ContentType::Json => encode_json(message),
        ContentType::Protobuf => message.encode_to_vec(),
    }
}

/// Decodes a protobuf body, checking required fields.
pub fn decode_protobuf<T>(body: &[u8]) -> Result<T, DecodeError>
where
    T: Message + ReflectMessage + Default,
{
    let descriptor = T::default().descriptor();
    let (plans, index) = plans_for(&descriptor);
    let name = || plans.messages[index].name.to_string();
    let message = T::decode(body).map_err(|e| DecodeError::Protobuf {
        message: name(),
        detail: e.to_string(),
    })?;
    let fields = wire::missing_required(&plans, index, body);
    if !fields.is_empty() {
        return Err(DecodeError::MissingRequired {
            message: name(),
            content_type: ContentType::Protobuf,
            fields,
        });
    }
    Ok(message)
}

/// Decodes a JSON body.
pub fn decode_json<T>(body: &[u8]) -> Result<T, DecodeError>
where
    T: Message + ReflectMessage + Default,
{
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| DecodeError::Json {
        detail: e.to_string(),
    })?;
    from_json_value(&value)
}

/// Converts a parsed JSON value into a message (Mesos' mapping).
pub fn from_json_value<T>(value: &serde_json::Value) -> Result<T, DecodeError>
where
    T: Message + ReflectMessage + Default,
{
    let descriptor = T::default().descriptor();
    let (plans, index) = plans_for(&descriptor);
    let name = || plans.messages[index].name.to_string();
    let bytes =
        json_in::encode_value(&plans, index, value).map_err(|e| DecodeError::JsonMapping {
            message: name(),
            detail: e.into_message(),
        })?;
    let fields = wire::missing_required(&plans, index, &bytes);
    if !fields.is_empty() {
        return Err(DecodeError::MissingRequired {
            message: name(),
            content_type: ContentType::Json,
            fields,
        });
    }
    T::decode(bytes.as_slice()).map_err(|e| DecodeError::JsonMapping {
        message: name(),
        detail: e.to_string(),
    })
}

/// Encodes a message as Mesos JSON.
pub fn encode_json<T>(message: &T) -> Vec<u8>
where
    T: Message + ReflectMessage,
{
    let mut out = Vec::new();
    encode_json_into(message, &mut out);
    out
}

/// Appends the Mesos JSON of a message to `out` (to reuse a buffer).
pub fn encode_json_into<T>(message: &T, out: &mut Vec<u8>)
where
    T: Message + ReflectMessage,
{
    let descriptor = message.descriptor();
    let (plans, index) = plans_for(&descriptor);
    let bytes = message.encode_to_vec();
    out.reserve(bytes.len() * 2 + 16);
    JsonWriter::new(&plans).message(index, &bytes, out);
}

/// The Mesos JSON of a message already encoded as protobuf (`bytes`, a
/// message of type `descriptor`, as the master writes OFFERS events).
pub fn encode_json_wire(descriptor: &prost_reflect::MessageDescriptor, bytes: &[u8]) -> Vec<u8> {
    let (plans, index) = plans_for(descriptor);
    let mut out = Vec::with_capacity(bytes.len() * 2 + 16);
    JsonWriter::new(&plans).message(index, bytes, &mut out);
    out
}

/// The Mesos JSON of a message as a `serde_json::Value` (for reports and
/// state endpoints that embed messages).
pub fn to_json_value<T>(message: &T) -> serde_json::Value
where
    T: Message + ReflectMessage,
{
    // The writer only produces valid JSON.
    serde_json::from_slice(&encode_json(message)).unwrap_or(serde_json::Value::Null)
}
