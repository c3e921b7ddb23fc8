//! The master's hooks for replayable runs on a virtual clock:
//! `MasterHandle::sync` (a barrier through the input channel that fires due
//! timers and counts the requests sent to the core) and `Settings::id_seed`
//! (the same ids in every run of a seed).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_mesos::agent::{AgentBackend, AgentUpdate, Launch};
use unisched_mesos::master::{AgentSpec, EventReceiver, Input, MasterHandle, Settings};
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, Event, call, event};

/// An agent that only records what it is asked to launch.
#[derive(Default)]
struct Recorder {
    launched: Mutex<Vec<Launch>>,
}

impl AgentBackend for Recorder {
    fn launch(&self, launch: Launch) {
        self.launched.lock().unwrap().push(launch);
    }
    fn kill_task(&self, _: &str, _: &str, _: Duration) {}
    fn shutdown_executor(&self, _: &str, _: &str) {}
    fn shutdown_framework(&self, _: &str) {}
    fn framework_message(&self, _: &str, _: &str, _: Vec<u8>) {}
    fn stop(&self) {}
}

struct World {
    runtime: tokio::runtime::Runtime,
    clock: Arc<ManualClock>,
    core: Scheduler,
    master: MasterHandle,
}

impl World {
    fn start(id_seed: Option<u64>) -> Self {
        let clock = ManualClock::new(1_000_000_000_000);
        let core = Scheduler::start(SchedulerOptions {
            clock: clock.clone(),
            ..Default::default()
        });
        let settings = Settings {
            allocation_interval: Duration::from_secs(3600),
            id_seed,
            ..Settings::default()
        };
        let master = MasterHandle::start(core.clone(), None, settings).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        Self {
            runtime,
            clock,
            core,
            master,
        }
    }

    fn sync(&self) -> u64 {
        self.runtime.block_on(self.master.sync()).unwrap()
    }

    /// Settles the core and syncs the master until the master sends the
    /// core nothing more; returns how many rounds that took.
    fn quiesce(&self) -> usize {
        let mut sent = self.sync();
        for round in 1.. {
            self.core.settle();
            let now = self.sync();
            if now == sent {
                return round;
            }
            sent = now;
        }
        unreachable!()
    }

    fn subscribe(&self) -> (String, EventReceiver) {
        self.subscribe_as("sync-test", 64)
    }

    /// Subscribes a framework named `name` whose stream holds `capacity`
    /// events.
    fn subscribe_as(&self, name: &str, capacity: usize) -> (String, EventReceiver) {
        self.master.subscribe(
            call::Subscribe {
                framework_info: v1::FrameworkInfo {
                    name: name.into(),
                    user: "test".into(),
                    ..Default::default()
                },
                ..Default::default()
            },
            capacity,
        )
    }

    /// Lets the core and the master settle, then reads a fresh
    /// subscription's events: its framework id and its first offer.
    fn first_offer(&self, rx: &mut EventReceiver) -> (v1::FrameworkId, v1::Offer) {
        self.quiesce();
        let events = drain(rx);
        let framework = events[0].subscribed.as_ref().unwrap().framework_id.clone();
        let offer = events
            .iter()
            .find_map(|e| e.offers.as_ref())
            .map(|o| o.offers[0].clone())
            .unwrap();
        (framework, offer)
    }

    fn add_agent(&self, backend: Arc<Recorder>) -> String {
        let spec = AgentSpec {
            hostname: "a1".into(),
            resources: Resources::parse("cpus:2;mem:1024").unwrap(),
            occupied: Resources::default(),
            attributes: Vec::new(),
            backend: Box::new(move |_: &str| backend as Arc<dyn AgentBackend>),
        };
        self.runtime.block_on(self.master.add_agent(spec)).unwrap()
    }
}

fn drain(rx: &mut EventReceiver) -> Vec<Event> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

fn kind(e: &Event) -> event::Type {
    e.r#type()
}

#[test]
fn sync_fires_due_timers_before_it_answers() {
    let w = World::start(None);
    let (_stream, mut rx) = w.subscribe();
    w.quiesce();
    let first = drain(&mut rx);
    assert_eq!(
        first.iter().map(kind).collect::<Vec<_>>(),
        [event::Type::Subscribed]
    );
    w.clock.advance(Duration::from_secs(15));
    // No sleep: the heartbeat timer is due, so the barrier fires it.
    w.sync();
    let next = drain(&mut rx);
    assert_eq!(
        next.iter().map(kind).collect::<Vec<_>>(),
        [event::Type::Heartbeat]
    );
}

#[test]
fn quiescence_is_reached_by_counting_requests() {
    let w = World::start(None);
    let before = w.sync();
    let (_stream, mut rx) = w.subscribe();
    let agent = w.add_agent(Arc::new(Recorder::default()));
    // The framework's application and the agent's node went to the core.
    assert!(w.sync() > before);
    w.quiesce();
    let events = drain(&mut rx);
    let offers: Vec<&v1::Offer> = events
        .iter()
        .filter_map(|e| e.offers.as_ref())
        .flat_map(|o| &o.offers)
        .collect();
    assert_eq!(offers.len(), 1, "{events:?}");
    assert_eq!(offers[0].agent_id.value, agent);
    // Nothing moves any more: one round finds the count unchanged.
    let settled = w.sync();
    assert_eq!(w.quiesce(), 1);
    assert_eq!(w.sync(), settled);
}

/// Subscribes, launches one task from the first offer and reports it
/// running without a uuid (the master stamps one); returns the master id,
/// the framework id and the uuid the framework was sent.
fn launch_one(id_seed: Option<u64>) -> (String, String, Vec<u8>) {
    let w = World::start(id_seed);
    let (stream, mut rx) = w.subscribe();
    let backend = Arc::new(Recorder::default());
    let agent = w.add_agent(backend.clone());
    let (framework, offer) = w.first_offer(&mut rx);
    let task = v1::TaskInfo {
        name: "t".into(),
        task_id: v1::TaskId { value: "t1".into() },
        agent_id: offer.agent_id.clone(),
        resources: Resources::parse("cpus:1;mem:128").unwrap().to_vec(),
        command: Some(v1::CommandInfo {
            value: Some("true".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let accept = Call {
        framework_id: Some(framework.clone()),
        r#type: Some(call::Type::Accept as i32),
        accept: Some(call::Accept {
            offer_ids: vec![offer.id.clone()],
            operations: vec![v1::offer::Operation {
                r#type: Some(v1::offer::operation::Type::Launch as i32),
                launch: Some(v1::offer::operation::Launch {
                    task_infos: vec![task],
                }),
                ..Default::default()
            }],
            filters: None,
        }),
        ..Default::default()
    };
    w.runtime
        .block_on(w.master.call(accept, Some(stream)))
        .unwrap();
    w.quiesce();
    assert_eq!(backend.launched.lock().unwrap().len(), 1);
    w.master.send(Input::Agent(AgentUpdate::Status {
        agent_id: agent,
        framework_id: framework.value.clone(),
        status: Box::new(v1::TaskStatus {
            task_id: v1::TaskId { value: "t1".into() },
            state: v1::TaskState::TaskRunning as i32,
            ..Default::default()
        }),
    }));
    w.quiesce();
    let uuid = drain(&mut rx)
        .iter()
        .find_map(|e| e.update.as_ref())
        .and_then(|u| u.status.uuid.clone())
        .unwrap();
    (w.master.info().id.clone(), framework.value, uuid)
}

#[test]
fn a_seed_gives_the_same_ids() {
    let a = launch_one(Some(42));
    let b = launch_one(Some(42));
    assert_eq!(a, b);
    assert!(a.1.starts_with(&a.0), "framework ids carry the master id");
    let other = launch_one(Some(43));
    assert_ne!(a.0, other.0);
    assert_ne!(a.2, other.2);
    let random = launch_one(None);
    assert_ne!(a.0, random.0);
    assert_ne!(a.2, random.2);
}

/// A release by the core of a lease that the open allocation run made an
/// offer of is applied after the run's OFFERS event: the framework sees the
/// offer, then its RESCIND, never a RESCIND of an offer it was not sent.
#[test]
fn a_release_during_an_open_run_rescinds_after_the_offers_event() {
    use unisched_mesos::master::CoreUpdate;
    use unisched_mesos::master::units::{app_id, to_core};
    use unisched_shim_api::Leases;
    use unisched_si as si;
    let w = World::start(None);
    let (stream, mut rx) = w.subscribe();
    let agent = w.add_agent(Arc::new(Recorder::default()));
    w.quiesce();
    let events = drain(&mut rx);
    let framework = events[0].subscribed.as_ref().unwrap().framework_id.clone();
    let first = events
        .iter()
        .find_map(|e| e.offers.as_ref())
        .map(|o| o.offers[0].clone())
        .unwrap();
    // Declined for an hour: the agent's resources are free again and the
    // core does not offer them to this framework.
    let (reply, _) = tokio::sync::oneshot::channel();
    w.master.send(Input::Call {
        call: Box::new(Call {
            framework_id: Some(framework.clone()),
            r#type: Some(call::Type::Decline as i32),
            decline: Some(call::Decline {
                offer_ids: vec![first.id.clone()],
                filters: Some(v1::Filters {
                    refuse_seconds: Some(3600.0),
                }),
            }),
            ..Default::default()
        }),
        stream_id: Some(stream),
        principal: None,
        reply,
    });
    w.quiesce();
    assert!(drain(&mut rx).is_empty());
    // A run in two parts: a lease of the agent, then its release.
    let app = app_id(&framework.value, "*");
    let grant = to_core(Resources::parse("cpus:2;mem:1024").unwrap().iter());
    let lease = si::Allocation {
        allocation_key: app.clone(),
        application_id: app.clone(),
        allocation_id: "lease-in-an-open-run".into(),
        node_id: agent.clone(),
        resource_per_alloc: Some(grant),
        ..Default::default()
    };
    let now = std::time::Instant::now();
    w.master.send(Input::Core(CoreUpdate::Allocation(
        Leases::from_wire(
            si::AllocationResponse {
                new: vec![lease],
                ..Default::default()
            },
            true,
        ),
        now,
    )));
    w.master.send(Input::Core(CoreUpdate::Allocation(
        Leases::from_wire(
            si::AllocationResponse {
                released: vec![si::AllocationRelease {
                    application_id: app,
                    allocation_id: "lease-in-an-open-run".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            false,
        ),
        now,
    )));
    w.sync();
    let events = drain(&mut rx);
    assert_eq!(
        events.iter().map(kind).collect::<Vec<_>>(),
        [event::Type::Offers, event::Type::Rescind],
        "{events:?}"
    );
    let offer = &events[0].offers.as_ref().unwrap().offers[0];
    assert_eq!(offer.agent_id.value, agent);
    assert_eq!(events[1].rescind.as_ref().unwrap().offer_id, offer.id);
    // Nothing of it is left in the books.
    let state = w
        .runtime
        .block_on(
            w.master
                .query(unisched_mesos::master::report::Query::LiveState),
        )
        .unwrap();
    let offers = state["frameworks"][0]["offers"].as_array().unwrap();
    assert!(offers.is_empty(), "{state}");
}

/// Calls sent as one batch are one step for the core: three frameworks'
/// REVIVEs go in one request, and one allocation run offers each of them
/// an agent (as W4 needs all its frameworks in one run).
#[test]
fn a_batch_of_revives_is_one_request_and_one_run() {
    revive_batch(3, 1);
}

/// A batch longer than `FLUSH_AHEAD` sends its changes to the core in
/// parts as it goes, and still makes one allocation run over all of its
/// frameworks: the run waits for the batch's end.
#[test]
fn a_long_batch_of_revives_goes_ahead_in_parts_and_is_one_run() {
    use unisched_mesos::master::{FLUSH_AHEAD, FLUSH_TAIL};
    // 515 calls: parts after the 256th, the 451st (`FLUSH_TAIL` before the
    // end) and the 512th, and the rest at the end.
    assert_eq!((FLUSH_AHEAD, FLUSH_TAIL), (256, 64));
    revive_batch(2 * FLUSH_AHEAD + 3, 4);
}

/// `n` suppressed frameworks and `n` agents; the frameworks' REVIVEs in one
/// batch: `requests` requests to the core, one run, one agent offered to
/// each framework.
fn revive_batch(n: usize, requests: u64) {
    use unisched_mesos::master::report::Query;
    let w = World::start(None);
    let mut frameworks = Vec::new();
    for _ in 0..n {
        let (stream, rx) = w.master.subscribe(
            call::Subscribe {
                framework_info: v1::FrameworkInfo {
                    name: "batch-test".into(),
                    user: "test".into(),
                    ..Default::default()
                },
                suppressed_roles: vec!["*".into()],
                ..Default::default()
            },
            64,
        );
        frameworks.push((stream, rx));
    }
    for _ in 0..n {
        w.add_agent(Arc::new(Recorder::default()));
    }
    w.quiesce();
    let mut ids = Vec::new();
    for (_, rx) in &mut frameworks {
        let events = drain(rx);
        assert_eq!(
            events.iter().map(kind).collect::<Vec<_>>(),
            [event::Type::Subscribed],
            "suppressed: no offers yet"
        );
        ids.push(events[0].subscribed.as_ref().unwrap().framework_id.clone());
    }
    let runs = |w: &World| w.runtime.block_on(w.master.query(Query::Metrics)).unwrap()["allocator/mesos/allocation_runs"];
    let runs_before = runs(&w);
    let before = w.sync();
    let mut replies = Vec::new();
    let batch = frameworks
        .iter()
        .zip(&ids)
        .map(|((stream, _), id)| {
            let (reply, answer) = tokio::sync::oneshot::channel();
            replies.push(answer);
            Input::Call {
                call: Box::new(Call {
                    framework_id: Some(id.clone()),
                    r#type: Some(call::Type::Revive as i32),
                    revive: Some(call::Revive::default()),
                    ..Default::default()
                }),
                stream_id: Some(stream.clone()),
                principal: None,
                reply,
            }
        })
        .collect();
    assert!(w.master.send_batch(batch));
    assert_eq!(
        w.sync(),
        before + requests,
        "the batch's requests to the core"
    );
    for answer in replies {
        assert!(w.runtime.block_on(answer).unwrap().is_ok());
    }
    w.quiesce();
    assert_eq!(runs(&w), runs_before + 1.0, "one allocation run");
    for (_, rx) in &mut frameworks {
        let offers: usize = drain(rx)
            .iter()
            .filter_map(|e| e.offers.as_ref())
            .map(|o| o.offers.len())
            .sum();
        assert_eq!(offers, 1, "each framework is offered one agent");
    }
}

/// An offer keeps its resources unallocated beside its role: on the wire
/// every resource is allocated to the offer's role, `/state` shows the
/// offer's role and amounts, and both name the offer by the same id. An id of this master's form that is not
/// written as the master writes ids (a leading zero) names no offer: a
/// DECLINE of it leaves the offer standing.
#[test]
fn an_offer_is_allocated_to_its_role_and_known_by_its_id_alone() {
    use unisched_mesos::master::report::Query;
    let w = World::start(None);
    let (stream, mut rx) = w.subscribe();
    w.add_agent(Arc::new(Recorder::default()));
    let (framework, offer) = w.first_offer(&mut rx);
    assert!(!offer.resources.is_empty());
    for r in &offer.resources {
        assert_eq!(
            r.allocation_info.as_ref().and_then(|a| a.role.as_deref()),
            Some("*"),
            "{r:?}"
        );
    }
    let live = |w: &World| {
        w.runtime
            .block_on(w.master.query(Query::LiveState))
            .unwrap()
    };
    let state = live(&w);
    let shown = &state["frameworks"][0]["offers"];
    assert_eq!(shown.as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(shown[0]["id"], offer.id.value.as_str(), "{state}");
    assert_eq!(shown[0]["allocation_info"]["role"], "*", "{state}");
    assert_eq!(shown[0]["resources"]["cpus"], 2.0, "{state}");
    assert_eq!(shown[0]["resources"]["mem"], 1024.0, "{state}");
    // `<master id>-O<n>` with a leading zero is not this offer's id.
    let (prefix, number) = offer.id.value.rsplit_once("-O").unwrap();
    let padded = v1::OfferId {
        value: format!("{prefix}-O0{number}"),
    };
    let decline = |id: v1::OfferId| Call {
        framework_id: Some(framework.clone()),
        r#type: Some(call::Type::Decline as i32),
        decline: Some(call::Decline {
            offer_ids: vec![id],
            filters: None,
        }),
        ..Default::default()
    };
    w.runtime
        .block_on(w.master.call(decline(padded), Some(stream.clone())))
        .unwrap();
    w.sync();
    let state = live(&w);
    assert_eq!(
        state["frameworks"][0]["offers"].as_array().map(Vec::len),
        Some(1),
        "{state}"
    );
    w.runtime
        .block_on(w.master.call(decline(offer.id.clone()), Some(stream)))
        .unwrap();
    w.sync();
    let state = live(&w);
    assert_eq!(
        state["frameworks"][0]["offers"].as_array().map(Vec::len),
        Some(0),
        "{state}"
    );
}

#[test]
fn a_stream_with_no_room_for_its_runs_offers_is_closed_and_the_offers_go_back() {
    let w = World::start(None);
    // A framework whose stream holds one event and is never read: its
    // SUBSCRIBED takes the one place.
    let (_stuck_stream, mut stuck) = w.subscribe_as("stuck", 1);
    w.quiesce();
    // The agent's run offers it to the stuck framework; the run's OFFERS
    // find no room, so the stream is closed and the framework (no
    // failover timeout) leaves, its offer with it.
    w.add_agent(Arc::new(Recorder::default()));
    w.quiesce();
    let events = drain(&mut stuck);
    assert_eq!(
        events.iter().map(kind).collect::<Vec<_>>(),
        [event::Type::Subscribed]
    );
    assert!(
        matches!(
            stuck.try_recv(),
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
        ),
        "the stuck framework's stream is closed"
    );
    // The next framework is offered the whole agent.
    let (_stream, mut rx) = w.subscribe();
    let (_, offer) = w.first_offer(&mut rx);
    let cpus: f64 = offer
        .resources
        .iter()
        .filter(|r| r.name == "cpus")
        .filter_map(|r| r.scalar.as_ref().map(|s| s.value))
        .sum();
    assert_eq!(cpus, 2.0, "{offer:?}");
}
