//! Outstanding offers, by number.
//!
//! An offer's id is the master's id, `-O` and a number counted up from 0
//! (`OfferBook::write_id`). The books key offers by that number: an allocation
//! run makes thousands of offers, and keying them by their id strings meant,
//! per offer, a string kept on the heap, shared by three maps, each hashing
//! it (and comparing it on every probe that met another key). A number
//! hashes in a few instructions and needs no copy. An id that comes back from
//! a framework finds its offer through its number; an id that is not of this
//! master's form (another prefix, digits with a sign or a leading zero) finds
//! nothing, as an unknown id would.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::state::Offer;

/// Hashes an offer number to itself, its low 7 bits copied to the top:
/// numbers are counted up, so a run's new offers land in consecutive
/// buckets (written in order, as a vector would be) instead of ten thousand
/// scattered ones, each a cache miss; hashbrown's 7-bit tag, taken from the
/// top, still tells neighbours apart. The numbers are the master's own (a
/// framework's id only ever looks one up), so nobody can choose colliding
/// ones.
#[derive(Default)]
pub(super) struct NumberHasher(u64);

impl Hasher for NumberHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not reached for `u64` keys (`write_u64`); correct for anything.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n | (n << 57);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map or set keyed by offer number ([`NumberHasher`]).
pub(super) type ByNumber = BuildHasherDefault<NumberHasher>;

/// Outstanding offers by number, and the ids they go by.
pub struct OfferBook {
    /// `<master id>-O`: every id of this master starts so.
    prefix: String,
    by_number: HashMap<u64, Offer, ByNumber>,
}

impl OfferBook {
    /// An empty book for the offers of master `master_id`.
    pub fn new(master_id: &str) -> Self {
        OfferBook {
            prefix: format!("{master_id}-O"),
            by_number: HashMap::default(),
        }
    }

    /// The id of offer `number`.
    pub fn id_of(&self, number: u64) -> String {
        let mut id = String::new();
        self.write_id(number, &mut id);
        id
    }

    /// Writes the id of offer `number` into `out` (replacing what it held),
    /// so that a run making thousands of ids reuses one buffer.
    pub fn write_id(&self, number: u64, out: &mut String) {
        out.clear();
        out.push_str(&self.prefix);
        out.push_str(itoa::Buffer::new().format(number));
    }

    /// The number in an offer id of this master, if it is one.
    pub fn number(&self, id: &str) -> Option<u64> {
        let digits = id.strip_prefix(&self.prefix)?;
        // Only the form `write_id` gives: digits, no sign, no leading zero.
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        canonical.then(|| digits.parse().ok()).flatten()
    }

    /// The offer of an id.
    pub fn get(&self, id: &str) -> Option<&Offer> {
        self.by_number.get(&self.number(id)?)
    }

    /// The offer of a number.
    pub fn get_number(&self, number: u64) -> Option<&Offer> {
        self.by_number.get(&number)
    }

    /// The offer of a number, to change.
    pub fn get_number_mut(&mut self, number: u64) -> Option<&mut Offer> {
        self.by_number.get_mut(&number)
    }

    /// Adds an offer under its number. Inlined where it is called (once an
    /// offer of a run): out of line, the record is copied once more on the
    /// way in, as a build whose codegen units fell differently showed.
    #[inline]
    pub fn insert(&mut self, offer: Offer) {
        self.by_number.insert(offer.number, offer);
    }

    /// Takes an offer out.
    pub fn remove(&mut self, number: u64) -> Option<Offer> {
        self.by_number.remove(&number)
    }

    /// Makes room for `more` offers.
    pub fn reserve(&mut self, more: usize) {
        self.by_number.reserve(more);
    }

    /// How many offers are outstanding.
    pub fn len(&self) -> usize {
        self.by_number.len()
    }

    /// The offers, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Offer> {
        self.by_number.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_numbers_hash_to_consecutive_buckets_with_varied_tags() {
        use std::hash::BuildHasher;
        let hash = |n: u64| ByNumber::default().hash_one(n);
        for n in [0u64, 1, 127, 128, 10_000, (1 << 57) - 1] {
            // The bucket index is the number's low bits, the tag (top 7
            // bits) its lowest 7.
            assert_eq!(hash(n) & ((1 << 57) - 1), n, "{n}");
            assert_eq!(hash(n) >> 57, n & 0x7f, "{n}");
        }
    }

    #[test]
    fn ids_round_trip_and_foreign_forms_find_nothing() {
        let book = OfferBook::new("m-1");
        for n in [0, 7, 10, 12_345, u64::MAX] {
            let id = book.id_of(n);
            assert_eq!(id, format!("m-1-O{n}"));
            assert_eq!(book.number(&id), Some(n));
        }
        let mut buf = String::from("left over");
        book.write_id(42, &mut buf);
        assert_eq!(buf, "m-1-O42");
        for foreign in [
            "m-1-O",
            "m-1-O07",
            "m-1-O+7",
            "m-1-O-7",
            "m-1-O7x",
            "m-2-O7",
            "m-1-7",
            "7",
            "",
            // One past u64::MAX.
            "m-1-O18446744073709551616",
        ] {
            assert_eq!(book.number(foreign), None, "{foreign}");
        }
    }
}
