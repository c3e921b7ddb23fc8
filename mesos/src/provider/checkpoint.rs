//! What a provider keeps across restarts, in `provider.json` of its state
//! directory: its type and name, the id the master gave it, and its
//! operations not yet acknowledged (upstream's provider checkpoints the same
//! under the agent's meta directory). Operations are `v1::Operation`s in
//! Mesos' JSON mapping. Written whole to a temporary file, synced and
//! renamed over the old one, so a crash leaves the old or the new state.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::v1;

/// The state file's name in the state directory.
pub const FILE: &str = "provider.json";

/// Why the state cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The file system said no.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not hold a provider's state.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The directory holds another provider's state.
    #[error(
        "{path} holds the state of resource provider '{found_type}' named '{found_name}', not '{want_type}' named '{want_name}'"
    )]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// Type found.
        found_type: String,
        /// Name found.
        found_name: String,
        /// Type wanted.
        want_type: String,
        /// Name wanted.
        want_name: String,
    },
}

/// A provider's persistent state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// `ResourceProviderInfo.type`.
    pub provider_type: String,
    /// `ResourceProviderInfo.name`.
    pub name: String,
    /// The id the master gave, once subscribed.
    pub provider_id: Option<String>,
    /// Operations not yet acknowledged.
    pub operations: Vec<v1::Operation>,
}

/// The state file of a directory.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    path: PathBuf,
}

impl Checkpoint {
    /// The state file in `dir` (created if missing).
    pub fn in_dir(dir: &Path) -> Result<Self, CheckpointError> {
        std::fs::create_dir_all(dir).map_err(|source| CheckpointError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: dir.join(FILE),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state kept for a provider of `provider_type` named `name`: a
    /// fresh one when there is none, an error when another provider's is there.
    pub fn load(&self, provider_type: &str, name: &str) -> Result<State, CheckpointError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(State {
                    provider_type: provider_type.to_string(),
                    name: name.to_string(),
                    ..State::default()
                });
            }
            Err(source) => {
                return Err(CheckpointError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let state = self.parse(&text)?;
        if state.provider_type != provider_type || state.name != name {
            return Err(CheckpointError::Mismatch {
                path: self.path.clone(),
                found_type: state.provider_type,
                found_name: state.name,
                want_type: provider_type.to_string(),
                want_name: name.to_string(),
            });
        }
        Ok(state)
    }

    fn parse(&self, text: &str) -> Result<State, CheckpointError> {
        let invalid = |reason: String| CheckpointError::Invalid {
            path: self.path.clone(),
            reason,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let string = |key: &str| {
            value[key]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| invalid(format!("'{key}' is missing or not a string")))
        };
        let operations = match &value["operations"] {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .map(crate::codec::from_json_value::<v1::Operation>)
                .collect::<Result<_, _>>()
                .map_err(|e| invalid(format!("an operation does not decode: {e}")))?,
            _ => return Err(invalid("'operations' is not an array".to_string())),
        };
        Ok(State {
            provider_type: string("type")?,
            name: string("name")?,
            provider_id: value["provider_id"].as_str().map(str::to_string),
            operations,
        })
    }

    /// Writes `state` in place of the old one.
    pub fn save(&self, state: &State) -> Result<(), CheckpointError> {
        let value = json!({
            "type": state.provider_type,
            "name": state.name,
            "provider_id": state.provider_id,
            "operations": state.operations.iter().map(crate::codec::to_json_value).collect::<Vec<_>>(),
        });
        let text = serde_json::to_vec_pretty(&value).unwrap_or_default();
        write_atomically(&self.path, &text)
    }
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    use std::io::Write;
    let io = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        // The rename itself is durable once the directory is synced.
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("unisched-checkpoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn state_round_trips_and_belongs_to_one_provider() {
        let d = dir("round-trip");
        let c = Checkpoint::in_dir(&d).unwrap();
        let fresh = c.load("org.x.storage", "pool").unwrap();
        assert_eq!(fresh.provider_id, None);
        let state = State {
            provider_type: "org.x.storage".into(),
            name: "pool".into(),
            provider_id: Some("id-1".into()),
            operations: vec![v1::Operation {
                uuid: v1::Uuid { value: vec![7; 16] },
                latest_status: v1::OperationStatus {
                    state: v1::OperationState::OperationFinished as i32,
                    ..Default::default()
                },
                ..Default::default()
            }],
        };
        c.save(&state).unwrap();
        assert_eq!(c.load("org.x.storage", "pool").unwrap(), state);
        let other = c.load("org.x.storage", "other").unwrap_err().to_string();
        assert!(
            other.contains("named 'pool', not 'org.x.storage' named 'other'"),
            "{other}"
        );
        std::fs::write(c.path(), "{\"type\": 1}").unwrap();
        let bad = c.load("org.x.storage", "pool").unwrap_err().to_string();
        assert!(bad.contains("'type' is missing or not a string"), "{bad}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
