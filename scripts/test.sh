#!/usr/bin/env bash
# Runs every check of the project: formatting, lints with warnings denied, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean build gains nothing from incremental state, and it took 2.8 GB of
# the disk CI ran out of.
export CARGO_INCREMENTAL=0
# Each step's wall time, so a suite that outgrows its 30 minutes shows where.
last=$SECONDS
took() {
    echo "pagelab test: $1 took $((SECONDS - last)) s ($((SECONDS / 60)) min in all)" >&2
    last=$SECONDS
}
# The nightly builds, Miri's and the fuzz targets', need nothing the other steps make:
# they start now, beside those steps, at the lowest priority, so they take the CPU the
# others leave idle (downloads, links, single-threaded tests) and slow them little. Each
# is waited for, and its output shown, just before what runs it.
bg_logs=$(mktemp -d)
declare -A bg_pid
trap 'for p in "${bg_pid[@]}"; do kill -- "-$p" 2>/dev/null || true; done; rm -rf "$bg_logs"' EXIT
beside() { # NICE NAME COMMAND...: runs COMMAND at NICE in a process group of its own, output to NAME's log
    local niceness=$1 name=$2
    shift 2
    # Job control puts the job in its own process group (so the trap can end all of it)
    # but in this session: a new session would be a new autogroup where the kernel has
    # them, and the scheduler shares the CPU between autogroups whatever the tasks' nice.
    set -m
    nice -n "$niceness" "$@" >"$bg_logs/$name.log" 2>&1 &
    set +m
    bg_pid[$name]=$!
}
awaited() { # NAME: waits for NAME, shows its output; fails the suite if it failed
    local status=0
    wait "${bg_pid[$1]}" || status=$?
    cat "$bg_logs/$1.log" >&2
    if [ "$status" != 0 ]; then
        echo "pagelab test: $1 failed (exit $status)" >&2
        exit "$status"
    fi
}
# The decoders write through raw pointers into a Vec's spare capacity: they run under Miri
# on a few small streams (scripts/miri.sh), where the nightly toolchain can get Miri.
miri=()
if rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1; then
    miri=(bash scripts/miri.sh)
    beside 19 "the Miri build" "${miri[@]}" --no-run
fi
beside 19 "the fuzz build" bash scripts/fuzz.sh --if-available --build-only
# The packages and the virtualenv. The tests need no release build (they run the binaries
# `cargo test` builds), so the suite makes none: the README's first command makes it.
bash scripts/setup.sh --packages-only
took "set-up (packages, virtualenv)"
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
took "fmt and clippy"
# The tests are built with the dev profile (`test` inherits all of its settings): the Python
# package is built with it too, after them, and so reuses every crate they compiled (its
# build with the `test` profile would make the module a test harness, and cargo keeps a
# profile's crates apart from another's of the same settings).
# --timings: each crate's compile time and the build's concurrency, in
# target/cargo-timings/ (what to look at when this step grows).
cargo test --locked --workspace --profile dev --no-run --timings
took "building the tests"
# Its tests run the `pagelab` binary the tests' build made.
bash scripts/setup.sh --python-package dev
export PAGELAB_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/pagelab"
took "the Python package"
# The test binaries two at a time (`cargo test` runs one at a time, and a binary of one
# long test leaves the other core idle): those that time the machine alone, those that
# set the THP knobs or the hugetlb pool and compare them with what they saw before one at
# a time (a binary's own lock serialises its tests, not another binary's), the longest
# first. A new binary of either kind must be named here. Then the doc tests.
jobs=$(nproc)
[ "$jobs" -ge 2 ] || jobs=2
alone=(pagelab:machines pagelab:bench_predict)
serial=(pagelab-lab pagelab:run pagelab:bench pagelab:validate pagelab:validate_kernel_writes
    pagelab:validate_per_mapping)
first=(pagelab:machines pagelab:bench_predict pagelab:capture pagelab-mm pagelab-engine
    pagelab-capture:fast_path pagelab:validate pagelab:browser pagelab-capture:real_program)
tests_status=0
python3 scripts/run-tests.py --profile dev --jobs "$jobs" --workspace \
    "${alone[@]/#/--alone=}" "${serial[@]/#/--serial=}" "${first[@]/#/--first=}" || tests_status=$?
cargo test --locked --workspace --profile dev --doc || tests_status=$?
[ "$tests_status" = 0 ] || exit "$tests_status"
took "the tests"
# The Python package against the command line, on a real Dask cluster (python/tests).
(cd python && ../.venv/bin/pytest -q -p no:cacheprovider)
# The Python path's rates beside the command line's, and a sweep serial, on a
# process pool and on a Dask LocalCluster (about 35 s; it prints, the goals are
# read from its figures in docs/python.md, not asserted on a shared machine).
.venv/bin/python python/bench/bench.py --quick
took "the Python tests and benchmark"
# The SIMD tiers: the trace, engine and CLI end-to-end suites once more on the
# portable tier (the run above used this CPU's best), holding the same expected
# results; crates/cli/tests/isa.rs compares every tier's JSON byte for byte.
# The binaries are those built above, run again (a `cargo test -p` of fewer
# packages unifies features differently and rebuilt for about 4.5 minutes).
# They and Miri run beside the fuzz build's end and the fuzzing: the fuzzing's length is
# its 60 s a target of wall time whatever runs beside it (the targets make fewer runs), so
# what runs beside it adds nothing to the suite's time. The fuzzing waits for its build, so
# that build now has the CPU first (as root, the only user who may lower a niceness) and
# the reruns and Miri what it leaves, until it is done. Their output is shown, and a
# failure fails the suite, after the fuzzing.
renice -n 0 -g "${bg_pid[the fuzz build]}" >/dev/null 2>&1 || true
beside 19 "the portable tier's reruns" env PAGELAB_ISA=portable \
    python3 scripts/run-tests.py --profile dev --jobs "$jobs" \
    pagelab-trace pagelab-engine pagelab:cli pagelab:isa
# The decoder under Miri (about half a minute once built), or why not.
if [ ${#miri[@]} -gt 0 ]; then
    awaited "the Miri build"
    beside 19 Miri "${miri[@]}"
else
    echo "pagelab test: Miri skipped: rustup could not add miri and rust-src to the nightly toolchain" >&2
fi
# Each fuzz target for 60 s, two at a time (skipped, saying why, without nightly).
awaited "the fuzz build"
for name in "the portable tier's reruns" Miri; do
    [ -z "${bg_pid[$name]:-}" ] || renice -n 0 -g "${bg_pid[$name]}" >/dev/null 2>&1 || true
done
took "the rest of the nightly builds (the reruns and Miri beside them)"
bash scripts/fuzz.sh --if-available 60
took "fuzzing (the reruns and Miri beside it)"
awaited "the portable tier's reruns"
if [ ${#miri[@]} -gt 0 ]; then
    awaited Miri
fi
took "the reruns and Miri after the fuzzing"
# The build's footprint, so a run that nears the disk's limit shows it.
du -sh target 2>/dev/null | sed 's/^/pagelab test: target directory: /' >&2
