//! Reading and writing the protobuf wire format directly, for the JSON
//! walkers and the required-field check (prost decodes without checking
//! `required`).

use std::fmt::Write as _;

use super::plan::{FieldKind, Plans, Scalar};

/// One field value as it sits on the wire. Length-delimited payloads are
/// byte ranges into the message being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(usize, usize),
    /// A proto2 group; skipped.
    Group,
}

/// Reads the fields of one message. Stops (returns `None`) at the end or at
/// malformed data: what was read so far stands, as with a truncated message.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.data.get(self.pos)?;
            self.pos += 1;
            if shift < 64 {
                value |= u64::from(byte & 0x7f) << shift;
            }
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    pub fn fixed32(&mut self) -> Option<u32> {
        let bytes = self.data.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    pub fn fixed64(&mut self) -> Option<u64> {
        let bytes = self.data.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The next field: its number and value.
    pub fn next_field(&mut self) -> Option<(u32, WireValue)> {
        if self.pos >= self.data.len() {
            return None;
        }
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3).ok().filter(|&n| n > 0)?;
        let value = self.value((tag & 7) as u8, number)?;
        Some((number, value))
    }

    fn value(&mut self, wire_type: u8, number: u32) -> Option<WireValue> {
        Some(match wire_type {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(self.fixed64()?),
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                let start = self.pos;
                let end = start.checked_add(len).filter(|&e| e <= self.data.len())?;
                self.pos = end;
                WireValue::Len(start, end)
            }
            3 => {
                self.skip_group(number)?;
                WireValue::Group
            }
            5 => WireValue::Fixed32(self.fixed32()?),
            _ => return None,
        })
    }

    /// Skips to the end-group tag matching `number`.
    fn skip_group(&mut self, number: u32) -> Option<()> {
        loop {
            let tag = self.varint()?;
            let (inner, wire_type) = (u32::try_from(tag >> 3).ok()?, (tag & 7) as u8);
            if wire_type == 4 {
                return (inner == number).then_some(());
            }
            self.value(wire_type, inner)?;
        }
    }
}

/// Whether a wire value can be a value of this field kind, unpacked.
pub(crate) fn fits(kind: FieldKind, value: WireValue) -> bool {
    use Scalar::*;
    match (kind, value) {
        (FieldKind::Message(_), WireValue::Len(..)) => true,
        (FieldKind::Enum(_), WireValue::Varint(_)) => true,
        (FieldKind::Scalar(s), v) => matches!(
            (s, v),
            (
                Int32 | Int64 | Uint32 | Uint64 | Sint32 | Sint64 | Bool,
                WireValue::Varint(_)
            ) | (Fixed64 | Sfixed64 | Double, WireValue::Fixed64(_))
                | (Fixed32 | Sfixed32 | Float, WireValue::Fixed32(_))
                | (String | Bytes, WireValue::Len(..))
        ),
        _ => false,
    }
}

/// Whether a repeated field of this kind may come packed (in one
/// length-delimited run).
pub(crate) fn packable(kind: FieldKind) -> bool {
    match kind {
        FieldKind::Enum(_) => true,
        FieldKind::Scalar(s) => !matches!(s, Scalar::String | Scalar::Bytes),
        FieldKind::Message(_) => false,
    }
}

/// Reads one unpacked element of a packed run.
pub(crate) fn packed_element(reader: &mut Reader<'_>, kind: FieldKind) -> Option<WireValue> {
    use Scalar::*;
    match kind {
        FieldKind::Scalar(Fixed64 | Sfixed64 | Double) => reader.fixed64().map(WireValue::Fixed64),
        FieldKind::Scalar(Fixed32 | Sfixed32 | Float) => reader.fixed32().map(WireValue::Fixed32),
        _ => reader.varint().map(WireValue::Varint),
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub(crate) fn put_len(out: &mut Vec<u8>, number: u32, payload: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Paths of the required fields missing from an encoded message, as
/// protobuf's initialization check names them (`a.b`, `list[2].c`): the
/// message's own fields in declaration order, then its sub-messages by field
/// number.
pub(crate) fn missing_required(plans: &Plans, message: usize, data: &[u8]) -> Vec<String> {
    let mut missing = Vec::new();
    let mut prefix = String::new();
    walk_required(plans, message, data, &mut prefix, &mut missing);
    missing
}

fn walk_required(
    plans: &Plans,
    message: usize,
    data: &[u8],
    prefix: &mut String,
    missing: &mut Vec<String>,
) {
    let plan = &plans.messages[message];
    if !plan.deep_required {
        return;
    }
    let mut seen = 0u64;
    // (field index, payload range) of sub-messages that may miss something.
    let mut children: Vec<(usize, usize, usize)> = Vec::new();
    let mut reader = Reader::new(data);
    while let Some((number, value)) = reader.next_field() {
        let Some(index) = plan.by_number(number) else {
            continue;
        };
        let field = &plan.fields[index];
        if !(fits(field.kind, value) || field.repeated && packable(field.kind)) {
            continue;
        }
        if field.required {
            seen |= 1 << field.required_bit;
        }
        if let (FieldKind::Message(m), WireValue::Len(start, end)) = (field.kind, value)
            && plans.messages[m].deep_required
        {
            children.push((index, start, end));
        }
    }
    for &index in &plan.required {
        let field = &plan.fields[index];
        if seen & (1 << field.required_bit) == 0 {
            missing.push(format!("{prefix}{}", field.name));
        }
    }
    children.sort_by_key(|&(index, _, _)| plan.fields[index].number);
    let mut at = 0;
    while at < children.len() {
        let index = children[at].0;
        let run = children[at..].iter().take_while(|c| c.0 == index).count();
        let field = &plan.fields[index];
        let FieldKind::Message(sub) = field.kind else {
            unreachable!("only message fields are collected")
        };
        let base = prefix.len();
        if field.repeated {
            for (i, &(_, start, end)) in children[at..at + run].iter().enumerate() {
                let _ = write!(prefix, "{}[{i}].", field.name);
                walk_required(plans, sub, &data[start..end], prefix, missing);
                prefix.truncate(base);
            }
        } else {
            prefix.push_str(&field.name);
            prefix.push('.');
            if run == 1 {
                let (_, start, end) = children[at];
                walk_required(plans, sub, &data[start..end], prefix, missing);
            } else {
                // Repeated occurrences of a singular message merge.
                let merged: Vec<u8> = children[at..at + run]
                    .iter()
                    .flat_map(|&(_, start, end)| data[start..end].iter().copied())
                    .collect();
                walk_required(plans, sub, &merged, prefix, missing);
            }
            prefix.truncate(base);
        }
        at += run;
    }
}
