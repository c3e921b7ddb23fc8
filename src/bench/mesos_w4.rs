//! W4 through the Mesos front end: 10,000 agents (24 cpus, 4096 MB, 16 cpus
//! used by something else), 1,000 frameworks each in its own role, in
//! process (no HTTP), and one allocation run that offers every agent.
//!
//! Set-up (untimed): the core and master start; every framework subscribes
//! with its role suppressed; the agents join (no offers: nobody wants any).
//! Timed: every framework's REVIVE (built before the clock starts) goes to
//! the master in one batch of inputs
//! (`MasterHandle::send_batch`), so the master makes one request of them
//! and the core one pass, until the frameworks have received an offer of
//! every agent in their OFFERS events. That is the
//! run Mesos' allocator benchmark times (1.06 s at this size).

use std::sync::Arc;
use std::time::{Duration, Instant};

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::{AgentBackend, Launch};
use unisched_mesos::master::{AgentSpec, Input, MasterHandle, Settings};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call};

use crate::workload::{RunMeasurement, WorkloadError};

/// An agent that runs nothing (no task is launched in W4).
struct IdleAgent;

impl AgentBackend for IdleAgent {
    fn launch(&self, _launch: Launch) {}
    fn kill_task(&self, _framework_id: &str, _task_id: &str, _grace: Duration) {}
    fn shutdown_executor(&self, _framework_id: &str, _executor_id: &str) {}
    fn shutdown_framework(&self, _framework_id: &str) {}
    fn framework_message(&self, _framework_id: &str, _executor_id: &str, _data: Vec<u8>) {}
    fn stop(&self) {}
}

#[allow(deprecated)] // Single-role frameworks name their role in `role`.
fn framework_info(i: usize) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "bench".to_string(),
        name: format!("w4-{i}"),
        role: Some(format!("role-{i}")),
        ..Default::default()
    }
}

/// One W4 run through the front end: `agents` agents, `frameworks` frameworks.
pub fn run(
    agents: usize,
    frameworks: usize,
    timeout: Duration,
) -> Result<RunMeasurement, WorkloadError> {
    let fail = |what: String| WorkloadError::Setup(what);
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let settings = Settings {
        heartbeat_interval: Duration::from_secs(3600),
        allocation_interval: Duration::from_secs(3600),
        ..Settings::default()
    };
    let master =
        MasterHandle::start(scheduler.clone(), None, settings).map_err(|e| fail(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut streams = Vec::with_capacity(frameworks);
    for i in 0..frameworks {
        let info = framework_info(i);
        let role = format!("role-{i}");
        let (stream_id, rx) = master.subscribe(
            call::Subscribe {
                framework_info: info,
                suppressed_roles: vec![role],
                ..Default::default()
            },
            1024,
        );
        streams.push((stream_id, rx, String::new()));
    }
    for (_, rx, id) in &mut streams {
        let event = rx
            .blocking_recv()
            .ok_or_else(|| fail("a framework stream closed".to_string()))?;
        let Some(subscribed) = event.subscribed else {
            return Err(fail(format!(
                "expected SUBSCRIBED, got {:?}",
                event.r#type()
            )));
        };
        *id = subscribed.framework_id.value;
    }
    let total = Resources::parse("cpus:24;mem:4096").map_err(|e| fail(e.to_string()))?;
    let used = Resources::parse("cpus:16").map_err(|e| fail(e.to_string()))?;
    runtime.block_on(async {
        for i in 0..agents {
            master
                .add_agent(AgentSpec {
                    hostname: format!("agent-{i}"),
                    resources: total.clone(),
                    occupied: used.clone(),
                    attributes: Vec::new(),
                    backend: Box::new(|_: &str| Arc::new(IdleAgent) as Arc<dyn AgentBackend>),
                })
                .await;
        }
    });
    scheduler.settle();
    let breakdown = std::env::var_os("UNISCHED_W4_BREAKDOWN").is_some();
    let threads_before = if breakdown {
        thread_times()
    } else {
        Vec::new()
    };
    // The REVIVEs go as one batch: sent one by one, the master may take
    // the first few before the rest are queued and ask the core for a run
    // with only those frameworks, which then get every agent (a run of a
    // different shape). They are built before the clock starts: they are
    // the frameworks' calls, which exist before the master reads them (over
    // HTTP, request handlers decode them on their own threads). Timed from
    // the master getting them; before 2026-12-04 building them was timed
    // too (0.6-1.8 ms of a run: BENCHMARKS.md).
    let revives: Vec<Input> = streams
        .iter()
        .map(|(stream_id, _, id)| {
            let (reply, _) = tokio::sync::oneshot::channel();
            Input::Call {
                call: Box::new(Call {
                    framework_id: Some(v1::FrameworkId { value: id.clone() }),
                    r#type: Some(call::Type::Revive as i32),
                    revive: Some(call::Revive::default()),
                    ..Default::default()
                }),
                stream_id: Some(stream_id.clone()),
                reply,
            }
        })
        .collect();
    callgrind_control("start");
    let started = Instant::now();
    tracing::trace!(target: "unisched::timeline", frameworks = streams.len(), "w4: the REVIVE calls go to the master");
    master.send_batch(revives);
    // Each framework gets its OFFERS in one event per run; wait on each
    // stream in turn (one deadline for the whole wait, not a timer per
    // event). The events are kept as they came until the clock stops: what
    // is timed is the run up to the frameworks holding their offers, as
    // Mesos' allocator benchmark queues its offers in the callback and reads
    // them after its stopwatch stops. The master sends OFFERS encoded (what
    // a framework over HTTP reads off its stream) with the number of offers
    // it wrote; reading them (the count, once read off the bytes here too:
    // 0.2-0.9 ms of a run, until 2026-12-04), decoding them and freeing
    // 10,000 offers is the frameworks' work afterwards, checked below.
    let mut offers = 0;
    let mut latencies = Vec::with_capacity(agents);
    let mut received = Vec::with_capacity(frameworks);
    let wait = async {
        for (_, rx, _) in &mut streams {
            while offers < agents {
                let Some(e) = rx.recv_raw().await else {
                    break;
                };
                let n = e.offer_count();
                if n > 0 {
                    offers += n;
                    latencies.extend(std::iter::repeat_n(started.elapsed(), n));
                    received.push(e);
                    break;
                }
            }
        }
    };
    let _ = runtime.block_on(async { tokio::time::timeout(timeout, wait).await });
    if offers < agents {
        return Err(WorkloadError::Timeout {
            expected: agents,
            received: offers,
            waited: started.elapsed(),
        });
    }
    let elapsed = started.elapsed();
    tracing::trace!(target: "unisched::timeline", offers, "w4: every framework holds its offers");
    callgrind_control("end");
    if breakdown {
        print_thread_times(&threads_before, &thread_times());
        let metrics = runtime
            .block_on(master.query(unisched_mesos::master::report::Query::Metrics))
            .unwrap_or_default();
        eprintln!(
            "w4 through the front end: {:.2} ms in all, {:.2} ms of it turning leases into offers, the first framework's offers in hand at {:.2} ms; {} frameworks got offers, in {} allocation runs",
            elapsed.as_secs_f64() * 1000.0,
            metrics
                .get("allocator/mesos/allocation_run_ms")
                .copied()
                .unwrap_or(0.0),
            latencies.first().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            received.len(),
            metrics
                .get("allocator/mesos/allocation_runs")
                .copied()
                .unwrap_or(0.0)
        );
    }
    // W4 is one run that offers every framework its share: with 10,000
    // agents and 1,000 frameworks of equal weight, every framework has
    // offers.
    if received.len() < frameworks.min(agents) {
        return Err(fail(format!(
            "only {} of {frameworks} frameworks got offers: not one run over all of them",
            received.len()
        )));
    }
    // Every offer counted off the wire is there when decoded.
    let decoded: usize = received
        .into_iter()
        .map(|e| e.into_event().offers.map_or(0, |o| o.offers.len()))
        .sum();
    if decoded != offers {
        return Err(fail(format!(
            "{offers} offers counted on the streams, {decoded} decoded"
        )));
    }
    master.shutdown();
    scheduler.shutdown();
    latencies.sort_unstable();
    Ok(RunMeasurement {
        workload: "w4".to_string(),
        nodes: agents,
        asks: frameworks,
        allocations: offers,
        released: 0,
        elapsed,
        latencies,
    })
}

/// Profiling hook: with `UNISCHED_W4_CALLGRIND=1`, under `valgrind
/// --tool=callgrind --separate-threads=yes`, the counters of every thread are
/// zeroed as the timed run starts and dumped as it ends (through
/// `callgrind_control`), so the dump named `run` holds the run alone.
///
/// With `UNISCHED_W4_PERF_CTL=FIFO`, under `perf record --delay=-1
/// --control=fifo:FIFO`, sampling is enabled for the timed run alone (perf's
/// control commands `enable` and `disable`; the enable 20 ms before the
/// clock starts, for perf to have taken it in).
fn callgrind_control(what: &str) {
    if let Some(fifo) = std::env::var_os("UNISCHED_W4_PERF_CTL") {
        let command: &[u8] = if what == "start" {
            b"enable\n"
        } else {
            b"disable\n"
        };
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .and_then(|mut f| std::io::Write::write_all(&mut f, command))
        {
            eprintln!("perf control fifo: {e}");
        }
        // perf reads its fifo when it gets round to it: give it the time
        // to enable sampling before the clock starts (nothing runs then).
        if what == "start" {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if std::env::var_os("UNISCHED_W4_CALLGRIND").is_none() {
        return;
    }
    let pid = std::process::id().to_string();
    let args: &[&str] = match what {
        "start" => &["-z", &pid],
        _ => &["--dump=run", &pid],
    };
    if let Err(e) = std::process::Command::new("callgrind_control")
        .args(args)
        .status()
    {
        eprintln!("callgrind_control: {e}");
    }
}

/// What one thread of this process has done so far.
struct ThreadTimes {
    tid: u64,
    name: String,
    /// ns on a CPU.
    ran: u64,
    /// ns runnable but waiting for a CPU.
    waited: u64,
    /// Minor page faults (fresh memory touched for the first time).
    faults: u64,
}

/// Per thread of this process, from `/proc/self/task/*/{schedstat,stat}`.
/// On a shared machine the wall time of a run swings with the load; the CPU
/// time of each thread does not, and the wait says how much of the wall
/// time was the load.
fn thread_times() -> Vec<ThreadTimes> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let path = task.path();
        let tid = task.file_name().to_string_lossy().parse().unwrap_or(0);
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let sched = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        let mut fields = sched
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0));
        let (ran, waited) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
        // `stat`: minflt is the 10th field, the 8th after the name's ')'.
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        let faults = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(7))
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        out.push(ThreadTimes {
            tid,
            name: comm.trim().to_string(),
            ran,
            waited,
            faults,
        });
    }
    out
}

/// Prints the CPU and wait time and the page faults of each thread between
/// two samples (threads that ran at least 0.1 ms).
fn print_thread_times(before: &[ThreadTimes], after: &[ThreadTimes]) {
    for t in after {
        let (ran0, waited0, faults0) = before
            .iter()
            .find(|b| b.tid == t.tid)
            .map_or((0, 0, 0), |b| (b.ran, b.waited, b.faults));
        let ran = t.ran.saturating_sub(ran0);
        if ran >= 100_000 {
            eprintln!(
                "w4 thread {}: {:.2} ms on a CPU, {:.2} ms waiting for one, {} page faults",
                t.name,
                ran as f64 / 1e6,
                t.waited.saturating_sub(waited0) as f64 / 1e6,
                t.faults.saturating_sub(faults0)
            );
        }
    }
}
