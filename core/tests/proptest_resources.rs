//! Property tests of resource arithmetic: checked operations never panic and
//! agree with wide integer arithmetic, fits_in and dominates are consistent,
//! and dominant shares grow with usage.

use proptest::prelude::*;
use unisched_core::resources::{Lanes, MAX_RESOURCE_TYPES, Resource};

fn any_resource() -> impl Strategy<Value = Resource> {
    prop::array::uniform16(any::<i64>()).prop_map(Resource)
}

fn small_resource() -> impl Strategy<Value = Resource> {
    prop::array::uniform16(0i64..1_000_000).prop_map(Resource)
}

/// Values that often sit at or near the ends of `i64`, where saturation matters.
fn edge_resource() -> impl Strategy<Value = Resource> {
    let lane = prop_oneof![
        any::<i64>(),
        Just(i64::MAX),
        Just(i64::MIN),
        (i64::MAX - 1000)..=i64::MAX,
        i64::MIN..=(i64::MIN + 1000),
        -1000i64..1000,
    ];
    prop::array::uniform16(lane).prop_map(Resource)
}

proptest! {
    #[test]
    fn plus_and_minus_saturate_lane_by_lane(a in edge_resource(), b in edge_resource()) {
        let mut sum = Resource::ZERO;
        let mut diff = Resource::ZERO;
        for i in 0..MAX_RESOURCE_TYPES {
            sum.0[i] = a.0[i].saturating_add(b.0[i]);
            diff.0[i] = a.0[i].saturating_sub(b.0[i]);
        }
        prop_assert_eq!(a.plus(&b), sum);
        prop_assert_eq!(a.minus(&b), diff);
        let mut x = a;
        x.add_assign(&b);
        prop_assert_eq!(x, sum);
        let mut y = a;
        y.sub_assign(&b);
        prop_assert_eq!(y, diff);
    }

    #[test]
    fn checked_add_and_sub_never_panic_and_are_exact(a in any_resource(), b in any_resource()) {
        let wide = |f: fn(i128, i128) -> i128| -> Option<Resource> {
            let mut out = Resource::ZERO;
            for i in 0..MAX_RESOURCE_TYPES {
                out.0[i] = i64::try_from(f(i128::from(a.0[i]), i128::from(b.0[i]))).ok()?;
            }
            Some(out)
        };
        prop_assert_eq!(a.checked_add(&b), wide(|x, y| x + y));
        prop_assert_eq!(a.checked_sub(&b), wide(|x, y| x - y));
        // The saturating forms never panic either.
        let _ = (a.plus(&b), a.minus(&b), a.times(3), a.min(&b), a.clamp_negative());
    }

    #[test]
    fn add_then_sub_is_identity(a in small_resource(), b in small_resource()) {
        let sum = a.checked_add(&b).unwrap();
        prop_assert_eq!(sum.checked_sub(&b).unwrap(), a);
        prop_assert!(a.fits_in(&sum));
        prop_assert!(sum.dominates(&a));
    }

    #[test]
    fn fits_in_and_dominates_are_mirrors(a in any_resource(), b in any_resource()) {
        prop_assert_eq!(a.fits_in(&b), b.dominates(&a));
        prop_assert!(a.fits_in(&a) && a.dominates(&a));
        if a.fits_in(&b) && b.fits_in(&a) {
            prop_assert_eq!(a, b);
        }
        prop_assert!(a.fits_in(&Resource::UNLIMITED));
    }

    #[test]
    fn fits_in_is_transitive(a in small_resource(), b in small_resource(), c in small_resource()) {
        let ab = a.plus(&b);
        let abc = ab.plus(&c);
        prop_assert!(a.fits_in(&ab) && ab.fits_in(&abc) && a.fits_in(&abc));
    }

    #[test]
    fn dominant_share_is_monotone(
        used in small_resource(),
        more in small_resource(),
        base in prop::array::uniform16(prop_oneof![Just(0i64), Just(i64::MAX), 1i64..1_000_000]).prop_map(Resource),
    ) {
        let bigger = used.plus(&more);
        prop_assert!(used.dominant_share(&base) <= bigger.dominant_share(&base));
        prop_assert_eq!(Resource::ZERO.dominant_share(&base), 0);
    }

    #[test]
    fn dominant_share_never_panics(a in any_resource(), b in any_resource()) {
        let _ = a.dominant_share(&b);
    }
}

/// A value vector that uses only the first `n` types, as every ask, usage and
/// capacity does once `n` names are interned.
fn value_in_lanes() -> impl Strategy<Value = (usize, Resource, Resource)> {
    (1usize..=MAX_RESOURCE_TYPES).prop_flat_map(|n| {
        let lanes = prop::collection::vec(0i64..(1 << 53), n);
        (Just(n), lanes.clone(), lanes).prop_map(|(n, a, b)| {
            let (mut x, mut y) = (Resource::ZERO, Resource::ZERO);
            x.0[..n].copy_from_slice(&a);
            y.0[..n].copy_from_slice(&b);
            (n, x, y)
        })
    })
}

proptest! {
    #[test]
    fn lane_limited_ops_match_full_width_on_value_vectors(
        (n, a, b) in value_in_lanes(),
        limit in edge_resource(),
        base in prop::array::uniform16(prop_oneof![Just(0i64), Just(i64::MAX), 1i64..1_000_000]).prop_map(Resource),
    ) {
        let lanes = Lanes::new(n);
        // The accumulator may be a value vector or a limit (MAX in unused lanes).
        for acc in [a, limit] {
            let (mut full, mut part) = (acc, acc);
            full.add_assign(&b);
            part.add_in(&b, lanes);
            prop_assert_eq!(full, part);
            let (mut full, mut part) = (acc, acc);
            full.sub_assign(&b);
            part.sub_in(&b, lanes);
            prop_assert_eq!(full, part);
        }
        let non_negative_limit = limit.clamp_negative();
        prop_assert_eq!(a.fits_in(&b), a.fits_in_lanes(&b, lanes));
        prop_assert_eq!(a.fits_in(&non_negative_limit), a.fits_in_lanes(&non_negative_limit, lanes));
        prop_assert_eq!(
            a.plus(&b).fits_in(&non_negative_limit),
            a.plus_fits_in_lanes(&b, &non_negative_limit, lanes)
        );
        prop_assert_eq!(a.dominant_share(&base), a.dominant_share_in(&base, lanes));
    }
}
