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

/// What one pass cost (see [`Fixture::schedule_pass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassCost {
    /// Allocations made.
    pub made: usize,
    /// Asks tried one by one.
    pub asks_tried: usize,
    /// Applications passed over because no pending ask fits their queue.
    pub apps_passed_over: usize,
}

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

    /// One scheduling pass at time `now` (allocations as the loop makes
    /// them, no reservation delay reached): (allocations made, asks tried
    /// one by one, applications passed over without a walk).
    pub fn schedule_pass(&mut self, now: u64) -> PassCost {
        let mut ctx = super::allocate::PassContext::new(now, usize::MAX, u64::MAX, None);
        let made = self.partition.schedule(&mut ctx);
        self.partition.outbox = Default::default();
        PassCost {
            made,
            asks_tried: ctx.asks_tried,
            apps_passed_over: ctx.apps_passed_over,
        }
    }

    /// Releases every allocation of application `i` (as an RM's release
    /// request does), so its queue has headroom again.
    pub fn release_all(&mut self, i: usize, now: u64) {
        let app = self.apps[i % self.apps.len()];
        let id = self.partition.apps[app].id.to_string();
        let request = si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release: vec![si::AllocationRelease {
                    partition_name: "default".into(),
                    application_id: id,
                    termination_type: si::TerminationType::StoppedByRm as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            rm_id: "bench".into(),
            ..Default::default()
        };
        let prepared = prepare_allocation_request(&self.names, request);
        for release in prepared.releases.allocations_to_release {
            self.partition.release_allocations(release, now);
        }
        self.partition.outbox = Default::default();
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

    /// A one-allocation ask `k{i}` of application `app` for `vcore` vcore.
    fn vcore_ask(i: usize, vcore: i64, priority: i32) -> si::AllocationAsk {
        si::AllocationAsk {
            allocation_key: format!("k{i}"),
            application_id: "app".into(),
            partition_name: "default".into(),
            resource_ask: Some(si::Resource {
                resources: [("vcore".to_string(), si::Quantity { value: vcore })].into(),
            }),
            max_allocations: 1,
            priority,
            ..Default::default()
        }
    }

    /// Partition with root.a at `max_vcore`, three nodes of `node_vcore`
    /// (wire units) and application `app` with `asks`.
    fn fixture_with(asks: Vec<si::AllocationAsk>, max_vcore: i64, node_vcore: i64) -> Fixture {
        let config = CONFIG.replace("max: {vcore: 100}", &format!("max: {{vcore: {max_vcore}}}"));
        let node = |i: usize| si::NodeInfo {
            node_id: format!("n{i}"),
            action: si::node_info::ActionFromRm::Create as i32,
            schedulable_resource: Some(si::Resource {
                resources: [("vcore".to_string(), si::Quantity { value: node_vcore })].into(),
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
        Fixture::new(
            &config,
            (0..3).map(node).collect(),
            vec![app],
            asks,
            &[("vcore", 1000)],
        )
        .expect("fixture")
    }

    fn fixture() -> Fixture {
        fixture_with(vec![vcore_ask(0, 1000, 0)], 100, 8000)
    }

    /// A queue at its max with a backlog: a pass tries the asks that fit
    /// and then passes the application over with one check, instead of
    /// trying each of the asks left; once the queue has room again the
    /// backlog is walked (and allocated) as before.
    #[test]
    fn a_queue_at_its_max_costs_one_check_per_pass_not_a_walk() {
        // root.a has max 100 vcore: 100 one-vcore asks fit, 900 wait.
        let asks = (0..1_000).map(|i| vcore_ask(i, 1_000, 0)).collect();
        let mut f = fixture_with(asks, 100, 80_000);
        let first = f.schedule_pass(1);
        assert_eq!(first.made, 100);
        assert_eq!(
            (first.asks_tried, first.apps_passed_over),
            (100, 1),
            "the asks that fit are tried, then the application is passed over"
        );
        for t in 2..5 {
            let cost = f.schedule_pass(t);
            assert_eq!(
                cost,
                PassCost {
                    made: 0,
                    asks_tried: 0,
                    apps_passed_over: 1
                }
            );
        }
        // Room again: the backlog is tried and placed up to the max.
        f.release_all(0, 5);
        let after = f.schedule_pass(6);
        assert_eq!((after.made, after.asks_tried), (100, 100));
    }

    /// The floor is a bound of the smallest pending ask, not of the last:
    /// a small ask behind large ones still gets its chance when the large
    /// ones no longer fit.
    #[test]
    fn a_small_ask_behind_large_ones_is_still_tried() {
        // max 10 vcore: two 4-vcore asks first (priority), then 4-vcore
        // asks that no longer fit, then a 2-vcore ask that does.
        let mut asks: Vec<_> = (0..50).map(|i| vcore_ask(i, 4_000, 1)).collect();
        asks.push(vcore_ask(50, 2_000, 0));
        let mut f = fixture_with(asks, 10, 80_000);
        let first = f.schedule_pass(1);
        assert_eq!(first.made, 3, "two large asks and the small one");
        // 10 of 10 vcore used: nothing fits, the next pass walks nothing.
        let second = f.schedule_pass(2);
        assert_eq!((second.made, second.asks_tried), (0, 0));
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
