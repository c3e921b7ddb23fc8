//! Reading a configuration file with a size limit and clear errors, and the
//! `ConfigSource` the core reads on `update_configuration`.

use std::io::Read;
use std::path::{Path, PathBuf};

use unisched_core::ConfigSource;
use unisched_core::config::MAX_CONFIG_BYTES;

/// Why a configuration file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigReadError {
    /// Opening or reading failed (missing file, permissions, ...).
    #[error("cannot read configuration file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is larger than the core accepts.
    #[error("configuration file {path} is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: usize,
    },
    /// The file is not UTF-8 text.
    #[error("configuration file {path} is not UTF-8 text: {source}")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where the bad bytes are.
        source: std::string::FromUtf8Error,
    },
}

/// Reads `path` as UTF-8, refusing files above `MAX_CONFIG_BYTES` without
/// reading more than one byte past the limit.
pub fn read_config_file(path: &Path) -> Result<String, ConfigReadError> {
    let io = |source| ConfigReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(ConfigReadError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_CONFIG_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|source| ConfigReadError::NotUtf8 {
        path: path.to_path_buf(),
        source,
    })
}

/// A `ConfigSource` that reads one file for every cluster, each time anew.
#[derive(Debug, Clone)]
pub struct FileConfigSource {
    path: PathBuf,
}

impl FileConfigSource {
    /// A source reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ConfigSource for FileConfigSource {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        read_config_file(&self.path).map_err(|e| e.to_string())
    }
}
