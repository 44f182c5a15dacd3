#!/usr/bin/env bash
# Runs every check of the project: formatting, lints with warnings denied, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked --workspace
# The SIMD tiers: the trace, engine and CLI end-to-end suites once more on the
# portable tier (the run above used this CPU's best), holding the same expected
# results; crates/cli/tests/isa.rs compares every tier's JSON byte for byte.
PAGELAB_ISA=portable cargo test --locked -p pagelab-trace -p pagelab-engine
PAGELAB_ISA=portable cargo test --locked -p pagelab --test cli --test isa
