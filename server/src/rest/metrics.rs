//! `/ws/v1/metrics`: Prometheus text with YuniKorn's metric names, built on each
//! scrape into a registry of its own (no global registry): gauges from the
//! published snapshots, counters and the latency histogram from the core's
//! atomics.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use unisched_core::scheduler::observe::{LATENCY_BUCKETS_MS, Metrics};
use unisched_core::snapshot::{PartitionSnapshot, ResourceMap};

/// The core's pass latency buckets, exposed as a histogram in milliseconds.
#[derive(Debug)]
struct Latency {
    sum_ms: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl Latency {
    fn of(m: &Metrics) -> Self {
        Self {
            sum_ms: m.pass_nanos.load(Ordering::Relaxed) as f64 / 1e6,
            count: m.passes.load(Ordering::Relaxed),
            buckets: LATENCY_BUCKETS_MS
                .iter()
                .zip(&m.pass_buckets)
                .map(|(bound, n)| (*bound, n.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum_ms, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

fn counter_family<L: Clone + std::hash::Hash + Eq>(
    values: impl IntoIterator<Item = (L, u64)>,
) -> Family<L, Counter> {
    let family = Family::<L, Counter>::default();
    for (label, v) in values {
        family.get_or_create(&label).inc_by(v);
    }
    family
}

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

/// Renders the metrics of `partitions` and the core's counters in the
/// OpenMetrics text format.
pub fn render(
    partitions: &[Arc<PartitionSnapshot>],
    counters: &Metrics,
) -> Result<String, std::fmt::Error> {
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
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let state = |s: &str| StateLabel {
        state: s.to_string(),
    };
    // Counters get their `_total` suffix from the encoder.
    registry.register(
        "yunikorn_scheduler_container_allocation_attempt",
        "Attempts to allocate containers by outcome (allocated, rejected, failed, released)",
        counter_family([
            (state("allocated"), load(&counters.allocated)),
            (state("rejected"), load(&counters.rejected)),
            (state("failed"), load(&counters.failed)),
            (state("released"), load(&counters.released)),
        ]),
    );
    let result = |s: &str| ResultLabel {
        result: s.to_string(),
    };
    registry.register(
        "yunikorn_scheduler_application_submission",
        "Application submissions by result",
        counter_family([
            (result("accepted"), load(&counters.apps_accepted)),
            (result("rejected"), load(&counters.apps_rejected)),
        ]),
    );
    registry.register(
        "yunikorn_scheduler_application_transition",
        "Application state changes reported to RMs, by new state",
        counter_family(
            counters
                .app_transitions()
                .into_iter()
                .map(|(s, n)| (state(&s), n)),
        ),
    );
    registry.register(
        "yunikorn_scheduler_node_registration",
        "Nodes accepted and rejected",
        counter_family([
            (result("accepted"), load(&counters.nodes_accepted)),
            (result("rejected"), load(&counters.nodes_rejected)),
        ]),
    );
    registry.register(
        "yunikorn_scheduler_scheduling_latency_milliseconds",
        "Latency of one scheduling round of the loop",
        Latency::of(counters),
    );
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

/// `GET /ws/v1/metrics`.
pub async fn route(
    axum::extract::State(state): axum::extract::State<super::RestState>,
) -> super::ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let snaps = super::all_snapshots(&state).await?;
    let text = render(&snaps, state.scheduler.metrics()).map_err(super::ApiError::internal)?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
