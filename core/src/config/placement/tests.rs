//! Placement engine tests: one small case per rule type, filter, parent rule and fallback.
//!
//! Each case parses a config (its queues are the live queues, its rules the placer's),
//! places an application described as `user=… groups=a,b queue=… tags=k:v,k2:v2`, and
//! compares the outcome with `expect`: the queue path, `path (create)`, or the reason.

use std::collections::{BTreeMap, HashSet};

use super::super::acl::Acl;
use super::super::{QueueConfig, parse};
use super::*;

/// Live queues taken from a parsed config, plus a set of draining paths.
struct Live {
    root: QueueConfig,
    draining: HashSet<String>,
}

impl QueueLookup for Live {
    fn lookup(&self, path: &str) -> Option<QueueInfo> {
        self.root.find(path).map(|q| QueueInfo {
            leaf: q.is_leaf(),
            draining: self.draining.contains(path),
        })
    }

    fn submit_allowed(&self, path: &str, user: &str, groups: &[String]) -> bool {
        // Allowed when the queue or an ancestor allows it through submit or admin ACL.
        let parts: Vec<&str> = path.split('.').collect();
        (1..=parts.len()).any(|n| {
            self.root.find(&parts[..n].join(".")).is_some_and(|q| {
                [&q.submit_acl, &q.admin_acl].iter().any(|acl| {
                    Acl::parse(acl.as_deref().unwrap_or("")).is_ok_and(|a| a.allows(user, groups))
                })
            })
        })
    }
}

/// A config with `rules` (YAML at column 0, may be empty) and this queue tree under root:
/// root (submitacl alice,bob,dot.user,_x dev) {default, a, p{c}, locked (submitacl carol),
/// d (draining), users/ (parent)}.
fn setup(rules: &str, draining: &[&str]) -> (Placer, Live) {
    let mut text = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: 'alice,bob,dot.user,_x dev'
        queues:
          - name: default
          - name: a
          - name: p
            queues:
              - name: c
          - name: locked
            submitacl: carol
            adminacl: ' '
          - name: d
          - name: users
            parent: true
"
    .to_string();
    for line in rules.lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    let config = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let partition = config.partitions.into_iter().next().unwrap();
    let placer = Placer::new(&partition.placement_rules);
    let live = Live {
        root: partition.root,
        draining: draining.iter().map(|s| s.to_string()).collect(),
    };
    (placer, live)
}

fn without_default(mut live: Live) -> Live {
    live.root.queues.retain(|q| q.name != "default");
    live
}

fn place(placer: &Placer, live: &Live, app: &str) -> String {
    let mut user = "";
    let mut queue = "";
    let mut groups: Vec<String> = Vec::new();
    let mut tags = BTreeMap::new();
    let mut forced = false;
    for token in app.split_whitespace() {
        let (k, v) = token.split_once('=').unwrap();
        match k {
            "user" => user = v,
            "queue" => queue = v,
            "groups" => groups = v.split(',').map(str::to_string).collect(),
            "forced" => forced = v == "true",
            "tags" => {
                for pair in v.split(',') {
                    let (tk, tv) = pair.split_once(':').unwrap();
                    tags.insert(tk.to_string(), tv.to_string());
                }
            }
            _ => panic!("unknown key {k}"),
        }
    }
    let input = AppPlacementInput {
        app_id: "app-1",
        requested_queue: queue,
        user,
        groups: &groups,
        tags: &tags,
        forced,
    };
    match placer.place(&input, live) {
        Ok(Placement {
            queue_path,
            create: false,
        }) => queue_path,
        Ok(Placement {
            queue_path,
            create: true,
        }) => format!("{queue_path} (create)"),
        Err(reason) => format!("error: {reason}"),
    }
}

fn check(rules: &str, app: &str, expect: &str) {
    let (placer, live) = setup(rules, &["root.d"]);
    assert_eq!(
        place(&placer, &live, app),
        expect,
        "rules: {rules}\napp: {app}"
    );
}

const NO_MATCH: &str = "error: application app-1 rejected: no placement rule matched";

#[test]
fn implicit_provided_rule() {
    check("", "user=alice queue=root.a", "root.a");
    check("", "user=alice queue=a", "root.a");
    check("", "user=alice queue=root.p.c", "root.p.c");
    // Unqualified names are one queue under root: their dots are replaced.
    check("", "user=alice queue=p.c", "root.default");
    // Nothing matches: fall back to root.default.
    check("", "user=alice queue=root.nope", "root.default");
    check("", "user=alice", "root.default");
    let (placer, live) = setup("", &[]);
    assert_eq!(
        place(
            &placer,
            &without_default(live),
            "user=alice queue=root.nope"
        ),
        format!(
            "{NO_MATCH} (rule 1 (provided): queue root.nope does not exist and create is false; fallback: root.default does not exist)"
        )
    );
}

#[test]
fn chosen_queue_must_be_an_allowed_active_leaf() {
    check("", "user=alice queue=root.p", "root.default");
    let (placer, live) = setup("", &["root.d"]);
    let live = without_default(live);
    assert_eq!(
        place(&placer, &live, "user=alice queue=root.p"),
        format!(
            "{NO_MATCH} (rule 1 (provided): queue root.p is not a leaf queue; fallback: root.default does not exist)"
        )
    );
    assert_eq!(
        place(&placer, &live, "user=alice queue=root.d"),
        format!(
            "{NO_MATCH} (rule 1 (provided): queue root.d is draining; fallback: root.default does not exist)"
        )
    );
    assert_eq!(
        place(&placer, &live, "user=mallory queue=root.a"),
        format!(
            "{NO_MATCH} (rule 1 (provided): user mallory may not submit to queue root.a; fallback: root.default does not exist)"
        )
    );
    // A group in the root's ACL is enough; a queue's own ACL adds users.
    assert_eq!(
        place(&placer, &live, "user=mallory groups=x,dev queue=root.a"),
        "root.a"
    );
    assert_eq!(
        place(&placer, &live, "user=carol queue=root.locked"),
        "root.locked"
    );
    assert_eq!(
        place(&placer, &live, "user=alice queue=root.locked"),
        "root.locked"
    );
}

#[test]
fn fallback_default_must_be_allowed_too() {
    check(
        "",
        "user=mallory queue=root.a",
        &format!(
            "{NO_MATCH} (rule 1 (provided): user mallory may not submit to queue root.a; fallback: user mallory may not submit to queue root.default)"
        ),
    );
    let (placer, live) = setup("", &["root.default"]);
    assert_eq!(
        place(&placer, &live, "user=alice"),
        format!(
            "{NO_MATCH} (rule 1 (provided): the application names no queue; fallback: queue root.default is draining)"
        )
    );
}

#[test]
fn provided_rule_with_create() {
    let rules = "placementrules: [{name: provided, create: true}]";
    check(rules, "user=alice queue=root.a", "root.a");
    check(
        rules,
        "user=alice queue=root.users.new",
        "root.users.new (create)",
    );
    check(rules, "user=alice queue=team.x", "root.team_dot_x (create)");
    check(rules, "user=alice queue=root.x.y.z", "root.x.y.z (create)");
    // Creating under a leaf, or with an invalid name, fails placement outright.
    check(
        rules,
        "user=alice queue=root.a.sub",
        "error: application app-1 rejected: cannot create queue root.a.sub: root.a is a leaf queue",
    );
    check(
        rules,
        "user=alice queue=root.bad$name",
        "error: application app-1 rejected: cannot create queue root.bad$name: 'bad$name' is not a valid queue name",
    );
    // The nearest existing ancestor's ACL decides; a draining one refuses new children.
    check(
        rules,
        "user=carol queue=root.locked2",
        &format!(
            "{NO_MATCH} (rule 1 (provided): user carol may not submit to root, the nearest existing ancestor of root.locked2; fallback: user carol may not submit to queue root.default)"
        ),
    );
    check(
        rules,
        "user=alice queue=root.d.sub",
        "error: application app-1 rejected: cannot create queue root.d.sub: root.d is a leaf queue",
    );
    let (placer, live) = setup(rules, &["root.users"]);
    assert_eq!(
        place(
            &placer,
            &without_default(live),
            "user=alice queue=root.users.x"
        ),
        format!(
            "{NO_MATCH} (rule 1 (provided): cannot create queue root.users.x: its ancestor root.users is draining; fallback: root.default does not exist)"
        )
    );
    let (placer, live) = setup(rules, &[]);
    assert_eq!(
        place(
            &placer,
            &without_default(live),
            "user=mallory queue=root.users.x"
        ),
        format!(
            "{NO_MATCH} (rule 1 (provided): user mallory may not submit to root.users, the nearest existing ancestor of root.users.x; fallback: root.default does not exist)"
        )
    );
    let deep = format!("root.{}", vec!["q"; 40].join("."));
    assert!(check_contains(
        rules,
        &format!("user=alice queue={deep}"),
        "deeper than 32 levels"
    ));
}

fn check_contains(rules: &str, app: &str, needle: &str) -> bool {
    let (placer, live) = setup(rules, &[]);
    place(&placer, &live, app).contains(needle)
}

#[test]
fn user_rule() {
    let rules = "placementrules: [{name: user, create: true, parent: {name: fixed, value: users}}]";
    check(rules, "user=alice", "root.users.alice (create)");
    check(rules, "user=dot.user", "root.users.dot_dot_user (create)");
    // A user name is never a path.
    check(rules, "user=_x", "root.users._x (create)");
    check(
        "placementrules: [{name: user}]",
        "user=alice queue=root.a",
        "root.default",
    );
    check(
        "placementrules: [{name: user, create: true}]",
        "user=bob",
        "root.bob (create)",
    );
    check(
        "placementrules: [{name: user}]",
        "user=dot.user",
        "root.default",
    );
}

#[test]
fn tag_rule() {
    let rules = "placementrules: [{name: tag, value: namespace, create: true}]";
    check(
        rules,
        "user=alice tags=namespace:team",
        "root.team (create)",
    );
    check(
        rules,
        "user=alice tags=NameSpace:team",
        "root.team (create)",
    );
    check(
        rules,
        "user=alice tags=namespace:my.ns",
        "root.my_dot_ns (create)",
    );
    check(rules, "user=alice tags=namespace:root.p.c", "root.p.c");
    check(rules, "user=alice tags=other:x", "root.default");
    let (placer, live) = setup(rules, &[]);
    assert_eq!(
        place(&placer, &without_default(live), "user=alice tags=other:x"),
        format!(
            "{NO_MATCH} (rule 1 (tag): the application has no tag 'namespace'; fallback: root.default does not exist)"
        )
    );
    check(
        "placementrules: [{name: tag, value: namespace}]",
        "user=alice tags=namespace:a",
        "root.a",
    );
    check(
        "placementrules: [{name: tag, value: namespace}]",
        "user=alice tags=namespace:zzz",
        "root.default",
    );
}

#[test]
fn fixed_rule() {
    check(
        "placementrules: [{name: fixed, value: root.a}]",
        "user=alice queue=root.p.c",
        "root.a",
    );
    check(
        "placementrules: [{name: fixed, value: a}]",
        "user=alice",
        "root.a",
    );
    check(
        "placementrules: [{name: fixed, value: p.c}]",
        "user=alice",
        "root.p.c",
    );
    check(
        "placementrules: [{name: fixed, value: c, parent: {name: fixed, value: p}}]",
        "user=alice",
        "root.p.c",
    );
    check(
        "placementrules: [{name: fixed, value: fresh, create: true}]",
        "user=alice",
        "root.fresh (create)",
    );
}

#[test]
fn rules_run_in_order() {
    let rules = "placementrules:\n- {name: provided}\n- {name: tag, value: namespace}\n- {name: user, create: true, parent: {name: fixed, value: root.users}}";
    check(
        rules,
        "user=alice queue=root.a tags=namespace:p.c",
        "root.a",
    );
    check(
        rules,
        "user=alice queue=root.zzz tags=namespace:a",
        "root.a",
    );
    check(
        rules,
        "user=alice queue=root.zzz tags=namespace:zzz",
        "root.users.alice (create)",
    );
    // A rule whose queue the user may not use passes to the next rule.
    let acl = "placementrules: [{name: provided}, {name: fixed, value: root.locked}]";
    check(acl, "user=carol queue=root.a", "root.locked");
}

#[test]
fn filters() {
    let allow = "placementrules: [{name: user, create: true, filter: {type: allow, users: [alice], groups: [dev]}}]";
    check(allow, "user=alice", "root.alice (create)");
    check(allow, "user=bob groups=dev", "root.bob (create)");
    check(allow, "user=bob groups=ops", "root.default");
    let deny =
        "placementrules: [{name: user, create: true, filter: {type: deny, users: [alice, bob]}}]";
    check(deny, "user=alice", "root.default");
    check(deny, "user=_x", "root._x (create)");
    let regex = "placementrules: [{name: user, create: true, filter: {users: ['^a.*e$']}}]";
    check(regex, "user=alice", "root.alice (create)");
    check(regex, "user=bob", "root.default");
    let group_regex =
        "placementrules: [{name: user, create: true, filter: {type: deny, groups: ['^te?st$']}}]";
    check(group_regex, "user=bob groups=tst", "root.default");
    check(group_regex, "user=bob groups=dev", "root.bob (create)");
    // An empty deny filter denies everyone.
    check(
        "placementrules: [{name: user, create: true, filter: {type: deny}}]",
        "user=bob",
        "root.default",
    );
    let (placer, live) = setup(allow, &[]);
    assert_eq!(
        place(&placer, &without_default(live), "user=bob"),
        format!(
            "{NO_MATCH} (rule 1 (user): the filter excludes user bob; fallback: root.default does not exist)"
        )
    );
}

#[test]
fn parent_rules() {
    // The parent rule's own filter and create flag apply.
    let rules = "placementrules: [{name: user, create: true, parent: {name: tag, value: team, create: false}}]";
    check(
        rules,
        "user=alice tags=team:users",
        "root.users.alice (create)",
    );
    check(rules, "user=alice tags=team:nope", "root.default");
    let (placer, live) = setup(rules, &[]);
    assert_eq!(
        place(&placer, &without_default(live), "user=alice tags=team:nope"),
        format!(
            "{NO_MATCH} (rule 1 (user): parent rule tag: queue root.nope does not exist and create is false; fallback: root.default does not exist)"
        )
    );
    // A parent rule that returns an existing leaf fails placement.
    check(
        rules,
        "user=alice tags=team:a",
        "error: application app-1 rejected: parent rule tag returned the leaf queue root.a",
    );
    // A fully qualified provided queue skips the parent rule.
    let provided =
        "placementrules: [{name: provided, create: true, parent: {name: user, create: true}}]";
    check(provided, "user=alice queue=root.a", "root.a");
    check(provided, "user=alice queue=x", "root.alice.x (create)");
    // Two levels of parents.
    let nested = "placementrules: [{name: user, create: true, parent: {name: tag, value: ns, create: true, parent: {name: fixed, value: users}}}]";
    check(
        nested,
        "user=alice tags=ns:dev",
        "root.users.dev.alice (create)",
    );
}

#[test]
fn hand_built_rules_do_not_panic() {
    let bad = PlacementRuleConfig {
        kind: RuleKind::User,
        create: true,
        filter: FilterConfig {
            kind: FilterKind::Allow,
            users: vec!["(".to_string()],
            groups: vec![],
        },
        parent: None,
        value: String::new(),
    };
    let placer = Placer::new(&[bad]);
    let (_, live) = setup("", &[]);
    assert_eq!(place(&placer, &live, "user=alice"), "root.default");
}

#[test]
fn forced_applications_no_rule_places_go_to_the_recovery_queue() {
    let recovery = "root.@recovery@ (create)";
    // A rule that resolves wins; otherwise the recovery queue, before the default.
    check("", "user=alice queue=root.a forced=true", "root.a");
    check("", "user=alice queue=root.nope forced=true", recovery);
    check("", "user=alice queue=root.p forced=true", recovery);
    check("", "user=eve queue=root.a forced=true", recovery);
    check("", "user=alice queue=root.d forced=true", recovery);
    check("", "user=alice queue=root.nope", "root.default");
    // A rule's outright failure still refuses the application.
    check(
        "placementrules:\n- name: provided\n  create: true",
        "user=alice queue=root.a.x forced=true",
        "error: application app-1 rejected: cannot create queue root.a.x: root.a is a leaf queue",
    );
}

#[test]
fn the_recovery_queue_takes_no_application_a_rule_places() {
    let (placer, mut live) = setup("", &[]);
    // As if it existed, open to everyone: still no rule places there.
    let mut recovery = live.root.queues[0].clone();
    recovery.name = "@recovery@".to_string();
    recovery.submit_acl = Some("*".to_string());
    live.root.queues.push(recovery);
    assert_eq!(
        place(&placer, &live, "user=alice queue=root.@recovery@"),
        "root.default"
    );
    assert_eq!(
        place(&placer, &live, "user=alice queue=root.x forced=true"),
        "root.@recovery@"
    );
}

#[test]
fn the_force_tag_reads_as_upstream_reads_it() {
    let tags = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    assert!(is_create_forced(&tags("application.create.force", "true")));
    assert!(is_create_forced(&tags("Application.Create.Force", "TRUE")));
    assert!(is_create_forced(&tags("application.create.force", "1")));
    assert!(!is_create_forced(&tags(
        "application.create.force",
        "false"
    )));
    assert!(!is_create_forced(&tags("application.create.force", "yes")));
    assert!(!is_create_forced(&tags("other", "true")));
}
