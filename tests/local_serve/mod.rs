//! The flags of a `unisched serve` for tests that start the binary: every
//! port an ephemeral loopback one (the process prints where it listens),
//! a Mesos master, and `agents` simulated agents.

/// `serve` and its flags, to follow the binary (or `taskset -c ... binary`).
pub fn args(agents: usize) -> Vec<String> {
    let mut args: Vec<String> = [
        "serve",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--mesos-addr",
        "127.0.0.1:0",
        "--agent-executor",
        "simulated",
        "--agents",
    ]
    .map(String::from)
    .to_vec();
    args.push(agents.to_string());
    args
}

/// The lines the child writes to its stderr (piped), as they come.
pub fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("the child's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    rx
}
