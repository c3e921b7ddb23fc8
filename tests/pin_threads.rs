//! `unisched serve --pin-threads`: the scheduling thread and the Mesos
//! master's thread each run on a CPU of their own, read back from
//! /proc; refused with a reason where the process may use one CPU only.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod local_serve;

const WITHIN: Duration = Duration::from_secs(30);

/// The CPUs a set of `taskset -c` may name: those this test may run on.
fn allowed_cpus() -> Vec<usize> {
    unisched_core::affinity::allowed_cpus().expect("readable CPU mask")
}

/// `Cpus_allowed_list` of each thread of `pid`, by the thread's name (the
/// kernel keeps its first 15 bytes).
fn thread_cpus(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_string();
        out.push((name.trim().to_string(), cpus));
    }
    out
}

fn serve_command(cpus: &str) -> Command {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", cpus, env!("CARGO_BIN_EXE_unisched")])
        .args(local_serve::args(2))
        .arg("--pin-threads")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn get_status(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WITHIN)).expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.lines().next().unwrap_or("").to_string()
}

#[test]
fn serve_pins_the_scheduling_thread_and_the_master_apart() {
    let allowed = allowed_cpus();
    if allowed.len() < 2 {
        eprintln!("one CPU allowed ({allowed:?}): only the refusal can be shown");
        return;
    }
    // The two highest CPUs, so that "the first this process may run on" is
    // not simply CPU 0.
    let (a, b) = (allowed[allowed.len() - 2], allowed[allowed.len() - 1]);
    let mut serve = Killed(
        serve_command(&format!("{a},{b}"))
            .spawn()
            .expect("taskset and unisched serve start"),
    );
    let rx = local_serve::stderr_lines(&mut serve.0);
    let mut mesos = None;
    let deadline = Instant::now() + WITHIN;
    while mesos.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200))
            && let Some(at) = line.find("master on http://")
        {
            let rest = &line[at + "master on http://".len()..];
            mesos = rest.split_whitespace().next().map(|s| s.to_string());
        }
    }
    let mesos = mesos.expect("serve prints the master's address");
    assert_eq!(get_status(&mesos, "/health"), "HTTP/1.0 200 OK");
    // The scheduling thread on a, the master on b, and every other thread
    // on both: the process's first, the tokio workers, and the core's
    // callback thread, which the scheduling thread starts after it pinned
    // itself. A thread (un)pins itself as it starts: read until all have
    // (taskset execs unisched, so the pid is the server's), then compare.
    let (a_text, b_text) = (a.to_string(), b.to_string());
    let whole = [format!("{a},{b}"), format!("{a}-{b}")];
    let placed = |name: &str, cpus: &str| match name {
        "unisched-schedu" => cpus == a_text,
        "unisched-mesos-" => cpus == b_text,
        _ => whole.iter().any(|w| w == cpus),
    };
    let settled = |threads: &[(String, String)]| {
        threads.iter().any(|(n, _)| n == "unisched-schedu")
            && threads.iter().any(|(n, _)| n == "unisched-mesos-")
            && threads
                .iter()
                .any(|(n, _)| n.starts_with("unisched-callba"))
            && threads.iter().all(|(n, c)| placed(n, c))
    };
    let mut threads = thread_cpus(serve.0.id());
    while Instant::now() < deadline && !settled(&threads) {
        std::thread::sleep(Duration::from_millis(50));
        threads = thread_cpus(serve.0.id());
    }
    drop(serve);
    for name in ["unisched-schedu", "unisched-mesos-", "unisched-callba"] {
        assert!(
            threads.iter().any(|(n, _)| n == name),
            "no {name}: {threads:?}"
        );
    }
    for (name, cpus) in &threads {
        assert!(placed(name, cpus), "{name} on {cpus}: {threads:?}");
    }
}

/// A child process killed (and reaped) when dropped, a failed assertion too.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_refuses_to_pin_on_one_cpu() {
    let cpu = allowed_cpus()[0];
    let out = serve_command(&cpu.to_string())
        .output()
        .expect("taskset and unisched serve run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "serve: --pin-threads: 2 threads cannot each have a CPU of their own: this process may run on 1 (CPU {cpu})"
        )),
        "{err}"
    );
}
