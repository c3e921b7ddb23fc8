//! The simulation's resource providers (to come).

use super::ops::{AcceptKind, Refuse};
use super::sim::MesosSim;

/// Every resource provider of the run.
#[derive(Debug, Default)]
pub struct Providers {}

impl Providers {
    /// None yet.
    pub fn new(_seed: u64) -> Providers {
        Providers {}
    }

    /// The agents standing for external providers' resources.
    pub fn external_agents(&self) -> Vec<String> {
        Vec::new()
    }

    /// An agent left.
    pub fn agent_removed(&mut self, _agent: &str) {}
}

impl MesosSim {
    /// SUBSCRIBE of a provider.
    pub fn provider_subscribe(&mut self, _slot: u8, _agent: u32) -> Vec<String> {
        Vec::new()
    }

    /// UPDATE_STATE of a provider.
    pub fn provider_update(&mut self, _slot: u8, _new_version: bool, _disk: u8) -> Vec<String> {
        Vec::new()
    }

    /// A provider's stream closes.
    pub fn provider_drop(&mut self, _slot: u8) -> Vec<String> {
        Vec::new()
    }

    /// A second passed.
    pub fn providers_tick(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Providers act on their events; true when they sent anything.
    pub fn providers_react(&mut self, _v: &mut Vec<String>) -> bool {
        false
    }

    /// ACCEPT of provider resources.
    pub fn accept_provider(
        &mut self,
        _i: usize,
        _pick: u32,
        _kind: AcceptKind,
        _plan: u8,
        _refuse: Refuse,
    ) -> Vec<String> {
        Vec::new()
    }
}
