//! Operations an operator makes on an agent's resources with the operator
//! API: RESERVE_RESOURCES, UNRESERVE_RESOURCES, CREATE_VOLUMES,
//! DESTROY_VOLUMES, GROW_VOLUME and SHRINK_VOLUME (Mesos' `/reserve`,
//! `/unreserve`, `/create-volumes` and `/destroy-volumes` in their v1 form).
//!
//! As in Mesos (`Master::Http::_operation`): the resources named are
//! unallocated; the operation is checked as a framework's is
//! (`operations::conversion`, for any role); the master rescinds the
//! agent's outstanding offers, one at a time in the order they were made,
//! until what the operation consumes is free, then applies it at once (the
//! agent's total changes, its pools' nodes in the core follow) and answers
//! 202. When it still is not free (tasks hold it), 409 with the reason.

use super::CallError;
use super::operations::{AgentView, Roles, conversion};
use super::state::Master;
use crate::v1;
use crate::v1::master::Call;
use crate::v1::master::call::Type as CallType;
use crate::v1::offer::operation::Type as Op;
use unisched_core::scheduler::offers::OfferChange;

/// The agent and the offer operation an operator call stands for; `None`
/// for other calls. An `Err` is the call's 400.
pub fn operation_of(call: &Call) -> Option<Result<(String, v1::offer::Operation), CallError>> {
    use v1::offer::operation as o;
    let agent = |id: Option<&v1::AgentId>| -> Result<String, CallError> {
        id.map(|a| a.value.clone())
            .ok_or_else(|| CallError::bad_request("Expecting 'agent_id' to be present"))
    };
    let op = |kind: Op| v1::offer::Operation {
        r#type: Some(kind as i32),
        ..Default::default()
    };
    let found = match call.r#type() {
        CallType::ReserveResources => {
            let c = call.reserve_resources.as_ref()?;
            agent(Some(&c.agent_id)).map(|id| {
                let mut o = op(Op::Reserve);
                o.reserve = Some(o::Reserve {
                    source: c.source.clone(),
                    resources: c.resources.clone(),
                });
                (id, o)
            })
        }
        CallType::UnreserveResources => {
            let c = call.unreserve_resources.as_ref()?;
            agent(Some(&c.agent_id)).map(|id| {
                let mut o = op(Op::Unreserve);
                o.unreserve = Some(o::Unreserve {
                    resources: c.resources.clone(),
                });
                (id, o)
            })
        }
        CallType::CreateVolumes => {
            let c = call.create_volumes.as_ref()?;
            agent(Some(&c.agent_id)).map(|id| {
                let mut o = op(Op::Create);
                o.create = Some(o::Create {
                    volumes: c.volumes.clone(),
                });
                (id, o)
            })
        }
        CallType::DestroyVolumes => {
            let c = call.destroy_volumes.as_ref()?;
            agent(Some(&c.agent_id)).map(|id| {
                let mut o = op(Op::Destroy);
                o.destroy = Some(o::Destroy {
                    volumes: c.volumes.clone(),
                });
                (id, o)
            })
        }
        CallType::GrowVolume => {
            let c = call.grow_volume.as_ref()?;
            agent(c.agent_id.as_ref()).map(|id| {
                let mut o = op(Op::GrowVolume);
                o.grow_volume = Some(o::GrowVolume {
                    volume: Box::new(c.volume.clone()),
                    addition: Box::new(c.addition.clone()),
                });
                (id, o)
            })
        }
        CallType::ShrinkVolume => {
            let c = call.shrink_volume.as_ref()?;
            agent(c.agent_id.as_ref()).map(|id| {
                let mut o = op(Op::ShrinkVolume);
                o.shrink_volume = Some(o::ShrinkVolume {
                    volume: Box::new(c.volume.clone()),
                    subtract: c.subtract,
                });
                (id, o)
            })
        }
        _ => return None,
    };
    Some(found)
}

impl Master {
    /// Applies an operator's operation on an agent (see the module docs).
    pub(super) fn operator_operation(
        &mut self,
        agent_id: &str,
        op: &v1::offer::Operation,
    ) -> Result<(), CallError> {
        let kind = op.r#type().as_str_name();
        let Some(a) = self.agents.get(agent_id) else {
            return Err(CallError::bad_request("No agent found with specified ID"));
        };
        let roles = Roles {
            roles: &[],
            shared_resources: true,
            operator: true,
        };
        let view = AgentView {
            total: &a.total,
            used: &a.used,
        };
        let c = conversion(op, &roles, &view).map_err(|e| {
            CallError::bad_request(format!("Invalid {kind} operation on agent {agent_id}: {e}"))
        })?;
        if c.consumed.iter().any(|r| r.allocation_info.is_some()) {
            return Err(CallError::bad_request(format!(
                "Invalid {kind} operation on agent {agent_id}: the operator API takes unallocated resources"
            )));
        }
        // Offers of the agent go back, oldest first, until what the
        // operation consumes is free.
        let mut numbers: Vec<u64> = self
            .offers
            .values()
            .filter(|o| *o.agent == *agent_id)
            .map(|o| o.number)
            .collect();
        numbers.sort_unstable();
        for n in numbers {
            if self.agents[agent_id].free().contains(&c.consumed) {
                break;
            }
            self.rescind(n, true);
        }
        let a = &self.agents[agent_id];
        if !a.free().contains(&c.consumed) {
            return Err(CallError {
                status: 409,
                message: format!(
                    "Invalid {kind} operation on agent {agent_id}: {} are not available on the agent (its free resources: {})",
                    c.consumed,
                    a.free()
                ),
            });
        }
        let a = self
            .agents
            .get_mut(agent_id)
            .ok_or_else(|| CallError::bad_request("No agent found with specified ID"))?;
        a.convert(&c.consumed, &c.converted);
        if op.r#type() == Op::Destroy {
            a.backend.destroy_volumes(&c.consumed.to_vec());
        }
        self.recompute_free(agent_id);
        self.sync_pools(agent_id);
        self.count_operation(op.r#type(), v1::OperationState::OperationFinished);
        tracing::info!(
            agent = agent_id,
            op = kind,
            consumed = %c.consumed,
            converted = %c.converted,
            "operator: operation applied"
        );
        self.core.offers(vec![OfferChange::Allocate]);
        Ok(())
    }
}
