//! Queue properties: typed readers for the raw `properties` map, and inheritance.
//!
//! The config keeps properties as the strings the user wrote; the scheduler reads them
//! through these functions. Unknown keys are kept and ignored. Values of known keys are
//! checked by [`super::parse`], so reading a parsed config's properties cannot fail.

use std::collections::BTreeMap;
use std::time::Duration;

/// Key: how applications in a leaf are sorted (`fifo`, `fair`).
pub const APPLICATION_SORT_POLICY: &str = "application.sort.policy";
/// Key: whether application priority is compared first (`enabled`, `disabled`).
pub const APPLICATION_SORT_PRIORITY: &str = "application.sort.priority";
/// Key: whether priority crosses this queue's boundary (`default`, `fence`).
pub const PRIORITY_POLICY: &str = "priority.policy";
/// Key: a signed 32-bit offset added to the priority of this queue's applications.
pub const PRIORITY_OFFSET: &str = "priority.offset";
/// Key: preemption behaviour of the queue (`default`, `fence`, `disabled`).
pub const PREEMPTION_POLICY: &str = "preemption.policy";
/// Key: how long an ask waits before it may trigger preemption (a duration like `30s`).
pub const PREEMPTION_DELAY: &str = "preemption.delay";

/// Key: the queue's weight in fair ordering (a positive number, default 1): its
/// share of usage counts divided by the weight, as a Mesos role weight does.
/// Not inherited: each queue has its own.
pub const QUEUE_WEIGHT: &str = "weight";

/// Preemption delay when none is configured.
pub const DEFAULT_PREEMPTION_DELAY: Duration = Duration::from_secs(30);

/// How the applications of a leaf queue are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppSortPolicy {
    /// Oldest submission first (the default).
    #[default]
    Fifo,
    /// Smallest dominant share of the queue's guarantee first.
    Fair,
}

/// Whether application priorities are visible outside the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PriorityPolicy {
    /// Priority propagates upward (the default).
    #[default]
    Default,
    /// Priority is not compared outside this queue's subtree.
    Fence,
}

/// Preemption behaviour of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreemptionPolicy {
    /// Normal preemption (the default).
    #[default]
    Default,
    /// Asks inside may not preempt outside this subtree, nor the reverse.
    Fence,
    /// The queue's allocations are never preempted.
    Disabled,
}

/// Every known property of one queue, typed, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueProperties {
    /// `application.sort.policy`.
    pub app_sort_policy: AppSortPolicy,
    /// `application.sort.priority`: true unless `disabled`.
    pub app_sort_priority: bool,
    /// `priority.policy`.
    pub priority_policy: PriorityPolicy,
    /// `priority.offset`.
    pub priority_offset: i32,
    /// `preemption.policy`.
    pub preemption_policy: PreemptionPolicy,
    /// `preemption.delay`.
    pub preemption_delay: Duration,
}

impl Default for QueueProperties {
    fn default() -> Self {
        QueueProperties {
            app_sort_policy: AppSortPolicy::Fifo,
            app_sort_priority: true,
            priority_policy: PriorityPolicy::Default,
            priority_offset: 0,
            preemption_policy: PreemptionPolicy::Default,
            preemption_delay: DEFAULT_PREEMPTION_DELAY,
        }
    }
}

impl QueueProperties {
    /// Reads every known key of `props`; returns all problems found.
    pub fn from_map(props: &BTreeMap<String, String>) -> Result<QueueProperties, Vec<String>> {
        let mut errors = Vec::new();
        let out = QueueProperties {
            app_sort_policy: keep(&mut errors, app_sort_policy(props)).unwrap_or_default(),
            app_sort_priority: keep(&mut errors, app_sort_priority_enabled(props)).unwrap_or(true),
            priority_policy: keep(&mut errors, priority_policy(props)).unwrap_or_default(),
            priority_offset: keep(&mut errors, priority_offset(props)).unwrap_or(0),
            preemption_policy: keep(&mut errors, preemption_policy(props)).unwrap_or_default(),
            preemption_delay: keep(&mut errors, preemption_delay(props))
                .unwrap_or(DEFAULT_PREEMPTION_DELAY),
        };
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }
}

/// The value, or `None` after recording the error.
fn keep<T>(errors: &mut Vec<String>, r: Result<T, String>) -> Option<T> {
    r.map_err(|e| errors.push(e)).ok()
}

fn value<'a>(props: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    props.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

fn unknown(key: &str, raw: &str, expected: &str) -> String {
    format!("property {key} has unknown value '{raw}' (expected {expected})")
}

/// `application.sort.policy`: `fifo` (default) or `fair`; `stateaware` is a deprecated
/// alias of `fifo`, as upstream.
pub fn app_sort_policy(props: &BTreeMap<String, String>) -> Result<AppSortPolicy, String> {
    let Some(raw) = value(props, APPLICATION_SORT_POLICY) else {
        return Ok(AppSortPolicy::Fifo);
    };
    match raw.to_ascii_lowercase().as_str() {
        "fifo" | "stateaware" => Ok(AppSortPolicy::Fifo),
        "fair" => Ok(AppSortPolicy::Fair),
        _ => Err(unknown(APPLICATION_SORT_POLICY, raw, "fifo or fair")),
    }
}

/// `application.sort.priority`: `enabled` (default) or `disabled`.
pub fn app_sort_priority_enabled(props: &BTreeMap<String, String>) -> Result<bool, String> {
    let Some(raw) = value(props, APPLICATION_SORT_PRIORITY) else {
        return Ok(true);
    };
    match raw.to_ascii_lowercase().as_str() {
        "enabled" => Ok(true),
        "disabled" => Ok(false),
        _ => Err(unknown(
            APPLICATION_SORT_PRIORITY,
            raw,
            "enabled or disabled",
        )),
    }
}

/// `priority.policy`: `default` (default) or `fence`.
pub fn priority_policy(props: &BTreeMap<String, String>) -> Result<PriorityPolicy, String> {
    let Some(raw) = value(props, PRIORITY_POLICY) else {
        return Ok(PriorityPolicy::Default);
    };
    match raw.to_ascii_lowercase().as_str() {
        "default" => Ok(PriorityPolicy::Default),
        "fence" => Ok(PriorityPolicy::Fence),
        _ => Err(unknown(PRIORITY_POLICY, raw, "default or fence")),
    }
}

/// `priority.offset`: a signed 32-bit integer, default 0.
pub fn priority_offset(props: &BTreeMap<String, String>) -> Result<i32, String> {
    let Some(raw) = value(props, PRIORITY_OFFSET) else {
        return Ok(0);
    };
    raw.parse::<i32>().map_err(|_| {
        format!("property {PRIORITY_OFFSET} value '{raw}' is not a 32-bit signed integer")
    })
}

/// `preemption.policy`: `default` (default), `fence` or `disabled`.
pub fn preemption_policy(props: &BTreeMap<String, String>) -> Result<PreemptionPolicy, String> {
    let Some(raw) = value(props, PREEMPTION_POLICY) else {
        return Ok(PreemptionPolicy::Default);
    };
    match raw.to_ascii_lowercase().as_str() {
        "default" => Ok(PreemptionPolicy::Default),
        "fence" => Ok(PreemptionPolicy::Fence),
        "disabled" => Ok(PreemptionPolicy::Disabled),
        _ => Err(unknown(
            PREEMPTION_POLICY,
            raw,
            "default, fence or disabled",
        )),
    }
}

/// `preemption.delay`: a positive duration such as `30s`, `1m30s` or `500ms`; default 30s.
pub fn preemption_delay(props: &BTreeMap<String, String>) -> Result<Duration, String> {
    let Some(raw) = value(props, PREEMPTION_DELAY) else {
        return Ok(DEFAULT_PREEMPTION_DELAY);
    };
    match parse_duration(raw) {
        Ok(d) if d.is_zero() => Err(format!(
            "property {PREEMPTION_DELAY} must be positive, got '{raw}'"
        )),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("property {PREEMPTION_DELAY} value '{raw}': {e}")),
    }
}

/// Problems with the known keys of a property map, each naming its key.
pub(crate) fn check(props: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let mut note = |key: &str, r: Result<(), String>| {
        if let Err(e) = r {
            problems.push((key.to_string(), e));
        }
    };
    note(APPLICATION_SORT_POLICY, app_sort_policy(props).map(drop));
    note(
        APPLICATION_SORT_PRIORITY,
        app_sort_priority_enabled(props).map(drop),
    );
    note(PRIORITY_POLICY, priority_policy(props).map(drop));
    note(PRIORITY_OFFSET, priority_offset(props).map(drop));
    note(PREEMPTION_POLICY, preemption_policy(props).map(drop));
    note(PREEMPTION_DELAY, preemption_delay(props).map(drop));
    note(QUEUE_WEIGHT, weight_milli(props).map(drop));
    problems
}

/// The effective properties of a child queue: the parent's effective properties, then
/// the child's own on top. Four keys do not pass down: `priority.policy` resets to
/// `default`, `priority.offset` to `0`, `preemption.policy` to `default` unless the
/// parent's is `disabled`, and `weight` is not passed at all.
pub fn inherit(
    parent_effective: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = parent_effective
        .iter()
        .filter(|(key, _)| key.as_str() != QUEUE_WEIGHT)
        .map(|(key, v)| {
            let passed = match key.as_str() {
                PRIORITY_POLICY => "default".to_string(),
                PRIORITY_OFFSET => "0".to_string(),
                PREEMPTION_POLICY if !v.trim().eq_ignore_ascii_case("disabled") => {
                    "default".to_string()
                }
                _ => v.clone(),
            };
            (key.clone(), passed)
        })
        .collect();
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// Most a queue weight may be; a larger one would make every share look alike.
pub const MAX_QUEUE_WEIGHT: f64 = 1_000_000.0;

/// `weight`: a positive number up to [`MAX_QUEUE_WEIGHT`], in thousandths
/// (default 1000); at least one thousandth.
pub fn weight_milli(props: &BTreeMap<String, String>) -> Result<u64, String> {
    let Some(raw) = value(props, QUEUE_WEIGHT) else {
        return Ok(1000);
    };
    match raw.parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 && w <= MAX_QUEUE_WEIGHT => {
            Ok(((w * 1000.0).round() as u64).max(1))
        }
        _ => Err(format!(
            "property {QUEUE_WEIGHT} value '{raw}' is not a positive number of at most {MAX_QUEUE_WEIGHT}"
        )),
    }
}

/// Parses a Go-style duration: a sequence of decimal numbers each with a unit (`ns`,
/// `us`, `µs`, `ms`, `s`, `m`, `h`), such as `30s`, `1m30s` or `1.5h`; `0` alone is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.starts_with('-') {
        return Err("negative durations are not allowed".to_string());
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() {
        return Err("empty duration".to_string());
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err("missing unit (use ns, us, ms, s, m or h)".to_string()),
            other => {
                return Err(format!(
                    "unknown unit '{other}' (use ns, us, ms, s, m or h)"
                ));
            }
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(format!("invalid number '{number}'"));
        }
        let too_long = || "duration is too long".to_string();
        let whole_val: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        let mut nanos = whole_val.checked_mul(nanos_per_unit).ok_or_else(too_long)?;
        // Fractions are truncated to whole nanoseconds; at most 18 digits matter.
        let mut scale = nanos_per_unit;
        for d in fraction.bytes().take(18) {
            scale /= 10;
            nanos += u128::from(d - b'0') * scale;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(too_long)?;
        rest = next;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| "duration is too long")?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults() {
        assert_eq!(
            QueueProperties::from_map(&props(&[])).unwrap(),
            QueueProperties::default()
        );
        let d = QueueProperties::default();
        assert_eq!(d.app_sort_policy, AppSortPolicy::Fifo);
        assert!(d.app_sort_priority);
        assert_eq!(d.preemption_delay, Duration::from_secs(30));
    }

    #[test]
    fn typed_values() {
        let p = QueueProperties::from_map(&props(&[
            (APPLICATION_SORT_POLICY, "Fair"),
            (APPLICATION_SORT_PRIORITY, "disabled"),
            (PRIORITY_POLICY, "fence"),
            (PRIORITY_OFFSET, "-7"),
            (PREEMPTION_POLICY, "disabled"),
            (PREEMPTION_DELAY, "1m30s"),
            ("some.other.key", "kept"),
        ]))
        .unwrap();
        assert_eq!(p.app_sort_policy, AppSortPolicy::Fair);
        assert!(!p.app_sort_priority);
        assert_eq!(p.priority_policy, PriorityPolicy::Fence);
        assert_eq!(p.priority_offset, -7);
        assert_eq!(p.preemption_policy, PreemptionPolicy::Disabled);
        assert_eq!(p.preemption_delay, Duration::from_secs(90));
        assert_eq!(
            app_sort_policy(&props(&[(APPLICATION_SORT_POLICY, "stateaware")])),
            Ok(AppSortPolicy::Fifo)
        );
        assert_eq!(
            preemption_policy(&props(&[(PREEMPTION_POLICY, "fence")])),
            Ok(PreemptionPolicy::Fence)
        );
    }

    #[test]
    fn bad_values() {
        let cases: &[(&str, &str, &str)] = &[
            (APPLICATION_SORT_POLICY, "random", "expected fifo or fair"),
            (
                APPLICATION_SORT_PRIORITY,
                "yes",
                "expected enabled or disabled",
            ),
            (PRIORITY_POLICY, "strict", "expected default or fence"),
            (PRIORITY_OFFSET, "2147483648", "not a 32-bit signed integer"),
            (PRIORITY_OFFSET, "1.5", "not a 32-bit signed integer"),
            (
                PREEMPTION_POLICY,
                "never",
                "expected default, fence or disabled",
            ),
            (PREEMPTION_DELAY, "0s", "must be positive"),
            (PREEMPTION_DELAY, "-5s", "negative"),
            (PREEMPTION_DELAY, "30", "missing unit"),
            (PREEMPTION_DELAY, "30d", "unknown unit 'd'"),
        ];
        for (key, v, expect) in cases {
            let errs = QueueProperties::from_map(&props(&[(key, v)])).unwrap_err();
            assert_eq!(errs.len(), 1, "{key}={v}");
            assert!(errs[0].contains(expect), "{key}={v}: {}", errs[0]);
            assert_eq!(check(&props(&[(key, v)]))[0].0, *key);
        }
    }

    #[test]
    fn durations() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1.5s", Duration::from_millis(1500)),
            ("2us", Duration::from_micros(2)),
            ("3ns", Duration::from_nanos(3)),
            (".5m", Duration::from_secs(30)),
        ];
        for (text, expect) in cases {
            assert_eq!(parse_duration(text), Ok(*expect), "{text}");
        }
        for bad in [
            "",
            "s",
            "1x",
            "1.2.3s",
            "99999999999999999999999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn inheritance() {
        let parent = props(&[
            (APPLICATION_SORT_POLICY, "fair"),
            (PRIORITY_POLICY, "fence"),
            (PRIORITY_OFFSET, "5"),
            (PREEMPTION_POLICY, "fence"),
            (PREEMPTION_DELAY, "10s"),
        ]);
        let child = inherit(&parent, &props(&[(PREEMPTION_DELAY, "20s")]));
        assert_eq!(
            child,
            props(&[
                (APPLICATION_SORT_POLICY, "fair"),
                (PRIORITY_POLICY, "default"),
                (PRIORITY_OFFSET, "0"),
                (PREEMPTION_POLICY, "default"),
                (PREEMPTION_DELAY, "20s"),
            ])
        );
        let disabled = inherit(&props(&[(PREEMPTION_POLICY, "disabled")]), &props(&[]));
        assert_eq!(disabled[PREEMPTION_POLICY], "disabled");
    }
}
