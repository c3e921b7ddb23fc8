//! The `framework` subcommand's scheduler: runs N copies of a command from
//! offers, as many per offer as fit, acknowledges every update, declines
//! what it does not use with a filter, and stops (tearing the framework
//! down) once every task finished or one did not.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use unisched_mesos::driver::{MesosSchedulerDriver, Scheduler};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;

/// What a batch is to run.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Tasks to run.
    pub tasks: usize,
    /// Resources of each task (unreserved, any role).
    pub task_resources: Resources,
    /// The shell command of each task.
    pub command: String,
    /// Seconds unused resources are refused for.
    pub refuse_seconds: f64,
}

/// How the batch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every task reached TASK_FINISHED.
    Finished,
    /// It did not, and why.
    Failed(String),
}

/// What the scheduler has seen so far; shared with the thread that shows it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// The framework id, once registered.
    pub framework_id: Option<String>,
    /// Tasks handed to the master.
    pub launched: usize,
    /// Tasks last seen running.
    pub running: usize,
    /// Tasks that finished.
    pub finished: usize,
    /// Final states by name (`TASK_FINISHED`: 10).
    pub final_states: BTreeMap<String, usize>,
    /// OFFERS received (one per offer).
    pub offers_received: usize,
    /// Offers declined whole.
    pub offers_declined: usize,
    /// Since when the driver has been disconnected (or waiting to register).
    pub disconnected_since: Option<Instant>,
    /// Set once the batch is over.
    pub outcome: Option<Outcome>,
}

/// The progress handle shared between the scheduler and its watcher.
pub type SharedProgress = Arc<Mutex<Progress>>;

/// Reads or changes the shared progress.
pub fn with<T>(progress: &SharedProgress, f: impl FnOnce(&mut Progress) -> T) -> T {
    f(&mut progress.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The batch's scheduler.
pub struct BatchScheduler {
    batch: Batch,
    progress: SharedProgress,
    /// The last state seen of each launched task.
    states: BTreeMap<String, v1::TaskState>,
    suppressed: bool,
}

impl BatchScheduler {
    /// A scheduler for `batch` reporting into `progress`.
    pub fn new(batch: Batch, progress: SharedProgress) -> Self {
        with(&progress, |p| p.disconnected_since = Some(Instant::now()));
        Self {
            batch,
            progress,
            states: BTreeMap::new(),
            suppressed: false,
        }
    }

    fn filters(&self) -> Option<v1::Filters> {
        Some(v1::Filters {
            refuse_seconds: Some(self.batch.refuse_seconds),
        })
    }

    /// The tasks that fit in `offer`, numbered from `first`, at most `wanted`.
    fn pack(&self, offer: &v1::Offer, first: usize, wanted: usize) -> Vec<v1::TaskInfo> {
        let mut available = Resources::from_vec(offer.resources.clone());
        let mut needed = self.batch.task_resources.clone();
        if let Some(info) = &offer.allocation_info
            && let Some(role) = &info.role
        {
            needed.allocate(role);
        }
        let mut tasks = Vec::new();
        while tasks.len() < wanted && available.contains(&needed) {
            available.subtract(&needed);
            let id = format!("task-{}", first + tasks.len());
            tasks.push(v1::TaskInfo {
                name: id.clone(),
                task_id: v1::TaskId { value: id },
                agent_id: offer.agent_id.clone(),
                resources: needed.to_vec(),
                command: Some(v1::CommandInfo {
                    value: Some(self.batch.command.clone()),
                    shell: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        tasks
    }

    fn finish(&self, driver: &MesosSchedulerDriver, outcome: Outcome) {
        with(&self.progress, |p| {
            if p.outcome.is_none() {
                p.outcome = Some(outcome);
            }
        });
        driver.stop(false);
    }
}

impl Scheduler for BatchScheduler {
    fn registered(
        &mut self,
        _driver: &MesosSchedulerDriver,
        framework_id: &v1::FrameworkId,
        _master: &v1::MasterInfo,
    ) {
        with(&self.progress, |p| {
            p.framework_id = Some(framework_id.value.clone());
            p.disconnected_since = None;
        });
    }

    fn reregistered(&mut self, _driver: &MesosSchedulerDriver, _master: &v1::MasterInfo) {
        with(&self.progress, |p| p.disconnected_since = None);
    }

    fn disconnected(&mut self, _driver: &MesosSchedulerDriver) {
        with(&self.progress, |p| {
            p.disconnected_since = Some(Instant::now())
        });
    }

    fn resource_offers(&mut self, driver: &MesosSchedulerDriver, offers: &[v1::Offer]) {
        for offer in offers {
            let launched = with(&self.progress, |p| {
                p.offers_received += 1;
                p.launched
            });
            let tasks = self.pack(offer, launched, self.batch.tasks.saturating_sub(launched));
            if tasks.is_empty() {
                driver.decline_offer(&offer.id, self.filters());
                with(&self.progress, |p| p.offers_declined += 1);
                continue;
            }
            for t in &tasks {
                self.states
                    .insert(t.task_id.value.clone(), v1::TaskState::TaskStaging);
            }
            with(&self.progress, |p| p.launched += tasks.len());
            driver.launch_tasks(std::slice::from_ref(&offer.id), tasks, self.filters());
        }
        let all_launched = with(&self.progress, |p| p.launched >= self.batch.tasks);
        if all_launched && !self.suppressed {
            self.suppressed = true;
            driver.suppress_offers();
        }
    }

    fn status_update(&mut self, driver: &MesosSchedulerDriver, status: &v1::TaskStatus) {
        driver.acknowledge_status_update(status);
        let id = status.task_id.value.clone();
        let state = status.state();
        let Some(previous) = self.states.get(&id).copied() else {
            return; // Not one of ours (a reconciliation answer for another).
        };
        if previous.is_terminal() {
            return; // Seen already (a redelivery).
        }
        self.states.insert(id.clone(), state);
        let outcome = with(&self.progress, |p| {
            if previous == v1::TaskState::TaskRunning {
                p.running -= 1;
            }
            if state == v1::TaskState::TaskRunning {
                p.running += 1;
            }
            if !state.is_terminal() {
                return None;
            }
            *p.final_states
                .entry(state.as_str_name().to_string())
                .or_default() += 1;
            if state == v1::TaskState::TaskFinished {
                p.finished += 1;
                (p.finished == self.batch.tasks).then_some(Outcome::Finished)
            } else {
                let why = status
                    .message
                    .as_deref()
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                Some(Outcome::Failed(format!(
                    "task {id} ended {}{why}",
                    state.as_str_name()
                )))
            }
        });
        if let Some(outcome) = outcome {
            self.finish(driver, outcome);
        }
    }

    fn error(&mut self, driver: &MesosSchedulerDriver, message: &str) {
        self.finish(
            driver,
            Outcome::Failed(format!("the master refused the framework: {message}")),
        );
    }
}
