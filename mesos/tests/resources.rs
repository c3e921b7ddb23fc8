//! Resources against Mesos' semantics: the agent resource text, arithmetic,
//! containment with ranges, sets and reservations, role filters, whole-unit
//! disks and shared volumes, and validation of framework input.

use unisched_mesos::codec::{ContentType, decode};
use unisched_mesos::resources::{self, ResourceError, Resources, validate_resource};
use unisched_mesos::v1;

fn parse(text: &str) -> Resources {
    Resources::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A `Resource` from Mesos JSON.
fn res(json: &str) -> v1::Resource {
    decode(json.as_bytes(), ContentType::Json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

#[test]
fn parses_agent_text() {
    let cases = [
        (
            "cpus:2;mem:1024;disk:4096;ports:[31000-32000]",
            "cpus:2; mem:1024; disk:4096; ports:[31000-32000]",
        ),
        ("cpus(role):2;cpus:1", "cpus(role):2; cpus:1"),
        ("cpus(a/b):2", "cpus(a/b):2"),
        ("cpus(*):2", "cpus:2"),
        ("cpus:1;cpus:0.5", "cpus:1.5"),
        ("cpus:1.0005", "cpus:1.001"),
        ("cpus:0.0001", "{}"),
        ("cpus:0", "{}"),
        ("", "{}"),
        (";;cpus:1;", "cpus:1"),
        (" cpus : 2 ; mem:1 ", "cpus:2; mem:1"),
        ("ports:[1-2,3-5, 10-20]", "ports:[1-5, 10-20]"),
        ("ports:[10-20];ports:[21-30]", "ports:[10-30]"),
        ("disks:{a,b}", "disks:{a, b}"),
        ("gpus:1e0", "gpus:1"),
        (
            r#"[{"name":"cpus","type":"SCALAR","scalar":{"value":2}},
                {"name":"mem","type":"SCALAR","scalar":{"value":512},"role":"r"},
                {"name":"ports","type":"RANGES","ranges":{"range":[{"begin":1,"end":3}]}}]"#,
            "cpus:2; mem(r):512; ports:[1-3]",
        ),
    ];
    for (text, expect) in cases {
        assert_eq!(parse(text).to_string(), expect, "{text}");
    }
    assert_eq!(
        Resources::parse_with_role("cpus:2;mem(b):1", "a")
            .unwrap()
            .to_string(),
        "cpus(a):2; mem(b):1"
    );
    // The display text parses back.
    let text = "cpus:1.5; cpus(r):2; ports:[1-5, 7-9]; disks:{x, y}";
    assert_eq!(parse(&parse(text).to_string()).to_string(), text);
}

#[test]
fn refuses_bad_agent_text() {
    let cases = [
        (
            "cpus",
            "Bad value for resources, missing or extra ':' in cpus",
        ),
        (
            "cpus:1:2",
            "Bad value for resources, missing or extra ':' in cpus:1:2",
        ),
        (
            "cpus(r:1",
            "Bad value for resources, mismatched parentheses in cpus(r:1",
        ),
        (
            "cpus)r(:1",
            "Bad value for resources, mismatched parentheses in cpus)r(:1",
        ),
        ("cpus:abc", "Bad type for resource cpus value abc type TEXT"),
        ("cpus:-1", "Bad type for resource cpus value -1 type TEXT"),
        ("cpus:inf", "Bad type for resource cpus value inf type TEXT"),
        (
            "cpus:1e-320",
            "Failed to parse resource cpus value 1e-320 error Subnormal values not supported",
        ),
        (
            "ports:[1-2",
            "Failed to parse resource ports value [1-2 error Mismatched brackets",
        ),
        (
            "ports:[1-2-3]",
            "Failed to parse resource ports value [1-2-3] error Expecting one or more \"ranges\"",
        ),
        (
            "ports:[a-b]",
            "Failed to parse resource ports value [a-b] error Expecting non-negative integers in 'a'",
        ),
        (
            "ports:1[2]",
            "Failed to parse resource ports value 1[2] error Unexpected '[' found",
        ),
        (
            "x:a{b}",
            "Failed to parse resource x value a{b} error Unexpected '{' found",
        ),
        ("ports:[5-1]", "Invalid ranges resource: begin > end"),
        ("x:{a,a}", "Invalid set resource: duplicated elements"),
        ("(r):1", "Empty resource name"),
        ("cpus():1", "Role names cannot be the empty string"),
        (
            "cpus(-r):1",
            "Role component '-r' is invalid because it starts with a dash",
        ),
        (
            "cpus(a//b):1",
            "Role 'a//b' cannot contain two adjacent slashes",
        ),
        (
            "cpus(a/./b):1",
            "Role 'a/./b' cannot include '.' as a component",
        ),
        (
            "cpus:1;cpus:[1-2]",
            "Resources with the same name ('cpus') but different types are not allowed",
        ),
        (
            r#"[{"name":"cpus"}]"#,
            "Some JSON resources were not formatted properly: Missing required fields: type",
        ),
        (
            r#"[{"name":"disk","type":"SCALAR","scalar":{"value":1},"role":"r",
                "reservation":{"principal":"p"}}]"#,
            "Dynamic reservations cannot be specified at the command line",
        ),
    ];
    for (text, expect) in cases {
        let err = Resources::parse(text).unwrap_err();
        assert_eq!(err.to_string(), expect, "{text}");
    }
}

#[test]
fn arithmetic() {
    let cases = [
        (
            "cpus:1;ports:[1-2]",
            "+",
            "cpus:0.5;ports:[3-4];mem:1",
            "cpus:1.5; ports:[1-4]; mem:1",
        ),
        ("cpus:1", "+", "cpus(r):1", "cpus:1; cpus(r):1"),
        ("cpus:0.1", "+", "cpus:0.2", "cpus:0.3"),
        ("x:{a,b}", "+", "x:{b,c}", "x:{a, b, c}"),
        (
            "cpus:2;mem:100;ports:[1-10]",
            "-",
            "cpus:0.5;ports:[3-4]",
            "cpus:1.5; mem:100; ports:[1-2, 5-10]",
        ),
        ("cpus:1", "-", "cpus:2", "{}"),
        ("cpus:0.3", "-", "cpus:0.1;cpus:0.2", "{}"),
        ("cpus(r):1", "-", "cpus:1", "cpus(r):1"),
        (
            "cpus(r):1;cpus:1",
            "-",
            "cpus(r):0.25",
            "cpus(r):0.75; cpus:1",
        ),
        ("ports:[1-10]", "-", "ports:[1-10]", "{}"),
        ("x:{a,b,c}", "-", "x:{b,z}", "x:{a, c}"),
        ("cpus:1", "-", "mem:1", "cpus:1"),
    ];
    for (left, op, right, expect) in cases {
        let mut got = parse(left);
        match op {
            "+" => got += &parse(right),
            _ => got -= &parse(right),
        }
        assert_eq!(got.to_string(), expect, "{left} {op} {right}");
    }
}

#[test]
fn containment() {
    let cases = [
        ("cpus:2;mem:1024", "cpus:1;mem:128", true),
        ("cpus:2;mem:1024", "cpus:2;mem:1024", true),
        ("cpus:2;mem:1024", "cpus:3", false),
        ("cpus:2", "cpus:1;mem:1", false),
        ("cpus:0.1;cpus:0.2", "cpus:0.3", true),
        (
            "ports:[31000-32000]",
            "ports:[31000-31000,31005-31010]",
            true,
        ),
        ("ports:[31000-31010]", "ports:[31005-31011]", false),
        ("ports:[1-5,7-9]", "ports:[5-7]", false),
        ("cpus(r):2", "cpus:1", false),
        ("cpus:2", "cpus(r):1", false),
        ("cpus:1;cpus(r):1", "cpus(r):1", true),
        ("cpus(r):1", "cpus(s):1", false),
        ("disks:{a,b}", "disks:{b}", true),
        ("disks:{a,b}", "disks:{c}", false),
        ("cpus:1", "", true),
        ("", "cpus:0.0001", true),
    ];
    for (outer, inner, expect) in cases {
        assert_eq!(
            parse(outer).contains(&parse(inner)),
            expect,
            "{outer} contains {inner}"
        );
    }
}

#[test]
fn roles_allocation_and_reservations() {
    let mut all = parse("cpus:4;mem:100;cpus(a):2;mem(a/b):10");
    assert_eq!(all.unreserved().to_string(), "cpus:4; mem:100");
    assert_eq!(all.reserved(None).to_string(), "cpus(a):2; mem(a/b):10");
    assert_eq!(all.reserved(Some("a")).to_string(), "cpus(a):2");
    assert_eq!(
        all.allocatable_to("a").to_string(),
        "cpus:4; mem:100; cpus(a):2"
    );
    assert_eq!(
        all.allocatable_to("a/b/c").to_string(),
        "cpus:4; mem:100; cpus(a):2; mem(a/b):10"
    );
    let by_role: Vec<String> = all
        .reservations()
        .iter()
        .map(|(r, res)| format!("{r}={res}"))
        .collect();
    assert_eq!(by_role, ["a=cpus(a):2", "a/b=mem(a/b):10"]);
    assert_eq!(
        (all.cpus(), all.mem(), all.disk()),
        (Some(6.0), Some(110.0), None)
    );
    assert_eq!(all.scalar("cpus"), 6.0);
    assert_eq!(all.scalar("gpus"), 0.0);

    all.allocate("r1");
    assert_eq!(all.allocated_to("r1").len(), 4);
    assert!(all.allocated_to("r2").is_empty());
    assert_eq!(all.to_string().matches("(allocated: r1)").count(), 4);
    // Allocated and unallocated resources are different kinds.
    assert!(!all.contains(&parse("cpus:1")));
    all.unallocate();
    assert!(all.contains(&parse("cpus:1")));
}

#[test]
fn legacy_reservations_are_upgraded_and_downgraded() {
    let legacy = res(
        r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"role":"r",
        "reservation":{"principal":"p"}}"#,
    );
    let resources = Resources::try_from_vec(vec![legacy.clone()]).unwrap();
    let upgraded = resources.iter().next().unwrap();
    assert_eq!(upgraded.reservations.len(), 1);
    assert_eq!(
        upgraded.reservations[0].r#type(),
        v1::resource::reservation_info::Type::Dynamic
    );
    assert_eq!(upgraded.reservations[0].role(), "r");
    assert_eq!(upgraded.reservations[0].principal(), "p");
    assert_eq!(resources::reservation_role(upgraded), Some("r"));
    assert_eq!(
        resources.to_string(),
        "cpus(reservations: [(DYNAMIC,r,p)]):1"
    );

    let mut down = upgraded.clone();
    resources::downgrade(&mut down).unwrap();
    assert_eq!(down, legacy);

    let mut refined = res(
        r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"reservations":[
        {"type":"STATIC","role":"a"},{"type":"DYNAMIC","role":"a/b"}]}"#,
    );
    assert_eq!(validate_resource(&refined), Ok(()));
    assert_eq!(
        resources::downgrade(&mut refined).unwrap_err().to_string(),
        "Cannot downgrade resources containing refined reservations"
    );
}

#[test]
fn whole_disks_and_shared_volumes() {
    let mount = r#"{"name":"disk","type":"SCALAR","scalar":{"value":100},
        "disk":{"source":{"type":"MOUNT","mount":{"root":"/mnt/a"}}}}"#;
    let mut disks = Resources::from_vec(vec![res(mount), res(mount)]);
    // Two MOUNT disks stay two; a part of one is not there.
    assert_eq!(disks.len(), 2);
    assert_eq!(
        disks.to_string(),
        "disk[MOUNT:/mnt/a]:100; disk[MOUNT:/mnt/a]:100"
    );
    let half = res(&mount.replace("100", "50"));
    assert!(!disks.contains_resource(&half));
    disks.subtract_resource(half);
    assert_eq!(disks.len(), 2);
    disks.subtract_resource(res(mount));
    assert_eq!(disks.len(), 1);

    let volume = r#"{"name":"disk","type":"SCALAR","scalar":{"value":10},"shared":{},
        "reservations":[{"type":"DYNAMIC","role":"r"}],
        "disk":{"persistence":{"id":"v1"},"volume":{"mode":"RW","container_path":"data"}}}"#;
    let mut shared = Resources::from_vec(vec![res(volume), res(volume)]);
    assert_eq!(shared.len(), 1);
    assert_eq!(
        shared.to_string(),
        "disk(reservations: [(DYNAMIC,r)])[v1:data]<SHARED>:10<2>"
    );
    assert!(shared.contains(&Resources::from_vec(vec![res(volume), res(volume)])));
    shared.subtract_resource(res(volume));
    assert!(!shared.contains(&Resources::from_vec(vec![res(volume), res(volume)])));
    shared.subtract_resource(res(volume));
    assert!(shared.is_empty());
}

#[test]
fn validates_framework_resources() {
    let scalar = |v: f64| v1::Resource {
        name: "cpus".into(),
        r#type: v1::value::Type::Scalar as i32,
        scalar: Some(v1::value::Scalar { value: v }),
        ..Default::default()
    };
    let cases = [
        (scalar(1.0), Ok(())),
        (
            scalar(f64::NAN),
            Err("Invalid scalar resource: value is not finite"),
        ),
        (
            scalar(f64::INFINITY),
            Err("Invalid scalar resource: value is not finite"),
        ),
        (scalar(-1.0), Err("Invalid scalar resource: value < 0")),
        (
            v1::Resource {
                name: String::new(),
                ..scalar(1.0)
            },
            Err("Empty resource name"),
        ),
        (
            v1::Resource {
                r#type: 99,
                ..scalar(1.0)
            },
            Err("Invalid resource type"),
        ),
        (
            v1::Resource {
                r#type: v1::value::Type::Ranges as i32,
                ..scalar(1.0)
            },
            Err("Invalid ranges resource"),
        ),
        (
            v1::Resource {
                r#type: v1::value::Type::Text as i32,
                ..scalar(1.0)
            },
            Err("Unsupported resource type"),
        ),
        (
            res(
                r#"{"name":"ports","type":"RANGES","ranges":{"range":[{"begin":1,"end":5},{"begin":5,"end":6}]}}"#,
            ),
            Err("Invalid ranges resource: overlapping ranges"),
        ),
        (
            res(r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"shared":{}}"#),
            Err("Resource cpus cannot be shared"),
        ),
        (
            res(r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"disk":{}}"#),
            Err("DiskInfo should not be set for cpus resource"),
        ),
        (
            res(
                r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"role":"*","reservation":{}}"#,
            ),
            Err("Invalid reservation: role \"*\" cannot be dynamically reserved"),
        ),
        (
            res(
                r#"{"name":"cpus","type":"SCALAR","scalar":{"value":1},"reservations":[
                {"type":"STATIC","role":"a"},{"type":"DYNAMIC","role":"b"}]}"#,
            ),
            Err("Invalid refined reservation: role 'b' is not a refinement of 'a'"),
        ),
    ];
    for (resource, expect) in cases {
        let got = validate_resource(&resource).map_err(|e| e.to_string());
        assert_eq!(
            got.as_ref().map(|_| ()).map_err(String::as_str),
            expect,
            "{resource:?}"
        );
    }
    assert_eq!(
        Resources::validate(&[scalar(1.0), scalar(-1.0)]).unwrap_err(),
        ResourceError::InvalidIn {
            resource: "cpus:-1".into(),
            reason: "Invalid scalar resource: value < 0".into()
        }
    );
    // Invalid ones never enter a collection.
    assert_eq!(
        Resources::from_vec(vec![scalar(-1.0), scalar(f64::NAN), scalar(2.0)]).to_string(),
        "cpus:2"
    );
    assert!(Resources::try_from_vec(vec![scalar(-1.0)]).is_err());
}

/// An offer never holds part of a MOUNT disk (or a persistent volume): a
/// grant that would cut one gives nothing; a grant that holds it takes it
/// whole; RAW disk is cut to the grant. (The Mesos soak found a MOUNT
/// volume of 128 offered as 64 to two frameworks at once.)
#[test]
fn an_offer_takes_a_mount_disk_whole_or_not_at_all() {
    use unisched_mesos::v1::resource::disk_info::{Source, source};
    let disk = |amount: f64, kind: source::Type, id: Option<&str>| {
        let mut r = Resources::parse(&format!("disk:{amount}"))
            .unwrap()
            .into_vec()
            .remove(0);
        r.disk = Some(Box::new(v1::resource::DiskInfo {
            source: Some(Source {
                r#type: kind as i32,
                id: id.map(str::to_string),
                mount: (kind == source::Type::Mount).then(|| source::Mount {
                    root: Some("/v".to_string()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }));
        r
    };
    let mount = Resources::from_vec(vec![disk(128.0, source::Type::Mount, Some("v1"))]);
    let cut = mount.offer_for("web", |_| true, |_| Some(64.0));
    assert!(cut.is_empty(), "{cut}");
    let whole = mount.offer_for("web", |_| true, |_| Some(128.0));
    assert_eq!(whole.scalar("disk"), 128.0);
    let raw = Resources::from_vec(vec![disk(128.0, source::Type::Raw, None)]);
    assert_eq!(
        raw.offer_for("web", |_| true, |_| Some(64.0))
            .scalar("disk"),
        64.0
    );
}

/// `take_offer` takes out exactly what `offer_for` offers: the same as
/// `offer_for` followed by `subtract`, for whole and trimmed scalars,
/// ranges, sets, reservations to the role, its ancestors and others, shared
/// volumes, MOUNT disks (two alike, and one a grant would cut), entries the
/// pool filter leaves out and names the grant does not mention.
#[test]
fn taking_an_offer_leaves_what_subtracting_it_would() {
    let mount = r#"{"name":"disk","type":"SCALAR","scalar":{"value":100},
        "disk":{"source":{"type":"MOUNT","mount":{"root":"/mnt/a"}}}}"#;
    let volume = r#"{"name":"disk","type":"SCALAR","scalar":{"value":10},"shared":{},
        "reservations":[{"type":"DYNAMIC","role":"web"}],
        "disk":{"persistence":{"id":"v1"},"volume":{"mode":"RW","container_path":"data"}}}"#;
    let agents = [
        parse("cpus:8;mem:4096"),
        parse("cpus:8;mem:4096;disk:1000;ports:[31000-32000];zones:{a,b}"),
        parse("cpus:4;cpus(web):2;cpus(web/x):1;cpus(db):3;mem:512;mem(web):256"),
        parse("cpus:0.001;mem:0.5;gpus:2"),
        Resources::from_vec(vec![res(mount), res(mount), res(volume), res(volume)]),
    ];
    type Grant = fn(&str) -> Option<f64>;
    let grants: [Grant; 6] = [
        |_| Some(1.0e9),
        |_| Some(0.0),
        |n| (n == "cpus").then_some(5.5),
        |n| match n {
            "cpus" => Some(2.5),
            "mem" => Some(300.0),
            "disk" => Some(150.0),
            _ => None,
        },
        |n| (n == "disk").then_some(100.0),
        |n| (n != "gpus").then_some(3.0),
    ];
    type Pool = fn(&v1::Resource) -> bool;
    let pools: [(&str, Pool); 2] = [
        ("all", |_| true),
        ("unreserved", |r| r.reservations.is_empty()),
    ];
    let mut offered = 0;
    for agent in &agents {
        for role in ["web", "web/x/y", "db", "other"] {
            for (i, grant) in grants.iter().enumerate() {
                for (pool, keep) in pools {
                    let want = agent.offer_for(role, keep, grant);
                    let mut subtracted = agent.clone();
                    subtracted.subtract(&want);
                    let mut taken_from = agent.clone();
                    let got = taken_from.take_offer(role, keep, grant);
                    let case = format!("{agent} to {role}, grant {i}, pool {pool}");
                    assert_eq!(taken_from, subtracted, "{case}: left");
                    // What is offered obeys the pool, the role and the grant
                    // (checked here directly: `offer_for` is `take_offer` on
                    // a copy). A shared volume goes whole or not at all.
                    for r in got.iter() {
                        assert!(keep(r), "{case}: {r:?} is not of the pool");
                        let allowed = resources::reservation_role(r).is_none_or(|reserved| {
                            reserved == role || resources::is_strict_subrole(role, reserved)
                        });
                        assert!(allowed, "{case}: {r:?} is reserved to another role");
                    }
                    for name in ["cpus", "mem", "disk", "gpus"] {
                        let unshared = got.filter(|r| r.shared.is_none());
                        let total = unshared.scalar(name);
                        let limit = grant(name).unwrap_or(0.0);
                        assert!(total <= limit, "{case}: {total} of {name} beyond {limit}");
                    }
                    // Nothing made or lost: what is left and what is offered
                    // add up to the agent.
                    let mut back = taken_from.clone();
                    back.add(&got);
                    assert_eq!(back.scalar("cpus"), agent.scalar("cpus"), "{case}");
                    assert_eq!(back.scalar("mem"), agent.scalar("mem"), "{case}");
                    offered += usize::from(!got.is_empty());
                }
            }
        }
    }
    // Most cases offer something (a test whose offers are all empty would
    // check only the unchanged case).
    assert!(offered > 100, "{offered} of 240 cases offered something");
}

/// A `Resource` is in every offer twice (the books and the event) and in
/// every agent's and task's lists: its rarely set sub-messages are boxed
/// (see `build.rs`), which keeps it at most 192 bytes (280 with the legacy
/// reservation and the provider id inline).
#[test]
fn a_resource_stays_small() {
    let size = std::mem::size_of::<v1::Resource>();
    assert!(size <= 192, "v1::Resource is {size} bytes");
}

/// A legacy reservation (boxed) comes in, is read as a refined one, and
/// goes out in the legacy form again.
#[test]
#[allow(deprecated)] // The legacy form's `role` is what is checked.
fn a_legacy_dynamic_reservation_survives_the_round_trip() {
    let json = r#"{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.0},
        "role": "web", "reservation": {"principal": "ops"}}"#;
    let mut legacy = res(json);
    assert!(legacy.reservation.is_some());
    resources::upgrade(&mut legacy);
    assert!(legacy.reservation.is_none());
    assert_eq!(legacy.reservations.len(), 1);
    assert_eq!(legacy.reservations[0].role.as_deref(), Some("web"));
    resources::downgrade(&mut legacy).unwrap();
    assert_eq!(
        legacy
            .reservation
            .as_ref()
            .and_then(|r| r.principal.as_deref()),
        Some("ops")
    );
    assert_eq!(legacy.role.as_deref(), Some("web"));
}
