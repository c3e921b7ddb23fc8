//! The `Scheduler` a framework implements: the callbacks of upstream's
//! `mesos::Scheduler` (include/mesos/scheduler.hpp), on Mesos v1 types.
//!
//! Every callback runs on the driver's one callback thread, in the order the
//! events arrived, and never while another runs (hence `&mut self`). Each
//! gets the driver, whose every method may be called from inside a callback
//! (none waits for the callback thread). A panicking callback is caught and
//! logged; delivery goes on. Every method has a default that does nothing.

use super::MesosSchedulerDriver;
use crate::v1;

/// The callbacks of a framework scheduler.
#[allow(unused_variables)]
pub trait Scheduler: Send + 'static {
    /// Subscribed for the first time through this driver (also when it
    /// started with an existing framework id, i.e. a scheduler failover).
    fn registered(
        &mut self,
        driver: &MesosSchedulerDriver,
        framework_id: &v1::FrameworkId,
        master_info: &v1::MasterInfo,
    ) {
    }

    /// Subscribed again after a disconnection, with the same framework id.
    fn reregistered(&mut self, driver: &MesosSchedulerDriver, master_info: &v1::MasterInfo) {}

    /// The event stream was lost; the driver is trying to subscribe again.
    /// Until it has, launches and accepts answer TASK_LOST locally.
    fn disconnected(&mut self, driver: &MesosSchedulerDriver) {}

    /// New offers, each of one agent. Their resources are not offered to
    /// this framework again until it declines or uses them, or they are
    /// rescinded.
    fn resource_offers(&mut self, driver: &MesosSchedulerDriver, offers: &[v1::Offer]) {}

    /// An offer is no longer valid.
    fn offer_rescinded(&mut self, driver: &MesosSchedulerDriver, offer_id: &v1::OfferId) {}

    /// A task's status changed. With implicit acknowledgements (the default)
    /// returning from this callback acknowledges the update; with explicit
    /// ones the scheduler calls
    /// [`MesosSchedulerDriver::acknowledge_status_update`].
    fn status_update(&mut self, driver: &MesosSchedulerDriver, status: &v1::TaskStatus) {}

    /// An executor sent data (delivered at most once).
    fn framework_message(
        &mut self,
        driver: &MesosSchedulerDriver,
        executor_id: &v1::ExecutorId,
        agent_id: &v1::AgentId,
        data: &[u8],
    ) {
    }

    /// An agent was lost (not reliably delivered).
    fn slave_lost(&mut self, driver: &MesosSchedulerDriver, agent_id: &v1::AgentId) {}

    /// An executor ended with `status` (not reliably delivered).
    fn executor_lost(
        &mut self,
        driver: &MesosSchedulerDriver,
        executor_id: &v1::ExecutorId,
        agent_id: &v1::AgentId,
        status: i32,
    ) {
    }

    /// An unrecoverable error (an ERROR event, a subscription refused for
    /// good). The driver is aborted before this is called.
    fn error(&mut self, driver: &MesosSchedulerDriver, message: &str) {}
}
