"""A sweep on a local Ray instance through pagelab.sweep.RayExecutor equals the serial sweep.

scripts/setup.sh installs Ray into the virtualenv, so CI runs this test (about 6 s
here); it skips where Ray is missing.
"""

from __future__ import annotations

import pandas as pd
import pytest

import pagelab
from pagelab.sweep import RayExecutor, SerialExecutor


def test_ray_sweep_equals_serial(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed (scripts/setup.sh installs it; pip install ray)")
    sources = ["stride:iters=10", "gups:updates=300000", "gzip"]
    configs = {"w": {"page_sizes": ["4K", "2M"]}, "thp": {"policies": ["base:4K", "linux-thp:enabled=always"]}}
    # Ray puts the driver's directory on the workers' path: python/ holds the
    # package's sources without the built module, which would shadow the installed one.
    monkeypatch.chdir(tmp_path)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = pagelab.sweep(sources, configs, executor=RayExecutor())
    finally:
        ray.shutdown()
    want = pagelab.sweep(sources, configs, executor=SerialExecutor())
    pd.testing.assert_frame_equal(got.drop(columns="elapsed_seconds"), want.drop(columns="elapsed_seconds"))
