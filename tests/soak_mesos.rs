//! The Mesos soak (`unisched soak --mesos`) in CI: a few seeds of a few
//! hundred steps must show no violation and replay exactly, the checks must
//! see a model that disagrees with the master, and shrinking must find a
//! small reproduction.

use unisched::soak::mesos::{self, MesosOp, MesosOptions, ops, sim::MesosSim};

fn options(seed: u64, steps: usize) -> MesosOptions {
    MesosOptions {
        seed,
        steps,
        ..Default::default()
    }
}

#[test]
fn mesos_seeds_hold() {
    for seed in [1, 2, 3] {
        let report = mesos::run_seed(&options(seed, 300), None, false);
        if let Some(f) = &report.execution.failure {
            panic!(
                "seed {seed}: violation at step {} ({:?}):\n  {}\nreproduce: cargo run --release -- soak --mesos --seed {seed} --steps 300",
                f.step,
                f.op,
                f.violations.join("\n  ")
            );
        }
        assert_eq!(report.execution.steps, 300);
        let c = &report.execution.counts;
        // The run did something of each kind that matters.
        assert!(c.offers > 0 && c.accepts > 0 && c.launched > 0, "{c:?}");
        assert!(c.updates > 0 && c.acks > 0 && c.subscriptions > 0, "{c:?}");
    }
}

#[test]
fn a_mesos_seed_replays_exactly() {
    let a = mesos::run_seed(&options(7, 200), None, false);
    let b = mesos::run_seed(&options(7, 200), None, false);
    assert!(a.execution.failure.is_none(), "{:?}", a.execution.failure);
    assert_eq!(a.execution.counts, b.execution.counts);
    assert_eq!(a.execution.fingerprint, b.execution.fingerprint);
    let other = mesos::run_seed(&options(8, 200), None, false);
    assert_ne!(a.execution.fingerprint, other.execution.fingerprint);
}

/// Runs seed `seed` until some framework holds an offer.
fn sim_with_an_offer(seed: u64) -> MesosSim {
    let mut sim = MesosSim::start(seed).expect("starts");
    let mut v = Vec::new();
    sim.react(&mut v).expect("settles");
    for (i, op) in ops::generate(seed, 400).iter().enumerate() {
        v.extend(sim.step(i + 1, op));
        assert!(v.is_empty(), "step {}: {v:?}", i + 1);
        if sim
            .fws
            .iter()
            .any(|f| f.connected() && !f.offers.is_empty())
        {
            return sim;
        }
    }
    panic!("no framework of seed {seed} got an offer in 400 steps");
}

#[test]
fn the_checks_see_an_offer_the_model_lost() {
    let mut sim = sim_with_an_offer(1);
    assert!(sim.check().is_empty());
    let f = sim
        .fws
        .iter_mut()
        .find(|f| f.connected() && !f.offers.is_empty())
        .expect("a framework with an offer");
    let id = f.offers.keys().next().cloned().expect("an offer");
    f.offers.remove(&id);
    let v = sim.check();
    assert!(
        v.iter().any(|x| x.contains("offers") && x.contains(&id)),
        "{v:?}"
    );
}

#[test]
fn the_checks_see_a_framework_the_master_forgot() {
    let mut sim = sim_with_an_offer(2);
    // A framework the model thinks connected that the master never had.
    let spare = sim
        .fws
        .iter()
        .position(|f| !f.connected())
        .expect("a free slot");
    sim.fws[spare].id = Some("no-such-framework".to_string());
    sim.fws[spare].conn = mesos::frameworks::Conn::Connected { since: sim.now() };
    let v = sim.check();
    assert!(v.iter().any(|x| x.contains("the master lost it")), "{v:?}");
}

#[test]
fn shrinking_keeps_the_failing_operations() {
    // A synthetic failure: a run fails once it has seen operations 3 and 7
    // of a list of 20 (in order); the shrinker must come down to those two.
    let wanted = unisched::soak::shrink::signature_of(&["boom at 7".to_string()]);
    let kept = unisched::soak::shrink::shrink_with((0..20).collect(), &wanted, |c| {
        let at3 = c.iter().position(|&i| i == 3)?;
        let at7 = c.iter().position(|&i| i == 7)?;
        (at3 < at7).then(|| (at7 + 1, vec!["boom at 7".to_string()]))
    });
    assert_eq!(kept, vec![3, 7]);
}

#[test]
fn operations_print_and_generate_the_same_list() {
    let a: Vec<MesosOp> = ops::generate(11, 500);
    assert_eq!(a, ops::generate(11, 500));
    assert_ne!(a, ops::generate(12, 500));
    assert!(a.iter().all(|op| !op.to_string().is_empty()));
}

/// Runs an explicit operation list on `seed` and fails on any violation.
fn holds(seed: u64, ops: &[MesosOp]) {
    let run = mesos::execute(&options(seed, ops.len()), ops);
    if let Some(f) = &run.failure {
        panic!(
            "seed {seed}: violation at step {} ({:?}):\n  {}",
            f.step,
            f.op,
            f.violations.join("\n  ")
        );
    }
}

use unisched::soak::mesos::ops::{AcceptKind, Refuse};

fn subscribe(fw: u8) -> MesosOp {
    MesosOp::Subscribe {
        fw,
        old_id: false,
        suppressed: 0,
    }
}

fn accept(fw: u8, offer: u32, kind: AcceptKind, tasks: u8, size: u8) -> MesosOp {
    MesosOp::Accept {
        fw,
        offer,
        kind,
        tasks,
        size,
        plan: 34,
        refuse: Refuse::Zero,
    }
}

/// A provider's disk a framework declined stays filtered when the
/// provider's stream drops and it subscribes again (its pool node used to
/// be made anew, without the core's filter on it).
#[test]
fn regression_a_declined_provider_disk_stays_filtered_across_its_reconnection() {
    holds(
        104,
        &[
            subscribe(3),
            MesosOp::Decline {
                fw: 3,
                offer: 28447,
                all: true,
                refuse: Refuse::Omitted,
            },
            MesosOp::ProviderDrop { p: 0 },
        ],
    );
}

/// A DESTROY_DISK the provider finished while disconnected is listed as
/// finished in its next UPDATE_STATE, whose resources already hold the
/// RAW disk it gave back: the master used to convert it a second time
/// (the agent's total grew by the volume).
#[test]
fn regression_an_operation_listed_finished_in_update_state_converts_once() {
    holds(
        138,
        &[
            subscribe(3),
            MesosOp::AgentRemove { agent: 24699 },
            accept(3, 32561, AcceptKind::DestroyDisk, 2, 3),
            MesosOp::AgentReturn { host: 30498 },
            subscribe(0),
            accept(3, 35184, AcceptKind::CreateDisk, 1, 1),
            MesosOp::ProviderAnswer {
                p: 1,
                pick: 44733,
                outcome: 2,
            },
            accept(0, 42496, AcceptKind::DestroyDisk, 3, 1),
            MesosOp::ProviderDrop { p: 1 },
            MesosOp::ProviderAnswer {
                p: 1,
                pick: 12873,
                outcome: 3,
            },
        ],
    );
}

/// What a pending CREATE_DISK takes of a provider's RAW disk is neither
/// free nor offered until the provider answers: the core used to lease it
/// again (its allocations above the master's offers and tasks).
#[test]
fn regression_a_pending_disk_operation_holds_its_resources() {
    for seed in [1, 2, 3, 4, 5] {
        holds(
            seed,
            &[
                subscribe(3),
                accept(3, 1, AcceptKind::CreateDisk, 1, 1),
                MesosOp::Advance { secs: 2 },
                accept(3, 2, AcceptKind::CreateDisk, 1, 2),
                MesosOp::Advance { secs: 2 },
            ],
        );
    }
}

/// An operation without an id asks for no feedback: when its provider's
/// stream drops it must not reach the framework as OPERATION_UNREACHABLE
/// (it used to, with an empty operation id).
#[test]
fn regression_an_operation_without_an_id_gets_no_status() {
    for seed in [1, 2, 3, 4, 5] {
        // Offer pick 5: a multiple of 5, so the operation has no id.
        holds(
            seed,
            &[
                subscribe(3),
                accept(3, 5, AcceptKind::CreateDisk, 1, 1),
                MesosOp::ProviderDrop { p: 0 },
                MesosOp::ProviderDrop { p: 1 },
                MesosOp::Advance { secs: 2 },
            ],
        );
    }
}

/// The provider side runs in the soak: a few seeds subscribe providers,
/// make disk operations and see their statuses acknowledged.
#[test]
fn mesos_seeds_exercise_resource_providers() {
    let mut total = mesos::MesosCounts::default();
    for seed in [1, 2, 3] {
        let report = mesos::run_seed(&options(seed, 600), None, false);
        assert!(
            report.execution.failure.is_none(),
            "seed {seed}: {:?}",
            report.execution.failure
        );
        total.add(&report.execution.counts);
    }
    assert!(
        total.provider_subscriptions > 0 && total.provider_updates > 0,
        "{total:?}"
    );
    assert!(
        total.operations > 0 && total.operation_statuses > 0 && total.operation_acks > 0,
        "{total:?}"
    );
}

/// The checks read `/state` without what has ended: apart from those
/// lists, it is the whole `/state`.
#[test]
fn the_live_state_is_the_state_without_what_ended() {
    let mut sim = MesosSim::start(3).expect("starts");
    let mut v = Vec::new();
    sim.react(&mut v).expect("settles");
    for (i, op) in ops::generate(3, 300).iter().enumerate() {
        v.extend(sim.step(i + 1, op));
    }
    assert!(v.is_empty(), "{v:?}");
    let mut full = sim.world.state().expect("state");
    let live = sim.world.live_state().expect("live state");
    let ended = full["completed_frameworks"].as_array().map_or(0, Vec::len)
        + full["frameworks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| f["completed_tasks"].as_array().map_or(0, Vec::len))
            .sum::<usize>();
    assert!(ended > 0, "the run ended something");
    full["completed_frameworks"] = serde_json::json!([]);
    for f in full["frameworks"].as_array_mut().into_iter().flatten() {
        f["completed_tasks"] = serde_json::json!([]);
    }
    assert_eq!(full, live);
}

/// The summary lines of `unisched soak --mesos` that count what happened
/// (not the wall time), with `UNISCHED_OFFER_RUN_PART` set or not.
fn soak_counts(part: Option<&str>) -> Vec<String> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_unisched"));
    cmd.args([
        "soak",
        "--mesos",
        "--seed",
        "11",
        "--seeds",
        "3",
        "--steps",
        "300",
        "--no-shrink",
    ])
    .env("RUST_LOG", "off");
    if let Some(part) = part {
        cmd.env("UNISCHED_OFFER_RUN_PART", part);
    }
    let out = cmd.output().expect("run unisched soak --mesos");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" 0 seeds with violations"), "{text}");
    let counts: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("  virtual seconds") || l.starts_with("  providers:"))
        .map(str::to_string)
        .collect();
    assert_eq!(counts.len(), 2, "{text}");
    counts
}

/// An allocation run the core sends in parts (here one lease a part, so
/// every run of the soak is) is applied by the master as one step: no
/// violation, and the same decisions as when each run comes whole.
#[test]
fn allocation_runs_sent_in_parts_decide_as_whole_runs() {
    assert_eq!(soak_counts(Some("1")), soak_counts(None));
}
