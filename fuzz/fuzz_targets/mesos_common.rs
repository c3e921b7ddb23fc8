//! What the Mesos fuzz targets that drive a live master share: a core on a
//! virtual clock with the Mesos master on it, in process (as the HTTP routes
//! drive it once a body is decoded), an agent whose backend ignores what it is
//! asked, and the way to bring both to rest.
//!
//! The world is rebuilt every [`RESTART_EVERY`] inputs so what the inputs
//! leave behind (frameworks within their failover timeout, tasks that never
//! start, providers) stays bounded.

#![allow(dead_code)] // Each target uses part of it.

use std::sync::Arc;
use std::time::Duration;

use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_mesos::agent::{AgentBackend, Launch};
use unisched_mesos::codec::ContentType;
use unisched_mesos::master::{AgentSpec, MasterHandle, Settings};
use unisched_mesos::resources::Resources;

/// Inputs before the world is rebuilt.
pub const RESTART_EVERY: u64 = 2_000;

/// Rounds of settle-and-sync before the master counts as livelocked.
const MAX_ROUNDS: usize = 1_000;

/// An agent that accepts every command and never reports anything.
pub struct Quiet;

impl AgentBackend for Quiet {
    fn launch(&self, _: Launch) {}
    fn kill_task(&self, _: &str, _: &str, _: Duration) {}
    fn shutdown_executor(&self, _: &str, _: &str) {}
    fn shutdown_framework(&self, _: &str) {}
    fn framework_message(&self, _: &str, _: &str, _: Vec<u8>) {}
    fn stop(&self) {}
}

/// A core and a master on a virtual clock, one agent.
pub struct Live {
    pub runtime: tokio::runtime::Runtime,
    pub clock: Arc<ManualClock>,
    pub core: Scheduler,
    pub master: MasterHandle,
    /// The agent's id.
    pub agent: String,
    /// Inputs run on this world.
    pub inputs: u64,
}

impl Live {
    pub fn start() -> Live {
        let clock = ManualClock::new(1_000_000_000_000);
        let core = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let settings = Settings {
            id_seed: Some(1),
            ..Settings::default()
        };
        let master = MasterHandle::start(core.clone(), None, settings).expect("master starts");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let spec = AgentSpec {
            hostname: "fuzz-agent".to_string(),
            resources: Resources::parse("cpus:4;mem:4096;disk:8192;ports:[31000-32000]")
                .expect("agent resources"),
            occupied: Resources::default(),
            attributes: Vec::new(),
            backend: Box::new(|_: &str| Arc::new(Quiet) as Arc<dyn AgentBackend>),
        };
        let agent = runtime
            .block_on(master.add_agent(spec))
            .expect("the agent joins");
        let live = Live {
            runtime,
            clock,
            core,
            master,
            agent,
            inputs: 0,
        };
        live.quiesce();
        live
    }

    /// Settles the core and syncs the master until the master sends the core
    /// nothing more. Panics (a finding) when the master stopped answering or
    /// never comes to rest.
    pub fn quiesce(&self) {
        let sync = || {
            self.runtime
                .block_on(self.master.sync())
                .expect("the master thread stopped")
        };
        let mut sent = sync();
        for _ in 0..MAX_ROUNDS {
            self.core.settle();
            let now = sync();
            if now == sent {
                return;
            }
            sent = now;
        }
        panic!("the core and the master did not come to rest in {MAX_ROUNDS} rounds");
    }

    /// Time passes, by whole seconds, with the master's timers firing.
    pub fn advance(&self, secs: u64) {
        for _ in 0..secs {
            self.clock.advance(Duration::from_secs(1));
            self.quiesce();
        }
    }

    /// The master still answers `/state` with a JSON object.
    pub fn check_state(&self) {
        let state = self
            .runtime
            .block_on(
                self.master
                    .query(unisched_mesos::master::report::Query::State),
            )
            .expect("the master answers /state");
        assert!(state.is_object(), "/state is not an object: {state}");
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.master.shutdown();
        self.core.shutdown();
    }
}

/// The encoding byte 0 of an input picks (bit 0).
pub fn content_type(flags: u8) -> ContentType {
    if flags & 1 == 0 {
        ContentType::Json
    } else {
        ContentType::Protobuf
    }
}

/// A decoded message survives the encodings: protobuf gives it back exactly;
/// JSON gives back a message whose JSON is the same text. (An enum value the
/// proto does not define has no JSON name and is left out, as upstream's
/// proto2 parser keeps it only among the unknown fields, so JSON is compared
/// after one trip.)
pub fn round_trips<T>(message: &T)
where
    T: prost::Message + prost_reflect::ReflectMessage + Default + PartialEq + std::fmt::Debug,
{
    use unisched_mesos::codec::{decode, encode};
    let bytes = encode(message, ContentType::Protobuf);
    match decode::<T>(&bytes, ContentType::Protobuf) {
        Ok(back) => assert_eq!(
            &back, message,
            "the protobuf round trip changed the message"
        ),
        Err(e) => panic!("the protobuf encoding of a decoded message does not decode: {e}"),
    }
    let json = encode(message, ContentType::Json);
    let back = match decode::<T>(&json, ContentType::Json) {
        Ok(back) => back,
        Err(e) => panic!(
            "the JSON encoding of a decoded message does not decode: {e}\n{}",
            String::from_utf8_lossy(&json)
        ),
    };
    let again = encode(&back, ContentType::Json);
    assert_eq!(
        String::from_utf8_lossy(&again),
        String::from_utf8_lossy(&json),
        "JSON changes on a second round trip"
    );
}

/// A fuzz target's state on a live world, kept across inputs (see
/// [`fuzz_one`]).
pub trait OnLive {
    /// A new one on a fresh world.
    fn start() -> Self;
    /// Its world.
    fn live(&mut self) -> &mut Live;
    /// Reads what its own subscriber got since the last read.
    fn read(&mut self);
    /// Applies one input (its flags byte and body) as the route would; the
    /// seconds the clock then moves, or `None` when the input went no
    /// further (it did not decode, or the route refuses it before the
    /// master).
    fn apply(&mut self, flags: u8, body: &[u8]) -> Option<u64>;
}

/// Runs one input on the thread's target (made anew every
/// [`RESTART_EVERY`] inputs): the input, then rest; the clock moves as the
/// input says, with rest after each second; then `/state` must answer.
pub fn fuzz_one<T: OnLive>(slot: &std::cell::RefCell<Option<T>>, data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let mut slot = slot.borrow_mut();
    if slot
        .as_mut()
        .is_none_or(|t| t.live().inputs >= RESTART_EVERY)
    {
        *slot = None;
        *slot = Some(T::start());
    }
    let t = slot.as_mut().expect("started");
    t.live().inputs += 1;
    let Some(secs) = t.apply(flags, body) else {
        return;
    };
    t.live().quiesce();
    t.read();
    if secs > 0 {
        t.live().advance(secs);
        t.read();
    }
    t.live().check_state();
}

/// What a target on a live world needs beyond its own code, for a target
/// whose state is `struct Target { live: Live, ours: Option<_> }` with a
/// method `read` and a function `apply(&mut Target, u8, &[u8]) ->
/// Option<u64>` (as [`OnLive`] describes them): its [`OnLive`] impl, its
/// thread's state and its `fuzz_target!`, which runs [`fuzz_one`].
#[allow(unused_macros)] // Targets without a live world include this file too.
macro_rules! live_target {
    () => {
        impl mesos_common::OnLive for Target {
            fn start() -> Self {
                Target {
                    live: mesos_common::Live::start(),
                    ours: None,
                }
            }

            fn live(&mut self) -> &mut mesos_common::Live {
                &mut self.live
            }

            fn read(&mut self) {
                Target::read(self);
            }

            fn apply(&mut self, flags: u8, body: &[u8]) -> Option<u64> {
                apply(self, flags, body)
            }
        }

        thread_local! {
            static TARGET: std::cell::RefCell<Option<Target>> =
                const { std::cell::RefCell::new(None) };
        }

        libfuzzer_sys::fuzz_target!(|data: &[u8]| {
            TARGET.with(|slot| mesos_common::fuzz_one(slot, data))
        });
    };
}

/// The framework the targets keep subscribed (MULTI_ROLE, role `fuzz`, a
/// failover timeout of 30 s).
pub fn fuzz_framework() -> unisched_mesos::v1::FrameworkInfo {
    use unisched_mesos::v1;
    v1::FrameworkInfo {
        user: "fuzz".to_string(),
        name: "fuzz".to_string(),
        roles: vec!["fuzz".to_string()],
        capabilities: vec![v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::MultiRole as i32),
        }],
        failover_timeout: Some(30.0),
        ..Default::default()
    }
}

/// Subscribes [`fuzz_framework`] and brings the world to rest: its id, its
/// stream id and its events (SUBSCRIBED taken).
pub fn subscribe_framework(live: &Live) -> (String, String, unisched_mesos::master::EventReceiver) {
    let (stream, mut events) = live.master.subscribe(
        unisched_mesos::v1::scheduler::call::Subscribe {
            framework_info: fuzz_framework(),
            ..Default::default()
        },
        1024,
    );
    live.quiesce();
    let first = events.try_recv().expect("SUBSCRIBED for a valid SUBSCRIBE");
    let id = first
        .subscribed
        .as_ref()
        .map(|s| s.framework_id.value.clone())
        .expect("the first event is SUBSCRIBED");
    (id, stream, events)
}
