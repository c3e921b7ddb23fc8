//! Quantities and durations as scenario authors write them, and how a runner
//! prints them back.
//!
//! Resources use the queue-config style everywhere (`vcore: 2` = 2 cores =
//! 2000 milli on the wire, `vcore: 250m`, `memory: 10M`, `memory: 1Gi`), so a
//! scenario reads like its config. Unlike the config, a quantity may be
//! negative: bad-input scenarios need to send one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;

use unisched_core::config::VCORE;

/// A sparse resource, name to wire quantity (vcore in milli-cores).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, QuantityText>")]
pub struct Resources(pub BTreeMap<String, i64>);

/// One quantity as written: a YAML number or a string with a suffix.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum QuantityText {
    /// `2`
    Int(i64),
    /// `0.5`
    Float(f64),
    /// `10M`, `250m`, `-1`
    Text(String),
}

impl TryFrom<BTreeMap<String, QuantityText>> for Resources {
    type Error = String;

    fn try_from(raw: BTreeMap<String, QuantityText>) -> Result<Self, String> {
        let mut out = BTreeMap::new();
        for (name, value) in raw {
            let text = match value {
                QuantityText::Int(i) => i.to_string(),
                QuantityText::Float(f) => f.to_string(),
                QuantityText::Text(t) => t,
            };
            out.insert(name.clone(), parse_quantity(&name, &text)?);
        }
        Ok(Self(out))
    }
}

/// Converts a quantity as written in a queue config into its wire value, with
/// the core's own parser (`vcore: 2` = 2000, `memory: 10M`, `vcore: 250m`).
/// A leading `-` is allowed here so that bad-input scenarios can send one.
pub fn parse_quantity(resource: &str, text: &str) -> Result<i64, String> {
    let trimmed = text.trim();
    match trimmed.strip_prefix('-') {
        Some(magnitude) => unisched_core::config::parse_quantity(resource, magnitude).map(|v| -v),
        None => unisched_core::config::parse_quantity(resource, trimmed),
    }
}

/// A duration as written: `31s`, `500ms`, `2m`, `1h`, `1m30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct DurationText(pub Duration);

impl TryFrom<String> for DurationText {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        parse_duration(&text).map(Self)
    }
}

/// Parses `31s`, `500ms`, `2m`, `1h`, `1m30s` (a sequence of number + unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("duration {text:?} {why} (write e.g. 500ms, 31s, 2m, 1h)");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("is empty"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("needs a number before each unit"));
        }
        let amount: u64 = rest[..digits].parse().map_err(|_| bad("is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(amount),
            "s" => Duration::from_secs(amount),
            "m" => Duration::from_secs(amount.saturating_mul(60)),
            "h" => Duration::from_secs(amount.saturating_mul(3600)),
            "" => return Err(bad("needs a unit")),
            _ => return Err(bad("has an unknown unit")),
        };
        total += part;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Prints one wire quantity the way an author would write it.
pub fn render_quantity(resource: &str, value: i64) -> String {
    const MEGA: i64 = 1_000_000;
    const MEBI: i64 = 1 << 20;
    if resource == VCORE {
        return if value % 1000 == 0 {
            (value / 1000).to_string()
        } else {
            format!("{value}m")
        };
    }
    if value != 0 && value % MEGA == 0 {
        format!("{}M", value / MEGA)
    } else if value != 0 && value % MEBI == 0 {
        format!("{}Mi", value / MEBI)
    } else {
        value.to_string()
    }
}

/// Prints a resource as `memory=10M vcore=2`, or `(none)` when it is empty.
pub fn render_resources(resources: &BTreeMap<String, i64>) -> String {
    if resources.is_empty() {
        return "(none)".to_owned();
    }
    let mut out = String::new();
    for (name, value) in resources {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "{name}={}", render_quantity(name, *value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(resource: &str, text: &str, expect: Result<i64, ()>) {
        assert_eq!(
            parse_quantity(resource, text).map_err(|_| ()),
            expect,
            "{resource}: {text}"
        );
    }

    #[test]
    fn quantities_follow_the_config_units() {
        check("vcore", "1", Ok(1000));
        check("vcore", "250m", Ok(250));
        check("vcore", "0.5", Ok(500));
        check("vcore", "-2", Ok(-2000));
        check("memory", "10M", Ok(10_000_000));
        check("memory", "1Mi", Ok(1 << 20));
        check("memory", "1.5G", Ok(1_500_000_000));
        check("memory", "1000", Ok(1000));
        check("memory", "-10M", Ok(-10_000_000));
        check("pods", "3", Ok(3));
        check("memory", "10X", Err(()));
        check("memory", "M", Err(()));
        check("memory", "1.5", Err(()));
        check("memory", "", Err(()));
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("31s"), Ok(Duration::from_secs(31)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("31").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("3d").is_err());
    }

    #[test]
    fn rendering_reads_like_the_input() {
        let mut r = BTreeMap::new();
        r.insert("memory".to_owned(), 120_000_000);
        r.insert("vcore".to_owned(), 2500);
        assert_eq!(render_resources(&r), "memory=120M vcore=2500m");
        assert_eq!(render_resources(&BTreeMap::new()), "(none)");
        assert_eq!(render_quantity("memory", 0), "0");
        assert_eq!(render_quantity("vcore", 3000), "3");
    }
}
