"""Sweeps: every source under every configuration, serial, on a process pool, on a real Dask cluster."""

from __future__ import annotations

import os
import signal
import threading
import time

import pandas as pd
import pytest

import pagelab
from conftest import BUNDLED
from pagelab.sweep import DASK_CONFIG, SerialExecutor

SOURCES = [
    "stride:iters=30",
    "gups:updates=400000",
    "chase:steps=400000",
    "gzip",
    str(BUNDLED),
    BUNDLED.as_uri(),  # through fsspec, as an object-store URL would be
]
CONFIGS = {
    "weisberg": {"page_sizes": ["4K", "64K", "2M"]},
    "skylake": {"tlb": "skylake", "page_sizes": ["4K", "2M"]},
    "thp": {"policies": ["base:4K", "linux-thp:enabled=always"], "memory": "2G"},
}


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["elapsed_seconds"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def serial() -> pd.DataFrame:
    return pagelab.sweep(SOURCES, CONFIGS, executor=SerialExecutor())


def test_serial_sweep_is_each_run(serial):
    assert len(serial) == len(SOURCES) * (3 + 2 + 2)
    assert list(serial.columns[:2]) == ["source", "config"]
    assert not serial.duplicated(["source", "config", "page_size", "policy"]).any()
    # Each cell is what the single-run API gives for that source and config.
    one = pagelab.study(workload="gups:updates=400000", tlb="skylake", page_sizes=["4K", "2M"]).to_pandas()
    cell = serial[(serial.source == "gups:updates=400000") & (serial.config == "skylake")]
    pd.testing.assert_frame_equal(comparable(cell[one.columns]), comparable(one), check_dtype=False)
    # A URL is fetched by the worker and named as the user wrote it.
    by_url = serial[serial.source == BUNDLED.as_uri()].drop(columns=["source", "source.name"])
    by_path = serial[serial.source == str(BUNDLED)].drop(columns=["source", "source.name"])
    pd.testing.assert_frame_equal(comparable(by_url), comparable(by_path))


def test_threads_per_task_change_no_result(serial):
    # The serial fixture's tasks ran on one thread each (the sweep's default); with the
    # engine's own threads (reading ahead, policy runs side by side) the results are the same.
    threaded = pagelab.sweep(SOURCES, CONFIGS, executor=SerialExecutor(), threads=None)
    pd.testing.assert_frame_equal(comparable(threaded), comparable(serial))
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(pagelab.PagelabError, match="threads="):
            pagelab.sweep(SOURCES[:1], CONFIGS, threads=bad)


def test_default_process_pool_equals_serial(serial):
    pd.testing.assert_frame_equal(comparable(pagelab.sweep(SOURCES, CONFIGS)), comparable(serial))


def test_dask_local_cluster_equals_serial(serial, dask_cluster):
    cluster, client = dask_cluster
    assert len(cluster.workers) == 2
    df = pagelab.sweep(SOURCES, CONFIGS, executor=client.get_executor())
    pd.testing.assert_frame_equal(comparable(df), comparable(serial))


def test_worker_killed_mid_sweep(dask_cluster):
    """A worker process killed while tasks run: every result still comes back once."""
    cluster, client = dask_cluster
    client.wait_for_workers(2)
    sources = [f"gups:updates=1500000,seed={s}" for s in range(1, 7)]
    configs = [{"page_sizes": ["4K", "2M"]}]
    expected = pagelab.sweep(sources, configs, executor=SerialExecutor())
    pids = client.run(os.getpid)
    victim_addr, victims = next(iter(pids)), list(pids.values())
    killed = []

    def kill_one_once_busy():
        # Wait until a worker is running a pagelab task, then SIGKILL it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = client.processing()
            if any(busy.values()):
                time.sleep(0.3)
                os.kill(victims[0], signal.SIGKILL)
                killed.append(victims[0])
                return
            time.sleep(0.02)

    t = threading.Thread(target=kill_one_once_busy)
    t.start()
    df = pagelab.sweep(sources, configs, executor=client.get_executor())
    t.join()
    assert killed, "no worker was seen busy"
    # The scheduler may still list the killed worker for a moment after the sweep (a
    # broadcast to it then fails: CI, session 31): wait until it is gone and the nanny's
    # new worker has joined.
    deadline = time.monotonic() + 60
    while True:
        workers = client.scheduler_info()["workers"]
        if victim_addr not in workers and len(workers) == 2:
            break
        assert time.monotonic() < deadline, f"the killed worker still listed: {sorted(workers)}"
        time.sleep(0.1)
    assert victims[0] not in client.run(os.getpid).values()
    # The nanny started the lost worker again with the sweep's Dask settings.
    import dask

    for key, value in DASK_CONFIG.items():
        assert set(client.run(dask.config.get, key).values()) == {value}, key
    assert len(df) == len(expected)
    assert not df.duplicated(["source", "page_size"]).any()
    pd.testing.assert_frame_equal(comparable(df), comparable(expected))


def children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


def test_process_pool_survives_a_killed_worker():
    """The default pool: a worker killed mid-sweep, the pool rebuilt, every result once."""
    # Each task takes about 0.5 s on an idle machine, so that a worker is
    # still busy when it is killed (with 1.5 M updates the whole sweep ended
    # before the kill on an idle machine, and the test failed).
    sources = [f"gups:updates=8000000,seed={s}" for s in range(1, 5)]
    configs = [{"page_sizes": ["4K", "2M"]}]
    expected = pagelab.sweep(sources, configs, executor=SerialExecutor())
    killed = []

    def kill_a_worker():
        # The pool's workers are the forkserver's children, our grandchildren.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = [g for c in children(os.getpid()) for g in children(c)]
            if workers:
                time.sleep(0.1)
                try:
                    os.kill(workers[0], signal.SIGKILL)
                except ProcessLookupError:
                    continue  # it ended on its own: take the next one
                killed.append(workers[0])
                return
            time.sleep(0.02)

    t = threading.Thread(target=kill_a_worker)
    t.start()
    df = pagelab.sweep(sources, configs)
    t.join()
    assert killed
    assert not df.duplicated(["source", "page_size"]).any()
    pd.testing.assert_frame_equal(comparable(df), comparable(expected))


def test_bad_source_raises_the_engine_error():
    with pytest.raises(pagelab.PagelabError, match="unknown workload `nope`"):
        pagelab.sweep(["stride:iters=1", "nope"], [{}], executor=SerialExecutor())
    with pytest.raises(ValueError, match="unknown keys"):
        pagelab.sweep(["stride"], [{"tlbs": "x"}])
