//! Fuzz target: bodies of `POST /api/v1/resource_provider` (the master's own
//! endpoint and an agent's, `/slave(1)/api/v1/resource_provider`), decoded,
//! checked and applied as the route does, against a live master in process
//! (`mesos_common::Live`).
//!
//! Input layout: byte 0 holds flags, the rest is the body.
//! - bit 0: the body's encoding (JSON or protobuf);
//! - bit 1: the call goes to the master's endpoint (an external provider)
//!   instead of the agent's;
//! - bit 2: the call's `resource_provider_id` (and a SUBSCRIBE's
//!   `resource_provider_info.id`) is replaced by the id of a local provider
//!   the target keeps subscribed, so calls reach a live provider;
//! - bit 3: the call goes with that provider's stream id;
//! - bits 4-7: the virtual clock moves that many seconds after the call, so
//!   the master's timers (publish timeout, operation retries) fire.
//!
//! Checked: no panic in any thread; a body that decodes encodes and decodes
//! back to the same message in both encodings; a call the route refuses as
//! invalid (`validate_provider_call`) goes no further, one it passes gets an
//! answer with a status in 200-599; afterwards the master and the core come to
//! rest and `/state` answers.

#![no_main]

#[macro_use]
mod mesos_common;

use mesos_common::{Live, content_type, round_trips};
use tokio::sync::mpsc;
use unisched_mesos::master::validate_provider_call;
use unisched_mesos::v1;
use unisched_mesos::v1::resource_provider::{Call, Event, call, event};

/// The agent endpoint `slave(N)` of the world's one agent.
const AGENT_ENDPOINT: u32 = 1;

/// The local provider the target keeps subscribed.
struct Ours {
    id: String,
    stream: String,
    events: mpsc::Receiver<Event>,
}

struct Target {
    live: Live,
    ours: Option<Ours>,
}

impl Target {
    fn ensure_ours(&mut self) {
        if self.ours.is_some() {
            return;
        }
        let info = v1::ResourceProviderInfo {
            r#type: "org.apache.mesos.rp.local.storage".to_string(),
            name: "fuzz".to_string(),
            ..Default::default()
        };
        let (stream, mut events) = self.live.master.provider_subscribe(
            Some(AGENT_ENDPOINT),
            call::Subscribe {
                resource_provider_info: info,
            },
            1024,
        );
        self.live.quiesce();
        let first = events.try_recv().expect("SUBSCRIBED for a valid SUBSCRIBE");
        let id = first
            .subscribed
            .as_ref()
            .map(|s| s.provider_id.value.clone())
            .expect("the first event is SUBSCRIBED");
        self.ours = Some(Ours { id, stream, events });
    }

    /// Reads our provider's events; forgets it once its stream ended.
    fn read(&mut self) {
        let Some(ours) = &mut self.ours else { return };
        loop {
            match ours.events.try_recv() {
                Ok(e) if e.r#type() == event::Type::Teardown => {
                    self.ours = None;
                    return;
                }
                Ok(_) => {}
                Err(mpsc::error::TryRecvError::Empty) => return,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.ours = None;
                    return;
                }
            }
        }
    }
}

fn apply(t: &mut Target, flags: u8, body: &[u8]) -> Option<u64> {
    let ct = content_type(flags);
    let Ok(mut call) = unisched_mesos::codec::decode::<Call>(body, ct) else {
        return None;
    };
    round_trips(&call);
    t.ensure_ours();
    let ours = t.ours.as_ref().expect("subscribed");
    let endpoint = (flags & 2 == 0).then_some(AGENT_ENDPOINT);
    if flags & 4 != 0 {
        let id = v1::ResourceProviderId {
            value: ours.id.clone(),
        };
        call.resource_provider_id = Some(id.clone());
        if let Some(s) = &mut call.subscribe {
            s.resource_provider_info.id = Some(id);
        }
    }
    let stream = (flags & 8 != 0).then(|| ours.stream.clone());
    if validate_provider_call(&call).is_err() {
        return None;
    }
    if call.r#type() == call::Type::Subscribe {
        let again = call
            .subscribe
            .as_ref()
            .and_then(|s| s.resource_provider_info.id.as_ref())
            .map(|i| i.value.as_str())
            == Some(ours.id.as_str());
        let subscribe = call.subscribe.take().expect("validated");
        let (stream_id, events) = t.live.master.provider_subscribe(endpoint, subscribe, 1024);
        if again && endpoint == Some(AGENT_ENDPOINT) {
            // Our provider resubscribing: the new stream is ours.
            if let Some(o) = &mut t.ours {
                o.stream = stream_id;
                o.events = events;
            }
        }
    } else {
        let answer = t
            .live
            .runtime
            .block_on(t.live.master.provider_call(endpoint, call, stream));
        if let Err(e) = answer {
            assert!(
                (400..600).contains(&e.status),
                "refused with status {}: {}",
                e.status,
                e.message
            );
        }
    }
    Some(u64::from(flags >> 4))
}

live_target!();
