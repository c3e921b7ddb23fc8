//! User and group limit checks: each list on its own, then limits down the queue tree.

use std::collections::{BTreeMap, HashSet};

use super::super::LimitConfig;
use super::super::QueueConfig;
use super::super::locate::{YamlPath, index, key};
use super::super::names::{is_valid_group_name, is_valid_user_name};
use super::super::quantity::{fits_in_max, format_resources as fmt_res, is_zero, min_of_maxes};
use super::super::raw::RawLimit;
use super::{Checker, Problem, WILDCARD};

impl Checker<'_> {
    /// Checks one list of limits. `queue_max` is the queue's own max (None for the root
    /// and the partition, which have none); `queue_max_apps` 0 is unlimited.
    pub(super) fn limits(
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
    pub(super) fn check_limit_hierarchy(
        &mut self,
        queue: &QueueConfig,
        path: &str,
        inherited: &LimitBounds,
    ) {
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
pub(super) struct LimitBounds {
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
