//! An RM whose callback says `offer_runs_inline`: the parts of an offer
//! run reach its `update_leases` on the scheduling thread, unless an
//! allocation result sent before the run is still on its way, and every
//! lease arrives once, in order.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use unisched_core::scheduler::offers::{OfferChange, OfferRequest};
use unisched_core::{Scheduler, SchedulerOptions};
use unisched_shim_api::{CallbackResult, Leases, ResourceManagerCallback, SchedulerApi};
use unisched_si as si;

const RM: &str = "mesos";

/// One `update_leases` call as the RM saw it.
#[derive(Debug, Clone)]
struct Call {
    partial: bool,
    ids: Vec<String>,
    thread: String,
}

/// Records each `update_leases` call and the thread it came on; with a
/// gate set, the next whole (not partial) allocation result waits in the
/// callback until the gate opens.
struct Rm {
    inline: bool,
    calls: Mutex<Vec<Call>>,
    gate: Mutex<Option<(Sender<()>, Receiver<()>)>>,
}

impl Rm {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl ResourceManagerCallback for Rm {
    fn offer_runs_inline(&self) -> bool {
        self.inline
    }

    fn update_leases(&self, leases: Leases) -> CallbackResult<()> {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let ids = leases
            .new
            .iter()
            .map(|l| l.allocation_id.to_string())
            .collect();
        self.calls.lock().unwrap().push(Call {
            partial: leases.partial,
            ids,
            thread,
        });
        if !leases.partial
            && let Some((entered, open)) = self.gate.lock().unwrap().take()
        {
            entered.send(()).unwrap();
            open.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        Ok(())
    }

    fn update_allocation(&self, _response: si::AllocationResponse) -> CallbackResult<()> {
        unreachable!("the core gives leases")
    }

    fn update_application(&self, _response: si::ApplicationResponse) -> CallbackResult<()> {
        Ok(())
    }

    fn update_node(&self, _response: si::NodeResponse) -> CallbackResult<()> {
        Ok(())
    }

    fn predicates(&self, _args: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn resync_scheduler_cache(&self, _args: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }

    fn send_event(&self, _events: Vec<si::EventRecord>) -> CallbackResult<()> {
        Ok(())
    }

    fn update_container_scheduling_state(
        &self,
        _request: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }

    fn update_configuration(
        &self,
        _request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse::default())
    }
}

fn start(inline: bool) -> (Scheduler, Arc<Rm>) {
    let sched = Scheduler::start(SchedulerOptions::default());
    let rm = Arc::new(Rm {
        inline,
        calls: Mutex::new(Vec::new()),
        gate: Mutex::new(None),
    });
    sched
        .register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                policy_group: "queues".to_string(),
                ..Default::default()
            },
            rm.clone(),
        )
        .expect("register");
    offers(
        &sched,
        vec![OfferChange::Policy {
            min_allocatable: vec![],
        }],
    );
    sched
        .update_application(si::ApplicationRequest {
            new: vec![si::AddApplicationRequest {
                application_id: "fw1".to_string(),
                queue_name: "root.default".to_string(),
                partition_name: "default".to_string(),
                ugi: Some(si::UserGroupInformation {
                    user: "mesos".to_string(),
                    groups: vec![],
                }),
                ..Default::default()
            }],
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .unwrap();
    offers(
        &sched,
        vec![OfferChange::Demand {
            application_id: "fw1".to_string(),
            active: true,
        }],
    );
    (sched, rm)
}

fn offers(sched: &Scheduler, changes: Vec<OfferChange>) {
    sched
        .update_offers(OfferRequest {
            rm_id: RM.to_string(),
            partition_name: "default".to_string(),
            changes,
        })
        .unwrap();
}

/// Agents `from..to`, then an allocation run, which leases each of them
/// whole to the framework.
fn agents(sched: &Scheduler, from: usize, to: usize) {
    let nodes = (from..to)
        .map(|i| si::NodeInfo {
            node_id: format!("agent-{i}"),
            action: si::node_info::ActionFromRm::Create as i32,
            schedulable_resource: Some(si::Resource {
                resources: [("vcore".to_string(), si::Quantity { value: 1000 })].into(),
            }),
            ..Default::default()
        })
        .collect();
    sched
        .update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        })
        .unwrap();
    offers(sched, vec![OfferChange::Allocate]);
}

const SCHEDULING: &str = "unisched-scheduler";
const DISPATCHER: &str = "unisched-callback-mesos";

/// The calls' lease ids, in the order they came, each once.
fn lease_ids(calls: &[Call]) -> Vec<String> {
    let ids: Vec<String> = calls.iter().flat_map(|c| c.ids.clone()).collect();
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a lease came twice");
    ids
}

#[test]
fn every_part_of_a_run_comes_on_the_scheduling_thread_when_the_rm_takes_runs_inline() {
    for inline in [true, false] {
        let (sched, rm) = start(inline);
        agents(&sched, 0, 300);
        sched.settle();
        let calls = rm.calls();
        assert!(
            calls.iter().filter(|c| c.partial).count() >= 2,
            "300 leases go in parts: {calls:?}"
        );
        assert!(!calls.last().unwrap().partial, "the last part ends the run");
        let expected = if inline { SCHEDULING } else { DISPATCHER };
        for c in &calls {
            assert_eq!(c.thread, expected, "inline {inline}: {calls:?}");
        }
        assert_eq!(lease_ids(&calls).len(), 300);
        sched.shutdown();
    }
}

/// A run that starts while an allocation result is still on its way to
/// the RM goes through the dispatcher after it, in order; once all is
/// delivered, the next run goes inline again.
#[test]
fn a_run_waits_its_turn_behind_an_allocation_result_still_on_its_way() {
    let (sched, rm) = start(true);
    let (entered_tx, entered) = channel();
    let (open, open_rx) = channel();
    *rm.gate.lock().unwrap() = Some((entered_tx, open_rx));
    // A run of ten leases goes whole, through the dispatcher, and the RM
    // holds it.
    agents(&sched, 0, 10);
    entered.recv_timeout(Duration::from_secs(30)).unwrap();
    // A run in parts meanwhile.
    agents(&sched, 10, 310);
    sched.snapshot("default").expect("the pass is over");
    let calls = rm.calls();
    assert_eq!(
        calls.len(),
        1,
        "nothing overtook the held result: {calls:?}"
    );
    open.send(()).unwrap();
    sched.settle();
    let calls = rm.calls();
    assert!(calls.len() >= 3, "{calls:?}");
    assert_eq!(calls[0].ids.len(), 10);
    for c in &calls {
        assert_eq!(c.thread, DISPATCHER, "{calls:?}");
    }
    let numbers: Vec<usize> = lease_ids(&calls)
        .iter()
        .map(|id| id.rsplit('-').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (0..310).collect::<Vec<_>>(),
        "leases in the order made"
    );
    // Everything delivered: the next run goes inline.
    agents(&sched, 310, 410);
    sched.settle();
    let later = &rm.calls()[calls.len()..];
    assert!(later.len() >= 2, "{later:?}");
    for c in later {
        assert_eq!(c.thread, SCHEDULING, "{later:?}");
    }
    assert_eq!(lease_ids(&rm.calls()).len(), 410);
    sched.shutdown();
}
