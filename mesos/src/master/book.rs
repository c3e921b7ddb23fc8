//! A book of records kept by id and by number: agents and applications.
//!
//! The core hands back, on each lease, the number the master gave the node
//! and the application when it registered them (`unisched_shim_api::
//! RM_HANDLE`). A run leases every agent once, so finding each agent by its
//! id string (hash the id, probe, compare the key, each on a line of memory
//! nobody touched since the agent registered) was a good part of what an
//! offer waited for. Records sit in slots; a handle is the slot and the
//! slot's generation, so a handle of a record that left never finds its
//! successor in the slot. Ids still find records through one map.

use std::ops::Index;

use super::state::FastMap;

/// One slot: its generation (counted up each time a record takes it) and
/// its record.
struct Slot<T> {
    generation: u32,
    record: Option<T>,
}

/// Records by id and by handle.
pub struct Book<T> {
    slots: Vec<Slot<T>>,
    vacant: Vec<u32>,
    by_id: FastMap<String, u64>,
}

impl<T> Default for Book<T> {
    fn default() -> Self {
        Book {
            slots: Vec::new(),
            vacant: Vec::new(),
            by_id: FastMap::default(),
        }
    }
}

fn handle(slot: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(slot)
}

impl<T> Book<T> {
    /// Adds (or replaces) the record of `id`; returns its handle (never 0).
    pub fn insert(&mut self, id: String, record: T) -> u64 {
        self.remove(&id);
        let slot = match self.vacant.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    record: None,
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 records")
            }
        };
        let s = &mut self.slots[slot as usize];
        // Generations start at 1, so no handle is 0 (the core's "none").
        s.generation = s.generation.wrapping_add(1).max(1);
        s.record = Some(record);
        let h = handle(slot, s.generation);
        self.by_id.insert(id, h);
        h
    }

    /// Removes the record of `id`.
    pub fn remove(&mut self, id: &str) -> Option<T> {
        let h = self.by_id.remove(id)?;
        let slot = (h & u64::from(u32::MAX)) as u32;
        let record = self.slots[slot as usize].record.take();
        self.vacant.push(slot);
        record
    }

    /// The handle of `id`'s record.
    pub fn handle(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }

    /// The record a handle names, if it is still in the book.
    pub fn by_handle(&self, h: u64) -> Option<&T> {
        let s = self.slots.get((h & u64::from(u32::MAX)) as usize)?;
        (u64::from(s.generation) == h >> 32)
            .then_some(s.record.as_ref())
            .flatten()
    }

    /// The record a handle names, to change.
    pub fn by_handle_mut(&mut self, h: u64) -> Option<&mut T> {
        let s = self.slots.get_mut((h & u64::from(u32::MAX)) as usize)?;
        (u64::from(s.generation) == h >> 32)
            .then_some(s.record.as_mut())
            .flatten()
    }

    /// The record of `id`.
    pub fn get(&self, id: &str) -> Option<&T> {
        self.by_handle(*self.by_id.get(id)?)
    }

    /// The record of `id`, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut T> {
        let h = *self.by_id.get(id)?;
        self.by_handle_mut(h)
    }

    /// True when `id` has a record.
    pub fn contains_key(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The ids, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.by_id.keys()
    }

    /// The records, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.record.as_ref())
    }
}

impl<T> Index<&str> for Book<T> {
    type Output = T;

    fn index(&self, id: &str) -> &T {
        self.get(id).expect("a record of that id")
    }
}

impl<T> Index<&String> for Book<T> {
    type Output = T;

    fn index(&self, id: &String) -> &T {
        &self[id.as_str()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_finds_its_record_and_never_a_later_one_in_its_slot() {
        let mut book: Book<&str> = Book::default();
        let a = book.insert("a".into(), "first a");
        let b = book.insert("b".into(), "b");
        assert_ne!(a, 0);
        assert_eq!(book.by_handle(a), Some(&"first a"));
        assert_eq!(book["b"], "b");
        assert_eq!(book.remove("a"), Some("first a"));
        assert_eq!(book.by_handle(a), None);
        // The slot is taken again, under a new generation.
        let c = book.insert("c".into(), "c");
        assert_eq!(c & u64::from(u32::MAX), a & u64::from(u32::MAX));
        assert_ne!(c, a);
        assert_eq!(book.by_handle(a), None);
        assert_eq!(book.by_handle(c), Some(&"c"));
        // Replacing a record gives it a new handle.
        let b2 = book.insert("b".into(), "b again");
        assert_eq!(book.by_handle(b), None);
        assert_eq!(book.get("b"), Some(&"b again"));
        assert_eq!(book.handle("b"), Some(b2));
        *book.by_handle_mut(b2).expect("there") = "b changed";
        assert_eq!(book["b"], "b changed");
        assert_eq!(book.len(), 2);
        let mut all: Vec<&str> = book.values().copied().collect();
        all.sort_unstable();
        assert_eq!(all, ["b changed", "c"]);
        assert_eq!(book.by_handle(0), None);
        assert_eq!(book.by_handle(u64::MAX), None);
    }
}
