//! Callback dispatch: one thread per registered RM delivers the core's results
//! in the order they were produced. A slow RM delays only its own callbacks; an
//! RM whose callback panics or fails is logged and the dispatcher goes on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use unisched_shim_api::{CallbackResult, Leases, ResourceManagerCallback};
use unisched_si as si;

use super::partition::{AllocationBatch, ApplicationBatch, PendingEvent};
use super::spin::{Polled, poll_for};

/// One delivery to an RM.
pub enum Outgoing {
    /// Allocation results; the new allocations still to be made leases.
    Allocation(AllocationBatch),
    /// Application results; the changes of state still to be made wire
    /// records.
    Application(ApplicationBatch),
    /// Node results.
    Node(si::NodeResponse),
    /// A batch of events (releases' still to be built).
    Events(Vec<PendingEvent>),
    /// A container scheduling state.
    State(si::UpdateContainerSchedulingStateRequest),
    /// Everything before this has been delivered; drop the token to say so.
    Barrier(Sender<()>),
    /// Ask the RM to persist a configuration; its answer (or why there is
    /// none) goes to the sender.
    Configuration(
        si::UpdateConfigurationRequest,
        Sender<Result<si::UpdateConfigurationResponse, String>>,
    ),
}

/// A thread name made of `prefix` and an id an RM chose: the OS refuses names
/// with a NUL byte (std panics on them), so control characters become `?`.
pub fn thread_name(prefix: &str, id: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + id.len());
    name.push_str(prefix);
    name.extend(id.chars().map(|c| if c.is_control() { '?' } else { c }));
    name
}

/// The dispatcher of one RM.
pub struct Dispatcher {
    tx: Option<Sender<Outgoing>>,
    thread: Option<JoinHandle<()>>,
    /// Allocation results sent to the thread and not yet delivered.
    allocations_out: Arc<AtomicUsize>,
    /// Delivery on the caller's thread, for an RM that takes offer runs
    /// inline.
    inline: Option<Inline>,
}

/// What the scheduling thread needs to hand an offer run's parts to an RM
/// itself: the RM's callback (the same one the thread calls).
struct Inline {
    rm: String,
    callback: Arc<dyn ResourceManagerCallback>,
}

impl Dispatcher {
    /// Starts the delivery thread for `callback`.
    pub fn start(rm_id: &str, callback: Arc<dyn ResourceManagerCallback>, spin: Duration) -> Self {
        let (tx, rx) = unbounded();
        let name = thread_name("unisched-callback-", rm_id);
        let inline = callback.offer_runs_inline().then(|| Inline {
            rm: rm_id.to_string(),
            callback: callback.clone(),
        });
        let allocations_out = Arc::new(AtomicUsize::new(0));
        let (rm, out) = (rm_id.to_string(), allocations_out.clone());
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                // Started on the scheduling thread: not held to its CPU.
                crate::affinity::unpin_current();
                deliver_all(&rm, callback.as_ref(), rx, spin, &out)
            })
            .ok();
        if thread.is_none() {
            tracing::error!(
                rm = rm_id,
                "could not start the callback thread; results for this RM are dropped"
            );
        }
        Self {
            tx: Some(tx),
            thread,
            allocations_out,
            inline,
        }
    }

    /// Queues a delivery.
    pub fn send(&self, out: Outgoing) {
        if let Some(tx) = &self.tx {
            let counted = matches!(out, Outgoing::Allocation(_));
            if counted {
                self.allocations_out.fetch_add(1, Ordering::AcqRel);
            }
            if tx.send(out).is_err() && counted {
                self.allocations_out.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// True when an allocation run starting now may go to the RM on the
    /// calling thread ([`Self::deliver_inline`]): the RM takes offer runs
    /// inline, and every allocation result sent before has been delivered,
    /// so the run's parts cannot overtake one.
    pub fn can_deliver_inline(&self) -> bool {
        self.inline.is_some() && self.allocations_out.load(Ordering::Acquire) == 0
    }

    /// Hands a part of an allocation run to the RM on the calling thread
    /// (the scheduling thread), as the dispatcher thread would; an RM that
    /// does not take runs inline gets it queued instead.
    pub fn deliver_inline(&self, batch: AllocationBatch) {
        let Some(inline) = &self.inline else {
            self.send(Outgoing::Allocation(batch));
            return;
        };
        let what = allocation_method(batch.partial);
        if let Err(reason) = guarded(|| inline.callback.update_leases(leases(batch))) {
            tracing::warn!(rm = %inline.rm, callback = what, %reason, "RM callback failed");
        }
    }
}

/// The callback method an allocation batch stands for (for logs).
fn allocation_method(partial: bool) -> &'static str {
    if partial {
        "update_allocation_partial"
    } else {
        "update_allocation"
    }
}

impl Drop for Dispatcher {
    /// Delivers what is queued, then stops the thread.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take()
            && t.thread().id() != std::thread::current().id()
        {
            let _ = t.join();
        }
    }
}

/// The batch's results as the RM takes them: the new allocations are
/// leases already; the core's releases go into the response.
fn leases(batch: AllocationBatch) -> Leases {
    let AllocationBatch {
        mut response,
        placed,
        released,
        partition_name,
        partial,
    } = batch;
    // The core reports every release through `released`.
    response
        .released
        .extend(released.iter().map(|r| r.to_wire(&partition_name)));
    Leases {
        response,
        new: placed,
        partition_name,
        partial,
    }
}

fn deliver_all(
    rm: &str,
    callback: &dyn ResourceManagerCallback,
    rx: Receiver<Outgoing>,
    spin: Duration,
    allocations_out: &AtomicUsize,
) {
    loop {
        let out = match poll_for(&rx, spin) {
            Polled::Got(out) => out,
            Polled::Closed => break,
            Polled::Nothing => match rx.recv() {
                Ok(out) => out,
                Err(_) => break,
            },
        };
        let (what, result) = match out {
            Outgoing::Barrier(token) => {
                drop(token);
                continue;
            }
            Outgoing::Allocation(batch) => {
                let what = allocation_method(batch.partial);
                let result = guarded(|| callback.update_leases(leases(batch)));
                // Delivered: a run starting now may go inline.
                allocations_out.fetch_sub(1, Ordering::AcqRel);
                (what, result)
            }
            Outgoing::Application(r) => (
                "update_application",
                guarded(|| callback.update_application(r.into_response())),
            ),
            Outgoing::Node(r) => ("update_node", guarded(|| callback.update_node(r))),
            Outgoing::Configuration(request, reply) => {
                let answer = guarded(|| callback.update_configuration(request));
                let result = answer.as_ref().map(|_| ()).map_err(Clone::clone);
                let _ = reply.send(answer);
                ("update_configuration", result)
            }
            Outgoing::Events(e) => {
                let records = e.into_iter().map(PendingEvent::into_record).collect();
                ("send_event", guarded(|| callback.send_event(records)))
            }
            Outgoing::State(s) => (
                "update_container_scheduling_state",
                guarded(|| callback.update_container_scheduling_state(s)),
            ),
        };
        if let Err(reason) = result {
            tracing::warn!(rm, callback = what, %reason, "RM callback failed");
        }
    }
}

/// Runs a callback, turning a panic into an error.
pub fn guarded<T>(f: impl FnOnce() -> CallbackResult<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.reason),
        Err(panic) => Err(panic_message(panic.as_ref())),
    }
}

/// The message of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}
