//! An operator who takes agents out of service and back while frameworks
//! run ([`MesosOp::AgentService`](super::ops::MesosOp::AgentService): the
//! operator API's DEACTIVATE_AGENT, REACTIVATE_AGENT, DRAIN_AGENT and
//! MARK_AGENT_GONE on the master thread), and invariant M15:
//!
//! - M15 service: an agent is deactivated in `/state` exactly when the
//!   model took it out of service; no outstanding offer is of such an agent
//!   (the master rescinds them, the core's nodes are drained); and a
//!   DRAINED agent runs no task. (Its executors may still hold resources:
//!   as in Mesos, a drain kills tasks, and an executor goes when it
//!   decides to, or when its framework does.)
//!
//! A drain kills the agent's tasks through the simulated agents (their
//! TASK_KILLED goes through the usual checks of task updates); marking an
//! agent gone ends its tasks as the master decides: TASK_GONE_BY_OPERATOR
//! for a partition-aware framework, TASK_LOST for the others.

use serde_json::Value;
use unisched_mesos::v1;
use unisched_mesos::v1::master::{Call, call};

use super::fw_ops::gone_state;
use super::sim::MesosSim;

impl MesosSim {
    /// Takes a live agent out of service or back (see the operation); the
    /// violations: an answer other than the one the model expects.
    pub fn agent_service(&mut self, agent: u32, kind: u8) -> Vec<String> {
        let Some(id) = self.live_agent(agent) else {
            return Vec::new();
        };
        let agent_id = v1::AgentId { value: id.clone() };
        let mut c = Call::default();
        let name = match kind % 4 {
            0 => {
                c.r#type = Some(call::Type::DeactivateAgent as i32);
                c.deactivate_agent = Some(call::DeactivateAgent { agent_id });
                "DEACTIVATE_AGENT"
            }
            1 => {
                c.r#type = Some(call::Type::ReactivateAgent as i32);
                c.reactivate_agent = Some(call::ReactivateAgent { agent_id });
                "REACTIVATE_AGENT"
            }
            2 => {
                c.r#type = Some(call::Type::DrainAgent as i32);
                c.drain_agent = Some(call::DrainAgent {
                    agent_id,
                    max_grace_period: Some(prost_types::Duration {
                        seconds: 5,
                        nanos: 0,
                    }),
                    mark_gone: Some(false),
                });
                "DRAIN_AGENT"
            }
            _ => {
                c.r#type = Some(call::Type::MarkAgentGone as i32);
                c.mark_agent_gone = Some(call::MarkAgentGone { agent_id });
                "MARK_AGENT_GONE"
            }
        };
        let out_of_service = self.agents.live.get(&id).is_some_and(|a| a.out_of_service);
        let answer = match self.world.operator(c) {
            None => return vec!["the master did not answer an operator call".to_string()],
            Some(answer) => answer,
        };
        match (kind % 4, answer) {
            (0 | 2, Ok(_)) => {
                if let Some(a) = self.agents.live.get_mut(&id) {
                    a.out_of_service = true;
                }
                self.counts.operator_changes += 1;
                Vec::new()
            }
            (1, Ok(_)) if out_of_service => {
                if let Some(a) = self.agents.live.get_mut(&id) {
                    a.out_of_service = false;
                }
                self.counts.operator_changes += 1;
                Vec::new()
            }
            (1, Err(e))
                if e.status == 400
                    && (!out_of_service && e.message == "Agent is not deactivated"
                        || out_of_service
                            && e.message == "Agent is still in the DRAINING state") =>
            {
                self.counts.operator_refusals += 1;
                Vec::new()
            }
            (3, Ok(_)) => {
                self.gone_agents.insert(id.clone());
                self.agent_left(id, gone_state);
                self.counts.operator_changes += 1;
                Vec::new()
            }
            (_, Ok(_)) => vec![format!("{name} of agent {id} was taken")],
            (_, Err(e)) => vec![format!(
                "{name} of agent {id} refused: {} {}",
                e.status, e.message
            )],
        }
    }

    /// M15 (see the module's doc), against `/state`.
    pub fn check_service(&self, state: &Value, v: &mut Vec<String>) {
        let mut out = std::collections::BTreeSet::new();
        let mut drained = std::collections::BTreeSet::new();
        for slave in state["slaves"].as_array().into_iter().flatten() {
            let id = slave["id"].as_str().unwrap_or_default();
            let Some(model) = self.agents.live.get(id) else {
                continue;
            };
            let deactivated = slave["deactivated"].as_bool().unwrap_or(false);
            if deactivated != model.out_of_service {
                v.push(format!(
                    "M15: agent {id} is deactivated: {deactivated}; the model says {}",
                    model.out_of_service
                ));
            }
            if deactivated {
                out.insert(id.to_string());
            }
            if slave["drain_info"]["state"] == "DRAINED" {
                drained.insert(id.to_string());
            }
        }
        for f in state["frameworks"].as_array().into_iter().flatten() {
            for t in f["tasks"].as_array().into_iter().flatten() {
                let agent = t["slave_id"].as_str().unwrap_or_default();
                let ended = t["state"]
                    .as_str()
                    .and_then(v1::TaskState::from_str_name)
                    .is_some_and(v1::TaskState::is_terminal);
                if drained.contains(agent) && !ended {
                    v.push(format!(
                        "M15: task {} ({}) on agent {agent}, which is DRAINED",
                        t["id"], t["state"]
                    ));
                }
            }
            for o in f["offers"].as_array().into_iter().flatten() {
                let agent = o["slave_id"].as_str().unwrap_or_default();
                if out.contains(agent) {
                    v.push(format!(
                        "M15: offer {} of agent {agent}, which is out of service",
                        o["id"]
                    ));
                }
            }
        }
    }
}
