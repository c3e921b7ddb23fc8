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
