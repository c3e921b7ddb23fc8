//! `bench --workload w3 --preemption`: runs a workload whose asks preempt and
//! plays the RM's part in it, confirming every release the core decides
//! (`PREEMPTED_BY_SCHEDULER`) so the preempting asks get placed.
//!
//! The timer covers the same span as [`workload::driver::run_measured`]: from
//! the last ask batch handed over until the core settles with nothing left to
//! confirm. Each round settles, confirms the releases seen so far, and goes
//! again until a settle brings no new release.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use unisched_shim_api::SchedulerApi;
use unisched_si as si;

use crate::workload::driver::Submitted;
use crate::workload::{self, Cluster, RunMeasurement, Workload, WorkloadError};

/// Runs `workload` on a fresh core, confirming the core's releases.
pub fn run_confirming(workload: Workload) -> Result<RunMeasurement, WorkloadError> {
    let Workload {
        name,
        config,
        partition,
        apps,
        nodes,
        ask_batches,
        expected_allocations: _,
    } = workload;
    let node_count = nodes.len();
    // Allocation id -> (app, key), for the allocations the nodes bring along.
    let mut owner: HashMap<String, (String, String)> = nodes
        .iter()
        .flat_map(|n| &n.existing_allocations)
        .map(|a| {
            let who = (a.application_id.clone(), a.allocation_key.clone());
            (a.allocation_id.clone(), who)
        })
        .collect();
    let cluster = Cluster::start(&config, &partition, apps, nodes)?;
    let submitted = Submitted::all(&cluster, ask_batches)?;
    let asks = submitted.asks();
    let start = Instant::now();
    let mut confirmed: HashSet<String> = HashSet::new();
    loop {
        cluster.scheduler.settle();
        let releases = cluster.callback.with_record(|r| {
            for a in &r.allocations {
                owner
                    .entry(a.allocation_id.clone())
                    .or_insert_with(|| (a.application_id.clone(), a.allocation_key.clone()));
            }
            r.released
                .iter()
                .filter(|id| !confirmed.contains(*id))
                .filter_map(|id| {
                    let (app, key) = owner.get(id)?;
                    Some(si::AllocationRelease {
                        partition_name: partition.clone(),
                        application_id: app.clone(),
                        termination_type: si::TerminationType::PreemptedByScheduler as i32,
                        message: "preempted".to_string(),
                        allocation_key: key.clone(),
                        allocation_id: id.clone(),
                    })
                })
                .collect::<Vec<_>>()
        });
        if releases.is_empty() {
            break;
        }
        confirmed.extend(releases.iter().map(|r| r.allocation_id.clone()));
        cluster
            .scheduler
            .update_allocation(si::AllocationRequest {
                releases: Some(si::AllocationReleasesRequest {
                    allocations_to_release: releases,
                    ..Default::default()
                }),
                rm_id: workload::RM_ID.to_string(),
                ..Default::default()
            })
            .map_err(|source| WorkloadError::Scheduler {
                step: "confirming preemptions",
                source,
            })?;
    }
    let end = Instant::now();
    let (allocations, latencies) = submitted.latencies(&cluster);
    cluster.scheduler.shutdown();
    Ok(RunMeasurement {
        workload: name,
        nodes: node_count,
        asks,
        allocations,
        released: confirmed.len(),
        elapsed: end.saturating_duration_since(start),
        latencies,
    })
}
