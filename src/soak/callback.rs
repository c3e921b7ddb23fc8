//! The simulated RM's side of the wire: a callback that queues what the core
//! sends (for the driver to apply after `settle`) and then, some of the time,
//! fails or panics; a configuration source the driver points at valid, invalid
//! or unavailable texts; and the deterministic predicates rule.

use std::sync::{Mutex, MutexGuard, Once, PoisonError};

use unisched_core::ConfigSource;
use unisched_shim_api::{CallbackError, CallbackResult, ResourceManagerCallback};
use unisched_si as si;

use crate::workload::rng::Rng;

/// Marks the panics the soak injects, so the panic hook can keep them quiet.
pub const INJECTED_PANIC: &str = "soak: injected callback panic";

/// One result delivered by the core, in arrival order.
#[derive(Debug, Clone)]
pub enum Inbound {
    /// `update_allocation`.
    Allocation(si::AllocationResponse),
    /// `update_application`.
    Application(si::ApplicationResponse),
    /// `update_node`.
    Node(si::NodeResponse),
    /// An ask the core dropped on its own (placeholder timeout), from
    /// `send_event`: (application, allocation key).
    AskTimedOut(String, String),
}

/// The RM callback of the soak. Records first, then injects its fault, so a
/// fault tests the core's resilience without hiding results from the model.
#[derive(Debug)]
pub struct SoakCallback {
    inbox: Mutex<Vec<Inbound>>,
    faults: Mutex<(Rng, u64)>,
    fault_rate: f64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SoakCallback {
    /// A callback failing about `fault_rate` of its calls (half errors, half panics).
    pub fn new(seed: u64, fault_rate: f64) -> Self {
        Self {
            inbox: Mutex::new(Vec::new()),
            faults: Mutex::new((Rng::new(seed ^ 0xfa17), 0)),
            fault_rate,
        }
    }

    /// Takes what arrived since the last call.
    pub fn take(&self) -> Vec<Inbound> {
        std::mem::take(&mut *lock(&self.inbox))
    }

    /// Number of faults injected so far.
    pub fn faults(&self) -> u64 {
        lock(&self.faults).1
    }

    fn record(&self, item: Inbound) -> CallbackResult<()> {
        lock(&self.inbox).push(item);
        self.maybe_fail()
    }

    fn maybe_fail(&self) -> CallbackResult<()> {
        let roll = {
            let mut f = lock(&self.faults);
            let hit = f.0.chance(self.fault_rate);
            let panic = f.0.chance(0.5);
            if hit {
                f.1 += 1;
            }
            hit.then_some(panic)
        };
        match roll {
            None => Ok(()),
            Some(false) => Err(CallbackError::new("soak: injected callback error")),
            Some(true) => panic!("{INJECTED_PANIC}"),
        }
    }
}

/// Whether the RM lets `key` on `node`; deterministic so the liveness check can
/// ask the same question. About one pair in eight is refused, half of those by
/// a panic.
pub fn predicate_allows(key: &str, node: &str) -> bool {
    predicate_roll(key, node) >= 2
}

fn predicate_roll(key: &str, node: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([0]).chain(node.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h % 16
}

impl ResourceManagerCallback for SoakCallback {
    fn update_allocation(&self, response: si::AllocationResponse) -> CallbackResult<()> {
        self.record(Inbound::Allocation(response))
    }

    fn update_application(&self, response: si::ApplicationResponse) -> CallbackResult<()> {
        self.record(Inbound::Application(response))
    }

    fn update_node(&self, response: si::NodeResponse) -> CallbackResult<()> {
        self.record(Inbound::Node(response))
    }

    fn predicates(&self, args: si::PredicatesArgs) -> CallbackResult<()> {
        match predicate_roll(&args.allocation_key, &args.node_id) {
            0 => Err(CallbackError::new("soak: predicate refused")),
            1 => panic!("{INJECTED_PANIC}"),
            _ => Ok(()),
        }
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        self.maybe_fail()
    }

    fn send_event(&self, events: Vec<si::EventRecord>) -> CallbackResult<()> {
        use si::event_record::{ChangeDetail, ChangeType, Type};
        {
            let mut inbox = lock(&self.inbox);
            for e in events {
                if e.r#type == Type::Request as i32
                    && e.event_change_type == ChangeType::Remove as i32
                    && e.event_change_detail == ChangeDetail::RequestTimeout as i32
                {
                    inbox.push(Inbound::AskTimedOut(e.reference_id, e.object_id));
                }
            }
        }
        self.maybe_fail()
    }

    fn update_container_scheduling_state(
        &self,
        _request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        self.maybe_fail()
    }

    fn update_configuration(
        &self,
        _request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Err(CallbackError::new(
            "soak: the RM does not persist configurations",
        ))
    }
}

/// A configuration source whose answer the driver sets before each reload.
#[derive(Debug, Default)]
pub struct SoakSource {
    next: Mutex<Option<Result<String, String>>>,
}

impl SoakSource {
    /// Sets what the next `load` returns.
    pub fn set(&self, answer: Result<String, String>) {
        *lock(&self.next) = Some(answer);
    }
}

impl ConfigSource for SoakSource {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        lock(&self.next)
            .clone()
            .unwrap_or_else(|| Err("soak: no configuration set".to_string()))
    }
}

/// Keeps injected panics off stderr; every other panic goes to the previous hook.
pub fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.contains(INJECTED_PANIC) {
                previous(info);
            }
        }));
    });
}
