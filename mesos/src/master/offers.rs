//! Offers: the core's leases become OFFERS events; DECLINE, REVIVE,
//! SUPPRESS; offers rescinded, discarded or timed out give their lease back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use unisched_core::scheduler::offers::OfferChange;
use unisched_si as si;

use super::state::{Master, Offer, RUN_TIMINGS_KEPT, Timer};
use super::units::{app_id, granted_scalar, to_core};
use crate::resources::Resources;
use crate::v1;
use crate::v1::scheduler::{Event, event};

/// Mesos' default `refuse_seconds`.
pub const DEFAULT_REFUSE: f64 = 5.0;
/// The longest filter Mesos keeps.
pub const MAX_REFUSE: f64 = 365.0 * 24.0 * 3600.0;

/// How long a decline filter lasts, by Mesos' rules: no filters given or a
/// negative value means 5 s, 0 means no filter, more than a year means a year.
pub fn refuse_duration(filters: Option<&v1::Filters>) -> Option<Duration> {
    let secs = filters
        .and_then(|f| f.refuse_seconds)
        .unwrap_or(DEFAULT_REFUSE);
    let secs = if secs.is_nan() || secs < 0.0 {
        DEFAULT_REFUSE
    } else {
        secs.min(MAX_REFUSE)
    };
    (secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The offer policy change for minimum allocatable resources.
pub fn policy_change(min: &[Resources]) -> OfferChange {
    OfferChange::Policy {
        min_allocatable: min.iter().map(|r| to_core(r.iter())).collect(),
    }
}

/// One offer being made in an allocation run: a (framework, role, agent)
/// and the leases of the agent's pools it is made of, with what the event
/// needs of the agent.
struct Part {
    /// The framework's place in the run's list of OFFERS events.
    slot: usize,
    framework: String,
    role: String,
    agent: String,
    hostname: String,
    attributes: Vec<v1::Attribute>,
    executor_ids: Vec<v1::ExecutorId>,
    leases: Vec<String>,
    /// Unallocated form.
    resources: Resources,
}

/// An allocation run the core sends in parts, between its first part and
/// its last: the parts made so far and the run's frameworks.
pub(super) struct OpenRun {
    run: u64,
    parts: Vec<Part>,
    /// The run's frameworks, in the order of their first part, with their
    /// number of parts (one offer each).
    slots: Vec<(String, usize)>,
    /// When the first part came.
    received: Instant,
}

/// What an allocation run made for one framework: the events of its
/// offers and their ids.
struct RunOffers {
    framework: String,
    offers: Vec<v1::Offer>,
    ids: Vec<Arc<str>>,
}

impl Master {
    /// True between the first and the last part of an allocation run sent
    /// in parts.
    pub(super) fn run_open(&self) -> bool {
        self.open_run.is_some()
    }

    /// What the core sent for our partition: leases to turn into offers,
    /// releases it made itself, rejections. `last` is false for a part of
    /// an allocation run that goes on: its leases become parts of offers,
    /// and the offers are made and sent when the last part is in.
    pub(super) fn allocation_response(
        &mut self,
        response: si::AllocationResponse,
        received: Instant,
        last: bool,
    ) {
        for released in &response.released {
            self.core_released(released);
        }
        for rejected in &response.rejected_allocations {
            self.task_allocation_rejected(&rejected.allocation_key, &rejected.reason);
        }
        for rejected in &response.rejected {
            tracing::debug!(key = %rejected.allocation_key, reason = %rejected.reason, "the core refused an offer change");
        }
        let mut open = match self.open_run.take() {
            Some(open) => open,
            None if response.new.is_empty() => return,
            None => {
                // Counted before anything else, so no two runs share a
                // number even when one stops half way.
                self.counters.allocation_runs += 1;
                OpenRun {
                    run: self.counters.allocation_runs,
                    parts: Vec::new(),
                    slots: Vec::new(),
                    received,
                }
            }
        };
        // One offer per (framework, role, agent) of this run, made of the
        // leases of that agent's pools, in the order the core made them.
        // A run offers thousands of agents: an agent and a framework each
        // hold where this run keeps their parts and offers (`run_parts`,
        // `offer_run`, valid for this run's number), so no map keyed by
        // their long ids is built per run.
        open.parts.reserve(response.new.len());
        for lease in response.new {
            if lease.allocation_key != lease.application_id {
                continue;
            }
            self.lease_part(lease, open.run, &mut open.parts, &mut open.slots);
        }
        if !last {
            tracing::trace!(
                run = open.run,
                parts = open.parts.len(),
                "allocation run open"
            );
            self.open_run = Some(open);
            return;
        }
        let OpenRun {
            parts,
            slots,
            received,
            ..
        } = open;
        // The books grow once per run, when the run's offers are known.
        self.offers.reserve(parts.len());
        self.offer_by_lease
            .reserve(parts.iter().map(|p| p.leases.len()).sum());
        // One OFFERS event per framework, sent in the order of their ids;
        // each list sized for its offers.
        let mut by_framework: Vec<RunOffers> = slots
            .into_iter()
            .map(|(framework, n)| RunOffers {
                framework,
                offers: Vec::with_capacity(n),
                ids: Vec::with_capacity(n),
            })
            .collect();
        // The offers of one run are made at one time.
        let now = self.now();
        for part in parts {
            self.make_offer(part, now, &mut by_framework);
        }
        // Each framework's offers join its set once per run (one lookup
        // of the framework, not one per offer).
        for run in &mut by_framework {
            if let Some(f) = self.frameworks.get_mut(&run.framework) {
                f.offers.extend(run.ids.drain(..));
            }
        }
        by_framework.sort_unstable_by(|a, b| a.framework.cmp(&b.framework));
        for RunOffers {
            framework, offers, ..
        } in by_framework
        {
            self.counters.offers_sent += offers.len() as u64;
            self.send(
                &framework,
                Event {
                    r#type: Some(event::Type::Offers as i32),
                    offers: Some(event::Offers { offers }),
                    ..Default::default()
                },
            );
        }
        let ms = received.elapsed().as_secs_f64() * 1000.0;
        let timings = &mut self.counters.allocation_run_ms;
        timings.push_back(ms);
        while timings.len() > RUN_TIMINGS_KEPT {
            timings.pop_front();
        }
    }

    /// Takes what a lease of the core grants of its pool's free resources
    /// (its scalars, and the free ranges and sets that go with them) out of
    /// the agent's free resources, into the run's part for its framework,
    /// role and agent (a new one, or the one another pool's lease started);
    /// the lease is released when it cannot become part of an offer.
    fn lease_part(
        &mut self,
        lease: si::Allocation,
        run: u64,
        parts: &mut Vec<Part>,
        slots: &mut Vec<(String, usize)>,
    ) {
        // The books are borrowed field by field: nothing is copied until a
        // part is made.
        let Master {
            apps,
            frameworks,
            nodes,
            agents,
            core,
            ..
        } = self;
        let found = apps
            .get(&lease.application_id)
            // The framework left, or is disconnected, while the lease was
            // on its way; or the agent went.
            .and_then(|(framework, role)| {
                let f = frameworks.get_mut(framework).filter(|f| f.connected())?;
                let (agent_id, pool) = nodes.get(&lease.node_id)?;
                let agent = agents.get_mut(agent_id)?;
                Some((framework, f, role, agent_id, pool, agent))
            });
        let Some((framework, f, role, agent_id, pool, agent)) = found else {
            core.release(lease.application_id, lease.allocation_id);
            return;
        };
        let grant = lease.resource_per_alloc.as_ref();
        let granted = |name: &str| grant.and_then(|r| granted_scalar(r, name));
        let resources = agent.take_offer(role, |r| pool.holds(r), granted);
        if resources.is_empty() {
            core.release(lease.application_id, lease.allocation_id);
            return;
        }
        if agent.run_parts.0 != run {
            agent.run_parts = (run, Default::default());
        }
        let same = agent
            .run_parts
            .1
            .iter()
            .copied()
            .find(|&i| parts[i].framework == *framework && parts[i].role == *role);
        match same {
            Some(i) => {
                let part = &mut parts[i];
                part.leases.push(lease.allocation_id);
                part.resources.add(&resources);
            }
            None => {
                agent.run_parts.1.push(parts.len());
                if f.offer_run.0 != run {
                    f.offer_run = (run, slots.len());
                    slots.push((framework.clone(), 0));
                }
                let slot = f.offer_run.1;
                slots[slot].1 += 1;
                let executor_ids = agent
                    .executors
                    .keys()
                    .filter(|(f, _)| f == framework)
                    .map(|(_, e)| v1::ExecutorId { value: e.clone() })
                    .collect();
                parts.push(Part {
                    slot,
                    framework: framework.clone(),
                    role: role.clone(),
                    agent: agent_id.clone(),
                    hostname: agent.info.hostname.clone(),
                    attributes: agent.info.attributes.clone(),
                    executor_ids,
                    leases: vec![lease.allocation_id],
                    resources,
                });
            }
        }
    }

    /// Records an offer of a run's part (its resources in unallocated form)
    /// and adds its event and id to the framework's lists of this run (the
    /// caller adds the ids to the framework's set).
    fn make_offer(&mut self, part: Part, now: u64, by_framework: &mut [RunOffers]) {
        let Part {
            slot,
            framework,
            role,
            agent: agent_id,
            hostname,
            attributes,
            executor_ids,
            leases,
            mut resources,
        } = part;
        let id = self.new_offer_id();
        // The books share one copy of the id; the event has its own.
        let shared: Arc<str> = Arc::from(id.as_str());
        resources.allocate(&role);
        let event_resources = resources.to_vec();
        let allocation_info = Some(v1::resource::AllocationInfo {
            role: Some(role.clone()),
        });
        for lease in &leases {
            self.offer_by_lease.insert(lease.clone(), shared.clone());
        }
        if let Some(t) = self.settings.offer_timeout {
            self.after(t, Timer::OfferTimeout(shared.clone()));
        }
        by_framework[slot].ids.push(shared.clone());
        self.offers.insert(
            shared.clone(),
            Offer {
                id: shared,
                framework: framework.clone(),
                resources,
                role,
                agent: agent_id.clone(),
                leases,
                created: now,
            },
        );
        // The event takes the strings the books did not need.
        by_framework[slot].offers.push(v1::Offer {
            id: v1::OfferId { value: id },
            framework_id: v1::FrameworkId { value: framework },
            agent_id: v1::AgentId { value: agent_id },
            hostname,
            url: None,
            domain: None,
            resources: event_resources,
            attributes,
            executor_ids,
            unavailability: None,
            allocation_info,
        });
    }

    /// Takes an offer out of the books, its resources back to its agent's
    /// free resources; returns it. The leases are not released here: the
    /// caller does that (with a filter, or turned into tasks).
    pub(super) fn take_offer(&mut self, id: &str) -> Option<Offer> {
        let offer = self.withdraw_offer(id)?;
        if let Some(a) = self.agents.get_mut(&offer.agent) {
            a.unoffer(&offer.resources);
        }
        Some(offer)
    }

    /// Takes an offer out of the books, its resources still out of the
    /// agent's free resources (an ACCEPT decides where they go).
    pub(super) fn withdraw_offer(&mut self, id: &str) -> Option<Offer> {
        let offer = self.offers.remove(id)?;
        for lease in &offer.leases {
            self.offer_by_lease.remove(lease);
        }
        if let Some(f) = self.frameworks.get_mut(&offer.framework) {
            f.offers.remove(id);
        }
        Some(offer)
    }

    /// Gives an offer back without a filter; with `event`, the framework is
    /// told (RESCIND), else the offer is silently discarded.
    pub(super) fn rescind(&mut self, id: &str, event: bool) {
        let Some(offer) = self.take_offer(id) else {
            return;
        };
        if event {
            self.counters.offers_rescinded += 1;
            self.send(
                &offer.framework,
                Event {
                    r#type: Some(event::Type::Rescind as i32),
                    rescind: Some(event::Rescind {
                        offer_id: v1::OfferId {
                            value: offer.id.to_string(),
                        },
                    }),
                    ..Default::default()
                },
            );
        }
        self.release_leases(&offer);
    }

    /// Gives an offer's leases back to the core.
    pub(super) fn release_leases(&mut self, offer: &Offer) {
        let app = app_id(&offer.framework, &offer.role);
        for lease in &offer.leases {
            self.core.release(app.clone(), lease.clone());
        }
    }

    /// Gives back what is left of accepted or declined offers, filtering the
    /// agent for the framework's role as `filters` say.
    pub(super) fn decline_resources(
        &mut self,
        framework: &str,
        role: &str,
        agent: &str,
        refused: &Resources,
        filters: Option<&v1::Filters>,
    ) {
        let Some(duration) = refuse_duration(filters) else {
            return;
        };
        // A filter per pool node of the agent, holding what was refused of
        // that pool (the core matches subsets per node).
        let now = self.now();
        let app = app_id(framework, role);
        let changes: Vec<OfferChange> = super::pools::split(refused)
            .into_iter()
            .filter_map(|(pool, part)| {
                let node = self.agents.get(agent)?.pools.get(&pool)?.node.clone();
                Some(OfferChange::Filter {
                    application_id: app.clone(),
                    node_id: node,
                    refused: to_core(part.iter()),
                    duration,
                    since: Some(now),
                })
            })
            .collect();
        self.core.offers(changes);
    }

    /// DECLINE: unknown offers are ignored.
    pub(super) fn decline(&mut self, framework: &str, decline: v1::scheduler::call::Decline) {
        for id in decline.offer_ids {
            let owned = self
                .offers
                .get(id.value.as_str())
                .is_some_and(|o| o.framework == framework);
            if !owned {
                continue;
            }
            let Some(offer) = self.take_offer(&id.value) else {
                continue;
            };
            self.counters.offers_declined += 1;
            self.decline_resources(
                framework,
                &offer.role,
                &offer.agent,
                &offer.resources,
                decline.filters.as_ref(),
            );
            self.release_leases(&offer);
        }
    }

    /// The roles a REVIVE or SUPPRESS names (all of the framework's when
    /// empty), and those it names that the framework does not have.
    fn named_roles(&self, framework: &str, roles: Vec<String>) -> Vec<String> {
        let all = &self.frameworks[framework].roles;
        if roles.is_empty() {
            return all.clone();
        }
        roles
            .into_iter()
            .filter(|r| {
                let known = all.contains(r);
                if !known {
                    tracing::warn!(%framework, role = %r, "ignoring a role the framework is not subscribed to");
                }
                known
            })
            .collect()
    }

    /// REVIVE: the roles want offers again, their filters are gone.
    pub(super) fn revive(&mut self, framework: &str, roles: Vec<String>) {
        let roles = self.named_roles(framework, roles);
        let mut changes = Vec::new();
        for role in roles {
            self.frameworks
                .get_mut(framework)
                .expect("framework exists")
                .suppressed
                .remove(&role);
            let app = app_id(framework, &role);
            changes.push(OfferChange::ClearFilters {
                application_id: app.clone(),
            });
            changes.push(OfferChange::Demand {
                application_id: app,
                active: true,
            });
        }
        // Mesos allocates at once after a REVIVE.
        changes.push(OfferChange::Allocate);
        self.core.offers(changes);
    }

    /// SUPPRESS: no new offers for the roles; outstanding ones stay valid.
    pub(super) fn suppress(&mut self, framework: &str, roles: Vec<String>) {
        let roles = self.named_roles(framework, roles);
        let mut changes = Vec::new();
        for role in roles {
            self.frameworks
                .get_mut(framework)
                .expect("framework exists")
                .suppressed
                .insert(role.clone());
            changes.push(OfferChange::Demand {
                application_id: app_id(framework, &role),
                active: false,
            });
        }
        self.core.offers(changes);
    }

    /// An offer's timeout passed: rescinded, no filter.
    pub(super) fn offer_timed_out(&mut self, id: &str) {
        let Some(offer) = self.offers.get(id) else {
            return;
        };
        let due = self
            .settings
            .offer_timeout
            .is_some_and(|t| self.now() >= offer.created.saturating_add(t.as_nanos() as u64));
        if due {
            self.counters.offers_timed_out += 1;
            self.rescind(id, true);
        }
    }

    /// The core released an allocation by itself (its node went away): an
    /// offer still standing on it is rescinded. Leases the master released
    /// are out of `offer_by_lease` already, so their echo finds nothing.
    fn core_released(&mut self, released: &si::AllocationRelease) {
        if let Some(offer) = self.offer_by_lease.get(&released.allocation_id).cloned() {
            let Some(mut o) = self.take_offer(&offer) else {
                return;
            };
            // The other leases of the offer go back too.
            o.leases.retain(|l| *l != released.allocation_id);
            self.release_leases(&o);
            self.counters.offers_rescinded += 1;
            self.send(
                &o.framework,
                Event {
                    r#type: Some(event::Type::Rescind as i32),
                    rescind: Some(event::Rescind {
                        offer_id: v1::OfferId {
                            value: o.id.to_string(),
                        },
                    }),
                    ..Default::default()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuse_seconds_follow_mesos_rules() {
        let f = |s: f64| {
            Some(v1::Filters {
                refuse_seconds: Some(s),
            })
        };
        assert_eq!(refuse_duration(None), Some(Duration::from_secs(5)));
        assert_eq!(
            refuse_duration(Some(&v1::Filters::default())),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            refuse_duration(f(-1.0).as_ref()),
            Some(Duration::from_secs(5))
        );
        assert_eq!(refuse_duration(f(0.0).as_ref()), None);
        assert_eq!(
            refuse_duration(f(2.5).as_ref()),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            refuse_duration(f(1e12).as_ref()),
            Some(Duration::from_secs_f64(MAX_REFUSE))
        );
    }
}
