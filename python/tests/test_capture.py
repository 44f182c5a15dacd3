"""pagelab.capture writes the trace `pagelab capture` writes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import pagelab
from conftest import timeless


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (scripts/setup.sh installs it)")
def test_capture_equals_the_cli(cli, tmp_path):
    ours = pagelab.capture(["/bin/true"], out=tmp_path / "py.trace")
    assert ours["exit_code"] == 0 and ours["events"] > 10_000
    subprocess.run([str(cli), "capture", "-o", str(tmp_path / "cli.trace"), "--", "/bin/true"], check=True, capture_output=True)
    a = timeless(pagelab.study(trace=tmp_path / "py.trace").results[0])
    b = timeless(pagelab.study(trace=tmp_path / "cli.trace").results[0])
    a.pop("source"), b.pop("source")
    assert a == b


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (scripts/setup.sh installs it)")
def test_capture_exit_status_and_window(tmp_path):
    r = pagelab.capture(["/bin/sh", "-c", "exit 3"], out=tmp_path / "s.trace")
    assert r["exit_code"] == 3
    cut = pagelab.capture(["/bin/true"], out=tmp_path / "w.trace", limit=5000)
    refs = pagelab.study(trace=tmp_path / "w.trace").results[0]["refs"]
    assert refs["instr"] + refs["data"] == 5000 and cut["exit_code"] == 0


def test_capture_of_a_missing_program(tmp_path):
    with pytest.raises(pagelab.PagelabError, match="/nonexistent/prog"):
        pagelab.capture(["/nonexistent/prog"], out=tmp_path / "x.trace")
    assert not (tmp_path / "x.trace").exists()
