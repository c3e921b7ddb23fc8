//! The REST routes of the cluster's objects (clusters, partitions,
//! placement rules, queues, nodes, node utilisation, applications, user and
//! group usage), one test each, against a server over a small cluster: every
//! answer's field names are pinned to upstream's DAO types, with the values
//! that say the fields mean what upstream means.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::cluster::{RM, default_cluster, fails, find, has_fields};
use common::{get_json, get_json_until};
use serde_json::{Value, json};
use unisched_shim_api::SchedulerApi;
use unisched_shim_api::recording::RecordingCallback;
use unisched_si as si;

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
            // Upstream's internal rule for forced applications, listed last.
            {"name": "recovery"},
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
async fn rejected_applications_are_kept_with_their_reason() {
    let (core, server) = default_cluster().await;
    let asked = si::AddApplicationRequest {
        application_id: "app-x".to_string(),
        queue_name: "root.nope".to_string(),
        partition_name: "default".to_string(),
        // No user: refused (an unknown queue would fall back to root.default).
        ugi: None,
        ..Default::default()
    };
    tokio::task::spawn_blocking(move || {
        core.update_application(si::ApplicationRequest {
            rm_id: RM.to_string(),
            new: vec![asked],
            ..Default::default()
        })
        .unwrap();
        core.settle();
    })
    .await
    .unwrap();
    let p = "/ws/v1/partition/default";
    let rejected = get_json_until(&server, &format!("{p}/applications/rejected"), |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let app = &rejected[0];
    assert_eq!(app["applicationID"], "app-x");
    assert_eq!(app["applicationState"], "Rejected");
    assert_eq!(app["queueName"], "root.nope");
    assert!(
        app["rejectedMessage"]
            .as_str()
            .is_some_and(|m| m.contains("no user")),
        "{app}"
    );
    let states: Vec<&str> = app["stateLog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["applicationState"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["New", "Rejected"]);
    // Never in a queue, and not among the active or completed ones.
    let active = get_json(&server, &format!("{p}/applications/active")).await;
    assert!(!active.to_string().contains("app-x"), "{active}");
    let completed = get_json(&server, &format!("{p}/applications/completed")).await;
    assert_eq!(completed, json!([]));
    fails(
        &server,
        &format!("{p}/queue/root.nope/application/app-x"),
        404,
    )
    .await;
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
