//! Checks of a `Resource` as a framework or agent sends it (upstream's
//! `Resources::validate` and role name rules, plus non-finite scalars), and
//! conversion between the legacy reservation format (`role`, `reservation`)
//! and the reservation stack (`reservations`).

#![allow(deprecated)] // `Resource.role` is the legacy field we convert from and to.

use super::ResourceError;
use crate::v1::resource::ReservationInfo;
use crate::v1::resource::disk_info::source::Type as SourceType;
use crate::v1::resource::reservation_info::Type as ReservationType;
use crate::v1::{Resource, value};

fn invalid(reason: impl Into<String>) -> ResourceError {
    ResourceError::Invalid(reason.into())
}

/// Checks one resource; the error says what is wrong.
pub fn validate_resource(resource: &Resource) -> Result<(), ResourceError> {
    if resource.name.is_empty() {
        return Err(invalid("Empty resource name"));
    }
    let Ok(kind) = value::Type::try_from(resource.r#type) else {
        return Err(invalid("Invalid resource type"));
    };
    let (scalar, ranges, set) = (
        resource.scalar.is_some(),
        resource.ranges.is_some(),
        resource.set.is_some(),
    );
    match kind {
        value::Type::Scalar => {
            if !scalar || ranges || set {
                return Err(invalid("Invalid scalar resource"));
            }
            let v = resource.scalar.as_ref().map_or(0.0, |s| s.value);
            if !v.is_finite() {
                return Err(invalid("Invalid scalar resource: value is not finite"));
            }
            if v < 0.0 {
                return Err(invalid("Invalid scalar resource: value < 0"));
            }
        }
        value::Type::Ranges => {
            if scalar || !ranges || set {
                return Err(invalid("Invalid ranges resource"));
            }
            let list = super::kind::ranges(resource);
            for (i, range) in list.iter().enumerate() {
                if range.begin > range.end {
                    return Err(invalid("Invalid ranges resource: begin > end"));
                }
                for other in &list[i + 1..] {
                    let overlap = range.begin.max(other.begin) <= range.end.min(other.end);
                    if overlap {
                        return Err(invalid("Invalid ranges resource: overlapping ranges"));
                    }
                }
            }
        }
        value::Type::Set => {
            if scalar || ranges || !set {
                return Err(invalid("Invalid set resource"));
            }
            let items = super::kind::items(resource);
            for (i, item) in items.iter().enumerate() {
                if items[i + 1..].contains(item) {
                    return Err(invalid("Invalid set resource: duplicated elements"));
                }
            }
        }
        value::Type::Text => return Err(invalid("Unsupported resource type")),
    }

    if let Some(disk) = &resource.disk {
        if resource.name != "disk" {
            return Err(invalid(format!(
                "DiskInfo should not be set for {} resource",
                resource.name
            )));
        }
        if let Some(source) = &disk.source {
            match SourceType::try_from(source.r#type) {
                Ok(SourceType::Path | SourceType::Mount) => {}
                Ok(kind @ (SourceType::Block | SourceType::Raw)) => {
                    if source.mount.is_some() {
                        return Err(invalid(format!(
                            "Mount should not be set for {} disk source",
                            kind.as_str_name()
                        )));
                    }
                    if source.path.is_some() {
                        return Err(invalid(format!(
                            "Path should not be set for {} disk source",
                            kind.as_str_name()
                        )));
                    }
                }
                Ok(SourceType::Unknown) | Err(_) => {
                    return Err(invalid("Unsupported 'DiskInfo.Source.Type'"));
                }
            }
        }
    }

    validate_reservations(resource)?;

    if resource.shared.is_some() {
        if resource.name != "disk" {
            return Err(invalid(format!(
                "Resource {} cannot be shared",
                resource.name
            )));
        }
        if resource
            .disk
            .as_ref()
            .is_none_or(|d| d.persistence.is_none())
        {
            return Err(invalid("Only persistent volumes can be shared"));
        }
    }
    Ok(())
}

fn validate_reservations(resource: &Resource) -> Result<(), ResourceError> {
    let stack = &resource.reservations;
    if stack.is_empty() {
        // Legacy format: `role` (default "*") and maybe `reservation`.
        let role = resource.role.as_deref().unwrap_or("*");
        validate_role(role)?;
        if let Some(reservation) = &resource.reservation {
            if reservation.r#type.is_some() {
                return Err(invalid(
                    "'Resource.ReservationInfo.type' must not be set for the 'Resource.reservation' field",
                ));
            }
            if reservation.role.is_some() {
                return Err(invalid(
                    "'Resource.ReservationInfo.role' must not be set for the 'Resource.reservation' field",
                ));
            }
            if role == "*" {
                return Err(invalid(
                    "Invalid reservation: role \"*\" cannot be dynamically reserved",
                ));
            }
        }
        return Ok(());
    }

    for reservation in stack {
        if reservation.r#type.is_none() {
            return Err(invalid(
                "Invalid reservation: 'Resource.ReservationInfo.type' field must be set.",
            ));
        }
        let Some(role) = reservation.role.as_deref() else {
            return Err(invalid(
                "Invalid reservation: 'Resource.ReservationInfo.role' field must be set.",
            ));
        };
        validate_role(role)?;
        if role == "*" {
            return Err(invalid(
                "Invalid reservation: role \"*\" cannot be reserved",
            ));
        }
    }
    for pair in stack.windows(2) {
        let (ancestor, refined) = (pair[0].role(), &pair[1]);
        if refined.r#type() == ReservationType::Static {
            return Err(invalid(
                "Invalid refined reservation: A refined reservation cannot be STATIC",
            ));
        }
        if !is_strict_subrole(refined.role(), ancestor) {
            return Err(invalid(format!(
                "Invalid refined reservation: role '{}' is not a refinement of '{ancestor}'",
                refined.role()
            )));
        }
    }

    // Both formats at once are allowed only for one reservation, consistently.
    if let [only] = &stack[..] {
        if let Some(role) = &resource.role
            && role != only.role()
        {
            return Err(invalid(format!(
                "Invalid resource format: 'Resource.role' field with '{role}' does not match the role '{}' in 'Resource.reservations'",
                only.role()
            )));
        }
        match only.r#type() {
            ReservationType::Static => {
                if resource.reservation.is_some() {
                    return Err(invalid(
                        "Invalid resource format: 'Resource.reservation' must not be set if the single reservation in 'Resource.reservations' is STATIC",
                    ));
                }
            }
            ReservationType::Dynamic => {
                if resource.role.is_some() != resource.reservation.is_some() {
                    return Err(invalid(
                        "Invalid resource format: 'Resource.role' and 'Resource.reservation' must either be both set or both not set if the single reservation in 'Resource.reservations' is DYNAMIC",
                    ));
                }
                if let Some(legacy) = &resource.reservation {
                    if legacy.principal() != only.principal() {
                        return Err(invalid(format!(
                            "Invalid resource format: 'Resource.reservation.principal' field with '{}' does not match the principal '{}' in 'Resource.reservations'",
                            legacy.principal(),
                            only.principal()
                        )));
                    }
                    let labels_match = match (&legacy.labels, &only.labels) {
                        (None, None) => true,
                        (Some(l), Some(r)) => super::kind::labels_equal(l, r),
                        (Some(l), None) | (None, Some(l)) => l.labels.is_empty(),
                    };
                    if !labels_match {
                        return Err(invalid(
                            "Invalid resource format: 'Resource.reservation.labels' does not match the labels in 'Resource.reservations'",
                        ));
                    }
                }
            }
            ReservationType::Unknown => {
                return Err(invalid("Unsupported 'Resource.ReservationInfo.Type'"));
            }
        }
    } else {
        if resource.role.is_some() {
            return Err(invalid(
                "Invalid resource format: 'Resource.role' must not be set if there is more than one reservation in 'Resource.reservations'",
            ));
        }
        if resource.reservation.is_some() {
            return Err(invalid(
                "Invalid resource format: 'Resource.reservation' must not be set if there is more than one reservation in 'Resource.reservations'",
            ));
        }
    }
    Ok(())
}

/// Checks a role name (`*`, or `/`-separated components that are not
/// empty, `.`, `..` or `*`, do not start with `-` and hold no whitespace).
pub fn validate_role(role: &str) -> Result<(), ResourceError> {
    if role == "*" {
        return Ok(());
    }
    if role.starts_with('/') {
        return Err(invalid(format!("Role '{role}' cannot start with a slash")));
    }
    if role.ends_with('/') {
        return Err(invalid(format!("Role '{role}' cannot end with a slash")));
    }
    if role.contains("//") {
        return Err(invalid(format!(
            "Role '{role}' cannot contain two adjacent slashes"
        )));
    }
    if role.is_empty() {
        return Err(invalid("Role names cannot be the empty string"));
    }
    for component in role.split('/') {
        if component == "." || component == ".." || component == "*" {
            return Err(invalid(format!(
                "Role '{role}' cannot include '{component}' as a component"
            )));
        }
        if component.starts_with('-') {
            return Err(invalid(format!(
                "Role component '{component}' is invalid because it starts with a dash"
            )));
        }
        if component
            .bytes()
            .any(|b| matches!(b, 0x09..=0x0d | 0x20 | 0x7f))
        {
            return Err(invalid(format!(
                "Role component '{component}' is invalid because it contains backspace or whitespace"
            )));
        }
    }
    Ok(())
}

/// Whether `role` is strictly below `ancestor` in the role tree (`a/b` is
/// below `a`).
pub fn is_strict_subrole(role: &str, ancestor: &str) -> bool {
    role.len() > ancestor.len()
        && role.starts_with(ancestor)
        && role.as_bytes()[ancestor.len()] == b'/'
}

/// Converts a (valid) resource to the reservation-stack format, the one
/// [`super::Resources`] keeps: a legacy `role` other than `*` becomes one
/// reservation, STATIC, or DYNAMIC when `reservation` is set.
pub fn upgrade(resource: &mut Resource) {
    if !resource.reservations.is_empty() {
        resource.role = None;
        resource.reservation = None;
        return;
    }
    let role = resource.role.take().unwrap_or_else(|| "*".into());
    let legacy = resource.reservation.take();
    if role == "*" {
        return;
    }
    let mut reservation = legacy.as_deref().cloned().unwrap_or_default();
    reservation.r#type = Some(if legacy.is_some() {
        ReservationType::Dynamic as i32
    } else {
        ReservationType::Static as i32
    });
    reservation.role = Some(role);
    resource.reservations.push(reservation);
}

/// Converts a resource in the stack format to the legacy one, for
/// frameworks without the RESERVATION_REFINEMENT capability. Refined
/// reservations (more than one) have no legacy form.
pub fn downgrade(resource: &mut Resource) -> Result<(), ResourceError> {
    match resource.reservations.len() {
        0 => resource.role = Some("*".into()),
        1 => {
            let only = resource.reservations.remove(0);
            if only.r#type() == ReservationType::Dynamic {
                resource.reservation = Some(Box::new(ReservationInfo {
                    principal: only.principal.clone(),
                    labels: only.labels.clone(),
                    ..Default::default()
                }));
            }
            resource.role = only.role;
        }
        _ => {
            return Err(invalid(
                "Cannot downgrade resources containing refined reservations",
            ));
        }
    }
    Ok(())
}
