//! An agent's resources as nodes of the core, one per *pool*: the
//! unreserved resources of the agent itself, those reserved to one role,
//! and those of one resource provider (unreserved or reserved to one role).
//!
//! Why pools: the core decides who gets a node by its scalars; resources
//! reserved to a role may be offered only to that role and its children, so
//! they stand on a node of their own that the core keeps for the role's queue
//! subtree (`OfferChange::NodeTerms`). A provider's resources change with the
//! provider (a new resource version rescinds the offers holding them), so
//! they stand apart too. The master keeps the Mesos resources themselves
//! (ranges, volumes, provider ids) and tells the core each pool's scalars;
//! an offer to a (framework, role) on an agent is built from the leases of
//! that agent's pools made in one allocation run.
//!
//! Node ids: the agent id for its unreserved pool, then `#<role>` for a
//! reservation and `@<provider id>` for a provider (`A@P#r`).

use std::collections::BTreeMap;

use unisched_core::scheduler::offers::OfferChange;
use unisched_si as si;

use super::state::Master;
use super::units::{role_queue, to_core};
use crate::resources::{Resources, reservation_role};
use crate::v1;

/// Which pool a resource belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PoolKey {
    /// The resource provider holding it, if any.
    pub provider: Option<String>,
    /// The role of its (most refined) reservation, if any.
    pub role: Option<String>,
}

impl PoolKey {
    /// The pool of a resource.
    pub fn of(resource: &v1::Resource) -> PoolKey {
        PoolKey {
            provider: resource.provider_id.as_ref().map(|p| p.value.clone()),
            role: reservation_role(resource).map(str::to_string),
        }
    }

    /// Whether a resource belongs to this pool (no allocation on the way).
    pub fn holds(&self, resource: &v1::Resource) -> bool {
        resource.provider_id.as_ref().map(|p| p.value.as_str()) == self.provider.as_deref()
            && reservation_role(resource) == self.role.as_deref()
    }

    /// The id of the pool's node on `agent`.
    pub fn node_id(&self, agent: &str) -> String {
        let mut id = agent.to_string();
        if let Some(p) = &self.provider {
            id.push('@');
            id.push_str(p);
        }
        if let Some(r) = &self.role {
            id.push('#');
            id.push_str(r);
        }
        id
    }
}

/// Resources split by pool.
pub fn split(resources: &Resources) -> BTreeMap<PoolKey, Resources> {
    let mut out: BTreeMap<PoolKey, Resources> = BTreeMap::new();
    for r in resources.iter() {
        out.entry(PoolKey::of(r))
            .or_default()
            .add_resource(r.clone());
    }
    out
}

/// What the core was last told of a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolNode {
    /// Node id.
    pub node: String,
    /// Its capacity (scalars in core units).
    pub capacity: si::Resource,
    /// What the provider's pending operations hold of it (occupied in the
    /// core, so that no offer holds it; empty for the agent's own pools).
    pub held: si::Resource,
}

impl Master {
    /// Brings the core's nodes of an agent in line with its total: a node per
    /// pool that holds scalars (made, resized, or decommissioned), the nodes
    /// of reservations kept for their role's queue subtree.
    pub(super) fn sync_pools(&mut self, agent_id: &str) {
        let partition = self.core.partition.clone();
        // What pending operations of the agent's providers hold, by pool:
        // in the agent's total, but neither free nor offered until they end.
        let mut held_by_ops: BTreeMap<PoolKey, Resources> = BTreeMap::new();
        for op in self.operations.values() {
            if op.agent != agent_id || op.provider.is_none() || op.consumed.is_empty() {
                continue;
            }
            for (key, part) in split(&op.consumed) {
                held_by_ops.entry(key).or_default().add(&part);
            }
        }
        // A provider's pool stands while the master knows the provider, even
        // empty (its stream closed): the core keeps the decline filters on
        // that node, so the provider coming back does not lift them.
        let providers: Vec<String> = self
            .providers
            .iter()
            .filter(|(_, p)| p.agent == agent_id)
            .map(|(id, _)| id.clone())
            .collect();
        let handle = self.agents.handle(agent_id).unwrap_or(0);
        let Some(agent) = self.agents.get_mut(agent_id) else {
            return;
        };
        let mut wanted: BTreeMap<PoolKey, si::Resource> = split(&agent.total)
            .into_iter()
            .map(|(key, r)| (key, to_core(r.iter())))
            .filter(|(_, c)| !c.resources.is_empty())
            .collect();
        // The unreserved pool stands even when empty, as the agent's node.
        wanted.entry(PoolKey::default()).or_default();
        for provider in providers {
            wanted
                .entry(PoolKey {
                    provider: Some(provider),
                    role: None,
                })
                .or_default();
        }
        let hostname = agent.info.hostname.clone();
        let occupied = (!agent.occupied.is_empty()).then(|| to_core(agent.occupied.iter()));
        let mut changes = Vec::new();
        let mut restrict = Vec::new();
        let gone: Vec<PoolKey> = agent
            .pools
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(pool) = agent.pools.remove(&key) {
                changes.push(si::NodeInfo {
                    node_id: pool.node.clone(),
                    action: si::node_info::ActionFromRm::Decomission as i32,
                    ..Default::default()
                });
                self.nodes.remove(&pool.node);
            }
        }
        for (key, capacity) in wanted {
            let held = held_by_ops
                .get(&key)
                .filter(|_| key.provider.is_some())
                .map(|r| to_core(r.iter()))
                .unwrap_or_default();
            match agent.pools.get_mut(&key) {
                Some(pool) if pool.capacity == capacity && pool.held == held => {}
                Some(pool) => {
                    let held_changed = pool.held != held;
                    pool.capacity = capacity.clone();
                    pool.held = held.clone();
                    changes.push(si::NodeInfo {
                        node_id: pool.node.clone(),
                        action: si::node_info::ActionFromRm::Update as i32,
                        schedulable_resource: Some(capacity),
                        occupied_resource: held_changed.then_some(held),
                        ..Default::default()
                    });
                }
                None => {
                    let node = key.node_id(agent_id);
                    let mut attributes: std::collections::HashMap<String, String> = [
                        (si::HOSTNAME_ATTRIBUTE.to_string(), hostname.clone()),
                        (si::NODE_PARTITION_ATTRIBUTE.to_string(), partition.clone()),
                        (AGENT_ATTRIBUTE.to_string(), agent_id.to_string()),
                    ]
                    .into();
                    if let Some(p) = &key.provider {
                        attributes.insert(PROVIDER_ATTRIBUTE.to_string(), p.clone());
                    }
                    if let Some(r) = &key.role {
                        attributes.insert(RESERVATION_ATTRIBUTE.to_string(), r.clone());
                    }
                    let is_default = key == PoolKey::default();
                    if is_default {
                        // Its leases come back with the agent's number: the
                        // master finds the agent without its id (`book.rs`).
                        attributes
                            .insert(unisched_shim_api::RM_HANDLE.to_string(), handle.to_string());
                    } else {
                        // A part of the agent: offered whatever it holds (the
                        // minimum is Mesos' check of a whole agent), and a
                        // reservation only to its role's subtree.
                        restrict.push(OfferChange::NodeTerms {
                            node_id: node.clone(),
                            queue: key.role.as_deref().and_then(|r| role_queue(r).ok()),
                            any_remainder: true,
                        });
                    }
                    changes.push(si::NodeInfo {
                        node_id: node.clone(),
                        action: si::node_info::ActionFromRm::Create as i32,
                        attributes,
                        schedulable_resource: Some(capacity.clone()),
                        occupied_resource: if is_default {
                            occupied.clone()
                        } else {
                            (!held.resources.is_empty()).then(|| held.clone())
                        },
                        ..Default::default()
                    });
                    if agent.drain.is_some() {
                        // Out of service (`drain.rs`): a new pool is not
                        // offered either.
                        changes.push(si::NodeInfo {
                            node_id: node.clone(),
                            action: si::node_info::ActionFromRm::DrainNode as i32,
                            ..Default::default()
                        });
                    }
                    self.nodes
                        .insert(node.clone(), (agent.id.clone(), key.clone()));
                    agent.pools.insert(
                        key,
                        PoolNode {
                            node,
                            capacity,
                            held,
                        },
                    );
                }
            }
        }
        agent.default_node = agent.drain.is_none() && agent.pools.contains_key(&PoolKey::default());
        for node in changes {
            self.core.node(node);
        }
        if !restrict.is_empty() {
            self.core.offers(restrict);
        }
    }

    /// Takes every node of an agent out of the core.
    pub(super) fn drop_pools(&mut self, agent_id: &str) {
        let Some(agent) = self.agents.get_mut(agent_id) else {
            return;
        };
        agent.default_node = false;
        for (_, pool) in std::mem::take(&mut agent.pools) {
            self.nodes.remove(&pool.node);
            self.core.node(si::NodeInfo {
                node_id: pool.node,
                action: si::node_info::ActionFromRm::Decomission as i32,
                ..Default::default()
            });
        }
    }
}

/// Node attribute naming the agent a pool's node belongs to.
pub const AGENT_ATTRIBUTE: &str = "mesos/agent";
/// Node attribute naming the resource provider of a pool.
pub const PROVIDER_ATTRIBUTE: &str = "mesos/resource-provider";
/// Node attribute naming the role a pool is reserved to.
pub const RESERVATION_ATTRIBUTE: &str = "mesos/reservation";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_and_their_node_ids() {
        let r = Resources::parse("cpus:1;cpus(web):2;mem(web/a):64;disk:10").unwrap();
        let pools = split(&r);
        let keys: Vec<String> = pools.keys().map(|k| k.node_id("A")).collect();
        assert_eq!(keys, ["A", "A#web", "A#web/a"]);
        assert_eq!(pools[&PoolKey::default()].cpus(), Some(1.0));
        let mut provided = Resources::parse("disk:100").unwrap().to_vec();
        provided[0].provider_id = Some(Box::new(v1::ResourceProviderId {
            value: "P".to_string(),
        }));
        let key = PoolKey::of(&provided[0]);
        assert_eq!(key.node_id("A"), "A@P");
    }
}
