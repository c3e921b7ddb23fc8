//! The embedded agents as the master drives them: launches, kills,
//! shutdowns and the updates that come back, in order.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use unisched_mesos::agent::{AgentBackend, AgentUpdate, Launch, UpdateSink};
use unisched_mesos::v1;
use unisched_mesos::v1::TaskState;

/// Longest wait for one update; tests normally get theirs in milliseconds.
const PATIENCE: Duration = Duration::from_secs(20);
const AGENT: &str = "agent-1";
const FRAMEWORK: &str = "framework-1";

/// Collects what an agent sends.
struct Updates {
    inbox: mpsc::UnboundedReceiver<AgentUpdate>,
}

fn sink() -> (UpdateSink, Updates) {
    let (tx, inbox) = mpsc::unbounded_channel();
    let sink: UpdateSink = Arc::new(move |update| {
        let _ = tx.send(update);
    });
    (sink, Updates { inbox })
}

impl Updates {
    async fn next(&mut self) -> AgentUpdate {
        timeout(PATIENCE, self.inbox.recv())
            .await
            .expect("an update in time")
            .expect("the sink is alive")
    }

    async fn status(&mut self) -> v1::TaskStatus {
        match self.next().await {
            AgentUpdate::Status {
                agent_id,
                framework_id,
                status,
            } => {
                assert_eq!(agent_id, AGENT);
                assert_eq!(framework_id, FRAMEWORK);
                assert_eq!(
                    status.agent_id.as_ref().map(|a| a.value.as_str()),
                    Some(AGENT)
                );
                assert!(status.timestamp.is_some_and(|t| t > 1e9));
                *status
            }
            other => panic!("expected a status, got {other:?}"),
        }
    }

    /// The next statuses of `task`, which must come in this order.
    async fn expect_states(&mut self, task: &str, states: &[TaskState]) -> Vec<v1::TaskStatus> {
        let mut got = Vec::new();
        for want in states {
            let status = self.status().await;
            assert_eq!(status.task_id.value, task);
            assert_eq!(
                status.state(),
                *want,
                "statuses so far: {got:?}, then {status:?}"
            );
            got.push(status);
        }
        got
    }

    async fn expect_executor_exited(&mut self, executor: &str) -> i32 {
        match self.next().await {
            AgentUpdate::ExecutorExited {
                executor_id,
                status,
                ..
            } => {
                assert_eq!(executor_id, executor);
                status
            }
            other => panic!("expected ExecutorExited, got {other:?}"),
        }
    }

    /// Nothing arrives for `quiet`.
    async fn expect_silence(&mut self, quiet: Duration) {
        // A closed channel (the agent's loop gone) is silence too.
        if let Ok(Some(update)) = timeout(quiet, self.inbox.recv()).await {
            panic!("expected no update, got {update:?}");
        }
    }
}

fn framework(killing_state: bool) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "nobody".to_string(),
        name: "test".to_string(),
        id: Some(v1::FrameworkId {
            value: FRAMEWORK.to_string(),
        }),
        capabilities: if killing_state {
            vec![v1::framework_info::Capability {
                r#type: Some(v1::framework_info::capability::Type::TaskKillingState as i32),
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

fn task(id: &str, command: Option<v1::CommandInfo>) -> v1::TaskInfo {
    v1::TaskInfo {
        name: id.to_string(),
        task_id: v1::TaskId {
            value: id.to_string(),
        },
        agent_id: v1::AgentId {
            value: AGENT.to_string(),
        },
        command,
        ..Default::default()
    }
}

fn shell(script: &str) -> v1::CommandInfo {
    v1::CommandInfo {
        value: Some(script.to_string()),
        ..Default::default()
    }
}

fn launch(task: v1::TaskInfo) -> Launch {
    Launch {
        framework: framework(false),
        agent_id: AGENT.to_string(),
        task,
        executor: None,
    }
}

fn default_executor(id: &str) -> v1::ExecutorInfo {
    v1::ExecutorInfo {
        r#type: Some(v1::executor_info::Type::Default as i32),
        executor_id: v1::ExecutorId {
            value: id.to_string(),
        },
        ..Default::default()
    }
}

fn with_label(mut task: v1::TaskInfo, key: &str, value: &str) -> v1::TaskInfo {
    task.labels = Some(v1::Labels {
        labels: vec![v1::Label {
            key: key.to_string(),
            value: Some(value.to_string()),
        }],
    });
    task
}

/// Polls `check` until it holds.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

mod process_agent {
    use super::*;
    use unisched_mesos::agent::process::ProcessAgent;

    /// A fresh work directory, removed when dropped.
    struct WorkDir(PathBuf);

    impl WorkDir {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("unisched-agents-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("work dir");
            Self(dir)
        }

        /// The one run directory of an executor.
        fn run_dir(&self, executor: &str) -> PathBuf {
            let runs = self
                .0
                .join(AGENT)
                .join("frameworks")
                .join(FRAMEWORK)
                .join("executors")
                .join(executor)
                .join("runs");
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs)
                .expect("runs directory")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.file_name().is_some_and(|n| n != "latest"))
                .collect();
            assert_eq!(dirs.len(), 1, "{dirs:?}");
            dirs.remove(0)
        }
    }

    impl Drop for WorkDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn agent(work: &WorkDir) -> (Arc<ProcessAgent>, Updates) {
        let (sink, updates) = sink();
        let agent = ProcessAgent::new(
            AGENT.to_string(),
            work.0.clone(),
            sink,
            tokio::runtime::Handle::current(),
        );
        (agent, updates)
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    fn process_alive(pid: &str) -> bool {
        // A zombie still has a /proc entry; its state letter is Z.
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .is_ok_and(|stat| !stat.contains(") Z "))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn command_exit_zero_finishes_with_output_and_environment() {
        let work = WorkDir::new("exit0");
        let (agent, mut updates) = agent(&work);
        let mut command = shell(
            "echo hello; echo \"id=$MESOS_TASK_ID fw=$MESOS_FRAMEWORK_ID agent=$MESOS_AGENT_ID \
             executor=$MESOS_EXECUTOR_ID foo=$FOO secret=${SECRET:-unset}\"; \
             test \"$MESOS_SANDBOX\" = \"$(pwd -P)\" && test \"$MESOS_DIRECTORY\" = \"$MESOS_SANDBOX\" && echo sandbox-ok; \
             echo oops >&2",
        );
        command.environment = Some(v1::Environment {
            variables: vec![
                v1::environment::Variable {
                    name: "FOO".to_string(),
                    value: Some("bar".to_string()),
                    ..Default::default()
                },
                v1::environment::Variable {
                    name: "SECRET".to_string(),
                    r#type: Some(v1::environment::variable::Type::Secret as i32),
                    ..Default::default()
                },
            ],
        });
        agent.launch(launch(task("t1", Some(command))));
        let statuses = updates
            .expect_states(
                "t1",
                &[
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFinished,
                ],
            )
            .await;
        let last = &statuses[2];
        assert_eq!(last.message(), "Command exited with status 0");
        assert_eq!(last.reason, None);
        assert_eq!(last.source(), v1::task_status::Source::Executor);
        assert_eq!(
            last.executor_id.as_ref().map(|e| e.value.as_str()),
            Some("t1")
        );
        let sandbox = work.run_dir("t1");
        let stdout = read(&sandbox.join("stdout"));
        assert!(stdout.contains("hello\n"), "{stdout}");
        assert!(
            stdout.contains(&format!(
                "id=t1 fw={FRAMEWORK} agent={AGENT} executor=t1 foo=bar secret=unset"
            )),
            "{stdout}"
        );
        assert!(stdout.contains("sandbox-ok"), "{stdout}");
        assert_eq!(read(&sandbox.join("stderr")), "oops\n");
        // A command task's executor is not one the master tracks.
        updates.expect_silence(Duration::from_millis(100)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn command_exit_three_fails() {
        let work = WorkDir::new("exit3");
        let (agent, mut updates) = agent(&work);
        agent.launch(launch(task("t1", Some(shell("exit 3")))));
        let statuses = updates
            .expect_states(
                "t1",
                &[
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFailed,
                ],
            )
            .await;
        assert_eq!(statuses[2].message(), "Command exited with status 3");
        assert_eq!(statuses[2].reason, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kill_waits_the_grace_period_for_a_process_ignoring_sigterm() {
        let work = WorkDir::new("trap");
        let (agent, mut updates) = agent(&work);
        let mut l = launch(task(
            "t1",
            Some(shell("trap '' TERM; touch ready; sleep 1000")),
        ));
        l.framework = framework(true);
        agent.launch(l);
        updates
            .expect_states("t1", &[TaskState::TaskStarting, TaskState::TaskRunning])
            .await;
        let ready = work.run_dir("t1").join("ready");
        eventually("the trap", || ready.exists()).await;
        let grace = Duration::from_millis(700);
        let asked = Instant::now();
        agent.kill_task(FRAMEWORK, "t1", grace);
        updates.expect_states("t1", &[TaskState::TaskKilling]).await;
        let killed = updates.expect_states("t1", &[TaskState::TaskKilled]).await;
        assert!(
            asked.elapsed() >= grace,
            "killed after {:?}",
            asked.elapsed()
        );
        assert_eq!(killed[0].message(), "Command terminated with signal Killed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kill_of_a_sleep_is_quick_and_its_process_group_goes() {
        let work = WorkDir::new("sleep");
        let (agent, mut updates) = agent(&work);
        agent.launch(launch(task(
            "t1",
            Some(shell("sleep 1000 & echo $! > child; wait")),
        )));
        updates
            .expect_states("t1", &[TaskState::TaskStarting, TaskState::TaskRunning])
            .await;
        let child = work.run_dir("t1").join("child");
        eventually("the child's pid", || read(&child).ends_with('\n')).await;
        let pid = read(&child);
        assert!(process_alive(&pid));
        let asked = Instant::now();
        // No TASK_KILLING: the framework lacks the capability.
        agent.kill_task(FRAMEWORK, "t1", Duration::from_secs(60));
        let killed = updates.expect_states("t1", &[TaskState::TaskKilled]).await;
        assert!(asked.elapsed() < Duration::from_secs(10));
        assert_eq!(
            killed[0].message(),
            "Command terminated with signal Terminated"
        );
        eventually("the backgrounded sleep to die", || !process_alive(&pid)).await;
        // Kills of ended or unknown tasks are ignored.
        agent.kill_task(FRAMEWORK, "t1", Duration::ZERO);
        agent.kill_task(FRAMEWORK, "nope", Duration::ZERO);
        updates.expect_silence(Duration::from_millis(100)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shell_false_runs_value_with_arguments_as_argv() {
        let work = WorkDir::new("argv");
        let (agent, mut updates) = agent(&work);
        let command = v1::CommandInfo {
            shell: Some(false),
            value: Some("/bin/sh".to_string()),
            arguments: vec![
                "custom-argv0".to_string(),
                "-c".to_string(),
                "echo \"$0 $1\"; head -c 12 /proc/$$/cmdline; echo".to_string(),
                "zero".to_string(),
                "one".to_string(),
            ],
            ..Default::default()
        };
        agent.launch(launch(task("t1", Some(command))));
        updates
            .expect_states(
                "t1",
                &[
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFinished,
                ],
            )
            .await;
        assert_eq!(
            read(&work.run_dir("t1").join("stdout")),
            "zero one\ncustom-argv0\n"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_executable_fails_naming_the_error() {
        let work = WorkDir::new("missing");
        let (agent, mut updates) = agent(&work);
        let command = v1::CommandInfo {
            shell: Some(false),
            value: Some("/nonexistent/program".to_string()),
            ..Default::default()
        };
        agent.launch(launch(task("t1", Some(command))));
        let statuses = updates
            .expect_states("t1", &[TaskState::TaskStarting, TaskState::TaskFailed])
            .await;
        assert!(
            statuses[1]
                .message()
                .starts_with("Failed to launch task subprocess: "),
            "{:?}",
            statuses[1].message()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unsupported_launches_fail_at_once() {
        let work = WorkDir::new("unsupported");
        let (agent, mut updates) = agent(&work);

        let mut docker = task("docker", Some(shell("true")));
        docker.container = Some(Box::new(v1::ContainerInfo {
            r#type: v1::container_info::Type::Docker as i32,
            ..Default::default()
        }));
        agent.launch(launch(docker));
        let failed = updates
            .expect_states("docker", &[TaskState::TaskFailed])
            .await;
        assert_eq!(
            failed[0].reason(),
            v1::task_status::Reason::ContainerLaunchFailed
        );
        assert_eq!(
            failed[0].message(),
            "docker containers are not supported by the embedded agent"
        );

        let mut http = shell("true");
        http.uris.push(v1::command_info::Uri {
            value: "http://example.invalid/app.tgz".to_string(),
            ..Default::default()
        });
        agent.launch(launch(task("http", Some(http))));
        let failed = updates
            .expect_states("http", &[TaskState::TaskFailed])
            .await;
        assert_eq!(
            failed[0].reason(),
            v1::task_status::Reason::ContainerLaunchFailed
        );
        assert!(
            failed[0]
                .message()
                .ends_with("fetching http URIs is not supported by the embedded agent"),
            "{}",
            failed[0].message()
        );

        let mut custom = launch(task("custom", None));
        custom.executor = Some(v1::ExecutorInfo {
            r#type: Some(v1::executor_info::Type::Custom as i32),
            executor_id: v1::ExecutorId {
                value: "my-executor".to_string(),
            },
            command: Some(shell("./my-executor")),
            ..Default::default()
        });
        agent.launch(custom);
        let failed = updates
            .expect_states("custom", &[TaskState::TaskFailed])
            .await;
        assert_eq!(
            failed[0].reason(),
            v1::task_status::Reason::ExecutorTerminated
        );
        // An agent made without an executor hub has no executor API to
        // offer one (`local::start` gives its agents one: tests/executors.rs).
        assert_eq!(
            failed[0].message(),
            "custom executors are not supported by this agent"
        );
        assert_eq!(updates.expect_executor_exited("my-executor").await, -1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn local_uris_are_copied_made_executable_and_extracted() {
        let work = WorkDir::new("fetch");
        let source = work.0.join("source");
        std::fs::create_dir_all(source.join("pkg")).expect("source dir");
        std::fs::write(source.join("run.sh"), "#!/bin/sh\necho ran-script\n").expect("script");
        std::fs::write(source.join("pkg/data.txt"), "packed\n").expect("data");
        let tar = std::process::Command::new("tar")
            .arg("-C")
            .arg(&source)
            .args(["-czf", "pkg.tar.gz", "pkg"])
            .current_dir(&source)
            .status()
            .expect("tar");
        assert!(tar.success());
        let (agent, mut updates) = agent(&work);
        let mut command =
            shell("./run.sh && cat pkg/data.txt && test -f pkg.tar.gz && cat renamed");
        command.uris = vec![
            v1::command_info::Uri {
                value: format!("file://{}", source.join("run.sh").display()),
                executable: Some(true),
                ..Default::default()
            },
            v1::command_info::Uri {
                value: source.join("pkg.tar.gz").display().to_string(),
                ..Default::default()
            },
            v1::command_info::Uri {
                value: source.join("pkg/data.txt").display().to_string(),
                output_file: Some("renamed".to_string()),
                ..Default::default()
            },
        ];
        agent.launch(launch(task("t1", Some(command))));
        updates
            .expect_states(
                "t1",
                &[
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFinished,
                ],
            )
            .await;
        assert_eq!(
            read(&work.run_dir("t1").join("stdout")),
            "ran-script\npacked\npacked\n"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_default_executor_exits_after_its_last_task() {
        let work = WorkDir::new("default");
        let (agent, mut updates) = agent(&work);
        let executor = default_executor("group");
        let mut first = launch(task("a", Some(shell("echo a"))));
        first.executor = Some(executor.clone());
        let mut second = launch(task("b", Some(shell("touch ../../b-started; sleep 1000"))));
        second.executor = Some(executor);
        agent.launch(second);
        agent.launch(first);
        let mut finished_a = false;
        let mut running_b = false;
        while !(finished_a && running_b) {
            let s = updates.status().await;
            assert_eq!(
                s.executor_id.as_ref().map(|e| e.value.as_str()),
                Some("group")
            );
            finished_a |= s.task_id.value == "a" && s.state() == TaskState::TaskFinished;
            running_b |= s.task_id.value == "b" && s.state() == TaskState::TaskRunning;
        }
        let run = work.run_dir("group");
        assert_eq!(read(&run.join("tasks/a/stdout")), "a\n");
        eventually("task b's process", || run.join("b-started").exists()).await;
        agent.framework_message(FRAMEWORK, "group", b"hello executor".to_vec());
        let messages = run.join("framework_messages");
        eventually("the framework message", || {
            read(&messages) == "hello executor\n"
        })
        .await;
        // Shutting the executor down kills b; then the executor has exited.
        agent.shutdown_executor(FRAMEWORK, "group");
        let killed = updates.expect_states("b", &[TaskState::TaskKilled]).await;
        assert_eq!(
            killed[0].message(),
            "Command terminated with signal Terminated"
        );
        assert_eq!(updates.expect_executor_exited("group").await, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn max_completion_time_fails_the_task() {
        let work = WorkDir::new("deadline");
        let (agent, mut updates) = agent(&work);
        let mut t = task("t1", Some(shell("sleep 1000")));
        t.max_completion_time = Some(v1::DurationInfo {
            nanoseconds: 200_000_000,
        });
        agent.launch(launch(t));
        let statuses = updates
            .expect_states(
                "t1",
                &[
                    TaskState::TaskStarting,
                    TaskState::TaskRunning,
                    TaskState::TaskFailed,
                ],
            )
            .await;
        assert_eq!(
            statuses[2].reason(),
            v1::task_status::Reason::MaxCompletionTimeReached
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_framework_and_stop_kill_without_a_word() {
        let work = WorkDir::new("stop");
        let (agent, mut updates) = agent(&work);
        for id in ["t1", "t2"] {
            agent.launch(launch(task(
                id,
                Some(shell("echo $$ > pid; exec sleep 1000")),
            )));
            updates
                .expect_states(id, &[TaskState::TaskStarting, TaskState::TaskRunning])
                .await;
        }
        let pid = |id: &str| {
            let file = work.run_dir(id).join("pid");
            move || read(&file)
        };
        let (pid1, pid2) = (pid("t1"), pid("t2"));
        eventually("the pids", || {
            pid1().ends_with('\n') && pid2().ends_with('\n')
        })
        .await;
        let (pid1, pid2) = (pid1(), pid2());

        agent.shutdown_framework(FRAMEWORK);
        eventually("t1 and t2 to die", || {
            !process_alive(&pid1) && !process_alive(&pid2)
        })
        .await;
        updates.expect_silence(Duration::from_millis(200)).await;

        agent.launch(launch(task(
            "t3",
            Some(shell("echo $$ > pid; exec sleep 1000")),
        )));
        updates
            .expect_states("t3", &[TaskState::TaskStarting, TaskState::TaskRunning])
            .await;
        let pid3 = pid("t3");
        eventually("t3's pid", || pid3().ends_with('\n')).await;
        let pid3 = pid3();
        agent.stop();
        eventually("t3 to die", || !process_alive(&pid3)).await;
        agent.launch(launch(task("t4", Some(shell("true")))));
        updates.expect_silence(Duration::from_millis(200)).await;
    }
}

mod simulated_agent {
    use super::*;
    use unisched_mesos::agent::simulated::SimulatedAgent;

    fn agent() -> (Arc<SimulatedAgent>, Updates) {
        let (sink, updates) = sink();
        let agent = SimulatedAgent::new(AGENT.to_string(), sink, tokio::runtime::Handle::current());
        (agent, updates)
    }

    fn timed(id: &str, duration: &str) -> v1::TaskInfo {
        with_label(task(id, Some(shell("true"))), "unisched.duration", duration)
    }

    #[tokio::test]
    async fn a_task_finishes_after_its_duration_label() {
        let (agent, mut updates) = agent();
        let started = Instant::now();
        agent.launch(launch(timed("t1", "0.1")));
        updates.expect_states("t1", &[TaskState::TaskRunning]).await;
        let finished = updates
            .expect_states("t1", &[TaskState::TaskFinished])
            .await;
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(finished[0].message(), "Command exited with status 0");
        assert_eq!(
            finished[0].executor_id.as_ref().map(|e| e.value.as_str()),
            Some("t1")
        );
    }

    #[tokio::test]
    async fn go_durations_are_understood() {
        let (agent, mut updates) = agent();
        agent.launch(launch(timed("t1", "50ms")));
        updates
            .expect_states("t1", &[TaskState::TaskRunning, TaskState::TaskFinished])
            .await;
    }

    #[tokio::test]
    async fn without_the_label_a_task_runs_until_killed() {
        let (agent, mut updates) = agent();
        let mut l = launch(task("t1", Some(shell("true"))));
        l.framework = framework(true);
        agent.launch(l);
        updates.expect_states("t1", &[TaskState::TaskRunning]).await;
        updates.expect_silence(Duration::from_millis(300)).await;
        agent.kill_task(FRAMEWORK, "t1", Duration::from_secs(30));
        updates
            .expect_states("t1", &[TaskState::TaskKilling, TaskState::TaskKilled])
            .await;
        agent.kill_task(FRAMEWORK, "t1", Duration::ZERO);
        updates.expect_silence(Duration::from_millis(100)).await;
    }

    #[tokio::test]
    async fn a_bad_label_fails_the_task_at_once() {
        let (agent, mut updates) = agent();
        agent.launch(launch(timed("t1", "soon")));
        let failed = updates.expect_states("t1", &[TaskState::TaskFailed]).await;
        assert!(
            failed[0]
                .message()
                .starts_with("Invalid label 'unisched.duration'"),
            "{}",
            failed[0].message()
        );
    }

    #[tokio::test]
    async fn max_completion_time_cuts_a_long_task() {
        let (agent, mut updates) = agent();
        let mut t = timed("t1", "1h");
        t.max_completion_time = Some(v1::DurationInfo {
            nanoseconds: 50_000_000,
        });
        agent.launch(launch(t));
        let statuses = updates
            .expect_states("t1", &[TaskState::TaskRunning, TaskState::TaskFailed])
            .await;
        assert_eq!(
            statuses[1].reason(),
            v1::task_status::Reason::MaxCompletionTimeReached
        );
    }

    #[tokio::test]
    async fn shutdown_executor_kills_its_tasks_then_it_exits() {
        let (agent, mut updates) = agent();
        for id in ["a", "b"] {
            let mut l = launch(task(id, Some(shell("true"))));
            l.executor = Some(default_executor("group"));
            agent.launch(l);
            updates.expect_states(id, &[TaskState::TaskRunning]).await;
        }
        agent.shutdown_executor(FRAMEWORK, "group");
        updates.expect_states("a", &[TaskState::TaskKilled]).await;
        updates.expect_states("b", &[TaskState::TaskKilled]).await;
        assert_eq!(updates.expect_executor_exited("group").await, 0);
    }

    #[tokio::test]
    async fn shutdown_framework_and_stop_are_silent() {
        let (agent, mut updates) = agent();
        agent.launch(launch(timed("t1", "0.2")));
        updates.expect_states("t1", &[TaskState::TaskRunning]).await;
        agent.shutdown_framework(FRAMEWORK);
        updates.expect_silence(Duration::from_millis(400)).await;
        agent.launch(launch(timed("t2", "0.2")));
        updates.expect_states("t2", &[TaskState::TaskRunning]).await;
        agent.stop();
        updates.expect_silence(Duration::from_millis(400)).await;
    }

    #[tokio::test]
    async fn many_tasks_stay_cheap() {
        const TASKS: usize = 20_000;
        let (agent, mut updates) = agent();
        let started = Instant::now();
        for i in 0..TASKS {
            let duration = if i % 2 == 0 { "0.05" } else { "100ms" };
            agent.launch(launch(timed(&format!("t{i}"), duration)));
        }
        let mut finished = 0;
        while finished < TASKS {
            if updates.status().await.state() == TaskState::TaskFinished {
                finished += 1;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }
}
