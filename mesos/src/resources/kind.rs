//! When two resources are "the same kind" and may be added, subtracted or
//! compared: the one rule every operation of [`super::Resources`] goes
//! through (upstream's `addable`, `subtractable` and `operator==`).
//!
//! Same kind: equal name, type, allocation role, reservation stack, disk
//! info (source and persistence id; the volume is how it is used, not what it
//! is), provider id, and the same revocable and shared flags. On top of
//! that, a whole-unit resource (a MOUNT or BLOCK disk, a RAW disk with an id,
//! a persistent volume) and a shared resource never merge with another
//! entry and only subtract or contain one exactly equal to it.

use super::value::{Scalar, ranges_contain, ranges_equal, set_contains, set_equal};
use crate::v1::resource::{DiskInfo, ReservationInfo, disk_info};
use crate::v1::{Label, Labels, Resource, value};

/// Whether `right` can be added into `left`, giving one resource.
pub(super) fn addable(left: &Resource, right: &Resource) -> bool {
    if !same_kind(left, right) {
        return false;
    }
    if left.shared.is_some() {
        return values_equal(left, right);
    }
    !is_whole_unit(left)
}

/// Whether `right` can be subtracted from `left` (also the condition for
/// `left` to contain `right`).
pub(super) fn subtractable(left: &Resource, right: &Resource) -> bool {
    if !same_kind(left, right) {
        return false;
    }
    if left.shared.is_some() || is_whole_unit(left) {
        return values_equal(left, right);
    }
    true
}

/// Whether `left` holds at least all of `right`.
pub(super) fn contains(left: &Resource, right: &Resource) -> bool {
    subtractable(left, right) && value_contains(left, right)
}

/// Equal kind and equal quantity.
pub(super) fn equal(left: &Resource, right: &Resource) -> bool {
    same_kind(left, right) && values_equal(left, right)
}

/// Everything but the quantity matches.
fn same_kind(left: &Resource, right: &Resource) -> bool {
    left.name == right.name
        && left.r#type == right.r#type
        && left.allocation_info == right.allocation_info
        && left.reservations.len() == right.reservations.len()
        && left
            .reservations
            .iter()
            .zip(&right.reservations)
            .all(|(l, r)| reservation_equal(l, r))
        && option_equal(&left.disk, &right.disk, disk_equal)
        && left.revocable.is_some() == right.revocable.is_some()
        && left.provider_id == right.provider_id
        && left.shared.is_some() == right.shared.is_some()
}

/// A disk that is one indivisible thing.
fn is_whole_unit(resource: &Resource) -> bool {
    let Some(disk) = &resource.disk else {
        return false;
    };
    if disk.persistence.is_some() {
        return true;
    }
    match &disk.source {
        Some(source) => match source.r#type() {
            disk_info::source::Type::Mount | disk_info::source::Type::Block => true,
            disk_info::source::Type::Raw => source.id.is_some(),
            disk_info::source::Type::Path | disk_info::source::Type::Unknown => false,
        },
        None => false,
    }
}

fn values_equal(left: &Resource, right: &Resource) -> bool {
    match left.r#type() {
        value::Type::Scalar => scalar(left) == scalar(right),
        value::Type::Ranges => ranges_equal(ranges(left), ranges(right)),
        value::Type::Set => set_equal(items(left), items(right)),
        value::Type::Text => false,
    }
}

fn value_contains(left: &Resource, right: &Resource) -> bool {
    match left.r#type() {
        value::Type::Scalar => scalar(right) <= scalar(left),
        value::Type::Ranges => ranges_contain(ranges(left), ranges(right)),
        value::Type::Set => set_contains(items(left), items(right)),
        value::Type::Text => false,
    }
}

pub(super) fn scalar(resource: &Resource) -> Scalar {
    Scalar::from_f64(resource.scalar.as_ref().map_or(0.0, |s| s.value))
}

pub(super) fn ranges(resource: &Resource) -> &[value::Range] {
    resource.ranges.as_ref().map_or(&[], |r| &r.range)
}

pub(super) fn items(resource: &Resource) -> &[String] {
    resource.set.as_ref().map_or(&[], |s| &s.item)
}

fn option_equal<T, B: std::borrow::Borrow<T>>(
    left: &Option<B>,
    right: &Option<B>,
    equal: fn(&T, &T) -> bool,
) -> bool {
    match (left, right) {
        (None, None) => true,
        (Some(l), Some(r)) => equal(l.borrow(), r.borrow()),
        _ => false,
    }
}

fn reservation_equal(left: &ReservationInfo, right: &ReservationInfo) -> bool {
    left.r#type() == right.r#type()
        && left.role() == right.role()
        && left.principal == right.principal
        && option_equal(&left.labels, &right.labels, labels_equal)
}

fn disk_equal(left: &DiskInfo, right: &DiskInfo) -> bool {
    option_equal(&left.source, &right.source, |l, r| {
        l.r#type == r.r#type
            && l.path == r.path
            && l.mount == r.mount
            && l.vendor == r.vendor
            && l.id == r.id
            && option_equal(&l.metadata, &r.metadata, labels_equal)
            && l.profile == r.profile
    }) && option_equal(&left.persistence, &right.persistence, |l, r| l.id == r.id)
}

/// Labels compare as multisets: order does not matter.
pub(super) fn labels_equal(left: &Labels, right: &Labels) -> bool {
    let count = |labels: &[Label], label: &Label| labels.iter().filter(|l| *l == label).count();
    left.labels.len() == right.labels.len()
        && left
            .labels
            .iter()
            .all(|l| count(&left.labels, l) == count(&right.labels, l))
}
