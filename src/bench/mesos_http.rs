//! `bench --workload mesos`: K frameworks over loopback HTTP against an
//! in-process master with simulated agents, each launching short simulated
//! tasks (label `unisched.duration`) into every offer as fast as offers come.
//!
//! Set-up (untimed): a core, the master with `agents` simulated agents and
//! its HTTP endpoints on an ephemeral loopback port, and K frameworks, each
//! with its own [`Client`] (protobuf bodies) and its own role, subscribed.
//! Timed: `seconds` of wall time from the moment the last framework has
//! subscribed. Each framework reads its event stream; on OFFERS it packs as
//! many tasks of `task` resources as each offer holds into one ACCEPT (no
//! filter, so the agent is offered again in the next allocation run),
//! declines an offer that holds none, and acknowledges every status update
//! that carries a uuid. Counted in the window: offers received, tasks
//! launched (TASK_RUNNING received), tasks finished (TASK_FINISHED received),
//! and per task the latency from the OFFERS event that carried its
//! resources to its TASK_RUNNING (offer → ACCEPT → master → agent → update
//! back over the stream).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::client::{Client, ClientOptions};
use unisched_mesos::local::{self, LocalOptions};
use unisched_mesos::master::Settings;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{call, event};

/// What one run does.
#[derive(Debug, Clone)]
pub struct MesosOptions {
    /// Frameworks (K), each in its own role.
    pub frameworks: usize,
    /// Simulated agents.
    pub agents: usize,
    /// Resources of each agent (Mesos resource text).
    pub agent_resources: String,
    /// Resources of each task (Mesos resource text).
    pub task_resources: String,
    /// How long a task runs (its `unisched.duration`).
    pub task_duration: Duration,
    /// The master's allocation interval (offers of resources that came back
    /// are made on it).
    pub allocation_interval: Duration,
    /// Length of the measured window.
    pub seconds: f64,
    /// The CPUs the scheduling thread and the master's thread are pinned to
    /// (`--pin-threads`); `None`: the kernel places them.
    pub pinned: Option<(usize, usize)>,
}

impl Default for MesosOptions {
    fn default() -> Self {
        Self {
            frameworks: 10,
            agents: 100,
            agent_resources: "cpus:8;mem:8192".to_string(),
            task_resources: "cpus:1;mem:1024".to_string(),
            task_duration: Duration::from_millis(100),
            allocation_interval: Duration::from_millis(100),
            seconds: 5.0,
            pinned: None,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct MesosReport {
    /// Frameworks.
    pub frameworks: usize,
    /// Agents.
    pub agents: usize,
    /// Task duration, seconds.
    pub task_duration_s: f64,
    /// Allocation interval, seconds.
    pub allocation_interval_s: f64,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Offers received in the window.
    pub offers: u64,
    /// Tasks that reached TASK_RUNNING in the window.
    pub launched: u64,
    /// Tasks that reached TASK_FINISHED in the window.
    pub finished: u64,
    /// Tasks that ended otherwise (failed, lost, error...) in the window.
    pub failed: u64,
    /// Finished tasks per second.
    pub tasks_per_second: f64,
    /// Offers per second.
    pub offers_per_second: f64,
    /// Offer → TASK_RUNNING latency, median, ms.
    pub latency_p50_ms: f64,
    /// Offer → TASK_RUNNING latency, 99th percentile, ms.
    pub latency_p99_ms: f64,
}

/// Counters shared by the frameworks of a run.
#[derive(Default)]
struct Tally {
    offers: u64,
    launched: u64,
    finished: u64,
    failed: u64,
    latencies: Vec<Duration>,
}

/// The window the counters count in.
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn holds(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
}

#[allow(deprecated)] // Single-role frameworks name their role in `role`.
fn framework_info(i: usize) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "bench".to_string(),
        name: format!("bench-mesos-{i}"),
        role: Some(format!("bench-{i}")),
        ..Default::default()
    }
}

/// Runs one measurement.
pub fn run(options: &MesosOptions) -> Result<MesosReport, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(run_async(options))
}

async fn run_async(options: &MesosOptions) -> Result<MesosReport, String> {
    let agent_resources = Resources::parse(&options.agent_resources).map_err(|e| e.to_string())?;
    let task_resources = Resources::parse(&options.task_resources).map_err(|e| e.to_string())?;
    let scheduler = Scheduler::start(SchedulerOptions {
        cpu: options.pinned.map(|p| p.0),
        ..SchedulerOptions::default()
    });
    let cluster = local::start(
        scheduler.clone(),
        LocalOptions {
            addr: ([127, 0, 0, 1], 0).into(),
            settings: Settings {
                allocation_interval: options.allocation_interval,
                heartbeat_interval: Duration::from_secs(3600),
                cpu: options.pinned.map(|p| p.1),
                ..Settings::default()
            },
            agents: options.agents,
            agent_resources,
            executor: ExecutorKind::Simulated,
            ..LocalOptions::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let master = format!("http://{}", cluster.addr);
    let mut subscriptions = Vec::with_capacity(options.frameworks);
    for i in 0..options.frameworks {
        let client = Client::new(&master, ClientOptions::default()).map_err(|e| e.to_string())?;
        let subscription = client
            .subscribe(call::Subscribe {
                framework_info: framework_info(i),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("framework {i}: SUBSCRIBE: {e}"))?;
        subscriptions.push((client, subscription));
    }
    let start = Instant::now();
    let window = Arc::new(Window {
        start,
        end: start + Duration::from_secs_f64(options.seconds),
    });
    let tally = Arc::new(Mutex::new(Tally::default()));
    let duration = format!("{}", options.task_duration.as_secs_f64());
    let mut frameworks = Vec::new();
    for (i, (client, subscription)) in subscriptions.into_iter().enumerate() {
        let framework = Framework {
            index: i,
            client,
            task: task_resources.clone(),
            duration: duration.clone(),
            window: window.clone(),
            tally: tally.clone(),
            offered_at: HashMap::new(),
            next_task: 0,
        };
        frameworks.push(tokio::spawn(framework.run(subscription.events)));
    }
    tokio::time::sleep_until(window.end.into()).await;
    for f in &frameworks {
        f.abort();
    }
    for f in frameworks {
        let _ = f.await;
    }
    cluster.stop();
    scheduler.shutdown();
    let mut tally = std::mem::take(&mut *tally.lock().unwrap_or_else(PoisonError::into_inner));
    tally.latencies.sort_unstable();
    let pct = |p: f64| {
        if tally.latencies.is_empty() {
            return 0.0;
        }
        let i =
            ((tally.latencies.len() as f64 * p).ceil() as usize).clamp(1, tally.latencies.len());
        tally.latencies[i - 1].as_secs_f64() * 1e3
    };
    let seconds = options.seconds;
    Ok(MesosReport {
        frameworks: options.frameworks,
        agents: options.agents,
        task_duration_s: options.task_duration.as_secs_f64(),
        allocation_interval_s: options.allocation_interval.as_secs_f64(),
        seconds,
        offers: tally.offers,
        launched: tally.launched,
        finished: tally.finished,
        failed: tally.failed,
        tasks_per_second: tally.finished as f64 / seconds,
        offers_per_second: tally.offers as f64 / seconds,
        latency_p50_ms: pct(0.5),
        latency_p99_ms: pct(0.99),
    })
}

/// One framework of the run.
struct Framework {
    index: usize,
    client: Client,
    task: Resources,
    duration: String,
    window: Arc<Window>,
    tally: Arc<Mutex<Tally>>,
    /// When the offer that carried each launched task arrived.
    offered_at: HashMap<String, Instant>,
    next_task: u64,
}

impl Framework {
    fn tally(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut self.tally.lock().unwrap_or_else(PoisonError::into_inner));
    }

    async fn run(mut self, mut events: unisched_mesos::client::EventStream) {
        while let Some(Ok(e)) = events.next().await {
            let now = Instant::now();
            match e.r#type() {
                event::Type::Offers => {
                    let offers = e.offers.map(|o| o.offers).unwrap_or_default();
                    if self.window.holds(now) {
                        let n = offers.len() as u64;
                        self.tally(|t| t.offers += n);
                    }
                    self.offers(offers, now);
                }
                event::Type::Update => {
                    if let Some(update) = e.update {
                        self.update(update.status, now);
                    }
                }
                _ => {}
            }
        }
    }

    /// Packs each offer with tasks; one ACCEPT per offer, a DECLINE for
    /// those that hold no task. Calls are not awaited here, so the stream
    /// keeps being read.
    fn offers(&mut self, offers: Vec<v1::Offer>, now: Instant) {
        let mut declined = Vec::new();
        for offer in offers {
            let mut available = Resources::from_vec(offer.resources.clone());
            let mut needed = self.task.clone();
            if let Some(role) = offer.allocation_info.as_ref().and_then(|a| a.role.as_ref()) {
                needed.allocate(role);
            }
            let mut tasks = Vec::new();
            while available.contains(&needed) {
                available.subtract(&needed);
                let id = format!("t{}-{}", self.index, self.next_task);
                self.next_task += 1;
                self.offered_at.insert(id.clone(), now);
                tasks.push(v1::TaskInfo {
                    name: id.clone(),
                    task_id: v1::TaskId { value: id },
                    agent_id: offer.agent_id.clone(),
                    resources: needed.to_vec(),
                    command: Some(v1::CommandInfo {
                        value: Some("true".to_string()),
                        ..Default::default()
                    }),
                    labels: Some(v1::Labels {
                        labels: vec![v1::Label {
                            key: unisched_mesos::agent::simulated::DURATION_LABEL.to_string(),
                            value: Some(self.duration.clone()),
                        }],
                    }),
                    ..Default::default()
                });
            }
            if tasks.is_empty() {
                declined.push(offer.id);
                continue;
            }
            let client = self.client.clone();
            let accept = call::Accept {
                offer_ids: vec![offer.id],
                operations: vec![v1::offer::Operation {
                    r#type: Some(v1::offer::operation::Type::Launch as i32),
                    launch: Some(v1::offer::operation::Launch { task_infos: tasks }),
                    ..Default::default()
                }],
                filters: Some(v1::Filters {
                    refuse_seconds: Some(0.0),
                }),
            };
            tokio::spawn(async move {
                let _ = client.accept(accept).await;
            });
        }
        if !declined.is_empty() {
            let client = self.client.clone();
            tokio::spawn(async move {
                let _ = client
                    .decline(call::Decline {
                        offer_ids: declined,
                        filters: Some(v1::Filters {
                            refuse_seconds: Some(0.0),
                        }),
                    })
                    .await;
            });
        }
    }

    fn update(&mut self, status: v1::TaskStatus, now: Instant) {
        let state = status.state();
        let counted = self.window.holds(now);
        match state {
            v1::TaskState::TaskRunning => {
                if let Some(offered) = self.offered_at.get(&status.task_id.value).copied()
                    && counted
                {
                    self.tally(|t| {
                        t.launched += 1;
                        t.latencies.push(now - offered);
                    });
                }
            }
            v1::TaskState::TaskFinished => {
                self.offered_at.remove(&status.task_id.value);
                if counted {
                    self.tally(|t| t.finished += 1);
                }
            }
            v1::TaskState::TaskStaging | v1::TaskState::TaskStarting => {}
            _ => {
                self.offered_at.remove(&status.task_id.value);
                if counted {
                    self.tally(|t| t.failed += 1);
                }
            }
        }
        if let (Some(uuid), Some(agent_id)) = (status.uuid, status.agent_id) {
            let client = self.client.clone();
            let ack = call::Acknowledge {
                agent_id,
                task_id: status.task_id,
                uuid,
            };
            tokio::spawn(async move {
                let _ = client.acknowledge(ack).await;
            });
        }
    }
}

/// The report as a table row (with its header).
pub fn format_report(r: &MesosReport) -> String {
    format!(
        "{:<8} {:>10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9}\n\
         {:<8} {:>10} {:>7} {:>8.3} {:>9} {:>9} {:>9} {:>10.0} {:>10.0} {:>9.2} {:>9.2}\n",
        "workload",
        "frameworks",
        "agents",
        "task s",
        "offers",
        "launched",
        "finished",
        "tasks/s",
        "offers/s",
        "p50 ms",
        "p99 ms",
        "mesos",
        r.frameworks,
        r.agents,
        r.task_duration_s,
        r.offers,
        r.launched,
        r.finished,
        r.tasks_per_second,
        r.offers_per_second,
        r.latency_p50_ms,
        r.latency_p99_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_launch_and_finish_tasks_over_http() {
        let report = run(&MesosOptions {
            frameworks: 2,
            agents: 2,
            agent_resources: "cpus:2;mem:2048".to_string(),
            task_duration: Duration::from_millis(20),
            allocation_interval: Duration::from_millis(20),
            seconds: 1.0,
            ..MesosOptions::default()
        })
        .expect("run");
        assert!(report.offers > 0, "{report:?}");
        assert!(report.launched > 0 && report.finished > 0, "{report:?}");
        assert_eq!(report.failed, 0, "{report:?}");
        assert!(report.latency_p50_ms <= report.latency_p99_ms, "{report:?}");
    }
}
