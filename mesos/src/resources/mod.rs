//! Mesos resources as a domain type: [`Resources`] is a collection of
//! `v1::Resource` kept normalised the way Mesos keeps it, with Mesos'
//! arithmetic (add, subtract, contains), filters by role and reservation,
//! parsing of the agent resource text and a compact display.
//!
//! Normalised means: every entry is valid and non-empty, in the
//! reservation-stack format (legacy `role`/`reservation` converted, see
//! [`upgrade`]), scalars rounded to three decimals, ranges coalesced, and no
//! two entries that could be added into one (see `kind.rs` for that rule).

mod display;
mod kind;
mod parse;
mod validate;
pub mod value;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{AddAssign, SubAssign};

use self::value::{Scalar, ranges_add, ranges_subtract, set_add, set_subtract};
use crate::v1::{self, Resource};

pub use self::validate::{downgrade, is_strict_subrole, upgrade, validate_resource, validate_role};

/// A resource as Mesos displays it (`cpus(allocated: web)(reservations: ...):1`).
pub fn display_resource(resource: &Resource) -> String {
    display::resource(resource, None)
}

/// Why resources are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The resource text does not parse.
    #[error("{0}")]
    Parse(String),
    /// The JSON form of the resource text does not map onto `Resource`.
    #[error("Some JSON resources were not formatted properly: {0}")]
    Json(String),
    /// A resource is invalid (upstream's wording).
    #[error("{0}")]
    Invalid(String),
    /// A resource of a list is invalid: which one, and why.
    #[error("Resource '{resource}' is invalid: {reason}")]
    InvalidIn {
        /// The resource, as displayed.
        resource: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One entry: a resource and, for a shared one, how many times it is held.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    resource: Resource,
    shared_count: Option<i64>,
}

impl Entry {
    /// A valid resource, normalised.
    fn new(mut resource: Resource) -> Entry {
        upgrade(&mut resource);
        if let Some(scalar) = &mut resource.scalar {
            scalar.value = Scalar::from_f64(scalar.value).to_f64();
        }
        if let Some(ranges) = &mut resource.ranges {
            ranges.range = value::coalesce(&ranges.range);
        }
        let shared_count = resource.shared.is_some().then_some(1);
        Entry {
            resource,
            shared_count,
        }
    }

    fn is_empty(&self) -> bool {
        if let Some(count) = self.shared_count {
            return count == 0;
        }
        value_is_empty(&self.resource)
    }

    fn contains(&self, other: &Entry) -> bool {
        match (self.shared_count, other.shared_count) {
            (Some(mine), Some(theirs)) => {
                mine >= theirs && kind::equal(&self.resource, &other.resource)
            }
            (None, None) => kind::contains(&self.resource, &other.resource),
            _ => false,
        }
    }

    /// Adds `other`, which must be addable.
    fn add(&mut self, other: &Entry) {
        if let (Some(count), Some(more)) = (&mut self.shared_count, other.shared_count) {
            *count += more;
            return;
        }
        let (left, right) = (&mut self.resource, &other.resource);
        match left.r#type() {
            v1::value::Type::Scalar => set_scalar(left, kind::scalar(left) + kind::scalar(right)),
            v1::value::Type::Ranges => {
                let sum = ranges_add(kind::ranges(left), kind::ranges(right));
                left.ranges.get_or_insert_with(Default::default).range = sum;
            }
            v1::value::Type::Set => {
                set_add(
                    &mut left.set.get_or_insert_with(Default::default).item,
                    kind::items(right),
                );
            }
            v1::value::Type::Text => {}
        }
    }

    /// Subtracts `other`, which must be subtractable; true when what is
    /// left is empty or negative (the entry goes away).
    fn subtract(&mut self, other: &Entry) -> bool {
        if let (Some(count), Some(less)) = (&mut self.shared_count, other.shared_count) {
            *count -= less;
            return *count <= 0;
        }
        let (left, right) = (&mut self.resource, &other.resource);
        match left.r#type() {
            v1::value::Type::Scalar => {
                let rest = kind::scalar(left) - kind::scalar(right);
                set_scalar(left, rest);
                if rest < Scalar::ZERO {
                    return true;
                }
            }
            v1::value::Type::Ranges => {
                let rest = ranges_subtract(kind::ranges(left), kind::ranges(right));
                left.ranges.get_or_insert_with(Default::default).range = rest;
            }
            v1::value::Type::Set => {
                set_subtract(
                    &mut left.set.get_or_insert_with(Default::default).item,
                    kind::items(right),
                );
            }
            v1::value::Type::Text => {}
        }
        value_is_empty(left)
    }
}

fn set_scalar(resource: &mut Resource, value: Scalar) {
    resource.scalar.get_or_insert_with(Default::default).value = value.to_f64();
}

fn value_is_empty(resource: &Resource) -> bool {
    match resource.r#type() {
        v1::value::Type::Scalar => kind::scalar(resource) == Scalar::ZERO,
        v1::value::Type::Ranges => kind::ranges(resource).is_empty(),
        v1::value::Type::Set => kind::items(resource).is_empty(),
        v1::value::Type::Text => false,
    }
}

/// A normalised collection of resources with Mesos' semantics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    entries: Vec<Entry>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Resources {
        Resources::default()
    }

    /// The valid, non-empty resources of a list, merged. Invalid ones are
    /// dropped silently, as Mesos' constructor does; use [`Resources::validate`]
    /// or [`Resources::try_from_vec`] on input from outside.
    pub fn from_vec(resources: Vec<Resource>) -> Resources {
        let mut out = Resources::default();
        for resource in resources {
            out.add_resource(resource);
        }
        out
    }

    /// The resources of a list, refusing the list if one is invalid.
    pub fn try_from_vec(resources: Vec<Resource>) -> Result<Resources, ResourceError> {
        Resources::validate(&resources)?;
        Ok(Resources::from_vec(resources))
    }

    /// Checks every resource of a list; the error names the first invalid
    /// one.
    pub fn validate(resources: &[Resource]) -> Result<(), ResourceError> {
        for resource in resources {
            validate_resource(resource).map_err(|e| ResourceError::InvalidIn {
                resource: display::resource(resource, None),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Parses agent resource text (`cpus:2;mem:1024;ports:[31000-32000]`,
    /// `cpus(role):2`, `name:{a,b}`, or a JSON array of `Resource`);
    /// unreserved unless a role is given.
    pub fn parse(text: &str) -> Result<Resources, ResourceError> {
        Resources::parse_with_role(text, "*")
    }

    /// Parses agent resource text, reserving entries without a role of their
    /// own to `default_role` (statically), unless it is `*`. As for an agent's
    /// `--resources`, persistent volumes, revocable resources, dynamic
    /// reservations, and one name with two types are refused.
    pub fn parse_with_role(text: &str, default_role: &str) -> Result<Resources, ResourceError> {
        let mut out = Resources::default();
        let mut types: BTreeMap<String, i32> = BTreeMap::new();
        for resource in parse::parse_text(text, default_role)? {
            validate_resource(&resource)?;
            let entry = Entry::new(resource);
            let r = &entry.resource;
            if r.disk.as_ref().is_some_and(|d| d.persistence.is_some()) {
                return Err(ResourceError::Invalid(
                    "Persistent volumes cannot be specified at the command line".into(),
                ));
            }
            if r.revocable.is_some() {
                return Err(ResourceError::Invalid(
                    "Revocable resources cannot be specified at the command line".into(),
                ));
            }
            if r.reservations
                .last()
                .is_some_and(|last| last.r#type() == v1::resource::reservation_info::Type::Dynamic)
            {
                return Err(ResourceError::Invalid(
                    "Dynamic reservations cannot be specified at the command line".into(),
                ));
            }
            if *types.entry(r.name.clone()).or_insert(r.r#type) != r.r#type {
                return Err(ResourceError::Invalid(format!(
                    "Resources with the same name ('{}') but different types are not allowed",
                    r.name
                )));
            }
            out.add_entry(entry);
        }
        Ok(out)
    }

    /// Whether there is nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries (a shared resource once, whatever its count).
    pub fn iter(&self) -> impl Iterator<Item = &Resource> + Clone + '_ {
        self.entries.iter().map(|e| &e.resource)
    }

    /// The entries as a list, for a message.
    pub fn to_vec(&self) -> Vec<Resource> {
        self.iter().cloned().collect()
    }

    /// The entries as a list, for a message.
    pub fn into_vec(self) -> Vec<Resource> {
        self.entries.into_iter().map(|e| e.resource).collect()
    }

    /// Adds one resource; an invalid or empty one is ignored (returns false).
    pub fn add_resource(&mut self, resource: Resource) -> bool {
        if validate_resource(&resource).is_err() {
            return false;
        }
        self.add_entry(Entry::new(resource));
        true
    }

    /// Subtracts one resource; an invalid one is ignored (returns false).
    pub fn subtract_resource(&mut self, resource: Resource) -> bool {
        if validate_resource(&resource).is_err() {
            return false;
        }
        self.subtract_entry(&Entry::new(resource));
        true
    }

    /// Adds all of `other`.
    pub fn add(&mut self, other: &Resources) {
        for entry in &other.entries {
            self.add_entry(entry.clone());
        }
    }

    /// Takes away what `other` holds; what would go negative goes away.
    pub fn subtract(&mut self, other: &Resources) {
        for entry in &other.entries {
            self.subtract_entry(entry);
        }
    }

    /// Whether this holds everything `other` does (a task fits an offer; an
    /// offer is within a decline filter).
    pub fn contains(&self, other: &Resources) -> bool {
        let mut remaining = self.clone();
        for entry in &other.entries {
            if !remaining.entries.iter().any(|mine| mine.contains(entry)) {
                return false;
            }
            // A volume can satisfy only one request.
            if entry
                .resource
                .disk
                .as_ref()
                .is_some_and(|d| d.persistence.is_some())
            {
                remaining.subtract_entry(entry);
            }
        }
        true
    }

    /// Whether this holds a (valid) resource.
    pub fn contains_resource(&self, resource: &Resource) -> bool {
        validate_resource(resource).is_ok() && {
            let entry = Entry::new(resource.clone());
            self.entries.iter().any(|mine| mine.contains(&entry))
        }
    }

    fn add_entry(&mut self, entry: Entry) {
        if entry.is_empty() {
            return;
        }
        match self
            .entries
            .iter_mut()
            .find(|mine| kind::addable(&mine.resource, &entry.resource))
        {
            Some(mine) => mine.add(&entry),
            None => self.entries.push(entry),
        }
    }

    fn subtract_entry(&mut self, entry: &Entry) {
        if entry.is_empty() {
            return;
        }
        let found = self
            .entries
            .iter()
            .position(|mine| kind::subtractable(&mine.resource, &entry.resource));
        if let Some(at) = found
            && self.entries[at].subtract(entry)
        {
            self.entries.remove(at);
        }
    }

    /// Total of a scalar resource across all entries, in fixed point; `None`
    /// when there is no scalar of that name.
    pub fn scalar_total(&self, name: &str) -> Option<Scalar> {
        let mut found = None;
        for r in self
            .iter()
            .filter(|r| r.name == name && r.r#type() == v1::value::Type::Scalar)
        {
            *found.get_or_insert(Scalar::ZERO) += kind::scalar(r);
        }
        found
    }

    /// Total of a scalar resource (0 when absent).
    pub fn scalar(&self, name: &str) -> f64 {
        self.scalar_total(name).unwrap_or_default().to_f64()
    }

    /// Total `cpus`.
    pub fn cpus(&self) -> Option<f64> {
        self.scalar_total("cpus").map(Scalar::to_f64)
    }

    /// Total `mem`, in MB.
    pub fn mem(&self) -> Option<f64> {
        self.scalar_total("mem").map(Scalar::to_f64)
    }

    /// Total `disk`, in MB.
    pub fn disk(&self) -> Option<f64> {
        self.scalar_total("disk").map(Scalar::to_f64)
    }

    /// Total `gpus`.
    pub fn gpus(&self) -> Option<f64> {
        self.scalar_total("gpus").map(Scalar::to_f64)
    }

    /// All ranges of a ranges resource, coalesced (`ports`).
    pub fn ranges(&self, name: &str) -> Vec<v1::value::Range> {
        let all: Vec<v1::value::Range> = self
            .iter()
            .filter(|r| r.name == name && r.r#type() == v1::value::Type::Ranges)
            .flat_map(|r| kind::ranges(r).iter().cloned())
            .collect();
        value::coalesce(&all)
    }

    /// All items of a set resource.
    pub fn set(&self, name: &str) -> Vec<String> {
        let mut items = Vec::new();
        for r in self
            .iter()
            .filter(|r| r.name == name && r.r#type() == v1::value::Type::Set)
        {
            set_add(&mut items, kind::items(r));
        }
        items
    }

    /// The resource names present.
    pub fn names(&self) -> BTreeSet<&str> {
        self.iter().map(|r| r.name.as_str()).collect()
    }

    /// The entries a predicate keeps.
    pub fn filter(&self, keep: impl Fn(&Resource) -> bool) -> Resources {
        Resources {
            entries: self
                .entries
                .iter()
                .filter(|e| keep(&e.resource))
                .cloned()
                .collect(),
        }
    }

    /// Entries allocated (or offered) to exactly `role`.
    pub fn allocated_to(&self, role: &str) -> Resources {
        self.filter(|r| allocation_role(r) == Some(role))
    }

    /// Marks every entry as allocated to `role`.
    pub fn allocate(&mut self, role: &str) {
        self.set_allocation(Some(role));
    }

    /// A copy with no allocation role (how an agent counts what it holds).
    pub fn unallocated(&self) -> Resources {
        let mut out = self.clone();
        out.unallocate();
        out
    }

    /// A copy allocated to `role` (how offers and tasks carry resources).
    pub fn allocated(&self, role: &str) -> Resources {
        let mut out = self.clone();
        out.allocate(role);
        out
    }

    /// Clears the allocation role of every entry.
    pub fn unallocate(&mut self) {
        self.set_allocation(None);
    }

    fn set_allocation(&mut self, role: Option<&str>) {
        let info = role.map(|role| v1::resource::AllocationInfo {
            role: Some(role.to_string()),
        });
        if self
            .entries
            .windows(2)
            .all(|w| w[0].resource.allocation_info == w[1].resource.allocation_info)
        {
            // All alike before, all alike after: no two entries can merge.
            // The last entry takes `info` itself, the others a copy.
            if let Some((last, rest)) = self.entries.split_last_mut() {
                for entry in rest {
                    entry.resource.allocation_info = info.clone();
                }
                last.resource.allocation_info = info;
            }
            return;
        }
        let entries = std::mem::take(&mut self.entries);
        for mut entry in entries {
            entry.resource.allocation_info = info.clone();
            self.add_entry(entry);
        }
    }

    /// Reserved entries: to `role` (its last reservation), or to any role.
    pub fn reserved(&self, role: Option<&str>) -> Resources {
        self.filter(|r| is_reserved(r, role))
    }

    /// Unreserved entries.
    pub fn unreserved(&self) -> Resources {
        self.filter(|r| r.reservations.is_empty())
    }

    /// Reserved entries by reservation role.
    pub fn reservations(&self) -> BTreeMap<String, Resources> {
        let mut out: BTreeMap<String, Resources> = BTreeMap::new();
        for entry in &self.entries {
            if let Some(role) = reservation_role(&entry.resource) {
                out.entry(role.to_string())
                    .or_default()
                    .add_entry(entry.clone());
            }
        }
        out
    }

    /// Entries a framework of `role` may be offered: unreserved, or reserved
    /// to `role` or one of its ancestors.
    pub fn allocatable_to(&self, role: &str) -> Resources {
        self.filter(|r| match reservation_role(r) {
            None => true,
            Some(reserved) => reserved == role || is_strict_subrole(role, reserved),
        })
    }

    /// What of these (an agent's free resources) goes into an offer to a
    /// framework of `role`: of the entries `keep` selects, those it may be
    /// offered (unreserved, or
    /// reserved to `role` or an ancestor), scalars up to what the core's
    /// lease grants per name (`granted`, in Mesos units; a name it does not
    /// grant is left out), taken entry by entry in order, and every range and
    /// set entry whole (the core decides by scalars only). A grant that
    /// would cut a persistent volume or a MOUNT or BLOCK disk in two gives
    /// nothing (the lease goes back; its resources wait for the next run),
    /// as upstream never offers part of one.
    pub fn offer_for(
        &self,
        role: &str,
        keep: impl Fn(&Resource) -> bool,
        granted: impl Fn(&str) -> Option<f64>,
    ) -> Resources {
        self.clone().take_offer(role, keep, granted)
    }

    /// [`Resources::offer_for`], and what it selects taken out of these: the
    /// same as `offer_for` followed by `subtract` of its result, without a
    /// copy of the entries taken whole (they move into the offer) and
    /// without a search for each entry to subtract (these entries are the
    /// ones taken from). A grant that would cut a volume leaves these as they
    /// were.
    pub fn take_offer(
        &mut self,
        role: &str,
        keep: impl Fn(&Resource) -> bool,
        granted: impl Fn(&str) -> Option<f64>,
    ) -> Resources {
        self.take_offer_exact(role, keep, |name| granted(name).map(Scalar::from_f64))
    }

    /// [`Resources::take_offer`] with the grant in fixed point (as the
    /// master reads it off the core's integer quantities, with no float on
    /// the way).
    pub fn take_offer_exact(
        &mut self,
        role: &str,
        keep: impl Fn(&Resource) -> bool,
        granted: impl Fn(&str) -> Option<Scalar>,
    ) -> Resources {
        /// What becomes of one entry.
        #[derive(Clone, Copy)]
        enum Take {
            /// Stays.
            No,
            /// Moves into the offer.
            Whole,
            /// Stays; a copy goes into the offer (a text entry, which
            /// `subtract` does not empty).
            Copy,
            /// Of a scalar, this much goes into the offer, the rest stays.
            Part(Scalar),
        }
        // First what each entry gives (nothing changes yet: a volume that
        // would be cut gives nothing at all). An agent's free list has a
        // handful of entries.
        let mut takes: smallvec::SmallVec<[Take; 8]> = smallvec::SmallVec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let r = &entry.resource;
            let allowed = keep(r)
                && match reservation_role(r) {
                    None => true,
                    Some(reserved) => reserved == role || is_strict_subrole(role, reserved),
                };
            if !allowed {
                takes.push(Take::No);
                continue;
            }
            if r.r#type() != v1::value::Type::Scalar {
                // Text values are not emptied by a subtraction: they stay.
                takes.push(if r.r#type() == v1::value::Type::Text {
                    Take::Copy
                } else {
                    Take::Whole
                });
                continue;
            }
            // What of the grant is left: the grant less the entries of this
            // name taken so far.
            let Some(grant) = granted(&r.name) else {
                takes.push(Take::No);
                continue;
            };
            let taken = self.entries[..i]
                .iter()
                .zip(&takes)
                .filter(|(e, _)| {
                    e.resource.name == r.name && e.resource.r#type() == v1::value::Type::Scalar
                })
                .fold(Scalar::ZERO, |sum, (e, t)| match t {
                    Take::No => sum,
                    Take::Whole | Take::Copy => sum + kind::scalar(&e.resource),
                    Take::Part(p) => sum + *p,
                });
            let budget = grant - taken;
            if budget <= Scalar::ZERO {
                takes.push(Take::No);
                continue;
            }
            let value = kind::scalar(r);
            takes.push(if entry.shared_count.is_some() {
                // Shared: offered as it is; its count goes with it.
                Take::Whole
            } else if value > budget {
                if is_indivisible(r) {
                    // A volume or a MOUNT or BLOCK disk is offered whole or
                    // not at all: no part of this grant.
                    return Resources::default();
                }
                Take::Part(budget)
            } else {
                Take::Whole
            });
        }
        let mut out = Resources::default();
        if takes.iter().all(|t| matches!(t, Take::No)) {
            return out;
        }
        if takes.iter().all(|t| matches!(t, Take::Whole)) {
            // All of it (an agent's whole remainder in one lease): the list
            // itself moves into the offer.
            out.entries = std::mem::take(&mut self.entries);
            return out;
        }
        out.entries.reserve(takes.len());
        let entries = std::mem::take(&mut self.entries);
        self.entries.reserve(takes.len());
        for (mut entry, take) in entries.into_iter().zip(takes) {
            match take {
                Take::No => self.entries.push(entry),
                Take::Whole => out.entries.push(entry),
                Take::Copy => {
                    out.entries.push(entry.clone());
                    self.entries.push(entry);
                }
                Take::Part(part) => {
                    let mut piece = entry.clone();
                    set_scalar(&mut piece.resource, part);
                    let rest = kind::scalar(&entry.resource) - part;
                    set_scalar(&mut entry.resource, rest);
                    // Entries of a normalised collection stay apart in a
                    // part of it.
                    out.entries.push(piece);
                    self.entries.push(entry);
                }
            }
        }
        out
    }

    /// Revocable entries.
    pub fn revocable(&self) -> Resources {
        self.filter(|r| r.revocable.is_some())
    }

    /// Entries that are not revocable.
    pub fn non_revocable(&self) -> Resources {
        self.filter(|r| r.revocable.is_none())
    }

    /// Persistent volumes.
    pub fn persistent_volumes(&self) -> Resources {
        self.filter(|r| r.disk.as_ref().is_some_and(|d| d.persistence.is_some()))
    }
}

/// The role a resource is allocated or offered to.
pub fn allocation_role(resource: &Resource) -> Option<&str> {
    resource
        .allocation_info
        .as_ref()
        .and_then(|a| a.role.as_deref())
}

/// The role of a resource's reservation (the last, most refined one, or the
/// legacy `role` when not `*`); `None` when unreserved.
#[allow(deprecated)] // Reads the legacy `role` of a resource not yet upgraded.
pub fn reservation_role(resource: &Resource) -> Option<&str> {
    match resource.reservations.last() {
        Some(last) => Some(last.role()),
        None => resource.role.as_deref().filter(|&role| role != "*"),
    }
}

/// Whether a resource is reserved, to `role` if given.
pub fn is_reserved(resource: &Resource, role: Option<&str>) -> bool {
    match (reservation_role(resource), role) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(reserved), Some(role)) => reserved == role,
    }
}

impl From<Vec<Resource>> for Resources {
    fn from(resources: Vec<Resource>) -> Resources {
        Resources::from_vec(resources)
    }
}

impl FromIterator<Resource> for Resources {
    fn from_iter<I: IntoIterator<Item = Resource>>(iter: I) -> Resources {
        let mut out = Resources::default();
        for resource in iter {
            out.add_resource(resource);
        }
        out
    }
}

// No `Add`/`Sub` on `&Resources`: with them in scope, `a.add(&b)` on an
// owned `a` would resolve to the operator (a new value, dropped) instead of
// the in-place method.
impl AddAssign<&Resources> for Resources {
    fn add_assign(&mut self, other: &Resources) {
        self.add(other);
    }
}

impl SubAssign<&Resources> for Resources {
    fn sub_assign(&mut self, other: &Resources) {
        self.subtract(other);
    }
}

/// A disk that is used whole: a persistent volume, or a MOUNT or BLOCK disk.
pub fn is_indivisible(r: &Resource) -> bool {
    use v1::resource::disk_info::source::Type as Source;
    r.disk.as_ref().is_some_and(|d| {
        d.persistence.is_some()
            || d.source
                .as_ref()
                .is_some_and(|s| matches!(s.r#type(), Source::Mount | Source::Block))
    })
}
