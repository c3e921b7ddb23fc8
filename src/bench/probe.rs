//! What the machine is doing right now, for reading a benchmark's figures:
//! the time of one dependent load that misses the caches, of a loop that
//! touches no memory, and of a loop bound by the core's throughput on two
//! threads at once (each vCPU's own speed).
//!
//! This VM's speed swings by about 1.7 times within minutes (BENCHMARKS.md).
//! On 2026-12-05 a chain of multiply-adds took 1.30-1.37 ns a step in every
//! run while a pointer chase over 16 MiB took anywhere from 44 to 151 ns:
//! slow phases were read as the memory system's, shared with other guests
//! (a W4 run waits on memory, tens of misses a lease).
//! `UNISCHED_W4_BREAKDOWN=1` prints the probes beside each run, and
//! `unisched bench --machine ROUNDS` runs them alone.
//!
//! On 2026-12-06 the chain of multiply-adds still took 1.33-1.37 ns a step
//! while, at times, a loop of a load, a multiply, an add and a store of one
//! variable (a small C program, BENCHMARKS.md), run on two threads at once,
//! took one of them up to twice its usual CPU time, for tens of
//! milliseconds: a vCPU then runs throughput-bound code at about half speed
//! (as a core shared with a busy sibling would; a dependent chain leaves the
//! core's other units free and does not show it). W4 runs whose scheduling
//! thread takes twice its usual CPU time while the master's does not are
//! what such a window would give. The third probe is a throughput-bound
//! loop on two threads, to catch them.

use std::time::Instant;

/// The three probes, each a median of three.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Nanoseconds per step of a pointer chase through a random cycle over
    /// 16 MiB (beyond the L2 caches, within the L3 of this machine's host).
    pub chase_ns: f64,
    /// Nanoseconds per step of a chain of dependent multiply-adds.
    pub alu_ns: f64,
    /// Nanoseconds per step of four independent multiply-add chains (bound
    /// by the core's throughput), on each of two threads started together,
    /// slower first: the two vCPUs' speeds.
    pub pair_ns: [f64; 2],
}

/// Entries of the chase: 2 Mi `usize`s, 16 MiB on a 64-bit machine.
const CHASE_LEN: usize = 1 << 21;
/// Steps timed per chase.
const CHASE_STEPS: usize = 1 << 20;
/// Steps timed per multiply chain.
const ALU_STEPS: u64 = 1 << 24;
/// Steps timed per throughput loop (about 11 ms at full speed on this VM).
const PAIR_STEPS: u64 = 1 << 23;

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

fn throughput_loop(steps: u64) -> f64 {
    let started = Instant::now();
    // Four independent chains of multiply-adds: the core can run them side
    // by side, so the loop is bound by the core's throughput (what a busy
    // sibling on the same core takes away), not by one chain's latency.
    let mut acc = [1u64, 2, 3, 4];
    for i in 0..steps {
        let i = std::hint::black_box(i);
        for (k, a) in acc.iter_mut().enumerate() {
            *a = a
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(i ^ k as u64);
        }
    }
    std::hint::black_box(acc);
    started.elapsed().as_secs_f64() * 1e9 / steps as f64
}

/// The throughput loop on two threads at once, slower first (a thread that
/// cannot start falls back to this one running both in turn).
fn throughput_pair(steps: u64) -> [f64; 2] {
    let other = std::thread::Builder::new()
        .name("unisched-probe".to_string())
        .spawn(move || throughput_loop(steps));
    let here = throughput_loop(steps);
    let there = match other {
        Ok(handle) => handle.join().unwrap_or(here),
        Err(_) => throughput_loop(steps),
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
                throughput_pair(PAIR_STEPS),
                throughput_pair(PAIR_STEPS),
                throughput_pair(PAIR_STEPS),
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
        let [slower, faster] = throughput_pair(1 << 12);
        assert!(faster > 0.0 && slower >= faster);
    }
}
