//! Criterion benches of whole scheduling runs through the public `SchedulerApi`:
//! each iteration starts a fresh core, reports the nodes and apps (untimed),
//! submits the asks and measures until the callback holds every allocation.
//! Throughput is in allocations, so results read as allocations per second.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_main};
use unisched::workload::driver::run_measured;
use unisched::workload::{Workload, shapes};

/// Sums the measured part of `iters` runs of the workload `build` makes.
fn timed_runs(iters: u64, build: &dyn Fn() -> Workload) -> Duration {
    (0..iters)
        .map(|_| {
            run_measured(build(), Duration::from_secs(120))
                .expect("the workload completes")
                .elapsed
        })
        .sum()
}

fn scheduling_runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling_run");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));

    group.throughput(Throughput::Elements(10_000));
    group.bench_function("w1_500_nodes_10k_asks", |b| {
        b.iter_custom(|iters| timed_runs(iters, &|| shapes::w1(500, 10_000)));
    });

    group.throughput(Throughput::Elements(1_000));
    group.bench_function("w4_1000_nodes_100_apps", |b| {
        b.iter_custom(|iters| timed_runs(iters, &|| shapes::w4(1_000, 100)));
    });
    group.finish();
}

mod groups {
    criterion::criterion_group!(benches, super::scheduling_runs);
}
criterion_main!(groups::benches);
