//! Normalization and validation: raw YAML structs to checked config values.
//!
//! One pass over each partition builds the typed tree and collects every problem, each
//! with the partition, the queue path and the YAML path of the node to blame (turned
//! into a line and column by `locate`). A value that fails a check is dropped or
//! defaulted so that later checks do not repeat the same problem.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::acl::Acl;
use super::locate::{Step, YamlPath, index, key};
use super::names::{has_regex_chars, is_valid_group_name, is_valid_queue_name, is_valid_user_name};
use super::quantity::{
    add_into, fits_in_max, format_resources as fmt_res, is_zero, min_of_maxes, parse_quantity,
};
use super::raw::{
    RawChildTemplate, RawFilter, RawLimit, RawPartition, RawQueue, RawResources, RawRule,
    RawScheduler, Scalar, StrictMap,
};
use super::{
    ChildTemplateConfig, FilterConfig, FilterKind, LimitConfig, MAX_QUEUE_DEPTH, NodeSortKind,
    NodeSortPolicyConfig, PartitionConfig, PlacementRuleConfig, PreemptionConfig, QueueConfig,
    RuleKind, properties,
};

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

    // ---- placement rules ----

    fn rule(&mut self, raw: RawRule, at: YamlPath, depth: usize) -> Option<PlacementRuleConfig> {
        let raw_name = raw.name.as_deref().map(str::trim).unwrap_or("");
        let kind = match raw_name.to_ascii_lowercase().as_str() {
            "provided" => RuleKind::Provided,
            "user" => RuleKind::User,
            "tag" => RuleKind::Tag,
            "fixed" => RuleKind::Fixed,
            "" => {
                self.report(None, at, "placement rule has no name".to_string());
                return None;
            }
            _ => {
                self.report(
                    None,
                    key(&at, "name"),
                    format!("unknown placement rule '{raw_name}' (expected provided, user, tag or fixed)"),
                );
                return None;
            }
        };
        let rule_name = kind.name();
        let value = raw
            .value
            .as_deref()
            .map(str::trim)
            .unwrap_or("")
            .to_string();
        let mut ok = true;
        match kind {
            RuleKind::Tag if value.is_empty() => {
                self.report(
                    None,
                    at.clone(),
                    "tag rule needs a value: the name of the application tag".to_string(),
                );
                ok = false;
            }
            RuleKind::Fixed if value.is_empty() => {
                self.report(
                    None,
                    at.clone(),
                    "fixed rule needs a value: the queue name or path".to_string(),
                );
                ok = false;
            }
            RuleKind::Fixed => {
                let qualified = is_qualified(&value);
                if qualified && raw.parent.is_some() {
                    self.report(
                        None,
                        key(&at, "parent"),
                        format!("fixed rule with the full queue path '{value}' cannot have a parent rule"),
                    );
                    ok = false;
                }
                let names = value.split('.').skip(usize::from(qualified));
                if let Some(bad) = names.into_iter().find(|n| !is_valid_queue_name(n)) {
                    self.report(
                        None,
                        key(&at, "value"),
                        format!("fixed rule value '{value}' has an invalid queue name '{bad}'"),
                    );
                    ok = false;
                }
            }
            _ => {}
        }
        let filter = self.filter(raw.filter, &key(&at, "filter"), rule_name);
        let parent = match raw.parent {
            Some(_) if depth >= MAX_QUEUE_DEPTH => {
                self.report(
                    None,
                    key(&at, "parent"),
                    format!(
                        "placement rule chain is longer than the limit of {MAX_QUEUE_DEPTH} rules"
                    ),
                );
                ok = false;
                None
            }
            Some(p) => match self.rule(*p, key(&at, "parent"), depth + 1) {
                Some(p) => Some(Box::new(p)),
                None => {
                    ok = false;
                    None
                }
            },
            None => None,
        };
        ok.then(|| PlacementRuleConfig {
            kind,
            create: raw.create.unwrap_or(false),
            filter: filter.unwrap_or_default(),
            parent,
            value,
        })
    }

    fn filter(
        &mut self,
        raw: Option<RawFilter>,
        at: &YamlPath,
        rule_name: &str,
    ) -> Option<FilterConfig> {
        let raw = raw?;
        let kind = match raw.kind.as_deref().map(str::trim).unwrap_or("") {
            "" => FilterKind::Allow,
            k if k.eq_ignore_ascii_case("allow") => FilterKind::Allow,
            k if k.eq_ignore_ascii_case("deny") => FilterKind::Deny,
            other => {
                self.report(
                    None,
                    key(at, "type"),
                    format!(
                        "{rule_name} rule filter type '{other}' is unknown (expected allow or deny)"
                    ),
                );
                FilterKind::Allow
            }
        };
        let users = raw.users.unwrap_or_default();
        let groups = raw.groups.unwrap_or_default();
        for (list, field, valid_name) in [
            (&users, "users", is_valid_user_name as fn(&str) -> bool),
            (&groups, "groups", is_valid_group_name),
        ] {
            // A single entry is a name, or else must be a regular expression; longer lists
            // are names and invalid ones are ignored when the rule runs, as upstream.
            if let [only] = list.as_slice()
                && !valid_name(only)
                && (!has_regex_chars(only) || regex::Regex::new(only).is_err())
            {
                self.report(
                    None,
                    key(at, field),
                    format!("{rule_name} rule filter {field} entry '{only}' is neither a valid name nor a regular expression"),
                );
            }
        }
        Some(FilterConfig {
            kind,
            users,
            groups,
        })
    }

    /// Checks the fixed part of a rule chain against the configured queues: a chain that
    /// starts with `fixed` rules names queues that must exist (unless the rule creates
    /// them) and must be a leaf when the chain ends there, or a parent when more rules
    /// add queues below.
    fn check_static_path(
        &mut self,
        no: usize,
        rule: &PlacementRuleConfig,
        root: &QueueConfig,
        at: YamlPath,
    ) {
        let mut chain = Vec::new();
        let mut cur = Some(rule);
        while let Some(r) = cur {
            chain.push(r);
            cur = r.parent.as_deref();
        }
        chain.reverse();
        let names: Vec<&str> = chain.iter().map(|r| r.kind.name()).collect();
        let described = format!("placement rule {} ({})", no + 1, names.join(" -> "));
        let mut path: Vec<&str> = Vec::new();
        let mut create = false;
        let mut dynamic = false;
        for r in &chain {
            if r.kind != RuleKind::Fixed {
                dynamic = true;
                break;
            }
            if is_qualified(&r.value) {
                path = r.value.split('.').collect();
            } else {
                if path.is_empty() {
                    path.push(ROOT);
                }
                path.extend(r.value.split('.'));
            }
            create = r.create;
        }
        if path.is_empty() {
            return;
        }
        let shown = path.join(".");
        let mut queue = root;
        for (depth, part) in path.iter().enumerate().skip(1) {
            match queue.child(part) {
                Some(child) => queue = child,
                None if queue.is_leaf() => {
                    let parent_path = path[..depth].join(".");
                    self.report(
                        None,
                        at,
                        format!("{described} names queue {shown}, which cannot exist: {parent_path} is a leaf queue"),
                    );
                    return;
                }
                None if !create => {
                    self.report(
                        None,
                        at,
                        format!("{described} names queue {shown}, which does not exist, and create is false"),
                    );
                    return;
                }
                None => return,
            }
        }
        if dynamic && queue.is_leaf() {
            self.report(
                None,
                at,
                format!("{described} puts dynamic queues under {shown}, which is a leaf queue"),
            );
        } else if !dynamic && !queue.is_leaf() {
            self.report(
                None,
                at,
                format!("{described} places applications in {shown}, which is not a leaf queue"),
            );
        }
    }

    // ---- limits ----

    /// Checks one list of limits. `queue_max` is the queue's own max (None for the root
    /// and the partition, which have none); `queue_max_apps` 0 is unlimited.
    fn limits(
        &mut self,
        raw: Option<Vec<RawLimit>>,
        at: &YamlPath,
        q: Option<&str>,
        queue_max: Option<&BTreeMap<String, i64>>,
        queue_max_apps: u64,
    ) -> Vec<LimitConfig> {
        let mut out = Vec::new();
        let mut users_seen: HashSet<String> = HashSet::new();
        let mut groups_seen: HashSet<String> = HashSet::new();
        let mut group_wildcard_at = None;
        for (i, rl) in raw.unwrap_or_default().into_iter().enumerate() {
            let limit_at = index(at, i);
            let users = rl.users.unwrap_or_default();
            let groups = rl.groups.unwrap_or_default();
            let label = match rl.limit.as_deref() {
                Some(d) if !d.trim().is_empty() => format!("limit '{}'", d.trim()),
                _ => format!("limit {}", i + 1),
            };
            if users.is_empty() && groups.is_empty() {
                self.report(
                    q,
                    limit_at.clone(),
                    format!("{label} has neither users nor groups"),
                );
            }
            for (list, field, seen) in [
                (&users, "users", &mut users_seen),
                (&groups, "groups", &mut groups_seen),
            ] {
                let what = &field[..field.len() - 1];
                for name in list {
                    let valid = if field == "users" {
                        is_valid_user_name(name)
                    } else {
                        is_valid_group_name(name)
                    };
                    let problem = if name != WILDCARD && !valid {
                        Some(format!("{label} has an invalid {what} name '{name}'"))
                    } else if seen.contains(name.as_str()) {
                        Some(format!(
                            "{label} names {what} '{name}', which an earlier limit already names"
                        ))
                    } else if name != WILDCARD && seen.contains(WILDCARD) {
                        Some(format!(
                            "{label} names {what} '{name}' after the wildcard {what} '*': the wildcard must come last"
                        ))
                    } else {
                        None
                    };
                    if let Some(p) = problem {
                        self.report(q, key(&limit_at, field), p);
                    }
                    seen.insert(name.clone());
                }
            }
            if groups.iter().any(|g| g == WILDCARD) {
                group_wildcard_at.get_or_insert_with(|| key(&limit_at, "groups"));
            }
            let res_at = key(&limit_at, "maxresources");
            let has_resources = rl.max_resources.as_ref().is_some_and(|m| !m.0.is_empty());
            let max_resources = self.resource_map(q, rl.max_resources, &res_at);
            let max_applications = rl.max_applications.unwrap_or(0);
            if has_resources && is_zero(&max_resources) && !max_resources.is_empty() {
                self.report(
                    q,
                    res_at.clone(),
                    format!("{label} has maxresources with every value zero"),
                );
            }
            if !has_resources && max_applications == 0 {
                self.report(
                    q,
                    limit_at.clone(),
                    format!("{label} sets neither maxresources nor maxapplications"),
                );
            }
            if queue_max_apps != 0 && max_applications > queue_max_apps {
                self.report(
                    q,
                    key(&limit_at, "maxapplications"),
                    format!(
                        "{label} maxapplications {max_applications} is more than the queue's maxapplications {queue_max_apps}"
                    ),
                );
            }
            if let Some(qm) = queue_max
                && !fits_in_max(&max_resources, qm)
            {
                self.report(
                    q,
                    res_at,
                    format!(
                        "{label} maxresources {} is more than the queue's max {}",
                        fmt_res(&max_resources),
                        fmt_res(qm)
                    ),
                );
            }
            out.push(LimitConfig {
                limit: rl.limit.unwrap_or_default(),
                users,
                groups,
                max_resources,
                max_applications,
            });
        }
        if let Some(wc_at) = group_wildcard_at
            && groups_seen.len() == 1
        {
            self.report(
                q,
                wc_at,
                "a group limit with only the wildcard '*' is not allowed: at least one named group must have a limit"
                    .to_string(),
            );
        }
        out
    }

    /// A user's or group's limit on a queue may not exceed its limit on an ancestor.
    fn check_limit_hierarchy(&mut self, queue: &QueueConfig, path: &str, inherited: &LimitBounds) {
        let mut bounds = inherited.clone();
        let at = self.queue_at.get(path).cloned().unwrap_or_default();
        for (i, limit) in queue.limits.iter().enumerate() {
            let limit_at = index(&key(&at, "limits"), i);
            for (names, what, table) in [
                (&limit.users, "user", &mut bounds.users),
                (&limit.groups, "group", &mut bounds.groups),
            ] {
                for name in names {
                    let Some((anc_res, anc_apps)) = inherited_bound(inherited, what, name) else {
                        table.insert(
                            name.clone(),
                            (limit.max_resources.clone(), limit.max_applications),
                        );
                        continue;
                    };
                    if !fits_in_max(&limit.max_resources, &anc_res) {
                        self.problems.push(Problem {
                            message: format!(
                                "{what} '{name}' maxresources {} is more than its limit {} on an ancestor queue",
                                fmt_res(&limit.max_resources),
                                fmt_res(&anc_res)
                            ),
                            partition: Some(self.partition.clone()),
                            queue: Some(path.to_string()),
                            at: key(&limit_at, "maxresources"),
                        });
                    }
                    if anc_apps != 0 && limit.max_applications > anc_apps {
                        self.problems.push(Problem {
                            message: format!(
                                "{what} '{name}' maxapplications {} is more than its limit {anc_apps} on an ancestor queue",
                                limit.max_applications
                            ),
                            partition: Some(self.partition.clone()),
                            queue: Some(path.to_string()),
                            at: key(&limit_at, "maxapplications"),
                        });
                    }
                    let apps = match (anc_apps, limit.max_applications) {
                        (0, x) | (x, 0) => x,
                        (a, b) => a.min(b),
                    };
                    table.insert(
                        name.clone(),
                        (min_of_maxes(&limit.max_resources, &anc_res), apps),
                    );
                }
            }
        }
        for child in &queue.queues {
            self.check_limit_hierarchy(child, &format!("{path}.{}", child.name), &bounds);
        }
    }
}

/// The tightest limits seen so far on the way down, per user and per group.
#[derive(Debug, Clone, Default)]
struct LimitBounds {
    users: BTreeMap<String, (BTreeMap<String, i64>, u64)>,
    groups: BTreeMap<String, (BTreeMap<String, i64>, u64)>,
}

fn inherited_bound(
    b: &LimitBounds,
    what: &str,
    name: &str,
) -> Option<(BTreeMap<String, i64>, u64)> {
    let table = if what == "user" { &b.users } else { &b.groups };
    table.get(name).cloned()
}

/// True for a fully qualified queue path: `root` or `root.…`.
fn is_qualified(path: &str) -> bool {
    path.eq_ignore_ascii_case(ROOT)
        || path
            .get(..ROOT.len() + 1)
            .is_some_and(|p| p.eq_ignore_ascii_case("root."))
}
