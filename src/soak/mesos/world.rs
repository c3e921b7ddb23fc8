//! The system under test: a core on a virtual clock, the Mesos master on it
//! (driven in process, no HTTP), and the way both are made quiescent.
//!
//! # Quiescence
//! The core is quiescent after `Scheduler::settle()`: every request applied,
//! every pass run, every callback delivered, and the master's callback only
//! forwards what it gets into the master's input channel. The master is
//! quiescent after [`MasterHandle::sync`]: a barrier through that same
//! channel, answered once every input before it is applied, the timers due
//! at the clock's time have fired and the requests to the core are sent,
//! with the number of requests sent so far. [`World::quiesce`] alternates
//! the two until a settle makes the master send nothing more. Agents,
//! and frameworks are the simulation's own and act only between
//! two quiescent points, so nothing moves while the simulation looks.
//!
//! # Time
//! The clock moves only in whole seconds ([`World::tick`]). Every timer of
//! the master is then due at a whole second and fires when the clock lands
//! on it; timers due at the same second fire in their fixed order, the
//! allocation tick last. So the master never sends the core an allocation
//! run followed by other requests in one batch, whose outcome would depend
//! on how the core's thread happens to split them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use unisched_core::{ManualClock, PartitionSnapshot, Scheduler, SchedulerOptions};
use unisched_mesos::master::report::Query;
use unisched_mesos::master::{
    AgentSpec, CallError, CallOutcome, Input, MasterHandle, Settings, config,
};
use unisched_mesos::v1::scheduler::Call;

/// The queue configuration of the Mesos partition: a weighted role, a role
/// with a guarantee, a role with a quota limit; other roles get queues of
/// their own under root.
pub const CONFIG: &str = "partitions:
  - name: mesos
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: web
          - name: batch
            resources:
              guaranteed: {memory: 512Mi, vcore: 1}
          - name: capped
            resources:
              max: {memory: 1536Mi, vcore: 2}
";

/// Clock time at the start: a whole number of seconds.
pub const START_NANOS: u64 = 1_000_000_000_000;

/// Most rounds of settle-and-sync before a step counts as a livelock.
const MAX_ROUNDS: usize = 10_000;

/// The core and the master of one run.
pub struct World {
    /// The virtual clock both read.
    pub clock: Arc<ManualClock>,
    /// The core.
    pub core: Scheduler,
    /// The master.
    pub master: MasterHandle,
    /// A subscriber of the operator API's events from the start.
    pub operator: super::operator_view::OperatorView,
    runtime: tokio::runtime::Runtime,
}

impl World {
    /// A fresh core and master; ids seeded by `seed`, an offer timeout when
    /// `offer_timeout` is set.
    pub fn start(seed: u64, offer_timeout: Option<Duration>) -> Result<World, String> {
        let clock = ManualClock::new(START_NANOS);
        let core = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            // The snapshot then lists only live applications: the checks
            // read an application there as one the core still has.
            completed_apps_kept: 0,
            // One step at a time, each waited for: see `spin_before_park`.
            spin_before_park: unisched_core::scheduler::STEPPED_SPIN,
            ..Default::default()
        });
        let settings = Settings {
            offer_timeout,
            weights: [("web".to_string(), 2.0)].into(),
            stream_capacity: super::STREAM_CAPACITY,
            id_seed: Some(seed),
            ..Settings::default()
        };
        let master =
            MasterHandle::start(core.clone(), Some(CONFIG), settings).map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string())?;
        let operator = super::operator_view::OperatorView::subscribe(&master);
        Ok(World {
            clock,
            core,
            master,
            operator,
            runtime,
        })
    }

    /// Clock time in ns.
    pub fn now(&self) -> u64 {
        unisched_core::clock::Clock::now_nanos(&*self.clock)
    }

    /// Seconds since the start.
    pub fn secs(&self) -> u64 {
        (self.now() - START_NANOS) / 1_000_000_000
    }

    /// Makes the core and the master quiescent (see the module docs).
    pub fn quiesce(&self) -> Result<(), String> {
        self.master.quiesce(&self.core, MAX_ROUNDS)
    }

    /// One second passes; the master's due timers fire and the core and
    /// master come to rest before anything else acts.
    pub fn tick(&self) -> Result<(), String> {
        self.clock.advance(Duration::from_secs(1));
        self.quiesce()
    }

    /// A scheduler call (not SUBSCRIBE), answered.
    pub fn call(&self, call: Call, stream_id: Option<String>) -> Result<CallOutcome, CallError> {
        self.runtime.block_on(self.master.call(call, stream_id))
    }

    /// An operator API call, answered on the master thread (`None` when the
    /// master has stopped).
    pub fn operator(
        &self,
        call: unisched_mesos::v1::master::Call,
    ) -> Option<Result<unisched_mesos::v1::master::Response, CallError>> {
        self.runtime.block_on(
            self.master
                .query(|reply| Query::Operator(Box::new(call), reply)),
        )
    }

    /// A resource provider call (not SUBSCRIBE) on an agent's endpoint, answered.
    pub fn provider_call(
        &self,
        endpoint: u32,
        call: unisched_mesos::v1::resource_provider::Call,
        stream_id: Option<String>,
    ) -> Result<CallOutcome, CallError> {
        let outcome =
            self.runtime
                .block_on(self.master.provider_call(Some(endpoint), call, stream_id));
        // A provider's call may start an allocation run (new resources, an
        // operation ended): it ends before the simulation acts again, so
        // that a run's offers never race the simulation's next call. A
        // livelock shows at the step's next quiescence.
        let _ = self.quiesce();
        outcome
    }

    /// Adds an agent; its id.
    pub fn add_agent(&self, spec: AgentSpec) -> Option<String> {
        self.runtime.block_on(self.master.add_agent(spec))
    }

    /// Removes an agent.
    pub fn remove_agent(&self, id: &str) {
        self.master.send(Input::RemoveAgent(id.to_string()));
    }

    /// The master's `/state`.
    pub fn state(&self) -> Option<Value> {
        self.runtime.block_on(self.master.query(Query::State))
    }

    /// The master's `/state` without completed frameworks and tasks (what
    /// the checks of every step read; the same code renders the rest).
    pub fn live_state(&self) -> Option<Value> {
        self.runtime.block_on(self.master.query(Query::LiveState))
    }

    /// The core's snapshot of the Mesos partition.
    pub fn snapshot(&self) -> Option<PartitionSnapshot> {
        self.core.snapshot(&format!(
            "[{}]{}",
            unisched_mesos::master::RM_ID,
            config::PARTITION
        ))
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.master.shutdown();
        self.core.shutdown();
    }
}
