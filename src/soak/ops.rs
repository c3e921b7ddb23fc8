//! The operations the simulated RM performs, and their seeded generation.
//!
//! An operation names its targets by *pick* numbers, resolved against the RM's
//! model when it runs (the pick-th node, app, ask or allocation, modulo how many
//! there are). So any sub-list of a generated list is still a valid run: that is
//! what lets a failing run shrink by deleting operations.

use std::fmt;

use crate::workload::rng::Rng;

/// Leaf queues apps are submitted to; the last two are refused (unknown, parent).
pub const QUEUES: &[&str] = &["root.a", "root.b.b1", "root.b.b2", "root.nope", "root.b"];

/// One step of the simulated RM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// CREATE `node-{node}` (refused when it exists).
    NodeCreate {
        /// Node number.
        node: u32,
        /// Memory capacity.
        memory: i64,
        /// vcore capacity (milli).
        vcore: i64,
    },
    /// UPDATE a node's capacity and occupied memory.
    NodeUpdate {
        /// Which node.
        pick: u32,
        /// New memory capacity.
        memory: i64,
        /// New vcore capacity (milli).
        vcore: i64,
        /// New occupied memory.
        occupied: i64,
    },
    /// DRAIN_NODE.
    NodeDrain {
        /// Which node.
        pick: u32,
    },
    /// DRAIN_TO_SCHEDULABLE (refused when not draining).
    NodeSchedulable {
        /// Which node.
        pick: u32,
    },
    /// DECOMISSION: the node goes, its allocations are released.
    NodeDecommission {
        /// Which node.
        pick: u32,
    },
    /// Adds an app to `QUEUES[queue]`.
    AppAdd {
        /// Index into [`QUEUES`].
        queue: u8,
    },
    /// Removes an app.
    AppRemove {
        /// Which app.
        pick: u32,
    },
    /// A new ask.
    AskAdd {
        /// Which app.
        app: u32,
        /// Memory per allocation.
        memory: i64,
        /// vcore per allocation (milli).
        vcore: i64,
        /// maxAllocations.
        max: i32,
        /// Priority.
        priority: i32,
    },
    /// The same key sent again with new values.
    AskUpdate {
        /// Which ask.
        pick: u32,
        /// Memory per allocation.
        memory: i64,
        /// vcore per allocation (milli).
        vcore: i64,
        /// maxAllocations.
        max: i32,
    },
    /// An ask the core must refuse: 0 negative, 1 zero, 2 unknown app, 3 negative max.
    AskBad {
        /// Which app.
        app: u32,
        /// Kind of bad input.
        kind: u8,
    },
    /// Releases one ask by key.
    AskRelease {
        /// Which ask.
        pick: u32,
    },
    /// Releases every ask of an app (key left empty).
    AskReleaseApp {
        /// Which app.
        app: u32,
    },
    /// Releases one allocation by id.
    ReleaseById {
        /// Which allocation.
        pick: u32,
    },
    /// Releases the allocations of one key.
    ReleaseByKey {
        /// Which allocation (its key is used).
        pick: u32,
    },
    /// Releases every allocation of an app.
    ReleaseApp {
        /// Which app.
        app: u32,
    },
    /// Releases an allocation id that does not exist.
    ReleaseUnknown {
        /// Which app.
        app: u32,
    },
    /// Reloads a valid configuration (see `rm::VALID_CONFIGS`).
    Reload {
        /// Which one.
        variant: u8,
    },
    /// Reloads an invalid configuration (see `rm::INVALID_CONFIGS`).
    ReloadInvalid {
        /// Which one.
        variant: u8,
    },
    /// Reloads while the configuration source fails.
    ReloadUnavailable,
    /// Registers the RM again; it then re-reports apps, nodes with their
    /// allocations, and pending asks.
    ReRegister,
    /// Adds a gang application (placeholderAsk, gangSchedulingStyle, maybe
    /// executionTimeoutMilliSeconds) and its placeholder asks, one per task group.
    GangAppAdd {
        /// Index into [`QUEUES`] (valid leaves only).
        queue: u8,
        /// Hard style (else Soft).
        hard: bool,
        /// executionTimeoutMilliSeconds (0: none, default 15 minutes).
        timeout_ms: i64,
        /// Number of task groups.
        groups: u8,
        /// Memory per placeholder.
        memory: i64,
        /// vcore per placeholder (milli).
        vcore: i64,
        /// Placeholders per group.
        count: i32,
    },
    /// The real ask of one task group of a gang application (`real-{app}-tg{n}`),
    /// as large as its placeholders or larger.
    GangRealAsk {
        /// Which gang application.
        app: u32,
        /// Which task group.
        group: u8,
        /// Larger than the placeholder.
        larger: bool,
    },
    /// Advances the virtual clock.
    Advance {
        /// By this many milliseconds.
        millis: u64,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Generates `steps` operations from `seed`; `nodes` bounds node numbers.
pub fn generate(seed: u64, steps: usize, nodes: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed ^ 0x005e_ed0f_50a4);
    let node_ids = (nodes as u64 * 2).max(2);
    (0..steps).map(|_| one(&mut rng, node_ids)).collect()
}

fn pick(rng: &mut Rng) -> u32 {
    rng.below(1 << 16) as u32
}

fn one(rng: &mut Rng, node_ids: u64) -> Op {
    let roll = rng.below(1100);
    match roll {
        0..=29 => Op::NodeCreate {
            node: rng.below(node_ids) as u32,
            memory: 100 + 50 * rng.below(7) as i64,
            vcore: 10_000 + 2_000 * rng.below(16) as i64,
        },
        30..=49 => Op::NodeUpdate {
            pick: pick(rng),
            memory: 100 + 50 * rng.below(7) as i64,
            vcore: 10_000 + 2_000 * rng.below(16) as i64,
            occupied: 10 * rng.below(4) as i64,
        },
        50..=64 => Op::NodeDrain { pick: pick(rng) },
        65..=84 => Op::NodeSchedulable { pick: pick(rng) },
        85..=94 => Op::NodeDecommission { pick: pick(rng) },
        95..=164 => Op::AppAdd {
            queue: if rng.chance(0.1) {
                3 + rng.below(2) as u8
            } else {
                rng.below(3) as u8
            },
        },
        165..=184 => Op::AppRemove { pick: pick(rng) },
        185..=474 => Op::AskAdd {
            app: pick(rng),
            memory: 10 + 10 * rng.below(12) as i64,
            vcore: 500 + 500 * rng.below(16) as i64,
            max: if rng.chance(0.75) {
                1
            } else {
                2 + rng.below(3) as i32
            },
            priority: rng.below(3) as i32,
        },
        475..=514 => Op::AskUpdate {
            pick: pick(rng),
            memory: 10 + 10 * rng.below(12) as i64,
            vcore: 500 + 500 * rng.below(16) as i64,
            max: 1 + rng.below(4) as i32,
        },
        515..=529 => Op::AskBad {
            app: pick(rng),
            kind: rng.below(4) as u8,
        },
        530..=569 => Op::AskRelease { pick: pick(rng) },
        570..=579 => Op::AskReleaseApp { app: pick(rng) },
        580..=699 => Op::ReleaseById { pick: pick(rng) },
        700..=749 => Op::ReleaseByKey { pick: pick(rng) },
        750..=769 => Op::ReleaseApp { app: pick(rng) },
        770..=779 => Op::ReleaseUnknown { app: pick(rng) },
        780..=814 => Op::Reload {
            variant: rng.below(256) as u8,
        },
        815..=829 => Op::ReloadInvalid {
            variant: rng.below(256) as u8,
        },
        830..=834 => Op::ReloadUnavailable,
        835..=849 => Op::ReRegister,
        1000..=1039 => Op::GangAppAdd {
            queue: rng.below(3) as u8,
            hard: rng.chance(0.5),
            timeout_ms: if rng.chance(0.5) {
                5_000 + 5_000 * rng.below(12) as i64
            } else {
                0
            },
            groups: 1 + rng.below(2) as u8,
            memory: 10 + 10 * rng.below(6) as i64,
            vcore: 500 + 500 * rng.below(8) as i64,
            count: 1 + rng.below(3) as i32,
        },
        1040..=1099 => Op::GangRealAsk {
            app: pick(rng),
            group: rng.below(2) as u8,
            larger: rng.chance(0.2),
        },
        _ => Op::Advance {
            millis: if rng.chance(0.3) {
                31_000
            } else {
                100 + rng.below(5_000)
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_fixed_by_the_seed() {
        assert_eq!(generate(3, 200, 4), generate(3, 200, 4));
        assert_ne!(generate(3, 200, 4), generate(4, 200, 4));
    }
}
