//! Workload traces for `unisched simulate`: what a cluster was asked to run
//! and when, read from our own CSV/JSONL format, imported from the public
//! Google 2011 and Alibaba 2018 cluster traces, or generated from a seed.
//!
//! A [`Trace`] is plain data, compact because a week of a large cluster is
//! millions of records: strings (applications, sizes, task groups, nodes) are
//! interned once and records refer to them by index. Times are milliseconds
//! since the trace's first record. Readers never touch the core; the replay
//! (`src/replay/`) turns records into SI requests.

pub mod alibaba;
pub mod generate;
pub mod google;
pub mod input;
pub mod own;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

/// One application as the trace describes it (taken from its first record).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceApp {
    /// Application id.
    pub id: String,
    /// Queue asked for (`root.a`); empty to leave it to the placement rules.
    pub queue: String,
    /// Owner.
    pub user: String,
    /// Groups of the owner.
    pub groups: Vec<String>,
    /// Application tags (placement rules read them).
    pub tags: Vec<(String, String)>,
    /// Gang scheduling style (`Soft`, `Hard`) or empty.
    pub gang_style: String,
}

/// A resource vector in wire units (vcore in milli-cores), sorted by name.
pub type Size = Vec<(String, i64)>;

/// Tasks asked for at one moment: `count` allocations of one size, each
/// running `duration_ms` once placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskRecord {
    /// Index into [`Trace::apps`].
    pub app: u32,
    /// Index into [`Trace::sizes`].
    pub size: u32,
    /// Allocations wanted.
    pub count: u32,
    /// How long each allocation runs (ignored for placeholders, which run
    /// until replaced or timed out).
    pub duration_ms: u64,
    /// Ask priority.
    pub priority: i32,
    /// Index into [`Trace::task_groups`] (0: none).
    pub task_group: u32,
    /// A gang placeholder.
    pub placeholder: bool,
    /// Its allocations may be preempted.
    pub preempt_self: bool,
    /// It may preempt others.
    pub preempt_other: bool,
}

/// What happens at a record's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Tasks are submitted.
    Ask(AskRecord),
    /// A node (index into [`Trace::nodes`]) joins, or changes its
    /// schedulable capacity (index into [`Trace::sizes`]) when it is up.
    NodeUp {
        /// The node.
        node: u32,
        /// Its capacity from now on.
        capacity: u32,
    },
    /// A node leaves; what runs on it is lost.
    NodeDown(u32),
}

/// One timed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Milliseconds since the first record of the trace.
    pub time_ms: u64,
    /// What happens.
    pub event: Event,
}

/// A line of input that could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// File.
    pub file: PathBuf,
    /// 1-based line.
    pub line: u64,
    /// 1-based column (characters).
    pub column: u64,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A line does not parse (and bad lines are not skipped).
    #[error("{0}")]
    BadLine(BadLine),
    /// Anything else about the input (an unknown format, a bad option).
    #[error("{0}")]
    Invalid(String),
}

/// Bad lines kept as examples when they are skipped; the rest are counted.
pub const BAD_LINE_EXAMPLES: usize = 20;

/// How an importer of a public trace maps it onto a cluster: those traces
/// normalise resources to their largest machine, so the user says what 1.0
/// (Google) or 100 (Alibaba) is, and they have no queues, so a template
/// names one from the record's fields (`root.{band}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// Milli-cores of a normalised CPU of 1.0 (Google) or 100 (Alibaba
    /// memory has no CPU scale: Alibaba CPU is in cores already).
    pub vcore_unit: i64,
    /// Bytes of a normalised memory of 1.0 (Google) or 100 (Alibaba).
    pub memory_unit: i64,
    /// Queue of each application, with `{name}` replaced by the importer's
    /// fields; `None` for the importer's default.
    pub queue_template: Option<String>,
}

/// Replaces each `{name}` in `template` by its value in `fields`; names not
/// in `fields` are left as written, so a typo shows in the queue name.
pub fn expand_template(template: &str, fields: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in fields {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// A whole trace, records in time order.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Where it came from, for reports.
    pub source: String,
    /// Applications by index.
    pub apps: Vec<TraceApp>,
    /// Interned resource vectors.
    pub sizes: Vec<Size>,
    /// Task group names; index 0 is the empty name (no group).
    pub task_groups: Vec<String>,
    /// Node ids by index.
    pub nodes: Vec<String>,
    /// Records, sorted by time (stable: file order within one time).
    pub records: Vec<Record>,
    /// Bad lines skipped (`--skip-bad-lines`): the first few.
    pub bad_lines: Vec<BadLine>,
    /// How many bad lines were skipped in all.
    pub bad_line_count: u64,
    /// Input rows an importer left out on purpose, by reason (e.g. a task the
    /// trace never saw end), so the report can say what was not replayed.
    pub left_out: BTreeMap<String, u64>,
}

impl Trace {
    /// Allocations asked for over all ask records.
    pub fn task_count(&self) -> u64 {
        self.records
            .iter()
            .map(|r| match r.event {
                Event::Ask(a) => u64::from(a.count),
                _ => 0,
            })
            .sum()
    }

    /// Time of the last record.
    pub fn span_ms(&self) -> u64 {
        self.records.last().map_or(0, |r| r.time_ms)
    }
}

/// Builds a [`Trace`], interning as it goes. Readers push records in any time
/// order; [`TraceBuilder::finish`] sorts them.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    app_index: HashMap<String, u32>,
    size_index: HashMap<Size, u32>,
    group_index: HashMap<String, u32>,
    node_index: HashMap<String, u32>,
    /// Records with their absolute time, before shifting to the first one.
    timed: Vec<(i64, Event)>,
    /// Records at the trace's start, whatever its origin (`--nodes`).
    at_start: Vec<Event>,
    skip_bad_lines: bool,
}

impl TraceBuilder {
    /// An empty trace; with `skip_bad_lines` a bad line is counted instead of
    /// stopping the read.
    pub fn new(source: impl Into<String>, skip_bad_lines: bool) -> Self {
        let mut b = Self {
            skip_bad_lines,
            ..Self::default()
        };
        b.trace.source = source.into();
        b.trace.task_groups.push(String::new());
        b.group_index.insert(String::new(), 0);
        b
    }

    /// A builder holding a finished trace, to add records to it.
    pub fn from_trace(trace: Trace) -> Self {
        let index = |names: &[String]| -> HashMap<String, u32> {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u32))
                .collect()
        };
        let ids: Vec<String> = trace.apps.iter().map(|a| a.id.clone()).collect();
        Self {
            app_index: index(&ids),
            size_index: trace
                .sizes
                .iter()
                .enumerate()
                .map(|(i, s)| (s.clone(), i as u32))
                .collect(),
            group_index: index(&trace.task_groups),
            node_index: index(&trace.nodes),
            timed: trace
                .records
                .iter()
                .map(|r| (i64::try_from(r.time_ms).unwrap_or(i64::MAX), r.event))
                .collect(),
            at_start: Vec::new(),
            skip_bad_lines: false,
            trace: Trace {
                records: Vec::new(),
                ..trace
            },
        }
    }

    /// The index of application `app.id`, adding it on first sight (later
    /// records of the same id keep the first one's queue, user and tags).
    pub fn app(&mut self, app: TraceApp) -> u32 {
        if let Some(&i) = self.app_index.get(&app.id) {
            return i;
        }
        let i = self.trace.apps.len() as u32;
        self.app_index.insert(app.id.clone(), i);
        self.trace.apps.push(app);
        i
    }

    /// The index of an already added application.
    pub fn app_by_id(&self, id: &str) -> Option<u32> {
        self.app_index.get(id).copied()
    }

    /// The index of a resource vector (zero quantities dropped, sorted).
    pub fn size(&mut self, mut size: Size) -> u32 {
        size.retain(|(_, v)| *v != 0);
        size.sort();
        if let Some(&i) = self.size_index.get(&size) {
            return i;
        }
        let i = self.trace.sizes.len() as u32;
        self.size_index.insert(size.clone(), i);
        self.trace.sizes.push(size);
        i
    }

    /// The index of a task group name (0 for none).
    pub fn task_group(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.group_index.get(name) {
            return i;
        }
        let i = self.trace.task_groups.len() as u32;
        self.group_index.insert(name.to_string(), i);
        self.trace.task_groups.push(name.to_string());
        i
    }

    /// The index of node `id`, adding it on first sight.
    pub fn node(&mut self, id: &str) -> u32 {
        if let Some(&i) = self.node_index.get(id) {
            return i;
        }
        let i = self.trace.nodes.len() as u32;
        self.node_index.insert(id.to_string(), i);
        self.trace.nodes.push(id.to_string());
        i
    }

    /// Adds a node joining at the trace's start.
    pub fn node_at_start(&mut self, id: &str, capacity: Size) {
        let node = self.node(id);
        let capacity = self.size(capacity);
        self.push_at_start(Event::NodeUp { node, capacity });
    }

    /// Adds a node joining (or changing capacity) at `time_ms`.
    pub fn node_up(&mut self, time_ms: i64, id: &str, capacity: Size) {
        let node = self.node(id);
        let capacity = self.size(capacity);
        self.push(time_ms, Event::NodeUp { node, capacity });
    }

    /// The index of a node seen before.
    pub fn node_by_id(&self, id: &str) -> Option<u32> {
        self.node_index.get(id).copied()
    }

    /// Adds a record at `time_ms` (any origin; negative is fine).
    pub fn push(&mut self, time_ms: i64, event: Event) {
        self.timed.push((time_ms, event));
    }

    /// Adds a record at the time of the trace's first record.
    pub fn push_at_start(&mut self, event: Event) {
        self.at_start.push(event);
    }

    /// Notes an input row left out on purpose.
    pub fn leave_out(&mut self, reason: &str) {
        *self.trace.left_out.entry(reason.to_string()).or_insert(0) += 1;
    }

    /// Handles a bad line: an error unless bad lines are skipped.
    pub fn bad_line(&mut self, bad: BadLine) -> Result<(), TraceError> {
        if !self.skip_bad_lines {
            return Err(TraceError::BadLine(bad));
        }
        self.trace.bad_line_count += 1;
        if self.trace.bad_lines.len() < BAD_LINE_EXAMPLES {
            self.trace.bad_lines.push(bad);
        }
        Ok(())
    }

    /// Sorts the records by time and shifts them so the first is at 0.
    pub fn finish(mut self) -> Trace {
        // Stable: records of one time keep their order in the input.
        self.timed.sort_by_key(|(t, _)| *t);
        let origin = self.timed.first().map_or(0, |(t, _)| *t);
        let start = self
            .at_start
            .into_iter()
            .map(|event| Record { time_ms: 0, event });
        let timed = self.timed.into_iter().map(|(t, event)| Record {
            time_ms: u64::try_from(t.saturating_sub(origin)).unwrap_or(0),
            event,
        });
        self.trace.records = start.chain(timed).collect();
        self.trace
    }
}

/// Writes `text` to a fresh file named `name` for a test (a directory of
/// its own per call, so tests running at once never share a file).
#[cfg(test)]
pub(crate) fn test_file(name: &str, text: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("unisched-trace-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(app: u32, size: u32) -> Event {
        Event::Ask(AskRecord {
            app,
            size,
            count: 2,
            duration_ms: 10,
            priority: 0,
            task_group: 0,
            placeholder: false,
            preempt_self: true,
            preempt_other: true,
        })
    }

    #[test]
    fn builder_interns_and_sorts_from_the_first_record() {
        let mut b = TraceBuilder::new("test", false);
        let a = b.app(TraceApp {
            id: "a".into(),
            queue: "root.x".into(),
            ..TraceApp::default()
        });
        let again = b.app(TraceApp {
            id: "a".into(),
            queue: "root.other".into(),
            ..TraceApp::default()
        });
        assert_eq!(a, again);
        let s1 = b.size(vec![("vcore".into(), 1000), ("memory".into(), 5)]);
        let s2 = b.size(vec![
            ("memory".into(), 5),
            ("vcore".into(), 1000),
            ("gpu".into(), 0),
        ]);
        assert_eq!(s1, s2);
        b.push(5_000, ask(a, s1));
        b.push(2_000, ask(a, s1));
        b.node_up(2_000, "n1", vec![("vcore".into(), 1)]);
        let t = b.finish();
        assert_eq!(t.apps[0].queue, "root.x");
        assert_eq!(
            t.sizes[0],
            [("memory".to_string(), 5), ("vcore".to_string(), 1000)]
        );
        let times: Vec<u64> = t.records.iter().map(|r| r.time_ms).collect();
        assert_eq!(times, [0, 0, 3_000]);
        // Same time: input order kept.
        assert!(matches!(
            t.records[1].event,
            Event::NodeUp {
                node: 0,
                capacity: 1
            }
        ));
        assert_eq!(t.task_count(), 4);
        assert_eq!(t.span_ms(), 3_000);
    }

    #[test]
    fn templates_replace_known_fields_only() {
        assert_eq!(
            expand_template(
                "root.{band}.{user}.{nope}",
                &[("band", "batch"), ("user", "u1")]
            ),
            "root.batch.u1.{nope}"
        );
    }

    #[test]
    fn bad_lines_stop_the_read_unless_skipped() {
        let bad = BadLine {
            file: "t.csv".into(),
            line: 3,
            column: 7,
            message: "bad count".into(),
        };
        assert_eq!(bad.to_string(), "t.csv:3:7: bad count");
        let mut strict = TraceBuilder::new("t", false);
        assert!(matches!(
            strict.bad_line(bad.clone()),
            Err(TraceError::BadLine(_))
        ));
        let mut lenient = TraceBuilder::new("t", true);
        for _ in 0..BAD_LINE_EXAMPLES + 5 {
            lenient.bad_line(bad.clone()).unwrap();
        }
        let t = lenient.finish();
        assert_eq!(t.bad_line_count, BAD_LINE_EXAMPLES as u64 + 5);
        assert_eq!(t.bad_lines.len(), BAD_LINE_EXAMPLES);
    }
}
