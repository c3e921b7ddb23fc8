//! The small cluster the REST tests read, and the checks they share: field
//! names pinned exactly, elements found by a field, upstream's error shape.

use std::sync::Arc;

use serde_json::Value;
use unisched_core::Scheduler;
use unisched_server::{RunningServer, ServerOptions};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

use super::{WAIT, http, start_with};

pub const RM: &str = "rm-rest";

pub const CONFIG: &str = "partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
        filter: {type: allow, users: [alice, bob]}
        parent: {name: fixed, value: root.tenants}
      - name: provided
    nodesortpolicy: {type: binpacking, resourceweights: {vcore: 2, memory: 1}}
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: default
          - name: batch
            resources: {guaranteed: {memory: 1000, vcore: 2}, max: {memory: 3000, vcore: 8}}
            maxapplications: 5
            properties: {application.sort.policy: fair, priority.offset: '3', preemption.delay: 90s}
            limits:
              - limit: dev team
                groups: [dev]
                maxapplications: 4
          - name: tenants
            parent: true
            childtemplate:
              maxapplications: 2
              properties: {application.sort.policy: fifo}
              resources: {max: {memory: 500}}
";

/// A resource of `memory` bytes and `vcore` milli-cores.
pub fn res(memory: i64, vcore: i64) -> Option<si::Resource> {
    Some(si::Resource {
        resources: [
            ("memory".to_string(), si::Quantity { value: memory }),
            ("vcore".to_string(), si::Quantity { value: vcore }),
        ]
        .into(),
    })
}

fn app(id: &str, queue: &str, user: &str, groups: &[&str]) -> si::AddApplicationRequest {
    si::AddApplicationRequest {
        application_id: id.to_string(),
        queue_name: queue.to_string(),
        partition_name: "default".to_string(),
        ugi: Some(si::UserGroupInformation {
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }),
        ..Default::default()
    }
}

fn ask(key: &str, app: &str, memory: i64, n: i32, priority: i32) -> si::AllocationAsk {
    si::AllocationAsk {
        allocation_key: key.to_string(),
        application_id: app.to_string(),
        partition_name: "default".to_string(),
        resource_ask: res(memory, 500),
        max_allocations: n,
        priority,
        tags: [
            ("kubernetes.io/meta/namespace".to_string(), "ns".to_string()),
            ("kubernetes.io/meta/podName".to_string(), key.to_string()),
        ]
        .into(),
        ..Default::default()
    }
}

/// A server over: two nodes (2000 memory, 4 vcore each, hostname and rack
/// attributes), app-1 of alice (group dev) in root.batch holding two
/// allocations of 500 memory, app-2 of bob in root.default with an ask no
/// node fits, at priority 7.
pub async fn cluster(options: ServerOptions) -> (Scheduler, RunningServer) {
    let (scheduler, server) = start_with(options).await;
    let core = scheduler.clone();
    tokio::task::spawn_blocking(move || {
        let rm = Arc::new(RecordingCallback::new());
        core.register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: RM.to_string(),
                policy_group: "queues".to_string(),
                config: CONFIG.to_string(),
                build_info: [("buildVersion".to_string(), "9.9".to_string())].into(),
                ..Default::default()
            },
            rm.clone(),
        )
        .expect("registered");
        let node = |i: usize| si::NodeInfo {
            node_id: format!("n{i}"),
            action: si::node_info::ActionFromRm::Create as i32,
            schedulable_resource: res(2000, 4000),
            attributes: [
                ("si/hostname".to_string(), format!("host-{i}")),
                ("si/rackname".to_string(), "rack-a".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        core.update_node(si::NodeRequest {
            rm_id: RM.to_string(),
            nodes: vec![node(1), node(2)],
        })
        .unwrap();
        core.update_application(si::ApplicationRequest {
            rm_id: RM.to_string(),
            new: vec![
                app("app-1", "root.batch", "alice", &["dev"]),
                app("app-2", "root.default", "bob", &[]),
            ],
            ..Default::default()
        })
        .unwrap();
        core.update_allocation(si::AllocationRequest {
            rm_id: RM.to_string(),
            asks: vec![
                ask("a1", "app-1", 500, 2, 0),
                ask("big", "app-2", 5000, 1, 7),
            ],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(rm.wait_for_allocations(2, WAIT), 2);
        core.settle();
    })
    .await
    .unwrap();
    (scheduler, server)
}

pub async fn default_cluster() -> (Scheduler, RunningServer) {
    cluster(ServerOptions::default()).await
}

/// The object's field names, sorted.
pub fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

/// Asserts the field names of `v` are exactly `want`.
#[track_caller]
pub fn has_fields(v: &Value, want: &[&str]) {
    let mut want = want.to_vec();
    want.sort_unstable();
    assert_eq!(keys(v), want, "fields of {v}");
}

/// The element of array `v` whose `field` is `value`.
#[track_caller]
pub fn find<'a>(v: &'a Value, field: &str, value: &str) -> &'a Value {
    v.as_array()
        .and_then(|a| a.iter().find(|x| x[field] == value))
        .unwrap_or_else(|| panic!("no {field} = {value} in {v}"))
}

/// Asserts a request answers `status` with upstream's error shape.
pub async fn fails(server: &RunningServer, path: &str, status: u16) {
    let (got, body) = http(server, "GET", path, "", b"").await;
    assert_eq!(got, status, "{path}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    has_fields(&v, &["description", "message", "status_code"]);
    assert_eq!(v["status_code"], status);
}
