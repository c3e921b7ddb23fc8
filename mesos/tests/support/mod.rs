//! Helpers for the framework-side tests: client options, waiting on the
//! master's state and metrics, a TCP proxy that can cut and refuse
//! connections (a master that goes away), a stand-in master for answers ours
//! never gives; driver helpers in `driver`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use unisched_mesos::client::ClientOptions;
use unisched_mesos::codec::{self, ContentType};
use unisched_mesos::recordio;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Event, event};

use crate::common::{Master, WAIT};

pub mod driver;

/// Client options for tests in `ct`.
pub fn client_options(ct: ContentType) -> ClientOptions {
    ClientOptions {
        content_type: ct,
        ..ClientOptions::default()
    }
}

/// A metric of the master (0 when absent).
pub async fn metric(m: &Master, name: &str) -> f64 {
    m.metrics().await[name].as_f64().unwrap_or(0.0)
}

/// Waits until a metric of the master reaches `at_least` (within WAIT).
pub async fn metric_until(m: &Master, name: &str, at_least: f64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = metric(m, name).await;
        if value >= at_least {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} stayed at {value}, below {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `check` holds on the master's state (within WAIT).
pub async fn state_until(m: &Master, mut check: impl FnMut(&serde_json::Value) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let state = m.state().await;
        if check(&state) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "state never matched: {state}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP proxy in front of a master that can cut its connections and
/// refuse new ones: a master that goes away and comes back.
pub struct Proxy {
    pub url: String,
    refusing: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: &str) -> Proxy {
        let target: SocketAddr = target.trim_start_matches("http://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let refusing = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (r, c, a) = (refusing.clone(), connections.clone(), accepted.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if r.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                a.fetch_add(1, Ordering::SeqCst);
                let handle = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                c.lock().unwrap().push(handle.abort_handle());
            }
        });
        Proxy {
            url,
            refusing,
            connections,
            accepted,
            task,
        }
    }

    /// Closes every open connection.
    pub fn cut(&self) {
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// Refuses (closes at once) new connections while `yes`.
    pub fn refuse(&self, yes: bool) {
        self.refusing.store(yes, Ordering::SeqCst);
    }

    /// Connections let through so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// Serves `router` on an ephemeral port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    url
}

/// A stand-in master whose SUBSCRIBE answers SUBSCRIBED (heartbeat
/// interval 50 ms), `beats` heartbeats 20 ms apart, then silence.
pub async fn going_silent(beats: usize) -> String {
    let router = axum::Router::new().route(
        "/api/v1/scheduler",
        post(move |headers: HeaderMap| async move {
            let accept = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| ContentType::from_content_type_header(v).ok())
                .unwrap_or(ContentType::Json);
            let record =
                move |e: &Event| Bytes::from(recordio::encode_record(&codec::encode(e, accept)));
            let subscribed = record(&Event {
                r#type: Some(event::Type::Subscribed as i32),
                subscribed: Some(event::Subscribed {
                    framework_id: v1::FrameworkId {
                        value: "fw".to_string(),
                    },
                    heartbeat_interval_seconds: Some(0.05),
                    master_info: None,
                }),
                ..Default::default()
            });
            let heartbeat = record(&Event {
                r#type: Some(event::Type::Heartbeat as i32),
                ..Default::default()
            });
            let beats = futures_util::stream::unfold(0, move |n| {
                let heartbeat = heartbeat.clone();
                async move {
                    if n == beats {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Some((Ok::<Bytes, Infallible>(heartbeat), n + 1))
                }
            });
            let body = futures_util::stream::iter([Ok(subscribed)])
                .chain(beats)
                .chain(futures_util::stream::pending());
            let mut r = Response::new(Body::from_stream(body));
            r.headers_mut()
                .insert("Mesos-Stream-Id", "s-1".parse().unwrap());
            r.headers_mut()
                .insert(header::CONTENT_TYPE, accept.mime().parse().unwrap());
            r
        }),
    );
    serve(router).await
}
