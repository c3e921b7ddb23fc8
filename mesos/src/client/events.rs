//! A subscription's event stream: typed events from a RecordIO body (or any
//! other source of events, such as an in-process master's channel), with a
//! heartbeat watchdog.
//!
//! The watchdog: the master sends HEARTBEAT every `heartbeat_interval_seconds`
//! (from SUBSCRIBED). When no event at all arrives within `misses` such
//! intervals the stream ends with [`StreamError::HeartbeatTimeout`]: a
//! half-open connection (a master that died without closing it) looks
//! exactly like a quiet one otherwise.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use super::StreamError;
use crate::codec::{self, ContentType};
use crate::recordio;
use crate::v1::scheduler::Event;

/// A source of events for an [`EventStream`]: yields events and, at its end,
/// one fatal error saying why (after which it is not polled again).
pub type EventSource = Pin<Box<dyn Stream<Item = Result<Event, StreamError>> + Send>>;

/// Heartbeats that may be missed before the stream is declared dead.
pub const DEFAULT_HEARTBEAT_MISSES: u32 = 3;

/// The events of one subscription, after its SUBSCRIBED. It ends with one
/// fatal [`StreamError`] saying why ([`StreamError::Closed`] when the master
/// closed it, [`StreamError::HeartbeatTimeout`] from the watchdog, ...), then
/// `None`. An event that does not decode is an `Err` too, but the stream goes on.
pub struct EventStream {
    source: EventSource,
    /// How long the stream may stay silent; `None` disables the watchdog.
    window: Option<Duration>,
    deadline: Pin<Box<Sleep>>,
    done: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("window", &self.window)
            .field("done", &self.done)
            .finish()
    }
}

impl EventStream {
    /// A stream over `source`, silent for at most `window` (none: no watchdog).
    pub fn new(source: EventSource, window: Option<Duration>) -> Self {
        let far = Instant::now() + Duration::from_secs(86_400 * 365);
        let start = window.map_or(far, |w| Instant::now() + w);
        Self {
            source,
            window,
            deadline: Box::pin(tokio::time::sleep_until(start)),
            done: false,
        }
    }

    /// The watchdog window for a heartbeat interval: `misses` intervals
    /// (at least one), or none when the master sends no heartbeats.
    pub fn window_for(heartbeat_interval: Option<f64>, misses: u32) -> Option<Duration> {
        let interval = heartbeat_interval.filter(|s| s.is_finite() && *s > 0.0)?;
        Duration::try_from_secs_f64(interval * f64::from(misses.max(1))).ok()
    }

    /// The next event; `None` once the stream has ended.
    pub async fn next(&mut self) -> Option<Result<Event, StreamError>> {
        futures_util::StreamExt::next(self).await
    }

    fn rearm(&mut self) {
        if let Some(w) = self.window {
            self.deadline.as_mut().reset(Instant::now() + w);
        }
    }
}

impl Stream for EventStream {
    type Item = Result<Event, StreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match this.source.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(event))) => {
                this.rearm();
                Poll::Ready(Some(Ok(event)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = e.is_fatal();
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match (this.window, this.deadline.as_mut().poll(cx)) {
                (Some(w), Poll::Ready(())) => {
                    this.done = true;
                    Poll::Ready(Some(Err(StreamError::HeartbeatTimeout(w))))
                }
                _ => Poll::Pending,
            },
        }
    }
}

/// The events of a chunked RecordIO body whose records are events in
/// `content_type`, exactly as [`super::Client::subscribe`] reads a SUBSCRIBE
/// response (a record that does not decode is an `Err` and the stream goes
/// on; bad framing, a transport error or the body's end is a final `Err`).
/// Public so that the framing can be driven without a connection (the
/// `mesos_recordio` fuzz target).
pub fn recordio_events<B>(body: B, content_type: ContentType) -> EventSource
where
    B: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
{
    RecordIoEvents::source(body, content_type)
}

/// Events decoded from a chunked RecordIO body.
pub(super) struct RecordIoEvents<B> {
    body: B,
    decoder: recordio::Decoder,
    content_type: ContentType,
    ready: VecDeque<Vec<u8>>,
    ended: bool,
}

impl<B> RecordIoEvents<B>
where
    B: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
{
    /// Decodes `body`, whose records are events in `content_type`.
    pub(super) fn source(body: B, content_type: ContentType) -> EventSource {
        Box::pin(Self {
            body,
            decoder: recordio::Decoder::default(),
            content_type,
            ready: VecDeque::new(),
            ended: false,
        })
    }
}

impl<B> Stream for RecordIoEvents<B>
where
    B: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
{
    type Item = Result<Event, StreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(record) = this.ready.pop_front() {
                let event =
                    codec::decode::<Event>(&record, this.content_type).map_err(StreamError::Decode);
                return Poll::Ready(Some(event));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.body).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => match this.decoder.decode(&chunk) {
                    Ok(records) => this.ready.extend(records),
                    Err(e) => {
                        this.ended = true;
                        return Poll::Ready(Some(Err(StreamError::RecordIo(e))));
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(StreamError::Transport(e))));
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    let end = match this.decoder.finish() {
                        Ok(()) => StreamError::Closed,
                        Err(e) => StreamError::RecordIo(e),
                    };
                    return Poll::Ready(Some(Err(end)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
