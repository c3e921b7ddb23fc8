//! Importer for Google's 2011 cluster trace (clusterdata-2011-2, schema
//! "trace-data v2.1"): `task_events` files become asks, `machine_events`
//! files become nodes joining and leaving.
//!
//! task_events columns: time (µs), missing info, job ID, task index, machine
//! ID, event type, user, scheduling class, priority, CPU request, memory
//! request, disk request, different-machines restriction. Event types:
//! SUBMIT 0, SCHEDULE 1, EVICT 2, FAIL 3, FINISH 4, KILL 5, LOST 6,
//! UPDATE_PENDING 7, UPDATE_RUNNING 8. machine_events columns: time, machine
//! ID, event type (ADD 0, REMOVE 1, UPDATE 2), platform ID, CPUs, memory.
//!
//! A task is one ask of one allocation, submitted at its first SUBMIT, with
//! the request it had when it last started, running as long as its last
//! attempt ran (SCHEDULE to FINISH, FAIL, KILL or LOST; an EVICT starts the
//! task over, as Borg resubmits it). A task still running when the input
//! ends runs until the input's last time. Tasks that never started, or ask
//! for nothing, are left out and counted. Time 0 (before the trace window)
//! is kept as the start; 2^63-1 (after it) is dropped. Jobs are applications
//! `job-<id>` in the queue the template names (default `root.{band}`, band
//! `free` for priorities 0-1, `production` for 9 and up, `batch` between;
//! also `{priority}`, `{class}`, `{user}`).

use std::collections::HashMap;
use std::path::Path;

use super::input::CsvRows;
use super::{
    AskRecord, Event, ImportOptions, Size, TraceApp, TraceBuilder, TraceError, expand_template,
};

/// Queue template used when none is given.
pub const DEFAULT_QUEUE_TEMPLATE: &str = "root.{band}";
/// Google timestamps past the end of the trace window.
const AFTER_TRACE: i64 = i64::MAX;

const SUBMIT: u8 = 0;
const SCHEDULE: u8 = 1;
const EVICT: u8 = 2;
const FAIL: u8 = 3;
const LOST: u8 = 6;
const UPDATE_PENDING: u8 = 7;
const UPDATE_RUNNING: u8 = 8;

/// The priority band Google's documentation names for a priority.
pub fn band(priority: i32) -> &'static str {
    match priority {
        ..=1 => "free",
        9.. => "production",
        _ => "batch",
    }
}

/// What is known of one task while its events are read.
#[derive(Debug, Clone, Copy)]
struct Task {
    submitted_us: i64,
    started_us: Option<i64>,
    cpu: f64,
    memory: f64,
    priority: i32,
    app: u32,
}

/// Reads task_events files (in time order, as the trace's parts are) into
/// `trace`.
pub fn read_task_events(
    paths: &[&Path],
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) -> Result<(), TraceError> {
    let template = options
        .queue_template
        .as_deref()
        .unwrap_or(DEFAULT_QUEUE_TEMPLATE);
    let mut tasks: HashMap<(u64, u64), Task> = HashMap::new();
    let mut last_us = 0;
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
            match task_row(&record) {
                Ok(row) => {
                    if row.time_us == AFTER_TRACE {
                        continue;
                    }
                    last_us = last_us.max(row.time_us);
                    apply(row, &mut tasks, template, options, trace);
                }
                Err((field, message)) => trace.bad_line(rows.bad(pos, field, message))?,
            }
        }
    }
    // What never ended in the input.
    let mut open: Vec<_> = tasks.into_iter().collect();
    open.sort_by_key(|(key, _)| *key);
    for (_, task) in open {
        match task.started_us {
            Some(start) => {
                trace.leave_out(
                    "google: task still running at the end of the input (replayed until then)",
                );
                emit(&task, last_us - start, options, trace);
            }
            None => trace.leave_out("google: task submitted but never scheduled in the input"),
        }
    }
    Ok(())
}

/// One task_events row, parsed.
struct TaskRow<'a> {
    time_us: i64,
    job: u64,
    index: u64,
    event: u8,
    user: &'a str,
    class: &'a str,
    priority: i32,
    cpu: Option<f64>,
    memory: Option<f64>,
}

type FieldError = (usize, String);

fn task_row(r: &csv::StringRecord) -> Result<TaskRow<'_>, FieldError> {
    if r.len() < 11 {
        return Err((
            r.len(),
            format!("a task_events row has 13 columns, this one {}", r.len()),
        ));
    }
    let event = int(r, 5, "event type")?;
    if !(0..=8).contains(&event) {
        return Err((5, format!("event type {event} is not 0-8")));
    }
    Ok(TaskRow {
        time_us: int(r, 0, "time")?,
        job: int(r, 2, "job ID")?.max(0) as u64,
        index: int(r, 3, "task index")?.max(0) as u64,
        event: event as u8,
        user: &r[6],
        class: &r[7],
        priority: i32::try_from(int(r, 8, "priority")?)
            .map_err(|_| (8, "priority out of range".to_string()))?,
        cpu: float(r, 9, "CPU request")?,
        memory: float(r, 10, "memory request")?,
    })
}

pub(super) fn int(r: &csv::StringRecord, i: usize, what: &str) -> Result<i64, FieldError> {
    r[i].parse::<i64>()
        .map_err(|_| (i, format!("{what} {:?} is not a whole number", &r[i])))
}

pub(super) fn float(
    r: &csv::StringRecord,
    i: usize,
    what: &str,
) -> Result<Option<f64>, FieldError> {
    if r[i].is_empty() {
        return Ok(None);
    }
    match r[i].parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err((
            i,
            format!("{what} {:?} is not a non-negative number", &r[i]),
        )),
    }
}

fn apply(
    row: TaskRow<'_>,
    tasks: &mut HashMap<(u64, u64), Task>,
    template: &str,
    options: &ImportOptions,
    trace: &mut TraceBuilder,
) {
    let key = (row.job, row.index);
    let time = row.time_us.max(0);
    let task = match tasks.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            if !matches!(
                row.event,
                SUBMIT | SCHEDULE | UPDATE_PENDING | UPDATE_RUNNING
            ) {
                trace.leave_out("google: task ended before the input shows it start");
                return;
            }
            // A task first seen scheduled was submitted before the input
            // starts: it waits from its first event on.
            e.insert(Task {
                submitted_us: time,
                started_us: None,
                cpu: 0.0,
                memory: 0.0,
                priority: row.priority,
                app: job_app(&row, template, trace),
            })
        }
    };
    if let Some(cpu) = row.cpu {
        task.cpu = cpu;
    }
    if let Some(memory) = row.memory {
        task.memory = memory;
    }
    task.priority = row.priority;
    match row.event {
        // A resubmission after an eviction keeps the first submission time:
        // the work has waited since then.
        SUBMIT | EVICT => task.started_us = None,
        SCHEDULE => task.started_us = Some(time),
        FAIL..=LOST => {
            let task = *task;
            tasks.remove(&key);
            match task.started_us {
                Some(start) => emit(&task, time - start, options, trace),
                None => trace.leave_out("google: task ended before it was scheduled"),
            }
        }
        _ => {}
    }
}

/// The application of a task's job, added with its queue on first sight.
fn job_app(row: &TaskRow<'_>, template: &str, trace: &mut TraceBuilder) -> u32 {
    let id = format!("job-{}", row.job);
    if let Some(app) = trace.app_by_id(&id) {
        return app;
    }
    let priority = row.priority.to_string();
    let queue = expand_template(
        template,
        &[
            ("band", band(row.priority)),
            ("priority", &priority),
            ("class", row.class),
            ("user", row.user),
        ],
    );
    trace.app(TraceApp {
        id,
        queue,
        user: if row.user.is_empty() {
            "google".to_string()
        } else {
            row.user.to_string()
        },
        groups: Vec::new(),
        tags: vec![
            ("google.priority".to_string(), priority),
            ("google.class".to_string(), row.class.to_string()),
        ],
        gang_style: String::new(),
    })
}

/// Adds the ask of a task that ran `ran_us`.
fn emit(task: &Task, ran_us: i64, options: &ImportOptions, trace: &mut TraceBuilder) {
    let vcore = (task.cpu * options.vcore_unit as f64).round() as i64;
    let memory = (task.memory * options.memory_unit as f64).round() as i64;
    if vcore <= 0 && memory <= 0 {
        trace.leave_out("google: task requests no CPU and no memory");
        return;
    }
    let size = trace.size(vec![
        ("vcore".to_string(), vcore),
        ("memory".to_string(), memory),
    ]);
    trace.push(
        task.submitted_us / 1000,
        Event::Ask(AskRecord {
            app: task.app,
            size,
            count: 1,
            duration_ms: u64::try_from(ran_us.max(0) / 1000).unwrap_or(0),
            priority: task.priority,
            task_group: 0,
            placeholder: false,
            preempt_self: true,
            preempt_other: true,
        }),
    );
}

/// Reads machine_events files into `trace`: ADD and UPDATE set a machine's
/// capacity, REMOVE takes it away.
pub fn read_machine_events(
    paths: &[&Path],
    options: &ImportOptions,
    trace: &mut TraceBuilder,
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
            if let Err((field, message)) = machine_row(&record, options, trace) {
                trace.bad_line(rows.bad(pos, field, message))?;
            }
        }
    }
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
            format!("a machine_events row has 6 columns, this one {}", r.len()),
        ));
    }
    let time_us = int(r, 0, "time")?;
    if time_us == AFTER_TRACE {
        return Ok(());
    }
    let id = format!("machine-{}", int(r, 1, "machine ID")?);
    let time_ms = time_us.max(0) / 1000;
    match int(r, 2, "event type")? {
        0 | 2 => {
            let (Some(cpu), Some(memory)) = (float(r, 4, "CPUs")?, float(r, 5, "memory")?) else {
                trace.leave_out("google: machine event without capacity");
                return Ok(());
            };
            let size: Size = vec![
                (
                    "vcore".to_string(),
                    (cpu * options.vcore_unit as f64).round() as i64,
                ),
                (
                    "memory".to_string(),
                    (memory * options.memory_unit as f64).round() as i64,
                ),
            ];
            trace.node_up(time_ms, &id, size);
        }
        1 => match trace.node_by_id(&id) {
            Some(node) => trace.push(time_ms, Event::NodeDown(node)),
            None => trace.leave_out("google: machine removed before it was added"),
        },
        other => return Err((2, format!("machine event type {other} is not 0, 1 or 2"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

    const GIB: i64 = 1 << 30;

    fn options() -> ImportOptions {
        ImportOptions {
            vcore_unit: 32_000,
            memory_unit: 128 * GIB,
            queue_template: None,
        }
    }

    fn import(tasks: &str, machines: &str) -> Result<Trace, TraceError> {
        let t = crate::trace::test_file("task_events.csv", tasks);
        let m = crate::trace::test_file("machine_events.csv", machines);
        let mut b = TraceBuilder::new("google", false);
        read_machine_events(&[&m], &options(), &mut b)?;
        read_task_events(&[&t], &options(), &mut b)?;
        Ok(b.finish())
    }

    #[test]
    fn tasks_run_as_long_as_their_last_attempt() {
        // Job 7 task 0: submitted at 1 s, runs 1 s, evicted, runs again 4 s to 10 s.
        // Job 7 task 1: submitted at 2 s, killed while pending.
        // Job 9 task 0: production, scheduled at 3 s, still running at the end (12 s).
        let tasks = "\
1000000,,7,0,,0,u1,2,4,0.5,0.25,0,0
2000000,,7,1,,0,u1,2,4,0.5,0.25,0,0
2000000,,7,0,5,1,u1,2,4,0.5,0.25,0,0
3000000,,7,0,5,2,u1,2,4,,,,
3000000,,9,0,6,0,u2,3,10,0.125,0.125,0,0
3000000,,9,0,6,1,u2,3,10,,,,
4000000,,7,0,5,0,u1,2,4,0.5,0.25,0,0
4000000,,7,0,5,1,u1,2,4,0.5,0.25,0,0
5000000,,7,1,,5,u1,2,4,,,,
10000000,,7,0,5,4,u1,2,4,,,,
12000000,,1,0,,0,u3,0,0,0,0,0,0
9223372036854775807,,7,0,5,4,u1,2,4,,,,
";
        let machines = "0,5,0,p,0.5,0.5\n0,6,0,p,1,1\n8000000,6,1,,,\n";
        let t = import(tasks, machines).unwrap();
        assert_eq!(t.nodes, ["machine-5", "machine-6"]);
        let asks: Vec<_> = t
            .records
            .iter()
            .filter_map(|r| match r.event {
                Event::Ask(a) => Some((
                    r.time_ms,
                    t.apps[a.app as usize].queue.as_str(),
                    a.duration_ms,
                    t.sizes[a.size as usize].clone(),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            asks,
            [
                (
                    1_000,
                    "root.batch",
                    6_000,
                    vec![
                        ("memory".to_string(), 32 * GIB),
                        ("vcore".to_string(), 16_000)
                    ]
                ),
                (
                    3_000,
                    "root.production",
                    9_000,
                    vec![
                        ("memory".to_string(), 16 * GIB),
                        ("vcore".to_string(), 4_000)
                    ]
                ),
            ]
        );
        assert_eq!(t.records.last().unwrap().event, Event::NodeDown(1));
        let left: Vec<_> = t.left_out.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            left,
            [
                ("google: task ended before it was scheduled", 1),
                (
                    "google: task still running at the end of the input (replayed until then)",
                    1
                ),
                ("google: task submitted but never scheduled in the input", 1),
            ]
        );
    }

    #[test]
    fn bad_rows_name_their_field() {
        let err = import("1000000,,7,0,,9,u1,2,4,0.5,0.25,0,0\n", "").unwrap_err();
        assert!(
            err.to_string().ends_with(":1:15: event type 9 is not 0-8"),
            "{err}"
        );
        let err = import("", "0,5,0,p,lots,0.5\n").unwrap_err();
        assert!(
            err.to_string()
                .ends_with(":1:9: CPUs \"lots\" is not a non-negative number"),
            "{err}"
        );
    }
}
