"""`pagelab sweep SWEEP.toml [--dask ADDRESS]`: Parquet and JSON equal to the API's sweep."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest

import pagelab
from conftest import BUNDLED, cli_sim, timeless
from pagelab.sweep import SerialExecutor

SWEEP = f"""
sources = ["stride:iters=10", "gups:updates=300000", "{BUNDLED}"]
page_sizes = ["4K", "2M"]
tlbs = ["weisberg", "skylake"]
policies = ["base:4K", "linux-thp:enabled=always"]
memory = "2G"
"""


def run_cli(cli, *args, **kw):
    # The binary finds the Python package through $PAGELAB_PYTHON (the interpreter running these tests).
    env = dict(os.environ, PAGELAB_PYTHON=os.environ.get("PAGELAB_PYTHON", __import__("sys").executable))
    return subprocess.run([str(cli), *args], capture_output=True, text=True, env=env, **kw)


def comparable(df):
    return df.drop(columns=["elapsed_seconds"]).reset_index(drop=True)


@pytest.mark.parametrize("on_dask", [False, True])
def test_sweep_command(cli, tmp_path, dask_cluster, on_dask):
    spec = tmp_path / "sweep.toml"
    spec.write_text(SWEEP)
    out = tmp_path / "out"
    args = ["sweep", str(spec), "-o", str(out)]
    if on_dask:
        args += ["--dask", dask_cluster[0].scheduler_address]
    p = run_cli(cli, *args)
    assert p.returncode == 0, p.stderr
    assert "24 runs: 3 sources x 4 configurations" in p.stdout
    configs = [
        {"name": "weisberg", "tlb": "weisberg", "page_sizes": ["4K", "2M"]},
        {"name": "weisberg policies", "tlb": "weisberg", "policies": ["base:4K", "linux-thp:enabled=always"], "memory": "2G"},
        {"name": "skylake", "tlb": "skylake", "page_sizes": ["4K", "2M"]},
        {"name": "skylake policies", "tlb": "skylake", "policies": ["base:4K", "linux-thp:enabled=always"], "memory": "2G"},
    ]
    sources = ["stride:iters=10", "gups:updates=300000", str(BUNDLED)]
    expected = pagelab.sweep(sources, configs, executor=SerialExecutor())
    got = pd.read_parquet(out / "result.parquet")
    order = ["source", "config", "page_size", "policy"]
    expected = expected.sort_values(order, na_position="first", kind="stable")
    got = got.sort_values(order, na_position="first", kind="stable")
    pd.testing.assert_frame_equal(
        comparable(got[expected.columns]).drop(columns=["tlb_levels"]),
        comparable(expected).drop(columns=["tlb_levels"]),
        check_dtype=False,
    )
    html = (out / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "skylake policies" in html
    doc = json.loads((out / "result.json").read_text())
    assert doc["schema"] == "pagelab.sweep/1" and len(doc["results"]) == 12
    assert {(d["source"], d["config"]) for d in doc["results"]} == {
        (s, c["name"]) for s in sources for c in configs
    }


def test_sweep_file_errors(cli, tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('sources = ["stride"]\ntlb = ["skylake"]\n')
    p = run_cli(cli, "sweep", str(spec))
    assert p.returncode == 1
    assert f"pagelab: error: {spec}: unknown field `tlb`" in p.stderr
    spec.write_text('sources = ["stride:nope=1"]\n')
    p = run_cli(cli, "sweep", str(spec), "-o", str(tmp_path / "o"))
    assert p.returncode == 1 and "workload `stride` has no parameter `nope`" in p.stderr


def test_sweep_without_the_package(cli, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('sources = ["stride"]\n')
    env = {"PATH": "/nonexistent", "PAGELAB_PYTHON": "/nonexistent/python"}
    p = subprocess.run([str(cli), "sweep", str(spec)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 1
    assert "runs on the Python package" in p.stderr and "scripts/setup.sh" in p.stderr


def test_sweep_file_virt_is_the_clis(cli, tmp_path):
    """`virt` in the sweep file is `--virt` for every configuration: the sweep's results are
    exactly `pagelab sim --machine M --virt ...`'s (nested walks, costs and all)."""
    spec = "gups:table=64M,updates=50000"
    sweep = tmp_path / "nested.toml"
    sweep.write_text(
f'sources = ["{spec}"]\nmachines = ["pentium4"]\nvirt = "nested:host=4K"\n')
    out = tmp_path / "out"
    p = run_cli(cli, "sweep", str(sweep), "-o", str(out))
    # pentium4 has no [nested] section: the sweep fails with the CLI's message for it.
    assert p.returncode == 1 and "machine pentium4 has no [nested] section" in p.stderr, p.stderr
    sweep.write_text(
        f'sources = ["{spec}"]\npage_sizes = ["4K", "2M"]\nmachines = ["zen4"]\nvirt = "nested:host=4K"\n'
    )
    p = run_cli(cli, "sweep", str(sweep), "-o", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "result.json").read_text())
    (got,) = [d["result"] for d in doc["results"]]
    theirs = cli_sim(
        cli, tmp_path, "--workload", spec, "--machine", "zen4", "--page-sizes", "4K,2M", "--virt", "nested:host=4K"
    )
    assert timeless(got) == timeless(theirs)
    assert got["machine"] == "zen4 (nested:host=4K)"
    native = cli_sim(cli, tmp_path, "--workload", spec, "--machine", "zen4", "--page-sizes", "4K,2M")
    assert all(v["cost"]["walk_refs"] > n["cost"]["walk_refs"] for v, n in zip(got["runs"], native["runs"]))
    sweep.write_text('sources = ["stride"]\nvirt = ["nested:host=2M"]\n')
    p = run_cli(cli, "sweep", str(sweep))
    assert p.returncode == 1 and "`virt` must be a string" in p.stderr, p.stderr
