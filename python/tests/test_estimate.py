"""A sweep submits its tasks costliest first by pagelab.estimate, and still returns rows in the caller's order."""

from __future__ import annotations

import concurrent.futures as cf
import subprocess
from typing import Any

import pandas as pd
import pagelab
from conftest import BUNDLED
from pagelab.estimate import submission_order, task_cost
from pagelab.sweep import SerialExecutor, run_task, tasks_of


class RecordingExecutor(SerialExecutor):
    """Runs tasks as they come, remembering each (source name, config name) in submission order."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, str]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        source, config = args[0], args[1]
        self.submitted.append((source["name"], config["name"]))
        return super().submit(fn, *args, **kwargs)


def test_estimate_ranks_what_is_known_before_running(tmp_path):
    def cost(source: str, **config: Any) -> float:
        ((s, c),) = tasks_of([source], [config])
        return task_cost(s, c)

    # Longer workloads cost more; a workload's kind weighs its references.
    assert cost("gups:updates=2000000") > cost("gups:updates=1000000") > 0
    assert cost("chase:steps=1000000") > cost("stream:iters=1")
    # More runs cost more: page sizes, policies.
    assert cost("gups", page_sizes=["4K", "64K", "2M"]) > cost("gups", page_sizes="4K")
    assert cost("gups") > cost("gups", page_sizes=["4K", "2M"])  # the study's eight by default
    assert cost("gups", page_sizes=["4K"], policies=["base:4K"]) > cost("gups", page_sizes=["4K"])
    # A run under a costlier TLB preset costs more.
    assert cost("gups", tlb="zen4") > cost("gups") > cost("gups", tlb="skylake")
    # A trace by its size and format; `gzip` is the bundled trace, as its file.
    twice = tmp_path / "twice.lackey.zst"
    twice.write_bytes(BUNDLED.read_bytes() * 2)
    assert cost(str(twice)) > cost(str(BUNDLED)) > 0
    assert cost("gzip") == cost(str(BUNDLED)) == cost(BUNDLED.as_uri())
    plain = tmp_path / "plain.lackey"
    plain.write_text("I  0400d7d4,8\n" * 1000)
    assert 0 < cost(str(plain)) < cost(str(BUNDLED))
    # What cannot be known here goes first: it may be long.
    assert cost("nope") == cost(str(tmp_path / "missing.trace")) == float("inf")


def test_tasks_go_costliest_first_and_rows_come_back_in_order(tmp_path):
    big = tmp_path / "big.lackey.zst"
    big.write_bytes(BUNDLED.read_bytes() * 3)
    sources = ["stride:iters=30", str(big), "gups:updates=300000", "chase:steps=100000", "gzip"]
    configs = {"two": {"page_sizes": ["4K", "2M"]}, "eight": {}}
    tasks = tasks_of(sources, configs)
    costs = [task_cost(s, c) for s, c in tasks]
    assert len(set(costs)) == len(costs)  # a strict ranking, so the expected order is the only one

    ex = RecordingExecutor()
    df = pagelab.sweep(sources, configs, executor=ex)
    expected = sorted(range(len(tasks)), key=lambda i: -costs[i])
    assert submission_order(tasks) == expected
    assert ex.submitted == [(tasks[i][0]["name"], tasks[i][1]["name"]) for i in expected]
    assert ex.submitted != [(s["name"], c["name"]) for s, c in tasks]  # the order did change

    # Rows: sources, then configurations, as the caller gave them, each task's own result.
    order = df[["source", "config"]].drop_duplicates().apply(tuple, axis=1).tolist()
    assert order == [(s, c) for s in sources for c in configs]
    for (s, c), cell in df.groupby(["source", "config"], sort=False):
        ((source, config),) = tasks_of([s], [{"name": c, **configs[c]}])
        one = pagelab.Result.of_json([run_task(source, config, 1)]).to_pandas()
        pd.testing.assert_frame_equal(
            cell[one.columns].drop(columns=["elapsed_seconds"]).reset_index(drop=True),
            one.drop(columns=["elapsed_seconds"]),
            check_dtype=False,
        )


def test_equal_estimates_keep_the_callers_order():
    # Configurations that differ only where the estimate does not look (a machine's caches) rank equal.
    tasks = tasks_of(["stride", "stride:iters=100"], {"a": {"machine": "zen4"}, "b": {}, "c": {"machine": "pentium4"}})
    assert len({task_cost(s, c) for s, c in tasks}) == 1
    assert submission_order(tasks) == list(range(len(tasks)))


def test_native_trace_ranks_by_its_format(tmp_path, cli):
    native = tmp_path / "g.trace"
    subprocess.run([str(cli), "convert", str(BUNDLED), str(native)], check=True, capture_output=True)
    ((s, c),) = tasks_of([str(native)], [{}])
    assert task_cost(s, c) > 0
    ((s2, c2),) = tasks_of([{"trace": str(native), "format": "native"}], [{}])
    assert task_cost(s2, c2) == task_cost(s, c)


def _ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = r
    return ranks


def test_estimate_ranks_tasks_of_every_kind_as_their_cpu_time_does(tmp_path, cli):
    # Held to what the tasks really cost: workloads of every kind, the bundled trace as
    # zstd Lackey text and as a native file with its page index, each as a study of eight
    # page sizes and as one policy run. The estimate's ranking against their CPU time on
    # one engine thread (Spearman's rho; 0.96 over 18 such tasks when measured, the
    # estimate before the policies' own costs 0.56); a margin for a loaded machine.
    import resource

    native = tmp_path / "g.trace"
    subprocess.run([str(cli), "convert", str(BUNDLED), str(native)], check=True, capture_output=True)
    sources = ["gups:updates=1000000", "stream:iters=10", "chase:steps=1000000", "stride:heap=8M,every=16,iters=3000", str(BUNDLED), str(native)]
    configs = {"eight": {}, "policy": {"page_sizes": ["4K"], "policies": ["base:4K"]}}

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    tasks = tasks_of(sources, configs)
    real, estimate = [], []
    for source, config in tasks:
        t = cpu()
        run_task(source, config, 1)
        real.append(cpu() - t)
        estimate.append(task_cost(source, config))
    a, b = _ranks(real), _ranks(estimate)
    n = len(a)
    rho = 1 - 6 * sum((x - y) ** 2 for x, y in zip(a, b)) / (n * (n * n - 1))
    detail = ", ".join(f"{s['name'].rsplit('/', 1)[-1]} {c['name']}: {r:.3f} s, {e:.3f}" for (s, c), r, e in zip(tasks, real, estimate))
    assert rho >= 0.75, f"the estimate ranks the tasks with rho {rho:.2f} against their CPU time: {detail}"
