//! Reservations and persistent volumes on agent resources, over real HTTP in
//! both encodings: static reservations from the agent's resource text,
//! RESERVE / UNRESERVE / CREATE / DESTROY (applied by the master at once),
//! reserved resources offered only to their role and its children, a volume
//! a task writes to and that comes back in later offers, operation feedback,
//! and everything back to zero at the end.

mod common;

use std::time::Duration;

use common::*;
use unisched_mesos::codec::ContentType;
use unisched_mesos::resources::Resources;
use unisched_mesos::v1;
use unisched_mesos::v1::offer::operation::Type as Op;
use unisched_mesos::v1::scheduler::{Call, call, event};

fn allocated(mut r: Vec<v1::Resource>, role: &str) -> Vec<v1::Resource> {
    for x in &mut r {
        x.allocation_info = Some(v1::resource::AllocationInfo {
            role: Some(role.to_string()),
        });
    }
    r
}

fn dynamic(mut r: Vec<v1::Resource>, role: &str) -> Vec<v1::Resource> {
    for x in &mut r {
        x.reservations.push(v1::resource::ReservationInfo {
            r#type: Some(v1::resource::reservation_info::Type::Dynamic as i32),
            role: Some(role.to_string()),
            ..Default::default()
        });
    }
    allocated(r, role)
}

fn op(kind: Op, id: Option<&str>) -> v1::offer::Operation {
    v1::offer::Operation {
        r#type: Some(kind as i32),
        id: id.map(|i| v1::OperationId {
            value: i.to_string(),
        }),
        ..Default::default()
    }
}

fn reserve(resources: Vec<v1::Resource>, id: Option<&str>) -> v1::offer::Operation {
    v1::offer::Operation {
        reserve: Some(v1::offer::operation::Reserve {
            resources,
            source: vec![],
        }),
        ..op(Op::Reserve, id)
    }
}

fn unreserve(resources: Vec<v1::Resource>) -> v1::offer::Operation {
    v1::offer::Operation {
        unreserve: Some(v1::offer::operation::Unreserve { resources }),
        ..op(Op::Unreserve, None)
    }
}

fn volume(size: f64, id: &str, role: &str) -> v1::Resource {
    let mut v = dynamic(
        Resources::parse(&format!("disk:{size}")).unwrap().to_vec(),
        role,
    )
    .remove(0);
    v.disk = Some(Box::new(v1::resource::DiskInfo {
        persistence: Some(v1::resource::disk_info::Persistence {
            id: id.to_string(),
            principal: None,
        }),
        volume: Some(v1::Volume {
            container_path: "data".to_string(),
            mode: v1::volume::Mode::Rw as i32,
            ..Default::default()
        }),
        source: None,
    }));
    v
}

fn reserved_to<'a>(offer: &'a v1::Offer, role: &str) -> Vec<&'a v1::Resource> {
    offer
        .resources
        .iter()
        .filter(|r| r.reservations.last().map(|x| x.role()) == Some(role))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_reservations_are_offered_only_to_their_role_and_its_children() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agent_resources: "cpus:1;mem:256;cpus(web):2;mem(web):512",
            ..Setup::default()
        })
        .await;
        let mut other = m.subscribe(framework("other", "batch"), ct).await;
        let offers = other.offers().await;
        assert_eq!(offers.len(), 1);
        assert_eq!(scalar(&offers[0], "cpus"), 1.0, "only the unreserved part");
        assert!(reserved_to(&offers[0], "web").is_empty());
        // A framework of a child role of `web` gets the reserved part.
        let mut child = m.subscribe(framework("child", "web/frontend"), ct).await;
        let offers = child.offers().await;
        let reserved = reserved_to(&offers[0], "web");
        assert_eq!(reserved.len(), 2, "{offers:?}");
        assert_eq!(scalar(&offers[0], "cpus"), 2.0);
        for r in &offers[0].resources {
            assert_eq!(
                r.allocation_info.as_ref().unwrap().role(),
                "web/frontend",
                "offered to the child role"
            );
        }
        let state = m.state().await;
        assert_eq!(
            state["slaves"][0]["reserved_resources"]["web"]["cpus"], 2.0,
            "{state}"
        );
        assert_eq!(state["slaves"][0]["unreserved_resources"]["cpus"], 1.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_create_use_destroy_unreserve_and_nothing_is_left() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agent_resources: "cpus:2;mem:1024;disk:1000",
            executor: unisched_mesos::agent::ExecutorKind::Process,
            ..Setup::default()
        })
        .await;
        let mut f = m.subscribe(framework("db", "db"), ct).await;
        let offer = f.offers().await.remove(0);
        // RESERVE, CREATE and a LAUNCH using the new volume, in one ACCEPT.
        let to_reserve = dynamic(
            Resources::parse("cpus:1;mem:128;disk:100")
                .unwrap()
                .to_vec(),
            "db",
        );
        let vol = volume(100.0, "v1", "db");
        let create = v1::offer::Operation {
            create: Some(v1::offer::operation::Create {
                volumes: vec![vol.clone()],
            }),
            ..op(Op::Create, Some("create-1"))
        };
        let mut writer = task("writer", &offer, "cpus:1;mem:128", None);
        writer.resources = dynamic(Resources::parse("cpus:1;mem:128").unwrap().to_vec(), "db");
        writer.resources.push(vol.clone());
        writer.command = Some(v1::CommandInfo {
            value: Some("echo kept > data/hello".to_string()),
            ..Default::default()
        });
        assert_eq!(
            f.accept(
                &[&offer],
                vec![
                    reserve(to_reserve.clone(), Some("reserve-1")),
                    create,
                    launch(vec![writer])
                ],
                Some(0.0),
            )
            .await,
            202
        );
        // Operation feedback for both operations with ids, then the task.
        let mut finished = Vec::new();
        let mut task_done = false;
        while finished.len() < 2 || !task_done {
            let e = f.next().await;
            match e.r#type() {
                event::Type::UpdateOperationStatus => {
                    let s = e.update_operation_status.unwrap().status;
                    assert_eq!(s.state(), v1::OperationState::OperationFinished, "{s:?}");
                    assert!(s.uuid.is_some(), "sent reliably");
                    let (status, body) = f
                        .call(Call {
                            r#type: Some(call::Type::AcknowledgeOperationStatus as i32),
                            acknowledge_operation_status: Some(call::AcknowledgeOperationStatus {
                                agent_id: s.agent_id.clone(),
                                resource_provider_id: None,
                                uuid: s.uuid.clone().unwrap().value,
                                operation_id: s.operation_id.clone().unwrap(),
                            }),
                            ..Default::default()
                        })
                        .await;
                    assert_eq!(status, 202, "{body}");
                    finished.push(s.operation_id.unwrap().value);
                }
                event::Type::Update => {
                    let s = e.update.unwrap().status;
                    f.acknowledge(&s).await;
                    if s.state() == v1::TaskState::TaskFinished {
                        task_done = true;
                    } else {
                        assert!(
                            matches!(
                                s.state(),
                                v1::TaskState::TaskStarting | v1::TaskState::TaskRunning
                            ),
                            "{s:?}"
                        );
                    }
                }
                _ => {}
            }
        }
        finished.sort();
        assert_eq!(finished, ["create-1", "reserve-1"]);
        // The task wrote into the volume's directory.
        let written = walk(&m.work_dir)
            .into_iter()
            .find(|p| p.ends_with("hello") && p.to_string_lossy().contains("/volumes/"))
            .expect("the volume holds the task's file");
        assert_eq!(std::fs::read_to_string(&written).unwrap().trim(), "kept");
        // The reservation shows in /state; the volume comes back in offers.
        let state = m.state().await;
        assert_eq!(
            state["slaves"][0]["reserved_resources"]["db"]["cpus"], 1.0,
            "{state}"
        );
        m.allocate().await;
        let back = f.offers().await.remove(0);
        let volumes: Vec<&v1::Resource> = back
            .resources
            .iter()
            .filter(|r| r.disk.as_ref().is_some_and(|d| d.persistence.is_some()))
            .collect();
        assert_eq!(volumes.len(), 1, "{back:?}");
        assert_eq!(
            volumes[0]
                .disk
                .as_ref()
                .unwrap()
                .persistence
                .as_ref()
                .unwrap()
                .id,
            "v1"
        );
        // DESTROY and UNRESERVE: the agent is as it was.
        let destroy = v1::offer::Operation {
            destroy: Some(v1::offer::operation::Destroy {
                volumes: vec![vol.clone()],
            }),
            ..op(Op::Destroy, None)
        };
        assert_eq!(
            f.accept(
                &[&back],
                vec![destroy, unreserve(to_reserve.clone())],
                Some(0.0)
            )
            .await,
            202
        );
        m.allocate().await;
        let plain = f.offers().await.remove(0);
        assert!(
            plain.resources.iter().all(|r| r.reservations.is_empty()),
            "{plain:?}"
        );
        assert_eq!(scalar(&plain, "cpus"), 2.0);
        assert_eq!(scalar(&plain, "disk"), 1000.0);
        assert!(
            !written.exists(),
            "the destroyed volume's directory is removed"
        );
        assert_eq!(f.simple(call::Type::Teardown).await, 202);
        m.expect_empty().await;
        let state = m.state().await;
        assert!(
            state["slaves"][0]["reserved_resources"]
                .as_object()
                .unwrap()
                .is_empty(),
            "{state}"
        );
        m.scheduler.settle();
        let snap = m.scheduler.snapshot("mesos").unwrap();
        assert_eq!(
            snap.nodes.len(),
            1,
            "the reservation's node went: {:?}",
            snap.nodes
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_survives_failover_and_bad_operations_get_operation_error() {
    let m = Master::start(Setup::default()).await;
    let mut info = framework("db", "db");
    info.failover_timeout = Some(60.0);
    let mut f = m.subscribe(info.clone(), ContentType::Protobuf).await;
    let offer = f.offers().await.remove(0);
    let to_reserve = dynamic(Resources::parse("cpus:1;mem:256").unwrap().to_vec(), "db");
    // Reserving for another role, or more than offered, is refused.
    let elsewhere = allocated(
        dynamic(Resources::parse("cpus:1").unwrap().to_vec(), "web"),
        "db",
    );
    let too_much = dynamic(Resources::parse("cpus:5").unwrap().to_vec(), "db");
    assert_eq!(
        f.accept(
            &[&offer],
            vec![
                reserve(elsewhere, Some("bad-role")),
                reserve(too_much, Some("too-much")),
                reserve(to_reserve.clone(), None),
            ],
            Some(0.0),
        )
        .await,
        202
    );
    for _ in 0..2 {
        let s = f
            .next_of(event::Type::UpdateOperationStatus)
            .await
            .update_operation_status
            .unwrap()
            .status;
        assert_eq!(s.state(), v1::OperationState::OperationError, "{s:?}");
        assert!(
            s.uuid.is_none(),
            "errors of dropped operations are not retried"
        );
        let message = s.message.unwrap_or_default();
        match s.operation_id.unwrap().value.as_str() {
            "bad-role" => assert!(message.contains("allocated to role"), "{message}"),
            "too-much" => assert!(message.contains("not available"), "{message}"),
            other => panic!("unexpected {other}"),
        }
    }
    // Fail over: the reservation stays and is offered to the framework again.
    let id = f.id.clone();
    f.disconnect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    info.id = Some(v1::FrameworkId { value: id.clone() });
    let mut again = m.subscribe(info, ContentType::Protobuf).await;
    assert_eq!(again.id, id);
    let offer = again.offers().await.remove(0);
    assert_eq!(reserved_to(&offer, "db").len(), 2, "{offer:?}");
    let state = m.state().await;
    assert_eq!(state["slaves"][0]["reserved_resources"]["db"]["cpus"], 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_updates_are_retried_until_acknowledged_and_reconciled() {
    let m = Master::start(Setup::default()).await;
    let mut f = m.subscribe(framework("db", "db"), ContentType::Json).await;
    let offer = f.offers().await.remove(0);
    let to_reserve = dynamic(Resources::parse("cpus:1").unwrap().to_vec(), "db");
    assert_eq!(
        f.accept(
            &[&offer],
            vec![reserve(to_reserve, Some("r1"))],
            Some(3600.0)
        )
        .await,
        202
    );
    let first = f
        .next_of(event::Type::UpdateOperationStatus)
        .await
        .update_operation_status
        .unwrap()
        .status;
    m.advance(Duration::from_secs(10)).await;
    let again = f
        .next_of(event::Type::UpdateOperationStatus)
        .await
        .update_operation_status
        .unwrap()
        .status;
    assert_eq!(again.uuid, first.uuid, "the same update, retried");
    // Reconciliation names it with its latest state, without a uuid.
    let reconcile = |ids: Vec<&str>| Call {
        r#type: Some(call::Type::ReconcileOperations as i32),
        reconcile_operations: Some(call::ReconcileOperations {
            operations: ids
                .into_iter()
                .map(|i| call::reconcile_operations::Operation {
                    operation_id: v1::OperationId {
                        value: i.to_string(),
                    },
                    agent_id: Some(offer.agent_id.clone()),
                    resource_provider_id: None,
                })
                .collect(),
        }),
        ..Default::default()
    };
    assert_eq!(f.call(reconcile(vec!["r1", "nope"])).await.0, 202);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let s = f
            .next_of(event::Type::UpdateOperationStatus)
            .await
            .update_operation_status
            .unwrap()
            .status;
        if s.uuid.is_some() {
            continue; // a retry of the update in flight
        }
        let state = s.state();
        seen.push((s.operation_id.unwrap().value, state));
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("nope".to_string(), v1::OperationState::OperationUnknown),
            ("r1".to_string(), v1::OperationState::OperationFinished),
        ]
    );
    // An operation id in use is refused.
    assert_eq!(f.simple(call::Type::Revive).await, 202);
    let more = f.offers().await.remove(0);
    let again = dynamic(Resources::parse("mem:64").unwrap().to_vec(), "db");
    assert_eq!(
        f.accept(&[&more], vec![reserve(again, Some("r1"))], Some(3600.0))
            .await,
        202
    );
    loop {
        let s = f
            .next_of(event::Type::UpdateOperationStatus)
            .await
            .update_operation_status
            .unwrap()
            .status;
        if s.state() == v1::OperationState::OperationError {
            assert!(s.message().contains("already in use"), "{s:?}");
            break;
        }
    }
    // Acknowledged: no more retries; reconciliation no longer knows it.
    let (status, _) = f
        .call(Call {
            r#type: Some(call::Type::AcknowledgeOperationStatus as i32),
            acknowledge_operation_status: Some(call::AcknowledgeOperationStatus {
                agent_id: first.agent_id.clone(),
                resource_provider_id: None,
                uuid: first.uuid.clone().unwrap().value,
                operation_id: first.operation_id.clone().unwrap(),
            }),
            ..Default::default()
        })
        .await;
    assert_eq!(status, 202);
    m.advance(Duration::from_secs(30)).await;
    assert!(
        f.maybe_next_of(event::Type::UpdateOperationStatus)
            .await
            .is_none()
    );
    assert_eq!(f.call(reconcile(vec!["r1"])).await.0, 202);
    let s = f
        .next_of(event::Type::UpdateOperationStatus)
        .await
        .update_operation_status
        .unwrap()
        .status;
    assert_eq!(s.state(), v1::OperationState::OperationUnknown);
    let metrics = m.metrics().await;
    assert_eq!(
        metrics["master/operations/reserve/finished"], 1.0,
        "{metrics}"
    );
    assert_eq!(metrics["master/operations/finished"], 1.0, "{metrics}");
}

/// The resources without their allocation (as an operator names them).
fn unallocated(mut r: Vec<v1::Resource>) -> Vec<v1::Resource> {
    for x in &mut r {
        x.allocation_info = None;
    }
    r
}

fn agent_call(kind: v1::master::call::Type) -> v1::master::Call {
    v1::master::Call {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// An operator reserves an agent's resources, makes a persistent volume on
/// them, destroys it and unreserves them, with the operator API (Mesos'
/// RESERVE_RESOURCES, CREATE_VOLUMES, DESTROY_VOLUMES, UNRESERVE_RESOURCES):
/// the framework's offer of those resources is rescinded first, later
/// offers carry what the operator made, resources tasks hold are refused
/// (409), bad requests get 400, and the agent ends as it began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reserves_and_makes_volumes_on_an_agent() {
    use v1::master::call::{self as op_call, Type as OpType};
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            agent_resources: "cpus:2;mem:1024;disk:1000",
            ..Setup::default()
        })
        .await;
        let agent = m.cluster.agents[0].clone();
        let agent_id = v1::AgentId {
            value: agent.clone(),
        };
        let mut f = m.subscribe(framework("db", "db"), ct).await;
        let first = f.offers().await.remove(0);
        assert_eq!(scalar(&first, "cpus"), 2.0);

        let reserve_call = |resources: Vec<v1::Resource>| v1::master::Call {
            reserve_resources: Some(op_call::ReserveResources {
                agent_id: agent_id.clone(),
                source: vec![],
                resources,
            }),
            ..agent_call(OpType::ReserveResources)
        };
        let cpus_disk = unallocated(dynamic(
            Resources::parse("cpus:1;disk:150").unwrap().to_vec(),
            "db",
        ));
        assert_eq!(
            m.operator(&reserve_call(cpus_disk.clone()), ct).await,
            (202, String::new())
        );
        // The offer held them: it goes back first.
        let rescind = f.next_of(event::Type::Rescind).await.rescind.unwrap();
        assert_eq!(rescind.offer_id, first.id);
        m.allocate().await;
        let offer = f.offers().await.remove(0);
        let reserved: Vec<(String, f64)> = reserved_to(&offer, "db")
            .iter()
            .map(|r| (r.name.clone(), r.scalar.as_ref().unwrap().value))
            .collect();
        assert_eq!(
            reserved,
            [("cpus".to_string(), 1.0), ("disk".to_string(), 150.0)]
        );
        assert_eq!(scalar(&offer, "cpus"), 2.0, "{offer:?}");

        // A task holds the unreserved cpu: a second reservation of it waits
        // on nothing and is refused.
        assert_eq!(
            f.launch(&offer, vec![task("t1", &offer, "cpus:1;mem:64", None)])
                .await,
            202
        );
        let more = unallocated(dynamic(Resources::parse("cpus:1").unwrap().to_vec(), "db"));
        let (status, e) = m.operator(&reserve_call(more), ct).await;
        assert_eq!(status, 409, "{e}");
        assert!(e.contains("are not available on the agent"), "{e}");

        // Bad requests.
        let (status, e) = m
            .operator(
                &reserve_call(dynamic(Resources::parse("mem:64").unwrap().to_vec(), "db")),
                ct,
            )
            .await;
        assert_eq!(status, 400);
        assert!(
            e.contains(
                "the operator API only allows reservations to be made to unallocated resources"
            ),
            "{e}"
        );
        let (status, e) = m
            .operator(
                &reserve_call(Resources::parse("mem:64").unwrap().to_vec()),
                ct,
            )
            .await;
        assert_eq!(status, 400);
        assert!(e.contains("is not dynamically reserved"), "{e}");
        let mut unknown = reserve_call(cpus_disk.clone());
        unknown.reserve_resources.as_mut().unwrap().agent_id.value = "nope".to_string();
        assert_eq!(
            m.operator(&unknown, ct).await,
            (400, "No agent found with specified ID".to_string())
        );

        // A volume on the reserved disk, then gone again.
        let vol = unallocated(vec![volume(100.0, "v1", "db")]);
        let create = v1::master::Call {
            create_volumes: Some(op_call::CreateVolumes {
                agent_id: agent_id.clone(),
                volumes: vol.clone(),
            }),
            ..agent_call(OpType::CreateVolumes)
        };
        assert_eq!(m.operator(&create, ct).await, (202, String::new()));
        let state = m.state().await;
        let slave = &state["slaves"][0];
        assert_eq!(slave["reserved_resources"]["db"]["disk"], 150.0, "{slave}");
        let agents = m.operator(&agent_call(OpType::GetAgents), ct).await.1;
        assert!(agents.contains("v1"), "the volume in GET_AGENTS: {agents}");
        // It grows by the rest of the reserved disk, and shrinks back.
        let grow = v1::master::Call {
            grow_volume: Some(op_call::GrowVolume {
                agent_id: Some(agent_id.clone()),
                volume: vol[0].clone(),
                addition: unallocated(dynamic(Resources::parse("disk:50").unwrap().to_vec(), "db"))
                    .remove(0),
            }),
            ..agent_call(OpType::GrowVolume)
        };
        assert_eq!(m.operator(&grow, ct).await, (202, String::new()));
        let (status, e) = m.operator(&grow, ct).await;
        assert_eq!(status, 409, "no disk left to grow by: {e}");
        let mut grown = vol[0].clone();
        grown.scalar = Some(v1::value::Scalar { value: 150.0 });
        let shrink = v1::master::Call {
            shrink_volume: Some(op_call::ShrinkVolume {
                agent_id: Some(agent_id.clone()),
                volume: grown,
                subtract: v1::value::Scalar { value: 50.0 },
            }),
            ..agent_call(OpType::ShrinkVolume)
        };
        assert_eq!(m.operator(&shrink, ct).await, (202, String::new()));
        let destroy = v1::master::Call {
            destroy_volumes: Some(op_call::DestroyVolumes {
                agent_id: agent_id.clone(),
                volumes: vol,
            }),
            ..agent_call(OpType::DestroyVolumes)
        };
        assert_eq!(m.operator(&destroy, ct).await, (202, String::new()));
        let unreserve_call = v1::master::Call {
            unreserve_resources: Some(op_call::UnreserveResources {
                agent_id: agent_id.clone(),
                resources: cpus_disk.clone(),
            }),
            ..agent_call(OpType::UnreserveResources)
        };
        assert_eq!(m.operator(&unreserve_call, ct).await, (202, String::new()));
        let (status, e) = m.operator(&unreserve_call, ct).await;
        assert_eq!(status, 409, "nothing left to unreserve: {e}");
        let state = m.state().await;
        let slave = &state["slaves"][0];
        assert_eq!(
            slave["reserved_resources"],
            serde_json::json!({}),
            "{slave}"
        );
        assert_eq!(slave["resources"]["cpus"], 2.0);
        assert_eq!(slave["resources"]["disk"], 1000.0);
        // The core's node for the agent holds its whole capacity again.
        let snapshot = m.scheduler.snapshot("mesos").unwrap();
        let node = snapshot.nodes.iter().find(|n| n.id == agent).unwrap();
        assert_eq!(node.capacity.get("vcore"), Some(&2000), "{node:?}");
    }
}

/// Mesos' older endpoints for the same operations, with a form body:
/// `/reserve`, `/create-volumes`, `/destroy-volumes`, `/unreserve`
/// (202), behind the token, and their refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_older_endpoints_reserve_and_make_volumes() {
    let m = Master::start(Setup {
        agent_resources: "cpus:2;mem:1024;disk:1000",
        token: Some("s3cret".to_string()),
        ..Setup::default()
    })
    .await;
    let agent = m.cluster.agents[0].clone();
    let json = |r: Vec<v1::Resource>| {
        serde_json::Value::Array(r.iter().map(unisched_mesos::codec::to_json_value).collect())
            .to_string()
    };
    let form = |pairs: &[(&str, &str)]| {
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish()
    };
    let post = |path: &str, body: String, token: bool| {
        let mut req = m
            .http
            .post(format!("{}{path}", m.url))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        if token {
            req = req.bearer_auth("s3cret");
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let disk = json(unallocated(dynamic(
        Resources::parse("disk:100").unwrap().to_vec(),
        "db",
    )));
    let reserve = form(&[("slaveId", &agent), ("resources", &disk)]);
    assert_eq!(post("/reserve", reserve.clone(), false).await.0, 401);
    assert_eq!(
        post("/master/reserve", reserve, true).await,
        (202, String::new())
    );
    let vol = json(unallocated(vec![volume(100.0, "v1", "db")]));
    let volumes = form(&[("slaveId", &agent), ("volumes", &vol)]);
    assert_eq!(
        post("/create-volumes", volumes.clone(), true).await,
        (202, String::new())
    );
    let state = m.state().await;
    assert_eq!(
        state["slaves"][0]["reserved_resources"]["db"]["disk"],
        100.0
    );
    assert_eq!(
        post("/destroy-volumes", volumes, true).await,
        (202, String::new())
    );
    let unreserve = form(&[("slaveId", &agent), ("resources", &disk)]);
    assert_eq!(
        post("/unreserve", unreserve.clone(), true).await,
        (202, String::new())
    );
    assert_eq!(post("/unreserve", unreserve, true).await.0, 409);
    let state = m.state().await;
    assert_eq!(
        state["slaves"][0]["reserved_resources"],
        serde_json::json!({})
    );

    // Refusals.
    assert_eq!(
        post("/reserve", form(&[("resources", &disk)]), true).await,
        (
            400,
            "Missing 'slaveId' query parameter in the request body".to_string()
        )
    );
    assert_eq!(
        post("/reserve", form(&[("slaveId", &agent)]), true).await,
        (
            400,
            "Missing 'resources' query parameter in the request body".to_string()
        )
    );
    let (status, e) = post(
        "/reserve",
        form(&[("slaveId", &agent), ("resources", "[nope")]),
        true,
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        e.starts_with("Error parsing 'resources' query parameter in the request body: "),
        "{e}"
    );
    let (status, e) = post(
        "/reserve",
        form(&[("slaveId", "nope"), ("resources", &disk)]),
        true,
    )
    .await;
    assert_eq!(
        (status, e.as_str()),
        (400, "No agent found with specified ID")
    );
    let r = m
        .http
        .get(format!("{}/reserve", m.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
}
