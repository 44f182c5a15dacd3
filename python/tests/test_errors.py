"""Errors are Python exceptions carrying the command line's messages."""

from __future__ import annotations

import numpy as np
import pytest

import pagelab
from conftest import BUNDLED, cli_error


def message(excinfo) -> str:
    return str(excinfo.value)


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({"workload": "nope"}, ["sim", "--workload", "nope"]),
        ({"workload": "gups:tabel=1M"}, ["sim", "--workload", "gups:tabel=1M"]),
        ({"workload": "gzip:x=1"}, ["sim", "--workload", "gzip:x=1"]),
        ({"workload": "stride", "page_sizes": "3K"}, ["sim", "--workload", "stride", "--page-sizes", "3K"]),
        ({"workload": "stride", "tlb": "nosuch"}, ["sim", "--workload", "stride", "--tlb", "nosuch"]),
        ({"trace": "/nonexistent/t.lackey"}, ["sim", "--trace", "/nonexistent/t.lackey"]),
        (
            {"workload": "stride", "policies": ["base:3K"]},
            ["sim", "--workload", "stride", "--policy", "base:3K"],
        ),
        (
            {"workload": "stride", "policies": ["base:4K"], "cow": "half"},
            ["sim", "--workload", "stride", "--policy", "base:4K", "--cow", "half"],
        ),
    ],
)
def test_same_message_as_the_cli(cli, kwargs, args):
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.sim(**kwargs)
    assert message(e) == cli_error(cli, *args)


def test_bad_line_names_file_and_line(cli, tmp_path):
    path = tmp_path / "bad.lackey"
    path.write_text("I  00400000,4\n L 0040zz00,8\n")
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.study(trace=path)
    assert message(e) == cli_error(cli, "sim", "--trace", str(path))
    assert f"{path} line 2" in message(e)
    with pytest.raises(pagelab.PagelabError, match="line 2"):
        list(pagelab.read_trace(path))


def test_truncated_compressed_trace(cli, tmp_path):
    path = tmp_path / "cut.lackey.zst"
    path.write_bytes(BUNDLED.read_bytes()[:20000])
    with pytest.raises(pagelab.PagelabError) as e:
        pagelab.study(trace=path)
    assert message(e) == cli_error(cli, "sim", "--trace", str(path))


def test_array_errors():
    a = np.arange(4, dtype=np.uint64) * 4096
    with pytest.raises(pagelab.PagelabError, match="differ in length: addresses 4, kinds 3, sizes 4"):
        pagelab.from_arrays(a, np.zeros(3, np.uint8), np.ones(4, np.uint32))
    with pytest.raises(pagelab.PagelabError, match=r"kinds\[2\] is 9"):
        pagelab.from_arrays(a, np.array([0, 1, 9, 2], np.uint8), np.ones(4, np.uint32))
    with pytest.raises(pagelab.PagelabError, match=r"kinds\[1\] is 255"):
        pagelab.from_arrays(a, ["I", "X", "L", "S"], [1, 1, 1, 1])
    with pytest.raises(pagelab.PagelabError, match="addresses: int64 values do not fit uint64"):
        pagelab.from_arrays([-1, 0, 1, 2], [0, 0, 0, 0], [1, 1, 1, 1])
    with pytest.raises(pagelab.PagelabError, match=r"sizes\[0\] is 1000000"):
        pagelab.from_arrays(a, [0, 0, 0, 0], [1_000_000, 1, 1, 1])
    with pytest.raises(pagelab.PagelabError, match="2 dimensions"):
        pagelab.from_arrays(a.reshape(2, 2), np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint32))


def test_one_input():
    with pytest.raises(pagelab.PagelabError, match="give one input"):
        pagelab.study(trace=BUNDLED, workload="stride")


def test_capture_without_program():
    with pytest.raises(pagelab.PagelabError, match="give the program to capture"):
        pagelab.capture([], out="x.trace")


def test_max_ref_size_allows_a_large_reference_for_the_call_only(tmp_path):
    """A 1M reference is refused by default, read with max_ref_size, and refused again after."""
    t = tmp_path / "big.lackey"
    t.write_text(" L 10000000,1048576\n S 20000000,8\n")
    with pytest.raises(pagelab.PagelabError, match="--max-ref-size"):
        pagelab.sim(trace=t, page_sizes="4K")
    r = pagelab.sim(trace=t, page_sizes="4K", max_ref_size="1M").results[0]
    assert r["refs"]["data"] == 2
    chunks = list(pagelab.read_trace(t, max_ref_size=1 << 20))
    assert list(chunks[0].sizes) == [1048576, 8]
    with pytest.raises(pagelab.PagelabError, match="--max-ref-size"):
        pagelab.sim(trace=t, page_sizes="4K")
    with pytest.raises(pagelab.PagelabError, match="--max-ref-size 5G"):
        pagelab.sim(trace=t, page_sizes="4K", max_ref_size="5G")
