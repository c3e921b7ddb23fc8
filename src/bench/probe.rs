//! What the machine is doing right now, for reading a benchmark's figures:
//! the time of one dependent load that misses the caches, of a loop that
//! touches no memory, and of a loop through one stack slot on two threads at
//! once (each vCPU's own speed).
//!
//! This VM's speed swings by about 1.7 times within minutes (BENCHMARKS.md).
//! On 2026-12-05 a chain of multiply-adds took 1.30-1.37 ns a step in every
//! run while a pointer chase over 16 MiB took anywhere from 44 to 151 ns:
//! the slow phases are the memory system's, shared with other guests. A W4 run waits on memory (tens of misses a lease), so its figures
//! follow the first number; `UNISCHED_W4_BREAKDOWN=1` prints them beside
//! each run.
//!
//! On 2026-12-06 the chain of multiply-adds still took 1.33-1.37 ns while a
//! loop that adds into one stack slot, run on two threads at once, took on
//! one of them up to twice its usual time, for tens of milliseconds: a vCPU
//! at times runs throughput-bound code at half speed (as a core shared with
//! a busy sibling would; the dependent chain leaves the core's other units
//! free, so it does not show it). A W4 run whose scheduling thread is on
//! that vCPU takes its instructions twice as long (BENCHMARKS.md).

use std::time::Instant;

/// The two probes, each a median of three.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Nanoseconds per step of a pointer chase through a random cycle over
    /// 16 MiB (beyond the L2 caches, within the L3 of this machine's host).
    pub chase_ns: f64,
    /// Nanoseconds per step of a chain of dependent multiply-adds.
    pub alu_ns: f64,
    /// Nanoseconds per step of an add into one stack slot, on each of two
    /// threads started together (slower first): the two vCPUs' speeds.
    pub pair_ns: [f64; 2],
}

/// Entries of the chase: 2 Mi `usize`s, 16 MiB on a 64-bit machine.
const CHASE_LEN: usize = 1 << 21;
/// Steps timed per chase.
const CHASE_STEPS: usize = 1 << 20;
/// Steps timed per multiply chain.
const ALU_STEPS: u64 = 1 << 24;
/// Steps timed per slot loop (about 4 ms at full speed on this VM).
const SLOT_STEPS: u64 = 1 << 23;

/// A random cyclic permutation of `0..n` (Sattolo's algorithm, a fixed
/// seed): following `next[i]` from anywhere visits every entry once.
fn cycle(n: usize) -> Vec<usize> {
    let mut next: Vec<usize> = (0..n).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = ((state >> 33) as usize) % i;
        next.swap(i, j);
    }
    next
}

fn chase(next: &[usize], steps: usize) -> f64 {
    let started = Instant::now();
    let mut at = 0;
    for _ in 0..steps {
        at = next[at];
    }
    std::hint::black_box(at);
    started.elapsed().as_secs_f64() * 1e9 / steps as f64
}

fn alu(steps: u64) -> f64 {
    let started = Instant::now();
    let mut x = std::hint::black_box(1u64);
    // Each step waits for the one before (kept a chain by `black_box`,
    // which the optimiser may not look through).
    for i in 0..steps {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    std::hint::black_box(x);
    started.elapsed().as_secs_f64() * 1e9 / steps as f64
}

fn slot_loop(steps: u64) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let started = Instant::now();
    // A relaxed atomic is a plain load and store the optimiser keeps (as a
    // volatile would be): each step a load of the slot, an add, a store.
    let slot = AtomicU64::new(0);
    // Its address escapes, so the loads and stores stay loads and stores.
    let slot = std::hint::black_box(&slot);
    for i in 0..steps {
        slot.store(slot.load(Relaxed).wrapping_add(i), Relaxed);
    }
    std::hint::black_box(slot.load(Relaxed));
    started.elapsed().as_secs_f64() * 1e9 / steps as f64
}

/// The slot loop on two threads at once, slower first (a thread that
/// cannot start falls back to this one running both in turn).
fn slot_pair(steps: u64) -> [f64; 2] {
    let other = std::thread::Builder::new()
        .name("unisched-probe".to_string())
        .spawn(move || slot_loop(steps));
    let here = slot_loop(steps);
    let there = match other {
        Ok(handle) => handle.join().unwrap_or(here),
        Err(_) => slot_loop(steps),
    };
    [here.max(there), here.min(there)]
}

fn median3(mut f: impl FnMut() -> f64) -> f64 {
    let mut v = [f(), f(), f()];
    v.sort_by(f64::total_cmp);
    v[1]
}

/// Runs both probes (about 0.2 s).
pub fn run() -> Probe {
    let next = cycle(CHASE_LEN);
    // Once through untimed: the pages are touched and the TLB warm.
    chase(&next, CHASE_LEN);
    Probe {
        chase_ns: median3(|| chase(&next, CHASE_STEPS)),
        alu_ns: median3(|| alu(ALU_STEPS)),
        pair_ns: {
            let mut pairs = [
                slot_pair(SLOT_STEPS),
                slot_pair(SLOT_STEPS),
                slot_pair(SLOT_STEPS),
            ];
            pairs.sort_by(|a, b| a[0].total_cmp(&b[0]));
            pairs[1]
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_is_one_cycle_through_every_entry() {
        let n = 1000;
        let next = cycle(n);
        let mut seen = vec![false; n];
        let mut at = 0;
        for _ in 0..n {
            assert!(!seen[at], "entry {at} visited twice");
            seen[at] = true;
            at = next[at];
        }
        assert_eq!(at, 0, "back at the start after n steps");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn probes_give_positive_times() {
        let next = cycle(1 << 12);
        assert!(chase(&next, 1 << 12) > 0.0);
        assert!(alu(1 << 12) > 0.0);
        let [slower, faster] = slot_pair(1 << 12);
        assert!(faster > 0.0 && slower >= faster);
    }
}
