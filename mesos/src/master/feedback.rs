//! Operation feedback: speculative operations applied to an ACCEPT's offers,
//! and the status updates of operations that carry an operation id, sent to
//! their framework reliably (a uuid, retried until ACKNOWLEDGE_OPERATION_STATUS,
//! one in flight per operation, as task updates are), RECONCILE_OPERATIONS.

use super::framework::has_capability;
use super::operations::{AgentView, Operation, Roles, conversion};
use super::state::{Master, Timer, new_uuid};
use super::status::{Action, StatusStream};
use crate::resources::Resources;
use crate::v1;
use crate::v1::offer::operation::Type as Op;
use crate::v1::scheduler::{Event, event};

fn status_event(status: v1::OperationStatus) -> Event {
    Event {
        r#type: Some(event::Type::UpdateOperationStatus as i32),
        update_operation_status: Some(event::UpdateOperationStatus { status }),
        ..Default::default()
    }
}

impl Master {
    /// Applies RESERVE, UNRESERVE, CREATE, DESTROY, GROW_VOLUME or
    /// SHRINK_VOLUME to what is left of an ACCEPT's offers and to the agent;
    /// true when resources moved between the agent's pools (its nodes in the
    /// core change). An operation with an id gets OPERATION_FINISHED.
    pub(super) fn apply_speculative(
        &mut self,
        framework: &str,
        agent: &str,
        op: &v1::offer::Operation,
        remaining: &mut Resources,
    ) -> Result<bool, String> {
        let f = &self.frameworks[framework];
        let roles = Roles {
            roles: &f.roles,
            shared_resources: has_capability(
                &f.info,
                v1::framework_info::capability::Type::SharedResources,
            ),
            operator: false,
        };
        let a = self.agents.get(agent).ok_or("Agent is gone")?;
        let c = conversion(
            op,
            &roles,
            &AgentView {
                total: &a.total,
                used: &a.used,
            },
        )?;
        if !remaining.contains(&c.consumed) {
            return Err(format!(
                "Invalid {} operation: {} are not available in the offered resources {}",
                op.r#type().as_str_name(),
                c.consumed,
                remaining
            ));
        }
        remaining.subtract(&c.consumed);
        remaining.add(&c.converted);
        let a = self.agents.get_mut(agent).ok_or("Agent is gone")?;
        a.convert(&c.consumed, &c.converted);
        if op.r#type() == Op::Destroy {
            a.backend
                .destroy_volumes(&c.consumed.unallocated().to_vec());
        }
        self.count_operation(op.r#type(), v1::OperationState::OperationFinished);
        tracing::info!(
            %framework,
            %agent,
            op = op.r#type().as_str_name(),
            consumed = %c.consumed,
            converted = %c.converted,
            "operation applied"
        );
        if op.id.is_some() {
            let uuid = self.record_operation(framework, agent, None, op.clone());
            self.operation_update(
                &uuid,
                v1::OperationState::OperationFinished,
                None,
                c.converted.to_vec(),
            );
        }
        Ok(matches!(op.r#type(), Op::Reserve | Op::Unreserve))
    }

    /// Keeps an operation that carries an id; returns its uuid.
    pub(super) fn record_operation(
        &mut self,
        framework: &str,
        agent: &str,
        provider: Option<String>,
        info: v1::offer::Operation,
    ) -> Vec<u8> {
        let uuid = new_uuid();
        let id = info
            .id
            .as_ref()
            .map(|i| i.value.clone())
            .unwrap_or_default();
        self.operation_ids
            .insert((framework.to_string(), id.clone()), uuid.clone());
        self.operations.insert(
            uuid.clone(),
            Operation {
                framework: framework.to_string(),
                id,
                uuid: uuid.clone(),
                agent: agent.to_string(),
                provider,
                info,
                statuses: Vec::new(),
                stream: StatusStream::default(),
                consumed: Resources::default(),
            },
        );
        uuid
    }

    /// A new state of an operation: recorded, and (when the operation has an
    /// id) sent to its framework reliably.
    pub(super) fn operation_update(
        &mut self,
        uuid: &[u8],
        state: v1::OperationState,
        message: Option<String>,
        converted: Vec<v1::Resource>,
    ) {
        self.operation_update_with(uuid, state, message, converted, None);
    }

    /// [`Self::operation_update`] with the status uuid given (a provider's,
    /// so that its acknowledgement can be passed on), or a new one.
    pub(super) fn operation_update_with(
        &mut self,
        uuid: &[u8],
        state: v1::OperationState,
        message: Option<String>,
        converted: Vec<v1::Resource>,
        status_uuid: Option<Vec<u8>>,
    ) {
        let now = self.now();
        let Some(op) = self.operations.get_mut(uuid) else {
            return;
        };
        let status = v1::OperationStatus {
            operation_id: Some(v1::OperationId {
                value: op.id.clone(),
            }),
            state: state as i32,
            message,
            converted_resources: converted,
            uuid: Some(v1::Uuid {
                value: status_uuid.unwrap_or_else(new_uuid),
            }),
            agent_id: Some(v1::AgentId {
                value: op.agent.clone(),
            }),
            resource_provider_id: op
                .provider
                .as_ref()
                .map(|p| v1::ResourceProviderId { value: p.clone() }),
        };
        op.statuses.push(status.clone());
        let framework = op.framework.clone();
        if op.id.is_empty() || !self.frameworks.contains_key(&framework) {
            // No operation id (no feedback asked for) or its framework was
            // removed: recorded, sent to nobody.
            return;
        }
        let connected = self
            .frameworks
            .get(&framework)
            .is_some_and(|f| f.connected());
        let Some(op) = self.operations.get_mut(uuid) else {
            return;
        };
        let action = op.stream.push(status, now, connected);
        self.after_operation_action(uuid, action);
    }

    fn after_operation_action(&mut self, uuid: &[u8], action: Action<v1::OperationStatus>) {
        let Some(op) = self.operations.get(uuid) else {
            return;
        };
        let framework = op.framework.clone();
        let retry = match op.stream.state() {
            super::status::StreamState::AwaitingAck { retry_at, .. } => Some(retry_at),
            super::status::StreamState::Idle => None,
        };
        if let Action::Send(status) = action {
            self.send(&framework, status_event(*status));
        }
        if let Some(at) = retry {
            self.at(at, Timer::OperationRetry(uuid.to_vec()));
        }
    }

    /// A retry timer of an operation's stream fired.
    pub(super) fn retry_operation_status(&mut self, uuid: &[u8]) {
        let now = self.now();
        let Some(op) = self.operations.get(uuid) else {
            return;
        };
        let connected = self
            .frameworks
            .get(&op.framework)
            .is_some_and(|f| f.connected());
        let due = matches!(op.stream.state(), super::status::StreamState::AwaitingAck { retry_at, .. } if now >= retry_at);
        if !due {
            return;
        }
        let Some(op) = self.operations.get_mut(uuid) else {
            return;
        };
        let action = op.stream.retry(now, connected);
        self.after_operation_action(uuid, action);
    }

    /// The framework came back: its operations' updates in flight go out again.
    pub(super) fn resend_operation_statuses(&mut self, framework: &str) {
        let now = self.now();
        let mine: Vec<Vec<u8>> = self
            .operations
            .values()
            .filter(|o| o.framework == framework)
            .map(|o| o.uuid.clone())
            .collect();
        for uuid in mine {
            if let Some(op) = self.operations.get_mut(&uuid) {
                let action = op.stream.reconnected(now);
                self.after_operation_action(&uuid, action);
            }
        }
    }

    /// ACKNOWLEDGE_OPERATION_STATUS: the update in flight is done; a terminal
    /// one ends the operation. A provider's operation hears of it too.
    pub(super) fn acknowledge_operation(
        &mut self,
        framework: &str,
        ack: v1::scheduler::call::AcknowledgeOperationStatus,
    ) {
        let now = self.now();
        let key = (framework.to_string(), ack.operation_id.value.clone());
        let Some(uuid) = self.operation_ids.get(&key).cloned() else {
            self.counters.invalid_operation_acknowledgements += 1;
            return;
        };
        let Some(op) = self.operations.get_mut(&uuid) else {
            return;
        };
        let acked_terminal = op
            .stream
            .in_flight()
            .is_some_and(|s| s.state().is_terminal());
        let (action, matched) = op.stream.acknowledge(&ack.uuid, now, true);
        if !matched {
            self.counters.invalid_operation_acknowledgements += 1;
            return;
        }
        self.counters.valid_operation_acknowledgements += 1;
        let provider = op.provider.clone();
        let idle = op.stream.is_idle();
        if let Some(p) = provider {
            self.provider_acknowledge(&p, &uuid, &ack.uuid);
        }
        if acked_terminal && idle {
            self.operations.remove(&uuid);
            self.operation_ids.remove(&key);
            return;
        }
        self.after_operation_action(&uuid, action);
    }

    /// RECONCILE_OPERATIONS: the latest state of each operation named (all
    /// of the framework's when none is), OPERATION_UNKNOWN for those the
    /// master does not know; no uuid, so nothing to acknowledge.
    pub(super) fn reconcile_operations(
        &mut self,
        framework: &str,
        reconcile: v1::scheduler::call::ReconcileOperations,
    ) {
        let latest = |op: &Operation| -> v1::OperationStatus {
            let mut s = op.statuses.last().cloned().unwrap_or(v1::OperationStatus {
                operation_id: Some(v1::OperationId {
                    value: op.id.clone(),
                }),
                state: v1::OperationState::OperationPending as i32,
                agent_id: Some(v1::AgentId {
                    value: op.agent.clone(),
                }),
                resource_provider_id: op
                    .provider
                    .as_ref()
                    .map(|p| v1::ResourceProviderId { value: p.clone() }),
                ..Default::default()
            });
            s.uuid = None;
            s
        };
        let mut replies = Vec::new();
        if reconcile.operations.is_empty() {
            let mut mine: Vec<&Operation> = self
                .operations
                .values()
                .filter(|o| o.framework == framework)
                .collect();
            mine.sort_by(|a, b| a.id.cmp(&b.id));
            replies.extend(mine.into_iter().map(latest));
        }
        for wanted in reconcile.operations {
            let key = (framework.to_string(), wanted.operation_id.value.clone());
            if let Some(op) = self
                .operation_ids
                .get(&key)
                .and_then(|u| self.operations.get(u))
            {
                replies.push(latest(op));
                continue;
            }
            let agent = wanted.agent_id.as_ref().map(|a| a.value.as_str());
            let (state, message) = match agent {
                Some(a) if self.agent_gone(a) => (
                    v1::OperationState::OperationGoneByOperator,
                    "Reconciliation: Agent marked gone by operator",
                ),
                Some(a) if self.agents.contains_key(a) => (
                    v1::OperationState::OperationUnknown,
                    "Reconciliation: Operation is unknown",
                ),
                _ => (
                    v1::OperationState::OperationUnknown,
                    "Reconciliation: Both operation and agent are unknown",
                ),
            };
            replies.push(v1::OperationStatus {
                operation_id: Some(wanted.operation_id),
                state: state as i32,
                message: Some(message.to_string()),
                agent_id: wanted.agent_id,
                resource_provider_id: wanted.resource_provider_id,
                ..Default::default()
            });
        }
        for status in replies {
            self.send(framework, status_event(status));
        }
    }

    /// An operation that is not applied: with an operation id, the framework
    /// gets OPERATION_ERROR (as upstream drops operations); without, it is
    /// only logged.
    pub(super) fn drop_operation(
        &mut self,
        framework: &str,
        op: &v1::offer::Operation,
        message: &str,
    ) {
        tracing::warn!(%framework, op = ?op.r#type(), %message, "operation dropped");
        self.count_operation(op.r#type(), v1::OperationState::OperationError);
        let Some(id) = &op.id else { return };
        self.send(
            framework,
            status_event(v1::OperationStatus {
                operation_id: Some(id.clone()),
                state: v1::OperationState::OperationError as i32,
                message: Some(message.to_string()),
                ..Default::default()
            }),
        );
    }

    /// Forgets the operations of a framework that is removed, but for those
    /// a resource provider is still applying: their resources are in the
    /// provider's hands, so the master follows them to their end (converting
    /// what a FINISHED converts, acknowledging the provider itself) and only
    /// then forgets them.
    pub(super) fn forget_operations(&mut self, framework: &str) {
        self.operations.retain(|_, o| {
            o.framework != framework || (o.provider.is_some() && !o.state().is_terminal())
        });
        self.operation_ids.retain(|(f, _), _| f != framework);
    }
}
