//! Small builders for the SI wire messages the workloads send. Resources are
//! given as `(name, quantity)` pairs in wire units (vcore in milli-cores).

use unisched_si as si;

/// A wire resource from `(name, quantity)` pairs.
pub fn resource(pairs: &[(&str, i64)]) -> si::Resource {
    si::Resource {
        resources: pairs
            .iter()
            .map(|(name, value)| ((*name).to_string(), si::Quantity { value: *value }))
            .collect(),
    }
}

/// A new node with a schedulable capacity.
pub fn node(id: String, capacity: &[(&str, i64)]) -> si::NodeInfo {
    si::NodeInfo {
        node_id: id,
        action: si::node_info::ActionFromRm::Create as i32,
        schedulable_resource: Some(resource(capacity)),
        ..Default::default()
    }
}

/// A new application for `queue`, owned by `user`.
pub fn app(id: String, queue: &str, partition: &str, user: &str) -> si::AddApplicationRequest {
    si::AddApplicationRequest {
        application_id: id,
        queue_name: queue.to_string(),
        partition_name: partition.to_string(),
        ugi: Some(si::UserGroupInformation {
            user: user.to_string(),
            groups: vec!["workload".to_string()],
        }),
        ..Default::default()
    }
}

/// An ask for one allocation.
pub fn ask(
    key: String,
    app_id: &str,
    partition: &str,
    size: &[(&str, i64)],
    priority: i32,
) -> si::AllocationAsk {
    si::AllocationAsk {
        allocation_key: key,
        application_id: app_id.to_string(),
        partition_name: partition.to_string(),
        resource_ask: Some(resource(size)),
        max_allocations: 1,
        priority,
        ..Default::default()
    }
}

/// An allocation that already runs on a node (reported with the node).
pub fn existing_allocation(
    key: String,
    app_id: &str,
    partition: &str,
    node_id: &str,
    size: &[(&str, i64)],
) -> si::Allocation {
    si::Allocation {
        allocation_id: format!("{key}-0"),
        allocation_key: key,
        application_id: app_id.to_string(),
        partition_name: partition.to_string(),
        node_id: node_id.to_string(),
        resource_per_alloc: Some(resource(size)),
        ..Default::default()
    }
}
