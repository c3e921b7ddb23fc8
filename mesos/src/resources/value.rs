//! Values of resources: scalars in fixed point (three decimal digits, as
//! Mesos does its arithmetic), ranges kept coalesced, and sets.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use crate::v1::value::Range;

/// A scalar quantity in thousandths. Mesos rounds every scalar to three
/// decimals before comparing or adding, so `0.1 + 0.2 == 0.3` holds here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scalar(i64);

impl Scalar {
    /// Zero.
    pub const ZERO: Scalar = Scalar(0);

    /// The nearest fixed-point value (halves away from zero).
    pub fn from_f64(value: f64) -> Scalar {
        Scalar((value * 1000.0).round() as i64)
    }

    /// A value given in thousandths.
    pub const fn from_millis(millis: i64) -> Scalar {
        Scalar(millis)
    }

    /// The value in thousandths.
    pub const fn millis(self) -> i64 {
        self.0
    }

    /// The value as a double, exact to the three decimals.
    pub fn to_f64(self) -> f64 {
        (self.0 / 1000) as f64 + (self.0 % 1000) as f64 / 1000.0
    }
}

impl Add for Scalar {
    type Output = Scalar;
    fn add(self, other: Scalar) -> Scalar {
        Scalar(self.0.saturating_add(other.0))
    }
}

impl Sub for Scalar {
    type Output = Scalar;
    fn sub(self, other: Scalar) -> Scalar {
        Scalar(self.0.saturating_sub(other.0))
    }
}

impl AddAssign for Scalar {
    fn add_assign(&mut self, other: Scalar) {
        *self = *self + other;
    }
}

impl SubAssign for Scalar {
    fn sub_assign(&mut self, other: Scalar) {
        *self = *self - other;
    }
}

impl fmt::Display for Scalar {
    /// Shortest text: `2`, `0.5`, `1.125`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let (whole, frac) = (abs / 1000, abs % 1000);
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:03}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// Ranges sorted by start with overlapping and adjacent ones merged
/// (`[1-2, 3-5]` becomes `[1-5]`).
pub fn coalesce(ranges: &[Range]) -> Vec<Range> {
    let mut sorted: Vec<(u64, u64)> = ranges.iter().map(|r| (r.begin, r.end)).collect();
    sorted.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(sorted.len());
    for (begin, end) in sorted {
        match out.last_mut() {
            Some(last) if begin <= last.end.saturating_add(1) => last.end = last.end.max(end),
            _ => out.push(Range { begin, end }),
        }
    }
    out
}

/// The union of two range lists, coalesced.
pub fn ranges_add(left: &[Range], right: &[Range]) -> Vec<Range> {
    let all: Vec<Range> = left.iter().chain(right).cloned().collect();
    coalesce(&all)
}

/// `left` without the numbers in `right`, coalesced.
pub fn ranges_subtract(left: &[Range], right: &[Range]) -> Vec<Range> {
    let right = coalesce(right);
    let mut out = Vec::new();
    for piece in coalesce(left) {
        let (mut begin, end) = (piece.begin, piece.end);
        let mut rest = true;
        for cut in &right {
            if cut.end < begin {
                continue;
            }
            if cut.begin > end {
                break;
            }
            if cut.begin > begin {
                out.push(Range {
                    begin,
                    end: cut.begin - 1,
                });
            }
            if cut.end >= end {
                rest = false;
                break;
            }
            begin = cut.end + 1;
        }
        if rest {
            out.push(Range { begin, end });
        }
    }
    out
}

/// Whether every number of `inner` is in `outer`.
pub fn ranges_contain(outer: &[Range], inner: &[Range]) -> bool {
    let outer = coalesce(outer);
    coalesce(inner)
        .iter()
        .all(|r| outer.iter().any(|o| o.begin <= r.begin && r.end <= o.end))
}

/// Whether two range lists hold the same numbers.
pub fn ranges_equal(left: &[Range], right: &[Range]) -> bool {
    coalesce(left) == coalesce(right)
}

/// Adds the items of `right` that `left` lacks, keeping `left`'s order.
pub fn set_add(left: &mut Vec<String>, right: &[String]) {
    for item in right {
        if !left.contains(item) {
            left.push(item.clone());
        }
    }
}

/// Removes the items of `right` from `left`.
pub fn set_subtract(left: &mut Vec<String>, right: &[String]) {
    left.retain(|item| !right.contains(item));
}

/// Whether every item of `inner` is in `outer`.
pub fn set_contains(outer: &[String], inner: &[String]) -> bool {
    inner.iter().all(|item| outer.contains(item))
}

/// Whether two sets hold the same items.
pub fn set_equal(left: &[String], right: &[String]) -> bool {
    set_contains(left, right) && set_contains(right, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(list: &[(u64, u64)]) -> Vec<Range> {
        list.iter()
            .map(|&(begin, end)| Range { begin, end })
            .collect()
    }

    fn text(ranges: &[Range]) -> String {
        let parts: Vec<String> = ranges
            .iter()
            .map(|r| format!("{}-{}", r.begin, r.end))
            .collect();
        parts.join(",")
    }

    #[test]
    fn scalars_are_fixed_point() {
        let cases = [
            (0.1 + 0.2, "0.3"),
            (2.0, "2"),
            (1.0005, "1.001"),
            (0.0004, "0"),
            (-1.5, "-1.5"),
        ];
        for (value, expect) in cases {
            assert_eq!(Scalar::from_f64(value).to_string(), expect);
        }
        assert_eq!(
            Scalar::from_f64(0.1) + Scalar::from_f64(0.2),
            Scalar::from_f64(0.3)
        );
        assert_eq!(
            (Scalar::from_f64(1.0) - Scalar::from_f64(0.999)).to_f64(),
            0.001
        );
        assert_eq!(Scalar::from_millis(1234).to_f64(), 1.234);
    }

    #[test]
    fn range_arithmetic() {
        let cases: [(&str, Vec<Range>, &str); 8] = [
            (
                "coalesce",
                coalesce(&r(&[(5, 6), (1, 2), (3, 3)])),
                "1-3,5-6",
            ),
            (
                "coalesce overlap",
                coalesce(&r(&[(1, 10), (2, 3), (9, 12)])),
                "1-12",
            ),
            (
                "add",
                ranges_add(&r(&[(1, 2)]), &r(&[(3, 4), (10, 10)])),
                "1-4,10-10",
            ),
            (
                "subtract middle",
                ranges_subtract(&r(&[(1, 10)]), &r(&[(4, 5)])),
                "1-3,6-10",
            ),
            (
                "subtract edges",
                ranges_subtract(&r(&[(1, 10)]), &r(&[(1, 1), (10, 12)])),
                "2-9",
            ),
            (
                "subtract all",
                ranges_subtract(&r(&[(1, 10)]), &r(&[(0, 20)])),
                "",
            ),
            (
                "subtract many",
                ranges_subtract(&r(&[(1, 5), (7, 9)]), &r(&[(2, 2), (4, 8)])),
                "1-1,3-3,9-9",
            ),
            (
                "subtract at max",
                ranges_subtract(&r(&[(0, u64::MAX)]), &r(&[(5, u64::MAX)])),
                "0-4",
            ),
        ];
        for (what, got, expect) in cases {
            assert_eq!(text(&got), expect, "{what}");
        }
        assert!(ranges_contain(&r(&[(1, 5), (6, 10)]), &r(&[(4, 7)])));
        assert!(!ranges_contain(&r(&[(1, 5), (7, 10)]), &r(&[(4, 7)])));
        assert!(ranges_equal(&r(&[(1, 2), (3, 4)]), &r(&[(1, 4)])));
    }

    #[test]
    fn set_arithmetic() {
        let mut set = vec!["a".to_string(), "b".to_string()];
        set_add(&mut set, &["b".to_string(), "c".to_string()]);
        assert_eq!(set, ["a", "b", "c"]);
        set_subtract(&mut set, &["a".to_string(), "z".to_string()]);
        assert_eq!(set, ["b", "c"]);
        assert!(set_contains(&set, &["c".to_string()]));
        assert!(set_equal(&set, &["c".to_string(), "b".to_string()]));
    }
}
