//! Fuzz target: request bodies the REST API parses, as its handlers parse them.
//!
//! Two routes read a body (`server/src/rest/config.rs`), both as raw bytes that
//! must be UTF-8 (`utf8`):
//! - `POST /ws/v1/validate-conf` (`validate_conf`): `unisched_core::config::parse`,
//!   answered as JSON `{"allowed": bool, "reason"?: errors}`;
//! - `PUT /ws/v1/config` (`put_config`): `Scheduler::set_config(rm, text)` on a live
//!   scheduler, which applies the text and asks the RM to persist it.
//!
//! The handlers are private and async; the functions they call are public, so
//! this target makes the same calls. Checked: no panic in any thread; the
//! validate-conf answer is valid JSON that agrees with the parse; `set_config`
//! accepts exactly what `parse` accepts, the RM's persistence answer comes back,
//! and afterwards every partition still answers `snapshot()`. The live scheduler
//! holds nodes, apps, allocations and pending asks; after an accepted config it
//! is put back to that state, so each input starts from the same state.
//! No route parses a JSON body; query strings are taken as text and their
//! numbers parsed by the handlers (a bad one is a 400).

#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use libfuzzer_sys::fuzz_target;
use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_shim_api::{CallbackResult, ResourceManagerCallback, SchedulerApi, SchedulerError};
use unisched_si as si;

const RM: &str = "rm-rest";

const BASE_CONFIG: &str = "partitions:
  - name: default
    queues:
      - name: root
        submitacl: \"*\"
        queues:
          - name: a
            resources: {max: {memory: 60M, vcore: 6}}
          - name: b
          - name: parent
            queues:
              - name: x
";

/// The `validate-conf` handler's answer: `Err` is the 400 text for non-UTF-8 input.
fn validate_conf(body: &[u8]) -> Result<serde_json::Value, String> {
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("the configuration is not UTF-8 text: {e}"))?;
    Ok(match unisched_core::config::parse(text) {
        Ok(_) => serde_json::json!({ "allowed": true }),
        Err(errors) => serde_json::json!({ "allowed": false, "reason": errors.to_string() }),
    })
}

/// An RM that keeps nothing and persists every configuration it is asked to.
struct Rm;

impl ResourceManagerCallback for Rm {
    fn update_allocation(&self, _: si::AllocationResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn update_application(&self, _: si::ApplicationResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn update_node(&self, _: si::NodeResponse) -> CallbackResult<()> {
        Ok(())
    }
    fn predicates(&self, _: si::PredicatesArgs) -> CallbackResult<()> {
        Ok(())
    }
    fn resync_scheduler_cache(&self, _: si::ReSyncSchedulerCacheArgs) -> CallbackResult<()> {
        Ok(())
    }
    fn send_event(&self, _: Vec<si::EventRecord>) -> CallbackResult<()> {
        Ok(())
    }
    fn update_container_scheduling_state(
        &self,
        _: si::UpdateContainerSchedulingStateRequest,
    ) -> CallbackResult<()> {
        Ok(())
    }
    fn update_configuration(
        &self,
        request: si::UpdateConfigurationRequest,
    ) -> CallbackResult<si::UpdateConfigurationResponse> {
        Ok(si::UpdateConfigurationResponse {
            success: true,
            old_config: request.config,
            reason: String::new(),
        })
    }
}

fn res(memory: i64, vcore: i64) -> Option<si::Resource> {
    let mut resources = HashMap::new();
    resources.insert("memory".to_string(), si::Quantity { value: memory });
    resources.insert("vcore".to_string(), si::Quantity { value: vcore });
    Some(si::Resource { resources })
}

/// The scheduler behind `PUT /ws/v1/config`, with some state to reconfigure.
struct Live {
    sched: Scheduler,
}

impl Live {
    fn new() -> Self {
        let sched = Scheduler::start(SchedulerOptions {
            clock: ManualClock::new(1_000_000_000),
            ..Default::default()
        });
        let live = Live { sched };
        live.reset();
        live
    }

    /// Registers the base config (wiping the RM's state) and reports two nodes,
    /// three apps and asks, some of which cannot be placed.
    fn reset(&self) {
        let s = &self.sched;
        s.register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                policy_group: "queues".to_string(),
                config: BASE_CONFIG.to_string(),
                ..Default::default()
            },
            Arc::new(Rm),
        )
        .unwrap_or_else(|e| panic!("registering the base config failed: {e}"));
        let nodes = ["node-0", "node-1"]
            .iter()
            .map(|id| si::NodeInfo {
                node_id: id.to_string(),
                action: si::node_info::ActionFromRm::Create as i32,
                schedulable_resource: res(100_000_000, 10_000),
                ..Default::default()
            })
            .collect();
        s.update_node(si::NodeRequest {
            nodes,
            rm_id: RM.to_string(),
        })
        .expect("nodes");
        let apps = [
            ("app-a", "root.a"),
            ("app-b", "root.b"),
            ("app-x", "root.parent.x"),
        ]
        .iter()
        .map(|(id, queue)| si::AddApplicationRequest {
            application_id: id.to_string(),
            queue_name: queue.to_string(),
            ugi: Some(si::UserGroupInformation {
                user: "alice".to_string(),
                groups: vec!["dev".to_string()],
            }),
            ..Default::default()
        })
        .collect();
        s.update_application(si::ApplicationRequest {
            new: apps,
            remove: vec![],
            rm_id: RM.to_string(),
        })
        .expect("apps");
        let asks = [
            ("ask-a", "app-a", 8),
            ("ask-b", "app-b", 3),
            ("ask-x", "app-x", 12),
        ]
        .iter()
        .map(|(key, app, max)| si::AllocationAsk {
            allocation_key: key.to_string(),
            application_id: app.to_string(),
            resource_ask: res(10_000_000, 1_000),
            max_allocations: *max,
            ..Default::default()
        })
        .collect();
        s.update_allocation(si::AllocationRequest {
            asks,
            rm_id: RM.to_string(),
            ..Default::default()
        })
        .expect("asks");
        s.settle();
    }

    /// `PUT /ws/v1/config` with `text`; `valid` is what `config::parse` said.
    fn put_config(&self, text: &str, valid: bool) {
        match self.sched.set_config(RM, text) {
            Ok(answer) => {
                assert!(valid, "set_config took a config that parse refuses");
                assert!(answer.success, "the RM persisted, but: {}", answer.reason);
                self.check();
                self.reset();
            }
            Err(SchedulerError::InvalidConfiguration { .. }) => {
                // An accepted text may still be refused for the live state; a
                // refused one never changes anything.
                self.check();
            }
            Err(e) => panic!("set_config failed unexpectedly: {e}"),
        }
    }

    fn check(&self) {
        self.sched.settle();
        let partitions = self.sched.partitions();
        assert!(!partitions.is_empty(), "no partition left");
        for p in &partitions {
            assert!(
                self.sched.snapshot(p).is_some(),
                "partition {p} listed but no snapshot"
            );
        }
    }
}

static LIVE: Mutex<Option<Live>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    match validate_conf(data) {
        Ok(answer) => {
            let wire = serde_json::to_vec(&answer).expect("the answer serializes");
            let back: serde_json::Value =
                serde_json::from_slice(&wire).expect("the answer is valid JSON");
            assert_eq!(back, answer, "JSON round trip changed the answer");
            let allowed = back["allowed"].as_bool().expect("allowed is a bool");
            if !allowed {
                let reason = back["reason"].as_str().expect("reason is a string");
                assert!(!reason.is_empty(), "refused without a reason");
            }
            let text = std::str::from_utf8(data).expect("validated as UTF-8");
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            live.get_or_insert_with(Live::new).put_config(text, allowed);
        }
        Err(message) => {
            assert!(std::str::from_utf8(data).is_err());
            let body = serde_json::json!({ "status_code": 400, "message": message });
            let _ = serde_json::to_vec(&body).expect("the error serializes");
        }
    }
});
