#!/usr/bin/env bash
# Builds pagelab's cargo-fuzz targets once and runs each for SECONDS (default 60)
# of wall time, two at a time (or FUZZ_JOBS), then prints per target the CPU
# seconds it had, the executions and the corpus size. Exits non-zero if a target crashed; its input is kept in
# fuzz/artifacts/<target>/ (replay: cargo +nightly fuzz run -a <target> <file>).
#
#   scripts/fuzz.sh [--if-available] [--build-only] [SECONDS] [TARGET...]
#
# --if-available: when nightly Rust is missing, say so and exit 0 (CI).
# --build-only: build the targets and stop (CI builds them beside its other steps).
# cargo-fuzz is installed with `cargo install` if it is missing.
# New corpus entries go to fuzz/corpus/<target> (not committed); the
# committed seeds in fuzz/seeds/<target> are read too, never written.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

optional=0
if [ "${1:-}" = "--if-available" ]; then
    optional=1
    shift
fi
build_only=0
if [ "${1:-}" = "--build-only" ]; then
    build_only=1
    shift
fi
seconds=${1:-60}
shift || true
targets=("$@")

if ! cargo +nightly --version >/dev/null 2>&1; then
    if [ "$optional" = 1 ]; then
        echo "pagelab fuzz: skipped: no nightly toolchain (cargo +nightly); cargo-fuzz needs one" >&2
        exit 0
    fi
    echo "pagelab fuzz: cargo-fuzz needs the nightly toolchain: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "pagelab fuzz: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz >&2
fi

cd fuzz
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
# One build for every target and every run: the same flags for build and run
# (debug assertions and overflow checks on, so the engine checks the models'
# invariants), one target directory.
flags=(-a --target-dir "${CARGO_TARGET_DIR:-$root/target}/fuzz")
cargo +nightly fuzz build "${flags[@]}"
if [ "$build_only" = 1 ]; then
    exit 0
fi

jobs=${FUZZ_JOBS:-2}
# FUZZ_LOGS=DIR keeps each target's libFuzzer log there (DIR/<target>.log).
if [ -n "${FUZZ_LOGS:-}" ]; then
    logs=$FUZZ_LOGS
    mkdir -p "$logs"
else
    logs=$(mktemp -d)
    trap 'rm -rf "$logs"' EXIT
fi
run() {
    local t=$1 status=0
    mkdir -p "corpus/$t" "seeds/$t"
    # -timeout: one input taking over FUZZ_TIMEOUT (10) s is a hang (raise it on
    # a loaded machine, where a niced target gets little of a core); -rss_limit_mb: 2G.
    # `time` writes the target's user and system CPU seconds to $t.cpu.
    local TIMEFORMAT="%U %S"
    { time nice -n "${FUZZ_NICE:-0}" cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1 \
        >"$logs/$t.log" 2>&1; } 2>"$logs/$t.cpu" || status=$?
    return $status
}

failed=()
declare -A pid_of
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    run "$t" &
    pid_of[$t]=$!
done
for t in "${targets[@]}"; do
    if ! wait "${pid_of[$t]}"; then
        failed+=("$t")
    fi
done

printf '%-14s %8s %8s %12s %8s %10s\n' target seconds cpu-s executions corpus crashed
for t in "${targets[@]}"; do
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t.log" | grep -o '[0-9]*$' || true)
    files=$(find "corpus/$t" -type f | wc -l)
    crashed=no
    if [[ " ${failed[*]} " == *" $t "* ]]; then crashed=yes; fi
    cpu=$(awk '{ printf "%.0f", $1 + $2 }' "$logs/$t.cpu" 2>/dev/null || true)
    printf '%-14s %8s %8s %12s %8s %10s\n' "$t" "$seconds" "${cpu:-?}" "${execs:-?}" "$files" "$crashed"
done
if [ ${#failed[@]} -gt 0 ]; then
    for t in "${failed[@]}"; do
        echo "---- $t: last lines of its log" >&2
        tail -n 40 "$logs/$t.log" >&2
    done
    echo "pagelab fuzz: crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
