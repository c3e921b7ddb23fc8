//! The file watcher thread: notify events (or polling) → debounce → re-read →
//! checksum compare → callback.
//!
//! Protocol: the thread waits for a directory event, a poll tick or a stop
//! request. An event (or, when polling, a changed size/mtime) opens a debounce
//! window that each further event extends, up to `max_delay`; then the file is
//! read once. A version whose checksum equals the last reported one is
//! dropped, so an unchanged rewrite and the bursts of one save are reported
//! once or never. Read errors and empty files (a writer between truncate and
//! write) are logged and skipped without forgetting the last checksum.
//! Dropping the watcher (or [`ConfigFileWatcher::stop`]) stops the notify
//! backend, wakes the thread and joins it.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use notify::Watcher;

use super::file::read_config_file;

/// How changes are detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// Directory events from the OS (inotify, FSEvents, ...), with a slow poll
    /// as a safety net.
    Notify,
    /// Size and mtime checked every `poll_interval` (notify could not start, or
    /// polling was asked for).
    Polling,
}

/// Settings of a [`ConfigFileWatcher`].
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Quiet time after the last event before the file is read.
    pub debounce: Duration,
    /// Longest wait from the first event of a burst to the read, however long
    /// the burst goes on.
    pub max_delay: Duration,
    /// How often the file is checked when polling (and, as a safety net
    /// against lost events, in notify mode).
    pub poll_interval: Duration,
    /// Polls even when notify would work (tests, network file systems).
    pub force_polling: bool,
    /// Checksum (`unisched_core::config::checksum`) of the version already
    /// applied. `None` takes the file's content at start as applied.
    pub applied_checksum: Option<String>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            poll_interval: Duration::from_secs(5),
            force_polling: false,
            applied_checksum: None,
        }
    }
}

/// A polled file is read in full every this many polls even when its size
/// and mtime look unchanged (a same-size rewrite within one mtime tick).
const FULL_READ_EVERY_POLLS: u32 = 10;

enum Signal {
    /// Something happened in the watched directory.
    Event,
    Stop,
}

/// Watches one configuration file and calls back with each new version of its
/// text (see the module docs for the protocol).
pub struct ConfigFileWatcher {
    path: PathBuf,
    mode: WatchMode,
    stop: Sender<Signal>,
    thread: Option<JoinHandle<()>>,
    /// Kept alive for as long as events are wanted; dropped first on stop.
    backend: Option<notify::RecommendedWatcher>,
}

impl std::fmt::Debug for ConfigFileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigFileWatcher")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ConfigFileWatcher {
    /// Starts watching `path`; `on_change` gets the full text of every new
    /// version, on the watcher's thread. Falls back to polling when notify
    /// cannot watch the file's directory. Fails only when the thread cannot start.
    pub fn start(
        path: impl Into<PathBuf>,
        options: WatchOptions,
        on_change: impl Fn(String) + Send + 'static,
    ) -> std::io::Result<Self> {
        let path = path.into();
        let (tx, rx) = mpsc::channel();
        let backend = if options.force_polling {
            None
        } else {
            match start_notify(&path, tx.clone()) {
                Ok(w) => Some(w),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e,
                        "cannot watch the configuration file's directory; polling instead");
                    None
                }
            }
        };
        let mode = if backend.is_some() {
            WatchMode::Notify
        } else {
            WatchMode::Polling
        };
        let mut state = WatchState {
            path: path.clone(),
            polling: mode == WatchMode::Polling,
            last_checksum: options.applied_checksum.clone(),
            last_stamp: stamp(&path),
            polls_since_read: 0,
            last_error: None,
            options,
            on_change: Box::new(on_change),
        };
        if state.last_checksum.is_none() {
            state.last_checksum = read_config_file(&path)
                .ok()
                .map(|t| unisched_core::config::checksum(&t));
        }
        let thread = std::thread::Builder::new()
            .name("unisched-config-watch".to_string())
            .spawn(move || state.run(&rx))?;
        Ok(Self {
            path,
            mode,
            stop: tx,
            thread: Some(thread),
            backend,
        })
    }

    /// How changes are detected.
    pub fn mode(&self) -> WatchMode {
        self.mode
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops watching and waits for a callback in progress to finish.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.backend = None;
        let _ = self.stop.send(Signal::Stop);
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for ConfigFileWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Watches the directory holding `path` (not the file: see the module docs).
fn start_notify(path: &Path, tx: Sender<Signal>) -> notify::Result<notify::RecommendedWatcher> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Errors (e.g. an overflowed event queue) may hide a change: re-read too.
        if event.as_ref().is_ok_and(|e| e.kind.is_access()) {
            return;
        }
        let _ = tx.send(Signal::Event);
    })?;
    watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

/// What polling compares: size and modification time, through symlinks.
type Stamp = Option<(u64, Option<SystemTime>)>;

fn stamp(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

/// The watcher thread's state.
struct WatchState {
    path: PathBuf,
    polling: bool,
    options: WatchOptions,
    last_checksum: Option<String>,
    last_stamp: Stamp,
    polls_since_read: u32,
    /// The last read error logged, so a lasting one is logged once.
    last_error: Option<String>,
    on_change: Box<dyn Fn(String) + Send>,
}

impl WatchState {
    fn run(&mut self, rx: &Receiver<Signal>) {
        // A change between the caller's read and the watch start is caught here.
        self.check();
        loop {
            match rx.recv_timeout(self.options.poll_interval) {
                Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Signal::Event) => {}
                Err(RecvTimeoutError::Timeout) => {
                    if !self.poll_says_changed() {
                        continue;
                    }
                }
            }
            if !self.debounce(rx) {
                return;
            }
            self.check();
        }
    }

    /// On a poll tick: whether the file looks changed.
    fn poll_says_changed(&mut self) -> bool {
        self.polls_since_read += 1;
        let now = stamp(&self.path);
        let changed = now != self.last_stamp;
        self.last_stamp = now;
        changed || self.polls_since_read >= FULL_READ_EVERY_POLLS
    }

    /// Waits until the directory has been quiet for `debounce` (and, when
    /// polling, the file's stamp stopped moving), or `max_delay` passed.
    /// Returns false when asked to stop.
    fn debounce(&mut self, rx: &Receiver<Signal>) -> bool {
        let start = Instant::now();
        let cap = start + self.options.max_delay;
        let mut quiet_until = start + self.options.debounce;
        loop {
            let now = Instant::now();
            let until = quiet_until.min(cap);
            if now >= until {
                if self.polling && now < cap {
                    let current = stamp(&self.path);
                    if current != self.last_stamp {
                        self.last_stamp = current;
                        quiet_until = now + self.options.debounce;
                        continue;
                    }
                }
                return true;
            }
            match rx.recv_timeout(until - now) {
                Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
                Ok(Signal::Event) => quiet_until = Instant::now() + self.options.debounce,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Reads the file and reports it if its checksum is new.
    fn check(&mut self) {
        self.polls_since_read = 0;
        self.last_stamp = stamp(&self.path);
        let text = match read_config_file(&self.path) {
            Ok(t) => t,
            Err(e) => {
                let message = e.to_string();
                if self.last_error.as_deref() != Some(message.as_str()) {
                    tracing::warn!(error = %message, "configuration file not reloaded");
                    self.last_error = Some(message);
                }
                return;
            }
        };
        self.last_error = None;
        if text.trim().is_empty() {
            tracing::debug!(path = %self.path.display(), "configuration file is empty; waiting");
            return;
        }
        let checksum = unisched_core::config::checksum(&text);
        if self.last_checksum.as_deref() == Some(checksum.as_str()) {
            return;
        }
        tracing::info!(path = %self.path.display(), %checksum, "configuration file changed");
        self.last_checksum = Some(checksum);
        let on_change = &self.on_change;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_change(text))).is_err() {
            tracing::error!("configuration change callback panicked; still watching");
        }
    }
}
