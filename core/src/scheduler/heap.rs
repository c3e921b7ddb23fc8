//! An indexed min-heap of sort keys with an ascending tail: the order of a
//! queue's children and of a leaf's applications.
//!
//! A pass only ever needs the smallest key (the child or application to try
//! next), removes a key (parking, removal) and puts a key back after a change
//! (re-keying after an allocation). A heap does those in O(log n) like an
//! ordered set, but with a few comparisons and swaps in one array instead of a
//! search and a node rebalance in a B-tree: re-keying a leaf among 1,000
//! siblings (W4) costs a quarter of what the `BTreeSet` did.
//!
//! Fair ordering serves keys round-robin: the key just served grows past
//! every other (its share went up last), so the heap's sift carried it from
//! the top to the bottom, ten levels among 1,000 siblings, on every
//! allocation. Keys that arrive above every key of the *tail*, a sorted
//! queue beside the heap, are appended to it instead, and the tail's front
//! leaves it first: both O(1). A key that would not go last goes into the
//! heap; the smallest key is the smaller of the heap's top and the tail's
//! front. A key taken out of the middle of the tail leaves a hole (no
//! moves); holes are dropped when they reach either end, and the tail is
//! compacted when they are more than half of it, so a key's place in the
//! tail is its sequence number less the front's.
//!
//! Every key carries the id of what it orders (unique within one heap), and
//! where each id sits (its heap slot, or its tail sequence number) is kept
//! in a [`Slots`] table outside the heap, so removing a key by value needs
//! no search. An id sits in at most one heap of a table at a time (a queue
//! has one parent, an application one leaf), so one table serves all the
//! heaps of a partition.
//!
//! The smallest key is the same as a `BTreeSet`'s first: keys are unique, so
//! the choice, and with it every scheduling decision, does not depend on the
//! order in which keys went in or on which part holds them.

use std::collections::VecDeque;

/// A sort key that names what it orders.
pub trait HeapKey: Ord + Copy {
    /// The id of the ordered object (unique within one heap).
    fn id(&self) -> usize;
}

/// Marks a slot that holds a tail sequence number, not a heap index.
const IN_TAIL: u64 = 1 << 63;
/// A slot of an id in no heap.
const NOWHERE: u64 = u64::MAX;

/// Where each id sits in its heap: a heap index, `IN_TAIL | sequence`, or
/// `NOWHERE`.
#[derive(Debug, Default, Clone)]
pub struct Slots(Vec<u64>);

impl Slots {
    fn get(&self, id: usize) -> u64 {
        self.0.get(id).copied().unwrap_or(NOWHERE)
    }

    fn set(&mut self, id: usize, slot: u64) {
        if id >= self.0.len() {
            self.0.resize(id + 1, NOWHERE);
        }
        self.0[id] = slot;
    }

    /// Moves an id already in the table (one that sits in a heap) to heap
    /// index `slot`: no growth check, as the sifts move only such ids.
    #[inline]
    fn moved(&mut self, id: usize, slot: usize) {
        if let Some(s) = self.0.get_mut(id) {
            *s = slot as u64;
        }
    }

    fn clear(&mut self, id: usize) {
        if let Some(s) = self.0.get_mut(id) {
            *s = NOWHERE;
        }
    }
}

/// Where a key sits.
#[derive(Clone, Copy)]
enum Place {
    Heap(usize),
    /// Index into the tail.
    Tail(usize),
}

/// The heap and its tail. Iteration order is unspecified;
/// [`KeyHeap::first`] is the smallest key.
#[derive(Debug, Clone)]
pub struct KeyHeap<K> {
    items: Vec<K>,
    /// Ascending keys (`None`: a hole left by a removal; never at either
    /// end).
    tail: VecDeque<Option<K>>,
    /// Sequence number of the tail's front.
    front_seq: u64,
    /// Holes in the tail.
    holes: usize,
}

impl<K> Default for KeyHeap<K> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            tail: VecDeque::new(),
            front_seq: 0,
            holes: 0,
        }
    }
}

impl<K: HeapKey> KeyHeap<K> {
    /// The smallest key.
    pub fn first(&self) -> Option<&K> {
        match (
            self.items.first(),
            self.tail.front().and_then(|k| k.as_ref()),
        ) {
            (Some(h), Some(t)) => Some(if t < h { t } else { h }),
            (h, t) => h.or(t),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.tail.is_empty()
    }

    /// Number of keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len() + self.tail.len() - self.holes
    }

    /// Every key, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.items.iter().chain(self.tail.iter().flatten())
    }

    /// The keys, smallest first (for tests; O(n log n)).
    #[cfg(test)]
    pub fn sorted(&self) -> Vec<K> {
        let mut all: Vec<K> = self.iter().copied().collect();
        all.sort_unstable();
        all
    }

    /// Adds `key`; its id must not be in this heap already.
    pub fn insert(&mut self, key: K, slots: &mut Slots) {
        if self.goes_last(&key) {
            self.push_tail(key, slots);
            return;
        }
        self.items.push(key);
        let at = self.items.len() - 1;
        slots.set(key.id(), at as u64);
        self.sift_up(at, slots);
    }

    /// Removes `key`; false when it is not in the heap.
    pub fn remove(&mut self, key: &K, slots: &mut Slots) -> bool {
        let Some(place) = self.position(key, slots) else {
            return false;
        };
        slots.clear(key.id());
        match place {
            Place::Heap(at) => self.remove_heap_at(at, slots),
            Place::Tail(i) => self.remove_tail_at(i, slots),
        }
        true
    }

    /// Replaces `old` by `new` (same id): appended to the tail when it goes
    /// last there, else re-placed where it is (one sift in the heap, not a
    /// removal and an insertion). Inserts `new` when `old` is not there.
    pub fn replace(&mut self, old: &K, new: K, slots: &mut Slots) {
        debug_assert_eq!(old.id(), new.id());
        let Some(place) = self.position(old, slots) else {
            self.insert(new, slots);
            return;
        };
        match place {
            // The tail's last key that still goes last (the only key of a
            // leaf with one application, after each allocation) changes
            // where it is: its sequence number, and so its slot, stay.
            Place::Tail(i)
                if i + 1 == self.tail.len()
                    && (i == 0 || self.tail[i - 1].as_ref().is_some_and(|p| new > *p)) =>
            {
                self.tail[i] = Some(new);
            }
            // The tail's front goes last (fair order serving round-robin):
            // taken off the front (with the holes it leaves there) and
            // pushed at the back, without looking for it again.
            Place::Tail(0) if self.goes_last(&new) => {
                self.tail.pop_front();
                self.front_seq += 1;
                while let Some(None) = self.tail.front() {
                    self.tail.pop_front();
                    self.front_seq += 1;
                    self.holes -= 1;
                }
                self.push_tail(new, slots);
            }
            Place::Tail(i) => {
                self.remove_tail_at(i, slots);
                self.insert(new, slots);
            }
            Place::Heap(at) if self.goes_last(&new) => {
                self.remove_heap_at(at, slots);
                self.push_tail(new, slots);
            }
            Place::Heap(at) => {
                self.items[at] = new;
                if new < *old {
                    self.sift_up(at, slots);
                } else {
                    self.sift_down(at, slots);
                }
            }
        }
    }

    /// True when `key` may be appended to the tail: it is empty, or `key`
    /// is above its last key.
    #[inline]
    fn goes_last(&self, key: &K) -> bool {
        self.tail
            .back()
            .is_none_or(|b| b.as_ref().is_none_or(|b| key > b))
    }

    fn push_tail(&mut self, key: K, slots: &mut Slots) {
        let seq = self.front_seq + self.tail.len() as u64;
        self.tail.push_back(Some(key));
        slots.set(key.id(), IN_TAIL | seq);
    }

    /// Takes the key at tail index `i` out (its slot already cleared or
    /// about to be set anew).
    fn remove_tail_at(&mut self, i: usize, slots: &mut Slots) {
        if i == 0 {
            self.tail.pop_front();
            self.front_seq += 1;
        } else if i + 1 == self.tail.len() {
            self.tail.pop_back();
        } else {
            self.tail[i] = None;
            self.holes += 1;
        }
        // No hole at either end: the front is the tail's least key, the
        // back its greatest.
        while let Some(None) = self.tail.front() {
            self.tail.pop_front();
            self.front_seq += 1;
            self.holes -= 1;
        }
        while let Some(None) = self.tail.back() {
            self.tail.pop_back();
            self.holes -= 1;
        }
        if self.holes > 16 && self.holes * 2 > self.tail.len() {
            self.compact(slots);
        }
    }

    /// Drops the tail's holes, renumbering the keys from the front's
    /// sequence number.
    fn compact(&mut self, slots: &mut Slots) {
        self.tail.retain(Option::is_some);
        self.holes = 0;
        for (i, k) in self.tail.iter().flatten().enumerate() {
            slots.set(k.id(), IN_TAIL | (self.front_seq + i as u64));
        }
    }

    fn remove_heap_at(&mut self, at: usize, slots: &mut Slots) {
        let last = self.items.len() - 1;
        if at == last {
            self.items.pop();
            return;
        }
        self.items.swap_remove(at);
        slots.set(self.items[at].id(), at as u64);
        // The key moved into the hole may belong above or below it.
        if self.sift_up(at, slots) == at {
            self.sift_down(at, slots);
        }
    }

    /// Where `key` sits, checked against the slot table; a table out of step
    /// (which the partition never lets happen) falls back to a search.
    fn position(&self, key: &K, slots: &Slots) -> Option<Place> {
        let slot = slots.get(key.id());
        if slot != NOWHERE {
            if slot & IN_TAIL != 0 {
                let i = (slot & !IN_TAIL).wrapping_sub(self.front_seq);
                if let Ok(i) = usize::try_from(i)
                    && self.tail.get(i).is_some_and(|k| k.as_ref() == Some(key))
                {
                    return Some(Place::Tail(i));
                }
            } else if let Ok(at) = usize::try_from(slot)
                && self.items.get(at) == Some(key)
            {
                return Some(Place::Heap(at));
            }
        }
        if let Some(at) = self.items.iter().position(|k| k == key) {
            return Some(Place::Heap(at));
        }
        self.tail
            .iter()
            .position(|k| k.as_ref() == Some(key))
            .map(Place::Tail)
    }

    /// Moves the key at `at` up to its place; returns where it ends.
    fn sift_up(&mut self, at: usize, slots: &mut Slots) -> usize {
        let item = self.items[at];
        self.climb(item, at, 0, slots)
    }

    /// Puts `item` in the hole at `hole`, moving it up while it is smaller
    /// than its parent but not above `top`; returns where it ends.
    fn climb(&mut self, item: K, mut hole: usize, top: usize, slots: &mut Slots) -> usize {
        let items = &mut self.items[..];
        while hole > top {
            let parent = (hole - 1) / 2;
            let above = items[parent];
            if item >= above {
                break;
            }
            items[hole] = above;
            slots.moved(above.id(), hole);
            hole = parent;
        }
        items[hole] = item;
        slots.moved(item.id(), hole);
        hole
    }

    /// Moves the key at `at` down to its place. A key that grew usually
    /// belongs near the bottom, so the hole goes all the way down along the
    /// smaller children (one comparison a level) and the key then climbs
    /// back the little it has to, instead of two comparisons at every level.
    fn sift_down(&mut self, at: usize, slots: &mut Slots) {
        let items = &mut self.items[..];
        let len = items.len();
        let item = items[at];
        let mut hole = at;
        loop {
            let left = 2 * hole + 1;
            let Some(&l) = items.get(left) else {
                break;
            };
            let (child, key) = match items.get(left + 1) {
                Some(&r) if r < l => (left + 1, r),
                _ => (left, l),
            };
            items[hole] = key;
            slots.moved(key.id(), hole);
            hole = child;
        }
        debug_assert!(hole < len);
        self.climb(item, hole, at, slots);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// (sort value, id): unique per id, as the partition's keys are.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct Key(u8, usize);

    impl HeapKey for Key {
        fn id(&self) -> usize {
            self.1
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, usize),
        Remove(usize),
        Replace(usize, u8),
        /// Round-robin: the smallest key grows past every other (as a
        /// queue just served under fair ordering).
        Serve,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), 0usize..40).prop_map(|(v, id)| Op::Insert(v, id)),
            (0usize..40).prop_map(Op::Remove),
            (0usize..40, any::<u8>()).prop_map(|(id, v)| Op::Replace(id, v)),
            Just(Op::Serve),
            Just(Op::Serve),
        ]
    }

    proptest! {
        /// The heap behaves as a `BTreeSet` of the same keys: same smallest
        /// key, same contents, after any sequence of operations.
        #[test]
        fn behaves_as_an_ordered_set(ops in prop::collection::vec(op(), 0..300)) {
            let mut heap = KeyHeap::default();
            let mut slots = Slots::default();
            let mut set = BTreeSet::new();
            // What each id's key is now, as the partition's `key_in_*` fields.
            let mut current: Vec<Option<Key>> = vec![None; 40];
            for op in ops {
                match op {
                    Op::Insert(v, id) => {
                        if current[id].is_none() {
                            let k = Key(v, id);
                            heap.insert(k, &mut slots);
                            set.insert(k);
                            current[id] = Some(k);
                        }
                    }
                    Op::Remove(id) => {
                        if let Some(k) = current[id].take() {
                            prop_assert!(heap.remove(&k, &mut slots));
                            set.remove(&k);
                        } else {
                            prop_assert!(!heap.remove(&Key(0, id), &mut slots));
                        }
                    }
                    Op::Serve => {
                        if let Some(&old) = set.first() {
                            let top = set.last().map_or(0, |k| k.0);
                            let new = Key(top.saturating_add(1), old.1);
                            heap.replace(&old, new, &mut slots);
                            set.remove(&old);
                            set.insert(new);
                            current[old.1] = Some(new);
                        }
                    }
                    Op::Replace(id, v) => {
                        let new = Key(v, id);
                        match current[id] {
                            Some(old) => {
                                heap.replace(&old, new, &mut slots);
                                set.remove(&old);
                            }
                            None => heap.insert(new, &mut slots),
                        }
                        set.insert(new);
                        current[id] = Some(new);
                    }
                }
                prop_assert_eq!(heap.first(), set.first());
                prop_assert_eq!(heap.len(), set.len());
                // Every slot points at its key.
                for k in &set {
                    // Found by value (an empty table makes it search), with
                    // the slot that place should have.
                    let (found, want) = match heap.position(k, &Slots::default()) {
                        Some(Place::Heap(at)) => (heap.items[at], at as u64),
                        Some(Place::Tail(i)) => {
                            (heap.tail[i].unwrap(), IN_TAIL | (heap.front_seq + i as u64))
                        }
                        None => panic!("{k:?} is not in the heap"),
                    };
                    prop_assert_eq!(found, *k);
                    prop_assert!(heap.position(k, &slots).is_some());
                    prop_assert_eq!(slots.get(k.id()), want);
                }
                // The tail ascends and has no hole at either end.
                let live: Vec<Key> = heap.tail.iter().flatten().copied().collect();
                prop_assert!(live.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(heap.tail.front().is_none_or(Option::is_some));
                prop_assert!(heap.tail.back().is_none_or(Option::is_some));
            }
            prop_assert_eq!(heap.sorted(), set.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn ascending_keys_go_to_the_tail_and_holes_are_compacted() {
        let mut heap = KeyHeap::default();
        let mut slots = Slots::default();
        for id in 0..100 {
            heap.insert(Key(id as u8, id), &mut slots);
        }
        assert!(heap.items.is_empty(), "ascending keys all went last");
        // Round-robin: the first grows past the rest, 100 times, in O(1).
        for round in 0..100 {
            let old = *heap.first().unwrap();
            assert_eq!(old.1, round);
            heap.replace(&old, Key(200, old.1), &mut slots);
            if round == 0 {
                // The first grown key still goes last (200 > 99).
                assert_eq!(heap.tail.back(), Some(&Some(Key(200, 0))));
            }
        }
        // Holes from the middle: 60 of the 100, more than half: compacted.
        for id in (20..80).rev() {
            assert!(heap.remove(&Key(200, id), &mut slots));
        }
        assert!(heap.holes * 2 <= heap.tail.len());
        assert_eq!(heap.len(), 40);
        for id in (0..20).chain(80..100) {
            assert!(heap.position(&Key(200, id), &slots).is_some());
        }
        // A key that does not go last goes into the heap.
        heap.insert(Key(5, 500), &mut slots);
        assert_eq!(heap.items, [Key(5, 500)]);
        assert_eq!(heap.first(), Some(&Key(5, 500)));
        let mut out = Vec::new();
        while let Some(&k) = heap.first() {
            out.push(k.1);
            assert!(heap.remove(&k, &mut slots));
        }
        let expected: Vec<usize> = std::iter::once(500).chain(0..20).chain(80..100).collect();
        assert_eq!(out, expected);
        assert!(heap.is_empty());
    }

    #[test]
    fn draining_yields_keys_in_order() {
        let mut heap = KeyHeap::default();
        let mut slots = Slots::default();
        for (i, v) in [5u8, 3, 9, 1, 7, 3].into_iter().enumerate() {
            heap.insert(Key(v, i), &mut slots);
        }
        let mut out = Vec::new();
        while let Some(&k) = heap.first() {
            out.push(k);
            assert!(heap.remove(&k, &mut slots));
        }
        assert_eq!(
            out,
            [
                Key(1, 3),
                Key(3, 1),
                Key(3, 5),
                Key(5, 0),
                Key(7, 4),
                Key(9, 2)
            ]
        );
    }

    #[test]
    fn a_growing_last_key_and_a_served_front_keep_their_order() {
        let mut heap = KeyHeap::default();
        let mut slots = Slots::default();
        // One key alone (a leaf with one application): it grows in place.
        let mut k = Key(1, 7);
        heap.insert(k, &mut slots);
        for v in 2..10 {
            let new = Key(v, 7);
            heap.replace(&k, new, &mut slots);
            k = new;
            assert_eq!(heap.first(), Some(&k));
            assert_eq!(heap.len(), 1);
        }
        assert!(heap.remove(&k, &mut slots));
        assert!(heap.is_empty());
        // Three keys served round-robin: the front goes last each time.
        let mut keys = [Key(1, 0), Key(2, 1), Key(3, 2)];
        for key in keys {
            heap.insert(key, &mut slots);
        }
        for turn in 0..9u8 {
            let i = usize::from(turn % 3);
            assert_eq!(heap.first(), Some(&keys[i]));
            let new = Key(4 + turn, i);
            heap.replace(&keys[i], new, &mut slots);
            keys[i] = new;
        }
        // A hole behind the last key: growing the last key stays correct.
        assert!(heap.remove(&keys[1], &mut slots));
        let grown = Key(100, 2);
        heap.replace(&keys[2], grown, &mut slots);
        keys[2] = grown;
        let mut out = Vec::new();
        while let Some(&k) = heap.first() {
            out.push(k);
            assert!(heap.remove(&k, &mut slots));
        }
        assert_eq!(out, [keys[0], keys[2]]);
    }
}
