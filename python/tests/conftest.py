"""Shared fixtures: the command line to compare with, the bundled trace, a Dask cluster."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "tests" / "data" / "gzip-9.lackey.zst"


def pagelab_bin() -> Path:
    """The `pagelab` binary `scripts/setup.sh` built (or $PAGELAB_BIN)."""
    if os.environ.get("PAGELAB_BIN"):
        return Path(os.environ["PAGELAB_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "pagelab"


@pytest.fixture(scope="session")
def cli() -> Path:
    path = pagelab_bin()
    if not path.exists():
        pytest.fail(f"{path} is missing: run `bash scripts/setup.sh` (it builds the release binary)")
    return path


def cli_sim(cli: Path, tmp_path: Path, *args: str) -> dict[str, Any]:
    """`pagelab sim ARGS --json`: the document it writes."""
    out = tmp_path / "cli.json"
    subprocess.run([str(cli), "sim", *args, "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def cli_error(cli: Path, *args: str) -> str:
    """The message `pagelab ARGS` fails with, after `pagelab: error: `."""
    p = subprocess.run([str(cli), *args], capture_output=True, text=True)
    assert p.returncode != 0, f"pagelab {' '.join(args)} succeeded"
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("pagelab: error: "), p.stderr
    return line.removeprefix("pagelab: error: ")


def timeless(doc: dict[str, Any]) -> dict[str, Any]:
    """A result without its wall-clock time and its provenance (pagelab's version, the
    command line, the host: what made it), the fields two runs may differ in."""
    return {k: v for k, v in doc.items() if k not in ("elapsed_seconds", "provenance")}


@pytest.fixture(scope="module")
def dask_cluster():
    """A real Dask cluster on this machine: a scheduler and two worker processes of one
    thread each, as `pagelab.sweep.local_cluster` starts them (its `DASK_CONFIG`)."""
    distributed = pytest.importorskip("distributed")
    from pagelab.sweep import local_cluster

    with local_cluster(2, dashboard_address=None, silence_logs=40) as cluster, distributed.Client(cluster) as client:
        yield cluster, client
