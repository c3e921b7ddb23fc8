//! Usage accounting: pending and allocated totals up the queue tree, user
//! and group limits, running application counts and the headroom checks.

use std::sync::Arc;

use unisched_si as si;

use super::super::objects::*;
use super::*;
use crate::resources::Resource;

impl Partition {
    /// Recomputes the usage tracked against user and group limits from the
    /// applications (after the limits changed).
    pub(super) fn retrack_limits(&mut self) {
        for q in &mut self.queues {
            if let Some(l) = q.limits.as_mut() {
                l.clear_usage();
            }
        }
        let app_ids: Vec<AppId> = self.apps.iter().map(|(id, _)| id).collect();
        for app in app_ids {
            self.apps[app].limit_group = self.limit_group_for(app);
            let allocs = self.app_allocations(app);
            for alloc in allocs {
                let res = *self.allocs[alloc].resource;
                self.track_limits(app, &res, true);
            }
            if self.apps[app].counted_running {
                self.track_limit_apps(app, true);
            }
        }
    }

    /// The group whose limits an application's usage counts against: the first
    /// of the user's groups a limit on the queue path names, else (with a `*`
    /// group limit on the path) the user's first group.
    pub fn limit_group_for(&self, app: AppId) -> Option<Arc<str>> {
        let a = &self.apps[app];
        let mut wildcard = false;
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits {
                if let Some(g) = a.groups.iter().find(|g| l.names_group(g)) {
                    return Some(Arc::from(g.as_str()));
                }
                wildcard |= l.has_group_wildcard();
            }
            q = self.queues[id].parent;
        }
        if wildcard {
            a.groups.first().map(|g| Arc::from(g.as_str()))
        } else {
            None
        }
    }

    fn track_limits(&mut self, app: AppId, res: &Resource, add: bool) {
        // Borrowed, not cloned: this runs for every allocation.
        let a = &self.apps[app];
        let (user, group) = (&a.user, a.limit_group.as_ref());
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = self.queues[id].limits.as_mut() {
                l.track_resource(user, group, res, add);
            }
            q = self.queues[id].parent;
        }
    }

    fn track_limit_apps(&mut self, app: AppId, running: bool) {
        let a = &self.apps[app];
        let (user, group) = (a.user.clone(), a.limit_group.clone());
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = self.queues[id].limits.as_mut() {
                l.track_app(&user, group.as_ref(), running);
            }
            q = self.queues[id].parent;
        }
    }

    /// True when `res` more fits under every user and group limit on the path.
    pub fn fits_user_limits(&self, app: AppId, res: &Resource) -> bool {
        let a = &self.apps[app];
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits
                && !l.fits(&a.user, a.limit_group.as_deref(), res)
            {
                return false;
            }
            q = self.queues[id].parent;
        }
        true
    }

    /// True when the application may start running: queue maxapplications and
    /// user and group application limits on the path allow one more.
    pub fn can_start(&self, app: AppId) -> bool {
        let a = &self.apps[app];
        if a.counted_running {
            return true;
        }
        if !self.can_start_app(a.queue) {
            return false;
        }
        let mut q = Some(a.queue);
        while let Some(id) = q {
            if let Some(l) = &self.queues[id].limits
                && !l.can_start(&a.user, a.limit_group.as_deref())
            {
                return false;
            }
            q = self.queues[id].parent;
        }
        true
    }

    // ---- usage accounting ------------------------------------------------

    /// Takes in resource names interned since the last call. A vector that
    /// uses a new name reaches this thread only in a request sent after the
    /// name was interned, so calling this before applying each request (and
    /// before each pass) keeps every value vector inside `lanes`.
    pub fn sync_lanes(&mut self) {
        self.lanes = self.names.lanes();
    }

    /// Adds `res` to the pending totals of an application and its queues.
    pub fn add_pending(&mut self, app: AppId, res: &Resource) {
        let lanes = self.lanes;
        self.apps[app].pending.add_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].pending.add_in(res, lanes);
            q = self.queues[id].parent;
        }
    }

    /// Removes `res` from the pending totals of an application and its queues.
    pub fn remove_pending(&mut self, app: AppId, res: &Resource) {
        let lanes = self.lanes;
        self.apps[app].pending.sub_in(res, lanes);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].pending.sub_in(res, lanes);
            q = self.queues[id].parent;
        }
    }

    /// Adds `res` to the allocated totals of an application (its
    /// placeholder total for a placeholder), its queues and a node.
    pub fn add_usage(&mut self, app: AppId, node: NodeId, res: &Resource, placeholder: bool) {
        let lanes = self.lanes;
        self.track_limits(app, res, true);
        let a = &mut self.apps[app];
        if placeholder {
            a.placeholder.add_in(res, lanes);
        } else {
            a.allocated.add_in(res, lanes);
        }
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].allocated.add_in(res, lanes);
            q = self.queues[id].parent;
        }
        self.nodes[node].res.add_allocated(res, lanes);
        self.rekey_node(node);
    }

    /// Removes `res` from the allocated totals of an application (its
    /// placeholder total for a placeholder), its queues and a node.
    pub fn remove_usage(&mut self, app: AppId, node: NodeId, res: &Resource, placeholder: bool) {
        let lanes = self.lanes;
        self.track_limits(app, res, false);
        let a = &mut self.apps[app];
        if placeholder {
            a.placeholder.sub_in(res, lanes);
        } else {
            a.allocated.sub_in(res, lanes);
        }
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            self.queues[id].allocated.sub_in(res, lanes);
            q = self.queues[id].parent;
        }
        self.nodes[node].res.sub_allocated(res, lanes);
        self.rekey_node(node);
    }

    /// Adds one to the running application count of a queue and its ancestors.
    pub fn count_running(&mut self, app: AppId, running: bool) {
        if self.apps[app].counted_running == running {
            return;
        }
        self.apps[app].counted_running = running;
        self.track_limit_apps(app, running);
        let mut q = Some(self.apps[app].queue);
        while let Some(id) = q {
            let c = &mut self.queues[id].running_apps;
            *c = if running { *c + 1 } else { c.saturating_sub(1) };
            q = self.queues[id].parent;
        }
    }

    /// True when `res` more fits under the max of the leaf and every ancestor.
    #[inline]
    pub fn fits_headroom(&self, leaf: QueueId, res: &Resource) -> bool {
        self.fits_headroom_up_to(leaf, res, QueueId::MAX)
    }

    /// True when `res` more fits under the max of the leaf and every ancestor
    /// below the root: whether an ask that fails [`Self::fits_headroom`]
    /// waits for the cluster to grow (the root's max is the cluster's size,
    /// which upstream leaves out of the headroom for its autoscaler signal).
    pub fn fits_headroom_below_root(&self, leaf: QueueId, res: &Resource) -> bool {
        self.fits_headroom_up_to(leaf, res, ROOT)
    }

    /// The headroom check of the queues from `leaf` up to, not including,
    /// `stop` (`QueueId::MAX`: all of them).
    #[inline]
    fn fits_headroom_up_to(&self, leaf: QueueId, res: &Resource, stop: QueueId) -> bool {
        let mut q = Some(leaf);
        while let Some(id) = q {
            if id == stop {
                break;
            }
            let queue = &self.queues[id];
            if queue.has_max
                && !queue
                    .allocated
                    .plus_fits_in_lanes(res, &queue.max, self.lanes)
            {
                return false;
            }
            q = queue.parent;
        }
        true
    }

    /// A node's capacity went from `old` to `new` (zero for a node added or
    /// removed): the partition total changes and, as upstream's
    /// `updatePartitionResource` does, the root's max with it.
    pub fn capacity_changed(&mut self, old: &Resource, new: &Resource, now: u64) {
        self.total_capacity.sub_assign(old);
        self.total_capacity.add_assign(new);
        self.shares_stale = true;
        self.set_root_max(now);
    }

    /// Sets the root's max to the total node capacity: the types the nodes
    /// have are limited to their sum, the others stay unlimited (and with no
    /// capacity at all the root is unlimited). Reported as upstream reports
    /// a changed max (`QUEUE`, `SET`, `QUEUE_MAX`).
    pub fn set_root_max(&mut self, now: u64) {
        let max = Resource(std::array::from_fn(|i| match self.total_capacity.0[i] {
            v if v > 0 => v,
            _ => i64::MAX,
        }));
        let root = &mut self.queues[ROOT];
        if root.max == max {
            return;
        }
        root.max = max;
        root.has_max = max != Resource::UNLIMITED;
        let path = root.path.clone();
        self.outbox.queue_event(
            now,
            &path,
            si::event_record::ChangeType::Set,
            si::event_record::ChangeDetail::QueueMax,
            "maximum set to the partition's total node capacity",
        );
    }

    /// True when another application may start running under `leaf`.
    pub fn can_start_app(&self, leaf: QueueId) -> bool {
        let mut q = Some(leaf);
        while let Some(id) = q {
            let queue = &self.queues[id];
            if queue.max_applications > 0 && queue.running_apps >= queue.max_applications {
                return false;
            }
            q = queue.parent;
        }
        true
    }
}
