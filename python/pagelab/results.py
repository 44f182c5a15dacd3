"""Results: the engine's versioned JSON, with a DataFrame view.

Every other output is made from the JSON the engine wrote, as the command
line's tables, CSV and plots are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

SIM_SCHEMA = "pagelab.sim/1"
STUDY_SCHEMA = "pagelab.study/1"


class Result:
    """The result of one or more runs: one ``pagelab.sim/1`` document per input.

    ``results`` holds the documents as dicts; :meth:`to_json` gives the JSON
    the command line writes (``pagelab sim --json`` for one input, the
    ``result.json`` of ``pagelab study`` for several) and :meth:`to_pandas`
    one row per run (page size or policy) with the JSON fields as columns.
    """

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results = results

    @classmethod
    def of_json(cls, documents: Iterable[str]) -> Result:
        """A result from the engine's JSON documents."""
        return cls([json.loads(d) for d in documents])

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON document: ``pagelab.sim/1`` for one input, ``pagelab.study/1`` for several."""
        if len(self.results) == 1:
            return json.dumps(self.results[0], indent=indent)
        return json.dumps({"schema": STUDY_SCHEMA, "results": self.results}, indent=indent)

    def to_html(self, path: str | os.PathLike[str], name: str = "pagelab") -> None:
        """Writes the HTML report ``pagelab report`` writes: the recommendation, plots, tables."""
        from . import _native

        _native.write_html(os.fspath(path), [(name, self.to_json(indent=None))])

    def to_pandas(self) -> Any:
        """A DataFrame, one row per run: source, refs, TLB and every run field as columns.

        Nested objects become dotted columns (``source.name``,
        ``faults_by_size.2M``); ``tlb`` is the TLB's name; ``tlb_levels``
        stays a list per row.
        """
        import pandas as pd

        return pd.DataFrame(list(self.rows()))

    def rows(self) -> Iterator[dict[str, Any]]:
        """The rows of :meth:`to_pandas`, as dicts."""
        for r in self.results:
            yield from rows_of(r)

    def __len__(self) -> int:
        return sum(len(r["runs"]) for r in self.results)

    def __repr__(self) -> str:
        inputs = ", ".join(label(r) for r in self.results)
        return f"<pagelab.Result: {len(self)} runs of {inputs}>"

    def _repr_html_(self) -> str:
        return str(self.to_pandas()._repr_html_())


def label(result: dict[str, Any]) -> str:
    """The source as people read it: ``workload stride (len=1000, step=4K)``."""
    s = result["source"]
    out = f"{s['kind']} {s['name']}"
    if s.get("compression"):
        out += f" [{s['compression']}]"
    if s.get("params"):
        out += " (" + ", ".join(f"{k}={v}" for k, v in s["params"].items()) + ")"
    return out


def tlb_name(result: dict[str, Any]) -> str:
    """The TLB's short name, as the command line's tables print it."""
    tlb = result.get("tlb")
    if tlb is None:
        return "-"
    if isinstance(tlb, str):
        return tlb
    if isinstance(tlb, dict) and isinstance(tlb.get("name"), str):
        return tlb["name"]
    return json.dumps(tlb, separators=(",", ":"))


def rows_of(result: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One flat dict per run of a ``pagelab.sim/1`` document."""
    head: dict[str, Any] = {}
    _flatten("source", result["source"], head)
    head["tlb"] = tlb_name(result)
    _flatten("refs", result["refs"], head)
    if "elapsed_seconds" in result:
        head["elapsed_seconds"] = result["elapsed_seconds"]
    for run in result["runs"]:
        row = dict(head)
        for key, value in run.items():
            _flatten(key, value, row)
        yield row


def _flatten(key: str, value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{key}.{k}", v, into)
    else:
        into[key] = value
