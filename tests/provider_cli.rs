//! `unisched provider` against a local Mesos cluster over real HTTP in both
//! encodings: local to an agent named by its id, found through the master's
//! `/state`; its pool offered to a framework (the scheduler client), whose
//! CREATE_DISK makes a volume directory under `--root`; a restart that
//! names the agent by number keeps the id and the volume; unusable flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use unisched::cli::Encoding;
use unisched::cli::provider::{DEFAULT_TYPE, ProviderArgs, ProviderError, serve};
use unisched::core::{Scheduler, SchedulerOptions};
use unisched_mesos::client::{Client, ClientOptions};
use unisched_mesos::local::{self, LocalCluster, LocalOptions};
use unisched_mesos::master::report::Query;
use unisched_mesos::provider::RunnerStatus;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::resource::disk_info::source::Type as Source;
use unisched_mesos::v1::scheduler::{call, event};

const WAIT: Duration = Duration::from_secs(15);

async fn cluster() -> LocalCluster {
    let options = LocalOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        agents: 1,
        agent_resources: Resources::parse("cpus:1;mem:512").unwrap(),
        work_dir: std::env::temp_dir()
            .join(format!("unisched-provider-cli-{}", std::process::id())),
        ..LocalOptions::default()
    };
    local::start(Scheduler::start(SchedulerOptions::default()), options)
        .await
        .expect("cluster starts")
}

fn root(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "unisched-provider-cli-{test}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn args(master: &str, agent: Option<&str>, root: &Path, encoding: Encoding) -> ProviderArgs {
    ProviderArgs {
        master: master.to_string(),
        agent: agent.map(str::to_string),
        name: "pool".to_string(),
        provider_type: DEFAULT_TYPE.to_string(),
        resources: "disk:1000".to_string(),
        root: root.to_path_buf(),
        content_type: encoding,
        token: None,
    }
}

/// A running `provider`: its lines, and how to stop it.
struct Running {
    lines: mpsc::UnboundedReceiver<String>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<RunnerStatus, ProviderError>>,
}

fn start(args: ProviderArgs) -> Running {
    let (say, lines) = mpsc::unbounded_channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let stopped = async move {
            let _ = stopped.await;
        };
        serve(&args, stopped, move |line| {
            let _ = say.send(line);
        })
        .await
    });
    Running { lines, stop, task }
}

impl Running {
    /// The id of the next subscription line.
    async fn subscribed(&mut self) -> String {
        let line = tokio::time::timeout(WAIT, self.lines.recv())
            .await
            .expect("subscribed in time")
            .expect("a line");
        let id = line
            .split("subscribed as ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no id in '{line}'"));
        id.to_string()
    }

    async fn stop(self) -> RunnerStatus {
        let _ = self.stop.send(());
        self.task.await.unwrap().expect("stops cleanly")
    }
}

/// Offers holding the provider's RAW disk, declining the others.
async fn raw_offer(
    client: &Client,
    events: &mut unisched_mesos::client::EventStream,
    provider: &str,
) -> (v1::Offer, v1::Resource) {
    loop {
        let e = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an offer in time")
            .expect("the stream is open")
            .expect("an event");
        let Some(offers) = e.offers else { continue };
        for o in offers.offers {
            let raw = o.resources.iter().find(|r| {
                r.provider_id.as_ref().is_some_and(|p| p.value == provider)
                    && r.disk
                        .as_ref()
                        .and_then(|d| d.source.as_ref())
                        .is_some_and(|s| s.r#type() == Source::Raw)
            });
            match raw {
                Some(raw) => return (o.clone(), raw.clone()),
                None => client
                    .decline(call::Decline {
                        offer_ids: vec![o.id.clone()],
                        filters: Some(v1::Filters {
                            refuse_seconds: Some(0.0),
                        }),
                    })
                    .await
                    .unwrap(),
            }
        }
    }
}

/// A framework's CREATE_DISK of 100 of the pool: the volume's directory.
async fn create_volume(m: &LocalCluster, provider: &str, encoding: Encoding) -> PathBuf {
    let client = Client::new(
        &format!("http://{}", m.addr),
        ClientOptions {
            content_type: encoding.content_type(),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    #[allow(deprecated)] // A single-role framework names its role in `role`.
    let info = v1::FrameworkInfo {
        name: "cli-test".into(),
        role: Some("*".into()),
        ..Default::default()
    };
    let mut sub = client
        .subscribe(call::Subscribe {
            framework_info: info,
            ..Default::default()
        })
        .await
        .unwrap();
    let (offer, raw) = raw_offer(&client, &mut sub.events, provider).await;
    let mut source = raw.clone();
    source.scalar = Some(v1::value::Scalar { value: 100.0 });
    client
        .accept(call::Accept {
            offer_ids: vec![offer.id.clone()],
            operations: vec![v1::offer::Operation {
                r#type: Some(v1::offer::operation::Type::CreateDisk as i32),
                id: Some(v1::OperationId {
                    value: "volume".into(),
                }),
                create_disk: Some(v1::offer::operation::CreateDisk {
                    source: Box::new(source),
                    target_type: Source::Mount as i32,
                    target_profile: None,
                }),
                ..Default::default()
            }],
            filters: None,
        })
        .await
        .unwrap();
    let status = loop {
        let e = tokio::time::timeout(WAIT, sub.events.next())
            .await
            .expect("a status in time")
            .expect("the stream is open")
            .expect("an event");
        if e.r#type() == event::Type::UpdateOperationStatus {
            break e.update_operation_status.unwrap().status;
        }
    };
    assert_eq!(
        status.state(),
        v1::OperationState::OperationFinished,
        "{status:?}"
    );
    client
        .acknowledge_operation_status(call::AcknowledgeOperationStatus {
            agent_id: status.agent_id.clone(),
            resource_provider_id: status.resource_provider_id.clone(),
            uuid: status.uuid.clone().unwrap().value,
            operation_id: status.operation_id.clone().unwrap(),
        })
        .await
        .unwrap();
    let root = status.converted_resources[0]
        .disk
        .as_ref()
        .and_then(|d| d.source.as_ref())
        .and_then(|s| s.mount.as_ref())
        .and_then(|m| m.root.clone())
        .expect("a MOUNT disk");
    client.teardown().await.unwrap();
    PathBuf::from(root)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_provider_offers_its_pool_makes_volumes_and_keeps_its_id() {
    for encoding in [Encoding::Json, Encoding::Protobuf] {
        let m = cluster().await;
        let dir = root(&format!("{encoding:?}"));
        let agent = m.agents[0].clone();
        let master = m.addr.to_string();
        let mut p = start(args(&master, Some(&agent), &dir, encoding));
        let id = p.subscribed().await;
        let state = m.master.query(Query::State).await.unwrap();
        let providers = &state["slaves"][0]["resource_providers"];
        assert_eq!(
            providers[0]["resource_provider_info"]["id"]["value"],
            id.as_str()
        );
        assert_eq!(providers[0]["resource_provider_info"]["type"], DEFAULT_TYPE);
        assert_eq!(providers[0]["total_resources"]["disk"], 1000.0);
        let volume = create_volume(&m, &id, encoding).await;
        assert!(
            volume.is_dir() && volume.starts_with(dir.canonicalize().unwrap()),
            "{volume:?}"
        );
        let last = p.stop().await;
        assert_eq!(last.unacknowledged, 0, "{last:?}");
        // Restarted, naming the agent by number: the same id, the volume kept.
        let mut p = start(args(&master, Some("1"), &dir, encoding));
        assert_eq!(p.subscribed().await, id);
        let state = m.master.query(Query::State).await.unwrap();
        let total = &state["slaves"][0]["resource_providers"][0]["total_resources"];
        assert_eq!(total["disk"], 1000.0, "{state}");
        assert!(volume.is_dir());
        p.stop().await;
        m.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_flags_and_unknown_agents_are_refused() {
    let m = cluster().await;
    let master = m.addr.to_string();
    let dir = root("flags");
    let refused = |a: ProviderArgs| async move {
        let stop = std::future::pending::<()>();
        serve(&a, stop, |_| {}).await.unwrap_err().to_string()
    };
    let mut a = args(&master, None, &dir, Encoding::Json);
    a.resources = "cpus:1".into();
    let e = refused(a).await;
    assert!(e.contains("only disk"), "{e}");
    let mut a = args(&master, None, &dir, Encoding::Json);
    a.name = " ".into();
    let e = refused(a).await;
    assert!(e.contains("--name"), "{e}");
    let e = refused(args(&master, Some("no-such-agent"), &dir, Encoding::Json)).await;
    assert!(
        e.contains("knows no agent 'no-such-agent'") && e.contains(&m.agents[0]),
        "{e}"
    );
    let e = refused(args("zk://zk:2181/mesos", None, &dir, Encoding::Json)).await;
    assert!(e.contains("not supported"), "{e}");
    m.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
