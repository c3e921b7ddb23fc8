//! Operations on offered resources other than launches: what RESERVE,
//! UNRESERVE, CREATE, DESTROY, GROW_VOLUME and SHRINK_VOLUME consume of an
//! offer and turn it into (the master applies them at once, as upstream does
//! for an agent's own resources), checked as upstream's validation does; and
//! the operations the master keeps for operation feedback.
//!
//! Conversions are pure functions of the operation and what the agent holds;
//! `accept.rs` applies them to the offer's remainder and the agent's total.

use std::collections::BTreeSet;

use super::status::StatusStream;
use crate::resources::{Resources, reservation_role};
use crate::v1;
use crate::v1::offer::operation::Type as Op;
use crate::v1::resource::reservation_info::Type as ReservationType;

/// What an operation takes of an offer and what it gives back in its place,
/// both allocated to the offer's role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversion {
    /// Taken out of the offer (and the agent's total).
    pub consumed: Resources,
    /// Put in its place.
    pub converted: Resources,
}

/// What an operation may need to know of the agent.
pub struct AgentView<'a> {
    /// Everything the agent has (unallocated form).
    pub total: &'a Resources,
    /// What its tasks hold (unallocated form).
    pub used: &'a Resources,
}

/// The roles a framework may act for (or an operator: any role).
pub struct Roles<'a> {
    /// Its roles.
    pub roles: &'a [String],
    /// Whether it has the SHARED_RESOURCES capability.
    pub shared_resources: bool,
    /// An operator's operation (the operator API): resources unallocated,
    /// reserved for any role.
    pub operator: bool,
}

fn resources_of(list: &[v1::Resource], what: &str) -> Result<Resources, String> {
    Resources::validate(list).map_err(|e| format!("Invalid {what}: {e}"))?;
    if list.is_empty() {
        return Err(format!("Invalid {what}: no resources"));
    }
    let providers: BTreeSet<Option<&str>> = list
        .iter()
        .map(|r| r.provider_id.as_ref().map(|p| p.value.as_str()))
        .collect();
    if providers.len() > 1 {
        return Err(format!(
            "Invalid {what}: resources of more than one resource provider"
        ));
    }
    Ok(Resources::from_vec(list.to_vec()))
}

fn is_dynamically_reserved(r: &v1::Resource) -> bool {
    r.reservations
        .last()
        .is_some_and(|last| last.r#type() == ReservationType::Dynamic)
}

fn is_persistent_volume(r: &v1::Resource) -> bool {
    r.disk.as_ref().is_some_and(|d| d.persistence.is_some())
}

/// The resource with its last (most refined) reservation taken off.
fn pop_reservation(r: &v1::Resource) -> v1::Resource {
    let mut out = r.clone();
    out.reservations.pop();
    out
}

/// A volume as the plain disk it was made from.
fn without_volume(r: &v1::Resource) -> v1::Resource {
    let mut out = r.clone();
    if let Some(disk) = &mut out.disk {
        disk.persistence = None;
        disk.volume = None;
        if disk.source.is_none() {
            out.disk = None;
        }
    }
    out.shared = None;
    out
}

fn allocation_role(r: &v1::Resource) -> Option<&str> {
    r.allocation_info.as_ref().and_then(|a| a.role.as_deref())
}

/// What a speculative operation (applied by the master at once) consumes and
/// converts. `Err` carries upstream's reason.
pub fn conversion(
    op: &v1::offer::Operation,
    roles: &Roles<'_>,
    agent: &AgentView<'_>,
) -> Result<Conversion, String> {
    match op.r#type() {
        Op::Reserve => {
            let reserve = op.reserve.as_ref().ok_or("Missing 'reserve'")?;
            let target = resources_of(&reserve.resources, "resources")?;
            for r in target.iter() {
                if !is_dynamically_reserved(r) {
                    return Err(format!(
                        "Resource {} is not dynamically reserved",
                        crate::resources::display_resource(r)
                    ));
                }
                if roles.operator {
                    if r.allocation_info.is_some() {
                        return Err("A reserve operation was attempted with an allocated resource, but the operator API only allows reservations to be made to unallocated resources".to_string());
                    }
                    continue;
                }
                let reserved = reservation_role(r).unwrap_or("*");
                let Some(allocated) = allocation_role(r) else {
                    return Err(
                        "A reserve operation was attempted on unallocated resources, but frameworks can only perform reservations on allocated resources".to_string(),
                    );
                };
                if allocated != reserved {
                    return Err(format!(
                        "A reserve operation was attempted for a resource with role '{reserved}', but the resource was allocated to role '{allocated}'"
                    ));
                }
                if !roles.roles.iter().any(|role| role == reserved) {
                    return Err(format!(
                        "A reserve operation was attempted for a resource with role '{reserved}', but the framework can only reserve resources with roles '{}'",
                        roles.roles.join(", ")
                    ));
                }
            }
            let consumed: Resources = if reserve.source.is_empty() {
                target.iter().map(pop_reservation).collect()
            } else {
                let source = resources_of(&reserve.source, "source")?;
                let plain = |r: &Resources| -> Resources {
                    r.iter()
                        .map(|x| {
                            let mut y = x.clone();
                            y.reservations.clear();
                            y
                        })
                        .collect()
                };
                if plain(&source) != plain(&target) {
                    return Err(
                        "Source and target resources should refer to identical resource quantities"
                            .to_string(),
                    );
                }
                source
            };
            Ok(Conversion {
                consumed,
                converted: target,
            })
        }
        Op::Unreserve => {
            let unreserve = op.unreserve.as_ref().ok_or("Missing 'unreserve'")?;
            let consumed = resources_of(&unreserve.resources, "resources")?;
            for r in consumed.iter() {
                if !is_dynamically_reserved(r) {
                    return Err(format!(
                        "Resource {} is not dynamically reserved",
                        crate::resources::display_resource(r)
                    ));
                }
                if is_persistent_volume(r) {
                    return Err(format!(
                        "A dynamically reserved persistent volume {} cannot be unreserved directly. Please destroy the persistent volume first then unreserve the resource",
                        crate::resources::display_resource(r)
                    ));
                }
            }
            let converted = consumed.iter().map(pop_reservation).collect();
            Ok(Conversion {
                consumed,
                converted,
            })
        }
        Op::Create => {
            let create = op.create.as_ref().ok_or("Missing 'create'")?;
            let volumes = resources_of(&create.volumes, "resources")?;
            let mut ids: BTreeSet<(String, String)> = agent
                .total
                .persistent_volumes()
                .iter()
                .filter_map(|v| persistence(v).map(|id| (role_of(v), id.to_string())))
                .collect();
            for v in volumes.iter() {
                let Some(id) = persistence(v) else {
                    return Err(format!(
                        "Not a persistent volume: {}",
                        crate::resources::display_resource(v)
                    ));
                };
                if v.name != "disk" {
                    return Err(format!(
                        "Not a persistent volume: resource '{}' is not a disk",
                        v.name
                    ));
                }
                if reservation_role(v).is_none() {
                    return Err("Not a persistent volume: persistent volumes cannot be created from unreserved resources".to_string());
                }
                if v.disk.as_ref().and_then(|d| d.volume.as_ref()).is_none() {
                    return Err("Not a persistent volume: expecting 'volume' to be set".to_string());
                }
                if !ids.insert((role_of(v), id.to_string())) {
                    return Err(format!(
                        "Persistence ID '{id}' is not unique among the volumes of role '{}'",
                        role_of(v)
                    ));
                }
                if v.shared.is_some() && !roles.shared_resources {
                    return Err(format!(
                        "Create volume operation for '{}' has been attempted by a framework with no SHARED_RESOURCES capability",
                        crate::resources::display_resource(v)
                    ));
                }
            }
            let consumed = volumes.iter().map(without_volume).collect();
            Ok(Conversion {
                consumed,
                converted: volumes,
            })
        }
        Op::Destroy => {
            let destroy = op.destroy.as_ref().ok_or("Missing 'destroy'")?;
            let volumes = resources_of(&destroy.volumes, "resources")?;
            for v in volumes.iter() {
                if !is_persistent_volume(v) {
                    return Err(format!(
                        "Not a persistent volume: {}",
                        crate::resources::display_resource(v)
                    ));
                }
                let plain = volumes.unallocated();
                if !agent.total.contains(&plain) {
                    return Err("Persistent volumes not found".to_string());
                }
                if agent.used.contains_resource(&without_allocation(v)) {
                    return Err("Persistent volumes in use".to_string());
                }
            }
            let converted = volumes.iter().map(without_volume).collect();
            Ok(Conversion {
                consumed: volumes,
                converted,
            })
        }
        Op::GrowVolume => {
            let grow = op.grow_volume.as_ref().ok_or("Missing 'grow_volume'")?;
            let volume: &v1::Resource = &grow.volume;
            let addition: &v1::Resource = &grow.addition;
            Resources::validate(std::slice::from_ref(volume))
                .map_err(|e| format!("Invalid resource in the 'GrowVolume.volume' field: {e}"))?;
            Resources::validate(std::slice::from_ref(addition))
                .map_err(|e| format!("Invalid resource in the 'GrowVolume.addition' field: {e}"))?;
            let add = addition.scalar.as_ref().map_or(0.0, |s| s.value);
            if add <= 0.0 {
                return Err(
                    "The size of 'GrowVolume.addition' field must be greater than zero".to_string(),
                );
            }
            if !is_persistent_volume(volume) {
                return Err(
                    "Invalid persistent volume in the 'GrowVolume.volume' field".to_string()
                );
            }
            if volume.shared.is_some() {
                return Err("Growing a shared persistent volume is not supported".to_string());
            }
            if without_volume(volume).disk != addition.disk
                || volume.reservations != addition.reservations
                || volume.provider_id != addition.provider_id
            {
                return Err(
                    "The 'GrowVolume.addition' field is not compatible with the volume".to_string(),
                );
            }
            let mut grown = volume.clone();
            if let Some(s) = &mut grown.scalar {
                s.value += add;
            }
            let mut consumed = Resources::from_vec(vec![volume.clone()]);
            consumed.add_resource(addition.clone());
            Ok(Conversion {
                consumed,
                converted: Resources::from_vec(vec![grown]),
            })
        }
        Op::ShrinkVolume => {
            let shrink = op.shrink_volume.as_ref().ok_or("Missing 'shrink_volume'")?;
            let volume: &v1::Resource = &shrink.volume;
            Resources::validate(std::slice::from_ref(volume))
                .map_err(|e| format!("Invalid resource in the 'ShrinkVolume.volume' field: {e}"))?;
            if !is_persistent_volume(volume) {
                return Err(
                    "Invalid persistent volume in the 'ShrinkVolume.volume' field".to_string(),
                );
            }
            if volume.shared.is_some() {
                return Err("Shrinking a shared persistent volume is not supported".to_string());
            }
            let size = volume.scalar.as_ref().map_or(0.0, |s| s.value);
            let by = shrink.subtract.value;
            if by <= 0.0 {
                return Err(
                    "The size of 'ShrinkVolume.subtract' field must be greater than zero"
                        .to_string(),
                );
            }
            if by >= size {
                return Err(
                    "The size of 'ShrinkVolume.subtract' field must be smaller than the size of the volume"
                        .to_string(),
                );
            }
            let mut shrunk = volume.clone();
            if let Some(s) = &mut shrunk.scalar {
                s.value = size - by;
            }
            let mut freed = without_volume(volume);
            if let Some(s) = &mut freed.scalar {
                s.value = by;
            }
            let mut converted = Resources::from_vec(vec![shrunk]);
            converted.add_resource(freed);
            Ok(Conversion {
                consumed: Resources::from_vec(vec![volume.clone()]),
                converted,
            })
        }
        other => Err(format!(
            "Operation {} is not a speculative operation",
            other.as_str_name()
        )),
    }
}

fn without_allocation(r: &v1::Resource) -> v1::Resource {
    let mut out = r.clone();
    out.allocation_info = None;
    out
}

fn persistence(r: &v1::Resource) -> Option<&str> {
    r.disk
        .as_ref()
        .and_then(|d| d.persistence.as_ref())
        .map(|p| p.id.as_str())
}

fn role_of(r: &v1::Resource) -> String {
    reservation_role(r).unwrap_or("*").to_string()
}

/// An operation a framework asked for with an operation id: its status
/// stream to the framework (reliable, as task status updates) and what it is.
#[derive(Debug)]
pub struct Operation {
    /// Framework id.
    pub framework: String,
    /// The framework's operation id.
    pub id: String,
    /// The master's uuid of the operation.
    pub uuid: Vec<u8>,
    /// Agent id.
    pub agent: String,
    /// Resource provider id, for an operation a provider applies.
    pub provider: Option<String>,
    /// The operation as asked for.
    pub info: v1::offer::Operation,
    /// Statuses, latest last.
    pub statuses: Vec<v1::OperationStatus>,
    /// Updates on their way to the framework.
    pub stream: StatusStream<v1::OperationStatus>,
    /// Resources it holds while a provider applies it (unallocated form).
    pub consumed: Resources,
}

impl Operation {
    /// The latest state.
    pub fn state(&self) -> v1::OperationState {
        self.statuses
            .last()
            .map_or(v1::OperationState::OperationPending, |s| s.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(text: &str, role: &str) -> Vec<v1::Resource> {
        let mut v = Resources::parse(text).unwrap().to_vec();
        for r in &mut v {
            r.allocation_info = Some(v1::resource::AllocationInfo {
                role: Some(role.to_string()),
            });
        }
        v
    }

    fn dynamic(mut v: Vec<v1::Resource>, role: &str) -> Vec<v1::Resource> {
        for r in &mut v {
            r.reservations.push(v1::resource::ReservationInfo {
                r#type: Some(ReservationType::Dynamic as i32),
                role: Some(role.to_string()),
                ..Default::default()
            });
        }
        v
    }

    fn op(kind: Op) -> v1::offer::Operation {
        v1::offer::Operation {
            r#type: Some(kind as i32),
            ..Default::default()
        }
    }

    fn check(op: v1::offer::Operation, roles: &[&str]) -> Result<Conversion, String> {
        let roles: Vec<String> = roles.iter().map(|s| s.to_string()).collect();
        let total = Resources::parse("cpus:4;mem:1024;disk:1000").unwrap();
        let used = Resources::default();
        conversion(
            &op,
            &Roles {
                roles: &roles,
                shared_resources: false,
                operator: false,
            },
            &AgentView {
                total: &total,
                used: &used,
            },
        )
    }

    #[test]
    fn reserve_and_unreserve_convert_between_unreserved_and_reserved() {
        let mut reserve = op(Op::Reserve);
        reserve.reserve = Some(v1::offer::operation::Reserve {
            resources: dynamic(res("cpus:1", "web"), "web"),
            source: vec![],
        });
        let c = check(reserve.clone(), &["web"]).unwrap();
        assert_eq!(c.consumed, Resources::from_vec(res("cpus:1", "web")));
        assert_eq!(c.converted.iter().next().unwrap().reservations.len(), 1);
        // Only for the framework's own role, on resources allocated to it.
        assert!(
            check(reserve.clone(), &["other"])
                .unwrap_err()
                .contains("can only reserve")
        );
        let mut elsewhere = reserve.clone();
        elsewhere.reserve.as_mut().unwrap().resources = dynamic(res("cpus:1", "web"), "db");
        assert!(
            check(elsewhere, &["web", "db"])
                .unwrap_err()
                .contains("allocated to role")
        );
        // Static reservations cannot be made by RESERVE.
        let mut unreserve = op(Op::Unreserve);
        unreserve.unreserve = Some(v1::offer::operation::Unreserve {
            resources: res("cpus(web):1", "web"),
        });
        assert!(
            check(unreserve.clone(), &["web"])
                .unwrap_err()
                .contains("not dynamically reserved")
        );
        unreserve.unreserve.as_mut().unwrap().resources = c.converted.to_vec();
        let back = check(unreserve, &["web"]).unwrap();
        assert_eq!(back.converted, c.consumed);
    }

    fn volume(id: &str, size: &str) -> Vec<v1::Resource> {
        let mut v = dynamic(res(&format!("disk:{size}"), "db"), "db");
        v[0].disk = Some(Box::new(v1::resource::DiskInfo {
            persistence: Some(v1::resource::disk_info::Persistence {
                id: id.to_string(),
                principal: None,
            }),
            volume: Some(v1::Volume {
                container_path: "data".to_string(),
                mode: v1::volume::Mode::Rw as i32,
                ..Default::default()
            }),
            source: None,
        }));
        v
    }

    #[test]
    fn create_and_destroy_volumes() {
        let mut create = op(Op::Create);
        create.create = Some(v1::offer::operation::Create {
            volumes: volume("v1", "100"),
        });
        let c = check(create.clone(), &["db"]).unwrap();
        assert!(c.consumed.iter().all(|r| r.disk.is_none()));
        assert_eq!(c.converted.persistent_volumes().len(), 1);
        // Not from unreserved disk.
        let mut bad = create.clone();
        bad.create.as_mut().unwrap().volumes[0].reservations.clear();
        assert!(check(bad, &["db"]).unwrap_err().contains("unreserved"));
        // Destroying a volume the agent does not have fails.
        let mut destroy = op(Op::Destroy);
        destroy.destroy = Some(v1::offer::operation::Destroy {
            volumes: volume("v1", "100"),
        });
        assert!(check(destroy, &["db"]).unwrap_err().contains("not found"));
    }

    #[test]
    fn grow_and_shrink_keep_the_disk_they_move() {
        let mut grow = op(Op::GrowVolume);
        let mut addition = dynamic(res("disk:50", "db"), "db").remove(0);
        addition.disk = None;
        grow.grow_volume = Some(v1::offer::operation::GrowVolume {
            volume: Box::new(volume("v1", "100").remove(0)),
            addition: Box::new(addition),
        });
        let c = check(grow, &["db"]).unwrap();
        assert_eq!(c.converted.disk(), Some(150.0));
        let mut shrink = op(Op::ShrinkVolume);
        shrink.shrink_volume = Some(v1::offer::operation::ShrinkVolume {
            volume: Box::new(volume("v1", "100").remove(0)),
            subtract: v1::value::Scalar { value: 30.0 },
        });
        let c = check(shrink.clone(), &["db"]).unwrap();
        assert_eq!(c.converted.disk(), Some(100.0));
        assert_eq!(c.converted.persistent_volumes().disk(), Some(70.0));
        shrink.shrink_volume.as_mut().unwrap().subtract.value = 100.0;
        assert!(check(shrink, &["db"]).is_err());
    }
}
