//! The `unisched` command line: simulate, scenario, check-config, bench, soak, serve, framework, provider.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use unisched::cli;

// The core allocates small objects at a high rate (allocation records, wire
// messages); mimalloc halves the time spent in the allocator (BENCHMARKS.md).
// Built without transparent huge pages (`no_thp`): a first touch then zeroes
// 4 KiB, not 2 MiB, which halves peak RSS and takes the multi-millisecond page
// faults out of the latency tail, at no measurable cost in throughput.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` (mimalloc.h): how long freed memory stays mapped
/// before it is given back to the OS, in ms.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long this process keeps freed memory mapped for reuse (mimalloc's
/// default is 1 s). An allocation run makes and frees its records every
/// `--allocation-interval` (1 s): given back after 1 s, a run's memory came
/// back as fresh pages, each first touch a page fault (W4 through the Mesos
/// front end: 600–2,200 faults a run, now 60–500, and runs 9–27% faster;
/// BENCHMARKS.md). Kept for 10 s, the next run reuses it. Peak RSS is
/// unchanged (W1 37 MiB).
const KEEP_FREED_MEMORY_MS: std::ffi::c_long = 10_000;

/// Sets mimalloc's purge delay to [`KEEP_FREED_MEMORY_MS`], unless the
/// environment sets it (`MIMALLOC_PURGE_DELAY`, which mimalloc reads).
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: one integer option of the allocator, set before any other
    // thread starts; mimalloc reads it on each purge decision.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, KEEP_FREED_MEMORY_MS);
    }
}

/// unisched: a cluster scheduler core.
#[derive(Debug, Parser)]
#[command(name = "unisched", version = cli::VERSION, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an in-process simulated RM against the core and print a summary.
    Simulate(cli::simulate::SimulateArgs),
    /// Run declarative scenario files and check their expectations.
    Scenario(cli::scenario::ScenarioArgs),
    /// Validate queue configuration files.
    CheckConfig(cli::check_config::CheckConfigArgs),
    /// Run a throughput benchmark workload.
    Bench(cli::bench::BenchArgs),
    /// Run the seeded deterministic simulation with fault injection and invariant checks.
    Soak(cli::soak::SoakArgs),
    /// Serve the scheduler over gRPC and REST (and, with --mesos-addr, as a Mesos master).
    Serve(Box<cli::serve::ServeArgs>),
    /// Run N tasks as a Mesos framework on any Mesos master; exit 0 once all finished.
    Framework(Box<cli::framework::FrameworkArgs>),
    /// Offer a directory-backed pool of disk as a Mesos resource provider until Ctrl-C.
    Provider(Box<cli::provider::ProviderArgs>),
}

fn main() -> ExitCode {
    keep_freed_memory();
    cli::init_tracing();
    let args = Args::parse();
    match args.command {
        Command::Simulate(a) => cli::simulate::run(a),
        Command::Scenario(a) => cli::scenario::run(a),
        Command::CheckConfig(a) => cli::check_config::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Soak(a) => cli::soak::run(a),
        Command::Serve(a) => cli::serve::run(*a),
        Command::Framework(a) => cli::framework::run(*a),
        Command::Provider(a) => cli::provider::run(*a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option number is mimalloc's purge delay: a child of this test
    /// binary started with `MIMALLOC_PURGE_DELAY` (which mimalloc reads
    /// into that option) reads the value back under the number; and with
    /// no such variable, the call sets it.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        #[allow(unsafe_code)]
        // SAFETY: reads one integer option.
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        match std::env::var("UNISCHED_TEST_PURGE_DELAY_CHILD").as_deref() {
            Ok("env") => assert_eq!(
                get(),
                4321,
                "mimalloc read the variable into another option"
            ),
            Ok(_) => {
                keep_freed_memory();
                assert_eq!(get(), KEEP_FREED_MEMORY_MS);
            }
            Err(_) => {
                let exe = std::env::current_exe().expect("the test binary");
                for (child, env) in [("env", Some("4321")), ("set", None)] {
                    let mut cmd = std::process::Command::new(&exe);
                    cmd.args(["--exact", "tests::the_purge_delay_option_is_the_one_set"])
                        .env("UNISCHED_TEST_PURGE_DELAY_CHILD", child)
                        .env_remove("MIMALLOC_PURGE_DELAY");
                    if let Some(v) = env {
                        cmd.env("MIMALLOC_PURGE_DELAY", v);
                    }
                    let out = cmd.output().expect("run the child");
                    assert!(
                        out.status.success(),
                        "child {child}: {}",
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
            }
        }
    }
}
