//! The REST routes, one test each, against a server over a small cluster:
//! every answer's field names are pinned to upstream's DAO types, with the
//! values that say the fields mean what upstream means.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{
    WAIT, get_json, get_json_until, get_json_with, http, open_get, read_until, request, start_with,
};
use serde_json::{Value, json};
use unisched_core::Scheduler;
use unisched_server::{RunningServer, ServerOptions};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

const RM: &str = "rm-rest";

const CONFIG: &str = "partitions:
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

fn res(memory: i64, vcore: i64) -> Option<si::Resource> {
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
async fn cluster(options: ServerOptions) -> (Scheduler, RunningServer) {
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

async fn default_cluster() -> (Scheduler, RunningServer) {
    cluster(ServerOptions::default()).await
}

/// The object's field names, sorted.
fn keys(v: &Value) -> Vec<&str> {
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
fn has_fields(v: &Value, want: &[&str]) {
    let mut want = want.to_vec();
    want.sort_unstable();
    assert_eq!(keys(v), want, "fields of {v}");
}

/// The element of array `v` whose `field` is `value`.
#[track_caller]
fn find<'a>(v: &'a Value, field: &str, value: &str) -> &'a Value {
    v.as_array()
        .and_then(|a| a.iter().find(|x| x[field] == value))
        .unwrap_or_else(|| panic!("no {field} = {value} in {v}"))
}

/// Asserts a request answers `status` with upstream's error shape.
async fn fails(server: &RunningServer, path: &str, status: u16) {
    let (got, body) = http(server, "GET", path, "", b"").await;
    assert_eq!(got, status, "{path}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    has_fields(&v, &["description", "message", "status_code"]);
    assert_eq!(v["status_code"], status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/clusters").await;
    assert_eq!(v.as_array().unwrap().len(), 1);
    has_fields(
        &v[0],
        &[
            "clusterName",
            "partition",
            "rmBuildInformation",
            "startTime",
        ],
    );
    assert_eq!(v[0]["partition"], "default");
    assert_eq!(v[0]["clusterName"], RM);
    assert_eq!(
        v[0]["rmBuildInformation"],
        json!([{"buildVersion": "9.9", "rmId": RM}])
    );
    assert!(v[0]["startTime"].as_u64().unwrap() > 1_600_000_000_000_000_000);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/partitions").await;
    let p = &v[0];
    has_fields(
        p,
        &[
            "applications",
            "capacity",
            "clusterId",
            "name",
            "nodeSortingPolicy",
            "preemptionEnabled",
            "quotaPreemptionEnabled",
            "state",
            "totalContainers",
            "totalNodes",
        ],
    );
    assert_eq!(p["clusterId"], RM);
    assert_eq!(p["name"], "default");
    assert_eq!(p["state"], "Active");
    assert_eq!(p["preemptionEnabled"], true);
    assert_eq!(p["totalNodes"], 2);
    assert_eq!(p["totalContainers"], 2);
    assert_eq!(
        p["applications"],
        json!({"total": 2, "Running": 1, "Accepted": 1})
    );
    assert_eq!(
        p["capacity"],
        json!({
            "capacity": {"memory": 4000, "vcore": 8000},
            "usedCapacity": {"memory": 1000, "vcore": 1000},
            "utilization": {"memory": 25, "vcore": 12},
        })
    );
    assert_eq!(
        p["nodeSortingPolicy"],
        json!({"type": "binpacking", "resourceWeights": {"memory": 1.0, "vcore": 2.0}})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_rules() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/partition/default/placementrules").await;
    assert_eq!(
        v,
        json!([
            {
                "name": "tag",
                "parameters": {"tagName": "namespace", "create": "true"},
                "filter": {"type": "allow", "userList": ["alice", "bob"]},
                "parentRule": {
                    "name": "fixed",
                    "parameters": {"queue": "root.tenants", "create": "false", "qualified": "true"},
                },
            },
            {"name": "provided", "parameters": {"create": "false"}},
        ])
    );
    fails(&server, "/ws/v1/partition/nope/placementrules", 404).await;
    server.shutdown().await;
}

const QUEUE_FIELDS: [&str; 21] = [
    "allocatedResource",
    "childNames",
    "currentPriority",
    "guaranteedResource",
    "headroom",
    "isLeaf",
    "isManaged",
    "isPreemptionFence",
    "isPriorityFence",
    "maxResource",
    "maxRunningApps",
    "partition",
    "pendingResource",
    "preemptionDelay",
    "preemptionEnabled",
    "prioritySorting",
    "properties",
    "quotaPreemptionDelay",
    "queuename",
    "sortingPolicy",
    "status",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_tree() {
    let (_s, server) = default_cluster().await;
    let root = get_json(&server, "/ws/v1/partition/default/queues").await;
    let mut fields: Vec<&str> = QUEUE_FIELDS.to_vec();
    fields.retain(|f| !["guaranteedResource", "maxRunningApps", "properties"].contains(f));
    fields.extend(["absUsedCapacity", "children", "runningApps"]);
    has_fields(&root, &fields);
    assert_eq!(root["queuename"], "root");
    // Upstream's root is as large as the cluster.
    assert_eq!(root["maxResource"], json!({"memory": 4000, "vcore": 8000}));
    assert_eq!(root["headroom"], json!({"memory": 3000, "vcore": 7000}));
    assert_eq!(root["absUsedCapacity"], json!({"memory": 25, "vcore": 12}));
    assert_eq!(root["sortingPolicy"], "fair");
    assert_eq!(root["currentPriority"], 7, "app-2's pending ask");
    assert_eq!(
        root["childNames"],
        json!(["root.batch", "root.default", "root.tenants"])
    );
    let batch = find(&root["children"], "queuename", "root.batch");
    assert_eq!(batch["parent"], "root");
    assert_eq!(batch["isLeaf"], true);
    assert_eq!(batch["maxRunningApps"], 5);
    assert_eq!(batch["runningApps"], 1);
    assert_eq!(
        batch["guaranteedResource"],
        json!({"memory": 1000, "vcore": 2000})
    );
    assert_eq!(batch["headroom"], json!({"memory": 2000, "vcore": 7000}));
    assert_eq!(batch["absUsedCapacity"], json!({"memory": 33, "vcore": 12}));
    assert_eq!(batch["sortingPolicy"], "fair");
    assert_eq!(batch["priorityOffset"], 3);
    assert_eq!(batch["preemptionDelay"], "1m30s");
    assert_eq!(batch["quotaPreemptionDelay"], "0s");
    assert_eq!(
        batch["currentPriority"],
        i64::from(i32::MIN),
        "nothing pending"
    );
    let default = find(&root["children"], "queuename", "root.default");
    assert_eq!(
        default["pendingResource"],
        json!({"memory": 5000, "vcore": 500})
    );
    assert_eq!(default["currentPriority"], 7);
    assert_eq!(default["sortingPolicy"], "fifo");
    let tenants = find(&root["children"], "queuename", "root.tenants");
    assert_eq!(
        tenants["template"],
        json!({"maxApplications": 2, "maxResource": {"memory": 500},
               "properties": {"application.sort.policy": "fifo"}})
    );
    fails(&server, "/ws/v1/partition/nope/queues", 404).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_queue() {
    let (_s, server) = default_cluster().await;
    let root = get_json(&server, "/ws/v1/partition/default/queue/root").await;
    assert!(
        root.get("children").is_none(),
        "children only with ?subtree"
    );
    assert_eq!(root["childNames"].as_array().unwrap().len(), 3);
    let full = get_json(&server, "/ws/v1/partition/default/queue/root?subtree").await;
    assert_eq!(full["children"].as_array().unwrap().len(), 3);
    let batch = get_json(&server, "/ws/v1/partition/default/queue/root.batch").await;
    let mut fields: Vec<&str> = QUEUE_FIELDS.to_vec();
    fields.retain(|f| !["childNames", "pendingResource"].contains(f));
    fields.extend(["absUsedCapacity", "parent", "priorityOffset", "runningApps"]);
    has_fields(&batch, &fields);
    fails(&server, "/ws/v1/partition/default/queue/root.nope", 404).await;
    fails(&server, "/ws/v1/partition/default/queue/root..x", 400).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_node() {
    let (_s, server) = default_cluster().await;
    let nodes = get_json(&server, "/ws/v1/partition/default/nodes").await;
    assert_eq!(nodes.as_array().unwrap().len(), 2);
    // Binpacking: both allocations on one node.
    let busy = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n.get("allocations").is_some())
        .expect("a node with allocations");
    has_fields(
        busy,
        &[
            "allocated",
            "allocations",
            "attributes",
            "available",
            "capacity",
            "hostName",
            "isReserved",
            "nodeID",
            "rackName",
            "schedulable",
            "utilized",
        ],
    );
    assert_eq!(busy["rackName"], "rack-a");
    assert_eq!(busy["utilized"], json!({"memory": 50, "vcore": 25}));
    let alloc = &busy["allocations"][0];
    has_fields(
        alloc,
        &[
            "allocationDelay",
            "allocationID",
            "allocationKey",
            "allocationTags",
            "allocationTime",
            "applicationId",
            "nodeId",
            "priority",
            "requestTime",
            "resource",
        ],
    );
    assert_eq!(alloc["allocationKey"], "a1");
    assert_eq!(alloc["priority"], "0");
    assert_eq!(alloc["allocationTags"]["kubernetes.io/meta/podName"], "a1");
    let id = busy["nodeID"].as_str().unwrap();
    let one = get_json(&server, &format!("/ws/v1/partition/default/node/{id}")).await;
    assert_eq!(&one, busy);
    fails(&server, "/ws/v1/partition/default/node/nope", 404).await;
    fails(&server, "/ws/v1/partition/nope/nodes", 404).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_utilizations() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/scheduler/node-utilizations").await;
    has_fields(&v[0], &["clusterId", "partition", "utilizations"]);
    assert_eq!(v[0]["clusterId"], RM);
    let memory = find(&v[0]["utilizations"], "type", "memory");
    has_fields(memory, &["type", "utilization"]);
    let buckets = memory["utilization"].as_array().unwrap();
    assert_eq!(buckets.len(), 10);
    has_fields(&buckets[0], &["bucketName", "nodeNames", "numOfNodes"]);
    // One node idle (0-10 %), one at 50 % (40-50 %).
    assert_eq!(buckets[0]["numOfNodes"], 1);
    assert_eq!(buckets[4]["bucketName"], "40-50%");
    assert_eq!(buckets[4]["numOfNodes"], 1);
    server.shutdown().await;
}

const APP_FIELDS: [&str; 13] = [
    "applicationID",
    "applicationState",
    "groups",
    "maxRequestPriority",
    "partition",
    "pendingResource",
    "queueName",
    "requests",
    "resourceHistory",
    "stateLog",
    "submissionTime",
    "user",
    "usedResource",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_applications() {
    let (_s, server) = default_cluster().await;
    let apps = get_json(
        &server,
        "/ws/v1/partition/default/queue/root.batch/applications",
    )
    .await;
    let a = &apps[0];
    let mut fields: Vec<&str> = APP_FIELDS.to_vec();
    fields.retain(|f| !["pendingResource", "requests"].contains(f));
    fields.extend(["allocations", "startTime"]);
    has_fields(a, &fields);
    assert_eq!(a["applicationID"], "app-1");
    assert_eq!(a["applicationState"], "Running");
    assert_eq!(a["usedResource"], json!({"memory": 1000, "vcore": 1000}));
    assert_eq!(a["groups"], json!(["dev"]));
    assert_eq!(a["resourceHistory"], json!({}));
    assert_eq!(
        a["maxRequestPriority"],
        i64::from(i32::MIN),
        "nothing pending"
    );
    let states: Vec<&str> = a["stateLog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["applicationState"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["New", "Accepted", "Running"]);
    has_fields(&a["stateLog"][0], &["applicationState", "time"]);
    assert_eq!(a["allocations"].as_array().unwrap().len(), 2);
    let none = get_json(
        &server,
        "/ws/v1/partition/default/queue/root.tenants/applications",
    )
    .await;
    assert_eq!(none, json!([]));
    fails(
        &server,
        "/ws/v1/partition/default/queue/root.nope/applications",
        404,
    )
    .await;
    fails(
        &server,
        "/ws/v1/partition/default/queue/root%20x/applications",
        400,
    )
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_application() {
    let (_s, server) = default_cluster().await;
    let b = get_json(&server, "/ws/v1/partition/default/application/app-2").await;
    let nothing_held = ["groups", "usedResource"];
    let fields: Vec<&str> = APP_FIELDS
        .iter()
        .copied()
        .filter(|f| !nothing_held.contains(f))
        .collect();
    has_fields(&b, &fields);
    assert_eq!(b["applicationState"], "Accepted");
    assert_eq!(b["maxRequestPriority"], 7);
    let ask = &b["requests"][0];
    has_fields(
        ask,
        &[
            "allocationKey",
            "allocationTags",
            "applicationId",
            "pendingCount",
            "priority",
            "requestTime",
            "resource",
        ],
    );
    assert_eq!(ask["allocationKey"], "big");
    assert_eq!(ask["priority"], "7");
    assert_eq!(ask["applicationId"], "app-2");
    let in_queue = get_json(
        &server,
        "/ws/v1/partition/default/queue/root.default/application/app-2",
    )
    .await;
    assert_eq!(in_queue, b);
    fails(
        &server,
        "/ws/v1/partition/default/queue/root.batch/application/app-2",
        404,
    )
    .await;
    fails(&server, "/ws/v1/partition/default/application/nope", 404).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_by_state() {
    let (_s, server) = default_cluster().await;
    let ids = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| a["applicationID"].as_str().unwrap().to_string())
            .collect()
    };
    let p = "/ws/v1/partition/default";
    let active = get_json(&server, &format!("{p}/applications/active")).await;
    assert_eq!(ids(&active), ["app-1", "app-2"].map(String::from).into());
    let running = get_json(&server, &format!("{p}/applications/active?status=Running")).await;
    assert_eq!(ids(&running), ["app-1".to_string()].into());
    assert_eq!(
        get_json(&server, &format!("{p}/applications/completed")).await,
        json!([])
    );
    assert_eq!(
        get_json(&server, &format!("{p}/applications/rejected")).await,
        json!([])
    );
    let in_queue = get_json(
        &server,
        &format!("{p}/queue/root.default/applications/active?status=accepted"),
    )
    .await;
    assert_eq!(ids(&in_queue), ["app-2".to_string()].into());
    assert_eq!(
        ids(&get_json(&server, &format!("{p}/applications")).await).len(),
        2
    );
    fails(&server, &format!("{p}/applications/sleeping"), 400).await;
    fails(
        &server,
        &format!("{p}/applications/active?status=Completed"),
        400,
    )
    .await;
    fails(
        &server,
        &format!("{p}/queue/root.default/applications/completed"),
        400,
    )
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_group_usage() {
    let (_s, server) = default_cluster().await;
    let p = "/ws/v1/partition/default/usage";
    let users = get_json(&server, &format!("{p}/users")).await;
    let alice = find(&users, "userName", "alice");
    has_fields(alice, &["groups", "queues", "userName"]);
    assert_eq!(alice["groups"], json!({"app-1": "dev"}));
    has_fields(
        &alice["queues"],
        &[
            "children",
            "queuePath",
            "resourceUsage",
            "runningApplications",
        ],
    );
    let bob = get_json(&server, &format!("{p}/user/bob")).await;
    has_fields(&bob, &["queues", "userName"]);
    let groups = get_json(&server, &format!("{p}/groups")).await;
    has_fields(&groups[0], &["applications", "groupName", "queues"]);
    assert_eq!(
        get_json(&server, &format!("{p}/group/dev")).await,
        groups[0]
    );
    fails(&server, &format!("{p}/user/nobody"), 404).await;
    fails(&server, &format!("{p}/user/bad%20name"), 400).await;
    fails(&server, &format!("{p}/group/nogroup"), 404).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_before_any_rm_registered() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let (status, text) = http(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!((status, text.as_str()), (200, ""));
    let json = get_json_with(&server, "/ws/v1/config", "Accept: application/json\r\n").await;
    assert_eq!(
        json,
        json!({"DeadlockDetectionEnabled": false, "DeadlockTimeoutSeconds": 0})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_in_force() {
    let (_s, server) = default_cluster().await;
    let a = request(&server, "GET", "/ws/v1/config", "", b"").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body, CONFIG);
    assert!(a.header("content-type").is_some_and(|c| c.contains("yaml")));
    let json = get_json_with(&server, "/ws/v1/config", "Accept: application/json\r\n").await;
    has_fields(
        &json,
        &[
            "Checksum",
            "DeadlockDetectionEnabled",
            "DeadlockTimeoutSeconds",
            "Partitions",
        ],
    );
    assert_eq!(json["Checksum"], unisched_core::config::checksum(CONFIG));
    let batch = &json["Partitions"][0]["Queues"][0]["Queues"][1];
    assert_eq!(batch["Name"], "batch");
    assert_eq!(
        batch["Resources"]["Max"],
        json!({"memory": "3000", "vcore": "8"})
    );
    assert_eq!(batch["Limits"][0]["Groups"], json!(["dev"]));
    let (status, _) = http(&server, "GET", "/ws/v1/config?rmID=nope", "", b"").await;
    assert_eq!(status, 404);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_conf() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let (status, body) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        CONFIG.as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"allowed": true})
    );
    let (_, body) = http(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        b"partitions: [",
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    has_fields(&v, &["allowed", "reason"]);
    assert_eq!(v["allowed"], false);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck() {
    let (_s, server) = default_cluster().await;
    let v = get_json(&server, "/ws/v1/scheduler/healthcheck").await;
    has_fields(&v, &["HealthChecks", "Healthy"]);
    assert_eq!(v["Healthy"], true);
    has_fields(&v["HealthChecks"][0], &["Description", "Name", "Succeeded"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_of_apps_and_containers() {
    let (_s, server) = cluster(ServerOptions {
        history_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    })
    .await;
    let apps = get_json_until(&server, "/ws/v1/history/apps", |v| {
        v.as_array()
            .and_then(|a| a.last())
            .is_some_and(|r| r["totalApplications"] == "1")
    })
    .await;
    has_fields(&apps[0], &["timestamp", "totalApplications"]);
    let first = apps[0]["timestamp"].as_u64().unwrap();
    let last = apps.as_array().unwrap().last().unwrap()["timestamp"]
        .as_u64()
        .unwrap();
    assert!(first <= last, "oldest first");
    let containers = get_json_until(&server, "/ws/v1/history/containers", |v| {
        v.as_array()
            .and_then(|a| a.last())
            .is_some_and(|r| r["totalContainers"] == "2")
    })
    .await;
    has_fields(&containers[0], &["timestamp", "totalContainers"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_batch() {
    let (_s, server) = default_cluster().await;
    let v = get_json_until(&server, "/ws/v1/events/batch?count=1000", |v| {
        v["EventRecords"].as_array().is_some_and(|e| e.len() > 3)
    })
    .await;
    has_fields(
        &v,
        &["EventRecords", "HighestID", "InstanceUUID", "LowestID"],
    );
    assert_eq!(v["InstanceUUID"].as_str().unwrap().len(), 36, "a UUID");
    // The application events of app-1, in Go's encoding: enums as numbers.
    let app = v["EventRecords"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["objectID"] == "app-1" && e["type"] == si::event_record::Type::App as i32)
        .expect("an APP event of app-1");
    assert!(app["timestampNano"].is_i64());
    assert!(app["eventChangeDetail"].is_i64());
    let one = get_json(&server, "/ws/v1/events/batch?start=1&count=1").await;
    assert_eq!(one["EventRecords"].as_array().unwrap().len(), 1);
    assert_eq!(one["EventRecords"][0], v["EventRecords"][1]);
    fails(&server, "/ws/v1/events/batch?count=abc", 400).await;
    fails(&server, "/ws/v1/events/batch?count=0", 400).await;
    fails(&server, "/ws/v1/events/batch?start=-1", 400).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_starts_with_the_instance() {
    let (_s, server) = default_cluster().await;
    let mut conn = open_get(&server, "/ws/v1/events/stream?count=2").await;
    let mut seen = Vec::new();
    // Head, the instance line and the two events of the history.
    read_until(&mut conn, &mut seen, "the history", |t| {
        t.matches("\"objectID\"").count() >= 2
    })
    .await;
    let text = String::from_utf8_lossy(&seen);
    let first = text
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let first: Value = serde_json::from_str(first).unwrap();
    has_fields(&first, &["InstanceUUID"]);
    drop(conn);
    fails(&server, "/ws/v1/events/stream?count=x", 400).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_and_its_old_place() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let moved = request(&server, "GET", "/ws/v1/stack", "", b"").await;
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), Some("/debug/stack"));
    let (status, text) = http(&server, "GET", "/debug/stack", "", b"").await;
    assert_eq!(status, 200);
    assert!(text.contains("backtrace of the answering thread"), "{text}");
    if cfg!(target_os = "linux") {
        assert!(
            text.contains(" threads\n") && text.contains("tokio"),
            "{text}"
        );
    }
    fails(&server, "/debug/pprof/heap", 501).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_state_dump_and_its_old_place() {
    let (_s, server) = cluster(ServerOptions {
        history_interval: Duration::from_millis(50),
        ..ServerOptions::default()
    })
    .await;
    let moved = request(&server, "GET", "/ws/v1/fullstatedump", "", b"").await;
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), Some("/debug/fullstatedump"));
    get_json_until(&server, "/ws/v1/history/apps", |v| {
        !v.as_array().unwrap().is_empty()
    })
    .await;
    let dump = get_json(&server, "/debug/fullstatedump").await;
    has_fields(
        &dump,
        &[
            "appHistory",
            "applications",
            "clusterInfo",
            "config",
            "containerHistory",
            "logLevel",
            "nodes",
            "partitions",
            "placementRules",
            "queues",
            "rmDiagnostics",
            "timestamp",
        ],
    );
    has_fields(&dump["nodes"][0], &["nodesInfo", "partitionName"]);
    assert_eq!(dump["nodes"][0]["nodesInfo"].as_array().unwrap().len(), 2);
    has_fields(&dump["placementRules"][0], &["partition", "rules"]);
    assert_eq!(dump["queues"][0]["queuename"], "root");
    assert_eq!(dump["applications"].as_array().unwrap().len(), 2);
    assert_eq!(
        dump["rmDiagnostics"],
        json!({"empty": "Resource Manager did not register callback"})
    );
    assert_eq!(dump["config"]["Partitions"][0]["Name"], "default");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_lets_another_origin_read() {
    let (_s, server) = start_with(ServerOptions::default()).await;
    let get = request(
        &server,
        "GET",
        "/ws/v1/partitions",
        "Origin: http://ui:8080\r\n",
        b"",
    )
    .await;
    assert_eq!(get.status, 200);
    assert_eq!(get.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        get.header("access-control-allow-methods"),
        Some("GET, OPTIONS")
    );
    assert!(
        get.header("access-control-allow-headers")
            .is_some_and(|h| h.starts_with("X-Requested-With,Content-Type,Accept,Origin"))
    );
    let preflight = request(
        &server,
        "OPTIONS",
        "/ws/v1/validate-conf",
        "Origin: http://ui:8080\r\nAccess-Control-Request-Method: POST\r\n",
        b"",
    )
    .await;
    assert!(preflight.status == 204, "{}", preflight.status);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    let post = request(
        &server,
        "POST",
        "/ws/v1/validate-conf",
        "",
        b"partitions: []",
    )
    .await;
    assert_eq!(
        post.header("access-control-allow-methods"),
        Some("OPTIONS, POST")
    );
    // Errors carry them too, so a UI can read the message.
    let missing = request(&server, "GET", "/ws/v1/partition/x/nodes", "", b"").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("access-control-allow-origin"), Some("*"));
    fails(&server, "/ws/v1/no-such-route", 404).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_rms_sharing_a_name_are_qualified() {
    let (scheduler, server) = default_cluster().await;
    let core = scheduler.clone();
    tokio::task::spawn_blocking(move || {
        core.register_resource_manager(
            si::RegisterResourceManagerRequest {
                rm_id: "other".to_string(),
                policy_group: "queues".to_string(),
                ..Default::default()
            },
            Arc::new(RecordingCallback::new()),
        )
        .expect("registered");
    })
    .await
    .unwrap();
    let names = |v: &Value, field: &str| -> BTreeSet<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p[field].as_str().unwrap().to_string())
            .collect()
    };
    let want: BTreeSet<String> = ["[other]default", "[rm-rest]default"]
        .map(String::from)
        .into();
    let parts = get_json_until(&server, "/ws/v1/partitions", |v| {
        v.as_array().is_some_and(|a| a.len() == 2)
    })
    .await;
    assert_eq!(names(&parts, "name"), want);
    let clusters = get_json(&server, "/ws/v1/clusters").await;
    assert_eq!(names(&clusters, "partition"), want);
    // The names lead to the partitions; the shared plain name to neither.
    let root = get_json(&server, "/ws/v1/partition/[rm-rest]default/queues").await;
    assert_eq!(root["childNames"].as_array().unwrap().len(), 3);
    fails(&server, "/ws/v1/partition/default/queues", 404).await;
    server.shutdown().await;
}
