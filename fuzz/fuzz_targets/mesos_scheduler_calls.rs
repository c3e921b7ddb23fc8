//! Fuzz target: bodies of `POST /api/v1/scheduler`, decoded and applied as the
//! route does, against a live master in process (`mesos_common::Live`).
//!
//! Input layout: byte 0 holds flags, the rest is the body.
//! - bit 0: the body's encoding (JSON or protobuf);
//! - bit 1: the call's `framework_id` (and a SUBSCRIBE's or UPDATE_FRAMEWORK's
//!   `framework_info.id`) is replaced by the id of a framework the target keeps
//!   subscribed, so calls reach a live framework instead of "unknown framework";
//! - bit 2: the call goes with that framework's stream id (`Mesos-Stream-Id`);
//! - bit 3: the offer ids of an ACCEPT or DECLINE are replaced by the offers the
//!   framework holds, so the operations in the body are applied to real offers;
//! - bit 4: the virtual clock moves 1-16 s after the call (bits 4-7), so
//!   timers (filters, offer timeouts, status retries) fire.
//!
//! Checked: no panic in any thread (libfuzzer-sys aborts on a panic even where
//! the master's guard would catch it); a body that decodes encodes and decodes
//! back to the same message in both encodings; a call the route would refuse
//! as invalid (`validate_call`) is refused, one it passes gets an answer from
//! the master with a status in 200-599; afterwards the master and the core come
//! to rest and `/state` answers.

#![no_main]

#[macro_use]
mod mesos_common;

use mesos_common::{Live, content_type, round_trips, subscribe_framework};
use unisched_mesos::master::EventReceiver;
use unisched_mesos::master::http::validate_call;
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{Call, call, event};

/// The framework the target keeps subscribed.
struct Ours {
    id: String,
    stream: String,
    events: EventReceiver,
    offers: Vec<v1::OfferId>,
}

struct Target {
    live: Live,
    ours: Option<Ours>,
}

impl Target {
    /// Subscribes our framework when it is gone.
    fn ensure_ours(&mut self) {
        if self.ours.is_some() {
            return;
        }
        let (id, stream, events) = subscribe_framework(&self.live);
        let mut ours = Ours {
            id,
            stream,
            events,
            offers: Vec::new(),
        };
        drain(&mut ours);
        self.ours = Some(ours);
    }

    /// Reads our framework's events; forgets it once its stream ended.
    fn read(&mut self) {
        if let Some(ours) = &mut self.ours
            && !drain(ours)
        {
            self.ours = None;
        }
    }
}

/// Reads the events waiting; false once the stream has ended (ERROR, or closed).
fn drain(ours: &mut Ours) -> bool {
    loop {
        match ours.events.try_recv() {
            Ok(e) => match e.r#type() {
                event::Type::Offers => {
                    for o in e.offers.map(|o| o.offers).unwrap_or_default() {
                        ours.offers.push(o.id);
                    }
                }
                event::Type::Rescind => {
                    if let Some(r) = e.rescind {
                        ours.offers.retain(|o| *o != r.offer_id);
                    }
                }
                event::Type::Error => return false,
                _ => {}
            },
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return true,
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
}

/// Rewrites the call as the flags ask.
fn aim(call: &mut Call, flags: u8, ours: &Ours) {
    if flags & 2 != 0 {
        let id = v1::FrameworkId {
            value: ours.id.clone(),
        };
        call.framework_id = Some(id.clone());
        if let Some(s) = &mut call.subscribe {
            s.framework_info.id = Some(id.clone());
        }
        if let Some(u) = &mut call.update_framework {
            u.framework_info.id = Some(id);
        }
    }
    if flags & 8 != 0 {
        if let Some(a) = &mut call.accept {
            a.offer_ids = ours.offers.clone();
        }
        if let Some(d) = &mut call.decline {
            d.offer_ids = ours.offers.clone();
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
    aim(&mut call, flags, ours);
    let stream = (flags & 4 != 0).then(|| ours.stream.clone());
    if validate_call(&call).is_err() {
        return None;
    }
    if call.r#type() == call::Type::Subscribe {
        let ours_again = call.framework_id.as_ref().map(|f| f.value.as_str())
            == t.ours.as_ref().map(|o| o.id.as_str());
        let subscribe = call.subscribe.take().expect("validated");
        let (stream_id, events) = t.live.master.subscribe(subscribe, 1024);
        if ours_again {
            // A failover of our framework: the new stream is ours.
            if let Some(o) = &mut t.ours {
                o.stream = stream_id;
                o.events = events;
                o.offers.clear();
            }
        }
    } else {
        let answer = t.live.runtime.block_on(t.live.master.call(call, stream));
        if let Err(e) = answer {
            assert!(
                (400..600).contains(&e.status),
                "refused with status {}: {}",
                e.status,
                e.message
            );
        }
    }
    Some(if flags & 16 != 0 {
        u64::from(flags >> 4)
    } else {
        0
    })
}

live_target!();
