#!/usr/bin/env bash
# Installs what pagelab needs on a fresh machine and builds it. Safe to run again.
#
#   scripts/setup.sh                          packages, the release build, the Python package
#   scripts/setup.sh --packages-only          the packages and the virtualenv, nothing built
#   scripts/setup.sh --python-package PROFILE the Python package alone, built with a Cargo
#                                             profile (`dev` beside the tests' build)
#
# scripts/test.sh uses the last two: its tests need no release build, and the Python
# package built with the `dev` profile after the tests' build shares that build's crates.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
profile=release
case "${1:-}" in
"") ;;
--packages-only) mode=packages ;;
--python-package)
    mode=python
    profile=${2:-}
    if [ -z "$profile" ]; then
        echo "pagelab setup: --python-package needs a Cargo profile (release, dev, ...)" >&2
        exit 2
    fi
    ;;
*)
    echo "pagelab setup: unknown argument \`$1\`: give none, --packages-only or --python-package PROFILE" >&2
    exit 2
    ;;
esac

# The Python package (python/: PyO3 bindings built by maturin, with the same target
# directory as the binary and the profile asked for, so the engine's crates are compiled
# once), into the virtualenv made below. Without build isolation pip runs the maturin it
# finds on PATH: the venv's.
python_package() {
    local args=""
    # maturin builds with the release profile unless told otherwise.
    [ "$profile" = release ] || args="--profile $profile"
    PATH="$PWD/.venv/bin:$PATH" MATURIN_PEP517_ARGS="$args" \
        .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./python
}
if [ "$mode" = python ]; then
    if [ ! -x .venv/bin/pip ]; then
        echo "pagelab setup: no virtualenv in .venv: run scripts/setup.sh (or --packages-only) first" >&2
        exit 1
    fi
    python_package
    exit 0
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "pagelab setup: cargo not found; install Rust (stable) first" >&2
    exit 1
fi

# The Debian packages, the virtualenv and its wheels need nothing the release build
# makes, and the build needs none of them: they are installed beside it (about a minute
# of downloads and unpacking on a fresh machine), and waited for before the Python
# package is built. Job control gives them a process group of their own, so that a
# failed build ends them too.
packages() {
    # Debian packages the tests and the capture backends use.
    need=()
    command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
    command -v zstd >/dev/null 2>&1 || need+=(zstd)
    command -v xz >/dev/null 2>&1 || need+=(xz-utils)
    command -v gzip >/dev/null 2>&1 || need+=(gzip)
    command -v qemu-x86_64 >/dev/null 2>&1 || need+=(qemu-user)
    command -v strace >/dev/null 2>&1 || need+=(strace)
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
    if [ ${#need[@]} -gt 0 ]; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "pagelab setup: missing ${need[*]}; run as root or install them with apt-get" >&2
            exit 1
        fi
        echo "pagelab setup: installing ${need[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi

    # Debian's chromium, for the HTML report's tests in a real browser
    # (crates/cli/tests/browser.rs); where it cannot be installed they skip, saying why.
    if ! command -v chromium >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "pagelab setup: chromium missing and not root; the HTML report's browser tests will be skipped" >&2
        else
            apt-get update -qq
            if apt-cache show chromium >/dev/null 2>&1; then
                echo "pagelab setup: installing chromium" >&2
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
            else
                echo "pagelab setup: no chromium package in this distribution; the HTML report's browser tests will be skipped" >&2
            fi
        fi
    fi

    # The virtualenv, and the wheels the Python package's tests and sweeps use.
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check \
        'maturin>=1.5,<2' 'numpy>=1.24' 'pandas>=2' 'pyarrow>=14' 'dask[distributed]>=2024.1' \
        'fsspec>=2023.1' 'pytest>=8' nbformat nbclient ipykernel 'ray>=2.9'
}
set -m
packages &
packages_pid=$!
set +m
trap 'kill -- "-$packages_pid" 2>/dev/null || true' EXIT
if [ "$mode" = all ]; then
    cargo build --release --locked -p pagelab
fi
status=0
wait "$packages_pid" || status=$?
trap - EXIT
if [ "$status" != 0 ]; then
    echo "pagelab setup: installing the packages failed (exit $status)" >&2
    exit "$status"
fi

if [ "$mode" = all ]; then
    python_package
fi
