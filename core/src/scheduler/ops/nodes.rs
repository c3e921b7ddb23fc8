//! Nodes: the RM's node actions, reservations held on nodes, and the
//! scheduling state reported per ask.

use std::sync::Arc;

use si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use si::node_info::ActionFromRm;
use si::update_container_scheduling_state_request::SchedulingState;
use unisched_si as si;

use super::super::objects::*;
use super::super::partition::Partition;
use crate::resources::Resource;

impl Partition {
    pub(super) fn reject_node(&mut self, id: &str, reason: String) {
        self.outbox.node.rejected.push(si::RejectedNode {
            node_id: id.to_string(),
            reason,
        });
    }

    pub(super) fn accept_node(&mut self, id: &str) {
        self.outbox.node.accepted.push(si::AcceptedNode {
            node_id: id.to_string(),
        });
    }

    /// Applies one node action.
    pub fn node_action(&mut self, node: super::super::command::PreparedNode, now: u64) {
        let super::super::command::PreparedNode {
            info,
            capacity,
            occupied,
            existing,
        } = node;
        let id = info.node_id.clone();
        if id.is_empty() {
            return self.reject_node(&id, "node id is empty".to_string());
        }
        let action =
            ActionFromRm::try_from(info.action).unwrap_or(ActionFromRm::UnknownActionFromRm);
        let known = self.node_by_id.get(id.as_str()).copied();
        match (action, known) {
            (ActionFromRm::Create | ActionFromRm::CreateDrain, Some(_)) => self.reject_node(
                &id,
                format!("node {id} already exists in partition {}", self.name),
            ),
            (ActionFromRm::Create | ActionFromRm::CreateDrain, None) => {
                let capacity = match capacity {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        return self
                            .reject_node(&id, format!("node {id}: schedulable resource: {e}"));
                    }
                    None => Resource::ZERO,
                };
                let occupied = match occupied {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        return self.reject_node(&id, format!("node {id}: occupied resource: {e}"));
                    }
                    None => Resource::ZERO,
                };
                let node_id: Arc<str> = Arc::from(id.as_str());
                let rm_handle = unisched_shim_api::rm_handle(info.attributes.iter());
                let node = Node {
                    id: node_id.clone(),
                    rm_handle,
                    attributes: info.attributes.into_iter().collect(),
                    res: NodeResources::new(&capacity, &occupied),
                    schedulable: action == ActionFromRm::Create,
                    // Room for the first few: a node keeps its list's room
                    // for good, so its first allocation need not grow it.
                    allocations: Vec::with_capacity(4),
                    reserved_by: None,
                    key_in_index: None,
                };
                let n = self.nodes.insert(node);
                self.node_by_id.insert(node_id, n);
                self.capacity_changed(&Resource::ZERO, &capacity, now);
                self.rekey_node(n);
                self.accept_node(&id);
                self.outbox.event(
                    now,
                    EventType::Node,
                    &id,
                    "",
                    ChangeType::Add,
                    ChangeDetail::DetailsNone,
                    "node added".to_string(),
                );
                for (alloc, res) in existing {
                    self.recover_allocation(alloc, res, now);
                }
            }
            (_, None) => {
                let what = if action == ActionFromRm::UnknownActionFromRm {
                    format!("node {id}: unknown node action {}", info.action)
                } else {
                    format!("node {id} not found in partition {}", self.name)
                };
                self.reject_node(&id, what)
            }
            (ActionFromRm::UnknownActionFromRm, Some(_)) => self.reject_node(
                &id,
                format!("node {id}: unknown node action {}", info.action),
            ),
            (ActionFromRm::Update, Some(n)) => {
                let capacity = match capacity.transpose() {
                    Ok(c) => c,
                    Err(e) => {
                        return self
                            .reject_node(&id, format!("node {id}: schedulable resource: {e}"));
                    }
                };
                let occupied = match occupied.transpose() {
                    Ok(c) => c,
                    Err(e) => {
                        return self.reject_node(&id, format!("node {id}: occupied resource: {e}"));
                    }
                };
                if let Some(c) = capacity {
                    let old = self.nodes[n].res.capacity();
                    self.nodes[n].res.set_capacity(&c);
                    self.capacity_changed(&old, &c, now);
                    self.outbox.event(
                        now,
                        EventType::Node,
                        &id,
                        "",
                        ChangeType::Set,
                        ChangeDetail::NodeCapacity,
                        "capacity changed".to_string(),
                    );
                }
                let node = &mut self.nodes[n];
                if let Some(o) = occupied {
                    node.res.set_occupied(&o);
                }
                if !info.attributes.is_empty() {
                    node.rm_handle = unisched_shim_api::rm_handle(info.attributes.iter());
                    node.attributes = info.attributes.into_iter().collect();
                }
                self.rekey_node(n);
                self.accept_node(&id);
            }
            (ActionFromRm::DrainNode, Some(n)) => {
                self.set_schedulable(n, false, now);
                self.accept_node(&id);
            }
            (ActionFromRm::DrainToSchedulable, Some(n)) => {
                if self.nodes[n].schedulable {
                    return self.reject_node(&id, format!("node {id} is not draining"));
                }
                self.set_schedulable(n, true, now);
                self.accept_node(&id);
            }
            (ActionFromRm::Decomission, Some(n)) => {
                self.remove_node(n, now);
                self.accept_node(&id);
            }
        }
    }

    pub(super) fn set_schedulable(&mut self, n: NodeId, schedulable: bool, now: u64) {
        self.nodes[n].schedulable = schedulable;
        if !schedulable && let Some(ask) = self.nodes[n].reserved_by {
            self.unreserve(ask);
        }
        self.rekey_node(n);
        let id = self.nodes[n].id.clone();
        let msg = if schedulable {
            "node schedulable"
        } else {
            "node draining"
        };
        self.outbox.event(
            now,
            EventType::Node,
            &id,
            "",
            ChangeType::Set,
            ChangeDetail::NodeSchedulable,
            msg.to_string(),
        );
    }

    /// Removes a node, releasing (and reporting) its allocations.
    pub fn remove_node(&mut self, n: NodeId, now: u64) {
        if let Some(ask) = self.nodes[n].reserved_by {
            self.unreserve(ask);
        }
        let allocs: Vec<AllocId> = self.nodes[n].allocations.clone();
        let mut touched = Vec::new();
        for a in allocs {
            touched.push(self.allocs[a].app);
            self.release_allocation(
                a,
                si::TerminationType::StoppedByRm,
                "node decommissioned",
                now,
            );
        }
        self.nodes[n].schedulable = false;
        self.rekey_node(n);
        let node = self.nodes.remove(n);
        self.node_by_id.remove(&node.id);
        self.capacity_changed(&node.res.capacity(), &Resource::ZERO, now);
        self.forget_node_filters(n);
        self.outbox.event(
            now,
            EventType::Node,
            &node.id,
            "",
            ChangeType::Remove,
            ChangeDetail::NodeDecomission,
            "node removed".to_string(),
        );
        for app in touched {
            if self.apps.contains(app) {
                self.check_completing(app, now);
            }
        }
    }

    /// Drops the reservation an ask holds, if any.
    pub fn unreserve(&mut self, ask: AskId) {
        self.unreserve_because(ask, "reservation removed");
    }

    /// Drops the reservation an ask holds, if any, and reports why in an
    /// event (timestamped with the request or pass being applied).
    pub fn unreserve_because(&mut self, ask: AskId, why: &str) {
        let Some(a) = self.asks.get_mut(ask) else {
            return;
        };
        let Some(n) = a.reserved_node.take() else {
            return;
        };
        let key = a.key.clone();
        self.reserved_asks.remove(&ask);
        self.freed_in_pass = true;
        if let Some(node) = self.nodes.get_mut(n)
            && node.reserved_by == Some(ask)
        {
            node.reserved_by = None;
            self.rekey_node(n);
        }
        if let Some(node) = self.nodes.get(n) {
            let node_id = node.id.clone();
            self.outbox.event(
                self.now,
                EventType::Node,
                &node_id,
                &key,
                ChangeType::Remove,
                ChangeDetail::NodeReservation,
                why.to_string(),
            );
        }
    }

    /// Reports an ask's scheduling state to the RM when it changed.
    pub fn report_scheduling_state(&mut self, ask: AskId, state: SchedulingState, reason: &str) {
        let a = &mut self.asks[ask];
        if a.reported_state == state as i32 {
            return;
        }
        a.reported_state = state as i32;
        let app = String::from(&*self.apps[a.app].id);
        let key = String::from(&*a.key);
        self.outbox
            .states
            .push(si::UpdateContainerSchedulingStateRequest {
                application_id: app,
                allocation_key: key,
                state: state as i32,
                reason: reason.to_string(),
            });
    }
}
