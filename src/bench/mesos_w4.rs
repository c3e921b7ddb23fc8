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
//!
//! With `--warm-runs N` the master first makes N such runs untimed, each
//! followed by every framework suppressing its role and declining its
//! offers (no filter) until the master and the core are quiet again; the
//! timed run is then the master's N+1th, on books, tables and allocator
//! pages that earlier runs grew (a master allocating every second runs so,
//! and Mesos' benchmarks time their rounds in one allocator). With none
//! (the default), it is a new master's first run.

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
    earlier_runs: usize,
    timeout: Duration,
    pinned: Option<(usize, usize)>,
) -> Result<RunMeasurement, WorkloadError> {
    let fail = |what: String| WorkloadError::Setup(what);
    let scheduler = Scheduler::start(SchedulerOptions {
        cpu: pinned.map(|p| p.0),
        ..SchedulerOptions::default()
    });
    let settings = Settings {
        heartbeat_interval: Duration::from_secs(3600),
        allocation_interval: Duration::from_secs(3600),
        cpu: pinned.map(|p| p.1),
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
    // The rounds before the timed one: each a whole run, its offers then
    // declined (the roles suppressed first, so the declines start no run)
    // and everything settled, so the timed run is the master's
    // `earlier_runs + 1`th on warm books, as a master that allocates every
    // second runs (and as Mesos' allocator benchmarks time their rounds
    // after the first). With none, the timed run is the master's first.
    for _ in 0..earlier_runs {
        let round = offer_round(&master, &runtime, &mut streams, agents, timeout, false)?;
        take_back(&master, &scheduler, &runtime, &streams, round.received)?;
    }
    let round = offer_round(&master, &runtime, &mut streams, agents, timeout, true)?;
    let Round {
        elapsed,
        mut latencies,
        received,
    } = round;
    // W4 is one run that offers every framework its share: with 10,000
    // agents and 1,000 frameworks of equal weight, every framework has
    // offers.
    if received.len() < frameworks.min(agents) {
        return Err(fail(format!(
            "only {} of {frameworks} frameworks got offers: not one run over all of them",
            received.len()
        )));
    }
    let offers = received.iter().map(|(_, ids)| ids.len()).sum::<usize>();
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

/// A framework's stream: its id, the channel its events come on, its
/// framework id.
type Stream = (String, unisched_mesos::master::EventReceiver, String);

/// What one allocation run gave: the time to every framework holding its
/// offers, the time each offer was in hand, and each framework's offer ids
/// (by its index in the streams).
struct Round {
    elapsed: Duration,
    latencies: Vec<Duration>,
    received: Vec<(usize, Vec<v1::OfferId>)>,
}

/// One allocation run: every framework's REVIVE goes to the master in one
/// batch, and the run is over when the frameworks hold an offer of every
/// agent. `timed` marks the measured round (the profiling hooks and the
/// per-thread breakdown cover it alone).
fn offer_round(
    master: &MasterHandle,
    runtime: &tokio::runtime::Runtime,
    streams: &mut [Stream],
    agents: usize,
    timeout: Duration,
    timed: bool,
) -> Result<Round, WorkloadError> {
    let fail = |what: String| WorkloadError::Setup(what);
    let breakdown = timed && std::env::var_os("UNISCHED_W4_BREAKDOWN").is_some();
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
            framework_call(stream_id, id, call::Type::Revive, |c| {
                c.revive = Some(call::Revive::default());
            })
        })
        .collect();
    if timed {
        callgrind_control("start");
    }
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
    let mut received = Vec::with_capacity(streams.len());
    let wait = async {
        for (i, (_, rx, _)) in streams.iter_mut().enumerate() {
            while offers < agents {
                let Some(e) = rx.recv_raw().await else {
                    break;
                };
                let n = e.offer_count();
                if n > 0 {
                    offers += n;
                    latencies.extend(std::iter::repeat_n(started.elapsed(), n));
                    received.push((i, n, e));
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
    if timed {
        callgrind_control("end");
    }
    if breakdown {
        print_thread_times(&threads_before, &thread_times());
        // After the clock stopped: the machine's speed just now.
        let probe = super::probe::run();
        eprintln!(
            "w4 machine: {:.1} ns a step of a pointer chase over 16 MiB, {:.2} ns a multiply-add, {:.2} / {:.2} ns a step of four multiply-add chains on two threads at once",
            probe.chase_ns, probe.alu_ns, probe.pair_ns[0], probe.pair_ns[1]
        );
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
    // Every offer counted off the wire is there when decoded.
    let received: Vec<(usize, Vec<v1::OfferId>)> = received
        .into_iter()
        .map(|(i, n, e)| {
            let ids: Vec<v1::OfferId> = e
                .into_event()
                .offers
                .map(|o| o.offers.into_iter().map(|o| o.id).collect())
                .unwrap_or_default();
            if ids.len() == n {
                Ok((i, ids))
            } else {
                Err(fail(format!(
                    "{n} offers counted on a stream, {} decoded",
                    ids.len()
                )))
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Round {
        elapsed,
        latencies,
        received,
    })
}

/// A call of the framework on stream `stream_id`, as its HTTP handler
/// would hand it to the master (no one waits for the answer).
fn framework_call(
    stream_id: &str,
    framework_id: &str,
    kind: call::Type,
    fill: impl FnOnce(&mut Call),
) -> Input {
    let (reply, _) = tokio::sync::oneshot::channel();
    let mut call = Call {
        framework_id: Some(v1::FrameworkId {
            value: framework_id.to_string(),
        }),
        r#type: Some(kind as i32),
        ..Default::default()
    };
    fill(&mut call);
    Input::Call {
        call: Box::new(call),
        stream_id: Some(stream_id.to_string()),
        principal: None,
        reply,
    }
}

/// Between rounds (untimed): every framework suppresses its role and
/// declines the round's offers with no filter (`refuse_seconds: 0`), in one
/// batch; then waits until the master and the core have nothing left to do
/// (no offer out, every lease released and its answer applied).
fn take_back(
    master: &MasterHandle,
    scheduler: &Scheduler,
    runtime: &tokio::runtime::Runtime,
    streams: &[Stream],
    received: Vec<(usize, Vec<v1::OfferId>)>,
) -> Result<(), WorkloadError> {
    let fail = |what: String| WorkloadError::Setup(what);
    let mut calls: Vec<Input> = streams
        .iter()
        .map(|(stream_id, _, id)| {
            framework_call(stream_id, id, call::Type::Suppress, |c| {
                c.suppress = Some(call::Suppress::default());
            })
        })
        .collect();
    for (i, offer_ids) in received {
        let (stream_id, _, id) = &streams[i];
        calls.push(framework_call(stream_id, id, call::Type::Decline, |c| {
            c.decline = Some(call::Decline {
                offer_ids,
                filters: Some(v1::Filters {
                    refuse_seconds: Some(0.0),
                }),
            });
        }));
    }
    master.send_batch(calls);
    master.quiesce(scheduler, 10_000).map_err(fail)?;
    let metrics = runtime
        .block_on(master.query(unisched_mesos::master::report::Query::Metrics))
        .unwrap_or_default();
    let out = metrics
        .get("master/outstanding_offers")
        .copied()
        .unwrap_or(f64::NAN);
    if out != 0.0 {
        return Err(fail(format!(
            "{out} offers still out after every framework declined its offers"
        )));
    }
    Ok(())
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
    /// Times it was put on a CPU (each wake-up after a wait is one).
    slices: u64,
    /// The CPU it last ran on.
    cpu: u64,
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
        let slices = fields.next().unwrap_or(0);
        // `stat`: minflt is the 10th field, the 8th after the name's ')'.
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let field = |n: usize| {
            after_name
                .split_whitespace()
                .nth(n)
                .and_then(|f| f.parse().ok())
                .unwrap_or(0)
        };
        // `processor`, the 39th field, is the 37th after the name.
        let (faults, cpu) = (field(7), field(36));
        out.push(ThreadTimes {
            tid,
            name: comm.trim().to_string(),
            ran,
            waited,
            faults,
            slices,
            cpu,
        });
    }
    out
}

/// Prints the CPU and wait time and the page faults of each thread between
/// two samples (threads that ran at least 0.1 ms).
fn print_thread_times(before: &[ThreadTimes], after: &[ThreadTimes]) {
    for t in after {
        let (ran0, waited0, faults0, slices0) = before
            .iter()
            .find(|b| b.tid == t.tid)
            .map_or((0, 0, 0, 0), |b| (b.ran, b.waited, b.faults, b.slices));
        let ran = t.ran.saturating_sub(ran0);
        if ran >= 100_000 {
            eprintln!(
                "w4 thread {}: {:.2} ms on a CPU, {:.2} ms waiting for one, {} page faults, on a CPU {} times, last on CPU {}",
                t.name,
                ran as f64 / 1e6,
                t.waited.saturating_sub(waited0) as f64 / 1e6,
                t.faults.saturating_sub(faults0),
                t.slices.saturating_sub(slices0),
                t.cpu
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_run_offers_every_agent() {
        let m = run(200, 20, 0, Duration::from_secs(20), None).expect("a run");
        assert_eq!((m.allocations, m.nodes, m.asks), (200, 200, 20));
        assert_eq!(m.latencies.len(), 200);
    }

    #[test]
    fn a_run_with_pinned_threads_offers_every_agent() {
        // One CPU only (a machine or a `taskset` that allows one): nothing to spread over.
        let Ok(cpus) = unisched_core::affinity::spread(2) else {
            return;
        };
        let m = run(
            200,
            20,
            0,
            Duration::from_secs(20),
            Some((cpus[0], cpus[1])),
        )
        .expect("a pinned run");
        assert_eq!((m.allocations, m.nodes, m.asks), (200, 200, 20));
    }

    #[test]
    fn runs_after_declined_ones_offer_every_agent_again() {
        // Each earlier run's offers are declined and taken back in full
        // before the next (or `take_back` fails); the timed third run
        // finds every agent free again.
        let m = run(200, 20, 2, Duration::from_secs(20), None).expect("three runs");
        assert_eq!(m.allocations, 200);
    }
}
