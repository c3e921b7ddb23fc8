//! Registering again: the RM re-reports its applications, nodes with their
//! allocations, and the asks still wanting allocations.

use si::node_info::ActionFromRm;
use unisched_si as si;

use super::super::configs;
use super::*;

impl Sim {
    /// Registers again, then re-reports apps, nodes with their allocations and
    /// pending asks; `asks_first` re-reports asks before the allocations.
    pub(super) fn reregister(&mut self, asks_first: bool) -> Vec<String> {
        let mut out = Vec::new();
        // First what the old core answered to confirmations sent this step
        // (a replacement's real allocation): the RM re-reports it.
        self.sched.settle();
        let mut intents = std::mem::take(&mut self.intents);
        let (mut new, mut failed) = (Vec::new(), Vec::new());
        self.absorb(self.step_no, &mut intents, &mut out, &mut new, &mut failed);
        self.intents = intents;
        if let Err(e) = self.register() {
            out.push(format!("re-registration failed: {e}"));
            return out;
        }
        self.counts.reregistrations += 1;
        let apps: Vec<(String, String)> = self
            .model
            .apps
            .iter()
            .map(|(id, a)| (id.clone(), a.queue.clone()))
            .collect();
        for (id, queue) in &apps {
            self.model.app_states.insert(id.clone(), "New".to_string());
            self.intents.readded.insert(id.clone());
            if let Some(g) = self.model.gangs.get(id)
                && !configs::fits_queue_max(&self.config, queue, g.placeholder_ask)
            {
                self.intents.refused_gangs.insert(id.clone());
            }
        }
        self.apps(si::ApplicationRequest {
            new: apps
                .iter()
                .map(|(id, queue)| Self::gang_app(id, queue, self.model.gangs.get(id)))
                .collect(),
            ..Default::default()
        });
        // The new core knows no release in flight: what the RM held is re-reported
        // as running, and replacements in flight are lost with the old core.
        self.model.releasing.clear();
        self.model.replacing.clear();
        self.model.awaiting_real.clear();
        self.confirm_queue.clear();
        // Asks still wanting allocations go out with maxAllocations counting
        // the live ones, before or after the nodes carrying those allocations.
        let old_asks = std::mem::take(&mut self.model.asks);
        let mut resend = Vec::new();
        for ((app, key), a) in old_asks {
            if a.pending == 0 {
                continue;
            }
            let live = self
                .model
                .allocs
                .values()
                .filter(|x| x.app == app && x.key == key)
                .count() as u32;
            resend.push((app, key, a.size, (a.pending + live) as i32));
        }
        let asks: Vec<si::AllocationAsk> = resend
            .iter()
            .map(|(app, key, size, max)| self.ask_meta(app, key, *size, *max))
            .collect();
        if asks_first {
            for (app, key, size, max) in &resend {
                self.intents
                    .ask_undo
                    .push(((app.clone(), key.clone()), None));
                self.model.send_ask(app, key, *size, *max);
            }
            self.send_asks(asks.clone());
        }
        let mut infos = Vec::new();
        for (id, n) in self.model.nodes.clone() {
            let existing: Vec<si::Allocation> = self
                .model
                .allocs
                .iter()
                .filter(|(_, a)| a.node == id)
                .map(|(aid, a)| si::Allocation {
                    priority: self.alloc_priority.get(aid).copied().unwrap_or(0),
                    placeholder: self
                        .model
                        .ask_meta
                        .get(&(a.app.clone(), a.key.clone()))
                        .is_some_and(|m| m.placeholder),
                    task_group_name: self
                        .model
                        .ask_meta
                        .get(&(a.app.clone(), a.key.clone()))
                        .map(|m| m.group.clone())
                        .unwrap_or_default(),
                    allocation_key: a.key.clone(),
                    resource_per_alloc: resource(&[("memory", a.size.0), ("vcore", a.size.1)]),
                    node_id: id.clone(),
                    application_id: a.app.clone(),
                    partition_name: PARTITION.to_string(),
                    allocation_id: aid.clone(),
                    ..Default::default()
                })
                .collect();
            for e in &existing {
                let alloc = self.model.allocs[&e.allocation_id].clone();
                self.model.recovered(&alloc);
                self.intents
                    .recovered
                    .insert((alloc.app.clone(), alloc.key.clone()));
                self.counts.recovered += 1;
            }
            let action = if n.schedulable {
                ActionFromRm::Create
            } else {
                ActionFromRm::CreateDrain
            };
            self.intents
                .nodes
                .push((id.clone(), NodeIntent::Create(n.clone())));
            infos.push(si::NodeInfo {
                node_id: id,
                action: action as i32,
                schedulable_resource: resource(&[
                    ("memory", n.capacity.0),
                    ("vcore", n.capacity.1),
                ]),
                occupied_resource: resource(&[("memory", n.occupied)]),
                existing_allocations: existing,
                ..Default::default()
            });
        }
        self.nodes(infos);
        if !asks_first && !asks.is_empty() {
            for (app, key, size, max) in &resend {
                let id = (app.clone(), key.clone());
                self.intents
                    .ask_undo
                    .push((id.clone(), self.model.asks.get(&id).cloned()));
                self.model.send_ask(app, key, *size, *max);
            }
            self.send_asks(asks);
        }
        out
    }
}
