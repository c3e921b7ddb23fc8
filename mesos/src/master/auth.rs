//! Who may use the master: Mesos' framework authentication.
//!
//! As a Mesos master's flags, and with their meaning:
//! - `--mesos-credentials PATH`: Mesos' credentials file, JSON
//!   (`{"credentials": [{"principal": "p", "secret": "s"}]}`; a path or a
//!   `file://` URL), the principals frameworks authenticate as.
//! - `--mesos-authenticate-frameworks`: a framework on the libprocess
//!   protocol must have authenticated (SASL, CRAM-MD5, against those
//!   credentials) before it registers.
//! - `--mesos-authenticate-http-frameworks`: a call of the v1 scheduler API
//!   must carry one of those credentials in HTTP Basic authentication
//!   (realm `mesos-master-scheduler`).
//!
//! An authenticated framework's `FrameworkInfo.principal` must be its
//! authenticated principal (it is set to it when absent), as in Mesos.
//! Independently of these, `--token` (this project's bearer token) also
//! admits a call of the scheduler API, and a libprocess scheduler that
//! authenticated is admitted under it (the protocol cannot carry a token).

use std::collections::HashMap;
use std::path::Path;

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use hmac::{Hmac, Mac};

/// The SASL mechanism the master offers (Mesos' default authenticator).
pub const CRAM_MD5: &str = "CRAM-MD5";

/// The realm of the scheduler API's Basic authentication.
pub const SCHEDULER_REALM: &str = "mesos-master-scheduler";

/// Principals and their secrets.
#[derive(Clone, Default)]
pub struct Credentials {
    secrets: HashMap<String, String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        let mut principals: Vec<&String> = self.secrets.keys().collect();
        principals.sort();
        f.debug_struct("Credentials")
            .field("principals", &principals)
            .finish()
    }
}

impl Credentials {
    /// Credentials from pairs of principal and secret.
    pub fn from_pairs<P: Into<String>, S: Into<String>>(
        pairs: impl IntoIterator<Item = (P, S)>,
    ) -> Self {
        Credentials {
            secrets: pairs
                .into_iter()
                .map(|(p, s)| (p.into(), s.into()))
                .collect(),
        }
    }

    /// Reads Mesos' credentials file (a path or a `file://` URL). An empty
    /// file holds no credentials (`Ok(None)`), as in Mesos.
    pub fn load(path: &str) -> Result<Option<Self>, String> {
        let file = path.strip_prefix("file://").unwrap_or(path);
        let text = std::fs::read_to_string(Path::new(file))
            .map_err(|e| format!("Failed to read credentials file '{file}': {e}"))?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        Self::parse(&text)
            .map(Some)
            .map_err(|e| format!("{file}: {e}"))
    }

    /// Parses the JSON of a credentials file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("Invalid json format: {e}"))?;
        let Some(list) = json.get("credentials") else {
            return Err("Failed to parse credentials: no 'credentials' array".to_string());
        };
        let Some(list) = list.as_array() else {
            return Err("Failed to parse credentials: 'credentials' is not an array".to_string());
        };
        let mut secrets = HashMap::new();
        for (i, c) in list.iter().enumerate() {
            let Some(principal) = c.get("principal").and_then(|p| p.as_str()) else {
                return Err(format!(
                    "Failed to parse credentials: credential {i} has no string 'principal'"
                ));
            };
            let secret = match c.get("secret") {
                None => "",
                Some(s) => s.as_str().ok_or_else(|| {
                    format!(
                        "Failed to parse credentials: the secret of '{principal}' is not a string"
                    )
                })?,
            };
            secrets.insert(principal.to_string(), secret.to_string());
        }
        Ok(Credentials { secrets })
    }

    /// How many principals there are.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// True when `principal`'s secret is `secret` (compared without
    /// returning early on the first differing byte).
    pub fn check(&self, principal: &str, secret: &str) -> bool {
        self.secrets
            .get(principal)
            .is_some_and(|s| same(s.as_bytes(), secret.as_bytes()))
    }

    /// The principal a CRAM-MD5 `response` (`<principal> <hex digest>`) to
    /// `challenge` proves, if it proves one: the digest must be
    /// HMAC-MD5 of the challenge under the principal's secret.
    pub fn cram_md5(&self, challenge: &[u8], response: &[u8]) -> Option<String> {
        let response = std::str::from_utf8(response).ok()?;
        let (principal, digest) = response.rsplit_once(' ')?;
        let secret = self.secrets.get(principal)?;
        let digest = decode_hex(digest)?;
        let mut mac = Hmac::<md5::Md5>::new_from_slice(secret.as_bytes()).ok()?;
        mac.update(challenge);
        mac.verify_slice(&digest).ok()?;
        Some(principal.to_string())
    }
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What the master requires of its clients.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Bearer token admitting calls of the HTTP APIs (`--token`).
    pub token: Option<String>,
    /// Principals frameworks authenticate as (`--mesos-credentials`).
    pub credentials: Option<Credentials>,
    /// Libprocess frameworks must authenticate before registering.
    pub authenticate_frameworks: bool,
    /// Scheduler API calls must carry Basic credentials.
    pub authenticate_http_frameworks: bool,
}

/// Why a call of the scheduler API is not admitted: 401 with these
/// `WWW-Authenticate` challenges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthorized {
    /// The challenges, one a header.
    pub challenges: Vec<String>,
}

impl Access {
    /// An access with only a bearer token (or none).
    pub fn token(token: Option<&str>) -> Self {
        Access {
            token: token.filter(|t| !t.is_empty()).map(str::to_string),
            ..Default::default()
        }
    }

    /// Checks the flags together, as a Mesos master does at start.
    pub fn validate(&self) -> Result<(), String> {
        let none = self.credentials.as_ref().is_none_or(Credentials::is_empty);
        if self.authenticate_http_frameworks && none {
            return Err(format!(
                "No credentials provided for the default 'basic' HTTP authenticator for realm '{SCHEDULER_REALM}' (--mesos-authenticate-http-frameworks needs --mesos-credentials)"
            ));
        }
        if self.authenticate_frameworks && none {
            return Err("Failed to start master with authentication enabled: no credentials (--mesos-authenticate-frameworks needs --mesos-credentials)".to_string());
        }
        Ok(())
    }

    /// True when the request carries the bearer token.
    pub fn has_token(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return false;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .is_some_and(|given| same(given, expected.as_bytes()))
    }

    /// True when a call of an API behind the token alone (the resource
    /// provider API) is admitted.
    pub fn admits_token(&self, headers: &HeaderMap) -> bool {
        self.token.is_none() || self.has_token(headers)
    }

    /// The authenticated principal of a call of the scheduler API
    /// (`Ok(None)`: admitted with no principal), or 401.
    pub fn scheduler_principal(&self, headers: &HeaderMap) -> Result<Option<String>, Unauthorized> {
        if self.authenticate_http_frameworks {
            if let Some(p) = self.basic(headers) {
                return Ok(Some(p));
            }
            if self.has_token(headers) {
                return Ok(None);
            }
        } else if self.admits_token(headers) {
            return Ok(None);
        }
        let mut challenges = Vec::new();
        if self.authenticate_http_frameworks {
            challenges.push(format!("Basic realm=\"{SCHEDULER_REALM}\""));
        }
        if self.token.is_some() {
            challenges.push("Bearer realm=\"mesos\"".to_string());
        }
        Err(Unauthorized { challenges })
    }

    /// The principal of valid Basic credentials in `headers`.
    fn basic(&self, headers: &HeaderMap) -> Option<String> {
        let credentials = self.credentials.as_ref()?;
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, encoded) = value.split_once(' ')?;
        if scheme != "Basic" {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        // As Mesos: exactly one ':' (a secret holding one does not work
        // there either).
        let mut parts = decoded.split(':');
        let (principal, secret) = (parts.next()?, parts.next()?);
        if parts.next().is_some() || !credentials.check(principal, secret) {
            return None;
        }
        Some(principal.to_string())
    }
}

/// The error of a framework whose `FrameworkInfo.principal` differs from
/// the principal it authenticated as over HTTP.
pub fn http_principal_mismatch(authenticated: &str, info: &str) -> String {
    format!(
        "Authenticated principal '{authenticated}' does not match principal '{info}' set in `FrameworkInfo`"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn creds() -> Credentials {
        Credentials::parse(
            r#"{"credentials": [{"principal": "sherman", "secret": "kitesurf"}, {"principal": "nobody"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn credentials_files_parse_or_say_why() {
        assert_eq!(creds().len(), 2);
        assert!(creds().check("sherman", "kitesurf"));
        assert!(!creds().check("sherman", "kitesurF"));
        assert!(creds().check("nobody", ""));
        for (text, why) in [
            ("{", "Invalid json format"),
            ("{}", "no 'credentials' array"),
            (r#"{"credentials": 3}"#, "not an array"),
            (r#"{"credentials": [{"secret": "x"}]}"#, "credential 0"),
            (
                r#"{"credentials": [{"principal": "a", "secret": 1}]}"#,
                "secret of 'a'",
            ),
        ] {
            let e = Credentials::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let dir = std::env::temp_dir().join(format!("unisched-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("credentials.json");
        std::fs::write(&file, "").unwrap();
        assert!(Credentials::load(file.to_str().unwrap()).unwrap().is_none());
        std::fs::write(&file, r#"{"credentials":[{"principal":"p","secret":"s"}]}"#).unwrap();
        let url = format!("file://{}", file.display());
        assert!(Credentials::load(&url).unwrap().unwrap().check("p", "s"));
        let e = Credentials::load(dir.join("missing").to_str().unwrap()).unwrap_err();
        assert!(e.contains("Failed to read credentials file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cram_md5_proves_the_principal() {
        // RFC 2195's example.
        let c = Credentials::from_pairs([("tim", "tanstaaftanstaaf")]);
        let challenge = b"<1896.697170952@postoffice.reston.mci.net>";
        assert_eq!(
            c.cram_md5(challenge, b"tim b913a602c7eda7a495b4e6e7334d3890")
                .as_deref(),
            Some("tim")
        );
        for wrong in [
            &b"tim b913a602c7eda7a495b4e6e7334d3891"[..],
            b"tom b913a602c7eda7a495b4e6e7334d3890",
            b"tim b913a602c7eda7a495b4e6e7334d389",
            b"tim",
            b"",
            b"tim zz13a602c7eda7a495b4e6e7334d3890",
        ] {
            assert_eq!(c.cram_md5(challenge, wrong), None);
        }
        assert_eq!(
            c.cram_md5(b"<other>", b"tim b913a602c7eda7a495b4e6e7334d3890"),
            None
        );
    }

    #[test]
    fn the_scheduler_api_takes_basic_or_the_token() {
        let basic = |user: &str, secret: &str| {
            let mut h = HeaderMap::new();
            let v = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"));
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Basic {v}")).unwrap(),
            );
            h
        };
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
            );
            h
        };
        let open = Access::default();
        assert_eq!(open.scheduler_principal(&HeaderMap::new()), Ok(None));
        // Basic is not looked at unless required, as in Mesos.
        let not_required = Access {
            credentials: Some(creds()),
            ..Default::default()
        };
        assert_eq!(
            not_required.scheduler_principal(&basic("sherman", "kitesurf")),
            Ok(None)
        );
        let required = Access {
            credentials: Some(creds()),
            authenticate_http_frameworks: true,
            token: Some("t0k".to_string()),
            ..Default::default()
        };
        assert_eq!(
            required.scheduler_principal(&basic("sherman", "kitesurf")),
            Ok(Some("sherman".to_string()))
        );
        assert_eq!(required.scheduler_principal(&bearer("t0k")), Ok(None));
        for h in [
            HeaderMap::new(),
            basic("sherman", "nope"),
            basic("nobody", "x"),
            bearer("t0"),
        ] {
            let e = required.scheduler_principal(&h).unwrap_err();
            assert_eq!(
                e.challenges,
                vec![
                    "Basic realm=\"mesos-master-scheduler\"".to_string(),
                    "Bearer realm=\"mesos\"".to_string()
                ]
            );
        }
        let token_only = Access::token(Some("t0k"));
        assert_eq!(token_only.scheduler_principal(&bearer("t0k")), Ok(None));
        assert!(
            token_only
                .scheduler_principal(&basic("sherman", "kitesurf"))
                .is_err()
        );
        assert!(
            Access {
                authenticate_frameworks: true,
                ..Default::default()
            }
            .validate()
            .unwrap_err()
            .contains("--mesos-credentials")
        );
        assert!(required.validate().is_ok());
    }
}
