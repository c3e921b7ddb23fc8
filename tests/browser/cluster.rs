//! A simulated cluster behind a running `unisched serve`, for the browser
//! tests: the process itself (with the Mesos master and simulated agents),
//! a YuniKorn-style RM over gRPC with queues, nodes and applications, and a
//! Mesos framework on the v1 scheduler HTTP API running one task.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use unisched::shim_api::SchedulerApi;
use unisched::shim_api::recording::RecordingCallback;
use unisched::si;
use unisched_server::RemoteScheduler;

/// How long anything here may take.
pub const WITHIN: Duration = Duration::from_secs(30);

const CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: prod
            resources: {guaranteed: {memory: 4G, vcore: 4}, max: {memory: 8G, vcore: 8}}
          - name: dev
";

/// `unisched serve`, killed when dropped.
pub struct Serve {
    child: Child,
    /// The HTTP address (REST, dashboard).
    pub http: String,
    /// The gRPC address (SI).
    pub grpc: String,
    /// The Mesos master's address.
    pub mesos: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address after `marker` in a line such as `... HTTP on 127.0.0.1:9080 ...`.
fn addr_after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    Some(
        rest.split_whitespace()
            .next()?
            .trim_end_matches(':')
            .to_string(),
    )
}

/// Starts `unisched serve` with a Mesos master and three simulated agents,
/// sampling its history every second.
pub fn serve() -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_unisched"))
        .args(crate::local_serve::args(3))
        .args(["--history-interval", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unisched serve starts");
    let rx = crate::local_serve::stderr_lines(&mut child);
    let (mut grpc, mut http, mut mesos) = (None, None, None);
    while grpc.is_none() || http.is_none() || mesos.is_none() {
        let line = rx.recv_timeout(WITHIN).expect("serve prints its addresses");
        grpc = grpc.or_else(|| addr_after(&line, "gRPC on "));
        http = http.or_else(|| addr_after(&line, "HTTP on "));
        mesos = mesos.or_else(|| addr_after(&line, "master on http://"));
    }
    Serve {
        child,
        grpc: grpc.unwrap(),
        http: http.unwrap(),
        mesos: mesos.unwrap(),
    }
}

fn res(memory: i64, vcore: i64) -> Option<si::Resource> {
    Some(si::Resource {
        resources: [
            ("memory".to_string(), si::Quantity { value: memory }),
            ("vcore".to_string(), si::Quantity { value: vcore }),
        ]
        .into(),
    })
}

const GIB: i64 = 1 << 30;

/// Submits `app` to `queue` with an ask for `asks` allocations. Requests of
/// different kinds travel on separate streams, so (like any RM) it waits for
/// the application to be accepted before asking for it.
pub fn submit(rm: &RemoteScheduler, cb: &RecordingCallback, app: &str, queue: &str, asks: i32) {
    rm.update_application(si::ApplicationRequest {
        rm_id: "k8s".into(),
        new: vec![si::AddApplicationRequest {
            application_id: app.into(),
            queue_name: queue.into(),
            partition_name: "default".into(),
            ugi: Some(si::UserGroupInformation {
                user: "alice".into(),
                groups: vec![],
            }),
            ..Default::default()
        }],
        ..Default::default()
    })
    .unwrap();
    let deadline = std::time::Instant::now() + WITHIN;
    while !cb
        .recorded()
        .accepted_applications()
        .any(|a| a.application_id == app)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{app} accepted in time"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    rm.update_allocation(si::AllocationRequest {
        rm_id: "k8s".into(),
        asks: vec![si::AllocationAsk {
            allocation_key: format!("{app}-task"),
            application_id: app.into(),
            partition_name: "default".into(),
            resource_ask: res(GIB, 1000),
            max_allocations: asks,
            ..Default::default()
        }],
        ..Default::default()
    })
    .unwrap();
}

/// A YuniKorn-style RM with four nodes and two applications.
pub fn simulated_rm(grpc: &str) -> (RemoteScheduler, Arc<RecordingCallback>) {
    let rm = RemoteScheduler::connect(&format!("http://{grpc}"), None).expect("gRPC connect");
    let callback = Arc::new(RecordingCallback::new());
    rm.register_resource_manager(
        si::RegisterResourceManagerRequest {
            rm_id: "k8s".into(),
            policy_group: "queues".into(),
            config: CONFIG.into(),
            ..Default::default()
        },
        callback.clone(),
    )
    .expect("registered");
    rm.update_node(si::NodeRequest {
        rm_id: "k8s".into(),
        nodes: (1..=4)
            .map(|i| si::NodeInfo {
                node_id: format!("worker-{i}"),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: res(4 * GIB, 4000),
                ..Default::default()
            })
            .collect(),
    })
    .unwrap();
    submit(&rm, &callback, "spark-etl", "root.prod", 3);
    submit(&rm, &callback, "notebook", "root.dev", 1);
    assert_eq!(callback.wait_for_allocations(4, WITHIN), 4);
    (rm, callback)
}

/// Decodes what is complete of a chunked body: (decoded, bytes used).
fn dechunk_prefix(raw: &[u8]) -> (Vec<u8>, usize) {
    let (mut out, mut at) = (Vec::new(), 0);
    while let Some(nl) = raw[at..].windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[at..at + nl]).unwrap_or("0");
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        let start = at + nl + 2;
        if n == 0 || raw.len() < start + n + 2 {
            break;
        }
        out.extend_from_slice(&raw[start..start + n]);
        at = start + n + 2;
    }
    (out, at)
}

/// The RecordIO records (`<length>\n<json>`) complete in `data`.
fn records(data: &[u8]) -> Vec<Value> {
    let (mut out, mut at) = (Vec::new(), 0);
    while let Some(nl) = data[at..].iter().position(|&b| b == b'\n') {
        let Ok(n) = std::str::from_utf8(&data[at..at + nl])
            .unwrap_or("")
            .parse::<usize>()
        else {
            break;
        };
        let start = at + nl + 1;
        if data.len() < start + n {
            break;
        }
        out.push(serde_json::from_slice(&data[start..start + n]).expect("an event"));
        at = start + n;
    }
    out
}

/// A Mesos framework on the v1 scheduler HTTP API (JSON): subscribes,
/// launches a long simulated task on its first offer and leaves the other
/// offers outstanding. The returned connection is its subscription.
pub fn framework(mesos: &str) -> TcpStream {
    let mut conn = TcpStream::connect(mesos).expect("Mesos port");
    conn.set_read_timeout(Some(WITHIN)).unwrap();
    let subscribe = json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "tester", "name": "dashboard-fw", "roles": ["*"],
        "capabilities": [{"type": "MULTI_ROLE"}],
    }}})
    .to_string();
    let head = format!(
        "POST /api/v1/scheduler HTTP/1.1\r\nHost: {mesos}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\n\r\n{subscribe}",
        subscribe.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let (stream_id, offers, framework_id) = loop {
        let n = conn.read(&mut buf).expect("subscription events in time");
        assert!(n > 0, "the subscription closed");
        raw.extend_from_slice(&buf[..n]);
        let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..end]).to_string();
        let stream_id = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("Mesos-Stream-Id: ")
                    .or(l.strip_prefix("mesos-stream-id: "))
            })
            .expect("a stream id")
            .to_string();
        let events = records(&dechunk_prefix(&raw[end + 4..]).0);
        let id = events
            .iter()
            .find(|e| e["type"] == "SUBSCRIBED")
            .map(|e| e["subscribed"]["framework_id"]["value"].clone());
        let offers = events.iter().find(|e| e["type"] == "OFFERS").cloned();
        if let (Some(id), Some(offers)) = (id, offers) {
            break (stream_id, offers, id);
        }
    };
    let offer = &offers["offers"]["offers"][0];
    let resource = |name: &str, value: f64| {
        json!({"name": name, "type": "SCALAR", "scalar": {"value": value},
               "allocation_info": {"role": "*"}})
    };
    let accept = json!({"framework_id": {"value": framework_id}, "type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [{
            "name": "dashboard-task", "task_id": {"value": "dashboard-task-1"},
            "agent_id": offer["agent_id"],
            "resources": [resource("cpus", 0.5), resource("mem", 128.0)],
            "command": {"value": "true"},
            "labels": {"labels": [{"key": "unisched.duration", "value": "10m"}]},
        }]}}],
    }})
    .to_string();
    let mut call = TcpStream::connect(mesos).unwrap();
    call.write_all(
        format!(
            "POST /api/v1/scheduler HTTP/1.1\r\nHost: {mesos}\r\nContent-Type: application/json\r\n\
             Mesos-Stream-Id: {stream_id}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{accept}",
            accept.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    call.read_to_string(&mut answer).ok();
    assert!(answer.starts_with("HTTP/1.1 202"), "ACCEPT: {answer}");
    conn
}
