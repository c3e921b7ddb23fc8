//! The placeholder timeout of gang applications, as upstream's
//! `timeoutPlaceholderProcessing`.
//!
//! The timer starts with the first placeholder ask (the app's execution
//! timeout, else 15 minutes). When it fires, a Running application releases
//! its unused placeholders; any other goes Resuming then Accepted (Soft
//! style: its real asks are then scheduled normally) or Failing then Failed
//! (Hard style: everything is released). Released allocations are only
//! marked and reported (`TIMEOUT`): they keep their node and queue usage until
//! the RM confirms, so the RM never sees room the core has already given
//! away, and the app moves on (Resuming to Accepted, Failing to Failed) once
//! the last of them is confirmed.

use std::cmp::Reverse;

use si::event_record::{ChangeDetail, ChangeType, Type as EventType};
use unisched_si as si;

use super::objects::*;
use super::partition::Partition;

impl Partition {
    /// Fires placeholder timers that are due.
    pub(super) fn process_gang_timers(&mut self, now: u64) {
        while let Some(&Reverse((deadline, app))) = self.gang_timers.peek() {
            if deadline > now {
                break;
            }
            self.gang_timers.pop();
            let Some(gang) = self.apps.get_mut(app).and_then(|a| a.gang.as_mut()) else {
                continue;
            };
            if gang.deadline != Some(deadline) {
                continue;
            }
            gang.deadline = None;
            self.placeholder_timeout(app, now);
        }
    }

    fn placeholder_timeout(&mut self, app: AppId, now: u64) {
        let pending_asks: Vec<AskId> = self.apps[app]
            .asks
            .values()
            .copied()
            .filter(|&a| self.asks[a].placeholder && self.asks[a].pending > 0)
            .collect();
        let live = self.live_placeholders(app, None);
        if live.is_empty() && pending_asks.is_empty() {
            return;
        }
        let state = self.apps[app].state;
        let has_placeholders = self.has_placeholder_allocations(app);
        let hard = self.apps[app].gang.as_ref().is_some_and(|g| g.hard);
        let started = matches!(state, AppState::Running | AppState::Completing);
        if started && has_placeholders || !hard && !state.can_move_to(AppState::Resuming) {
            // The application runs: only its unused placeholders go.
            self.drop_placeholders(app, &pending_asks, &live, now);
            self.check_completing(app, now);
            return;
        }
        if !hard {
            self.set_app_state(app, AppState::Resuming, now, "ResourceReservationTimeout");
            self.drop_placeholders(app, &pending_asks, &live, now);
            // Accepted once the RM confirmed the last placeholder's release.
            self.check_completing(app, now);
            return;
        }
        self.set_app_state(app, AppState::Failing, now, "ResourceReservationTimeout");
        for alloc in self.app_allocations(app) {
            // One already on its way out (replaced, preempted) keeps its release.
            if self.allocs[alloc].releasing.is_none() {
                self.release_with_confirmation(
                    alloc,
                    si::TerminationType::Timeout,
                    "placeholder timeout: application failed (hard gang style)",
                    now,
                );
            }
        }
        let asks: Vec<AskId> = self.apps[app].asks.values().copied().collect();
        for ask in asks {
            self.ask_timed_out(ask, now);
        }
        // Failed once the RM confirmed the last release.
        self.check_completing(app, now);
    }

    /// Moves a gang application on once the releases of its timeout are
    /// confirmed: Resuming to Accepted when no placeholder is left, Failing
    /// to Failed (and out of the partition) when no allocation is. True when
    /// the application was dropped.
    pub(super) fn settle_placeholder_timeout(&mut self, app: AppId, now: u64) -> bool {
        match self.apps[app].state {
            AppState::Resuming if !self.has_placeholder_allocations(app) => {
                self.set_app_state(
                    app,
                    AppState::Accepted,
                    now,
                    "placeholders timed out: scheduling normally",
                );
                false
            }
            AppState::Failing if self.apps[app].allocation_count == 0 => {
                self.set_app_state(app, AppState::Failed, now, "placeholders timed out");
                self.drop_app(app, now);
                true
            }
            _ => false,
        }
    }

    /// Whether any placeholder allocation of the application is left
    /// (releasing ones included).
    fn has_placeholder_allocations(&self, app: AppId) -> bool {
        self.apps[app]
            .asks
            .values()
            .any(|&a| self.asks[a].placeholder && !self.asks[a].allocs.is_empty())
    }

    fn drop_placeholders(&mut self, app: AppId, asks: &[AskId], live: &[AllocId], now: u64) {
        for &ask in asks {
            self.ask_timed_out(ask, now);
        }
        for &alloc in live {
            self.release_with_confirmation(
                alloc,
                si::TerminationType::Timeout,
                "placeholder timed out",
                now,
            );
        }
        self.rekey_app(app);
    }

    fn ask_timed_out(&mut self, ask: AskId, now: u64) {
        if !self.asks.contains(ask) {
            return;
        }
        let a = &self.asks[ask];
        let (key, app) = (a.key.clone(), self.apps[a.app].id.clone());
        self.outbox.event(
            now,
            EventType::Request,
            &key,
            &app,
            ChangeType::Remove,
            ChangeDetail::RequestTimeout,
            "placeholder timeout".to_string(),
        );
        self.remove_ask(ask, now);
    }
}
