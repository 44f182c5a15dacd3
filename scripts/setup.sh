#!/usr/bin/env bash
# Installs what pagelab needs on a fresh machine and builds it. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests and the capture backends use.
need=()
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
command -v gzip >/dev/null 2>&1 || need+=(gzip)
command -v qemu-x86_64 >/dev/null 2>&1 || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "pagelab setup: missing ${need[*]}; run as root or install them with apt-get" >&2
        exit 1
    fi
    echo "pagelab setup: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "pagelab setup: cargo not found; install Rust (stable) first" >&2
    exit 1
fi
cargo build --release --locked -p pagelab
