//! Resource providers (Mesos' v1 resource provider API, `POST
//! /api/v1/resource_provider`): a provider subscribes on an agent's endpoint
//! (`/slave(N)/api/v1/resource_provider`, a local provider whose resources
//! join that agent) or on the master's own (an external provider whose
//! resources stand on an agent of their own, which runs no tasks).
//!
//! What the master keeps per provider: its info and id (assigned at the first
//! SUBSCRIBE, kept across reconnections), its stream, its resources and the
//! resource version it last reported, and the resources its pending
//! operations hold. Its resources are a pool of their agent (see `pools.rs`),
//! so the core offers them like the agent's own.
//!
//! Protocol, as upstream: UPDATE_STATE replaces the provider's resources; a
//! new resource version rescinds the offers holding them; operations the
//! master knows as pending but the provider does not list get
//! RECONCILE_OPERATIONS. An operation on provider resources (CREATE_DISK,
//! DESTROY_DISK, and GROW/SHRINK of a provider's volume) becomes
//! APPLY_OPERATION stamped with the last resource version the provider
//! reported; the provider applies it or drops it (OPERATION_DROPPED) and
//! reports UPDATE_OPERATION_STATUS, which it retries until the master sends
//! ACKNOWLEDGE_OPERATION_STATUS (when the framework acknowledged it, or at
//! once for an operation without an id). A launch using provider resources
//! waits for PUBLISH_RESOURCES to be answered OK; FAILED, or no answer within
//! the publish timeout, fails the task. A provider whose stream closes takes
//! its resources out of the offers; its pending operations become
//! OPERATION_UNREACHABLE until it subscribes again with its id. Upstream
//! sends providers no heartbeats, and neither does this master.

use std::time::Duration;

use tokio::sync::mpsc;
use unisched_core::scheduler::offers::OfferChange;

use super::state::{FastMap, Master, Timer, new_uuid};
use super::{CallError, CallOutcome};
use crate::agent::{AgentBackend, Launch};
use crate::resources::Resources;
use crate::v1;
use crate::v1::resource_provider::{Call, Event, call, event};

/// How long a launch waits for its resources to be published.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// The open stream of a subscribed provider.
#[derive(Debug, Clone)]
pub struct ProviderStream {
    /// Its `Mesos-Stream-Id`.
    pub id: String,
    /// Where its events go.
    pub sink: mpsc::Sender<Event>,
}

/// A resource provider the master knows.
#[derive(Debug)]
pub struct Provider {
    /// What it subscribed with (id filled in).
    pub info: v1::ResourceProviderInfo,
    /// The agent its resources stand on.
    pub agent: String,
    /// True for a provider that subscribed on the master itself.
    pub external: bool,
    /// Its stream while subscribed.
    pub stream: Option<ProviderStream>,
    /// The resource version it last reported.
    pub version: Option<Vec<u8>>,
    /// Its resources (with its provider id), as last reported; in the
    /// agent's total while it is subscribed.
    pub resources: Resources,
}

/// A launch waiting for its provider resources to be published.
#[derive(Debug)]
pub struct PendingPublish {
    /// The provider asked.
    pub provider: String,
    /// Framework id.
    pub framework: String,
    /// Task id.
    pub task: String,
    /// What the agent runs once they are.
    pub launch: Launch,
}

/// An agent that runs no tasks: the stand of an external provider's resources.
pub struct NoTasks;

impl AgentBackend for NoTasks {
    fn launch(&self, _launch: Launch) {}
    fn kill_task(&self, _framework_id: &str, _task_id: &str, _grace: Duration) {}
    fn shutdown_executor(&self, _framework_id: &str, _executor_id: &str) {}
    fn shutdown_framework(&self, _framework_id: &str) {}
    fn framework_message(&self, _framework_id: &str, _executor_id: &str, _data: Vec<u8>) {}
    fn stop(&self) {}
}

fn uuid_of(u: &v1::Uuid) -> Vec<u8> {
    u.value.clone()
}

/// Checks a provider call as upstream does before it reaches the master.
pub fn validate_call(c: &Call) -> Result<(), String> {
    let Some(kind) = c.r#type.and_then(|t| call::Type::try_from(t).ok()) else {
        return Err("Expecting 'type' to be present".to_string());
    };
    let missing = super::http::expecting;
    match kind {
        call::Type::Subscribe => missing(c.subscribe.is_some(), "subscribe"),
        call::Type::UpdateOperationStatus => {
            missing(c.resource_provider_id.is_some(), "resource_provider_id")?;
            missing(
                c.update_operation_status.is_some(),
                "update_operation_status",
            )
        }
        call::Type::UpdateState => {
            missing(c.resource_provider_id.is_some(), "resource_provider_id")?;
            missing(c.update_state.is_some(), "update_state")
        }
        call::Type::UpdatePublishResourcesStatus => {
            missing(c.resource_provider_id.is_some(), "resource_provider_id")?;
            missing(
                c.update_publish_resources_status.is_some(),
                "update_publish_resources_status",
            )
        }
        call::Type::Unknown => Err("Expecting 'type' to be present".to_string()),
    }
}

impl Master {
    /// The agent an endpoint `/slave(N)/...` names, or the master's own (None).
    pub(super) fn agent_of_endpoint(
        &self,
        endpoint: Option<u32>,
    ) -> Result<Option<String>, CallError> {
        match endpoint {
            None => Ok(None),
            Some(n) => self
                .agents
                .values()
                .find(|a| a.pid == n)
                .map(|a| Some(String::from(&*a.id)))
                .ok_or_else(|| CallError {
                    status: 404,
                    message: format!("No agent slave({n})"),
                }),
        }
    }

    /// SUBSCRIBE of a provider on `endpoint` (an agent's, or the master's).
    pub(super) fn provider_subscribe(
        &mut self,
        endpoint: Option<u32>,
        subscribe: call::Subscribe,
        stream_id: String,
        sink: mpsc::Sender<Event>,
    ) {
        let Ok(agent) = self.agent_of_endpoint(endpoint) else {
            return; // The stream closes with no SUBSCRIBED.
        };
        let mut info = subscribe.resource_provider_info;
        let stream = ProviderStream {
            id: stream_id,
            sink,
        };
        let id = match info.id.as_ref().map(|i| i.value.clone()) {
            Some(id) => {
                let Some(p) = self.providers.get_mut(&id) else {
                    tracing::info!(provider = %id, "dropping the resubscription of an unknown resource provider");
                    return;
                };
                let moved = match &agent {
                    Some(a) => *a != p.agent || p.external,
                    None => !p.external,
                };
                if p.info.r#type != info.r#type || p.info.name != info.name || moved {
                    tracing::info!(provider = %id, "dropping a resubscription that does not match the provider's information");
                    return;
                }
                p.info = info;
                p.stream = Some(stream);
                id
            }
            None => {
                let id = super::state::new_uuid_value().to_string();
                info.id = Some(v1::ResourceProviderId { value: id.clone() });
                let (agent, external) = match agent {
                    Some(a) => (a, false),
                    None => (self.add_provider_agent(&info), true),
                };
                self.providers.insert(
                    id.clone(),
                    Provider {
                        info,
                        agent,
                        external,
                        stream: Some(stream),
                        version: None,
                        resources: Resources::default(),
                    },
                );
                id
            }
        };
        tracing::info!(provider = %id, "resource provider subscribed");
        self.send_provider(
            &id,
            Event {
                r#type: Some(event::Type::Subscribed as i32),
                subscribed: Some(event::Subscribed {
                    provider_id: v1::ResourceProviderId { value: id.clone() },
                }),
                ..Default::default()
            },
        );
    }

    /// The agent an external provider's resources stand on.
    fn add_provider_agent(&mut self, info: &v1::ResourceProviderInfo) -> String {
        let id = self.add_agent(super::AgentSpec {
            hostname: format!("{}.{}", info.r#type, info.name),
            resources: Resources::default(),
            occupied: Resources::default(),
            attributes: info.attributes.clone(),
            backend: Box::new(|_: &str| {
                std::sync::Arc::new(NoTasks) as std::sync::Arc<dyn AgentBackend>
            }),
        });
        if let Some(a) = self.agents.get_mut(&id) {
            a.external = true;
        }
        id
    }

    /// Any provider call but SUBSCRIBE: the provider must be subscribed on
    /// this endpoint and name its stream.
    pub(super) fn provider_call(
        &mut self,
        endpoint: Option<u32>,
        c: Call,
        stream_id: Option<String>,
    ) -> Result<CallOutcome, CallError> {
        let agent = self.agent_of_endpoint(endpoint)?;
        let id = c
            .resource_provider_id
            .as_ref()
            .map(|p| p.value.clone())
            .unwrap_or_default();
        let Some(p) = self.providers.get(&id).filter(|p| p.stream.is_some()) else {
            return Err(CallError::bad_request(
                "Resource provider is not subscribed",
            ));
        };
        let here = match &agent {
            Some(a) => *a == p.agent && !p.external,
            None => p.external,
        };
        if !here {
            return Err(CallError::bad_request(
                "Resource provider is not subscribed",
            ));
        }
        let Some(stream_id) = stream_id else {
            return Err(CallError::bad_request(
                "All non-subscribe calls should include to 'Mesos-Stream-Id' header",
            ));
        };
        if p.stream.as_ref().is_none_or(|s| s.id != stream_id) {
            return Err(CallError::bad_request(format!(
                "The stream ID '{stream_id}' included in this request didn't match the stream ID currently associated with  resource provider ID {id}"
            )));
        }
        match c.r#type() {
            call::Type::UpdateState => {
                let update = c.update_state.unwrap_or_default();
                self.provider_update_state(&id, update)?;
            }
            call::Type::UpdateOperationStatus => {
                if let Some(u) = c.update_operation_status {
                    self.provider_operation_status(&id, u);
                }
            }
            call::Type::UpdatePublishResourcesStatus => {
                if let Some(u) = c.update_publish_resources_status {
                    self.provider_publish_status(&uuid_of(&u.uuid), u.status());
                }
            }
            call::Type::Subscribe | call::Type::Unknown => {
                return Err(CallError {
                    status: 501,
                    message: String::new(),
                });
            }
        }
        Ok(CallOutcome::Accepted)
    }

    /// Sends an event to a provider's stream; one that cannot take it is
    /// closed (the provider reconnects).
    fn send_provider(&mut self, id: &str, e: Event) {
        let Some(p) = self.providers.get(id) else {
            return;
        };
        let Some(stream) = &p.stream else {
            return;
        };
        if stream.sink.try_send(e).is_err() {
            let stream_id = stream.id.clone();
            tracing::warn!(provider = %id, "resource provider stream cannot keep up or is gone: closing it");
            self.provider_closed(id, &stream_id);
        }
    }

    /// UPDATE_STATE: the provider's resources, version and operations.
    fn provider_update_state(
        &mut self,
        id: &str,
        update: call::UpdateState,
    ) -> Result<(), CallError> {
        for r in &update.resources {
            if r.provider_id.as_ref().map(|p| p.value.as_str()) != Some(id) {
                return Err(CallError::bad_request(format!(
                    "Inconsistent call: resource {} does not belong to resource provider {id}",
                    crate::resources::display_resource(r)
                )));
            }
        }
        let resources = Resources::try_from_vec(update.resources)
            .map_err(|e| CallError::bad_request(format!("Invalid resources: {e}")))?;
        let version = uuid_of(&update.resource_version_uuid);
        let p = self.providers.get_mut(id).expect("provider exists");
        let changed = p.version.as_deref() != Some(version.as_slice());
        let old = std::mem::replace(&mut p.resources, resources.clone());
        p.version = Some(version);
        let agent = p.agent.clone();
        if changed {
            self.rescind_provider_offers(id);
        }
        if let Some(a) = self.agents.get_mut(&agent) {
            a.total.subtract(&old);
            a.total.add(&resources);
        }
        self.recompute_free(&agent);
        self.sync_pools(&agent);
        // Operations the master takes as pending that the provider does not
        // list: it is asked about them.
        let listed: std::collections::BTreeSet<Vec<u8>> =
            update.operations.iter().map(|o| uuid_of(&o.uuid)).collect();
        for o in &update.operations {
            if let Some(latest) = Some(&o.latest_status)
                && latest.state().is_terminal()
            {
                let uuid = uuid_of(&o.uuid);
                if self
                    .operations
                    .get(&uuid)
                    .is_some_and(|op| !op.state().is_terminal())
                {
                    // The resources of this UPDATE_STATE already hold what
                    // the operation converted: only its state changes.
                    self.operation_status_from(
                        id,
                        call::UpdateOperationStatus {
                            framework_id: o.framework_id.clone(),
                            status: latest.clone(),
                            latest_status: Some(latest.clone()),
                            operation_uuid: o.uuid.clone(),
                        },
                        false,
                    );
                }
            }
        }
        let missing: Vec<v1::Uuid> = self
            .operations
            .values()
            .filter(|o| o.provider.as_deref() == Some(id))
            .filter(|o| !o.state().is_terminal())
            .filter(|o| !listed.contains(&o.uuid))
            .map(|o| v1::Uuid {
                value: o.uuid.clone(),
            })
            .collect();
        if !missing.is_empty() {
            self.send_provider(
                id,
                Event {
                    r#type: Some(event::Type::ReconcileOperations as i32),
                    reconcile_operations: Some(event::ReconcileOperations {
                        operation_uuids: missing,
                    }),
                    ..Default::default()
                },
            );
        }
        self.core.offers(vec![OfferChange::Allocate]);
        Ok(())
    }

    /// Rescinds every outstanding offer that holds the provider's resources.
    fn rescind_provider_offers(&mut self, provider: &str) {
        let mut holding: Vec<u64> = self
            .offers
            .values()
            .filter(|o| {
                o.resources
                    .iter()
                    .any(|r| r.provider_id.as_ref().is_some_and(|p| p.value == provider))
            })
            .map(|o| o.number)
            .collect();
        holding.sort_unstable();
        for o in holding {
            self.rescind(o, true);
        }
    }

    /// Recomputes an agent's free resources from its total, what its tasks
    /// and outstanding offers hold, and what pending operations hold.
    pub(super) fn recompute_free(&mut self, agent: &str) {
        let mut held = Resources::default();
        for o in self.offers.values().filter(|o| *o.agent == *agent) {
            held.add(&o.resources.unallocated());
        }
        for op in self.operations.values().filter(|o| *o.agent == *agent) {
            held.add(&op.consumed);
        }
        if let Some(a) = self.agents.get_mut(agent) {
            a.reset_free(&held);
        }
    }

    /// Sends an operation on provider resources to its provider. The
    /// resources it consumes (allocated form) are held by the operation
    /// until it ends; `Err` when no subscribed provider holds them.
    pub(super) fn apply_provider_operation(
        &mut self,
        framework: &str,
        agent: &str,
        op: &v1::offer::Operation,
        consumed: &Resources,
    ) -> Result<(), String> {
        let provider = consumed
            .iter()
            .find_map(|r| r.provider_id.as_ref().map(|p| p.value.clone()))
            .ok_or("The operation's resources are not a resource provider's")?;
        let Some(p) = self.providers.get(&provider) else {
            return Err(format!("Resource provider {provider} is unknown"));
        };
        if p.agent != agent {
            return Err(format!(
                "Resource provider {provider} is not on agent {agent}"
            ));
        }
        if p.stream.is_none() {
            return Err(format!("Resource provider {provider} is disconnected"));
        }
        let version = p.version.clone().unwrap_or_default();
        let uuid = self.record_operation(framework, agent, Some(provider.clone()), op.clone());
        if let Some(o) = self.operations.get_mut(&uuid) {
            o.consumed = consumed.unallocated();
        }
        self.send_provider(
            &provider,
            Event {
                r#type: Some(event::Type::ApplyOperation as i32),
                apply_operation: Some(event::ApplyOperation {
                    framework_id: Some(v1::FrameworkId {
                        value: framework.to_string(),
                    }),
                    info: op.clone(),
                    operation_uuid: v1::Uuid {
                        value: uuid.clone(),
                    },
                    resource_version_uuid: v1::Uuid { value: version },
                }),
                ..Default::default()
            },
        );
        Ok(())
    }

    /// UPDATE_OPERATION_STATUS from a provider.
    fn provider_operation_status(&mut self, id: &str, update: call::UpdateOperationStatus) {
        self.operation_status_from(id, update, true);
    }

    /// A provider's status of an operation; a FINISHED one converts the
    /// resources it consumed when `convert` (not when the provider's
    /// UPDATE_STATE listed it: its resources are already the converted ones).
    fn operation_status_from(
        &mut self,
        id: &str,
        update: call::UpdateOperationStatus,
        convert: bool,
    ) {
        let uuid = uuid_of(&update.operation_uuid);
        let status_uuid = update.status.uuid.as_ref().map(uuid_of);
        let Some(op) = self.operations.get(&uuid) else {
            // Unknown (already acknowledged and forgotten): acknowledge again
            // so the provider stops retrying.
            if let Some(s) = status_uuid {
                self.provider_acknowledge(id, &uuid, &s);
            }
            return;
        };
        if op.provider.as_deref() != Some(id) {
            return;
        }
        let seen = status_uuid.as_ref().is_some_and(|s| {
            op.statuses
                .iter()
                .any(|st| st.uuid.as_ref().is_some_and(|u| u.value == *s))
        });
        if seen {
            // A retry of an update the framework has not acknowledged yet.
            return;
        }
        let was_terminal = op.state().is_terminal();
        let state = update.status.state();
        let kind = op.info.r#type();
        let agent = op.agent.clone();
        let has_id = !op.id.is_empty();
        if state.is_terminal() && !was_terminal {
            self.count_operation(kind, state);
            let consumed = self.operations[&uuid].consumed.clone();
            let converted = Resources::from_vec(update.status.converted_resources.clone());
            if convert && state == v1::OperationState::OperationFinished {
                if let Some(p) = self.providers.get_mut(id) {
                    p.resources.subtract(&consumed);
                    p.resources.add(&converted.unallocated());
                }
                if let Some(a) = self.agents.get_mut(&agent) {
                    a.convert(&consumed, &converted);
                }
            }
            if let Some(o) = self.operations.get_mut(&uuid) {
                o.consumed = Resources::default();
            }
            self.recompute_free(&agent);
            self.sync_pools(&agent);
            self.core.offers(vec![OfferChange::Allocate]);
        }
        // An operation whose framework was removed is the master's alone.
        let orphan = !self
            .frameworks
            .contains_key(&self.operations[&uuid].framework);
        if has_id && !orphan {
            self.operation_update_with(
                &uuid,
                state,
                update.status.message.clone(),
                update.status.converted_resources.clone(),
                status_uuid,
            );
        } else {
            if let Some(s) = status_uuid {
                self.provider_acknowledge(id, &uuid, &s);
            }
            if state.is_terminal() {
                self.operations.remove(&uuid);
            }
        }
    }

    /// Tells a provider its operation status update was acknowledged.
    pub(super) fn provider_acknowledge(&mut self, provider: &str, operation: &[u8], status: &[u8]) {
        self.send_provider(
            provider,
            Event {
                r#type: Some(event::Type::AcknowledgeOperationStatus as i32),
                acknowledge_operation_status: Some(event::AcknowledgeOperationStatus {
                    status_uuid: v1::Uuid {
                        value: status.to_vec(),
                    },
                    operation_uuid: v1::Uuid {
                        value: operation.to_vec(),
                    },
                }),
                ..Default::default()
            },
        );
    }

    /// Asks a provider to publish a launch's resources; the launch waits.
    pub(super) fn publish_then_launch(
        &mut self,
        provider: &str,
        framework: &str,
        task: &str,
        resources: Vec<v1::Resource>,
        launch: Launch,
    ) {
        let uuid = new_uuid();
        self.publishes.insert(
            uuid.clone(),
            PendingPublish {
                provider: provider.to_string(),
                framework: framework.to_string(),
                task: task.to_string(),
                launch,
            },
        );
        self.after(PUBLISH_TIMEOUT, Timer::PublishTimeout(uuid.clone()));
        self.send_provider(
            provider,
            Event {
                r#type: Some(event::Type::PublishResources as i32),
                publish_resources: Some(event::PublishResources {
                    uuid: v1::Uuid { value: uuid },
                    resources,
                }),
                ..Default::default()
            },
        );
    }

    /// UPDATE_PUBLISH_RESOURCES_STATUS, or its timeout (`None`).
    pub(super) fn provider_publish_status(
        &mut self,
        uuid: &[u8],
        status: call::update_publish_resources_status::Status,
    ) {
        let Some(pending) = self.publishes.remove(uuid) else {
            return;
        };
        if status == call::update_publish_resources_status::Status::Ok {
            if let Some(a) = self.agents.get(&pending.launch.agent_id) {
                a.backend.launch(pending.launch);
            }
            return;
        }
        let message = if status == call::update_publish_resources_status::Status::Unknown {
            "Failed to publish resources: no answer from the resource provider in time".to_string()
        } else {
            format!(
                "Failed to publish resources: resource provider {} reported a failure",
                pending.provider
            )
        };
        self.fail_task(
            &pending.framework,
            &pending.task,
            v1::TaskState::TaskFailed,
            v1::task_status::Reason::ContainerLaunchFailed,
            &message,
        );
    }

    /// A local provider whose agent was removed goes with it: its stream
    /// ends, its pending operations become OPERATION_GONE_BY_OPERATOR (as
    /// upstream's operations on an agent that is gone); launches waiting for
    /// a publication are forgotten (their tasks are lost with the agent,
    /// which the caller does first, with its offers and pools).
    pub(super) fn provider_gone(&mut self, id: &str, why: &str) {
        let Some(p) = self.providers.remove(id) else {
            return;
        };
        tracing::info!(provider = %id, agent = %p.agent, "resource provider removed with its agent");
        let pending: Vec<Vec<u8>> = self
            .operations
            .values()
            .filter(|o| o.provider.as_deref() == Some(id))
            .filter(|o| !o.state().is_terminal())
            .map(|o| o.uuid.clone())
            .collect();
        for uuid in pending {
            self.count_operation(
                self.operations[&uuid].info.r#type(),
                v1::OperationState::OperationGoneByOperator,
            );
            if let Some(o) = self.operations.get_mut(&uuid) {
                o.consumed = Resources::default();
            }
            let orphan = !self
                .frameworks
                .contains_key(&self.operations[&uuid].framework);
            if self.operations[&uuid].id.is_empty() || orphan {
                self.operations.remove(&uuid);
                continue;
            }
            self.operation_update(
                &uuid,
                v1::OperationState::OperationGoneByOperator,
                Some(format!("Resource provider {id} is gone: {why}")),
                Vec::new(),
            );
        }
        // Launches waiting for it were on its agent: lost with the agent.
        self.publishes.retain(|_, pp| pp.provider != id);
    }

    /// The stream of a provider closed: its resources leave the offers and
    /// the agent; its pending operations become OPERATION_UNREACHABLE.
    pub(super) fn provider_closed(&mut self, id: &str, stream_id: &str) {
        let Some(p) = self.providers.get_mut(id) else {
            return;
        };
        if p.stream.as_ref().is_none_or(|s| s.id != stream_id) {
            return;
        }
        p.stream = None;
        let agent = p.agent.clone();
        let resources = std::mem::take(&mut p.resources);
        p.version = None;
        tracing::info!(provider = %id, "resource provider disconnected");
        self.rescind_provider_offers(id);
        if let Some(a) = self.agents.get_mut(&agent) {
            a.total.subtract(&resources);
        }
        self.recompute_free(&agent);
        self.sync_pools(&agent);
        let pending: Vec<Vec<u8>> = self
            .operations
            .values()
            .filter(|o| o.provider.as_deref() == Some(id))
            .filter(|o| !o.state().is_terminal())
            .filter(|o| o.state() != v1::OperationState::OperationUnreachable)
            .map(|o| o.uuid.clone())
            .collect();
        for uuid in pending {
            self.operation_update(
                &uuid,
                v1::OperationState::OperationUnreachable,
                Some(format!("Resource provider {id} disconnected")),
                Vec::new(),
            );
        }
        let publishes: Vec<Vec<u8>> = self
            .publishes
            .iter()
            .filter(|(_, p)| p.provider == id)
            .map(|(u, _)| u.clone())
            .collect();
        for uuid in publishes {
            self.provider_publish_status(
                &uuid,
                call::update_publish_resources_status::Status::Failed,
            );
        }
    }
}

/// Pending publications by uuid.
pub type Publishes = FastMap<Vec<u8>, PendingPublish>;
