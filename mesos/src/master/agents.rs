//! Agents join (a node of the core) and leave (their offers rescinded, their
//! tasks lost, frameworks told with FAILURE).

use super::state::{Agent, Master};
use crate::v1;
use crate::v1::scheduler::{Event, event};

impl Master {
    /// Adds an agent and its node; returns the agent id.
    pub(super) fn add_agent(&mut self, spec: super::AgentSpec) -> String {
        let super::AgentSpec {
            hostname,
            resources,
            occupied,
            attributes,
            backend,
        } = spec;
        let id = self.new_agent_id();
        let backend = backend(&id);
        let info = v1::AgentInfo {
            hostname,
            port: Some(5051),
            resources: resources.to_vec(),
            attributes,
            id: Some(v1::AgentId { value: id.clone() }),
            domain: None,
        };
        let now = self.now();
        let mut agent = Agent::new(id.clone(), info, resources, occupied, backend, now);
        agent.pid = self.new_agent_pid();
        debug_assert_eq!(
            super::units::agent_process(&id),
            Some(agent.pid),
            "an agent's process number follows from its id"
        );
        agent.url = self.agent_url(&agent);
        self.agents.insert(id.clone(), agent);
        self.sync_pools(&id);
        self.publish_agent_added(&id);
        // A new agent is offered at once, as Mesos does.
        self.core.offers(vec![
            unisched_core::scheduler::offers::OfferChange::Allocate,
        ]);
        id
    }

    /// An agent's URL as its offers carry it: as Mesos writes it from the
    /// agent's pid (`http://ip:port/slave(N)`, with the agent's hostname),
    /// here the master's address, which serves the agent's endpoints under
    /// `/slave(N)/` (the pid `/state` shows).
    fn agent_url(&self, agent: &Agent) -> Box<[u8]> {
        super::offer_wire::url_field(&v1::Url {
            scheme: "http".to_string(),
            address: v1::Address {
                hostname: Some(agent.info.hostname.clone()),
                ip: Some(self.ip().to_string()),
                port: i32::try_from(self.info.port).unwrap_or(i32::MAX),
            },
            path: Some(format!("/slave({})", agent.pid)),
            ..Default::default()
        })
    }

    /// The master's IP address, as its agents' pids and URLs name it.
    pub(super) fn ip(&self) -> &str {
        self.info
            .address
            .as_ref()
            .and_then(|a| a.ip.as_deref())
            .unwrap_or("127.0.0.1")
    }

    /// Removes an agent: its offers are rescinded, its tasks become
    /// TASK_GONE (partition aware) or TASK_LOST, every connected framework
    /// gets FAILURE, and its node leaves the core.
    pub(super) fn remove_agent(&mut self, id: &str, why: &str) {
        self.agent_leaves(id, &format!("Agent {id} removed: {why}"), false);
    }

    /// The numbers of an agent's outstanding offers, oldest first.
    pub(super) fn agent_offers(&self, id: &str) -> Vec<u64> {
        let mut offers: Vec<u64> = self
            .offers
            .values()
            .filter(|o| *o.agent == *id)
            .map(|o| o.number)
            .collect();
        offers.sort_unstable();
        offers
    }

    /// An agent leaves: as [`Self::remove_agent`] says, or, when an
    /// operator marked it gone (`by_operator`), its tasks become
    /// TASK_GONE_BY_OPERATOR (partition aware) or TASK_LOST, as upstream's
    /// `Master::__removeSlave` has them.
    pub(super) fn agent_leaves(&mut self, id: &str, message: &str, by_operator: bool) {
        if !self.agents.contains_key(id) {
            return;
        }
        for o in self.agent_offers(id) {
            self.rescind(o, true);
        }
        let tasks: Vec<(String, String)> = self.agents[id].tasks.iter().cloned().collect();
        for (framework, task) in tasks {
            if by_operator
                && self
                    .frameworks
                    .get(&framework)
                    .is_some_and(|f| f.partition_aware())
            {
                self.fail_task(
                    &framework,
                    &task,
                    v1::TaskState::TaskGoneByOperator,
                    v1::task_status::Reason::AgentRemovedByOperator,
                    message,
                );
            } else {
                self.lose_task(
                    &framework,
                    &task,
                    v1::task_status::Reason::AgentRemoved,
                    message,
                );
            }
        }
        self.release_executors_where(|(_, _, agent)| agent == id);
        let local: Vec<String> = self
            .providers
            .iter()
            .filter(|(_, p)| p.agent == id && !p.external)
            .map(|(p, _)| p.clone())
            .collect();
        for p in local {
            self.provider_gone(&p, message);
        }
        self.drop_pools(id);
        self.draining.remove(id);
        let agent = self.agents.remove(id).expect("agent exists");
        agent.backend.stop();
        self.publish_agent_removed(id);
        let frameworks: Vec<String> = self
            .frameworks
            .values()
            .filter(|f| f.connected())
            .map(|f| f.id.clone())
            .collect();
        for f in frameworks {
            self.send(
                &f,
                Event {
                    r#type: Some(event::Type::Failure as i32),
                    failure: Some(event::Failure {
                        agent_id: Some(v1::AgentId {
                            value: id.to_string(),
                        }),
                        executor_id: None,
                        status: None,
                    }),
                    ..Default::default()
                },
            );
        }
    }
}
