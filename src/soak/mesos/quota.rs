//! An operator who changes roles' weights and quota and reserves agents'
//! resources for them while frameworks run
//! ([`MesosOp::Operator`](super::ops::MesosOp::Operator): the operator
//! API's UPDATE_WEIGHTS, UPDATE_QUOTA, RESERVE_RESOURCES and
//! UNRESERVE_RESOURCES on the master thread), and invariant M14, that the
//! core holds every queue to its maximum.
//!
//! A change the master takes rescinds every outstanding offer and hands the
//! core a new configuration; the other invariants then check that nothing
//! was lost on the way (M1 offers, M7 usage). A limit below what a role's
//! tasks hold is refused without force (and a guarantee beyond the
//! cluster); with force it is taken, and the role may then keep what it
//! holds but get nothing more until it is back within the limit: M14
//! allows such a queue what it held when checked last (its *ceiling*).

use unisched_core::PartitionSnapshot;
use unisched_mesos::v1;
use unisched_mesos::v1::master::{Call, call};

use super::sim::MesosSim;

/// The roles an operator changes: the frameworks' roles (`frameworks.rs`)
/// and the default role.
pub const ROLES: [&str; 5] = ["web", "batch", "capped", "eng/build", "*"];

fn scalar(name: &str, value: f64) -> (String, v1::value::Scalar) {
    (name.to_string(), v1::value::Scalar { value })
}

impl MesosSim {
    /// Changes `role`'s weight or quota (see the operation's fields); the
    /// violations: a change refused for another reason than upstream's
    /// checks, or refused although forced.
    pub fn operator_change(&mut self, role: u8, kind: u8, force: bool) -> Vec<String> {
        let role = ROLES[usize::from(role) % ROLES.len()];
        let mut c = Call::default();
        let mut limited = false;
        if kind == 0 {
            c.r#type = Some(call::Type::UpdateWeights as i32);
            c.update_weights = Some(call::UpdateWeights {
                weight_infos: vec![v1::WeightInfo {
                    weight: if force { 3.0 } else { 0.5 },
                    role: Some(role.to_string()),
                }],
            });
        } else {
            let mut config = v1::quota::QuotaConfig {
                role: role.to_string(),
                ..Default::default()
            };
            if kind <= 3 {
                let n = f64::from(kind);
                config.limits = [scalar("cpus", n), scalar("mem", 512.0 * n)].into();
                if kind == 3 {
                    config.guarantees = [scalar("cpus", 0.5)].into();
                }
                limited = true;
            }
            c.r#type = Some(call::Type::UpdateQuota as i32);
            c.update_quota = Some(call::UpdateQuota {
                force: Some(force),
                quota_configs: vec![config],
            });
        }
        let path = unisched_mesos::master::units::role_queue(role).unwrap_or_default();
        match self.world.operator(c) {
            None => vec!["the master did not answer an operator call".to_string()],
            Some(Ok(_)) => {
                self.counts.operator_changes += 1;
                if kind > 0 {
                    // A new limit: a forced one may sit below what the
                    // queue holds (its ceiling is set at the next check);
                    // one taken without force is above it.
                    self.ceilings.retain(|(p, _), _| *p != path);
                    if limited && force {
                        for name in ["vcore", "memory"] {
                            self.ceilings
                                .insert((path.clone(), name.to_string()), i64::MAX);
                        }
                    }
                }
                Vec::new()
            }
            Some(Err(e))
                if !force
                    && e.status == 400
                    && (e.message.contains("is already consuming")
                        || e.message.contains("exceed cluster capacity")) =>
            {
                self.counts.operator_refusals += 1;
                Vec::new()
            }
            Some(Err(e)) => vec![format!(
                "operator change of role {role} (kind {kind}, force {force}) refused: {} {}",
                e.status, e.message
            )],
        }
    }

    /// Reserves one cpu and 128 MB of an agent for `role` (a dynamic
    /// reservation), or unreserves them; the violations: anything but 202,
    /// or 409 when they are not free (tasks hold them, or there is no such
    /// reservation); or a `*` reservation taken.
    pub fn operator_reservation(&mut self, role: u8, reserve: bool, agent: u32) -> Vec<String> {
        let role = ROLES[usize::from(role) % ROLES.len()];
        let Some(agent_id) = self.live_agent(agent) else {
            return Vec::new();
        };
        let mut resources = unisched_mesos::resources::Resources::parse("cpus:1;mem:128")
            .unwrap_or_default()
            .to_vec();
        for r in &mut resources {
            r.reservations.push(v1::resource::ReservationInfo {
                r#type: Some(v1::resource::reservation_info::Type::Dynamic as i32),
                role: Some(role.to_string()),
                ..Default::default()
            });
        }
        let agent_id = v1::AgentId { value: agent_id };
        let mut c = Call::default();
        let name = if reserve {
            c.r#type = Some(call::Type::ReserveResources as i32);
            c.reserve_resources = Some(call::ReserveResources {
                agent_id,
                source: Vec::new(),
                resources,
            });
            "RESERVE_RESOURCES"
        } else {
            c.r#type = Some(call::Type::UnreserveResources as i32);
            c.unreserve_resources = Some(call::UnreserveResources {
                agent_id,
                resources,
            });
            "UNRESERVE_RESOURCES"
        };
        match self.world.operator(c) {
            None => vec!["the master did not answer an operator call".to_string()],
            // `*` is no role to reserve for.
            Some(Ok(_)) if role == "*" => vec![format!("{name} for role * was taken")],
            Some(Ok(_)) => {
                self.counts.operator_changes += 1;
                Vec::new()
            }
            Some(Err(e)) if role == "*" && e.status == 400 => Vec::new(),
            Some(Err(e)) if e.status == 409 => {
                self.counts.operator_refusals += 1;
                Vec::new()
            }
            Some(Err(e)) => vec![format!(
                "{name} of role {role} refused: {} {}",
                e.status, e.message
            )],
        }
    }

    /// M14: every queue holds at most its maximum, or, after a forced
    /// limit below what it held, at most what it held at the last check.
    pub fn check_limits(&mut self, snap: &PartitionSnapshot, v: &mut Vec<String>) {
        for q in &snap.queues {
            for (name, max) in &q.max {
                let held = q.allocated.get(name).copied().unwrap_or(0);
                let key = (q.path.clone(), name.clone());
                let bound = self.ceilings.get(&key).copied().unwrap_or(*max);
                if held > bound {
                    v.push(format!(
                        "M14 queue {} holds {held} {name}, above {} {bound}",
                        q.path,
                        if bound == *max {
                            "its maximum"
                        } else {
                            "what it held under a forced lower limit,"
                        }
                    ));
                }
                if held <= *max {
                    self.ceilings.remove(&key);
                } else if self.ceilings.contains_key(&key) {
                    self.ceilings.insert(key, held);
                }
            }
        }
        // A queue that lost its maximum has no ceiling either.
        self.ceilings.retain(|(path, name), _| {
            snap.queues
                .iter()
                .any(|q| q.path == *path && q.max.contains_key(name))
        });
    }
}
