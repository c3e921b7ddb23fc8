//! The queue cleaner: removes queues that were dropped from the configuration
//! (draining) or created by placement (dynamic) once they hold nothing, in
//! rounds every `queue_cleanup_interval` (upstream's partition manager,
//! `cleanRoot`, every 10 s). A round walks the tree bottom up, so a parent
//! whose last children go in it goes in the same round.

use si::event_record::{ChangeDetail, ChangeType};
use unisched_si as si;

use super::super::objects::*;
use super::super::partition::{Partition, ROOT};

impl Partition {
    /// Runs a cleaner round when one is due.
    pub(super) fn clean_queues_when_due(&mut self, now: u64) {
        if self.next_cleanup == 0 {
            // The first round comes one interval after the partition started.
            self.next_cleanup = now.saturating_add(self.queue_cleanup_interval);
            return;
        }
        if now < self.next_cleanup {
            return;
        }
        self.next_cleanup = now.saturating_add(self.queue_cleanup_interval);
        if std::mem::take(&mut self.cleanup_wanted) {
            self.clean_queues(ROOT, now);
            self.cleanup_wanted = self
                .queues
                .iter()
                .any(|q| q.parent.is_some() && (q.dynamic || q.state == QueueState::Draining));
        }
    }

    /// When the next cleaner round is due, while some queue may need one.
    pub(super) fn next_queue_cleanup(&self) -> Option<u64> {
        (self.cleanup_wanted && self.next_cleanup != 0).then_some(self.next_cleanup)
    }

    /// Removes the empty draining and dynamic queues at and below `q`,
    /// children first.
    fn clean_queues(&mut self, q: QueueId, now: u64) {
        for child in self.queues[q].children.clone() {
            self.clean_queues(child, now);
        }
        let queue = &self.queues[q];
        let removable = queue.dynamic || queue.state == QueueState::Draining;
        let empty = if queue.is_parent {
            queue.children.is_empty()
        } else {
            queue.apps.is_empty()
        };
        if q != ROOT && removable && empty {
            self.remove_queue(q, now);
        }
    }

    /// Unlinks an empty queue from its parent and the path index; its arena
    /// slot stays as a tombstone, since ids are never reused. Reported as
    /// upstream reports it (`QUEUE`, `REMOVE`, `QUEUE_DYNAMIC` for a dynamic
    /// queue, `DETAILS_NONE` for a configured one).
    fn remove_queue(&mut self, q: QueueId, now: u64) {
        let Some(parent) = self.queues[q].parent else {
            return;
        };
        if let Some(k) = self.queues[q].key_in_parent.take() {
            self.queues[parent]
                .child_order
                .remove(&k, &mut self.queue_slots);
        }
        self.queues[parent].children.retain(|&c| c != q);
        let queue = &mut self.queues[q];
        queue.parent = None;
        let (path, dynamic) = (queue.path.clone(), queue.dynamic);
        self.queue_by_path.remove(&path);
        let (detail, message) = if dynamic {
            (ChangeDetail::QueueDynamic, "empty dynamic queue removed")
        } else {
            (ChangeDetail::DetailsNone, "empty draining queue removed")
        };
        self.outbox
            .queue_event(now, &path, ChangeType::Remove, detail, message);
    }
}
