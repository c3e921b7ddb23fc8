//! Offers: the core's leases become OFFERS events; DECLINE, REVIVE,
//! SUPPRESS; offers rescinded, discarded or timed out give their lease back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use unisched_core::scheduler::offers::OfferChange;
use unisched_shim_api::{Lease, Leases};
use unisched_si as si;

use super::offer_wire::{self, WireResource};
use super::pools::PoolKey;
use super::state::{Agent, Master, Offer, RUN_TIMINGS_KEPT, Timer};
use super::status::nanos;
use super::stream::StreamEvent;
use super::units::{app_id, granted_scalar, to_core};
use crate::resources::Resources;
use crate::resources::value::Scalar;
use crate::v1;
use crate::v1::scheduler::{Event, event};

/// The pool of an agent's unreserved resources (no provider, no role).
static DEFAULT_POOL: PoolKey = PoolKey {
    provider: None,
    role: None,
};

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

/// About the size of one encoded offer of an agent's plain scalars, its URL
/// aside: room an OFFERS body is made with per offer expected (plus the
/// URL of the agent it starts with: agents' URLs are of about one length).
const OFFER_BYTES: usize = 256;

/// Appends to an OFFERS body the offer `id` of `resources` of `agent` to
/// `framework` in `role` (with the framework's executors on the agent).
fn push_agent_offer<'a>(
    body: &mut Vec<u8>,
    id: &str,
    framework: &str,
    agent: &'a Agent,
    resources: impl Iterator<Item = offer_wire::WireResource<'a>> + Clone,
    role: &str,
    memo: Option<&mut offer_wire::PlainMemo>,
) {
    // Most agents run no executor at all (none of W4's do): collecting from
    // an empty map still cost 93 instructions an offer.
    let executor_ids: smallvec::SmallVec<[&str; 4]> = if agent.executors.is_empty() {
        smallvec::SmallVec::new()
    } else {
        agent
            .executors
            .keys()
            .filter(|(f, _)| **f == *framework)
            .map(|(_, e)| e.as_str())
            .collect()
    };
    offer_wire::push_offer(
        body,
        &offer_wire::OfferView {
            id,
            framework,
            agent: &agent.id,
            hostname: &agent.info.hostname,
            resources,
            executor_ids: &executor_ids,
            attributes: &agent.info.attributes,
            url: &agent.url,
            role,
        },
        memo,
    );
}

/// An allocation run the core sends in parts, between its first part and
/// its last. Its offers are made as their leases come, into the books at
/// once (no other input is applied and no timer fires until the run closes,
/// so nothing sees them half made); their events wait here for the last
/// part, so each framework gets one OFFERS event per run.
pub(super) struct OpenRun {
    run: u64,
    /// The run's clock time (ns): the offers of one run are made at one time.
    now: u64,
    /// The offers of each framework of the run, in the order of its first
    /// offer.
    events: Vec<RunOffers>,
    /// The core's releases of leases this run made offers of: applied once
    /// the run's events are sent, so a RESCIND follows its OFFERS.
    late: Vec<si::AllocationRelease>,
    /// When the first part came.
    received: Instant,
    /// Room a framework's event list is made with: a run offers each agent
    /// about once, so a framework gets about its share of the agents (a
    /// list that needs more grows; room never used is never touched).
    per_framework: usize,
    /// Where each new offer's id is written before it is encoded.
    id: String,
    /// What the current grant gives of the well-known names.
    grants: GrantMemo,
    /// The run's leases, read and kept until its OFFERS are sent. Their
    /// shared strings and grants are counted references that the core's
    /// threads take as they make the next leases (an application's id once
    /// or twice a lease, a run's grant once a lease): dropped as they come,
    /// every drop would take each such count's cache line from the thread
    /// making leases and back, about 10,000 times a run of W4. Dropped
    /// after the run, they cost the master a pass over memory no thread
    /// is writing.
    spent: Vec<Vec<Lease>>,
}

/// What a grant (a lease's resource map, one shared by the leases of one
/// size) gives of each well-known plain name (`plain::KNOWN`), in Mesos
/// units: worked out once per grant, not once per name and lease.
#[derive(Default)]
struct GrantMemo {
    /// The grant, held so that its address is not reused while it is
    /// compared against.
    grant: Option<Arc<si::Resource>>,
    known: [Option<Scalar>; 4],
}

impl GrantMemo {
    fn known(&mut self, grant: &Arc<si::Resource>) -> [Option<Scalar>; 4] {
        if !self.grant.as_ref().is_some_and(|g| Arc::ptr_eq(g, grant)) {
            self.known = super::plain::KNOWN.map(|name| granted_scalar(grant, name));
            self.grant = Some(grant.clone());
        }
        self.known
    }
}

/// A framework's offers of one run: its OFFERS event to be, encoded as the
/// offers are made (`offer_wire.rs`).
struct RunOffers {
    framework: Arc<str>,
    /// The framework's handle in the books, as the run found it.
    handle: u64,
    /// The event's `offers` so far, encoded.
    body: Vec<u8>,
    /// The offers in `body`, in order (by number).
    offers: Vec<u64>,
    /// An offer in `body` grew after it was encoded (a lease of another
    /// pool of its agent joined it): the body is made again from the books
    /// at the close.
    stale: bool,
    /// The resources of the last offer `body` got from an agent's brief.
    memo: offer_wire::PlainMemo,
}

impl Master {
    /// True between the first and the last part of an allocation run sent
    /// in parts.
    pub(super) fn run_open(&self) -> bool {
        self.open_run.is_some()
    }

    /// What the core sent for our partition: leases to turn into offers,
    /// releases it made itself, rejections. A part of an allocation run
    /// that goes on (`partial`): its leases become offers at once, and the
    /// offers' events are sent when the last part is in.
    pub(super) fn allocation_response(&mut self, leases: Leases, received: Instant) {
        let Leases {
            response,
            new,
            partial,
            ..
        } = leases;
        let open_run = self.open_run.as_ref().map(|o| o.run);
        let mut late = Vec::new();
        for released in response.released {
            if open_run.is_some_and(|run| self.made_in_run(&released.allocation_id, run)) {
                late.push(released);
            } else {
                self.core_released(&released);
            }
        }
        for rejected in &response.rejected_allocations {
            self.task_allocation_rejected(&rejected.allocation_key, &rejected.reason);
        }
        for rejected in &response.rejected {
            tracing::debug!(key = %rejected.allocation_key, reason = %rejected.reason, "the core refused an offer change");
        }
        let mut open = match self.open_run.take() {
            Some(open) => open,
            None if new.is_empty() => return,
            None => {
                // Counted before anything else, so no two runs share a
                // number even when one stops half way.
                self.counters.allocation_runs += 1;
                // A run offers each agent at most once per role; the books
                // grow once, here, for about every agent (the parts' own
                // reserves below then find room).
                let agents = self.agents.len();
                self.offers
                    .reserve(agents.saturating_sub(self.offers.len()));
                self.offer_by_lease
                    .reserve(agents.saturating_sub(self.offer_by_lease.len()));
                OpenRun {
                    run: self.counters.allocation_runs,
                    now: self.now(),
                    events: Vec::new(),
                    late: Vec::new(),
                    received,
                    per_framework: agents.div_ceil(self.frameworks.len().max(1)).clamp(1, 64),
                    id: String::new(),
                    grants: GrantMemo::default(),
                    spent: Vec::new(),
                }
            }
        };
        open.late.append(&mut late);
        // One offer per (framework, role, agent) of this run, made of the
        // leases of that agent's pools, in the order the core made them.
        // A run offers thousands of agents: an agent and a framework each
        // hold where this run keeps their offers (`run_parts`, `offer_run`,
        // valid for this run's number), so no map keyed by their long ids
        // is built per run.
        tracing::trace!(target: "unisched::timeline", leases = new.len(), partial, "master: leases of an allocation run");
        self.offers.reserve(new.len());
        self.offer_by_lease.reserve(new.len());
        for lease in &new {
            // A lease of an offer hangs from an ask keyed by the
            // application id (one string, shared).
            if !Arc::ptr_eq(&lease.allocation_key, &lease.application_id)
                && lease.allocation_key != lease.application_id
            {
                continue;
            }
            if let Some(number) = self.lease_offer(lease, &mut open)
                && let Some(t) = self.settings.offer_timeout
            {
                self.at(
                    open.now.saturating_add(nanos(t)),
                    Timer::OfferTimeout(number),
                );
            }
        }
        open.spent.push(new);
        if partial {
            tracing::trace!(
                run = open.run,
                frameworks = open.events.len(),
                "allocation run open"
            );
            self.open_run = Some(open);
            return;
        }
        let OpenRun {
            events,
            late,
            received,
            spent,
            ..
        } = open;
        tracing::trace!(target: "unisched::timeline", events = events.len(), "master: the run's offers are made");
        // One OFFERS event per framework, in the order the run first leased
        // to each (the core's order, as deterministic as the ids' order; each
        // framework has a stream of its own, so the order across frameworks
        // shows nowhere), so a thousand long ids need no sorting.
        for RunOffers {
            framework,
            handle,
            mut body,
            offers,
            stale,
            ..
        } in events
        {
            let mut count = offers.len();
            if stale {
                (body, count) = self.encode_offers(&offers);
            }
            self.counters.offers_sent += count as u64;
            // The framework by the handle the run found it under: no id
            // hashed and compared, twice, for each of a thousand frameworks
            // in the run's tail. No framework leaves while a run is open
            // (no other input is applied), so the handle still names it.
            let Some(f) = self.frameworks.by_handle_mut(handle) else {
                continue;
            };
            // The framework's own list of its offers takes the run's at
            // once: inserted as each offer was made, each insert waited for
            // a line of that framework's list (the run goes round the
            // frameworks, so none stayed in cache). Nothing reads the list
            // while the run is open.
            f.offers.extend(&offers);
            super::state::send_on_stream(
                &framework,
                f,
                StreamEvent::offers(offer_wire::offers_event(body), count),
                &mut self.counters.dropped_events,
                &mut self.broken_streams,
            );
        }
        tracing::trace!(target: "unisched::timeline", run = self.counters.allocation_runs, "master: the run's OFFERS events are sent");
        for released in &late {
            self.core_released(released);
        }
        let ms = received.elapsed().as_secs_f64() * 1000.0;
        let timings = &mut self.counters.allocation_run_ms;
        timings.push_back(ms);
        while timings.len() > RUN_TIMINGS_KEPT {
            timings.pop_front();
        }
        // The leases' counted references go last, the run's OFFERS sent.
        drop(spent);
    }

    /// True when `lease` is behind an offer allocation run `run` made.
    fn made_in_run(&self, lease: &str, run: u64) -> bool {
        self.offer_by_lease
            .get(lease)
            .and_then(|&n| self.offers.get_number(n))
            .is_some_and(|o| o.run == run)
    }

    /// Takes what a lease of the core grants of its pool's free resources
    /// (its scalars, and the free ranges and sets that go with them) out of
    /// the agent's free resources, into the run's offer to its framework
    /// and role of the agent: a new offer, or the one another pool's lease
    /// of this run started; returns the number of a new offer. The lease is
    /// released when it cannot become part of an offer.
    fn lease_offer(&mut self, lease: &Lease, open: &mut OpenRun) -> Option<u64> {
        // The books are borrowed field by field: each string is copied
        // once, where the offer or its event keeps it.
        let Master {
            apps,
            frameworks,
            nodes,
            agents,
            core,
            offers,
            offer_by_lease,
            next_offer,
            ..
        } = self;
        // The application and the agent by the numbers the lease carries
        // back (`book.rs`), by id when it carries none that is still in the
        // books.
        let found = apps
            .by_handle(lease.app_handle)
            .or_else(|| apps.get(&lease.application_id))
            // The framework left, or is disconnected, while the lease was
            // on its way; or the agent went.
            .and_then(|app| {
                let (framework, role) = (&app.framework, &app.role);
                // The framework by the number its application keeps, by id
                // when that record left (a framework record replaced).
                let handle = if frameworks.by_handle(app.framework_handle).is_some() {
                    app.framework_handle
                } else {
                    frameworks.handle(framework)?
                };
                let f = frameworks.by_handle_mut(handle).filter(|f| f.connected())?;
                // A lease on an agent's default pool carries the agent's
                // number (and names the agent's own id): no lookup by id (a
                // run leases every agent once, so each of those lookups
                // waited for memory). Any other pool's node, or a node the
                // agent no longer has, goes through `nodes`.
                if agents
                    .by_handle(lease.node_handle)
                    .is_some_and(|a| a.default_node)
                {
                    let agent = agents.by_handle_mut(lease.node_handle)?;
                    debug_assert_eq!(*agent.id, *lease.node_id, "a handle names its agent");
                    return Some((framework, handle, f, role, &DEFAULT_POOL, agent));
                }
                let direct = agents.get(&lease.node_id).is_some_and(|a| a.default_node);
                let (agent_id, pool): (&str, &PoolKey) = if direct {
                    debug_assert!(
                        nodes
                            .get(&*lease.node_id)
                            .is_some_and(|(a, p)| **a == *lease.node_id && *p == DEFAULT_POOL),
                        "an agent's default pool node is in the books as its own"
                    );
                    (&lease.node_id, &DEFAULT_POOL)
                } else {
                    let (agent_id, pool) = nodes.get(&*lease.node_id)?;
                    (agent_id, pool)
                };
                // An agent out of service (`drain.rs`, whose default pool
                // takes this way too) is not offered: a lease of it that was
                // on its way when it went goes back.
                let agent = agents.get_mut(agent_id).filter(|a| a.drain.is_none())?;
                Some((framework, handle, f, role, pool, agent))
            });
        let Some((framework, handle, f, role, pool, agent)) = found else {
            core.release_lease(lease);
            return None;
        };
        let grant = &*lease.resource;
        let known = open.grants.known(&lease.resource);
        let granted = |name: &str| match super::plain::known_index(name) {
            Some(i) => known[i],
            None => granted_scalar(grant, name),
        };
        // The whole of a plain default pool (most leases of a run) moves
        // without its entries being read; the offer is encoded from the
        // brief (`plain.rs`).
        let (resources, brief) = match (*pool == DEFAULT_POOL)
            .then(|| agent.take_all_plain(granted))
            .flatten()
        {
            Some((resources, brief)) => (resources, Some(brief)),
            None => (agent.take_offer(role, |r| pool.holds(r), granted), None),
        };
        if resources.is_empty() {
            core.release_lease(lease);
            return None;
        }
        let run = open.run;
        if agent.run_parts.0 != run {
            agent.run_parts = (run, Default::default());
        }
        if f.offer_run.0 != run {
            f.offer_run = (run, open.events.len());
            open.events.push(RunOffers {
                framework: framework.clone(),
                handle,
                body: offer_wire::new_body(open.per_framework * (OFFER_BYTES + agent.url.len())),
                offers: Vec::with_capacity(open.per_framework),
                stale: false,
                memo: offer_wire::PlainMemo::default(),
            });
        }
        let slot = f.offer_run.1;
        let event = &mut open.events[slot];
        // This framework's offer of the agent to the same role, if another
        // pool's lease made one in this run.
        let same = agent.run_parts.1.iter().find(|&&(s, i)| {
            s == slot
                && offers
                    .get_number(event.offers[i])
                    .is_some_and(|o| o.role == *role)
        });
        if let Some(&(_, i)) = same {
            let Some(offer) = offers.get_number_mut(event.offers[i]) else {
                // Not reached: the run's offers stay in the books until it
                // closes (the core's releases of them wait for the close).
                // Were it reached, the lease and its resources go back.
                agent.unoffer(&resources);
                core.release_lease(lease);
                return None;
            };
            offer.resources.add(&resources);
            event.stale = true;
            offer_by_lease.insert(lease.allocation_id.clone(), offer.number);
            offer.leases.push(lease.allocation_id.clone());
            return None;
        }
        agent.run_parts.1.push((slot, event.offers.len()));
        // The books keep the number; the id is written into the event
        // from the run's buffer.
        let number = *next_offer;
        *next_offer += 1;
        offers.write_id(number, &mut open.id);
        offer_by_lease.insert(lease.allocation_id.clone(), number);
        match &brief {
            Some(brief) => push_agent_offer(
                &mut event.body,
                &open.id,
                framework,
                agent,
                brief.iter().map(WireResource::Plain),
                role,
                Some(&mut event.memo),
            ),
            None => push_agent_offer(
                &mut event.body,
                &open.id,
                framework,
                agent,
                resources.iter().map(WireResource::Entry),
                role,
                None,
            ),
        }
        event.offers.push(number);
        offers.insert(Offer {
            number,
            framework: framework.clone(),
            resources,
            role: role.clone(),
            agent: agent.id.clone(),
            leases: vec![lease.allocation_id.clone()],
            created: open.now,
            run,
        });
        Some(number)
    }

    /// The `offers` of an OFFERS event of these offers, encoded from the
    /// books (offers no longer there are left out), and how many it holds.
    fn encode_offers(&self, numbers: &[u64]) -> (Vec<u8>, usize) {
        let mut body = offer_wire::new_body(numbers.len() * OFFER_BYTES);
        let mut id = String::new();
        let mut count = 0;
        for &number in numbers {
            let Some(offer) = self.offers.get_number(number) else {
                continue;
            };
            let Some(agent) = self.agents.get(&offer.agent) else {
                continue;
            };
            self.offers.write_id(number, &mut id);
            push_agent_offer(
                &mut body,
                &id,
                &offer.framework,
                agent,
                offer.resources.iter().map(WireResource::Entry),
                &offer.role,
                None,
            );
            count += 1;
        }
        (body, count)
    }

    /// Takes an offer out of the books, its resources back to its agent's
    /// free resources; returns it. The leases are not released here: the
    /// caller does that (with a filter, or turned into tasks).
    pub(super) fn take_offer(&mut self, number: u64) -> Option<Offer> {
        let offer = self.withdraw_offer(number)?;
        if let Some(a) = self.agents.get_mut(&offer.agent) {
            a.unoffer(&offer.resources);
        }
        Some(offer)
    }

    /// Takes an offer out of the books, its resources still out of the
    /// agent's free resources (an ACCEPT decides where they go).
    pub(super) fn withdraw_offer(&mut self, number: u64) -> Option<Offer> {
        let offer = self.offers.remove(number)?;
        for lease in &offer.leases {
            self.offer_by_lease.remove(lease);
        }
        let Master {
            frameworks, offers, ..
        } = self;
        if let Some(f) = frameworks.get_mut(&offer.framework) {
            f.offers.remove(|n| offers.get_number(n).is_some());
        }
        Some(offer)
    }

    /// Gives an offer back without a filter; with `event`, the framework is
    /// told (RESCIND), else the offer is silently discarded.
    pub(super) fn rescind(&mut self, number: u64, event: bool) {
        let Some(offer) = self.take_offer(number) else {
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
                            value: self.offers.id_of(offer.number),
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
            self.core.release(app.clone(), String::from(&**lease));
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
                .is_some_and(|o| *o.framework == *framework);
            if !owned {
                continue;
            }
            let Some(offer) = self
                .offers
                .number(&id.value)
                .and_then(|n| self.take_offer(n))
            else {
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

    /// REVIVE: the roles want offers again, their filters are gone.
    pub(super) fn revive(&mut self, framework: &str, roles: Vec<String>) {
        let changes = self.set_suppressed(framework, &roles, false);
        self.core.offers(changes);
    }

    /// SUPPRESS: no new offers for the roles; outstanding ones stay valid.
    pub(super) fn suppress(&mut self, framework: &str, roles: Vec<String>) {
        let changes = self.set_suppressed(framework, &roles, true);
        self.core.offers(changes);
    }

    /// Marks the roles a REVIVE or SUPPRESS names (all of the framework's
    /// when it names none; a role the framework does not have is ignored
    /// with a warning) suppressed or not; returns the changes for the core:
    /// demand, and for a REVIVE the filters cleared and a run at once, as
    /// Mesos allocates after a REVIVE. The framework is looked up once and
    /// no role is copied: a run of W4 starts with a thousand REVIVEs.
    fn set_suppressed(
        &mut self,
        framework: &str,
        named: &[String],
        suppress: bool,
    ) -> Vec<OfferChange> {
        let mut changes = Vec::new();
        let Some(f) = self.frameworks.get_mut(framework) else {
            return changes;
        };
        for role in named.iter().filter(|r| !f.roles.contains(r)) {
            tracing::warn!(%framework, %role, "ignoring a role the framework is not subscribed to");
        }
        let roles = if named.is_empty() {
            &f.roles[..]
        } else {
            named
        };
        for role in roles.iter().filter(|r| f.roles.contains(r)) {
            let app = app_id(framework, role);
            if suppress {
                f.suppressed.insert(role.clone());
            } else {
                f.suppressed.remove(role);
                changes.push(OfferChange::ClearFilters {
                    application_id: app.clone(),
                });
            }
            changes.push(OfferChange::Demand {
                application_id: app,
                active: !suppress,
            });
        }
        if !suppress {
            changes.push(OfferChange::Allocate);
        }
        changes
    }

    /// An offer's timeout passed: rescinded, no filter.
    pub(super) fn offer_timed_out(&mut self, number: u64) {
        let Some(offer) = self.offers.get_number(number) else {
            return;
        };
        let due = self
            .settings
            .offer_timeout
            .is_some_and(|t| self.now() >= offer.created.saturating_add(t.as_nanos() as u64));
        if due {
            self.counters.offers_timed_out += 1;
            self.rescind(number, true);
        }
    }

    /// The core released an allocation by itself (its node went away): an
    /// offer still standing on it is rescinded. Leases the master released
    /// are out of `offer_by_lease` already, so their echo finds nothing.
    fn core_released(&mut self, released: &si::AllocationRelease) {
        if let Some(&offer) = self.offer_by_lease.get(released.allocation_id.as_str()) {
            let Some(mut o) = self.take_offer(offer) else {
                return;
            };
            // The other leases of the offer go back too.
            o.leases.retain(|l| **l != *released.allocation_id);
            self.release_leases(&o);
            self.counters.offers_rescinded += 1;
            self.send(
                &o.framework,
                Event {
                    r#type: Some(event::Type::Rescind as i32),
                    rescind: Some(event::Rescind {
                        offer_id: v1::OfferId {
                            value: self.offers.id_of(o.number),
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
