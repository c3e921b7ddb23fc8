//! After each step: the core's answers applied to the model, then every
//! check of the model and the snapshot.

use std::collections::BTreeSet;

use super::super::callback::Inbound;
use super::super::check;
use super::super::model::Size;
use super::*;

impl Sim {
    /// Applies what the core sent to the model; the RM confirms some
    /// core-initiated releases at once, in rounds, which the core answers (a
    /// replacement's real allocation, a preemptor placed).
    pub(super) fn absorb(
        &mut self,
        step: usize,
        intents: &mut Intents,
        out: &mut Vec<String>,
        new: &mut Vec<(String, String)>,
        failed: &mut Vec<String>,
    ) {
        for _round in 0..32 {
            let mut started = Vec::new();
            for item in self.callback.take() {
                if self.trace {
                    eprintln!("  [{step}] <- {item:?}");
                }
                match item {
                    Inbound::Node(r) => self.on_nodes(r, intents),
                    Inbound::Application(r) => {
                        failed.extend(
                            r.updated
                                .iter()
                                .filter(|u| u.state == "Failed")
                                .map(|u| u.application_id.clone()),
                        );
                        out.extend(self.on_apps(r, intents))
                    }
                    Inbound::Allocation(r) => {
                        out.extend(self.on_allocations(r, intents, new, &mut started))
                    }
                    Inbound::AskTimedOut(app, key) => self.model.release_ask(&app, &key),
                }
            }
            if started.is_empty() {
                break;
            }
            out.extend(self.check_preemptions(&started));
            let mut now = Vec::new();
            for id in started {
                match confirm_delay(self.seed, &id) {
                    Some(0) => now.push(id),
                    Some(n) => self.confirm_queue.push((step + n, id)),
                    None => {}
                }
            }
            if now.is_empty() {
                break;
            }
            self.confirm(&now);
            self.sched.settle();
        }
    }

    /// Settles, applies the callbacks to the model and checks everything.
    pub(super) fn finish_step(&mut self, step: usize) -> Vec<String> {
        self.sched.settle();
        self.counts.steps += 1;
        self.counts.callback_faults = self.callback.faults();
        let mut out = Vec::new();
        let mut new = Vec::new();
        let mut intents = std::mem::take(&mut self.intents);
        let mut failed = Vec::new();
        self.absorb(step, &mut intents, &mut out, &mut new, &mut failed);
        if let Some(key) = intents.ask_rejection {
            out.push(format!("bad ask {key} was not rejected"));
        }
        let Some(snap) = self.snapshot() else {
            out.push("partition default is missing".to_string());
            return out;
        };
        for app in failed {
            // A failed (hard gang) application keeps nothing, placeholders included.
            let left: Vec<_> = self
                .model
                .allocs
                .values()
                .filter(|a| a.app == app)
                .collect();
            let core = snap
                .allocations
                .iter()
                .filter(|a| a.application_id == app)
                .count();
            if !left.is_empty() || core > 0 {
                out.push(format!(
                    "application {app} Failed with allocations left: RM {left:?}, core {core}"
                ));
            }
        }
        if self.trace {
            for a in &snap.applications {
                let asks: Vec<_> = a
                    .pending_asks
                    .iter()
                    .map(|k| (&k.allocation_key, k.pending_allocations))
                    .collect();
                eprintln!(
                    "  = {} {} {:?} pending {asks:?}",
                    a.id, a.state, a.allocated
                );
            }
        }
        out.extend(self.model.compare(&snap));
        out.extend(check::invariants(&snap, step));
        let limits = check::StepLimits::of(&snap);
        out.extend(check::limits(&snap, &new, self.step_limits.as_ref()));
        self.step_limits = Some(limits);
        out.extend(check::liveness_except(
            &snap,
            self.predicates,
            &self.gang_waiting(),
        ));
        out
    }

    /// Whether `size` fits the root's max, which is the total capacity of
    /// the nodes (a type no node has is unlimited): a gang application whose
    /// placeholders do not is refused, as upstream refuses it.
    pub(super) fn fits_cluster(&self, size: Size) -> bool {
        let (memory, vcore) = self
            .model
            .nodes
            .values()
            .fold((0, 0), |(m, v), n| (m + n.capacity.0, v + n.capacity.1));
        (memory == 0 || size.0 <= memory) && (vcore == 0 || size.1 <= vcore)
    }

    /// Real asks that wait for a placeholder of their task group to replace
    /// (one is pending or allocated, or a replacement is in flight): the
    /// core does not schedule them normally, so liveness does not judge them.
    pub(super) fn gang_waiting(&self) -> BTreeSet<(String, String)> {
        let m = &self.model;
        let mut out = BTreeSet::new();
        // Over the live asks (the metadata of every ask ever sent only
        // grows), and for each over its own application's asks alone: a
        // long seed's steps must not grow with its history.
        for id in m.asks.keys() {
            let Some(meta) = m.ask_meta.get(id) else {
                continue;
            };
            if meta.placeholder || meta.group.is_empty() {
                continue;
            }
            let placeholders = m
                .asks
                .range((id.0.clone(), String::new())..)
                .take_while(|(pid, _)| pid.0 == id.0)
                .any(|(pid, a)| {
                    (a.pending > 0 || a.live > 0)
                        && m.ask_meta
                            .get(pid)
                            .is_some_and(|p| p.placeholder && p.group == meta.group)
                });
            let in_flight =
                m.replacing.values().any(|r| r == id) || m.awaiting_real.contains_key(id);
            if placeholders || in_flight {
                out.insert(id.clone());
            }
        }
        out
    }

    /// Preemption laws for victims just released, against the ask the core
    /// named in each release: of another application, and of at least the
    /// victim's priority (as the RM last sent both).
    pub(super) fn check_preemptions(&self, started: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for id in started {
            if self.model.releasing.get(id) != Some(&PREEMPTED) {
                continue;
            }
            let (Some(v), Some((app, key))) =
                (self.model.allocs.get(id), self.preempted_for.get(id))
            else {
                continue;
            };
            if *app == v.app {
                out.push(format!(
                    "allocation {id} of {app} preempted for ask {key} of its own application"
                ));
            }
            let vp = self.alloc_priority.get(id).copied().unwrap_or(0);
            let meta = self.model.ask_meta.get(&(app.clone(), key.clone()));
            match meta {
                Some(m) if vp > m.priority => out.push(format!(
                    "allocation {id} of {} (priority {vp}) preempted for ask {key} of {app} with lower priority {}",
                    v.app, m.priority
                )),
                Some(_) => {}
                None => out.push(format!(
                    "allocation {id} preempted for ask {key} of {app}, which the RM never sent"
                )),
            }
        }
        out
    }
}
