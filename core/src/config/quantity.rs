//! Resource quantities: config text (`10`, `250m`, `4Gi`) to core units, and the small
//! arithmetic on resource maps that validation needs.
//!
//! Core units follow YuniKorn: `vcore` is counted in milli-cores (`vcore: 2` is 2000,
//! `vcore: 250m` is 250); every other resource is a plain integer after its suffix is
//! applied (`memory: 1Mi` is 1048576).

use std::collections::BTreeMap;

/// The resource whose plain values are cores and whose core unit is the milli-core.
pub const VCORE: &str = "vcore";

/// Decimal and binary suffixes with their multipliers. `K` is accepted as a synonym of
/// `k`, as upstream does.
const SUFFIXES: &[(&str, u128)] = &[
    ("", 1),
    ("k", 1_000),
    ("K", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
];

/// Converts one configured quantity of `resource_name` to core units.
///
/// Accepts an optional `+`, digits with an optional decimal fraction, and an optional
/// suffix (`k K M G T P E`, `Ki Mi Gi Ti Pi Ei`, and `m` for `vcore` only). Whitespace is
/// ignored. Rejects negative values, results that are not a whole number of core units,
/// results beyond `i64::MAX`, and unknown suffixes.
pub fn parse_quantity(resource_name: &str, value: &str) -> Result<i64, String> {
    let text: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    let shown = || format!("quantity '{value}' for resource '{resource_name}'");
    if text.is_empty() {
        return Err(format!("{} is empty", shown()));
    }
    let unsigned = match text.as_bytes()[0] {
        b'-' => return Err(format!("{} is negative, which is not allowed", shown())),
        b'+' => &text[1..],
        _ => text.as_str(),
    };
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(format!(
            "{} is not a number: expected digits with an optional suffix such as 500m, 10, 4G or 8Gi",
            shown()
        ));
    }
    let is_vcore = resource_name == VCORE;
    let multiplier = match SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        Some((_, m)) => *m,
        None if suffix == "m" && is_vcore => 1,
        None if suffix == "m" => {
            return Err(format!(
                "{} uses the milli suffix 'm', which only vcore accepts",
                shown()
            ));
        }
        None => {
            return Err(format!(
                "{} has an unknown suffix '{suffix}' (expected k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei{})",
                shown(),
                if is_vcore { ", or m" } else { "" }
            ));
        }
    };
    // Cores become milli-cores unless the value was already given in milli.
    let scale = if is_vcore && suffix != "m" {
        multiplier * 1000
    } else {
        multiplier
    };
    let overflow = || format!("{} is too large for a 64-bit integer", shown());
    let mut digits: u128 = 0;
    for d in whole.bytes().chain(fraction.bytes()) {
        digits = digits
            .checked_mul(10)
            .and_then(|v| v.checked_add(u128::from(d - b'0')))
            .ok_or_else(overflow)?;
    }
    let divisor = u32::try_from(fraction.len())
        .ok()
        .and_then(|n| 10u128.checked_pow(n))
        .ok_or_else(overflow)?;
    let scaled = digits.checked_mul(scale).ok_or_else(overflow)?;
    if scaled % divisor != 0 {
        return Err(format!(
            "{} is not a whole number of {}",
            shown(),
            if is_vcore { "milli-cores" } else { "units" }
        ));
    }
    i64::try_from(scaled / divisor).map_err(|_| overflow())
}

/// Formats a resource map for messages: `{memory: 100, vcore: 1500m}`.
pub fn format_resources(res: &BTreeMap<String, i64>) -> String {
    let parts: Vec<String> = res
        .iter()
        .map(|(name, v)| {
            if name == VCORE {
                format!("{name}: {v}m")
            } else {
                format!("{name}: {v}")
            }
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// True when every type of `small` that `max` defines is within it; types `max` does not
/// define are unlimited (upstream's "fit in max, undefined is unlimited").
pub fn fits_in_max(small: &BTreeMap<String, i64>, max: &BTreeMap<String, i64>) -> bool {
    small
        .iter()
        .all(|(name, v)| max.get(name).is_none_or(|m| v <= m))
}

/// The per-type minimum of two max maps, where a type missing from one side is unlimited
/// there.
pub fn min_of_maxes(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut out = a.clone();
    for (name, v) in b {
        out.entry(name.clone())
            .and_modify(|cur| *cur = (*cur).min(*v))
            .or_insert(*v);
    }
    out
}

/// Adds `add` into `sum` per type, saturating rather than overflowing.
pub fn add_into(sum: &mut BTreeMap<String, i64>, add: &BTreeMap<String, i64>) {
    for (name, v) in add {
        let cur = sum.entry(name.clone()).or_insert(0);
        *cur = cur.saturating_add(*v);
    }
}

/// True when no type has a non-zero value.
pub fn is_zero(res: &BTreeMap<String, i64>) -> bool {
    res.values().all(|v| *v == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(resource: &str, input: &str, expect: &str) {
        let got = match parse_quantity(resource, input) {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        };
        assert!(
            got == expect || (expect.starts_with("error: ") && got.contains(&expect[7..])),
            "{resource}={input:?}: got {got:?}, expected {expect:?}"
        );
    }

    #[test]
    fn plain_and_suffixed_quantities() {
        check("memory", "0", "0");
        check("memory", "100", "100");
        check("memory", "+7", "7");
        check("memory", " 1 0 ", "10");
        check("memory", "1k", "1000");
        check("memory", "1K", "1000");
        check("memory", "2M", "2000000");
        check("memory", "3G", "3000000000");
        check("memory", "1T", "1000000000000");
        check("memory", "1P", "1000000000000000");
        check("memory", "9E", "9000000000000000000");
        check("memory", "1Ki", "1024");
        check("memory", "1Mi", "1048576");
        check("memory", "1Gi", "1073741824");
        check("memory", "1Ti", "1099511627776");
        check("memory", "1Pi", "1125899906842624");
        check("memory", "7Ei", "8070450532247928832");
        check("memory", "1.5Gi", "1610612736");
        check("memory", "0.5k", "500");
        check("memory", "9223372036854775807", "9223372036854775807");
        check("pods", "12", "12");
    }

    #[test]
    fn vcore_is_counted_in_milli() {
        check("vcore", "10", "10000");
        check("vcore", "250m", "250");
        check("vcore", "0.5", "500");
        check("vcore", "1k", "1000000");
        check("vcore", "1500m", "1500");
        check("vcore", "0m", "0");
    }

    #[test]
    fn rejected_quantities() {
        check("memory", "-1", "error: is negative");
        check("vcore", "-100m", "error: is negative");
        check("memory", "", "error: is empty");
        check("memory", "   ", "error: is empty");
        check("memory", "abc", "error: is not a number");
        check("memory", ".", "error: is not a number");
        check("memory", "1.2.3", "error: is not a number");
        check("memory", "10X", "error: unknown suffix 'X'");
        check("memory", "10mi", "error: unknown suffix 'mi'");
        check("memory", "10m", "error: only vcore accepts");
        check("vcore", "1.5m", "error: not a whole number of milli-cores");
        check(
            "vcore",
            "0.0005",
            "error: not a whole number of milli-cores",
        );
        check("memory", "0.5", "error: not a whole number of units");
        check("memory", "9223372036854775808", "error: too large");
        check("memory", "8Ei", "error: too large");
        check("memory", "10E", "error: too large");
        check("vcore", "9223372036854776", "error: too large");
        check(
            "memory",
            "999999999999999999999999999999999999999999",
            "error: too large",
        );
        check("memory", "1e3", "error: unknown suffix 'e3'");
    }

    #[test]
    fn map_helpers() {
        let m = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        assert!(fits_in_max(&m(&[("memory", 5)]), &m(&[("memory", 5)])));
        assert!(fits_in_max(&m(&[("gpu", 5)]), &m(&[("memory", 1)])));
        assert!(!fits_in_max(&m(&[("memory", 6)]), &m(&[("memory", 5)])));
        assert_eq!(
            min_of_maxes(
                &m(&[("memory", 5), ("vcore", 9)]),
                &m(&[("memory", 3), ("gpu", 1)])
            ),
            m(&[("memory", 3), ("vcore", 9), ("gpu", 1)])
        );
        assert_eq!(
            format_resources(&m(&[("memory", 5), ("vcore", 1500)])),
            "{memory: 5, vcore: 1500m}"
        );
    }
}
