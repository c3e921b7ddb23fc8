//! What the simulated RM believes, built only from what it sent and what the
//! core reported back, and its comparison with the core's snapshot.
//!
//! Ask bookkeeping mirrors the SI contract the core documents: an ask wants
//! `max(1, maxAllocations)` allocations; sending the same key again sets the
//! pending count to that minus the allocations it already had (a replacement
//! in flight counts as had); an ask lives while it is pending, has live
//! allocations or a replacement in flight.

use std::collections::{BTreeMap, BTreeSet};

use unisched_core::PartitionSnapshot;

/// Memory and vcore (milli) of one allocation or capacity.
pub type Size = (i64, i64);

/// A node the core accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeModel {
    /// Schedulable capacity.
    pub capacity: Size,
    /// Occupied memory.
    pub occupied: i64,
    /// False while draining.
    pub schedulable: bool,
}

/// An application the core accepted and has not dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppModel {
    /// The queue the RM asked for.
    pub queue: String,
}

/// An ask, as the core should hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskModel {
    /// Per allocation.
    pub size: Size,
    /// Allocations still wanted.
    pub pending: u32,
    /// Allocations made for this ask so far.
    pub allocated_total: u32,
    /// Allocations of this ask not yet released.
    pub live: u32,
}

/// An allocation the core reported (or the RM recovered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocModel {
    /// Allocation key.
    pub key: String,
    /// Application.
    pub app: String,
    /// Node.
    pub node: String,
    /// Resources.
    pub size: Size,
}

/// The RM's whole view.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Nodes by id.
    pub nodes: BTreeMap<String, NodeModel>,
    /// Applications by id.
    pub apps: BTreeMap<String, AppModel>,
    /// Asks by (application, key).
    pub asks: BTreeMap<(String, String), AskModel>,
    /// Allocations by id.
    pub allocs: BTreeMap<String, AllocModel>,
    /// Last reported state of every application ever seen.
    pub app_states: BTreeMap<String, String>,
    /// Applications removed by the RM or Completed: the snapshot may still
    /// list them as history, without allocations or asks.
    pub gone: BTreeSet<String>,
    /// Gang settings of the applications submitted with them.
    pub gangs: BTreeMap<String, GangModel>,
    /// Task group, placeholder flag and preemption wish of every ask sent.
    pub ask_meta: BTreeMap<(String, String), AskMeta>,
    /// Allocations the core releases and keeps until the RM confirms: id to
    /// the termination type the core sent (`PLACEHOLDER_REPLACED` or
    /// `PREEMPTED_BY_SCHEDULER`).
    pub releasing: BTreeMap<String, i32>,
    /// Placeholders being replaced: placeholder allocation id to the real ask
    /// that took one of its pending allocations.
    pub replacing: BTreeMap<String, (String, String)>,
    /// Confirmed replacements whose real allocation is due: real ask to the
    /// node and size of each confirmed placeholder.
    pub awaiting_real: BTreeMap<(String, String), Vec<(String, Size)>>,
}

/// Gang settings of an application, as submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangModel {
    /// Hard gang style.
    pub hard: bool,
    /// executionTimeoutMilliSeconds (0: none).
    pub timeout_ms: i64,
    /// placeholderAsk: total of all placeholders.
    pub placeholder_ask: Size,
    /// Per task group: placeholder size and count.
    pub groups: Vec<(String, Size, i32)>,
}

/// What an ask was sent with besides size and count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskMeta {
    /// Task group (empty: none).
    pub group: String,
    /// A placeholder ask.
    pub placeholder: bool,
    /// allowPreemptOther.
    pub preempt_other: bool,
    /// Priority last sent.
    pub priority: i32,
}

/// True for the application state changes the spec allows (section 3), plus
/// New -> Running for recovered allocations.
pub fn legal_transition(from: &str, to: &str) -> bool {
    matches!(
        (from, to),
        ("New", "Accepted" | "Running" | "Rejected" | "Failing")
            | (
                "Accepted",
                "Running" | "Completing" | "Failing" | "Resuming"
            )
            | ("Running", "Completing" | "Failing")
            | ("Completing", "Running" | "Completed" | "Failing")
            | ("Resuming", "Accepted" | "Running")
            | ("Failing", "Failed")
            | ("Completed" | "Failed" | "Rejected", "Expired")
    )
}

impl Model {
    /// The `pick`-th key of a map, if it has any.
    pub fn nth<K: Clone, V>(map: &BTreeMap<K, V>, pick: u32) -> Option<K> {
        if map.is_empty() {
            return None;
        }
        map.keys().nth(pick as usize % map.len()).cloned()
    }

    /// A new ask or the same key sent again.
    pub fn send_ask(&mut self, app: &str, key: &str, size: Size, max: i32) {
        let wanted = u32::try_from(max.max(1)).unwrap_or(1);
        let entry = self
            .asks
            .entry((app.to_string(), key.to_string()))
            .or_insert(AskModel {
                size,
                pending: 0,
                allocated_total: 0,
                live: 0,
            });
        entry.size = size;
        let id = (app.to_string(), key.to_string());
        let in_flight = self.in_flight(&id);
        let entry = self.asks.get_mut(&id).expect("just inserted");
        entry.pending = wanted
            .saturating_sub(entry.allocated_total)
            .saturating_sub(in_flight as u32);
    }

    /// Replacements by the real ask `id` started and not yet allocated.
    pub fn in_flight(&self, id: &(String, String)) -> usize {
        self.replacing.values().filter(|r| *r == id).count()
            + self.awaiting_real.get(id).map_or(0, Vec::len)
    }

    /// The RM released an ask: nothing more pending; it goes once no
    /// allocation is left (a replacement in flight counts as one).
    pub fn release_ask(&mut self, app: &str, key: &str) {
        let id = (app.to_string(), key.to_string());
        // A released real ask takes no replacement any more, but one whose
        // placeholder release the RM already confirmed was made at once.
        self.replacing.retain(|_, r| *r != id);
        let in_flight = self.in_flight(&id);
        if let Some(a) = self.asks.get_mut(&id) {
            a.pending = 0;
            if a.live == 0 && in_flight == 0 {
                self.asks.remove(&id);
            }
        }
    }

    /// An allocation reported new by the core; `Err` when it breaks the
    /// contract. `Ok(true)` for the real allocation of a confirmed
    /// replacement: it takes its placeholder's place and adds no usage, so
    /// node and queue limits do not apply to it.
    pub fn allocated(&mut self, id: &str, alloc: AllocModel) -> Result<bool, String> {
        if let Some(old) = self.allocs.get(id) {
            return Err(format!(
                "allocation id {id} reported new while still live ({old:?}); new one: {alloc:?}"
            ));
        }
        let ask_id = (alloc.app.clone(), alloc.key.clone());
        // A confirmed replacement is made when the RM confirms, on its
        // placeholder's node (checked below): the node or the app may have
        // gone right after, and the callbacks report that first.
        let confirmed = self.awaiting_real.contains_key(&ask_id);
        if !confirmed && !self.nodes.contains_key(&alloc.node) {
            return Err(format!(
                "allocation {id} on node {} the RM does not know",
                alloc.node
            ));
        }
        if !confirmed && !self.apps.contains_key(&alloc.app) {
            return Err(format!(
                "allocation {id} for application {} the RM does not know",
                alloc.app
            ));
        }
        if let Some(nodes) = self.awaiting_real.get_mut(&ask_id) {
            // The real allocation of a confirmed replacement: on the
            // placeholder's node, no larger than it, and already taken from
            // the pending count.
            let Some(i) = nodes.iter().position(|(n, _)| *n == alloc.node) else {
                return Err(format!(
                    "real allocation {id} of {} on {}, its replaced placeholders were on {nodes:?}",
                    alloc.key, alloc.node
                ));
            };
            let (_, placeholder) = nodes.remove(i);
            if alloc.size.0 > placeholder.0 || alloc.size.1 > placeholder.1 {
                return Err(format!(
                    "real allocation {id} of {} ({:?}) replaced a smaller placeholder ({placeholder:?})",
                    alloc.key, alloc.size
                ));
            }
            if nodes.is_empty() {
                self.awaiting_real.remove(&ask_id);
            }
            // The RM may have released the ask since it confirmed: the
            // allocation keeps a record that wants nothing more.
            let a = self.asks.entry(ask_id).or_insert(AskModel {
                size: alloc.size,
                pending: 0,
                allocated_total: 0,
                live: 0,
            });
            a.allocated_total += 1;
            a.live += 1;
            self.allocs.insert(id.to_string(), alloc);
            return Ok(true);
        }
        match self.asks.get_mut(&ask_id) {
            Some(a) if a.pending > 0 => {
                a.pending -= 1;
                a.allocated_total += 1;
                a.live += 1;
            }
            _ => {
                return Err(format!(
                    "allocation {id} for ask {} of {} that has nothing pending",
                    alloc.key, alloc.app
                ));
            }
        }
        self.allocs.insert(id.to_string(), alloc);
        Ok(false)
    }

    /// An allocation the RM re-reports after registering again: it satisfies
    /// the ask with its key, or becomes an ask record that wants nothing more.
    pub fn recovered(&mut self, alloc: &AllocModel) {
        let a = self
            .asks
            .entry((alloc.app.clone(), alloc.key.clone()))
            .or_insert(AskModel {
                size: alloc.size,
                pending: 0,
                allocated_total: 0,
                live: 0,
            });
        a.pending = a.pending.saturating_sub(1);
        a.allocated_total += 1;
        a.live += 1;
    }

    /// The core reports a release it initiates (`PLACEHOLDER_REPLACED`,
    /// `PREEMPTED_BY_SCHEDULER`, `TIMEOUT`): the allocation stays until the
    /// RM confirms.
    /// A replaced placeholder's real ask (the one of its task group with
    /// something pending) has one allocation less pending.
    pub fn release_started(&mut self, id: &str, termination: i32) -> Result<(), String> {
        let Some(alloc) = self.allocs.get(id) else {
            return Err(format!(
                "core-initiated release of allocation {id} the RM does not hold"
            ));
        };
        self.releasing.insert(id.to_string(), termination);
        if termination != unisched_si::TerminationType::PlaceholderReplaced as i32 {
            return Ok(());
        }
        let ph = (alloc.app.clone(), alloc.key.clone());
        let group = self.ask_meta.get(&ph).map(|m| m.group.clone());
        if !self.ask_meta.get(&ph).is_some_and(|m| m.placeholder) {
            return Err(format!("allocation {id} replaced but it is no placeholder"));
        }
        let real = self.asks.iter_mut().find(|((app, key), a)| {
            *app == ph.0
                && a.pending > 0
                && self
                    .ask_meta
                    .get(&(app.clone(), key.clone()))
                    .is_some_and(|m| !m.placeholder && Some(&m.group) == group.as_ref())
        });
        let Some((real_id, a)) = real else {
            return Err(format!(
                "placeholder {id} replaced, but no real ask of its task group {group:?} is pending"
            ));
        };
        a.pending -= 1;
        self.replacing.insert(id.to_string(), real_id.clone());
        Ok(())
    }

    /// The RM confirmed a core-initiated release: the core removes the
    /// allocation without reporting it again; a replaced placeholder's real
    /// allocation is due on its node.
    pub fn release_confirmed(&mut self, id: &str) {
        let placeholder = self.allocs.get(id).map(|a| (a.node.clone(), a.size));
        if let Some(real) = self.replacing.remove(id)
            && let Some(placeholder) = placeholder
        {
            self.awaiting_real
                .entry(real)
                .or_default()
                .push(placeholder);
        }
        let _ = self.released(id);
    }

    /// An allocation the core reported released; `Err` when it was not live.
    pub fn released(&mut self, id: &str) -> Result<(), String> {
        let Some(alloc) = self.allocs.remove(id) else {
            return Err(format!("release of allocation {id} the RM does not hold"));
        };
        self.releasing.remove(id);
        if let Some(real) = self.replacing.remove(id)
            && let Some(a) = self.asks.get_mut(&real)
        {
            // The placeholder went another way: the real ask wants it back.
            a.pending += 1;
        }
        let ask_id = (alloc.app, alloc.key);
        let in_flight = self.in_flight(&ask_id);
        if let Some(a) = self.asks.get_mut(&ask_id) {
            a.live = a.live.saturating_sub(1);
            if a.live == 0 && a.pending == 0 && in_flight == 0 {
                self.asks.remove(&ask_id);
            }
        }
        Ok(())
    }

    /// A state change reported for `app`; `Err` when the transition is illegal.
    pub fn app_state(&mut self, app: &str, state: &str) -> Result<(), String> {
        let from = self
            .app_states
            .insert(app.to_string(), state.to_string())
            .unwrap_or_else(|| "New".to_string());
        if !legal_transition(&from, state) {
            return Err(format!(
                "application {app}: illegal transition {from} -> {state}"
            ));
        }
        if state == "Completed" || state == "Failed" {
            self.apps.remove(app);
            self.gone.insert(app.to_string());
            let left: Vec<_> = self.allocs.values().filter(|a| a.app == app).collect();
            if !left.is_empty() && state == "Completed" {
                return Err(format!(
                    "application {app} Completed with allocations still live: {left:?}"
                ));
            }
            self.asks.retain(|(a, _), _| a != app);
        }
        Ok(())
    }

    /// Every way the core's snapshot disagrees with this view.
    pub fn compare(&self, snap: &PartitionSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        let size = |m: &BTreeMap<String, i64>| -> Size {
            (
                m.get("memory").copied().unwrap_or(0),
                m.get("vcore").copied().unwrap_or(0),
            )
        };
        // Allocations: none lost, none unknown, same placement.
        let core: BTreeMap<&str, _> = snap
            .allocations
            .iter()
            .map(|a| (a.allocation_id.as_str(), a))
            .collect();
        if core.len() != snap.allocations.len() {
            out.push("snapshot lists an allocation id twice".to_string());
        }
        for (id, a) in &self.allocs {
            match core.get(id.as_str()) {
                None => out.push(format!(
                    "allocation {id} ({a:?}) held by the RM is missing in the core"
                )),
                Some(c) => {
                    let theirs = AllocModel {
                        key: c.allocation_key.clone(),
                        app: c.application_id.clone(),
                        node: c.node_id.clone(),
                        size: size(&c.resource),
                    };
                    if &theirs != a {
                        out.push(format!(
                            "allocation {id}: RM has {a:?}, core has {theirs:?}"
                        ));
                    }
                }
            }
        }
        for id in core.keys() {
            if !self.allocs.contains_key(*id) {
                out.push(format!(
                    "allocation {id} in the core was never reported to the RM"
                ));
            }
        }
        // Nodes.
        let nodes: BTreeSet<&str> = snap.nodes.iter().map(|n| n.id.as_str()).collect();
        let mine: BTreeSet<&str> = self.nodes.keys().map(String::as_str).collect();
        if nodes != mine {
            out.push(format!("nodes: RM has {mine:?}, core has {nodes:?}"));
        }
        for n in &snap.nodes {
            if let Some(m) = self.nodes.get(&n.id) {
                let theirs = NodeModel {
                    capacity: size(&n.capacity),
                    occupied: size(&n.occupied).0,
                    schedulable: n.schedulable,
                };
                if &theirs != m {
                    out.push(format!("node {}: RM has {m:?}, core has {theirs:?}", n.id));
                }
            }
        }
        // Applications and their states.
        let apps: BTreeSet<&str> = snap
            .applications
            .iter()
            .filter(|a| {
                !self.gone.contains(&a.id) || a.allocation_count > 0 || !a.pending_asks.is_empty()
            })
            .map(|a| a.id.as_str())
            .collect();
        let mine: BTreeSet<&str> = self.apps.keys().map(String::as_str).collect();
        if apps != mine {
            out.push(format!(
                "applications: RM has {mine:?}, core has {apps:?} (besides finished ones)"
            ));
        }
        for a in &snap.applications {
            let Some(m) = self.apps.get(&a.id) else {
                continue;
            };
            if a.queue != m.queue {
                out.push(format!(
                    "application {} placed in {}, asked for {}",
                    a.id, a.queue, m.queue
                ));
            }
            let reported = self.app_states.get(&a.id).map_or("New", String::as_str);
            if a.state != reported {
                out.push(format!(
                    "application {} is {} in the core, last reported {reported}",
                    a.id, a.state
                ));
            }
            let core_asks: BTreeMap<&str, u32> = a
                .pending_asks
                .iter()
                .map(|k| (k.allocation_key.as_str(), k.pending_allocations))
                .collect();
            // The asks of this application only: keys sort by application
            // first, so a range finds them without a walk over every ask
            // (which made a long seed's steps grow with its history).
            let my_asks: BTreeMap<&str, u32> = self
                .asks
                .range((a.id.clone(), String::new())..)
                .take_while(|((app, _), _)| app == &a.id)
                .filter(|(_, k)| k.pending > 0)
                .map(|((_, key), k)| (key.as_str(), k.pending))
                .collect();
            if core_asks != my_asks {
                out.push(format!(
                    "application {} pending asks: RM expects {my_asks:?}, core has {core_asks:?}",
                    a.id
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_follow_the_spec() {
        for (from, to) in [
            ("New", "Accepted"),
            ("Accepted", "Running"),
            ("Running", "Completing"),
            ("Completing", "Running"),
            ("Completing", "Completed"),
            ("Accepted", "Completing"),
        ] {
            assert!(legal_transition(from, to), "{from} -> {to}");
        }
        for (from, to) in [
            ("Completed", "Running"),
            ("New", "Completing"),
            ("Running", "New"),
        ] {
            assert!(!legal_transition(from, to), "{from} -> {to}");
        }
    }

    #[test]
    fn a_second_report_of_a_live_id_is_refused() {
        let mut m = Model::default();
        m.apps.insert(
            "app".into(),
            AppModel {
                queue: "root.a".into(),
            },
        );
        m.nodes.insert(
            "n".into(),
            NodeModel {
                capacity: (100, 1000),
                occupied: 0,
                schedulable: true,
            },
        );
        m.send_ask("app", "k", (10, 100), 2);
        let alloc = AllocModel {
            key: "k".into(),
            app: "app".into(),
            node: "n".into(),
            size: (10, 100),
        };
        assert_eq!(m.allocated("k-0", alloc.clone()), Ok(false));
        assert!(m.allocated("k-0", alloc).is_err());
        assert!(m.released("k-0").is_ok());
        assert!(m.released("k-0").is_err());
    }
}
