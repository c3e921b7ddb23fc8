//! The operations of the Mesos soak, and their seeded generation.
//!
//! As in the SI soak, an operation names its targets by *pick* numbers
//! resolved against the model when it runs (the pick-th offer, task or
//! agent, modulo how many there are), so any sub-list of a generated list is
//! a valid run and a failure shrinks by deleting operations.

use std::fmt;

use crate::workload::rng::Rng;

/// Framework slots (each slot runs one framework at a time; a new one
/// takes the slot after the last is removed).
pub const FRAMEWORKS: u8 = 4;

/// How a DECLINE (or an ACCEPT's remainder) filters the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refuse {
    /// No `filters` at all: Mesos' default of 5 s.
    Omitted,
    /// `refuse_seconds: 0`: no filter.
    Zero,
    /// A negative `refuse_seconds`: 5 s.
    Negative,
    /// `refuse_seconds` of this many seconds.
    Secs(u32),
}

/// What kind of ACCEPT a framework makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptKind {
    /// Tasks that fit one outstanding offer.
    Valid,
    /// All of its outstanding offers on one agent and role, aggregated.
    Aggregate,
    /// An offer it already used (accepted or declined) with a valid one.
    Reused,
    /// Offers of two agents (invalid).
    TwoAgents,
    /// Offers of two roles on one agent (invalid).
    TwoRoles,
    /// An offer id that never existed (invalid).
    Unknown,
    /// One task asks for more than the offer has (TASK_ERROR).
    TooLarge,
    /// One task reuses the id of a live task (TASK_ERROR).
    DuplicateId,
    /// No operations: a decline.
    Empty,
    /// A task with its own executor (a new executor takes its resources
    /// besides the task's).
    WithExecutor,
    /// CREATE_DISK of part of a resource provider's RAW disk in the offer
    /// into a MOUNT disk (a valid accept otherwise).
    CreateDisk,
    /// DESTROY_DISK of a provider's MOUNT disk in the offer.
    DestroyDisk,
}

/// One step of the simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MesosOp {
    /// SUBSCRIBE: a new framework in the slot, or (with its id) a failover
    /// or reconnection; a removed one asks with its old id when `old_id`.
    Subscribe {
        /// Slot.
        fw: u8,
        /// Subscribe a removed framework's id again (it must be refused).
        old_id: bool,
        /// Roles suppressed from the start (bit mask over its roles).
        suppressed: u8,
    },
    /// The event stream closes (the connection drops).
    Disconnect {
        /// Slot.
        fw: u8,
    },
    /// TEARDOWN.
    Teardown {
        /// Slot.
        fw: u8,
    },
    /// DECLINE of one outstanding offer, or of all of them.
    Decline {
        /// Slot.
        fw: u8,
        /// Which offer.
        offer: u32,
        /// Every outstanding offer at once.
        all: bool,
        /// Its filter.
        refuse: Refuse,
    },
    /// ACCEPT.
    Accept {
        /// Slot.
        fw: u8,
        /// Which offer.
        offer: u32,
        /// Which kind.
        kind: AcceptKind,
        /// Tasks launched (1 to 3).
        tasks: u8,
        /// Task size (0 small .. 3 large) and port use.
        size: u8,
        /// What the tasks do (see `agents::Plan`).
        plan: u8,
        /// Filter for the remainder.
        refuse: Refuse,
    },
    /// SUPPRESS of some roles (bit mask; 0: all).
    Suppress {
        /// Slot.
        fw: u8,
        /// Roles.
        roles: u8,
    },
    /// REVIVE of some roles (bit mask; 0: all).
    Revive {
        /// Slot.
        fw: u8,
        /// Roles.
        roles: u8,
    },
    /// UPDATE_FRAMEWORK with a new set of suppressed roles.
    UpdateFramework {
        /// Slot.
        fw: u8,
        /// Suppressed roles (bit mask).
        suppressed: u8,
    },
    /// KILL of a task (or of one it never launched).
    Kill {
        /// Slot.
        fw: u8,
        /// Which task.
        task: u32,
        /// A task id it never used.
        unknown: bool,
    },
    /// RECONCILE: 0 implicit, 1 explicit of known tasks, 2 explicit with
    /// unknown tasks on a live agent, on a removed agent and on none.
    Reconcile {
        /// Slot.
        fw: u8,
        /// Which kind.
        kind: u8,
    },
    /// Acknowledges every update it holds (a late framework catching up).
    AckAll {
        /// Slot.
        fw: u8,
    },
    /// A call with a stale or wrong stream id (400/403 expected).
    BadCall {
        /// Slot.
        fw: u8,
    },
    /// The framework stops reading its events until its stream is closed
    /// for not keeping up (it then reconnects with a later SUBSCRIBE).
    Stall {
        /// Slot.
        fw: u8,
    },
    /// An agent joins (a new host).
    AgentAdd {
        /// Its size (0..3).
        size: u8,
    },
    /// An agent is removed.
    AgentRemove {
        /// Which live agent.
        agent: u32,
    },
    /// A removed host comes back as a new agent.
    AgentReturn {
        /// Which removed host.
        host: u32,
    },
    /// A task on an agent ends by itself now (finished or failed).
    TaskEnds {
        /// Which running task of all.
        task: u32,
        /// Failed rather than finished.
        failed: bool,
    },
    /// A resource provider subscribes on an agent: a new one in the slot
    /// (on the pick-th live agent), or the slot's provider again with its id.
    ProviderSubscribe {
        /// Provider slot.
        p: u8,
        /// Which live agent, for a new provider.
        agent: u32,
    },
    /// A provider's stream closes.
    ProviderDrop {
        /// Provider slot.
        p: u8,
    },
    /// A provider's RAW disk grows or shrinks: UPDATE_STATE with a new
    /// resource version.
    ProviderChange {
        /// Provider slot.
        p: u8,
        /// Grows rather than shrinks.
        grow: bool,
        /// By how much (steps of 32).
        amount: u8,
    },
    /// A provider answers one operation it is applying (and sends again the
    /// statuses it has not seen acknowledged).
    ProviderAnswer {
        /// Provider slot.
        p: u8,
        /// Which pending operation.
        pick: u32,
        /// 0-5 finished, 6-7 failed, 8-9 finished with the status lost.
        outcome: u8,
    },
    /// A provider stops reading its events for some steps.
    ProviderPause {
        /// Provider slot.
        p: u8,
        /// Steps.
        steps: u8,
    },
    /// An operator changes a role's weight or quota (the operator API's
    /// UPDATE_WEIGHTS and UPDATE_QUOTA), or reserves an agent's resources
    /// for it or unreserves them (RESERVE_RESOURCES, UNRESERVE_RESOURCES).
    Operator {
        /// Which role (`soak::mesos::quota::ROLES`).
        role: u8,
        /// 0: a weight; 1-3: a limit of that many cpus and 512 MB each
        /// (3 with a guarantee of half a cpu); 4: no quota; 5: a dynamic
        /// reservation of one cpu and 128 MB; 6: its unreservation.
        kind: u8,
        /// With `force` (and, for a weight, 3 rather than 0.5).
        force: bool,
        /// Which agent, for a reservation.
        agent: u32,
    },
    /// An operator takes an agent out of service or back (`service.rs`).
    AgentService {
        /// Which live agent.
        agent: u32,
        /// 0: DEACTIVATE_AGENT; 1: REACTIVATE_AGENT; 2: DRAIN_AGENT (grace
        /// periods capped at 5 s); 3: MARK_AGENT_GONE.
        kind: u8,
    },
    /// Virtual time passes, one second at a time.
    Advance {
        /// Seconds.
        secs: u32,
    },
}

impl fmt::Display for MesosOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Generates `steps` operations from `seed`.
pub fn generate(seed: u64, steps: usize) -> Vec<MesosOp> {
    let mut rng = Rng::new(seed ^ 0x3e50_5000_50a4);
    (0..steps).map(|_| one(&mut rng)).collect()
}

fn pick(rng: &mut Rng) -> u32 {
    rng.below(1 << 16) as u32
}

fn refuse(rng: &mut Rng) -> Refuse {
    match rng.below(10) {
        0 | 1 => Refuse::Omitted,
        2 | 3 => Refuse::Zero,
        4 => Refuse::Negative,
        5 | 6 => Refuse::Secs(1),
        7 | 8 => Refuse::Secs(3 + rng.below(8) as u32),
        _ => Refuse::Secs(60),
    }
}

fn accept_kind(rng: &mut Rng) -> AcceptKind {
    use AcceptKind::*;
    match rng.below(40) {
        0..=15 => Valid,
        16..=18 => Aggregate,
        19 => Reused,
        20 => TwoAgents,
        21 => TwoRoles,
        22 => Unknown,
        23 | 24 => TooLarge,
        25 => DuplicateId,
        26 => Empty,
        27 | 28 => WithExecutor,
        29..=32 => CreateDisk,
        33 | 34 => DestroyDisk,
        _ => Valid,
    }
}

fn one(rng: &mut Rng) -> MesosOp {
    let fw = rng.below(u64::from(FRAMEWORKS)) as u8;
    match rng.below(1000) {
        0..=59 => MesosOp::Subscribe {
            fw,
            old_id: rng.chance(0.15),
            suppressed: if rng.chance(0.2) {
                rng.below(4) as u8
            } else {
                0
            },
        },
        60..=84 => MesosOp::Disconnect { fw },
        85..=99 => MesosOp::Teardown { fw },
        100..=219 => MesosOp::Decline {
            fw,
            offer: pick(rng),
            all: rng.chance(0.2),
            refuse: refuse(rng),
        },
        220..=419 => MesosOp::Accept {
            fw,
            offer: pick(rng),
            kind: accept_kind(rng),
            tasks: 1 + rng.below(3) as u8,
            size: rng.below(4) as u8,
            plan: rng.below(256) as u8,
            refuse: refuse(rng),
        },
        420..=444 => MesosOp::Suppress {
            fw,
            roles: rng.below(4) as u8,
        },
        445..=474 => MesosOp::Revive {
            fw,
            roles: rng.below(4) as u8,
        },
        475..=484 => MesosOp::UpdateFramework {
            fw,
            suppressed: rng.below(4) as u8,
        },
        485..=534 => MesosOp::Kill {
            fw,
            task: pick(rng),
            unknown: rng.chance(0.1),
        },
        535..=564 => MesosOp::Reconcile {
            fw,
            kind: rng.below(3) as u8,
        },
        565..=589 => MesosOp::AckAll { fw },
        590..=599 => MesosOp::BadCall { fw },
        600..=604 => MesosOp::Stall { fw },
        605..=624 => MesosOp::AgentAdd {
            size: rng.below(4) as u8,
        },
        625..=639 => MesosOp::AgentRemove { agent: pick(rng) },
        640..=654 => MesosOp::AgentReturn { host: pick(rng) },
        655..=759 => MesosOp::TaskEnds {
            task: pick(rng),
            failed: rng.chance(0.3),
        },
        760..=774 => MesosOp::ProviderSubscribe {
            p: rng.below(u64::from(super::providers::PROVIDERS)) as u8,
            agent: pick(rng),
        },
        775..=782 => MesosOp::ProviderDrop {
            p: rng.below(u64::from(super::providers::PROVIDERS)) as u8,
        },
        783..=792 => MesosOp::ProviderChange {
            p: rng.below(u64::from(super::providers::PROVIDERS)) as u8,
            grow: rng.chance(0.5),
            amount: 1 + rng.below(8) as u8,
        },
        793..=822 => MesosOp::ProviderAnswer {
            p: rng.below(u64::from(super::providers::PROVIDERS)) as u8,
            pick: pick(rng),
            outcome: rng.below(10) as u8,
        },
        823..=837 => MesosOp::ProviderPause {
            p: rng.below(u64::from(super::providers::PROVIDERS)) as u8,
            steps: 2 + rng.below(7) as u8,
        },
        838..=851 => MesosOp::Operator {
            role: rng.below(5) as u8,
            kind: rng.below(7) as u8,
            force: rng.chance(0.5),
            agent: pick(rng),
        },
        852..=863 => MesosOp::AgentService {
            agent: pick(rng),
            kind: rng.below(4) as u8,
        },
        _ => MesosOp::Advance {
            secs: match rng.below(100) {
                0..=59 => 1,
                60..=84 => 2 + rng.below(4) as u32,
                85..=96 => 10 + rng.below(21) as u32,
                _ => 60 + rng.below(600) as u32,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_fixed_by_the_seed() {
        assert_eq!(generate(3, 500), generate(3, 500));
        assert_ne!(generate(3, 500), generate(4, 500));
    }

    #[test]
    fn every_kind_of_operation_is_drawn() {
        let ops = generate(1, 20_000);
        let kinds: std::collections::BTreeSet<String> = ops
            .iter()
            .map(|o| {
                format!("{o:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        // Every variant of `MesosOp`.
        assert_eq!(kinds.len(), 25, "{kinds:?}");
    }
}
