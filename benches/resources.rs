//! Micro benches of the resource vector, the hot piece of every placement:
//! fit check, add/subtract, dominant share, and a fit scan over many nodes.
//! Throughput is in operations (or nodes scanned).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_main};
use unisched::core::resources::{MEMORY, Resource, VCORE};

fn vector_ops(c: &mut Criterion) {
    let ask = Resource::from_pairs(&[(MEMORY, 10), (VCORE, 1), (2, 1)]);
    let available = Resource::from_pairs(&[(MEMORY, 210), (VCORE, 21), (2, 110)]);
    let guaranteed = Resource::from_pairs(&[(MEMORY, 100_000), (VCORE, 10_000)]);
    let mut group = c.benchmark_group("resource");
    group.throughput(Throughput::Elements(1));
    group.bench_function("fits_in", |b| {
        b.iter(|| black_box(&ask).fits_in(black_box(&available)));
    });
    group.bench_function("add_then_sub", |b| {
        let mut used = available;
        b.iter(|| {
            used.add_assign(black_box(&ask));
            used.sub_assign(black_box(&ask));
        });
        black_box(used);
    });
    group.bench_function("dominant_share", |b| {
        b.iter(|| black_box(&available).dominant_share(black_box(&guaranteed)));
    });

    // A linear first-fit over 5,000 nodes where only the last one fits: the cost
    // an ordered node index exists to avoid.
    let mut nodes = vec![Resource::from_pairs(&[(MEMORY, 5), (VCORE, 1)]); 5_000];
    nodes[4_999] = available;
    group.throughput(Throughput::Elements(nodes.len() as u64));
    group.bench_function("first_fit_scan_5000_nodes", |b| {
        b.iter(|| {
            black_box(&nodes)
                .iter()
                .position(|n| black_box(&ask).fits_in(n))
        });
    });
    group.finish();
}

mod groups {
    criterion::criterion_group!(benches, super::vector_ops);
}
criterion_main!(groups::benches);
