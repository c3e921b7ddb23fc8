//! Importer for Alibaba's cluster-trace-v2018: `batch_task` files become
//! asks, `machine_meta` files become nodes.
//!
//! batch_task columns: task_name, instance_num, job_name, task_type, status,
//! start_time, end_time (seconds), plan_cpu (100 is one core), plan_mem
//! (normalised, 0-100). A task is one ask for `instance_num` allocations at
//! its start time (the trace has no submission time; its DAG order is already
//! in the start times), each running end - start. Tasks without an end, or of
//! no instances, are left out and counted. Jobs are applications in the queue
//! the template names (default `root.type-{task_type}`; also `{status}`).
//!
//! machine_meta columns: machine_id, time_stamp, failure_domain_1,
//! failure_domain_2, cpu_num, mem_size (normalised, 0-100), status. Every row
//! sets the machine's capacity from its time on (the trace has no removals
//! we could tell apart from status changes, so status is not used).

use std::path::Path;

use super::google::{float, int};
use super::input::CsvRows;
use super::{AskRecord, Event, ImportOptions, TraceApp, TraceBuilder, TraceError, expand_template};

/// Queue template used when none is given.
pub const DEFAULT_QUEUE_TEMPLATE: &str = "root.type-{task_type}";

type FieldError = (usize, String);

/// Reads batch_task files into `trace`.
pub fn read_batch_tasks(
    paths: &[&Path],
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) -> Result<(), TraceError> {
    let template = options
        .queue_template
        .as_deref()
        .unwrap_or(DEFAULT_QUEUE_TEMPLATE);
    each_row(paths, trace, |r, trace| {
        task_row(r, template, options, trace)
    })
}

/// Reads machine_meta files into `trace`.
pub fn read_machine_meta(
    paths: &[&Path],
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) -> Result<(), TraceError> {
    each_row(paths, trace, |r, trace| machine_row(r, options, trace))
}

/// Runs `row` on every row of every file, reporting bad ones at their field.
fn each_row(
    paths: &[&Path],
    trace: &mut TraceBuilder,
    mut row: impl FnMut(&csv::StringRecord, &mut TraceBuilder) -> Result<(), FieldError>,
) -> Result<(), TraceError> {
    let mut record = csv::StringRecord::new();
    for path in paths {
        let mut rows = CsvRows::open(path, false)?;
        loop {
            let pos = match rows.read(&mut record) {
                Ok(Some(pos)) => pos,
                Ok(None) => break,
                Err(Ok(bad)) => {
                    trace.bad_line(bad)?;
                    continue;
                }
                Err(Err(err)) => return Err(err),
            };
            if let Err((field, message)) = row(&record, trace) {
                trace.bad_line(rows.bad(pos, field, message))?;
            }
        }
    }
    Ok(())
}

fn task_row(
    r: &csv::StringRecord,
    template: &str,
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) -> Result<(), FieldError> {
    if r.len() < 9 {
        return Err((
            r.len(),
            format!("a batch_task row has 9 columns, this one {}", r.len()),
        ));
    }
    let instances = int(r, 1, "instance_num")?;
    let start = int(r, 5, "start_time")?;
    let end = int(r, 6, "end_time")?;
    let cpu = float(r, 7, "plan_cpu")?.unwrap_or(0.0);
    let memory = float(r, 8, "plan_mem")?.unwrap_or(0.0);
    if instances <= 0 {
        trace.leave_out("alibaba: task of no instances");
        return Ok(());
    }
    if end <= 0 || end < start {
        trace.leave_out("alibaba: task without an end time after its start");
        return Ok(());
    }
    let vcore = (cpu * 10.0).round() as i64;
    let memory = (memory / 100.0 * options.memory_unit as f64).round() as i64;
    if vcore <= 0 && memory <= 0 {
        trace.leave_out("alibaba: task plans no CPU and no memory");
        return Ok(());
    }
    let (job, task_type, status) = (&r[2], &r[3], &r[4]);
    if job.is_empty() {
        return Err((2, "job_name is empty".to_string()));
    }
    let app = match trace.app_by_id(job) {
        Some(app) => app,
        None => trace.app(TraceApp {
            id: job.to_string(),
            queue: expand_template(template, &[("task_type", task_type), ("status", status)]),
            user: "alibaba".to_string(),
            groups: Vec::new(),
            tags: vec![("alibaba.task_type".to_string(), task_type.to_string())],
            gang_style: String::new(),
        }),
    };
    let size = trace.size(vec![
        ("vcore".to_string(), vcore),
        ("memory".to_string(), memory),
    ]);
    trace.push(
        start.saturating_mul(1000),
        Event::Ask(AskRecord {
            app,
            size,
            count: u32::try_from(instances).unwrap_or(u32::MAX),
            duration_ms: u64::try_from(end - start).unwrap_or(0).saturating_mul(1000),
            priority: 0,
            task_group: 0,
            placeholder: false,
            preempt_self: true,
            preempt_other: true,
        }),
    );
    Ok(())
}

fn machine_row(
    r: &csv::StringRecord,
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) -> Result<(), FieldError> {
    if r.len() < 6 {
        return Err((
            r.len(),
            format!("a machine_meta row has 7 columns, this one {}", r.len()),
        ));
    }
    if r[0].is_empty() {
        return Err((0, "machine_id is empty".to_string()));
    }
    let time = int(r, 1, "time_stamp")?;
    let cpus = int(r, 4, "cpu_num")?;
    let memory = float(r, 5, "mem_size")?.unwrap_or(0.0);
    let size = vec![
        ("vcore".to_string(), cpus.saturating_mul(1000)),
        (
            "memory".to_string(),
            (memory / 100.0 * options.memory_unit as f64).round() as i64,
        ),
    ];
    trace.node_up(time.saturating_mul(1000), &r[0], size);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

    const GIB: i64 = 1 << 30;

    fn import(tasks: &str, machines: &str) -> Result<Trace, TraceError> {
        let t = crate::trace::test_file("batch_task.csv", tasks);
        let m = crate::trace::test_file("machine_meta.csv", machines);
        let options = ImportOptions {
            vcore_unit: 1000,
            memory_unit: 512 * GIB,
            queue_template: None,
        };
        let mut b = TraceBuilder::new("alibaba", false);
        read_machine_meta(&[&m], &options, &mut b)?;
        read_batch_tasks(&[&t], &options, &mut b)?;
        Ok(b.finish())
    }

    #[test]
    fn tasks_become_asks_of_their_instances() {
        let tasks = "\
M1,4,j_1,1,Terminated,100,160,50,0.5
R2_1,2,j_1,1,Terminated,170,200,200,1.25
M1,1,j_2,12,Running,150,0,100,1
M1,0,j_3,1,Waiting,0,0,100,1
";
        let machines = "m_1,0,1,c,96,100,USING\n";
        let t = import(tasks, machines).unwrap();
        assert_eq!(t.nodes, ["m_1"]);
        let Event::NodeUp { capacity, .. } = t.records[0].event else {
            panic!("{:?}", t.records[0])
        };
        assert_eq!(
            t.sizes[capacity as usize],
            [
                ("memory".to_string(), 512 * GIB),
                ("vcore".to_string(), 96_000)
            ]
        );
        let asks: Vec<_> = t
            .records
            .iter()
            .filter_map(|r| match r.event {
                Event::Ask(a) => Some((
                    r.time_ms,
                    a.count,
                    a.duration_ms,
                    t.apps[a.app as usize].queue.as_str(),
                    t.sizes[a.size as usize].clone(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            asks,
            [
                (
                    100_000,
                    4,
                    60_000,
                    "root.type-1",
                    vec![
                        ("memory".to_string(), 2_748_779_069),
                        ("vcore".to_string(), 500)
                    ]
                ),
                (
                    170_000,
                    2,
                    30_000,
                    "root.type-1",
                    vec![
                        ("memory".to_string(), 6_871_947_674),
                        ("vcore".to_string(), 2_000)
                    ]
                ),
            ]
        );
        assert_eq!(t.left_out.values().sum::<u64>(), 2);
    }

    #[test]
    fn bad_rows_name_their_field() {
        let err = import("M1,4,j_1,1,Terminated,100,later,50,0.5\n", "").unwrap_err();
        assert!(
            err.to_string()
                .ends_with(":1:27: end_time \"later\" is not a whole number"),
            "{err}"
        );
        let err = import("M1,4,j_1\n", "").unwrap_err();
        assert!(
            err.to_string()
                .contains("a batch_task row has 9 columns, this one 3"),
            "{err}"
        );
    }
}
