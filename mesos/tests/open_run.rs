//! While an allocation run sent in parts is open, the master waits for its
//! next part without burning a CPU, even when a timer is due (timers wait for
//! the run to close). Its own test binary: it reads the CPU time of the one
//! master thread of the process.

use std::time::Duration;

use unisched_core::{ManualClock, Scheduler, SchedulerOptions};
use unisched_mesos::master::{CoreUpdate, Input, MasterHandle, Settings};
use unisched_mesos::v1;
use unisched_mesos::v1::scheduler::{call, event};
use unisched_shim_api::Leases;
use unisched_si as si;

/// CPU time (ns) of the threads named `name` in this process (a thread's
/// `comm` holds the first 15 bytes of its name).
fn cpu_of(name: &str) -> u64 {
    let name = &name[..name.len().min(15)];
    let mut total = 0;
    let mut found = false;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        found = true;
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    assert!(found, "no thread named {name}");
    total
}

#[test]
fn an_open_run_with_a_due_timer_does_not_spin() {
    let clock = ManualClock::new(1_000_000_000_000);
    let core = Scheduler::start(SchedulerOptions {
        clock: clock.clone(),
        ..Default::default()
    });
    let settings = Settings {
        allocation_interval: Duration::from_secs(3600),
        ..Settings::default()
    };
    let master = MasterHandle::start(core.clone(), None, settings).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (_stream, mut rx) = master.subscribe(
        call::Subscribe {
            framework_info: v1::FrameworkInfo {
                name: "open-run".into(),
                user: "test".into(),
                ..Default::default()
            },
            ..Default::default()
        },
        64,
    );
    runtime.block_on(master.sync()).unwrap();
    assert_eq!(rx.try_recv().unwrap().r#type(), event::Type::Subscribed);
    // A run's first part opens it (its one lease names nothing we have and
    // goes back); then the heartbeat comes due.
    let lease = si::Allocation {
        allocation_key: "nobody".into(),
        application_id: "nobody".into(),
        allocation_id: "a-lease".into(),
        node_id: "nowhere".into(),
        ..Default::default()
    };
    master.send(Input::Core(CoreUpdate::Allocation(
        Leases::from_wire(
            si::AllocationResponse {
                new: vec![lease],
                ..Default::default()
            },
            true,
        ),
        std::time::Instant::now(),
    )));
    clock.advance(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(50));
    let before = cpu_of("unisched-mesos-master");
    std::thread::sleep(Duration::from_millis(400));
    let used = cpu_of("unisched-mesos-master") - before;
    assert!(
        used < 100_000_000,
        "the master thread used {} ms of CPU in 400 ms of an open run",
        used / 1_000_000
    );
    // The last part closes the run; the due heartbeat then fires.
    master.send(Input::Core(CoreUpdate::Allocation(
        Leases::default(),
        std::time::Instant::now(),
    )));
    runtime.block_on(master.sync()).unwrap();
    assert_eq!(rx.try_recv().unwrap().r#type(), event::Type::Heartbeat);
    master.shutdown();
    core.shutdown();
}
