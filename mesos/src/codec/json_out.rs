//! Protobuf wire bytes to JSON text, the way stout's `jsonify` writes a
//! message: keys are field names in declaration order, set fields and
//! non-empty repeated fields only, plus unset fields that have an explicit
//! non-deprecated default (written with that default); enums by name, bytes
//! in base64, 64-bit integers as numbers, maps as objects.
//!
//! Walking the bytes prost wrote, rather than a dynamic message, keeps the
//! event path at one encode and one pass.

use super::plan::{FieldKind, FieldPlan, MessagePlan, Plans, Scalar};
use super::wire::{
    Reader, WireValue, fits, packable, packed_element, put_len, put_tag, put_varint,
};

/// One field occurrence of the message being written.
#[derive(Debug, Clone, Copy)]
struct Occurrence {
    /// Declaration index of the field.
    field: u32,
    /// Position on the wire, to keep repeated elements in order.
    seq: u32,
    value: WireValue,
}

/// Writes messages; the scratch list is shared by all nesting levels.
pub(crate) struct JsonWriter<'p> {
    plans: &'p Plans,
    scratch: Vec<Occurrence>,
}

impl<'p> JsonWriter<'p> {
    pub fn new(plans: &'p Plans) -> Self {
        JsonWriter {
            plans,
            scratch: Vec::with_capacity(32),
        }
    }

    /// Appends the JSON object of the message `message` encoded in `data`.
    pub fn message(&mut self, message: usize, data: &[u8], out: &mut Vec<u8>) {
        let plans = self.plans;
        let plan = &plans.messages[message];
        let start = self.scratch.len();
        let mut reader = Reader::new(data);
        while let Some((number, value)) = reader.next_field() {
            if let Some(field) = plan.by_number(number) {
                let seq = (self.scratch.len() - start) as u32;
                self.scratch.push(Occurrence {
                    field: field as u32,
                    seq,
                    value,
                });
            }
        }
        let end = self.scratch.len();
        let run = &mut self.scratch[start..end];
        // prost writes by field number; stout by declaration order.
        if !run.is_sorted_by_key(|o| o.field) {
            run.sort_unstable_by_key(|o| (o.field, o.seq));
        }

        out.push(b'{');
        let mut first = true;
        let mut defaults = plan.defaults.iter().copied().peekable();
        let mut at = start;
        while at < end {
            let field = self.scratch[at].field as usize;
            let mut next = at + 1;
            while next < end && self.scratch[next].field as usize == field {
                next += 1;
            }
            while let Some(d) = defaults.next_if(|&d| d <= field) {
                if d < field {
                    write_default(&plan.fields[d], out, &mut first);
                }
            }
            self.field(plan, field, at, next, data, out, &mut first);
            at = next;
        }
        for d in defaults {
            write_default(&plan.fields[d], out, &mut first);
        }
        out.push(b'}');
        self.scratch.truncate(start);
    }

    /// Writes the occurrences `at..next` of one field.
    #[allow(clippy::too_many_arguments)]
    fn field(
        &mut self,
        plan: &MessagePlan,
        index: usize,
        at: usize,
        next: usize,
        data: &[u8],
        out: &mut Vec<u8>,
        first: &mut bool,
    ) {
        let field = &plan.fields[index];
        if field.map {
            self.map(field, at, next, data, out, first);
        } else if field.repeated {
            let mark = out.len();
            let was_first = *first;
            write_key(field, out, first);
            out.push(b'[');
            let mut elements = 0;
            for i in at..next {
                let value = self.scratch[i].value;
                if let (true, WireValue::Len(s, e)) = (packable(field.kind), value) {
                    let mut packed = Reader::new(&data[s..e]);
                    while let Some(v) = packed_element(&mut packed, field.kind) {
                        elements += self.element(field.kind, v, data, out, elements);
                    }
                } else {
                    elements += self.element(field.kind, value, data, out, elements);
                }
            }
            if elements == 0 {
                // Nothing writable (say, only unknown enum numbers): no field.
                out.truncate(mark);
                *first = was_first;
            } else {
                out.push(b']');
            }
        } else if let FieldKind::Message(sub) = field.kind {
            let payload = |o: &Occurrence| match o.value {
                WireValue::Len(s, e) => Some(&data[s..e]),
                _ => None,
            };
            let count = self.scratch[at..next].iter().filter_map(payload).count();
            if count == 1 {
                let bytes = self.scratch[at..next]
                    .iter()
                    .find_map(payload)
                    .unwrap_or(&[]);
                write_key(field, out, first);
                self.message(sub, bytes, out);
            } else if count > 1 {
                // A singular message seen more than once is the merge.
                let merged: Vec<u8> = self.scratch[at..next]
                    .iter()
                    .filter_map(payload)
                    .flatten()
                    .copied()
                    .collect();
                write_key(field, out, first);
                self.message(sub, &merged, out);
            }
        } else {
            // Last one wins for a singular scalar.
            let last = (at..next)
                .rev()
                .map(|i| self.scratch[i].value)
                .find(|&v| fits(field.kind, v) && self.known(field.kind, v));
            if let Some(value) = last {
                write_key(field, out, first);
                self.value(field.kind, value, data, out);
            }
        }
    }

    /// Writes one array element (with its comma); returns 1 if written.
    fn element(
        &mut self,
        kind: FieldKind,
        value: WireValue,
        data: &[u8],
        out: &mut Vec<u8>,
        written: usize,
    ) -> usize {
        if !fits(kind, value) || !self.known(kind, value) {
            return 0;
        }
        if written > 0 {
            out.push(b',');
        }
        self.value(kind, value, data, out);
        1
    }

    /// False for an enum number the enum does not define (protobuf keeps
    /// those as unknown fields, so stout never writes them).
    fn known(&self, kind: FieldKind, value: WireValue) -> bool {
        match (kind, value) {
            (FieldKind::Enum(e), WireValue::Varint(v)) => {
                self.plans.enums[e].json_name(v as i32).is_some()
            }
            _ => true,
        }
    }

    /// Writes a value that [`fits`] its kind.
    fn value(&mut self, kind: FieldKind, value: WireValue, data: &[u8], out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        match (kind, value) {
            (FieldKind::Message(sub), WireValue::Len(s, e)) => self.message(sub, &data[s..e], out),
            (FieldKind::Enum(e), WireValue::Varint(v)) => {
                if let Some(name) = self.plans.enums[e].json_name(v as i32) {
                    out.extend_from_slice(name);
                }
            }
            (FieldKind::Scalar(s), v) => {
                let text: &str = match (s, v) {
                    (Scalar::Int32, WireValue::Varint(v)) => digits.format(v as i32),
                    (Scalar::Int64, WireValue::Varint(v)) => digits.format(v as i64),
                    (Scalar::Uint32, WireValue::Varint(v)) => digits.format(v as u32),
                    (Scalar::Uint64, WireValue::Varint(v)) => digits.format(v),
                    (Scalar::Sint32, WireValue::Varint(v)) => {
                        let v = v as u32;
                        digits.format(((v >> 1) as i32) ^ -((v & 1) as i32))
                    }
                    (Scalar::Sint64, WireValue::Varint(v)) => {
                        digits.format(((v >> 1) as i64) ^ -((v & 1) as i64))
                    }
                    (Scalar::Bool, WireValue::Varint(v)) => {
                        if v != 0 {
                            "true"
                        } else {
                            "false"
                        }
                    }
                    (Scalar::Fixed32, WireValue::Fixed32(v)) => digits.format(v),
                    (Scalar::Sfixed32, WireValue::Fixed32(v)) => digits.format(v as i32),
                    (Scalar::Fixed64, WireValue::Fixed64(v)) => digits.format(v),
                    (Scalar::Sfixed64, WireValue::Fixed64(v)) => digits.format(v as i64),
                    (Scalar::Float, WireValue::Fixed32(v)) => {
                        write_f64(out, f64::from(f32::from_bits(v)));
                        return;
                    }
                    (Scalar::Double, WireValue::Fixed64(v)) => {
                        write_f64(out, f64::from_bits(v));
                        return;
                    }
                    (Scalar::String, WireValue::Len(s, e)) => {
                        write_json_string(out, &data[s..e]);
                        return;
                    }
                    (Scalar::Bytes, WireValue::Len(s, e)) => {
                        out.push(b'"');
                        super::base64::encode_into(out, &data[s..e]);
                        out.push(b'"');
                        return;
                    }
                    _ => return,
                };
                out.extend_from_slice(text.as_bytes());
            }
            _ => {}
        }
    }

    /// A map field as one JSON object keyed by the entries' keys.
    fn map(
        &mut self,
        field: &FieldPlan,
        at: usize,
        next: usize,
        data: &[u8],
        out: &mut Vec<u8>,
        first: &mut bool,
    ) {
        let plans = self.plans;
        let FieldKind::Message(entry) = field.kind else {
            return;
        };
        let entry_plan = &plans.messages[entry];
        let (Some(key_index), Some(value_index)) =
            (entry_plan.by_number(1), entry_plan.by_number(2))
        else {
            return;
        };
        let key_kind = entry_plan.fields[key_index].kind;
        let value_kind = entry_plan.fields[value_index].kind;
        write_key(field, out, first);
        out.push(b'{');
        let mut written = 0;
        for i in at..next {
            let WireValue::Len(s, e) = self.scratch[i].value else {
                continue;
            };
            let entry_data = &data[s..e];
            let (mut key, mut value) = (None, None);
            let mut reader = Reader::new(entry_data);
            while let Some((number, v)) = reader.next_field() {
                match number {
                    1 if fits(key_kind, v) => key = Some(v),
                    2 if fits(value_kind, v) => value = Some(v),
                    _ => {}
                }
            }
            if written > 0 {
                out.push(b',');
            }
            written += 1;
            write_map_key(key_kind, key, entry_data, out);
            out.push(b':');
            match value {
                Some(v) if self.known(value_kind, v) => self.value(value_kind, v, entry_data, out),
                _ => self.zero(value_kind, out),
            }
        }
        out.push(b'}');
    }

    /// The value of an unset map value: the type's default. prost leaves a
    /// map entry's value out when it equals its type's default, and a
    /// message's default holds its required fields (at zero), so they are
    /// written: `{"cpus": {"value": 0.0}}`, not `{"cpus": {}}`, which would
    /// not decode.
    fn zero(&mut self, kind: FieldKind, out: &mut Vec<u8>) {
        match kind {
            FieldKind::Message(sub) => {
                let mut wire = Vec::new();
                required_zeros(self.plans, sub, &mut wire, 0);
                self.message(sub, &wire, out);
            }
            FieldKind::Enum(e) => {
                let plans = self.plans;
                let first = plans.enums[e].first;
                match plans.enums[e].json_name(first) {
                    Some(name) => out.extend_from_slice(name),
                    None => out.extend_from_slice(b"0"),
                }
            }
            FieldKind::Scalar(Scalar::String | Scalar::Bytes) => out.extend_from_slice(b"\"\""),
            FieldKind::Scalar(Scalar::Bool) => out.extend_from_slice(b"false"),
            FieldKind::Scalar(Scalar::Double | Scalar::Float) => out.extend_from_slice(b"0.0"),
            FieldKind::Scalar(_) => out.extend_from_slice(b"0"),
        }
    }
}

/// The wire form of a message's required fields at their zero values (a
/// required message field holding its own), as prost encodes a default
/// message. `depth` bounds a (never declared) cycle of required messages.
fn required_zeros(plans: &Plans, message: usize, out: &mut Vec<u8>, depth: usize) {
    if depth > 32 {
        return;
    }
    let plan = &plans.messages[message];
    for &i in &plan.required {
        let field = &plan.fields[i];
        let n = field.number;
        match field.kind {
            FieldKind::Scalar(Scalar::Double | Scalar::Fixed64 | Scalar::Sfixed64) => {
                put_tag(out, n, 1);
                out.extend_from_slice(&[0; 8]);
            }
            FieldKind::Scalar(Scalar::Float | Scalar::Fixed32 | Scalar::Sfixed32) => {
                put_tag(out, n, 5);
                out.extend_from_slice(&[0; 4]);
            }
            FieldKind::Scalar(Scalar::String | Scalar::Bytes) => put_len(out, n, &[]),
            FieldKind::Scalar(_) => {
                put_tag(out, n, 0);
                put_varint(out, 0);
            }
            FieldKind::Enum(e) => {
                put_tag(out, n, 0);
                put_varint(out, plans.enums[e].first as i64 as u64);
            }
            FieldKind::Message(sub) => {
                let mut inner = Vec::new();
                required_zeros(plans, sub, &mut inner, depth + 1);
                put_len(out, n, &inner);
            }
        }
    }
}

fn write_key(field: &FieldPlan, out: &mut Vec<u8>, first: &mut bool) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.extend_from_slice(&field.key);
}

fn write_default(field: &FieldPlan, out: &mut Vec<u8>, first: &mut bool) {
    if let Some(default) = &field.default_json {
        write_key(field, out, first);
        out.extend_from_slice(default);
    }
}

/// A map key as a JSON object key: strings as they are, numbers and bools
/// as their text.
fn write_map_key(kind: FieldKind, key: Option<WireValue>, data: &[u8], out: &mut Vec<u8>) {
    match (kind, key) {
        (FieldKind::Scalar(Scalar::String), Some(WireValue::Len(s, e))) => {
            write_json_string(out, &data[s..e]);
        }
        (FieldKind::Scalar(Scalar::String), _) => out.extend_from_slice(b"\"\""),
        (FieldKind::Scalar(Scalar::Bool), v) => out.extend_from_slice(match v {
            Some(WireValue::Varint(n)) if n != 0 => b"\"true\"",
            _ => b"\"false\"",
        }),
        (FieldKind::Scalar(s), v) => {
            let mut digits = itoa::Buffer::new();
            let text = match (s, v) {
                (Scalar::Int32, Some(WireValue::Varint(n))) => digits.format(n as i32),
                (Scalar::Int64, Some(WireValue::Varint(n))) => digits.format(n as i64),
                (Scalar::Uint32, Some(WireValue::Varint(n))) => digits.format(n as u32),
                (Scalar::Uint64, Some(WireValue::Varint(n))) => digits.format(n),
                (Scalar::Sint32, Some(WireValue::Varint(n))) => {
                    let n = n as u32;
                    digits.format(((n >> 1) as i32) ^ -((n & 1) as i32))
                }
                (Scalar::Sint64, Some(WireValue::Varint(n))) => {
                    digits.format(((n >> 1) as i64) ^ -((n & 1) as i64))
                }
                (Scalar::Fixed32, Some(WireValue::Fixed32(n))) => digits.format(n),
                (Scalar::Sfixed32, Some(WireValue::Fixed32(n))) => digits.format(n as i32),
                (Scalar::Fixed64, Some(WireValue::Fixed64(n))) => digits.format(n),
                (Scalar::Sfixed64, Some(WireValue::Fixed64(n))) => digits.format(n as i64),
                _ => "0",
            };
            out.push(b'"');
            out.extend_from_slice(text.as_bytes());
            out.push(b'"');
        }
        // Map keys cannot be messages, enums, floats or bytes.
        _ => out.extend_from_slice(b"\"\""),
    }
}

/// A double as JSON: shortest round-trip text for finite values; the
/// non-finite ones as the strings stout's parser reads back ("Infinity",
/// "-Infinity"; "NaN" for symmetry).
pub(crate) fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &value);
    } else if value.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if value > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

/// Bytes that need escaping inside a JSON string, with their short escape
/// (`u` for `\u00XX`).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        table[c] = b'u';
        c += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `text` as a quoted JSON string (escaping quotes, backslashes and
/// control characters; everything else is copied as it is).
pub(crate) fn write_json_string(out: &mut Vec<u8>, text: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &byte) in text.iter().enumerate() {
        let escape = ESCAPE[byte as usize];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&text[start..i]);
        if escape == b'u' {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(byte >> 4) as usize],
                HEX[(byte & 0xf) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}
