//! The driver attached to a master in the same process, without HTTP: a
//! [`Transport`] over [`MasterHandle::subscribe`] and [`MasterHandle::call`],
//! for benchmarks and tests. The semantics are the HTTP ones: the same
//! SUBSCRIBED-or-ERROR first event, stream ids, the master's refusals as the
//! same [`ClientError`]s, the same heartbeat watchdog; when the driver drops
//! its event stream the master is told, as the HTTP edge tells it when a
//! connection closes.
//!
//! This module is the only place where the framework side meets the master:
//! the client and the driver import nothing of it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};

use crate::client::{
    Answer, ClientError, DEFAULT_HEARTBEAT_MISSES, EventStream, StreamError, Subscription,
    subscribed_or_refused,
};
use crate::driver::{DriverOptions, MesosSchedulerDriver, Scheduler, Transport};
use crate::master::{CallOutcome, Input, MasterHandle};
use crate::v1;
use crate::v1::scheduler::{Call, Event, call};

/// A transport to a master in this process.
#[derive(Clone)]
pub struct InProcessTransport {
    master: MasterHandle,
    /// Events a subscription may have queued before the master closes it.
    capacity: usize,
    heartbeat_misses: u32,
    subscribe_timeout: Duration,
    stream_id: Arc<Mutex<Option<String>>>,
}

impl InProcessTransport {
    /// A transport to `master` whose subscriptions queue up to 4096 events.
    pub fn new(master: MasterHandle) -> Self {
        Self {
            master,
            capacity: 4096,
            heartbeat_misses: DEFAULT_HEARTBEAT_MISSES,
            subscribe_timeout: Duration::from_secs(30),
            stream_id: Arc::new(Mutex::new(None)),
        }
    }

    /// The same with another event queue length.
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// The stream id of the latest subscription.
    pub fn stream_id(&self) -> Option<String> {
        self.stream_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A driver for `scheduler` attached to `master` in this process.
pub fn driver(
    scheduler: impl Scheduler,
    framework: v1::FrameworkInfo,
    master: &MasterHandle,
    options: DriverOptions,
) -> MesosSchedulerDriver {
    MesosSchedulerDriver::with_transport(
        scheduler,
        framework,
        Arc::new(InProcessTransport::new(master.clone())),
        options,
    )
}

impl Transport for InProcessTransport {
    fn subscribe(
        &self,
        subscribe: call::Subscribe,
    ) -> BoxFuture<'static, Result<Subscription, ClientError>> {
        let (stream_id, events) = self.master.subscribe(subscribe, self.capacity);
        let this = self.clone();
        Box::pin(async move {
            let mut source = ChannelEvents {
                events,
                master: this.master.clone(),
                stream_id: stream_id.clone(),
                framework: None,
            };
            let first = tokio::time::timeout(this.subscribe_timeout, source.next())
                .await
                .map_err(|_| ClientError::Timeout(this.subscribe_timeout))?;
            let subscribed = subscribed_or_refused(first)?;
            *this
                .stream_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(stream_id.clone());
            let window = EventStream::window_for(
                subscribed.heartbeat_interval_seconds,
                this.heartbeat_misses,
            );
            Ok(Subscription {
                subscribed,
                stream_id,
                events: EventStream::new(Box::pin(source), window),
            })
        })
    }

    fn call(&self, call: Call) -> BoxFuture<'static, Result<Answer, ClientError>> {
        let master = self.master.clone();
        let stream_id = self.stream_id();
        Box::pin(async move {
            match master.call(call, stream_id).await {
                Ok(CallOutcome::Accepted) => Ok(Answer::Accepted),
                Ok(CallOutcome::Ok) => Ok(Answer::Ok(None)),
                Err(e) => Err(ClientError::from_status(e.status, e.message).unwrap_or(
                    ClientError::Unexpected {
                        status: e.status,
                        body: "refused with a success status".to_string(),
                    },
                )),
            }
        })
    }
}

/// A subscription's channel as an event source; tells the master when it is
/// dropped, as a closed HTTP connection would.
struct ChannelEvents {
    events: crate::master::EventReceiver,
    master: MasterHandle,
    stream_id: String,
    /// Known from SUBSCRIBED.
    framework: Option<String>,
}

impl Stream for ChannelEvents {
    type Item = Result<Event, StreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                if let Some(s) = &event.subscribed {
                    this.framework = Some(s.framework_id.value.clone());
                }
                Poll::Ready(Some(Ok(event)))
            }
            // The master dropped the sink: ERROR sent, framework removed or
            // its stream closed for not keeping up.
            Poll::Ready(None) => Poll::Ready(Some(Err(StreamError::Closed))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for ChannelEvents {
    fn drop(&mut self) {
        if let Some(framework) = self.framework.take() {
            self.master.send(Input::StreamClosed {
                framework,
                stream_id: self.stream_id.clone(),
            });
        }
    }
}
