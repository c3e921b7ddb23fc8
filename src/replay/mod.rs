//! Replays a [`Trace`] against a fresh in-process core on a virtual clock,
//! through the public API only, playing the RM: applications and asks are
//! sent at their time, each allocation is released when its task's run time
//! is over, nodes join and leave as the trace says, preemptions and
//! placeholder replacements are confirmed (a preempted task is sent again,
//! as a controller restarts its pod).
//!
//! # Steps
//! Time moves in steps of `tick` (records and task ends are rounded up to
//! the next tick). A step at time `t` moves the clock to `t` and then:
//! - when only asks and releases are due, sends them in one request and
//!   settles: the core applies the request, then fires its timers at `t`,
//!   then schedules;
//! - when nodes change or applications are new, first wakes the core and
//!   settles (its timers at `t` fire and it schedules), then sends the node
//!   changes and settles, then adds the applications and sends the request,
//!   and settles.
//!
//! Then it sends confirmations and resubmissions until a settle brings none.
//! Each settle ends a phase in which the core got one batch of work whose
//! outcome does not depend on thread timing (an application added without
//! asks changes nothing a pass would do at the same time), so a replay makes
//! the same decisions every time: the core is deterministic for the same
//! requests in the same order. While allocations wait, the clock also stops
//! between records (every tick, backing off to every 8 ticks while nothing
//! changes) so the core's own timers get their chance.

pub mod inbox;
pub mod outcome;
pub mod rm;
mod running;

use std::sync::Arc;
use std::time::{Duration, Instant};

use unisched_core::{Clock, ManualClock, Scheduler, SchedulerOptions};
use unisched_shim_api::{ResourceManagerCallback, SchedulerApi, SchedulerError};
use unisched_si as si;

use crate::trace::{Event, Trace};
use inbox::ReplayCallback;
pub use outcome::{Counts, Outcome, QueueLimits, Sample};
use rm::Rm;

/// The rmID the replay registers as.
pub const RM_ID: &str = "unisched-simulate";
/// Virtual time of the trace's first record: 2024-01-01T00:00:00Z.
const START_NANOS: u64 = 1_704_067_200_000_000_000;

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Queue configuration YAML.
    pub config: String,
    /// Partition of the applications and nodes.
    pub partition: String,
    /// Step of the virtual clock, milliseconds.
    pub tick_ms: u64,
    /// About how many samples the time series get.
    pub samples: u64,
    /// After the last record, how long allocations may wait with nothing
    /// running before the replay gives up on them.
    pub patience_ms: u64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            config: String::new(),
            partition: "default".to_string(),
            tick_ms: 1_000,
            samples: 400,
            patience_ms: 15 * 60_000,
        }
    }
}

/// Progress of a replay, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Virtual time reached, milliseconds.
    pub now_ms: u64,
    /// Time of the trace's last record.
    pub span_ms: u64,
    /// Allocations so far.
    pub allocations: u64,
    /// Allocations running.
    pub running: u64,
    /// Allocations waiting.
    pub pending: u64,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The core refused a call (an invalid configuration at registration, ...).
    #[error("{step}: {source}")]
    Scheduler {
        /// What the RM was doing.
        step: &'static str,
        /// The core's answer.
        #[source]
        source: SchedulerError,
    },
}

/// A replay in progress: the core, its clock and the RM (its books are in
/// the callback).
struct Replay {
    scheduler: Scheduler,
    clock: Arc<ManualClock>,
    callback: Arc<ReplayCallback>,
    now: u64,
}

impl Replay {
    fn books(&self) -> std::sync::MutexGuard<'_, Rm> {
        self.callback.books()
    }

    fn settle(&mut self) {
        self.scheduler.settle();
        self.books().out.counts.settles += 1;
    }

    fn call(
        &self,
        step: &'static str,
        result: Result<(), SchedulerError>,
    ) -> Result<(), ReplayError> {
        result.map_err(|source| ReplayError::Scheduler { step, source })
    }

    fn move_clock(&mut self, to: u64) {
        if to > self.now {
            self.clock.advance(Duration::from_millis(to - self.now));
            self.now = to;
            self.callback.set_now(to);
        }
    }

    /// Lets the core act on its own at the current time.
    fn wake(&mut self) {
        self.scheduler.wake();
        self.settle();
    }

    fn send_allocation(&mut self, request: si::AllocationRequest) -> Result<(), ReplayError> {
        let empty = request.asks.is_empty()
            && request
                .releases
                .as_ref()
                .is_none_or(|r| r.allocations_to_release.is_empty());
        if empty {
            return Ok(());
        }
        let result = self.scheduler.update_allocation(si::AllocationRequest {
            rm_id: RM_ID.to_string(),
            ..request
        });
        self.call("sending asks and releases", result)?;
        self.settle();
        Ok(())
    }

    /// Confirmations and resubmissions until the core asks for none.
    fn follow_up(&mut self) -> Result<(), ReplayError> {
        loop {
            let request = std::mem::take(&mut self.books().follow_up);
            if request.asks.is_empty() && request.releases.is_none() {
                return Ok(());
            }
            self.send_allocation(request)?;
        }
    }
}

/// Most ticks between two stops while allocations wait and nothing changes.
const MAX_IDLE_TICKS: u64 = 8;

/// Rounds `t` up to a multiple of `tick`.
fn on_tick(t: u64, tick: u64) -> u64 {
    t.div_ceil(tick).saturating_mul(tick)
}

/// Replays `trace` with `options`; `on_progress` is called now and then.
pub fn replay(
    trace: &Arc<Trace>,
    options: &ReplayOptions,
    mut on_progress: impl FnMut(Progress),
) -> Result<Outcome, ReplayError> {
    let tick = options.tick_ms.max(1);
    let clock = ManualClock::new(START_NANOS);
    let scheduler = Scheduler::start(SchedulerOptions {
        clock: clock.clone() as Arc<dyn Clock>,
        // The replay hands the core one step at a time and waits for it.
        spin_before_park: unisched_core::scheduler::STEPPED_SPIN,
        ..SchedulerOptions::default()
    });
    let callback = Arc::new(ReplayCallback::new(Rm::new(
        trace.clone(),
        &options.partition,
    )));
    let registered = scheduler.register_resource_manager(
        si::RegisterResourceManagerRequest {
            rm_id: RM_ID.to_string(),
            policy_group: "queues".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            config: options.config.clone(),
            ..Default::default()
        },
        callback.clone() as Arc<dyn ResourceManagerCallback>,
    );
    if let Err(source) = registered {
        scheduler.shutdown();
        return Err(ReplayError::Scheduler {
            step: "registering the queue configuration",
            source,
        });
    }
    let mut r = Replay {
        scheduler,
        clock,
        callback,
        now: 0,
    };
    let result = run(&mut r, trace, options, tick, &mut on_progress);
    r.scheduler.shutdown();
    result
}

fn run(
    r: &mut Replay,
    trace: &Trace,
    options: &ReplayOptions,
    tick: u64,
    on_progress: &mut impl FnMut(Progress),
) -> Result<Outcome, ReplayError> {
    record_limits(r, &options.partition);
    let span = trace.span_ms();
    let sample_every = on_tick((span / options.samples.max(1)).max(tick), tick);
    let mut next_sample = 0;
    let mut cursor = 0;
    let mut last_allocation = (0, 0);
    let started = Instant::now();
    let mut first = true;
    let mut idle_ticks = 1;
    loop {
        let next_record = trace.records.get(cursor).map(|rec| rec.time_ms);
        let next_end = r.books().next_end();
        let waiting = r.books().pending_tasks() > 0;
        let mut next = next_record.into_iter().chain(next_end).min();
        if waiting {
            let give_up = next.is_none()
                && r.books().running_tasks() == 0
                && r.now.saturating_sub(last_allocation.1) >= options.patience_ms;
            if give_up {
                break;
            }
            let stop = r.now + idle_ticks * tick;
            next = Some(next.map_or(stop, |n| n.min(stop)));
        }
        let Some(next) = next else { break };
        let t = if first {
            on_tick(next, tick)
        } else {
            on_tick(next, tick).max(r.now + tick)
        };
        first = false;
        r.books().out.counts.steps += 1;
        r.move_clock(t);
        let progress_mark = |r: &Replay| {
            let counts = &r.books().out.counts;
            (counts.allocations, counts.preemptions)
        };
        let before = progress_mark(r);
        step(r, trace, &mut cursor, t)?;
        let changed = before != progress_mark(r);
        idle_ticks =
            if changed || next_record.is_some_and(|n| n <= t) || next_end.is_some_and(|n| n <= t) {
                1
            } else {
                (idle_ticks * 2).min(MAX_IDLE_TICKS)
            };
        if r.books().out.counts.allocations != last_allocation.0 {
            last_allocation = (r.books().out.counts.allocations, t);
        }
        if t >= next_sample {
            let sample = r.books().sample(t);
            r.books().out.samples.push(sample);
            next_sample = t + sample_every;
        }
        if r.books().out.counts.steps % 256 == 1 {
            on_progress(progress(r, span));
        }
    }
    // Let applications that finished complete (the core's grace period).
    let grace = SchedulerOptions::default().completing_timeout.as_millis() as u64;
    r.move_clock(on_tick(r.now + grace + tick, tick));
    r.wake();
    let end = r.now;
    let sample = r.books().sample(end);
    r.books().out.samples.push(sample);
    r.books().out.wall = started.elapsed();
    on_progress(progress(r, span));
    record_limits(r, &options.partition);
    let mut out = std::mem::take(&mut r.books().out);
    out.end_ms = end;
    out.counts.never_placed = r.books().pending_tasks().max(0) as u64;
    out.counts.still_running = r.books().running_tasks() as u64;
    out.app_states = r.books().app_states();
    Ok(out)
}

/// One step at time `t` (see the module docs): records due from `cursor` on,
/// tasks that ended, then follow-ups.
fn step(r: &mut Replay, trace: &Trace, cursor: &mut usize, t: u64) -> Result<(), ReplayError> {
    let mut nodes = Vec::new();
    let mut asks_due = Vec::new();
    while let Some(rec) = trace.records.get(*cursor) {
        if rec.time_ms > t {
            break;
        }
        match rec.event {
            Event::Ask(_) => asks_due.push(*cursor as u32),
            change => nodes.extend(r.books().node_change(change)),
        }
        *cursor += 1;
    }
    // A wake phase first when the request will not be the step's only
    // command, or there is no request.
    let needs_app = asks_due.iter().any(|&i| r.books().needs_app(i));
    let ends_due = r.books().next_end().is_some_and(|end| end <= t);
    if !nodes.is_empty() || needs_app || (asks_due.is_empty() && !ends_due) {
        r.wake();
    }
    if !nodes.is_empty() {
        let result = r.scheduler.update_node(si::NodeRequest {
            nodes,
            rm_id: RM_ID.to_string(),
        });
        r.call("reporting nodes", result)?;
        r.settle();
    }
    let mut new_apps = Vec::new();
    let mut asks = Vec::new();
    for record in asks_due {
        r.books().submit(record, &mut new_apps, &mut asks);
    }
    if !new_apps.is_empty() {
        let result = r.scheduler.update_application(si::ApplicationRequest {
            new: new_apps,
            rm_id: RM_ID.to_string(),
            ..Default::default()
        });
        r.call("adding applications", result)?;
    }
    let releases = r.books().finished(t);
    let request = si::AllocationRequest {
        asks,
        releases: (!releases.is_empty()).then(|| si::AllocationReleasesRequest {
            allocations_to_release: releases,
            ..Default::default()
        }),
        ..Default::default()
    };
    r.send_allocation(request)?;
    r.follow_up()
}

fn progress(r: &mut Replay, span: u64) -> Progress {
    // One guard: the books' lock is not reentrant.
    let books = r.books();
    Progress {
        now_ms: r.now,
        span_ms: span,
        allocations: books.out.counts.allocations,
        running: books.running_tasks() as u64,
        pending: books.pending_tasks().max(0) as u64,
    }
}

/// Adds the guaranteed and max of every queue the core has now.
fn record_limits(r: &mut Replay, partition: &str) {
    let Some(snapshot) = r.scheduler.snapshot(partition) else {
        return;
    };
    for q in snapshot.queues {
        r.books().out.limits.insert(
            q.path,
            QueueLimits {
                guaranteed: q.guaranteed,
                max: q.max,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_up() {
        assert_eq!(on_tick(0, 1000), 0);
        assert_eq!(on_tick(1, 1000), 1000);
        assert_eq!(on_tick(1000, 1000), 1000);
        assert_eq!(on_tick(1001, 1000), 2000);
    }
}
