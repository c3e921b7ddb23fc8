//! Offers: how the core serves offer-based (Mesos-style) resource managers.
//!
//! An RM that hands resources out as offers does not ask for sizes; it says
//! which applications want resources ([`OfferChange::Demand`]) and the core
//! decides, in its fair order, which application gets which node's remainder.
//! An offer is an ordinary allocation (a *lease*) whose allocation key is the
//! application id and whose size is the node's whole available remainder,
//! trimmed to the application's queue headroom (a Mesos quota limit). It
//! counts in usage, shares and headroom like any allocation until the RM
//! releases it (declined, rescinded, timed out) or turns it into task
//! allocations. The RM does the latter atomically with one `update_allocation`
//! that reports the task allocations (as existing allocations on that node)
//! and releases the lease: both are applied in one command, with no pass in
//! between.
//!
//! Offers are made in *allocation runs*, as Mesos makes them: a pass of an
//! offer partition offers only when the RM asked for a run
//! ([`OfferChange::Allocate`]) since the last one, which it does on its
//! allocation interval and on the changes Mesos allocates at once for (an
//! agent or framework that joins, a REVIVE). Resources that come back
//! (declined, tasks ended) wait for the next run, so a framework that
//! declines without a filter is not offered the same resources in a loop.
//!
//! A partition becomes an offer partition when its RM sets an
//! [`OfferChange::Policy`]. There, queues and applications are ordered by
//! dominant resource fairness over the partition's total capacity (as Mesos'
//! hierarchical allocator orders roles and frameworks), divided by the queue's
//! `weight`; a queue still below its guarantee (a Mesos quota guarantee) comes
//! before every queue that is not. A pass of an offer partition has no
//! allocation budget: it is one whole allocation run, so the RM receives all
//! the offers of a run in one callback.
//!
//! Eligibility follows Mesos: a remainder is offered only when it holds at
//! least one of the minimum allocatable quantities, and not to an application
//! that declined that node with a filter whose refused resources still cover
//! the remainder (subset matching). A filter lasts until its time is up and at
//! least one pass has run since it was set; REVIVE clears them
//! ([`OfferChange::ClearFilters`]).
//!
//! A node may have terms of its own ([`OfferChange::NodeTerms`]): kept for one
//! queue subtree (only applications of that queue or below it are offered
//! it), and offered whatever its remainder (no minimum). This is how Mesos
//! reservations and resource providers map: an agent's resources reserved to
//! a role, or held by a provider, stand on nodes of their own, offered only
//! to that role and its children; such a node is one part of an agent, so the
//! minimum (which Mesos checks on the agent as a whole) does not apply to it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use unisched_si as si;

use super::allocate::PassContext;
use super::objects::*;
use super::partition::Partition;
use crate::resources::{Lanes, Resource, ResourceNames};

/// Changes an offer-based RM makes to a partition (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct OfferRequest {
    /// The RM.
    pub rm_id: String,
    /// Partition name (plain or qualified).
    pub partition_name: String,
    /// Applied in order.
    pub changes: Vec<OfferChange>,
}

/// One change of an [`OfferRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum OfferChange {
    /// Makes the partition an offer partition (or changes its settings): a
    /// node's remainder is offered only when at least one of these quantities
    /// fits in it (Mesos' `--min_allocatable_resources`, `cpus:0.01|mem:32`
    /// by default). Empty: any remainder that is not nothing.
    Policy {
        /// Alternatives; one of them must fit.
        min_allocatable: Vec<si::Resource>,
    },
    /// The application wants offers (`active`), or stops wanting them
    /// (suppressed). Its outstanding offers stay.
    Demand {
        /// Application id.
        application_id: String,
        /// Whether it wants offers.
        active: bool,
    },
    /// Do not offer `node_id` to the application while the remainder fits in
    /// `refused`, for `duration` from `since` (the clock time the RM took the
    /// decline, so the filter does not depend on when the scheduling thread
    /// gets to it; `None`, or a time still to come: when the core applies it).
    Filter {
        /// Application id.
        application_id: String,
        /// Node id.
        node_id: String,
        /// The resources refused.
        refused: si::Resource,
        /// How long the filter lasts (at least until the next pass).
        duration: Duration,
        /// Clock time (ns) the duration counts from.
        since: Option<u64>,
    },
    /// Drops every filter of the application.
    ClearFilters {
        /// Application id.
        application_id: String,
    },
    /// Makes the next pass an allocation run (offers are made only then).
    Allocate,
    /// `held: true`: more changes of one batch follow in later requests;
    /// no allocation run starts (a due one waits) until a request brings
    /// `held: false`. The RM sends a long batch ahead in parts this way, and
    /// no run sees part of it.
    Hold {
        /// Whether runs wait.
        held: bool,
    },
    /// How `node_id` is offered: only to applications of the queue `queue`
    /// or of a queue below it (`None`: to anyone), and with `any_remainder`
    /// whatever its remainder (the minimum does not apply). The terms last
    /// as long as the node; a node the partition does not have is refused
    /// with a reason.
    NodeTerms {
        /// Node id.
        node_id: String,
        /// Full queue path (`root.a`).
        queue: Option<String>,
        /// Offer any remainder that is not nothing.
        any_remainder: bool,
    },
}

/// An [`OfferChange`] with its resources converted on the caller's thread.
#[derive(Debug)]
pub(super) enum PreparedChange {
    Policy(Result<Vec<Resource>, String>),
    Demand {
        app: String,
        active: bool,
    },
    Filter {
        app: String,
        node: String,
        refused: Result<Resource, String>,
        duration: Duration,
        since: Option<u64>,
    },
    ClearFilters {
        app: String,
    },
    Allocate,
    Hold(bool),
    NodeTerms {
        node: String,
        queue: Option<String>,
        any_remainder: bool,
    },
}

/// An [`OfferRequest`] ready for the scheduling thread.
#[derive(Debug)]
pub struct PreparedOffers {
    pub(super) rm_id: String,
    pub(super) partition_name: String,
    pub(super) changes: Vec<PreparedChange>,
}

/// Converts the resources of a request.
pub(super) fn prepare(names: &ResourceNames, request: OfferRequest) -> PreparedOffers {
    let convert = |r: &si::Resource| names.from_si(Some(r)).map_err(|e| e.to_string());
    let changes = request
        .changes
        .into_iter()
        .map(|c| match c {
            OfferChange::Policy { min_allocatable } => {
                PreparedChange::Policy(min_allocatable.iter().map(convert).collect())
            }
            OfferChange::Demand {
                application_id,
                active,
            } => PreparedChange::Demand {
                app: application_id,
                active,
            },
            OfferChange::Filter {
                application_id,
                node_id,
                refused,
                duration,
                since,
            } => PreparedChange::Filter {
                app: application_id,
                node: node_id,
                refused: convert(&refused),
                duration,
                since,
            },
            OfferChange::ClearFilters { application_id } => PreparedChange::ClearFilters {
                app: application_id,
            },
            OfferChange::Allocate => PreparedChange::Allocate,
            OfferChange::Hold { held } => PreparedChange::Hold(held),
            OfferChange::NodeTerms {
                node_id,
                queue,
                any_remainder,
            } => PreparedChange::NodeTerms {
                node: node_id,
                queue,
                any_remainder,
            },
        })
        .collect();
    PreparedOffers {
        rm_id: request.rm_id,
        partition_name: request.partition_name,
        changes,
    }
}

/// The offer settings of a partition.
#[derive(Debug, Default)]
pub struct OfferPolicy {
    /// Alternatives of which one must fit in a remainder to offer it; empty:
    /// anything at all.
    pub min_allocatable: Vec<Resource>,
    /// Applications that want offers now.
    pub active_apps: usize,
    /// The RM asked for an allocation run: the coming pass offers.
    pub run_due: bool,
    /// The RM is sending a batch in parts ([`OfferChange::Hold`]): a due
    /// run waits for its end.
    pub held: bool,
    /// Filter deadlines: (time, application, node).
    timers: BinaryHeap<Reverse<(u64, AppId, NodeId)>>,
    /// Nodes with terms of their own.
    terms: FastMap<NodeId, NodeTerms>,
}

/// How one node is offered (see [`OfferChange::NodeTerms`]).
#[derive(Debug, Clone, Default)]
struct NodeTerms {
    /// Kept for this queue subtree.
    subtree: Option<Arc<str>>,
    /// Offered whatever its remainder.
    any_remainder: bool,
}

impl OfferPolicy {
    /// True when the coming pass is an allocation run: one is due and not
    /// held back.
    pub fn runs_now(&self) -> bool {
        self.run_due && !self.held
    }

    /// True when `available` (a remainder) of `node` may be offered: it holds
    /// one of the minimum quantities, or anything at all where the node's
    /// terms say so.
    pub fn allows_node(&self, node: NodeId, available: &Resource, lanes: Lanes) -> bool {
        if !self.terms.is_empty() && self.terms.get(&node).is_some_and(|t| t.any_remainder) {
            return available.0[..lanes.get()].iter().any(|&v| v > 0);
        }
        self.allows(available, lanes)
    }

    /// True when `available` (a remainder) may be offered.
    pub fn allows(&self, available: &Resource, lanes: Lanes) -> bool {
        if self.min_allocatable.is_empty() {
            return available.0[..lanes.get()].iter().any(|&v| v > 0);
        }
        self.min_allocatable
            .iter()
            .any(|m| m.fits_in_lanes(available, lanes))
    }
    /// True when a queue with `headroom` left may be offered some node: the
    /// headroom holds a minimum quantity, or some node is offered whatever
    /// its remainder and the headroom has room of any kind (a pool of disk
    /// only is offered when the root's cpus and memory are all in use).
    pub fn allows_headroom(&self, headroom: &Resource, lanes: Lanes) -> bool {
        self.allows(headroom, lanes)
            || (self.terms.values().any(|t| t.any_remainder)
                && headroom.0[..lanes.get()].iter().any(|&v| v > 0))
    }
}

/// The offer state of an application.
#[derive(Debug, Default)]
pub struct AppOffers {
    /// Wants offers (not suppressed).
    pub active: bool,
    /// Number the next lease's allocation id gets, so ids never repeat even
    /// when the lease's ask record came and went.
    next_lease: u32,
    /// The ask record its leases hang from, as last found (checked before
    /// use: `Partition::find_lease_ask`).
    lease_ask: Option<AskId>,
    /// Decline filters by node.
    filters: FastMap<NodeId, Filter>,
}

/// A decline filter.
#[derive(Debug, Clone, Copy)]
struct Filter {
    refused: Resource,
    until: u64,
    /// The pass number when it was set: it holds at least until a later pass.
    set_in_pass: u64,
}

impl Filter {
    fn blocks(&self, offer: &Resource, now: u64, pass: u64, lanes: Lanes) -> bool {
        let expired = now >= self.until && pass > self.set_in_pass;
        !expired && offer.fits_in_lanes(&self.refused, lanes)
    }
}

impl Partition {
    /// Applies an offer request.
    pub(super) fn apply_offers(&mut self, changes: Vec<PreparedChange>, now: u64) {
        tracing::trace!(target: "unisched::timeline", changes = changes.len(), "core: offer changes");
        // A framework's first REVIVE (or SUBSCRIBE) moves its application
        // to Accepted: room for those changes of state at once, not by
        // doubling (a thousand frameworks' REVIVEs in one batch copied the
        // lists ten times over).
        let wanting = changes
            .iter()
            .filter(|c| matches!(c, PreparedChange::Demand { active: true, .. }))
            .count();
        self.outbox.reserve_state_changes(wanting);
        for change in changes {
            match change {
                PreparedChange::Policy(Ok(min)) => {
                    let policy = self.offers.get_or_insert_with(Box::default);
                    policy.min_allocatable = min;
                    // Exhausted nodes were judged by the old minimum, and every
                    // share key changes its base.
                    self.floor_lowered = true;
                    self.shares_stale = true;
                }
                PreparedChange::Policy(Err(reason)) => {
                    self.reject_offer_change("", format!("offer policy: {reason}"));
                }
                PreparedChange::Demand { app, active } => self.set_demand(&app, active),
                PreparedChange::Filter {
                    app,
                    node,
                    refused,
                    duration,
                    since,
                } => {
                    let start = since.map_or(now, |s| s.min(now));
                    self.add_filter(&app, &node, refused, duration, start);
                }
                PreparedChange::ClearFilters { app } => {
                    if let Some(o) = self.offer_state_mut(&app) {
                        o.filters.clear();
                    }
                }
                PreparedChange::Allocate => {
                    if let Some(policy) = self.offers.as_deref_mut() {
                        policy.run_due = true;
                    }
                }
                PreparedChange::Hold(held) => {
                    if let Some(policy) = self.offers.as_deref_mut() {
                        policy.held = held;
                    }
                }
                PreparedChange::NodeTerms {
                    node,
                    queue,
                    any_remainder,
                } => self.set_node_terms(&node, queue, any_remainder),
            }
        }
    }

    /// A change that names something the partition does not have: reported
    /// as a rejected ask with the application id as its key (the lease key).
    fn reject_offer_change(&mut self, app: &str, reason: String) {
        self.outbox
            .allocation
            .rejected
            .push(si::RejectedAllocationAsk {
                allocation_key: app.to_string(),
                application_id: app.to_string(),
                reason,
            });
    }

    fn offer_state_mut(&mut self, app_id: &str) -> Option<&mut AppOffers> {
        let app = *self.app_by_id.get(app_id)?;
        self.apps[app].offers.as_deref_mut()
    }

    fn set_demand(&mut self, app_id: &str, active: bool) {
        if self.offers.is_none() {
            return self.reject_offer_change(
                app_id,
                format!(
                    "application {app_id}: partition {} takes no offer demand before an offer policy",
                    self.name
                ),
            );
        }
        let Some(&app) = self.app_by_id.get(app_id) else {
            return self.reject_offer_change(
                app_id,
                format!(
                    "offer demand: application {app_id} not found in partition {}",
                    self.name
                ),
            );
        };
        let offers = self.apps[app].offers.get_or_insert_with(Box::default);
        if offers.active == active {
            return;
        }
        offers.active = active;
        if let Some(policy) = self.offers.as_deref_mut() {
            if active {
                policy.active_apps += 1;
            } else {
                policy.active_apps = policy.active_apps.saturating_sub(1);
            }
        }
        if active {
            // Nodes judged exhausted while nobody wanted offers may hold a
            // remainder worth offering.
            self.floor_lowered = true;
            if self.apps[app].state == AppState::New {
                self.set_app_state(app, AppState::Accepted, self.now, "wants offers");
            }
        }
        self.dirty_apps.push(app);
    }

    fn add_filter(
        &mut self,
        app_id: &str,
        node_id: &str,
        refused: Result<Resource, String>,
        duration: Duration,
        start: u64,
    ) {
        let refused = match refused {
            Ok(r) => r,
            Err(reason) => {
                return self.reject_offer_change(app_id, format!("offer filter: {reason}"));
            }
        };
        let (Some(&app), Some(&node)) = (self.app_by_id.get(app_id), self.node_by_id.get(node_id))
        else {
            // The application or node left meanwhile: nothing to filter.
            return;
        };
        let until = start.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        let filter = Filter {
            refused,
            until,
            set_in_pass: self.pass,
        };
        let offers = self.apps[app].offers.get_or_insert_with(Box::default);
        offers.filters.insert(node, filter);
        if let Some(policy) = self.offers.as_deref_mut() {
            policy.timers.push(Reverse((until, app, node)));
        }
    }

    fn set_node_terms(&mut self, node_id: &str, queue: Option<String>, any_remainder: bool) {
        let Some(&node) = self.node_by_id.get(node_id) else {
            return self.reject_offer_change(
                "",
                format!(
                    "offer terms: node {node_id} not found in partition {}",
                    self.name
                ),
            );
        };
        let Some(policy) = self.offers.as_deref_mut() else {
            return self.reject_offer_change(
                "",
                format!(
                    "node {node_id}: partition {} takes no offer terms before an offer policy",
                    self.name
                ),
            );
        };
        let terms = NodeTerms {
            subtree: queue.map(|q| Arc::from(q.as_str())),
            any_remainder,
        };
        if terms.subtree.is_none() && !terms.any_remainder {
            policy.terms.remove(&node);
        } else {
            policy.terms.insert(node, terms);
        }
        // A node that was kept from everyone else (or judged too small) may
        // be offered now.
        self.floor_lowered = true;
        self.rekey_node(node);
    }

    /// True when the node may be offered to applications of `queue`.
    fn offerable_to(&self, policy: &OfferPolicy, node: NodeId, queue: QueueId) -> bool {
        let Some(subtree) = policy.terms.get(&node).and_then(|t| t.subtree.as_ref()) else {
            return true;
        };
        let mut q = Some(queue);
        while let Some(id) = q {
            if *self.queues[id].path == **subtree {
                return true;
            }
            q = self.queues[id].parent;
        }
        false
    }

    /// Drops filters whose time is up (the pass that follows offers again).
    pub(super) fn expire_filters(&mut self, now: u64) {
        let Some(policy) = self.offers.as_deref_mut() else {
            return;
        };
        while let Some(&Reverse((until, app, node))) = policy.timers.peek() {
            if until > now {
                break;
            }
            policy.timers.pop();
            if let Some(o) = self.apps.get_mut(app).and_then(|a| a.offers.as_deref_mut())
                && o.filters.get(&node).is_some_and(|f| f.until <= now)
            {
                // Removing it lets the coming pass offer the node again; a
                // filter set in that very pass is kept by `blocks` anyway.
                o.filters.remove(&node);
            }
        }
    }

    /// The earliest filter deadline.
    pub(super) fn next_filter_timer(&self) -> Option<u64> {
        self.offers
            .as_deref()
            .and_then(|p| p.timers.peek().map(|r| r.0.0))
    }

    /// Forgets the filters and restriction naming a node that leaves (its
    /// slot may be reused).
    pub(super) fn forget_node_filters(&mut self, node: NodeId) {
        let Some(policy) = self.offers.as_deref_mut() else {
            return;
        };
        policy.terms.remove(&node);
        for (_, a) in self.apps.iter_mut() {
            if let Some(o) = a.offers.as_deref_mut() {
                o.filters.remove(&node);
            }
        }
    }

    /// An application leaves: it no longer counts as wanting offers.
    pub(super) fn forget_demand(&mut self, app: AppId) {
        let active = self.apps[app].offers.as_ref().is_some_and(|o| o.active);
        if active && let Some(policy) = self.offers.as_deref_mut() {
            policy.active_apps = policy.active_apps.saturating_sub(1);
        }
    }

    /// True for an offer partition with no allocation run due and no ask
    /// pending: a pass would find nothing to do.
    pub(super) fn idle_offer_partition(&self) -> bool {
        self.offers.as_ref().is_some_and(|p| !p.runs_now())
            && self.pending_ask_count == 0
            && self.reserved_asks.is_empty()
    }

    /// Ends an allocation run (after the pass and its reruns); a run held
    /// back stays due.
    pub(super) fn end_offer_run(&mut self) {
        if let Some(policy) = self.offers.as_deref_mut()
            && !policy.held
        {
            policy.run_due = false;
        }
    }

    /// True when some application wants offers.
    #[inline]
    pub(super) fn offers_wanted(&self) -> bool {
        self.offers.as_ref().is_some_and(|p| p.active_apps > 0)
    }

    /// The most the queue path above `leaf` allows on top of what it uses:
    /// per type the least `max - allocated`, unlimited where no max is set.
    /// Only the partition's lanes are computed: past them no resource type
    /// is named, so every max there is unlimited and nothing is allocated,
    /// and the answer is unlimited as the starting value already says.
    fn headroom(&self, leaf: QueueId) -> Resource {
        let lanes = self.lanes.get();
        let mut room = Resource::UNLIMITED;
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.has_max {
                for i in 0..lanes {
                    let left = queue.max.0[i].saturating_sub(queue.allocated.0[i]).max(0);
                    room.0[i] = room.0[i].min(left);
                }
            }
            q = queue.parent;
        }
        room
    }

    /// Offers the application the first node (in node order) whose
    /// remainder it may take; true when it got one. Only in an allocation run.
    pub(super) fn try_offer(&mut self, app: AppId, ctx: &mut PassContext<'_>) -> bool {
        let wants = self.apps[app].offers.as_ref().is_some_and(|o| o.active);
        if !wants || !self.can_start(app) {
            return false;
        }
        let Some(policy) = self.offers.as_deref().filter(|p| p.runs_now()) else {
            return false;
        };
        let lanes = self.lanes;
        let headroom = self.headroom(self.apps[app].queue);
        if !policy.allows_headroom(&headroom, lanes) {
            return false;
        }
        let (now, pass) = (ctx.now, self.pass);
        let lease_ask = self.find_lease_ask(app);
        let app_queue = self.apps[app].queue;
        let restricted = !policy.terms.is_empty();
        let Some(offers) = self.apps[app].offers.as_deref() else {
            return false;
        };
        let mut exhausted = Vec::new();
        let mut chosen = None;
        let mut check = |k: &NodeKey| -> bool {
            let n = k.node();
            let node = &self.nodes[n];
            let available = node.res.available();
            if !policy.allows_node(n, &available, lanes) {
                if self.node_exhausted(n) {
                    exhausted.push(n);
                }
                return false;
            }
            if restricted && !self.offerable_to(policy, n, app_queue) {
                return false;
            }
            // Past the lanes the node has nothing and the headroom is
            // unlimited: the node's zeros are the least there already.
            let mut offer = available;
            for i in 0..lanes.get() {
                offer.0[i] = offer.0[i].min(headroom.0[i]);
            }
            if !policy.allows_node(n, &offer, lanes)
                || offers
                    .filters
                    .get(&n)
                    .is_some_and(|f| f.blocks(&offer, now, pass, lanes))
                || !self.fits_user_limits(app, &offer)
                || lease_ask.is_some_and(|ask| !self.predicate(ctx, ask, n, true))
            {
                return false;
            }
            chosen = Some(offer);
            true
        };
        let found = match self.node_sort {
            crate::config::NodeSortKind::Fair => self.node_index.iter().find(|k| check(k)),
            crate::config::NodeSortKind::Binpacking => {
                self.node_index.iter().rev().find(|k| check(k))
            }
        }
        .map(|k| k.node());
        for n in exhausted {
            self.rekey_node(n);
        }
        match (found, chosen) {
            (Some(node), Some(offer)) => {
                self.place_lease(app, lease_ask, node, offer, ctx.now);
                ctx.made += 1;
                let part = super::allocate::offer_run_part_size(self.parts_sent)
                    .min(super::allocate::offer_run_tail_part(self.node_index.len()));
                if self.outbox.placed.len() >= part
                    && let Some(send) = ctx.send_part.as_mut()
                {
                    self.parts_sent = self.parts_sent.saturating_add(1);
                    tracing::trace!(target: "unisched::timeline", part = self.parts_sent, "core: a part of the run goes out");
                    let states = self.outbox.app_states.len();
                    send(std::mem::take(&mut self.outbox));
                    // The next part's room at once, not by doubling: its
                    // leases, and its applications' first leases (each
                    // moves one to Running) in the proportion of this part's.
                    let next = super::allocate::offer_run_part_size(self.parts_sent);
                    self.outbox.placed.reserve(next);
                    self.outbox
                        .reserve_state_changes((states * next).div_ceil(part.max(1)).min(next));
                }
                true
            }
            _ => false,
        }
    }

    /// Records a lease of `offer` on `node` for the application, under
    /// `found` (its lease ask as [`Self::find_lease_ask`] gave it just
    /// before, nothing changed since) or a new lease ask.
    fn place_lease(
        &mut self,
        app: AppId,
        found: Option<AskId>,
        node: NodeId,
        offer: Resource,
        now: u64,
    ) {
        let ask = self.lease_ask(app, found, now);
        let size = self.sizes.intern(offer);
        self.place(app, ask, node, size, AllocMeta::default(), now);
        let next = self.asks[ask].next_id;
        if let Some(o) = self.apps[app].offers.as_deref_mut() {
            o.next_lease = next;
        }
        if matches!(
            self.apps[app].state,
            AppState::New | AppState::Accepted | AppState::Resuming | AppState::Completing
        ) {
            self.set_app_state(app, AppState::Running, now, "first offer");
        }
        self.rekey_app(app);
    }

    /// The ask record leases hang from: keyed by the application id, wanting
    /// nothing itself. Made again when the last lease took it away.
    fn lease_ask(&mut self, app: AppId, found: Option<AskId>, now: u64) -> AskId {
        debug_assert_eq!(found, self.find_lease_ask(app), "the lease ask as found");
        if let Some(ask) = found {
            if let Some(o) = self.apps[app].offers.as_deref_mut() {
                o.lease_ask = Some(ask);
            }
            return ask;
        }
        let key = self.apps[app].id.clone();
        let seq = self.seq();
        let next_id = self.apps[app].offers.as_ref().map_or(0, |o| o.next_lease);
        // Aside: the run's offers keep their size as the one compared first.
        let resource = self.sizes.intern_aside(Resource::ZERO);
        // Room for the application's even share of the nodes a run can
        // lease: the list otherwise grew by doubling, four reallocations an
        // application in W4's run.
        let active = self.offers.as_ref().map_or(1, |p| p.active_apps.max(1));
        let share = self.node_index.len().div_ceil(active).clamp(1, 1024);
        let ask = self.asks.insert(Ask {
            key: key.clone(),
            app,
            resource,
            pending: 0,
            allocated_total: 0,
            next_id,
            allocs: smallvec::SmallVec::with_capacity(share),
            priority: 0,
            seq,
            created: now,
            extra: None,
            placeholder: false,
            originator: false,
            allow_preempt_self: true,
            allow_preempt_other: false,
            reserved_node: None,
            reserved_since: 0,
            reported_state: 0,
        });
        self.apps[app].asks.insert(key, ask);
        if let Some(o) = self.apps[app].offers.as_deref_mut() {
            o.lease_ask = Some(ask);
        }
        ask
    }

    /// The ask record an application's leases hang from, if it has one:
    /// the one last found while that slot still holds it (an ask of this
    /// application keyed by the very string of its id), else the one its
    /// asks map holds under its id. Every lease needs it twice; the map
    /// hashed the application id each time.
    fn find_lease_ask(&self, app: AppId) -> Option<AskId> {
        let a = &self.apps[app];
        if let Some(ask) = a.offers.as_ref().and_then(|o| o.lease_ask)
            && self
                .asks
                .get(ask)
                .is_some_and(|x| x.app == app && std::sync::Arc::ptr_eq(&x.key, &a.id))
        {
            return Some(ask);
        }
        a.asks.get(&a.id).copied()
    }

    /// True when nothing pending could use the node's remainder: no pending
    /// ask fits in it and (where applications want offers) it is too small to
    /// offer. With nothing pending at all, no node is exhausted.
    pub(super) fn node_exhausted(&self, node: NodeId) -> bool {
        let res = &self.nodes[node].res;
        let offers = self.offers_wanted();
        match &self.pending_floor {
            None if !offers => false,
            floor => {
                floor.as_ref().is_none_or(|f| !res.fits(f, self.lanes))
                    && (!offers
                        || self
                            .offers
                            .as_deref()
                            .is_none_or(|p| !p.allows_node(node, &res.available(), self.lanes)))
            }
        }
    }

    /// In an offer partition: the share key of usage `allocated` of a queue
    /// or application with `weight_milli`, against the partition's total
    /// capacity (dominant resource fairness).
    pub(super) fn cluster_share(&self, allocated: &Resource, weight_milli: u64) -> u64 {
        let share = allocated.dominant_share_in(&self.total_capacity, self.lanes);
        super::partition::weighted(share, weight_milli)
    }

    /// Re-keys every application (and so every queue) when the partition's
    /// total capacity changed since the last pass: every share changed.
    pub(super) fn refresh_shares(&mut self) {
        if !std::mem::take(&mut self.shares_stale) || self.offers.is_none() {
            return;
        }
        let apps: Vec<AppId> = self.apps.iter().map(|(id, _)| id).collect();
        for a in apps {
            self.rekey_app(a);
        }
    }
}
