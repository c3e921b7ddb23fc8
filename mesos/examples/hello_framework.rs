//! A small Mesos framework on `MesosSchedulerDriver`: it runs N tasks that
//! each print a greeting, one per offer, and stops (tearing itself down)
//! once all have finished. Works against any Mesos master:
//!
//! ```sh
//! cargo run --release -- serve --mesos-addr 127.0.0.1:5050 --agents 2 &
//! cargo run -p unisched-mesos --example hello_framework -- 127.0.0.1:5050 5
//! ```
//!
//! The tests compile it and run it against a master of their own.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use unisched_mesos::client::ClientError;
use unisched_mesos::driver::{MesosSchedulerDriver, Scheduler, Status};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;

/// The framework's scheduler: its callbacks run one at a time on the
/// driver's callback thread, so plain fields need no lock.
struct Hello {
    tasks: usize,
    launched: usize,
    finished: Arc<AtomicUsize>,
    task_resources: Resources,
}

impl Scheduler for Hello {
    fn registered(
        &mut self,
        _driver: &MesosSchedulerDriver,
        framework_id: &v1::FrameworkId,
        _master: &v1::MasterInfo,
    ) {
        println!("registered as {}", framework_id.value);
    }

    fn resource_offers(&mut self, driver: &MesosSchedulerDriver, offers: &[v1::Offer]) {
        for offer in offers {
            let mut needed = self.task_resources.clone();
            if let Some(role) = offer.allocation_info.as_ref().and_then(|a| a.role.as_ref()) {
                needed.allocate(role);
            }
            let fits = Resources::from_vec(offer.resources.clone()).contains(&needed);
            if self.launched == self.tasks || !fits {
                driver.decline_offer(&offer.id, None);
                continue;
            }
            let id = format!("hello-{}", self.launched);
            self.launched += 1;
            let task = v1::TaskInfo {
                name: id.clone(),
                task_id: v1::TaskId { value: id.clone() },
                agent_id: offer.agent_id.clone(),
                resources: needed.to_vec(),
                command: Some(v1::CommandInfo {
                    value: Some(format!("echo hello from {id}")),
                    ..Default::default()
                }),
                ..Default::default()
            };
            driver.launch_tasks(std::slice::from_ref(&offer.id), vec![task], None);
        }
    }

    fn status_update(&mut self, driver: &MesosSchedulerDriver, status: &v1::TaskStatus) {
        println!(
            "{} is {}",
            status.task_id.value,
            status.state().as_str_name()
        );
        if status.state() == v1::TaskState::TaskFinished {
            if self.finished.fetch_add(1, Ordering::SeqCst) + 1 == self.tasks {
                // Returning from this callback acknowledges the update;
                // stopping here still lets the driver tear down cleanly.
                driver.stop(false);
            }
        } else if status.state().is_terminal() {
            eprintln!(
                "{} did not finish: {:?}",
                status.task_id.value, status.message
            );
            driver.stop(false);
        }
    }

    fn error(&mut self, _driver: &MesosSchedulerDriver, message: &str) {
        eprintln!("error: {message}");
    }
}

/// Runs `tasks` greetings on the master at `master`; returns the driver's
/// final status and how many tasks finished.
pub fn run(master: &str, tasks: usize) -> Result<(Status, usize), ClientError> {
    let finished = Arc::new(AtomicUsize::new(0));
    let scheduler = Hello {
        tasks,
        launched: 0,
        finished: finished.clone(),
        task_resources: Resources::parse("cpus:0.1;mem:32").unwrap_or_default(),
    };
    let framework = v1::FrameworkInfo {
        name: "hello".to_string(),
        ..Default::default()
    };
    let driver = MesosSchedulerDriver::new(scheduler, framework, master)?;
    let status = driver.run();
    Ok((status, finished.load(Ordering::SeqCst)))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let master = args.next().unwrap_or_else(|| "127.0.0.1:5050".to_string());
    let tasks = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    match run(&master, tasks) {
        Ok((Status::DriverStopped, finished)) if finished == tasks => ExitCode::SUCCESS,
        Ok((status, finished)) => {
            eprintln!(
                "{finished} of {tasks} finished; driver {}",
                status.as_str_name()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
