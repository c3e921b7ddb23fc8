//! The YAML schema as written: strict serde structs with YuniKorn's key spellings.
//!
//! Every struct denies unknown keys, and maps reject duplicate keys, so a typo is an
//! error with a location rather than a silently ignored setting. Values are kept as
//! written; normalization and checks happen in `validate`.

use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScheduler {
    pub partitions: Option<Vec<RawPartition>>,
    /// Accepted and ignored, as upstream: a config read back from the scheduler carries
    /// its checksum.
    #[allow(dead_code)]
    pub checksum: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPartition {
    pub name: Option<String>,
    pub queues: Option<Vec<RawQueue>>,
    #[serde(rename = "placementrules")]
    pub placement_rules: Option<Vec<RawRule>>,
    pub limits: Option<Vec<RawLimit>>,
    pub preemption: Option<RawPreemption>,
    #[serde(rename = "nodesortpolicy")]
    pub node_sort_policy: Option<RawNodeSortPolicy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPreemption {
    pub enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNodeSortPolicy {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[serde(rename = "resourceweights")]
    pub resource_weights: Option<StrictMap<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQueue {
    pub name: Option<String>,
    pub parent: Option<bool>,
    pub resources: Option<RawResources>,
    #[serde(rename = "maxapplications")]
    pub max_applications: Option<u64>,
    pub properties: Option<StrictMap<Scalar>>,
    #[serde(rename = "adminacl")]
    pub admin_acl: Option<String>,
    #[serde(rename = "submitacl")]
    pub submit_acl: Option<String>,
    #[serde(rename = "childtemplate")]
    pub child_template: Option<RawChildTemplate>,
    pub queues: Option<Vec<RawQueue>>,
    pub limits: Option<Vec<RawLimit>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResources {
    pub guaranteed: Option<StrictMap<Scalar>>,
    pub max: Option<StrictMap<Scalar>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChildTemplate {
    #[serde(rename = "maxapplications")]
    pub max_applications: Option<u64>,
    pub properties: Option<StrictMap<Scalar>>,
    pub resources: Option<RawResources>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub name: Option<String>,
    pub create: Option<bool>,
    pub filter: Option<RawFilter>,
    pub parent: Option<Box<RawRule>>,
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFilter {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub users: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimit {
    pub limit: Option<String>,
    pub users: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
    #[serde(rename = "maxresources")]
    pub max_resources: Option<StrictMap<Scalar>>,
    #[serde(rename = "maxapplications")]
    pub max_applications: Option<u64>,
}

/// A scalar kept as text: YAML `10`, `0.5`, `true` and `"250m"` all become strings, as
/// upstream's string maps do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// A string-keyed map that keeps file order and rejects duplicate keys.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StrictMap<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for StrictMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = StrictMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, V)> = Vec::new();
                let mut seen = HashSet::new();
                while let Some(key) = map.next_key::<Scalar>()? {
                    if !seen.insert(key.0.clone()) {
                        return Err(de::Error::custom(format_args!("duplicate key `{}`", key.0)));
                    }
                    let value = map.next_value()?;
                    entries.push((key.0, value));
                }
                Ok(StrictMap(entries))
            }
        }
        d.deserialize_map(MapVisitor(std::marker::PhantomData))
    }
}
