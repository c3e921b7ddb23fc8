//! How Mesos names map onto the core: roles onto queue paths, scalar
//! resources onto the core's integer quantities, and the ids the master
//! gives applications and allocations.
//!
//! Scalars: `cpus` become the core's `vcore` in thousandths (Mesos keeps three
//! decimals, so this is exact), `mem` and `disk` become `memory` and `disk` in
//! bytes (a MB is 2^20 bytes; a fraction of a byte is rounded), and every
//! other scalar keeps its name, in thousandths (custom scalars named `vcore`
//! or `memory`, or starting with `mesos:`, get the prefix `mesos:`, so none
//! adds to cpus or mem). Ranges and sets (ports) stay
//! with the master: the core decides who gets an agent by its scalars, and an
//! offer carries the agent's free ranges and sets with them.

use std::borrow::Cow;

use unisched_si as si;

use crate::resources::value::Scalar;
use crate::v1;

/// Bytes in a Mesos megabyte.
const MB: f64 = 1_048_576.0;

/// How the core counts a scalar: in thousandths of the Mesos unit, or (for
/// mem and disk) in bytes of the Mesos MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Thousandths,
    Bytes,
}

impl Unit {
    /// Core units per Mesos unit.
    fn scale(self) -> f64 {
        match self {
            Unit::Thousandths => 1000.0,
            Unit::Bytes => MB,
        }
    }

    /// A value in this unit as Mesos thousandths: thousandths as they are,
    /// bytes to MB thousandths rounded half away from zero (saturated at the
    /// ends of i64), in integers.
    fn to_millis(self, value: i64) -> i64 {
        if self == Unit::Thousandths {
            return value;
        }
        let scaled = i128::from(value) * 1000;
        let mb = MB as i128;
        let half = if scaled < 0 { -mb / 2 } else { mb / 2 };
        let millis = (scaled + half) / mb;
        millis.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// A value in Mesos thousandths in this unit: thousandths stay as they
    /// are, MB thousandths become bytes, rounded half away from zero and
    /// saturated at the ends of i64. Integer arithmetic throughout, so the
    /// result is exact at every magnitude (an f64 holds whole numbers exactly
    /// only up to 2^53, which a few thousand TB of memory in bytes passes).
    fn of_millis(self, millis: i64) -> i64 {
        if self == Unit::Thousandths {
            return millis;
        }
        let scaled = i128::from(millis) * MB as i128;
        let half = if scaled < 0 { -500 } else { 500 };
        let bytes = (scaled + half) / 1000;
        bytes.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// The prefix that keeps a custom Mesos scalar apart from the core's own
/// names: a Mesos resource named `vcore` or `memory` (which `cpus` and
/// `mem` become), or one that starts with the prefix, reaches the core as
/// `mesos:vcore`, `mesos:memory`, `mesos:mesos:...`, so that the mapping is
/// one to one and no custom scalar adds to (or overwrites) cpus or mem.
const ESCAPE: &str = "mesos:";

/// The core's name and unit for a Mesos scalar resource name.
fn core_unit(name: &str) -> (Cow<'_, str>, Unit) {
    match name {
        "cpus" => (Cow::Borrowed("vcore"), Unit::Thousandths),
        "mem" => (Cow::Borrowed("memory"), Unit::Bytes),
        "disk" => (Cow::Borrowed("disk"), Unit::Bytes),
        "vcore" | "memory" => (Cow::Owned(format!("{ESCAPE}{name}")), Unit::Thousandths),
        other if other.starts_with(ESCAPE) => {
            (Cow::Owned(format!("{ESCAPE}{other}")), Unit::Thousandths)
        }
        other => (Cow::Borrowed(other), Unit::Thousandths),
    }
}

/// The Mesos name and unit of a core resource name (the inverse of
/// [`core_unit`]).
fn mesos_unit(core_name: &str) -> (&str, Unit) {
    match core_name {
        "vcore" => ("cpus", Unit::Thousandths),
        "memory" => ("mem", Unit::Bytes),
        "disk" => ("disk", Unit::Bytes),
        other => (
            other.strip_prefix(ESCAPE).unwrap_or(other),
            Unit::Thousandths,
        ),
    }
}

/// A `DurationInfo` as a `Duration`; a negative one is zero.
pub fn duration(info: &v1::DurationInfo) -> std::time::Duration {
    std::time::Duration::from_nanos(u64::try_from(info.nanoseconds).unwrap_or(0))
}

/// The core's name of a Mesos scalar resource name.
pub fn core_name(name: &str) -> Cow<'_, str> {
    core_unit(name).0
}

/// A Mesos scalar value in core units.
pub fn scalar_to_core(name: &str, value: f64) -> (String, i64) {
    let (core, unit) = core_unit(name);
    (
        core.into_owned(),
        unit.of_millis(Scalar::from_f64(value).millis()),
    )
}

/// A core quantity as a Mesos scalar (three decimals, as Mesos keeps them).
pub fn scalar_from_core(core_name: &str, value: i64) -> (String, f64) {
    let (name, unit) = mesos_unit(core_name);
    let v = value as f64 / unit.scale();
    (name.to_string(), (v * 1000.0).round() / 1000.0)
}

/// How much of the Mesos scalar `name` a core resource map holds, in Mesos
/// thousandths (bytes to MB thousandths rounded half away from zero, in
/// integers); `None` when it holds none of it.
pub fn granted_scalar(core: &si::Resource, name: &str) -> Option<Scalar> {
    let (core_name, unit) = core_unit(name);
    // A lease names a few types: a scan of them is cheaper than hashing
    // the name with the map's SipHash.
    let q = if core.resources.len() <= 8 {
        core.resources
            .iter()
            .find_map(|(k, q)| (*k == core_name).then_some(q))?
    } else {
        core.resources.get(core_name.as_ref())?
    };
    Some(Scalar::from_millis(unit.to_millis(q.value)))
}

/// The scalar part of Mesos resources as a core resource map (sums per name).
/// Each value is rounded to thousandths and the sums are kept in fixed point,
/// as Mesos does its resource arithmetic, so the sum of two copies is exactly
/// twice one.
pub fn to_core<'a>(resources: impl IntoIterator<Item = &'a v1::Resource>) -> si::Resource {
    let mut sums: std::collections::BTreeMap<&str, Scalar> = Default::default();
    for r in resources {
        if r.r#type() == v1::value::Type::Scalar
            && let Some(s) = &r.scalar
        {
            *sums.entry(r.name.as_str()).or_default() += Scalar::from_f64(s.value);
        }
    }
    si::Resource {
        resources: sums
            .into_iter()
            .map(|(name, v)| {
                let (core, unit) = core_unit(name);
                let value = unit.of_millis(v.millis());
                (core.into_owned(), si::Quantity { value })
            })
            .filter(|(_, q)| q.value != 0)
            .collect(),
    }
}

/// Characters a role component keeps as they are in a queue name; the others
/// are written `#XX` (hex of each UTF-8 byte), so the mapping is one to one.
fn kept(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-')
}

/// The queue name of the `*` role (any role name maps elsewhere: `@` is
/// always escaped in role names).
pub const STAR_QUEUE: &str = "@default@";

/// The queue path of a role: `a/b` is `root.a.b`, `*` is `root.@default@`,
/// characters a queue name cannot hold escaped. `Err` when a part would be
/// longer than a queue name may be.
pub fn role_queue(role: &str) -> Result<String, String> {
    if role == "*" {
        return Ok(format!("root.{STAR_QUEUE}"));
    }
    let mut path = String::from("root");
    for part in role.split('/') {
        let mut name = String::with_capacity(part.len());
        for c in part.chars() {
            if kept(c) {
                name.push(c);
            } else {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    name.push_str(&format!("#{b:02X}"));
                }
            }
        }
        if name.chars().count() > unisched_core::config::names::MAX_QUEUE_NAME_LEN {
            return Err(format!(
                "role '{role}' cannot be mapped to a queue: its part '{part}' becomes '{name}', longer than {} characters",
                unisched_core::config::names::MAX_QUEUE_NAME_LEN
            ));
        }
        path.push('.');
        path.push_str(&name);
    }
    Ok(path)
}

/// The role of a queue path (the inverse of [`role_queue`]): `root.a.b` is
/// `a/b`, `root.@default@` is `*`, escapes undone. `None` for `root` itself,
/// a path outside it, or an escape that does not decode.
pub fn queue_role(path: &str) -> Option<String> {
    let rest = path.strip_prefix("root.")?;
    if rest == STAR_QUEUE {
        return Some("*".to_string());
    }
    let mut parts = Vec::new();
    for part in rest.split('.') {
        let mut bytes = Vec::with_capacity(part.len());
        let mut chars = part.bytes();
        while let Some(b) = chars.next() {
            if b == b'#' {
                let hex = [chars.next()?, chars.next()?];
                let hex = std::str::from_utf8(&hex).ok()?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
            } else {
                bytes.push(b);
            }
        }
        parts.push(String::from_utf8(bytes).ok()?);
    }
    Some(parts.join("/"))
}

/// Checks a role name as Mesos does (`*`, or `/`-separated parts that are not
/// empty, `.`, `..` or `*`, do not start with `-`, and hold no whitespace or
/// backspace).
pub fn validate_role(role: &str) -> Result<(), String> {
    if role == "*" {
        return Ok(());
    }
    if role.is_empty() {
        return Err("Role names cannot be the empty string".to_string());
    }
    if role.starts_with('/') {
        return Err(format!("Role '{role}' cannot start with a slash"));
    }
    if role.ends_with('/') {
        return Err(format!("Role '{role}' cannot end with a slash"));
    }
    if role.contains("//") {
        return Err(format!("Role '{role}' cannot contain two adjacent slashes"));
    }
    for part in role.split('/') {
        match part {
            "." | ".." | "*" => {
                return Err(format!(
                    "Role '{role}' cannot include '{part}' as a component"
                ));
            }
            _ if part.starts_with('-') => {
                return Err(format!(
                    "Role component '{part}' is invalid because it starts with a dash"
                ));
            }
            _ if part
                .chars()
                .any(|c| c.is_whitespace() || c == '\u{8}' || c == '\u{b}') =>
            {
                return Err(format!(
                    "Role component '{part}' is invalid because it contains backspace or whitespace"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The core application of a framework in one of its roles.
pub fn app_id(framework: &str, role: &str) -> String {
    joined(&[framework, "|", role])
}

/// The core allocation id of a task (also its allocation key).
pub fn task_allocation_id(framework: &str, task: &str) -> String {
    joined(&[framework, "|task|", task])
}

/// The core allocation id of an executor's own resources on an agent.
pub fn executor_allocation_id(framework: &str, executor: &str, agent: &str) -> String {
    joined(&[framework, "|executor|", executor, "|", agent])
}

/// The parts one after another, in a string allocated once (ids made per
/// offer or per call: `format!` costs several times as much).
fn joined(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.push_str(p);
    }
    out
}

/// The libprocess process number of agent `agent_id` (`slave(N)`): the
/// master numbers its agents from 1 in the order of their ids (`<master
/// id>-S0` is `slave(1)`), so an agent's own code can name its pid (an
/// executor's MESOS_SLAVE_PID) from its id alone.
pub fn agent_process(agent_id: &str) -> Option<u32> {
    let (_, n) = agent_id.rsplit_once("-S")?;
    n.parse::<u32>().ok()?.checked_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_map_to_queue_paths_one_to_one() {
        let cases = [
            ("*", "root.@default@"),
            ("web", "root.web"),
            ("eng/web", "root.eng.web"),
            ("a.b", "root.a#2Eb"),
            ("@default@", "root.#40default#40"),
            ("x#y", "root.x#23y"),
            ("é", "root.#C3#A9"),
        ];
        for (role, queue) in cases {
            assert_eq!(role_queue(role).unwrap(), queue, "{role}");
            assert_eq!(queue_role(queue).as_deref(), Some(role), "{queue}");
        }
        assert!(role_queue(&"x".repeat(65)).is_err());
        for not_a_role in ["root", "other.a", "root.a#4", "root.#ZZ", "root.#FF"] {
            assert_eq!(queue_role(not_a_role), None, "{not_a_role}");
        }
    }

    #[test]
    fn role_validation_follows_mesos() {
        let cases = [
            ("*", true),
            ("a/b", true),
            ("", false),
            ("/a", false),
            ("a/", false),
            ("a//b", false),
            ("a/./b", false),
            ("a/../b", false),
            ("a/*", false),
            ("-a", false),
            ("a b", false),
            ("a.b", true),
        ];
        for (role, ok) in cases {
            assert_eq!(validate_role(role).is_ok(), ok, "{role}");
        }
    }

    #[test]
    fn scalars_round_trip_through_core_units() {
        for (name, v) in [
            ("cpus", 0.01),
            ("cpus", 2.5),
            ("mem", 32.0),
            ("disk", 4096.0),
            ("gpus", 1.0),
            ("memory", 3.0),
            ("vcore", 0.5),
            ("mesos:memory", 2.0),
            ("mesos:", 1.0),
        ] {
            let (core, q) = scalar_to_core(name, v);
            let (back, w) = scalar_from_core(&core, q);
            assert_eq!((back.as_str(), w), (name, v));
        }
        assert_eq!(scalar_to_core("cpus", 1.5), ("vcore".to_string(), 1500));
        // Custom scalars never take the core names of cpus and mem.
        assert_eq!(
            scalar_to_core("memory", 3.0),
            ("mesos:memory".to_string(), 3000)
        );
        assert_eq!(
            scalar_to_core("mesos:memory", 2.0),
            ("mesos:mesos:memory".to_string(), 2000)
        );
        assert_eq!(
            scalar_to_core("mem", 1.0),
            ("memory".to_string(), 1_048_576)
        );
    }

    fn scalar(name: &str, value: f64) -> v1::Resource {
        v1::Resource {
            name: name.to_string(),
            r#type: v1::value::Type::Scalar as i32,
            scalar: Some(v1::value::Scalar { value }),
            ..Default::default()
        }
    }

    #[test]
    fn custom_scalars_named_like_core_resources_stay_apart() {
        // An agent with cpus and mem and custom scalars that carry the core
        // names those two become: each keeps its own value in the core.
        let core = to_core(&[
            scalar("cpus", 2.0),
            scalar("mem", 1.0),
            scalar("vcore", 7.0),
            scalar("memory", 5.0),
        ]);
        let q = |n: &str| core.resources.get(n).map(|q| q.value);
        assert_eq!(q("vcore"), Some(2000));
        assert_eq!(q("memory"), Some(1_048_576));
        assert_eq!(q("mesos:vcore"), Some(7000));
        assert_eq!(q("mesos:memory"), Some(5000));
        assert_eq!(core.resources.len(), 4);
        let granted = |n: &str| granted_scalar(&core, n).map(Scalar::to_f64);
        assert_eq!(granted("memory"), Some(5.0));
        assert_eq!(granted("mem"), Some(1.0));
        assert_eq!(granted("vcore"), Some(7.0));
    }

    #[test]
    fn a_grant_in_bytes_reads_as_the_float_formula_did() {
        // The float reading it replaced: bytes / MB, rounded to thousandths.
        let old = |bytes: i64| Scalar::from_f64(((bytes as f64 / MB) * 1000.0).round() / 1000.0);
        let mut values: Vec<i64> = (-3000..3000).collect();
        for mb in [1i64, 32, 4096, 1 << 20] {
            for d in -600..600 {
                values.push(mb * 1_048_576 + d);
                values.push(mb * 1_048_576 / 2 + d);
            }
        }
        // Exactly half a thousandth of a MB, both ways.
        values.extend([524, 525, 1048, 1049, -524, -525]);
        for v in values {
            let core = si::Resource {
                resources: [("memory".to_string(), si::Quantity { value: v })].into(),
            };
            assert_eq!(granted_scalar(&core, "mem"), Some(old(v)), "{v} bytes");
        }
    }

    #[test]
    fn core_sums_are_fixed_point_and_exact_at_any_size() {
        let q = |r: &si::Resource, n: &str| r.resources.get(n).map(|q| q.value);
        // Thousandths, as Mesos rounds: 0.1 + 0.2 is 0.3 and a fourth decimal
        // goes.
        let small = to_core(&[
            scalar("cpus", 0.1),
            scalar("cpus", 0.2),
            scalar("mem", 0.0004),
        ]);
        assert_eq!(q(&small, "vcore"), Some(300));
        assert_eq!(q(&small, "memory"), None);
        assert_eq!(q(&to_core(&[scalar("mem", 0.001)]), "memory"), Some(1049));
        // Beyond 2^53 thousandths (where an f64 is no longer exact) two copies
        // are still twice one: 4.5e15 of a custom scalar, and mem of a few
        // billion MB (in bytes past 2^53).
        for (name, core, v) in [
            ("zis", "zis", 4_555_555_555_555_555.0),
            ("mem", "memory", 4.0e9 + 0.123),
        ] {
            let one = q(&to_core(&[scalar(name, v)]), core).unwrap();
            let two = q(&to_core(&[scalar(name, v), scalar(name, v)]), core).unwrap();
            assert!(
                (i128::from(two) - 2 * i128::from(one)).abs() <= 1,
                "{name}: {one} doubled {two}"
            );
        }
        // Saturated at the end of i64 rather than wrapped.
        let huge = to_core(&[scalar("disk", 1.0e300), scalar("disk", 1.0e300)]);
        assert_eq!(q(&huge, "disk"), Some(i64::MAX));
    }

    #[test]
    fn an_agents_process_follows_from_its_id() {
        assert_eq!(agent_process("c0ffee-S0"), Some(1));
        assert_eq!(agent_process("a-b-S12"), Some(13));
        for no in ["c0ffee", "c0ffee-S", "c0ffee-Sx", "c0ffee-S4294967295"] {
            assert_eq!(agent_process(no), None, "{no}");
        }
    }
}
