//! The requests the simulated RM sends: nodes, applications, asks, releases
//! and its confirmations of the releases the core decided.

use si::node_info::ActionFromRm;
use unisched_shim_api::SchedulerApi;
use unisched_si as si;

use super::super::model::{GangModel, Model, Size};
use super::*;

impl Sim {
    pub(super) fn nodes(&self, nodes: Vec<si::NodeInfo>) {
        let _ = self.sched.update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        });
    }

    pub(super) fn allocation(&self, req: si::AllocationRequest) {
        if self.trace {
            for a in &req.asks {
                let size = size_of(a.resource_ask.as_ref());
                eprintln!(
                    "  -> ask {}/{} {size:?} x{} group {:?}{}",
                    a.application_id,
                    a.allocation_key,
                    a.max_allocations,
                    a.task_group_name,
                    if a.placeholder { " placeholder" } else { "" }
                );
            }
            for r in req.releases.iter().flat_map(|r| &r.allocations_to_release) {
                eprintln!(
                    "  -> release {}/{}/{} {:?}",
                    r.application_id,
                    r.allocation_key,
                    r.allocation_id,
                    si::TerminationType::try_from(r.termination_type)
                );
            }
            for r in req
                .releases
                .iter()
                .flat_map(|r| &r.allocation_asks_to_release)
            {
                eprintln!("  -> release ask {}/{}", r.application_id, r.allocation_key);
            }
        }
        let _ = self.sched.update_allocation(si::AllocationRequest {
            rm_id: RM.to_string(),
            ..req
        });
    }

    pub(super) fn apps(&self, req: si::ApplicationRequest) {
        if self.trace {
            for a in &req.new {
                eprintln!("  -> add app {} to {}", a.application_id, a.queue_name);
            }
            for a in &req.remove {
                eprintln!("  -> remove app {}", a.application_id);
            }
        }
        let _ = self.sched.update_application(si::ApplicationRequest {
            rm_id: RM.to_string(),
            ..req
        });
    }

    pub(super) fn ask(
        app: &str,
        key: &str,
        size: Size,
        max: i32,
        priority: i32,
    ) -> si::AllocationAsk {
        si::AllocationAsk {
            allocation_key: key.to_string(),
            application_id: app.to_string(),
            partition_name: PARTITION.to_string(),
            resource_ask: resource(&[("memory", size.0), ("vcore", size.1)]),
            max_allocations: max,
            priority,
            ..Default::default()
        }
    }

    /// An ask with the task group, placeholder flag and preemption policy it
    /// was first sent with.
    pub(super) fn ask_meta(&self, app: &str, key: &str, size: Size, max: i32) -> si::AllocationAsk {
        let meta = self
            .model
            .ask_meta
            .get(&(app.to_string(), key.to_string()))
            .cloned()
            .unwrap_or_default();
        let mut ask = Self::ask(app, key, size, max, meta.priority);
        ask.task_group_name = meta.group;
        ask.placeholder = meta.placeholder;
        ask.preemption_policy = Some(si::PreemptionPolicy {
            allow_preempt_self: true,
            allow_preempt_other: meta.preempt_other,
        });
        ask
    }

    /// Sends the RM's confirmations of core-initiated releases still held.
    pub(super) fn confirm(&mut self, ids: &[String]) {
        let mut rels = Vec::new();
        for id in ids {
            let (Some(&termination), Some(a)) =
                (self.model.releasing.get(id), self.model.allocs.get(id))
            else {
                continue;
            };
            rels.push(si::AllocationRelease {
                partition_name: PARTITION.to_string(),
                application_id: a.app.clone(),
                allocation_key: a.key.clone(),
                allocation_id: id.clone(),
                termination_type: termination,
                message: "soak: RM confirms".to_string(),
            });
            self.model.release_confirmed(id);
            self.alloc_priority.remove(id);
        }
        if rels.is_empty() {
            return;
        }
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: rels,
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    /// An application request, with its gang settings when it has some.
    pub(super) fn gang_app(
        id: &str,
        queue: &str,
        gang: Option<&GangModel>,
    ) -> si::AddApplicationRequest {
        let mut req = si::AddApplicationRequest {
            application_id: id.to_string(),
            queue_name: queue.to_string(),
            partition_name: PARTITION.to_string(),
            ugi: Some(si::UserGroupInformation {
                user: "soak".to_string(),
                groups: vec![],
            }),
            ..Default::default()
        };
        if let Some(g) = gang {
            req.placeholder_ask = resource(&[
                ("memory", g.placeholder_ask.0),
                ("vcore", g.placeholder_ask.1),
            ]);
            req.gang_scheduling_style = if g.hard { "Hard" } else { "Soft" }.to_string();
            req.execution_timeout_milli_seconds = g.timeout_ms;
        }
        req
    }

    pub(super) fn send_asks(&self, asks: Vec<si::AllocationAsk>) {
        self.allocation(si::AllocationRequest {
            asks,
            ..Default::default()
        });
    }

    pub(super) fn release(&self, app: &str, key: &str, id: &str) {
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: vec![si::AllocationRelease {
                    partition_name: PARTITION.to_string(),
                    application_id: app.to_string(),
                    allocation_key: key.to_string(),
                    allocation_id: id.to_string(),
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    pub(super) fn release_asks(&mut self, app: &str, key: &str) {
        self.allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocation_asks_to_release: vec![si::AllocationAskRelease {
                    partition_name: PARTITION.to_string(),
                    application_id: app.to_string(),
                    allocation_key: key.to_string(),
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
        let keys: Vec<String> = self
            .model
            .asks
            .keys()
            .filter(|(a, k)| a == app && (key.is_empty() || k == key))
            .map(|(_, k)| k.clone())
            .collect();
        for k in keys {
            self.model.release_ask(app, &k);
        }
    }

    pub(super) fn node_action(&mut self, pick: u32, action: ActionFromRm, intent: NodeIntent) {
        let Some(id) = Model::nth(&self.model.nodes, pick) else {
            return;
        };
        self.intents.nodes.push((id.clone(), intent));
        self.nodes(vec![si::NodeInfo {
            node_id: id,
            action: action as i32,
            ..Default::default()
        }]);
    }
}
