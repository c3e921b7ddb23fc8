//! Entry points for the criterion benches of the scheduling loop's hot pieces
//! (node index update, queue and application ordering, headroom). Not part of
//! the API: the partition is private, so the benches reach it through a
//! [`Fixture`] that builds one the way the loop does (configuration, nodes and
//! applications through the same request handling) and exposes one operation
//! per bench.

use std::sync::Arc;

use unisched_si as si;

use super::command::{prepare_allocation_request, prepare_nodes};
use super::objects::{AppId, NodeId, QueueId};
use super::partition::Partition;
use crate::resources::{Resource, ResourceNames};

/// A partition with nodes and applications, ready for one operation at a time.
pub struct Fixture {
    partition: Partition,
    names: Arc<ResourceNames>,
    nodes: Vec<NodeId>,
    apps: Vec<AppId>,
    leaves: Vec<QueueId>,
    size: Resource,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture")
            .field("nodes", &self.nodes.len())
            .field("apps", &self.apps.len())
            .finish_non_exhaustive()
    }
}

impl Fixture {
    /// Builds partition `default` of `config` with `nodes`, `apps` and `asks`
    /// added through the loop's own request handling (asks keep their
    /// applications and queues in the orderings). `size` is the resource the
    /// operations move around (wire units, e.g. `[("vcore", 1000)]`).
    pub fn new(
        config: &str,
        nodes: Vec<si::NodeInfo>,
        apps: Vec<si::AddApplicationRequest>,
        asks: Vec<si::AllocationAsk>,
        size: &[(&str, i64)],
    ) -> Result<Self, String> {
        let parsed = crate::config::parse(config).map_err(|e| e.to_string())?;
        let part_config = parsed
            .partitions
            .into_iter()
            .next()
            .ok_or("the configuration has no partition")?;
        let names = Arc::new(ResourceNames::new());
        let mut partition = Partition::new(
            Arc::from("[bench]default"),
            Arc::from("bench"),
            part_config,
            names.clone(),
        )
        .map_err(|e| e.to_string())?;
        let ids: Vec<String> = nodes.iter().map(|n| n.node_id.clone()).collect();
        for node in prepare_nodes(
            &names,
            si::NodeRequest {
                nodes,
                rm_id: "bench".into(),
            },
        ) {
            partition.node_action(node, 0);
        }
        let app_ids: Vec<String> = apps.iter().map(|a| a.application_id.clone()).collect();
        for app in apps {
            partition.add_application(app, 0);
        }
        let request = si::AllocationRequest {
            asks,
            rm_id: "bench".into(),
            ..Default::default()
        };
        for ask in prepare_allocation_request(&names, request).asks {
            partition.update_ask(ask, 0);
        }
        partition.rekey_dirty();
        if !partition.outbox.allocation.rejected.is_empty() {
            return Err(format!(
                "asks rejected: {:?}",
                partition.outbox.allocation.rejected.first()
            ));
        }
        let nodes: Vec<NodeId> = ids
            .iter()
            .filter_map(|id| partition.node_by_id.get(id.as_str()).copied())
            .collect();
        let apps: Vec<AppId> = app_ids
            .iter()
            .filter_map(|id| partition.app_by_id.get(id.as_str()).copied())
            .collect();
        if nodes.len() != ids.len() || apps.len() != app_ids.len() {
            return Err(format!(
                "{} of {} nodes and {} of {} applications were accepted",
                nodes.len(),
                ids.len(),
                apps.len(),
                app_ids.len()
            ));
        }
        let leaves = apps.iter().map(|&a| partition.apps[a].queue).collect();
        let wire = si::Resource {
            resources: size
                .iter()
                .map(|&(n, v)| (n.to_string(), si::Quantity { value: v }))
                .collect(),
        };
        let size = names.from_si(Some(&wire)).map_err(|e| e.to_string())?;
        // The benches measure one operation, not the responses to building.
        partition.outbox = Default::default();
        Ok(Self {
            partition,
            names,
            nodes,
            apps,
            leaves,
            size,
        })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of applications.
    pub fn app_count(&self) -> usize {
        self.apps.len()
    }

    /// Node index update: puts the size on node `i` for application `i` and
    /// takes it off again, re-keying the node in the sorted node index both
    /// times (what every allocation and release does to its node).
    pub fn node_index_update(&mut self, i: usize) {
        let node = self.nodes[i % self.nodes.len()];
        let app = self.apps[i % self.apps.len()];
        let size = self.size;
        self.partition.add_usage(app, node, &size, false);
        self.partition.remove_usage(app, node, &size, false);
    }

    /// Queue and application ordering: changes application `i`'s usage and
    /// re-keys it in its leaf and its leaf up to the root, then undoes it.
    pub fn queue_order_update(&mut self, i: usize) {
        let app = self.apps[i % self.apps.len()];
        let size = self.size;
        self.partition.apps[app].allocated.add_assign(&size);
        self.partition.rekey_app(app);
        self.partition.apps[app].allocated.sub_assign(&size);
        self.partition.rekey_app(app);
    }

    /// Headroom: whether the size fits under the maximums from application
    /// `i`'s leaf up to the root.
    pub fn headroom(&self, i: usize) -> bool {
        let leaf = self.leaves[i % self.leaves.len()];
        self.partition.fits_headroom(leaf, &self.size)
    }

    /// The resource names the fixture interned.
    pub fn resource_type_count(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {vcore: 100}
";

    fn fixture() -> Fixture {
        let node = |i: usize| si::NodeInfo {
            node_id: format!("n{i}"),
            action: si::node_info::ActionFromRm::Create as i32,
            schedulable_resource: Some(si::Resource {
                resources: [("vcore".to_string(), si::Quantity { value: 8000 })].into(),
            }),
            ..Default::default()
        };
        let app = si::AddApplicationRequest {
            application_id: "app".into(),
            queue_name: "root.a".into(),
            partition_name: "default".into(),
            ugi: Some(si::UserGroupInformation {
                user: "u".into(),
                groups: vec![],
            }),
            ..Default::default()
        };
        let ask = si::AllocationAsk {
            allocation_key: "k".into(),
            application_id: "app".into(),
            partition_name: "default".into(),
            resource_ask: Some(si::Resource {
                resources: [("vcore".to_string(), si::Quantity { value: 1000 })].into(),
            }),
            max_allocations: 1,
            ..Default::default()
        };
        Fixture::new(
            CONFIG,
            (0..3).map(node).collect(),
            vec![app],
            vec![ask],
            &[("vcore", 1000)],
        )
        .expect("fixture")
    }

    #[test]
    fn operations_leave_the_partition_as_they_found_it() {
        let mut f = fixture();
        assert_eq!((f.node_count(), f.app_count()), (3, 1));
        let before = f.partition.node_index.clone();
        let leaf = f.leaves[0];
        let order = f.partition.queues[leaf].app_order.sorted();
        assert_eq!(
            order.len(),
            1,
            "the app with a pending ask is in its leaf's order"
        );
        for i in 0..10 {
            f.node_index_update(i);
            f.queue_order_update(i);
        }
        assert_eq!(f.partition.node_index, before);
        assert_eq!(f.partition.queues[leaf].app_order.sorted(), order);
        let app = f.apps[0];
        assert!(f.partition.apps[app].allocated.is_zero());
        assert!(f.headroom(0));
        assert!(f.resource_type_count() >= 2);
    }
}
