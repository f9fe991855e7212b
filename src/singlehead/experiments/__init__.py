"""Experiments: declarative grids, the figures of the reproduction and the HTML report (their jobs run
through the one runner, :mod:`singlehead.runs`).

Nothing below this package knows about files, progress bars or the CLI.
"""

from ..runs import Cache, Job, cache_for_export, export_jsonl, run_jobs
from .grid import expand_grid, load_grid, random_problems
from .memo import cached

__all__ = ["Job", "expand_grid", "load_grid", "Cache", "run_jobs", "export_jsonl", "cache_for_export",
           "random_problems", "cached"]
