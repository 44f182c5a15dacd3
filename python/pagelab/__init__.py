"""pagelab from Python: page-size studies, memory-management policy runs and sweeps.

The engine is pagelab's Rust engine (the one the ``pagelab`` command runs),
called with the GIL released; no Python code runs per reference. Every
function returns a :class:`Result` made from the engine's versioned JSON, so
the numbers are exactly the command line's.

>>> import pagelab
>>> r = pagelab.study(workload="stride:iters=1", page_sizes=["4K", "2M"])
>>> list(r.to_pandas()["page_size"])
[4096, 2097152]

Sweeps run every source under every configuration on any
:class:`concurrent.futures.Executor` (a local process pool by default, a Dask
cluster through ``client.get_executor()``): see :func:`pagelab.sweep`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from . import _native
from ._native import PagelabError
from .results import Result
from .sweep import sweep

__all__ = [
    "INSTR",
    "LOAD",
    "STORE",
    "MODIFY",
    "PagelabError",
    "Result",
    "TraceChunk",
    "capture",
    "default_workloads",
    "expand_workload",
    "from_arrays",
    "read_trace",
    "sim",
    "study",
    "sweep",
]

#: Reference kinds in ``kinds`` arrays (:func:`read_trace`, :func:`from_arrays`):
#: Lackey's ``I``, ``L``, ``S`` and ``M`` (a modify counts once, on the data side).
INSTR, LOAD, STORE, MODIFY = 0, 1, 2, 3

#: The page sizes of ``pagelab study`` when none are given.
DEFAULT_PAGE_SIZES = ("4K", "8K", "16K", "32K", "64K", "128K", "256K", "2M")


def _sizes(page_sizes: Sequence[str | int] | str | None) -> str | None:
    """Page sizes as the command line writes them: ``4K,64K,2M`` (None: the default)."""
    if page_sizes is None:
        return None
    if isinstance(page_sizes, str):
        return page_sizes
    return ",".join(_size_word(s) for s in page_sizes)


def _size_word(size: str | int) -> str:
    if isinstance(size, str):
        return size
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def _model(
    page_sizes: Sequence[str | int] | str | None = None,
    tlb: str | os.PathLike[str] | None = None,
    policies: Sequence[str] | None = None,
    phys: str | os.PathLike[str] | None = None,
    memory: str | int | None = None,
    strict: bool = False,
    cow: str = "whole",
    machine: str | os.PathLike[str] | None = None,
    virt: str | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """The model's words, as ``_native`` takes them."""
    if isinstance(policies, str):
        policies = [policies]
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise PagelabError(f"threads={threads!r}: give a whole number from 1 up, or None for what the machine offers")
    return {
        "machine": None if machine is None else os.fspath(machine),
        "page_sizes": _sizes(page_sizes),
        "tlb": None if tlb is None else os.fspath(tlb),
        "policies": list(policies or []),
        "phys": None if phys is None else os.fspath(phys),
        "memory": None if memory is None else _size_word(memory),
        "strict": bool(strict),
        "cow": cow,
        "virt": virt,
        "threads": threads,
    }


@contextlib.contextmanager
def _ref_limit(max_ref_size: str | int | None) -> Iterator[None]:
    """Within the block, traces may hold references up to ``max_ref_size`` (``--max-ref-size``).

    The limit is the process's, as on the command line: threads that read traces at the same
    time see it too. It is put back when the block ends."""
    if max_ref_size is None:
        yield
        return
    before = _native.set_max_ref_size(_size_word(max_ref_size))
    try:
        yield
    finally:
        _native.set_max_ref_size(str(before))


def _source(
    trace: str | os.PathLike[str] | None,
    workload: str | None,
    format: str | None,
    skip: int,
    limit: int | None,
) -> dict[str, Any]:
    return {
        "trace": None if trace is None else os.fspath(trace),
        "workload": workload,
        "format": format,
        "skip": skip,
        "limit": limit,
    }


def study(
    trace: str | os.PathLike[str] | None = None,
    workload: str | Sequence[str] | None = None,
    page_sizes: Sequence[str | int] | str | None = None,
    tlb: str | os.PathLike[str] | None = None,
    machine: str | os.PathLike[str] | None = None,
    *,
    format: str | None = None,
    skip: int = 0,
    limit: int | None = None,
    max_ref_size: str | int | None = None,
    virt: str | None = None,
    threads: int | None = None,
) -> Result:
    """The page-size study of one trace or of workloads, as ``pagelab study``/``pagelab sim``.

    Give ``trace`` (a Lackey file, plain, zstd or xz, or a native trace) or
    ``workload`` (a spec such as ``"gups:table=64M"``, ``"gzip"`` for the
    bundled real trace, or a list of specs); with neither, the default set of
    ``pagelab study``. A parameter written ``FROM..TO/STEP``
    (``"stride:heap=128K..32M/128K,every=16"``) runs one result per value, as
    ``pagelab sim --workload`` does (:func:`expand_workload`); each result
    carries its value in ``source.params``. ``page_sizes`` are powers of two from 4K to 1G, written
    ``"4K"`` or as bytes; ``tlb`` a preset name (``pagelab presets``) or a TOML
    file; ``machine`` a machine preset (``pagelab machines``) or file, whose
    page sizes and TLB are then the defaults (else the study's eight sizes and
    ``weisberg``). ``skip``/``limit`` cut the input to a window of references.
    ``max_ref_size`` (``"1M"`` or bytes) allows references larger than the
    64K a trace may otherwise hold, as ``--max-ref-size``; it is set for the
    process during the call.

    A ``machine`` with caches and latencies (``"zen4"``, ``"pentium4"``, ...:
    docs/cost.md) times every run, as the command line does: each run gets
    its ``cost`` (``cost.cycles``, ``cost.cycles_per_ref``, ``cost.walk_refs``,
    ``cost.walk_cycles``, ``cost.walk_cache_hits``, ``cost.caches`` per level
    with data and page-table lines apart, ...) and ``speedup_over_4k``.
    ``virt="nested:host=2M"`` (or ``4K``, ``1G``) models a guest under nested
    paging, as ``--virt``; it needs such a machine. ``virt="nested"`` takes the
    host page the machine file gives (``[nested] host_page``, which
    ``pagelab machines --measure`` writes), 2M where it gives none.

    ``threads`` bounds the threads the engine uses for the call (reading ahead, parsing a
    plain Lackey file in pieces, stepping policy runs side by side); by default it uses what
    the machine offers. Results never depend on it; :func:`sweep` gives each task one.

    Raises :class:`PagelabError` with the command line's message on bad input.
    """
    return sim(
        trace,
        workload,
        page_sizes,
        tlb,
        machine,
        format=format,
        skip=skip,
        limit=limit,
        max_ref_size=max_ref_size,
        virt=virt,
        threads=threads,
    )


def sim(
    trace: str | os.PathLike[str] | None = None,
    workload: str | Sequence[str] | None = None,
    page_sizes: Sequence[str | int] | str | None = None,
    tlb: str | os.PathLike[str] | None = None,
    machine: str | os.PathLike[str] | None = None,
    *,
    policies: Sequence[str] | None = None,
    phys: str | os.PathLike[str] | None = None,
    memory: str | int | None = None,
    strict: bool = False,
    cow: str = "whole",
    format: str | None = None,
    skip: int = 0,
    limit: int | None = None,
    max_ref_size: str | int | None = None,
    virt: str | None = None,
    threads: int | None = None,
) -> Result:
    """``pagelab sim``: the study, or with ``policies`` the memory-management model.

    ``policies`` as ``pagelab sim --policy`` takes them (``"base:4K"``,
    ``"linux-thp:enabled=always"``), all run in one pass; ``phys`` (a TOML
    layout), ``memory`` (``"4G"``), ``strict`` and ``cow`` (``"whole"`` or
    ``"base"``) as the options of the same names. Other arguments as
    :func:`study`. The policy runs are not timed (the study is), as on the
    command line.
    """
    model = _model(page_sizes, tlb, policies, phys, memory, strict, cow, machine, virt, threads)
    if trace is not None and workload is not None:
        raise PagelabError("give one input: a trace (trace=PATH) or a workload (workload=SPEC), not both")
    if trace is None and workload is None:
        workload = _native.default_workloads()
    if isinstance(workload, str) and _native.expand_workload(workload) is not None:
        workload = [workload]
    with _ref_limit(max_ref_size):
        if isinstance(workload, (list, tuple)):
            specs = [spec for w in workload for spec in expand_workload(w)]
            return Result.of_json([_native.run(_source(None, w, None, skip, limit), model) for w in specs])
        return Result.of_json([_native.run(_source(trace, workload, format, skip, limit), model)])


def expand_workload(spec: str) -> list[str]:
    """The workloads of ``spec``: one per value of a parameter written ``FROM..TO/STEP``
    (``"stride:heap=128K..512K/128K,every=16"`` gives the specs of heaps 128K, 256K, 384K
    and 512K, as ``pagelab sim --workload`` expands it), else ``[spec]``.

    Raises :class:`PagelabError` with the command line's message on a range it refuses.
    """
    sweep = _native.expand_workload(spec)
    return [spec] if sweep is None else list(sweep[2])


def from_arrays(
    addresses: Any,
    kinds: Any,
    sizes: Any,
    page_sizes: Sequence[str | int] | str | None = None,
    tlb: str | os.PathLike[str] | None = None,
    *,
    policies: Sequence[str] | None = None,
    name: str = "arrays",
    **model: Any,
) -> Result:
    """Studies references made in Python: ``addresses[i]``, ``kinds[i]``, ``sizes[i]`` in order.

    ``kinds`` holds :data:`INSTR`, :data:`LOAD`, :data:`STORE` or
    :data:`MODIFY` (or the letters ``"I"``, ``"L"``, ``"S"``, ``"M"``). The
    result is exactly what a Lackey trace of the same references gives. The
    arrays are read in place (after conversion to uint64, uint8 and uint32
    where needed) with the GIL released: do not change them from another
    thread during the call. Other arguments as :func:`sim`.
    """
    import numpy as np

    kinds = np.asarray(kinds)
    if kinds.dtype.kind in ("U", "S", "O"):
        letters = np.char.upper(kinds.astype("U1"))
        codes = np.full(letters.shape, 255, dtype=np.uint8)
        for code, letter in enumerate("ILSM"):
            codes[letters == letter] = code
        kinds = codes
    arrays = [
        _column(addresses, np.uint64, "addresses"),
        _column(kinds, np.uint8, "kinds"),
        _column(sizes, np.uint32, "sizes"),
    ]
    cfg = _model(page_sizes, tlb, policies, **model)
    return Result.of_json([_native.from_arrays(*arrays, name, cfg)])


def _column(values: Any, dtype: Any, what: str) -> Any:
    import numpy as np

    a = np.asarray(values)
    if a.dtype != dtype:
        if a.size and (a.dtype.kind not in "iu" or a.min() < 0 or a.max() > np.iinfo(dtype).max):
            raise PagelabError(f"{what}: {a.dtype} values do not fit {np.dtype(dtype).name}")
        a = a.astype(dtype)
    return np.ascontiguousarray(a)


class TraceChunk:
    """One chunk of a trace's references: three numpy arrays of equal length.

    ``addresses`` (uint64), ``kinds`` (uint8: :data:`INSTR`, :data:`LOAD`,
    :data:`STORE`, :data:`MODIFY`) and ``sizes`` (uint32, bytes), read-only.
    """

    __slots__ = ("addresses", "kinds", "sizes")

    def __init__(self, addresses: Any, kinds: Any, sizes: Any) -> None:
        self.addresses = addresses
        self.kinds = kinds
        self.sizes = sizes

    def __len__(self) -> int:
        return len(self.kinds)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.addresses, self.kinds, self.sizes))

    def __repr__(self) -> str:
        return f"TraceChunk({len(self)} references)"


def read_trace(
    path: str | os.PathLike[str],
    *,
    chunk: int = 1 << 20,
    format: str | None = None,
    max_ref_size: str | int | None = None,
) -> Iterator[TraceChunk]:
    """Yields a trace file's references, ``chunk`` at a time, as numpy arrays.

    Any format ``pagelab sim --trace`` reads. Events other than references
    (a native trace's map/unmap/fork... events) are skipped. The arrays view
    the engine's buffers without a copy; ``from_arrays(*chunk)`` studies one.
    ``max_ref_size`` as in :func:`study`, for as long as the reading goes on.
    """
    import numpy as np

    with _ref_limit(max_ref_size):
        for a, k, s in _native.TraceChunks(os.fspath(path), format, chunk):
            yield TraceChunk(
                np.frombuffer(a, dtype=np.uint64),
                np.frombuffer(k, dtype=np.uint8),
                np.frombuffer(s, dtype=np.uint32),
            )


def capture(
    argv: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    backend: str = "qemu",
    skip: int = 0,
    limit: int | None = None,
) -> dict[str, Any]:
    """``pagelab capture -o OUT -- ARGV``: runs a program and writes its trace (native format).

    ``backend`` is ``"qemu"`` (references, threads, processes, mappings) or
    ``"valgrind"`` (references only). The program's standard output goes to
    standard error. Returns ``{"trace": out, "events": n, "exit_code": c}``;
    the trace file appears only when the capture is whole.
    """
    args = [os.fsdecode(a) for a in argv]
    events, code = _native.capture(args, os.fspath(out), backend, skip, limit)
    return {"trace": os.fspath(out), "events": events, "exit_code": code}


def default_workloads() -> list[str]:
    """The workloads ``pagelab study`` runs when given none (the bundled ``gzip`` trace last)."""
    return list(_native.default_workloads())
