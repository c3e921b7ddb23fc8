//! Turning a partition configuration into queues: a new configuration is
//! converted whole first, then applied in place (new queues created, missing
//! ones draining, usage kept).

use std::collections::{BTreeMap, BTreeSet};

use unisched_si as si;

use super::super::limits::QueueLimits;
use super::super::objects::*;
use super::*;
use crate::config::{PartitionConfig, QueueConfig};
use crate::resources::{Resource, ResourceNames};

impl Partition {
    /// Applies a (new) configuration: updates queues in place, creates new ones,
    /// and marks configured queues that disappeared as draining. Usage is kept.
    pub fn apply_config(&mut self, config: PartitionConfig, now: u64) -> Result<(), BuildError> {
        // Convert everything first so a bad value changes nothing.
        let names = self.names.clone();
        let names = names.as_ref();
        let mut plan = Vec::new();
        plan_queue(&config.root, None, &BTreeMap::new(), names, &mut plan)?;
        // Partition limits are the root queue's.
        if !config.limits.is_empty()
            && let Some(root) = plan.first_mut()
        {
            let mut all = config.limits.clone();
            all.extend(config.root.limits.iter().cloned());
            root.limits = QueueLimits::from_config(&all, names)
                .map_err(|e| format!("partition limits: {e}"))?;
        }
        let weights = node_weights(&config, names)?;

        let mut seen = BTreeSet::new();
        for planned in plan {
            let id = match self.queue_by_path.get(planned.path.as_str()) {
                Some(&id) => id,
                None => {
                    let parent = planned
                        .parent_path
                        .as_deref()
                        .and_then(|p| self.queue_by_path.get(p).copied());
                    let id = self.create_queue(&planned.path, parent, planned.is_parent);
                    self.outbox.queue_event(
                        now,
                        &planned.path,
                        si::event_record::ChangeType::Add,
                        si::event_record::ChangeDetail::QueueConfig,
                        "queue created from configuration",
                    );
                    id
                }
            };
            seen.insert(id);
            let q = &mut self.queues[id];
            q.is_parent = planned.is_parent || !q.children.is_empty();
            q.dynamic = false;
            q.state = QueueState::Active;
            q.set_guaranteed(planned.guaranteed);
            // The root's max is the cluster's (see `set_root_max`); the
            // configuration never sets one (validation refuses it).
            if id != ROOT {
                q.max = planned.max;
                q.has_max = planned.max != Resource::UNLIMITED;
            }
            q.max_applications = planned.max_applications;
            q.app_sort = planned.app_sort;
            q.sort_priority = planned.sort_priority;
            q.properties = planned.properties;
            q.submit_acl = planned.submit_acl;
            q.admin_acl = planned.admin_acl;
            q.limits = planned.limits;
            q.read_properties();
        }
        for id in 0..self.queues.len() {
            let q = &self.queues[id];
            if !seen.contains(&id) && !q.dynamic && q.state == QueueState::Active {
                let path = q.path.clone();
                self.queues[id].state = QueueState::Draining;
                self.cleanup_wanted = true;
                self.outbox.queue_event(
                    now,
                    &path,
                    si::event_record::ChangeType::Set,
                    si::event_record::ChangeDetail::QueueConfig,
                    "queue removed from configuration: draining",
                );
            }
        }
        self.node_sort = config.node_sort_policy.kind;
        self.node_weights = weights;
        self.config = config;
        // Shares and sort policies may have changed: re-key everything.
        let node_ids: Vec<NodeId> = self.nodes.iter().map(|(id, _)| id).collect();
        for n in node_ids {
            self.rekey_node(n);
        }
        let app_ids: Vec<AppId> = self.apps.iter().map(|(id, _)| id).collect();
        for &a in &app_ids {
            self.rekey_app(a);
        }
        self.retrack_limits();
        Ok(())
    }
}

/// A queue of the configuration, resolved to dense resources and effective properties.
struct PlannedQueue {
    path: String,
    parent_path: Option<String>,
    is_parent: bool,
    guaranteed: Resource,
    max: Resource,
    max_applications: u64,
    properties: BTreeMap<String, String>,
    app_sort: AppSortPolicy,
    sort_priority: bool,
    submit_acl: Option<String>,
    admin_acl: Option<String>,
    limits: Option<Box<QueueLimits>>,
}

/// Properties a child does not inherit from its parent.
const NOT_INHERITED: [&str; 4] = [
    "priority.policy",
    "priority.offset",
    "preemption.policy",
    crate::config::properties::QUEUE_WEIGHT,
];

fn plan_queue(
    q: &QueueConfig,
    parent_path: Option<&str>,
    inherited: &BTreeMap<String, String>,
    names: &ResourceNames,
    out: &mut Vec<PlannedQueue>,
) -> Result<(), BuildError> {
    let path = match parent_path {
        Some(p) => format!("{p}.{}", q.name),
        None => q.name.clone(),
    };
    let mut properties = inherited.clone();
    for (k, v) in &q.properties {
        properties.insert(k.clone(), v.clone());
    }
    let app_sort = match properties
        .get("application.sort.policy")
        .map(String::as_str)
    {
        Some("fair") => AppSortPolicy::Fair,
        _ => AppSortPolicy::Fifo,
    };
    let sort_priority = properties
        .get("application.sort.priority")
        .is_none_or(|v| v != "disabled");
    let guaranteed = names
        .from_map(&q.guaranteed)
        .map_err(|e| format!("queue {path}: guaranteed: {e}"))?;
    let max = names
        .limit_from_map(&q.max)
        .map_err(|e| format!("queue {path}: max: {e}"))?;
    let is_parent = q.parent || !q.queues.is_empty();
    out.push(PlannedQueue {
        path: path.clone(),
        parent_path: parent_path.map(str::to_string),
        is_parent,
        guaranteed,
        max,
        max_applications: q.max_applications,
        properties: properties.clone(),
        app_sort,
        sort_priority,
        submit_acl: q.submit_acl.clone(),
        admin_acl: q.admin_acl.clone(),
        limits: QueueLimits::from_config(&q.limits, names)
            .map_err(|e| format!("queue {path}: {e}"))?,
    });
    let mut for_children = properties;
    for key in NOT_INHERITED {
        for_children.remove(key);
    }
    if q.properties.get("preemption.policy").map(String::as_str) == Some("disabled") {
        for_children.insert("preemption.policy".to_string(), "disabled".to_string());
    }
    for child in &q.queues {
        plan_queue(child, Some(&path), &for_children, names, out)?;
    }
    Ok(())
}

fn node_weights(
    config: &PartitionConfig,
    names: &ResourceNames,
) -> Result<Vec<(usize, u64)>, BuildError> {
    let weights = &config.node_sort_policy.resource_weights;
    if weights.is_empty() {
        return Ok(vec![
            (crate::resources::VCORE, 1000),
            (crate::resources::MEMORY, 1000),
        ]);
    }
    let mut out = Vec::new();
    for (name, &w) in weights {
        let i = names.intern(name).map_err(|e| e.to_string())?;
        let w = (w * 1000.0).round();
        if w > 0.0 {
            out.push((i, w as u64));
        }
    }
    Ok(out)
}
