//! Resource provider helpers for the tests: a provider root of its own,
//! runner options with quick backoffs, offers holding a provider's
//! resources, operations on them and their status updates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Framework, Master, WAIT};
use unisched_mesos::codec::ContentType;
use unisched_mesos::http_client::{Backoff, ClientOptions};
use unisched_mesos::provider::feedback::RetryPolicy;
use unisched_mesos::provider::storage::DirectoryPool;
use unisched_mesos::provider::{Endpoint, RunnerHandle, RunnerOptions, RunnerStatus, runner};
use unisched_mesos::v1;
use unisched_mesos::v1::offer::operation::Type as Op;
use unisched_mesos::v1::resource::disk_info::source::Type as Source;
use unisched_mesos::v1::scheduler::{Call, call, event};

pub const TYPE: &str = "org.unisched.rp.storage.directory";

/// A provider root of its own, removed when the test ends.
pub struct Root(PathBuf);

impl Root {
    pub fn new(test: &str, ct: ContentType) -> Root {
        let dir = std::env::temp_dir().join(format!(
            "unisched-provider-{test}-{}-{}",
            ct.mime().rsplit('/').next().unwrap_or("ct"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        Root(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runner options with quick backoffs and retries.
pub fn options(url: &str, endpoint: Endpoint, root: &Path, ct: ContentType) -> RunnerOptions {
    let mut o = RunnerOptions::new(url, endpoint, TYPE, "pool", root.to_path_buf());
    o.client = ClientOptions {
        content_type: ct,
        subscribe_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    o.backoff = Backoff {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
    };
    o.retry = RetryPolicy {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(400),
    };
    o
}

/// A storage provider of `disk` under `root`, subscribed to agent 1 of `m`.
pub async fn start_provider(m: &Master, root: &Path, disk: &str, ct: ContentType) -> RunnerHandle {
    let pool = DirectoryPool::open(root, disk).expect("the pool opens");
    let handle = runner::spawn(pool, options(&m.url, Endpoint::Agent(1), root, ct)).unwrap();
    subscribed(&handle, 1).await;
    handle
}

/// A master, and a storage provider of `disk:1000` under a root of its own
/// subscribed to agent 1 of it.
pub struct Provided {
    pub m: Master,
    pub root: Root,
    pub handle: RunnerHandle,
    /// The provider's id.
    pub id: String,
}

pub async fn provided_master(test: &str, ct: ContentType) -> Provided {
    let m = Master::start(super::Setup::default()).await;
    let root = Root::new(test, ct);
    let handle = start_provider(&m, root.path(), "disk:1000", ct).await;
    let id = handle.status().provider_id.expect("an id");
    Provided {
        m,
        root,
        handle,
        id,
    }
}

/// The offer the next RESCIND takes back (offers on the way declined).
pub async fn rescinded(f: &mut Framework) -> v1::OfferId {
    next_declining(f, event::Type::Rescind)
        .await
        .rescind
        .expect("a rescind")
        .offer_id
}

/// Waits for the runner's `n`th subscription and its UPDATE_STATE.
pub async fn subscribed(handle: &RunnerHandle, n: u64) -> RunnerStatus {
    within(handle.wait_for(|s| s.subscriptions >= n && s.state_updates >= n)).await
}

pub async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f).await.expect("in time")
}

/// The resources of an offer that carry `provider`'s id.
pub fn provided<'a>(offer: &'a v1::Offer, provider: &str) -> Vec<&'a v1::Resource> {
    offer
        .resources
        .iter()
        .filter(|r| r.provider_id.as_ref().is_some_and(|p| p.value == provider))
        .collect()
}

pub fn source_of(r: &v1::Resource) -> Option<&v1::resource::disk_info::Source> {
    r.disk.as_ref().and_then(|d| d.source.as_ref())
}

/// The next offer holding a resource of `provider` that `wanted` likes;
/// other offers are declined without a filter, and while none comes the
/// clock moves on to the next allocation run.
pub async fn offer_with(
    m: &Master,
    f: &mut Framework,
    provider: &str,
    wanted: impl Fn(&v1::Resource) -> bool,
) -> v1::Offer {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no offer with the wanted resources"
        );
        // `recv` is cancel-safe: an offer is never lost to the timeout.
        if let Ok(offers) = tokio::time::timeout(Duration::from_millis(500), f.offers()).await {
            let mut found = None;
            for o in offers {
                if found.is_none() && provided(&o, provider).into_iter().any(&wanted) {
                    found = Some(o);
                } else {
                    f.decline(&o, Some(0.0)).await;
                }
            }
            if let Some(o) = found {
                return o;
            }
        }
        m.allocate().await;
    }
}

/// The next event of `kind`; offers on the way are declined without a
/// filter (so they come back at the next allocation run, not lost to the
/// test), other events skipped.
pub async fn next_declining(f: &mut Framework, kind: event::Type) -> v1::scheduler::Event {
    loop {
        let e = f.next().await;
        if e.r#type() == kind {
            return e;
        }
        if let Some(offers) = e.offers {
            for o in offers.offers {
                f.decline(&o, Some(0.0)).await;
            }
        }
    }
}

pub fn is_raw(r: &v1::Resource) -> bool {
    source_of(r).is_some_and(|s| s.r#type() == Source::Raw)
}

pub fn is_mount(r: &v1::Resource) -> bool {
    source_of(r).is_some_and(|s| s.r#type() == Source::Mount)
}

/// The scalar amount of a resource.
pub fn amount(r: &v1::Resource) -> f64 {
    r.scalar.as_ref().map_or(0.0, |s| s.value)
}

/// The provider's resources of an offer that `wanted` likes.
pub fn provided_where<'a>(
    offer: &'a v1::Offer,
    provider: &str,
    wanted: impl Fn(&v1::Resource) -> bool,
) -> Vec<&'a v1::Resource> {
    provided(offer, provider)
        .into_iter()
        .filter(|r| wanted(r))
        .collect()
}

/// `r` with `value` of it.
pub fn part(r: &v1::Resource, value: f64) -> v1::Resource {
    let mut out = r.clone();
    out.scalar = Some(v1::value::Scalar { value });
    out
}

fn operation(kind: Op, id: Option<&str>) -> v1::offer::Operation {
    v1::offer::Operation {
        r#type: Some(kind as i32),
        id: id.map(|value| v1::OperationId {
            value: value.to_string(),
        }),
        ..Default::default()
    }
}

/// CREATE_DISK of `source` into a `target` disk.
pub fn create_disk(
    source: &v1::Resource,
    target: Source,
    id: Option<&str>,
) -> v1::offer::Operation {
    v1::offer::Operation {
        create_disk: Some(v1::offer::operation::CreateDisk {
            source: Box::new(source.clone()),
            target_type: target as i32,
            target_profile: None,
        }),
        ..operation(Op::CreateDisk, id)
    }
}

/// DESTROY_DISK of `source`.
pub fn destroy_disk(source: &v1::Resource, id: Option<&str>) -> v1::offer::Operation {
    v1::offer::Operation {
        destroy_disk: Some(v1::offer::operation::DestroyDisk {
            source: Box::new(source.clone()),
        }),
        ..operation(Op::DestroyDisk, id)
    }
}

/// GROW_VOLUME of `volume` by `addition`.
pub fn grow(volume: &v1::Resource, addition: &v1::Resource, id: &str) -> v1::offer::Operation {
    v1::offer::Operation {
        grow_volume: Some(v1::offer::operation::GrowVolume {
            volume: Box::new(volume.clone()),
            addition: Box::new(addition.clone()),
        }),
        ..operation(Op::GrowVolume, Some(id))
    }
}

/// SHRINK_VOLUME of `volume` by `by`.
pub fn shrink(volume: &v1::Resource, by: f64, id: &str) -> v1::offer::Operation {
    v1::offer::Operation {
        shrink_volume: Some(v1::offer::operation::ShrinkVolume {
            volume: Box::new(volume.clone()),
            subtract: v1::value::Scalar { value: by },
        }),
        ..operation(Op::ShrinkVolume, Some(id))
    }
}

/// The next operation status the framework gets.
pub async fn operation_status(f: &mut Framework) -> v1::OperationStatus {
    next_declining(f, event::Type::UpdateOperationStatus)
        .await
        .update_operation_status
        .expect("an update_operation_status")
        .status
}

/// Acknowledges an operation status; the master's answer code.
pub async fn acknowledge_operation(f: &Framework, status: &v1::OperationStatus) -> u16 {
    f.call(Call {
        r#type: Some(call::Type::AcknowledgeOperationStatus as i32),
        acknowledge_operation_status: Some(call::AcknowledgeOperationStatus {
            agent_id: status.agent_id.clone(),
            resource_provider_id: status.resource_provider_id.clone(),
            uuid: status.uuid.clone().expect("a status uuid").value,
            operation_id: status.operation_id.clone().expect("an operation id"),
        }),
        ..Default::default()
    })
    .await
    .0
}

/// Accepts `offer` with `ops`, what is left declined without a filter.
pub async fn accept(f: &Framework, offer: &v1::Offer, ops: Vec<v1::offer::Operation>) {
    assert_eq!(f.accept(&[offer], ops, Some(0.0)).await, 202);
}

/// The directory a MOUNT disk's root names.
pub fn mount_root(r: &v1::Resource) -> PathBuf {
    PathBuf::from(
        source_of(r)
            .and_then(|s| s.mount.as_ref())
            .and_then(|m| m.root.clone())
            .expect("a mount root"),
    )
}
