//! Per-message tables derived once from the descriptors: what the JSON and
//! required-field walkers need, so they never look a descriptor up per field.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use prost_reflect::{Cardinality, DescriptorPool, Kind, MessageDescriptor, Value};

use super::json_out::{write_f64, write_json_string};

/// The scalar protobuf types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    Double,
    Float,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Bool,
    String,
    Bytes,
}

/// What a field holds; enums and messages by their index in [`Plans`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum FieldKind {
    Scalar(Scalar),
    Enum(usize),
    Message(usize),
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct FieldPlan {
    pub number: u32,
    pub name: Box<str>,
    /// `"name":`, ready to copy into the output.
    pub key: Box<[u8]>,
    pub kind: FieldKind,
    pub repeated: bool,
    pub required: bool,
    /// A map field: repeated entries whose key is field 1 and value field 2.
    pub map: bool,
    /// JSON of the explicit default, written when the field is absent
    /// (stout writes unset fields that have a non-deprecated default).
    pub default_json: Option<Box<[u8]>>,
    /// Bit of this field in a message's required-field mask.
    pub required_bit: u32,
}

/// Field numbers to declaration indices.
#[derive(Debug)]
enum NumberIndex {
    /// Indexed by number; `u32::MAX` where no field has that number.
    Dense(Vec<u32>),
    /// (number, index), sorted by number.
    Sorted(Vec<(u32, u32)>),
}

/// Field numbers up to this use a dense table.
const DENSE_LIMIT: u32 = 1024;

/// One message type.
#[derive(Debug)]
pub(crate) struct MessagePlan {
    /// Short name, as in error messages ("Call").
    pub name: Box<str>,
    /// Fields in declaration order, the order stout writes them in.
    pub fields: Vec<FieldPlan>,
    numbers: NumberIndex,
    names: HashMap<Box<str>, usize>,
    /// Declaration indices of required fields.
    pub required: Vec<usize>,
    /// Declaration indices of fields written with their default when absent.
    pub defaults: Vec<usize>,
    /// Whether this message or anything it can contain has a required field.
    pub deep_required: bool,
}

impl MessagePlan {
    /// Declaration index of the field with this number.
    pub fn by_number(&self, number: u32) -> Option<usize> {
        match &self.numbers {
            NumberIndex::Dense(table) => match table.get(number as usize) {
                Some(&i) if i != u32::MAX => Some(i as usize),
                _ => None,
            },
            NumberIndex::Sorted(pairs) => pairs
                .binary_search_by_key(&number, |&(n, _)| n)
                .ok()
                .map(|at| pairs[at].1 as usize),
        }
    }

    /// Declaration index of the field with this name.
    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }
}

/// One enum type.
#[derive(Debug)]
pub(crate) struct EnumPlan {
    /// (number, `"NAME"` quoted for JSON), sorted by number.
    by_number: Vec<(i32, Box<[u8]>)>,
    by_name: HashMap<Box<str>, i32>,
    /// The first declared value: proto2's default.
    pub first: i32,
}

impl EnumPlan {
    /// The quoted JSON name of a value; `None` for a number the enum lacks.
    pub fn json_name(&self, number: i32) -> Option<&[u8]> {
        self.by_number
            .binary_search_by_key(&number, |(n, _)| *n)
            .ok()
            .map(|at| &*self.by_number[at].1)
    }

    /// The number of a value by its name.
    pub fn number(&self, name: &str) -> Option<i32> {
        self.by_name.get(name).copied()
    }
}

/// Tables for every message and enum of one descriptor pool.
#[derive(Debug)]
pub(crate) struct Plans {
    pub messages: Vec<MessagePlan>,
    pub enums: Vec<EnumPlan>,
    message_index: HashMap<Box<str>, usize>,
}

impl Plans {
    /// Tables for every message and enum of `pool`.
    pub fn build(pool: &DescriptorPool) -> Plans {
        let message_index: HashMap<Box<str>, usize> = pool
            .all_messages()
            .enumerate()
            .map(|(i, m)| (m.full_name().into(), i))
            .collect();
        let enum_index: HashMap<Box<str>, usize> = pool
            .all_enums()
            .enumerate()
            .map(|(i, e)| (e.full_name().into(), i))
            .collect();

        let enums: Vec<EnumPlan> = pool
            .all_enums()
            .map(|e| {
                let mut by_number: Vec<(i32, Box<[u8]>)> = Vec::new();
                let mut by_name = HashMap::new();
                for v in e.values() {
                    by_name.insert(v.name().into(), v.number());
                    // With aliases the first name of a number wins.
                    if !by_number.iter().any(|(n, _)| *n == v.number()) {
                        by_number.push((v.number(), quoted(v.name())));
                    }
                }
                by_number.sort_by_key(|(n, _)| *n);
                let first = e.values().next().map_or(0, |v| v.number());
                EnumPlan {
                    by_number,
                    by_name,
                    first,
                }
            })
            .collect();

        let mut messages: Vec<MessagePlan> = pool
            .all_messages()
            .map(|m| message_plan(&m, &message_index, &enum_index, &enums))
            .collect();
        mark_deep_required(&mut messages);

        Plans {
            messages,
            enums,
            message_index,
        }
    }

    /// Index of a message by its full name.
    pub fn message(&self, full_name: &str) -> Option<usize> {
        self.message_index.get(full_name).copied()
    }
}

/// The tables for a message's pool and the message's index in them. The
/// crate's own pool is built once; another pool is built on each call.
pub(crate) fn plans_for(descriptor: &MessageDescriptor) -> (Arc<Plans>, usize) {
    static OURS: OnceLock<Arc<Plans>> = OnceLock::new();
    let plans = if descriptor.parent_pool() == &*crate::DESCRIPTOR_POOL {
        Arc::clone(OURS.get_or_init(|| Arc::new(Plans::build(&crate::DESCRIPTOR_POOL))))
    } else {
        Arc::new(Plans::build(descriptor.parent_pool()))
    };
    let index = plans
        .message(descriptor.full_name())
        .expect("a message is in its own pool");
    (plans, index)
}

fn message_plan(
    message: &MessageDescriptor,
    message_index: &HashMap<Box<str>, usize>,
    enum_index: &HashMap<Box<str>, usize>,
    enums: &[EnumPlan],
) -> MessagePlan {
    let mut fields = Vec::new();
    let mut required_bits = 0;
    // The descriptor proto keeps declaration order; `fields()` is by number.
    for proto in &message.descriptor_proto().field {
        let field = message
            .get_field(proto.number() as u32)
            .expect("a declared field resolves");
        let kind = match field.kind() {
            Kind::Double => FieldKind::Scalar(Scalar::Double),
            Kind::Float => FieldKind::Scalar(Scalar::Float),
            Kind::Int32 => FieldKind::Scalar(Scalar::Int32),
            Kind::Int64 => FieldKind::Scalar(Scalar::Int64),
            Kind::Uint32 => FieldKind::Scalar(Scalar::Uint32),
            Kind::Uint64 => FieldKind::Scalar(Scalar::Uint64),
            Kind::Sint32 => FieldKind::Scalar(Scalar::Sint32),
            Kind::Sint64 => FieldKind::Scalar(Scalar::Sint64),
            Kind::Fixed32 => FieldKind::Scalar(Scalar::Fixed32),
            Kind::Fixed64 => FieldKind::Scalar(Scalar::Fixed64),
            Kind::Sfixed32 => FieldKind::Scalar(Scalar::Sfixed32),
            Kind::Sfixed64 => FieldKind::Scalar(Scalar::Sfixed64),
            Kind::Bool => FieldKind::Scalar(Scalar::Bool),
            Kind::String => FieldKind::Scalar(Scalar::String),
            Kind::Bytes => FieldKind::Scalar(Scalar::Bytes),
            Kind::Enum(e) => FieldKind::Enum(enum_index[e.full_name()]),
            Kind::Message(m) => FieldKind::Message(message_index[m.full_name()]),
        };
        let repeated = field.cardinality() == Cardinality::Repeated;
        let required = field.cardinality() == Cardinality::Required;
        let deprecated = proto.options.as_ref().is_some_and(|o| o.deprecated());
        let default_json = (!repeated && proto.default_value.is_some() && !deprecated)
            .then(|| default_json(&field.default_value(), kind, enums));
        let required_bit = if required {
            required_bits += 1;
            required_bits - 1
        } else {
            u32::MAX
        };
        let mut key = quoted(field.name()).into_vec();
        key.push(b':');
        fields.push(FieldPlan {
            number: field.number(),
            name: field.name().into(),
            key: key.into_boxed_slice(),
            kind,
            repeated,
            required,
            map: field.is_map(),
            default_json,
            required_bit,
        });
    }
    assert!(
        required_bits <= 64,
        "{} has more than 64 required fields",
        message.full_name()
    );

    let max_number = fields.iter().map(|f| f.number).max().unwrap_or(0);
    let numbers = if max_number <= DENSE_LIMIT {
        let mut table = vec![u32::MAX; max_number as usize + 1];
        for (i, f) in fields.iter().enumerate() {
            table[f.number as usize] = i as u32;
        }
        NumberIndex::Dense(table)
    } else {
        let mut pairs: Vec<(u32, u32)> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.number, i as u32))
            .collect();
        pairs.sort_unstable();
        NumberIndex::Sorted(pairs)
    };
    let names = fields
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.clone(), i))
        .collect();
    let required = (0..fields.len()).filter(|&i| fields[i].required).collect();
    let defaults = (0..fields.len())
        .filter(|&i| fields[i].default_json.is_some())
        .collect();

    MessagePlan {
        name: message.name().into(),
        fields,
        numbers,
        names,
        required,
        defaults,
        deep_required: false,
    }
}

/// Marks messages that have, or can contain, a required field (a fixpoint:
/// message types may be recursive).
fn mark_deep_required(messages: &mut [MessagePlan]) {
    for m in messages.iter_mut() {
        m.deep_required = !m.required.is_empty();
    }
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..messages.len() {
            if messages[i].deep_required {
                continue;
            }
            let reaches = messages[i].fields.iter().any(|f| match f.kind {
                FieldKind::Message(m) => messages[m].deep_required,
                _ => false,
            });
            if reaches {
                messages[i].deep_required = true;
                changed = true;
            }
        }
    }
}

/// `"text"` as JSON.
fn quoted(text: &str) -> Box<[u8]> {
    let mut out = Vec::with_capacity(text.len() + 2);
    write_json_string(&mut out, text.as_bytes());
    out.into_boxed_slice()
}

/// The JSON of a field's default value.
fn default_json(value: &Value, kind: FieldKind, enums: &[EnumPlan]) -> Box<[u8]> {
    let mut out = Vec::new();
    match value {
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::I32(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Value::I64(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Value::U32(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Value::U64(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Value::F32(x) => write_f64(&mut out, f64::from(*x)),
        Value::F64(x) => write_f64(&mut out, *x),
        Value::String(s) => write_json_string(&mut out, s.as_bytes()),
        Value::Bytes(b) => {
            out.push(b'"');
            super::base64::encode_into(&mut out, b);
            out.push(b'"');
        }
        Value::EnumNumber(n) => match kind {
            FieldKind::Enum(e) => match enums[e].json_name(*n) {
                Some(name) => out.extend_from_slice(name),
                None => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
            },
            _ => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        },
        // Messages, lists and maps have no explicit defaults.
        Value::Message(_) | Value::List(_) | Value::Map(_) => out.extend_from_slice(b"null"),
    }
    out.into_boxed_slice()
}
