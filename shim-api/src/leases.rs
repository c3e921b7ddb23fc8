//! New allocations in the compact form the core makes them in, for an RM in
//! the same process that wants them without the wire form.
//!
//! The wire form of a new allocation (`si::Allocation`) owns a copy of four
//! ids and of its resource map. The core keeps each id once, shared, and
//! allocations of one size come in runs; a [`Lease`] shares them instead
//! (the ids are the core's own, the map one per run of equal sizes). An RM
//! that embeds the core and handles thousands of allocations a pass (the
//! Mesos front end turns every lease of an allocation run into an offer)
//! takes them through [`ResourceManagerCallback::update_leases`]; every other
//! RM gets the wire form through `update_allocation`, built from the same
//! leases by that method's default.
//!
//! [`ResourceManagerCallback::update_leases`]: crate::ResourceManagerCallback::update_leases

use std::collections::BTreeMap;
use std::sync::Arc;

use unisched_si as si;

/// The node attribute and application tag through which an RM in the same
/// process gives the core its own number for a node or an application (a
/// decimal `u64` other than 0). The core hands it back on every [`Lease`] of
/// that node and application (`node_handle`, `app_handle`), so such an RM
/// finds its record of them by number, without hashing and comparing their
/// ids (the Mesos front end makes an offer of each lease of a run of
/// thousands, and each of those lookups waited for memory). RMs that give
/// none get 0.
pub const RM_HANDLE: &str = "si.unisched.io/rm-handle";

/// The RM's number in an attribute or tag map (`RM_HANDLE`), or 0.
pub fn rm_handle<'a>(mut entries: impl Iterator<Item = (&'a String, &'a String)>) -> u64 {
    entries
        .find(|(k, _)| *k == RM_HANDLE)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// One new allocation, its strings shared with the core.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// Allocation key (the ask's).
    pub allocation_key: Arc<str>,
    /// Allocation id.
    pub allocation_id: Arc<str>,
    /// Node id.
    pub node_id: Arc<str>,
    /// Application id.
    pub application_id: Arc<str>,
    /// Resources held (one map shared by a run of allocations of one size).
    pub resource: Arc<si::Resource>,
    /// Gang task group (empty for none).
    pub task_group_name: String,
    /// Tags copied from the ask.
    pub tags: BTreeMap<String, String>,
    /// Priority of the ask.
    pub priority: i32,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Originator.
    pub originator: bool,
    /// The ask's preemption policy.
    pub preemption_policy: si::PreemptionPolicy,
    /// The RM's number of the node (its `RM_HANDLE` attribute), or 0.
    pub node_handle: u64,
    /// The RM's number of the application (its `RM_HANDLE` tag), or 0.
    pub app_handle: u64,
}

impl Lease {
    /// The wire form, naming partition `partition_name`.
    pub fn into_wire(self, partition_name: &str) -> si::Allocation {
        si::Allocation {
            allocation_key: String::from(&*self.allocation_key),
            allocation_tags: self.tags.into_iter().collect(),
            resource_per_alloc: Some(Arc::unwrap_or_clone(self.resource)),
            priority: self.priority,
            node_id: String::from(&*self.node_id),
            application_id: String::from(&*self.application_id),
            partition_name: partition_name.to_string(),
            task_group_name: self.task_group_name,
            placeholder: self.placeholder,
            allocation_id: String::from(&*self.allocation_id),
            originator: self.originator,
            preemption_policy: Some(self.preemption_policy),
        }
    }

    /// A lease of a wire allocation (for an RM that gets both forms and
    /// handles one).
    pub fn from_wire(allocation: si::Allocation) -> Lease {
        Lease {
            allocation_key: Arc::from(allocation.allocation_key),
            allocation_id: Arc::from(allocation.allocation_id),
            node_id: Arc::from(allocation.node_id),
            application_id: Arc::from(allocation.application_id),
            resource: Arc::new(allocation.resource_per_alloc.unwrap_or_default()),
            task_group_name: allocation.task_group_name,
            tags: allocation.allocation_tags.into_iter().collect(),
            priority: allocation.priority,
            placeholder: allocation.placeholder,
            originator: allocation.originator,
            preemption_policy: allocation.preemption_policy.unwrap_or_default(),
            node_handle: 0,
            app_handle: 0,
        }
    }
}

/// What one `update_allocation` call carries, its new allocations as leases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Leases {
    /// Releases and rejections (its `new` list is empty: the new
    /// allocations are in `new` below).
    pub response: si::AllocationResponse,
    /// New allocations, in the order the core made them.
    pub new: Vec<Lease>,
    /// The partition the wire form names.
    pub partition_name: String,
    /// A part of an allocation run that goes on: more of the same pass
    /// follows (see `update_allocation_partial`).
    pub partial: bool,
}

impl Leases {
    /// The wire response: the leases become its `new` list, in order.
    pub fn into_wire(self) -> si::AllocationResponse {
        let Leases {
            mut response,
            new,
            partition_name,
            partial: _,
        } = self;
        response.new.reserve(new.len());
        response
            .new
            .extend(new.into_iter().map(|l| l.into_wire(&partition_name)));
        response
    }

    /// The leases of a wire response (its `new` list taken out).
    pub fn from_wire(mut response: si::AllocationResponse, partial: bool) -> Leases {
        let new: Vec<si::Allocation> = std::mem::take(&mut response.new);
        let partition_name = new
            .first()
            .map(|a| a.partition_name.clone())
            .unwrap_or_default();
        Leases {
            response,
            new: new.into_iter().map(Lease::from_wire).collect(),
            partition_name,
            partial,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(i: u32) -> si::Allocation {
        si::Allocation {
            allocation_key: format!("ask-{i}"),
            allocation_tags: [("k".to_string(), format!("v{i}"))].into_iter().collect(),
            resource_per_alloc: Some(si::Resource {
                resources: [(
                    "vcore".to_string(),
                    si::Quantity {
                        value: i64::from(i),
                    },
                )]
                .into_iter()
                .collect(),
            }),
            priority: 3,
            node_id: format!("node-{i}"),
            application_id: "app".to_string(),
            partition_name: "[rm]default".to_string(),
            task_group_name: "tg".to_string(),
            placeholder: i.is_multiple_of(2),
            allocation_id: format!("ask-{i}-0"),
            originator: true,
            preemption_policy: Some(si::PreemptionPolicy {
                allow_preempt_self: true,
                allow_preempt_other: false,
            }),
        }
    }

    #[test]
    fn a_wire_response_comes_back_whole_through_leases() {
        let response = si::AllocationResponse {
            new: vec![wire(1), wire(2)],
            released: vec![si::AllocationRelease {
                allocation_id: "gone".to_string(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let leases = Leases::from_wire(response.clone(), true);
        assert!(leases.partial);
        assert_eq!(leases.new.len(), 2);
        assert!(leases.response.new.is_empty());
        assert_eq!(&*leases.new[1].node_id, "node-2");
        assert_eq!(leases.into_wire(), response);
    }

    #[test]
    fn leases_sharing_one_map_each_get_their_own_copy_on_the_wire() {
        let resource = Arc::new(wire(5).resource_per_alloc.unwrap());
        let mut a = Lease::from_wire(wire(5));
        a.resource = resource.clone();
        let b = Lease {
            allocation_id: Arc::from("other"),
            ..a.clone()
        };
        let (wa, wb) = (a.into_wire("p"), b.into_wire("p"));
        assert_eq!(wa.resource_per_alloc, wb.resource_per_alloc);
        assert_eq!(wa.resource_per_alloc.as_ref(), Some(&*resource));
        assert_eq!(wb.allocation_id, "other");
    }
}
