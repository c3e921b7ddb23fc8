//! The runner's task: one loop over the link's state. Subscribing waits for
//! the subscription (or a stop); connected waits for the next event, a
//! command or the next status retry; waiting waits out the backoff. Events
//! are handled one at a time, in order, and the provider is called on a
//! blocking thread with its panics caught.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Command, RunnerError, RunnerOptions, RunnerStatus};
use crate::http_client::{ClientError, EventStream, jitter};
use crate::provider::checkpoint::{Checkpoint, State};
use crate::provider::client::ProviderClient;
use crate::provider::feedback::Operations;
use crate::provider::link::{Link, LinkEvent, Transition};
use crate::provider::{Apply, ResourceProvider};
use crate::v1;
use crate::v1::resource_provider::{Event, call, event};

type Status = call::update_publish_resources_status::Status;

/// What the loop does next.
enum Next {
    Go,
    /// The runner ends (stopped, or `Some` fatal error).
    End(Option<RunnerError>),
}

pub(super) struct Actor<P> {
    provider: Arc<Mutex<P>>,
    options: RunnerOptions,
    client: ProviderClient,
    checkpoint: Checkpoint,
    state: State,
    book: Operations,
    version: Vec<u8>,
    link: Link,
    status: watch::Sender<RunnerStatus>,
    inbox: mpsc::UnboundedReceiver<Command>,
}

impl<P: ResourceProvider> Actor<P> {
    #[allow(clippy::too_many_arguments)] // The parts `spawn` made, moved in once.
    pub(super) fn new(
        provider: P,
        options: RunnerOptions,
        client: ProviderClient,
        checkpoint: Checkpoint,
        state: State,
        book: Operations,
        status: watch::Sender<RunnerStatus>,
        inbox: mpsc::UnboundedReceiver<Command>,
    ) -> Self {
        Self {
            provider: Arc::new(Mutex::new(provider)),
            options,
            client,
            checkpoint,
            state,
            book,
            version: Vec::new(),
            link: Link::Idle,
            status,
            inbox,
        }
    }

    pub(super) async fn run(mut self) -> Result<(), RunnerError> {
        let mut next = self.recover().await;
        if matches!(next, Next::Go) {
            self.step(LinkEvent::Start);
        }
        let mut events: Option<EventStream<Event>> = None;
        while let Next::Go = next {
            next = match self.link {
                Link::Idle | Link::Closed => Next::End(None),
                Link::Subscribing { .. } => self.subscribe(&mut events).await,
                Link::Connected => match events.take() {
                    Some(stream) => self.serve(stream).await,
                    None => {
                        self.step(LinkEvent::StreamLost);
                        Next::Go
                    }
                },
                Link::Waiting { attempt, .. } => {
                    // A stream whose UPDATE_STATE failed is closed meanwhile.
                    events = None;
                    self.back_off(attempt).await
                }
            };
        }
        // Dropping the stream closes the connection: the master takes the
        // provider's resources out of its offers.
        drop(events);
        self.step(LinkEvent::Close);
        let Next::End(error) = next else {
            return Ok(());
        };
        match error {
            None => {
                tracing::info!(id = ?self.state.provider_id, "resource provider stopped");
                Ok(())
            }
            Some(e) => {
                tracing::error!(error = %e, "resource provider gave up");
                self.status.send_modify(|s| s.error = Some(e.to_string()));
                Err(e)
            }
        }
    }

    /// Applies the link event and shows the new link.
    fn step(&mut self, event: LinkEvent) {
        if let Transition::To(link) = self.link.on(event) {
            self.link = link;
        }
        let link = self.link;
        self.status.send_modify(|s| s.link = link);
        self.show_book();
    }

    /// Shows how many statuses wait for an acknowledgement.
    fn show_book(&self) {
        let unacknowledged = self.book.unacknowledged();
        self.status
            .send_modify(|s| s.unacknowledged = unacknowledged);
    }

    fn save(&mut self) -> Result<(), RunnerError> {
        self.state.operations = self.book.all();
        self.checkpoint.save(&self.state)?;
        Ok(())
    }

    /// Operations recovered while they were being applied are applied again
    /// (their version was checked before); their statuses go out once subscribed.
    async fn recover(&mut self) -> Next {
        for uuid in self.book.applying() {
            tracing::info!(operation = %uuid_text(&uuid), "applying a recovered operation again");
            let status = self.apply_now(&uuid).await;
            self.book.decide(&uuid, status, false, Instant::now());
        }
        match self.save() {
            Ok(()) => Next::Go,
            Err(e) => Next::End(Some(e)),
        }
    }

    /// One SUBSCRIBE, with the kept id unless the master has shown it does
    /// not know it.
    async fn subscribe(&mut self, events: &mut Option<EventStream<Event>>) -> Next {
        let mut info = self.options.info.clone();
        info.id = self
            .state
            .provider_id
            .clone()
            .map(|value| v1::ResourceProviderId { value });
        let client = self.client.clone();
        let subscription = async move { client.subscribe(info).await };
        tokio::pin!(subscription);
        let result = loop {
            tokio::select! {
                result = &mut subscription => break result,
                command = self.inbox.recv() => match command {
                    Some(Command::ResourcesChanged) => {} // Reported once subscribed.
                    Some(Command::Stop) | None => return Next::End(None),
                },
            }
        };
        match result {
            Ok(sub) => {
                let id = sub.provider_id.value.clone();
                if self.state.provider_id.as_deref() != Some(id.as_str()) {
                    tracing::info!(%id, "resource provider subscribed with a new id");
                    self.state.provider_id = Some(id.clone());
                    if let Err(e) = self.save() {
                        return Next::End(Some(e));
                    }
                } else {
                    tracing::info!(%id, "resource provider resubscribed");
                }
                self.status.send_modify(|s| {
                    s.provider_id = Some(id);
                    s.subscriptions += 1;
                });
                self.step(LinkEvent::Subscribed);
                *events = Some(sub.events);
                self.after_subscribed().await
            }
            Err(ClientError::Dropped(why)) => {
                self.step(LinkEvent::Dropped);
                self.status.send_modify(|s| s.dropped_subscriptions += 1);
                tracing::warn!(%why, drops = self.link.drops(), "resource provider subscription dropped");
                if self.link.drops() >= self.options.forget_after.max(1)
                    && let Some(id) = self.state.provider_id.take()
                {
                    tracing::warn!(
                        %id,
                        "the master does not know this resource provider id: subscribing as a new provider"
                    );
                    self.status.send_modify(|s| s.forgotten_ids.push(id));
                    if let Err(e) = self.save() {
                        return Next::End(Some(e));
                    }
                }
                Next::Go
            }
            Err(e) => {
                let transient = e.is_transient();
                tracing::warn!(error = %e, transient, "resource provider subscription failed");
                self.step(LinkEvent::Failed { transient });
                if transient {
                    Next::Go
                } else {
                    Next::End(Some(e.into()))
                }
            }
        }
    }

    /// Right after SUBSCRIBED: the state, then every unacknowledged status.
    async fn after_subscribed(&mut self) -> Next {
        if let Next::End(e) = self.update_state().await {
            return Next::End(e);
        }
        if !self.link.is_connected() {
            return Next::Go;
        }
        for update in self.book.resume(Instant::now()) {
            self.send_status(update).await;
        }
        Next::Go
    }

    /// Waits out the backoff after failed attempt `attempt`.
    async fn back_off(&mut self, attempt: u32) -> Next {
        let delay = self
            .options
            .backoff
            .delay(attempt, None, 0.5 + jitter() / 2.0);
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => {
                    self.step(LinkEvent::BackoffElapsed);
                    return Next::Go;
                }
                command = self.inbox.recv() => match command {
                    Some(Command::ResourcesChanged) => {}
                    Some(Command::Stop) | None => return Next::End(None),
                },
            }
        }
    }

    /// Connected: events, commands and retries until the stream is lost.
    async fn serve(&mut self, mut events: EventStream<Event>) -> Next {
        loop {
            let retry_at = self.book.next_retry();
            let retry = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => self.on_event(event).await,
                    Some(Err(e)) if !e.is_fatal() => {
                        tracing::warn!(error = %e, "undecodable event from the master ignored");
                        Next::Go
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "resource provider stream lost");
                        self.lost();
                        Next::Go
                    }
                    None => {
                        tracing::warn!("resource provider stream ended");
                        self.lost();
                        Next::Go
                    }
                },
                command = self.inbox.recv() => match command {
                    Some(Command::ResourcesChanged) => self.update_state().await,
                    Some(Command::Stop) | None => return Next::End(None),
                },
                () = retry => {
                    for update in self.book.due(Instant::now()) {
                        self.send_status(update).await;
                    }
                    Next::Go
                }
            };
            if !matches!(next, Next::Go) || !self.link.is_connected() {
                return next;
            }
        }
    }

    /// The stream is gone: retries pause until the next subscription.
    fn lost(&mut self) {
        self.book.pause(Instant::now());
        self.step(LinkEvent::StreamLost);
    }

    async fn on_event(&mut self, event: Event) -> Next {
        match event.r#type() {
            event::Type::ApplyOperation => match event.apply_operation {
                Some(apply) => self.apply_operation(apply).await,
                None => Next::Go,
            },
            event::Type::PublishResources => {
                if let Some(publish) = event.publish_resources {
                    self.publish(publish).await;
                }
                Next::Go
            }
            event::Type::AcknowledgeOperationStatus => match event.acknowledge_operation_status {
                Some(ack) => self.acknowledge(ack),
                None => Next::Go,
            },
            event::Type::ReconcileOperations => {
                let uuids = event
                    .reconcile_operations
                    .map(|r| r.operation_uuids)
                    .unwrap_or_default();
                self.reconcile(uuids).await;
                Next::Go
            }
            event::Type::Subscribed => Next::Go,
            event::Type::Teardown => {
                tracing::info!("TEARDOWN from the master (ignored, as upstream's providers do)");
                Next::Go
            }
            event::Type::Unknown => {
                tracing::warn!("an event of an unknown type ignored");
                Next::Go
            }
        }
    }

    /// APPLY_OPERATION: applied when its version is the current one, else dropped.
    async fn apply_operation(&mut self, apply: event::ApplyOperation) -> Next {
        let uuid = apply.operation_uuid.value.clone();
        if self.book.get(&uuid).is_some() {
            tracing::info!(operation = %uuid_text(&uuid), "APPLY_OPERATION of a known operation ignored");
            return Next::Go;
        }
        let id = apply.info.id.clone();
        self.book.insert(v1::Operation {
            framework_id: apply.framework_id.clone(),
            agent_id: None,
            info: Box::new(apply.info),
            latest_status: self.status_of(
                id,
                v1::OperationState::OperationPending,
                None,
                Vec::new(),
                false,
            ),
            statuses: Vec::new(),
            uuid: apply.operation_uuid,
        });
        let current = apply.resource_version_uuid.value == self.version;
        let status = if current {
            if let Err(e) = self.save() {
                return Next::End(Some(e));
            }
            self.apply_now(&uuid).await
        } else {
            let message = format!(
                "Mismatched resource version {} (expected: {})",
                uuid_text(&apply.resource_version_uuid.value),
                uuid_text(&self.version)
            );
            tracing::warn!(operation = %uuid_text(&uuid), %message, "operation dropped");
            self.status.send_modify(|s| s.dropped_operations += 1);
            let id = self
                .book
                .get(&uuid)
                .and_then(|r| r.operation.info.id.clone());
            self.status_of(
                id,
                v1::OperationState::OperationDropped,
                Some(message),
                Vec::new(),
                true,
            )
        };
        let update = self.book.decide(&uuid, status, true, Instant::now());
        self.show_book();
        if let Err(e) = self.save() {
            return Next::End(Some(e));
        }
        if let Some(update) = update {
            self.send_status(update).await;
        }
        Next::Go
    }

    /// Calls the provider for a kept operation: its terminal status.
    async fn apply_now(&mut self, uuid: &[u8]) -> v1::OperationStatus {
        let Some(record) = self.book.get(uuid) else {
            return self.status_of(
                None,
                v1::OperationState::OperationFailed,
                Some("Unknown operation".into()),
                Vec::new(),
                true,
            );
        };
        let (info, framework_id) = (
            record.operation.info.clone(),
            record.operation.framework_id.clone(),
        );
        let id = info.id.clone();
        let text = uuid_text(uuid);
        let result = self
            .call_provider(move |p| {
                p.apply(Apply {
                    uuid: &text,
                    framework_id: framework_id.as_ref(),
                    info: &info,
                })
            })
            .await
            .and_then(|r| r);
        self.status.send_modify(|s| s.applied += 1);
        match result {
            Ok(converted) => {
                tracing::info!(operation = %uuid_text(uuid), "operation finished");
                let converted = self.stamp(converted, false);
                self.status_of(
                    id,
                    v1::OperationState::OperationFinished,
                    None,
                    converted,
                    true,
                )
            }
            Err(message) => {
                tracing::warn!(operation = %uuid_text(uuid), %message, "operation failed");
                self.status_of(
                    id,
                    v1::OperationState::OperationFailed,
                    Some(message),
                    Vec::new(),
                    true,
                )
            }
        }
    }

    /// PUBLISH_RESOURCES: the provider's answer, OK or FAILED.
    async fn publish(&mut self, publish: event::PublishResources) {
        let resources = publish.resources;
        let result = self
            .call_provider(move |p| p.publish(&resources))
            .await
            .and_then(|r| r);
        let status = match &result {
            Ok(()) => Status::Ok,
            Err(why) => {
                tracing::warn!(%why, "publishing resources failed");
                Status::Failed
            }
        };
        self.status.send_modify(|s| s.publishes += 1);
        let answer = call::UpdatePublishResourcesStatus {
            uuid: publish.uuid,
            status: status as i32,
        };
        if let Err(e) = self.client.update_publish_resources_status(answer).await {
            tracing::warn!(error = %e, "UPDATE_PUBLISH_RESOURCES_STATUS failed");
        }
    }

    fn acknowledge(&mut self, ack: event::AcknowledgeOperationStatus) -> Next {
        let (op, status) = (&ack.operation_uuid.value, &ack.status_uuid.value);
        if self.book.acknowledge(op, status, Instant::now()) {
            tracing::info!(operation = %uuid_text(op), "operation status acknowledged");
            self.show_book();
            if let Err(e) = self.save() {
                return Next::End(Some(e));
            }
        }
        Next::Go
    }

    /// RECONCILE_OPERATIONS: known operations' latest statuses again;
    /// OPERATION_DROPPED, once and without a status uuid, for the others.
    async fn reconcile(&mut self, uuids: Vec<v1::Uuid>) {
        for uuid in uuids {
            if self.book.get(&uuid.value).is_some() {
                if let Some(update) = self.book.ask(&uuid.value, Instant::now()) {
                    self.send_status(update).await;
                }
                continue;
            }
            let status = self.status_of(
                None,
                v1::OperationState::OperationDropped,
                Some("Unknown operation".to_string()),
                Vec::new(),
                false,
            );
            let update = call::UpdateOperationStatus {
                framework_id: None,
                status,
                latest_status: None,
                operation_uuid: uuid,
            };
            self.send_status(update).await;
        }
    }

    /// UPDATE_STATE with a new resource version, taken before the total is
    /// read: an APPLY_OPERATION made against the old total is dropped.
    async fn update_state(&mut self) -> Next {
        self.version = uuid::Uuid::new_v4().as_bytes().to_vec();
        let resources = match self.call_provider(|p| p.resources()).await {
            Ok(r) => self.stamp(r, true),
            Err(why) => return Next::End(Some(RunnerError::Provider(why))),
        };
        let update = call::UpdateState {
            operations: self.book.all(),
            resources,
            resource_version_uuid: v1::Uuid {
                value: self.version.clone(),
            },
        };
        match self.client.update_state(update).await {
            Ok(()) => {
                let version = self.version.clone();
                self.status.send_modify(|s| {
                    s.state_updates += 1;
                    s.resource_version = version;
                });
                Next::Go
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, "UPDATE_STATE failed: subscribing again after a backoff");
                self.book.pause(Instant::now());
                self.step(LinkEvent::Failed { transient: true });
                Next::Go
            }
            Err(e) => Next::End(Some(e.into())),
        }
    }

    async fn send_status(&mut self, update: call::UpdateOperationStatus) {
        self.status.send_modify(|s| s.status_updates += 1);
        if let Err(e) = self.client.update_operation_status(update).await {
            tracing::warn!(error = %e, "UPDATE_OPERATION_STATUS failed (retried later)");
        }
    }

    /// Runs `f` on the provider on a blocking thread; a panic becomes `Err`.
    async fn call_provider<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut P) -> R + Send + 'static,
    ) -> Result<R, String> {
        let provider = self.provider.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut p = provider.lock().unwrap_or_else(PoisonError::into_inner);
            std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut p)))
        })
        .await;
        match joined {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(panic)) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(%why, "the resource provider panicked");
                Err(format!("the resource provider panicked: {why}"))
            }
            Err(e) => Err(format!("the resource provider's call did not end: {e}")),
        }
    }

    /// Resources with this provider's id (and, for its total, unallocated).
    fn stamp(&self, mut resources: Vec<v1::Resource>, unallocate: bool) -> Vec<v1::Resource> {
        let id = self
            .state
            .provider_id
            .clone()
            .map(|value| Box::new(v1::ResourceProviderId { value }));
        for r in &mut resources {
            r.provider_id = id.clone();
            if unallocate {
                r.allocation_info = None;
            }
        }
        resources
    }

    /// A status of this provider; `with_uuid` for one to be acknowledged.
    fn status_of(
        &self,
        operation_id: Option<v1::OperationId>,
        state: v1::OperationState,
        message: Option<String>,
        converted: Vec<v1::Resource>,
        with_uuid: bool,
    ) -> v1::OperationStatus {
        v1::OperationStatus {
            operation_id,
            state: state as i32,
            message,
            converted_resources: converted,
            uuid: with_uuid.then(|| v1::Uuid {
                value: uuid::Uuid::new_v4().as_bytes().to_vec(),
            }),
            agent_id: None,
            resource_provider_id: self
                .state
                .provider_id
                .clone()
                .map(|value| v1::ResourceProviderId { value }),
        }
    }
}

/// A uuid's bytes as text (hex when they are not 16 bytes).
pub fn uuid_text(bytes: &[u8]) -> String {
    match uuid::Uuid::from_slice(bytes) {
        Ok(u) => u.to_string(),
        Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
