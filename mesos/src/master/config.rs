//! The queue configuration of the Mesos partition: the user's YAML (its first
//! partition), with placement that puts each (framework, role) application
//! in its role's queue, created on demand, role weights as queue weights,
//! and the quota an operator set at run time as the queues' guaranteed and
//! maximum resources.

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::units::role_queue;

/// The name of the Mesos front end's partition in the core (and in `/ws/v1`):
/// distinct from an SI RM's `default`, so both can be addressed by plain name.
pub const PARTITION: &str = "mesos";

/// The configuration used when none is given: everyone may submit to root.
pub const DEFAULT_CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
";

fn key(k: &str) -> Value {
    Value::String(k.to_string())
}

/// The child queue `name` of `queue` (made when missing).
fn child<'a>(queue: &'a mut Mapping, name: &str, parent: bool) -> Result<&'a mut Mapping, String> {
    let list = queue
        .entry(key("queues"))
        .or_insert_with(|| Value::Sequence(Vec::new()));
    let Value::Sequence(list) = list else {
        return Err("'queues' must be a list".to_string());
    };
    let at = list
        .iter()
        .position(|q| q.get("name").and_then(Value::as_str) == Some(name));
    let at = match at {
        Some(i) => i,
        None => {
            let mut q = Mapping::new();
            q.insert(key("name"), key(name));
            if parent {
                q.insert(key("parent"), Value::Bool(true));
            }
            list.push(Value::Mapping(q));
            list.len() - 1
        }
    };
    match &mut list[at] {
        Value::Mapping(m) => Ok(m),
        _ => Err(format!("queue {name} must be a mapping")),
    }
}

/// The text the Mesos front end registers with: `text` (or
/// [`DEFAULT_CONFIG`]) reduced to its partition named [`PARTITION`] when it
/// has one, else its first, named [`PARTITION`], whose
/// placement is the `provided` rule with `create` (roles not in the file
/// become queues under root), with each weighted role's queue given its
/// `weight`. Errors name what is wrong.
pub fn mesos_partition(
    text: Option<&str>,
    weights: &BTreeMap<String, f64>,
) -> Result<String, String> {
    mesos_partition_with(text, weights, &Quotas::new())
}

/// A role's quota in core units (see `units`): its queue's guaranteed and
/// maximum resources. Both empty is no quota.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleQuota {
    /// Guaranteed resources, core names and units.
    pub guaranteed: BTreeMap<String, i64>,
    /// Maximum resources, core names and units (an absent name is unlimited).
    pub max: BTreeMap<String, i64>,
}

/// Quota set at run time (UPDATE_QUOTA and the `/quota` endpoint), by
/// role: each replaces what the configuration file gives its role's queue.
pub type Quotas = BTreeMap<String, RoleQuota>;

/// A resource map in the configuration's text form (`vcore` in
/// milli-cores with its `m`, every other resource a plain integer).
fn quantities(map: &BTreeMap<String, i64>) -> Value {
    let mut out = Mapping::new();
    for (name, value) in map {
        let text = if name == unisched_core::config::VCORE {
            format!("{value}m")
        } else {
            value.to_string()
        };
        out.insert(key(name), key(&text));
    }
    Value::Mapping(out)
}

/// The queue of `role` in the tree under `root` (made when missing).
fn role_mapping<'a>(root: &'a mut Mapping, role: &str) -> Result<&'a mut Mapping, String> {
    let path = role_queue(role)?;
    let parts: Vec<&str> = path.split('.').skip(1).collect();
    let mut q = root;
    for (i, part) in parts.iter().enumerate() {
        q = child(q, part, i + 1 < parts.len())?;
    }
    Ok(q)
}

/// [`mesos_partition`] with the quota an operator set at run time: each
/// role in `quotas` has its queue's `resources` guaranteed and max replaced
/// (removed when empty).
pub fn mesos_partition_with(
    text: Option<&str>,
    weights: &BTreeMap<String, f64>,
    quotas: &Quotas,
) -> Result<String, String> {
    let text = text.unwrap_or(DEFAULT_CONFIG);
    unisched_core::config::parse(text).map_err(|e| e.to_string())?;
    let mut doc: Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let partitions = doc
        .get_mut("partitions")
        .and_then(Value::as_sequence_mut)
        .ok_or("the configuration has no partitions")?;
    let chosen = partitions
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(PARTITION))
        .or(partitions.first());
    let mut partition = match chosen {
        Some(Value::Mapping(p)) => p.clone(),
        _ => return Err("the first partition must be a mapping".to_string()),
    };
    partition.insert(key("name"), key(PARTITION));
    let mut rule = Mapping::new();
    rule.insert(key("name"), key("provided"));
    rule.insert(key("create"), Value::Bool(true));
    partition.insert(
        key("placementrules"),
        Value::Sequence(vec![Value::Mapping(rule)]),
    );
    // One root: wrap top-level queues that are not a single root.
    let queues = partition
        .get("queues")
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default();
    let single_root = queues.len() == 1
        && queues[0]
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n.eq_ignore_ascii_case("root"));
    let mut root = if single_root {
        match &queues[0] {
            Value::Mapping(m) => m.clone(),
            _ => return Err("queue root must be a mapping".to_string()),
        }
    } else {
        let mut r = Mapping::new();
        r.insert(key("name"), key("root"));
        r.insert(key("submitacl"), key("*"));
        r.insert(key("queues"), Value::Sequence(queues));
        r
    };
    for (role, weight) in weights {
        let q = role_mapping(&mut root, role)?;
        let props = q
            .entry(key("properties"))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let Value::Mapping(props) = props else {
            return Err(format!(
                "role {role}: its queue's properties must be a mapping"
            ));
        };
        props.insert(key("weight"), key(&weight.to_string()));
    }
    for (role, quota) in quotas {
        let q = role_mapping(&mut root, role)?;
        let resources = q
            .entry(key("resources"))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let Value::Mapping(resources) = resources else {
            return Err(format!(
                "role {role}: its queue's resources must be a mapping"
            ));
        };
        for (field, map) in [("guaranteed", &quota.guaranteed), ("max", &quota.max)] {
            if map.is_empty() {
                resources.remove(field);
            } else {
                resources.insert(key(field), quantities(map));
            }
        }
    }
    partition.insert(key("queues"), Value::Sequence(vec![Value::Mapping(root)]));
    let mut out = Mapping::new();
    out.insert(
        key("partitions"),
        Value::Sequence(vec![Value::Mapping(partition)]),
    );
    let text = serde_yaml::to_string(&Value::Mapping(out)).map_err(|e| e.to_string())?;
    let parsed = unisched_core::config::parse(&text).map_err(|e| e.to_string())?;
    if let Some(p) = parsed.partitions.first() {
        check_mesos_names(&p.root, &p.root.name)?;
    }
    Ok(text)
}

/// Refuses quantities named with the Mesos names the front end gives the
/// core under other names: an agent's `cpus` reach the core as `vcore`
/// and its `mem` as `memory`, so a guarantee or limit of `cpus` or `mem`
/// would name a resource no agent has (a guarantee never met, which sorts
/// its role first forever; a limit that limits nothing).
fn check_mesos_names(queue: &unisched_core::config::QueueConfig, path: &str) -> Result<(), String> {
    let mut lists: Vec<(String, &BTreeMap<String, i64>)> = vec![
        ("resources.guaranteed".to_string(), &queue.guaranteed),
        ("resources.max".to_string(), &queue.max),
    ];
    if let Some(t) = &queue.child_template {
        lists.push((
            "childtemplate.resources.guaranteed".to_string(),
            &t.guaranteed,
        ));
        lists.push(("childtemplate.resources.max".to_string(), &t.max));
    }
    for l in &queue.limits {
        lists.push((
            format!("limits ({}).maxresources", l.limit),
            &l.max_resources,
        ));
    }
    for (field, map) in lists {
        for name in map.keys() {
            let core_name = match name.as_str() {
                "cpus" => "vcore: 2 is two cpus, 500m half of one",
                "mem" => "memory in bytes: memory: 512Mi is 512 MB",
                _ => continue,
            };
            return Err(format!(
                "queue {path}: {field} names '{name}', which no agent has in the core: \
                 Mesos resources are counted in the core's names and units ({core_name})"
            ));
        }
    }
    for child in &queue.queues {
        check_mesos_names(child, &format!("{path}.{}", child.name))?;
    }
    Ok(())
}

/// Parses `--mesos-weights r1=2,r2=1`.
pub fn parse_weights(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (role, w) = part
            .split_once('=')
            .ok_or_else(|| format!("weight '{part}' is not role=weight"))?;
        let w: f64 = w
            .trim()
            .parse()
            .map_err(|_| format!("weight of role '{role}' is not a number: '{w}'"))?;
        if !(w.is_finite() && w > 0.0) {
            return Err(format!("weight of role '{role}' must be positive, got {w}"));
        }
        super::units::validate_role(role.trim())?;
        out.insert(role.trim().to_string(), w);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesos_names_in_quantities_are_refused_with_the_core_names() {
        let with = |resources: &str| {
            format!(
                "
partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            queues:
              - name: b
{resources}
"
            )
        };
        let none = BTreeMap::new();
        let refused = |resources: &str| mesos_partition(Some(&with(resources)), &none).unwrap_err();
        let e = refused("                resources:\n                  guaranteed: {cpus: 2}");
        assert!(
            e.contains("queue root.a.b: resources.guaranteed names 'cpus'"),
            "{e}"
        );
        assert!(e.contains("vcore: 2 is two cpus"), "{e}");
        let e = refused("                resources:\n                  max: {mem: 512Mi}");
        assert!(
            e.contains("queue root.a.b: resources.max names 'mem'"),
            "{e}"
        );
        let e = refused(
            "                limits:\n                  - limit: one\n                    users: ['*']\n                    maxresources: {cpus: 1}",
        );
        assert!(e.contains("limits (one).maxresources names 'cpus'"), "{e}");
        // The core's names, and other scalars, are taken.
        let ok = mesos_partition(
            Some(&with(
                "                resources:\n                  guaranteed: {vcore: 2, memory: 512Mi, gpus: 1000}",
            )),
            &none,
        )
        .unwrap();
        let c = unisched_core::config::parse(&ok).unwrap();
        let b = c.partitions[0].root.find("root.a.b").unwrap();
        assert_eq!(b.guaranteed.get("vcore"), Some(&2000));
        assert_eq!(b.guaranteed.get("memory"), Some(&(512 << 20)));
    }

    #[test]
    fn operator_quota_replaces_the_files_and_makes_missing_queues() {
        let user = "partitions:
  - name: mesos
    queues:
      - name: root
        queues:
          - name: a
            resources:
              guaranteed: {vcore: 1, memory: 1Mi}
              max: {vcore: 2, gpus: 3}
          - name: kept
            resources:
              max: {vcore: 4}
";
        let q = |g: &[(&str, i64)], m: &[(&str, i64)]| RoleQuota {
            guaranteed: g.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            max: m.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        };
        let quotas: Quotas = [
            ("a".to_string(), q(&[], &[("vcore", 1500)])),
            ("eng/web".to_string(), q(&[("memory", 3 << 20)], &[])),
        ]
        .into_iter()
        .collect();
        let text = mesos_partition_with(Some(user), &BTreeMap::new(), &quotas).unwrap();
        let c = unisched_core::config::parse(&text).unwrap();
        let root = &c.partitions[0].root;
        let a = root.find("root.a").unwrap();
        assert!(a.guaranteed.is_empty(), "{text}");
        assert_eq!(a.max, q(&[], &[("vcore", 1500)]).max);
        let web = root.find("root.eng.web").unwrap();
        assert_eq!(web.guaranteed.get("memory"), Some(&(3 << 20)));
        assert!(root.find("root.eng").unwrap().parent);
        assert_eq!(
            root.find("root.kept").unwrap().max.get("vcore"),
            Some(&4000)
        );
        // No quota: both go, the queue stays.
        let cleared: Quotas = [("a".to_string(), RoleQuota::default())]
            .into_iter()
            .collect();
        let text = mesos_partition_with(Some(user), &BTreeMap::new(), &cleared).unwrap();
        let c = unisched_core::config::parse(&text).unwrap();
        let a = c.partitions[0].root.find("root.a").unwrap();
        assert!(a.guaranteed.is_empty() && a.max.is_empty(), "{text}");
    }

    #[test]
    fn the_default_gets_provided_placement() {
        let text = mesos_partition(None, &BTreeMap::new()).unwrap();
        let c = unisched_core::config::parse(&text).unwrap();
        let p = &c.partitions[0];
        assert_eq!(p.name, PARTITION);
        assert_eq!(p.placement_rules.len(), 1);
        assert_eq!(
            p.placement_rules[0].kind,
            unisched_core::config::RuleKind::Provided
        );
        assert!(p.placement_rules[0].create);
    }

    #[test]
    fn weights_become_queue_properties_and_other_partitions_go() {
        let user = "
partitions:
  - name: first
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: web
            resources:
              max: {vcore: 4}
  - name: second
    queues:
      - name: root
";
        let weights = parse_weights("web=2, eng/batch=0.5").unwrap();
        let text = mesos_partition(Some(user), &weights).unwrap();
        let c = unisched_core::config::parse(&text).unwrap();
        assert_eq!(c.partitions.len(), 1);
        let root = &c.partitions[0].root;
        let web = root.find("root.web").unwrap();
        assert_eq!(web.properties["weight"], "2");
        assert!(!web.max.is_empty());
        let batch = root.find("root.eng.batch").unwrap();
        assert_eq!(batch.properties["weight"], "0.5");
        assert!(root.find("root.eng").unwrap().parent);
    }

    #[test]
    fn a_partition_named_mesos_is_the_one_used() {
        let user = "
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: si-only
  - name: mesos
    queues:
      - name: root
        queues:
          - name: frameworks
";
        let text = mesos_partition(Some(user), &BTreeMap::new()).unwrap();
        let c = unisched_core::config::parse(&text).unwrap();
        let root = &c.partitions[0].root;
        assert!(root.find("root.frameworks").is_some());
        assert!(root.find("root.si-only").is_none());
    }

    #[test]
    fn bad_weights_and_configs_are_refused() {
        assert!(parse_weights("web").is_err());
        assert!(parse_weights("web=x").is_err());
        assert!(parse_weights("web=0").is_err());
        assert!(parse_weights("/web=1").is_err());
        assert!(mesos_partition(Some("partitions: 3"), &BTreeMap::new()).is_err());
    }
}
