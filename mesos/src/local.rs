//! A Mesos cluster in one process, like `mesos-local`: the master on the
//! given core, N embedded agents, and the master's HTTP endpoints.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use unisched_core::Scheduler;

use crate::agent::custom::ExecutorHub;
use crate::agent::{AgentBackend, AgentUpdate, ExecutorKind, UpdateSink};
use crate::master::{AgentSpec, Input, MasterHandle, Settings, StartError};
use crate::resources::Resources;

/// Default resources of an embedded agent.
pub const DEFAULT_AGENT_RESOURCES: &str = "cpus:2;mem:1024;disk:4096;ports:[31000-32000]";

/// What [`start`] starts.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Where the master's HTTP endpoints listen (port 0 picks one).
    pub addr: SocketAddr,
    /// Queue configuration text (its first partition), or the default.
    pub config: Option<String>,
    /// Master settings.
    pub settings: Settings,
    /// Number of embedded agents.
    pub agents: usize,
    /// Resources of each agent.
    pub agent_resources: Resources,
    /// How agents run tasks.
    pub executor: ExecutorKind,
    /// Where process agents make sandboxes.
    pub work_dir: PathBuf,
    /// Bearer token required on the scheduler API; none by default.
    pub token: Option<String>,
    /// Principals frameworks authenticate as (Mesos' `--credentials`).
    pub credentials: Option<crate::master::auth::Credentials>,
    /// Libprocess frameworks must authenticate (SASL) before registering.
    pub authenticate_frameworks: bool,
    /// Scheduler API calls must carry Basic credentials.
    pub authenticate_http_frameworks: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 5050)),
            config: None,
            settings: Settings::default(),
            agents: 1,
            agent_resources: Resources::parse(DEFAULT_AGENT_RESOURCES).unwrap_or_default(),
            executor: ExecutorKind::Process,
            work_dir: std::env::temp_dir().join("unisched-mesos"),
            token: None,
            credentials: None,
            authenticate_frameworks: false,
            authenticate_http_frameworks: false,
        }
    }
}

/// A running local cluster.
pub struct LocalCluster {
    /// The master.
    pub master: MasterHandle,
    /// The bound address of its HTTP endpoints.
    pub addr: SocketAddr,
    /// Agent ids, in start order.
    pub agents: Vec<String>,
    server: tokio::task::JoinHandle<()>,
}

impl LocalCluster {
    /// Stops serving and stops the master (agents kill their tasks).
    pub fn stop(self) {
        self.server.abort();
        self.master.shutdown();
    }
}

/// An update sink that forwards to the master.
pub fn master_sink(master: &MasterHandle) -> UpdateSink {
    let master = master.clone();
    Arc::new(move |update: AgentUpdate| {
        master.send(Input::Agent(update));
    })
}

/// Makes an embedded agent of `kind` with the id the master gave it.
/// (A process agent runs custom executors when given `executors`, the
/// hub the executor API finds them in.)
pub fn make_agent(
    kind: ExecutorKind,
    agent_id: String,
    work_dir: PathBuf,
    sink: UpdateSink,
    runtime: tokio::runtime::Handle,
    executors: Option<Arc<ExecutorHub>>,
) -> Arc<dyn AgentBackend> {
    match kind {
        ExecutorKind::Process => crate::agent::process::ProcessAgent::with_executors(
            agent_id, work_dir, sink, runtime, executors,
        ),
        ExecutorKind::Simulated => {
            crate::agent::simulated::SimulatedAgent::new(agent_id, sink, runtime)
        }
    }
}

/// Starts the master on `scheduler`, its agents and its HTTP endpoints on
/// the current tokio runtime.
pub async fn start(
    scheduler: Scheduler,
    options: LocalOptions,
) -> Result<LocalCluster, StartError> {
    let access = crate::master::auth::Access {
        credentials: options.credentials.clone(),
        authenticate_frameworks: options.authenticate_frameworks,
        authenticate_http_frameworks: options.authenticate_http_frameworks,
        ..crate::master::auth::Access::token(options.token.as_deref())
    };
    access.validate().map_err(StartError::Authentication)?;
    let listener = crate::master::http::listen(options.addr)?;
    let addr = listener.local_addr()?;
    let mut settings = options.settings.clone();
    settings.port = u32::from(addr.port());
    if let std::net::IpAddr::V4(ip) = addr.ip()
        && !ip.is_unspecified()
    {
        settings.ip = ip;
    }
    let master = MasterHandle::start(scheduler, options.config.as_deref(), settings.clone())?;
    let runtime = tokio::runtime::Handle::current();
    let sink = master_sink(&master);
    // Custom executors call back on the master's port.
    let executors = ExecutorHub::new(addr);
    let mut agents = Vec::with_capacity(options.agents);
    for i in 0..options.agents {
        let (kind, dir, sink, rt, hub) = (
            options.executor,
            options.work_dir.clone(),
            sink.clone(),
            runtime.clone(),
            Arc::clone(&executors),
        );
        let id = master
            .add_agent(AgentSpec {
                hostname: format!("{}-agent-{i}", settings.hostname),
                resources: options.agent_resources.clone(),
                occupied: Resources::default(),
                attributes: Vec::new(),
                backend: Box::new(move |id: &str| {
                    make_agent(kind, id.to_string(), dir, sink, rt, Some(hub))
                }),
            })
            .await
            .unwrap_or_default();
        agents.push(id);
    }
    let router = crate::master::http::router(
        master.clone(),
        access,
        settings.stream_capacity,
        Some(executors),
    );
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "Mesos HTTP server failed");
        }
    });
    tracing::info!(%addr, agents = agents.len(), "Mesos-compatible master listening");
    Ok(LocalCluster {
        master,
        addr,
        agents,
        server,
    })
}
