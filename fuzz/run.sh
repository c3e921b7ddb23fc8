#!/usr/bin/env bash
# Builds the fuzz targets as cargo-fuzz would (libFuzzer with SanitizerCoverage
# instrumentation, release with debug assertions and overflow checks) on the
# stable toolchain, without installing cargo-fuzz, then runs each target for
# SECONDS. A crash fails the script; its input is in fuzz/artifacts/<target>/.
# To read what an `si_requests` input does, run the built target on it with
# UNISCHED_FUZZ_TRACE=1 (it prints each operation):
#   UNISCHED_FUZZ_TRACE=1 fuzz/target/<host triple>/release/si_requests INPUT
#
#   bash fuzz/run.sh [SECONDS] [TARGET...]     (default: 30 s, every target)
#
# New inputs found go to a scratch directory, so the committed corpus
# (fuzz/corpus/<target>/) only changes by hand, e.g. with libFuzzer's -merge=1.
# Not --locked: fuzz/Cargo.lock (a copy of the root lock plus libfuzzer-sys and
# arbitrary) then takes new dependencies of the workspace crates as they come.
set -euo pipefail
cd "$(dirname "$0")"

secs=${1:-30}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config_parse si_requests rest_bodies mesos_scheduler_calls mesos_operator_calls mesos_provider_calls mesos_recordio mesos_resources)
fi

# An explicit --target keeps RUSTFLAGS off build scripts and proc macros,
# which must not be instrumented (cargo-fuzz does the same).
triple=$(rustc -vV | sed -n 's/^host: //p')
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  -Cllvm-args=-sanitizer-coverage-stack-depth
  --cfg fuzzing
)
export RUSTFLAGS="${flags[*]}"
export CARGO_INCREMENTAL=0

start=$(date +%s)
cargo build --release --target "$triple" --bins
echo "== fuzz targets built in $(($(date +%s) - start)) s"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${secs} s"
  mkdir -p "artifacts/$t" "corpus/$t" "$scratch/$t"
  # -timeout catches a hang (a settle() that never returns); -rss_limit_mb a leak.
  "./target/$triple/release/$t" \
    -max_total_time="$secs" \
    -timeout=20 \
    -rss_limit_mb=2048 \
    -max_len=16384 \
    -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" \
    "$scratch/$t" "corpus/$t"
done
echo "== fuzzing passed"
