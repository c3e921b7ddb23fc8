//! The JSON and protobuf codecs against Mesos' mapping: round trips of
//! scheduler calls and events, field names and enum names, defaults, unknown
//! fields, required fields, and `Accept` negotiation.

use prost::Message;
use prost_reflect::ReflectMessage;
use unisched_mesos::codec::{self, ContentType, accept_negotiation};
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, Event, call, event};

/// Decodes JSON text as `T` and writes it back: the text Mesos would send.
fn json_round<T: Message + ReflectMessage + Default>(input: &str) -> String {
    let message: T = codec::decode(input.as_bytes(), ContentType::Json)
        .unwrap_or_else(|e| panic!("{input}: {e}"));
    String::from_utf8(codec::encode(&message, ContentType::Json)).unwrap()
}

/// Decoding `input` as `T` fails with exactly `expect`.
fn check_error<T: Message + ReflectMessage + Default + std::fmt::Debug>(
    input: &[u8],
    content_type: ContentType,
    expect: &str,
) {
    let err = codec::decode::<T>(input, content_type).unwrap_err();
    assert_eq!(
        err.to_string(),
        expect,
        "{}",
        String::from_utf8_lossy(input)
    );
}

fn json<T: Message + ReflectMessage>(message: &T) -> String {
    String::from_utf8(codec::encode_json(message)).unwrap()
}

#[test]
fn subscribe_round_trip_writes_defaults_and_enum_names() {
    let cases = [
        (
            r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"root","name":"spark",
                "roles":["r1"],"capabilities":[{"type":"MULTI_ROLE"}]}}}"#,
            // failover_timeout and checkpoint have explicit defaults: stout writes them.
            r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"root","name":"spark","failover_timeout":0.0,"checkpoint":false,"roles":["r1"],"capabilities":[{"type":"MULTI_ROLE"}]}}}"#,
        ),
        (
            // Keys in any order come out in declaration order.
            r#"{"subscribe":{"framework_info":{"name":"n","user":"u","failover_timeout":604800,
                "id":{"value":"f-1"},"offer_filters":{"r1":{"min_allocatable_resources":
                {"quantities":[{"quantities":{"cpus":{"value":0.5}}}]}}}}},"type":"SUBSCRIBE"}"#,
            r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"u","name":"n","id":{"value":"f-1"},"failover_timeout":604800.0,"checkpoint":false,"offer_filters":{"r1":{"min_allocatable_resources":{"quantities":[{"quantities":{"cpus":{"value":0.5}}}]}}}}}}"#,
        ),
    ];
    for (input, expect) in cases {
        assert_eq!(json_round::<Call>(input), expect);
    }
}

#[test]
fn accept_with_launch_keeps_container_and_health_check() {
    let input = r#"{
      "framework_id": {"value": "fw-1"},
      "type": "ACCEPT",
      "accept": {
        "offer_ids": [{"value": "o-1"}],
        "operations": [{
          "type": "LAUNCH",
          "launch": {"task_infos": [{
            "name": "web",
            "task_id": {"value": "t-1"},
            "agent_id": {"value": "a-1"},
            "resources": [
              {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}},
              {"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 31000, "end": 31001}]}}
            ],
            "command": {"value": "python -m http.server $PORT0", "shell": true},
            "container": {"type": "DOCKER", "docker": {"image": "python:3", "network": "BRIDGE",
              "port_mappings": [{"host_port": 31000, "container_port": 8000, "protocol": "tcp"}]}},
            "health_check": {"type": "HTTP", "http": {"port": 8000, "path": "/"}},
            "labels": {"labels": [{"key": "team", "value": "a"}]},
            "data": "aGVsbG8="
          }]}
        }],
        "filters": {"refuse_seconds": "10"}
      }
    }"#;
    let call: Call = codec::decode(input.as_bytes(), ContentType::Json).unwrap();
    assert_eq!(call.r#type(), call::Type::Accept);
    let accept = call.accept.as_ref().unwrap();
    assert_eq!(accept.filters.as_ref().unwrap().refuse_seconds, Some(10.0));
    let op = &accept.operations[0];
    assert_eq!(op.r#type(), v1::offer::operation::Type::Launch);
    let task = &op.launch.as_ref().unwrap().task_infos[0];
    assert_eq!(task.data.as_deref(), Some(&b"hello"[..]));
    let docker = task.container.as_ref().unwrap().docker.as_ref().unwrap();
    assert_eq!(docker.image, "python:3");
    assert_eq!(docker.port_mappings[0].container_port, 8000);

    // Through JSON and protobuf and back: nothing lost. JSON makes explicit
    // defaults explicit (as stout does), so the JSON form is the fixpoint.
    let text = json(&call);
    let again: Call = codec::decode(text.as_bytes(), ContentType::Json).unwrap();
    assert_eq!(json(&again), text);
    let again_task = &again.accept.as_ref().unwrap().operations[0]
        .launch
        .as_ref()
        .unwrap()
        .task_infos[0];
    assert_eq!(
        again_task.health_check.as_ref().unwrap().delay_seconds(),
        15.0
    );
    let bytes = codec::encode(&call, ContentType::Protobuf);
    assert_eq!(
        codec::decode::<Call>(&bytes, ContentType::Protobuf).unwrap(),
        call
    );

    for expect in [
        r#""scalar":{"value":1.0}"#,
        r#""range":[{"begin":31000,"end":31001}]"#,
        r#""network":"BRIDGE""#,
        // HealthCheck's defaults are written, as stout does.
        r#""health_check":{"delay_seconds":15.0,"interval_seconds":10.0,"timeout_seconds":20.0,"consecutive_failures":3,"grace_period_seconds":10.0,"type":"HTTP","http":{"protocol":"IPv4","port":8000,"path":"/"}}"#,
        r#""data":"aGVsbG8=""#,
        r#""filters":{"refuse_seconds":10.0}"#,
    ] {
        assert!(text.contains(expect), "{expect} not in {text}");
    }
}

fn update_event(uuid: Vec<u8>) -> Event {
    Event {
        r#type: Some(event::Type::Update as i32),
        update: Some(event::Update {
            status: v1::TaskStatus {
                task_id: v1::TaskId {
                    value: "t-1".into(),
                },
                state: v1::TaskState::TaskRunning as i32,
                source: Some(v1::task_status::Source::Executor as i32),
                reason: Some(v1::task_status::Reason::Reconciliation as i32),
                agent_id: Some(v1::AgentId {
                    value: "a-1".into(),
                }),
                timestamp: Some(1_700_000_000.25),
                uuid: Some(uuid),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

#[test]
fn events_write_enum_names_and_base64() {
    let offers = Event {
        r#type: Some(event::Type::Offers as i32),
        offers: Some(event::Offers {
            offers: vec![v1::Offer {
                id: v1::OfferId {
                    value: "o-1".into(),
                },
                framework_id: v1::FrameworkId { value: "f".into() },
                agent_id: v1::AgentId { value: "a".into() },
                hostname: "h".into(),
                resources: vec![v1::Resource {
                    name: "mem".into(),
                    r#type: v1::value::Type::Scalar as i32,
                    scalar: Some(v1::value::Scalar { value: 1024.0 }),
                    allocation_info: Some(v1::resource::AllocationInfo {
                        role: Some("r".into()),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }),
        ..Default::default()
    };
    let cases = [
        (
            offers,
            r#"{"type":"OFFERS","offers":{"offers":[{"id":{"value":"o-1"},"framework_id":{"value":"f"},"agent_id":{"value":"a"},"hostname":"h","resources":[{"name":"mem","type":"SCALAR","scalar":{"value":1024.0},"allocation_info":{"role":"r"}}]}]}}"#,
        ),
        (
            update_event((0u8..16).collect()),
            r#"{"type":"UPDATE","update":{"status":{"task_id":{"value":"t-1"},"state":"TASK_RUNNING","source":"SOURCE_EXECUTOR","reason":"REASON_RECONCILIATION","agent_id":{"value":"a-1"},"timestamp":1700000000.25,"uuid":"AAECAwQFBgcICQoLDA0ODw=="}}}"#,
        ),
        (
            Event {
                r#type: Some(event::Type::Heartbeat as i32),
                ..Default::default()
            },
            r#"{"type":"HEARTBEAT"}"#,
        ),
    ];
    for (event, expect) in cases {
        let text = json(&event);
        assert_eq!(text, expect);
        let back: Event = codec::decode(text.as_bytes(), ContentType::Json).unwrap();
        assert_eq!(back, event);
        let bytes = codec::encode(&event, ContentType::Protobuf);
        assert_eq!(
            codec::decode::<Event>(&bytes, ContentType::Protobuf).unwrap(),
            event
        );
    }
}

#[test]
fn int64_is_a_number_both_ways() {
    let time = v1::TimeInfo {
        nanoseconds: 1_600_000_000_123_456_789,
    };
    assert_eq!(json(&time), r#"{"nanoseconds":1600000000123456789}"#);
    for input in [
        r#"{"nanoseconds":1600000000123456789}"#,
        r#"{"nanoseconds":"1600000000123456789"}"#,
    ] {
        assert_eq!(
            codec::decode::<v1::TimeInfo>(input.as_bytes(), ContentType::Json).unwrap(),
            time
        );
    }
    let negative = v1::DurationInfo { nanoseconds: -5 };
    assert_eq!(json(&negative), r#"{"nanoseconds":-5}"#);
    assert_eq!(
        json_round::<v1::DurationInfo>(r#"{"nanoseconds":-5}"#),
        r#"{"nanoseconds":-5}"#
    );
}

#[test]
fn input_leniency_follows_stout() {
    let cases = [
        // Unknown keys, nested or not, are ignored.
        (
            r#"{"framework_id":{"value":"f","x":1},"type":"DECLINE","bogus":[1,{"a":2}],
               "decline":{"offer_ids":[{"value":"o1"}],"extra":{"a":[1]}}}"#,
            r#"{"framework_id":{"value":"f"},"type":"DECLINE","decline":{"offer_ids":[{"value":"o1"}]}}"#,
        ),
        // null is unset; an unknown name of an optional enum is dropped.
        (r#"{"type":"NO_SUCH_CALL","framework_id":null}"#, r#"{}"#),
        // A single value for a repeated field adds one element; arrays flatten.
        (
            r#"{"type":"REVIVE","revive":{"roles":"a"}}"#,
            r#"{"type":"REVIVE","revive":{"roles":["a"]}}"#,
        ),
        (
            r#"{"type":"SUPPRESS","suppress":{"roles":[["a","b"],"c"]}}"#,
            r#"{"type":"SUPPRESS","suppress":{"roles":["a","b","c"]}}"#,
        ),
        // Booleans and numbers from strings; a fraction in an integer truncates.
        (
            r#"{"type":"KILL","kill":{"task_id":{"value":"t"},"kill_policy":{"grace_period":{"nanoseconds":2.9}}}}"#,
            r#"{"type":"KILL","kill":{"task_id":{"value":"t"},"kill_policy":{"grace_period":{"nanoseconds":2}}}}"#,
        ),
    ];
    for (input, expect) in cases {
        assert_eq!(json_round::<Call>(input), expect, "{input}");
    }
    assert_eq!(
        json_round::<v1::CommandInfo>(r#"{"shell":"false","uris":[{"value":"u","cache":"true"}]}"#),
        r#"{"uris":[{"value":"u","extract":true,"cache":true}],"shell":false}"#
    );
}

#[test]
fn decode_errors_read_like_upstream() {
    let json_cases = [
        (
            "{",
            "Failed to parse body into JSON: EOF while parsing an object at line 1 column 1",
        ),
        (
            "[]",
            "Failed to convert JSON into Call protobuf: Expecting a JSON object",
        ),
        (
            r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x"}}}"#,
            "Failed to convert JSON into Call protobuf: Missing required fields: subscribe.framework_info.user",
        ),
        (
            r#"{"type":"ACCEPT","accept":{"offer_ids":[{"value":"o"},{}],"operations":[{"type":"LAUNCH","launch":{"task_infos":[{"name":"t"}]}}]}}"#,
            "Failed to convert JSON into Call protobuf: Missing required fields: \
             accept.offer_ids[1].value, accept.operations[0].launch.task_infos[0].task_id, \
             accept.operations[0].launch.task_infos[0].agent_id",
        ),
        (
            r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"u","name":["x"]}}}"#,
            "Failed to convert JSON into Call protobuf: Not expecting a JSON array for field 'subscribe.framework_info.name'",
        ),
        (
            r#"{"type":1}"#,
            "Failed to convert JSON into Call protobuf: Not expecting a JSON number for field 'type'",
        ),
        (
            r#"{"framework_id":"f"}"#,
            "Failed to convert JSON into Call protobuf: Not expecting a JSON string for field 'framework_id'",
        ),
        (
            r##"{"message":{"agent_id":{"value":"a"},"executor_id":{"value":"e"},"data":"#!"}}"##,
            "Failed to convert JSON into Call protobuf: Failed to base64 decode bytes field 'message.data': Invalid character '#'",
        ),
        (
            r#"{"decline":{"filters":{"refuse_seconds":"soon"}}}"#,
            "Failed to convert JSON into Call protobuf: Failed to parse 'soon' as a JSON number for field 'decline.filters.refuse_seconds': expected value at line 1 column 1",
        ),
    ];
    for (input, expect) in json_cases {
        check_error::<Call>(input.as_bytes(), ContentType::Json, expect);
    }
    // A required enum with an unknown name fails.
    check_error::<v1::TaskStatus>(
        br#"{"task_id":{"value":"t"},"state":"TASK_SLEEPING"}"#,
        ContentType::Json,
        "Failed to convert JSON into TaskStatus protobuf: Failed to find enum for 'TASK_SLEEPING' (field 'state')",
    );

    // Protobuf: type = SUBSCRIBE, subscribe { framework_info { name: "x" } }.
    let missing_user = [0x10, 0x01, 0x1a, 0x05, 0x0a, 0x03, 0x12, 0x01, b'x'];
    check_error::<Call>(
        &missing_user,
        ContentType::Protobuf,
        "Failed to parse body into Call protobuf: Missing required fields: subscribe.framework_info.user",
    );
    let truncated = [0x1a, 0x05, 0x0a];
    let err = codec::decode::<Call>(&truncated, ContentType::Protobuf).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Failed to parse body into Call protobuf: "),
        "{err}"
    );
}

#[test]
fn field_numbers_are_upstreams() {
    let info = v1::FrameworkInfo {
        user: "u".into(),
        name: "n".into(),
        id: Some(v1::FrameworkId { value: "f".into() }),
        failover_timeout: Some(1.0),
        checkpoint: Some(true),
        roles: vec!["r".into()],
        capabilities: vec![v1::framework_info::Capability {
            r#type: Some(v1::framework_info::capability::Type::MultiRole as i32),
        }],
        ..Default::default()
    };
    let status = v1::TaskStatus {
        task_id: v1::TaskId { value: "t".into() },
        state: v1::TaskState::TaskLost as i32,
        reason: Some(v1::task_status::Reason::InvalidOffers as i32),
        uuid: Some(vec![0xab]),
        ..Default::default()
    };
    let call = Call {
        r#type: Some(call::Type::Decline as i32),
        decline: Some(call::Decline {
            offer_ids: vec![v1::OfferId { value: "o".into() }],
            filters: Some(v1::Filters {
                refuse_seconds: Some(0.0),
            }),
        }),
        ..Default::default()
    };
    let cases: [(Vec<u8>, &str); 3] = [
        (
            info.encode_to_vec(),
            // user=1, name=2, id=3, failover_timeout=4 (double 1.0), checkpoint=5,
            // capabilities=10 { type=1: MULTI_ROLE=6 }, roles=12 (prost writes by number).
            "0a0175 12016e 1a030a0166 21000000000000f03f 2801 52020806 620172",
        ),
        (
            status.encode_to_vec(),
            // task_id=1, state=2 (TASK_LOST=5), reason=10 (INVALID_OFFERS=6), uuid=11.
            "0a030a0174 1005 5006 5a01ab",
        ),
        (
            call.encode_to_vec(),
            // type=2 (DECLINE=4), decline=5 { offer_ids=1, filters=2 { refuse_seconds=1 } }.
            "1004 2a10 0a030a016f 1209 090000000000000000",
        ),
    ];
    for (bytes, expect) in cases {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expect.replace(' ', ""));
    }
}

#[test]
fn accept_negotiation_follows_libprocess() {
    use ContentType::{Json, Protobuf};
    let cases = [
        (None, Some(Json)),
        (Some("*/*"), Some(Json)),
        (Some("application/json"), Some(Json)),
        (Some("application/x-protobuf"), Some(Protobuf)),
        (Some("application/*"), Some(Json)),
        (Some("Application/JSON; charset=utf-8"), Some(Json)),
        (Some("application/x-protobuf, application/json"), Some(Json)),
        // q only matters when zero; JSON wins whenever acceptable.
        (
            Some("application/x-protobuf;q=1, application/json;q=0.1"),
            Some(Json),
        ),
        (
            Some("application/json;q=0, application/x-protobuf"),
            Some(Protobuf),
        ),
        (Some("application/json; q=0.0, */*"), Some(Protobuf)),
        (
            Some("application/*;q=0, application/x-protobuf"),
            Some(Protobuf),
        ),
        (Some("*/*;q=0"), None),
        (Some("text/html"), None),
        (Some("application/json;q=zero"), None),
        (Some("application/json;q="), Some(Json)),
        (Some(""), None),
    ];
    for (accept, expect) in cases {
        assert_eq!(accept_negotiation(accept), expect, "{accept:?}");
    }
    assert_eq!(Json.mime(), "application/json");
    assert_eq!(Protobuf.mime(), "application/x-protobuf");
}

#[test]
fn content_type_header_ignores_parameters() {
    let cases = [
        ("application/json", Ok(ContentType::Json)),
        ("application/json; charset=utf-8", Ok(ContentType::Json)),
        ("APPLICATION/X-PROTOBUF", Ok(ContentType::Protobuf)),
        ("text/plain", Err(())),
        ("", Err(())),
    ];
    for (header, expect) in cases {
        assert_eq!(
            ContentType::from_content_type_header(header).map_err(|_| ()),
            expect,
            "{header}"
        );
    }
    assert_eq!(
        ContentType::from_content_type_header("text/plain")
            .unwrap_err()
            .to_string(),
        "Expecting 'Content-Type' of application/json or application/x-protobuf"
    );
}

#[test]
fn to_json_value_embeds_messages() {
    let labels = v1::Labels {
        labels: vec![v1::Label {
            key: "k".into(),
            value: Some("v".into()),
        }],
    };
    assert_eq!(
        codec::to_json_value(&labels),
        serde_json::json!({"labels": [{"key": "k", "value": "v"}]})
    );
}

#[test]
fn every_generated_message_has_its_descriptor() {
    let cases: [(&dyn Fn() -> String, &str); 4] = [
        (
            &|| Call::default().descriptor().full_name().to_string(),
            "mesos.v1.scheduler.Call",
        ),
        (
            &|| {
                v1::offer::operation::LaunchGroup::default()
                    .descriptor()
                    .full_name()
                    .to_string()
            },
            "mesos.v1.Offer.Operation.LaunchGroup",
        ),
        (
            &|| {
                unisched_mesos::v1::resource_provider::event::ApplyOperation::default()
                    .descriptor()
                    .full_name()
                    .to_string()
            },
            "mesos.v1.resource_provider.Event.ApplyOperation",
        ),
        (
            &|| {
                unisched_mesos::v1::master::Call::default()
                    .descriptor()
                    .full_name()
                    .to_string()
            },
            "mesos.v1.master.Call",
        ),
    ];
    for (name, expect) in cases {
        assert_eq!(name(), expect);
    }
}

/// Where Mesos' mapping and the canonical proto3 JSON mapping coincide
/// (field names as in the proto, 64-bit integers as numbers, no explicit
/// defaults involved), our encoder agrees with prost-reflect's.
#[test]
fn agrees_with_prost_reflect_where_the_mappings_coincide() {
    let options = prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false)
        .skip_default_fields(true);
    let reflect_json = |message: &dyn Fn() -> prost_reflect::DynamicMessage| {
        let mut serializer = serde_json::Serializer::new(Vec::new());
        message()
            .serialize_with_options(&mut serializer, &options)
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&serializer.into_inner()).unwrap()
    };
    let update = update_event(vec![1, 2, 3, 250]);
    assert_eq!(
        codec::to_json_value(&update),
        reflect_json(&|| update.transcode_to_dynamic())
    );
    let time = v1::TimeInfo {
        nanoseconds: i64::MIN,
    };
    assert_eq!(
        codec::to_json_value(&time),
        reflect_json(&|| time.transcode_to_dynamic())
    );
    let ranges = v1::Resource {
        name: "ports".into(),
        r#type: v1::value::Type::Ranges as i32,
        ranges: Some(v1::value::Ranges {
            range: vec![v1::value::Range {
                begin: 0,
                end: u64::MAX,
            }],
        }),
        reservations: vec![v1::resource::ReservationInfo {
            r#type: Some(v1::resource::reservation_info::Type::Dynamic as i32),
            role: Some("r".into()),
            labels: Some(v1::Labels {
                labels: vec![v1::Label {
                    key: "k\n\"".into(),
                    value: None,
                }],
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        codec::to_json_value(&ranges),
        reflect_json(&|| ranges.transcode_to_dynamic())
    );
}

/// A double given as an integer too large for 64 bits, or as a decimal,
/// decodes to the nearest double: written back and read again it stays the
/// same (CI's fuzzing found `111111111111111111111110` read one step off the
/// nearest double, and then its own text read one step back).
#[test]
fn large_and_decimal_doubles_read_exactly() {
    for (text, value) in [
        ("111111111111111111111110", 1.1111111111111111e23),
        ("1.1111111111111113e+23", 1.1111111111111113e23),
        ("0.30000000000000004", 0.30000000000000004),
        ("18446744073709551616", 18446744073709551616.0),
        ("2.2250738585072014e-308", 2.2250738585072014e-308),
    ] {
        let input = format!(
            r#"{{"framework_id":{{"value":"x"}},"type":"DECLINE","decline":{{"offer_ids":[{{"value":"o"}}],"filters":{{"refuse_seconds":{text}}}}}}}"#
        );
        let call: Call = codec::decode(input.as_bytes(), ContentType::Json).unwrap();
        let got = call
            .decline
            .as_ref()
            .unwrap()
            .filters
            .as_ref()
            .unwrap()
            .refuse_seconds;
        assert_eq!(got.map(f64::to_bits), Some(f64::to_bits(value)), "{text}");
        let once = json_round::<Call>(&input);
        assert_eq!(json_round::<Call>(&once), once, "{text}");
    }
}

/// Maps are written in key order, and a value equal to its type's default
/// (which prost leaves out of the entry) keeps its required fields: a
/// quota of 0 cpus is `{"value":0.0}` and reads back the same.
#[test]
fn maps_are_ordered_and_default_values_keep_required_fields() {
    use unisched_mesos::v1::quota::QuotaConfig;
    use unisched_mesos::v1::value::Scalar;
    let config = QuotaConfig {
        role: "r".to_string(),
        guarantees: [
            ("mem".to_string(), Scalar { value: 64.0 }),
            ("cpus".to_string(), Scalar { value: 0.0 }),
        ]
        .into_iter()
        .collect(),
        limits: Default::default(),
    };
    let text = json(&config);
    assert_eq!(
        text,
        r#"{"role":"r","guarantees":{"cpus":{"value":0.0},"mem":{"value":64.0}}}"#
    );
    let back: QuotaConfig = codec::decode(text.as_bytes(), ContentType::Json).unwrap();
    assert_eq!(back, config);
    assert_eq!(json_round::<QuotaConfig>(&text), text);
}
