//! Placement: which leaf an application goes to, and the dynamic queues
//! placement creates.

use std::collections::BTreeMap;

use super::super::objects::*;
use super::super::partition::{Partition, ROOT};
use unisched_si as si;

use crate::config::acl::Acl;
use crate::config::placement;
use crate::resources::Resource;

impl Partition {
    /// Chooses the leaf queue for an application, or says why there is none.
    pub(super) fn place_application(
        &mut self,
        app_id: &str,
        requested: &str,
        user: &str,
        groups: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<QueueId, String> {
        let placement = placement::Placer::new(&self.config.placement_rules).place(
            &placement::AppPlacementInput {
                app_id,
                requested_queue: requested,
                user,
                groups,
                tags,
                forced: placement::is_create_forced(tags),
            },
            &PartitionQueues(self),
        )?;
        match self.queue_by_path.get(placement.queue_path.as_str()) {
            Some(&q) => Ok(q),
            None if placement::is_recovery_queue(&placement.queue_path) => {
                Ok(self.create_recovery_queue())
            }
            None if placement.create => Ok(self.create_dynamic_path(&placement.queue_path)),
            None => Err(format!(
                "application {app_id}: queue {} does not exist",
                placement.queue_path
            )),
        }
    }

    /// Creates the missing queues of `path` as dynamic queues taking their
    /// parent's child template, and returns the leaf.
    pub(super) fn create_dynamic_path(&mut self, path: &str) -> QueueId {
        let mut current = ROOT;
        let mut so_far = String::new();
        let parts: Vec<&str> = path.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if i == 0 {
                so_far.push_str(part);
                continue;
            }
            so_far.push('.');
            so_far.push_str(part);
            current = match self.queue_by_path.get(so_far.as_str()) {
                Some(&q) => q,
                None => {
                    let is_leaf = i == parts.len() - 1;
                    let q = self.create_queue(&so_far, Some(current), !is_leaf);
                    self.apply_child_template(current, q);
                    self.queues[q].dynamic = true;
                    self.queue_created_dynamically(q);
                    q
                }
            };
        }
        current
    }

    /// Creates upstream's recovery queue under root: a dynamic fifo leaf
    /// with no limits, template or properties (forced applications run
    /// there whatever the configuration says).
    fn create_recovery_queue(&mut self) -> QueueId {
        let q = self.create_queue(placement::RECOVERY_QUEUE, Some(ROOT), false);
        self.queues[q].dynamic = true;
        self.queue_created_dynamically(q);
        q
    }

    /// Applies an application's namespace tags to the dynamic queue it was
    /// placed in, as upstream's `AddApplication` does on every application
    /// added: `namespace.resourcequota` and `namespace.resourceguaranteed`
    /// set the max and guaranteed (both, once either is given: one left out
    /// is cleared), `namespace.resourcemaxapps` the maxapplications.
    /// Configured queues and the recovery queue keep their own settings.
    pub(super) fn apply_namespace_tags(
        &mut self,
        queue: QueueId,
        tags: &BTreeMap<String, String>,
        now: u64,
    ) {
        let q = &self.queues[queue];
        if !q.dynamic || placement::is_recovery_queue(&q.path) {
            return;
        }
        let max = tag_resource(tags, NAMESPACE_QUOTA_TAG);
        let guaranteed = tag_resource(tags, NAMESPACE_GUARANTEED_TAG);
        let max_apps = tags
            .get(NAMESPACE_MAX_APPS_TAG)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if max_apps != 0 {
            self.queues[queue].max_applications = max_apps;
        }
        if max.is_none() && guaranteed.is_none() {
            return;
        }
        let names = self.names.clone();
        let max = max
            .and_then(|m| names.limit_from_map(&m).ok())
            .unwrap_or(Resource::UNLIMITED);
        let guaranteed = guaranteed
            .and_then(|g| names.from_map(&g).ok())
            .unwrap_or(Resource::ZERO);
        let q = &mut self.queues[queue];
        let changed = [
            (q.max != max, si::event_record::ChangeDetail::QueueMax),
            (
                *q.guaranteed() != guaranteed,
                si::event_record::ChangeDetail::QueueGuaranteed,
            ),
        ];
        q.max = max;
        q.has_max = max != Resource::UNLIMITED;
        q.set_guaranteed(guaranteed);
        let path = q.path.clone();
        for (_, detail) in changed.into_iter().filter(|(c, _)| *c) {
            self.outbox.queue_event(
                now,
                &path,
                si::event_record::ChangeType::Set,
                detail,
                "set from the application's namespace tags",
            );
        }
        self.rekey_queue_chain(queue);
    }

    /// Reports a queue placement created, as upstream does (`QUEUE`, `ADD`,
    /// `QUEUE_DYNAMIC`).
    fn queue_created_dynamically(&mut self, q: QueueId) {
        self.cleanup_wanted = true;
        let path = self.queues[q].path.clone();
        self.outbox.queue_event(
            self.now,
            &path,
            si::event_record::ChangeType::Add,
            si::event_record::ChangeDetail::QueueDynamic,
            "queue created by placement",
        );
    }

    pub(super) fn apply_child_template(&mut self, parent: QueueId, child: QueueId) {
        let parent_path = self.queues[parent].path.to_string();
        let template = self
            .config
            .root
            .find(&parent_path)
            .and_then(|c| c.child_template.clone());
        let inherited = self.queues[parent].properties.clone();
        let q = &mut self.queues[child];
        q.properties = inherited;
        for key in [
            "priority.policy",
            "priority.offset",
            crate::config::properties::QUEUE_WEIGHT,
        ] {
            q.properties.remove(key);
        }
        if let Some(t) = template {
            let q = &mut self.queues[child];
            q.max_applications = t.max_applications;
            for (k, v) in &t.properties {
                q.properties.insert(k.clone(), v.clone());
            }
            let names = self.names.clone();
            let q = &mut self.queues[child];
            if let Ok(g) = names.from_map(&t.guaranteed) {
                q.set_guaranteed(g);
            }
            if let Ok(m) = names.limit_from_map(&t.max) {
                q.has_max = m != Resource::UNLIMITED;
                q.max = m;
            }
        }
        let q = &mut self.queues[child];
        q.app_sort = match q
            .properties
            .get("application.sort.policy")
            .map(String::as_str)
        {
            Some("fair") => AppSortPolicy::Fair,
            _ => AppSortPolicy::Fifo,
        };
        q.sort_priority = q
            .properties
            .get("application.sort.priority")
            .is_none_or(|v| v != "disabled");
        q.read_properties();
    }

    /// Whether `user` may submit to `queue`: its submit or admin ACL, or an ancestor's.
    pub fn submit_allowed(&self, queue: QueueId, user: &str, groups: &[String]) -> bool {
        let mut q = Some(queue);
        while let Some(id) = q {
            let queue = &self.queues[id];
            for acl in [&queue.submit_acl, &queue.admin_acl].into_iter().flatten() {
                if Acl::parse(acl).is_ok_and(|a| a.allows(user, groups)) {
                    return true;
                }
            }
            q = queue.parent;
        }
        false
    }
}

/// The partition's queues as the placement rules see them.
struct PartitionQueues<'a>(&'a Partition);

impl placement::QueueLookup for PartitionQueues<'_> {
    fn lookup(&self, path: &str) -> Option<placement::QueueInfo> {
        let &id = self.0.queue_by_path.get(path)?;
        let q = &self.0.queues[id];
        Some(placement::QueueInfo {
            leaf: !q.is_parent,
            draining: q.state == QueueState::Draining,
        })
    }

    fn submit_allowed(&self, path: &str, user: &str, groups: &[String]) -> bool {
        self.0
            .queue_by_path
            .get(path)
            .is_some_and(|&id| self.0.submit_allowed(id, user, groups))
    }
}

/// Tag holding the namespace quota: the dynamic queue's max.
pub const NAMESPACE_QUOTA_TAG: &str = "namespace.resourcequota";
/// Tag holding the namespace guarantee: the dynamic queue's guaranteed.
pub const NAMESPACE_GUARANTEED_TAG: &str = "namespace.resourceguaranteed";
/// Tag holding the namespace's application limit: the dynamic queue's
/// maxapplications.
pub const NAMESPACE_MAX_APPS_TAG: &str = "namespace.resourcemaxapps";

/// A resource tag as the RM writes it: the JSON of an SI `Resource`.
#[derive(serde::Deserialize)]
struct TagResource {
    #[serde(default)]
    resources: BTreeMap<String, TagQuantity>,
}

#[derive(serde::Deserialize)]
struct TagQuantity {
    #[serde(default)]
    value: i64,
}

/// The quantities of resource tag `name` (wire units), or `None` when it is
/// missing, does not parse, or is not greater than zero (no negative value,
/// some positive one), as upstream's `getResourceFromTags` reads it.
fn tag_resource(tags: &BTreeMap<String, String>, name: &str) -> Option<BTreeMap<String, i64>> {
    // JSON is YAML: the configuration's decoder reads it.
    let parsed: TagResource = serde_yaml::from_str(tags.get(name)?).ok()?;
    let values: BTreeMap<String, i64> = parsed
        .resources
        .into_iter()
        .map(|(k, q)| (k, q.value))
        .collect();
    let positive = values.values().all(|&v| v >= 0) && values.values().any(|&v| v > 0);
    positive.then_some(values)
}
