//! Fuzz target: bodies of `POST /api/v1` (Mesos' operator API), decoded,
//! checked and answered as the route does, against a live master in process
//! (`mesos_common::Live`) with a framework it keeps subscribed.
//!
//! Input layout: byte 0 holds flags, the rest is the body.
//! - bit 0: the body's encoding (JSON or protobuf);
//! - bit 1: a TEARDOWN's framework id is replaced by the kept framework's,
//!   so teardowns reach a live framework (which is then subscribed again);
//! - bit 2: the agent id of an operation on an agent's resources
//!   (RESERVE_RESOURCES, CREATE_VOLUMES, ...) or of a call that takes an
//!   agent out of service (DRAIN_AGENT, DEACTIVATE_AGENT, REACTIVATE_AGENT,
//!   MARK_AGENT_GONE) is replaced by the live agent's (gone, it stays gone
//!   until the world is rebuilt);
//! - bits 4-7: the virtual clock moves that many seconds after the call.
//!
//! Checked: no panic in any thread; a body that decodes encodes and decodes
//! back to the same message in both encodings; a call the route refuses as
//! invalid (`operator::validate`) goes no further; one it passes is answered
//! (a response of the call's type, an empty one for the calls that change
//! something, or a refusal with a status in 400-599);
//! a SUBSCRIBE's first event is SUBSCRIBED; afterwards the master and the
//! core come to rest and `/state` answers.

#![no_main]

#[macro_use]
mod mesos_common;

use mesos_common::{Live, content_type, round_trips, subscribe_framework};
use tokio::sync::mpsc;
use unisched_mesos::master::EventReceiver;
use unisched_mesos::master::operator::validate;
use unisched_mesos::master::report::Query;
use unisched_mesos::v1::master::{Call, call, event};

struct Target {
    live: Live,
    /// The kept framework's id and its events.
    ours: Option<(String, EventReceiver)>,
}

impl Target {
    fn ensure_ours(&mut self) {
        if self.ours.is_some() {
            return;
        }
        let (id, _, events) = subscribe_framework(&self.live);
        self.ours = Some((id, events));
    }

    /// Reads the kept framework's events; forgets it once its stream ended.
    fn read(&mut self) {
        let Some((_, events)) = &mut self.ours else {
            return;
        };
        loop {
            match events.try_recv() {
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
    if flags & 2 != 0
        && let (Some(teardown), Some((id, _))) = (&mut call.teardown, &t.ours)
    {
        teardown.framework_id.value = id.clone();
    }
    if flags & 4 != 0 {
        let id = t.live.agent.clone();
        for agent in [
            call.reserve_resources.as_mut().map(|c| &mut c.agent_id),
            call.unreserve_resources.as_mut().map(|c| &mut c.agent_id),
            call.create_volumes.as_mut().map(|c| &mut c.agent_id),
            call.destroy_volumes.as_mut().map(|c| &mut c.agent_id),
            call.grow_volume.as_mut().and_then(|c| c.agent_id.as_mut()),
            call.shrink_volume
                .as_mut()
                .and_then(|c| c.agent_id.as_mut()),
            call.drain_agent.as_mut().map(|c| &mut c.agent_id),
            call.deactivate_agent.as_mut().map(|c| &mut c.agent_id),
            call.reactivate_agent.as_mut().map(|c| &mut c.agent_id),
            call.mark_agent_gone.as_mut().map(|c| &mut c.agent_id),
        ]
        .into_iter()
        .flatten()
        {
            agent.value = id.clone();
        }
    }
    if validate(&call).is_err() {
        return None;
    }
    let live = &t.live;
    match call.r#type() {
        call::Type::Subscribe => {
            let (sink, mut events) = mpsc::channel(1024);
            live.master.send(unisched_mesos::master::Input::Query(
                Query::OperatorSubscribe(sink),
            ));
            live.quiesce();
            let first = events.try_recv().expect("SUBSCRIBED for a SUBSCRIBE");
            assert_eq!(first.r#type(), event::Type::Subscribed);
        }
        call::Type::GetQuota => {
            let status = live.runtime.block_on(live.master.quota());
            assert!(status.is_some(), "GET_QUOTA answered");
        }
        kind => {
            let answer = live
                .runtime
                .block_on(
                    live.master
                        .query(|reply| Query::Operator(Box::new(call), reply)),
                )
                .expect("the master answers");
            match answer {
                Ok(r) => assert!(
                    unisched_mesos::master::operator::empty_answer(kind).is_some()
                        || r.r#type().as_str_name() == kind.as_str_name(),
                    "{kind:?} answered with {:?}",
                    r.r#type()
                ),
                Err(e) => assert!(
                    (400..600).contains(&e.status),
                    "refused with status {}: {}",
                    e.status,
                    e.message
                ),
            }
        }
    }
    Some(u64::from(flags >> 4))
}

live_target!();
