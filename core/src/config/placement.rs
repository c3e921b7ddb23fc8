//! Application placement: the rule engine that picks an application's queue.
//!
//! Rules run in configured order; the first that yields an acceptable queue wins.
//! A rule yields a queue path (or nothing, with a reason): `provided` takes the queue the
//! application asked for, `user` the user name, `tag` the value of an application tag,
//! `fixed` a configured name. A name that is not a full path (`root.…`) goes under the
//! result of the rule's `parent` rule, or under `root`; dots in user and tag derived
//! names (and in unqualified provided names) become `_dot_`. A rule whose queue does not
//! exist yields nothing unless it may create it. The filter runs first and skips the rule
//! for users and groups it does not allow.
//!
//! A yielded queue is accepted when it exists, is a leaf, is not draining and allows
//! the user to submit; or, when it is to be created, when the nearest existing ancestor
//! is a parent, not draining, and allows the user to submit. Otherwise the next rule
//! runs. When no rule succeeds, `root.default` is used if it exists and is acceptable.
//! Two cases fail placement outright, as upstream: a parent rule that yields an existing
//! leaf, and a queue to create under a leaf or with an invalid name.
//!
//! An application the RM forces (`application.create.force=true`, sent for workloads
//! already running) is never refused for want of a queue: when no rule resolves one it
//! goes to [`RECOVERY_QUEUE`], before the `root.default` fallback, as upstream's
//! implicit last rule (`recovery_rule.go`) does. Nobody passes the recovery queue's ACL,
//! so only that rule places there.
//!
//! The scheduler answers questions about live queues through [`QueueLookup`]; the placer
//! keeps no state between calls.

use std::collections::{BTreeMap, HashSet};

use regex::Regex;

use super::names::{has_regex_chars, is_valid_group_name, is_valid_queue_name, is_valid_user_name};
use super::{FilterConfig, FilterKind, MAX_QUEUE_DEPTH, PlacementRuleConfig, RuleKind};

/// The queue tried when no rule places an application.
pub const DEFAULT_QUEUE: &str = "root.default";

/// The queue forced applications go to when no rule resolves theirs: a dynamic,
/// unlimited fifo leaf under root, never configured (upstream's `root.@recovery@`).
pub const RECOVERY_QUEUE: &str = "root.@recovery@";

/// The application tag by which an RM forces an application's creation.
pub const CREATE_FORCE_TAG: &str = "application.create.force";

/// Whether `tags` force the application's creation: the tag's key in any case,
/// its value a boolean that is true (as Go's `strconv.ParseBool` reads it).
pub fn is_create_forced(tags: &BTreeMap<String, String>) -> bool {
    tags.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(CREATE_FORCE_TAG))
        .is_some_and(|(_, v)| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Whether `path` is the recovery queue (compared as upstream does, in any case).
pub fn is_recovery_queue(path: &str) -> bool {
    path.eq_ignore_ascii_case(RECOVERY_QUEUE)
}

/// What dots in user and tag derived queue names are replaced with.
pub const DOT_REPLACEMENT: &str = "_dot_";

/// What the placer needs to know about an application.
#[derive(Debug, Clone, Copy)]
pub struct AppPlacementInput<'a> {
    /// Application id, for messages.
    pub app_id: &'a str,
    /// The queue the application asked for; empty when none.
    pub requested_queue: &'a str,
    /// The submitting user.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// Application tags; tag rule names match keys case-insensitively.
    pub tags: &'a BTreeMap<String, String>,
    /// The RM forces the application's creation (see [`is_create_forced`]).
    pub forced: bool,
}

/// What the placer needs to know about an existing queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueInfo {
    /// True when the queue can hold applications.
    pub leaf: bool,
    /// True when the queue takes no new applications (removed from the config).
    pub draining: bool,
}

/// Live queue state, implemented by the scheduler.
///
/// Paths are passed as the rules build them; configured names compare
/// case-insensitively, so implementations should look paths up that way too.
pub trait QueueLookup {
    /// The queue at a full path (`root.a.b`), if it exists.
    fn lookup(&self, path: &str) -> Option<QueueInfo>;
    /// Whether the user may submit to the existing queue at `path`, its ancestors'
    /// submit and admin ACLs included.
    fn submit_allowed(&self, path: &str, user: &str, groups: &[String]) -> bool;
}

/// Where an application goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Full path of the leaf queue.
    pub queue_path: String,
    /// True when the leaf (and possibly some of its parents) does not exist yet and must
    /// be created as dynamic queues.
    pub create: bool,
}

/// The placement rule engine of one partition.
#[derive(Debug, Clone)]
pub struct Placer {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    kind: RuleKind,
    create: bool,
    filter: Filter,
    parent: Option<Box<Rule>>,
    value: String,
}

/// A compiled filter. A single entry with regex characters is an expression; otherwise
/// entries are names, and invalid names are ignored, as upstream.
#[derive(Debug, Clone)]
struct Filter {
    allow: bool,
    empty: bool,
    users: Matcher,
    groups: Matcher,
}

#[derive(Debug, Clone)]
enum Matcher {
    Names(HashSet<String>),
    Pattern(Regex),
    /// An expression that does not compile matches nobody.
    Nothing,
}

/// What one rule produced.
enum Outcome {
    Queue(String),
    Skip(String),
}

impl Placer {
    /// Builds the engine. No rules means the implicit `provided` rule without create.
    /// Rules from [`super::parse`] are valid; a filter expression that does not compile
    /// (only possible for hand-built rules) matches nobody.
    pub fn new(rules: &[PlacementRuleConfig]) -> Placer {
        let rules = if rules.is_empty() {
            vec![Rule {
                kind: RuleKind::Provided,
                create: false,
                filter: Filter::new(&FilterConfig::default()),
                parent: None,
                value: String::new(),
            }]
        } else {
            rules.iter().map(Rule::new).collect()
        };
        Placer { rules }
    }

    /// Chooses the queue for an application, or says why none fits.
    pub fn place(
        &self,
        app: &AppPlacementInput<'_>,
        queues: &dyn QueueLookup,
    ) -> Result<Placement, String> {
        let mut reasons = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let label = format!("rule {} ({})", i + 1, rule.kind.name());
            let why = match rule.evaluate(app, queues)? {
                Outcome::Skip(why) => why,
                Outcome::Queue(path) => match accept(&path, app, queues)? {
                    Ok(p) => return Ok(p),
                    Err(why) => why,
                },
            };
            reasons.push(format!("{label}: {why}"));
        }
        if app.forced {
            return Ok(Placement {
                queue_path: RECOVERY_QUEUE.to_string(),
                create: queues.lookup(RECOVERY_QUEUE).is_none(),
            });
        }
        let fallback = match queues.lookup(DEFAULT_QUEUE) {
            Some(_) => match accept(DEFAULT_QUEUE, app, queues)? {
                Ok(p) => return Ok(p),
                Err(why) => why,
            },
            None => format!("{DEFAULT_QUEUE} does not exist"),
        };
        reasons.push(format!("fallback: {fallback}"));
        Err(format!(
            "application {} rejected: no placement rule matched ({})",
            app.app_id,
            reasons.join("; ")
        ))
    }
}

impl Rule {
    fn new(conf: &PlacementRuleConfig) -> Rule {
        Rule {
            kind: conf.kind,
            create: conf.create,
            filter: Filter::new(&conf.filter),
            parent: conf.parent.as_deref().map(|p| Box::new(Rule::new(p))),
            value: conf.value.clone(),
        }
    }

    /// Runs the rule: `Ok(Queue)` names a queue, `Ok(Skip)` means no match, `Err` fails
    /// the whole placement.
    fn evaluate(
        &self,
        app: &AppPlacementInput<'_>,
        queues: &dyn QueueLookup,
    ) -> Result<Outcome, String> {
        let name = match self.kind {
            RuleKind::Provided if app.requested_queue.is_empty() => {
                return Ok(Outcome::Skip("the application names no queue".to_string()));
            }
            RuleKind::Provided => app.requested_queue.to_string(),
            RuleKind::User if app.user.is_empty() => {
                return Ok(Outcome::Skip("the application has no user".to_string()));
            }
            RuleKind::User => app.user.to_string(),
            RuleKind::Tag => match tag_value(app.tags, &self.value) {
                Some(v) => v.to_string(),
                None => {
                    return Ok(Outcome::Skip(format!(
                        "the application has no tag '{}'",
                        self.value
                    )));
                }
            },
            RuleKind::Fixed => self.value.clone(),
        };
        if !self.filter.allows(app.user, app.groups) {
            return Ok(Outcome::Skip(format!(
                "the filter excludes user {}",
                app.user
            )));
        }
        let qualified = if self.kind == RuleKind::User {
            None
        } else {
            full_path(&name)
        };
        let full = if let Some(path) = qualified {
            path
        } else {
            let parent = match &self.parent {
                None => "root".to_string(),
                Some(p) => match p.evaluate(app, queues)? {
                    Outcome::Skip(why) => {
                        return Ok(Outcome::Skip(format!(
                            "parent rule {}: {why}",
                            p.kind.name()
                        )));
                    }
                    Outcome::Queue(q) => {
                        let q = if q.starts_with("root.") {
                            q
                        } else {
                            format!("root.{q}")
                        };
                        if queues.lookup(&q).is_some_and(|info| info.leaf) {
                            return Err(format!(
                                "application {} rejected: parent rule {} returned the leaf queue {q}",
                                app.app_id,
                                p.kind.name()
                            ));
                        }
                        q
                    }
                },
            };
            let leaf = if self.kind == RuleKind::Fixed {
                name
            } else {
                name.replace('.', DOT_REPLACEMENT)
            };
            format!("{parent}.{leaf}")
        };
        if !self.create && queues.lookup(&full).is_none() {
            return Ok(Outcome::Skip(format!(
                "queue {full} does not exist and create is false"
            )));
        }
        Ok(Outcome::Queue(full))
    }
}

/// Decides whether `path` can take the application. The outer `Err` fails placement;
/// the inner `Err` says why this queue is not acceptable.
fn accept(
    path: &str,
    app: &AppPlacementInput<'_>,
    queues: &dyn QueueLookup,
) -> Result<Result<Placement, String>, String> {
    if let Some(info) = queues.lookup(path) {
        let verdict = if is_recovery_queue(path) {
            Err(format!(
                "queue {path} takes only forced applications no rule places"
            ))
        } else if !info.leaf {
            Err(format!("queue {path} is not a leaf queue"))
        } else if info.draining {
            Err(format!("queue {path} is draining"))
        } else if !queues.submit_allowed(path, app.user, app.groups) {
            Err(format!("user {} may not submit to queue {path}", app.user))
        } else {
            Ok(Placement {
                queue_path: path.to_string(),
                create: false,
            })
        };
        return Ok(verdict);
    }
    let fail = |why: String| {
        Err(format!(
            "application {} rejected: cannot create queue {path}: {why}",
            app.app_id
        ))
    };
    let parts: Vec<&str> = path.split('.').collect();
    if parts.len() > MAX_QUEUE_DEPTH {
        return fail(format!("it would be deeper than {MAX_QUEUE_DEPTH} levels"));
    }
    // The nearest existing ancestor decides: it must be a parent, active and allow submit.
    let Some((ancestor_len, info)) = (1..parts.len())
        .rev()
        .find_map(|n| queues.lookup(&parts[..n].join(".")).map(|info| (n, info)))
    else {
        return fail("no ancestor queue exists".to_string());
    };
    let ancestor = parts[..ancestor_len].join(".");
    if let Some(bad) = parts[ancestor_len..]
        .iter()
        .find(|p| !is_valid_queue_name(p))
    {
        return fail(format!("'{bad}' is not a valid queue name"));
    }
    if info.leaf {
        return fail(format!("{ancestor} is a leaf queue"));
    }
    if info.draining {
        return Ok(Err(format!(
            "cannot create queue {path}: its ancestor {ancestor} is draining"
        )));
    }
    if !queues.submit_allowed(&ancestor, app.user, app.groups) {
        return Ok(Err(format!(
            "user {} may not submit to {ancestor}, the nearest existing ancestor of {path}",
            app.user
        )));
    }
    Ok(Ok(Placement {
        queue_path: path.to_string(),
        create: true,
    }))
}

/// The name as a full path when it is one (`root.…`, any case of `root`).
fn full_path(name: &str) -> Option<String> {
    let rest = name
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("root."))
        .map(|_| &name[5..])?;
    Some(format!("root.{rest}"))
}

fn tag_value<'t>(tags: &'t BTreeMap<String, String>, name: &str) -> Option<&'t str> {
    tags.get(name)
        .or_else(|| {
            tags.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

impl Filter {
    fn new(conf: &FilterConfig) -> Filter {
        Filter {
            allow: conf.kind == FilterKind::Allow,
            empty: conf.users.is_empty() && conf.groups.is_empty(),
            users: Matcher::new(&conf.users, is_valid_user_name),
            groups: Matcher::new(&conf.groups, is_valid_group_name),
        }
    }

    /// True when the rule applies to this user: a match means `allow`, no match means
    /// the opposite; an empty filter is just its type.
    fn allows(&self, user: &str, groups: &[String]) -> bool {
        if self.empty {
            return self.allow;
        }
        if self.users.matches(user) || groups.iter().any(|g| self.groups.matches(g)) {
            self.allow
        } else {
            !self.allow
        }
    }
}

impl Matcher {
    fn new(entries: &[String], valid: fn(&str) -> bool) -> Matcher {
        match entries {
            [only] if has_regex_chars(only) => {
                Regex::new(only).map_or(Matcher::Nothing, Matcher::Pattern)
            }
            _ => Matcher::Names(entries.iter().filter(|e| valid(e)).cloned().collect()),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Names(names) => names.contains(name),
            Matcher::Pattern(re) => re.is_match(name),
            Matcher::Nothing => false,
        }
    }
}

#[cfg(test)]
mod tests;
