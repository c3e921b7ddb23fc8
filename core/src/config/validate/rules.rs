//! Placement rule checks: rule syntax, filters, and fixed paths against the queue tree.

use super::super::locate::{YamlPath, key};
use super::super::names::{
    has_regex_chars, is_valid_group_name, is_valid_queue_name, is_valid_user_name,
};
use super::super::raw::{RawFilter, RawRule};
use super::super::{
    FilterConfig, FilterKind, MAX_QUEUE_DEPTH, PlacementRuleConfig, QueueConfig, RuleKind,
};
use super::{Checker, ROOT, is_qualified};

impl Checker<'_> {
    pub(super) fn rule(
        &mut self,
        raw: RawRule,
        at: YamlPath,
        depth: usize,
    ) -> Option<PlacementRuleConfig> {
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
    pub(super) fn check_static_path(
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
}
