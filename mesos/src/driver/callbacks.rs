//! The callback thread: runs the scheduler's callbacks one at a time, in the
//! order the driver thread queued them, each only while the driver is
//! RUNNING, each with its panics caught; acknowledges updates implicitly.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crossbeam_channel::Receiver;

use super::status::Status;
use super::{MesosSchedulerDriver, Scheduler};
use crate::v1;

/// A callback to run.
#[derive(Debug)]
pub(super) enum Callback {
    Registered(v1::FrameworkId, v1::MasterInfo),
    Reregistered(v1::MasterInfo),
    Disconnected,
    Offers(Vec<v1::Offer>),
    Rescinded(v1::OfferId),
    Update(v1::TaskStatus),
    Message {
        executor_id: v1::ExecutorId,
        agent_id: v1::AgentId,
        data: Vec<u8>,
    },
    AgentLost(v1::AgentId),
    ExecutorLost {
        executor_id: v1::ExecutorId,
        agent_id: v1::AgentId,
        status: i32,
    },
    /// Aborts the driver (if it is running), then runs `error`.
    Error(String),
}

/// The thread's loop: ends when the driver thread drops its sender.
pub(super) fn run(
    mut scheduler: Box<dyn Scheduler>,
    driver: MesosSchedulerDriver,
    callbacks: Receiver<Callback>,
) {
    for callback in callbacks {
        match callback {
            Callback::Error(message) => {
                // Upstream aborts first, so the scheduler sees ABORTED in `error`.
                if driver.abort_step().acts {
                    tracing::error!(%message, "scheduler driver aborted");
                    guarded("error", || scheduler.error(&driver, &message));
                }
            }
            other => {
                if driver.status() != Status::DriverRunning {
                    continue;
                }
                deliver(scheduler.as_mut(), &driver, other);
            }
        }
    }
}

/// Runs one callback; a status update is acknowledged implicitly when it
/// returned normally and the driver still runs.
fn deliver(scheduler: &mut dyn Scheduler, driver: &MesosSchedulerDriver, callback: Callback) {
    match callback {
        Callback::Registered(id, master) => {
            guarded("registered", || scheduler.registered(driver, &id, &master));
        }
        Callback::Reregistered(master) => {
            guarded("reregistered", || scheduler.reregistered(driver, &master));
        }
        Callback::Disconnected => {
            guarded("disconnected", || scheduler.disconnected(driver));
        }
        Callback::Offers(offers) => {
            guarded("resource_offers", || {
                scheduler.resource_offers(driver, &offers)
            });
        }
        Callback::Rescinded(id) => {
            guarded("offer_rescinded", || scheduler.offer_rescinded(driver, &id));
        }
        Callback::Update(status) => {
            let handled = guarded("status_update", || scheduler.status_update(driver, &status));
            if handled && driver.shared.implicit_acknowledgements {
                driver.acknowledge_implicitly(&status);
            }
        }
        Callback::Message {
            executor_id,
            agent_id,
            data,
        } => {
            guarded("framework_message", || {
                scheduler.framework_message(driver, &executor_id, &agent_id, &data)
            });
        }
        Callback::AgentLost(agent_id) => {
            guarded("slave_lost", || scheduler.slave_lost(driver, &agent_id));
        }
        Callback::ExecutorLost {
            executor_id,
            agent_id,
            status,
        } => {
            guarded("executor_lost", || {
                scheduler.executor_lost(driver, &executor_id, &agent_id, status)
            });
        }
        Callback::Error(_) => {}
    }
}

/// Runs `f`; a panic is logged and swallowed. True when `f` returned.
fn guarded(name: &str, f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".to_string());
            tracing::error!(callback = name, %reason, "a scheduler callback panicked");
            false
        }
    }
}
