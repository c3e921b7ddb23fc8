//! Driver-side test helpers: a scheduler that records its callbacks in
//! order (checking they run on one thread), and drivers reaching a test
//! master over HTTP in either encoding or in process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use unisched_mesos::client::{Answer, Client, ClientError, Subscription};
use unisched_mesos::codec::ContentType;
use unisched_mesos::driver::{
    Backoff, DriverOptions, MesosSchedulerDriver, Scheduler, Status, Transport,
};
use unisched_mesos::in_process::InProcessTransport;
use unisched_mesos::master::Input;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call};

use super::{Proxy, client_options};
use crate::common::{Master, QUIET, WAIT, task};

/// A callback as the recorder saw it.
#[allow(clippy::large_enum_variant)] // Test records; size does not matter.
#[derive(Debug, Clone)]
pub enum Seen {
    Registered(String),
    Reregistered,
    Disconnected,
    Offers(Vec<v1::Offer>),
    Rescinded(String),
    Update(v1::TaskStatus),
    Message(String, String, Vec<u8>),
    AgentLost(String),
    ExecutorLost(String, String, i32),
    Error(String, Status),
}

/// Runs inside a callback, with the driver, after it was recorded.
pub type Hook = Box<dyn FnMut(&MesosSchedulerDriver, &Seen) + Send>;

/// A scheduler that sends every callback to a channel (and runs a hook).
pub struct Recorder {
    tx: mpsc::UnboundedSender<(Seen, std::thread::ThreadId)>,
    hook: Option<Hook>,
}

impl Recorder {
    fn record(&mut self, driver: &MesosSchedulerDriver, seen: Seen) {
        let _ = self.tx.send((seen.clone(), std::thread::current().id()));
        if let Some(hook) = &mut self.hook {
            hook(driver, &seen);
        }
    }
}

impl Scheduler for Recorder {
    fn registered(
        &mut self,
        d: &MesosSchedulerDriver,
        id: &v1::FrameworkId,
        _master: &v1::MasterInfo,
    ) {
        self.record(d, Seen::Registered(id.value.clone()));
    }
    fn reregistered(&mut self, d: &MesosSchedulerDriver, _master: &v1::MasterInfo) {
        self.record(d, Seen::Reregistered);
    }
    fn disconnected(&mut self, d: &MesosSchedulerDriver) {
        self.record(d, Seen::Disconnected);
    }
    fn resource_offers(&mut self, d: &MesosSchedulerDriver, offers: &[v1::Offer]) {
        self.record(d, Seen::Offers(offers.to_vec()));
    }
    fn offer_rescinded(&mut self, d: &MesosSchedulerDriver, id: &v1::OfferId) {
        self.record(d, Seen::Rescinded(id.value.clone()));
    }
    fn status_update(&mut self, d: &MesosSchedulerDriver, status: &v1::TaskStatus) {
        self.record(d, Seen::Update(status.clone()));
    }
    fn framework_message(
        &mut self,
        d: &MesosSchedulerDriver,
        e: &v1::ExecutorId,
        a: &v1::AgentId,
        data: &[u8],
    ) {
        self.record(
            d,
            Seen::Message(e.value.clone(), a.value.clone(), data.to_vec()),
        );
    }
    fn slave_lost(&mut self, d: &MesosSchedulerDriver, a: &v1::AgentId) {
        self.record(d, Seen::AgentLost(a.value.clone()));
    }
    fn executor_lost(
        &mut self,
        d: &MesosSchedulerDriver,
        e: &v1::ExecutorId,
        a: &v1::AgentId,
        status: i32,
    ) {
        self.record(
            d,
            Seen::ExecutorLost(e.value.clone(), a.value.clone(), status),
        );
    }
    fn error(&mut self, d: &MesosSchedulerDriver, message: &str) {
        self.record(d, Seen::Error(message.to_string(), d.status()));
    }
}

/// The recorded callbacks, in order.
pub struct Callbacks {
    rx: mpsc::UnboundedReceiver<(Seen, std::thread::ThreadId)>,
    /// The thread every callback ran on (checked to be one).
    thread: Option<std::thread::ThreadId>,
}

impl Callbacks {
    /// The next callback (within WAIT).
    pub async fn next(&mut self) -> Seen {
        let (seen, thread) = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("a callback in time")
            .expect("the driver still runs");
        assert_eq!(
            *self.thread.get_or_insert(thread),
            thread,
            "callbacks run on one thread"
        );
        seen
    }

    /// Skips callbacks until `pick` takes one.
    pub async fn until<T>(&mut self, mut pick: impl FnMut(Seen) -> Option<T>) -> T {
        loop {
            if let Some(t) = pick(self.next().await) {
                return t;
            }
        }
    }

    /// Waits for a callback matching `pick`, skipping others.
    pub async fn reach(&mut self, pick: impl Fn(&Seen) -> bool) {
        self.until(|s| pick(&s).then_some(())).await
    }

    /// The next `error` callback: its message and the driver's status then.
    pub async fn error(&mut self) -> (String, Status) {
        self.until(|s| match s {
            Seen::Error(m, status) => Some((m, status)),
            _ => None,
        })
        .await
    }

    /// The next offers.
    pub async fn offers(&mut self) -> Vec<v1::Offer> {
        self.until(|s| match s {
            Seen::Offers(o) => Some(o),
            _ => None,
        })
        .await
    }

    /// The next status update.
    pub async fn update(&mut self) -> v1::TaskStatus {
        self.until(|s| match s {
            Seen::Update(u) => Some(u),
            _ => None,
        })
        .await
    }

    /// The next update of `task` in `state`.
    pub async fn update_of(&mut self, task: &str, state: v1::TaskState) -> v1::TaskStatus {
        self.until(|s| match s {
            Seen::Update(u) if u.task_id.value == task && u.state() == state => Some(u),
            _ => None,
        })
        .await
    }

    /// A callback within QUIET, if any.
    pub async fn quiet(&mut self) -> Option<Seen> {
        match tokio::time::timeout(QUIET, self.rx.recv()).await {
            Ok(Some((seen, _))) => Some(seen),
            _ => None,
        }
    }

    /// A callback matching `pick` within QUIET, if any.
    pub async fn quiet_of(&mut self, mut pick: impl FnMut(&Seen) -> bool) -> Option<Seen> {
        let deadline = tokio::time::Instant::now() + QUIET;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some((seen, _))) if pick(&seen) => return Some(seen),
                Ok(Some(_)) => continue,
                _ => return None,
            }
        }
    }
}

/// How a test driver reaches the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Over HTTP in this encoding.
    Http(ContentType),
    /// In process (MasterHandle), no HTTP.
    InProcess,
}

/// Every way a driver can reach the master.
pub const VIAS: [Via; 3] = [
    Via::Http(ContentType::Json),
    Via::Http(ContentType::Protobuf),
    Via::InProcess,
];

/// Driver options for tests: fast reconnects.
pub fn fast_options() -> DriverOptions {
    DriverOptions {
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        teardown_timeout: Duration::from_secs(5),
        ..DriverOptions::default()
    }
}

/// A recorder and its callbacks.
pub fn recorder(hook: Option<Hook>) -> (Recorder, Callbacks) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder { tx, hook }, Callbacks { rx, thread: None })
}

/// What stands between a test driver and the master, so a test can make
/// the master go away and come back: a TCP proxy for HTTP, a switchable
/// wrapper around the in-process transport.
pub enum Link {
    Http(Proxy),
    InProcess(Arc<Flaky>),
}

impl Link {
    /// Ends the open event stream (the driver sees it lost and resubscribes).
    pub fn drop_stream(&self, m: &Master) {
        match self {
            Link::Http(proxy) => proxy.cut(),
            Link::InProcess(flaky) => flaky.drop_stream(m),
        }
    }

    /// The master becomes unreachable (an open stream stays open).
    pub fn unreachable(&self) {
        match self {
            Link::Http(proxy) => proxy.refuse(true),
            Link::InProcess(flaky) => flaky.down.store(true, Ordering::SeqCst),
        }
    }

    /// The master becomes unreachable and the stream ends.
    pub fn go_down(&self, m: &Master) {
        self.unreachable();
        self.drop_stream(m);
    }

    /// The master is reachable again.
    pub fn come_back(&self) {
        match self {
            Link::Http(proxy) => proxy.refuse(false),
            Link::InProcess(flaky) => flaky.down.store(false, Ordering::SeqCst),
        }
    }
}

/// The in-process transport, refusing everything while `down`.
pub struct Flaky {
    inner: InProcessTransport,
    pub down: AtomicBool,
    framework: Arc<Mutex<Option<String>>>,
}

impl Flaky {
    /// Tells the master the stream closed, as a cut connection would.
    fn drop_stream(&self, m: &Master) {
        let framework = self.framework.lock().unwrap().clone().expect("subscribed");
        let stream_id = self.inner.stream_id().expect("subscribed");
        m.cluster.master.send(Input::StreamClosed {
            framework,
            stream_id,
        });
    }
}

impl Transport for Flaky {
    fn subscribe(
        &self,
        subscribe: call::Subscribe,
    ) -> BoxFuture<'static, Result<Subscription, ClientError>> {
        if self.down.load(Ordering::SeqCst) {
            return Box::pin(async { Err(ClientError::Transport("down".to_string())) });
        }
        let inner = self.inner.subscribe(subscribe);
        let framework = self.framework.clone();
        Box::pin(async move {
            let subscription = inner.await?;
            *framework.lock().unwrap() = Some(subscription.subscribed.framework_id.value.clone());
            Ok(subscription)
        })
    }

    fn call(&self, call: Call) -> BoxFuture<'static, Result<Answer, ClientError>> {
        if self.down.load(Ordering::SeqCst) {
            return Box::pin(async { Err(ClientError::Transport("down".to_string())) });
        }
        self.inner.call(call)
    }
}

/// A driver (not started) for `info` reaching `m` by `via`, and its link.
pub async fn driver(
    m: &Master,
    via: Via,
    info: v1::FrameworkInfo,
    options: DriverOptions,
    hook: Option<Hook>,
) -> (MesosSchedulerDriver, Callbacks, Link) {
    let (recorder, callbacks) = recorder(hook);
    match via {
        Via::Http(ct) => {
            let proxy = Proxy::start(&m.url).await;
            let client = Client::new(&proxy.url, client_options(ct)).unwrap();
            let d = MesosSchedulerDriver::with_client(recorder, info, client, options);
            (d, callbacks, Link::Http(proxy))
        }
        Via::InProcess => {
            let flaky = Arc::new(Flaky {
                inner: InProcessTransport::new(m.cluster.master.clone()),
                down: AtomicBool::new(false),
                framework: Arc::new(Mutex::new(None)),
            });
            let d = MesosSchedulerDriver::with_transport(recorder, info, flaky.clone(), options);
            (d, callbacks, Link::InProcess(flaky))
        }
    }
}

/// A started, registered driver.
pub struct Running {
    pub driver: MesosSchedulerDriver,
    pub callbacks: Callbacks,
    pub id: String,
    pub link: Link,
}

impl Running {
    /// Launches `tasks` on `offer`, remainder declined with the default filter.
    pub fn launch(&self, offer: &v1::Offer, tasks: Vec<v1::TaskInfo>) -> Status {
        self.driver
            .launch_tasks(std::slice::from_ref(&offer.id), tasks, None)
    }

    /// Takes the next offer, runs a task `id` that runs until killed on it,
    /// and waits until it is RUNNING; returns the offer.
    pub async fn run_long_task(&mut self, id: &str) -> v1::Offer {
        let offer = self.callbacks.offers().await.remove(0);
        assert_eq!(
            self.launch(&offer, vec![long_task(id, &offer)]),
            Status::DriverRunning
        );
        self.callbacks
            .update_of(id, v1::TaskState::TaskRunning)
            .await;
        offer
    }
}

/// A task that runs until killed.
pub fn long_task(id: &str, offer: &v1::Offer) -> v1::TaskInfo {
    task(id, offer, "cpus:0.5;mem:128", None)
}

/// A task that finishes at once.
pub fn quick_task(id: &str, offer: &v1::Offer) -> v1::TaskInfo {
    task(id, offer, "cpus:0.5;mem:128", Some("0"))
}

/// Starts a driver and waits for `registered`.
pub async fn registered(
    m: &Master,
    via: Via,
    info: v1::FrameworkInfo,
    options: DriverOptions,
    hook: Option<Hook>,
) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (driver, mut callbacks, link) = self::driver(m, via, info, options, hook).await;
    assert_eq!(driver.start(), Status::DriverRunning);
    let id = callbacks
        .until(|s| match s {
            Seen::Registered(id) => Some(id),
            _ => None,
        })
        .await;
    Running {
        driver,
        callbacks,
        id,
        link,
    }
}

/// Runs a blocking driver call (join) off the test's runtime.
pub async fn join(d: &MesosSchedulerDriver) -> Status {
    let d = d.clone();
    tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || d.join()))
        .await
        .expect("join returns in time")
        .unwrap()
}
