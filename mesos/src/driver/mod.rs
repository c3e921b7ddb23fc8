//! `MesosSchedulerDriver`: upstream's classic scheduler driver
//! (include/mesos/scheduler.hpp, src/sched/sched.cpp) for Rust frameworks,
//! on the v1 scheduler API through a [`Transport`] (HTTP by default, or a
//! master in the same process, see [`crate::in_process`]).
//!
//! # Threads and who owns what
//! ```text
//!  handle (any thread, Send + Sync) ──Command──▶ driver thread (tokio, current-thread)
//!    status check and change under             owns the link: subscription, event stream,
//!    one mutex; never waits                    backoff, framework info, suppressed roles,
//!                                              outstanding offers
//!                                                │ ordered call lane ──▶ transport
//!                                                │ acknowledgements  ──▶ transport
//!                                                ▼
//!                                      callback thread: Scheduler callbacks,
//!                                      one at a time, in event order
//! ```
//! - The **handle** holds the status ([`Status`], transitions in
//!   [`status::step`]) behind one mutex, held only to check or change it and
//!   to queue a command, so a call never waits for the driver or callback
//!   thread and is safe from inside a callback. Calls while not RUNNING do
//!   nothing and return the status.
//! - The **driver thread** owns everything about the master link
//!   ([`connection::Connection`]): it subscribes, reconnects with backoff and
//!   resubscribes with the framework id after a lost stream (the master keeps
//!   the framework's tasks for its `failover_timeout`), and turns events into
//!   callbacks. While disconnected, launches and accepts are answered locally
//!   with TASK_LOST (TASK_DROPPED for PARTITION_AWARE frameworks),
//!   REASON_MASTER_DISCONNECTED; other calls are dropped, revive and suppress
//!   change the suppressed roles sent at the next SUBSCRIBE. Calls go out on
//!   one ordered lane (in the order they were made); acknowledgements, which
//!   order nothing, go out concurrently.
//! - The **callback thread** runs the [`Scheduler`]'s callbacks; each first
//!   checks that the driver is still RUNNING (after `abort` or `stop` no
//!   callback runs), panics are caught and logged. With implicit
//!   acknowledgements (the default) it acknowledges an update once
//!   `status_update` returned; with explicit ones the scheduler calls
//!   [`MesosSchedulerDriver::acknowledge_status_update`]. An ERROR event
//!   aborts the driver, then `error` runs.
//!
//! Shutdown: `stop(false)` sends TEARDOWN (after every call made before it)
//! and closes the stream; `stop(true)` only closes it, so the framework can
//! fail over. `abort()` stops callbacks, declines outstanding offers and
//! suppresses new ones, but keeps the stream so a later `stop(false)` can
//! still tear down. `join()` returns once the driver thread has done what
//! the status asks. Dropping the last handle (callbacks get handles that do
//! not count) closes the stream as `stop(true)` would and ends both threads.

mod actor;
mod callbacks;
pub mod connection;
mod scheduler;
pub mod status;
mod transport;

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::sync::mpsc;

pub use self::connection::Backoff;
pub use self::scheduler::Scheduler;
use self::status::Request;
pub use self::status::Status;
pub use self::transport::Transport;
use crate::client::{Client, ClientError, ClientOptions};
use crate::v1;
use crate::v1::scheduler::{Call, call};

/// How a driver behaves.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// Acknowledge each status update when `status_update` returns (true,
    /// upstream's default); false: the scheduler acknowledges explicitly.
    pub implicit_acknowledgements: bool,
    /// Roles that want no offers from the start.
    pub suppressed_roles: Vec<String>,
    /// Delay between subscription attempts.
    pub backoff: Backoff,
    /// Longest wait at `stop` for the calls made before it and TEARDOWN's answer.
    pub teardown_timeout: Duration,
    /// Acknowledgements in flight at once.
    pub acknowledgements_in_flight: usize,
}

impl Default for DriverOptions {
    fn default() -> Self {
        Self {
            implicit_acknowledgements: true,
            suppressed_roles: Vec::new(),
            backoff: Backoff::default(),
            teardown_timeout: Duration::from_secs(10),
            acknowledgements_in_flight: 32,
        }
    }
}

/// What the handle asks of the driver thread.
enum Command {
    /// A call to send while connected, dropped otherwise.
    Call(Box<Call>),
    /// ACCEPT (LAUNCH among its operations): answered locally while disconnected.
    Accept(call::Accept),
    /// An acknowledgement (sent while connected).
    Acknowledge(call::Acknowledge),
    /// REVIVE (empty: all roles).
    Revive(Vec<String>),
    /// SUPPRESS (empty: all roles).
    Suppress(Vec<String>),
    /// New framework info and suppressed roles.
    UpdateFramework(Box<v1::FrameworkInfo>, Vec<String>),
    /// A misuse the scheduler hears about as an error (the driver aborts).
    Fail(String),
    /// `stop(failover)`.
    Stop {
        /// Keep the framework (no TEARDOWN).
        failover: bool,
    },
    /// `abort()`.
    Abort,
    /// Every user handle is gone.
    Release,
}

impl Command {
    fn call(call: Call) -> Self {
        Command::Call(Box::new(call))
    }
}

/// What `start` hands to the threads.
struct Parts {
    scheduler: Box<dyn Scheduler>,
    transport: Arc<dyn Transport>,
    framework: v1::FrameworkInfo,
    options: DriverOptions,
    commands: mpsc::UnboundedReceiver<Command>,
}

/// The status and what the driver thread has finished.
struct State {
    status: Status,
    /// The last final status the driver thread carried out (join waits for it).
    settled: Option<Status>,
    /// The driver thread has ended.
    gone: bool,
    framework_id: Option<v1::FrameworkId>,
    callback_thread: Option<ThreadId>,
}

/// What every handle, the driver thread and the callback thread share.
struct Shared {
    state: Mutex<State>,
    settled: Condvar,
    commands: mpsc::UnboundedSender<Command>,
    parts: Mutex<Option<Parts>>,
    implicit_acknowledgements: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every write leaves the state whole; a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The driver thread carried out `status` (or, with `None`, ended).
    fn settle(&self, status: Option<Status>) {
        let mut state = self.state();
        match status {
            Some(s) => state.settled = Some(s),
            None => state.gone = true,
        }
        self.settled.notify_all();
    }

    fn status(&self) -> Status {
        self.state().status
    }
}

/// Sends [`Command::Release`] when the last user handle goes.
struct Owner {
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Release);
    }
}

/// The scheduler driver handle: cheap to clone, `Send + Sync`, callable from
/// any thread and from inside callbacks. See the module doc.
#[derive(Clone)]
pub struct MesosSchedulerDriver {
    shared: Arc<Shared>,
    /// `None` in the handles given to callbacks, which do not keep the driver.
    _owner: Option<Arc<Owner>>,
}

impl std::fmt::Debug for MesosSchedulerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MesosSchedulerDriver")
            .field("status", &self.status())
            .field("framework_id", &self.framework_id())
            .finish()
    }
}

impl MesosSchedulerDriver {
    /// A driver for `scheduler` and `framework` against the master at
    /// `master` (`host:port` or `http://host:port`), over HTTP with protobuf.
    pub fn new(
        scheduler: impl Scheduler,
        framework: v1::FrameworkInfo,
        master: &str,
    ) -> Result<Self, ClientError> {
        let client = Client::new(master, ClientOptions::default())?;
        Ok(Self::with_client(
            scheduler,
            framework,
            client,
            DriverOptions::default(),
        ))
    }

    /// A driver over an HTTP client of your making (encoding, token, timeouts).
    pub fn with_client(
        scheduler: impl Scheduler,
        framework: v1::FrameworkInfo,
        client: Client,
        options: DriverOptions,
    ) -> Self {
        Self::with_transport(scheduler, framework, Arc::new(client), options)
    }

    /// A driver over any transport.
    pub fn with_transport(
        scheduler: impl Scheduler,
        mut framework: v1::FrameworkInfo,
        transport: Arc<dyn Transport>,
        options: DriverOptions,
    ) -> Self {
        if framework.user.is_empty() {
            framework.user = current_user();
        }
        let (commands, inbox) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                status: Status::DriverNotStarted,
                settled: None,
                gone: false,
                framework_id: framework.id.clone().filter(|id| !id.value.is_empty()),
                callback_thread: None,
            }),
            settled: Condvar::new(),
            commands: commands.clone(),
            implicit_acknowledgements: options.implicit_acknowledgements,
            parts: Mutex::new(Some(Parts {
                scheduler: Box::new(scheduler),
                transport,
                framework,
                options,
                commands: inbox,
            })),
        });
        Self {
            shared,
            _owner: Some(Arc::new(Owner { commands })),
        }
    }

    /// A handle for callbacks: usable like any other, but it does not keep
    /// the driver alive.
    fn for_callbacks(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            _owner: None,
        }
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// The framework id, once known (given in the framework info, or
    /// assigned at the first subscription).
    pub fn framework_id(&self) -> Option<v1::FrameworkId> {
        self.shared.state().framework_id.clone()
    }

    /// Applies `request`; runs `then` under the status lock when it acts.
    fn transition(&self, request: Request, then: impl FnOnce(&mut State)) -> status::Step {
        let mut state = self.shared.state();
        let step = status::step(state.status, request);
        if step.acts {
            state.status = step.next;
            then(&mut state);
        }
        step
    }

    /// Queues `command` if the driver is RUNNING; returns the status.
    fn act(&self, command: Command) -> Status {
        self.transition(Request::Call, |_| {
            let _ = self.shared.commands.send(command);
        })
        .returns
    }

    /// Starts the driver: the threads start and the first SUBSCRIBE goes out.
    /// Returns RUNNING, or the status if it is not NOT_STARTED.
    pub fn start(&self) -> Status {
        let mut spawned = Ok(());
        let step = self.transition(Request::Start, |state| {
            // Only the one transition out of NOT_STARTED gets here.
            let parts = self
                .shared
                .parts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            spawned = match parts {
                Some(parts) => self.spawn(parts, state),
                None => Err(std::io::Error::other("the driver's parts are gone")),
            };
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the driver's threads");
            let mut state = self.shared.state();
            state.status = Status::DriverAborted;
            state.settled = Some(Status::DriverAborted);
            state.gone = true;
            return Status::DriverAborted;
        }
        step.returns
    }

    fn spawn(&self, parts: Parts, state: &mut State) -> std::io::Result<()> {
        let (callbacks_tx, callbacks_rx) = crossbeam_channel::unbounded();
        let driver = self.for_callbacks();
        let scheduler = parts.scheduler;
        let callback_thread = std::thread::Builder::new()
            .name("mesos-callbacks".to_string())
            .spawn(move || callbacks::run(scheduler, driver, callbacks_rx))?;
        state.callback_thread = Some(callback_thread.thread().id());
        let shared = self.shared.clone();
        let actor = actor::Actor::new(
            shared.clone(),
            parts.transport,
            parts.framework,
            parts.options,
            callbacks_tx,
        );
        let commands = parts.commands;
        std::thread::Builder::new()
            .name("mesos-driver".to_string())
            .spawn(move || actor::run(actor, commands, shared))?;
        Ok(())
    }

    /// Stops the driver. `failover == false`: the framework ends (TEARDOWN,
    /// its tasks are killed); `true`: only the connection closes, and a new
    /// scheduler may take over with the framework id within
    /// `failover_timeout`. Returns STOPPED (ABORTED if it had been aborted),
    /// or the status if it is not RUNNING or ABORTED.
    pub fn stop(&self, failover: bool) -> Status {
        self.transition(Request::Stop, |_| {
            let _ = self.shared.commands.send(Command::Stop { failover });
        })
        .returns
    }

    /// Aborts the driver: no more callbacks; `join` returns ABORTED. Returns
    /// ABORTED, or the status if it is not RUNNING.
    pub fn abort(&self) -> Status {
        self.abort_step().returns
    }

    fn abort_step(&self) -> status::Step {
        self.transition(Request::Abort, |_| {
            let _ = self.shared.commands.send(Command::Abort);
        })
    }

    /// Waits until the driver is stopped or aborted and the driver thread
    /// has carried it out; returns the status. Returns at once if the driver
    /// never started, and on the callback thread (waiting there could only
    /// deadlock).
    pub fn join(&self) -> Status {
        let mut state = self.shared.state();
        if state.status == Status::DriverNotStarted
            || state.callback_thread == Some(std::thread::current().id())
        {
            return state.status;
        }
        while !(state.gone || status::is_final(state.status) && state.settled == Some(state.status))
        {
            state = self
                .shared
                .settled
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.status
    }

    /// `start` then `join`.
    pub fn run(&self) -> Status {
        match self.start() {
            Status::DriverRunning => self.join(),
            other => other,
        }
    }

    /// REQUEST: a hint of the resources wanted (answered with offers, if at all).
    pub fn request_resources(&self, requests: Vec<v1::Request>) -> Status {
        self.act(Command::call(make_call(call::Type::Request, |c| {
            c.request = Some(call::Request { requests })
        })))
    }

    /// Launches `tasks` on the offers (all of one agent); what they leave is
    /// declined with `filters` (none: refuse for 5 s). No tasks: the offers
    /// are declined.
    pub fn launch_tasks(
        &self,
        offer_ids: &[v1::OfferId],
        tasks: Vec<v1::TaskInfo>,
        filters: Option<v1::Filters>,
    ) -> Status {
        let launch = v1::offer::Operation {
            r#type: Some(v1::offer::operation::Type::Launch as i32),
            launch: Some(v1::offer::operation::Launch { task_infos: tasks }),
            ..Default::default()
        };
        self.accept_offers(offer_ids, vec![launch], filters)
    }

    /// Kills a task.
    pub fn kill_task(&self, task_id: &v1::TaskId) -> Status {
        self.act(Command::call(make_call(call::Type::Kill, |c| {
            c.kill = Some(call::Kill {
                task_id: task_id.clone(),
                agent_id: None,
                kill_policy: None,
            })
        })))
    }

    /// Runs `operations` on the offers (all of one agent); what they leave
    /// is declined with `filters`. An operation with an `id` is refused (the
    /// driver does not handle operation status updates): the driver aborts
    /// with an error, as upstream's does.
    pub fn accept_offers(
        &self,
        offer_ids: &[v1::OfferId],
        operations: Vec<v1::offer::Operation>,
        filters: Option<v1::Filters>,
    ) -> Status {
        if operations.iter().any(|o| o.id.is_some()) {
            return self.act(Command::Fail(
                "An offer operation's 'id' field was set, which is disallowed because the \
                 driver cannot handle offer operation status updates"
                    .to_string(),
            ));
        }
        self.act(Command::Accept(call::Accept {
            offer_ids: offer_ids.to_vec(),
            operations,
            filters,
        }))
    }

    /// Declines an offer whole, with `filters` (none: refuse for 5 s).
    pub fn decline_offer(&self, offer_id: &v1::OfferId, filters: Option<v1::Filters>) -> Status {
        self.act(Command::call(make_call(call::Type::Decline, |c| {
            c.decline = Some(call::Decline {
                offer_ids: vec![offer_id.clone()],
                filters,
            })
        })))
    }

    /// Clears every filter and unsuppresses every role.
    pub fn revive_offers(&self) -> Status {
        self.act(Command::Revive(Vec::new()))
    }

    /// Clears the filters of `roles` and unsuppresses them (none: does nothing).
    pub fn revive_offers_for(&self, roles: &[String]) -> Status {
        if roles.is_empty() {
            return self.status();
        }
        self.act(Command::Revive(roles.to_vec()))
    }

    /// Suppresses every role: no offers until revived.
    pub fn suppress_offers(&self) -> Status {
        self.act(Command::Suppress(Vec::new()))
    }

    /// Suppresses `roles` (none: does nothing).
    pub fn suppress_offers_for(&self, roles: &[String]) -> Status {
        if roles.is_empty() {
            return self.status();
        }
        self.act(Command::Suppress(roles.to_vec()))
    }

    /// Acknowledges a status update (explicit acknowledgements only; with
    /// implicit ones this is a misuse: the driver aborts with an error, as
    /// upstream's does). Updates without a uuid need none and are ignored.
    pub fn acknowledge_status_update(&self, status: &v1::TaskStatus) -> Status {
        if self.shared.implicit_acknowledgements {
            return self.act(Command::Fail(
                "Cannot call acknowledge_status_update: implicit acknowledgements are enabled"
                    .to_string(),
            ));
        }
        match acknowledgement(status) {
            Some(ack) => self.act(Command::Acknowledge(ack)),
            None => self.status(),
        }
    }

    /// Sends data to an executor (delivered at most once).
    pub fn send_framework_message(
        &self,
        executor_id: &v1::ExecutorId,
        agent_id: &v1::AgentId,
        data: &[u8],
    ) -> Status {
        self.act(Command::call(make_call(call::Type::Message, |c| {
            c.message = Some(call::Message {
                agent_id: agent_id.clone(),
                executor_id: executor_id.clone(),
                data: data.to_vec(),
            })
        })))
    }

    /// Asks for the latest state of the given tasks (of every task when empty).
    pub fn reconcile_tasks(&self, statuses: &[v1::TaskStatus]) -> Status {
        let tasks = statuses
            .iter()
            .map(|s| call::reconcile::Task {
                task_id: s.task_id.clone(),
                agent_id: s.agent_id.clone(),
            })
            .collect();
        self.act(Command::call(make_call(call::Type::Reconcile, |c| {
            c.reconcile = Some(call::Reconcile { tasks })
        })))
    }

    /// New framework info (its id must be the framework's) and suppressed
    /// roles; sent now, or at the next subscription while disconnected.
    pub fn update_framework(
        &self,
        framework: v1::FrameworkInfo,
        suppressed_roles: Vec<String>,
    ) -> Status {
        self.act(Command::UpdateFramework(
            Box::new(framework),
            suppressed_roles,
        ))
    }

    /// Acknowledges on behalf of the callback thread (implicit mode).
    fn acknowledge_implicitly(&self, status: &v1::TaskStatus) {
        if let Some(ack) = acknowledgement(status) {
            self.act(Command::Acknowledge(ack));
        }
    }
}

/// A call of `kind` with `fill` applied (the driver thread sets the framework id).
fn make_call(kind: call::Type, fill: impl FnOnce(&mut Call)) -> Call {
    let mut c = Call {
        r#type: Some(kind as i32),
        ..Default::default()
    };
    fill(&mut c);
    c
}

/// The acknowledgement of an update, if it needs one (a uuid and an agent).
fn acknowledgement(status: &v1::TaskStatus) -> Option<call::Acknowledge> {
    let uuid = status.uuid.as_ref().filter(|u| !u.is_empty())?;
    Some(call::Acknowledge {
        agent_id: status.agent_id.clone()?,
        task_id: status.task_id.clone(),
        uuid: uuid.clone(),
    })
}

/// The roles a framework info names (`roles` when MULTI_ROLE, else `role`).
#[allow(deprecated)] // Single-role frameworks name their role in `role`.
fn roles_of(info: &v1::FrameworkInfo) -> BTreeSet<String> {
    let multi_role = info
        .capabilities
        .iter()
        .any(|c| c.r#type() == v1::framework_info::capability::Type::MultiRole);
    if multi_role {
        info.roles.iter().cloned().collect()
    } else {
        [info.role.clone().unwrap_or_else(|| "*".to_string())].into()
    }
}

/// The user to run as when the framework info names none (upstream fills in
/// the current user).
fn current_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "nobody".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_is_send_and_sync() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<MesosSchedulerDriver>();
    }

    #[test]
    fn only_updates_with_a_uuid_and_an_agent_are_acknowledged() {
        let mut status = v1::TaskStatus {
            task_id: v1::TaskId {
                value: "t".to_string(),
            },
            ..Default::default()
        };
        assert_eq!(acknowledgement(&status), None);
        status.uuid = Some(vec![7; 16]);
        assert_eq!(acknowledgement(&status), None, "no agent");
        status.agent_id = Some(v1::AgentId {
            value: "a".to_string(),
        });
        let ack = acknowledgement(&status).unwrap();
        assert_eq!((ack.uuid.len(), ack.agent_id.value.as_str()), (16, "a"));
        status.uuid = Some(Vec::new());
        assert_eq!(acknowledgement(&status), None, "empty uuid");
    }

    #[test]
    #[allow(deprecated)]
    fn roles_of_single_and_multi_role_frameworks() {
        let mut info = v1::FrameworkInfo::default();
        assert_eq!(roles_of(&info), ["*".to_string()].into());
        info.role = Some("r".to_string());
        assert_eq!(roles_of(&info), ["r".to_string()].into());
        info.role = None;
        info.roles = vec!["a".to_string(), "b".to_string()];
        info.capabilities = vec![v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::MultiRole as i32),
        }];
        assert_eq!(roles_of(&info), ["a".to_string(), "b".to_string()].into());
    }
}
