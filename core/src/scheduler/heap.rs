//! An indexed binary min-heap of sort keys: the order of a queue's children and
//! of a leaf's applications.
//!
//! A pass only ever needs the smallest key (the child or application to try
//! next), removes a key (parking, removal) and puts a key back after a change
//! (re-keying after an allocation). A heap does those in O(log n) like an
//! ordered set, but with a few comparisons and swaps in one array instead of a
//! search and a node rebalance in a B-tree: re-keying a leaf among 1,000
//! siblings (W4) costs a quarter of what the `BTreeSet` did.
//!
//! Every key carries the id of what it orders (unique within one heap), and
//! where each id sits in its heap is kept in a [`Slots`] table outside the
//! heap, so removing a key by value needs no search. An id sits in at most one
//! heap of a table at a time (a queue has one parent, an application one
//! leaf), so one table serves all the heaps of a partition.
//!
//! The smallest key is the same as a `BTreeSet`'s first: keys are unique, so
//! the choice, and with it every scheduling decision, does not depend on the
//! order in which keys went in.

/// A sort key that names what it orders.
pub trait HeapKey: Ord + Copy {
    /// The id of the ordered object (unique within one heap).
    fn id(&self) -> usize;
}

/// Where each id sits in its heap (`u32::MAX`: in none).
#[derive(Debug, Default, Clone)]
pub struct Slots(Vec<u32>);

impl Slots {
    fn get(&self, id: usize) -> Option<usize> {
        self.0
            .get(id)
            .copied()
            .filter(|&s| s != u32::MAX)
            .map(|s| s as usize)
    }

    fn set(&mut self, id: usize, slot: usize) {
        if id >= self.0.len() {
            self.0.resize(id + 1, u32::MAX);
        }
        self.0[id] = u32::try_from(slot).unwrap_or(u32::MAX);
    }

    /// Moves an id already in the table (one that sits in a heap) to
    /// `slot`: no growth check, as the sifts move only such ids.
    #[inline]
    fn moved(&mut self, id: usize, slot: usize) {
        debug_assert!(u32::try_from(slot).is_ok_and(|s| s != u32::MAX));
        if let Some(s) = self.0.get_mut(id) {
            *s = slot as u32;
        }
    }

    fn clear(&mut self, id: usize) {
        if let Some(s) = self.0.get_mut(id) {
            *s = u32::MAX;
        }
    }
}

/// The heap. Iteration order is unspecified; [`KeyHeap::first`] is the
/// smallest key.
#[derive(Debug, Clone)]
pub struct KeyHeap<K> {
    items: Vec<K>,
}

impl<K> Default for KeyHeap<K> {
    fn default() -> Self {
        Self { items: Vec::new() }
    }
}

impl<K: HeapKey> KeyHeap<K> {
    /// The smallest key.
    pub fn first(&self) -> Option<&K> {
        self.items.first()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Every key, in no particular order.
    pub fn iter(&self) -> std::slice::Iter<'_, K> {
        self.items.iter()
    }

    /// The keys, smallest first (for tests; O(n log n)).
    #[cfg(test)]
    pub fn sorted(&self) -> Vec<K> {
        let mut all = self.items.clone();
        all.sort_unstable();
        all
    }

    /// Adds `key`; its id must not be in this heap already.
    pub fn insert(&mut self, key: K, slots: &mut Slots) {
        self.items.push(key);
        let at = self.items.len() - 1;
        slots.set(key.id(), at);
        self.sift_up(at, slots);
    }

    /// Removes `key`; false when it is not in the heap.
    pub fn remove(&mut self, key: &K, slots: &mut Slots) -> bool {
        let Some(at) = self.position(key, slots) else {
            return false;
        };
        slots.clear(key.id());
        let last = self.items.len() - 1;
        if at == last {
            self.items.pop();
            return true;
        }
        self.items.swap_remove(at);
        slots.set(self.items[at].id(), at);
        // The key moved into the hole may belong above or below it.
        if self.sift_up(at, slots) == at {
            self.sift_down(at, slots);
        }
        true
    }

    /// Replaces `old` by `new` (same id) in place: one sift instead of a
    /// removal and an insertion. Inserts `new` when `old` is not there.
    pub fn replace(&mut self, old: &K, new: K, slots: &mut Slots) {
        debug_assert_eq!(old.id(), new.id());
        let Some(at) = self.position(old, slots) else {
            self.insert(new, slots);
            return;
        };
        self.items[at] = new;
        // A heap of one (a leaf with one application, each framework's
        // role in W4) has nowhere to move the key.
        if self.items.len() == 1 {
            return;
        }
        if new < *old {
            self.sift_up(at, slots);
        } else {
            self.sift_down(at, slots);
        }
    }

    /// Where `key` sits, checked against the slot table; a table out of step
    /// (which the partition never lets happen) falls back to a search.
    fn position(&self, key: &K, slots: &Slots) -> Option<usize> {
        match slots.get(key.id()) {
            Some(at) if self.items.get(at) == Some(key) => Some(at),
            _ => self.items.iter().position(|k| k == key),
        }
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
    /// belongs near the bottom (a queue that was just served goes behind its
    /// siblings), so the hole goes all the way down along the smaller
    /// children (one comparison a level) and the key then climbs back the
    /// little it has to, instead of two comparisons at every level.
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
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), 0usize..40).prop_map(|(v, id)| Op::Insert(v, id)),
            (0usize..40).prop_map(Op::Remove),
            (0usize..40, any::<u8>()).prop_map(|(id, v)| Op::Replace(id, v)),
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
                    prop_assert_eq!(heap.items[slots.get(k.id()).unwrap()], *k);
                }
            }
            prop_assert_eq!(heap.sorted(), set.into_iter().collect::<Vec<_>>());
        }
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
}
