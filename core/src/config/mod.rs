//! Queue configuration: the YAML schema, parsing, normalization and validation.
//!
//! [`parse`] is the single entry point: it checks the size, decodes the YAML strictly
//! (an unknown key is an error), normalizes (one `root` per partition, parent flags,
//! quantities in core units) and validates the whole file, returning either a
//! [`SchedulerConfig`] or every problem found as [`ConfigErrors`]. It is pure: no I/O,
//! no globals, and it never panics, whatever the input.
//!
//! The scheduler applies a parsed config; it reads queue properties through
//! [`properties`], checks access with [`acl::Acl`] and places applications with
//! [`placement::Placer`]. Queue names keep the case they were written with; comparisons
//! between names (siblings, placement paths) ignore case, as upstream does.
//!
//! **Architecture Invariant:** this module knows nothing of the running scheduler: it
//! turns text into values, and the placement engine asks the scheduler about live queues
//! only through the [`placement::QueueLookup`] trait.

pub mod acl;
mod locate;
pub mod names;
pub mod placement;
pub mod properties;
mod quantity;
mod raw;
mod validate;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use quantity::{VCORE, parse_quantity};

/// Largest configuration text accepted, in bytes (checked before anything else).
pub const MAX_CONFIG_BYTES: usize = 4 * 1024 * 1024;

/// Deepest queue hierarchy accepted, counting `root` as level 1. Also bounds the length
/// of a chain of nested placement rules.
pub const MAX_QUEUE_DEPTH: usize = 32;

/// Locating an error re-parses the text, so only the first errors get a line and
/// column: at most this many, and no more than [`LOCATE_BUDGET_BYTES`] re-parsed in all
/// (but always the first error).
const MAX_LOCATED_ERRORS: usize = 64;

/// Total text re-parsed to locate errors.
const LOCATE_BUDGET_BYTES: usize = 32 * 1024 * 1024;

/// A parsed, normalized and validated queue configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchedulerConfig {
    /// Partitions in file order; names are unique (case-insensitively).
    pub partitions: Vec<PartitionConfig>,
    /// Upper-case hex SHA-256 of the text, without any `checksum:` line, as upstream.
    /// Two texts with the same checksum are the same config.
    pub checksum: String,
}

/// One partition: a queue tree and the policies that go with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionConfig {
    /// Partition name; an empty or missing name is `default`.
    pub name: String,
    /// The root queue. There is always exactly one: top-level queues other than a
    /// single `root` are put under an inserted `root`.
    pub root: QueueConfig,
    /// Placement rules in order; empty means the implicit `provided` rule without create.
    pub placement_rules: Vec<PlacementRuleConfig>,
    /// Partition-wide user and group limits.
    pub limits: Vec<LimitConfig>,
    /// Partition preemption settings.
    pub preemption: PreemptionConfig,
    /// How nodes are ordered when placing allocations.
    pub node_sort_policy: NodeSortPolicyConfig,
}

/// Partition preemption settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreemptionConfig {
    /// Whether preemption runs in this partition (default true).
    pub enabled: bool,
}

impl Default for PreemptionConfig {
    fn default() -> Self {
        PreemptionConfig { enabled: true }
    }
}

/// Node ordering of a partition.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NodeSortPolicyConfig {
    /// The policy type.
    pub kind: NodeSortKind,
    /// Weight per resource type; empty means the default, vcore 1 and memory 1.
    pub resource_weights: BTreeMap<String, f64>,
}

/// Node sort policy type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum NodeSortKind {
    /// Least used node first: spreads load (the default).
    #[default]
    Fair,
    /// Most used node first: packs load.
    Binpacking,
}

/// One queue of the configured tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueConfig {
    /// The queue's own name (not its path); `root` for the root.
    pub name: String,
    /// True when configured `parent: true` or when it has child queues.
    pub parent: bool,
    /// Guaranteed resources in core units (vcore in milli).
    pub guaranteed: BTreeMap<String, i64>,
    /// Maximum resources in core units; a type not listed is unlimited.
    pub max: BTreeMap<String, i64>,
    /// Maximum running applications; 0 is unlimited.
    pub max_applications: u64,
    /// Properties as written (values checked); see [`properties`] for typed access.
    pub properties: BTreeMap<String, String>,
    /// Admin ACL text; `None` when not set, which allows nobody, like an empty ACL.
    pub admin_acl: Option<String>,
    /// Submit ACL text; `None` when not set, which allows nobody, like an empty ACL.
    pub submit_acl: Option<String>,
    /// Settings for dynamic children created under this queue.
    pub child_template: Option<ChildTemplateConfig>,
    /// Child queues in file order.
    pub queues: Vec<QueueConfig>,
    /// User and group limits on this queue.
    pub limits: Vec<LimitConfig>,
}

impl QueueConfig {
    /// True for a queue that can hold applications.
    pub fn is_leaf(&self) -> bool {
        !self.parent
    }

    /// The direct child with this name, compared case-insensitively.
    pub fn child(&self, name: &str) -> Option<&QueueConfig> {
        self.queues
            .iter()
            .find(|q| q.name.eq_ignore_ascii_case(name))
    }

    /// The queue at a full path such as `root.a.b`, when this queue is the root.
    /// Segments compare case-insensitively.
    pub fn find(&self, path: &str) -> Option<&QueueConfig> {
        let mut parts = path.split('.');
        if !parts.next()?.eq_ignore_ascii_case(&self.name) {
            return None;
        }
        parts.try_fold(self, |q, part| q.child(part))
    }

    /// Number of queues in this subtree, itself included.
    pub fn queue_count(&self) -> usize {
        1 + self
            .queues
            .iter()
            .map(QueueConfig::queue_count)
            .sum::<usize>()
    }
}

/// The template applied to dynamic queues created under a parent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ChildTemplateConfig {
    /// Maximum running applications of each dynamic child; 0 is unlimited.
    pub max_applications: u64,
    /// Properties of each dynamic child.
    pub properties: BTreeMap<String, String>,
    /// Guaranteed resources of each dynamic child, in core units.
    pub guaranteed: BTreeMap<String, i64>,
    /// Maximum resources of each dynamic child, in core units.
    pub max: BTreeMap<String, i64>,
}

/// A user and group limit (enforced by the scheduler; checked here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitConfig {
    /// Free-text description.
    pub limit: String,
    /// User names the limit applies to; `*` is every user not named in an earlier limit.
    pub users: Vec<String>,
    /// Group names the limit applies to; `*` is every group not named earlier.
    pub groups: Vec<String>,
    /// Maximum resources per user or group, in core units; empty is unlimited.
    pub max_resources: BTreeMap<String, i64>,
    /// Maximum running applications per user or group; 0 is unlimited.
    pub max_applications: u64,
}

/// One placement rule, possibly with a parent rule that decides its parent queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacementRuleConfig {
    /// Which rule.
    pub kind: RuleKind,
    /// Whether the rule may create the queue it names when it does not exist.
    pub create: bool,
    /// Which users and groups the rule applies to.
    pub filter: FilterConfig,
    /// Rule whose result is the parent of this rule's queue.
    pub parent: Option<Box<PlacementRuleConfig>>,
    /// `tag`: the application tag to read; `fixed`: the queue name or path; else empty.
    pub value: String,
}

/// Placement rule types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RuleKind {
    /// The queue the application asked for.
    Provided,
    /// A queue named after the submitting user.
    User,
    /// A queue named by the value of an application tag.
    Tag,
    /// A queue fixed in the configuration.
    Fixed,
}

impl RuleKind {
    /// The rule's name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Provided => "provided",
            RuleKind::User => "user",
            RuleKind::Tag => "tag",
            RuleKind::Fixed => "fixed",
        }
    }
}

/// A placement rule's user and group filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FilterConfig {
    /// Whether a match allows or denies the rule.
    pub kind: FilterKind,
    /// User names; a single entry with regex characters is a regular expression.
    pub users: Vec<String>,
    /// Group names; a single entry with regex characters is a regular expression.
    pub groups: Vec<String>,
}

/// Filter type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum FilterKind {
    /// Only matching users and groups use the rule (the default).
    #[default]
    Allow,
    /// Matching users and groups skip the rule.
    Deny,
}

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// What is wrong, without location or context.
    pub message: String,
    /// 1-based line in the text, when known.
    pub line: Option<usize>,
    /// 1-based column in the text, when known.
    pub column: Option<usize>,
    /// The partition concerned, when there is one.
    pub partition: Option<String>,
    /// The full path of the queue concerned (e.g. `root.a.b`), when there is one.
    pub queue: Option<String>,
}

impl ConfigError {
    /// The message with its partition and queue, without the location:
    /// `partition default: queue root.a: message`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(p) = &self.partition {
            out.push_str(&format!("partition {p}: "));
        }
        if let Some(q) = &self.queue {
            out.push_str(&format!("queue {q}: "));
        }
        out.push_str(&self.message);
        out
    }
}

impl fmt::Display for ConfigError {
    /// `LINE:COL: partition P: queue Q: message`, omitting what is unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{l}:{c}: ")?,
            (Some(l), None) => write!(f, "{l}: ")?,
            _ => {}
        }
        f.write_str(&self.describe())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a configuration, in the order found (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    /// One error per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl ConfigErrors {
    fn single(message: impl Into<String>, at: Option<(usize, usize)>) -> ConfigErrors {
        ConfigErrors(vec![ConfigError {
            message: message.into(),
            line: at.map(|a| a.0),
            column: at.map(|a| a.1),
            partition: None,
            queue: None,
        }])
    }
}

/// Decodes, normalizes and validates a queue configuration.
///
/// Checks, in order: the size limit, that there is content, strict YAML decoding (types
/// and known keys; stops at the first decoding error), then every semantic rule, all
/// reported together. Pure and panic-free.
pub fn parse(text: &str) -> Result<SchedulerConfig, ConfigErrors> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigErrors::single(
            format!(
                "configuration is {} bytes, more than the limit of {MAX_CONFIG_BYTES} bytes",
                text.len()
            ),
            None,
        ));
    }
    let blank = text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    });
    if blank {
        return Err(ConfigErrors::single("configuration is empty", None));
    }
    let raw: raw::RawScheduler = serde_yaml::from_str(text).map_err(|e| decode_error(&e))?;
    let (partitions, problems) = validate::build(raw);
    if !problems.is_empty() {
        let located = (LOCATE_BUDGET_BYTES / text.len().max(1)).clamp(1, MAX_LOCATED_ERRORS);
        let errors = problems
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let at = if i < located {
                    locate::locate(text, &p.at)
                } else {
                    None
                };
                ConfigError {
                    message: p.message,
                    line: at.map(|a| a.0),
                    column: at.map(|a| a.1),
                    partition: p.partition,
                    queue: p.queue,
                }
            })
            .collect();
        return Err(ConfigErrors(errors));
    }
    Ok(SchedulerConfig {
        partitions,
        checksum: checksum(text),
    })
}

/// Upper-case hex SHA-256 of `text` with upstream's treatment of a `checksum: ` entry:
/// the first such entry (up to 64 hex characters) is removed wherever it occurs, so a
/// config read back with its checksum hashes like the original.
pub fn checksum(text: &str) -> String {
    const PREFIX: &str = "checksum: ";
    let mut entry = PREFIX.to_string();
    if let Some(pos) = text.find(PREFIX) {
        let after = text[pos + PREFIX.len()..].trim_end_matches('\n');
        entry.extend(after.chars().take(64));
    }
    let hashed = text.replace(&entry, "");
    Sha256::digest(hashed.as_bytes())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// Turns a YAML decoding error into a located config error with readable wording.
fn decode_error(e: &serde_yaml::Error) -> ConfigErrors {
    let at = e.location().map(|l| (l.line(), l.column()));
    let mut message = e.to_string();
    if let Some((line, column)) = at {
        // The position is reported separately; drop it from the text.
        message = message.replacen(&format!(" at line {line} column {column}"), "", 1);
    }
    const NAMES: &[(&str, &str)] = &[
        ("struct RawScheduler", "a mapping with key partitions"),
        ("struct RawPartition", "a partition mapping"),
        ("struct RawQueue", "a queue mapping"),
        ("struct RawResources", "a mapping with guaranteed and max"),
        ("struct RawChildTemplate", "a child template mapping"),
        ("struct RawRule", "a placement rule mapping"),
        ("struct RawFilter", "a filter mapping"),
        ("struct RawLimit", "a limit mapping"),
        ("struct RawPreemption", "a mapping with key enabled"),
        (
            "struct RawNodeSortPolicy",
            "a mapping with type and resourceweights",
        ),
    ];
    for (from, to) in NAMES {
        message = message.replace(from, to);
    }
    ConfigErrors::single(message, at)
}

#[cfg(test)]
mod tests;
