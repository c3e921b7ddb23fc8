//! Name rules shared by validation, ACLs and placement: queue, user and group names.

/// Longest queue name accepted, in characters.
pub const MAX_QUEUE_NAME_LEN: usize = 64;

/// True for a queue name of 1 to 64 characters from `a-z A-Z 0-9 _ : # / @ -`.
/// Dots are never allowed: they separate the parts of a queue path.
pub fn is_valid_queue_name(name: &str) -> bool {
    let len = name.chars().count();
    (1..=MAX_QUEUE_NAME_LEN).contains(&len)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '#' | '/' | '@' | '-'))
}

/// True for a user name as upstream accepts it: a letter or `_` first, then letters,
/// digits and `: _ . @ -`, optionally ending in `$`.
pub fn is_valid_user_name(name: &str) -> bool {
    let body = name.strip_suffix('$').unwrap_or(name);
    let mut chars = body.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '@' | '-'))
}

/// True for a group name as upstream accepts it: a letter or `_` first, then letters,
/// digits and `: _ . -`.
pub fn is_valid_group_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '-'))
}

/// True when `text` holds a character that only a regular expression would use; a filter
/// entry with one is treated as an expression rather than a name.
pub fn has_regex_chars(text: &str) -> bool {
    text.chars().any(|c| {
        matches!(
            c,
            '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | '{' | '}' | '|'
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        for ok in ["a", "root", "A-b_c", "ns:team#1", "x/y@z", &"q".repeat(64)] {
            assert!(is_valid_queue_name(ok), "{ok}");
        }
        for bad in ["", "a.b", "a b", "é", "a$", &"q".repeat(65)] {
            assert!(!is_valid_queue_name(bad), "{bad}");
        }
    }

    #[test]
    fn user_and_group_names() {
        for ok in ["alice", "_svc", "bob.smith@corp", "host$", "a:b-c"] {
            assert!(is_valid_user_name(ok), "{ok}");
        }
        for bad in ["", "1user", "a b", "$", "*", "a$b"] {
            assert!(!is_valid_user_name(bad), "{bad}");
        }
        for ok in ["dev", "_g", "team.a", "a:b-c"] {
            assert!(is_valid_group_name(ok), "{ok}");
        }
        for bad in ["", "9g", "g@x", "g$", "a b"] {
            assert!(!is_valid_group_name(bad), "{bad}");
        }
        assert!(has_regex_chars("^dev.*"));
        assert!(!has_regex_chars("dev.team"));
    }
}
