//! Normalization and validation: raw YAML structs to checked config values.
//!
//! One pass over each partition builds the typed tree and collects every problem, each
//! with the partition, the queue path and the YAML path of the node to blame (turned
//! into a line and column by `locate`). A value that fails a check is dropped or
//! defaulted so that later checks do not repeat the same problem.

use std::collections::{BTreeMap, HashMap, HashSet};

mod limits;
mod rules;

use super::acl::Acl;
use super::locate::{Step, YamlPath, index, key};
use super::names::is_valid_queue_name;
use super::quantity::{
    add_into, fits_in_max, format_resources as fmt_res, is_zero, min_of_maxes, parse_quantity,
};
use super::raw::{
    RawChildTemplate, RawPartition, RawQueue, RawResources, RawScheduler, Scalar, StrictMap,
};
use super::{
    ChildTemplateConfig, MAX_QUEUE_DEPTH, NodeSortKind, NodeSortPolicyConfig, PartitionConfig,
    PlacementRuleConfig, PreemptionConfig, QueueConfig, properties,
};
use limits::LimitBounds;

const DEFAULT_PARTITION: &str = "default";
const ROOT: &str = "root";
const WILDCARD: &str = "*";

/// A problem found, not yet located in the text.
#[derive(Debug)]
pub(crate) struct Problem {
    pub message: String,
    pub partition: Option<String>,
    pub queue: Option<String>,
    pub at: YamlPath,
}

/// Builds the typed partitions from the raw file; the problems list is empty when the
/// configuration is valid.
pub(crate) fn build(raw: RawScheduler) -> (Vec<PartitionConfig>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut partitions = Vec::new();
    let top = vec![Step::Key("partitions".to_string())];
    let raw_partitions = raw.partitions.unwrap_or_default();
    if raw_partitions.is_empty() {
        problems.push(Problem {
            message: "no partitions defined: at least one partition is required".to_string(),
            partition: None,
            queue: None,
            at: top.clone(),
        });
    }
    let mut seen = HashSet::new();
    for (i, rp) in raw_partitions.into_iter().enumerate() {
        let at = index(&top, i);
        let name = match rp.name.as_deref().map(str::trim) {
            None | Some("") => DEFAULT_PARTITION.to_string(),
            Some(n) if n.eq_ignore_ascii_case(DEFAULT_PARTITION) => DEFAULT_PARTITION.to_string(),
            Some(n) => n.to_string(),
        };
        let mut ck = Checker {
            partition: name.clone(),
            problems: &mut problems,
            queue_at: HashMap::new(),
        };
        if !seen.insert(name.to_ascii_lowercase()) {
            ck.report(
                None,
                key(&at, "name"),
                format!("duplicate partition name '{name}'"),
            );
        }
        if let Some(p) = ck.partition(name, rp, &at) {
            partitions.push(p);
        }
    }
    (partitions, problems)
}

/// Checks one partition, recording problems under its name.
struct Checker<'a> {
    partition: String,
    problems: &'a mut Vec<Problem>,
    /// Where each queue was written, by full path, for checks that run on the tree.
    queue_at: HashMap<String, YamlPath>,
}

impl Checker<'_> {
    fn report(&mut self, queue: Option<&str>, at: YamlPath, message: String) {
        self.problems.push(Problem {
            message,
            partition: Some(self.partition.clone()),
            queue: queue.map(str::to_string),
            at,
        });
    }

    fn partition(
        &mut self,
        name: String,
        rp: RawPartition,
        at: &YamlPath,
    ) -> Option<PartitionConfig> {
        let Some(top_queues) = rp.queues else {
            self.report(
                None,
                at.clone(),
                "partition has no queues: the 'queues' list is required".to_string(),
            );
            return None;
        };
        // A single top-level `root` is the root; anything else goes under an inserted root
        // whose children sit at `partition.queues[i]`.
        let single_root = top_queues.len() == 1
            && top_queues[0]
                .name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(ROOT));
        let (raw_root, root_at) = if single_root {
            let mut qs = top_queues;
            (qs.remove(0), index(&key(at, "queues"), 0))
        } else {
            let inserted = RawQueue {
                name: Some(ROOT.to_string()),
                parent: Some(true),
                resources: None,
                max_applications: None,
                properties: None,
                admin_acl: None,
                submit_acl: None,
                child_template: None,
                queues: Some(top_queues),
                limits: None,
            };
            (inserted, at.clone())
        };
        let (root, _) = self.queue(raw_root, &root_at, ROOT, 1, None);

        let rules_at = key(at, "placementrules");
        let placement_rules: Vec<PlacementRuleConfig> = rp
            .placement_rules
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| self.rule(r, index(&rules_at, i), 1))
            .collect();
        for (i, rule) in placement_rules.iter().enumerate() {
            self.check_static_path(i, rule, &root, index(&rules_at, i));
        }

        let limits = self.limits(
            rp.limits,
            &key(at, "limits"),
            None,
            None,
            root.max_applications,
        );
        self.check_limit_hierarchy(&root, ROOT, &LimitBounds::default());

        let preemption = PreemptionConfig {
            enabled: rp.preemption.and_then(|p| p.enabled).unwrap_or(true),
        };
        let node_sort_policy = self.node_sort(rp.node_sort_policy, &key(at, "nodesortpolicy"));
        Some(PartitionConfig {
            name,
            root,
            placement_rules,
            limits,
            preemption,
            node_sort_policy,
        })
    }

    /// Converts and checks one queue and its subtree. Returns the queue and its
    /// effective guarantee (its own, or the sum of its children's when it has none), which
    /// the parent adds up.
    fn queue(
        &mut self,
        rq: RawQueue,
        at: &YamlPath,
        path: &str,
        depth: usize,
        parent_max: Option<&BTreeMap<String, i64>>,
    ) -> (QueueConfig, BTreeMap<String, i64>) {
        let is_root = depth == 1;
        let name = if is_root {
            ROOT.to_string()
        } else {
            rq.name.clone().unwrap_or_default()
        };
        self.queue_at
            .entry(path.to_string())
            .or_insert_with(|| at.clone());
        let q = Some(path);

        for (acl, field) in [(&rq.admin_acl, "adminacl"), (&rq.submit_acl, "submitacl")] {
            if let Some(Err(e)) = acl.as_deref().map(Acl::parse) {
                self.report(q, key(at, field), format!("{field}: {e}"));
            }
        }

        let res_at = key(at, "resources");
        if is_root
            && rq
                .resources
                .as_ref()
                .is_some_and(|r| r.guaranteed.is_some() || r.max.is_some())
        {
            self.report(
                q,
                res_at.clone(),
                "the root queue must not have resources set".to_string(),
            );
        }
        let (guaranteed, max) = self.resources(q, rq.resources, &res_at);
        if !fits_in_max(&guaranteed, &max) {
            self.report(
                q,
                key(&res_at, "guaranteed"),
                format!(
                    "guaranteed {} is larger than max {}",
                    fmt_res(&guaranteed),
                    fmt_res(&max)
                ),
            );
        }
        let effective_max = match parent_max {
            Some(pm) => {
                if !fits_in_max(&max, pm) {
                    self.report(
                        q,
                        key(&res_at, "max"),
                        format!(
                            "max {} is larger than the max {} of its parent or an ancestor",
                            fmt_res(&max),
                            fmt_res(pm)
                        ),
                    );
                }
                min_of_maxes(&max, pm)
            }
            None => max.clone(),
        };

        let properties = self.properties(q, rq.properties, &key(at, "properties"));
        let child_template = rq
            .child_template
            .map(|t| self.child_template(q, t, &key(at, "childtemplate")));
        let max_applications = rq.max_applications.unwrap_or(0);

        let raw_children = rq.queues.unwrap_or_default();
        if depth >= MAX_QUEUE_DEPTH && !raw_children.is_empty() {
            self.report(
                q,
                key(at, "queues"),
                format!("queue hierarchy is deeper than the limit of {MAX_QUEUE_DEPTH} levels"),
            );
        }
        let mut children = Vec::new();
        let mut children_guaranteed = BTreeMap::new();
        let mut sibling_names = HashSet::new();
        let children_at = key(at, "queues");
        let children_to_check = if depth >= MAX_QUEUE_DEPTH {
            Vec::new()
        } else {
            raw_children
        };
        for (i, child) in children_to_check.into_iter().enumerate() {
            let child_at = index(&children_at, i);
            let child_name = child.name.clone().unwrap_or_default();
            let child_path = format!("{path}.{child_name}");
            let cq = Some(child_path.as_str());
            if child_name.is_empty() {
                self.report(cq, child_at.clone(), "queue has no name".to_string());
            } else if !is_valid_queue_name(&child_name) {
                self.report(
                    cq,
                    key(&child_at, "name"),
                    format!(
                        "invalid queue name '{child_name}': use 1 to 64 characters from a-z, A-Z, 0-9 and _ : # / @ -"
                    ),
                );
            } else if !sibling_names.insert(child_name.to_ascii_lowercase()) {
                self.report(
                    cq,
                    key(&child_at, "name"),
                    format!("duplicate queue name '{child_name}' under {path} (names are case-insensitive)"),
                );
            }
            let child_apps = child.max_applications.unwrap_or(0);
            if max_applications != 0 && (child_apps == 0 || child_apps > max_applications) {
                let shown = if child_apps == 0 {
                    "0 (unlimited)".to_string()
                } else {
                    child_apps.to_string()
                };
                self.report(
                    cq,
                    key(&child_at, "maxapplications"),
                    format!("maxapplications {shown} is more than its parent's maxapplications {max_applications}"),
                );
            }
            let (cfg, g) = self.queue(
                child,
                &child_at,
                &child_path,
                depth + 1,
                Some(&effective_max),
            );
            add_into(&mut children_guaranteed, &g);
            children.push(cfg);
        }

        if !fits_in_max(&children_guaranteed, &guaranteed) {
            self.report(
                q,
                key(&res_at, "guaranteed"),
                format!(
                    "guaranteed {} is smaller than the sum of its children's guaranteed {}",
                    fmt_res(&guaranteed),
                    fmt_res(&children_guaranteed)
                ),
            );
        }
        if !fits_in_max(&children_guaranteed, &effective_max) {
            self.report(
                q,
                key(&res_at, "max"),
                format!(
                    "max {} (own or inherited) is smaller than the sum of its children's guaranteed {}",
                    fmt_res(&effective_max),
                    fmt_res(&children_guaranteed)
                ),
            );
        }

        let limits = self.limits(
            rq.limits,
            &key(at, "limits"),
            q,
            (!is_root).then_some(&max),
            max_applications,
        );
        let effective_guaranteed = if is_zero(&guaranteed) {
            children_guaranteed
        } else {
            guaranteed.clone()
        };
        let queue = QueueConfig {
            name,
            parent: is_root || rq.parent.unwrap_or(false) || !children.is_empty(),
            guaranteed,
            max,
            max_applications,
            properties,
            admin_acl: rq.admin_acl,
            submit_acl: rq.submit_acl,
            child_template,
            queues: children,
            limits,
        };
        (queue, effective_guaranteed)
    }

    fn resources(
        &mut self,
        q: Option<&str>,
        raw: Option<RawResources>,
        at: &YamlPath,
    ) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
        let raw = raw.unwrap_or(RawResources {
            guaranteed: None,
            max: None,
        });
        (
            self.resource_map(q, raw.guaranteed, &key(at, "guaranteed")),
            self.resource_map(q, raw.max, &key(at, "max")),
        )
    }

    /// Parses a resource map, reporting and dropping entries that do not parse.
    fn resource_map(
        &mut self,
        q: Option<&str>,
        raw: Option<StrictMap<Scalar>>,
        at: &YamlPath,
    ) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (name, Scalar(text)) in raw.map(|m| m.0).unwrap_or_default() {
            if name.trim().is_empty() {
                self.report(q, at.clone(), "resource with an empty name".to_string());
                continue;
            }
            match parse_quantity(&name, &text) {
                Ok(v) => {
                    out.insert(name, v);
                }
                Err(e) => self.report(q, key(at, &name), e),
            }
        }
        out
    }

    fn properties(
        &mut self,
        q: Option<&str>,
        raw: Option<StrictMap<Scalar>>,
        at: &YamlPath,
    ) -> BTreeMap<String, String> {
        let props: BTreeMap<String, String> = raw
            .map(|m| m.0)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, Scalar(v))| (k, v))
            .collect();
        for (k, message) in properties::check(&props) {
            self.report(q, key(at, &k), message);
        }
        props
    }

    fn child_template(
        &mut self,
        q: Option<&str>,
        raw: RawChildTemplate,
        at: &YamlPath,
    ) -> ChildTemplateConfig {
        let res_at = key(at, "resources");
        let (guaranteed, max) = self.resources(q, raw.resources, &res_at);
        if !fits_in_max(&guaranteed, &max) {
            self.report(
                q,
                key(&res_at, "guaranteed"),
                format!(
                    "child template guaranteed {} is larger than its max {}",
                    fmt_res(&guaranteed),
                    fmt_res(&max)
                ),
            );
        }
        ChildTemplateConfig {
            max_applications: raw.max_applications.unwrap_or(0),
            properties: self.properties(q, raw.properties, &key(at, "properties")),
            guaranteed,
            max,
        }
    }

    fn node_sort(
        &mut self,
        raw: Option<super::raw::RawNodeSortPolicy>,
        at: &YamlPath,
    ) -> NodeSortPolicyConfig {
        let Some(raw) = raw else {
            return NodeSortPolicyConfig::default();
        };
        let kind = match raw.kind.as_deref().map(str::trim).unwrap_or("") {
            "" => NodeSortKind::Fair,
            k if k.eq_ignore_ascii_case("fair") => NodeSortKind::Fair,
            k if k.eq_ignore_ascii_case("binpacking") => NodeSortKind::Binpacking,
            other => {
                self.report(
                    None,
                    key(at, "type"),
                    format!(
                        "unknown node sort policy type '{other}' (expected fair or binpacking)"
                    ),
                );
                NodeSortKind::Fair
            }
        };
        let mut resource_weights = BTreeMap::new();
        let weights_at = key(at, "resourceweights");
        for (name, w) in raw.resource_weights.map(|m| m.0).unwrap_or_default() {
            if !w.is_finite() || w < 0.0 {
                self.report(
                    None,
                    key(&weights_at, &name),
                    format!("resource weight of '{name}' is {w}: weights must be finite and not negative"),
                );
            } else {
                resource_weights.insert(name, w);
            }
        }
        NodeSortPolicyConfig {
            kind,
            resource_weights,
        }
    }
}

/// True for a fully qualified queue path: `root` or `root.…`.
fn is_qualified(path: &str) -> bool {
    path.eq_ignore_ascii_case(ROOT)
        || path
            .get(..ROOT.len() + 1)
            .is_some_and(|p| p.eq_ignore_ascii_case("root."))
}
