//! Per-RM delivery of the core's callbacks to gRPC streams.
//!
//! # Who owns what
//! - The [`Hub`] owns one [`RmLink`] per rmID, created at registration or when a
//!   stream names the RM first. Links live as long as the server.
//! - An [`RmLink`] owns four bounded [`Outbox`]es: allocation, application and
//!   node responses, and our `CallbackCall`s. The core's dispatcher thread for
//!   that RM is the only producer (through [`StreamCallback`]); the stream task
//!   that attached last is the only consumer.
//! - Predicates and configuration persistence wait for a reply: the waiting
//!   thread parks on a channel kept in [`RmLink`]'s pending map under the call id;
//!   the Callbacks stream task completes it when the RM's reply arrives.
//!
//! # Buffering
//! Responses produced while no stream of their kind is open stay in the outbox
//! (at most [`OUTBOX_CAPACITY`] messages) and go out when one opens. When an
//! outbox is full the producer waits up to [`FULL_OUTBOX_WAIT`] for room, then
//! drops the message and reports a callback error (the core logs it): the
//! dispatcher thread must never block forever, because re-registration joins it
//! on the scheduling thread.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use unisched_shim_api::{CallbackError, CallbackResult, ResourceManagerCallback};
use unisched_si as si;
use unisched_si::callback_call::Call;
use unisched_si::callback_reply::Reply;

/// Most messages an outbox keeps for a stream that is absent or slow.
pub const OUTBOX_CAPACITY: usize = 4096;
/// How long a producer waits for room in a full outbox before dropping.
pub const FULL_OUTBOX_WAIT: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct OutboxState<T> {
    queue: VecDeque<T>,
    /// Generation of the attached consumer; `None` when no stream is open.
    consumer: Option<u64>,
    next_generation: u64,
}

/// What a consumer finds when it looks into an outbox.
pub enum Pop<T> {
    /// The next message.
    Item(T),
    /// Nothing queued; wait for [`Outbox::ready`].
    Empty,
    /// A newer stream took over; this consumer should stop.
    Replaced,
}

/// A bounded queue of messages for one kind of stream of one RM.
pub struct Outbox<T> {
    state: Mutex<OutboxState<T>>,
    room: Condvar,
    ready: Notify,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Self {
            state: Mutex::new(OutboxState {
                queue: VecDeque::new(),
                consumer: None,
                next_generation: 1,
            }),
            room: Condvar::new(),
            ready: Notify::new(),
        }
    }
}

impl<T> Outbox<T> {
    /// Queues a message; waits up to `wait` for room, then gives it back.
    pub fn push(&self, item: T, wait: Duration) -> Result<(), T> {
        let mut state = lock(&self.state);
        if state.queue.len() >= OUTBOX_CAPACITY {
            state = self
                .room
                .wait_timeout_while(state, wait, |s| s.queue.len() >= OUTBOX_CAPACITY)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if state.queue.len() >= OUTBOX_CAPACITY {
                return Err(item);
            }
        }
        state.queue.push_back(item);
        drop(state);
        self.ready.notify_waiters();
        Ok(())
    }

    /// Makes a new stream the consumer; the previous one sees [`Pop::Replaced`].
    pub fn attach(&self) -> u64 {
        let mut state = lock(&self.state);
        let generation = state.next_generation;
        state.next_generation += 1;
        state.consumer = Some(generation);
        drop(state);
        self.ready.notify_waiters();
        generation
    }

    /// The consumer `generation` went away; messages stay queued for the next.
    pub fn detach(&self, generation: u64) {
        let mut state = lock(&self.state);
        if state.consumer == Some(generation) {
            state.consumer = None;
        }
    }

    /// Puts back a message the consumer could not deliver.
    pub fn unpop(&self, item: T) {
        lock(&self.state).queue.push_front(item);
    }

    /// Takes the next message for consumer `generation`.
    pub fn pop(&self, generation: u64) -> Pop<T> {
        let mut state = lock(&self.state);
        if state.consumer != Some(generation) {
            return Pop::Replaced;
        }
        match state.queue.pop_front() {
            Some(item) => {
                drop(state);
                self.room.notify_all();
                Pop::Item(item)
            }
            None => Pop::Empty,
        }
    }

    /// True while a stream is attached.
    pub fn attached(&self) -> bool {
        lock(&self.state).consumer.is_some()
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Woken on every push, attach and detach. Register with
    /// `Notified::enable` before calling [`Outbox::pop`] to miss nothing.
    pub fn ready(&self) -> &Notify {
        &self.ready
    }
}

/// Everything the server keeps for one RM.
pub struct RmLink {
    /// The RM's id.
    pub rm_id: String,
    /// Allocation responses for the UpdateAllocation stream.
    pub allocations: Outbox<si::AllocationResponse>,
    /// Application responses for the UpdateApplication stream.
    pub applications: Outbox<si::ApplicationResponse>,
    /// Node responses for the UpdateNode stream.
    pub nodes: Outbox<si::NodeResponse>,
    /// Calls for the Callbacks stream.
    pub calls: Outbox<si::CallbackCall>,
    pending: Mutex<HashMap<u64, std::sync::mpsc::SyncSender<Reply>>>,
    next_call: AtomicU64,
    reply_timeout: Duration,
}

impl RmLink {
    fn new(rm_id: &str, reply_timeout: Duration) -> Self {
        Self {
            rm_id: rm_id.to_string(),
            allocations: Outbox::default(),
            applications: Outbox::default(),
            nodes: Outbox::default(),
            calls: Outbox::default(),
            pending: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(1),
            reply_timeout,
        }
    }

    fn call_id(&self) -> u64 {
        self.next_call.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a call that needs no answer.
    fn notify(&self, call: Call) -> CallbackResult<()> {
        let msg = si::CallbackCall {
            call_id: self.call_id(),
            call: Some(call),
        };
        self.calls
            .push(msg, FULL_OUTBOX_WAIT)
            .map_err(|_| overflow(&self.rm_id, "callbacks"))
    }

    /// Sends a call and waits for the RM's answer, up to the reply timeout.
    fn ask(&self, call: Call) -> CallbackResult<Reply> {
        if !self.calls.attached() {
            return Err(CallbackError::new(format!(
                "RM {:?} has no Callbacks stream open",
                self.rm_id
            )));
        }
        let id = self.call_id();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        lock(&self.pending).insert(id, tx);
        let msg = si::CallbackCall {
            call_id: id,
            call: Some(call),
        };
        if self.calls.push(msg, Duration::ZERO).is_err() {
            lock(&self.pending).remove(&id);
            return Err(overflow(&self.rm_id, "callbacks"));
        }
        let answer = rx.recv_timeout(self.reply_timeout);
        lock(&self.pending).remove(&id);
        answer.map_err(|_| {
            CallbackError::new(format!(
                "RM {:?} did not answer call {id} within {:?}",
                self.rm_id, self.reply_timeout
            ))
        })
    }

    /// Hands an RM's reply to the thread waiting for it. Unknown or late ids
    /// are ignored (the waiter gave up).
    pub fn complete(&self, call_id: u64, reply: Reply) {
        if let Some(tx) = lock(&self.pending).remove(&call_id) {
            let _ = tx.try_send(reply);
        }
    }
}

fn overflow(rm_id: &str, what: &str) -> CallbackError {
    tracing::warn!(rm = rm_id, stream = what, "outbox full: message dropped");
    CallbackError::new(format!(
        "the {what} outbox of RM {rm_id:?} is full (no stream reading it): message dropped"
    ))
}

/// The registry of RM links.
pub struct Hub {
    links: Mutex<HashMap<String, Arc<RmLink>>>,
    reply_timeout: Duration,
}

impl Hub {
    /// A hub whose waiting callbacks give up after `reply_timeout`.
    pub fn new(reply_timeout: Duration) -> Self {
        Self {
            links: Mutex::new(HashMap::new()),
            reply_timeout,
        }
    }

    /// The link of `rm_id`, created when missing.
    pub fn link(&self, rm_id: &str) -> Arc<RmLink> {
        lock(&self.links)
            .entry(rm_id.to_string())
            .or_insert_with(|| Arc::new(RmLink::new(rm_id, self.reply_timeout)))
            .clone()
    }
}

/// The [`ResourceManagerCallback`] the server registers with the core for a
/// remote RM: everything goes into that RM's outboxes.
pub struct StreamCallback {
    link: Arc<RmLink>,
}

impl StreamCallback {
    /// A callback feeding `link`.
    pub fn new(link: Arc<RmLink>) -> Self {
        Self { link }
    }
}

impl ResourceManagerCallback for StreamCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        let link = &self.link;
        link.allocations
            .push(response, FULL_OUTBOX_WAIT)
            .map_err(|_| overflow(&link.rm_id, "UpdateAllocation"))
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        let link = &self.link;
        link.applications
            .push(response, FULL_OUTBOX_WAIT)
            .map_err(|_| overflow(&link.rm_id, "UpdateApplication"))
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        let link = &self.link;
        link.nodes
            .push(response, FULL_OUTBOX_WAIT)
            .map_err(|_| overflow(&link.rm_id, "UpdateNode"))
    }

    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()> {
        match self.link.ask(Call::Predicates(args))? {
            Reply::Predicates(r) if r.error.is_empty() => Ok(()),
            Reply::Predicates(r) => Err(CallbackError::new(r.error)),
            Reply::UpdateConfiguration(_) => Err(CallbackError::new(
                "RM answered predicates with a configuration reply",
            )),
        }
    }

    fn resync_scheduler_cache(&self, args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        self.link.notify(Call::ReSyncSchedulerCache(args))
    }

    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        self.link.notify(Call::SendEvent(si::EventBatch { events }))
    }

    fn update_container_scheduling_state(
        &self,
        request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        self.link
            .notify(Call::UpdateContainerSchedulingState(request))
    }

    fn update_configuration(
        &self,
        request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        match self.link.ask(Call::UpdateConfiguration(request))? {
            Reply::UpdateConfiguration(r) => Ok(r),
            Reply::Predicates(_) => Err(CallbackError::new(
                "RM answered a configuration call with a predicates reply",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_buffers_until_attached_and_hands_over_to_newer_stream() {
        let outbox = Outbox::<u32>::default();
        outbox.push(1, Duration::ZERO).unwrap();
        outbox.push(2, Duration::ZERO).unwrap();
        let first = outbox.attach();
        assert!(matches!(outbox.pop(first), Pop::Item(1)));
        let second = outbox.attach();
        assert!(matches!(outbox.pop(first), Pop::Replaced));
        assert!(matches!(outbox.pop(second), Pop::Item(2)));
        assert!(matches!(outbox.pop(second), Pop::Empty));
        outbox.detach(first);
        assert!(outbox.attached(), "a stale detach leaves the newer stream");
    }

    #[test]
    fn full_outbox_drops_after_waiting() {
        let outbox = Outbox::<usize>::default();
        for i in 0..OUTBOX_CAPACITY {
            outbox.push(i, Duration::ZERO).unwrap();
        }
        assert_eq!(outbox.push(7, Duration::from_millis(5)), Err(7));
        assert_eq!(outbox.len(), OUTBOX_CAPACITY);
    }

    #[test]
    fn predicates_without_a_callbacks_stream_say_no_at_once() {
        let hub = Hub::new(Duration::from_secs(5));
        let cb = StreamCallback::new(hub.link("rm"));
        let err = cb.predicates(si::PredicatesArgs::default()).unwrap_err();
        assert!(err.reason.contains("no Callbacks stream"), "{err}");
    }

    #[test]
    fn predicates_time_out_as_no() {
        let hub = Hub::new(Duration::from_millis(20));
        let link = hub.link("rm");
        let _generation = link.calls.attach();
        let cb = StreamCallback::new(link);
        let err = cb.predicates(si::PredicatesArgs::default()).unwrap_err();
        assert!(err.reason.contains("did not answer"), "{err}");
    }

    #[test]
    fn predicates_reply_is_correlated_by_call_id() {
        let hub = Hub::new(Duration::from_secs(5));
        let link = hub.link("rm");
        let generation = link.calls.attach();
        let answering = link.clone();
        let rm = std::thread::spawn(move || {
            loop {
                if let Pop::Item(call) = answering.calls.pop(generation) {
                    answering.complete(
                        call.call_id,
                        Reply::Predicates(si::PredicatesResult {
                            error: "no room".into(),
                        }),
                    );
                    return;
                }
                std::thread::yield_now();
            }
        });
        let err = StreamCallback::new(link)
            .predicates(si::PredicatesArgs::default())
            .unwrap_err();
        rm.join().unwrap();
        assert_eq!(err.reason, "no room");
    }
}
