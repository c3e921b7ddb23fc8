//! The configuration file watcher: each new version of the file is reported
//! exactly once whether it is written in place, renamed over, or swapped in
//! through a Kubernetes `..data` symlink; unchanged rewrites are not reported;
//! polling works without notify; `serve --config` reloads the RMs that took the
//! file's configuration. Waits are bounded polls with a generous deadline.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use unisched::core::config::MAX_CONFIG_BYTES;
use unisched::core::{ConfigSource, Scheduler, SchedulerOptions};
use unisched::shim_api::SchedulerApi;
use unisched::shim_api::recording::RecordingCallback;
use unisched::si;
use unisched::watch::{
    ConfigFileWatcher, FileConfigSource, WatchMode, WatchOptions, reload_default_config_rms,
};
use unisched_server::DefaultConfig;

const DEADLINE: Duration = Duration::from_secs(20);

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "unisched-watch-{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Collects the texts the watcher reports.
#[derive(Default)]
struct Seen {
    texts: Mutex<Vec<String>>,
    changed: Condvar,
}

impl Seen {
    fn callback(self: &Arc<Self>) -> impl Fn(String) + Send + 'static {
        let seen = self.clone();
        move |text| {
            seen.texts.lock().unwrap().push(text);
            seen.changed.notify_all();
        }
    }

    /// Waits until `n` reports arrived (or the deadline passed); returns them all.
    fn wait_for(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + DEADLINE;
        let mut texts = self.texts.lock().unwrap();
        while texts.len() < n {
            let now = Instant::now();
            assert!(now < deadline, "waited for {n} reports, got {texts:?}");
            texts = self.changed.wait_timeout(texts, deadline - now).unwrap().0;
        }
        texts.clone()
    }
}

fn config(max_memory: &str) -> String {
    format!(
        "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {{memory: {max_memory}}}
"
    )
}

fn fast(polling: bool) -> WatchOptions {
    WatchOptions {
        debounce: Duration::from_millis(150),
        max_delay: Duration::from_secs(2),
        poll_interval: Duration::from_millis(50),
        force_polling: polling,
        applied_checksum: None,
    }
}

/// For edits in place, which readers may see half done: the debounce window
/// is far longer than the gap between two write calls, even on a loaded host,
/// so a half-written file is never reported.
fn patient(polling: bool) -> WatchOptions {
    WatchOptions {
        debounce: Duration::from_secs(1),
        max_delay: Duration::from_secs(5),
        ..fast(polling)
    }
}

/// Writes `text` next to `path` and renames it over `path` (an atomic replace).
fn replace_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Runs one watcher through the edits `changes` makes (each returns the text
/// it leaves in the file) and checks that exactly those texts were reported,
/// in order, once each.
fn check(options: WatchOptions, changes: &[&dyn Fn(&Path) -> String]) {
    let polling = options.force_polling;
    let dir = TempDir::new();
    let file = dir.path("queues.yaml");
    std::fs::write(&file, config("100M")).unwrap();
    let seen = Arc::new(Seen::default());
    let watcher = ConfigFileWatcher::start(&file, options, seen.callback()).unwrap();
    let expected_mode = if polling {
        WatchMode::Polling
    } else {
        WatchMode::Notify
    };
    assert_eq!(watcher.mode(), expected_mode);
    let mut expected = Vec::new();
    for change in changes {
        expected.push(change(&file));
        assert_eq!(seen.wait_for(expected.len()), expected);
    }
    watcher.stop();
    assert_eq!(
        *seen.texts.lock().unwrap(),
        expected,
        "reported after the last change"
    );
}

#[test]
fn in_place_write_is_reported_once() {
    check(
        patient(false),
        &[&|f| {
            let text = config("200M");
            std::fs::write(f, &text).unwrap();
            text
        }],
    );
}

#[test]
fn a_burst_of_writes_is_reported_once_with_the_final_text() {
    check(
        patient(false),
        &[&|f| {
            use std::io::Write;
            let text = config("300M");
            let (head, tail) = text.split_at(text.len() / 2);
            let mut file = std::fs::File::create(f).unwrap();
            file.write_all(head.as_bytes()).unwrap();
            file.flush().unwrap();
            file.write_all(tail.as_bytes()).unwrap();
            text
        }],
    );
}

#[test]
fn atomic_rename_over_the_file_is_reported_once() {
    check(
        fast(false),
        &[
            &|f| {
                let text = config("200M");
                replace_atomically(f, &text);
                text
            },
            &|f| {
                let text = config("250M");
                replace_atomically(f, &text);
                text
            },
        ],
    );
}

#[test]
fn unchanged_rewrites_are_not_reported() {
    check(
        patient(false),
        &[
            &|f| {
                let text = config("200M");
                std::fs::write(f, &text).unwrap();
                text
            },
            &|f| {
                // Same content twice (in place, then renamed over), then a change:
                // only the change may show up after the first report.
                let same = config("200M");
                std::fs::write(f, &same).unwrap();
                replace_atomically(f, &same);
                let text = config("400M");
                std::fs::write(f, &text).unwrap();
                text
            },
        ],
    );
}

#[cfg(unix)]
#[test]
fn kubernetes_configmap_symlink_swap_is_reported_once() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new();
    // The ConfigMap volume layout: queues.yaml -> ..data/queues.yaml,
    // ..data -> ..<timestamp>, a directory holding the real file.
    std::fs::create_dir(dir.path("..2024_01")).unwrap();
    std::fs::write(dir.path("..2024_01/queues.yaml"), config("100M")).unwrap();
    symlink("..2024_01", dir.path("..data")).unwrap();
    symlink("..data/queues.yaml", dir.path("queues.yaml")).unwrap();
    let seen = Arc::new(Seen::default());
    let watcher =
        ConfigFileWatcher::start(dir.path("queues.yaml"), fast(false), seen.callback()).unwrap();
    assert_eq!(watcher.mode(), WatchMode::Notify);
    let mut expected = Vec::new();
    for (i, max) in ["200M", "300M"].into_iter().enumerate() {
        // The kubelet's swap: a new timestamped dir, a ..data_tmp link to it
        // renamed over ..data, the old dir removed.
        let (old, new) = (format!("..2024_0{}", i + 1), format!("..2024_0{}", i + 2));
        std::fs::create_dir(dir.path(&new)).unwrap();
        std::fs::write(dir.path(&new).join("queues.yaml"), config(max)).unwrap();
        symlink(&new, dir.path("..data_tmp")).unwrap();
        std::fs::rename(dir.path("..data_tmp"), dir.path("..data")).unwrap();
        std::fs::remove_dir_all(dir.path(&old)).unwrap();
        expected.push(config(max));
        assert_eq!(seen.wait_for(expected.len()), expected);
    }
    watcher.stop();
    assert_eq!(*seen.texts.lock().unwrap(), expected);
}

#[test]
fn polling_sees_every_kind_of_change_once() {
    check(
        patient(true),
        &[
            &|f| {
                let text = config("200M");
                std::fs::write(f, &text).unwrap();
                text
            },
            &|f| {
                let text = config("210M");
                replace_atomically(f, &text);
                text
            },
            &|f| {
                // Same size as the previous text: found by the periodic full read.
                let text = config("220M");
                std::fs::write(f, &text).unwrap();
                text
            },
            &|f| {
                std::fs::write(f, config("220M")).unwrap();
                let text = config("1G");
                std::fs::write(f, &text).unwrap();
                text
            },
        ],
    );
}

#[test]
fn a_change_before_the_watch_started_is_reported() {
    let dir = TempDir::new();
    let file = dir.path("queues.yaml");
    std::fs::write(&file, config("200M")).unwrap();
    let seen = Arc::new(Seen::default());
    let options = WatchOptions {
        applied_checksum: Some(unisched::core::config::checksum(&config("100M"))),
        ..fast(false)
    };
    let _watcher = ConfigFileWatcher::start(&file, options, seen.callback()).unwrap();
    assert_eq!(seen.wait_for(1), vec![config("200M")]);
}

#[test]
fn file_config_source_reads_the_file_and_explains_failures() {
    let dir = TempDir::new();
    let file = dir.path("queues.yaml");
    let source = FileConfigSource::new(&file);
    let missing = source.load("rm").unwrap_err();
    assert!(
        missing.contains("cannot read") && missing.contains("queues.yaml"),
        "{missing}"
    );

    std::fs::write(&file, config("1G")).unwrap();
    assert_eq!(source.load("rm").unwrap(), config("1G"));

    std::fs::write(&file, [b'a', 0xff, 0xfe]).unwrap();
    let bad = source.load("rm").unwrap_err();
    assert!(bad.contains("not UTF-8"), "{bad}");

    std::fs::write(&file, vec![b'#'; MAX_CONFIG_BYTES + 1]).unwrap();
    let big = source.load("rm").unwrap_err();
    assert!(big.contains("larger than the limit"), "{big}");
}

fn register(scheduler: &Scheduler, rm_id: &str, config: &str) -> Result<(), String> {
    scheduler
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: rm_id.to_string(),
                policy_group: "queues".to_string(),
                config: config.to_string(),
                ..Default::default()
            },
            Arc::new(RecordingCallback::new()),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn leaf_max_memory(scheduler: &Scheduler, rm_id: &str) -> i64 {
    let snapshot = scheduler
        .snapshot(&format!("[{rm_id}]default"))
        .expect("partition exists");
    let leaf = snapshot.queues.iter().find(|q| q.path == "root.a").unwrap();
    leaf.max["memory"]
}

/// `serve --config FILE`: a change of the file reloads the RMs registered
/// with the default configuration, not those with their own; an invalid
/// version is ignored and the old configuration stays.
#[test]
fn a_file_change_reloads_the_rms_that_took_the_default_config() {
    let dir = TempDir::new();
    let file = dir.path("queues.yaml");
    std::fs::write(&file, config("100M")).unwrap();
    let scheduler = Scheduler::start(SchedulerOptions {
        config_source: Some(Arc::new(FileConfigSource::new(&file))),
        ..SchedulerOptions::default()
    });
    let default = Arc::new(DefaultConfig::new(config("100M")));
    default
        .register("rm-default", |text| {
            register(&scheduler, "rm-default", text)
        })
        .unwrap();
    register(&scheduler, "rm-own", &config("50M")).unwrap();
    assert_eq!(default.rm_ids(), vec!["rm-default".to_string()]);

    let (tx, rx) = mpsc::channel();
    let (sched, def) = (scheduler.clone(), default.clone());
    let watcher = ConfigFileWatcher::start(&file, fast(false), move |text| {
        let _ = tx.send(reload_default_config_rms(&sched, &def, text));
    })
    .unwrap();

    replace_atomically(&file, &config("300M"));
    assert_eq!(rx.recv_timeout(DEADLINE).unwrap(), vec!["rm-default"]);
    assert_eq!(leaf_max_memory(&scheduler, "rm-default"), 300_000_000);
    assert_eq!(leaf_max_memory(&scheduler, "rm-own"), 50_000_000);
    assert_eq!(&*default.text(), config("300M"));

    std::fs::write(&file, "partitions: [oops").unwrap();
    assert!(rx.recv_timeout(DEADLINE).unwrap().is_empty());
    assert_eq!(leaf_max_memory(&scheduler, "rm-default"), 300_000_000);
    assert_eq!(&*default.text(), config("300M"), "the old text stays");

    // A later registration without a config takes the current default.
    default
        .register("rm-late", |text| register(&scheduler, "rm-late", text))
        .unwrap();
    assert_eq!(leaf_max_memory(&scheduler, "rm-late"), 300_000_000);
    watcher.stop();
}
