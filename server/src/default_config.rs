//! The configuration given to RMs that register without one (`serve --config
//! FILE`), and the list of RMs that took it, so a reload of the file reaches
//! exactly those RMs.
//!
//! One mutex guards the text and the list. A registration holds it from reading
//! the text until the core has the RM, and a reload holds it while swapping the
//! text and listing the RMs: an RM either registers with the new text or is on
//! the list the reload updates, never neither. The scheduling thread never takes
//! this lock, so holding it across a registration cannot deadlock.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The default configuration and the RMs registered with it. Shared between the
/// gRPC service and the `--config` file watcher.
#[derive(Debug)]
pub struct DefaultConfig {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    text: Arc<str>,
    rms: BTreeSet<String>,
}

impl DefaultConfig {
    /// A default configuration with `text`, taken by no RM yet.
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Self {
            state: Mutex::new(State {
                text: text.into(),
                rms: BTreeSet::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current text.
    pub fn text(&self) -> Arc<str> {
        self.lock().text.clone()
    }

    /// Registers `rm_id` with the current text: `register` gets the text and
    /// runs with no reload in between; when it succeeds the RM is remembered.
    /// Blocks for as long as `register` does: call it off async runtimes.
    pub fn register<T, E>(
        &self,
        rm_id: &str,
        register: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut state = self.lock();
        let text = state.text.clone();
        let result = register(&text);
        if result.is_ok() {
            state.rms.insert(rm_id.to_string());
        }
        result
    }

    /// Forgets `rm_id`: it registered again with a configuration of its own.
    pub fn forget(&self, rm_id: &str) {
        self.lock().rms.remove(rm_id);
    }

    /// Replaces the text with a newly read one and returns the RMs registered
    /// with the default configuration: the ones to send `update_configuration`.
    pub fn replace(&self, text: impl Into<Arc<str>>) -> Vec<String> {
        let mut state = self.lock();
        state.text = text.into();
        state.rms.iter().cloned().collect()
    }

    /// The RMs registered with the default configuration.
    pub fn rm_ids(&self) -> Vec<String> {
        self.lock().rms.iter().cloned().collect()
    }
}
