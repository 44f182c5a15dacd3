"""Sweeps: every source under every configuration, on any executor.

Each (source, configuration) pair is one task, ``run_task``, a plain
module-level function: any :class:`concurrent.futures.Executor` can run it
(a local process pool by default, a Dask cluster through
``client.get_executor()``, Ray through :class:`RayExecutor`). Workloads are
generated on the worker; traces are paths every worker can read, on a shared
filesystem or as an fsspec URL (``s3://...``, ``gs://...``), fetched by the
worker. Results are kept by task, so a task the engine ran twice (a worker
lost after finishing it, its task run again elsewhere) still gives one row
set.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .estimate import submission_order
from .results import rows_of

#: How often a sweep that owns its process pool rebuilds it after a worker died.
POOL_RETRIES = 3

#: Dask settings for a cluster that runs sweeps, for its scheduler and workers alike
#: (``dask.config.set`` around starting them, as :func:`local_cluster` does, or the
#: cluster's own Dask configuration). A task is seconds of native code that holds no GIL,
#: so what Dask does beside it is overhead (docs/python.md, "Speed"): each line's default,
#: on a worker process, cost CPU on the cores the tasks run on.
DASK_CONFIG: dict[str, Any] = {
    # 100 samples a second of every thread; it sees only `run_task`.
    "distributed.worker.profile.enabled": False,
    # The event loop's health check, every 20 ms by default: a log line when the loop
    # stalls (over `tick.limit`, 3 s), which a 1 s check still catches.
    "distributed.admin.tick.interval": "1s",
    # CPU, memory, network and disk figures for the dashboard, every 500 ms by default.
    "distributed.admin.system-monitor.interval": "5s",
    # The worker's and nanny's memory polls (spilling, pausing, a worker's restart at
    # its memory limit), every 100 ms by default; a sweep's task keeps one JSON string.
    "distributed.worker.memory.monitor-interval": "1s",
    # One task per worker thread at a time (1.1, the default, sends a one-thread worker
    # two: the second waits there behind a long one while another worker idles).
    "distributed.scheduler.worker-saturation": 1.0,
}


def sweep(
    sources: Iterable[str | os.PathLike[str] | Mapping[str, Any]],
    configs: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    executor: cf.Executor | None = None,
    *,
    threads: int | None = 1,
) -> Any:
    """Runs every source under every configuration; one DataFrame of every run.

    ``sources``: workload specs (``"gups:table=64M"``, ``"gzip"``; one with a parameter
    written ``FROM..TO/STEP``, ``"gups:updates=10000..40000/10000"``, is one source per value), trace
    paths (anything with a ``/``), fsspec URLs (``"s3://bucket/t.trace"``),
    or dicts ``{"workload": ...}`` / ``{"trace": ..., "format": ...}`` with
    an optional ``"name"`` and ``"max_ref_size"`` (as :func:`pagelab.sim` takes it).
    ``configs``: dicts of :func:`pagelab.sim` keyword arguments
    (``machine``, ``page_sizes``, ``tlb``, ``policies``, ``phys``, ``memory``, ``strict``,
    ``cow``, ``virt``) with an optional ``"name"``, or a mapping from names to such dicts.
    A machine with caches (``"zen4"``) times its runs: the ``cost.*`` columns.
    ``executor``: any :class:`concurrent.futures.Executor`; by default a
    process pool with one worker per core, started through a fork server (a
    script calls ``sweep`` under ``if __name__ == "__main__":`` for it).
    ``threads``: the threads each task's engine may use. One by default: the
    executor runs tasks side by side (one per core or per worker thread), and
    a task's own extra threads (the engine reads a trace ahead on a thread of
    its own) would only compete with the other tasks for the same cores.
    ``None`` lets each task use what its machine offers, which is faster when
    tasks run one at a time (a :class:`SerialExecutor`). Results never depend
    on it.

    The DataFrame has a ``source`` and a ``config`` column (the names), then
    the columns of :meth:`pagelab.Result.to_pandas`, among them ``page_size``
    and, for policy runs, ``policy``. Rows come in the order of sources, then
    configurations, then runs, whatever order the tasks were submitted in (the
    costliest first, as :mod:`pagelab.estimate` ranks them, so that the
    sweep does not end on one long task) or finished in.
    """
    return frame(sweep_documents(tasks_of(sources, configs), executor, threads))


def tasks_of(
    sources: Iterable[str | os.PathLike[str] | Mapping[str, Any]],
    configs: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (source, config) pair, sources outermost, each entry with its ``name``."""
    srcs = [one for s in sources for one in _expanded(_source_entry(s))]
    cfgs = _config_entries(configs)
    return [(s, c) for s in srcs for c in cfgs]


def frame(documents: Iterable[Mapping[str, Any]]) -> Any:
    """The DataFrame of :func:`sweep_documents`' output: ``source``, ``config``, then each run's columns."""
    import pandas as pd

    rows = []
    for d in documents:
        for row in rows_of(d["result"]):
            rows.append({"source": d["source"], "config": d["config"], **row})
    return pd.DataFrame(rows)


def sweep_documents(
    tasks: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    executor: cf.Executor | None = None,
    threads: int | None = 1,
) -> list[dict[str, Any]]:
    """The tasks' results as ``{"source", "config", "result"}`` dicts (the sweep's JSON)."""
    return [
        {"source": s["name"], "config": c["name"], "result": json.loads(doc)}
        for (s, c), doc in zip(tasks, run_tasks(tasks, executor, threads))
    ]


def run_tasks(
    tasks: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    executor: cf.Executor | None = None,
    threads: int | None = 1,
) -> list[str]:
    """Runs ``run_task`` on every (source, config) pair, each with ``threads``; the JSON
    documents in task order. Tasks are submitted costliest first, as
    :func:`pagelab.estimate.submission_order` ranks them."""
    from . import _model

    _model(threads=threads)  # a bad count fails here, before any task runs
    # Longest first, so that the last tasks to start are short ones (pagelab.estimate).
    order = submission_order(tasks)
    if executor is not None:
        return _collect(executor, tasks, order, {}, threads)
    done: dict[int, str] = {}
    for attempt in range(POOL_RETRIES + 1):
        workers = max(1, min(len(tasks), os.cpu_count() or 1))
        # forkserver: the engine's threads in this process must not be forked.
        ctx = multiprocessing.get_context("forkserver")
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            try:
                return _collect(pool, tasks, [i for i in order if i not in done], done, threads)
            except cf.BrokenExecutor:
                # A worker died (killed, out of memory): the finished tasks
                # are kept, the rest run again on a new pool.
                if attempt == POOL_RETRIES:
                    raise
    raise AssertionError("unreachable")


def _collect(
    executor: cf.Executor,
    tasks: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    todo: Iterable[int],
    done: dict[int, str],
    threads: int | None,
) -> list[str]:
    futures = {executor.submit(run_task, *tasks[i], threads): i for i in todo}
    try:
        for f in cf.as_completed(futures):
            done[futures[f]] = f.result()
    except BaseException:
        for f in futures:
            f.cancel()
        raise
    return [done[i] for i in range(len(tasks))]


def run_task(source: Mapping[str, Any], config: Mapping[str, Any], threads: int | None = None) -> str:
    """One run on a worker: the ``pagelab.sim/1`` JSON of ``source`` under ``config``, its
    engine using at most ``threads`` threads (``None``: what the machine offers)."""
    from . import _model, _native, _ref_limit, _source

    model = _model(**{k: v for k, v in config.items() if k != "name"}, threads=threads)
    if "workload" in source:
        return str(_native.run(_source(None, source["workload"], None, 0, None), model))
    path, fetched = _local_path(str(source["trace"]))
    try:
        with _ref_limit(source.get("max_ref_size")):
            doc = _native.run(_source(path, None, source.get("format"), 0, None), model)
    finally:
        if fetched:
            os.unlink(path)
    if fetched:
        # Name the trace as the user did, not by the worker's copy.
        result = json.loads(doc)
        result["source"]["name"] = source["trace"]
        doc = json.dumps(result)
    return str(doc)


def _local_path(trace: str) -> tuple[str, bool]:
    """A path this worker can open for ``trace``, and whether it is a fetched copy."""
    if "://" not in trace:
        return trace, False
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    fs, path = fsspec.core.url_to_fs(trace)
    if isinstance(fs, LocalFileSystem):
        return path, False
    fd, local = tempfile.mkstemp(prefix="pagelab-", suffix="-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as out, fs.open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
    except BaseException:
        os.unlink(local)
        raise
    return local, True


def _expanded(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A workload source whose spec has a ``FROM..TO/STEP`` parameter: one source per value,
    each named by its own spec (a name given for the range prefixes them)."""
    from . import expand_workload

    if "workload" not in entry:
        return [entry]
    specs = expand_workload(entry["workload"])
    if specs == [entry["workload"]]:
        return [entry]
    named = entry["name"] != entry["workload"]
    return [{**entry, "workload": w, "name": f"{entry['name']} {w}" if named else w} for w in specs]


def _is_range(text: str) -> bool:
    """Whether ``text`` is a workload spec with a ``FROM..TO/STEP`` parameter (its ``/`` does
    not make it a path)."""
    from . import PagelabError, _native

    try:
        return _native.expand_workload(text) is not None
    except PagelabError:
        return False


def _source_entry(s: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(s, Mapping):
        entry = dict(s)
        if ("trace" in entry) == ("workload" in entry):
            raise ValueError(f"source {entry!r}: give one of `trace` and `workload`")
        unknown = set(entry) - {"trace", "workload", "format", "name", "max_ref_size"}
        if unknown:
            raise ValueError(f"source {entry!r}: unknown keys {sorted(unknown)}")
        entry.setdefault("name", str(entry.get("trace", entry.get("workload"))))
        return entry
    text = os.fspath(s)
    if "/" in text and not _is_range(text):
        return {"trace": text, "name": text}
    return {"workload": text, "name": text}


CONFIG_KEYS = {"name", "machine", "page_sizes", "tlb", "policies", "phys", "memory", "strict", "cow", "virt"}


def _config_entries(
    configs: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    if isinstance(configs, Mapping):
        configs = [{"name": name, **cfg} for name, cfg in configs.items()]
    out = []
    for cfg in configs:
        entry = dict(cfg)
        unknown = set(entry) - CONFIG_KEYS
        if unknown:
            raise ValueError(
                f"config {entry!r}: unknown keys {sorted(unknown)}; a config takes {sorted(CONFIG_KEYS)}"
            )
        entry.setdefault("name", _config_name(entry))
        out.append(entry)
    names = [c["name"] for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"configs: names must differ, got {names}")
    return out


def _config_name(cfg: Mapping[str, Any]) -> str:
    def word(v: Any) -> str:
        return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)

    parts = [f"{k}={word(v)}" for k, v in cfg.items() if k != "name"]
    return " ".join(parts) or "default"


def local_cluster(n_workers: int | None = None, **kwargs: Any) -> Any:
    """A ``distributed.LocalCluster`` shaped for sweeps: ``n_workers`` worker processes
    (default: one per core) of one thread each, started with :data:`DASK_CONFIG`.
    ``kwargs`` go to ``LocalCluster``. Use it as a context manager and pass
    ``Client(cluster).get_executor()`` to :func:`sweep`."""
    import dask
    from distributed import LocalCluster

    options: dict[str, Any] = {"threads_per_worker": 1, "processes": True, **kwargs}
    with dask.config.set(DASK_CONFIG):
        # Each nanny gives its workers its `config` over the global one, but copies only
        # the top level of the global one, whose inner dicts `dask.config.set` restores
        # in place on leaving: without a deep copy here a worker started again after one
        # died would run with Dask's defaults (python/tests/test_sweep.py checks).
        options["config"] = dask.config.merge(copy.deepcopy(dask.config.config), kwargs.get("config", {}))
        return LocalCluster(n_workers=n_workers or os.cpu_count() or 1, **options)


class SerialExecutor(cf.Executor):
    """Runs each task in this process as it is submitted: the serial baseline of a sweep."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        f: cf.Future[Any] = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:
            f.set_exception(e)
        return f


class RayExecutor(cf.Executor):
    """Ray as an Executor: each task a Ray remote call, its future Ray's own.

    Call ``ray.init(address=...)`` first. Ray retries a task whose worker
    died (``max_retries``), as Dask reschedules one.
    """

    def __init__(self, max_retries: int = 3) -> None:
        import ray

        self._ray = ray
        self._remote: dict[Any, Any] = {}
        self._max_retries = max_retries

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._ray.remote(max_retries=self._max_retries)(fn)
            self._remote[fn] = remote
        return remote.remote(*args, **kwargs).future()
