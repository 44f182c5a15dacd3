"""Time from Python: a machine with caches times every run, nested paging included, with exactly
the command line's numbers (docs/cost.md)."""

from __future__ import annotations

import pytest

import pagelab
from conftest import BUNDLED, REPO, cli_error, cli_sim, timeless
from pagelab.sweep import SerialExecutor

COST_FIELDS = {"cycles", "cycles_per_ref", "walk_refs", "walk_cycles", "walk_cache_hits", "caches", "speedup_over_4k"}


def test_real_trace_on_a_machine_with_caches(cli, tmp_path):
    """The bundled gzip trace on zen4 with its page sizes: the CLI's JSON, cost included."""
    ours = pagelab.study(trace=BUNDLED, machine="zen4", limit=1_000_000).results[0]
    theirs = cli_sim(cli, tmp_path, "--trace", str(BUNDLED), "--machine", "zen4", "--limit", "1000000")
    assert timeless(ours) == timeless(theirs)
    runs = ours["runs"]
    assert len(runs) > 1 and all(COST_FIELDS <= set(r["cost"]) for r in runs)
    assert runs[0]["cost"]["speedup_over_4k"] == 1.0
    levels = [c["level"] for c in runs[0]["cost"]["caches"]]
    assert levels == ["l1d", "l2", "l3"]
    # Data lines and page-table lines are counted apart, and walks read page-table lines.
    assert all(r["cost"]["caches"][0]["table_accesses"] == r["cost"]["walk_refs"] for r in runs)


def test_pentium4_stride(cli, tmp_path):
    """The 000 paper's machine (a 2-level ia32 table, 4-byte PTEs) on its stride benchmark."""
    spec = "stride:heap=6M,every=16,iters=20,init=false"
    ours = pagelab.sim(workload=spec, machine="pentium4", page_sizes=["4K", "4M"]).results[0]
    theirs = cli_sim(cli, tmp_path, "--workload", spec, "--machine", "pentium4", "--page-sizes", "4K,4M")
    assert timeless(ours) == timeless(theirs)
    k4, m4 = (r["cost"] for r in ours["runs"])
    assert m4["speedup_over_4k"] > 1 and k4["walk_refs"] > m4["walk_refs"]


@pytest.mark.parametrize("host", ["4K", "2M"])
def test_nested_paging(cli, tmp_path, host):
    """`virt=` is `--virt`: the same result, the machine named with it, longer walks than native."""
    spec = "gups:table=64M,updates=100000"
    virt = f"nested:host={host}"
    ours = pagelab.study(workload=spec, machine="zen4", page_sizes="4K,2M", virt=virt).results[0]
    theirs = cli_sim(cli, tmp_path, "--workload", spec, "--machine", "zen4", "--page-sizes", "4K,2M", "--virt", virt)
    assert timeless(ours) == timeless(theirs)
    assert ours["machine"] == f"zen4 ({virt})"
    assert f"virt={virt}" in ours["provenance"]["command_line"]
    native = pagelab.study(workload=spec, machine="zen4", page_sizes="4K,2M").results[0]
    for n, v in zip(native["runs"], ours["runs"]):
        assert v["dtlb_misses"] == n["dtlb_misses"]
        assert v["cost"]["walk_refs"] > n["cost"]["walk_refs"]


def test_cost_columns():
    df = pagelab.study(workload="chase:steps=20000", machine="zen4", page_sizes=["4K", "2M"]).to_pandas()
    for col in ("cost.cycles", "cost.cycles_per_ref", "cost.walk_refs", "cost.walk_cycles", "cost.speedup_over_4k"):
        assert col in df, col
    assert list(df["cost.speedup_over_4k"])[0] == 1.0
    # A machine without caches is not timed, as on the command line.
    assert "cost.cycles" not in pagelab.study(workload="chase:steps=20000", machine="x86-64").to_pandas()


def test_sweep_times_a_machine_with_caches():
    sizes = ["4K", "2M"]
    configs = {
        "zen4": {"machine": "zen4", "page_sizes": sizes},
        "nested": {"machine": "zen4", "virt": "nested:host=2M", "page_sizes": sizes},
    }
    df = pagelab.sweep(["chase:steps=20000"], configs, executor=SerialExecutor())
    one = pagelab.study(workload="chase:steps=20000", machine="zen4", page_sizes=sizes, virt="nested:host=2M")
    want = one.to_pandas()["cost.cycles"].tolist()
    assert df[df.config == "nested"]["cost.cycles"].tolist() == want
    assert (df[df.config == "nested"]["cost.walk_refs"].values > df[df.config == "zen4"]["cost.walk_refs"].values).all()


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({"virt": "nested:host=2M", "machine": "x86-64"}, ["--virt", "nested:host=2M", "--machine", "x86-64"]),
        ({"virt": "nested:2M", "machine": "zen4"}, ["--virt", "nested:2M", "--machine", "zen4"]),
        ({"virt": "nested:host=3K", "machine": "zen4"}, ["--virt", "nested:host=3K", "--machine", "zen4"]),
    ],
)
def test_virt_errors_are_the_cli_messages(cli, kwargs, args):
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.sim(workload="stride:iters=1", **kwargs)
    assert str(e.value) == cli_error(cli, "sim", "--workload", "stride:iters=1", *args)


def test_virt_nested_alone_is_the_files_host_page(tmp_path):
    sizes = ["4K", "2M"]
    run = lambda machine, virt: pagelab.study(  # noqa: E731
        workload="chase:steps=20000", machine=machine, page_sizes=sizes, virt=virt
    ).to_pandas()["cost.cycles"].tolist()
    # zen4 gives no host page: 2M, as the command line assumes.
    assert run("zen4", "nested") == run("zen4", "nested:host=2M")
    # A file that says 4K (as `pagelab machines --measure` writes it).
    text = (REPO / "configs" / "machines" / "zen4.toml").read_text()
    guest = tmp_path / "guest.toml"
    guest.write_text(text.replace("ntlb_entries =", 'host_page = "4K"\nntlb_entries =', 1))
    assert run(str(guest), "nested") == run("zen4", "nested:host=4K")
    assert run(str(guest), "nested") != run("zen4", "nested:host=2M")


def test_virt_without_a_machine():
    """The command line's parser asks for --machine with --virt; the API says what kind."""
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.sim(workload="stride:iters=1", virt="nested:host=2M")
    assert "nested paging needs a machine with caches and latencies" in str(e.value)
