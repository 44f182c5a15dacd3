"""What a sweep task will cost, estimated before it runs: the order a sweep submits its tasks in.

A sweep on N workers ends when its last task does. Submitted in the caller's
order, a long task that comes last keeps one worker busy while the others
idle; submitted longest first (the classic longest-processing-time rule),
the short tasks fill in at the end and the tail is at most about one short
task. Only the ranking matters, so the estimate is coarse: the source's
length as known without running it (a workload's exact reference count from
its parameters, a trace file's size and format), times a per-kind cost of
reading or generating it, plus per-kind costs of the model for each page size
and for each policy the configuration runs, weighed by its TLB preset
(a run under weisberg's fully associative 64-entry TLBs costs about 1.4
times one under skylake's). It knows nothing of a machine's caches or of a TLB
given as a file: tasks that differ only there rank equal and keep the
caller's order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

#: CPU seconds per million references of a workload, one engine thread: (generating
#: and filtering them, each page size of the study over them, each policy run over them),
#: under the weisberg TLB. Measured with ``run_task`` on 2026-12-03 (gups 1.5 M updates,
#: stream 20 iterations, chase 1.5 M steps, stride 8M heap every 16th page 3000
#: iterations; one page size, eight, and one with the ``base:4K`` policy; the least of
#: three runs each; about 20% apart from one measurement to the next); only their ratios
#: matter.
WORKLOAD_COST: dict[str, tuple[float, float, float]] = {
    "gups": (0.0035, 0.0021, 0.013),
    "stream": (0.0013, 0.000002, 0.024),
    "chase": (0.0073, 0.0047, 0.016),
    "stride": (0.0035, 0.0035, 0.020),
}
#: The multi-process workloads (shm-fanout, forkexec, prefork), not measured: as gups.
OTHER_WORKLOAD_COST = WORKLOAD_COST["gups"]

#: CPU seconds per MB of a trace file, one engine thread, as ``WORKLOAD_COST``'s.
#: Measured the same way on the bundled trace repeated 8 times: as zstd Lackey text (9.2
#: MB), plain (510 MB) and converted to the native format with its page index (13.0 MB).
#: A study's page sizes share one pass over the page filter's words (or the index's),
#: so eight cost about what one does: 0.8 and 1.7 millionths of a second per MB more a
#: size for the plain text and the native file; the zstd text's, below the noise, is the
#: plain text's times its compression ratio (55). A policy needs every event, so the
#: native file's index does not serve it.
TRACE_COST: dict[str, tuple[float, float, float]] = {
    "zstd-lackey": (0.044, 0.00044, 0.065),
    "lackey": (0.00073, 0.000008, 0.0012),
    "native": (0.0051, 0.000017, 0.061),
}

#: A page size of the study under a TLB preset, against one under weisberg (the costs
#: above): gups, chase and stride at eight page sizes against one, 2026-12-03 (twice, within
#: 0.03 of each other), rounded. Other TLBs (a TOML file, a machine's) count as weisberg.
TLB_RUN_COST: dict[str, float] = {
    "weisberg": 1.0,
    "skylake": 0.73,
    "zen4": 1.42,
    "zen3": 1.33,
    "emeraldrapids": 0.72,
    "pentium4": 1.35,
    "power5plus": 0.47,
    "pkunity": 0.63,
}

#: Runs of a study when the configuration names no page sizes (the study's eight).
DEFAULT_RUNS = 8

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
NATIVE_MAGIC = b"PAGELABT"


def task_cost(source: Mapping[str, Any], config: Mapping[str, Any]) -> float:
    """The estimated CPU seconds of one task (``source`` and ``config`` as
    :func:`pagelab.sweep.tasks_of` makes them); ``inf`` where the source's length
    cannot be known here (a spec the engine refuses, a path or URL this process
    cannot stat), so that it goes first rather than last."""
    return _cost(_source_size(source), config)


def submission_order(tasks: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[int]:
    """The tasks' indices, the costliest first by :func:`task_cost` (ties in the
    caller's order). Each source is sized once (a URL's size is a request)."""
    sizes: dict[int, tuple[str, float] | None] = {}
    costs = []
    for source, config in tasks:
        if id(source) not in sizes:
            sizes[id(source)] = _source_size(source)
        costs.append(_cost(sizes[id(source)], config))
    return sorted(range(len(tasks)), key=lambda i: -costs[i])


def _cost(size: tuple[str, float] | None, config: Mapping[str, Any]) -> float:
    if size is None:
        return float("inf")
    kind, amount = size
    read, per_size, per_policy = WORKLOAD_COST.get(kind, TRACE_COST.get(kind, OTHER_WORKLOAD_COST))
    tlb = TLB_RUN_COST.get(str(config.get("tlb", "weisberg")), 1.0)
    sizes, policies = _runs(config)
    return amount * (read + tlb * (per_size * sizes + per_policy * policies))


def _runs(config: Mapping[str, Any]) -> tuple[int, int]:
    """The page sizes and the policies ``config`` runs."""
    sizes = config.get("page_sizes")
    if sizes is None:
        n = DEFAULT_RUNS
    elif isinstance(sizes, str):
        n = len([s for s in sizes.split(",") if s.strip()])
    else:
        n = len(sizes)
    policies = config.get("policies") or []
    return n, 1 if isinstance(policies, str) else len(policies)


def _source_size(source: Mapping[str, Any]) -> tuple[str, float] | None:
    """(kind, millions of references) of a workload, (format, MB) of a trace; None if unknown."""
    from . import PagelabError, _native

    if "workload" in source:
        spec = str(source["workload"])
        try:
            unit, n = _native.workload_size(spec)
        except PagelabError:
            return None  # the task itself raises the engine's error
        if unit == "refs":
            return spec.partition(":")[0].strip(), n / 1e6
        return unit, n / 1e6
    trace = str(source["trace"])
    try:
        size, head = _trace_head(trace)
    except Exception:  # noqa: BLE001 - any failure here only means "unknown"; the task reports its own
        return None
    fmt = source.get("format")
    if fmt is None:
        fmt = "native" if head.startswith(NATIVE_MAGIC) else "lackey"
    if fmt == "lackey" and head.startswith(ZSTD_MAGIC):
        fmt = "zstd-lackey"
    return fmt, size / 1e6


def _trace_head(trace: str) -> tuple[int, bytes]:
    """The size of ``trace`` in bytes and its first eight bytes (a path or an fsspec URL)."""
    if "://" not in trace:
        with open(trace, "rb") as f:
            return os.fstat(f.fileno()).st_size, f.read(8)
    import fsspec

    fs, path = fsspec.core.url_to_fs(trace)
    with fs.open(path, "rb") as f:
        return int(fs.size(path)), f.read(8)
