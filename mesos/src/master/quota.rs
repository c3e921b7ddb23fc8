//! Weights and quota changed at run time by an operator: the operator API's
//! UPDATE_WEIGHTS, UPDATE_QUOTA, SET_QUOTA and REMOVE_QUOTA, and the
//! `/weights` and `/quota` endpoints, checked as Mesos checks them (its
//! `weights_handler.cpp` and `quota_handler.cpp`), with its messages.
//!
//! Both act through the queue configuration, as the configuration file
//! does: the master keeps the text it was last given (at start, or by a
//! hot reload, [`Master::config_text`]) and what operators set (weights in
//! `Settings::weights`, quota in [`Master::quotas`]), and hands the core
//! the text with both applied ([`config::mesos_partition_with`]). A reload
//! of the file keeps them, as it keeps `--mesos-weights`. They live as long
//! as the master: there is no registry to keep them across a restart
//! (Mesos keeps them in its replicated log).
//!
//! A role's quota is its queue's guaranteed and maximum resources, in core
//! units; the quota a role has is what the configuration in force gives its
//! queue ([`Master::effective_quotas`]), whichever set it. Quota on a
//! nested role is accepted (Mesos refuses it "for now"): the core's
//! configuration checks keep a parent's guarantee at least its children's.
//! After a quota change, or a weight change of a role with a registered
//! framework, every outstanding offer is rescinded, so that the core hands
//! the resources out again under the new weights or quota (Mesos rescinds
//! all offers after such a weight change, and a best-effort part of them
//! after a quota change).

use std::collections::BTreeMap;

use super::CallError;
use super::config::{self, Quotas, RoleQuota};
use super::state::Master;
use crate::v1;
use unisched_core::scheduler::offers::OfferChange;

/// Quantities in core units by core name.
type Quantities = BTreeMap<String, i64>;

/// 1 EB in MB: the largest mem or disk a quota may name (Mesos' bound).
const EXABYTE_IN_MB: f64 = 1024.0 * 1024.0 * 1024.0 * 1024.0;
/// The largest value of any other resource a quota may name.
const OTHER_LIMIT: f64 = 1e12;

/// Quantities as Mesos writes them in messages: `cpus:2; mem:64`.
fn show(q: &Quantities) -> String {
    let mesos: BTreeMap<String, f64> = q
        .iter()
        .map(|(name, v)| super::units::scalar_from_core(name, *v))
        .collect();
    mesos
        .iter()
        .map(|(name, v)| format!("{name}:{v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A Mesos scalar map (`{cpus: 2}` in a QuotaConfig) as Mesos writes it.
fn show_scalars<'a>(map: impl IntoIterator<Item = (&'a String, &'a v1::value::Scalar)>) -> String {
    let parts: Vec<String> = map
        .into_iter()
        .map(|(name, s)| format!("'{name}': {}", s.value))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Mesos' check of an input scalar: finite, normal or zero, not negative.
fn check_scalar(value: f64) -> Result<(), &'static str> {
    match value.classify() {
        std::num::FpCategory::Infinite => Err("Infinite values not supported"),
        std::num::FpCategory::Nan => Err("NaN not supported"),
        std::num::FpCategory::Subnormal => Err("Subnormal values not supported"),
        std::num::FpCategory::Zero => Ok(()),
        std::num::FpCategory::Normal if value < 0.0 => Err("Negative values not supported"),
        std::num::FpCategory::Normal => Ok(()),
    }
}

/// A quota map's values against Mesos' bounds (1 EB of mem or disk, a
/// trillion of anything else).
fn check_bounds<'a>(
    map: impl IntoIterator<Item = (&'a String, &'a v1::value::Scalar)>,
) -> Result<(), String> {
    for (name, s) in map {
        if name == "mem" || name == "disk" {
            if s.value > EXABYTE_IN_MB {
                return Err(format!(
                    "{{'{name}': {}}} is invalid: values greater than 1 exabyte ({}) are not supported",
                    s.value, EXABYTE_IN_MB as i64
                ));
            }
        } else if s.value > OTHER_LIMIT {
            return Err(format!(
                "{{'{name}': {}}} is invalid: values greater than 1 trillion ({}) are not supported",
                s.value, OTHER_LIMIT as i64
            ));
        }
    }
    Ok(())
}

/// A scalar map in core names and units.
fn to_core<'a>(map: impl IntoIterator<Item = (&'a String, &'a v1::value::Scalar)>) -> Quantities {
    map.into_iter()
        .map(|(name, s)| super::units::scalar_to_core(name, s.value))
        .collect()
}

/// Checks a QuotaConfig as Mesos' `quota::validate` does, and gives it in
/// core units.
pub fn check_config(config: &v1::quota::QuotaConfig) -> Result<RoleQuota, String> {
    if config.role.is_empty() {
        return Err("'QuotaConfig.role' must be set".to_string());
    }
    super::units::validate_role(&config.role)
        .map_err(|e| format!("Invalid 'QuotaConfig.role': {e}"))?;
    check_bounds(&config.guarantees)
        .map_err(|e| format!("Invalid 'QuotaConfig.guarantees': {e}"))?;
    check_bounds(&config.limits).map_err(|e| format!("Invalid 'QuotaConfig.limits': {e}"))?;
    for (field, map) in [("guarantee", &config.guarantees), ("limit", &config.limits)] {
        for (name, s) in map {
            check_scalar(s.value).map_err(|e| {
                format!(
                    "Invalid {field} configuration {{'{name}': {}}}: {e}",
                    s.value
                )
            })?;
        }
    }
    let quota = RoleQuota {
        guaranteed: to_core(&config.guarantees),
        max: to_core(&config.limits),
    };
    if !contains(&quota.max, &quota.guaranteed) {
        return Err(format!(
            "'QuotaConfig.guarantees' {} is not contained within the 'QuotaConfig.limits' {}",
            show_scalars(&config.guarantees),
            show_scalars(&config.limits)
        ));
    }
    Ok(quota)
}

/// Whether limits hold `amounts`: every amount at most its limit (a name
/// without a limit is unlimited), as Mesos' `ResourceLimits::contains`.
fn contains(limits: &Quantities, amounts: &Quantities) -> bool {
    amounts
        .iter()
        .all(|(name, v)| limits.get(name).is_none_or(|l| v <= l))
}

/// Whether `have` holds every amount of `need` (a name absent counts 0), as
/// Mesos' `ResourceQuantities::contains`.
fn covers(have: &Quantities, need: &Quantities) -> bool {
    need.iter()
        .all(|(name, v)| *v <= have.get(name).copied().unwrap_or(0))
}

/// The quota each role has in a parsed configuration: each queue below root
/// with a guaranteed or a maximum, by its role.
fn quotas_of(queue: &unisched_core::config::QueueConfig, path: &str, out: &mut Quotas) {
    for child in &queue.queues {
        let child_path = format!("{path}.{}", child.name);
        if (!child.guaranteed.is_empty() || !child.max.is_empty())
            && let Some(role) = super::units::queue_role(&child_path)
        {
            out.insert(
                role,
                RoleQuota {
                    guaranteed: child.guaranteed.clone(),
                    max: child.max.clone(),
                },
            );
        }
        quotas_of(child, &child_path, out);
    }
}

impl Master {
    /// The text the core gets with `weights` and `quotas` applied to the
    /// last configuration text.
    fn patched_config(
        &self,
        weights: &BTreeMap<String, f64>,
        quotas: &Quotas,
    ) -> Result<String, String> {
        config::mesos_partition_with(self.config_text.as_deref(), weights, quotas)
    }

    /// The quota each role has in the configuration in force (the file's,
    /// with what operators set), and the sum of the top-level roles'
    /// guarantees (Mesos' total: a parent's guarantee holds its children's).
    pub(super) fn effective_quotas(&self, quotas: &Quotas) -> Result<(Quotas, Quantities), String> {
        let text = self.patched_config(&self.settings.weights, quotas)?;
        let parsed = unisched_core::config::parse(&text).map_err(|e| e.to_string())?;
        let mut out = Quotas::new();
        let mut total = Quantities::new();
        if let Some(p) = parsed.partitions.first() {
            quotas_of(&p.root, "root", &mut out);
            for top in &p.root.queues {
                for (name, v) in &top.guaranteed {
                    *total.entry(name.clone()).or_default() += v;
                }
            }
        }
        Ok((out, total))
    }

    /// Hands the core the configuration with `weights` and `quotas`; on
    /// success they become the master's, every outstanding offer is
    /// rescinded when `rescind` says so, and an allocation run asked for.
    fn reconfigure(
        &mut self,
        weights: BTreeMap<String, f64>,
        quotas: Quotas,
        rescind: bool,
    ) -> Result<(), CallError> {
        let text = self
            .patched_config(&weights, &quotas)
            .map_err(CallError::bad_request)?;
        self.core
            .scheduler
            .set_config(super::RM_ID, &text)
            .map_err(|e| CallError::bad_request(e.to_string()))?;
        self.settings.weights = weights;
        self.quotas = quotas;
        if rescind {
            let mut numbers: Vec<u64> = self.offers.values().map(|o| o.number).collect();
            numbers.sort_unstable();
            for n in numbers {
                self.rescind(n, true);
            }
        }
        self.core.offers(vec![OfferChange::Allocate]);
        Ok(())
    }

    /// UPDATE_WEIGHTS and `PUT /weights`: each role's weight, checked as
    /// Mesos checks them (a valid role, a positive weight).
    pub(super) fn update_weights(&mut self, infos: &[v1::WeightInfo]) -> Result<(), CallError> {
        let mut weights = self.settings.weights.clone();
        for info in infos {
            let role = info.role.as_deref().unwrap_or_default().trim();
            super::units::validate_role(role).map_err(|e| {
                CallError::bad_request(format!(
                    "Failed to validate update weights request JSON: Invalid role '{role}': {e}"
                ))
            })?;
            // Mesos refuses weights <= 0; NaN and infinity name no order either.
            if !(info.weight.is_finite() && info.weight > 0.0) {
                return Err(CallError::bad_request(format!(
                    "Failed to validate update weights request JSON for role '{role}': \
                     Invalid weight '{}': Weights must be positive",
                    info.weight
                )));
            }
            weights.insert(role.to_string(), info.weight);
        }
        // As Mesos: the offers go back only when an updated role has a
        // registered framework (one whose share the new weight changes).
        let framed = infos.iter().any(|info| {
            let role = info.role.as_deref().unwrap_or_default().trim();
            self.frameworks
                .values()
                .any(|f| f.roles.iter().any(|r| r == role))
        });
        let quotas = self.quotas.clone();
        tracing::info!(?weights, "operator: weights updated");
        self.reconfigure(weights, quotas, framed)
    }

    /// What a role's tasks and executors hold, and those of its nested
    /// roles (Mesos' quota consumption: what is allocated, not what is
    /// offered), in core units.
    fn consumed(&self, role: &str) -> Quantities {
        let nested = format!("{role}/");
        let within = |r: &str| r == role || r.starts_with(&nested);
        let mut held = crate::resources::Resources::default();
        for t in self.tasks.values().filter(|t| t.holds && within(&t.role)) {
            held.add(&t.resources.non_revocable());
        }
        for e in self.executor_holds.values().filter(|e| within(&e.role)) {
            held.add(&e.resources.non_revocable());
        }
        super::units::to_core(held.iter())
            .resources
            .into_iter()
            .map(|(name, q)| (name, q.value))
            .collect()
    }

    /// The cluster's capacity in core units: every agent's non-revocable
    /// scalars.
    fn capacity(&self) -> Quantities {
        let mut total = Quantities::new();
        for a in self.agents.values() {
            let non_revocable = a.total.non_revocable();
            for (name, q) in super::units::to_core(non_revocable.iter()).resources {
                *total.entry(name).or_default() += q.value;
            }
        }
        total
    }

    /// UPDATE_QUOTA: each role's guarantees and limits, checked as Mesos
    /// checks them; `force` skips the checks against what roles consume
    /// and what the cluster holds. A config with neither removes the role's
    /// quota.
    pub(super) fn update_quota(
        &mut self,
        configs: &[v1::quota::QuotaConfig],
        force: bool,
    ) -> Result<(), CallError> {
        let bad = |e: String| CallError::bad_request(format!("Invalid QuotaConfig: {e}"));
        let mut quotas = self.quotas.clone();
        let mut updated = Vec::new();
        for c in configs {
            let quota = check_config(c).map_err(bad)?;
            updated.push((c.role.clone(), quota.max.clone()));
            quotas.insert(c.role.clone(), quota);
        }
        for (role, limits) in &updated {
            let consumed = self.consumed(role);
            if !contains(limits, &consumed) {
                if force {
                    tracing::info!(role, "operator: quota limit below consumption, forced");
                } else {
                    return Err(bad(format!(
                        "Role '{role}' is already consuming '{}'; this is more than the requested \
                         limits '{}' (use 'force' flag to bypass this check)",
                        show(&consumed),
                        show(limits)
                    )));
                }
            }
        }
        let (_, total) = self.effective_quotas(&quotas).map_err(bad)?;
        let capacity = self.capacity();
        if !covers(&capacity, &total) {
            if force {
                tracing::info!("operator: quota overcommits the cluster, forced");
            } else {
                return Err(bad(format!(
                    "total quota guarantees '{}' exceed cluster capacity '{}' \
                     (use 'force' flag to bypass this check)",
                    show(&total),
                    show(&capacity)
                )));
            }
        }
        tracing::info!(roles = ?updated.iter().map(|u| &u.0).collect::<Vec<_>>(), "operator: quota updated");
        let weights = self.settings.weights.clone();
        self.reconfigure(weights, quotas, true)
    }

    /// SET_QUOTA and `POST /quota` (Mesos' older form): the guarantee is
    /// also the limit; a role that has quota is refused.
    pub(super) fn set_quota(&mut self, request: &v1::quota::QuotaRequest) -> Result<(), CallError> {
        let bad = |e: String| {
            CallError::bad_request(format!("Failed to validate set quota request: {e}"))
        };
        let role = request.role.clone().unwrap_or_default();
        let mut scalars: BTreeMap<String, v1::value::Scalar> = BTreeMap::new();
        for r in &request.guarantee {
            if r.r#type() != v1::value::Type::Scalar {
                return Err(bad(format!(
                    "QuotaInfo with invalid resource: quota can only be set on scalar resources, not '{}'",
                    r.name
                )));
            }
            if crate::resources::is_reserved(r, None) {
                return Err(bad(format!(
                    "QuotaInfo may not contain reserved resources ('{}')",
                    r.name
                )));
            }
            let value = r.scalar.as_ref().map_or(0.0, |s| s.value);
            scalars.entry(r.name.clone()).or_default().value += value;
        }
        if role.is_empty() {
            return Err(bad("QuotaInfo must specify a role".to_string()));
        }
        let (have, _) = self.effective_quotas(&self.quotas).map_err(bad)?;
        if have.contains_key(&role) {
            return Err(bad(format!(
                "Cannot set quota for role '{role}' which already has quota"
            )));
        }
        let config = v1::quota::QuotaConfig {
            role,
            guarantees: scalars.clone().into_iter().collect(),
            limits: scalars.into_iter().collect(),
        };
        self.update_quota(&[config], request.force.unwrap_or(false))
    }

    /// REMOVE_QUOTA and `DELETE /quota/<role>`: a role's quota goes;
    /// refused when it has none. `context` starts the refusal's message.
    pub(super) fn remove_quota(&mut self, role: &str, context: &str) -> Result<(), CallError> {
        let (have, _) = self
            .effective_quotas(&self.quotas)
            .map_err(CallError::bad_request)?;
        if !have.contains_key(role) {
            return Err(CallError::bad_request(format!(
                "{context}: Role '{role}' has no quota set"
            )));
        }
        let config = v1::quota::QuotaConfig {
            role: role.to_string(),
            ..Default::default()
        };
        self.update_quota(&[config], true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalars(pairs: &[(&str, f64)]) -> std::collections::BTreeMap<String, v1::value::Scalar> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v1::value::Scalar { value: *v }))
            .collect()
    }

    fn config(role: &str, g: &[(&str, f64)], l: &[(&str, f64)]) -> v1::quota::QuotaConfig {
        v1::quota::QuotaConfig {
            role: role.to_string(),
            guarantees: scalars(g).into_iter().collect(),
            limits: scalars(l).into_iter().collect(),
        }
    }

    #[test]
    fn quota_configs_are_checked_as_mesos_checks_them() {
        let ok = check_config(&config(
            "web",
            &[("cpus", 2.0), ("mem", 512.0)],
            &[("cpus", 4.0)],
        ))
        .unwrap();
        assert_eq!(ok.guaranteed["vcore"], 2000);
        assert_eq!(ok.guaranteed["memory"], 512 << 20);
        assert_eq!(ok.max["vcore"], 4000);
        assert!(!ok.max.contains_key("memory"));
        let err = |c| check_config(&c).unwrap_err();
        assert_eq!(err(config("", &[], &[])), "'QuotaConfig.role' must be set");
        assert!(err(config("/a", &[], &[])).starts_with("Invalid 'QuotaConfig.role': "));
        assert!(
            err(config("a", &[("cpus", 4.0)], &[("cpus", 2.0)]))
                .contains("is not contained within the 'QuotaConfig.limits'")
        );
        assert_eq!(
            err(config("a", &[("cpus", -1.0)], &[])),
            "Invalid guarantee configuration {'cpus': -1}: Negative values not supported"
        );
        assert!(err(config("a", &[], &[("gpus", f64::NAN)])).contains("NaN not supported"));
        assert!(
            err(config("a", &[("mem", 2.0 * EXABYTE_IN_MB)], &[]))
                .starts_with("Invalid 'QuotaConfig.guarantees': {'mem': ")
        );
        assert!(err(config("a", &[], &[("cpus", 2e12)])).contains("1 trillion"));
        // A guarantee of a resource without a limit is within the limits.
        assert!(check_config(&config("a", &[("disk", 1.0)], &[("cpus", 1.0)])).is_ok());
    }

    #[test]
    fn limits_and_capacity_compare_as_mesos_compares_them() {
        let q = |pairs: &[(&str, i64)]| -> Quantities {
            pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
        };
        // A name without a limit is unlimited.
        assert!(contains(&q(&[("vcore", 1000)]), &q(&[("memory", 5)])));
        assert!(!contains(&q(&[("vcore", 1000)]), &q(&[("vcore", 1001)])));
        // A name the cluster lacks has none of it.
        assert!(!covers(&q(&[("vcore", 1000)]), &q(&[("gpus", 1)])));
        assert!(covers(&q(&[("vcore", 1000)]), &q(&[("vcore", 1000)])));
        assert_eq!(
            show(&q(&[("vcore", 2500), ("memory", 64 << 20)])),
            "cpus:2.5; mem:64"
        );
    }
}
