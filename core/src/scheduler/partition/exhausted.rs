//! The set of exhausted nodes: schedulable nodes where nothing pending fits,
//! in node-key order, filled cheaply in bulk.
//!
//! An allocation run (an offer partition) exhausts node after node, in key
//! order: each lease takes a node's whole remainder. Putting each one into a
//! B-tree as it goes was an eighth of the scheduling thread's work in W4
//! (a search and an insertion a lease). Keys that come in ascending order
//! wait in a sorted `Vec` instead, and go into the tree in one merge when the
//! pass ends or someone needs the set in order; a key that does not follow
//! the last waiting one goes into the tree at once, so the waiting keys stay
//! sorted. The tree and the waiting keys never share a key (a node has one
//! key and is in one place at a time).

use std::collections::BTreeSet;

use crate::scheduler::objects::NodeKey;

/// Exhausted nodes by key.
#[derive(Debug, Default)]
pub struct ExhaustedNodes {
    /// The keys in order, but for those in `waiting`.
    set: BTreeSet<NodeKey>,
    /// Keys added in ascending order since the last merge, none in `set`.
    waiting: Vec<NodeKey>,
}

impl ExhaustedNodes {
    /// Adds `key`, which must not be in the set (the partition keeps each
    /// node in one place: its recorded key says where). No search when it
    /// follows the last waiting key.
    pub fn insert(&mut self, key: NodeKey) {
        debug_assert!(
            !self.contains(&key),
            "a node key in the exhausted set twice"
        );
        if self.waiting.last().is_none_or(|last| *last < key) {
            self.waiting.push(key);
        } else {
            self.set.insert(key);
        }
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: &NodeKey) -> bool {
        match self.waiting.binary_search(key) {
            Ok(at) => {
                self.waiting.remove(at);
                true
            }
            Err(_) => self.set.remove(key),
        }
    }

    /// True when `key` is in the set.
    pub fn contains(&self, key: &NodeKey) -> bool {
        self.set.contains(key) || self.waiting.binary_search(key).is_ok()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.set.len() + self.waiting.len()
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.set.clear();
        self.waiting.clear();
    }

    /// Merges the waiting keys into the tree: one bulk merge when they are
    /// many against the tree (an allocation run's), else one insertion each.
    pub fn settle(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        if self.waiting.len() >= self.set.len() / 16 {
            let mut more: BTreeSet<NodeKey> = self.waiting.drain(..).collect();
            self.set.append(&mut more);
        } else {
            self.set.extend(self.waiting.drain(..));
        }
    }

    /// Every key in order (merged first).
    pub fn ordered(&mut self) -> &BTreeSet<NodeKey> {
        self.settle();
        &self.set
    }

    /// Replaces the set by `keys`.
    pub fn replace(&mut self, keys: BTreeSet<NodeKey>) {
        self.set = keys;
        self.waiting.clear();
    }

    /// Every key in order, either end first. Cheap once settled (the
    /// partition settles the set at the end of every pass and before its
    /// searches); before that, the keys are merged into a list first.
    pub fn iter(&self) -> Iter<'_> {
        if self.waiting.is_empty() {
            return Iter::Settled(self.set.iter());
        }
        let mut all: Vec<NodeKey> = self.set.iter().copied().collect();
        all.extend_from_slice(&self.waiting);
        all.sort_unstable();
        Iter::Merged(all.into_iter())
    }
}

/// The keys of an [`ExhaustedNodes`] in order.
pub enum Iter<'a> {
    /// Straight from the tree.
    Settled(std::collections::btree_set::Iter<'a, NodeKey>),
    /// Tree and waiting keys merged.
    Merged(std::vec::IntoIter<NodeKey>),
}

impl Iterator for Iter<'_> {
    type Item = NodeKey;

    fn next(&mut self) -> Option<NodeKey> {
        match self {
            Iter::Settled(i) => i.next().copied(),
            Iter::Merged(i) => i.next(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<NodeKey> {
        match self {
            Iter::Settled(i) => i.next_back().copied(),
            Iter::Merged(i) => i.next_back(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any mix of insertions, removals and merges leaves the same keys,
        /// in the same order, as a plain ordered set given the same steps.
        #[test]
        fn agrees_with_an_ordered_set(steps in proptest::collection::vec((0u8..4, 0u64..64), 0..200)) {
            let mut ours = ExhaustedNodes::default();
            let mut plain = BTreeSet::new();
            for (op, n) in steps {
                let key = NodeKey::new(n / 8, n as usize);
                match op {
                    0 | 1 => {
                        if plain.insert(key) {
                            ours.insert(key);
                        }
                    }
                    2 => prop_assert_eq!(ours.remove(&key), plain.remove(&key)),
                    _ => ours.settle(),
                }
                prop_assert_eq!(ours.len(), plain.len());
                prop_assert_eq!(ours.contains(&key), plain.contains(&key));
            }
            let want: Vec<NodeKey> = plain.iter().copied().collect();
            let backwards: Vec<NodeKey> = ours.iter().rev().collect();
            prop_assert_eq!(ours.iter().collect::<Vec<_>>(), want.clone());
            prop_assert_eq!(backwards, want.iter().rev().copied().collect::<Vec<_>>());
            let got: Vec<NodeKey> = ours.ordered().iter().copied().collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn keys_in_ascending_order_wait_and_merge_in_one_go() {
        let mut ours = ExhaustedNodes::default();
        for n in 0..100 {
            ours.insert(NodeKey::new(1, n));
        }
        assert_eq!(ours.waiting.len(), 100);
        assert!(ours.set.is_empty());
        // Out of order: straight into the tree.
        ours.insert(NodeKey::new(0, 500));
        assert_eq!(ours.set.len(), 1);
        ours.settle();
        assert!(ours.waiting.is_empty());
        assert_eq!(ours.ordered().first(), Some(&NodeKey::new(0, 500)));
        assert_eq!(ours.len(), 101);
    }
}
