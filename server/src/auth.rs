//! The optional bearer token that guards mutating calls, over gRPC and HTTP.

use std::sync::Arc;

/// The token every mutating call must carry as `authorization: Bearer TOKEN`;
/// `None` accepts every call.
#[derive(Clone, Default)]
pub struct Token(Option<Arc<str>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.write_str(if self.0.is_some() {
            "Token(set)"
        } else {
            "Token(none)"
        })
    }
}

impl Token {
    /// A guard for `token`; `None` or an empty string disables the check.
    pub fn new(token: Option<&str>) -> Self {
        Self(token.filter(|t| !t.is_empty()).map(Arc::from))
    }

    /// True when `header` (the value of `authorization`) carries the token, or
    /// when no token is required.
    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(expected) = &self.0 else {
            return true;
        };
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        constant_time_eq(given, expected.as_bytes())
    }

    /// A tonic interceptor that refuses calls without the token with UNAUTHENTICATED.
    pub fn interceptor(
        &self,
    ) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone + use<>
    {
        let token = self.clone();
        move |req: tonic::Request<()>| {
            let header = req.metadata().get("authorization").map(|v| v.as_bytes());
            if token.admits(header) {
                Ok(req)
            } else {
                Err(tonic::Status::unauthenticated(
                    "missing or wrong bearer token in the authorization metadata",
                ))
            }
        }
    }
}

/// Compares without returning early on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_checks() {
        let none = Token::new(None);
        assert!(none.admits(None));
        let t = Token::new(Some("s3cret"));
        for (header, ok) in [
            (None, false),
            (Some(&b"Bearer s3cret"[..]), true),
            (Some(&b"Bearer s3cre"[..]), false),
            (Some(&b"bearer s3cret"[..]), false),
            (Some(&b"s3cret"[..]), false),
        ] {
            assert_eq!(t.admits(header), ok, "{header:?}");
        }
        assert_eq!(format!("{t:?}"), "Token(set)");
    }
}
