//! The master's side of framework authentication on the libprocess
//! protocol: SASL with CRAM-MD5, as Mesos' default authenticator.
//!
//! A framework's driver runs an *authenticatee* process, which sends
//! `AuthenticateMessage { pid: <scheduler's pid> }` to the master. The
//! master opens an authenticator *session*, a process of its own
//! (`crammd5-authenticator-session(N)`), which sends the mechanisms it
//! offers; the authenticatee answers `AuthenticationStartMessage`; the
//! session sends the challenge (`AuthenticationStepMessage`); the
//! authenticatee answers `<principal> <hex HMAC-MD5 of the challenge under
//! its secret>`; the session ends with `AuthenticationCompletedMessage` (the
//! scheduler's pid is then authenticated as that principal) or
//! `AuthenticationFailedMessage`. Out of turn, or without credentials, it
//! is `AuthenticationErrorMessage` with a reason, as upstream.
//!
//! This is state only: [`super::libprocess`] owns it (in its session table,
//! under the same lock) and sends the replies it returns.

use std::collections::HashMap;

use axum::http::StatusCode;
use prost::Message as _;

use super::auth::{CRAM_MD5, Credentials};
use super::libprocess::{Answer, Upid};
use crate::internal as msg;

/// How long an authentication may take (Mesos'
/// `--authentication_v0_timeout`).
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The process name of session `n`.
fn process_of(n: u64) -> String {
    format!("crammd5-authenticator-session({n})")
}

/// The session number of a process name, if it names one.
pub fn session_process(process: &str) -> Option<u64> {
    process
        .strip_prefix("crammd5-authenticator-session(")?
        .strip_suffix(')')?
        .parse()
        .ok()
}

/// True for the messages of an authentication itself.
pub fn is_authentication(name: &str) -> bool {
    matches!(
        name,
        "mesos.internal.AuthenticateMessage"
            | "mesos.internal.AuthenticationStartMessage"
            | "mesos.internal.AuthenticationStepMessage"
    )
}

/// A message to send: to whom, from which of the master's processes
/// (`None`: the master itself), its name and body.
#[derive(Debug)]
pub struct Reply {
    /// The authenticatee.
    pub to: Upid,
    /// The sending process (`None`: `master`).
    pub process: Option<String>,
    /// The message's full name.
    pub name: &'static str,
    /// Its protobuf.
    pub body: Vec<u8>,
}

enum Stage {
    /// The mechanisms were sent; waiting for the start.
    Starting,
    /// The challenge was sent; waiting for the answer.
    Stepping { challenge: Vec<u8> },
}

struct Session {
    authenticatee: Upid,
    client: Upid,
    stage: Stage,
}

/// Authentications in progress and their results.
#[derive(Default)]
pub struct Authenticator {
    credentials: Option<Credentials>,
    next: u64,
    sessions: HashMap<u64, Session>,
    /// The session in progress of each client (scheduler) pid.
    by_client: HashMap<Upid, u64>,
    /// Authenticated client pids and their principals.
    authenticated: HashMap<Upid, String>,
}

fn error(to: Upid, process: Option<String>, reason: impl Into<String>) -> Reply {
    Reply {
        to,
        process,
        name: "mesos.internal.AuthenticationErrorMessage",
        body: msg::AuthenticationErrorMessage {
            error: Some(reason.into()),
        }
        .encode_to_vec(),
    }
}

impl Authenticator {
    /// An authenticator of `credentials` (`None`: authentication requests
    /// get an error, as a Mesos master with no credentials answers them).
    pub fn new(credentials: Option<Credentials>) -> Self {
        Authenticator {
            credentials: credentials.filter(|c| !c.is_empty()),
            ..Default::default()
        }
    }

    /// The principal `pid` authenticated as.
    pub fn principal(&self, pid: &Upid) -> Option<&str> {
        self.authenticated.get(pid).map(String::as_str)
    }

    /// True while `pid` is being authenticated.
    pub fn authenticating(&self, pid: &Upid) -> bool {
        self.by_client.contains_key(pid)
    }

    /// Forgets `pid`'s authentication (its framework disconnected: a
    /// driver authenticates again before it registers again).
    pub fn forget(&mut self, pid: &Upid) {
        self.authenticated.remove(pid);
    }

    /// `AuthenticateMessage` from the authenticatee `from`: a session
    /// starts (an earlier one of the same client is discarded, and so is
    /// its authentication) and sends the mechanisms. Returns the session's
    /// number (to time it out) and the reply.
    pub fn authenticate(
        &mut self,
        from: Upid,
        body: &[u8],
    ) -> Result<(Option<u64>, Reply), Answer> {
        let m = msg::AuthenticateMessage::decode(body).map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("Failed to parse mesos.internal.AuthenticateMessage: {e}"),
            )
        })?;
        let Some(client) = Upid::parse(&m.pid) else {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("Failed to parse the pid '{}' to authenticate", m.pid),
            ));
        };
        self.authenticated.remove(&client);
        if self.credentials.is_none() {
            tracing::warn!(%client, "libprocess: an authentication, but no credentials (--mesos-credentials)");
            return Ok((None, error(from, None, "No authenticator loaded")));
        }
        if let Some(old) = self.by_client.remove(&client) {
            tracing::info!(%client, "libprocess: re-authenticating; the outstanding authentication discarded");
            self.sessions.remove(&old);
        }
        self.next += 1;
        let n = self.next;
        self.sessions.insert(
            n,
            Session {
                authenticatee: from.clone(),
                client: client.clone(),
                stage: Stage::Starting,
            },
        );
        self.by_client.insert(client, n);
        let reply = Reply {
            to: from,
            process: Some(process_of(n)),
            name: "mesos.internal.AuthenticationMechanismsMessage",
            body: msg::AuthenticationMechanismsMessage {
                mechanisms: vec![CRAM_MD5.to_string()],
            }
            .encode_to_vec(),
        };
        Ok((Some(n), reply))
    }

    /// Ends session `n` if it is still going (its time ran out).
    pub fn expire(&mut self, n: u64) {
        if let Some(s) = self.sessions.remove(&n) {
            tracing::info!(client = %s.client, "libprocess: an authentication timed out");
            if self.by_client.get(&s.client) == Some(&n) {
                self.by_client.remove(&s.client);
            }
        }
    }

    fn session(&mut self, n: u64, from: &Upid) -> Result<&mut Session, Answer> {
        match self.sessions.get_mut(&n) {
            None => Err((
                StatusCode::NOT_FOUND,
                format!("no process '{}' here", process_of(n)),
            )),
            Some(s) if &s.authenticatee != from => Err((
                StatusCode::FORBIDDEN,
                format!(
                    "{} authenticates {}, not {from}",
                    process_of(n),
                    s.authenticatee
                ),
            )),
            Some(s) => Ok(s),
        }
    }

    /// Ends session `n` with `reply`.
    fn end(&mut self, n: u64, reply: Reply) -> Result<Reply, Answer> {
        if let Some(s) = self.sessions.remove(&n)
            && self.by_client.get(&s.client) == Some(&n)
        {
            self.by_client.remove(&s.client);
        }
        Ok(reply)
    }

    /// A message to session `n` (`AuthenticationStartMessage` or
    /// `AuthenticationStepMessage`) from `from`.
    pub fn step(
        &mut self,
        n: u64,
        from: &Upid,
        name: &str,
        body: &[u8],
        hostname: &str,
    ) -> Result<Reply, Answer> {
        let process = Some(process_of(n));
        let (to, client, sent) = {
            let s = self.session(n, from)?;
            let sent = match &s.stage {
                Stage::Starting => None,
                Stage::Stepping { challenge } => Some(challenge.clone()),
            };
            (s.authenticatee.clone(), s.client.clone(), sent)
        };
        let bad = |e: prost::DecodeError| {
            (
                StatusCode::BAD_REQUEST,
                format!("Failed to parse {name}: {e}"),
            )
        };
        match (name, sent) {
            ("mesos.internal.AuthenticationStartMessage", None) => {
                let m = msg::AuthenticationStartMessage::decode(body).map_err(bad)?;
                if m.mechanism != CRAM_MD5 {
                    let reason = format!(
                        "Failed to start the SASL server: mechanism '{}' is not offered (only {CRAM_MD5})",
                        m.mechanism
                    );
                    return self.end(n, error(to, process, reason));
                }
                // RFC 2195: a unique message id in angle brackets.
                let challenge = format!(
                    "<{}.{}@{hostname}>",
                    uuid::Uuid::new_v4().simple(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs())
                )
                .into_bytes();
                if let Some(s) = self.sessions.get_mut(&n) {
                    s.stage = Stage::Stepping {
                        challenge: challenge.clone(),
                    };
                }
                Ok(Reply {
                    to,
                    process,
                    name: "mesos.internal.AuthenticationStepMessage",
                    body: msg::AuthenticationStepMessage { data: challenge }.encode_to_vec(),
                })
            }
            ("mesos.internal.AuthenticationStepMessage", Some(challenge)) => {
                let m = msg::AuthenticationStepMessage::decode(body).map_err(bad)?;
                let principal = self
                    .credentials
                    .as_ref()
                    .and_then(|c| c.cram_md5(&challenge, &m.data));
                match principal {
                    Some(p) => {
                        tracing::info!(%client, principal = p, "libprocess: authenticated");
                        self.authenticated.insert(client, p);
                        self.end(
                            n,
                            Reply {
                                to,
                                process,
                                name: "mesos.internal.AuthenticationCompletedMessage",
                                body: Vec::new(),
                            },
                        )
                    }
                    None => {
                        tracing::info!(%client, "libprocess: authentication failed: invalid credentials");
                        self.end(
                            n,
                            Reply {
                                to,
                                process,
                                name: "mesos.internal.AuthenticationFailedMessage",
                                body: Vec::new(),
                            },
                        )
                    }
                }
            }
            ("mesos.internal.AuthenticationStartMessage", _) => self.end(
                n,
                error(to, process, "Unexpected authentication 'start' received"),
            ),
            ("mesos.internal.AuthenticationStepMessage", _) => self.end(
                n,
                error(to, process, "Unexpected authentication 'step' received"),
            ),
            _ => Err((
                StatusCode::BAD_REQUEST,
                format!("Unknown message '{name}' for {}", process_of(n)),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};

    fn pid(s: &str) -> Upid {
        Upid::parse(s).unwrap()
    }

    fn authenticate(a: &mut Authenticator, from: &Upid, client: &str) -> (u64, Reply) {
        let body = msg::AuthenticateMessage {
            pid: client.to_string(),
        }
        .encode_to_vec();
        let (n, reply) = a.authenticate(from.clone(), &body).unwrap();
        (n.unwrap(), reply)
    }

    fn start(a: &mut Authenticator, n: u64, from: &Upid, mechanism: &str) -> Reply {
        let body = msg::AuthenticationStartMessage {
            mechanism: mechanism.to_string(),
            data: None,
        }
        .encode_to_vec();
        a.step(
            n,
            from,
            "mesos.internal.AuthenticationStartMessage",
            &body,
            "h",
        )
        .unwrap()
    }

    fn answer(a: &mut Authenticator, n: u64, from: &Upid, data: Vec<u8>) -> Reply {
        let body = msg::AuthenticationStepMessage { data }.encode_to_vec();
        a.step(
            n,
            from,
            "mesos.internal.AuthenticationStepMessage",
            &body,
            "h",
        )
        .unwrap()
    }

    fn digest(secret: &str, challenge: &[u8]) -> String {
        let mut mac = Hmac::<md5::Md5>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(challenge);
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_client_authenticates_with_cram_md5() {
        let mut a = Authenticator::new(Some(Credentials::from_pairs([("fw", "s3cret")])));
        let authenticatee = pid("sasl_authenticatee(1)@127.0.0.1:4001");
        let client = pid("scheduler(1)@127.0.0.1:4000");
        for (secret, done) in [
            ("wrong", "mesos.internal.AuthenticationFailedMessage"),
            ("s3cret", "mesos.internal.AuthenticationCompletedMessage"),
        ] {
            let (n, mechanisms) = authenticate(&mut a, &authenticatee, &client.to_string());
            assert_eq!(mechanisms.to, authenticatee);
            assert_eq!(
                mechanisms.process.as_deref(),
                Some(format!("crammd5-authenticator-session({n})").as_str())
            );
            let m = msg::AuthenticationMechanismsMessage::decode(&mechanisms.body[..]).unwrap();
            assert_eq!(m.mechanisms, vec!["CRAM-MD5".to_string()]);
            assert!(a.authenticating(&client));
            let step = start(&mut a, n, &authenticatee, "CRAM-MD5");
            assert_eq!(step.name, "mesos.internal.AuthenticationStepMessage");
            let challenge = msg::AuthenticationStepMessage::decode(&step.body[..])
                .unwrap()
                .data;
            assert!(challenge.starts_with(b"<") && challenge.ends_with(b"@h>"));
            let response = format!("fw {}", digest(secret, &challenge)).into_bytes();
            // Only the authenticatee speaks for the session.
            let other = pid("intruder(1)@127.0.0.1:9");
            let body = msg::AuthenticationStepMessage {
                data: response.clone(),
            }
            .encode_to_vec();
            let e = a
                .step(
                    n,
                    &other,
                    "mesos.internal.AuthenticationStepMessage",
                    &body,
                    "h",
                )
                .unwrap_err();
            assert_eq!(e.0, StatusCode::FORBIDDEN);
            let end = answer(&mut a, n, &authenticatee, response);
            assert_eq!(end.name, done);
            assert!(!a.authenticating(&client));
            // The session is gone with its end.
            let e = a
                .step(
                    n,
                    &authenticatee,
                    "mesos.internal.AuthenticationStepMessage",
                    &body,
                    "h",
                )
                .unwrap_err();
            assert_eq!(e.0, StatusCode::NOT_FOUND);
        }
        assert_eq!(a.principal(&client), Some("fw"));
        // A new authentication of the client clears the last one.
        let (n, _) = authenticate(&mut a, &authenticatee, &client.to_string());
        assert_eq!(a.principal(&client), None);
        a.expire(n);
        assert!(!a.authenticating(&client));
        a.forget(&client);
    }

    #[test]
    fn out_of_turn_or_without_credentials_is_an_error_with_a_reason() {
        let authenticatee = pid("a(1)@127.0.0.1:4001");
        let mut none = Authenticator::new(None);
        let (n, reply) = none
            .authenticate(
                authenticatee.clone(),
                &msg::AuthenticateMessage {
                    pid: "s(1)@127.0.0.1:4000".to_string(),
                }
                .encode_to_vec(),
            )
            .unwrap();
        assert!(n.is_none());
        assert_eq!(reply.name, "mesos.internal.AuthenticationErrorMessage");
        let e = msg::AuthenticationErrorMessage::decode(&reply.body[..]).unwrap();
        assert_eq!(e.error.as_deref(), Some("No authenticator loaded"));

        let mut a = Authenticator::new(Some(Credentials::from_pairs([("fw", "x")])));
        assert_eq!(
            a.authenticate(authenticatee.clone(), b"\x0a\x03abc")
                .unwrap_err()
                .0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            a.authenticate(authenticatee.clone(), b"\xff")
                .unwrap_err()
                .0,
            StatusCode::BAD_REQUEST
        );
        // A step before the start.
        let (n, _) = authenticate(&mut a, &authenticatee, "s(1)@127.0.0.1:4000");
        let r = answer(&mut a, n, &authenticatee, b"fw 00".to_vec());
        let e = msg::AuthenticationErrorMessage::decode(&r.body[..]).unwrap();
        assert_eq!(
            e.error.as_deref(),
            Some("Unexpected authentication 'step' received")
        );
        // A mechanism not offered.
        let (n, _) = authenticate(&mut a, &authenticatee, "s(1)@127.0.0.1:4000");
        let r = start(&mut a, n, &authenticatee, "PLAIN");
        let e = msg::AuthenticationErrorMessage::decode(&r.body[..]).unwrap();
        assert!(e.error.unwrap().contains("'PLAIN' is not offered"));
        // A start twice.
        let (n, _) = authenticate(&mut a, &authenticatee, "s(1)@127.0.0.1:4000");
        start(&mut a, n, &authenticatee, "CRAM-MD5");
        let r = start(&mut a, n, &authenticatee, "CRAM-MD5");
        let e = msg::AuthenticationErrorMessage::decode(&r.body[..]).unwrap();
        assert_eq!(
            e.error.as_deref(),
            Some("Unexpected authentication 'start' received")
        );
        assert_eq!(
            session_process("crammd5-authenticator-session(12)"),
            Some(12)
        );
        assert_eq!(session_process("crammd5-authenticator-session()"), None);
        assert_eq!(session_process("master"), None);
    }
}
