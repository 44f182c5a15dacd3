"""``python -m pagelab sweep SWEEP.toml [--dask ADDRESS] [-o DIR]`` (what ``pagelab sweep`` runs)."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
