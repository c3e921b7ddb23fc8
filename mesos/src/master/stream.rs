//! What goes down a framework's event stream, and the in-process end of it.
//!
//! Most events travel as `v1::scheduler::Event` messages. An allocation
//! run's OFFERS events travel already encoded (protobuf), written by the
//! master straight from its books (`offer_wire.rs`): no `v1::Offer` is built
//! on the master thread, and the HTTP stream writes the bytes as they are
//! (or turns them into JSON, which the codec makes from wire bytes anyway).
//! An in-process subscriber gets messages either way: [`EventReceiver`]
//! decodes the encoded ones on the subscriber's side.

use std::task::{Context, Poll};

use bytes::Bytes;
use prost::Message;
use prost_reflect::ReflectMessage;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use crate::codec::ContentType;
use crate::v1::scheduler::{Event, event};

/// An event on its way down a framework's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// An event as a message (boxed: an `Event` is a kilobyte, most of
    /// it options, and channels hold their items inline).
    Message(Box<Event>),
    /// An `Event` already encoded as protobuf (an allocation run's OFFERS),
    /// with the number of offers it holds (made by [`StreamEvent::offers`]).
    Encoded {
        /// The encoded event.
        bytes: Bytes,
        /// How many offers it holds: the master counts them as it writes
        /// them, so a reader that wants the number need not walk the bytes.
        offers: usize,
    },
}

impl From<Event> for StreamEvent {
    fn from(event: Event) -> Self {
        StreamEvent::Message(Box::new(event))
    }
}

impl StreamEvent {
    /// An encoded OFFERS event of `offers` offers. Builds with debug
    /// assertions (the tests) check the count against the bytes.
    pub fn offers(bytes: Bytes, offers: usize) -> Self {
        debug_assert_eq!(
            count_offers(&bytes),
            Some(offers),
            "an encoded event holds as many offers as it says"
        );
        StreamEvent::Encoded { bytes, offers }
    }

    /// The event as a message (an encoded one decoded). The master only
    /// encodes what decodes; were that ever broken, the subscriber gets an
    /// ERROR event saying so instead of a panic.
    pub fn into_event(self) -> Event {
        match self {
            StreamEvent::Message(event) => *event,
            StreamEvent::Encoded { bytes, .. } => Event::decode(bytes).unwrap_or_else(|e| Event {
                r#type: Some(event::Type::Error as i32),
                error: Some(event::Error {
                    message: format!("the master sent an event that does not decode: {e}"),
                }),
                ..Default::default()
            }),
        }
    }

    /// The event's body in `accept`'s encoding (what one RecordIO record
    /// of the HTTP stream carries).
    pub fn encode(&self, accept: ContentType) -> Vec<u8> {
        match (self, accept) {
            (StreamEvent::Message(event), _) => crate::codec::encode(&**event, accept),
            (StreamEvent::Encoded { bytes, .. }, ContentType::Protobuf) => bytes.to_vec(),
            (StreamEvent::Encoded { bytes, .. }, ContentType::Json) => {
                crate::codec::encode_json_wire(&Event::default().descriptor(), bytes)
            }
        }
    }

    /// The number of offers an OFFERS event holds (0 for other events),
    /// without reading an encoded one's bytes.
    pub fn offer_count(&self) -> usize {
        match self {
            StreamEvent::Message(event) => event.offers.as_ref().map_or(0, |o| o.offers.len()),
            StreamEvent::Encoded { offers, .. } => *offers,
        }
    }

    /// The SUBSCRIBED part of a message (never encoded).
    pub fn subscribed(&self) -> Option<&event::Subscribed> {
        match self {
            StreamEvent::Message(event) => event.subscribed.as_ref(),
            StreamEvent::Encoded { .. } => None,
        }
    }
}

/// Counts the entries of `Event.offers.offers` in an encoded event by
/// walking its fields (`None` when it does not parse): the check of
/// [`StreamEvent::offers`] in builds with debug assertions.
pub(super) fn count_offers(mut bytes: &[u8]) -> Option<usize> {
    use prost::encoding::{WireType, decode_key, decode_varint};
    /// Skips a field of this wire type; the length of a length-delimited one.
    fn skip(wire: WireType, bytes: &mut &[u8]) -> Option<()> {
        let n = match wire {
            WireType::Varint => {
                decode_varint(bytes).ok()?;
                0
            }
            WireType::SixtyFourBit => 8,
            WireType::ThirtyTwoBit => 4,
            WireType::LengthDelimited => usize::try_from(decode_varint(bytes).ok()?).ok()?,
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        *bytes = bytes.get(n..)?;
        Some(())
    }
    let mut count = 0;
    while !bytes.is_empty() {
        let (tag, wire) = decode_key(&mut bytes).ok()?;
        if tag == 3 && wire == WireType::LengthDelimited {
            let len = usize::try_from(decode_varint(&mut bytes).ok()?).ok()?;
            let mut offers = bytes.get(..len)?;
            bytes = &bytes[len..];
            while !offers.is_empty() {
                let (tag, wire) = decode_key(&mut offers).ok()?;
                count += usize::from(tag == 1);
                skip(wire, &mut offers)?;
            }
        } else {
            skip(wire, &mut bytes)?;
        }
    }
    Some(count)
}

/// The in-process end of a framework's stream (what
/// [`MasterHandle::subscribe`](super::MasterHandle::subscribe) gives): the
/// receiving side of the channel, with every event as a message.
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::Receiver<StreamEvent>,
}

impl EventReceiver {
    /// Wraps the receiving side of a stream's channel.
    pub fn new(rx: mpsc::Receiver<StreamEvent>) -> Self {
        Self { rx }
    }

    /// The next event; `None` once the master closed the stream.
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await.map(StreamEvent::into_event)
    }

    /// The next event as it came (encoded or not).
    pub async fn recv_raw(&mut self) -> Option<StreamEvent> {
        self.rx.recv().await
    }

    /// The next event if one is there.
    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        self.rx.try_recv().map(StreamEvent::into_event)
    }

    /// The next event, blocking this (non-async) thread.
    pub fn blocking_recv(&mut self) -> Option<Event> {
        self.rx.blocking_recv().map(StreamEvent::into_event)
    }

    /// Polls for the next event.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx
            .poll_recv(cx)
            .map(|e| e.map(StreamEvent::into_event))
    }
}
