//! Frameworks come and go: SUBSCRIBE (new, resubscribe, failover),
//! UPDATE_FRAMEWORK, a stream that closes, the failover timeout, TEARDOWN.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use unisched_core::scheduler::offers::OfferChange;

use super::framework::{Connection, ConnectionEvent, Framework, Stream, Transition, roles_of};
use super::state::{AppRecord, COMPLETED_FRAMEWORKS_KEPT, Master, Timer};
use super::stream::StreamEvent;
use super::units::{app_id, role_queue, validate_role};
use super::{CallError, CallOutcome};
use crate::v1;
use crate::v1::scheduler::{Event, event};

/// Longest failover timeout honoured (Mesos refuses durations it cannot hold).
const MAX_FAILOVER_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600 * 100);

fn error_event(message: &str) -> Event {
    Event {
        r#type: Some(event::Type::Error as i32),
        error: Some(event::Error {
            message: message.to_string(),
        }),
        ..Default::default()
    }
}

/// Checks a framework info as Mesos does before subscribing it.
pub fn validate_framework(info: &v1::FrameworkInfo) -> Result<(), String> {
    use v1::framework_info::capability::Type as Cap;
    let multi_role = super::framework::has_capability(info, Cap::MultiRole);
    if multi_role && super::framework::legacy_role(info).is_some() {
        return Err(
            "'FrameworkInfo.role' must not be set when the framework is MULTI_ROLE capable"
                .to_string(),
        );
    }
    if !multi_role && !info.roles.is_empty() {
        return Err(
            "'FrameworkInfo.roles' must not be set when the framework is not MULTI_ROLE capable"
                .to_string(),
        );
    }
    if multi_role {
        let mut seen = std::collections::BTreeSet::new();
        let dups: Vec<&str> = info
            .roles
            .iter()
            .filter(|r| !seen.insert(r.as_str()))
            .map(String::as_str)
            .collect();
        if !dups.is_empty() {
            return Err(format!(
                "'FrameworkInfo.roles' contains duplicate items: {{ {} }}",
                dups.join(", ")
            ));
        }
        for role in &info.roles {
            validate_role(role)
                .map_err(|e| format!("'FrameworkInfo.roles' contains invalid role: {e}"))?;
        }
    } else {
        let role = super::framework::legacy_role(info).unwrap_or("*");
        validate_role(role)
            .map_err(|e| format!("'FrameworkInfo.role' is not a valid role: {e}"))?;
    }
    for role in roles_of(info) {
        role_queue(&role)?;
    }
    if let Some(id) = info.id.as_ref().filter(|id| !id.value.is_empty()) {
        validate_id(&id.value)?;
    }
    let timeout = info.failover_timeout.unwrap_or(0.0);
    if !timeout.is_finite() || timeout < 0.0 || timeout > MAX_FAILOVER_TIMEOUT.as_secs_f64() {
        return Err(format!(
            "The framework failover_timeout ({timeout}) is invalid"
        ));
    }
    Ok(())
}

/// Checks an id (framework, task, executor) as Mesos does.
pub fn validate_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("ID must not be empty".to_string());
    }
    if id.len() > 255 {
        return Err("ID must not be greater than 255 characters".to_string());
    }
    if id == "." || id == ".." {
        return Err(format!("'{id}' is disallowed"));
    }
    if id.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Err(format!("'{id}' contains invalid characters"));
    }
    Ok(())
}

fn failover_nanos(info: &v1::FrameworkInfo) -> u64 {
    let secs = info.failover_timeout.unwrap_or(0.0).max(0.0);
    (secs * 1e9).min(u64::MAX as f64) as u64
}

impl Master {
    /// SUBSCRIBE: the HTTP response (200 with the stream id) is already on its
    /// way; the outcome goes out as the stream's first event.
    pub(super) fn subscribe(
        &mut self,
        subscribe: v1::scheduler::call::Subscribe,
        stream_id: String,
        sink: mpsc::Sender<StreamEvent>,
        pid: Option<String>,
    ) {
        self.count_call("SUBSCRIBE");
        let mut info = subscribe.framework_info;
        let refuse = |message: &str| {
            tracing::info!(framework = %info.name, %message, "refusing subscription");
            let _ = sink.try_send(error_event(message).into());
        };
        if let Err(e) = validate_framework(&info) {
            return refuse(&e);
        }
        let roles = roles_of(&info);
        let suppressed: std::collections::BTreeSet<String> =
            subscribe.suppressed_roles.into_iter().collect();
        if let Some(bad) = suppressed.iter().find(|r| !roles.contains(r)) {
            return refuse(&format!(
                "Suppressed roles {{ {bad} }} are not contained in the set of roles"
            ));
        }
        let id = info
            .id
            .as_ref()
            .map(|i| i.value.clone())
            .filter(|v| !v.is_empty());
        if let Some(id) = &id
            && self.completed_frameworks.iter().any(|f| &f.id == id)
        {
            return refuse("Framework has been removed");
        }
        let generation = self.new_generation();
        let stream = Stream {
            id: stream_id,
            sink,
            generation,
        };
        let now = self.now();
        match id {
            Some(id) if self.frameworks.contains_key(&id) => {
                let old = &self.frameworks[&id];
                if old.info.principal != info.principal {
                    let _ = stream.sink.try_send(
                        error_event("Changing framework's principal is not allowed.").into(),
                    );
                    return;
                }
                if old.info.user != info.user {
                    let message = format!(
                        "Updating 'FrameworkInfo.user' is unsupported; attempted to update from '{}' to '{}'",
                        old.info.user, info.user
                    );
                    let _ = stream.sink.try_send(error_event(&message).into());
                    return;
                }
                if old.info.checkpoint != info.checkpoint {
                    let message = format!(
                        "Updating 'FrameworkInfo.checkpoint' is unsupported; attempted to update from '{}' to '{}'",
                        old.info.checkpoint.unwrap_or(false),
                        info.checkpoint.unwrap_or(false)
                    );
                    let _ = stream.sink.try_send(error_event(&message).into());
                    return;
                }
                self.failover(&id, info, stream, suppressed, now);
                if let Some(f) = self.frameworks.get_mut(&id) {
                    f.pid = pid;
                }
                self.publish_framework(&id, false);
            }
            id => {
                let id = id.unwrap_or_else(|| self.new_framework_id());
                info.id = Some(v1::FrameworkId { value: id.clone() });
                let framework = Framework {
                    id: id.clone(),
                    roles: roles.clone(),
                    info,
                    suppressed,
                    connection: Connection::Connected,
                    stream: Some(stream),
                    offers: Default::default(),
                    tasks: Default::default(),
                    completed_tasks: Default::default(),
                    registered_time: now,
                    reregistered_time: None,
                    unregistered_time: None,
                    calls: Default::default(),
                    pid,
                    offer_run: (0, 0),
                };
                self.frameworks.insert(id.clone(), framework);
                for role in roles {
                    self.add_role(&id, &role);
                }
                self.activate(&id);
                self.subscribed(&id, generation);
                self.publish_framework(&id, true);
            }
        }
    }

    /// Sends SUBSCRIBED and starts the heartbeats.
    fn subscribed(&mut self, id: &str, generation: u64) {
        let interval = self.settings.heartbeat_interval;
        let event = Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed {
                framework_id: v1::FrameworkId {
                    value: id.to_string(),
                },
                heartbeat_interval_seconds: Some(interval.as_secs_f64()),
                master_info: Some(self.info.clone()),
            }),
            ..Default::default()
        };
        self.send(id, event);
        self.after(interval, Timer::Heartbeat(id.to_string(), generation));
    }

    /// A role joins a framework: its application in the role's queue.
    pub(super) fn add_role(&mut self, framework: &str, role: &str) {
        let Ok(queue) = role_queue(role) else { return };
        let app = app_id(framework, role);
        let user = self.frameworks[framework].info.user.clone();
        let user = if user.is_empty() {
            "mesos".to_string()
        } else {
            user
        };
        let record = AppRecord {
            framework: Arc::from(framework),
            role: Arc::from(role),
            framework_handle: self.frameworks.handle(framework).unwrap_or(0),
        };
        let handle = self.apps.insert(app.clone(), record);
        self.core.add_app(app, queue, user, handle);
    }

    /// A role leaves a framework: its offers go back and its application is
    /// removed from the core once no task holds resources in it.
    fn remove_role(&mut self, framework: &str, role: &str) {
        let offers: Vec<u64> = self.frameworks[framework]
            .offers
            .listed(|o| self.offers.get_number(o).is_some_and(|o| *o.role == *role));
        for o in offers {
            self.rescind(o, true);
        }
        let app = app_id(framework, role);
        let busy = self.frameworks[framework].tasks.iter().any(|t| {
            self.tasks
                .get(&(framework.to_string(), t.clone()))
                .is_some_and(|t| t.role == role)
        });
        if busy {
            // Keeps its tasks; it just wants no more offers.
            self.core.offers(vec![OfferChange::Demand {
                application_id: app,
                active: false,
            }]);
        } else {
            self.apps.remove(&app);
            self.core.remove_app(app);
        }
    }

    /// Tells the core which roles of a connected framework want offers, and
    /// clears their filters (a framework that connects starts afresh); an
    /// allocation run follows at once, as Mesos allocates for a new framework.
    fn activate(&mut self, id: &str) {
        let f = &self.frameworks[id];
        let mut changes: Vec<OfferChange> = f
            .roles
            .iter()
            .flat_map(|role| {
                let app = app_id(id, role);
                [
                    OfferChange::ClearFilters {
                        application_id: app.clone(),
                    },
                    OfferChange::Demand {
                        application_id: app,
                        active: !f.suppressed.contains(role),
                    },
                ]
            })
            .collect();
        changes.push(OfferChange::Allocate);
        self.core.offers(changes);
    }

    /// Stops offers to every role of a framework, clears its filters, and
    /// takes back its outstanding offers (rescinded when its stream is open).
    fn deactivate(&mut self, id: &str, rescind: bool) {
        let f = &self.frameworks[id];
        let offers = f.offers.listed(|o| self.offers.get_number(o).is_some());
        let changes: Vec<OfferChange> = f
            .roles
            .iter()
            .flat_map(|role| {
                let app = app_id(id, role);
                [
                    OfferChange::Demand {
                        application_id: app.clone(),
                        active: false,
                    },
                    OfferChange::ClearFilters {
                        application_id: app,
                    },
                ]
            })
            .collect();
        self.core.offers(changes);
        for o in offers {
            self.rescind(o, rescind);
        }
    }

    /// A framework subscribes again: its old stream (if open) gets ERROR and
    /// closes, its offers are discarded (and offered again), its tasks stay.
    fn failover(
        &mut self,
        id: &str,
        info: v1::FrameworkInfo,
        stream: Stream,
        suppressed: std::collections::BTreeSet<String>,
        now: u64,
    ) {
        let generation = stream.generation;
        let was_connected = self.frameworks[id].connected();
        if was_connected {
            self.send(id, error_event("Framework failed over"));
        }
        self.deactivate(id, false);
        let new_roles = roles_of(&info);
        let old_roles = self.frameworks[id].roles.clone();
        {
            let f = self.frameworks.get_mut(id).expect("framework exists");
            if let Transition::To(c) = f.connection.on(ConnectionEvent::Subscribe) {
                f.connection = c;
            }
            let mut info = info;
            info.id = Some(v1::FrameworkId {
                value: id.to_string(),
            });
            f.info = info;
            f.roles = new_roles.clone();
            f.suppressed = suppressed;
            f.stream = Some(stream);
            f.reregistered_time = Some(now);
            f.unregistered_time = None;
        }
        for role in old_roles.iter().filter(|r| !new_roles.contains(r)) {
            self.remove_role(id, role);
        }
        for role in new_roles.iter().filter(|r| !old_roles.contains(r)) {
            self.add_role(id, role);
        }
        self.activate(id);
        self.subscribed(id, generation);
        // Updates that waited for the framework go out again now.
        let tasks: Vec<String> = self.frameworks[id].tasks.iter().cloned().collect();
        for t in tasks {
            self.resend_status(id, &t);
        }
        self.resend_operation_statuses(id);
    }

    /// UPDATE_FRAMEWORK: new info (roles, name, ...) for a subscribed framework.
    pub(super) fn update_framework(
        &mut self,
        id: &str,
        update: v1::scheduler::call::UpdateFramework,
    ) -> Result<CallOutcome, CallError> {
        let info = update.framework_info;
        validate_framework(&info).map_err(CallError::bad_request)?;
        let old = &self.frameworks[id].info;
        if old.principal != info.principal {
            return Err(CallError::bad_request(
                "Changing framework's principal is not allowed.",
            ));
        }
        if old.user != info.user {
            return Err(CallError::bad_request(format!(
                "Updating 'FrameworkInfo.user' is unsupported; attempted to update from '{}' to '{}'",
                old.user, info.user
            )));
        }
        if old.checkpoint != info.checkpoint {
            return Err(CallError::bad_request(
                "Updating 'FrameworkInfo.checkpoint' is unsupported",
            ));
        }
        let new_roles = roles_of(&info);
        let suppressed: std::collections::BTreeSet<String> =
            update.suppressed_roles.into_iter().collect();
        if let Some(bad) = suppressed.iter().find(|r| !new_roles.contains(r)) {
            return Err(CallError::bad_request(format!(
                "Suppressed roles {{ {bad} }} are not contained in the set of roles"
            )));
        }
        let old_roles = self.frameworks[id].roles.clone();
        {
            let f = self.frameworks.get_mut(id).expect("framework exists");
            f.info = info;
            f.roles = new_roles.clone();
            f.suppressed = suppressed;
        }
        for role in old_roles.iter().filter(|r| !new_roles.contains(r)) {
            self.remove_role(id, role);
        }
        for role in new_roles.iter().filter(|r| !old_roles.contains(r)) {
            self.add_role(id, role);
        }
        let f = &self.frameworks[id];
        let mut changes: Vec<OfferChange> = f
            .roles
            .iter()
            .map(|role| OfferChange::Demand {
                application_id: app_id(id, role),
                active: !f.suppressed.contains(role),
            })
            .collect();
        changes.push(OfferChange::Allocate);
        self.core.offers(changes);
        Ok(CallOutcome::Ok)
    }

    /// The event stream of a framework closed.
    pub(super) fn stream_closed(&mut self, id: &str, stream_id: &str) {
        let matches = self
            .frameworks
            .get(id)
            .and_then(|f| f.stream.as_ref())
            .is_some_and(|s| s.id == stream_id);
        if matches {
            self.disconnect(id);
        }
    }

    /// Closes the streams that could not take an event.
    pub(super) fn close_broken_streams(&mut self) {
        for (id, generation) in std::mem::take(&mut self.broken_streams) {
            let current = self
                .frameworks
                .get(&id)
                .and_then(|f| f.stream.as_ref())
                .is_some_and(|s| s.generation == generation);
            if current {
                tracing::warn!(framework = %id, "event stream cannot keep up or is gone: closing it");
                self.disconnect(&id);
            }
        }
    }

    /// A framework loses its stream: offers back, filters cleared, no offers
    /// until it comes back, removed after its failover timeout.
    fn disconnect(&mut self, id: &str) {
        let now = self.now();
        let timeout = failover_nanos(&self.frameworks[id].info);
        let Transition::To(next) = self.frameworks[id]
            .connection
            .on(ConnectionEvent::StreamClosed { now, timeout })
        else {
            return;
        };
        tracing::info!(framework = %id, "framework disconnected");
        self.deactivate(id, false);
        {
            let f = self.frameworks.get_mut(id).expect("framework exists");
            f.connection = next;
            f.stream = None;
            f.unregistered_time = Some(now);
        }
        self.publish_framework(id, false);
        if let Connection::Disconnected { failover_deadline } = next {
            if failover_deadline <= now {
                self.remove_framework(id);
            } else {
                self.at(failover_deadline, Timer::Failover(id.to_string()));
            }
        }
    }

    pub(super) fn failover_timer(&mut self, id: &str) {
        let now = self.now();
        let Some(f) = self.frameworks.get(id) else {
            return;
        };
        if let Transition::To(Connection::Removed) =
            f.connection.on(ConnectionEvent::FailoverTimer { now })
        {
            tracing::info!(framework = %id, "failover timeout passed: removing framework");
            self.remove_framework(id);
        }
    }

    /// HEARTBEAT on the stream of `generation` while it is open.
    pub(super) fn heartbeat(&mut self, id: &str, generation: u64) {
        let open = self
            .frameworks
            .get(id)
            .and_then(|f| f.stream.as_ref())
            .is_some_and(|s| s.generation == generation);
        if !open {
            return;
        }
        self.send(
            id,
            Event {
                r#type: Some(event::Type::Heartbeat as i32),
                ..Default::default()
            },
        );
        let interval = self.settings.heartbeat_interval;
        self.after(interval, Timer::Heartbeat(id.to_string(), generation));
    }

    /// TEARDOWN, or the failover timeout passed: the framework's offers and
    /// tasks go (tasks killed on their agents), its applications leave the
    /// core, and its id is refused from now on.
    pub(super) fn remove_framework(&mut self, id: &str) {
        let Some(f) = self.frameworks.get(id) else {
            return;
        };
        if let Transition::To(c) = f.connection.on(ConnectionEvent::Teardown) {
            self.deactivate(id, false);
            let tasks: Vec<String> = self.frameworks[id].tasks.iter().cloned().collect();
            for t in tasks {
                self.remove_task_of_removed_framework(id, &t);
            }
            let agents: Vec<String> = self.agents.keys().cloned().collect();
            for a in agents {
                self.agents[&a].backend.shutdown_framework(id);
                // Its executors go with it (the agent reports nothing more).
                if let Some(agent) = self.agents.get_mut(&a) {
                    agent.executors.retain(|(f, _), _| f != id);
                }
            }
            self.release_executors_where(|(f, _, _)| f == id);
            let roles = self.frameworks[id].roles.clone();
            for role in roles {
                let app = app_id(id, &role);
                self.apps.remove(&app);
                self.core.remove_app(app);
            }
            self.forget_operations(id);
            let mut f = self.frameworks.remove(id).expect("framework exists");
            f.connection = c;
            // Dropping the sink ends the HTTP response.
            f.stream = None;
            f.unregistered_time = Some(self.now());
            self.counters.frameworks_removed += 1;
            self.publish_framework_removed(&f.info);
            self.completed_frameworks.push_back(f);
            while self.completed_frameworks.len() > COMPLETED_FRAMEWORKS_KEPT {
                self.completed_frameworks.pop_front();
            }
        }
    }

    /// The core refused a framework's application (a queue ACL, or a role
    /// the configuration cannot place): the framework gets ERROR and is removed.
    pub(super) fn application_response(&mut self, response: unisched_si::ApplicationResponse) {
        for rejected in response.rejected {
            let Some(AppRecord {
                framework, role, ..
            }) = self.apps.get(&rejected.application_id).cloned()
            else {
                continue;
            };
            tracing::warn!(%framework, %role, reason = %rejected.reason, "the core refused a framework role");
            let message = format!("Role '{role}' refused: {}", rejected.reason);
            self.send(&framework, error_event(&message));
            self.remove_framework(&framework);
        }
    }
}
