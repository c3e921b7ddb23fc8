//! Fuzz target: resource text as an agent's `--resources` gives it
//! (`cpus(role):2;mem:1024;ports:[31000-32000];name:{a,b}`, or a JSON array of
//! `Resource` objects), read by `Resources::parse` / `parse_with_role`, and
//! what the master does with the result.
//!
//! Input layout: byte 0 bit 0 reads the rest with `parse_with_role(_, "fuzz")`
//! instead of `parse`; the rest is the text (UTF-8, else ignored).
//!
//! Checked for every text that parses:
//! - the result is valid (`Resources::validate` of its entries);
//! - its text form (`Display`) parses back to the same resources (when no
//!   name or set item holds a delimiter of the format: see `plain`), and so
//!   does the JSON array of its entries;
//! - arithmetic: it contains itself, and doubled contains it; its scalars
//!   doubled less themselves are themselves again; its ranges and sets doubled
//!   are themselves (they add as unions); itself less itself is empty;
//! - the core's view (`units::to_core`) has no negative quantity, and the sum
//!   of two copies is twice one (to the byte for mem and disk, which the core
//!   keeps in bytes: a thousandth of a MB is not a whole byte), for values
//!   below 4e12 (an f64 carries those to the thousandth).

#![no_main]

use libfuzzer_sys::fuzz_target;
use unisched_mesos::master::units::to_core;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;

/// Whether the text form can say `r`: its name and set items hold none of
/// the format's delimiters and no space at either end. Upstream takes any
/// name that is not empty (`mem)x:1` is a resource named `mem)x`), and so does
/// the parser; only such a name cannot come back from its text.
fn plain(r: &v1::Resource) -> bool {
    let ok = |t: &str| t == t.trim() && !t.contains(['(', ')', ';', ':', '[', ']', '{', '}', ',']);
    ok(&r.name) && r.set.as_ref().is_none_or(|s| s.item.iter().all(|i| ok(i)))
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let Ok(text) = std::str::from_utf8(&data[1..]) else {
        return;
    };
    let parsed = if data[0] & 1 == 0 {
        Resources::parse(text)
    } else {
        Resources::parse_with_role(text, "fuzz")
    };
    let Ok(r) = parsed else {
        return;
    };
    let entries = r.to_vec();
    if let Err(e) = Resources::validate(&entries) {
        panic!("{text:?} parsed to invalid resources {r}: {e}");
    }

    // A scalar of 4e12 or more has no exact thousandths in an f64 (the
    // master's value type), and doubled it saturates: such values are left
    // out of the round trips and the doubling.
    let huge = entries
        .iter()
        .any(|x| x.scalar.as_ref().is_some_and(|v| v.value >= 4.0e12));
    if !r.is_empty() && !huge && entries.iter().all(plain) {
        let shown = r.to_string();
        match Resources::parse(&shown) {
            Ok(back) => assert_eq!(back, r, "{text:?} shown as {shown:?} parses to {back}"),
            Err(e) => panic!("{text:?} shown as {shown:?} does not parse: {e}"),
        }
    }
    let json: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            serde_json::from_slice(&unisched_mesos::codec::encode(
                e,
                unisched_mesos::codec::ContentType::Json,
            ))
            .expect("the codec writes JSON")
        })
        .collect();
    let json_text = serde_json::Value::Array(json).to_string();
    match Resources::parse(&json_text) {
        Ok(back) if !huge => assert_eq!(back, r, "{text:?} as JSON {json_text} parses to {back}"),
        Ok(_) => {}
        Err(e) => panic!("{text:?} as JSON {json_text} does not parse: {e}"),
    }

    assert!(r.contains(&r), "{r} does not contain itself");
    let mut doubled = r.clone();
    doubled.add(&r);
    assert!(doubled.contains(&r), "{doubled} does not contain {r}");
    // Scalars add up; ranges and sets add as unions (Mesos' semantics), so
    // doubling them changes nothing.
    let scalars = r.filter(|x| x.r#type() == v1::value::Type::Scalar);
    let others = r.filter(|x| x.r#type() != v1::value::Type::Scalar);
    if !huge {
        let mut back = scalars.clone();
        back.add(&scalars);
        back.subtract(&scalars);
        assert_eq!(
            back, scalars,
            "({scalars}) + ({scalars}) - ({scalars}) is {back}"
        );
    }
    let mut twice = others.clone();
    twice.add(&others);
    assert_eq!(twice, others, "({others}) + ({others}) is {twice}");
    let mut none = r.clone();
    none.subtract(&r);
    assert!(none.is_empty(), "({r}) - ({r}) is {none}");

    let one = to_core(r.iter());
    for (name, q) in &one.resources {
        assert!(q.value >= 0, "{r}: the core sees {name} = {}", q.value);
    }
    // The core's sums are in fixed point, so two copies are exactly twice one
    // for cpus and other scalars (thousandths); mem and disk are bytes, and a
    // thousandth of a MB is not a whole number of bytes, so each sum is
    // rounded once: doubled, one byte apart at most. Left out: saturated
    // values (beyond i64), and names with a value of 4e12 or more, which the
    // doubled copy's f64 (`Resource.scalar`, the wire's type) cannot carry to
    // the thousandth.
    let inexact: std::collections::HashSet<String> = entries
        .iter()
        .filter(|x| x.scalar.as_ref().is_some_and(|v| v.value >= 4.0e12))
        .map(|x| unisched_mesos::master::units::core_name(&x.name).to_string())
        .collect();
    let two = to_core(doubled.iter());
    for (name, q) in &one.resources {
        let twice = two.resources.get(name).map_or(0, |x| x.value);
        if q.value >= i64::MAX / 2 || inexact.contains(name) {
            continue;
        }
        let gap = (i128::from(twice) - 2 * i128::from(q.value)).abs();
        assert!(
            gap <= 1,
            "{r}: {name} is {} in the core, doubled {twice}",
            q.value
        );
    }
});
