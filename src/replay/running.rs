//! The simulated RM's running allocations: records in numbered slots, found
//! by slot where the RM itself ends a task and by allocation id where the
//! core names one.
//!
//! Why slots: when a step's tasks end, the replay thread takes each record
//! by the slot its end-time entry names, without a lookup by id. The id map
//! was the step's most expensive part in wall time (each lookup a cache miss
//! on entries the callback thread had just written on the other core), and
//! the step's releases are on the replay's critical path: the core waits
//! for them. The map entry of a task the RM ended stays until the core's
//! report of that release arrives on the callback thread, which drops it.
//!
//! Each occupant of a slot has a sequence number of its own, so an entry
//! that outlived its task (a map entry waiting for the core's report, an
//! end-time entry of a preempted task) never reaches the slot's next
//! occupant.

use super::rm::HashMap;

/// A running allocation.
#[derive(Debug, Clone)]
pub struct Running {
    /// Trace record of its ask.
    pub record: u32,
    /// Allocation key.
    pub key: String,
    /// Node (index into the trace's nodes).
    pub node: u32,
    /// Leaf queue (index), or `UNPLACED`.
    pub queue: u32,
}

/// Where a running allocation is: its slot and the occupant's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Handle {
    slot: u32,
    seq: u64,
}

/// The task in a slot.
#[derive(Debug)]
struct Occupant {
    seq: u64,
    id: String,
    run: Running,
}

/// The running allocations.
#[derive(Debug, Default)]
pub struct RunningSet {
    /// `None` while free.
    slots: Vec<Option<Occupant>>,
    free: Vec<u32>,
    by_id: HashMap<String, Handle>,
    next_seq: u64,
    live: usize,
}

impl RunningSet {
    /// Allocations running.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Adds allocation `id`; a record under the same id is replaced.
    pub fn insert(&mut self, id: String, run: Running) -> Handle {
        self.next_seq += 1;
        let occupant = Some(Occupant {
            seq: self.next_seq,
            id: id.clone(),
            run,
        });
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = occupant;
                s
            }
            None => {
                self.slots.push(occupant);
                (self.slots.len() - 1) as u32
            }
        };
        let handle = Handle {
            slot,
            seq: self.next_seq,
        };
        self.live += 1;
        if let Some(old) = self.by_id.insert(id, handle) {
            self.take(old);
        }
        handle
    }

    /// The occupant of `handle`'s slot, if it is still that allocation.
    fn occupant(&mut self, handle: Handle) -> Option<&mut Option<Occupant>> {
        self.slots
            .get_mut(handle.slot as usize)
            .filter(|o| o.as_ref().is_some_and(|o| o.seq == handle.seq))
    }

    /// True while the allocation of `handle` runs.
    pub fn contains(&self, handle: Handle) -> bool {
        self.slots
            .get(handle.slot as usize)
            .and_then(Option::as_ref)
            .is_some_and(|o| o.seq == handle.seq)
    }

    /// Ends the allocation of `handle` (the RM releases it): its id and
    /// record, or `None` when it had ended already. Its id stays known until
    /// [`Self::remove_id`] (the core's report of the release).
    pub fn take(&mut self, handle: Handle) -> Option<(String, Running)> {
        let occupant = self.occupant(handle)?.take()?;
        self.free.push(handle.slot);
        self.live -= 1;
        Some((occupant.id, occupant.run))
    }

    /// Forgets allocation `id`: its record when it was still running.
    pub fn remove_id(&mut self, id: &str) -> Option<Running> {
        let handle = self.by_id.remove(id)?;
        self.take(handle).map(|(_, run)| run)
    }

    /// The record of running allocation `id`.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Running> {
        let handle = *self.by_id.get(id)?;
        Some(&mut self.occupant(handle)?.as_mut()?.run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(record: u32) -> Running {
        Running {
            record,
            key: record.to_string(),
            node: 0,
            queue: 0,
        }
    }

    #[test]
    fn a_task_the_rm_ended_is_gone_for_the_core_and_its_slot_reused_safely() {
        let mut set = RunningSet::default();
        let a = set.insert("a".into(), run(1));
        let (id, r) = set.take(a).unwrap();
        assert_eq!((id.as_str(), r.record, set.len()), ("a", 1, 0));
        // The slot goes to the next allocation; the old handle and the old
        // id (whose release report is still to come) do not reach it.
        let b = set.insert("b".into(), run(2));
        assert!(!set.contains(a) && set.contains(b));
        assert!(set.take(a).is_none());
        assert!(set.get_mut("a").is_none());
        assert!(set.remove_id("a").is_none());
        assert_eq!(set.get_mut("b").unwrap().record, 2);
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn a_task_the_core_ended_is_skipped_when_its_end_comes_up() {
        let mut set = RunningSet::default();
        let a = set.insert("a".into(), run(1));
        assert_eq!(set.remove_id("a").unwrap().record, 1);
        assert!(set.take(a).is_none());
        assert_eq!(set.len(), 0);
        // An id sent again replaces its record.
        set.insert("c".into(), run(3));
        let c2 = set.insert("c".into(), run(4));
        assert_eq!(set.len(), 1);
        assert_eq!(set.take(c2).unwrap().1.record, 4);
    }
}
