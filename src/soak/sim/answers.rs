//! The core's answers (node, application and allocation responses) applied
//! to the RM's model, with what they must not contain.

use unisched_si as si;

use super::super::model::AllocModel;
use super::*;

impl Sim {
    pub(super) fn on_nodes(&mut self, r: si::NodeResponse, intents: &mut Intents) {
        let mut take = |id: &str| {
            let i = intents.nodes.iter().position(|(n, _)| n == id)?;
            Some(intents.nodes.remove(i).1)
        };
        for a in r.accepted {
            match take(&a.node_id) {
                Some(NodeIntent::Create(n)) => {
                    self.model.nodes.insert(a.node_id, n);
                }
                Some(NodeIntent::Update(cap, occ)) => {
                    if let Some(n) = self.model.nodes.get_mut(&a.node_id) {
                        n.capacity = cap;
                        n.occupied = occ;
                    }
                }
                Some(NodeIntent::Schedulable(s)) => {
                    if let Some(n) = self.model.nodes.get_mut(&a.node_id) {
                        n.schedulable = s;
                    }
                }
                Some(NodeIntent::Remove) => {
                    self.model.nodes.remove(&a.node_id);
                }
                None => {}
            }
        }
        for rej in r.rejected {
            take(&rej.node_id);
            self.counts.rejections += 1;
        }
    }

    pub(super) fn on_apps(
        &mut self,
        r: si::ApplicationResponse,
        intents: &mut Intents,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for a in r.accepted {
            if intents.refused_gangs.contains(&a.application_id) {
                out.push(format!(
                    "gang application {} accepted with placeholders above a queue max",
                    a.application_id
                ));
            }
            if let Some(queue) = intents.apps.remove(&a.application_id) {
                self.model
                    .apps
                    .insert(a.application_id, super::super::model::AppModel { queue });
            }
        }
        for rej in r.rejected {
            self.counts.rejections += 1;
            let new = intents.apps.remove(&rej.application_id).is_some();
            let id = &rej.application_id;
            if intents.refused_gangs.contains(id) {
                // Placeholders above a queue max (a reload may have lowered
                // it since the app was accepted): the RM drops the app.
                self.model.apps.remove(id);
                self.model.gone.insert(id.clone());
                self.model.asks.retain(|(a, _), _| a != id);
                self.model.allocs.retain(|_, a| a.app != *id);
                self.model.awaiting_real.retain(|(a, _), _| a != id);
                self.model.replacing.retain(|_, (a, _)| a != id);
            } else if new && self.model.gangs.contains_key(id) {
                out.push(format!("gang application {id} refused: {}", rej.reason));
            } else if intents.readded.contains(&rej.application_id) {
                out.push(format!(
                    "application {} refused when re-reported: {}",
                    rej.application_id, rej.reason
                ));
                self.model.apps.remove(&rej.application_id);
            }
        }
        for u in r.updated {
            if let Err(e) = self.model.app_state(&u.application_id, &u.state) {
                out.push(e);
            }
        }
        out
    }

    pub(super) fn on_allocations(
        &mut self,
        r: si::AllocationResponse,
        intents: &mut Intents,
        new: &mut Vec<(String, String)>,
        started: &mut Vec<String>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        // One response carries everything since the last one: an allocation the
        // RM already held was released before any new one in it was made (a
        // new one may use what it freed), a new one released in the same
        // response after it was made.
        let (before, after): (Vec<_>, Vec<_>) = r
            .released
            .into_iter()
            .partition(|rel| self.model.allocs.contains_key(&rel.allocation_id));
        self.on_released(before, started, &mut out);
        for a in r.new {
            self.counts.allocations += 1;
            self.alloc_priority
                .insert(a.allocation_id.clone(), a.priority);
            let alloc = AllocModel {
                key: a.allocation_key,
                app: a.application_id,
                node: a.node_id,
                size: size_of(a.resource_per_alloc.as_ref()),
            };
            let (node, app) = (alloc.node.clone(), alloc.app.clone());
            match self.model.allocated(&a.allocation_id, alloc) {
                Ok(false) => new.push((node, app)),
                Ok(true) => {}
                Err(e) => out.push(e),
            }
        }
        self.on_released(after, started, &mut out);
        for rej in r.rejected {
            self.counts.rejections += 1;
            let id = (rej.application_id.clone(), rej.allocation_key.clone());
            if intents.ask_rejection.as_deref() == Some(rej.allocation_key.as_str()) {
                intents.ask_rejection = None;
            } else if let Some(i) = intents.ask_undo.iter().position(|(k, _)| *k == id) {
                let (_, old) = intents.ask_undo.remove(i);
                match old {
                    // A refused gang app's asks go with it.
                    Some(old) if !intents.refused_gangs.contains(&id.0) => {
                        self.model.asks.insert(id, old);
                    }
                    _ => {
                        self.model.asks.remove(&id);
                    }
                }
            } else {
                out.push(format!(
                    "ask {} of {} rejected unexpectedly: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
            }
        }
        for rej in r.rejected_allocations {
            self.counts.rejections += 1;
            let id = (rej.application_id.clone(), rej.allocation_key.clone());
            if intents.unknown_release.as_deref() == Some(rej.allocation_key.as_str()) {
                out.push(format!(
                    "release of unknown allocation {} was rejected, not ignored: {}",
                    rej.allocation_key, rej.reason
                ));
            } else if intents.refused_gangs.contains(&id.0) {
                // The allocations of a refused gang application go with it.
                self.model
                    .allocs
                    .retain(|_, a| !(a.app == id.0 && a.key == id.1));
            } else if intents.recovered.contains(&id) {
                out.push(format!(
                    "recovered allocation {} of {} refused: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
                self.model
                    .allocs
                    .retain(|_, a| !(a.app == id.0 && a.key == id.1));
            } else {
                out.push(format!(
                    "allocation release {} of {} rejected unexpectedly: {}",
                    rej.allocation_key, rej.application_id, rej.reason
                ));
            }
        }
        out
    }

    /// Releases the core reported: core-initiated ones start waiting for the
    /// RM's confirmation, the others leave the model.
    pub(super) fn on_released(
        &mut self,
        released: Vec<si::AllocationRelease>,
        started: &mut Vec<String>,
        out: &mut Vec<String>,
    ) {
        for rel in released {
            let t = rel.termination_type;
            let first = !self.model.releasing.contains_key(&rel.allocation_id);
            if (t == REPLACED || t == PREEMPTED || t == TIMEOUT) && first {
                if t == PREEMPTED {
                    match preemptor(&rel.message) {
                        Some(who) => {
                            self.preempted_for.insert(rel.allocation_id.clone(), who);
                        }
                        None => out.push(format!(
                            "preemption of {} names no ask it makes room for: {:?}",
                            rel.allocation_id, rel.message
                        )),
                    }
                }
                // Core-initiated: the allocation stays until the RM confirms.
                match self.model.release_started(&rel.allocation_id, t) {
                    Ok(()) => started.push(rel.allocation_id),
                    Err(e) => out.push(e),
                }
                continue;
            }
            self.counts.releases += 1;
            self.alloc_priority.remove(&rel.allocation_id);
            self.preempted_for.remove(&rel.allocation_id);
            if let Err(e) = self.model.released(&rel.allocation_id) {
                out.push(e);
            }
        }
    }
}

/// The (application, ask) a preemption release names as the ask it makes
/// room for: `<PREEMPTED_FOR> <key> of application <app>`.
fn preemptor(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix(unisched_core::scheduler::PREEMPTED_FOR)?;
    let (key, app) = rest.trim_start().rsplit_once(" of application ")?;
    Some((app.to_string(), key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::preemptor;
    use unisched_core::scheduler::PREEMPTED_FOR;

    #[test]
    fn preemption_releases_name_the_ask_they_make_room_for() {
        let message = format!("{PREEMPTED_FOR} ask-7 of application app-3");
        assert_eq!(
            preemptor(&message),
            Some(("app-3".to_string(), "ask-7".to_string()))
        );
        assert_eq!(preemptor("preempted by the scheduler"), None);
        assert_eq!(preemptor(&format!("{PREEMPTED_FOR} ask-7")), None);
    }
}
