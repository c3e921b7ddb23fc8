//! Drives one scenario against a fresh in-process scheduler: turns each step
//! into SI requests, settles, then checks the step's expectations.
//!
//! The driver owns the scheduler, its virtual clock and the recording callback
//! for the whole run; nothing else talks to that scheduler. Time only moves
//! through `advance` steps, so a run is deterministic and never sleeps.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use unisched_core::{Clock, ConfigSource, ManualClock, Scheduler, SchedulerOptions};
use unisched_shim_api::recording::RecordingCallback;
use unisched_shim_api::{PREDICATES_EXTRA_CONFIG, SchedulerApi, SchedulerResult};
use unisched_si as si;

use super::expect::{self, Checks};
use super::format::{
    App, Ask, AskRelease, ExistingAllocation, Node, NodeAction, Release, Scenario, Step,
    StepAction, preemption_policy,
};
use super::invariants;
use super::quantity::Resources;
use super::report::{Outcome, StepRef};

/// Virtual start time: 2024-01-01T00:00:00Z, so timestamps look plausible.
const START_NANOS: u64 = 1_704_067_200_000_000_000;

/// The configuration text `update_configuration` reads; `reload` steps replace it.
#[derive(Debug, Default)]
struct ScenarioConfig(Mutex<String>);

impl ConfigSource for ScenarioConfig {
    fn load(&self, _cluster_id: &str) -> Result<String, String> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }
}

/// A scenario in progress.
struct Run<'a> {
    scenario: &'a Scenario,
    scheduler: Scheduler,
    clock: Arc<ManualClock>,
    callback: Arc<RecordingCallback>,
    config: Arc<ScenarioConfig>,
    outcome: Outcome,
    /// Partition the current step's requests and expectations refer to.
    partition: String,
}

/// Runs `scenario` to the end. `progress` is set to the index of the step being
/// run (0 = setup), so a watchdog can say where a hung run stopped.
pub fn run(scenario: &Scenario, progress: &AtomicUsize) -> Outcome {
    let clock = ManualClock::new(START_NANOS);
    let config = Arc::new(ScenarioConfig(Mutex::new(scenario.config.clone())));
    let mut options = SchedulerOptions {
        clock: clock.clone() as Arc<dyn Clock>,
        config_source: Some(config.clone() as Arc<dyn ConfigSource>),
        ..SchedulerOptions::default()
    };
    if let Some(delay) = scenario.options.reservation_delay {
        options.reservation_delay = delay.0;
    }
    if let Some(timeout) = scenario.options.completing_timeout {
        options.completing_timeout = timeout.0;
    }
    if let Some(timeout) = scenario.options.reservation_timeout {
        options.reservation_timeout = timeout.0;
    }
    if let Some(interval) = scenario.options.queue_cleanup_interval {
        options.queue_cleanup_interval = interval.0;
    }
    let callback = match &scenario.predicates {
        Some(rules) => {
            let rules = rules.clone();
            RecordingCallback::with_predicates(move |args| !rules.iter().any(|r| r.refuses(args)))
        }
        None => RecordingCallback::new(),
    };
    let mut run = Run {
        scenario,
        scheduler: Scheduler::start(options),
        clock,
        callback: Arc::new(callback),
        config,
        outcome: Outcome {
            name: scenario.name.clone(),
            ..Outcome::default()
        },
        partition: scenario.partition.clone(),
    };
    progress.store(0, Ordering::SeqCst);
    if run.setup() {
        for (i, step) in scenario.steps.iter().enumerate() {
            progress.store(i + 1, Ordering::SeqCst);
            run.step(i + 1, step);
        }
    }
    run.scheduler.shutdown();
    run.outcome
}

impl Run<'_> {
    /// Registers, then adds apps, nodes and asks. False when registration failed.
    fn setup(&mut self) -> bool {
        let step = StepRef {
            index: 0,
            kind: "setup",
            label: None,
        };
        let mut checks = Checks::new(step);
        let request = si::RegisterResourceManagerRequest {
            rm_id: self.scenario.rm_id.clone(),
            version: "scenario".to_owned(),
            policy_group: "queues".to_owned(),
            config: self.scenario.config.clone(),
            extra_config: if self.scenario.predicates.is_some() {
                [(PREDICATES_EXTRA_CONFIG.to_owned(), "true".to_owned())].into()
            } else {
                Default::default()
            },
            ..Default::default()
        };
        let registered = self
            .scheduler
            .register_resource_manager(request, self.callback.clone());
        if let Err(err) = registered {
            self.outcome.aborted = Some(format!("registration failed: {err}"));
            return false;
        }
        let s = self.scenario;
        if !s.apps.is_empty() {
            let result = self.add_apps(&s.apps);
            call_ok(&mut checks, "add apps", result);
            self.scheduler.settle();
        }
        if !s.nodes.is_empty() {
            let result = self.add_nodes(&s.nodes);
            call_ok(&mut checks, "add nodes", result);
            self.scheduler.settle();
        }
        if !s.asks.is_empty() {
            let result = self.add_asks(&s.asks);
            call_ok(&mut checks, "add asks", result);
        }
        self.scheduler.settle();
        self.finish(checks, None);
        true
    }

    fn step(&mut self, index: usize, step: &Step) {
        let kind = step.action.as_ref().map_or("expect", StepAction::keyword);
        let mut checks = Checks::new(StepRef {
            index,
            kind,
            label: step.label.clone(),
        });
        self.partition = step
            .partition
            .clone()
            .unwrap_or_else(|| self.scenario.partition.clone());
        if let Some(action) = &step.action {
            let result = self.act(action);
            match (&step.error, result) {
                (None, result) => call_ok(&mut checks, kind, result),
                (Some(want), Ok(())) => {
                    checks.check(
                        false,
                        format!("{kind} call"),
                        format!("an error containing {want:?}"),
                        "Ok",
                    );
                }
                (Some(want), Err(err)) => {
                    let text = err.to_string();
                    let ok = text.to_lowercase().contains(&want.to_lowercase());
                    checks.check(
                        ok,
                        format!("{kind} call"),
                        format!("an error containing {want:?}"),
                        text,
                    );
                }
            }
        }
        self.scheduler.settle();
        self.finish(checks, step.expect.as_ref());
    }

    /// Checks expectations against the settled state of the step's
    /// partition, and the invariants of every partition.
    fn finish(&mut self, mut checks: Checks, expect: Option<&expect::Expect>) {
        let snapshot = self.scheduler.snapshot(&self.qualified(&self.partition));
        if snapshot.is_none() {
            checks.check(
                false,
                format!("partition {}", self.partition),
                "exists",
                "no such partition",
            );
        }
        let snapshot = snapshot.unwrap_or_default();
        if let Some(expect) = expect {
            self.callback
                .with_recorded(|recorded| expect::check(expect, &snapshot, recorded, &mut checks));
        }
        if self.scenario.check_invariants {
            let prefix = format!("[{}]", self.scenario.rm_id);
            for name in self.scheduler.partitions() {
                if !name.starts_with(&prefix) {
                    continue;
                }
                if let Some(other) = self.scheduler.snapshot(&name) {
                    invariants::check(&other, &mut checks);
                }
            }
        }
        self.outcome.checks += checks.count;
        self.outcome.failures.extend(checks.failures);
    }

    /// The qualified name of the RM's partition `name`.
    fn qualified(&self, name: &str) -> String {
        format!("[{}]{name}", self.scenario.rm_id)
    }

    fn act(&mut self, action: &StepAction) -> SchedulerResult<()> {
        match action {
            StepAction::AddNodes(nodes) => self.add_nodes(nodes),
            StepAction::AddApps(apps) => self.add_apps(apps),
            StepAction::AddAsks(asks) => self.add_asks(asks),
            StepAction::Recover(allocations) => {
                let allocations = allocations
                    .iter()
                    .map(|a| self.allocation(a, None))
                    .collect();
                self.scheduler.update_allocation(si::AllocationRequest {
                    allocations,
                    rm_id: self.scenario.rm_id.clone(),
                    ..Default::default()
                })
            }
            StepAction::Release(releases) => self.release(releases),
            StepAction::ReleaseAsks(releases) => self.release_asks(releases),
            StepAction::Nodes(actions) => self.node_actions(actions),
            StepAction::RemoveApps(ids) => {
                self.scheduler.update_application(si::ApplicationRequest {
                    remove: ids
                        .iter()
                        .map(|id| si::RemoveApplicationRequest {
                            application_id: id.clone(),
                            partition_name: self.partition.clone(),
                        })
                        .collect(),
                    rm_id: self.scenario.rm_id.clone(),
                    ..Default::default()
                })
            }
            StepAction::Reload(text) => {
                *self.config.0.lock().unwrap_or_else(PoisonError::into_inner) = text.clone();
                self.scheduler.update_configuration(&self.scenario.rm_id)
            }
            StepAction::Advance(by) => {
                self.clock.advance(by.0);
                self.scheduler.wake();
                Ok(())
            }
        }
    }

    fn add_apps(&self, apps: &[App]) -> SchedulerResult<()> {
        let new = apps
            .iter()
            .map(|app| si::AddApplicationRequest {
                application_id: app.id.clone(),
                queue_name: app.queue.clone(),
                partition_name: self.partition.clone(),
                ugi: Some(si::UserGroupInformation {
                    user: app.user.clone(),
                    groups: app.groups.clone(),
                }),
                tags: app.tags.clone().into_iter().collect(),
                placeholder_ask: app.placeholder_ask.as_ref().map(wire),
                gang_scheduling_style: app.gang_style.clone(),
                execution_timeout_milli_seconds: app
                    .execution_timeout
                    .map_or(0, |t| i64::try_from(t.0.as_millis()).unwrap_or(i64::MAX)),
            })
            .collect();
        self.scheduler.update_application(si::ApplicationRequest {
            new,
            rm_id: self.scenario.rm_id.clone(),
            ..Default::default()
        })
    }

    fn attributes(
        &self,
        id: &str,
        extra: &std::collections::BTreeMap<String, String>,
    ) -> HashMap<String, String> {
        let mut attributes = HashMap::from([
            (si::HOSTNAME_ATTRIBUTE.to_owned(), id.to_owned()),
            (
                si::NODE_PARTITION_ATTRIBUTE.to_owned(),
                self.partition.clone(),
            ),
        ]);
        attributes.extend(extra.clone());
        attributes
    }

    fn add_nodes(&self, nodes: &[Node]) -> SchedulerResult<()> {
        use si::node_info::ActionFromRm;
        let nodes = nodes
            .iter()
            .map(|node| si::NodeInfo {
                node_id: node.id.clone(),
                action: if node.draining {
                    ActionFromRm::CreateDrain
                } else {
                    ActionFromRm::Create
                } as i32,
                attributes: self.attributes(&node.id, &node.attributes),
                schedulable_resource: Some(wire(&node.capacity)),
                occupied_resource: node.occupied.as_ref().map(wire),
                existing_allocations: node
                    .allocations
                    .iter()
                    .map(|a| self.allocation(a, Some(&node.id)))
                    .collect(),
            })
            .collect();
        self.scheduler.update_node(si::NodeRequest {
            nodes,
            rm_id: self.scenario.rm_id.clone(),
        })
    }

    fn allocation(&self, a: &ExistingAllocation, node: Option<&str>) -> si::Allocation {
        si::Allocation {
            allocation_key: a.key.clone(),
            resource_per_alloc: Some(wire(&a.resource)),
            priority: a.priority,
            node_id: node.map_or_else(|| a.node.clone().unwrap_or_default(), str::to_owned),
            application_id: a.app.clone(),
            partition_name: self.partition.clone(),
            allocation_id: a.id.clone().unwrap_or_else(|| a.key.clone()),
            allocation_tags: a.tags.clone().into_iter().collect(),
            task_group_name: a.task_group.clone(),
            placeholder: a.placeholder,
            originator: a.originator,
            preemption_policy: preemption_policy(a.allow_preempt_self, a.allow_preempt_other),
        }
    }

    fn add_asks(&self, asks: &[Ask]) -> SchedulerResult<()> {
        let asks = asks
            .iter()
            .map(|ask| si::AllocationAsk {
                allocation_key: ask.key.clone(),
                application_id: ask.app.clone(),
                partition_name: self.partition.clone(),
                resource_ask: Some(wire(&ask.resource)),
                max_allocations: ask.count,
                priority: ask.priority,
                task_group_name: ask.task_group.clone(),
                placeholder: ask.placeholder,
                tags: ask.tags.clone().into_iter().collect(),
                originator: ask.originator,
                preemption_policy: preemption_policy(
                    ask.allow_preempt_self,
                    ask.allow_preempt_other,
                ),
                ..Default::default()
            })
            .collect();
        self.scheduler.update_allocation(si::AllocationRequest {
            asks,
            rm_id: self.scenario.rm_id.clone(),
            ..Default::default()
        })
    }

    fn release(&self, releases: &[Release]) -> SchedulerResult<()> {
        let allocations_to_release = releases
            .iter()
            .map(|r| si::AllocationRelease {
                partition_name: self.partition.clone(),
                application_id: r.app.clone(),
                termination_type: r
                    .termination
                    .map_or(si::TerminationType::StoppedByRm, |t| t.0)
                    as i32,
                message: "released by scenario".to_owned(),
                allocation_key: r.key.clone().unwrap_or_default(),
                allocation_id: r.id.clone().unwrap_or_default(),
            })
            .collect();
        self.scheduler.update_allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocations_to_release,
                ..Default::default()
            }),
            rm_id: self.scenario.rm_id.clone(),
            ..Default::default()
        })
    }

    fn release_asks(&self, releases: &[AskRelease]) -> SchedulerResult<()> {
        let allocation_asks_to_release = releases
            .iter()
            .map(|r| si::AllocationAskRelease {
                partition_name: self.partition.clone(),
                application_id: r.app.clone(),
                allocation_key: r.key.clone().unwrap_or_default(),
                termination_type: si::TerminationType::StoppedByRm as i32,
                message: "released by scenario".to_owned(),
            })
            .collect();
        self.scheduler.update_allocation(si::AllocationRequest {
            releases: Some(si::AllocationReleasesRequest {
                allocation_asks_to_release,
                ..Default::default()
            }),
            rm_id: self.scenario.rm_id.clone(),
            ..Default::default()
        })
    }

    fn node_actions(&self, actions: &[NodeAction]) -> SchedulerResult<()> {
        let nodes = actions
            .iter()
            .map(|a| si::NodeInfo {
                node_id: a.id.clone(),
                action: a.action.1,
                attributes: self.attributes(&a.id, &a.attributes),
                schedulable_resource: a.capacity.as_ref().map(wire),
                occupied_resource: a.occupied.as_ref().map(wire),
                existing_allocations: Vec::new(),
            })
            .collect();
        self.scheduler.update_node(si::NodeRequest {
            nodes,
            rm_id: self.scenario.rm_id.clone(),
        })
    }
}

/// A call that the step did not expect to fail.
fn call_ok(checks: &mut Checks, what: &str, result: SchedulerResult<()>) {
    let actual = match &result {
        Ok(()) => "Ok".to_owned(),
        Err(err) => format!("error: {err}"),
    };
    checks.check(result.is_ok(), format!("{what} call"), "Ok", actual);
}

/// The wire form of a resource.
fn wire(resources: &Resources) -> si::Resource {
    si::Resource {
        resources: resources
            .0
            .iter()
            .map(|(name, value)| (name.clone(), si::Quantity { value: *value }))
            .collect(),
    }
}
