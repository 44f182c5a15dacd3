"""The API gives exactly the command line's numbers: the bundled trace, every built-in workload, the policies."""

from __future__ import annotations

import pytest

import pagelab
from conftest import BUNDLED, cli_sim, timeless

SIZES = ["4K", "8K", "16K", "32K", "64K", "128K", "256K", "2M"]


def test_bundled_trace_file(cli, tmp_path):
    ours = pagelab.study(trace=BUNDLED, page_sizes=SIZES).results[0]
    theirs = cli_sim(cli, tmp_path, "--trace", str(BUNDLED), "--page-sizes", ",".join(SIZES))
    assert timeless(ours) == timeless(theirs)
    assert ours["refs"]["instr"] + ours["refs"]["data"] > 4_000_000


@pytest.mark.parametrize("workload", pagelab.default_workloads())
def test_each_builtin_workload(cli, tmp_path, workload):
    ours = pagelab.study(workload=workload, tlb="skylake").results[0]
    theirs = cli_sim(cli, tmp_path, "--workload", workload, "--tlb", "skylake")
    assert timeless(ours) == timeless(theirs)


def test_default_study_is_the_default_set():
    r = pagelab.study(workload=["stride:iters=2", "gzip"], page_sizes="4K,2M")
    assert [d["source"]["name"] for d in r.results][0] == "stride"
    df = r.to_pandas()
    assert len(df) == 4 and list(df["page_size"]) == [4096, 2 << 20] * 2


def test_policies(cli, tmp_path):
    policies = ["base:4K", "base:64K", "linux-thp:enabled=always"]
    ours = pagelab.sim(workload="gups:updates=200000", policies=policies, memory="1G").results[0]
    args = ["--workload", "gups:updates=200000", "--memory", "1G"]
    for p in policies:
        args += ["--policy", p]
    assert timeless(ours) == timeless(cli_sim(cli, tmp_path, *args))
    df = pagelab.Result([ours]).to_pandas()
    assert list(df["policy"]) == policies
    assert (df["faults_by_size.2M"].fillna(0) > 0).tolist() == [False, False, True]


def test_window(cli, tmp_path):
    ours = pagelab.study(trace=BUNDLED, skip=1000, limit=500_000).results[0]
    theirs = cli_sim(cli, tmp_path, "--trace", str(BUNDLED), "--skip", "1000", "--limit", "500000")
    assert timeless(ours) == timeless(theirs)
    assert ours["refs"]["instr"] + ours["refs"]["data"] == 500_000


def test_to_json_is_the_document(cli, tmp_path):
    import json

    r = pagelab.study(workload="chase:steps=1000", page_sizes=[4096, 2 << 20])
    doc = json.loads(r.to_json())
    assert doc["schema"] == "pagelab.sim/1"
    assert [run["page_size"] for run in doc["runs"]] == [4096, 2 << 20]
    two = json.loads(pagelab.study(workload=["chase:steps=1000", "stride:iters=1"]).to_json())
    assert two["schema"] == "pagelab.study/1" and len(two["results"]) == 2


def test_engine_runs_without_the_gil():
    """Python threads keep running while the engine works: the GIL is released."""
    import threading
    import time

    done = threading.Event()
    ticks = 0

    def run():
        pagelab.study(workload="gups:updates=3000000")
        done.set()

    t = threading.Thread(target=run)
    start = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - start
    # With the GIL held the loop could not tick at all until the study ended
    # (a tick or two at most); released, it ticks all along, however loaded the machine.
    assert elapsed > 0.05 and ticks > 20


def test_html_report(tmp_path):
    r = pagelab.study(workload="gzip")
    r.to_html(tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "gzip" in html
    with pytest.raises(pagelab.PagelabError, match="nonexistent"):
        r.to_html("/nonexistent/dir/r.html")


@pytest.mark.parametrize("machine", ["arm64-64k", "x86-64"])
def test_machine(cli, tmp_path, machine):
    ours = pagelab.study(workload="gzip", machine=machine).results[0]
    assert timeless(ours) == timeless(cli_sim(cli, tmp_path, "--workload", "gzip", "--machine", machine))
    policies = ["base:4K"] if machine == "x86-64" else ["base:64K"]
    ours = pagelab.sim(workload="stride:iters=5", machine=machine, policies=policies).results[0]
    args = ["--workload", "stride:iters=5", "--machine", machine, "--policy", policies[0]]
    assert timeless(ours) == timeless(cli_sim(cli, tmp_path, *args))


def test_provenance_says_what_made_the_result(cli, tmp_path):
    """A Python result records its call, the machine, the host and the trace's checksum; the
    checksum equals the one the command line records for the same file."""
    ours = pagelab.sim(trace=BUNDLED, machine="x86-64", page_sizes="4K,2M", limit=1000).results[0]
    p = ours["provenance"]
    assert p["command_line"][0] == "python: pagelab.sim"
    assert f"trace={BUNDLED}" in p["command_line"] and "limit=1000" in p["command_line"]
    assert p["machine"] == "x86-64"
    assert p["host"]["kernel"] and p["pagelab_version"]
    theirs = cli_sim(cli, tmp_path, "--trace", str(BUNDLED), "--machine", "x86-64", "--page-sizes", "4K,2M", "--limit", "1000")
    assert theirs["provenance"]["machine"] == "x86-64"
    assert p["inputs"] == theirs["provenance"]["inputs"]
    assert p["inputs"][0]["bytes"] == BUNDLED.stat().st_size
    made = pagelab.from_arrays([4096], [0], [8], name="one").results[0]["provenance"]
    assert made["command_line"][:2] == ["python: pagelab.from_arrays", "name=one"]
    assert "machine" not in made and "inputs" not in made
