"""The sweep command: a TOML file of sources and configurations in, Parquet and JSON out.

``pagelab sweep SWEEP.toml`` (the Rust binary hands it to ``python -m
pagelab sweep``) reads::

    sources = ["stride", "gups:table=64M", "traces/cc1.lackey.zst", "s3://bucket/x.trace"]
                                              # a FROM..TO/STEP parameter: one source per value
    page_sizes = ["4K", "64K", "2M"]          # the study's page sizes (default: the study's eight)
    tlbs = ["weisberg", "skylake"]            # presets or TOML files (default: weisberg)
    machines = ["x86-64", "arm64-64k"]        # and/or machines (pagelab machines), each a configuration
    policies = ["base:4K", "linux-thp:enabled=always"]   # optional: also run these, per TLB
    memory = "4G"                             # optional, for the policies
    virt = "nested:host=2M"                   # optional: nested paging (--virt), machines with caches
    out = "pagelab-sweep"                     # optional; -o overrides

and runs every source under every configuration (one study per TLB or
machine, plus one policy run per TLB or machine when ``policies`` is given) on a local process pool,
or on the Dask cluster whose scheduler ``--dask`` names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from typing import Any

from . import PagelabError

SWEEP_SCHEMA = "pagelab.sweep/1"
KEYS = {
    "sources": list,
    "page_sizes": list,
    "tlbs": list,
    "machines": list,
    "policies": list,
    "memory": str,
    "virt": str,
    "out": str,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pagelab", description="pagelab from Python")
    sub = parser.add_subparsers(dest="command", required=True)
    sw = sub.add_parser("sweep", help="run every source under every configuration of SWEEP.toml")
    sw.add_argument("file", metavar="SWEEP.toml")
    sw.add_argument("--dask", metavar="SCHEDULER_ADDRESS", help="run on this Dask cluster (tcp://host:8786)")
    sw.add_argument("-o", "--out", metavar="DIR", help="output directory (default: `out` of the file, else pagelab-sweep)")
    args = parser.parse_args(argv)
    try:
        return sweep_command(args.file, args.dask, args.out)
    except (PagelabError, SweepFileError, OSError) as e:
        print(f"pagelab: error: {e}", file=sys.stderr)
        return 1


class SweepFileError(Exception):
    """A sweep file that cannot be used, naming the file and the field."""


def read_sweep(path: str) -> tuple[list[Any], list[dict[str, Any]], str | None]:
    """The sources, configurations and output directory of a sweep file."""
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SweepFileError(f"{path}: {e}") from None
    for key, value in spec.items():
        if key not in KEYS:
            raise SweepFileError(f"{path}: unknown field `{key}`; a sweep file has {', '.join(KEYS)}")
        want = KEYS[key]
        if not isinstance(value, want) or (want is list and not all(isinstance(v, str) for v in value)):
            kind = "a list of strings" if want is list else "a string"
            raise SweepFileError(f"{path}: `{key}` must be {kind}, not {value!r}")
    if not spec.get("sources"):
        raise SweepFileError(f"{path}: `sources` is missing or empty: list workloads, trace paths or URLs")
    base: dict[str, Any] = {}
    if "page_sizes" in spec:
        base["page_sizes"] = spec["page_sizes"]
    # Nested paging is the whole command's, as `--virt` is `pagelab sim`'s: every configuration.
    virt = {"virt": spec["virt"]} if "virt" in spec else {}
    configs = []
    models = [("tlb", t) for t in spec.get("tlbs", [])] + [("machine", m) for m in spec.get("machines", [])]
    for key, value in models or [("tlb", "weisberg")]:
        configs.append({"name": value, key: value, **base, **virt})
        if spec.get("policies"):
            policy = {"policies": spec["policies"], **virt}
            if "memory" in spec:
                policy["memory"] = spec["memory"]
            configs.append({"name": f"{value} policies", key: value, **policy})
    if "memory" in spec and not spec.get("policies"):
        raise SweepFileError(f"{path}: `memory` is for the policy runs: give `policies` too")
    return spec["sources"], configs, spec.get("out")


def sweep_command(path: str, dask: str | None, out: str | None) -> int:
    from .sweep import frame, sweep_documents, tasks_of

    sources, configs, out_of_file = read_sweep(path)
    out = out or out_of_file or "pagelab-sweep"
    tasks = tasks_of(sources, configs)
    start = time.perf_counter()
    if dask:
        from distributed import Client

        with Client(dask) as client:
            documents = sweep_documents(tasks, client.get_executor())
        where = f"the Dask cluster at {dask}"
    else:
        documents = sweep_documents(tasks)
        where = f"{os.cpu_count()} local processes"
    seconds = time.perf_counter() - start
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump({"schema": SWEEP_SCHEMA, "results": documents}, f, indent=2)
        f.write("\n")
    df = frame(documents)
    df.to_parquet(os.path.join(out, "result.parquet"), index=False)
    write_report(os.path.join(out, "report.html"), documents)
    columns = [c for c in ("source", "config", "page_size", "policy", "itlb_misses", "dtlb_misses", "faults") if c in df]
    print(df[columns].to_string(index=False))
    print(
        f"{len(df)} runs: {len(tasks) // len(configs)} sources x {len(configs)} configurations in {seconds:.1f} s on {where}; "
        f"wrote {os.path.join(out, 'result.parquet')}, {os.path.join(out, 'result.json')} "
        f"and {os.path.join(out, 'report.html')}"
    )
    return 0


def write_report(path: str, documents: list[dict[str, Any]]) -> None:
    """The HTML report: one column per configuration, its results over every source (the
    columns ``pagelab report`` makes of the sweep's JSON)."""
    from . import _native

    _native.write_html(path, [("", json.dumps({"schema": SWEEP_SCHEMA, "results": documents}))])
