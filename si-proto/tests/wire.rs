//! Pins the SI v1 wire encoding byte for byte against hand-computed bytes.
//!
//! Every expected buffer below is written out from the field numbers of upstream
//! YuniKorn `si.proto`: tag = (field_number << 3) | wire_type, with wire type 0
//! for varints (ints, bools, enums) and 2 for length-delimited fields (strings,
//! nested messages, map entries). A map entry is a nested message with the key
//! on field 1 and the value on field 2. If one of these tests fails, a field was
//! renumbered or retyped, which breaks clients generated from upstream.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use prost::Message;
use unisched_si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use unisched_si::node_info::ActionFromRm;
use unisched_si::{
    Allocation, AllocationAsk, AllocationRelease, AllocationRequest, AssumedAllocation,
    EventRecord, ForgotAllocation, NodeInfo, Quantity, ReSyncSchedulerCacheArgs,
    RegisterResourceManagerRequest, RegisterResourceManagerResponse, Resource, TerminationType,
    UpdateConfigurationResponse,
};

/// Asserts that `msg` encodes to exactly `expected` and that `expected` decodes
/// back to `msg`.
fn assert_wire<M>(msg: &M, expected: &[u8])
where
    M: Message + Default + PartialEq + Debug,
{
    assert_eq!(
        msg.encode_to_vec(),
        expected,
        "encoding of {msg:?} differs from the hand-written bytes"
    );
    assert_eq!(msg.encoded_len(), expected.len(), "encoded_len of {msg:?}");
    let decoded = M::decode(expected).expect("hand-written bytes must decode");
    assert_eq!(&decoded, msg, "decoding the hand-written bytes");
}

/// Concatenates byte pieces, so expected buffers read as tag, length, payload.
fn bytes(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `Resource{ resources: {"memory": Quantity{value: 10}} }`.
fn memory_10() -> Resource {
    Resource {
        resources: HashMap::from([("memory".to_owned(), Quantity { value: 10 })]),
    }
}

/// Hand-written encoding of [`memory_10`]: 14 bytes.
fn memory_10_bytes() -> Vec<u8> {
    bytes(&[
        // field 1 (resources), wire type 2: map entry of 12 bytes
        &[0x0A, 0x0C],
        // entry field 1 (key), wire type 2: "memory", 6 bytes
        &[0x0A, 0x06],
        b"memory",
        // entry field 2 (value), wire type 2: Quantity of 2 bytes
        &[0x12, 0x02],
        // Quantity field 1 (value), varint 10
        &[0x08, 0x0A],
    ])
}

#[test]
fn quantity_value_is_a_two_byte_varint_on_field_1() {
    // 1000 = 0b111_1101000: low seven bits 0x68 with the continuation bit
    // (0xE8), then 0x07.
    assert_wire(&Quantity { value: 1000 }, &[0x08, 0xE8, 0x07]);
}

#[test]
fn quantity_negative_value_is_a_ten_byte_varint() {
    // int64 (not sint64): -1 is sign-extended to 64 bits, ten varint bytes.
    assert_wire(
        &Quantity { value: -1 },
        &[
            0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
        ],
    );
}

#[test]
fn default_values_are_not_written() {
    assert_wire(&Quantity { value: 0 }, &[]);
    assert_wire(&RegisterResourceManagerResponse {}, &[]);
    assert_wire(&AllocationAsk::default(), &[]);
}

#[test]
fn resource_map_entry_is_a_nested_message_with_key_1_value_2() {
    let expected = memory_10_bytes();
    assert_eq!(expected.len(), 14);
    assert_wire(&memory_10(), &expected);
}

#[test]
fn allocation_ask_fields() {
    let ask = AllocationAsk {
        allocation_key: "ask-1".to_owned(),
        application_id: "app-1".to_owned(),
        partition_name: "default".to_owned(),
        resource_ask: Some(memory_10()),
        max_allocations: 1,
        priority: 100,
        placeholder: true,
        originator: true,
        ..AllocationAsk::default()
    };
    let expected = bytes(&[
        // 1 allocationKey, wire type 2
        &[0x0A, 0x05],
        b"ask-1",
        // 2 applicationID, wire type 2
        &[0x12, 0x05],
        b"app-1",
        // 3 partitionName, wire type 2
        &[0x1A, 0x07],
        b"default",
        // 4 resourceAsk, wire type 2, 14 bytes
        &[0x22, 0x0E],
        &memory_10_bytes(),
        // 5 maxAllocations, varint 1
        &[0x28, 0x01],
        // 6 priority, varint 100
        &[0x30, 0x64],
        // 10 placeholder: (10 << 3) | 0 = 0x50
        &[0x50, 0x01],
        // 11 Originator: (11 << 3) | 0 = 0x58
        &[0x58, 0x01],
    ]);
    assert_wire(&ask, &expected);
}

#[test]
fn allocation_ask_negative_priority_is_a_ten_byte_varint() {
    let ask = AllocationAsk {
        priority: -1,
        ..AllocationAsk::default()
    };
    // int32 negatives are sign-extended to 64 bits on the wire.
    assert_wire(
        &ask,
        &[
            0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
        ],
    );
}

#[test]
fn allocation_fields_skip_reserved_numbers() {
    let alloc = Allocation {
        allocation_key: "ask-1".to_owned(),
        node_id: "node-1".to_owned(),
        application_id: "app-1".to_owned(),
        allocation_id: "ask-1-0".to_owned(),
        ..Allocation::default()
    };
    let expected = bytes(&[
        // 1 allocationKey
        &[0x0A, 0x05],
        b"ask-1",
        // 8 nodeID: (8 << 3) | 2 = 0x42
        &[0x42, 0x06],
        b"node-1",
        // 9 applicationID: (9 << 3) | 2 = 0x4A
        &[0x4A, 0x05],
        b"app-1",
        // 13 allocationID: (13 << 3) | 2 = 0x6A
        &[0x6A, 0x07],
        b"ask-1-0",
    ]);
    assert_wire(&alloc, &expected);
}

#[test]
fn allocation_from_an_old_client_ignores_reserved_fields() {
    // An old client may still send field 3 (UUID) and 7 (queueName); they
    // are reserved now and must be skipped, not misread.
    let old = bytes(&[
        &[0x0A, 0x01],
        b"k",
        // 3 UUID: (3 << 3) | 2 = 0x1A
        &[0x1A, 0x04],
        b"uuid",
        // 7 queueName: (7 << 3) | 2 = 0x3A
        &[0x3A, 0x01],
        b"q",
        // 8 nodeID
        &[0x42, 0x01],
        b"n",
    ]);
    let decoded = Allocation::decode(old.as_slice()).expect("old bytes decode");
    assert_eq!(
        decoded,
        Allocation {
            allocation_key: "k".to_owned(),
            node_id: "n".to_owned(),
            ..Allocation::default()
        }
    );
}

#[test]
fn allocation_release_termination_type_and_allocation_id() {
    let release = AllocationRelease {
        application_id: "app-1".to_owned(),
        termination_type: TerminationType::PreemptedByScheduler as i32,
        allocation_key: "ask-1".to_owned(),
        allocation_id: "ask-1-0".to_owned(),
        ..AllocationRelease::default()
    };
    assert_eq!(TerminationType::PreemptedByScheduler as i32, 3);
    let expected = bytes(&[
        // 2 applicationID
        &[0x12, 0x05],
        b"app-1",
        // 4 terminationType: (4 << 3) | 0 = 0x20, PREEMPTED_BY_SCHEDULER = 3
        &[0x20, 0x03],
        // 6 allocationKey: (6 << 3) | 2 = 0x32
        &[0x32, 0x05],
        b"ask-1",
        // 7 allocationID: (7 << 3) | 2 = 0x3A
        &[0x3A, 0x07],
        b"ask-1-0",
    ]);
    assert_wire(&release, &expected);
}

#[test]
fn node_info_action_decomission_on_field_2() {
    let node = NodeInfo {
        node_id: "node-1".to_owned(),
        action: ActionFromRm::Decomission as i32,
        ..NodeInfo::default()
    };
    assert_eq!(ActionFromRm::Decomission as i32, 4);
    let expected = bytes(&[
        // 1 nodeID
        &[0x0A, 0x06],
        b"node-1",
        // 2 action: (2 << 3) | 0 = 0x10, DECOMISSION = 4
        &[0x10, 0x04],
    ]);
    assert_wire(&node, &expected);
}

#[test]
fn allocation_request_rm_id_on_field_3() {
    let request = AllocationRequest {
        asks: vec![AllocationAsk {
            allocation_key: "a".to_owned(),
            ..AllocationAsk::default()
        }],
        rm_id: "rm-1".to_owned(),
        ..AllocationRequest::default()
    };
    let expected = bytes(&[
        // 1 asks (repeated message): one AllocationAsk of 3 bytes
        &[0x0A, 0x03],
        // AllocationAsk field 1 allocationKey "a"
        &[0x0A, 0x01],
        b"a",
        // 3 rmID: (3 << 3) | 2 = 0x1A
        &[0x1A, 0x04],
        b"rm-1",
    ]);
    assert_wire(&request, &expected);
}

#[test]
fn register_resource_manager_request_fields() {
    let request = RegisterResourceManagerRequest {
        rm_id: "rm-1".to_owned(),
        version: "v1".to_owned(),
        policy_group: "queues".to_owned(),
        build_info: HashMap::from([("k".to_owned(), "v".to_owned())]),
        ..RegisterResourceManagerRequest::default()
    };
    let expected = bytes(&[
        // 1 rmID
        &[0x0A, 0x04],
        b"rm-1",
        // 2 version
        &[0x12, 0x02],
        b"v1",
        // 3 policyGroup
        &[0x1A, 0x06],
        b"queues",
        // 4 buildInfo: map entry of 6 bytes, key "k" on 1, value "v" on 2
        &[0x22, 0x06],
        &[0x0A, 0x01],
        b"k",
        &[0x12, 0x01],
        b"v",
    ]);
    assert_wire(&request, &expected);
}

#[test]
fn event_record_change_detail_is_a_two_byte_varint() {
    let event = EventRecord {
        r#type: EventType::App as i32,
        object_id: "app-1".to_owned(),
        event_change_type: ChangeType::Remove as i32,
        event_change_detail: ChangeDetail::AllocNoderemoved as i32,
        reference_id: "alloc-1".to_owned(),
        ..EventRecord::default()
    };
    assert_eq!(ChangeDetail::AllocNoderemoved as i32, 504);
    let expected = bytes(&[
        // 1 type: APP = 2
        &[0x08, 0x02],
        // 2 objectID
        &[0x12, 0x05],
        b"app-1",
        // 7 eventChangeType: (7 << 3) | 0 = 0x38, REMOVE = 3
        &[0x38, 0x03],
        // 8 eventChangeDetail: (8 << 3) | 0 = 0x40; 504 = 0b11_1111000:
        // 0x78 | 0x80 = 0xF8, then 504 >> 7 = 3
        &[0x40, 0xF8, 0x03],
        // 9 referenceID: (9 << 3) | 2 = 0x4A
        &[0x4A, 0x07],
        b"alloc-1",
    ]);
    assert_wire(&event, &expected);
}

#[test]
fn update_configuration_response_fields() {
    let response = UpdateConfigurationResponse {
        success: true,
        old_config: "a: 1".to_owned(),
        reason: "bad".to_owned(),
    };
    let expected = bytes(&[
        // 1 success: varint true
        &[0x08, 0x01],
        // 2 oldConfig
        &[0x12, 0x04],
        b"a: 1",
        // 3 reason
        &[0x1A, 0x03],
        b"bad",
    ]);
    assert_wire(&response, &expected);
}

#[test]
fn resync_scheduler_cache_args_fields() {
    let args = ReSyncSchedulerCacheArgs {
        assumed_allocations: vec![AssumedAllocation {
            allocation_key: "k1".to_owned(),
            node_id: "n1".to_owned(),
        }],
        forget_allocations: vec![ForgotAllocation {
            allocation_key: "k2".to_owned(),
        }],
    };
    let expected = bytes(&[
        // 1 assumedAllocations: AssumedAllocation of 8 bytes
        &[0x0A, 0x08],
        // AssumedAllocation 1 allocationKey, 2 nodeID
        &[0x0A, 0x02],
        b"k1",
        &[0x12, 0x02],
        b"n1",
        // 2 forgetAllocations: ForgotAllocation of 4 bytes
        &[0x12, 0x04],
        // ForgotAllocation 1 allocationKey
        &[0x0A, 0x02],
        b"k2",
    ]);
    assert_wire(&args, &expected);
}

#[test]
fn service_names_match_upstream_package() {
    assert_eq!(
        unisched_si::scheduler_server::SERVICE_NAME,
        "si.v1.Scheduler"
    );
    assert_eq!(
        unisched_si::scheduler_callback_server::SERVICE_NAME,
        "si.v1.SchedulerCallback"
    );
}

/// A transport that records the request path and fails the call at once, so a
/// generated client can be driven without a network or an async runtime.
#[derive(Clone, Default)]
struct PathRecorder {
    path: Arc<Mutex<Option<String>>>,
}

impl tonic::codegen::Service<tonic::codegen::http::Request<tonic::body::Body>> for PathRecorder {
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = tonic::codegen::StdError;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        *self.path.lock().expect("path lock") = Some(req.uri().path().to_owned());
        std::future::ready(Err("recorded; no transport".into()))
    }
}

/// Polls a future that never waits on I/O to completion.
fn run_ready<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..64 {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("future did not complete without a runtime");
}

#[test]
fn register_resource_manager_grpc_path() {
    let recorder = PathRecorder::default();
    let mut client = unisched_si::scheduler_client::SchedulerClient::new(recorder.clone());
    let result = run_ready(
        client.register_resource_manager(RegisterResourceManagerRequest {
            rm_id: "rm-1".to_owned(),
            ..RegisterResourceManagerRequest::default()
        }),
    );
    assert!(result.is_err(), "the recorder fails every call");
    assert_eq!(
        recorder.path.lock().expect("path lock").as_deref(),
        Some("/si.v1.Scheduler/RegisterResourceManager")
    );
}
