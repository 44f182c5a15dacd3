"""Type hints of the Rust module ``pagelab._native`` (python/src/)."""

from collections.abc import Iterator
from typing import Any, TypedDict

class PagelabError(Exception):
    """An error of pagelab's engine, with the message the command line prints."""

class SourceWords(TypedDict):
    trace: str | None
    workload: str | None
    format: str | None
    skip: int
    limit: int | None

class ModelWords(TypedDict):
    machine: str | None
    page_sizes: str | None
    tlb: str | None
    policies: list[str]
    phys: str | None
    memory: str | None
    strict: bool
    cow: str
    virt: str | None
    threads: int | None

def run(source: SourceWords, model: ModelWords) -> str:
    """The ``pagelab.sim/1`` JSON of one input under the model (GIL released)."""

def from_arrays(addresses: Any, kinds: Any, sizes: Any, name: str, model: ModelWords) -> str:
    """The JSON result of C-contiguous u64/u8/u32 buffers read as references."""

def capture(argv: list[str], out: str, backend: str, skip: int, limit: int | None) -> tuple[int, int]:
    """Captures ``argv`` into a native trace at ``out``: (events written, exit status)."""

def write_html(path: str, documents: list[tuple[str, str]]) -> None:
    """The HTML report of (heading, JSON result) pairs, side by side, at ``path``."""

def default_workloads() -> list[str]:
    """The workloads ``pagelab study`` runs when given none."""

class TraceChunks(Iterator[tuple[bytes, bytes, bytes]]):
    """A trace's references, ``chunk`` at a time: (u64 addresses, u8 kinds, u32 sizes) bytes."""

    other_events: int
    def __init__(self, path: str, format: str | None = None, chunk: int = 1048576) -> None: ...
    def __iter__(self) -> TraceChunks: ...
    def __next__(self) -> tuple[bytes, bytes, bytes]: ...

def expand_workload(spec: str) -> tuple[str, list[int], list[str]] | None:
    """A spec with one ``FROM..TO/STEP`` parameter: (its name, its values, one spec per value); else None."""

def workload_size(spec: str) -> tuple[str, int]:
    """A workload's length before it runs: ``("refs", n)`` (a synthetic one's exact references) or ``("zstd-lackey", bytes)`` (the bundled trace)."""

def set_max_ref_size(size: str) -> int:
    """Sets the process's largest reference a trace may hold (``--max-ref-size``); returns the one before, in bytes."""
