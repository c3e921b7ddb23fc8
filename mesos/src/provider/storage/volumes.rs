//! The volumes of a directory-backed pool on disk: each volume is a
//! directory `volumes/<id>/` under the pool's root and a record
//! `volumes/<id>.json` beside it holding its type (MOUNT or BLOCK), its
//! quota in MB, the RAW disk it was made from, and the last operation that
//! changed it (so that an operation applied again after a crash changes
//! nothing twice). A destroyed volume keeps its record as a tombstone
//! (`"state": "destroyed"`), for the same reason. The quota is recorded,
//! not enforced: a directory has no size of its own.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::provider::checkpoint::{CheckpointError, write_atomically};
use crate::v1;
use crate::v1::resource::disk_info::{Source, source};

/// MOUNT or BLOCK.
pub type Kind = source::Type;

/// A volume of the pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    /// Its id: the uuid of the CREATE_DISK that made it.
    pub id: String,
    /// MOUNT or BLOCK.
    pub kind: Kind,
    /// Its quota, MB.
    pub quota: f64,
    /// The RAW disk it was made from (its reservations and profile); its
    /// amount is the quota's.
    pub origin: v1::Resource,
    /// False once destroyed.
    pub live: bool,
    /// The operation that last changed it.
    pub last_operation: String,
}

/// Why a record does not load.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct RecordError {
    /// The record.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
}

/// The resource `origin` with `amount` MB.
pub fn with_amount(origin: &v1::Resource, amount: f64) -> v1::Resource {
    let mut r = origin.clone();
    r.scalar = Some(v1::value::Scalar { value: amount });
    r
}

impl Volume {
    /// The directory of volume `id` under `root`.
    pub fn dir(root: &Path, id: &str) -> PathBuf {
        root.join("volumes").join(id)
    }

    fn record_path(root: &Path, id: &str) -> PathBuf {
        root.join("volumes").join(format!("{id}.json"))
    }

    /// The volume as a disk resource (unallocated): a MOUNT disk whose
    /// `mount.root` is its directory, or a BLOCK disk whose id names it
    /// (with the path in its metadata).
    pub fn resource(&self, root: &Path) -> v1::Resource {
        let mut r = with_amount(&self.origin, self.quota);
        let dir = Volume::dir(root, &self.id).display().to_string();
        let profile = r
            .disk
            .as_ref()
            .and_then(|d| d.source.as_ref())
            .and_then(|s| s.profile.clone());
        let source = Source {
            r#type: self.kind as i32,
            id: Some(self.id.clone()),
            profile,
            mount: (self.kind == Kind::Mount).then(|| source::Mount {
                root: Some(dir.clone()),
            }),
            metadata: (self.kind == Kind::Block).then(|| v1::Labels {
                labels: vec![v1::Label {
                    key: "path".to_string(),
                    value: Some(dir),
                }],
            }),
            ..Default::default()
        };
        r.disk.get_or_insert_with(Default::default).source = Some(source);
        r
    }

    /// Writes the record.
    pub fn save(&self, root: &Path) -> Result<(), CheckpointError> {
        let value = json!({
            "id": self.id,
            "type": self.kind.as_str_name(),
            "quota": self.quota,
            "origin": crate::codec::to_json_value(&self.origin),
            "state": if self.live { "live" } else { "destroyed" },
            "last_operation": self.last_operation,
        });
        let text = serde_json::to_vec_pretty(&value).unwrap_or_default();
        write_atomically(&Volume::record_path(root, &self.id), &text)
    }

    fn parse(path: &Path, text: &str) -> Result<Volume, RecordError> {
        let bad = |reason: String| RecordError {
            path: path.to_path_buf(),
            reason,
        };
        let v: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let string = |key: &str| {
            v[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| bad(format!("'{key}' is missing or not a string")))
        };
        let kind = match string("type")?.as_str() {
            "MOUNT" => Kind::Mount,
            "BLOCK" => Kind::Block,
            other => return Err(bad(format!("'type' is {other}, not MOUNT or BLOCK"))),
        };
        let quota = v["quota"]
            .as_f64()
            .filter(|q| q.is_finite() && *q > 0.0)
            .ok_or_else(|| bad("'quota' is not a positive number".to_string()))?;
        let origin = crate::codec::from_json_value::<v1::Resource>(&v["origin"])
            .map_err(|e| bad(format!("'origin' does not decode: {e}")))?;
        Ok(Volume {
            id: string("id")?,
            kind,
            quota,
            origin,
            live: string("state")? == "live",
            last_operation: string("last_operation")?,
        })
    }

    /// Every record under `root` (live volumes and tombstones), by id.
    pub fn load_all(root: &Path) -> Result<Vec<Volume>, RecordError> {
        let dir = root.join("volumes");
        let io = |e: std::io::Error| RecordError {
            path: dir.clone(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut volumes = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| RecordError {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            volumes.push(Volume::parse(&path, &text)?);
        }
        volumes.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(volumes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_say_why() {
        let root = std::env::temp_dir().join(format!("unisched-volumes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let origin = crate::resources::Resources::parse("disk(db):1")
            .unwrap()
            .to_vec()
            .remove(0);
        let v = Volume {
            id: "v1".into(),
            kind: Kind::Block,
            quota: 64.0,
            origin,
            live: true,
            last_operation: "op".into(),
        };
        std::fs::create_dir_all(root.join("volumes")).unwrap();
        v.save(&root).unwrap();
        assert_eq!(Volume::load_all(&root).unwrap(), vec![v.clone()]);
        let r = v.resource(&root);
        assert_eq!(r.scalar.unwrap().value, 64.0);
        let source = r.disk.unwrap().source.unwrap();
        assert_eq!(
            (source.r#type(), source.id.as_deref()),
            (Kind::Block, Some("v1"))
        );
        std::fs::write(root.join("volumes/v2.json"), r#"{"id":"v2","type":"RAW"}"#).unwrap();
        let e = Volume::load_all(&root).unwrap_err().to_string();
        assert!(
            e.contains("v2.json: 'type' is RAW, not MOUNT or BLOCK"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
