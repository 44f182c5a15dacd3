#!/usr/bin/env bash
# Runs every check of the project: formatting, lints with warnings denied, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked --workspace
