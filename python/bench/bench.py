"""Speed of the Python path against the command line, and of a sweep on two workers against serial.

    .venv/bin/python python/bench/bench.py [--quick]

Prints, per input, the CLI's rate (`pagelab sim --json`, a whole process)
and the Python API's (`pagelab.sim`, one call) in M refs per second of wall
time and of CPU time, with the ratio of CPU rates (the goal: Python within 5%
of the CLI; CPU time is the steadier figure on a shared machine); then one
sweep's time serial in this process, on a local process pool of two, and on
a dask.distributed.LocalCluster of two worker processes, with each one's
ratio to serial (the goal: at most 0.6). Best of three runs each.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pagelab
from pagelab.sweep import SerialExecutor

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "tests" / "data" / "gzip-9.lackey.zst"


def cli_path() -> Path:
    if os.environ.get("PAGELAB_BIN"):
        return Path(os.environ["PAGELAB_BIN"])
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "pagelab"


def best(f, n: int = 3) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def timed(f, who: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``f()``; CPU of this process (engine threads included) or of its children."""
    c0, w0 = cpu(who), time.perf_counter()
    f()
    return time.perf_counter() - w0, cpu(who) - c0


def rates(quick: bool) -> None:
    cli = cli_path()
    inputs = [("trace", str(BUNDLED))] + [("workload", w) for w in pagelab.default_workloads()]
    if quick:
        inputs = inputs[:3]
    print("M refs per second of wall time and of CPU time (median of interleaved runs):")
    print(f"{'input':<36} {'refs':>11} {'CLI wall':>9} {'Py wall':>8} {'CLI cpu':>8} {'Py cpu':>7} {'Py/CLI cpu':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, value in inputs:
            out = os.path.join(tmp, "r.json")
            flag = "--trace" if kind == "trace" else "--workload"
            result = pagelab.sim(**{kind: value})
            runs_cli, runs_py = [], []
            # Interleaved, so that a change in the machine's load hits both alike.
            for _ in range(3 if quick else 7):
                argv = [str(cli), "sim", flag, value, "--json", out]
                runs_cli.append(timed(lambda: subprocess.run(argv, check=True, stdout=subprocess.DEVNULL), resource.RUSAGE_CHILDREN))
                runs_py.append(timed(lambda: pagelab.sim(**{kind: value}), resource.RUSAGE_SELF))
            (w_cli, c_cli), (w_py, c_py) = (tuple(map(statistics.median, zip(*r))) for r in (runs_cli, runs_py))
            refs = result.results[0]["refs"]["instr"] + result.results[0]["refs"]["data"]
            name = value if kind == "workload" else Path(value).name
            m = refs / 1e6
            print(f"{name:<36} {refs:>11,} {m / w_cli:>9.1f} {m / w_py:>8.1f} {m / c_cli:>8.1f} {m / c_py:>7.1f} {c_cli / c_py:>10.3f}")


def sweeps(quick: bool) -> None:
    sources = [f"gups:updates=3000000,seed={s}" for s in (1, 2)] + ["stream:iters=20", "chase:steps=3000000", "gzip", str(BUNDLED)]
    configs = {"weisberg": {}, "skylake": {"tlb": "skylake"}}
    if quick:
        sources = sources[:4]
    tasks = len(sources) * len(configs)
    serial = best(lambda: pagelab.sweep(sources, configs, executor=SerialExecutor()), 1 if quick else 3)
    print(f"sweep of {len(sources)} sources x {len(configs)} configurations ({tasks} tasks), on {os.cpu_count()} cores")
    print(f"  serial, in this process        {serial:7.2f} s")
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        pagelab.sweep(sources[:2], {"w": {}}, executor=pool)  # start the workers
        t = best(lambda: pagelab.sweep(sources, configs, executor=pool), 1 if quick else 3)
    print(f"  process pool, 2 workers        {t:7.2f} s   {t / serial:.2f}x serial")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40) as cluster, Client(cluster) as client:
        # pure=False: a repeated sweep must run again, not reuse the cluster's results.
        ex = client.get_executor(pure=False)
        pagelab.sweep(sources[:2], {"w": {}}, executor=ex)  # import pagelab on the workers
        t = best(lambda: pagelab.sweep(sources, configs, executor=ex), 1 if quick else 3)
    print(f"  Dask LocalCluster, 2 workers   {t:7.2f} s   {t / serial:.2f}x serial")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer inputs, one run of each sweep")
    args = p.parse_args()
    rates(args.quick)
    sweeps(args.quick)
    sys.exit(0)
