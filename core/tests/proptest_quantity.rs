//! Property tests of configuration quantities: `parse_quantity` never panics,
//! and generated valid inputs convert to exactly the expected core units.

use proptest::prelude::*;
use unisched_core::config::parse_quantity;

const BINARY: &[(&str, u32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40)];
const DECIMAL: &[(&str, i64)] = &[
    ("", 1),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
];

proptest! {
    #[test]
    fn never_panics_on_any_text(name in prop_oneof![Just("memory".to_string()), Just("vcore".to_string()), ".*"], value in ".*") {
        let _ = parse_quantity(&name, &value);
    }

    #[test]
    fn never_panics_on_number_like_text(value in "[+-]?[0-9.]{0,30}[a-zA-Z]{0,3}") {
        let _ = parse_quantity("memory", &value);
        let _ = parse_quantity("vcore", &value);
    }

    #[test]
    fn binary_suffixes_are_exact(n in 0i64..1_000_000, s in 0usize..BINARY.len()) {
        let (suffix, shift) = BINARY[s];
        prop_assert_eq!(parse_quantity("memory", &format!("{n}{suffix}")), Ok(n << shift));
    }

    #[test]
    fn decimal_suffixes_are_exact(n in 0i64..1_000_000, s in 0usize..DECIMAL.len()) {
        let (suffix, mult) = DECIMAL[s];
        prop_assert_eq!(parse_quantity("memory", &format!("{n}{suffix}")), Ok(n * mult));
        prop_assert_eq!(parse_quantity("pods", &format!("+{n}{suffix}")), Ok(n * mult));
    }

    #[test]
    fn vcore_units(n in 0i64..1_000_000_000) {
        prop_assert_eq!(parse_quantity("vcore", &format!("{n}m")), Ok(n));
        prop_assert_eq!(parse_quantity("vcore", &n.to_string()), Ok(n * 1000));
        prop_assert_eq!(parse_quantity("vcore", &format!(" {n} ")), Ok(n * 1000));
    }

    #[test]
    fn milli_is_refused_outside_vcore(n in 0i64..1_000_000) {
        let text = format!("{n}m");
        prop_assert!(parse_quantity("memory", &text).is_err(), "{text} was accepted");
    }

    #[test]
    fn negative_values_are_refused(n in 1i64..1_000_000) {
        let text = format!("-{n}");
        prop_assert!(parse_quantity("memory", &text).is_err(), "{text} was accepted");
        let text = format!("-{n}m");
        prop_assert!(parse_quantity("vcore", &text).is_err(), "{text} was accepted");
    }

    #[test]
    fn decimal_fractions_are_exact(whole in 0i64..1000, tenths in 0i64..10) {
        prop_assert_eq!(parse_quantity("vcore", &format!("{whole}.{tenths}")), Ok(whole * 1000 + tenths * 100));
        prop_assert_eq!(parse_quantity("memory", &format!("{whole}.{tenths}k")), Ok(whole * 1000 + tenths * 100));
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap(n in 9u64..1000) {
        let text = format!("{n}Ei");
        prop_assert!(parse_quantity("memory", &text).is_err(), "{text} was accepted");
    }
}
