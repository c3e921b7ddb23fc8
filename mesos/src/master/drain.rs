//! An operator takes agents out of service with the operator API, as in
//! Mesos (`Master::Http::drainAgent` and its siblings, `Slave::drain`):
//!
//! - DEACTIVATE_AGENT: nothing of the agent is offered any more. Its pools'
//!   nodes in the core are drained (so no run leases them), then its
//!   outstanding offers are rescinded. Its tasks run on.
//! - DRAIN_AGENT: deactivates it and kills its tasks, each with its kill
//!   policy's grace period, capped by `max_grace_period` when given. While
//!   it drains, its tasks' TASK_KILLING and TASK_KILLED updates carry
//!   REASON_AGENT_DRAINING, and with `mark_gone` a partition-aware
//!   framework gets TASK_GONE_BY_OPERATOR for TASK_KILLED. Once no task and
//!   no pending operation is left (checked after every batch of inputs,
//!   [`Master::check_draining`]) the agent is DRAINED, or with `mark_gone`
//!   marked gone.
//! - REACTIVATE_AGENT: offered again; not while DRAINING.
//! - MARK_AGENT_GONE: the agent leaves for good. Its tasks become
//!   TASK_GONE_BY_OPERATOR (TASK_LOST for a framework that is not partition
//!   aware), its processes stop, frameworks get FAILURE, and reconciliation
//!   answers for its tasks TASK_GONE_BY_OPERATOR.
//!
//! One difference, on purpose: upstream's agent turns a draining task's
//! TASK_KILLING into TASK_GONE_BY_OPERATOR too (with `mark_gone`), which
//! frees its resources while the task may still run out its grace period.
//! Here TASK_KILLING keeps its state (with the reason); the resources come
//! back at the terminal update. Like everything an operator sets, this lasts
//! as long as the process (there is no registry).

use std::time::Duration;

use unisched_core::scheduler::offers::OfferChange;
use unisched_si as si;

use super::CallError;
use super::state::Master;
use super::units::duration;
use crate::v1;
use crate::v1::DrainState;

/// Upstream's answer for an agent the master does not know.
fn unknown_agent() -> CallError {
    CallError::bad_request("Unknown agent")
}

/// The grace period a task gets when its agent drains (upstream's
/// `calculateKillPolicy`): its own (`None`: the agent's default) unless
/// `max` is given and it has none or a longer one.
pub fn drain_grace(max: Option<Duration>, own: Option<Duration>) -> Option<Duration> {
    match (max, own) {
        (Some(max), Some(own)) if own <= max => Some(own),
        (Some(max), _) => Some(max),
        (None, own) => own,
    }
}

/// A duration of the protobuf well-known type in ns, never negative.
fn duration_nanos(d: &prost_types::Duration) -> i64 {
    d.seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(d.nanos))
        .max(0)
}

impl Master {
    /// DEACTIVATE_AGENT.
    pub(super) fn deactivate_agent(&mut self, id: &str) -> Result<(), CallError> {
        let agent = self.agents.get_mut(id).ok_or_else(unknown_agent)?;
        if agent.drain.is_none() {
            agent.drain = Some(Box::default());
            agent.default_node = false;
            self.take_out_of_service(id);
        }
        Ok(())
    }

    /// REACTIVATE_AGENT.
    pub(super) fn reactivate_agent(&mut self, id: &str) -> Result<(), CallError> {
        let agent = self.agents.get_mut(id).ok_or_else(unknown_agent)?;
        let Some(drain) = &agent.drain else {
            return Err(CallError::bad_request("Agent is not deactivated"));
        };
        if drain
            .info
            .as_ref()
            .is_some_and(|i| i.state() == DrainState::Draining)
        {
            return Err(CallError::bad_request(
                "Agent is still in the DRAINING state",
            ));
        }
        agent.drain = None;
        agent.default_node = agent.pools.contains_key(&super::pools::PoolKey::default());
        tracing::info!(agent = id, "an operator reactivated the agent");
        self.set_nodes_schedulable(id, true);
        self.core.offers(vec![OfferChange::Allocate]);
        Ok(())
    }

    /// DRAIN_AGENT. A drain of an agent already draining or drained starts
    /// again with the new config, as upstream's does.
    pub(super) fn drain_agent(
        &mut self,
        drain: &v1::master::call::DrainAgent,
    ) -> Result<(), CallError> {
        let id = drain.agent_id.value.as_str();
        let now = self.now();
        let max = drain.max_grace_period.as_ref().map(|d| v1::DurationInfo {
            nanoseconds: duration_nanos(d),
        });
        let agent = self.agents.get_mut(id).ok_or_else(unknown_agent)?;
        let was_active = agent.drain.is_none();
        agent.default_node = false;
        let state = agent.drain.get_or_insert_with(Box::default);
        state.info = Some(v1::DrainInfo {
            state: DrainState::Draining as i32,
            config: v1::DrainConfig {
                max_grace_period: max,
                mark_gone: Some(drain.mark_gone()),
            },
        });
        state.started = Some(now);
        let tasks: Vec<(String, String)> = agent.tasks.iter().cloned().collect();
        tracing::info!(
            agent = id,
            tasks = tasks.len(),
            mark_gone = drain.mark_gone(),
            "an operator drains the agent"
        );
        if was_active {
            self.take_out_of_service(id);
        }
        self.draining.insert(id.to_string());
        let max = max.as_ref().map(duration);
        for key in tasks {
            let Some(t) = self.tasks.get(&key).filter(|t| !t.state.is_terminal()) else {
                continue;
            };
            let own = t
                .info
                .kill_policy
                .as_ref()
                .and_then(|p| p.grace_period.as_ref())
                .map(duration);
            let grace = drain_grace(max, own).unwrap_or(self.settings.kill_grace_period);
            if let Some(a) = self.agents.get(id) {
                a.backend.kill_task(&key.0, &key.1, grace);
            }
        }
        self.check_drained(id);
        Ok(())
    }

    /// MARK_AGENT_GONE: 200 for an agent already gone, 404 for one the
    /// master never had (upstream's answers).
    pub(super) fn mark_agent_gone(&mut self, id: &str) -> Result<(), CallError> {
        if self.gone_agents.contains_key(id) {
            return Ok(());
        }
        if !self.agents.contains_key(id) {
            return Err(CallError {
                status: 404,
                message: format!("Agent '{id}' not found"),
            });
        }
        self.mark_gone(id);
        Ok(())
    }

    fn mark_gone(&mut self, id: &str) {
        tracing::info!(agent = id, "an operator marked the agent gone");
        let now = self.now();
        self.gone_agents.insert(id.to_string(), now);
        self.agent_leaves(id, "Agent has been marked gone", true);
    }

    /// Drains the agent's nodes in the core, so that no run leases them any
    /// more, then rescinds its outstanding offers (in that order: what the
    /// rescinds give back is not offered again).
    fn take_out_of_service(&mut self, id: &str) {
        tracing::info!(agent = id, "deactivating the agent");
        self.set_nodes_schedulable(id, false);
        for offer in self.agent_offers(id) {
            self.rescind(offer, true);
        }
    }

    fn set_nodes_schedulable(&mut self, id: &str, schedulable: bool) {
        let Some(agent) = self.agents.get(id) else {
            return;
        };
        let action = if schedulable {
            si::node_info::ActionFromRm::DrainToSchedulable
        } else {
            si::node_info::ActionFromRm::DrainNode
        };
        let nodes: Vec<String> = agent.pools.values().map(|p| p.node.clone()).collect();
        for node_id in nodes {
            self.core.node(si::NodeInfo {
                node_id,
                action: action as i32,
                ..Default::default()
            });
        }
    }

    /// Every draining agent that has drained moves on (after each batch of
    /// inputs; nothing to do when no agent drains).
    pub(super) fn check_draining(&mut self) {
        if self.draining.is_empty() {
            return;
        }
        let ids: Vec<String> = self.draining.iter().cloned().collect();
        for id in ids {
            self.check_drained(&id);
        }
    }

    /// A draining agent with no task and no pending operation left becomes
    /// DRAINED, or is marked gone when its drain says so
    /// (upstream's `checkAndTransitionDrainingAgent`).
    fn check_drained(&mut self, id: &str) {
        let Some(agent) = self.agents.get(id) else {
            self.draining.remove(id);
            return;
        };
        let Some(info) = agent
            .drain
            .as_ref()
            .and_then(|d| d.info.as_ref())
            .filter(|i| i.state() == DrainState::Draining)
        else {
            self.draining.remove(id);
            return;
        };
        let busy = !agent.tasks.is_empty()
            || self
                .operations
                .values()
                .any(|o| o.agent == id && !o.state().is_terminal());
        if busy {
            return;
        }
        self.draining.remove(id);
        if info.config.mark_gone() {
            self.mark_gone(id);
        } else if let Some(info) = self
            .agents
            .get_mut(id)
            .and_then(|a| a.drain.as_mut())
            .and_then(|d| d.info.as_mut())
        {
            info.set_state(DrainState::Drained);
            tracing::info!(agent = id, "the agent is drained");
        }
    }

    /// What a status update from a draining agent says (upstream's agent
    /// adds it): TASK_KILLING and TASK_KILLED carry REASON_AGENT_DRAINING,
    /// and TASK_KILLED becomes TASK_GONE_BY_OPERATOR for a partition-aware
    /// framework when the drain marks the agent gone.
    pub(super) fn draining_update(
        &self,
        agent: &str,
        framework: &str,
        status: &mut v1::TaskStatus,
    ) {
        // Only a DRAINING agent has tasks being killed (none is left once
        // it is DRAINED); with no agent draining this is all it costs.
        if !self.draining.contains(agent) {
            return;
        }
        let Some(info) = self
            .agents
            .get(agent)
            .and_then(|a| a.drain.as_ref())
            .and_then(|d| d.info.as_ref())
        else {
            return;
        };
        let state = status.state();
        if !matches!(
            state,
            v1::TaskState::TaskKilling | v1::TaskState::TaskKilled
        ) {
            return;
        }
        status.set_reason(v1::task_status::Reason::AgentDraining);
        if state == v1::TaskState::TaskKilled
            && info.config.mark_gone()
            && self
                .frameworks
                .get(framework)
                .is_some_and(|f| f.partition_aware())
        {
            status.set_state(v1::TaskState::TaskGoneByOperator);
        }
    }

    /// Whether an operator marked the agent gone.
    pub(super) fn agent_gone(&self, id: &str) -> bool {
        self.gone_agents.contains_key(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_caps_grace_periods_as_upstream() {
        let s = Duration::from_secs;
        // No cap: the task's own, or the agent's default (None).
        assert_eq!(drain_grace(None, Some(s(30))), Some(s(30)));
        assert_eq!(drain_grace(None, None), None);
        // A cap: it replaces a longer or missing grace period, not a shorter.
        assert_eq!(drain_grace(Some(s(10)), Some(s(30))), Some(s(10)));
        assert_eq!(drain_grace(Some(s(10)), None), Some(s(10)));
        assert_eq!(drain_grace(Some(s(10)), Some(s(3))), Some(s(3)));
        assert_eq!(drain_grace(Some(s(0)), Some(s(3))), Some(s(0)));
    }

    #[test]
    fn durations_are_never_negative() {
        let d = |seconds, nanos| prost_types::Duration { seconds, nanos };
        assert_eq!(duration_nanos(&d(10, 5)), 10_000_000_005);
        assert_eq!(duration_nanos(&d(-1, 0)), 0);
        assert_eq!(duration_nanos(&d(i64::MAX, 0)), i64::MAX);
        let info = |nanoseconds| v1::DurationInfo { nanoseconds };
        assert_eq!(duration(&info(-5)), Duration::ZERO);
        assert_eq!(duration(&info(1_500)), Duration::from_nanos(1_500));
    }
}
