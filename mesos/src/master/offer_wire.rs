//! OFFERS events written as protobuf straight from the master's books.
//!
//! An allocation run makes thousands of offers. Building a `v1::Offer` for
//! each (a dozen owned strings and a copy of every resource) was most of the
//! master's work per offer, then freed by whoever read the event. Instead,
//! each framework's OFFERS event of a run is one buffer: every offer is
//! encoded into it as it is made, from borrowed ids and the books' own
//! resources, with the bytes prost would write for the same `v1::Offer`
//! (fields in tag order; a test pins this byte for byte). The event goes
//! down the stream as [`StreamEvent::Encoded`](super::stream::StreamEvent)
//! (`StreamEvent::offers`, with the number of offers written).

use bytes::Bytes;
use prost::encoding::{encoded_len_varint, message};

use super::plain::PlainScalar;
use crate::v1;

/// Room kept at the front of a body for the event's header (type, and the
/// `offers` field's key and length).
const HEADER_ROOM: usize = 16;

/// What one offer of an OFFERS event shows, borrowed from the books.
pub(super) struct OfferView<'a, R> {
    /// Offer id.
    pub id: &'a str,
    /// Framework id.
    pub framework: &'a str,
    /// Agent id.
    pub agent: &'a str,
    /// The agent's hostname.
    pub hostname: &'a str,
    /// What it offers (allocated to `role`).
    pub resources: R,
    /// The framework's executors on the agent.
    pub executor_ids: &'a [&'a str],
    /// The agent's attributes.
    pub attributes: &'a [v1::Attribute],
    /// Where the agent is reached: its URL as field 8 of an offer, encoded
    /// ([`url_field`]; empty for none).
    pub url: &'a [u8],
    /// The role it is allocated to.
    pub role: &'a str,
}

/// An agent's URL as field 8 of an offer (`Offer.url`), encoded once when
/// the agent joins and copied into each of its offers: Mesos sets it on
/// every offer, and frameworks read it (mesos-framework takes the agent's
/// address from `offer.url.address.ip`).
pub(super) fn url_field(url: &v1::Url) -> Box<[u8]> {
    let mut field = Vec::with_capacity(message::encoded_len(8, url));
    message::encode(8, url, &mut field);
    field.into_boxed_slice()
}

/// One resource of an offer, written allocated to the offer's role.
#[derive(Clone, Copy)]
pub(super) enum WireResource<'a> {
    /// An entry of the books: an offer keeps its resources unallocated,
    /// beside its role (`Offer::resources`).
    Entry(&'a v1::Resource),
    /// A plain scalar of an agent's brief (`plain.rs`), allocated to the
    /// offer's role: written as the entry it stands for would be.
    Plain(&'a PlainScalar),
}

/// The resources of the last offer written into one OFFERS body from an
/// agent's plain scalars: what they were (role, names, values) and where
/// their bytes are. A cluster's agents are mostly alike, so the body's next
/// offer (the same framework, mostly the same role) usually shows the same
/// scalars: their bytes are copied, not written field by field again.
#[derive(Debug, Default)]
pub(super) struct PlainMemo {
    /// Inline: compared at every offer of the body, a string of its own
    /// was a line of memory to wait for each time (roles are short).
    role: smallvec::SmallVec<[u8; 32]>,
    scalars: smallvec::SmallVec<[(&'static str, u64); 4]>,
    /// Where in the body; empty: nothing remembered.
    bytes: std::ops::Range<usize>,
}

impl PlainMemo {
    /// True when `resources` in `role` are the scalars remembered.
    fn matches<'r>(&self, resources: impl Iterator<Item = WireResource<'r>>, role: &str) -> bool {
        if self.bytes.is_empty() || self.role[..] != *role.as_bytes() {
            return false;
        }
        let mut n = 0;
        for r in resources {
            let WireResource::Plain(p) = r else {
                return false;
            };
            match self.scalars.get(n) {
                Some(&(name, bits)) if name == p.name && bits == p.value.to_bits() => n += 1,
                _ => return false,
            }
        }
        n == self.scalars.len()
    }

    /// Remembers `resources` in `role`, written at `bytes` of the body,
    /// when they are all plain scalars; forgets otherwise.
    fn record<'r>(
        &mut self,
        resources: impl Iterator<Item = WireResource<'r>>,
        role: &str,
        bytes: std::ops::Range<usize>,
    ) {
        self.scalars.clear();
        for r in resources {
            let WireResource::Plain(p) = r else {
                self.bytes = 0..0;
                return;
            };
            self.scalars.push((p.name, p.value.to_bits()));
        }
        self.role.clear();
        self.role.extend_from_slice(role.as_bytes());
        self.bytes = bytes;
    }
}

/// An empty body of an OFFERS event, with room for its header.
pub(super) fn new_body(capacity: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(HEADER_ROOM + capacity);
    body.extend_from_slice(&[0; HEADER_ROOM]);
    body
}

// Every field written here has a tag below 16: its key is one byte,
// `tag << 3 | wire type`.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH_DELIMITED: u8 = 2;

fn key(tag: u8, wire: u8) -> u8 {
    (tag << 3) | wire
}

/// Writes into room made ahead (the lengths are computed first, so the
/// writes need no capacity checks).
struct Writer<'b> {
    out: &'b mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn byte(&mut self, b: u8) {
        self.out[self.at] = b;
        self.at += 1;
    }

    fn bytes(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    fn string(&mut self, tag: u8, s: &str) {
        let s = s.as_bytes();
        // Ids, names and roles are short: a one-byte length, the field
        // written in one slice.
        if let Ok(len @ 0..0x80) = u8::try_from(s.len()) {
            let out = &mut self.out[self.at..self.at + 2 + s.len()];
            out[0] = key(tag, LENGTH_DELIMITED);
            out[1] = len;
            out[2..].copy_from_slice(s);
            self.at += 2 + s.len();
            return;
        }
        self.byte(key(tag, LENGTH_DELIMITED));
        self.varint(s.len() as u64);
        self.bytes(s);
    }

    /// Field `tag` holding a message whose one field (1) is `s`.
    fn wrapped(&mut self, tag: u8, s: &str) {
        let s = s.as_bytes();
        if let Ok(len @ 0..0x7e) = u8::try_from(s.len()) {
            let out = &mut self.out[self.at..self.at + 4 + s.len()];
            out[..4].copy_from_slice(&[
                key(tag, LENGTH_DELIMITED),
                len + 2,
                key(1, LENGTH_DELIMITED),
                len,
            ]);
            out[4..].copy_from_slice(s);
            self.at += 4 + s.len();
            return;
        }
        self.byte(key(tag, LENGTH_DELIMITED));
        self.varint(field_len(s.len()) as u64);
        self.byte(key(1, LENGTH_DELIMITED));
        self.varint(s.len() as u64);
        self.bytes(s);
    }

    /// A message field, by prost.
    fn message(&mut self, tag: u32, m: &impl prost::Message) {
        let mut rest = &mut self.out[self.at..];
        let before = rest.len();
        message::encode(tag, m, &mut rest);
        self.at += before - rest.len();
    }

    /// A resource as field 5 of an offer allocated to `role`, as prost
    /// writes it.
    fn resource(&mut self, r: WireResource<'_>, role: &str) {
        match r {
            WireResource::Plain(p) => self.plain(p.name, p.value, role),
            WireResource::Entry(r) => match plain_scalar(r) {
                Some(value) => self.plain(&r.name, value, role),
                None => self.message(5, &allocated(r, role)),
            },
        }
    }

    /// A plain scalar as field 5: name (1), type (2), scalar (3, a double
    /// at 1) and allocation info (11, its role at 1).
    fn plain(&mut self, name: &str, value: f64, role: &str) {
        self.byte(key(5, LENGTH_DELIMITED));
        self.varint(plain_scalar_len(name, role) as u64);
        self.string(1, name);
        self.bytes(&[
            key(2, VARINT),
            v1::value::Type::Scalar as u8,
            key(3, LENGTH_DELIMITED),
            9,
            key(1, FIXED64),
        ]);
        self.bytes(&value.to_le_bytes());
        self.byte(key(11, LENGTH_DELIMITED));
        self.varint(field_len(role.len()) as u64);
        self.string(1, role);
    }
}

/// A varint pushed onto a buffer.
fn put_varint(mut v: u64, buf: &mut Vec<u8>) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Length of a length-delimited field holding `len` bytes.
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// Length of field `tag` holding a message whose one field (1) is `s`
/// (`OfferID`, `FrameworkID`, `AgentID`, `ExecutorID`, `AllocationInfo`).
fn wrapped_len(s: &str) -> usize {
    field_len(field_len(s.len()))
}

/// A scalar with nothing but a name (and perhaps an allocation, which the
/// offer's role replaces): an agent's plain cpus or mem. Its value, else
/// `None`.
fn plain_scalar(r: &v1::Resource) -> Option<f64> {
    if !super::plain::is_plain_scalar(r) {
        return None;
    }
    Some(r.scalar.as_ref()?.value)
}

/// An entry as the offer carries it: allocated to `role`.
fn allocated(r: &v1::Resource, role: &str) -> v1::Resource {
    v1::Resource {
        allocation_info: Some(v1::resource::AllocationInfo {
            role: Some(role.to_string()),
        }),
        ..r.clone()
    }
}

/// The body length of a plain scalar resource: name (1), type (2),
/// scalar (3, a double at 1) and allocation info (11, its role at 1).
fn plain_scalar_len(name: &str, role: &str) -> usize {
    field_len(name.len()) + 2 + field_len(9) + wrapped_len(role)
}

/// Length of a resource as field 5 of an offer allocated to `role`.
fn resource_len(r: WireResource<'_>, role: &str) -> usize {
    match r {
        WireResource::Plain(p) => field_len(plain_scalar_len(p.name, role)),
        WireResource::Entry(r) => match plain_scalar(r) {
            Some(_) => field_len(plain_scalar_len(&r.name, role)),
            // An unallocated entry gains its allocation (field 11).
            None if r.allocation_info.is_none() => {
                field_len(prost::Message::encoded_len(r) + wrapped_len(role))
            }
            None => message::encoded_len(5, &allocated(r, role)),
        },
    }
}

/// Appends one offer (field 1 of `Event.Offers`) to an OFFERS body; with a
/// `memo`, copies the resources' bytes of an earlier offer of the body when
/// the memo says they are the same. Inlined into its one caller (an
/// offer's last step, once per lease of a run): left to the compiler, it
/// was inlined or not as unrelated code moved between codegen units, and
/// the call cost 44 instructions an offer when it was not.
#[inline(always)]
pub(super) fn push_offer<'r, R>(
    body: &mut Vec<u8>,
    offer: &OfferView<'_, R>,
    memo: Option<&mut PlainMemo>,
) where
    R: Iterator<Item = WireResource<'r>> + Clone,
{
    let same = memo.as_deref().and_then(|m| {
        m.matches(offer.resources.clone(), offer.role)
            .then(|| m.bytes.clone())
    });
    let resources_len: usize = match &same {
        Some(bytes) => bytes.len(),
        None => offer
            .resources
            .clone()
            .map(|r| resource_len(r, offer.role))
            .sum(),
    };
    let len = wrapped_len(offer.id)
        + wrapped_len(offer.framework)
        + wrapped_len(offer.agent)
        + field_len(offer.hostname.len())
        + resources_len
        + offer
            .executor_ids
            .iter()
            .map(|e| wrapped_len(e))
            .sum::<usize>()
        + offer
            .attributes
            .iter()
            .map(|a| message::encoded_len(7, a))
            .sum::<usize>()
        + offer.url.len()
        + wrapped_len(offer.role);
    let start = body.len();
    body.resize(start + field_len(len), 0);
    let (before, after) = body.split_at_mut(start);
    let mut w = Writer { out: after, at: 0 };
    w.byte(key(1, LENGTH_DELIMITED));
    w.varint(len as u64);
    w.wrapped(1, offer.id);
    w.wrapped(2, offer.framework);
    w.wrapped(3, offer.agent);
    w.string(4, offer.hostname);
    let resources_at = start + w.at;
    match same {
        Some(bytes) => w.bytes(&before[bytes]),
        None => {
            for r in offer.resources.clone() {
                w.resource(r, offer.role);
            }
            if let Some(m) = memo {
                m.record(
                    offer.resources.clone(),
                    offer.role,
                    resources_at..start + w.at,
                );
            }
        }
    }
    for e in offer.executor_ids {
        w.wrapped(6, e);
    }
    for a in offer.attributes {
        w.message(7, a);
    }
    w.bytes(offer.url);
    w.wrapped(10, offer.role);
    debug_assert_eq!(w.at, w.out.len(), "an offer's length as computed");
}

/// The OFFERS event of a body made by [`new_body`] and [`push_offer`]: an
/// `Event` of type OFFERS whose `offers` holds them, as prost encodes it.
pub(super) fn offers_event(mut body: Vec<u8>) -> Bytes {
    let len = (body.len() - HEADER_ROOM) as u64;
    let mut header = Vec::with_capacity(HEADER_ROOM);
    header.push(key(1, VARINT));
    put_varint(v1::scheduler::event::Type::Offers as u64, &mut header);
    header.push(key(3, LENGTH_DELIMITED));
    put_varint(len, &mut header);
    let start = HEADER_ROOM - header.len();
    body[start..HEADER_ROOM].copy_from_slice(&header);
    Bytes::from(body).slice(start..)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::resources::Resources;
    use crate::v1::scheduler::{Event, event};

    type Items<'a> = std::iter::Copied<std::slice::Iter<'a, WireResource<'a>>>;

    /// The resource an item of a view stands for, allocated to `role`.
    fn as_resource(r: WireResource<'_>, role: &str) -> v1::Resource {
        match r {
            WireResource::Entry(r) => allocated(r, role),
            WireResource::Plain(p) => v1::Resource {
                name: p.name.to_string(),
                r#type: v1::value::Type::Scalar as i32,
                scalar: Some(v1::value::Scalar { value: p.value }),
                allocation_info: Some(v1::resource::AllocationInfo {
                    role: Some(role.to_string()),
                }),
                ..Default::default()
            },
        }
    }

    /// The offer the books' view stands for, built as a message.
    fn as_message(view: &OfferView<'_, Items<'_>>) -> v1::Offer {
        v1::Offer {
            id: v1::OfferId {
                value: view.id.to_string(),
            },
            framework_id: v1::FrameworkId {
                value: view.framework.to_string(),
            },
            agent_id: v1::AgentId {
                value: view.agent.to_string(),
            },
            hostname: view.hostname.to_string(),
            // The field's bytes are an offer with nothing else set.
            url: v1::Offer::decode(view.url).expect("a url field").url,
            domain: None,
            resources: view
                .resources
                .clone()
                .map(|r| as_resource(r, view.role))
                .collect(),
            attributes: view.attributes.to_vec(),
            executor_ids: view
                .executor_ids
                .iter()
                .map(|e| v1::ExecutorId {
                    value: e.to_string(),
                })
                .collect(),
            unavailability: None,
            allocation_info: Some(v1::resource::AllocationInfo {
                role: Some(view.role.to_string()),
            }),
        }
    }

    #[test]
    fn an_offers_event_is_what_prost_writes_for_the_same_offers() {
        // The books' entries are unallocated; an allocation an entry
        // carries all the same (here: to another role, or to none) gives
        // way to the offer's role.
        let plain =
            Resources::parse("cpus:8;mem:4096;ports:[31000-31005,32000-32000]").expect("parses");
        let mut reserved = Resources::parse("cpus(db):1.5;disk(db):100").expect("parses");
        reserved.allocate("db/y");
        let mut plain = plain.to_vec();
        let mut no_role = plain[0].clone();
        no_role.allocation_info = Some(v1::resource::AllocationInfo { role: None });
        plain.push(no_role);
        let reserved = reserved.to_vec();
        fn entries(list: &[v1::Resource]) -> Vec<WireResource<'_>> {
            list.iter().map(WireResource::Entry).collect()
        }
        let (plain, reserved) = (entries(&plain), entries(&reserved));
        // An agent's brief, and a brief mixed with entries.
        let brief = super::super::plain::brief(
            &Resources::parse("cpus:2.5;mem:1024;disk:0.001").expect("parses"),
        )
        .expect("plain");
        let briefed: Vec<WireResource<'_>> = brief.iter().map(WireResource::Plain).collect();
        // Another agent's brief: the same names, one value apart.
        let other = super::super::plain::brief(
            &Resources::parse("cpus:2.5;mem:2048;disk:0.001").expect("parses"),
        )
        .expect("plain");
        let other: Vec<WireResource<'_>> = other.iter().map(WireResource::Plain).collect();
        let mixed: Vec<WireResource<'_>> = briefed.iter().chain(&reserved).copied().collect();
        let attributes = vec![v1::Attribute {
            name: "rack".into(),
            r#type: v1::value::Type::Text as i32,
            text: Some(v1::value::Text { value: "r1".into() }),
            ..Default::default()
        }];
        let long = "x".repeat(300);
        // Around the lengths where a field's length takes a second byte.
        let len = |n: usize| "y".repeat(n);
        let (l125, l126, l127, l128) = (len(125), len(126), len(127), len(128));
        // Agents' URLs as the master writes them into their offers; one
        // long enough that its length takes two bytes.
        let url = |host: &str, n: u32| {
            url_field(&v1::Url {
                scheme: "http".into(),
                address: v1::Address {
                    hostname: Some(host.into()),
                    ip: Some("127.0.0.1".into()),
                    port: 5050,
                },
                path: Some(format!("/slave({n})")),
                ..Default::default()
            })
        };
        let (url1, url2, url12) = (url("agent-1", 1), url(&long, 2), url("agent-12", 12));
        let views = [
            OfferView {
                id: "a6e5-O1",
                framework: "fw-1",
                agent: "a6e5-S1",
                hostname: "agent-1",
                resources: plain.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &url1,
                role: "web",
            },
            OfferView {
                id: "a6e5-O2",
                framework: "fw-1",
                agent: "a6e5-S2",
                hostname: &long,
                resources: reserved.iter().copied(),
                executor_ids: &["e1", "e2"],
                attributes: &attributes,
                url: &url2,
                role: "db/x",
            },
            OfferView {
                id: &l125,
                framework: &l126,
                agent: &l127,
                hostname: &l127,
                resources: plain.iter().copied(),
                executor_ids: &[&l128],
                attributes: &[],
                url: &[],
                role: &long,
            },
            OfferView {
                id: &l128,
                framework: &l125,
                agent: &l126,
                hostname: &l128,
                resources: [].iter().copied(),
                executor_ids: &[&l127],
                attributes: &[],
                url: &[],
                role: &l125,
            },
            OfferView {
                id: "",
                framework: "",
                agent: "",
                hostname: "",
                resources: [].iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "",
            },
            OfferView {
                id: "a6e5-O6",
                framework: "fw-2",
                agent: "a6e5-S6",
                hostname: "agent-6",
                resources: briefed.iter().copied(),
                executor_ids: &[],
                attributes: &attributes,
                url: &[],
                role: "web/a",
            },
            OfferView {
                id: "a6e5-O7",
                framework: "fw-2",
                agent: "a6e5-S7",
                hostname: &l126,
                resources: mixed.iter().copied(),
                executor_ids: &["e"],
                attributes: &[],
                url: &[],
                role: &l127,
            },
            // The body's remembered resources: a brief after entries (not
            // remembered), the same brief in the same role (copied), in
            // another role, another brief, and that brief again (copied,
            // the executor after it).
            OfferView {
                id: "a6e5-O8",
                framework: "fw-2",
                agent: "a6e5-S8",
                hostname: "agent-8",
                resources: briefed.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "web/a",
            },
            OfferView {
                id: "a6e5-O9",
                framework: "fw-2",
                agent: "a6e5-S9",
                hostname: "agent-9",
                resources: briefed.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "web/a",
            },
            OfferView {
                id: "a6e5-O10",
                framework: "fw-2",
                agent: "a6e5-S10",
                hostname: "agent-10",
                resources: briefed.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "web/b",
            },
            OfferView {
                id: "a6e5-O11",
                framework: "fw-2",
                agent: "a6e5-S11",
                hostname: "agent-11",
                resources: other.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "web/b",
            },
            OfferView {
                id: "a6e5-O12",
                framework: "fw-2",
                agent: "a6e5-S12",
                hostname: "agent-12",
                resources: other.iter().copied(),
                executor_ids: &["e"],
                attributes: &attributes,
                url: &url12,
                role: "web/b",
            },
        ];
        for n in 1..=views.len() {
            let mut body = new_body(0);
            for v in &views[..n] {
                push_offer(&mut body, v, None);
            }
            // The same written with a memo of the resources: the same bytes
            // (offers 9 and 12 copied theirs).
            let (mut remembered, mut memo) = (new_body(0), PlainMemo::default());
            let mut copied = 0;
            for v in &views[..n] {
                copied += usize::from(memo.matches(v.resources.clone(), v.role));
                push_offer(&mut remembered, v, Some(&mut memo));
            }
            assert_eq!(remembered, body, "{n} offers written with a memo");
            let past = |id: &str| usize::from(views[..n].iter().any(|v| v.id == id));
            assert_eq!(copied, past("a6e5-O9") + past("a6e5-O12"), "{n} offers");
            let bytes = offers_event(body);
            let expected = Event {
                r#type: Some(event::Type::Offers as i32),
                offers: Some(event::Offers {
                    offers: views[..n].iter().map(as_message).collect(),
                }),
                ..Default::default()
            };
            assert_eq!(&bytes[..], &expected.encode_to_vec()[..], "{n} offers");
            assert_eq!(super::super::stream::count_offers(&bytes), Some(n));
            let event = super::super::StreamEvent::offers(bytes.clone(), n);
            assert_eq!(event.offer_count(), n);
            assert_eq!(event.clone().into_event(), expected);
            assert_eq!(
                event.encode(crate::codec::ContentType::Json),
                crate::codec::encode(&expected, crate::codec::ContentType::Json)
            );
            assert_eq!(Event::decode(bytes).expect("decodes"), expected);
        }
    }

    #[test]
    fn a_memo_knows_the_last_plain_resources_of_its_body() {
        let brief = |text: &str| {
            super::super::plain::brief(&Resources::parse(text).expect("parses")).expect("plain")
        };
        let (a, b) = (brief("cpus:8;mem:4096"), brief("cpus:8;mem:4095"));
        let a: Vec<WireResource<'_>> = a.iter().map(WireResource::Plain).collect();
        let b: Vec<WireResource<'_>> = b.iter().map(WireResource::Plain).collect();
        let entries = Resources::parse("cpus:8;ports:[1-2]")
            .expect("parses")
            .to_vec();
        let entries: Vec<WireResource<'_>> = entries.iter().map(WireResource::Entry).collect();
        // An offer of `resources` in role "r" (its other fields named `id`).
        fn view<'a>(id: &'a str, resources: &'a [WireResource<'a>]) -> OfferView<'a, Items<'a>> {
            OfferView {
                id,
                framework: id,
                agent: id,
                hostname: id,
                resources: resources.iter().copied(),
                executor_ids: &[],
                attributes: &[],
                url: &[],
                role: "r",
            }
        }
        let mut memo = PlainMemo::default();
        assert!(!memo.matches(a.iter().copied(), "r"), "nothing remembered");
        let mut body = new_body(0);
        let first = view("o1", &a);
        push_offer(&mut body, &first, Some(&mut memo));
        assert!(memo.matches(a.iter().copied(), "r"));
        assert!(!memo.matches(a.iter().copied(), "r2"), "another role");
        assert!(!memo.matches(b.iter().copied(), "r"), "another value");
        assert!(!memo.matches(a[..1].iter().copied(), "r"), "fewer scalars");
        assert!(!memo.matches(entries.iter().copied(), "r"), "entries");
        // The remembered bytes are the resources' fields, as written.
        let mut alone = new_body(0);
        let mut w = Writer {
            out: &mut [0u8; 256],
            at: 0,
        };
        for r in a.iter().copied() {
            w.resource(r, "r");
        }
        let written = w.out[..w.at].to_vec();
        alone.extend_from_slice(&body[memo.bytes.clone()]);
        assert_eq!(&alone[HEADER_ROOM..], &written[..]);
        // Entries are not remembered: the memo forgets.
        let second = view("o2", &entries);
        push_offer(&mut body, &second, Some(&mut memo));
        assert!(!memo.matches(a.iter().copied(), "r"));
    }

    #[test]
    fn a_body_of_many_offers_gets_a_longer_header() {
        // More than 16 KiB of offers: the length takes three bytes.
        let r = Resources::parse("cpus:1").expect("parses").to_vec();
        let r: Vec<WireResource<'_>> = r.iter().map(WireResource::Entry).collect();
        let mut body = new_body(0);
        let view = OfferView {
            id: "an-offer-id-of-some-length",
            framework: "a-framework",
            agent: "an-agent",
            hostname: "a-host",
            resources: r.iter().copied(),
            executor_ids: &[],
            attributes: &[],
            url: &[],
            role: "*",
        };
        for _ in 0..400 {
            push_offer(&mut body, &view, None);
        }
        let bytes = offers_event(body);
        assert_eq!(super::super::stream::count_offers(&bytes), Some(400));
        let decoded = Event::decode(bytes).expect("decodes");
        assert_eq!(decoded.offers.expect("offers").offers.len(), 400);
    }
}
