//! User and group limits of a queue: per user (or group) caps on allocated
//! resources and running applications, and the usage tracked against them.
//!
//! Only queues with limits configured track anything, so a configuration
//! without limits costs nothing in the allocation path. A named user or group
//! takes its own limit; `*` covers every user or group not named.

use std::sync::Arc;

use super::objects::FastMap;
use crate::config::LimitConfig;
use crate::resources::{Resource, ResourceNames};

/// One limit: the most a single user (or group) may use below the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitRule {
    /// Resource cap (unlimited types are `i64::MAX`).
    pub max: Resource,
    /// Running application cap (0 = none).
    pub max_apps: u64,
}

/// Usage of one user or group below a queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tracked {
    /// Allocated resources.
    pub allocated: Resource,
    /// Running applications.
    pub running_apps: u64,
}

/// The limits of one queue and the usage tracked against them.
#[derive(Debug, Default, Clone)]
pub struct QueueLimits {
    users: FastMap<String, LimitRule>,
    user_wildcard: Option<LimitRule>,
    groups: FastMap<String, LimitRule>,
    group_wildcard: Option<LimitRule>,
    /// Usage per user.
    pub user_usage: FastMap<Arc<str>, Tracked>,
    /// Usage per group.
    pub group_usage: FastMap<Arc<str>, Tracked>,
}

impl QueueLimits {
    /// The limits of a queue's configuration; `None` when it has none.
    pub fn from_config(
        limits: &[LimitConfig],
        names: &ResourceNames,
    ) -> Result<Option<Box<Self>>, String> {
        if limits.is_empty() {
            return Ok(None);
        }
        let mut out = Self::default();
        for limit in limits {
            let rule = LimitRule {
                max: names
                    .limit_from_map(&limit.max_resources)
                    .map_err(|e| format!("limit {:?}: {e}", limit.limit))?,
                max_apps: limit.max_applications,
            };
            for user in &limit.users {
                if user == "*" {
                    out.user_wildcard.get_or_insert(rule);
                } else {
                    out.users.entry(user.clone()).or_insert(rule);
                }
            }
            for group in &limit.groups {
                if group == "*" {
                    out.group_wildcard.get_or_insert(rule);
                } else {
                    out.groups.entry(group.clone()).or_insert(rule);
                }
            }
        }
        Ok(Some(Box::new(out)))
    }

    fn user_rule(&self, user: &str) -> Option<&LimitRule> {
        self.users.get(user).or(self.user_wildcard.as_ref())
    }

    fn group_rule(&self, group: &str) -> Option<&LimitRule> {
        self.groups.get(group).or(self.group_wildcard.as_ref())
    }

    /// True when the queue names `group` in a limit (not only through `*`).
    pub fn names_group(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// True when the queue has a `*` group limit.
    pub fn has_group_wildcard(&self) -> bool {
        self.group_wildcard.is_some()
    }

    /// Whether `res` more fits under the user's and the group's caps.
    pub fn fits(&self, user: &str, group: Option<&str>, res: &Resource) -> bool {
        let ok = |rule: Option<&LimitRule>, used: Option<&Tracked>| {
            rule.is_none_or(|r| {
                let used = used.map_or(Resource::ZERO, |t| t.allocated);
                used.plus(res).fits_in(&r.max)
            })
        };
        ok(self.user_rule(user), self.user_usage.get(user))
            && group.is_none_or(|g| ok(self.group_rule(g), self.group_usage.get(g)))
    }

    /// Whether one more application of the user (and group) may run.
    pub fn can_start(&self, user: &str, group: Option<&str>) -> bool {
        let ok = |rule: Option<&LimitRule>, used: Option<&Tracked>| {
            rule.is_none_or(|r| r.max_apps == 0 || used.map_or(0, |t| t.running_apps) < r.max_apps)
        };
        ok(self.user_rule(user), self.user_usage.get(user))
            && group.is_none_or(|g| ok(self.group_rule(g), self.group_usage.get(g)))
    }

    /// Adds (or removes) allocated resources of a user and group.
    pub fn track_resource(
        &mut self,
        user: &Arc<str>,
        group: Option<&Arc<str>>,
        res: &Resource,
        add: bool,
    ) {
        let apply = |t: &mut Tracked| {
            if add {
                t.allocated.add_assign(res);
            } else {
                t.allocated.sub_assign(res);
            }
        };
        apply(self.user_usage.entry(user.clone()).or_default());
        if let Some(g) = group {
            apply(self.group_usage.entry(g.clone()).or_default());
        }
    }

    /// Counts (or uncounts) a running application of a user and group.
    pub fn track_app(&mut self, user: &Arc<str>, group: Option<&Arc<str>>, running: bool) {
        let apply = |t: &mut Tracked| {
            t.running_apps = if running {
                t.running_apps + 1
            } else {
                t.running_apps.saturating_sub(1)
            };
        };
        apply(self.user_usage.entry(user.clone()).or_default());
        if let Some(g) = group {
            apply(self.group_usage.entry(g.clone()).or_default());
        }
    }

    /// Forgets all tracked usage (before recomputing it).
    pub fn clear_usage(&mut self) {
        self.user_usage.clear();
        self.group_usage.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn limit(users: &[&str], groups: &[&str], vcore: Option<i64>, apps: u64) -> LimitConfig {
        LimitConfig {
            limit: "test".to_string(),
            users: users.iter().map(|s| s.to_string()).collect(),
            groups: groups.iter().map(|s| s.to_string()).collect(),
            max_resources: vcore
                .map(|v| BTreeMap::from([("vcore".to_string(), v)]))
                .unwrap_or_default(),
            max_applications: apps,
        }
    }

    #[test]
    fn named_user_beats_wildcard_and_usage_counts() {
        let names = ResourceNames::new();
        let limits = QueueLimits::from_config(
            &[
                limit(&["alice"], &[], Some(5000), 0),
                limit(&["*"], &[], Some(1000), 1),
            ],
            &names,
        )
        .unwrap()
        .unwrap();
        let mut limits = *limits;
        let three = Resource::from_pairs(&[(crate::resources::VCORE, 3000)]);
        assert!(limits.fits("alice", None, &three));
        assert!(!limits.fits("bob", None, &three));
        let alice: Arc<str> = Arc::from("alice");
        limits.track_resource(&alice, None, &three, true);
        assert!(!limits.fits("alice", None, &three));
        limits.track_resource(&alice, None, &three, false);
        assert!(limits.fits("alice", None, &three));
        let bob: Arc<str> = Arc::from("bob");
        assert!(limits.can_start("bob", None));
        limits.track_app(&bob, None, true);
        assert!(!limits.can_start("bob", None));
        assert!(limits.can_start("alice", None), "alice has no app limit");
    }

    #[test]
    fn group_limits_apply_to_the_tracked_group() {
        let names = ResourceNames::new();
        let mut limits = *QueueLimits::from_config(&[limit(&[], &["dev"], Some(2000), 0)], &names)
            .unwrap()
            .unwrap();
        let three = Resource::from_pairs(&[(crate::resources::VCORE, 3000)]);
        assert!(!limits.fits("carol", Some("dev"), &three));
        assert!(limits.fits("carol", Some("ops"), &three));
        assert!(limits.fits("carol", None, &three));
        assert!(limits.names_group("dev") && !limits.has_group_wildcard());
        let (u, g): (Arc<str>, Arc<str>) = (Arc::from("carol"), Arc::from("dev"));
        limits.track_resource(
            &u,
            Some(&g),
            &Resource::from_pairs(&[(crate::resources::VCORE, 1500)]),
            true,
        );
        assert!(!limits.fits(
            "dave",
            Some("dev"),
            &Resource::from_pairs(&[(crate::resources::VCORE, 1000)])
        ));
    }

    #[test]
    fn no_limits_means_none() {
        assert!(
            QueueLimits::from_config(&[], &ResourceNames::new())
                .unwrap()
                .is_none()
        );
    }
}
