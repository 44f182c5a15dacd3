"""read_trace and from_arrays: a trace made in Python gives what the Lackey path gives."""

from __future__ import annotations

import numpy as np

import pagelab
from conftest import BUNDLED, timeless


def without_source(doc):
    return {k: v for k, v in timeless(doc).items() if k != "source"}


def test_read_trace_round_trip_through_from_arrays():
    chunks = list(pagelab.read_trace(BUNDLED, chunk=1 << 20))
    assert all(len(c) == 1 << 20 for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 1 << 20
    a, k, s = (np.concatenate(col) for col in zip(*chunks))
    assert a.dtype == np.uint64 and k.dtype == np.uint8 and s.dtype == np.uint32
    ours = pagelab.from_arrays(a, k, s, tlb="skylake").results[0]
    lackey = pagelab.study(trace=BUNDLED, tlb="skylake").results[0]
    assert without_source(ours) == without_source(lackey)
    assert ours["source"] == {"kind": "arrays", "name": "arrays"}
    # The bundled trace holds every kind of reference.
    assert set(np.unique(k).tolist()) == {pagelab.INSTR, pagelab.LOAD, pagelab.STORE, pagelab.MODIFY}


def random_refs(n, seed):
    rng = np.random.default_rng(seed)
    base = rng.choice([0x400000, 0x7F00_0000_0000, 0x1FF000], n)
    addrs = (base + rng.integers(0, 1 << 24, n)).astype(np.uint64)
    kinds = rng.integers(0, 4, n).astype(np.uint8)
    sizes = rng.choice([0, 1, 4, 8, 16, 64, 4096, 9000], n).astype(np.uint32)
    return addrs, kinds, sizes


def write_lackey(path, addrs, kinds, sizes):
    letters = ["I  ", " L ", " S ", " M "]
    with open(path, "w") as f:
        f.write("==123== Lackey, an example Valgrind tool\n")
        for a, k, s in zip(addrs.tolist(), kinds.tolist(), sizes.tolist()):
            f.write(f"{letters[k]}{a:08x},{s}\n")


def test_from_arrays_equals_lackey_on_random_references(tmp_path):
    for seed in (1, 2, 3):
        addrs, kinds, sizes = random_refs(50_000, seed)
        path = tmp_path / f"r{seed}.lackey"
        write_lackey(path, addrs, kinds, sizes)
        for policies in (None, ["base:4K", "linux-thp:enabled=always"]):
            ours = pagelab.from_arrays(addrs, kinds, sizes, policies=policies).results[0]
            lackey = pagelab.sim(trace=path, policies=policies).results[0]
            assert without_source(ours) == without_source(lackey)


def test_from_arrays_takes_letters_and_plain_lists(tmp_path):
    addrs = [0x1000, 0x2000, 0x3FFF, 0x1000]
    letters = ["I", "L", "S", "M"]
    ours = pagelab.from_arrays(addrs, letters, [4, 8, 2, 8], page_sizes=["4K"], name="tiny").results[0]
    path = tmp_path / "tiny.lackey"
    write_lackey(path, np.array(addrs), np.array([0, 1, 2, 3]), np.array([4, 8, 2, 8]))
    assert without_source(ours) == without_source(pagelab.study(trace=path, page_sizes="4K").results[0])
    assert ours["source"]["name"] == "tiny"
    # The store at 0x3FFF covers two bytes and so two pages.
    assert ours["runs"][0]["dtlb_accesses"] == 4


def test_from_arrays_reads_strided_views():
    addrs, kinds, sizes = random_refs(10_000, 7)
    every_other = pagelab.from_arrays(addrs[::2], kinds[::2], sizes[::2]).results[0]
    copied = pagelab.from_arrays(addrs[::2].copy(), kinds[::2].copy(), sizes[::2].copy()).results[0]
    assert timeless(every_other) == timeless(copied)
