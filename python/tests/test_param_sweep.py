"""A workload parameter written FROM..TO/STEP from Python: one result per value, exactly the
results of `pagelab sim --workload 'NAME:param=FROM..TO/STEP'` (crates/cli/tests/sweep_param.rs)."""

from __future__ import annotations

import json

import pytest

import pagelab
from conftest import cli_error, cli_sim, timeless
from test_sweep_cli import run_cli
from pagelab.sweep import SerialExecutor


@pytest.mark.parametrize(
    "spec, model, args",
    [
        ("gups:updates=10000..40000/10000", {"page_sizes": ["4K", "2M"]}, ["--page-sizes", "4K,2M"]),
        # Time on the 000 paper's machine, around Figure 4's first break (4M for 4K pages).
        (
            "stride:heap=3584K..4608K/512K,every=16,iters=10,init=false",
            {"machine": "pentium4", "page_sizes": ["4K", "4M"]},
            ["--machine", "pentium4", "--page-sizes", "4K,4M"],
        ),
    ],
)
def test_a_range_is_the_clis_sweep(cli, tmp_path, spec, model, args):
    r = pagelab.study(workload=spec, **model)
    theirs = cli_sim(cli, tmp_path, "--workload", spec, *args)
    assert theirs["schema"] == "pagelab.study/1"
    assert len(r.results) == len(theirs["results"]) >= 3
    assert [timeless(d) for d in r.results] == [timeless(d) for d in theirs["results"]]
    assert json.loads(r.to_json())["schema"] == "pagelab.study/1"
    param = spec.split(":")[1].split("=")[0]
    values = [d["source"]["params"][param] for d in r.results]
    assert values == [d["source"]["params"][param] for d in theirs["results"]]
    assert len(set(values)) == len(values)
    # The range inside a list of workloads expands in place.
    both = pagelab.sim(workload=["gups:updates=1000", spec], **model)
    assert [timeless(d) for d in both.results[1:]] == [timeless(d) for d in r.results]


def test_expand_workload_and_sweep_sources():
    specs = pagelab.expand_workload("gups:updates=10000..30000/10000,table=4M")
    assert specs == ["gups:updates=10000,table=4M", "gups:updates=20000,table=4M", "gups:updates=30000,table=4M"]
    assert pagelab.expand_workload("gups:updates=10000") == ["gups:updates=10000"]
    config = {"a": {"page_sizes": ["4K", "2M"]}}
    df = pagelab.sweep(["gups:updates=10000..30000/10000,table=4M"], config, executor=SerialExecutor())
    assert list(dict.fromkeys(df["source"])) == specs
    one = pagelab.sweep([specs[1]], config, executor=SerialExecutor())
    got = df[df["source"] == specs[1]].reset_index(drop=True)
    assert got.drop(columns=["elapsed_seconds"]).equals(one.drop(columns=["elapsed_seconds"]))


@pytest.mark.parametrize(
    "spec",
    ["stride:heap=8M..4M/1M", "stride:heap=1M..4M/0", "stride:heap=1M..4M/1M,every=1..4/1"],
)
def test_bad_ranges_raise_the_clis_message(cli, spec):
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.study(workload=spec)
    assert str(e.value) == cli_error(cli, "sim", "--workload", spec)


def test_a_range_in_a_sweep_file(cli, tmp_path):
    """`pagelab sweep` expands a source's range too: one source per value, the API's numbers."""
    spec = "gups:updates=10000..30000/10000,table=4M"
    sweep = tmp_path / "range.toml"
    sweep.write_text(f'sources = ["{spec}"]\npage_sizes = ["4K", "2M"]\n')
    p = run_cli(cli, "sweep", str(sweep), "-o", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert "6 runs: 3 sources x 1 configurations" in p.stdout
    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [d["source"] for d in doc["results"]] == pagelab.expand_workload(spec)
    ours = pagelab.study(workload=spec, page_sizes=["4K", "2M"])
    assert [timeless(d["result"]) for d in doc["results"]] == [timeless(d) for d in ours.results]
