//! The driver thread: a current-thread tokio runtime running one loop that
//! owns the master link. It takes the handle's commands, the subscription's
//! outcome, the stream's events and the backoff timer in one `select!`, so
//! everything about the link changes in one place and in order; callbacks
//! leave for the callback thread in the same order.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use futures_util::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Sleep;

use super::callbacks::Callback;
use super::connection::{Connection, LinkEvent, Transition, jitter};
use super::{Command, DriverOptions, Shared, Status, Transport, make_call, roles_of};
use crate::client::{Answer, ClientError, EventStream, StreamError, Subscription};
use crate::v1;
use crate::v1::scheduler::{Call, Event, call, event};
use crate::v1::task_status::{Reason, Source};

/// What the ordered call lane takes.
enum Lane {
    /// Send a call; report its outcome if asked.
    Call(
        Box<Call>,
        Option<oneshot::Sender<Result<Answer, ClientError>>>,
    ),
    /// Answer once every call queued before has been answered.
    Flush(oneshot::Sender<()>),
}

/// Whether the loop goes on.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Go,
    Exit,
}

/// The master link and everything the driver knows about the framework.
pub(super) struct Actor {
    shared: Arc<Shared>,
    transport: Arc<dyn Transport>,
    framework: v1::FrameworkInfo,
    suppressed: BTreeSet<String>,
    /// Framework info or suppressed roles changed while disconnected:
    /// UPDATE_FRAMEWORK once subscribed again.
    update_on_connect: bool,
    /// A SUBSCRIBED was seen: later ones are re-registrations.
    registered: bool,
    link: Connection,
    /// Offers received and not yet used, declined or rescinded.
    offers: HashSet<String>,
    callbacks: Sender<Callback>,
    options: DriverOptions,
    lane: Option<mpsc::UnboundedSender<Lane>>,
    acks: Arc<Semaphore>,
    ack_permits: u32,
    subscribing: Option<BoxFuture<'static, Result<Subscription, ClientError>>>,
    events: Option<EventStream>,
    backoff: Option<Pin<Box<Sleep>>>,
}

/// The driver thread's body: runs the loop; a panic in it aborts the driver
/// with an error instead of leaving the thread.
pub(super) fn run(actor: Actor, commands: mpsc::UnboundedReceiver<Command>, shared: Arc<Shared>) {
    let callbacks = actor.callbacks.clone();
    let outcome = catch_unwind(AssertUnwindSafe(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(actor.run(commands));
        Ok::<(), std::io::Error>(())
    }));
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("the driver's runtime did not start: {e}")),
        Err(panic) => Some(format!(
            "the driver thread failed: {}",
            panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        )),
    };
    if let Some(message) = failure {
        tracing::error!(%message, "scheduler driver");
        let _ = callbacks.send(Callback::Error(message));
    }
    shared.settle(None);
}

impl Actor {
    pub(super) fn new(
        shared: Arc<Shared>,
        transport: Arc<dyn Transport>,
        framework: v1::FrameworkInfo,
        options: DriverOptions,
        callbacks: Sender<Callback>,
    ) -> Self {
        let ack_permits = options.acknowledgements_in_flight.clamp(1, 1 << 16) as u32;
        Self {
            shared,
            transport,
            suppressed: options.suppressed_roles.iter().cloned().collect(),
            framework,
            update_on_connect: false,
            registered: false,
            link: Connection::Idle,
            offers: HashSet::new(),
            callbacks,
            acks: Arc::new(Semaphore::new(ack_permits as usize)),
            ack_permits,
            options,
            lane: None,
            subscribing: None,
            events: None,
            backoff: None,
        }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let (lane, inbox) = mpsc::unbounded_channel();
        tokio::spawn(run_lane(self.transport.clone(), inbox));
        self.lane = Some(lane);
        self.on_link(LinkEvent::Start);
        self.subscribe();
        loop {
            let flow = tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => Flow::Exit,
                },
                result = pending_or(&mut self.subscribing) => {
                    self.subscribing = None;
                    self.subscribed(result);
                    Flow::Go
                }
                event = next_event(&mut self.events) => {
                    self.event(event);
                    Flow::Go
                }
                () = pending_or(&mut self.backoff) => {
                    self.backoff = None;
                    if self.on_link(LinkEvent::BackoffElapsed) {
                        self.subscribe();
                    }
                    Flow::Go
                }
            };
            if flow == Flow::Exit {
                break;
            }
        }
        // Dropping the actor closes the stream (the master sees the
        // framework disconnect), the lane and the callback channel.
    }

    /// Applies a link event; true when the link moved.
    fn on_link(&mut self, event: LinkEvent) -> bool {
        match self.link.on(event) {
            Transition::To(next) => {
                self.link = next;
                true
            }
            Transition::Ignored => false,
        }
    }

    fn connected(&self) -> bool {
        self.link.is_connected()
    }

    fn status(&self) -> Status {
        self.shared.status()
    }

    fn callback(&self, callback: Callback) {
        let _ = self.callbacks.send(callback);
    }

    /// Sends SUBSCRIBE with the framework info (and id, once known) and the
    /// suppressed roles.
    fn subscribe(&mut self) {
        let subscribe = call::Subscribe {
            framework_info: self.framework.clone(),
            suppressed_roles: self.suppressed.iter().cloned().collect(),
            offer_constraints: None,
        };
        self.subscribing = Some(self.transport.subscribe(subscribe));
    }

    /// The outcome of a SUBSCRIBE.
    fn subscribed(&mut self, result: Result<Subscription, ClientError>) {
        match result {
            Ok(subscription) => {
                if !self.on_link(LinkEvent::Subscribed) {
                    return;
                }
                let Subscription {
                    subscribed, events, ..
                } = subscription;
                let id = subscribed.framework_id;
                tracing::info!(framework = %id.value, "subscribed");
                self.framework.id = Some(id.clone());
                self.shared.state().framework_id = Some(id.clone());
                self.events = Some(events);
                self.offers.clear();
                if self.status() != Status::DriverRunning {
                    // Aborted while subscribing: connected only so that a
                    // later stop can tear down.
                    self.quiesce();
                    return;
                }
                let master = subscribed.master_info.unwrap_or_default();
                if self.registered {
                    self.callback(Callback::Reregistered(master));
                } else {
                    self.registered = true;
                    self.callback(Callback::Registered(id, master));
                }
                if std::mem::take(&mut self.update_on_connect) {
                    self.send(self.update_framework_call());
                }
            }
            Err(e) => {
                let transient = e.is_transient() && self.status() == Status::DriverRunning;
                if !self.on_link(LinkEvent::SubscribeFailed { transient }) {
                    return;
                }
                match self.link {
                    Connection::Waiting { attempt } => {
                        let delay = self.options.backoff.delay(
                            attempt,
                            self.framework.failover_timeout,
                            jitter(),
                        );
                        tracing::warn!(error = %e, attempt, ?delay, "subscription failed; trying again");
                        self.backoff = Some(Box::pin(tokio::time::sleep(delay)));
                    }
                    _ if self.status() == Status::DriverRunning => {
                        self.callback(Callback::Error(format!("subscription failed: {e}")));
                    }
                    _ => {}
                }
            }
        }
    }

    /// An item of the event stream.
    fn event(&mut self, item: Option<Result<Event, StreamError>>) {
        match item {
            Some(Ok(event)) => self.on_event(event),
            Some(Err(StreamError::Decode(e))) => {
                self.fail(format!("Failed to de-serialize event: {e}"));
            }
            Some(Err(e)) => self.stream_lost(&e.to_string()),
            None => self.stream_lost("the event stream ended"),
        }
    }

    /// The open stream is gone: reconnect while running, else close.
    fn stream_lost(&mut self, reason: &str) {
        self.events = None;
        self.offers.clear();
        if self.status() != Status::DriverRunning {
            self.on_link(LinkEvent::Close);
            return;
        }
        if self.on_link(LinkEvent::StreamLost) {
            tracing::warn!(%reason, "disconnected from the master; subscribing again");
            self.callback(Callback::Disconnected);
            self.subscribe();
        }
    }

    /// Gives up on the link and has the scheduler hear `message` as an error.
    fn fail(&mut self, message: String) {
        self.events = None;
        self.subscribing = None;
        self.backoff = None;
        self.on_link(LinkEvent::Close);
        if self.status() == Status::DriverRunning {
            self.callback(Callback::Error(message));
        }
    }

    fn on_event(&mut self, event: Event) {
        let running = self.status() == Status::DriverRunning;
        use event::Type;
        match event.r#type() {
            Type::Offers => {
                let offers = event.offers.map(|o| o.offers).unwrap_or_default();
                if running {
                    self.offers
                        .extend(offers.iter().map(|o| o.id.value.clone()));
                    self.callback(Callback::Offers(offers));
                } else {
                    // Aborted: nobody will answer these.
                    self.decline_all(offers.into_iter().map(|o| o.id).collect());
                }
            }
            Type::Rescind => {
                if let Some(r) = event.rescind {
                    self.offers.remove(&r.offer_id.value);
                    if running {
                        self.callback(Callback::Rescinded(r.offer_id));
                    }
                }
            }
            Type::Update => {
                if let (Some(mut update), true) = (event.update, running) {
                    if update.status.uuid.as_ref().is_some_and(Vec::is_empty) {
                        update.status.uuid = None;
                    }
                    self.callback(Callback::Update(update.status));
                }
            }
            Type::Message => {
                if let (Some(m), true) = (event.message, running) {
                    self.callback(Callback::Message {
                        executor_id: m.executor_id,
                        agent_id: m.agent_id,
                        data: m.data,
                    });
                }
            }
            Type::Failure => match event.failure {
                Some(event::Failure {
                    agent_id: Some(agent_id),
                    executor_id: Some(executor_id),
                    status,
                }) if running => self.callback(Callback::ExecutorLost {
                    executor_id,
                    agent_id,
                    status: status.unwrap_or_default(),
                }),
                Some(event::Failure {
                    agent_id: Some(agent_id),
                    executor_id: None,
                    ..
                }) if running => self.callback(Callback::AgentLost(agent_id)),
                _ => {}
            },
            Type::Error => {
                let message = event.error.map(|e| e.message).unwrap_or_default();
                // The master is done with this stream (failed over, removed):
                // never resubscribe from here.
                self.fail(message);
            }
            // The watchdog has seen it; the rest this driver does not handle
            // (upstream's neither).
            Type::Heartbeat
            | Type::Subscribed
            | Type::InverseOffers
            | Type::RescindInverseOffer
            | Type::UpdateOperationStatus
            | Type::Unknown => {}
        }
    }

    async fn command(&mut self, command: Command) -> Flow {
        match command {
            Command::Call(call) => {
                if self.connected() {
                    self.send(*call);
                } else {
                    tracing::debug!(
                        call = call.r#type().as_str_name(),
                        "disconnected: call dropped"
                    );
                }
            }
            Command::Accept(accept) => {
                for id in &accept.offer_ids {
                    self.offers.remove(&id.value);
                }
                if self.connected() {
                    self.send(make_call(call::Type::Accept, |c| c.accept = Some(accept)));
                } else {
                    self.lost_locally(&accept);
                }
            }
            Command::Acknowledge(ack) => {
                if self.connected() {
                    self.acknowledge(ack);
                }
            }
            Command::Revive(roles) => {
                if roles.is_empty() {
                    self.suppressed.clear();
                } else {
                    for r in &roles {
                        self.suppressed.remove(r);
                    }
                }
                self.send_or_later(make_call(call::Type::Revive, |c| {
                    c.revive = Some(call::Revive { roles })
                }));
            }
            Command::Suppress(roles) => {
                if roles.is_empty() {
                    self.suppressed = roles_of(&self.framework);
                } else {
                    self.suppressed.extend(roles.iter().cloned());
                }
                self.send_or_later(make_call(call::Type::Suppress, |c| {
                    c.suppress = Some(call::Suppress { roles })
                }));
            }
            Command::UpdateFramework(info, suppressed) => self.update_framework(*info, suppressed),
            Command::Fail(message) => self.callback(Callback::Error(message)),
            Command::Abort => {
                self.quiesce();
                self.shared.settle(Some(Status::DriverAborted));
            }
            Command::Stop { failover } => {
                self.stop(failover).await;
                self.shared.settle(Some(Status::DriverStopped));
                return Flow::Exit;
            }
            Command::Release => {
                self.flush(tokio::time::Instant::now() + self.options.teardown_timeout)
                    .await;
                return Flow::Exit;
            }
        }
        Flow::Go
    }

    /// Queues a call on the ordered lane, with the framework id.
    fn send(&mut self, mut call: Call) {
        call.framework_id = self.framework.id.clone();
        if let Some(decline) = &call.decline {
            for id in &decline.offer_ids {
                self.offers.remove(&id.value);
            }
        }
        if let Some(lane) = &self.lane {
            let _ = lane.send(Lane::Call(Box::new(call), None));
        }
    }

    /// Revive and suppress: sent now, or their effect (the suppressed roles)
    /// goes with the next subscription.
    fn send_or_later(&mut self, call: Call) {
        if self.connected() {
            self.send(call);
        } else {
            self.update_on_connect = true;
        }
    }

    fn acknowledge(&self, ack: call::Acknowledge) {
        let mut c = make_call(call::Type::Acknowledge, |c| c.acknowledge = Some(ack));
        c.framework_id = self.framework.id.clone();
        let transport = self.transport.clone();
        let permits = self.acks.clone();
        tokio::spawn(async move {
            let _permit = permits.acquire_owned().await;
            if let Err(e) = transport.call(c).await {
                tracing::warn!(error = %e, "acknowledgement failed");
            }
        });
    }

    fn update_framework_call(&self) -> Call {
        make_call(call::Type::UpdateFramework, |c| {
            c.update_framework = Some(call::UpdateFramework {
                framework_info: self.framework.clone(),
                suppressed_roles: self.suppressed.iter().cloned().collect(),
                offer_constraints: None,
            })
        })
    }

    fn update_framework(&mut self, mut info: v1::FrameworkInfo, suppressed: Vec<String>) {
        if self.framework.id.is_none() {
            return self.callback(Callback::Error(
                "update_framework must not be called before registration with the master"
                    .to_string(),
            ));
        }
        if info.id != self.framework.id {
            return self.callback(Callback::Error(format!(
                "The 'FrameworkInfo.id' given to update_framework ({}) must be the framework's ({})",
                info.id.as_ref().map_or("", |i| i.value.as_str()),
                self.framework.id.as_ref().map_or("", |i| i.value.as_str()),
            )));
        }
        if info.user.is_empty() {
            info.user = self.framework.user.clone();
        }
        self.framework = info;
        self.suppressed = suppressed.into_iter().collect();
        let call = self.update_framework_call();
        self.send_or_later(call);
    }

    /// ACCEPT while disconnected: every task it would launch is lost (dropped
    /// for partition-aware frameworks), reported by the driver itself.
    fn lost_locally(&self, accept: &call::Accept) {
        let partition_aware = self
            .framework
            .capabilities
            .iter()
            .any(|c| c.r#type() == v1::framework_info::capability::Type::PartitionAware);
        let state = if partition_aware {
            v1::TaskState::TaskDropped
        } else {
            v1::TaskState::TaskLost
        };
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        use v1::offer::operation::Type as Op;
        let tasks = accept.operations.iter().flat_map(|op| match op.r#type() {
            Op::Launch => op
                .launch
                .as_ref()
                .map(|l| l.task_infos.iter().collect::<Vec<_>>())
                .unwrap_or_default(),
            Op::LaunchGroup => op
                .launch_group
                .as_ref()
                .map(|l| l.task_group.tasks.iter().collect::<Vec<_>>())
                .unwrap_or_default(),
            _ => Vec::new(),
        });
        for task in tasks {
            self.callback(Callback::Update(v1::TaskStatus {
                task_id: task.task_id.clone(),
                state: state as i32,
                message: Some("Master disconnected".to_string()),
                source: Some(Source::Master as i32),
                reason: Some(Reason::MasterDisconnected as i32),
                timestamp: Some(timestamp),
                ..Default::default()
            }));
        }
    }

    /// `abort()`: give back what this framework holds and ask for no more.
    fn quiesce(&mut self) {
        if !self.connected() {
            return;
        }
        let outstanding: Vec<v1::OfferId> = self
            .offers
            .drain()
            .map(|value| v1::OfferId { value })
            .collect();
        self.decline_all(outstanding);
        self.send(make_call(call::Type::Suppress, |c| {
            c.suppress = Some(call::Suppress::default())
        }));
    }

    fn decline_all(&mut self, offer_ids: Vec<v1::OfferId>) {
        if offer_ids.is_empty() || !self.connected() {
            return;
        }
        self.send(make_call(call::Type::Decline, |c| {
            c.decline = Some(call::Decline {
                offer_ids,
                filters: None,
            })
        }));
    }

    /// `stop(failover)`: every call made before goes out first; then
    /// TEARDOWN unless failing over; then the stream closes. All of it
    /// within the teardown timeout.
    async fn stop(&mut self, failover: bool) {
        let deadline = tokio::time::Instant::now() + self.options.teardown_timeout;
        self.flush(deadline).await;
        if self.connected() && !failover {
            let (done, answer) = oneshot::channel();
            let teardown = make_call(call::Type::Teardown, |c| {
                c.framework_id = self.framework.id.clone()
            });
            if let Some(lane) = &self.lane {
                let _ = lane.send(Lane::Call(Box::new(teardown), Some(done)));
            }
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(Ok(_))) => tracing::info!("framework torn down"),
                Ok(Ok(Err(e))) => tracing::warn!(error = %e, "TEARDOWN failed"),
                _ => tracing::warn!("no answer to TEARDOWN in time"),
            }
        }
        self.events = None;
        self.subscribing = None;
        self.backoff = None;
        self.on_link(LinkEvent::Close);
    }

    /// Waits (until `deadline` at most) until the calls and
    /// acknowledgements made so far have been answered.
    async fn flush(&self, deadline: tokio::time::Instant) {
        let wait = async {
            if let Some(lane) = &self.lane {
                let (done, flushed) = oneshot::channel();
                if lane.send(Lane::Flush(done)).is_ok() {
                    let _ = flushed.await;
                }
            }
            // The semaphore is fair: taking every permit waits for the
            // acknowledgements already holding or queued for one.
            let _ = self.acks.acquire_many(self.ack_permits).await;
        };
        let _ = tokio::time::timeout_at(deadline, wait).await;
    }
}

/// Sends the lane's calls one after the other, in order.
async fn run_lane(transport: Arc<dyn Transport>, mut inbox: mpsc::UnboundedReceiver<Lane>) {
    while let Some(item) = inbox.recv().await {
        match item {
            Lane::Call(call, done) => {
                let kind = call.r#type();
                let result = transport.call(*call).await;
                if let Err(e) = &result {
                    tracing::warn!(call = kind.as_str_name(), error = %e, "call failed");
                }
                if let Some(done) = done {
                    let _ = done.send(result);
                }
            }
            Lane::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Awaits the future in `slot`, or never when there is none.
async fn pending_or<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The next item of the stream in `slot`, or never when there is none.
async fn next_event(slot: &mut Option<EventStream>) -> Option<Result<Event, StreamError>> {
    match slot {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}
