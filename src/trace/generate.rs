//! The synthetic trace `unisched simulate` replays without `--trace`
//! (`--generate`): nodes of three sizes up from the start, applications
//! round-robin over the configuration's leaf queues, and tasks of mixed sizes,
//! priorities and run times arriving at random over the span. Everything
//! comes from one seed.

use super::{AskRecord, Event, Trace, TraceApp, TraceBuilder};
use crate::workload::Rng;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;
const MINUTE_MS: u64 = 60_000;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Nodes, all up from the start.
    pub nodes: usize,
    /// Tasks (allocations) asked for over the span.
    pub tasks: usize,
    /// Applications the tasks are spread over.
    pub apps: usize,
    /// Seed of every choice.
    pub seed: u64,
    /// Tasks arrive in `0..span_ms`.
    pub span_ms: u64,
    /// Most tasks in one record (an ask for several allocations).
    pub max_tasks_per_ask: u32,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            nodes: 1_000,
            tasks: 50_000,
            apps: 20,
            seed: 42,
            span_ms: 60 * MINUTE_MS,
            max_tasks_per_ask: 8,
        }
    }
}

/// A run time: mostly minutes, a quarter up to an hour, a few hours long.
fn duration_ms(rng: &mut Rng) -> u64 {
    let (low, high) = match rng.below(100) {
        0..70 => (MINUTE_MS, 10 * MINUTE_MS),
        70..95 => (10 * MINUTE_MS, 60 * MINUTE_MS),
        _ => (60 * MINUTE_MS, 240 * MINUTE_MS),
    };
    low + rng.below(high - low)
}

/// Generates the trace for `options` with applications in `leaves` (queue
/// paths; at least one).
pub fn generate(options: &GenerateOptions, leaves: &[String]) -> Trace {
    let mut rng = Rng::new(options.seed);
    let mut trace = TraceBuilder::new(
        format!(
            "generated: {} nodes, {} tasks, {} apps, seed {}",
            options.nodes, options.tasks, options.apps, options.seed
        ),
        false,
    );
    let node_shapes = [(8_000, 32 * GIB), (16_000, 64 * GIB), (32_000, 128 * GIB)];
    for i in 0..options.nodes {
        let (vcore, memory) = *rng.pick(&node_shapes);
        let size = vec![("vcore".to_string(), vcore), ("memory".to_string(), memory)];
        trace.node_up(0, &format!("node-{i:05}"), size);
    }
    let apps: Vec<u32> = (0..options.apps.max(1))
        .map(|i| {
            trace.app(TraceApp {
                id: format!("app-{i:03}"),
                queue: leaves
                    .get(i % leaves.len().max(1))
                    .cloned()
                    .unwrap_or_default(),
                user: format!("user-{}", i % 5),
                groups: vec!["workload".to_string()],
                ..TraceApp::default()
            })
        })
        .collect();
    let vcores = [250, 500, 1_000, 1_000, 2_000, 4_000];
    let memories = [256 * MIB, 512 * MIB, GIB, 2 * GIB, 4 * GIB, 8 * GIB];
    let priorities = [0, 0, 10, 100];
    let mut left = options.tasks;
    while left > 0 {
        let count = (1 + rng.below(u64::from(options.max_tasks_per_ask.max(1)))) as usize;
        let count = count.min(left);
        left -= count;
        let size = trace.size(vec![
            ("vcore".to_string(), *rng.pick(&vcores)),
            ("memory".to_string(), *rng.pick(&memories)),
        ]);
        let time = rng.below(options.span_ms.max(1));
        let ask = AskRecord {
            app: *rng.pick(&apps),
            size,
            count: count as u32,
            duration_ms: duration_ms(&mut rng),
            priority: *rng.pick(&priorities),
            task_group: 0,
            placeholder: false,
            preempt_self: true,
            preempt_other: true,
        };
        trace.push(i64::try_from(time).unwrap_or(i64::MAX), Event::Ask(ask));
    }
    trace.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_sized() {
        let options = GenerateOptions {
            nodes: 50,
            tasks: 1_001,
            apps: 7,
            ..GenerateOptions::default()
        };
        let leaves = [
            "root.a".to_string(),
            "root.b".to_string(),
            "root.c".to_string(),
        ];
        let a = generate(&options, &leaves);
        let b = generate(&options, &leaves);
        assert_eq!(a.records, b.records);
        assert_eq!(a.task_count(), 1_001);
        assert_eq!(a.nodes.len(), 50);
        assert_eq!(a.apps.len(), 7);
        let queues: std::collections::BTreeSet<_> =
            a.apps.iter().map(|a| a.queue.as_str()).collect();
        assert_eq!(queues.len(), 3);
        assert!(a.span_ms() < options.span_ms);
        let other = generate(&GenerateOptions { seed: 7, ..options }, &leaves);
        assert_ne!(a.records, other.records);
    }
}
