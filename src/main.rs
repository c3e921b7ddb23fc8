//! The `unisched` command line: simulate, scenario, check-config, bench, soak, serve, framework, provider.

use std::alloc::GlobalAlloc;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use unisched::cli;

// The core allocates small objects at a high rate (allocation records, wire
// messages); mimalloc halves the time spent in the allocator (BENCHMARKS.md).
// Built without transparent huge pages (`no_thp`): a first touch then zeroes
// 4 KiB, not 2 MiB, which halves peak RSS and takes the multi-millisecond page
// faults out of the latency tail, at no measurable cost in throughput.
#[global_allocator]
static GLOBAL: WordAligned = WordAligned;

/// mimalloc, entered by its plain `mi_malloc` and `mi_zalloc` for layouts
/// that ask for no more than word alignment, and by the `mimalloc` crate
/// (its aligned entries) for the rest. Every mimalloc block is a whole
/// number of words from a page start that is at least 16-byte aligned, so a
/// plain block is word aligned whatever its size; a 24-byte block may not
/// be 16-byte aligned, which is why only word alignment takes the plain
/// path. The crate enters every allocation through `mi_malloc_aligned`,
/// which checks the alignment of the block it finds and, for a block above
/// the small sizes or when its page has no free block, takes a generic path
/// before falling back to the plain one: 89 instructions an allocation on
/// the Mesos master's thread in W4, against 66 through `mi_malloc` (callgrind,
/// BENCHMARKS.md; both include mimalloc's slow path for a page it has not
/// yet used). Almost every allocation
/// here (strings, `Arc<str>`, vectors of words or bytes, boxes) asks for
/// word alignment or less; hash tables ask for 16 and go the crate's way.
struct WordAligned;

/// The alignment every mimalloc block has.
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each call hands the layout's request to mimalloc, which returns
// null or a block of at least `size` bytes: through the plain entries only
// when the layout asks for no more than the word alignment every block has,
// else through the crate's aligned entries. Every block, however made, is
// freed and resized by mimalloc's own `mi_free` and `mi_realloc*`, which
// accept any block of its heap.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for WordAligned {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: see the impl.
            unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: see the impl.
            unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` is a block of this allocator (the caller's contract).
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on; mimalloc resizes a
        // word-aligned request with its plain realloc itself.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

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

    /// Every layout gets a block with its alignment, zeroed where asked,
    /// whose bytes survive a resize, through either entry of the
    /// allocator; odd-word sizes with 16-byte alignment (mimalloc's 24-byte
    /// blocks are not all 16-byte aligned) included.
    #[test]
    fn the_allocator_keeps_every_alignment() {
        use std::alloc::Layout;
        let mut kept = Vec::new();
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=200).chain([1000, 4095, 70_000, 1 << 21]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                for zeroed in [false, true] {
                    #[allow(unsafe_code)]
                    // SAFETY: a layout of non-zero size; the block is
                    // written within its size, resized and freed once.
                    unsafe {
                        let p = if zeroed {
                            GLOBAL.alloc_zeroed(layout)
                        } else {
                            GLOBAL.alloc(layout)
                        };
                        assert!(!p.is_null(), "{size} bytes aligned {align}");
                        assert_eq!(p as usize % align, 0, "{size} bytes aligned {align}");
                        if zeroed {
                            let block = std::slice::from_raw_parts(p, size);
                            assert!(block.iter().all(|&b| b == 0), "{size} bytes zeroed");
                        }
                        for i in 0..size {
                            *p.add(i) = (i % 251) as u8;
                        }
                        let grown = GLOBAL.realloc(p, layout, size * 3);
                        assert!(!grown.is_null());
                        assert_eq!(
                            grown as usize % align,
                            0,
                            "{size} bytes resized, aligned {align}"
                        );
                        let block = std::slice::from_raw_parts(grown, size);
                        assert!(
                            block.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
                            "{size} bytes kept by the resize"
                        );
                        // Kept until the end, so later blocks come from
                        // pages already in use as well as fresh ones.
                        kept.push((grown, Layout::from_size_align(size * 3, align).unwrap()));
                    }
                }
            }
        }
        for (p, layout) in kept {
            #[allow(unsafe_code)]
            // SAFETY: each block once, with the layout it has now.
            unsafe {
                GLOBAL.dealloc(p, layout)
            };
        }
    }

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
