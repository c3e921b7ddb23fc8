//! What readers see of a partition: the snapshot, and the completed
//! applications kept for it.

use std::collections::BTreeMap;

use super::*;
use crate::config::NodeSortKind;
use crate::resources::{NameTable, Resource};

impl Partition {
    // ---- readers ---------------------------------------------------------

    /// Builds the immutable view of this partition.
    pub fn snapshot(&self, names: &NameTable) -> crate::snapshot::PartitionSnapshot {
        use crate::snapshot::*;
        let map = |r: &Resource| names.to_map(r);
        let mut queues: Vec<QueueSnapshot> = self
            .queue_by_path
            .values()
            .map(|&id| {
                let q = &self.queues[id];
                QueueSnapshot {
                    path: q.path.to_string(),
                    parent: q.is_parent,
                    state: match q.state {
                        QueueState::Active => "Active",
                        QueueState::Draining => "Draining",
                    }
                    .to_string(),
                    dynamic: q.dynamic,
                    guaranteed: map(q.guaranteed()),
                    max: map(&q.max),
                    allocated: map(&q.allocated),
                    pending: map(&q.pending),
                    max_applications: q.max_applications,
                    running_applications: q.running_apps,
                    properties: q.properties.clone(),
                    child_template: self
                        .config
                        .root
                        .find(&q.path)
                        .and_then(|c| c.child_template.clone()),
                }
            })
            .collect();
        queues.sort_by(|a, b| a.path.cmp(&b.path));
        let mut applications: Vec<ApplicationSnapshot> = self
            .apps
            .iter()
            .map(|(_, a)| {
                let mut pending_asks: Vec<AskSnapshot> = a
                    .pending_order
                    .iter()
                    .map(|k| {
                        let ask = &self.asks[k.2];
                        AskSnapshot {
                            allocation_key: String::from(&*ask.key),
                            resource: map(&ask.resource),
                            pending_allocations: ask.pending,
                            priority: ask.priority,
                            reserved_node: ask
                                .reserved_node
                                .map(|n| String::from(&*self.nodes[n].id)),
                            created: ask.created,
                            tags: ask.tags().clone(),
                            task_group: ask.task_group().to_string(),
                            placeholder: ask.placeholder,
                            originator: ask.originator,
                        }
                    })
                    .collect();
                pending_asks.sort_by(|x, y| x.allocation_key.cmp(&y.allocation_key));
                ApplicationSnapshot {
                    id: String::from(&*a.id),
                    queue: self.queues[a.queue].path.to_string(),
                    user: a.user.to_string(),
                    groups: a.groups.clone(),
                    limit_group: a.limit_group.as_deref().map(str::to_string),
                    state: a.state.as_str().to_string(),
                    allocated: map(&a.allocated),
                    placeholder: map(&a.placeholder),
                    pending: map(&a.pending),
                    pending_asks,
                    allocation_count: a.allocation_count,
                    submission_time: a.submission_time,
                    state_log: state_log(&a.state_log),
                    placeholders: a
                        .gang
                        .iter()
                        .flat_map(|g| g.groups.iter())
                        .map(|(name, c)| PlaceholderSnapshot {
                            task_group: name.clone(),
                            count: c.count,
                            replaced: c.replaced,
                            timed_out: c.gone,
                        })
                        .collect(),
                    rejected_message: String::new(),
                }
            })
            .collect();
        for c in &self.completed_apps {
            if !self.app_by_id.contains_key(&c.id) {
                applications.push(c.snapshot());
            }
        }
        let mut rejected: BTreeMap<&str, ApplicationSnapshot> = BTreeMap::new();
        for c in &self.rejected_apps {
            rejected.insert(&c.id, c.snapshot());
        }
        let rejected_applications: Vec<ApplicationSnapshot> = rejected.into_values().collect();
        applications.sort_by(|a, b| a.id.cmp(&b.id));
        let mut nodes: Vec<NodeSnapshot> = self
            .nodes
            .iter()
            .map(|(_, n)| NodeSnapshot {
                id: String::from(&*n.id),
                schedulable: n.schedulable,
                capacity: map(&n.res.capacity()),
                occupied: map(&n.res.occupied()),
                allocated: map(&n.res.allocated()),
                available: map(&n.res.available()),
                allocation_count: n.allocations.len(),
                reserved_by: n.reserved_by.map(|a| String::from(&*self.asks[a].key)),
                attributes: n.attributes.clone(),
            })
            .collect();
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let mut allocations: Vec<AllocationSnapshot> = self
            .allocs
            .iter()
            .map(|(_, al)| {
                let app = &self.apps[al.app];
                AllocationSnapshot {
                    allocation_key: String::from(&*al.key),
                    allocation_id: String::from(&*al.id),
                    application_id: String::from(&*app.id),
                    queue: self.queues[app.queue].path.to_string(),
                    node_id: String::from(&*self.nodes[al.node].id),
                    resource: map(&al.resource),
                    placeholder: al.placeholder,
                    priority: al.priority,
                    created: al.created,
                    requested: app.asks.get(&al.key).map_or(0, |&k| self.asks[k].created),
                    task_group: al.task_group.clone(),
                    originator: al.originator,
                    tags: al.tags.clone(),
                    preempted: al.releasing.as_ref().is_some_and(|r| {
                        r.termination == unisched_si::TerminationType::PreemptedByScheduler
                    }),
                }
            })
            .collect();
        allocations.sort_by(|a, b| a.allocation_id.cmp(&b.allocation_id));
        let plain = self.name.rsplit(']').next().unwrap_or(&self.name);
        PartitionSnapshot {
            name: plain.to_string(),
            rm_id: self.rm_id.to_string(),
            node_sort_policy: match self.node_sort {
                NodeSortKind::Fair => "fair",
                NodeSortKind::Binpacking => "binpacking",
            }
            .to_string(),
            total_capacity: map(&self.total_capacity),
            queues,
            applications,
            rejected_applications,
            nodes,
            allocations,
            preemption_enabled: self.config.preemption.enabled,
            node_sort_weights: self.config.node_sort_policy.resource_weights.clone(),
            placement_rules: self.config.placement_rules.clone(),
        }
    }

    /// Remembers a finished application for readers.
    pub fn remember_completed(&mut self, app: &App) {
        self.completed_apps.push_back(CompletedApp {
            id: app.id.clone(),
            queue: self.queues[app.queue].path.clone(),
            user: app.user.clone(),
            state: app.state,
            submission_time: app.submission_time,
            groups: app.groups.clone(),
            state_log: app.state_log.clone(),
            rejected_message: String::new(),
        });
        self.trim_completed();
    }

    /// Remembers an application the partition refused, as upstream keeps its
    /// rejected applications for readers: in the queue it asked for, New
    /// then Rejected at `now`, with the reason.
    pub fn remember_rejected(&mut self, rejected: RejectedApp<'_>, now: u64, reason: &str) {
        self.rejected_apps.push_back(CompletedApp {
            id: Arc::from(rejected.id),
            queue: Arc::from(rejected.queue),
            user: Arc::from(rejected.user),
            state: AppState::Rejected,
            submission_time: now,
            groups: rejected.groups.to_vec(),
            state_log: vec![(AppState::New, now), (AppState::Rejected, now)],
            rejected_message: reason.to_string(),
        });
        while self.rejected_apps.len() > self.completed_apps_kept {
            self.rejected_apps.pop_front();
        }
    }

    fn trim_completed(&mut self) {
        while self.completed_apps.len() > self.completed_apps_kept {
            self.completed_apps.pop_front();
        }
    }
}

impl CompletedApp {
    /// What readers see of a finished or refused application.
    fn snapshot(&self) -> crate::snapshot::ApplicationSnapshot {
        crate::snapshot::ApplicationSnapshot {
            id: String::from(&*self.id),
            queue: self.queue.to_string(),
            user: self.user.to_string(),
            groups: self.groups.clone(),
            state: self.state.as_str().to_string(),
            submission_time: self.submission_time,
            state_log: state_log(&self.state_log),
            rejected_message: self.rejected_message.clone(),
            ..Default::default()
        }
    }
}

/// What readers keep of a refused application.
#[derive(Debug, Clone, Copy)]
pub struct RejectedApp<'a> {
    /// Application id.
    pub id: &'a str,
    /// The queue it asked for (may be empty).
    pub queue: &'a str,
    /// Owner (may be empty).
    pub user: &'a str,
    /// Owner's groups.
    pub groups: &'a [String],
}

impl<'a> RejectedApp<'a> {
    /// The application `id` asking for `queue`, owned by `user` of `groups`.
    pub fn new(id: &'a str, queue: &'a str, user: &'a str, groups: &'a [String]) -> Self {
        RejectedApp {
            id,
            queue,
            user,
            groups,
        }
    }
}

/// A state log as readers see it.
fn state_log(log: &[(AppState, u64)]) -> Vec<crate::snapshot::StateChange> {
    log.iter()
        .map(|&(state, time)| crate::snapshot::StateChange {
            state: state.as_str().to_string(),
            time,
        })
        .collect()
}
