//! unisched's own trace format, as CSV (a header row naming the columns, in
//! any order) or JSONL (one JSON object per line with the same names). The
//! format is documented in `tests/traces/README.md`.
//!
//! A row is an ask (`kind` empty or `ask`): `count` allocations of
//! `resources` for application `app`, each running `duration` once placed;
//! or a node joining (`kind: node`, `node`, `resources` = its capacity,
//! `count` copies named `node-0`, `node-1`, ... when above 1) or leaving
//! (`kind: node-remove`). Quantities are written as in the queue YAML
//! (`vcore=2;memory=4Gi`); times and durations in seconds (`90`, `1.5`) or
//! with units (`90s`, `2m`, `1h30m`).

use std::collections::HashMap;
use std::path::Path;

use super::input::{self, CsvRows};
use super::{AskRecord, BadLine, Event, Size, TraceApp, TraceBuilder, TraceError};
use crate::scenario::quantity::{parse_duration, parse_quantity};

/// The columns of the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Col {
    Time,
    Kind,
    App,
    Queue,
    User,
    Groups,
    Tags,
    Resources,
    Count,
    Duration,
    Priority,
    TaskGroup,
    Placeholder,
    GangStyle,
    PreemptSelf,
    PreemptOther,
    Node,
}

const COLUMNS: [(&str, Col); 17] = [
    ("time", Col::Time),
    ("kind", Col::Kind),
    ("app", Col::App),
    ("queue", Col::Queue),
    ("user", Col::User),
    ("groups", Col::Groups),
    ("tags", Col::Tags),
    ("resources", Col::Resources),
    ("count", Col::Count),
    ("duration", Col::Duration),
    ("priority", Col::Priority),
    ("task_group", Col::TaskGroup),
    ("placeholder", Col::Placeholder),
    ("gang_style", Col::GangStyle),
    ("preempt_self", Col::PreemptSelf),
    ("preempt_other", Col::PreemptOther),
    ("node", Col::Node),
];

/// User of an application whose rows name none.
pub const DEFAULT_USER: &str = "trace";

fn column(name: &str) -> Option<Col> {
    COLUMNS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

fn column_names() -> String {
    COLUMNS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a CSV trace of our format into `trace`.
pub fn read_csv(path: &Path, trace: &mut TraceBuilder) -> Result<(), TraceError> {
    let mut rows = CsvRows::open(path, true)?;
    let headers = rows.headers().map_err(TraceError::BadLine)?;
    let mut index: HashMap<Col, usize> = HashMap::new();
    for (i, name) in headers.iter().enumerate() {
        match column(name) {
            Some(c) => {
                index.insert(c, i);
            }
            None => {
                let bad = rows.bad(
                    input::RowPosition { line: 1, byte: 0 },
                    i,
                    format!("unknown column {name:?} (columns: {})", column_names()),
                );
                return Err(TraceError::BadLine(bad));
            }
        }
    }
    if !index.contains_key(&Col::Time) {
        return Err(TraceError::BadLine(BadLine {
            file: path.to_path_buf(),
            line: 1,
            column: 1,
            message: "the header has no \"time\" column".to_string(),
        }));
    }
    let mut record = csv::StringRecord::new();
    loop {
        let pos = match rows.read(&mut record) {
            Ok(Some(pos)) => pos,
            Ok(None) => return Ok(()),
            Err(Ok(bad)) => {
                trace.bad_line(bad)?;
                continue;
            }
            Err(Err(err)) => return Err(err),
        };
        if record.iter().all(str::is_empty) {
            continue;
        }
        let get = |c: Col| {
            index
                .get(&c)
                .and_then(|&i| record.get(i))
                .filter(|v| !v.is_empty())
        };
        if let Err((col, message)) = add_row(&get, trace) {
            let field = index.get(&col).copied().unwrap_or(0);
            let bad = rows.bad(pos, field, message);
            trace.bad_line(bad)?;
        }
    }
}

/// Reads a JSONL trace of our format into `trace`.
pub fn read_jsonl(path: &Path, trace: &mut TraceBuilder) -> Result<(), TraceError> {
    for (line_no, line) in input::lines(path)? {
        let line = line.map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let bad = |column: u64, message: String| BadLine {
            file: path.to_path_buf(),
            line: line_no,
            column,
            message,
        };
        let fields = match json_fields(text) {
            Ok(f) => f,
            Err((column, message)) => {
                trace.bad_line(bad(column, message))?;
                continue;
            }
        };
        let get = |c: Col| {
            fields
                .get(&c)
                .map(|(v, _)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        if let Err((col, message)) = add_row(&get, trace) {
            let column = fields.get(&col).map_or(1, |(_, at)| *at);
            trace.bad_line(bad(column, message))?;
        }
    }
    Ok(())
}

/// The fields of one JSONL object as text (as a CSV cell would hold them)
/// with the column of each key, or the column and message of what is wrong.
fn json_fields(line: &str) -> Result<HashMap<Col, (String, u64)>, (u64, String)> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| (e.column() as u64, e.to_string()))?;
    let serde_json::Value::Object(map) = value else {
        return Err((1, "a line must be a JSON object".to_string()));
    };
    let mut out = HashMap::new();
    for (key, value) in map {
        let at = line
            .find(&format!("\"{key}\""))
            .map_or(1, |i| line[..i].chars().count() as u64 + 1);
        let Some(col) = column(&key) else {
            return Err((
                at,
                format!("unknown field {key:?} (fields: {})", column_names()),
            ));
        };
        let text = json_text(&key, &value).map_err(|m| (at, m))?;
        out.insert(col, (text, at));
    }
    Ok(out)
}

/// A JSON value as the CSV cell that means the same.
fn json_text(key: &str, value: &serde_json::Value) -> Result<String, String> {
    use serde_json::Value;
    let scalar = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(String::new()),
        _ => Err(format!("{key}: expected a string or a number, found {v}")),
    };
    match value {
        Value::Array(items) => Ok(items
            .iter()
            .map(scalar)
            .collect::<Result<Vec<_>, _>>()?
            .join(";")),
        Value::Object(map) => Ok(map
            .iter()
            .map(|(k, v)| scalar(v).map(|v| format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()?
            .join(";")),
        v => scalar(v),
    }
}

type RowError = (Col, String);

/// Adds one row, read through `get`, to the trace.
fn add_row<'a>(
    get: &dyn Fn(Col) -> Option<&'a str>,
    trace: &mut TraceBuilder,
) -> Result<(), RowError> {
    let time = parse_time(get(Col::Time).ok_or((Col::Time, "time is missing".to_string()))?)
        .map_err(|m| (Col::Time, m))?;
    let count = match get(Col::Count) {
        None => 1,
        Some(text) => text.parse::<u32>().ok().filter(|&c| c >= 1).ok_or((
            Col::Count,
            format!("count {text:?} is not a whole number of at least 1"),
        ))?,
    };
    match get(Col::Kind).unwrap_or("ask") {
        "ask" => add_ask(get, time, count, trace),
        "node" => {
            let id = get(Col::Node).ok_or((Col::Node, "a node row needs a node id".to_string()))?;
            let capacity = parse_resources(
                get(Col::Resources)
                    .ok_or((Col::Resources, "a node row needs its resources".to_string()))?,
            )
            .map_err(|m| (Col::Resources, m))?;
            for i in 0..count {
                let name = if count == 1 {
                    id.to_string()
                } else {
                    format!("{id}-{i}")
                };
                trace.node_up(time, &name, capacity.clone());
            }
            Ok(())
        }
        "node-remove" => {
            let id = get(Col::Node)
                .ok_or((Col::Node, "a node-remove row needs a node id".to_string()))?;
            let names: Vec<String> = if count == 1 {
                vec![id.to_string()]
            } else {
                (0..count).map(|i| format!("{id}-{i}")).collect()
            };
            for name in names {
                let node = trace.node_by_id(&name).ok_or((
                    Col::Node,
                    format!("node {name:?} is removed before any row adds it"),
                ))?;
                trace.push(time, Event::NodeDown(node));
            }
            Ok(())
        }
        other => Err((
            Col::Kind,
            format!("kind {other:?} is not one of ask, node, node-remove"),
        )),
    }
}

fn add_ask<'a>(
    get: &dyn Fn(Col) -> Option<&'a str>,
    time: i64,
    count: u32,
    trace: &mut TraceBuilder,
) -> Result<(), RowError> {
    let id = get(Col::App).ok_or((Col::App, "an ask needs an app".to_string()))?;
    let size = parse_resources(
        get(Col::Resources).ok_or((Col::Resources, "an ask needs resources".to_string()))?,
    )
    .map_err(|m| (Col::Resources, m))?;
    let placeholder = flag(get, Col::Placeholder, false)?;
    let duration_ms = match get(Col::Duration) {
        Some(text) => parse_span(text).map_err(|m| (Col::Duration, m))?,
        None if placeholder => 0,
        None => return Err((Col::Duration, "an ask needs a duration".to_string())),
    };
    let priority = match get(Col::Priority) {
        None => 0,
        Some(text) => text.parse::<i32>().map_err(|_| {
            (
                Col::Priority,
                format!("priority {text:?} is not a whole number"),
            )
        })?,
    };
    let gang_style = match get(Col::GangStyle) {
        None => String::new(),
        Some(s @ ("Soft" | "Hard")) => s.to_string(),
        Some(other) => {
            return Err((
                Col::GangStyle,
                format!("gang_style {other:?} is not Soft or Hard"),
            ));
        }
    };
    let tags = match get(Col::Tags) {
        None => Vec::new(),
        Some(text) => pairs(text)
            .map(|p| p.map(|(k, v)| (k.to_string(), v.to_string())))
            .collect::<Result<_, _>>()
            .map_err(|m| (Col::Tags, m))?,
    };
    let app = trace.app(TraceApp {
        id: id.to_string(),
        queue: get(Col::Queue).unwrap_or_default().to_string(),
        user: get(Col::User).unwrap_or(DEFAULT_USER).to_string(),
        groups: get(Col::Groups)
            .map(|g| {
                g.split(';')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        tags,
        gang_style,
    });
    let size = trace.size(size);
    let task_group = trace.task_group(get(Col::TaskGroup).unwrap_or_default());
    if placeholder && task_group == 0 {
        return Err((
            Col::TaskGroup,
            "a placeholder needs a task_group".to_string(),
        ));
    }
    trace.push(
        time,
        Event::Ask(AskRecord {
            app,
            size,
            count,
            duration_ms,
            priority,
            task_group,
            placeholder,
            preempt_self: flag(get, Col::PreemptSelf, true)?,
            preempt_other: flag(get, Col::PreemptOther, true)?,
        }),
    );
    Ok(())
}

fn flag<'a>(
    get: &dyn Fn(Col) -> Option<&'a str>,
    col: Col,
    default: bool,
) -> Result<bool, RowError> {
    match get(col) {
        None => Ok(default),
        Some("true" | "1" | "yes") => Ok(true),
        Some("false" | "0" | "no") => Ok(false),
        Some(other) => Err((col, format!("{other:?} is not true or false"))),
    }
}

/// `key=value` pairs separated by `;`.
fn pairs(text: &str) -> impl Iterator<Item = Result<(&str, &str), String>> {
    text.split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("{p:?} is not name=value"))
        })
}

/// Resources as written in our traces: `vcore=2;memory=4Gi`, queue-YAML units.
pub fn parse_resources(text: &str) -> Result<Size, String> {
    let mut size = Size::new();
    for pair in pairs(text) {
        let (name, value) = pair?;
        let v = parse_quantity(name, value)?;
        if v < 0 {
            return Err(format!("{name}: quantity {value:?} is negative"));
        }
        size.push((name.to_string(), v));
    }
    if size.is_empty() {
        return Err("resources are empty (write e.g. vcore=1;memory=2Gi)".to_string());
    }
    Ok(size)
}

/// A time in milliseconds: seconds (`90`, `1.5`) or with units (`1h30m`).
pub fn parse_time(text: &str) -> Result<i64, String> {
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds.abs() < 1e15 {
            return Ok((seconds * 1000.0).round() as i64);
        }
        return Err(format!("time {text:?} is out of range"));
    }
    let d = parse_duration(text)?;
    i64::try_from(d.as_millis()).map_err(|_| format!("time {text:?} is out of range"))
}

/// A duration in milliseconds, never negative.
pub fn parse_span(text: &str) -> Result<u64, String> {
    let ms = parse_time(text)?;
    u64::try_from(ms).map_err(|_| format!("duration {text:?} is negative"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

    fn read(name: &str, text: &str, skip: bool) -> Result<Trace, TraceError> {
        let path = crate::trace::test_file(name, text);
        let mut b = TraceBuilder::new(name, skip);
        if name.ends_with(".jsonl") {
            read_jsonl(&path, &mut b)?;
        } else {
            read_csv(&path, &mut b)?;
        }
        Ok(b.finish())
    }

    fn error(name: &str, text: &str) -> String {
        match read(name, text, false) {
            Err(TraceError::BadLine(b)) => format!("{}:{}: {}", b.line, b.column, b.message),
            other => panic!("expected a bad line, got {other:?}"),
        }
    }

    #[test]
    fn csv_and_jsonl_read_the_same_records() {
        let csv = "time,app,queue,user,groups,resources,count,duration,priority\n\
                   10,a1,root.a,alice,dev;ops,vcore=2;memory=1Gi,3,1m,5\n\
                   0,,,,,,,,\n\
                   5.5,a2,root.b,,,vcore=500m,1,30,\n";
        let jsonl = "{\"time\": 10, \"app\": \"a1\", \"queue\": \"root.a\", \"user\": \"alice\", \"groups\": [\"dev\", \"ops\"], \"resources\": {\"vcore\": 2, \"memory\": \"1Gi\"}, \"count\": 3, \"duration\": \"1m\", \"priority\": 5}\n\
                     \n\
                     {\"time\": \"5500ms\", \"app\": \"a2\", \"queue\": \"root.b\", \"resources\": \"vcore=500m\", \"duration\": 30}\n";
        // The blank CSV row is a row of empty cells: skipped like a blank line.
        let csv = csv.replace("0,,,,,,,,\n", ",,,,,,,,\n");
        let a = read("t.csv", &csv, false).unwrap();
        let b = read("t.jsonl", jsonl, false).unwrap();
        assert_eq!(a.records, b.records);
        assert_eq!(a.apps, b.apps);
        assert_eq!(a.sizes, b.sizes);
        assert_eq!(a.records.len(), 2);
        let Event::Ask(first) = a.records[0].event else {
            panic!()
        };
        assert_eq!(a.apps[first.app as usize].id, "a2");
        assert_eq!(a.apps[first.app as usize].user, DEFAULT_USER);
        assert_eq!(a.records[1].time_ms, 4_500);
        let Event::Ask(second) = a.records[1].event else {
            panic!()
        };
        assert_eq!(
            (second.count, second.duration_ms, second.priority),
            (3, 60_000, 5)
        );
        assert_eq!(
            a.sizes[second.size as usize],
            [("memory".to_string(), 1 << 30), ("vcore".to_string(), 2000)]
        );
        assert_eq!(a.apps[second.app as usize].groups, ["dev", "ops"]);
    }

    #[test]
    fn nodes_join_and_leave() {
        let t = read(
            "n.csv",
            "time,kind,node,resources,count\n0,node,big,vcore=8;memory=8Gi,3\n60,node-remove,big-1,,\n",
            false,
        )
        .unwrap();
        assert_eq!(t.nodes.len(), 3);
        assert_eq!(t.nodes[1], "big-1");
        assert_eq!(t.records.last().unwrap().event, Event::NodeDown(1));
    }

    #[test]
    fn bad_values_name_line_and_column() {
        let header = "time,app,resources,duration,count\n";
        let cases = [
            (
                format!("{header}1,a,vcore=1,10,zero\n"),
                "2:16: count \"zero\" is not a whole number of at least 1",
            ),
            (format!("{header}1,a,vcore=x,10,1\n"), "2:5: "),
            (format!("{header}soon,a,vcore=1,10,1\n"), "2:1: "),
            (
                format!("{header}1,a,vcore=1,,1\n"),
                "2:13: an ask needs a duration",
            ),
            (
                format!("{header}1,,vcore=1,3,1\n"),
                "2:3: an ask needs an app",
            ),
            (
                "time,app,colour\n".to_string(),
                "1:10: unknown column \"colour\"",
            ),
        ];
        for (text, want) in cases {
            let got = error("bad.csv", &text);
            assert!(got.starts_with(want), "{got:?} should start with {want:?}");
        }
        let got = error(
            "bad.jsonl",
            "{\"time\": 1, \"app\": \"a\", \"resources\": \"vcore=1\", \"duration\": -3}\n",
        );
        assert!(
            got.starts_with("1:49: duration \"-3\" is negative"),
            "{got}"
        );
        let got = error("bad.jsonl", "{\"time\": 1,\n");
        assert!(got.starts_with("1:11: EOF"), "{got}");
        let got = error("bad.jsonl", "{\"time\": 1, \"colour\": 2}\n");
        assert!(got.starts_with("1:13: unknown field \"colour\""), "{got}");
    }

    #[test]
    fn skipped_bad_lines_are_counted_and_the_rest_read() {
        let t = read(
            "skip.csv",
            "time,app,resources,duration\n1,a,vcore=1,10\n2,a,vcore=oops,10\n3,a\"b,vcore=1\n4,b,vcore=1,5\n",
            true,
        )
        .unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.bad_line_count, 2);
        assert_eq!(t.bad_lines[0].line, 3);
    }
}
