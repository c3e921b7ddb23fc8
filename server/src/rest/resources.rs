//! Resource map arithmetic the REST objects need, with upstream's rules for
//! percentages, headroom and minimums (`resources.go`).

use unisched_core::snapshot::ResourceMap;

/// Adds `b` into `a`.
pub fn add(a: &mut ResourceMap, b: &ResourceMap) {
    for (k, v) in b {
        *a.entry(k.clone()).or_insert(0) += v;
    }
}

/// Percent of `capacity` that `used` takes, type by type, as upstream's
/// `CalculateAbsUsedCapacity`: types `used` lacks are left out, nothing used
/// is 0 %, any use of a zero capacity is 100 %, and values stop at `i32::MAX`.
pub fn abs_used(capacity: &ResourceMap, used: &ResourceMap) -> ResourceMap {
    capacity
        .iter()
        .filter_map(|(name, &cap)| {
            let &u = used.get(name)?;
            let percent = if u <= 0 {
                0
            } else if cap <= 0 {
                100
            } else {
                let p = u as f64 / cap as f64 * 100.0;
                if p > f64::from(i32::MAX) {
                    i64::from(i32::MAX)
                } else {
                    p as i64
                }
            };
            Some((name.clone(), percent))
        })
        .collect()
}

/// `base - minus` for the types of `base` only.
pub fn sub_only_existing(base: &ResourceMap, minus: &ResourceMap) -> ResourceMap {
    base.iter()
        .map(|(k, v)| (k.clone(), v - minus.get(k).copied().unwrap_or(0)))
        .collect()
}

/// The smaller of each type present in either (a type in one only keeps its
/// value); `None` when both are.
pub fn component_wise_min(a: Option<ResourceMap>, b: Option<&ResourceMap>) -> Option<ResourceMap> {
    match (a, b) {
        (None, None) => None,
        (Some(a), None) => Some(a),
        (None, Some(b)) => Some(b.clone()),
        (Some(mut a), Some(b)) => {
            for (k, &v) in b {
                a.entry(k.clone())
                    .and_modify(|x| *x = (*x).min(v))
                    .or_insert(v);
            }
            Some(a)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, i64)]) -> ResourceMap {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn percentages_follow_upstream() {
        let cap = map(&[("memory", 200), ("vcore", 0), ("gpu", 4)]);
        let used = map(&[("memory", 51), ("vcore", 10)]);
        assert_eq!(
            abs_used(&cap, &used),
            map(&[("memory", 25), ("vcore", 100)])
        );
        assert_eq!(
            abs_used(&map(&[("x", 1)]), &map(&[("x", -3)])),
            map(&[("x", 0)])
        );
    }

    #[test]
    fn headroom_helpers() {
        let max = map(&[("memory", 100)]);
        let alloc = map(&[("memory", 30), ("vcore", 5)]);
        assert_eq!(sub_only_existing(&max, &alloc), map(&[("memory", 70)]));
        let parent = map(&[("memory", 50), ("vcore", 9)]);
        assert_eq!(
            component_wise_min(Some(map(&[("memory", 70)])), Some(&parent)),
            Some(map(&[("memory", 50), ("vcore", 9)]))
        );
        assert_eq!(component_wise_min(None, None), None);
    }
}
