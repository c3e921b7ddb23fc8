//! `/ws/v1/metrics`: Prometheus text with YuniKorn's metric names, computed from
//! snapshots on each scrape into a registry of its own (no global registry).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueResourceLabels {
    partition: String,
    queue: String,
    state: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueAppLabels {
    partition: String,
    queue: String,
    state: String,
}

/// Renders the metrics of `partitions` in the OpenMetrics text format.
pub fn render(partitions: &[PartitionSnapshot]) -> Result<String, std::fmt::Error> {
    let apps = Family::<StateLabel, Gauge>::default();
    let nodes = Family::<StateLabel, Gauge>::default();
    let queue_resource = Family::<QueueResourceLabels, Gauge>::default();
    let queue_app = Family::<QueueAppLabels, Gauge>::default();
    for p in partitions {
        for a in &p.applications {
            apps.get_or_create(&StateLabel {
                state: a.state.to_lowercase(),
            })
            .inc();
            queue_app
                .get_or_create(&QueueAppLabels {
                    partition: p.name.clone(),
                    queue: a.queue.clone(),
                    state: a.state.to_lowercase(),
                })
                .inc();
        }
        for n in &p.nodes {
            let state = if n.schedulable { "active" } else { "draining" };
            nodes
                .get_or_create(&StateLabel {
                    state: state.to_string(),
                })
                .inc();
        }
        for q in &p.queues {
            let states: [(&str, &ResourceMap); 4] = [
                ("guaranteed", &q.guaranteed),
                ("max", &q.max),
                ("allocated", &q.allocated),
                ("pending", &q.pending),
            ];
            for (state, res) in states {
                for (resource, value) in res {
                    queue_resource
                        .get_or_create(&QueueResourceLabels {
                            partition: p.name.clone(),
                            queue: q.path.clone(),
                            state: state.to_string(),
                            resource: resource.clone(),
                        })
                        .set(*value);
                }
            }
        }
    }
    let mut registry = Registry::default();
    registry.register(
        "yunikorn_scheduler_application_total",
        "Applications by state, now",
        apps,
    );
    registry.register("yunikorn_scheduler_node", "Nodes by state", nodes);
    registry.register(
        "yunikorn_queue_resource",
        "Queue resources by state (guaranteed, max, allocated, pending)",
        queue_resource,
    );
    registry.register(
        "yunikorn_queue_app",
        "Applications per queue by state",
        queue_app,
    );
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}
