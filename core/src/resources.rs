//! Resources: interned resource names and dense fixed-width quantity vectors.
//!
//! The wire carries sparse maps (`name -> Quantity`). Inside the core every
//! resource is a [`Resource`]: one `i64` per interned name, so a fit check is a
//! handful of comparisons and no allocation. Names are interned per scheduler
//! by [`ResourceNames`] (no global table); conversion happens only at the edge.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use unisched_si as si;

/// Most distinct resource names one scheduler can track. Kubernetes clusters use
/// a handful (vcore, memory, pods, ephemeral-storage, a few devices).
pub const MAX_RESOURCE_TYPES: usize = 16;

/// Largest quantity accepted from an RM or a configuration. Leaves room for sums
/// of many allocations without overflowing `i64`.
pub const MAX_QUANTITY: i64 = 1 << 53;

/// Index of `memory`, interned first by every registry.
pub const MEMORY: usize = 0;
/// Index of `vcore`, interned second by every registry.
pub const VCORE: usize = 1;

/// Why a resource from outside could not be taken in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// A quantity below zero.
    #[error("resource {name:?} has a negative quantity {value}")]
    Negative {
        /// Resource name.
        name: String,
        /// The quantity given.
        value: i64,
    },
    /// A quantity above [`MAX_QUANTITY`].
    #[error("resource {name:?} quantity {value} is larger than the limit {MAX_QUANTITY}")]
    TooLarge {
        /// Resource name.
        name: String,
        /// The quantity given.
        value: i64,
    },
    /// More distinct names than [`MAX_RESOURCE_TYPES`].
    #[error("resource {name:?} would be distinct resource type number {}, above the limit of {MAX_RESOURCE_TYPES}", MAX_RESOURCE_TYPES + 1)]
    TooManyTypes {
        /// The name that did not fit.
        name: String,
    },
    /// An empty resource name.
    #[error("resource names must not be empty")]
    EmptyName,
}

/// The interned resource names of one scheduler, shared by the API threads
/// (which convert incoming requests) and the scheduling thread.
#[derive(Debug)]
pub struct ResourceNames {
    inner: RwLock<NamesInner>,
}

#[derive(Debug, Default)]
struct NamesInner {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, usize, ahash::RandomState>,
}

impl Default for ResourceNames {
    fn default() -> Self {
        Self::new()
    }
}

impl ResourceNames {
    /// A registry holding `memory` and `vcore` at [`MEMORY`] and [`VCORE`].
    pub fn new() -> Self {
        let mut inner = NamesInner::default();
        for (i, name) in [(MEMORY, si::MEMORY), (VCORE, si::VCORE)] {
            debug_assert_eq!(inner.names.len(), i);
            let name: Arc<str> = Arc::from(name);
            inner.names.push(name.clone());
            inner.index.insert(name, i);
        }
        Self {
            inner: RwLock::new(inner),
        }
    }

    /// The index of `name`, interning it when new.
    pub fn intern(&self, name: &str) -> Result<usize, ResourceError> {
        if name.is_empty() {
            return Err(ResourceError::EmptyName);
        }
        if let Some(i) = self.lookup(name) {
            return Ok(i);
        }
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(&i) = inner.index.get(name) {
            return Ok(i);
        }
        if inner.names.len() >= MAX_RESOURCE_TYPES {
            return Err(ResourceError::TooManyTypes {
                name: name.to_string(),
            });
        }
        let name: Arc<str> = Arc::from(name);
        let i = inner.names.len();
        inner.names.push(name.clone());
        inner.index.insert(name, i);
        Ok(i)
    }

    /// The index of `name` if it is interned.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        // Nearly every resource map names these two, which sit at fixed
        // indices from the start: no lock, no hashing.
        match name {
            si::MEMORY => return Some(MEMORY),
            si::VCORE => return Some(VCORE),
            _ => {}
        }
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.index.get(name).copied()
    }

    /// All names, by index.
    pub fn names(&self) -> Vec<Arc<str>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.names.clone()
    }

    /// Number of interned names.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .names
            .len()
    }

    /// The lanes a value vector built from these names can use so far.
    pub fn lanes(&self) -> Lanes {
        Lanes::new(self.len())
    }

    /// Always false: `memory` and `vcore` are interned at creation.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Converts a wire resource. Negative or oversized quantities are errors.
    pub fn from_si(&self, resource: Option<&si::Resource>) -> Result<Resource, ResourceError> {
        let mut out = Resource::ZERO;
        if let Some(resource) = resource {
            for (name, quantity) in &resource.resources {
                out.0[self.intern(name)?] = check_quantity(name, quantity.value)?;
            }
        }
        Ok(out)
    }

    /// Converts a configuration map (already in core units).
    pub fn from_map<'a>(
        &self,
        map: impl IntoIterator<Item = (&'a String, &'a i64)>,
    ) -> Result<Resource, ResourceError> {
        let mut out = Resource::ZERO;
        for (name, &value) in map {
            out.0[self.intern(name)?] = check_quantity(name, value)?;
        }
        Ok(out)
    }

    /// A maximum from a configuration map: types left out are unlimited.
    pub fn limit_from_map<'a>(
        &self,
        map: impl IntoIterator<Item = (&'a String, &'a i64)>,
    ) -> Result<Resource, ResourceError> {
        let mut out = Resource::UNLIMITED;
        for (name, &value) in map {
            out.0[self.intern(name)?] = check_quantity(name, value)?;
        }
        Ok(out)
    }
}

fn check_quantity(name: &str, value: i64) -> Result<i64, ResourceError> {
    if value < 0 {
        Err(ResourceError::Negative {
            name: name.to_string(),
            value,
        })
    } else if value > MAX_QUANTITY {
        Err(ResourceError::TooLarge {
            name: name.to_string(),
            value,
        })
    } else {
        Ok(value)
    }
}

/// Resource names as the scheduling thread keeps them: a plain copy of the
/// registry, refreshed when the registry grows, for converting results back to
/// the wire without taking a lock per allocation.
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    names: Vec<String>,
}

impl NameTable {
    /// Brings the copy up to date with `registry`.
    pub fn refresh(&mut self, registry: &ResourceNames) {
        if self.names.len() != registry.len() {
            self.names = registry.names().iter().map(|n| n.to_string()).collect();
        }
    }

    /// The name at `index`.
    pub fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("", String::as_str)
    }

    /// The wire form of `resource` (types with zero quantity left out).
    pub fn to_si(&self, resource: &Resource) -> si::Resource {
        let mut resources = HashMap::with_capacity(4);
        for (i, &v) in resource.0.iter().enumerate() {
            if v != 0 && v != i64::MAX && i < self.names.len() {
                resources.insert(self.names[i].clone(), si::Quantity { value: v });
            }
        }
        si::Resource { resources }
    }

    /// The reader form of `resource` (zero and unlimited types left out).
    pub fn to_map(&self, resource: &Resource) -> BTreeMap<String, i64> {
        resource
            .0
            .iter()
            .enumerate()
            .filter(|&(i, &v)| v != 0 && v != i64::MAX && i < self.names.len())
            .map(|(i, &v)| (self.names[i].clone(), v))
            .collect()
    }
}

/// How many leading lanes of a [`Resource`] are in use: the number of names
/// interned so far. Names only grow, and conversion writes only interned
/// lanes, so past this count every value vector (asks, allocations, usage,
/// capacities) holds 0 there. An addition or subtraction of a value vector,
/// a fit of a value vector and a dominant share therefore give the same result
/// over the used lanes as over all of them; the hot path (usage up the tree,
/// fit checks, re-keys) runs over two or three lanes instead of sixteen.
///
/// Only for those operations: a min, or anything whose other operand is a
/// limit (`i64::MAX` in unused lanes), must still run over every lane.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Lanes(usize);

impl Lanes {
    /// Every lane.
    pub const ALL: Lanes = Lanes(MAX_RESOURCE_TYPES);

    /// The first `n` lanes (at most all of them).
    pub fn new(n: usize) -> Self {
        Self(n.min(MAX_RESOURCE_TYPES))
    }

    /// The number of lanes.
    pub fn get(self) -> usize {
        self.0
    }
}

/// A dense resource vector: one quantity per interned name. Used for capacities,
/// asks and usage (where a missing type is 0) and for maximums (where a missing
/// type is `i64::MAX`, unlimited).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Resource(pub [i64; MAX_RESOURCE_TYPES]);

impl Default for Resource {
    fn default() -> Self {
        Self::ZERO
    }
}

impl Resource {
    /// Nothing.
    pub const ZERO: Self = Self([0; MAX_RESOURCE_TYPES]);
    /// No limit in any type.
    pub const UNLIMITED: Self = Self([i64::MAX; MAX_RESOURCE_TYPES]);

    /// A vector from (index, quantity) pairs; other types 0.
    pub fn from_pairs(pairs: &[(usize, i64)]) -> Self {
        let mut out = Self::ZERO;
        for &(i, v) in pairs {
            out.0[i] = v;
        }
        out
    }

    /// The quantity of type `index`.
    pub fn get(&self, index: usize) -> i64 {
        self.0[index]
    }

    /// True when every quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&v| v == 0)
    }

    /// True when some quantity is below zero.
    pub fn any_negative(&self) -> bool {
        self.0.iter().any(|&v| v < 0)
    }

    /// True when `self` fits in `available`: every type at most the available amount.
    #[inline]
    pub fn fits_in(&self, available: &Resource) -> bool {
        self.0.iter().zip(available.0.iter()).all(|(a, b)| a <= b)
    }

    /// True when `self` is at least `other` in every type (so `self` cannot fit
    /// wherever `other` did not).
    #[inline]
    pub fn dominates(&self, other: &Resource) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a >= b)
    }

    /// Checked sum: `None` when any type would overflow.
    pub fn checked_add(&self, other: &Resource) -> Option<Resource> {
        let mut out = Self::ZERO;
        for i in 0..MAX_RESOURCE_TYPES {
            out.0[i] = self.0[i].checked_add(other.0[i])?;
        }
        Some(out)
    }

    /// Checked difference: `None` when any type would overflow.
    pub fn checked_sub(&self, other: &Resource) -> Option<Resource> {
        let mut out = Self::ZERO;
        for i in 0..MAX_RESOURCE_TYPES {
            out.0[i] = self.0[i].checked_sub(other.0[i])?;
        }
        Some(out)
    }

    /// Adds `other` in place, saturating (unlimited stays unlimited).
    #[inline]
    pub fn add_assign(&mut self, other: &Resource) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// Subtracts `other` in place, saturating.
    #[inline]
    pub fn sub_assign(&mut self, other: &Resource) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = a.saturating_sub(*b);
        }
    }

    /// [`Resource::add_assign`] over the used `lanes` only: exact when `other`
    /// is a value vector (see [`Lanes`]).
    #[inline]
    pub fn add_in(&mut self, other: &Resource, lanes: Lanes) {
        let n = lanes.0;
        for (a, b) in self.0[..n].iter_mut().zip(other.0[..n].iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// [`Resource::sub_assign`] over the used `lanes` only: exact when `other`
    /// is a value vector (see [`Lanes`]).
    #[inline]
    pub fn sub_in(&mut self, other: &Resource, lanes: Lanes) {
        let n = lanes.0;
        for (a, b) in self.0[..n].iter_mut().zip(other.0[..n].iter()) {
            *a = a.saturating_sub(*b);
        }
    }

    /// [`Resource::fits_in`] over the used `lanes` only: exact when `self` is
    /// a value vector and `available` is not negative in unused lanes.
    #[inline]
    pub fn fits_in_lanes(&self, available: &Resource, lanes: Lanes) -> bool {
        let n = lanes.0;
        self.0[..n]
            .iter()
            .zip(available.0[..n].iter())
            .all(|(a, b)| a <= b)
    }

    /// Whether `self + extra` (saturating) fits in `limit`, over the used
    /// `lanes` only: the headroom check of every queue on an ask's path,
    /// without building the sum's sixteen lanes. Exact when both are value
    /// vectors and `limit` is not negative in unused lanes.
    #[inline]
    pub fn plus_fits_in_lanes(&self, extra: &Resource, limit: &Resource, lanes: Lanes) -> bool {
        let n = lanes.0;
        self.0[..n]
            .iter()
            .zip(extra.0[..n].iter())
            .zip(limit.0[..n].iter())
            .all(|((a, e), l)| a.saturating_add(*e) <= *l)
    }

    /// `self + other`, saturating.
    pub fn plus(&self, other: &Resource) -> Resource {
        let mut out = *self;
        out.add_assign(other);
        out
    }

    /// `self - other`, saturating.
    pub fn minus(&self, other: &Resource) -> Resource {
        let mut out = *self;
        out.sub_assign(other);
        out
    }

    /// Multiplies every quantity by `n`, saturating.
    pub fn times(&self, n: i64) -> Resource {
        // Most asks want one allocation: no multiplications then.
        if n == 1 {
            return *self;
        }
        let mut out = *self;
        for v in &mut out.0 {
            *v = v.saturating_mul(n);
        }
        out
    }

    /// Elementwise minimum.
    pub fn min(&self, other: &Resource) -> Resource {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0.iter()) {
            *a = (*a).min(*b);
        }
        out
    }

    /// Quantities below zero raised to zero.
    pub fn clamp_negative(&self) -> Resource {
        let mut out = *self;
        for v in &mut out.0 {
            *v = (*v).max(0);
        }
        out
    }

    /// The dominant share of `self` against `base`, in fixed point
    /// ([`SHARE_SCALE`] = 1.0): the largest `self[i] / base[i]` over the types
    /// `self` uses. A type with no base (0 or unlimited) counts its raw quantity,
    /// so usage of something never guaranteed ranks behind usage that was.
    pub fn dominant_share(&self, base: &Resource) -> u64 {
        self.dominant_share_in(base, Lanes::ALL)
    }

    /// [`Resource::dominant_share`] over the used `lanes` only: exact when
    /// `self` is a value vector (unused lanes hold 0 and add nothing).
    pub fn dominant_share_in(&self, base: &Resource, lanes: Lanes) -> u64 {
        let n = lanes.0;
        let mut share: u64 = 0;
        for (&used, &total) in self.0[..n].iter().zip(base.0[..n].iter()) {
            if used <= 0 {
                continue;
            }
            // f64 rather than u128 arithmetic: this runs on every re-key and a
            // 128-bit division costs ten times more. 53 bits of mantissa are
            // plenty for an ordering key.
            let s = if total > 0 && total != i64::MAX {
                (used as f64 / total as f64 * SHARE_SCALE as f64) as u64
            } else {
                (used as u64).saturating_mul(SHARE_SCALE)
            };
            share = share.max(s);
        }
        share
    }
}

/// Fixed-point unit of [`Resource::dominant_share`]: a share of 1.0.
pub const SHARE_SCALE: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn si_res(pairs: &[(&str, i64)]) -> si::Resource {
        si::Resource {
            resources: pairs
                .iter()
                .map(|&(n, v)| (n.to_string(), si::Quantity { value: v }))
                .collect(),
        }
    }

    #[test]
    fn memory_and_vcore_come_first() {
        let names = ResourceNames::new();
        assert_eq!(names.lookup("memory"), Some(MEMORY));
        assert_eq!(names.lookup("vcore"), Some(VCORE));
        assert_eq!(names.intern("pods"), Ok(2));
        assert_eq!(names.intern("pods"), Ok(2));
    }

    #[test]
    fn conversion_round_trips() {
        let names = ResourceNames::new();
        let r = names
            .from_si(Some(&si_res(&[
                ("memory", 10),
                ("vcore", 1000),
                ("gpu", 2),
            ])))
            .unwrap();
        let mut table = NameTable::default();
        table.refresh(&names);
        let back = table.to_si(&r);
        assert_eq!(back, si_res(&[("memory", 10), ("vcore", 1000), ("gpu", 2)]));
        assert_eq!(
            table.to_map(&r),
            BTreeMap::from([
                ("gpu".to_string(), 2),
                ("memory".to_string(), 10),
                ("vcore".to_string(), 1000)
            ])
        );
    }

    #[test]
    fn bad_quantities_are_rejected_with_reasons() {
        let names = ResourceNames::new();
        let neg = names.from_si(Some(&si_res(&[("memory", -1)]))).unwrap_err();
        assert!(neg.to_string().contains("negative"), "{neg}");
        let big = names
            .from_si(Some(&si_res(&[("memory", i64::MAX)])))
            .unwrap_err();
        assert!(big.to_string().contains("larger"), "{big}");
        assert_eq!(
            names.from_si(Some(&si_res(&[("", 1)]))),
            Err(ResourceError::EmptyName)
        );
    }

    #[test]
    fn too_many_types_is_an_error_not_a_panic() {
        let names = ResourceNames::new();
        for i in 0..MAX_RESOURCE_TYPES - 2 {
            names.intern(&format!("r{i}")).unwrap();
        }
        assert!(matches!(
            names.intern("one-too-many"),
            Err(ResourceError::TooManyTypes { .. })
        ));
    }

    #[test]
    fn fit_and_dominance() {
        let ask = Resource::from_pairs(&[(MEMORY, 10), (VCORE, 1)]);
        let avail = Resource::from_pairs(&[(MEMORY, 10), (VCORE, 5)]);
        assert!(ask.fits_in(&avail));
        let big = Resource::from_pairs(&[(MEMORY, 11), (VCORE, 1)]);
        assert!(!big.fits_in(&avail));
        assert!(big.dominates(&ask));
        assert!(!ask.dominates(&big));
        // A type the ask does not use never blocks it; one it uses and the node lacks does.
        let gpu = Resource::from_pairs(&[(2, 1)]);
        assert!(!gpu.fits_in(&avail));
        assert!(ask.fits_in(&Resource::UNLIMITED));
    }

    #[test]
    fn arithmetic_is_checked_or_saturating() {
        let a = Resource::from_pairs(&[(MEMORY, i64::MAX - 1)]);
        let b = Resource::from_pairs(&[(MEMORY, 2)]);
        assert_eq!(a.checked_add(&b), None);
        assert_eq!(a.plus(&b).get(MEMORY), i64::MAX);
        assert_eq!(Resource::ZERO.minus(&b).get(MEMORY), -2);
        assert!(Resource::ZERO.minus(&b).any_negative());
        assert_eq!(Resource::UNLIMITED.minus(&b).get(MEMORY), i64::MAX - 2);
        assert_eq!(b.times(3).get(MEMORY), 6);
    }

    #[test]
    fn dominant_share_takes_the_largest_ratio() {
        let guaranteed = Resource::from_pairs(&[(MEMORY, 100), (VCORE, 10)]);
        let used = Resource::from_pairs(&[(MEMORY, 50), (VCORE, 1)]);
        assert_eq!(used.dominant_share(&guaranteed), SHARE_SCALE / 2);
        let unguaranteed = Resource::from_pairs(&[(2, 1)]);
        assert_eq!(unguaranteed.dominant_share(&guaranteed), SHARE_SCALE);
        assert_eq!(Resource::ZERO.dominant_share(&guaranteed), 0);
    }
}
