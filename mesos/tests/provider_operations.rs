//! Operations on a provider's resources from a framework, end to end over
//! real HTTP in both encodings, against our master and the directory-backed
//! storage provider: CREATE_DISK, DESTROY_DISK, GROW_VOLUME, SHRINK_VOLUME,
//! a stale resource version, status retries, restarts of the provider and of
//! the master, and launches that publish the provider's resources first.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::provider::*;
use common::*;
use unisched_mesos::codec::ContentType;
use unisched_mesos::provider::storage::DirectoryPool;
use unisched_mesos::provider::{Apply, Endpoint, ResourceProvider, runner};
use unisched_mesos::v1;
use unisched_mesos::v1::OperationState;
use unisched_mesos::v1::resource::disk_info::source::Type as Source;
use unisched_mesos::v1::scheduler::event;

/// A framework with a MOUNT volume of 100 made from the provider's pool of
/// 1000 and acknowledged: the framework, the provider id, the volume.
struct WithVolume {
    f: Framework,
    id: String,
    volume: v1::Resource,
}

async fn with_volume(
    m: &Master,
    handle: &unisched_mesos::provider::RunnerHandle,
    ct: ContentType,
) -> WithVolume {
    let id = handle.status().provider_id.unwrap();
    let mut f = m.subscribe(framework("fw", "*"), ct).await;
    let status = create_volume(m, &mut f, &id, 100.0, Some("create")).await;
    assert_eq!(
        status.state(),
        OperationState::OperationFinished,
        "{status:?}"
    );
    assert_eq!(acknowledge_operation(&f, &status).await, 202);
    within(handle.wait_for(|s| s.unacknowledged == 0)).await;
    let volume = status.converted_resources[0].clone();
    WithVolume { f, id, volume }
}

/// CREATE_DISK of `size` of the provider's RAW disk into a MOUNT volume,
/// from the next offer holding some; its status (not acknowledged).
async fn create_volume(
    m: &Master,
    f: &mut Framework,
    id: &str,
    size: f64,
    operation_id: Option<&str>,
) -> v1::OperationStatus {
    let offer = offer_with(m, f, id, is_raw).await;
    let raw = provided_where(&offer, id, is_raw)[0].clone();
    let create = create_disk(&part(&raw, size), Source::Mount, operation_id);
    accept(f, &offer, vec![create]).await;
    operation_status(f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_disk_and_destroy_disk_from_a_framework() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root,
            handle,
            id,
        } = provided_master("create-destroy", ct).await;
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let status = create_volume(&m, &mut f, &id, 100.0, Some("create")).await;
        assert_eq!(
            status.state(),
            OperationState::OperationFinished,
            "{status:?}"
        );
        assert_eq!(status.operation_id.as_ref().unwrap().value, "create");
        assert_eq!(status.resource_provider_id.as_ref().unwrap().value, id);
        let volume = status.converted_resources[0].clone();
        assert!(is_mount(&volume) && amount(&volume) == 100.0, "{volume:?}");
        let dir = mount_root(&volume);
        assert!(
            dir.is_dir() && dir.starts_with(root.path().canonicalize().unwrap()),
            "{dir:?}"
        );
        assert_eq!(
            handle.status().unacknowledged,
            1,
            "until the framework acknowledges"
        );
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        within(handle.wait_for(|s| s.unacknowledged == 0)).await;
        // The volume comes back in offers, with the pool's rest.
        let offer = offer_with(&m, &mut f, &id, is_mount).await;
        let mount = provided_where(&offer, &id, is_mount);
        assert_eq!(mount.len(), 1);
        assert_eq!(mount_root(mount[0]), dir);
        let rest: f64 = provided_where(&offer, &id, is_raw)
            .iter()
            .map(|r| amount(r))
            .sum();
        assert_eq!(rest, 900.0);
        // DESTROY_DISK: the directory goes, the RAW disk comes back.
        accept(&f, &offer, vec![destroy_disk(mount[0], Some("destroy"))]).await;
        let status = operation_status(&mut f).await;
        assert_eq!(
            status.state(),
            OperationState::OperationFinished,
            "{status:?}"
        );
        assert!(is_raw(&status.converted_resources[0]));
        assert!(!dir.exists());
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        within(handle.wait_for(|s| s.unacknowledged == 0)).await;
        let offer = offer_with(&m, &mut f, &id, |r| is_raw(r) && amount(r) == 1000.0).await;
        assert!(provided_where(&offer, &id, is_mount).is_empty());
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_and_shrink_change_the_quota_record() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root,
            handle,
            id: _,
        } = provided_master("grow-shrink", ct).await;
        let WithVolume { mut f, id, volume } = with_volume(&m, &handle, ct).await;
        let record = root.path().join("volumes").join(format!(
            "{}.json",
            mount_root(&volume).file_name().unwrap().to_string_lossy()
        ));
        let quota = || -> f64 {
            let text = std::fs::read_to_string(&record).unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()["quota"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(quota(), 100.0);
        let offer = offer_with(&m, &mut f, &id, is_mount).await;
        let mounted = provided_where(&offer, &id, is_mount)[0].clone();
        let raw = provided_where(&offer, &id, is_raw)[0].clone();
        accept(&f, &offer, vec![grow(&mounted, &part(&raw, 50.0), "grow")]).await;
        let status = operation_status(&mut f).await;
        assert_eq!(
            status.state(),
            OperationState::OperationFinished,
            "{status:?}"
        );
        assert_eq!(amount(&status.converted_resources[0]), 150.0);
        assert_eq!(quota(), 150.0);
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        let offer = offer_with(&m, &mut f, &id, |r| is_mount(r) && amount(r) == 150.0).await;
        let mounted = provided_where(&offer, &id, is_mount)[0].clone();
        accept(&f, &offer, vec![shrink(&mounted, 30.0, "shrink")]).await;
        let status = operation_status(&mut f).await;
        assert_eq!(
            status.state(),
            OperationState::OperationFinished,
            "{status:?}"
        );
        assert_eq!(quota(), 120.0);
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        let offer = offer_with(&m, &mut f, &id, |r| is_mount(r) && amount(r) == 120.0).await;
        let rest: f64 = provided_where(&offer, &id, is_raw)
            .iter()
            .map(|r| amount(r))
            .sum();
        assert_eq!(rest, 880.0);
        // Shrinking away the whole volume fails (and changes nothing).
        let mounted = provided_where(&offer, &id, is_mount)[0].clone();
        accept(&f, &offer, vec![shrink(&mounted, 120.0, "too-much")]).await;
        let status = operation_status(&mut f).await;
        assert_eq!(
            status.state(),
            OperationState::OperationFailed,
            "{status:?}"
        );
        assert_eq!(quota(), 120.0);
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

/// A storage provider whose `resources()` can be held at the gate: the
/// runner has then taken its new resource version but not yet sent it.
struct Gated {
    inner: DirectoryPool,
    armed: Arc<AtomicBool>,
    entered: tokio::sync::mpsc::UnboundedSender<()>,
    release: std::sync::mpsc::Receiver<()>,
}

impl ResourceProvider for Gated {
    fn resources(&mut self) -> Vec<v1::Resource> {
        if self.armed.swap(false, Ordering::SeqCst) {
            let _ = self.entered.send(());
            let _ = self.release.recv();
        }
        self.inner.resources()
    }

    fn apply(&mut self, operation: Apply<'_>) -> Result<Vec<v1::Resource>, String> {
        self.inner.apply(operation)
    }

    fn publish(&mut self, resources: &[v1::Resource]) -> Result<(), String> {
        self.inner.publish(resources)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_made_against_a_stale_resource_version_is_dropped() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let root = Root::new("stale", ct);
        let armed = Arc::new(AtomicBool::new(false));
        let (entered, mut inside) = tokio::sync::mpsc::unbounded_channel();
        let (release, gate) = std::sync::mpsc::channel();
        let pool = Gated {
            inner: DirectoryPool::open(root.path(), "disk:1000").unwrap(),
            armed: armed.clone(),
            entered,
            release: gate,
        };
        let handle =
            runner::spawn(pool, options(&m.url, Endpoint::Agent(1), root.path(), ct)).unwrap();
        subscribed(&handle, 1).await;
        let id = handle.status().provider_id.unwrap();
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let offer = offer_with(&m, &mut f, &id, is_raw).await;
        // The provider takes a new version; the master has not heard of it.
        armed.store(true, Ordering::SeqCst);
        handle.resources_changed();
        within(inside.recv()).await;
        let raw = provided_where(&offer, &id, is_raw)[0].clone();
        accept(
            &f,
            &offer,
            vec![create_disk(
                &part(&raw, 100.0),
                Source::Mount,
                Some("stale"),
            )],
        )
        .await;
        // The master has sent APPLY_OPERATION with the version it knows.
        within(async {
            while m.state().await["slaves"][0]["operations"]
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                tokio::task::yield_now().await;
            }
        })
        .await;
        release.send(()).unwrap();
        let status = operation_status(&mut f).await;
        assert_eq!(
            status.state(),
            OperationState::OperationDropped,
            "{status:?}"
        );
        assert!(
            status
                .message
                .as_deref()
                .unwrap_or("")
                .contains("Mismatched resource version"),
            "{status:?}"
        );
        assert_eq!(handle.status().dropped_operations, 1);
        assert!(
            std::fs::read_dir(root.path().join("volumes"))
                .unwrap()
                .next()
                .is_none(),
            "no volume made"
        );
        // Dropped statuses are acknowledged like any other.
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        within(handle.wait_for(|s| s.unacknowledged == 0)).await;
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_is_retried_until_acknowledged_and_an_operation_without_id_at_once() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root: _root,
            handle,
            id,
        } = provided_master("retries", ct).await;
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let status = create_volume(&m, &mut f, &id, 100.0, Some("slow-ack")).await;
        let sent = handle.status().status_updates;
        // Not acknowledged: the provider sends it again and again (the
        // master passes it on once).
        within(handle.wait_for(|s| s.status_updates >= sent + 3)).await;
        assert_eq!(handle.status().unacknowledged, 1);
        let quiet = tokio::time::timeout(
            QUIET,
            next_declining(&mut f, event::Type::UpdateOperationStatus),
        )
        .await;
        assert!(quiet.is_err(), "passed on once: {quiet:?}");
        assert_eq!(acknowledge_operation(&f, &status).await, 202);
        let done = within(handle.wait_for(|s| s.unacknowledged == 0)).await;
        tokio::time::sleep(QUIET).await;
        assert_eq!(
            handle.status().status_updates,
            done.status_updates,
            "no retries after the acknowledgement"
        );
        // An operation without an id: the master acknowledges it at once.
        let offer = offer_with(&m, &mut f, &id, is_raw).await;
        let raw = provided_where(&offer, &id, is_raw)[0].clone();
        let applied = handle.status().applied;
        accept(
            &f,
            &offer,
            vec![create_disk(&part(&raw, 10.0), Source::Block, None)],
        )
        .await;
        within(handle.wait_for(|s| s.applied > applied && s.unacknowledged == 0)).await;
        let offer = offer_with(&m, &mut f, &id, |r| {
            source_of(r).is_some_and(|s| s.r#type() == Source::Block)
        })
        .await;
        assert_eq!(provided_where(&offer, &id, is_mount).len(), 1);
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_provider_keeps_its_id_volumes_and_unacknowledged_statuses() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root,
            handle,
            id: _,
        } = provided_master("restart", ct).await;
        let WithVolume { mut f, id, volume } = with_volume(&m, &handle, ct).await;
        // A second volume whose status is not acknowledged before the stop.
        let pending = create_volume(&m, &mut f, &id, 50.0, Some("second")).await;
        handle.stop().await.unwrap();
        let handle = start_provider(&m, root.path(), "disk:1000", ct).await;
        assert_eq!(handle.status().provider_id.as_deref(), Some(id.as_str()));
        assert_eq!(handle.status().unacknowledged, 1);
        assert_eq!(acknowledge_operation(&f, &pending).await, 202);
        within(handle.wait_for(|s| s.unacknowledged == 0)).await;
        // Both volumes are offered again, where they were.
        let offer = offer_with(&m, &mut f, &id, is_mount).await;
        let mut roots: Vec<_> = provided_where(&offer, &id, is_mount)
            .into_iter()
            .map(mount_root)
            .collect();
        roots.sort();
        let mut want = vec![
            mount_root(&volume),
            mount_root(&pending.converted_resources[0]),
        ];
        want.sort();
        assert_eq!(roots, want);
        assert!(roots.iter().all(|r| r.is_dir()));
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_master_restart_the_provider_subscribes_afresh_with_its_volumes() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let addr = m.cluster.addr;
        let root = Root::new("master-restart", ct);
        let handle = start_provider(&m, root.path(), "disk:1000", ct).await;
        let WithVolume { f, id, volume } = with_volume(&m, &handle, ct).await;
        f.disconnect();
        m.cluster.stop();
        // A new master on the same port: it does not know the id.
        let m = within(async {
            loop {
                let setup = Setup {
                    addr: Some(addr),
                    ..Setup::default()
                };
                if let Ok(m) = Master::try_start(setup).await {
                    return m;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        let status =
            within(handle.wait_for(|s| !s.forgotten_ids.is_empty() && s.state_updates >= 2)).await;
        assert_eq!(status.forgotten_ids, vec![id.clone()]);
        assert!(status.dropped_subscriptions >= 3, "{status:?}");
        let new_id = status.provider_id.unwrap();
        assert_ne!(new_id, id);
        let kept = std::fs::read_to_string(root.path().join("provider.json")).unwrap();
        assert!(kept.contains(&new_id), "{kept}");
        // Its volume is offered under the new id.
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let offer = offer_with(&m, &mut f, &new_id, is_mount).await;
        assert_eq!(
            mount_root(provided_where(&offer, &new_id, is_mount)[0]),
            mount_root(&volume)
        );
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

/// The next task status; offers on the way declined.
async fn update(f: &mut Framework) -> v1::TaskStatus {
    next_declining(f, event::Type::Update)
        .await
        .update
        .expect("an update")
        .status
}

/// A task of the offer's agent using `disk` of the provider and a little
/// of the agent.
fn task_with(id: &str, offer: &v1::Offer, disk: &v1::Resource) -> v1::TaskInfo {
    let mut t = task(id, offer, "cpus:0.1;mem:32", None);
    t.resources.push(disk.clone());
    t
}

async fn launch_on_volume(
    m: &Master,
    f: &mut Framework,
    id: &str,
    task_id: &str,
) -> v1::TaskStatus {
    let offer = offer_with(m, f, id, is_mount).await;
    let mounted = provided_where(&offer, id, is_mount)[0].clone();
    assert_eq!(
        f.accept(
            &[&offer],
            vec![launch(vec![task_with(task_id, &offer, &mounted)])],
            Some(0.0)
        )
        .await,
        202
    );
    loop {
        let status = update(f).await;
        if status.task_id.value == task_id && status.state() != v1::TaskState::TaskStarting {
            return status;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_on_provider_resources_runs_once_published_and_fails_when_not() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root: _root,
            handle,
            id: _,
        } = provided_master("publish", ct).await;
        let WithVolume { mut f, id, volume } = with_volume(&m, &handle, ct).await;
        let status = launch_on_volume(&m, &mut f, &id, "ok").await;
        assert_eq!(status.state(), v1::TaskState::TaskRunning, "{status:?}");
        assert_eq!(handle.status().publishes, 1);
        f.acknowledge(&status).await;
        // The volume's directory is gone behind the provider's back: the
        // publication fails, and so does the task.
        std::fs::remove_dir_all(mount_root(&volume)).unwrap();
        let kill = v1::scheduler::Call {
            r#type: Some(v1::scheduler::call::Type::Kill as i32),
            kill: Some(v1::scheduler::call::Kill {
                task_id: status.task_id.clone(),
                agent_id: status.agent_id.clone(),
                kill_policy: None,
            }),
            ..Default::default()
        };
        assert_eq!(f.call(kill).await.0, 202);
        loop {
            let s = update(&mut f).await;
            if s.task_id.value == "ok" && s.state() == v1::TaskState::TaskKilled {
                f.acknowledge(&s).await;
                break;
            }
        }
        let status = launch_on_volume(&m, &mut f, &id, "fails").await;
        assert_eq!(status.state(), v1::TaskState::TaskFailed, "{status:?}");
        assert!(
            status.message.as_deref().unwrap_or("").contains("publish"),
            "{status:?}"
        );
        assert_eq!(handle.status().publishes, 2);
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[test]
fn a_pool_that_cannot_hold_its_volumes_does_not_open() {
    let root = Root::new("too-small", ContentType::Json);
    let mut pool = DirectoryPool::open(root.path(), "disk:100").unwrap();
    let raw = pool.resources().remove(0);
    let info = create_disk(&part(&raw, 80.0), Source::Mount, Some("v"));
    pool.apply(Apply {
        uuid: "2f1c0d4e-0000-4000-8000-000000000001",
        framework_id: None,
        info: &info,
    })
    .unwrap();
    // Applied again (after a crash): the same volume, nothing taken twice.
    let again = pool
        .apply(Apply {
            uuid: "2f1c0d4e-0000-4000-8000-000000000001",
            framework_id: None,
            info: &info,
        })
        .unwrap();
    assert_eq!(amount(&again[0]), 80.0);
    assert_eq!(pool.free().disk(), Some(20.0));
    drop(pool);
    let e = DirectoryPool::open(root.path(), "disk:50")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot hold the volumes"), "{e}");
    let e = DirectoryPool::open(root.path(), "cpus:2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("only disk"), "{e}");
    let reopened = DirectoryPool::open(root.path(), "disk:100").unwrap();
    assert_eq!(reopened.live().count(), 1);
}
