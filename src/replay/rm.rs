//! The simulated RM's books: which applications it added, which tasks wait
//! and run where, when each running task ends, and what the core said.
//!
//! Held by the replay's callback (`inbox.rs`): the core's dispatcher thread
//! absorbs each response into the books as it delivers it, so that work runs
//! beside the scheduling thread's; the replay thread uses them between
//! settles (to turn records into SI requests and take samples), when no
//! callback is under way. The usage kept per queue and node is what the
//! samples show, counted from the allocations and releases the core
//! reported, so the figures are the core's decisions as an RM sees them.
//!
//! Allocation keys are the trace record's index (`"17"`), and `"17~3"` for
//! a task sent again after it was preempted or lost with its node, so the
//! record of an allocation is found without a map.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Maps keyed by ids the core sends back, hashed with a fast fixed-seed
/// hasher (the default one was a tenth of the RM's time).
pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;

/// Index of each item.
fn ids<T: Eq + std::hash::Hash>(items: impl Iterator<Item = T>) -> HashMap<T, u32> {
    items.enumerate().map(|(i, v)| (v, i as u32)).collect()
}

use unisched_si as si;

use super::outcome::{Outcome, generic_reason, tally};
use super::running::{Handle, Running, RunningSet};
use crate::trace::{AskRecord, Event, Trace};

/// An application as the RM sees it.
#[derive(Debug, Clone, Default)]
struct AppBook {
    /// An add request is out and the core has not dropped the application.
    added: bool,
    /// The core rejected it: later records are not sent.
    rejected: bool,
    /// Leaf queue (index into [`Outcome::queues`]) once the core placed it.
    queue: Option<u32>,
    /// Last state the core reported.
    state: String,
    /// Resources and count waiting (moved into the queue once it is known).
    pending: Vec<i64>,
    pending_tasks: i64,
}

/// A node as the RM sees it.
#[derive(Debug, Clone, Default)]
struct NodeBook {
    up: bool,
    capacity: Vec<i64>,
    allocated: Vec<i64>,
}

/// Queue of an allocation whose application the core has not yet said it
/// placed (the event comes after the allocation when both are in one pass).
const UNPLACED: u32 = u32::MAX;

/// What the RM keeps per leaf queue.
#[derive(Debug, Clone, Default)]
pub struct QueueBook {
    /// Allocated, dense.
    pub allocated: Vec<i64>,
    /// Pending, dense.
    pub pending: Vec<i64>,
    /// Allocations waiting.
    pub pending_tasks: i64,
}

/// The simulated RM.
pub struct Rm {
    trace: std::sync::Arc<Trace>,
    partition: String,
    /// Dense size of each trace size, over `out.resources`.
    dense: Vec<Vec<i64>>,
    /// Wire form of each trace size.
    wire: Vec<si::Resource>,
    /// Why a size can never be placed (`None`: some node fits it).
    unfit: Vec<Option<String>>,
    apps: Vec<AppBook>,
    app_by_id: HashMap<String, u32>,
    queue_by_path: HashMap<String, u32>,
    /// Per leaf queue, parallel to `out.queues`.
    pub queue_books: Vec<QueueBook>,
    nodes: Vec<NodeBook>,
    node_by_id: HashMap<String, u32>,
    running: RunningSet,
    /// (end, sequence, where) of running tasks; entries whose task has left
    /// `running` (preempted, lost) are skipped when they come up.
    ends: BinaryHeap<Reverse<(u64, u64, Handle)>>,
    sequence: u64,
    /// Allocations waiting over all applications.
    pending_total: i64,
    /// Releases the last step sent (room for the next step's list).
    last_released: usize,
    /// Tasks sent again: key -> (record, when).
    resent: HashMap<String, (u32, u64)>,
    /// Allocations made before their application's placement was heard of:
    /// (application, allocation id, wait in ms).
    unplaced: Vec<(u32, String, u32)>,
    /// Confirmations and resubmissions for the next request.
    pub follow_up: si::AllocationRequest,
    /// What the replay recorded so far.
    pub out: Outcome,
}

/// Index of a resource name in `names`, adding it.
fn resource_index(names: &mut Vec<String>, name: &str) -> usize {
    match names.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            names.push(name.to_string());
            names.len() - 1
        }
    }
}

/// `a += sign * b`, element by element.
fn add(a: &mut [i64], b: &[i64], sign: i64) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += sign * y;
    }
}

impl Rm {
    /// Books for replaying `trace` into `partition`.
    pub fn new(trace: std::sync::Arc<Trace>, partition: &str) -> Self {
        // memory and vcore first, as the core orders them.
        let mut names = vec!["memory".to_string(), "vcore".to_string()];
        for size in &trace.sizes {
            for (name, _) in size {
                resource_index(&mut names, name);
            }
        }
        let dense: Vec<Vec<i64>> = trace
            .sizes
            .iter()
            .map(|size| {
                let mut v = vec![0; names.len()];
                for (name, q) in size {
                    v[resource_index(&mut names, name)] = *q;
                }
                v
            })
            .collect();
        let wire = trace
            .sizes
            .iter()
            .map(|size| {
                crate::workload::wire::resource(
                    &size
                        .iter()
                        .map(|(n, q)| (n.as_str(), *q))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let capacities: Vec<u32> = {
            let mut c: Vec<u32> = trace
                .records
                .iter()
                .filter_map(|r| match r.event {
                    Event::NodeUp { capacity, .. } => Some(capacity),
                    _ => None,
                })
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let unfit = dense
            .iter()
            .map(|ask| unfit_reason(ask, &names, capacities.iter().map(|&c| &dense[c as usize])))
            .collect();
        let out = Outcome {
            resources: names,
            ..Outcome::default()
        };
        Self {
            partition: partition.to_string(),
            dense,
            wire,
            unfit,
            apps: vec![AppBook::default(); trace.apps.len()],
            app_by_id: ids(trace.apps.iter().map(|a| a.id.clone())),
            queue_by_path: HashMap::default(),
            queue_books: Vec::new(),
            nodes: vec![NodeBook::default(); trace.nodes.len()],
            node_by_id: ids(trace.nodes.iter().cloned()),
            running: RunningSet::default(),
            ends: BinaryHeap::new(),
            sequence: 0,
            pending_total: 0,
            last_released: 0,
            resent: HashMap::default(),
            unplaced: Vec::new(),
            follow_up: si::AllocationRequest::default(),
            out,
            trace,
        }
    }

    fn width(&self) -> usize {
        self.out.resources.len()
    }

    fn queue(&mut self, path: &str) -> u32 {
        if let Some(&q) = self.queue_by_path.get(path) {
            return q;
        }
        let q = self.out.queues.len() as u32;
        self.queue_by_path.insert(path.to_string(), q);
        self.out.queues.push(path.to_string());
        self.out.waits_ms.push(Vec::new());
        self.out.preempted.push(0);
        self.out.preempting.push(0);
        let width = self.width();
        self.queue_books.push(QueueBook {
            allocated: vec![0; width],
            pending: vec![0; width],
            pending_tasks: 0,
        });
        q
    }

    /// Changes what `app` has waiting by `tasks` allocations of `size`.
    fn add_pending(&mut self, app: u32, size: u32, tasks: i64) {
        let width = self.width();
        let book = &mut self.apps[app as usize];
        if book.pending.len() != width {
            book.pending = vec![0; width];
        }
        let size = &self.dense[size as usize];
        add(&mut book.pending, size, tasks);
        book.pending_tasks += tasks;
        self.pending_total += tasks;
        if let Some(q) = book.queue {
            let qb = &mut self.queue_books[q as usize];
            add(&mut qb.pending, size, tasks);
            qb.pending_tasks += tasks;
        }
    }

    /// Allocations waiting over all applications.
    pub fn pending_tasks(&self) -> i64 {
        self.pending_total
    }

    /// Allocations running.
    pub fn running_tasks(&self) -> usize {
        self.running.len()
    }

    /// When the next running task ends.
    pub fn next_end(&mut self) -> Option<u64> {
        while let Some(Reverse((end, _, handle))) = self.ends.peek() {
            if self.running.contains(*handle) {
                return Some(*end);
            }
            self.ends.pop();
        }
        None
    }

    fn ask_record(&self, record: u32) -> Option<AskRecord> {
        match self.trace.records.get(record as usize)?.event {
            Event::Ask(a) => Some(a),
            _ => None,
        }
    }

    fn wire_ask(&self, key: String, a: &AskRecord, count: u32) -> si::AllocationAsk {
        si::AllocationAsk {
            allocation_key: key,
            application_id: self.trace.apps[a.app as usize].id.clone(),
            partition_name: self.partition.clone(),
            resource_ask: Some(self.wire[a.size as usize].clone()),
            max_allocations: i32::try_from(count).unwrap_or(i32::MAX),
            priority: a.priority,
            task_group_name: self.trace.task_groups[a.task_group as usize].clone(),
            placeholder: a.placeholder,
            preemption_policy: Some(si::PreemptionPolicy {
                allow_preempt_self: a.preempt_self,
                allow_preempt_other: a.preempt_other,
            }),
            ..Default::default()
        }
    }

    /// True when sending record `record` needs its application added first.
    pub fn needs_app(&self, record: u32) -> bool {
        self.ask_record(record).is_some_and(|a| {
            let book = &self.apps[a.app as usize];
            !book.added && !book.rejected
        })
    }

    /// The requests for ask record `record`: its application's add request
    /// when the core does not have it, and the ask. Records that cannot be
    /// placed are counted and give nothing.
    pub fn submit(
        &mut self,
        record: u32,
        new_apps: &mut Vec<si::AddApplicationRequest>,
        asks: &mut Vec<si::AllocationAsk>,
    ) {
        let Some(a) = self.ask_record(record) else {
            return;
        };
        let app = &self.trace.apps[a.app as usize];
        if self.apps[a.app as usize].rejected {
            tally(
                &mut self.out.not_submitted,
                "its application was rejected".to_string(),
                &app.id,
                u64::from(a.count),
            );
            return;
        }
        if let Some(reason) = &self.unfit[a.size as usize] {
            tally(
                &mut self.out.not_submitted,
                reason.clone(),
                &app.id,
                u64::from(a.count),
            );
            return;
        }
        if !self.apps[a.app as usize].added {
            self.apps[a.app as usize].added = true;
            new_apps.push(si::AddApplicationRequest {
                application_id: app.id.clone(),
                queue_name: app.queue.clone(),
                partition_name: self.partition.clone(),
                ugi: Some(si::UserGroupInformation {
                    user: app.user.clone(),
                    groups: app.groups.clone(),
                }),
                tags: app.tags.iter().cloned().collect(),
                gang_scheduling_style: app.gang_style.clone(),
                ..Default::default()
            });
        }
        asks.push(self.wire_ask(record.to_string(), &a, a.count));
        self.out.counts.asks += 1;
        self.out.counts.tasks += u64::from(a.count);
        self.add_pending(a.app, a.size, i64::from(a.count));
    }

    /// Releases of every task that ended by `now`.
    pub fn finished(&mut self, now: u64) -> Vec<si::AllocationRelease> {
        let due = self
            .ends
            .peek()
            .is_some_and(|Reverse((end, _, _))| *end <= now);
        let mut releases = Vec::with_capacity(if due { self.last_released } else { 0 });
        while let Some(Reverse((end, _, _))) = self.ends.peek() {
            if *end > now {
                break;
            }
            let Some(Reverse((_, _, handle))) = self.ends.pop() else {
                break;
            };
            let Some((id, run)) = self.running.take(handle) else {
                continue;
            };
            self.account_release(&run);
            self.out.counts.releases += 1;
            let Some(a) = self.ask_record(run.record) else {
                continue;
            };
            releases.push(si::AllocationRelease {
                partition_name: self.partition.clone(),
                application_id: self.trace.apps[a.app as usize].id.clone(),
                termination_type: si::TerminationType::StoppedByRm as i32,
                message: String::new(),
                allocation_key: run.key,
                allocation_id: id,
            });
        }
        if !releases.is_empty() {
            self.last_released = releases.len();
        }
        releases
    }

    fn account_release(&mut self, run: &Running) {
        let Some(a) = self.ask_record(run.record) else {
            return;
        };
        let size = &self.dense[a.size as usize];
        add(
            &mut self.queue_books[run.queue as usize].allocated,
            size,
            -1,
        );
        add(&mut self.nodes[run.node as usize].allocated, size, -1);
    }

    /// Node up (`Create`, or `Update` of its capacity when up) or down.
    pub fn node_change(&mut self, event: Event) -> Option<si::NodeInfo> {
        use si::node_info::ActionFromRm;
        match event {
            Event::NodeUp { node, capacity } => {
                let book = &mut self.nodes[node as usize];
                let action = if book.up {
                    ActionFromRm::Update
                } else {
                    ActionFromRm::Create
                };
                book.up = true;
                book.capacity = self.dense[capacity as usize].clone();
                if book.allocated.len() != book.capacity.len() {
                    book.allocated = vec![0; book.capacity.len()];
                }
                let id = &self.trace.nodes[node as usize];
                Some(si::NodeInfo {
                    node_id: id.clone(),
                    action: action as i32,
                    attributes: [
                        (si::HOSTNAME_ATTRIBUTE.to_string(), id.clone()),
                        (
                            si::NODE_PARTITION_ATTRIBUTE.to_string(),
                            self.partition.clone(),
                        ),
                    ]
                    .into(),
                    schedulable_resource: Some(self.wire[capacity as usize].clone()),
                    ..Default::default()
                })
            }
            Event::NodeDown(node) => {
                let book = &mut self.nodes[node as usize];
                if !book.up {
                    return None;
                }
                book.up = false;
                Some(si::NodeInfo {
                    node_id: self.trace.nodes[node as usize].clone(),
                    action: ActionFromRm::Decomission as i32,
                    ..Default::default()
                })
            }
            Event::Ask(_) => None,
        }
    }

    /// Takes in a node response.
    pub fn absorb_nodes(&mut self, response: si::NodeResponse) {
        for r in response.rejected {
            if let Some(&n) = self.node_by_id.get(&r.node_id) {
                self.nodes[n as usize].up = false;
            }
            let reason = generic_reason(&r.reason, &r.node_id);
            tally(&mut self.out.rejected_nodes, reason, &r.node_id, 1);
        }
    }

    /// Takes in an allocation response at virtual time `now`.
    pub fn absorb_allocations(&mut self, response: si::AllocationResponse, now: u64) {
        for a in response.new {
            self.allocated(a, now);
        }
        for r in response.released {
            self.released(r, now);
        }
        for r in response.rejected {
            self.ask_rejected(r);
        }
        for r in response.rejected_allocations {
            let reason = generic_reason(&r.reason, &r.allocation_key);
            tally(
                &mut self.out.rejected_releases,
                reason,
                &r.allocation_key,
                1,
            );
        }
    }

    /// Takes in that the core placed application `app` in leaf `queue`.
    pub fn placed(&mut self, app: &str, queue: &str) {
        let Some(&i) = self.app_by_id.get(app) else {
            return;
        };
        let q = self.queue(queue);
        let book = &self.apps[i as usize];
        if book.queue == Some(q) {
            return;
        }
        // Move what waits to the queue it now belongs to.
        let (pending, tasks, old) = (book.pending.clone(), book.pending_tasks, book.queue);
        if let Some(old) = old {
            let qb = &mut self.queue_books[old as usize];
            add(&mut qb.pending, &pending, -1);
            qb.pending_tasks -= tasks;
        }
        let qb = &mut self.queue_books[q as usize];
        add(&mut qb.pending, &pending, 1);
        qb.pending_tasks += tasks;
        self.apps[i as usize].queue = Some(q);
        // Allocations that came before this news join the queue now.
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unplaced)
            .into_iter()
            .partition(|(a, _, _)| *a == i);
        self.unplaced = others;
        for (_, id, wait) in mine {
            let Some(run) = self.running.get_mut(&id) else {
                continue;
            };
            run.queue = q;
            let record = run.record;
            self.out.waits_ms[q as usize].push(wait);
            if let Some(a) = self.ask_record(record) {
                add(
                    &mut self.queue_books[q as usize].allocated,
                    &self.dense[a.size as usize],
                    1,
                );
            }
        }
    }

    /// Takes in an application response.
    pub fn absorb_applications(&mut self, response: si::ApplicationResponse) {
        for r in response.rejected {
            let Some(&i) = self.app_by_id.get(&r.application_id) else {
                continue;
            };
            let book = &mut self.apps[i as usize];
            book.rejected = true;
            book.added = false;
            book.state = "Rejected".to_string();
            let reason = generic_reason(&r.reason, &r.application_id);
            tally(&mut self.out.rejected_apps, reason, &r.application_id, 1);
        }
        for u in response.updated {
            let Some(&i) = self.app_by_id.get(&u.application_id) else {
                continue;
            };
            let book = &mut self.apps[i as usize];
            // Gone from the core: a later record adds it again.
            if matches!(
                u.state.as_str(),
                "Completed" | "Failed" | "Expired" | "Rejected"
            ) {
                book.added = false;
            }
            book.state = u.state;
        }
    }

    /// The record and submission time of an allocation key.
    fn key_origin(&self, key: &str) -> Option<(u32, u64)> {
        if key.contains('~') {
            return self.resent.get(key).copied();
        }
        let record: u32 = key.parse().ok()?;
        Some((record, self.trace.records.get(record as usize)?.time_ms))
    }

    fn allocated(&mut self, a: si::Allocation, now: u64) {
        let Some((record, submitted)) = self.key_origin(&a.allocation_key) else {
            return;
        };
        let Some(ask) = self.ask_record(record) else {
            return;
        };
        if a.allocation_key.contains('~') {
            self.resent.remove(&a.allocation_key);
        }
        let Some(&node) = self.node_by_id.get(&a.node_id) else {
            return;
        };
        self.add_pending(ask.app, ask.size, -1);
        let size = &self.dense[ask.size as usize];
        add(&mut self.nodes[node as usize].allocated, size, 1);
        let wait = u32::try_from(now.saturating_sub(submitted)).unwrap_or(u32::MAX);
        let queue = match self.apps[ask.app as usize].queue {
            Some(q) => {
                add(&mut self.queue_books[q as usize].allocated, size, 1);
                self.out.waits_ms[q as usize].push(wait);
                q
            }
            None => {
                self.unplaced.push((ask.app, a.allocation_id.clone(), wait));
                UNPLACED
            }
        };
        self.out.counts.allocations += 1;
        let handle = self.running.insert(
            a.allocation_id,
            Running {
                record,
                key: a.allocation_key,
                node,
                queue,
            },
        );
        if !ask.placeholder {
            self.sequence += 1;
            let end = now.saturating_add(ask.duration_ms);
            self.ends.push(Reverse((end, self.sequence, handle)));
        }
    }

    fn released(&mut self, r: si::AllocationRelease, now: u64) {
        use si::TerminationType as T;
        // Not running any more: the RM released it itself (this is the
        // core's confirmation) or it was handled already.
        let Some(run) = self.running.remove_id(&r.allocation_id) else {
            return;
        };
        self.account_release(&run);
        let termination = T::try_from(r.termination_type).unwrap_or(T::UnknownTerminationType);
        match termination {
            T::PreemptedByScheduler | T::PlaceholderReplaced => {
                if termination == T::PreemptedByScheduler {
                    self.out.counts.preemptions += 1;
                    if let Some(n) = self.out.preempted.get_mut(run.queue as usize) {
                        *n += 1;
                    }
                    if let Some(q) = self.preemptor_queue(&r.message) {
                        self.out.preempting[q as usize] += 1;
                    }
                    self.send_again(run.record, now);
                } else {
                    self.out.counts.placeholders_replaced += 1;
                }
                // The core holds the allocation until the RM confirms.
                let confirm = si::AllocationRelease {
                    message: "confirmed by the simulated RM".to_string(),
                    ..r
                };
                self.follow_up
                    .releases
                    .get_or_insert_with(Default::default)
                    .allocations_to_release
                    .push(confirm);
            }
            T::Timeout => self.out.counts.placeholders_timed_out += 1,
            _ => {
                // Lost with its node (or its application): the task starts over.
                self.out.counts.lost_with_node += 1;
                if self.ask_record(run.record).is_some_and(|a| !a.placeholder) {
                    self.send_again(run.record, now);
                }
            }
        }
    }

    /// The queue of the application a preemption made room for, from the
    /// release message (`... <key> of application <app>`).
    fn preemptor_queue(&self, message: &str) -> Option<u32> {
        let (_, app) = message.rsplit_once(" of application ")?;
        self.apps[*self.app_by_id.get(app.trim())? as usize].queue
    }

    /// Sends a task of `record` again (a controller restarting its pod).
    fn send_again(&mut self, record: u32, now: u64) {
        let Some(a) = self.ask_record(record) else {
            return;
        };
        self.sequence += 1;
        let key = format!("{record}~{}", self.sequence);
        self.resent.insert(key.clone(), (record, now));
        let ask = self.wire_ask(key, &a, 1);
        self.follow_up.asks.push(ask);
        self.out.counts.asks += 1;
        self.out.counts.tasks += 1;
        self.add_pending(a.app, a.size, 1);
    }

    fn ask_rejected(&mut self, r: si::RejectedAllocationAsk) {
        let Some((record, _)) = self.key_origin(&r.allocation_key) else {
            return;
        };
        let Some(a) = self.ask_record(record) else {
            return;
        };
        let count = if r.allocation_key.contains('~') {
            self.resent.remove(&r.allocation_key);
            1
        } else {
            a.count
        };
        self.add_pending(a.app, a.size, -i64::from(count));
        let reason = generic_reason(
            &generic_reason(&r.reason, &r.allocation_key),
            &r.application_id,
        );
        tally(
            &mut self.out.rejected_asks,
            reason,
            &r.application_id,
            u64::from(count),
        );
    }

    /// A sample of the books at `now`.
    pub fn sample(&self, now: u64) -> super::outcome::Sample {
        let width = self.width();
        let mut capacity = vec![0; width];
        let mut used = vec![0; width];
        let mut shares = Vec::with_capacity(self.nodes.len());
        for n in self.nodes.iter().filter(|n| n.up) {
            add(&mut capacity, &n.capacity, 1);
            add(&mut used, &n.allocated, 1);
            shares.push(dominant_share(&n.allocated, &n.capacity));
        }
        shares.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            if shares.is_empty() {
                0.0
            } else {
                shares[((shares.len() - 1) as f64 * q).round() as usize]
            }
        };
        super::outcome::Sample {
            time_ms: now,
            allocated: self
                .queue_books
                .iter()
                .map(|q| q.allocated.clone())
                .collect(),
            pending: self.queue_books.iter().map(|q| q.pending.clone()).collect(),
            pending_tasks: self
                .queue_books
                .iter()
                .map(|q| q.pending_tasks.max(0) as u64)
                .collect(),
            capacity,
            used,
            node_share: [pick(0.1), pick(0.5), pick(0.9), pick(1.0)],
            nodes_up: shares.len() as u32,
            preemptions: self.out.counts.preemptions,
        }
    }

    /// Final states of the applications the RM sent.
    pub fn app_states(&self) -> std::collections::BTreeMap<String, u64> {
        let mut states = std::collections::BTreeMap::new();
        for book in &self.apps {
            let state = if book.state.is_empty() {
                if book.added { "New" } else { continue }
            } else {
                book.state.as_str()
            };
            *states.entry(state.to_string()).or_insert(0) += 1;
        }
        states
    }
}

/// The fullest resource's share `used / capacity` (types without capacity
/// are left out).
pub fn dominant_share(used: &[i64], capacity: &[i64]) -> f64 {
    used.iter()
        .zip(capacity)
        .filter(|(_, c)| **c > 0)
        .map(|(u, c)| *u as f64 / *c as f64)
        .fold(0.0, f64::max)
}

/// Why an ask of `ask` fits no node of any of `capacities`, if so.
fn unfit_reason<'a>(
    ask: &[i64],
    names: &[String],
    capacities: impl Iterator<Item = &'a Vec<i64>> + Clone,
) -> Option<String> {
    if capacities
        .clone()
        .any(|cap| ask.iter().zip(cap).all(|(a, c)| a <= c))
    {
        return None;
    }
    for (i, &q) in ask.iter().enumerate() {
        if q > 0
            && capacities
                .clone()
                .all(|cap| cap.get(i).copied().unwrap_or(0) == 0)
        {
            return Some(format!("asks for {}, which no node has", names[i]));
        }
    }
    for (i, &q) in ask.iter().enumerate() {
        if capacities
            .clone()
            .all(|cap| cap.get(i).copied().unwrap_or(0) < q)
        {
            return Some(format!("asks for more {} than any node has", names[i]));
        }
    }
    Some("fits no node (no node has all of it at once)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["memory".into(), "vcore".into(), "gpu".into()]
    }

    #[test]
    fn asks_that_fit_no_node_say_why() {
        let caps = [vec![10, 4, 0], vec![4, 10, 0]];
        let check = |ask: &[i64]| unfit_reason(ask, &names(), caps.iter());
        assert_eq!(check(&[10, 4, 0]), None);
        assert_eq!(
            check(&[1, 1, 1]).unwrap(),
            "asks for gpu, which no node has"
        );
        assert_eq!(
            check(&[11, 1, 0]).unwrap(),
            "asks for more memory than any node has"
        );
        assert_eq!(
            check(&[8, 8, 0]).unwrap(),
            "fits no node (no node has all of it at once)"
        );
    }

    #[test]
    fn dominant_share_is_the_fullest_resource() {
        assert_eq!(dominant_share(&[5, 3], &[10, 4]), 0.75);
        assert_eq!(dominant_share(&[5, 3], &[0, 0]), 0.0);
    }
}
