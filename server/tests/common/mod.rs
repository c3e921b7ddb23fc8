//! What the server's test files share: servers on ephemeral loopback ports
//! and a minimal HTTP/1.1 client.

#![allow(dead_code)] // each test file uses its own subset

pub mod cluster;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use unisched_core::{Scheduler, SchedulerOptions};
use unisched_server::{RunningServer, ServerOptions};

/// How long a test waits for something that should happen at once.
pub const WAIT: Duration = Duration::from_secs(5);

/// A core and a server on it, with `options` on free loopback ports.
pub async fn start_with(options: ServerOptions) -> (Scheduler, RunningServer) {
    let scheduler = Scheduler::start(SchedulerOptions::default());
    let options = ServerOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        ..options
    };
    let server = unisched_server::start(scheduler.clone(), options)
        .await
        .expect("server starts");
    (scheduler, server)
}

/// An answer: status, head (the header lines) and body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One request over a fresh connection.
pub async fn request(
    server: &RunningServer,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> Answer {
    let mut conn = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n{headers}\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Minimal HTTP/1.1 client: returns (status, body).
pub async fn http(
    server: &RunningServer,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> (u16, String) {
    let a = request(server, method, path, headers, body).await;
    (a.status, a.body)
}

/// GETs `path` with extra `headers`, expecting 200 and JSON.
pub async fn get_json_with(server: &RunningServer, path: &str, headers: &str) -> serde_json::Value {
    let (status, body) = http(server, "GET", path, headers, b"").await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// GETs `path`, expecting 200 and JSON.
pub async fn get_json(server: &RunningServer, path: &str) -> serde_json::Value {
    get_json_with(server, path, "").await
}

/// GETs `path` until `done` holds for its JSON (published views may lag the
/// core by up to a publication interval), or panics after a generous deadline.
pub async fn get_json_until(
    server: &RunningServer,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = get_json(server, path).await;
        if done(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never satisfied the condition; last: {value}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A connection with `GET path` sent and the answer left to read.
pub async fn open_get(server: &RunningServer, path: &str) -> tokio::net::TcpStream {
    let mut conn = tokio::net::TcpStream::connect(server.http_addr)
        .await
        .unwrap();
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    conn
}

/// Reads from `conn` into `seen` until `done` holds for the text so far;
/// panics (saying `what`) when nothing comes in time or the stream ends.
pub async fn read_until(
    conn: &mut tokio::net::TcpStream,
    seen: &mut Vec<u8>,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let mut buf = [0u8; 4096];
    while !done(&String::from_utf8_lossy(seen)) {
        let n = tokio::time::timeout(WAIT, conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("{what} in time"))
            .unwrap();
        assert!(n > 0, "stream closed before {what}");
        seen.extend_from_slice(&buf[..n]);
    }
}
