//! Real Mesos framework libraries against the master, unchanged: each runs
//! a small framework (its script under `mesos/tests/<library>/`) that
//! launches command tasks through `POST /api/v1/scheduler`, on agents that
//! run them with `/bin/sh -c`, and tears itself down.
//!
//! - pymesos 0.3.15 (PyPI; the scheduler driver Python frameworks use):
//!   Python 3.10 or older (its http-parser dependency).
//! - mesoshttp 0.3.2 (PyPI): JSON, and a stream read line by line.
//! - mesos-framework 0.5.3 (npm; Node.js): JSON, one event per chunk, and
//!   the agent's address read from each offer's `url`.
//! - mesos-go (the Mesos project's Go bindings, Debian's
//!   golang-github-mesos-mesos-go-dev 0.0.6): its v1 client, httpsched and
//!   controller, in protobuf (its default) and in JSON; and its v0
//!   scheduler driver, a Go copy of libmesos' native driver, which speaks
//!   the older libprocess protocol (`/master/mesos.internal.*` messages)
//!   as Spark's, Marathon's and the other JVM frameworks' drivers do.
//!
//! `.ci/run` installs the first three under `target/` (`pymesos-venv`,
//! `mesoshttp-venv`, `mesos-framework-node`) and mesos-go with Go from
//! Debian (sources under `/usr/share/gocode`; the test builds its framework
//! into `target/mesos-go-framework/`). Elsewhere, point
//! `UNISCHED_PYMESOS_PYTHON` or `UNISCHED_MESOSHTTP_PYTHON` at a python that
//! imports the library, `UNISCHED_MESOS_FRAMEWORK_MODULES` at a
//! `node_modules` holding mesos-framework, or `UNISCHED_MESOS_GO_PATH` at a
//! GOPATH holding mesos-go. Without one a test says so and passes, unless
//! CI's `UNISCHED_REQUIRE_PYMESOS`, `UNISCHED_REQUIRE_MESOSHTTP`,
//! `UNISCHED_REQUIRE_MESOS_FRAMEWORK` or `UNISCHED_REQUIRE_MESOS_GO` makes
//! that a failure.

mod common;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use unisched_core::{Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::local::{self, LocalOptions};
use unisched_mesos::resources::Resources;

/// Tasks each framework launches.
const TASKS: usize = 6;

fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// What `probe` found, or `None` after saying the test is skipped (a
/// failure instead when `require` is set).
fn found<T>(library: &str, require: &str, probe: Option<T>) -> Option<T> {
    if probe.is_none() {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {library} was not found"
        );
        eprintln!(
            "SKIPPED: {library} not found (see the module docs of mesos/tests/framework_libraries.rs)"
        );
    }
    probe
}

/// A python (from `variable`, else the virtualenv `venv` under `target/`)
/// that imports `module`.
fn python_with(module: &str, variable: &str, venv: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path(&format!("../target/{venv}/bin/python")));
    let works = Command::new(&candidate)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(candidate)
}

/// A check of the agents' work directory after a framework's run.
type SandboxCheck = Box<dyn Fn(&std::path::Path) + Send>;

/// A framework program: what to run, and where.
struct Framework {
    program: PathBuf,
    /// Its arguments before the master's address and the task count.
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    /// Its working directory, made for it (under the test's own).
    dir: Option<&'static str>,
    /// More checks of the agents' work directory once it is torn down.
    check_sandboxes: Option<SandboxCheck>,
    /// The master requires authentication (`--mesos-credentials` with
    /// `--mesos-authenticate-frameworks` and
    /// `--mesos-authenticate-http-frameworks`), and the framework is given
    /// its credential in FRAMEWORK_PRINCIPAL and FRAMEWORK_SECRET.
    authenticated: bool,
}

/// The principal and secret of [`Framework::authenticated`] runs.
const CREDENTIAL: (&str, &str) = ("tester", "t0p-s3cret");

/// Runs `framework` against a master with two process agents, with the
/// master's address and the task count as its arguments; checks that every
/// task finished in a sandbox of its own and that its teardown left nothing
/// behind in the master or the core. Returns the JSON summary it printed
/// last.
async fn runs_to_completion(name: &str, framework: Framework) -> serde_json::Value {
    let work_dir = std::env::temp_dir().join(format!("unisched-{name}-{}", std::process::id()));
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let mut env = framework.env;
    let mut options = LocalOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        agents: 2,
        agent_resources: Resources::parse("cpus:2;mem:1024;ports:[31000-31100]").unwrap(),
        executor: ExecutorKind::Process,
        work_dir: work_dir.join("agents"),
        ..Default::default()
    };
    if framework.authenticated {
        options.credentials = Some(unisched_mesos::master::auth::Credentials::from_pairs([
            CREDENTIAL,
        ]));
        options.authenticate_frameworks = true;
        options.authenticate_http_frameworks = true;
        env.push(("FRAMEWORK_PRINCIPAL", CREDENTIAL.0.into()));
        env.push(("FRAMEWORK_SECRET", CREDENTIAL.1.into()));
    }
    let cluster = local::start(scheduler.clone(), options)
        .await
        .expect("master starts");
    let master = cluster.addr.to_string();
    let cwd = framework.dir.map(|d| work_dir.join(d));
    if let Some(cwd) = &cwd {
        std::fs::create_dir_all(cwd).expect("the framework's directory");
    }
    let output = tokio::task::spawn_blocking(move || {
        let mut command = Command::new(&framework.program);
        command
            .args(&framework.args)
            .arg(master)
            .arg(TASKS.to_string())
            .envs(env);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        command.output().expect("the framework runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the {name} framework failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(last).expect("a JSON summary");
    assert_eq!(summary["finished"], TASKS, "{summary}");
    // Each task wrote into its own sandbox.
    let outputs = common::walk(&work_dir.join("agents"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "out.txt"))
        .count();
    assert_eq!(outputs, TASKS);
    let state = torn_down(&cluster.addr.to_string(), &scheduler).await;
    if framework.authenticated {
        // It registered as its authenticated principal.
        assert_eq!(
            state["completed_frameworks"][0]["principal"], CREDENTIAL.0,
            "{state}"
        );
    }
    if let Some(check) = framework.check_sandboxes {
        check(&work_dir.join("agents"));
    }
    cluster.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _ = std::fs::remove_dir_all(work_dir);
    summary
}

/// Nothing of the torn-down framework is left in the master or the core.
async fn torn_down(master: &str, scheduler: &Scheduler) -> serde_json::Value {
    // The teardown call may still be on its way when the program exits.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let state = loop {
        let state: serde_json::Value = reqwest::get(format!("http://{master}/state"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if state["frameworks"].as_array().unwrap().is_empty()
            || tokio::time::Instant::now() > deadline
        {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 0, "{state}");
    assert_eq!(state["completed_frameworks"].as_array().unwrap().len(), 1);
    for slave in state["slaves"].as_array().unwrap() {
        assert_eq!(slave["used_resources"]["cpus"], 0.0, "{slave}");
        assert_eq!(slave["offered_resources"]["cpus"], 0.0, "{slave}");
    }
    scheduler.settle();
    let snap = scheduler.snapshot("mesos").expect("the Mesos partition");
    assert!(
        snap.nodes.iter().all(|n| n.allocated.is_empty()),
        "{:?}",
        snap.nodes
    );
    state
}

/// Runs the framework of Python library `module` (its script
/// `tests/<module>/framework.py`) when a python with it is found (see
/// [`python_with`], [`found`]); its summary.
async fn python_library(
    module: &str,
    python_variable: &str,
    venv: &str,
    require: &str,
    authenticated: bool,
) -> Option<serde_json::Value> {
    let python = found(module, require, python_with(module, python_variable, venv))?;
    let framework = Framework {
        program: python,
        args: vec![repo_path(&format!("tests/{module}/framework.py")).into()],
        env: Vec::new(),
        dir: None,
        check_sandboxes: None,
        authenticated,
    };
    Some(runs_to_completion(module, framework).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_runs_command_tasks_to_completion() {
    python_library(
        "pymesos",
        "UNISCHED_PYMESOS_PYTHON",
        "pymesos-venv",
        "UNISCHED_REQUIRE_PYMESOS",
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_runs_tasks_on_its_own_executor() {
    let probe = python_with("pymesos", "UNISCHED_PYMESOS_PYTHON", "pymesos-venv");
    let Some(python) = found("pymesos", "UNISCHED_REQUIRE_PYMESOS", probe) else {
        return;
    };
    let framework = Framework {
        program: python,
        args: vec![repo_path("tests/pymesos/executor_framework.py").into()],
        env: Vec::new(),
        dir: None,
        check_sandboxes: Some(Box::new(|agents| {
            executors_answered_and_ended(agents, "pe-", "executor_framework.py executor");
        })),
        authenticated: false,
    };
    let summary = runs_to_completion("pymesos-executor", framework).await;
    // Every task's executor sent its framework a message (MESSAGE call,
    // MESSAGE event); one executor per agent that got tasks.
    let messages = summary["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), TASKS, "{summary}");
    let executors = summary["executors"].as_array().expect("executors");
    assert!(!executors.is_empty() && executors.len() <= 2, "{summary}");
}

/// The lines of every file named `name` under `dir`.
fn lines_of_files(dir: &std::path::Path, name: &str) -> Vec<String> {
    common::walk(dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == name))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The executors got the scheduler's reply to each of their messages
/// (MESSAGE call, then MESSAGE event; `replies.txt` in their sandboxes,
/// one reply `thanks <task>` a task), and none outlived the teardown
/// (SHUTDOWN, then their process group killed after the grace period):
/// no process whose command line holds `marker` is left.
fn executors_answered_and_ended(agents: &std::path::Path, task_prefix: &str, marker: &str) {
    let replies = lines_of_files(agents, "replies.txt");
    assert_eq!(replies.len(), TASKS, "{replies:?}");
    let thanks = format!("thanks {task_prefix}");
    assert!(
        replies.iter().all(|r| r.starts_with(&thanks)),
        "{replies:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let alive: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(marker))
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "executors left running: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// As [`executors_answered_and_ended`] (executors in `codec`); and each
/// mesos-go executor had every update acknowledged (ACKNOWLEDGED events)
/// when SHUTDOWN came.
fn mesos_go_executors_answered_and_ended(agents: &std::path::Path, codec: &str) {
    executors_answered_and_ended(agents, "mg-", &format!(" -executor -codec {codec}"));
    let notes = lines_of_files(agents, "shutdown.txt");
    assert!(!notes.is_empty(), "no executor noted its SHUTDOWN");
    assert!(notes.iter().all(|n| n == "unacknowledged: 0"), "{notes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesoshttp_runs_command_tasks_to_completion() {
    let Some(summary) = python_library(
        "mesoshttp",
        "UNISCHED_MESOSHTTP_PYTHON",
        "mesoshttp-venv",
        "UNISCHED_REQUIRE_MESOSHTTP",
        false,
    )
    .await
    else {
        return;
    };
    // Each offer named its agent's URL: the master's address, the agent's
    // endpoints under /slave(N) (as /state's pids say).
    let urls = summary["agent_urls"].as_array().expect("agent URLs");
    assert!(!urls.is_empty(), "{summary}");
    for url in urls {
        let url = url.as_str().unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.contains("/slave("),
            "{url}"
        );
    }
}

/// Node and a `node_modules` holding mesos-framework, if both are there.
fn mesos_framework_modules() -> Option<PathBuf> {
    let modules = std::env::var_os("UNISCHED_MESOS_FRAMEWORK_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path("../target/mesos-framework-node/node_modules"));
    let works = Command::new("node")
        .args(["-e", "require('mesos-framework')"])
        .env("NODE_PATH", &modules)
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(modules)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_framework_for_node_runs_command_tasks_to_completion() {
    let probe = mesos_framework_modules();
    let Some(modules) = found(
        "mesos-framework (Node.js)",
        "UNISCHED_REQUIRE_MESOS_FRAMEWORK",
        probe,
    ) else {
        return;
    };
    let framework = Framework {
        program: PathBuf::from("node"),
        args: vec![repo_path("tests/mesos-framework/framework.js").into()],
        env: vec![("NODE_PATH", modules.into_os_string())],
        // It logs into `logs/` under its working directory.
        dir: Some("node"),
        check_sandboxes: None,
        authenticated: false,
    };
    let summary = runs_to_completion("mesos-framework", framework).await;
    assert_eq!(
        summary["agent_ips"],
        serde_json::json!(["127.0.0.1"]),
        "{summary}"
    );
}

/// A GOPATH holding mesos-go's v1 and v0 sources, with Go to build
/// against it.
fn mesos_go_path() -> Option<PathBuf> {
    let gopath = std::env::var_os("UNISCHED_MESOS_GO_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/gocode"));
    let api = gopath.join("src/github.com/mesos/mesos-go/api");
    let sources =
        api.join("v1/lib/httpcli/httpsched").is_dir() && api.join("v0/scheduler").is_dir();
    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    (go && sources).then_some(gopath)
}

/// Builds `tests/<source>` (GOPATH mode, against `gopath`) into
/// `target/mesos-go-framework/`, one program per test so that two tests
/// never write one file.
fn build_mesos_go_program(gopath: &std::path::Path, source: &str, name: &str) -> PathBuf {
    let dir = repo_path("../target/mesos-go-framework");
    std::fs::create_dir_all(&dir).expect("the build directory");
    let program = dir.join(name);
    let output = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&program)
        .arg(repo_path(&format!("tests/{source}")))
        .env("GOPATH", gopath)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", dir.join("cache"))
        .output()
        .expect("go runs");
    assert!(
        output.status.success(),
        "{source} does not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    program
}

/// Runs the mesos-go framework in `codec` (its tasks on its own executor
/// when `custom`); its summary.
async fn mesos_go(codec: &str, custom: bool, authenticated: bool) -> Option<serde_json::Value> {
    let gopath = found("mesos-go", "UNISCHED_REQUIRE_MESOS_GO", mesos_go_path())?;
    let kind = match (custom, authenticated) {
        (true, _) => "custom",
        (false, true) => "authenticated",
        (false, false) => "command",
    };
    let program = tokio::task::spawn_blocking({
        let name = format!("framework-{codec}-{kind}");
        move || build_mesos_go_program(&gopath, "mesos-go/framework.go", &name)
    })
    .await
    .unwrap();
    let mut args = vec!["-codec".into(), codec.into()];
    if custom {
        args.push("-custom".into());
    }
    let framework = Framework {
        program,
        args,
        env: Vec::new(),
        dir: None,
        check_sandboxes: custom.then(|| {
            let codec = codec.to_string();
            Box::new(move |agents: &std::path::Path| {
                mesos_go_executors_answered_and_ended(agents, &codec);
            }) as SandboxCheck
        }),
        authenticated,
    };
    let summary = runs_to_completion(&format!("mesos-go-{codec}-{kind}"), framework).await;
    // Every update carried a uuid, which the library acknowledged: the
    // command executor's TASK_STARTING, TASK_RUNNING and TASK_FINISHED of
    // each task; the framework's own executor sends no TASK_STARTING.
    let updates = if custom { 2 } else { 3 };
    assert_eq!(summary["acknowledged"], updates * TASKS, "{summary}");
    let urls = summary["agent_urls"].as_array().expect("agent URLs");
    assert_eq!(urls.len(), 2, "{summary}");
    if custom {
        let messages = summary["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), TASKS, "{summary}");
    }
    Some(summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_runs_command_tasks_to_completion_in_protobuf() {
    if let Some(summary) = mesos_go("protobuf", false, false).await {
        assert_eq!(summary["codec"], "application/x-protobuf", "{summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_runs_command_tasks_to_completion_in_json() {
    if let Some(summary) = mesos_go("json", false, false).await {
        assert_eq!(summary["codec"], "application/json", "{summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_runs_tasks_on_its_own_executor_in_protobuf() {
    mesos_go("protobuf", true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_runs_tasks_on_its_own_executor_in_json() {
    mesos_go("json", true, false).await;
}

/// Runs the framework on mesos-go's v0 drivers (libprocess messages both
/// ways; its tasks on its own executor, on the v0 executor driver, when
/// `custom`): it registers, launches the tasks with LaunchTasksMessage,
/// acknowledges each update to the master, kills a long task, reconciles a
/// task that never was (TASK_LOST, as the framework is not partition
/// aware), revives, and unregisters. Its summary.
async fn mesos_go_v0(custom: bool, authenticated: bool) -> Option<serde_json::Value> {
    let gopath = found("mesos-go", "UNISCHED_REQUIRE_MESOS_GO", mesos_go_path())?;
    let name = match (custom, authenticated) {
        (true, _) => "framework-v0-custom",
        (false, true) => "framework-v0-authenticated",
        (false, false) => "framework-v0",
    };
    let program = tokio::task::spawn_blocking(move || {
        build_mesos_go_program(&gopath, "mesos-go-v0/framework.go", name)
    })
    .await
    .unwrap();
    let framework = Framework {
        program,
        args: if custom {
            vec!["-custom".into()]
        } else {
            Vec::new()
        },
        env: Vec::new(),
        dir: None,
        check_sandboxes: custom.then(|| {
            Box::new(|agents: &std::path::Path| {
                executors_answered_and_ended(agents, "task-", "framework-v0-custom -executor");
                let notes = lines_of_files(agents, "shutdown.txt");
                assert_eq!(notes.len(), 2, "each agent's executor noted its SHUTDOWN");
            }) as SandboxCheck
        }),
        authenticated,
    };
    let summary = runs_to_completion(name, framework).await;
    assert_eq!(summary["registered"], 1, "{summary}");
    assert_eq!(summary["killed"], true, "{summary}");
    assert_eq!(summary["reconciled_unknown_task"], "TASK_LOST", "{summary}");
    assert_eq!(
        summary["last_states"]["long-running"], "TASK_KILLED",
        "{summary}"
    );
    assert_eq!(summary["driver_status"], "DRIVER_STOPPED", "{summary}");
    if custom {
        let messages = summary["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), TASKS, "{summary}");
    }
    Some(summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_v0_driver_runs_command_tasks_over_libprocess() {
    mesos_go_v0(false, false).await;
}

/// The tasks on the framework's own executor, on mesos-go's v0 executor
/// driver: it registers with its agent's process (MESOS_SLAVE_PID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_v0_drivers_run_tasks_on_their_own_executor_over_libprocess() {
    mesos_go_v0(true, false).await;
}

/// Against a master that requires authentication, pymesos sends its
/// credential in HTTP Basic on every call (`principal`, `secret`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_authenticates_with_basic_credentials() {
    python_library(
        "pymesos",
        "UNISCHED_PYMESOS_PYTHON",
        "pymesos-venv",
        "UNISCHED_REQUIRE_PYMESOS",
        true,
    )
    .await;
}

/// Against a master that requires authentication, mesos-go's v0 driver
/// authenticates with SASL CRAM-MD5 (its authenticatee a process of its
/// own) before it registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_v0_driver_authenticates_with_sasl() {
    mesos_go_v0(false, true).await;
}

/// mesos-go's v1 scheduler with its credential in HTTP Basic
/// (`httpcli.BasicAuth`), against a master that requires it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesos_go_authenticates_with_basic_credentials() {
    mesos_go("protobuf", false, true).await;
}

/// pymesos' operator driver (`MesosOperatorMasterDriver`, the v1 operator
/// API): it subscribes to the master's events and makes the read-only
/// calls while a pymesos framework runs a task and goes
/// (`tests/pymesos/operator_watch.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymesos_operator_driver_watches_the_master() {
    let Some(python) = found(
        "pymesos",
        "UNISCHED_REQUIRE_PYMESOS",
        python_with("pymesos", "UNISCHED_PYMESOS_PYTHON", "pymesos-venv"),
    ) else {
        return;
    };
    let work_dir =
        std::env::temp_dir().join(format!("unisched-operator-watch-{}", std::process::id()));
    let levels = Levels::default();
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let cluster = local::start(
        scheduler.clone(),
        LocalOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            agents: 2,
            agent_resources: Resources::parse("cpus:2;mem:1024").unwrap(),
            executor: ExecutorKind::Process,
            work_dir: work_dir.clone(),
            settings: unisched_mesos::master::Settings {
                logging: Some(unisched_mesos::master::logging::LogControl(std::sync::Arc::new(
                    levels.clone(),
                ))),
                ..Default::default()
            },
            // The framework's role has a quota limit, which GET_QUOTA shows.
            config: Some(
                "partitions:\n  - name: mesos\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: ops\n            resources:\n              max: {vcore: 2, memory: 1Gi}\n"
                    .to_string(),
            ),
            ..Default::default()
        },
    )
    .await
    .expect("master starts");
    let master = cluster.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(repo_path("tests/pymesos/operator_watch.py"))
            .arg(master)
            .output()
            .expect("the watcher runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("a JSON summary");
    assert_eq!(summary["agents_at_start"], 2, "{summary}");
    assert_eq!(summary["agents"], 2, "{summary}");
    assert_eq!(summary["healthy"], true, "{summary}");
    assert_eq!(
        summary["version"],
        unisched_mesos::MESOS_VERSION,
        "{summary}"
    );
    assert_eq!(summary["state_frameworks"], 1, "{summary}");
    assert_eq!(summary["roles"], serde_json::json!(["ops"]), "{summary}");
    assert_eq!(
        summary["quota"],
        serde_json::json!({"ops": {"cpus": {"value": 2.0}, "mem": {"value": 1024.0}}}),
        "{summary}"
    );
    assert_eq!(
        summary["reserved"],
        serde_json::json!({"ops": 0.5}),
        "{summary}"
    );
    assert_eq!(
        summary["reserved_after"],
        serde_json::json!({}),
        "{summary}"
    );
    assert_eq!(
        summary["weights"],
        serde_json::json!({"ops": 2.0}),
        "{summary}"
    );
    assert_eq!(
        summary["quota_set"],
        serde_json::json!(["batch", "ops"]),
        "{summary}"
    );
    let refused = summary["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("code=400") && refused.contains("which already has quota"),
        "{summary}"
    );
    assert_eq!(
        summary["quota_removed"],
        serde_json::json!(["ops"]),
        "{summary}"
    );
    assert_eq!(
        summary["completed_tasks"],
        serde_json::json!(["TASK_FINISHED"]),
        "{summary}"
    );
    assert_eq!(summary["logging_level"], 1, "{summary}");
    assert_eq!(*levels.0.lock().unwrap(), [1]);
    let gone = summary["gone"].as_str().unwrap_or_default().to_string();
    let left = summary["agents_after_gone"]
        .as_array()
        .expect("agents after");
    assert_eq!(left.len(), 1, "{summary}");
    assert_ne!(left[0], gone.as_str(), "{summary}");
    let events: Vec<(String, String)> = summary["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_string(),
                e[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("FRAMEWORK_ADDED", "watched"),
        ("TASK_ADDED", "op-task"),
        ("TASK_UPDATED", "TASK_RUNNING"),
        ("TASK_UPDATED", "TASK_FINISHED"),
        ("FRAMEWORK_REMOVED", "watched"),
        ("AGENT_REMOVED", gone.as_str()),
    ];
    // In this order (TASK_STARTING may come between).
    let mut at = 0;
    for (kind, detail) in &events {
        if at < expected.len() && (kind.as_str(), detail.as_str()) == expected[at] {
            at += 1;
        }
    }
    assert_eq!(at, expected.len(), "{events:?}");
    cluster.stop();
    let _ = std::fs::remove_dir_all(work_dir);
}

/// Records the logging levels the master sets (and shares them).
#[derive(Default, Clone)]
struct Levels(std::sync::Arc<std::sync::Mutex<Vec<u32>>>);

impl unisched_mesos::master::logging::LogVerbosity for Levels {
    fn set_level(&self, level: u32) -> Result<(), String> {
        self.0.lock().unwrap().push(level);
        Ok(())
    }
}
