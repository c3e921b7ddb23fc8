//! Finding the line and column of a node of the YAML text, for semantic errors.
//!
//! The YAML deserializer only reports positions on errors. To locate a node we
//! deserialize the text again with a seed that walks down a path of keys and indexes and
//! fails on purpose at the target; the error then carries the target's position. This
//! costs one parse per located error, so callers locate a bounded number of errors.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::raw::Scalar;

/// One step of a path into the YAML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// The value under a mapping key.
    Key(String),
    /// The item at an index of a sequence.
    Index(usize),
}

/// A path from the document root to a node.
pub(crate) type YamlPath = Vec<Step>;

/// Appends a key step to a copy of `path`.
pub(crate) fn key(path: &[Step], k: &str) -> YamlPath {
    let mut p = path.to_vec();
    p.push(Step::Key(k.to_string()));
    p
}

/// Appends an index step to a copy of `path`.
pub(crate) fn index(path: &[Step], i: usize) -> YamlPath {
    let mut p = path.to_vec();
    p.push(Step::Index(i));
    p
}

/// The 1-based line and column of the deepest node of `path` found in `text`: when the
/// full path is absent (an optional key not written), the nearest written ancestor,
/// down to the document itself.
pub(crate) fn locate(text: &str, path: &[Step]) -> Option<(usize, usize)> {
    (0..=path.len())
        .rev()
        .find_map(|n| locate_exact(text, &path[..n]))
}

fn locate_exact(text: &str, path: &[Step]) -> Option<(usize, usize)> {
    let de = serde_yaml::Deserializer::from_str(text);
    match (Probe { path }).deserialize(de) {
        Ok(()) => None,
        Err(e) if e.to_string().contains(TARGET_REACHED) => {
            e.location().map(|l| (l.line(), l.column()))
        }
        Err(_) => None,
    }
}

const TARGET_REACHED: &str = "target reached";

struct Probe<'p> {
    path: &'p [Step],
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((first, rest)) = self.path.split_first() else {
            return Err(de::Error::custom(TARGET_REACHED));
        };
        while let Some(k) = map.next_key::<Option<Scalar>>()? {
            match (first, k) {
                (Step::Key(want), Some(Scalar(got))) if *want == got => {
                    return map.next_value_seed(Probe { path: rest });
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((first, rest)) = self.path.split_first() else {
            return Err(de::Error::custom(TARGET_REACHED));
        };
        let Step::Index(want) = first else {
            return Ok(());
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Probe { path: rest }).map(drop)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
}

impl Probe<'_> {
    fn scalar<E: de::Error>(self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(TARGET_REACHED))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Step {
        Step::Key(s.to_string())
    }

    #[test]
    fn finds_nodes() {
        let text = "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n          - name: a\n            maxapplications: 3\n          - {name: b}\n";
        let p = |steps: Vec<Step>| locate(text, &steps);
        assert_eq!(p(vec![k("partitions"), Step::Index(0)]), Some((2, 5)));
        let root = vec![k("partitions"), Step::Index(0), k("queues"), Step::Index(0)];
        assert_eq!(p(root.clone()), Some((4, 9)));
        let a = [root.clone(), vec![k("queues"), Step::Index(0)]].concat();
        assert_eq!(p(a.clone()), Some((6, 13)));
        assert_eq!(p(key(&a, "maxapplications")), Some((7, 30)));
        // An absent key falls back to the node that would hold it.
        assert_eq!(p(key(&a, "resources")), Some((6, 13)));
        let b = [root, vec![k("queues"), Step::Index(1)]].concat();
        assert_eq!(p(b), Some((8, 13)));
        // The document itself is the last resort.
        assert_eq!(locate(text, &[k("other"), k("key")]), Some((1, 1)));
        assert_eq!(locate("a: 1", &[k("a"), Step::Index(3)]), Some((1, 4)));
    }
}
