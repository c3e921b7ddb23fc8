//! Property tests of resource arithmetic: checked operations never panic and
//! agree with wide integer arithmetic, fits_in and dominates are consistent,
//! and dominant shares grow with usage.

use proptest::prelude::*;
use unisched_core::resources::{MAX_RESOURCE_TYPES, Resource};

fn any_resource() -> impl Strategy<Value = Resource> {
    prop::array::uniform16(any::<i64>()).prop_map(Resource)
}

fn small_resource() -> impl Strategy<Value = Resource> {
    prop::array::uniform16(0i64..1_000_000).prop_map(Resource)
}

proptest! {
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
