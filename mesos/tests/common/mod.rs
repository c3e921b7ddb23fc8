//! A Mesos master on a fresh core over real HTTP on an ephemeral port, and a
//! small HTTP scheduler client speaking JSON or protobuf, for the tests.

#![allow(dead_code)]

pub mod provider;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_mesos::agent::ExecutorKind;
use unisched_mesos::codec::{self, ContentType};
use unisched_mesos::local::{self, LocalCluster, LocalOptions};
use unisched_mesos::master::Settings;
use unisched_mesos::recordio;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::resource_provider as rp;
use unisched_mesos::v1::scheduler::{Call, Event, call, event};

/// Agent A of spec/mesos.md §6.
pub const AGENT_A: &str = "cpus:2;mem:1024";

/// How long a test waits for an event that must come.
pub const WAIT: Duration = Duration::from_secs(10);
/// How long a test watches for an event that must not come.
pub const QUIET: Duration = Duration::from_millis(400);

/// A master with agents on a fresh core with a manual clock.
pub struct Master {
    pub cluster: LocalCluster,
    pub scheduler: Scheduler,
    pub clock: Arc<ManualClock>,
    pub url: String,
    pub http: reqwest::Client,
    /// Where process agents make sandboxes and volumes.
    pub work_dir: std::path::PathBuf,
}

/// Options of a test master.
pub struct Setup {
    pub agents: usize,
    pub agent_resources: &'static str,
    pub executor: ExecutorKind,
    pub config: Option<String>,
    pub weights: &'static str,
    pub token: Option<String>,
    pub offer_timeout: Option<Duration>,
    pub stream_capacity: usize,
    /// Where to listen; an ephemeral port when `None`.
    pub addr: Option<std::net::SocketAddr>,
    /// Principals and secrets frameworks authenticate as.
    pub credentials: &'static [(&'static str, &'static str)],
    /// Libprocess frameworks must authenticate.
    pub authenticate_frameworks: bool,
    /// Scheduler API calls must carry Basic credentials.
    pub authenticate_http_frameworks: bool,
    /// How often streams get a HEARTBEAT (Mesos' 15 s when `None`).
    pub heartbeat_interval: Option<Duration>,
    /// What the operator API's logging levels go to.
    pub logging: Option<unisched_mesos::master::logging::LogControl>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            agents: 1,
            agent_resources: AGENT_A,
            executor: ExecutorKind::Simulated,
            config: None,
            weights: "",
            token: None,
            offer_timeout: None,
            stream_capacity: Settings::default().stream_capacity,
            addr: None,
            credentials: &[],
            authenticate_frameworks: false,
            authenticate_http_frameworks: false,
            heartbeat_interval: None,
            logging: None,
        }
    }
}

impl Master {
    pub async fn start(setup: Setup) -> Self {
        Self::try_start(setup).await.expect("master starts")
    }

    /// Starts a master, or says why it cannot (its address is taken).
    pub async fn try_start(setup: Setup) -> Result<Self, unisched_mesos::master::StartError> {
        let clock = ManualClock::new(1_700_000_000_000_000_000);
        let scheduler = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let settings = Settings {
            weights: unisched_mesos::master::config::parse_weights(setup.weights).unwrap(),
            offer_timeout: setup.offer_timeout,
            stream_capacity: setup.stream_capacity,
            heartbeat_interval: setup
                .heartbeat_interval
                .unwrap_or(Settings::default().heartbeat_interval),
            logging: setup.logging,
            ..Settings::default()
        };
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let work_dir =
            std::env::temp_dir().join(format!("unisched-mesos-test-{}-{n}", std::process::id()));
        let options = LocalOptions {
            addr: setup.addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()),
            config: setup.config,
            settings,
            agents: setup.agents,
            agent_resources: Resources::parse(setup.agent_resources).unwrap(),
            executor: setup.executor,
            work_dir: work_dir.clone(),
            token: setup.token,
            credentials: (!setup.credentials.is_empty()).then(|| {
                unisched_mesos::master::auth::Credentials::from_pairs(
                    setup.credentials.iter().copied(),
                )
            }),
            authenticate_frameworks: setup.authenticate_frameworks,
            authenticate_http_frameworks: setup.authenticate_http_frameworks,
        };
        let cluster = local::start(scheduler.clone(), options).await?;
        let url = format!("http://{}", cluster.addr);
        Ok(Self {
            cluster,
            scheduler,
            clock,
            url,
            http: reqwest::Client::new(),
            work_dir,
        })
    }

    /// Subscribes a resource provider on `path` (`/api/v1/resource_provider`
    /// of the master, or `/slave(N)/api/v1/resource_provider` of agent N).
    pub async fn provider(
        &self,
        path: &str,
        info: v1::ResourceProviderInfo,
        ct: ContentType,
    ) -> Provider {
        let c = rp::Call {
            r#type: Some(rp::call::Type::Subscribe as i32),
            subscribe: Some(rp::call::Subscribe {
                resource_provider_info: info,
            }),
            ..Default::default()
        };
        let resp = self
            .http
            .post(format!("{}{path}", self.url))
            .header("Content-Type", ct.mime())
            .header("Accept", ct.mime())
            .body(codec::encode(&c, ct))
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status().as_u16(),
            200,
            "provider SUBSCRIBE answers 200"
        );
        let stream_id = resp.headers()["Mesos-Stream-Id"]
            .to_str()
            .unwrap()
            .to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = resp.bytes_stream();
        let reader = tokio::spawn(async move {
            let mut decoder = recordio::Decoder::new(64 << 20);
            while let Some(Ok(chunk)) = body.next().await {
                for record in decoder.decode(&chunk).expect("RecordIO") {
                    let e: rp::Event = codec::decode(&record, ct).expect("event decodes");
                    if tx.send(e).is_err() {
                        return;
                    }
                }
            }
        });
        Provider {
            url: format!("{}{path}", self.url),
            http: self.http.clone(),
            ct,
            stream_id,
            id: String::new(),
            events: rx,
            reader,
        }
    }

    /// Moves the clock and lets the core and master see it. What was sent
    /// before is applied first, at the time it was sent: a decline's filter
    /// applied after the move would start late (and outlast the test's
    /// count of allocation runs on a loaded machine).
    pub async fn advance(&self, d: Duration) {
        tokio::task::block_in_place(|| self.scheduler.settle());
        self.clock.advance(d);
        self.scheduler.wake();
        // The master looks at a virtual clock every 10 ms.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Asks for an allocation run (as the allocation interval would).
    pub async fn allocate(&self) {
        self.advance(Duration::from_secs(1)).await;
    }

    pub async fn state(&self) -> serde_json::Value {
        self.http
            .get(format!("{}/state", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Nothing of any framework is left: no framework, task or offer in
    /// `/state`, nothing used or offered on an agent, no allocation on a node
    /// of the core and no application in it.
    pub async fn expect_empty(&self) {
        let state = self.state().await;
        assert_eq!(state["frameworks"].as_array().unwrap().len(), 0, "{state}");
        for slave in state["slaves"].as_array().unwrap() {
            for field in ["used_resources", "offered_resources"] {
                for (name, v) in slave[field].as_object().unwrap() {
                    if v.is_number() {
                        assert_eq!(v.as_f64(), Some(0.0), "{field}.{name}: {slave}");
                    }
                }
            }
        }
        self.scheduler.settle();
        let snap = self
            .scheduler
            .snapshot("mesos")
            .expect("the Mesos partition");
        for n in &snap.nodes {
            assert!(
                n.allocated.is_empty(),
                "node {} still has {:?}",
                n.id,
                n.allocated
            );
        }
        assert!(snap.allocations.is_empty(), "{:?}", snap.allocations);
        for a in &snap.applications {
            assert!(a.allocated.is_empty() && a.allocation_count == 0, "{a:?}");
        }
        let root = snap.queue("root").expect("root");
        assert!(root.allocated.is_empty(), "root holds {:?}", root.allocated);
    }

    pub async fn metrics(&self) -> serde_json::Value {
        self.http
            .get(format!("{}/metrics/snapshot", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Makes an operator API call (`POST /api/v1`) in `ct`: its status and
    /// body.
    pub async fn operator(&self, call: &v1::master::Call, ct: ContentType) -> (u16, String) {
        let resp = self
            .http
            .post(format!("{}/api/v1", self.url))
            .header("Content-Type", ct.mime())
            .header("Accept", ct.mime())
            .body(unisched_mesos::codec::encode(call, ct))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// POSTs a raw body to the scheduler API.
    pub async fn post(&self, body: Vec<u8>, headers: &[(&str, &str)]) -> (u16, String) {
        let mut req = self
            .http
            .post(format!("{}/api/v1/scheduler", self.url))
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    pub async fn subscribe(&self, info: v1::FrameworkInfo, ct: ContentType) -> Framework {
        self.subscribe_with(
            call::Subscribe {
                framework_info: info,
                ..Default::default()
            },
            ct,
        )
        .await
    }

    pub async fn subscribe_with(&self, subscribe: call::Subscribe, ct: ContentType) -> Framework {
        let framework_id = subscribe.framework_info.id.clone();
        let c = Call {
            framework_id,
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(subscribe),
            ..Default::default()
        };
        let resp = self
            .http
            .post(format!("{}/api/v1/scheduler", self.url))
            .header("Content-Type", ct.mime())
            .header("Accept", ct.mime())
            .body(codec::encode(&c, ct))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "SUBSCRIBE answers 200");
        let stream_id = resp
            .headers()
            .get("Mesos-Stream-Id")
            .expect("Mesos-Stream-Id header")
            .to_str()
            .unwrap()
            .to_string();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = resp.bytes_stream();
        let task = tokio::spawn(async move {
            let mut decoder = recordio::Decoder::new(64 << 20);
            while let Some(Ok(chunk)) = body.next().await {
                for record in decoder.decode(&chunk).expect("RecordIO") {
                    let e: Event = codec::decode(&record, ct).expect("event decodes");
                    if tx.send(e).is_err() {
                        return;
                    }
                }
            }
        });
        let mut f = Framework {
            url: self.url.clone(),
            http: self.http.clone(),
            ct,
            stream_id,
            id: String::new(),
            events: rx,
            reader: task,
        };
        let first = f.next().await;
        if let Some(s) = &first.subscribed {
            f.id = s.framework_id.value.clone();
        } else {
            // Tests that expect a refusal read it from `first_error`.
            f.events_front(first);
        }
        f
    }
}

/// A subscribed framework: its event stream and calls.
pub struct Framework {
    pub url: String,
    pub http: reqwest::Client,
    pub ct: ContentType,
    pub stream_id: String,
    pub id: String,
    events: mpsc::UnboundedReceiver<Event>,
    reader: tokio::task::JoinHandle<()>,
}

impl Framework {
    /// Calls as framework `id` on stream `stream_id`, without an event stream
    /// of its own (a client that lost it, or never had one).
    pub fn detached(m: &Master, ct: ContentType, id: &str, stream_id: &str) -> Framework {
        let (_, events) = mpsc::unbounded_channel();
        Framework {
            url: m.url.clone(),
            http: m.http.clone(),
            ct,
            stream_id: stream_id.to_string(),
            id: id.to_string(),
            events,
            reader: tokio::spawn(async {}),
        }
    }

    fn events_front(&mut self, e: Event) {
        // Put an event back in front: re-create the channel with it first.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(e);
        let mut old = std::mem::replace(&mut self.events, rx);
        tokio::spawn(async move {
            while let Some(e) = old.recv().await {
                if tx.send(e).is_err() {
                    return;
                }
            }
        });
    }

    /// The next event that is not a heartbeat.
    pub async fn next(&mut self) -> Event {
        loop {
            let e = tokio::time::timeout(WAIT, self.events.recv())
                .await
                .expect("an event in time")
                .expect("the stream is open");
            if e.r#type() != event::Type::Heartbeat {
                return e;
            }
        }
    }

    /// The next HEARTBEAT, other events skipped.
    pub async fn heartbeat(&mut self) {
        loop {
            let e = tokio::time::timeout(WAIT, self.events.recv())
                .await
                .expect("a heartbeat in time")
                .expect("the stream is open");
            if e.r#type() == event::Type::Heartbeat {
                return;
            }
        }
    }

    /// The next event of `kind`, skipping others.
    pub async fn next_of(&mut self, kind: event::Type) -> Event {
        loop {
            let e = self.next().await;
            if e.r#type() == kind {
                return e;
            }
        }
    }

    /// An event that arrives within QUIET, heartbeats skipped.
    pub async fn maybe_next(&mut self) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + QUIET;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) if e.r#type() == event::Type::Heartbeat => continue,
                Ok(Some(e)) => return Some(e),
                _ => return None,
            }
        }
    }

    /// An event of `kind` that arrives within QUIET, other events skipped.
    pub async fn maybe_next_of(&mut self, kind: event::Type) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + QUIET;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) if e.r#type() == kind => return Some(e),
                Ok(Some(_)) => continue,
                _ => return None,
            }
        }
    }

    /// True once the stream has ended (within WAIT).
    pub async fn closed(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(_)) => continue,
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    pub async fn offers(&mut self) -> Vec<v1::Offer> {
        self.next_of(event::Type::Offers)
            .await
            .offers
            .unwrap()
            .offers
    }

    pub async fn update(&mut self) -> v1::TaskStatus {
        self.next_of(event::Type::Update)
            .await
            .update
            .unwrap()
            .status
    }

    /// Drops the connection (as a crashed scheduler would).
    pub fn disconnect(self) {
        self.reader.abort();
    }

    /// Sends a call (framework id filled in) with the stream id; returns the
    /// status and body.
    pub async fn call(&self, mut c: Call) -> (u16, String) {
        if c.framework_id.is_none() {
            c.framework_id = Some(v1::FrameworkId {
                value: self.id.clone(),
            });
        }
        self.call_with_stream(c, Some(&self.stream_id)).await
    }

    pub async fn call_with_stream(&self, c: Call, stream: Option<&str>) -> (u16, String) {
        let mut req = self
            .http
            .post(format!("{}/api/v1/scheduler", self.url))
            .header("Content-Type", self.ct.mime())
            .body(codec::encode(&c, self.ct));
        if let Some(s) = stream {
            req = req.header("Mesos-Stream-Id", s);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    pub async fn accept(
        &self,
        offers: &[&v1::Offer],
        ops: Vec<v1::offer::Operation>,
        refuse: Option<f64>,
    ) -> u16 {
        self.call(Call {
            r#type: Some(call::Type::Accept as i32),
            accept: Some(call::Accept {
                offer_ids: offers.iter().map(|o| o.id.clone()).collect(),
                operations: ops,
                filters: refuse.map(|s| v1::Filters {
                    refuse_seconds: Some(s),
                }),
            }),
            ..Default::default()
        })
        .await
        .0
    }

    pub async fn launch(&self, offer: &v1::Offer, tasks: Vec<v1::TaskInfo>) -> u16 {
        self.accept(&[offer], vec![launch(tasks)], None).await
    }

    pub async fn decline(&self, offer: &v1::Offer, refuse: Option<f64>) -> u16 {
        self.call(Call {
            r#type: Some(call::Type::Decline as i32),
            decline: Some(call::Decline {
                offer_ids: vec![offer.id.clone()],
                filters: refuse.map(|s| v1::Filters {
                    refuse_seconds: Some(s),
                }),
            }),
            ..Default::default()
        })
        .await
        .0
    }

    pub async fn simple(&self, kind: call::Type) -> u16 {
        self.call(Call {
            r#type: Some(kind as i32),
            ..Default::default()
        })
        .await
        .0
    }

    pub async fn acknowledge(&self, status: &v1::TaskStatus) -> u16 {
        self.call(Call {
            r#type: Some(call::Type::Acknowledge as i32),
            acknowledge: Some(call::Acknowledge {
                agent_id: status.agent_id.clone().unwrap(),
                task_id: status.task_id.clone(),
                uuid: status.uuid.clone().unwrap(),
            }),
            ..Default::default()
        })
        .await
        .0
    }
}

/// A framework info with a role.
#[allow(deprecated)] // Single-role frameworks name their role in `role`.
pub fn framework(name: &str, role: &str) -> v1::FrameworkInfo {
    v1::FrameworkInfo {
        user: "tester".to_string(),
        name: name.to_string(),
        role: Some(role.to_string()),
        ..Default::default()
    }
}

/// A LAUNCH operation.
pub fn launch(tasks: Vec<v1::TaskInfo>) -> v1::offer::Operation {
    v1::offer::Operation {
        r#type: Some(v1::offer::operation::Type::Launch as i32),
        launch: Some(v1::offer::operation::Launch { task_infos: tasks }),
        ..Default::default()
    }
}

/// A command task on the offer's agent with resources `text`
/// (`unisched.duration` label when `duration` is given).
pub fn task(id: &str, offer: &v1::Offer, text: &str, duration: Option<&str>) -> v1::TaskInfo {
    v1::TaskInfo {
        name: id.to_string(),
        task_id: v1::TaskId {
            value: id.to_string(),
        },
        agent_id: offer.agent_id.clone(),
        resources: with_role(Resources::parse(text).unwrap().to_vec(), offer),
        command: Some(v1::CommandInfo {
            value: Some("true".to_string()),
            ..Default::default()
        }),
        labels: duration.map(|d| v1::Labels {
            labels: vec![v1::Label {
                key: "unisched.duration".to_string(),
                value: Some(d.to_string()),
            }],
        }),
        ..Default::default()
    }
}

/// Resources allocated to the offer's role (as a framework copies them).
pub fn with_role(mut resources: Vec<v1::Resource>, offer: &v1::Offer) -> Vec<v1::Resource> {
    for r in &mut resources {
        r.allocation_info = offer.allocation_info.clone();
    }
    resources
}

/// The scalar total of `name` in an offer.
pub fn scalar(offer: &v1::Offer, name: &str) -> f64 {
    offer
        .resources
        .iter()
        .filter(|r| r.name == name)
        .filter_map(|r| r.scalar.as_ref().map(|s| s.value))
        .sum()
}

/// Both encodings, for tests that run each scenario in both.
pub const ENCODINGS: [ContentType; 2] = [ContentType::Json, ContentType::Protobuf];

/// Resources from Mesos' resource text.
pub fn resources(text: &str) -> Vec<v1::Resource> {
    Resources::parse(text).unwrap().to_vec()
}

/// A task of a task group (no command of its own: the group's executor runs it).
pub fn task_without_command(id: &str, offer: &v1::Offer, text: &str) -> v1::TaskInfo {
    v1::TaskInfo {
        command: None,
        ..task(id, offer, text, None)
    }
}

/// A resource provider over HTTP: its event stream and calls.
pub struct Provider {
    pub url: String,
    pub http: reqwest::Client,
    pub ct: ContentType,
    pub stream_id: String,
    pub id: String,
    events: mpsc::UnboundedReceiver<rp::Event>,
    reader: tokio::task::JoinHandle<()>,
}

impl Provider {
    /// A provider with this one's address and ids but no event stream.
    pub fn detached(&self) -> Provider {
        let (_, events) = mpsc::unbounded_channel();
        Provider {
            url: self.url.clone(),
            http: self.http.clone(),
            ct: self.ct,
            stream_id: self.stream_id.clone(),
            id: self.id.clone(),
            events,
            reader: tokio::spawn(async {}),
        }
    }

    /// The next event.
    pub async fn next(&mut self) -> rp::Event {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("a provider event in time")
            .expect("the provider stream is open")
    }

    /// The next event of `kind`, skipping others.
    pub async fn next_of(&mut self, kind: rp::event::Type) -> rp::Event {
        loop {
            let e = self.next().await;
            if e.r#type() == kind {
                return e;
            }
        }
    }

    /// Waits for SUBSCRIBED and keeps the id.
    pub async fn subscribed(&mut self) -> String {
        let e = self.next_of(rp::event::Type::Subscribed).await;
        self.id = e.subscribed.unwrap().provider_id.value;
        self.id.clone()
    }

    /// An event within QUIET, if any.
    pub async fn maybe_next(&mut self) -> Option<rp::Event> {
        tokio::time::timeout(QUIET, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// True once the stream has ended (within WAIT).
    pub async fn closed(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(_)) => continue,
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Drops the connection.
    pub fn disconnect(self) {
        self.reader.abort();
    }

    /// Sends a call (provider id filled in) with the stream id.
    pub async fn call(&self, mut c: rp::Call) -> (u16, String) {
        if c.resource_provider_id.is_none() {
            c.resource_provider_id = Some(v1::ResourceProviderId {
                value: self.id.clone(),
            });
        }
        let resp = self
            .http
            .post(&self.url)
            .header("Content-Type", self.ct.mime())
            .header("Mesos-Stream-Id", &self.stream_id)
            .body(codec::encode(&c, self.ct))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// UPDATE_STATE with `resources` (given this provider's id) and a version.
    pub async fn update_state(
        &self,
        resources: Vec<v1::Resource>,
        version: u8,
        operations: Vec<v1::Operation>,
    ) -> (u16, String) {
        let resources = resources
            .into_iter()
            .map(|mut r| {
                r.provider_id = Some(Box::new(v1::ResourceProviderId {
                    value: self.id.clone(),
                }));
                r
            })
            .collect();
        self.call(rp::Call {
            r#type: Some(rp::call::Type::UpdateState as i32),
            update_state: Some(rp::call::UpdateState {
                operations,
                resources,
                resource_version_uuid: v1::Uuid {
                    value: vec![version; 16],
                },
            }),
            ..Default::default()
        })
        .await
    }

    /// UPDATE_OPERATION_STATUS for an operation the master applied here.
    pub async fn operation_status(
        &self,
        apply: &rp::event::ApplyOperation,
        state: v1::OperationState,
        converted: Vec<v1::Resource>,
        status_uuid: u8,
    ) -> (u16, String) {
        let status = v1::OperationStatus {
            operation_id: apply.info.id.clone(),
            state: state as i32,
            converted_resources: converted,
            uuid: Some(v1::Uuid {
                value: vec![status_uuid; 16],
            }),
            resource_provider_id: Some(v1::ResourceProviderId {
                value: self.id.clone(),
            }),
            ..Default::default()
        };
        self.call(rp::Call {
            r#type: Some(rp::call::Type::UpdateOperationStatus as i32),
            update_operation_status: Some(rp::call::UpdateOperationStatus {
                framework_id: apply.framework_id.clone(),
                status: status.clone(),
                latest_status: Some(status),
                operation_uuid: apply.operation_uuid.clone(),
            }),
            ..Default::default()
        })
        .await
    }
}

/// Resources of a resource provider of type `org.apache.mesos.rp.local.storage`.
pub fn provider_info(name: &str) -> v1::ResourceProviderInfo {
    v1::ResourceProviderInfo {
        r#type: "org.apache.mesos.rp.local.storage".to_string(),
        name: name.to_string(),
        ..Default::default()
    }
}

/// A disk resource with a source of `kind` (RAW, MOUNT, ...).
pub fn source_disk(
    size: f64,
    kind: v1::resource::disk_info::source::Type,
    id: Option<&str>,
) -> v1::Resource {
    let mut r = Resources::parse(&format!("disk:{size}"))
        .unwrap()
        .to_vec()
        .remove(0);
    r.disk = Some(Box::new(v1::resource::DiskInfo {
        persistence: None,
        volume: None,
        source: Some(v1::resource::disk_info::Source {
            r#type: kind as i32,
            id: id.map(str::to_string),
            mount: (kind == v1::resource::disk_info::source::Type::Mount).then(|| {
                v1::resource::disk_info::source::Mount {
                    root: Some("/volumes/x".to_string()),
                }
            }),
            ..Default::default()
        }),
    }));
    r
}

/// Every file below `dir` (not through symlinks).
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
