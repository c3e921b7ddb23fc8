//! The driver's status and its transitions, as upstream's
//! `MesosSchedulerDriver` makes them (src/sched/sched.cpp).
//!
//! ```text
//!                start                    abort
//!  NOT_STARTED ─────────▶ RUNNING ─────────────────▶ ABORTED
//!                           │                          │
//!                           │ stop(failover)           │ stop(failover): returns ABORTED
//!                           ▼                          ▼
//!                        STOPPED ◀─────────────────────┘
//! ```
//! Every other call acts only while RUNNING; on any other status it does
//! nothing and returns that status. A driver never starts again.

pub use crate::v1::Status;

/// What the handle is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `start()`.
    Start,
    /// `stop(failover)`.
    Stop,
    /// `abort()`.
    Abort,
    /// Any other call (launch, kill, decline, ...).
    Call,
}

/// The outcome of a request in a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The status afterwards.
    pub next: Status,
    /// What the call returns.
    pub returns: Status,
    /// Whether the request is carried out (false: ignored).
    pub acts: bool,
}

impl Step {
    fn to(next: Status) -> Self {
        Step {
            next,
            returns: next,
            acts: true,
        }
    }

    fn ignored(status: Status) -> Self {
        Step {
            next: status,
            returns: status,
            acts: false,
        }
    }
}

/// The one place where the driver's status changes.
pub fn step(status: Status, request: Request) -> Step {
    use Request::*;
    use Status::*;
    match (status, request) {
        (DriverNotStarted, Start) => Step::to(DriverRunning),
        (DriverRunning, Stop) => Step::to(DriverStopped),
        // Stopping an aborted driver still stops it (and sends TEARDOWN), but
        // tells the caller it had been aborted.
        (DriverAborted, Stop) => Step {
            next: DriverStopped,
            returns: DriverAborted,
            acts: true,
        },
        (DriverRunning, Abort) => Step::to(DriverAborted),
        (DriverRunning, Call) => Step::to(DriverRunning),
        (status, _) => Step::ignored(status),
    }
}

/// True once the driver can do nothing more (join returns).
pub fn is_final(status: Status) -> bool {
    matches!(status, Status::DriverAborted | Status::DriverStopped)
}

#[cfg(test)]
mod tests {
    use super::Request::*;
    use super::Status::*;
    use super::*;

    #[test]
    fn every_transition() {
        // (status, request, next, returns, acts)
        let cases = [
            (DriverNotStarted, Start, DriverRunning, DriverRunning, true),
            (
                DriverNotStarted,
                Stop,
                DriverNotStarted,
                DriverNotStarted,
                false,
            ),
            (
                DriverNotStarted,
                Abort,
                DriverNotStarted,
                DriverNotStarted,
                false,
            ),
            (
                DriverNotStarted,
                Call,
                DriverNotStarted,
                DriverNotStarted,
                false,
            ),
            (DriverRunning, Start, DriverRunning, DriverRunning, false),
            (DriverRunning, Stop, DriverStopped, DriverStopped, true),
            (DriverRunning, Abort, DriverAborted, DriverAborted, true),
            (DriverRunning, Call, DriverRunning, DriverRunning, true),
            (DriverAborted, Start, DriverAborted, DriverAborted, false),
            (DriverAborted, Stop, DriverStopped, DriverAborted, true),
            (DriverAborted, Abort, DriverAborted, DriverAborted, false),
            (DriverAborted, Call, DriverAborted, DriverAborted, false),
            (DriverStopped, Start, DriverStopped, DriverStopped, false),
            (DriverStopped, Stop, DriverStopped, DriverStopped, false),
            (DriverStopped, Abort, DriverStopped, DriverStopped, false),
            (DriverStopped, Call, DriverStopped, DriverStopped, false),
        ];
        for (status, request, next, returns, acts) in cases {
            assert_eq!(
                step(status, request),
                Step {
                    next,
                    returns,
                    acts
                },
                "{status:?} on {request:?}"
            );
        }
    }

    #[test]
    fn final_statuses() {
        assert!(!is_final(DriverNotStarted));
        assert!(!is_final(DriverRunning));
        assert!(is_final(DriverAborted));
        assert!(is_final(DriverStopped));
    }
}
