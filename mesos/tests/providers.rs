//! The v1 resource provider API over real HTTP, in both encodings: a local
//! provider on an agent's endpoint (`/slave(N)/api/v1/resource_provider`)
//! and an external one on the master's; scenario 16 of spec/mesos.md §6 (a
//! new resource version rescinds the offers holding the provider's
//! resources, an operation with a stale version is dropped); CREATE_DISK end
//! to end with operation feedback both ways; publishing before a launch;
//! disconnection and resubscription; bad input.

mod common;

use common::*;
use unisched_mesos::codec::ContentType;
use unisched_mesos::v1;
use unisched_mesos::v1::offer::operation::Type as Op;
use unisched_mesos::v1::resource::disk_info::source::Type as Source;
use unisched_mesos::v1::resource_provider as rp;
use unisched_mesos::v1::scheduler::{Call, call, event};

const AGENT_ENDPOINT: &str = "/slave(1)/api/v1/resource_provider";
const MASTER_ENDPOINT: &str = "/api/v1/resource_provider";

/// The provider's resources in an offer.
fn provided(offer: &v1::Offer) -> Vec<&v1::Resource> {
    offer
        .resources
        .iter()
        .filter(|r| r.provider_id.is_some())
        .collect()
}

/// A subscribed local provider holding one RAW disk of `size` (version 1).
async fn raw_provider(m: &Master, ct: ContentType, size: f64) -> Provider {
    let mut p = m.provider(AGENT_ENDPOINT, provider_info("pool"), ct).await;
    p.subscribed().await;
    let (status, body) = p
        .update_state(vec![source_disk(size, Source::Raw, None)], 1, vec![])
        .await;
    assert_eq!(status, 202, "{body}");
    p
}

fn create_disk(source: &v1::Resource, id: &str) -> v1::offer::Operation {
    v1::offer::Operation {
        r#type: Some(Op::CreateDisk as i32),
        id: Some(v1::OperationId {
            value: id.to_string(),
        }),
        create_disk: Some(v1::offer::operation::CreateDisk {
            source: Box::new(source.clone()),
            target_type: Source::Mount as i32,
            target_profile: None,
        }),
        ..Default::default()
    }
}

async fn acknowledge_operation(f: &Framework, s: &v1::OperationStatus) -> u16 {
    f.call(Call {
        r#type: Some(call::Type::AcknowledgeOperationStatus as i32),
        acknowledge_operation_status: Some(call::AcknowledgeOperationStatus {
            agent_id: s.agent_id.clone(),
            resource_provider_id: s.resource_provider_id.clone(),
            uuid: s.uuid.clone().unwrap().value,
            operation_id: s.operation_id.clone().unwrap(),
        }),
        ..Default::default()
    })
    .await
    .0
}

async fn operation_status(f: &mut Framework) -> v1::OperationStatus {
    f.next_of(event::Type::UpdateOperationStatus)
        .await
        .update_operation_status
        .unwrap()
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s16_a_new_version_rescinds_offers_and_a_stale_operation_is_dropped() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let mut p = raw_provider(&m, ct, 100.0).await;
        let mut f = m.subscribe(framework("storage", "db"), ct).await;
        let offer = f.offers().await.remove(0);
        let disks = provided(&offer);
        assert_eq!(disks.len(), 1, "{offer:?}");
        assert_eq!(disks[0].provider_id.as_ref().unwrap().value, p.id);
        // A new resource version: the offer holding its resources goes.
        assert_eq!(
            p.update_state(vec![source_disk(100.0, Source::Raw, None)], 2, vec![])
                .await
                .0,
            202
        );
        let rescind = f.next_of(event::Type::Rescind).await.rescind.unwrap();
        assert_eq!(rescind.offer_id, offer.id);
        // The new state is offered at once (a provider update triggers an
        // allocation run).
        let fresh = f.offers().await.remove(0);
        assert_ne!(fresh.id, offer.id);
        // ACCEPT on the rescinded offer is an invalid-offers ACCEPT.
        assert_eq!(
            f.accept(&[&offer], vec![create_disk(disks[0], "late")], None)
                .await,
            202
        );
        let s = operation_status(&mut f).await;
        assert_eq!(s.state(), v1::OperationState::OperationError, "{s:?}");
        // The fresh offer's CREATE_DISK carries version 2; the provider has
        // moved on to 3 meanwhile and drops it.
        let offer = fresh;
        let source = provided(&offer)[0].clone();
        assert_eq!(
            f.accept(&[&offer], vec![create_disk(&source, "stale")], None)
                .await,
            202
        );
        let apply = p
            .next_of(rp::event::Type::ApplyOperation)
            .await
            .apply_operation
            .unwrap();
        assert_eq!(apply.resource_version_uuid.value, vec![2; 16]);
        assert_eq!(
            p.update_state(vec![source_disk(100.0, Source::Raw, None)], 3, vec![])
                .await
                .0,
            202
        );
        assert_eq!(
            p.operation_status(&apply, v1::OperationState::OperationDropped, vec![], 7)
                .await
                .0,
            202
        );
        let s = operation_status(&mut f).await;
        assert_eq!(s.state(), v1::OperationState::OperationDropped, "{s:?}");
        assert_eq!(s.operation_id.as_ref().unwrap().value, "stale");
        assert_eq!(acknowledge_operation(&f, &s).await, 202);
        let ack = p
            .next_of(rp::event::Type::AcknowledgeOperationStatus)
            .await
            .acknowledge_operation_status
            .unwrap();
        assert_eq!(ack.status_uuid.value, vec![7; 16]);
        assert_eq!(ack.operation_uuid, apply.operation_uuid);
        // Nothing is held any more: the whole disk is offered again.
        m.allocate().await;
        let offer = f.offers().await.remove(0);
        assert_eq!(provided(&offer).len(), 1);
        assert_eq!(provided(&offer)[0].scalar.as_ref().unwrap().value, 100.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_disk_end_to_end_and_a_launch_waits_for_publishing() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let mut p = raw_provider(&m, ct, 100.0).await;
        let mut f = m.subscribe(framework("storage", "db"), ct).await;
        let offer = f.offers().await.remove(0);
        let source = provided(&offer)[0].clone();
        assert_eq!(
            f.accept(&[&offer], vec![create_disk(&source, "mkfs")], Some(0.0))
                .await,
            202
        );
        let apply = p
            .next_of(rp::event::Type::ApplyOperation)
            .await
            .apply_operation
            .unwrap();
        assert_eq!(apply.framework_id.as_ref().unwrap().value, f.id);
        assert_eq!(apply.info.id.as_ref().unwrap().value, "mkfs");
        // While the provider works, the disk is not offered to anyone.
        m.allocate().await;
        let other = f.offers().await;
        assert!(other.iter().all(|o| provided(o).is_empty()), "{other:?}");
        for o in &other {
            f.decline(o, Some(0.0)).await;
        }
        let mut mounted = source_disk(100.0, Source::Mount, Some("vol-1"));
        mounted.provider_id = source.provider_id.clone();
        mounted.allocation_info = source.allocation_info.clone();
        // The provider retries its update until the framework acknowledges it.
        for _ in 0..2 {
            assert_eq!(
                p.operation_status(
                    &apply,
                    v1::OperationState::OperationFinished,
                    vec![mounted.clone()],
                    9
                )
                .await
                .0,
                202
            );
        }
        let s = operation_status(&mut f).await;
        assert_eq!(s.state(), v1::OperationState::OperationFinished);
        assert_eq!(s.converted_resources.len(), 1);
        // The converted disk is offered at once; the provider's retry is not
        // a second update.
        let mut waiting = Vec::new();
        while let Some(e) = f.maybe_next().await {
            assert_ne!(
                e.r#type(),
                event::Type::UpdateOperationStatus,
                "the provider's retry is not a second update"
            );
            if let Some(o) = e.offers {
                waiting.extend(o.offers);
            }
        }
        assert!(
            p.maybe_next().await.is_none(),
            "no acknowledgement before the framework's"
        );
        assert_eq!(acknowledge_operation(&f, &s).await, 202);
        let ack = p
            .next_of(rp::event::Type::AcknowledgeOperationStatus)
            .await
            .acknowledge_operation_status
            .unwrap();
        assert_eq!(ack.status_uuid.value, vec![9; 16]);
        // The MOUNT disk comes back in offers; a task using it waits for
        // PUBLISH_RESOURCES: FAILED fails it, OK runs it.
        for (n, answer) in [
            rp::call::update_publish_resources_status::Status::Failed,
            rp::call::update_publish_resources_status::Status::Ok,
        ]
        .into_iter()
        .enumerate()
        {
            let offer = match waiting.pop() {
                Some(o) => o,
                None => {
                    m.allocate().await;
                    f.offers().await.remove(0)
                }
            };
            let disk = provided(&offer)[0].clone();
            assert_eq!(
                disk.disk
                    .as_ref()
                    .unwrap()
                    .source
                    .as_ref()
                    .unwrap()
                    .r#type(),
                Source::Mount
            );
            let mut t = task(&format!("t{n}"), &offer, "cpus:1;mem:64", None);
            t.resources.push(disk.clone());
            assert_eq!(f.launch(&offer, vec![t]).await, 202);
            let publish = p
                .next_of(rp::event::Type::PublishResources)
                .await
                .publish_resources
                .unwrap();
            assert_eq!(publish.resources.len(), 1);
            assert!(
                f.maybe_next_of(event::Type::Update).await.is_none(),
                "the task waits for the publication"
            );
            let (status, _) = p
                .call(rp::Call {
                    r#type: Some(rp::call::Type::UpdatePublishResourcesStatus as i32),
                    update_publish_resources_status: Some(rp::call::UpdatePublishResourcesStatus {
                        uuid: publish.uuid.clone(),
                        status: answer as i32,
                    }),
                    ..Default::default()
                })
                .await;
            assert_eq!(status, 202);
            let update = f.update().await;
            f.acknowledge(&update).await;
            if answer == rp::call::update_publish_resources_status::Status::Failed {
                assert_eq!(update.state(), v1::TaskState::TaskFailed, "{update:?}");
                assert!(update.message().contains("publish"), "{update:?}");
            } else {
                assert_eq!(update.state(), v1::TaskState::TaskRunning, "{update:?}");
            }
        }
        // TEARDOWN; nothing of the framework is left.
        assert_eq!(f.simple(call::Type::Teardown).await, 202);
        m.expect_empty().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_goes_takes_its_resources_and_comes_back_with_its_id() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let mut p = raw_provider(&m, ct, 50.0).await;
        let id = p.id.clone();
        let mut f = m.subscribe(framework("storage", "db"), ct).await;
        let offer = f.offers().await.remove(0);
        let source = provided(&offer)[0].clone();
        assert_eq!(
            f.accept(&[&offer], vec![create_disk(&source, "pending")], Some(0.0))
                .await,
            202
        );
        let _apply = p.next_of(rp::event::Type::ApplyOperation).await;
        m.allocate().await;
        let held = f.offers().await.remove(0);
        p.disconnect();
        // Its pending operation becomes unreachable.
        let s = operation_status(&mut f).await;
        assert_eq!(s.state(), v1::OperationState::OperationUnreachable, "{s:?}");
        let state = m.state().await;
        assert_eq!(
            state["slaves"][0]["resource_providers"][0]["subscribed"], false,
            "{state}"
        );
        let _ = held;
        // Back with its id; the pending operation is asked about.
        let mut info = provider_info("pool");
        info.id = Some(v1::ResourceProviderId { value: id.clone() });
        let mut back = m.provider(AGENT_ENDPOINT, info, ct).await;
        assert_eq!(back.subscribed().await, id);
        assert_eq!(
            back.update_state(vec![source_disk(50.0, Source::Raw, None)], 4, vec![])
                .await
                .0,
            202
        );
        let reconcile = back
            .next_of(rp::event::Type::ReconcileOperations)
            .await
            .reconcile_operations
            .unwrap();
        assert_eq!(reconcile.operation_uuids.len(), 1);
        // An unknown id gets no SUBSCRIBED: its stream just ends.
        let mut info = provider_info("pool");
        info.id = Some(v1::ResourceProviderId {
            value: "nobody".to_string(),
        });
        let mut stranger = m.provider(AGENT_ENDPOINT, info, ct).await;
        assert!(stranger.closed().await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_provider_stands_on_an_agent_of_its_own_that_runs_no_tasks() {
    let m = Master::start(Setup::default()).await;
    let mut p = m
        .provider(MASTER_ENDPOINT, provider_info("san"), ContentType::Json)
        .await;
    p.subscribed().await;
    assert_eq!(
        p.update_state(vec![source_disk(500.0, Source::Raw, None)], 1, vec![])
            .await
            .0,
        202
    );
    let state = m.state().await;
    let slaves = state["slaves"].as_array().unwrap();
    assert_eq!(slaves.len(), 2, "{state}");
    let stand = slaves
        .iter()
        .find(|s| s["hostname"] == "org.apache.mesos.rp.local.storage.san")
        .expect("the provider's agent");
    assert_eq!(
        stand["resource_providers"][0]["total_resources"]["disk"],
        500.0
    );
    let mut f = m.subscribe(framework("f", "db"), ContentType::Json).await;
    let mut offers = f.offers().await;
    if offers.len() < 2 {
        offers.extend(f.offers().await);
    }
    let external = offers
        .iter()
        .find(|o| !provided(o).is_empty())
        .expect("the provider's disk is offered");
    let mut t = task("nowhere", external, "disk:1", None);
    t.resources = vec![provided(external)[0].clone()];
    assert_eq!(f.launch(external, vec![t]).await, 202);
    let update = f.update().await;
    assert_eq!(update.state(), v1::TaskState::TaskError, "{update:?}");
    assert!(update.message().contains("runs no tasks"), "{update:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_provider_calls_get_upstreams_answers() {
    let m = Master::start(Setup::default()).await;
    let mut p = m
        .provider(AGENT_ENDPOINT, provider_info("pool"), ContentType::Protobuf)
        .await;
    p.subscribed().await;
    // Resources that are not the caller's.
    let mut foreign = source_disk(10.0, Source::Raw, None);
    foreign.provider_id = Some(Box::new(v1::ResourceProviderId {
        value: "someone-else".to_string(),
    }));
    let (status, body) = p
        .call(rp::Call {
            r#type: Some(rp::call::Type::UpdateState as i32),
            update_state: Some(rp::call::UpdateState {
                operations: vec![],
                resources: vec![foreign],
                resource_version_uuid: v1::Uuid { value: vec![1; 16] },
            }),
            ..Default::default()
        })
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("does not belong"), "{body}");
    // An unknown provider, a wrong stream id, an unknown agent, bad bodies.
    let mut stranger = p.detached();
    stranger.id = "nobody".to_string();
    let (status, body) = stranger.update_state(vec![], 1, vec![]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not subscribed"), "{body}");
    stranger.id = p.id.clone();
    stranger.stream_id = "wrong".to_string();
    let (status, body) = stranger.update_state(vec![], 1, vec![]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("didn't match the stream ID"), "{body}");
    let (status, _) = m
        .http
        .post(format!("{}/slave(99)/api/v1/resource_provider", m.url))
        .header("Content-Type", "application/json")
        .header("Mesos-Stream-Id", "x")
        .body(r#"{"type":"UPDATE_STATE","resource_provider_id":{"value":"x"},"update_state":{"resource_version_uuid":{"value":"AAAAAAAAAAAAAAAAAAAAAA=="}}}"#)
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 404);
    for (body, ct, says) in [
        ("{not json", "application/json", "JSON"),
        ("{}", "application/json", "Expecting 'type' to be present"),
        (
            r#"{"type":"UPDATE_STATE"}"#,
            "application/json",
            "resource_provider_id",
        ),
    ] {
        let resp = m
            .http
            .post(format!("{}{MASTER_ENDPOINT}", m.url))
            .header("Content-Type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
    }
    let resp = m
        .http
        .get(format!("{}{MASTER_ENDPOINT}", m.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
}
