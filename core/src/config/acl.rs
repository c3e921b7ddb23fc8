//! Access control lists: `"user1,user2 group1,group2"`, `*` for everyone, empty for nobody.
//!
//! An ACL is two comma separated lists split by one space: users first, then groups.
//! A list that is exactly `*` opens the ACL to everyone. Names that are not valid user
//! or group names are ignored, as upstream does; more than one space is an error.

use std::collections::BTreeSet;

use super::names::{is_valid_group_name, is_valid_user_name};

const WILDCARD: &str = "*";

/// A parsed access control list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    everyone: bool,
    users: BTreeSet<String>,
    groups: BTreeSet<String>,
}

impl Acl {
    /// Parses ACL text. Empty text allows nobody; `*` allows everyone.
    pub fn parse(text: &str) -> Result<Acl, String> {
        if text.is_empty() {
            return Ok(Acl::default());
        }
        let fields: Vec<&str> = text.split(' ').collect();
        if fields.len() > 2 {
            return Err(format!(
                "ACL '{text}' has more than one space: expected 'user1,user2 group1,group2'"
            ));
        }
        let mut acl = Acl {
            everyone: text.trim() == WILDCARD,
            ..Acl::default()
        };
        let users: Vec<&str> = fields[0].split(',').collect();
        if users == [WILDCARD] {
            acl.everyone = true;
        }
        if let Some(groups) = fields.get(1) {
            let groups: Vec<&str> = groups.split(',').collect();
            if groups == [WILDCARD] {
                acl.everyone = true;
            }
            acl.groups = groups
                .into_iter()
                .filter(|g| is_valid_group_name(g))
                .map(str::to_string)
                .collect();
        }
        acl.users = users
            .into_iter()
            .filter(|u| is_valid_user_name(u))
            .map(str::to_string)
            .collect();
        if acl.everyone {
            acl.users.clear();
            acl.groups.clear();
        }
        Ok(acl)
    }

    /// An ACL that allows everyone.
    pub fn everyone() -> Acl {
        Acl {
            everyone: true,
            ..Acl::default()
        }
    }

    /// True when the ACL is the wildcard.
    pub fn allows_everyone(&self) -> bool {
        self.everyone
    }

    /// True when the user, or one of the user's groups, is allowed. Matching is exact
    /// (case sensitive).
    pub fn allows(&self, user: &str, groups: &[String]) -> bool {
        self.everyone || self.users.contains(user) || groups.iter().any(|g| self.groups.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expect` lists, for each probe `user:group1,group2`, whether it is allowed.
    fn check(acl: &str, probes: &[(&str, bool)]) {
        let parsed = Acl::parse(acl).unwrap_or_else(|e| panic!("{acl:?}: {e}"));
        for (probe, expect) in probes {
            let (user, groups) = probe.split_once(':').unwrap_or((probe, ""));
            let groups: Vec<String> = groups
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect();
            assert_eq!(
                parsed.allows(user, &groups),
                *expect,
                "acl {acl:?}, probe {probe:?}"
            );
        }
    }

    #[test]
    fn acl_matching() {
        check("", &[("alice", false), ("alice:dev", false)]);
        check("*", &[("alice", true), ("anyone:any", true)]);
        check("* ", &[("alice", true)]);
        check(
            "alice",
            &[("alice", true), ("bob", false), ("Alice", false)],
        );
        check(
            "alice,bob",
            &[("alice", true), ("bob", true), ("carol", false)],
        );
        check(
            "alice dev",
            &[("alice", true), ("bob:dev", true), ("bob:ops", false)],
        );
        check(
            " dev,ops",
            &[("alice", false), ("bob:ops", true), ("bob:x,dev", true)],
        );
        check("alice ", &[("alice", true), ("bob", false)]);
        check("* dev", &[("anyone", true)]);
        check("alice *", &[("bob:none", true)]);
        check("1bad,alice", &[("1bad", false), ("alice", true)]);
        check("alice 9bad", &[("x:9bad", false)]);
        check(",,alice,", &[("alice", true), ("", false)]);
    }

    #[test]
    fn acl_errors() {
        for bad in ["a b c", "alice  dev", "  ", "a b ", " * "] {
            let err = Acl::parse(bad).expect_err(bad);
            assert!(err.contains("more than one space"), "{bad}: {err}");
        }
        assert!(Acl::everyone().allows_everyone());
        assert!(!Acl::parse("").unwrap().allows_everyone());
    }
}
