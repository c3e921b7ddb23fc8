//! Parse and validation tests: each rule has a valid and an invalid twin.
//!
//! `check(input, expect)` parses `input` and compares a rendering of the result with
//! `expect`: `ok` for any valid config, `tree: …` for the normalized queue tree, or the
//! errors exactly as `ConfigErrors` displays them (`LINE:COL: partition P: queue Q: …`).

use super::*;

/// Lines 1-5 of every `queues(...)` document; the children start on line 6, column 11.
const HEAD: &str = "partitions:
  - name: default
    queues:
      - name: root
        queues:
";

/// A document whose root has the children given as YAML at column 0.
fn queues(children: &str) -> String {
    let mut out = HEAD.to_string();
    for line in children.lines() {
        out.push_str("          ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A document with `extra` (YAML at column 0) as more keys of the partition, and
/// the queues root.a (leaf), root.p (parent) with root.p.c (leaf).
fn partition(extra: &str) -> String {
    let mut out = "partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
          - name: p
            queues:
              - name: c
"
    .to_string();
    for line in extra.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn tree(q: &QueueConfig) -> String {
    let mut out = q.name.clone();
    if q.parent && q.queues.is_empty() {
        out.push('/');
    }
    if !q.queues.is_empty() {
        let kids: Vec<String> = q.queues.iter().map(tree).collect();
        out.push_str(&format!("{{{}}}", kids.join(",")));
    }
    out
}

fn check(input: &str, expect: &str) {
    let got = match parse(input) {
        Ok(_) if expect == "ok" => "ok".to_string(),
        Ok(c) => {
            let trees: Vec<String> = c
                .partitions
                .iter()
                .map(|p| format!("{}:{}", p.name, tree(&p.root)))
                .collect();
            format!("tree: {}", trees.join(" "))
        }
        Err(e) => e.to_string(),
    };
    if std::env::var("PRINT_MISMATCH").is_ok() {
        if got != expect.trim_end() {
            eprintln!("MISMATCH\n  expect: {expect:?}\n  got:    {got:?}");
        }
        return;
    }
    assert_eq!(got, expect.trim_end(), "\n--- input ---\n{input}");
}

#[test]
fn minimal_and_normalized_trees() {
    check(
        "partitions: [{name: default, queues: [{name: root}]}]",
        "tree: default:root/",
    );
    check(&queues("- name: a\n- name: b"), "tree: default:root{a,b}");
    // Top-level queues that are not a single root get a root inserted.
    check(
        "partitions: [{queues: [{name: a}, {name: b, queues: [{name: c}]}]}]",
        "tree: default:root{a,b{c}}",
    );
    check(
        "partitions: [{queues: [{name: x}]}]",
        "tree: default:root{x}",
    );
    check("partitions: [{queues: []}]", "tree: default:root/");
    check(
        "partitions: [{name: DEFAULT, queues: [{name: ROOT}]}]",
        "tree: default:root/",
    );
    check(
        "partitions: [{name: gpu, queues: [{name: root, queues: [{name: a, parent: true}]}]}]",
        "tree: gpu:root{a/}",
    );
    check(
        "partitions: [{name: a, queues: [{name: root}]}, {name: b, queues: [{name: root}]}]",
        "tree: a:root/ b:root/",
    );
}

#[test]
fn partition_rules() {
    check(
        "partitions: [{name: x, queues: [{name: root}]}, {name: X, queues: [{name: root}]}]",
        "1:56: partition X: duplicate partition name 'X'",
    );
    check(
        "partitions: [{queues: [{name: root}]}, {name: default, queues: [{name: root}]}]",
        "1:47: partition default: duplicate partition name 'default'",
    );
    check(
        "partitions: []",
        "1:13: no partitions defined: at least one partition is required",
    );
    check(
        "checksum: abc",
        "1:1: no partitions defined: at least one partition is required",
    );
    check(
        "partitions: [{name: x}]",
        "1:14: partition x: partition has no queues: the 'queues' list is required",
    );
}

#[test]
fn decoding_errors() {
    check("", "configuration is empty");
    check("# only a comment\n\n", "configuration is empty");
    check(
        "partitions: [",
        "2:1: did not find expected node content, while parsing a flow node",
    );
    check(
        &queues("- name: a\n  maxapps: 3"),
        "7:13: partitions[0].queues[0].queues[0]: unknown field `maxapps`, expected one of `name`, `parent`, `resources`, `maxapplications`, `properties`, `adminacl`, `submitacl`, `childtemplate`, `queues`, `limits`",
    );
    check(
        "partitions: [{name: d, queues: [{name: root}], placement: []}]",
        "1:48: partitions[0]: unknown field `placement`, expected one of `name`, `queues`, `placementrules`, `limits`, `preemption`, `nodesortpolicy`",
    );
    check(
        &queues("- name: a\n  maxapplications: lots"),
        "7:30: partitions[0].queues[0].queues[0].maxapplications: invalid type: string \"lots\", expected u64",
    );
    check(
        &queues("- name: a\n  maxapplications: -1"),
        "7:30: partitions[0].queues[0].queues[0].maxapplications: invalid type: integer `-1`, expected u64",
    );
    check(
        &queues("- name: a\n  parent: maybe"),
        "7:21: partitions[0].queues[0].queues[0].parent: invalid type: string \"maybe\", expected a boolean",
    );
    check(
        "partitions: {name: x}",
        "1:13: partitions: invalid type: map, expected a sequence",
    );
    check(
        "- a\n- b",
        "1:1: invalid type: sequence, expected a mapping with key partitions",
    );
    check(
        &queues("- name: a\n  resources: {max: {memory: 1, memory: 2}}"),
        "7:30: partitions[0].queues[0].queues[0].resources.max: duplicate key `memory`",
    );
    check(
        &queues("- name: a\n  name: b"),
        "6:13: partitions[0].queues[0].queues[0]: duplicate field `name`",
    );
    check(
        &queues("- name: a\n  resources: {max: {memory: [1]}}"),
        "7:39: partitions[0].queues[0].queues[0].resources.max.memory: invalid type: sequence, expected a string or a number",
    );
    check(
        "partitions: []\n---\npartitions: []\n",
        "deserializing from YAML containing more than one document is not supported",
    );
}

#[test]
fn size_limit() {
    let big = format!(
        "# {}\npartitions: [{{queues: []}}]\n",
        "x".repeat(MAX_CONFIG_BYTES)
    );
    check(
        &big,
        &format!(
            "configuration is {} bytes, more than the limit of {MAX_CONFIG_BYTES} bytes",
            big.len()
        ),
    );
    let fits = format!(
        "# {}\npartitions: [{{queues: []}}]\n",
        "x".repeat(MAX_CONFIG_BYTES - 40)
    );
    check(&fits, "ok");
}

#[test]
fn depth_limit() {
    let nested = |levels: usize| {
        let mut q = "{name: leaf}".to_string();
        for i in (2..levels).rev() {
            q = format!("{{name: q{i}, queues: [{q}]}}");
        }
        format!("partitions: [{{queues: [{{name: root, queues: [{q}]}}]}}]")
    };
    check(&nested(MAX_QUEUE_DEPTH), "ok");
    let too_deep = nested(MAX_QUEUE_DEPTH + 1);
    let err = parse(&too_deep).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(
        err.0[0]
            .message
            .contains("deeper than the limit of 32 levels"),
        "{err}"
    );
    assert!(
        err.0[0].queue.as_deref().unwrap().ends_with(".q32"),
        "{err}"
    );
}

#[test]
fn resource_rules() {
    // The root has no resources.
    check(&queues("- name: a\n  resources: {max: {memory: 10}}"), "ok");
    check(
        "partitions: [{queues: [{name: root, resources: {max: {memory: 10}}}]}]",
        "1:48: partition default: queue root: the root queue must not have resources set",
    );
    // guaranteed <= max
    check(
        &queues(
            "- name: a\n  resources: {guaranteed: {memory: 10, vcore: 1}, max: {memory: 10, vcore: 1000m}}",
        ),
        "ok",
    );
    check(
        &queues("- name: a\n  resources: {guaranteed: {memory: 11}, max: {memory: 10}}"),
        "7:37: partition default: queue root.a: guaranteed {memory: 11} is larger than max {memory: 10}",
    );
    // A type the max does not name is unlimited.
    check(
        &queues("- name: a\n  resources: {guaranteed: {gpu: 4}, max: {memory: 10}}"),
        "ok",
    );
    // child max <= parent max
    check(
        &queues(
            "- name: p\n  resources: {max: {memory: 1G}}\n  queues: [{name: c, resources: {max: {memory: 1000M}}}]",
        ),
        "ok",
    );
    check(
        &queues(
            "- name: p\n  resources: {max: {memory: 1G}}\n  queues: [{name: c, resources: {max: {memory: 1Gi}}}]",
        ),
        "8:49: partition default: queue root.p.c: max {memory: 1073741824} is larger than the max {memory: 1000000000} of its parent or an ancestor",
    );
    // ... including a grandparent's max
    check(
        &queues(
            "- name: p\n  resources: {max: {vcore: 2}}\n  queues: [{name: m, queues: [{name: c, resources: {max: {vcore: 3}}}]}]",
        ),
        "8:68: partition default: queue root.p.m.c: max {vcore: 3000m} is larger than the max {vcore: 2000m} of its parent or an ancestor",
    );
    // sum of children's guaranteed <= parent guaranteed
    check(
        &queues(
            "- name: p\n  resources: {guaranteed: {memory: 10}}\n  queues:\n  - {name: x, resources: {guaranteed: {memory: 5}}}\n  - {name: y, resources: {guaranteed: {memory: 5}}}",
        ),
        "ok",
    );
    check(
        &queues(
            "- name: p\n  resources: {guaranteed: {memory: 10}}\n  queues:\n  - {name: x, resources: {guaranteed: {memory: 5}}}\n  - {name: y, resources: {guaranteed: {memory: 6}}}",
        ),
        "7:37: partition default: queue root.p: guaranteed {memory: 10} is smaller than the sum of its children's guaranteed {memory: 11}",
    );
    // sum of children's guaranteed <= parent max
    check(
        &queues(
            "- name: p\n  resources: {max: {memory: 10}}\n  queues:\n  - {name: x, resources: {guaranteed: {memory: 5}}}\n  - {name: y, resources: {guaranteed: {memory: 5}}}",
        ),
        "ok",
    );
    check(
        &queues(
            "- name: p\n  resources: {max: {memory: 10}}\n  queues:\n  - {name: x, resources: {guaranteed: {memory: 5}}}\n  - {name: y, resources: {guaranteed: {memory: 6}}}",
        ),
        "7:30: partition default: queue root.p: max {memory: 10} (own or inherited) is smaller than the sum of its children's guaranteed {memory: 11}",
    );
    // A parent without a guarantee passes its children's sum up.
    check(
        &queues(
            "- name: g\n  resources: {guaranteed: {memory: 4}}\n  queues:\n  - name: p\n    queues:\n    - {name: x, resources: {guaranteed: {memory: 5}}}",
        ),
        "7:37: partition default: queue root.g: guaranteed {memory: 4} is smaller than the sum of its children's guaranteed {memory: 5}",
    );
    // Quantities
    check(
        &queues("- name: a\n  resources:\n    max: {memory: -1, vcore: 1.5m, gpu: 2x}"),
        "8:29: partition default: queue root.a: quantity '-1' for resource 'memory' is negative, which is not allowed
8:40: partition default: queue root.a: quantity '1.5m' for resource 'vcore' is not a whole number of milli-cores
8:51: partition default: queue root.a: quantity '2x' for resource 'gpu' has an unknown suffix 'x' (expected k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)",
    );
}

#[test]
fn quantities_reach_core_units() {
    let c = parse(&queues("- name: a\n  resources:\n    guaranteed: {vcore: 500m, memory: 1Gi}\n    max: {vcore: 2, memory: 2G, pods: 10}")).unwrap();
    let a = c.partitions[0].root.find("root.a").unwrap();
    assert_eq!(
        a.guaranteed,
        BTreeMap::from([("memory".into(), 1 << 30), ("vcore".into(), 500)])
    );
    assert_eq!(
        a.max,
        BTreeMap::from([
            ("memory".into(), 2_000_000_000),
            ("pods".into(), 10),
            ("vcore".into(), 2000)
        ])
    );
}

#[test]
fn max_applications_rules() {
    check(
        &queues("- name: p\n  maxapplications: 5\n  queues: [{name: c, maxapplications: 5}]"),
        "ok",
    );
    check(
        &queues("- name: p\n  queues: [{name: c, maxapplications: 5}]"),
        "ok",
    );
    check(
        &queues("- name: p\n  maxapplications: 5\n  queues: [{name: c, maxapplications: 6}]"),
        "8:49: partition default: queue root.p.c: maxapplications 6 is more than its parent's maxapplications 5",
    );
    check(
        &queues("- name: p\n  maxapplications: 5\n  queues: [{name: c}]"),
        "8:22: partition default: queue root.p.c: maxapplications 0 (unlimited) is more than its parent's maxapplications 5",
    );
}

#[test]
fn queue_name_rules() {
    check(&queues("- name: a-b_c:d#e/f@g"), "ok");
    check(&queues(&format!("- name: {}", "q".repeat(64))), "ok");
    check(
        &queues(&format!("- name: {}", "q".repeat(65))),
        &format!(
            "6:19: partition default: queue root.{0}: invalid queue name '{0}': use 1 to 64 characters from a-z, A-Z, 0-9 and _ : # / @ -",
            "q".repeat(65)
        ),
    );
    check(
        &queues("- name: a.b"),
        "6:19: partition default: queue root.a.b: invalid queue name 'a.b': use 1 to 64 characters from a-z, A-Z, 0-9 and _ : # / @ -",
    );
    check(
        &queues("- name: a b"),
        "6:19: partition default: queue root.a b: invalid queue name 'a b': use 1 to 64 characters from a-z, A-Z, 0-9 and _ : # / @ -",
    );
    check(
        &queues("- parent: true"),
        "6:13: partition default: queue root.: queue has no name",
    );
    // Sibling names are unique regardless of case; cousins may share a name.
    check(
        &queues("- {name: p, queues: [{name: x}]}\n- {name: q, queues: [{name: x}]}"),
        "ok",
    );
    check(
        &queues("- name: Sales\n- name: sales"),
        "7:19: partition default: queue root.sales: duplicate queue name 'sales' under root (names are case-insensitive)",
    );
}

#[test]
fn acl_rules() {
    check(
        &queues("- name: a\n  submitacl: 'alice,bob dev'\n  adminacl: '*'"),
        "ok",
    );
    check(&queues("- name: a\n  submitacl: ' dev'"), "ok");
    check(
        &queues("- name: a\n  submitacl: 'alice bob dev'"),
        "7:24: partition default: queue root.a: submitacl: ACL 'alice bob dev' has more than one space: expected 'user1,user2 group1,group2'",
    );
    check(
        "partitions: [{queues: [{name: root, adminacl: 'a  b'}]}]",
        "1:47: partition default: queue root: adminacl: ACL 'a  b' has more than one space: expected 'user1,user2 group1,group2'",
    );
}

#[test]
fn property_rules() {
    check(
        &queues(
            "- name: a\n  properties:\n    application.sort.policy: fair\n    application.sort.priority: disabled\n    priority.policy: fence\n    priority.offset: -10\n    preemption.policy: disabled\n    preemption.delay: 1m\n    custom.key: anything",
        ),
        "ok",
    );
    check(
        &queues("- name: a\n  properties:\n    application.sort.policy: random\n    priority.offset: 1.5\n    preemption.delay: 0s"),
        "8:40: partition default: queue root.a: property application.sort.policy has unknown value 'random' (expected fifo or fair)
9:32: partition default: queue root.a: property priority.offset value '1.5' is not a 32-bit signed integer
10:33: partition default: queue root.a: property preemption.delay must be positive, got '0s'",
    );
    check(
        &queues(
            "- name: a\n  properties:\n    weight: 2.5\n- name: b\n  properties:\n    weight: 0",
        ),
        "11:23: partition default: queue root.b: property weight value '0' is not a positive number of at most 1000000",
    );
    check(
        &queues("- name: a\n  properties:\n    weight: heavy"),
        "8:23: partition default: queue root.a: property weight value 'heavy' is not a positive number of at most 1000000",
    );
    check(
        &queues(
            "- name: p\n  childtemplate:\n    maxapplications: 3\n    properties: {application.sort.policy: fair}\n    resources: {guaranteed: {memory: 1}, max: {memory: 2}}",
        ),
        "ok",
    );
    check(
        &queues("- name: p\n  childtemplate:\n    properties: {preemption.policy: sometimes}\n    resources: {guaranteed: {memory: 3}, max: {memory: 2}}"),
        "9:39: partition default: queue root.p: child template guaranteed {memory: 3} is larger than its max {memory: 2}
8:47: partition default: queue root.p: property preemption.policy has unknown value 'sometimes' (expected default, fence or disabled)",
    );
}

#[test]
fn node_sort_and_preemption() {
    let c = parse(&partition("nodesortpolicy: {type: binpacking, resourceweights: {vcore: 2.5, memory: 0}}\npreemption: {enabled: false}")).unwrap();
    let p = &c.partitions[0];
    assert_eq!(p.node_sort_policy.kind, NodeSortKind::Binpacking);
    assert_eq!(p.node_sort_policy.resource_weights["vcore"], 2.5);
    assert!(!p.preemption.enabled);
    let d = parse(&partition("")).unwrap();
    assert_eq!(
        d.partitions[0].node_sort_policy,
        NodeSortPolicyConfig::default()
    );
    assert!(d.partitions[0].preemption.enabled);

    check(&partition("nodesortpolicy: {type: fair}"), "ok");
    check(
        &partition("nodesortpolicy: {type: random}"),
        "10:28: partition default: unknown node sort policy type 'random' (expected fair or binpacking)",
    );
    check(
        &partition("nodesortpolicy: {resourceweights: {memory: 0}}"),
        "ok",
    );
    check(
        &partition("nodesortpolicy: {resourceweights: {memory: -1}}"),
        "10:48: partition default: resource weight of 'memory' is -1: weights must be finite and not negative",
    );
}

#[test]
fn placement_rule_checks() {
    // Placement into a leaf, existing or created; to a parent only with more rules below.
    check(
        &partition("placementrules: [{name: fixed, value: root.a}]"),
        "ok",
    );
    check(
        &partition("placementrules: [{name: fixed, value: c, parent: {name: fixed, value: p}}]"),
        "ok",
    );
    check(
        &partition("placementrules: [{name: fixed, value: new, create: true}]"),
        "ok",
    );
    check(
        &partition("placementrules: [{name: user, parent: {name: fixed, value: root.p}}]"),
        "ok",
    );
    check(
        &partition(
            "placementrules: [{name: provided}, {name: user, create: true}, {name: tag, value: namespace}]",
        ),
        "ok",
    );
    check(
        &partition("placementrules: [{name: fixed, value: root.p}]"),
        "10:22: partition default: placement rule 1 (fixed) places applications in root.p, which is not a leaf queue",
    );
    check(
        &partition("placementrules:\n- name: fixed\n  value: missing"),
        "11:7: partition default: placement rule 1 (fixed) names queue root.missing, which does not exist, and create is false",
    );
    check(
        &partition("placementrules: [{name: fixed, value: root.a.b, create: true}]"),
        "10:22: partition default: placement rule 1 (fixed) names queue root.a.b, which cannot exist: root.a is a leaf queue",
    );
    check(
        &partition(
            "placementrules: [{name: user, create: true, parent: {name: fixed, value: root.a}}]",
        ),
        "10:22: partition default: placement rule 1 (fixed -> user) puts dynamic queues under root.a, which is a leaf queue",
    );
    check(
        &partition(
            "placementrules: [{name: user, create: true, parent: {name: fixed, value: other}}]",
        ),
        "10:22: partition default: placement rule 1 (fixed -> user) names queue root.other, which does not exist, and create is false",
    );
    // Syntax of the rules themselves.
    check(
        &partition("placementrules:\n- name: recovery\n- value: x\n- name: tag\n- name: fixed\n- {name: fixed, value: root.a, parent: {name: user}}\n- {name: fixed, value: 'a b'}"),
        "11:13: partition default: unknown placement rule 'recovery' (expected provided, user, tag or fixed)
12:7: partition default: placement rule has no name
13:7: partition default: tag rule needs a value: the name of the application tag
14:7: partition default: fixed rule needs a value: the queue name or path
15:44: partition default: fixed rule with the full queue path 'root.a' cannot have a parent rule
16:28: partition default: fixed rule value 'a b' has an invalid queue name 'a b'",
    );
    check(
        &partition(
            "placementrules:\n- {name: provided, filter: {type: allow, users: ['^dev.*'], groups: [admins]}}\n- {name: user, filter: {type: DENY, users: [alice, bob]}}",
        ),
        "ok",
    );
    check(
        &partition("placementrules:\n- {name: provided, filter: {type: block, users: ['9lives'], groups: ['(']}}"),
        "11:39: partition default: provided rule filter type 'block' is unknown (expected allow or deny)
11:53: partition default: provided rule filter users entry '9lives' is neither a valid name nor a regular expression
11:73: partition default: provided rule filter groups entry '(' is neither a valid name nor a regular expression",
    );
    let nested = (0..MAX_QUEUE_DEPTH).fold("{name: user}".to_string(), |inner, _| {
        format!("{{name: user, parent: {inner}}}")
    });
    let err = parse(&partition(&format!("placementrules: [{nested}]"))).unwrap_err();
    assert!(
        err.to_string()
            .contains("placement rule chain is longer than the limit of 32 rules"),
        "{err}"
    );
}

#[test]
fn placement_rules_are_typed() {
    let c = parse(&partition(
        "placementrules:\n- name: Tag\n  value: namespace\n  create: true\n  filter: {type: deny, groups: [ops]}\n  parent: {name: fixed, value: p}",
    ))
    .unwrap();
    let r = &c.partitions[0].placement_rules[0];
    assert_eq!(
        (r.kind, r.create, r.value.as_str()),
        (RuleKind::Tag, true, "namespace")
    );
    assert_eq!(r.filter.kind, FilterKind::Deny);
    assert_eq!(r.filter.groups, vec!["ops".to_string()]);
    let parent = r.parent.as_deref().unwrap();
    assert_eq!(
        (parent.kind, parent.create, parent.value.as_str()),
        (RuleKind::Fixed, false, "p")
    );
}

#[test]
fn limit_rules() {
    let limit = |body: &str| {
        queues(&format!(
            "- name: a\n  maxapplications: 10\n  resources: {{max: {{memory: 100}}}}\n  limits:\n{body}"
        ))
    };
    check(
        &limit(
            "  - {users: [alice], maxapplications: 2}\n  - {groups: [dev], maxresources: {memory: 50}}\n  - {users: ['*'], groups: [ops, '*'], maxapplications: 1}",
        ),
        "ok",
    );
    check(
        &limit("  - {limit: nobody, maxapplications: 2}"),
        "10:15: partition default: queue root.a: limit 'nobody' has neither users nor groups",
    );
    check(
        &limit("  - {users: ['*'], maxapplications: 1}\n  - {users: [alice], maxapplications: 2}"),
        "11:23: partition default: queue root.a: limit 2 names user 'alice' after the wildcard user '*': the wildcard must come last",
    );
    check(
        &limit("  - {groups: ['*'], maxapplications: 1}"),
        "10:24: partition default: queue root.a: a group limit with only the wildcard '*' is not allowed: at least one named group must have a limit",
    );
    check(
        &limit("  - {users: [alice]}\n  - {users: [bob], maxresources: {}}"),
        "10:15: partition default: queue root.a: limit 1 sets neither maxresources nor maxapplications
11:15: partition default: queue root.a: limit 2 sets neither maxresources nor maxapplications",
    );
    check(
        &limit("  - {users: [alice], maxresources: {memory: 0}}"),
        "10:46: partition default: queue root.a: limit 1 has maxresources with every value zero",
    );
    check(
        &limit("  - {users: [alice], maxresources: {memory: 101}}"),
        "10:46: partition default: queue root.a: limit 1 maxresources {memory: 101} is more than the queue's max {memory: 100}",
    );
    check(
        &limit("  - {users: [alice], maxapplications: 11}"),
        "10:49: partition default: queue root.a: limit 1 maxapplications 11 is more than the queue's maxapplications 10",
    );
    check(
        &limit("  - {users: [alice, '1x'], maxapplications: 1}\n  - {users: [alice], groups: ['a@b'], maxapplications: 1}"),
        "10:23: partition default: queue root.a: limit 1 has an invalid user name '1x'
11:23: partition default: queue root.a: limit 2 names user 'alice', which an earlier limit already names
11:40: partition default: queue root.a: limit 2 has an invalid group name 'a@b'",
    );
    // Partition limits are checked against the root.
    check(
        &partition("limits: [{users: [alice], maxapplications: 3}]"),
        "ok",
    );
    check(
        &partition("limits: [{users: [alice]}]"),
        "10:14: partition default: limit 1 sets neither maxresources nor maxapplications",
    );
    // A limit below may not exceed the same user's limit above.
    check(
        &queues(
            "- name: p\n  limits: [{users: [alice], maxapplications: 5, maxresources: {memory: 10}}]\n  queues:\n  - name: c\n    limits: [{users: [alice], maxapplications: 5, maxresources: {memory: 10}}]",
        ),
        "ok",
    );
    check(
        &queues("- name: p\n  limits: [{users: [alice], maxapplications: 5, maxresources: {memory: 10}}]\n  queues:\n  - name: c\n    limits: [{users: [alice], maxapplications: 6, maxresources: {memory: 11}}]"),
        "10:75: partition default: queue root.p.c: user 'alice' maxresources {memory: 11} is more than its limit {memory: 10} on an ancestor queue
10:58: partition default: queue root.p.c: user 'alice' maxapplications 6 is more than its limit 5 on an ancestor queue",
    );
}

#[test]
fn many_errors_are_reported_together() {
    let err = parse(&queues("- name: a.b\n  submitacl: 'x y z'\n- name: c\n  resources: {max: {memory: 1k, vcore: oops}}")).unwrap_err();
    assert_eq!(err.0.len(), 3, "{err}");
    assert!(
        err.0
            .iter()
            .all(|e| e.line.is_some() && e.partition.as_deref() == Some("default"))
    );
}

#[test]
fn checksum_follows_upstream() {
    let text = "partitions: [{queues: [{name: root}]}]\n";
    let c = parse(text).unwrap();
    assert_eq!(c.checksum.len(), 64);
    assert!(
        c.checksum
            .chars()
            .all(|ch| ch.is_ascii_digit() || ('A'..='F').contains(&ch))
    );
    assert_eq!(c.checksum, checksum(text));
    // A checksum line written back into the text does not change the checksum.
    let with = format!("{text}checksum: {}", c.checksum);
    assert_eq!(parse(&with).unwrap().checksum, c.checksum);
    assert_ne!(checksum("partitions: []"), checksum("partitions: [ ]"));
}

#[test]
fn tree_helpers() {
    let c = parse(&partition("")).unwrap();
    let root = &c.partitions[0].root;
    assert_eq!(root.queue_count(), 4);
    assert!(root.find("root.P.C").is_some_and(QueueConfig::is_leaf));
    assert!(root.find("root.p").is_some_and(|q| !q.is_leaf()));
    assert!(root.find("root.x").is_none());
    assert!(root.find("other").is_none());
}

#[test]
fn errors_display_one_per_line() {
    let e = ConfigErrors(vec![
        ConfigError {
            message: "m1".into(),
            line: Some(3),
            column: Some(4),
            partition: Some("p".into()),
            queue: Some("root.a".into()),
        },
        ConfigError {
            message: "m2".into(),
            line: None,
            column: None,
            partition: None,
            queue: None,
        },
    ]);
    assert_eq!(e.to_string(), "3:4: partition p: queue root.a: m1\nm2");
    assert_eq!(e.0[0].describe(), "partition p: queue root.a: m1");
}

#[test]
fn never_panics_on_odd_input() {
    let inputs = [
        "partitions: [{queues: [{name: root, queues: [{name: ~}]}]}]",
        "partitions: [{queues: [{name: root, queues: [{}]}]}]",
        "partitions: [{queues: [null]}]",
        "partitions: [{queues: [{name: root, resources: {max: {'': 1}}}]}]",
        "partitions: [{placementrules: [{name: fixed, value: '.'}], queues: []}]",
        "partitions: [{placementrules: [{name: fixed, value: 'root.'}], queues: []}]",
        "partitions: [{placementrules: [{name: provided, filter: {users: ['']}}], queues: []}]",
        "partitions: [{queues: [{name: root, limits: [{users: [''], groups: ['']}]}]}]",
        "partitions: [{queues: [{name: root, properties: {preemption.delay: 999999999999999999999h}}]}]",
        "&a [*a]",
        "partitions: &x [{queues: []}]\nother: *x",
        "\u{feff}partitions: [{queues: []}]",
        "partitions: [{queues: [{name: 'é'}]}]",
        ":",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ];
    for input in inputs {
        let _ = parse(input);
    }
}
