//! The `framework` subcommand: a Mesos framework on
//! `unisched_mesos::driver::MesosSchedulerDriver` that runs N copies of a
//! command on any Mesos master, shows its progress on a terminal, tears
//! itself down when done, and exits 0 only when every task finished.

pub mod batch;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use unisched_mesos::client::{Client, ClientOptions};
use unisched_mesos::driver::{DriverOptions, MesosSchedulerDriver};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;

use self::batch::{Batch, BatchScheduler, Outcome, Progress, SharedProgress, with};
pub use super::Encoding;

/// Arguments of `framework`.
#[derive(Debug, Clone, clap::Args)]
pub struct FrameworkArgs {
    /// The master: `host:port` or `http://host:port`.
    #[arg(long)]
    pub master: String,
    /// Tasks to run.
    #[arg(long)]
    pub tasks: usize,
    /// CPUs of each task.
    #[arg(long)]
    pub cpus: f64,
    /// Memory of each task, in MB.
    #[arg(long)]
    pub mem: f64,
    /// The shell command each task runs.
    #[arg(long)]
    pub command: String,
    /// The role to get offers for.
    #[arg(long, default_value = "*")]
    pub role: String,
    /// The framework's name.
    #[arg(long, default_value = "unisched-framework")]
    pub name: String,
    /// Body encoding of calls and events.
    #[arg(long, value_enum, default_value = "protobuf")]
    pub content_type: Encoding,
    /// Prints a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
    /// Gives up after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Gives up after this many seconds without the master.
    #[arg(long, default_value_t = 30.0)]
    pub master_timeout: f64,
    /// Seconds declined resources stay refused to this framework.
    #[arg(long, default_value_t = 5.0)]
    pub refuse_seconds: f64,
    /// Bearer token for the scheduler API.
    #[arg(long)]
    pub token: Option<String>,
    /// The framework's principal (`FrameworkInfo.principal`); with --secret,
    /// its credential, sent in HTTP Basic authentication.
    #[arg(long)]
    pub principal: Option<String>,
    /// The secret of --principal.
    #[arg(long, requires = "principal")]
    pub secret: Option<String>,
}

/// What a run of the framework did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// How it ended.
    pub outcome: Outcome,
    /// What it saw.
    pub progress: Progress,
    /// How long it ran.
    pub elapsed: Duration,
    /// Tasks it was to run.
    pub tasks: usize,
}

impl Summary {
    /// The JSON summary (`--json`).
    pub fn to_json(&self) -> serde_json::Value {
        let (ok, reason) = match &self.outcome {
            Outcome::Finished => (true, None),
            Outcome::Failed(why) => (false, Some(why.clone())),
        };
        serde_json::json!({
            "ok": ok,
            "reason": reason,
            "framework_id": self.progress.framework_id,
            "tasks": self.tasks,
            "launched": self.progress.launched,
            "states": self.progress.final_states,
            "offers_received": self.progress.offers_received,
            "offers_declined": self.progress.offers_declined,
            "seconds": self.elapsed.as_secs_f64(),
        })
    }
}

/// Why the framework could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A flag is unusable.
    #[error("{0}")]
    Flag(String),
    /// The master address is unusable.
    #[error(transparent)]
    Master(#[from] unisched_mesos::client::ClientError),
}

/// Runs `framework`.
pub fn run(args: FrameworkArgs) -> ExitCode {
    let bar = if std::io::stderr().is_terminal() && !args.json {
        ProgressBar::with_draw_target(Some(args.tasks as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} finished {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let summary = execute(&args, |p| {
        bar.set_position(p.finished as u64);
        bar.set_message(format!(
            "{} running, {} launched, {} offers",
            p.running, p.launched, p.offers_received
        ));
    });
    bar.finish_and_clear();
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", summary.to_json());
    } else {
        let states: Vec<String> = summary
            .progress
            .final_states
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        println!(
            "{} of {} tasks finished in {:.2} s ({}); offers: {} received, {} declined",
            summary.progress.finished,
            summary.tasks,
            summary.elapsed.as_secs_f64(),
            if states.is_empty() {
                "none ended".to_string()
            } else {
                states.join(", ")
            },
            summary.progress.offers_received,
            summary.progress.offers_declined,
        );
    }
    match summary.outcome {
        Outcome::Finished => ExitCode::SUCCESS,
        Outcome::Failed(why) => {
            eprintln!("error: {why}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the framework until its batch is over; `show` sees the progress
/// a few times a second.
pub fn execute(args: &FrameworkArgs, show: impl Fn(&Progress)) -> Result<Summary, SetupError> {
    let batch = batch_of(args)?;
    let client = Client::new(
        &args.master,
        ClientOptions {
            content_type: args.content_type.content_type(),
            token: args.token.clone(),
            credential: args.principal.clone().zip(args.secret.clone()),
            ..ClientOptions::default()
        },
    )?;
    let started = Instant::now();
    let progress = SharedProgress::default();
    let driver = MesosSchedulerDriver::with_client(
        BatchScheduler::new(batch, progress.clone()),
        framework_info(args),
        client,
        DriverOptions {
            implicit_acknowledgements: false,
            ..DriverOptions::default()
        },
    );
    driver.start();
    let timeout = seconds(args.timeout);
    let master_timeout = seconds(args.master_timeout);
    // The scheduler sets the outcome (done, a task failed, an error from the
    // master); this loop only adds the timeouts, so it always ends.
    while with(&progress, |p| p.outcome.is_none()) {
        std::thread::sleep(Duration::from_millis(100));
        let snapshot = with(&progress, |p| p.clone());
        show(&snapshot);
        let give_up = if started.elapsed() >= timeout {
            Some(format!(
                "timed out after {:.0} s with {} of {} tasks finished",
                timeout.as_secs_f64(),
                snapshot.finished,
                args.tasks
            ))
        } else {
            snapshot
                .disconnected_since
                .filter(|since| since.elapsed() >= master_timeout)
                .map(|since| {
                    format!(
                        "master gone: no connection to {} for {:.0} s",
                        args.master,
                        since.elapsed().as_secs_f64()
                    )
                })
        };
        if let Some(why) = give_up {
            with(&progress, |p| {
                p.outcome.get_or_insert(Outcome::Failed(why));
            });
        }
    }
    // Tears down (if the scheduler has not already) and waits for it.
    driver.stop(false);
    driver.join();
    let progress = with(&progress, |p| p.clone());
    show(&progress);
    Ok(Summary {
        outcome: progress
            .outcome
            .clone()
            .unwrap_or_else(|| Outcome::Failed("stopped without an outcome".to_string())),
        progress,
        elapsed: started.elapsed(),
        tasks: args.tasks,
    })
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// The batch the flags describe.
fn batch_of(args: &FrameworkArgs) -> Result<Batch, SetupError> {
    let flag = |m: String| SetupError::Flag(m);
    if args.tasks == 0 {
        return Err(flag("--tasks must be at least 1".to_string()));
    }
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if !positive(args.cpus) || !positive(args.mem) {
        return Err(flag("--cpus and --mem must be positive".to_string()));
    }
    let task_resources = Resources::parse(&format!("cpus:{};mem:{}", args.cpus, args.mem))
        .map_err(|e| flag(format!("task resources: {e}")))?;
    Ok(Batch {
        tasks: args.tasks,
        task_resources,
        command: args.command.clone(),
        refuse_seconds: args.refuse_seconds,
    })
}

/// The framework info the flags describe.
#[allow(deprecated)] // Single-role frameworks name their role in `role`.
fn framework_info(args: &FrameworkArgs) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        name: args.name.clone(),
        role: Some(args.role.clone()),
        principal: args.principal.clone(),
        ..Default::default()
    }
}
