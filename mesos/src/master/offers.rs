//! Offers: the core's leases become OFFERS events; DECLINE, REVIVE,
//! SUPPRESS; offers rescinded, discarded or timed out give their lease back.

use std::collections::BTreeMap;
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

impl Master {
    /// What the core sent for our partition: leases to turn into offers,
    /// releases it made itself, rejections.
    pub(super) fn allocation_response(
        &mut self,
        response: si::AllocationResponse,
        received: Instant,
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
        if response.new.is_empty() {
            return;
        }
        let mut by_framework: BTreeMap<String, Vec<v1::Offer>> = BTreeMap::new();
        for lease in response.new {
            if lease.allocation_key != lease.application_id {
                continue;
            }
            if let Some((framework, offer)) = self.lease_to_offer(lease) {
                by_framework.entry(framework).or_default().push(offer);
            }
        }
        for (framework, offers) in by_framework {
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
        self.counters.allocation_runs += 1;
        let ms = received.elapsed().as_secs_f64() * 1000.0;
        let timings = &mut self.counters.allocation_run_ms;
        timings.push_back(ms);
        while timings.len() > RUN_TIMINGS_KEPT {
            timings.pop_front();
        }
    }

    /// A lease from the core as an offer of the agent's free resources: its
    /// scalars, and the free ranges and sets (ports) that go with them.
    fn lease_to_offer(&mut self, lease: si::Allocation) -> Option<(String, v1::Offer)> {
        let Some((framework, role)) = self.apps.get(&lease.application_id).cloned() else {
            // The framework left while the lease was on its way.
            self.core.release(lease.application_id, lease.allocation_id);
            return None;
        };
        let connected = self
            .frameworks
            .get(&framework)
            .is_some_and(|f| f.connected());
        let Some(agent) = self.agents.get(&lease.node_id).filter(|_| connected) else {
            self.core.release(lease.application_id, lease.allocation_id);
            return None;
        };
        let granted = |name: &str| {
            lease
                .resource_per_alloc
                .as_ref()
                .and_then(|r| granted_scalar(r, name))
        };
        let mut resources = agent.available().offer_for(&role, granted);
        if resources.is_empty() {
            self.core.release(lease.application_id, lease.allocation_id);
            return None;
        }
        let hostname = agent.info.hostname.clone();
        let attributes = agent.info.attributes.clone();
        let executor_ids: Vec<v1::ExecutorId> = agent
            .executors
            .keys()
            .filter(|(f, _)| *f == framework)
            .map(|(_, e)| v1::ExecutorId { value: e.clone() })
            .collect();
        let agent_id = agent.id.clone();
        let id = self.new_offer_id();
        let now = self.now();
        let mut offer = v1::Offer {
            id: v1::OfferId { value: id.clone() },
            framework_id: v1::FrameworkId {
                value: framework.clone(),
            },
            agent_id: v1::AgentId {
                value: agent_id.clone(),
            },
            hostname,
            url: None,
            domain: None,
            resources: Vec::new(),
            attributes,
            executor_ids,
            unavailability: None,
            allocation_info: Some(v1::resource::AllocationInfo {
                role: Some(role.clone()),
            }),
        };
        self.agents
            .get_mut(&agent_id)
            .expect("agent exists")
            .offer(&resources);
        resources.allocate(&role);
        offer.resources = resources.to_vec();
        self.offer_by_lease
            .insert(lease.allocation_id.clone(), id.clone());
        self.offers.insert(
            id.clone(),
            Offer {
                id: id.clone(),
                framework: framework.clone(),
                resources,
                role,
                agent: agent_id,
                lease: lease.allocation_id,
                created: now,
            },
        );
        if let Some(f) = self.frameworks.get_mut(&framework) {
            f.offers.insert(id.clone());
        }
        if let Some(t) = self.settings.offer_timeout {
            self.after(t, Timer::OfferTimeout(id));
        }
        Some((framework, offer))
    }

    /// Takes an offer out of the books; returns it. The lease is not released
    /// here: the caller does that (with a filter, or turned into tasks).
    pub(super) fn take_offer(&mut self, id: &str) -> Option<Offer> {
        let offer = self.offers.remove(id)?;
        self.offer_by_lease.remove(&offer.lease);
        if let Some(a) = self.agents.get_mut(&offer.agent) {
            a.unoffer(&offer.resources);
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
                            value: offer.id.clone(),
                        },
                    }),
                    ..Default::default()
                },
            );
        }
        self.core
            .release(app_id(&offer.framework, &offer.role), offer.lease);
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
        if let Some(duration) = refuse_duration(filters) {
            self.core.offers(vec![OfferChange::Filter {
                application_id: app_id(framework, role),
                node_id: agent.to_string(),
                refused: to_core(refused.iter()),
                duration,
                since: Some(self.now()),
            }]);
        }
    }

    /// DECLINE: unknown offers are ignored.
    pub(super) fn decline(&mut self, framework: &str, decline: v1::scheduler::call::Decline) {
        for id in decline.offer_ids {
            let owned = self
                .offers
                .get(&id.value)
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
            self.core
                .release(app_id(framework, &offer.role), offer.lease);
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
            let Some(o) = self.take_offer(&offer) else {
                return;
            };
            self.counters.offers_rescinded += 1;
            self.send(
                &o.framework,
                Event {
                    r#type: Some(event::Type::Rescind as i32),
                    rescind: Some(event::Rescind {
                        offer_id: v1::OfferId { value: o.id },
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
