#!/usr/bin/env bash
# The code that writes through raw pointers, under Miri (nightly), on small inputs: the
# fast capture decoder's streams, and the field-by-field writes of references into a
# vector's spare room (pagelab-core's `Event::write_ref`, the native decoder's vector of
# events). The tests it runs are those whose names end in `for_miri`.
#
# Usage: scripts/miri.sh [--no-run]   (--no-run: build only)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=target/miri
run=(cargo +nightly miri test --locked)
if [ "${1:-}" = --no-run ]; then
    "${run[@]}" -p pagelab-capture --test fast_path --no-run
    "${run[@]}" -p pagelab-core -p pagelab-trace --lib --no-run
    exit 0
fi
"${run[@]}" -p pagelab-capture --test fast_path for_miri
"${run[@]}" -p pagelab-core -p pagelab-trace --lib for_miri
