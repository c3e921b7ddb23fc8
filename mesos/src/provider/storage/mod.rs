//! A storage provider over a directory (`unisched provider` runs it): its
//! resources are RAW disk (the `disk` entries of a resource text, each a
//! pool of its reservations and profile), and its operations make volumes
//! as directories under the root (see `volumes.rs`):
//! - CREATE_DISK takes RAW disk of the pool and makes a MOUNT disk whose
//!   `disk.source.mount.root` is a new directory, or a BLOCK disk whose
//!   `disk.source.id` names it; the volume's id is the operation's uuid, so
//!   applying the operation again finds the volume it made;
//! - DESTROY_DISK removes the directory and gives the RAW disk back;
//! - GROW_VOLUME and SHRINK_VOLUME change the volume's quota record, taking
//!   RAW disk from the pool or giving it back;
//! - `target_profile` is not used: the pool's disk keeps the profile it has;
//! - publishing checks that each resource is a live volume whose directory
//!   is there (RAW disk cannot be published, as upstream's provider says).
//!
//! The pool's free RAW disk is what the resource text gives minus what the
//! live volumes took; everything is on disk under the root, so the pool
//! survives restarts (the runner keeps its id and operations beside it).

mod volumes;

use std::path::{Path, PathBuf};

pub use self::volumes::{Kind, RecordError, Volume, with_amount};
use super::{Apply, ResourceProvider};
use crate::resources::Resources;
use crate::v1;
use crate::v1::offer::operation::Type as Op;
use crate::v1::resource::disk_info::{Source, source};

/// Why a pool cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The resource text is unusable.
    #[error("--resources: {0}")]
    Resources(String),
    /// The root cannot be used.
    #[error("{path}: {reason}")]
    Root {
        /// The root.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A volume record does not load.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// A pool of RAW disk whose volumes are directories under `root`.
#[derive(Debug)]
pub struct DirectoryPool {
    root: PathBuf,
    pool: Resources,
    volumes: Vec<Volume>,
}

/// The resource without what the master adds (allocation, provider id).
fn plain(r: &v1::Resource) -> v1::Resource {
    let mut out = r.clone();
    out.allocation_info = None;
    out.provider_id = None;
    out
}

fn disk_source(r: &v1::Resource) -> Option<&Source> {
    r.disk.as_ref().and_then(|d| d.source.as_ref())
}

fn scalar(r: &v1::Resource) -> f64 {
    r.scalar.as_ref().map_or(0.0, |s| s.value)
}

/// The same resource allocated as `like` is.
fn allocated_as(mut r: v1::Resource, like: &v1::Resource) -> v1::Resource {
    r.allocation_info = like.allocation_info.clone();
    r
}

/// The RAW disk of a resource text: every entry a `disk`, made RAW.
pub fn raw_pool(text: &str) -> Result<Resources, StorageError> {
    let bad = |m: String| StorageError::Resources(m);
    let parsed = Resources::parse(text).map_err(|e| bad(e.to_string()))?;
    if parsed.is_empty() {
        return Err(bad("no resources".to_string()));
    }
    let mut pool = Vec::new();
    for mut r in parsed.into_vec() {
        let shown = crate::resources::display_resource(&r);
        if r.name != "disk" || r.scalar.is_none() {
            return Err(bad(format!(
                "{shown}: a storage provider offers only disk (a scalar)"
            )));
        }
        let disk = r.disk.get_or_insert_with(Default::default);
        if disk.persistence.is_some() || disk.volume.is_some() {
            return Err(bad(format!("{shown}: a pool is not a persistent volume")));
        }
        match &disk.source {
            None => {
                disk.source = Some(Source {
                    r#type: source::Type::Raw as i32,
                    ..Default::default()
                });
            }
            Some(s) if s.r#type() == source::Type::Raw && s.id.is_none() => {}
            Some(_) => {
                return Err(bad(format!("{shown}: a pool's disk is RAW, without an id")));
            }
        }
        r.provider_id = None;
        pool.push(r);
    }
    Ok(Resources::from_vec(pool))
}

impl DirectoryPool {
    /// The pool of `resources` (a resource text) with its volumes under
    /// `root` (made if missing). An error when the text is not a pool of
    /// disk, a record does not load, or the volumes need more than the text gives.
    pub fn open(root: &Path, resources: &str) -> Result<Self, StorageError> {
        let pool = raw_pool(resources)?;
        let root_error = |e: std::io::Error| StorageError::Root {
            path: root.to_path_buf(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(root).map_err(root_error)?;
        let root = root.canonicalize().map_err(root_error)?;
        let volumes = Volume::load_all(&root)?;
        let this = Self {
            root,
            pool,
            volumes,
        };
        let mut taken = Resources::default();
        for v in this.live() {
            taken.add_resource(with_amount(&v.origin, v.quota));
        }
        if !this.pool.contains(&taken) {
            return Err(StorageError::Resources(format!(
                "{} cannot hold the volumes under {} ({taken})",
                this.pool,
                this.root.display()
            )));
        }
        Ok(this)
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The live volumes.
    pub fn live(&self) -> impl Iterator<Item = &Volume> {
        self.volumes.iter().filter(|v| v.live)
    }

    /// RAW disk not taken by a volume.
    pub fn free(&self) -> Resources {
        let mut free = self.pool.clone();
        for v in self.live() {
            free.subtract_resource(with_amount(&v.origin, v.quota));
        }
        free
    }

    fn find(&self, id: &str) -> Option<usize> {
        self.volumes.iter().position(|v| v.id == id)
    }

    /// The volume a resource names (by its disk source id).
    fn volume_of(&self, r: &v1::Resource) -> Result<usize, String> {
        let id = disk_source(r)
            .and_then(|s| s.id.as_deref())
            .ok_or_else(|| format!("{} is not a volume", crate::resources::display_resource(r)))?;
        self.find(id)
            .filter(|&i| self.volumes[i].live)
            .ok_or_else(|| format!("Unknown volume '{id}'"))
    }

    fn store(&mut self, index: usize) -> Result<(), String> {
        self.volumes[index]
            .save(&self.root)
            .map_err(|e| format!("Failed to write the volume's record: {e}"))
    }

    fn create_disk(
        &mut self,
        uuid: &str,
        op: &v1::offer::operation::CreateDisk,
    ) -> Result<Vec<v1::Resource>, String> {
        let source: &v1::Resource = &op.source;
        if let Some(i) = self.find(uuid) {
            // Applied before a crash: the same volume.
            return Ok(vec![allocated_as(
                self.volumes[i].resource(&self.root),
                source,
            )]);
        }
        let kind = op.target_type();
        if !matches!(kind, Kind::Mount | Kind::Block) {
            return Err("'target_type' is neither MOUNT nor BLOCK".to_string());
        }
        let raw = plain(source);
        let is_raw =
            disk_source(&raw).is_some_and(|s| s.r#type() == source::Type::Raw && s.id.is_none());
        if !is_raw {
            return Err(format!(
                "{} is not RAW disk of this pool",
                crate::resources::display_resource(source)
            ));
        }
        let free = self.free();
        if scalar(&raw) <= 0.0 || !free.contains_resource(&raw) {
            return Err(format!(
                "{} is not in the free RAW disk {free}",
                crate::resources::display_resource(&raw)
            ));
        }
        let dir = Volume::dir(&self.root, uuid);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("Failed to create {}: {e}", dir.display()))?;
        self.volumes.push(Volume {
            id: uuid.to_string(),
            kind,
            quota: scalar(&raw),
            origin: raw,
            live: true,
            last_operation: uuid.to_string(),
        });
        let i = self.volumes.len() - 1;
        self.store(i)?;
        tracing::info!(volume = %uuid, dir = %dir.display(), "volume created");
        Ok(vec![allocated_as(
            self.volumes[i].resource(&self.root),
            source,
        )])
    }

    fn destroy_disk(
        &mut self,
        uuid: &str,
        source: &v1::Resource,
    ) -> Result<Vec<v1::Resource>, String> {
        let id = disk_source(source)
            .and_then(|s| s.id.clone())
            .unwrap_or_default();
        if let Some(i) = self
            .find(&id)
            .filter(|&i| !self.volumes[i].live && self.volumes[i].last_operation == uuid)
        {
            let v = &self.volumes[i];
            return Ok(vec![allocated_as(with_amount(&v.origin, v.quota), source)]);
        }
        let i = self.volume_of(source)?;
        if plain(source) != self.volumes[i].resource(&self.root) {
            return Err(format!(
                "{} does not match volume '{id}' ({})",
                crate::resources::display_resource(source),
                crate::resources::display_resource(&self.volumes[i].resource(&self.root))
            ));
        }
        // The tombstone first: applied again, the operation finds it.
        self.volumes[i].live = false;
        self.volumes[i].last_operation = uuid.to_string();
        self.store(i)?;
        let dir = Volume::dir(&self.root, &id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "volume directory left behind")
            }
        }
        tracing::info!(volume = %id, "volume destroyed");
        let v = &self.volumes[i];
        Ok(vec![allocated_as(with_amount(&v.origin, v.quota), source)])
    }

    /// GROW_VOLUME (`by` > 0, taken from `addition`) or SHRINK_VOLUME (`by` < 0).
    fn resize(
        &mut self,
        uuid: &str,
        volume: &v1::Resource,
        addition: Option<&v1::Resource>,
        by: f64,
    ) -> Result<Vec<v1::Resource>, String> {
        let i = self.volume_of(volume)?;
        let v = self.volumes[i].clone();
        let freed = |v: &Volume| allocated_as(with_amount(&v.origin, -by), volume);
        let resized = |quota: f64| {
            let mut r = volume.clone();
            r.scalar = Some(v1::value::Scalar { value: quota });
            r
        };
        if v.last_operation == uuid {
            // Applied before a crash.
            let mut out = vec![resized(v.quota)];
            if by < 0.0 {
                out.push(freed(&v));
            }
            return Ok(out);
        }
        if (scalar(volume) - v.quota).abs() > 1e-9 {
            return Err(format!(
                "Volume '{}' has {} MB, not {}",
                v.id,
                v.quota,
                scalar(volume)
            ));
        }
        if let Some(addition) = addition {
            let wanted = with_amount(&v.origin, by);
            let free = self.free();
            if plain(addition) != wanted || !free.contains_resource(&wanted) {
                return Err(format!(
                    "{} is not free RAW disk of the pool volume '{}' was made from ({free})",
                    crate::resources::display_resource(addition),
                    v.id
                ));
            }
        } else if v.quota + by <= 0.0 {
            return Err(format!("Volume '{}' has only {} MB", v.id, v.quota));
        }
        self.volumes[i].quota = v.quota + by;
        self.volumes[i].last_operation = uuid.to_string();
        self.store(i)?;
        tracing::info!(volume = %v.id, quota = v.quota + by, "volume quota changed");
        let mut out = vec![resized(v.quota + by)];
        if by < 0.0 {
            out.push(freed(&v));
        }
        Ok(out)
    }
}

impl ResourceProvider for DirectoryPool {
    fn resources(&mut self) -> Vec<v1::Resource> {
        let mut total = self.free();
        for v in self.live() {
            total.add_resource(v.resource(&self.root));
        }
        total.into_vec()
    }

    fn apply(&mut self, operation: Apply<'_>) -> Result<Vec<v1::Resource>, String> {
        let info = operation.info;
        let missing = |what: &str| format!("Missing '{what}'");
        match info.r#type() {
            Op::CreateDisk => {
                let c = info
                    .create_disk
                    .as_ref()
                    .ok_or_else(|| missing("create_disk"))?;
                self.create_disk(operation.uuid, c)
            }
            Op::DestroyDisk => {
                let d = info
                    .destroy_disk
                    .as_ref()
                    .ok_or_else(|| missing("destroy_disk"))?;
                self.destroy_disk(operation.uuid, &d.source)
            }
            Op::GrowVolume => {
                let g = info
                    .grow_volume
                    .as_ref()
                    .ok_or_else(|| missing("grow_volume"))?;
                let by = scalar(&g.addition);
                if by <= 0.0 {
                    return Err(
                        "The size of 'GrowVolume.addition' field must be greater than zero"
                            .to_string(),
                    );
                }
                self.resize(operation.uuid, &g.volume, Some(&g.addition), by)
            }
            Op::ShrinkVolume => {
                let s = info
                    .shrink_volume
                    .as_ref()
                    .ok_or_else(|| missing("shrink_volume"))?;
                if s.subtract.value <= 0.0 {
                    return Err(
                        "The size of 'ShrinkVolume.subtract' field must be greater than zero"
                            .to_string(),
                    );
                }
                self.resize(operation.uuid, &s.volume, None, -s.subtract.value)
            }
            other => Err(format!(
                "Operation {} is not supported by this storage provider",
                other.as_str_name()
            )),
        }
    }

    fn publish(&mut self, resources: &[v1::Resource]) -> Result<(), String> {
        for r in resources {
            let kind = disk_source(r).map(|s| s.r#type());
            if !matches!(kind, Some(Kind::Mount | Kind::Block)) {
                return Err(format!(
                    "Cannot publish volume of {} type",
                    kind.map_or("UNKNOWN", |k| k.as_str_name())
                ));
            }
            let i = self
                .volume_of(r)
                .map_err(|e| format!("Cannot publish unknown resource: {e}"))?;
            let dir = Volume::dir(&self.root, &self.volumes[i].id);
            if !dir.is_dir() {
                return Err(format!(
                    "Cannot publish volume '{}': {} is gone",
                    self.volumes[i].id,
                    dir.display()
                ));
            }
        }
        Ok(())
    }
}
