//! Carrying out one operation: what the RM sends for it and what it expects
//! the core to answer.

use std::collections::BTreeMap;

use si::node_info::ActionFromRm;
use unisched_shim_api::SchedulerApi;
use unisched_si as si;

use super::super::check;
use super::super::configs;
use super::super::model::{AskMeta, GangModel, Model, NodeModel, Size};
use super::super::ops::{Op, QUEUES};
use super::*;

impl Sim {
    /// Sends the requests of one operation; violations of waiting calls.
    pub(super) fn send(&mut self, op: &Op) -> Vec<String> {
        let mut out = Vec::new();
        match *op {
            Op::NodeCreate {
                node,
                memory,
                vcore,
            } => {
                let id = format!("node-{node}");
                self.intents.nodes.push((
                    id.clone(),
                    NodeIntent::Create(NodeModel {
                        capacity: (memory, vcore),
                        occupied: 0,
                        schedulable: true,
                    }),
                ));
                self.nodes(vec![si::NodeInfo {
                    node_id: id,
                    action: ActionFromRm::Create as i32,
                    schedulable_resource: resource(&[("memory", memory), ("vcore", vcore)]),
                    ..Default::default()
                }]);
            }
            Op::NodeUpdate {
                pick,
                memory,
                vcore,
                occupied,
            } => {
                let Some(id) = Model::nth(&self.model.nodes, pick) else {
                    return out;
                };
                self.intents
                    .nodes
                    .push((id.clone(), NodeIntent::Update((memory, vcore), occupied)));
                self.nodes(vec![si::NodeInfo {
                    node_id: id,
                    action: ActionFromRm::Update as i32,
                    schedulable_resource: resource(&[("memory", memory), ("vcore", vcore)]),
                    occupied_resource: resource(&[("memory", occupied)]),
                    ..Default::default()
                }]);
            }
            Op::NodeDrain { pick } => self.node_action(
                pick,
                ActionFromRm::DrainNode,
                NodeIntent::Schedulable(false),
            ),
            Op::NodeSchedulable { pick } => self.node_action(
                pick,
                ActionFromRm::DrainToSchedulable,
                NodeIntent::Schedulable(true),
            ),
            Op::NodeDecommission { pick } => {
                self.node_action(pick, ActionFromRm::Decomission, NodeIntent::Remove)
            }
            Op::AppAdd { .. } | Op::GangAppAdd { .. } if self.model.apps.len() >= LIVE_APPS => {
                // A steady population, as a long-running cluster has: an app
                // added beyond it removes one instead.
                self.remove_app(self.next_app as u32);
                self.next_app += 1;
            }
            Op::AppAdd { queue } => {
                let id = format!("app-{}", self.next_app);
                self.next_app += 1;
                let queue = QUEUES[usize::from(queue) % QUEUES.len()].to_string();
                self.intents.apps.insert(id.clone(), queue.clone());
                self.apps(si::ApplicationRequest {
                    new: vec![si::AddApplicationRequest {
                        application_id: id,
                        queue_name: queue,
                        partition_name: PARTITION.to_string(),
                        ugi: Some(si::UserGroupInformation {
                            user: "soak".to_string(),
                            groups: vec![],
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                });
            }
            Op::AppRemove { pick } => self.remove_app(pick),
            Op::AskAdd {
                app,
                memory,
                vcore,
                max,
                priority,
            } => {
                let Some(app) = Model::nth(&self.model.apps, app) else {
                    return out;
                };
                let key = format!("ask-{}", self.next_ask);
                self.next_ask += 1;
                let id = (app.clone(), key.clone());
                self.intents.ask_undo.push((
                    id,
                    self.model.asks.get(&(app.clone(), key.clone())).cloned(),
                ));
                self.model.ask_meta.insert(
                    (app.clone(), key.clone()),
                    AskMeta {
                        preempt_other: self.gang_ops && preempting_app(&app),
                        priority,
                        ..Default::default()
                    },
                );
                self.model.send_ask(&app, &key, (memory, vcore), max);
                self.send_asks(vec![self.ask_meta(&app, &key, (memory, vcore), max)]);
            }
            Op::AskUpdate {
                pick,
                memory,
                vcore,
                max,
            } => {
                let Some((app, key)) = Model::nth(&self.model.asks, pick) else {
                    return out;
                };
                let id = (app.clone(), key.clone());
                if self.model.ask_meta.get(&id).is_some_and(|m| m.placeholder) {
                    // Placeholder asks are not re-sized: their count is the gang's.
                    return out;
                }
                self.model.ask_meta.entry(id.clone()).or_default().priority = 1;
                let old = self.model.asks.get(&id).cloned();
                let done = old.as_ref().map_or(0, |a| a.allocated_total as i32);
                let max = if self.avoid_known_bugs {
                    max.max(done + 1)
                } else {
                    max
                };
                self.intents.ask_undo.push((id, old));
                self.model.send_ask(&app, &key, (memory, vcore), max);
                self.send_asks(vec![self.ask_meta(&app, &key, (memory, vcore), max)]);
            }
            Op::AskBad { app, kind } => {
                let app = Model::nth(&self.model.apps, app).unwrap_or_default();
                let key = format!("bad-{}", self.next_ask);
                self.next_ask += 1;
                let mut ask = Self::ask(&app, &key, (10, 100), 1, 0);
                match kind % 4 {
                    0 => ask.resource_ask = resource(&[("memory", -5)]),
                    1 => ask.resource_ask = None,
                    2 => ask.application_id = "ghost-app".to_string(),
                    _ => ask.max_allocations = -1,
                }
                self.intents.ask_rejection = Some(key);
                self.send_asks(vec![ask]);
            }
            Op::AskRelease { pick } => {
                if let Some((app, key)) = Model::nth(&self.model.asks, pick) {
                    self.release_asks(&app, &key);
                }
            }
            Op::AskReleaseApp { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.release_asks(&app, "");
                }
            }
            Op::ReleaseById { pick } => {
                if let Some(id) = Model::nth(&self.model.allocs, pick) {
                    let a = &self.model.allocs[&id];
                    self.release(&a.app, "", &id);
                }
            }
            Op::ReleaseByKey { pick } => {
                if let Some(id) = Model::nth(&self.model.allocs, pick) {
                    let a = &self.model.allocs[&id];
                    self.release(&a.app, &a.key, "");
                }
            }
            Op::ReleaseApp { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.release(&app, "", "");
                }
            }
            Op::ReleaseUnknown { app } => {
                if let Some(app) = Model::nth(&self.model.apps, app) {
                    self.intents.unknown_release = Some("missing".to_string());
                    self.release(&app, "missing", "missing-0");
                }
            }
            Op::Reload { variant } => {
                let valid = if self.gang_ops {
                    configs::VALID.len()
                } else {
                    configs::PLAIN
                };
                let text = configs::VALID[usize::from(variant) % valid];
                self.source.set(Ok(text.to_string()));
                match self.sched.update_configuration(RM) {
                    Ok(()) => {
                        self.config = text.to_string();
                        self.counts.reloads += 1;
                    }
                    Err(e) => out.push(format!("valid configuration refused: {e}")),
                }
            }
            Op::ReloadInvalid { variant } => {
                let text = configs::INVALID[usize::from(variant) % configs::INVALID.len()];
                out.extend(self.refused_reload(Ok(text.to_string()), "invalid"));
            }
            Op::ReloadUnavailable => {
                out.extend(
                    self.refused_reload(Err("soak: source down".to_string()), "unavailable"),
                );
            }
            Op::ReRegister => out.extend(self.reregister(self.next_ask.is_multiple_of(2))),
            Op::GangAppAdd {
                queue,
                hard,
                timeout_ms,
                groups,
                memory,
                vcore,
                count,
            } => {
                let id = format!("app-{}", self.next_app);
                self.next_app += 1;
                let queue = QUEUES[usize::from(queue) % 3].to_string();
                let groups: Vec<(String, Size, i32)> = (0..groups.max(1))
                    .map(|g| format!("tg{g}"))
                    .map(|g| (g, (memory, vcore), count))
                    .collect();
                let n = i64::from(count) * groups.len() as i64;
                let gang = GangModel {
                    hard,
                    timeout_ms,
                    placeholder_ask: (memory * n, vcore * n),
                    groups,
                };
                self.intents.apps.insert(id.clone(), queue.clone());
                if !configs::fits_queue_max(&self.config, &queue, gang.placeholder_ask)
                    || !self.fits_cluster(gang.placeholder_ask)
                {
                    self.intents.refused_gangs.insert(id.clone());
                }
                self.apps(si::ApplicationRequest {
                    new: vec![Self::gang_app(&id, &queue, Some(&gang))],
                    ..Default::default()
                });
                let mut asks = Vec::new();
                for (g, size, count) in &gang.groups {
                    let key = format!("ph-{id}-{g}");
                    let ask_id = (id.clone(), key.clone());
                    self.model.ask_meta.insert(
                        ask_id.clone(),
                        AskMeta {
                            group: g.clone(),
                            placeholder: true,
                            ..Default::default()
                        },
                    );
                    self.intents.ask_undo.push((ask_id, None));
                    self.model.send_ask(&id, &key, *size, *count);
                    asks.push(self.ask_meta(&id, &key, *size, *count));
                }
                self.model.gangs.insert(id, gang);
                self.send_asks(asks);
            }
            Op::GangRealAsk { app, group, larger } => {
                let live: BTreeMap<&String, &GangModel> = self
                    .model
                    .gangs
                    .iter()
                    .filter(|(a, _)| self.model.apps.contains_key(*a))
                    .collect();
                if live.is_empty() {
                    return out;
                }
                let (app, gang) = live
                    .iter()
                    .nth(app as usize % live.len())
                    .map(|(a, g)| ((*a).clone(), (*g).clone()))
                    .expect("not empty");
                let (g, size, count) = gang.groups[usize::from(group) % gang.groups.len()].clone();
                let size = if larger { (size.0 + 10, size.1) } else { size };
                let key = format!("real-{app}-{g}");
                let id = (app.clone(), key.clone());
                self.model.ask_meta.insert(
                    id.clone(),
                    AskMeta {
                        group: g,
                        preempt_other: preempting_app(&app),
                        ..Default::default()
                    },
                );
                self.intents
                    .ask_undo
                    .push((id.clone(), self.model.asks.get(&id).cloned()));
                self.model.send_ask(&app, &key, size, count);
                self.send_asks(vec![self.ask_meta(&app, &key, size, count)]);
            }
            Op::Advance { millis } => {
                self.clock.advance(Duration::from_millis(millis));
                self.sched.wake();
            }
        }
        out
    }

    pub(super) fn refused_reload(
        &mut self,
        answer: Result<String, String>,
        kind: &str,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let before = self.snapshot().map(|s| check::queue_limits(&s));
        self.source.set(answer);
        match self.sched.update_configuration(RM) {
            Ok(()) => out.push(format!("{kind} configuration accepted")),
            Err(SchedulerError::InvalidConfiguration { .. }) if kind == "invalid" => {}
            Err(SchedulerError::ConfigurationUnavailable { .. }) if kind == "unavailable" => {}
            Err(e) => out.push(format!(
                "{kind} configuration refused with the wrong error: {e}"
            )),
        }
        self.counts.refused_reloads += 1;
        let after = self.snapshot().map(|s| check::queue_limits(&s));
        if before != after {
            out.push(format!(
                "a refused reload changed the queues: before {before:?}, after {after:?}"
            ));
        }
        out
    }

    /// Removes the `pick`-th application the RM holds, if any.
    pub(super) fn remove_app(&mut self, pick: u32) {
        let Some(id) = Model::nth(&self.model.apps, pick) else {
            return;
        };
        self.model.apps.remove(&id);
        self.model.gone.insert(id.clone());
        self.model.asks.retain(|(a, _), _| *a != id);
        self.model.replacing.retain(|_, (a, _)| *a != id);
        self.apps(si::ApplicationRequest {
            remove: vec![si::RemoveApplicationRequest {
                application_id: id,
                partition_name: PARTITION.to_string(),
            }],
            ..Default::default()
        });
    }
}
