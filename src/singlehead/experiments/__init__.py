"""Experiments: declarative grids, cached and parallel execution, figures and the HTML report.

Nothing below this package knows about files, progress bars or the CLI.
"""

from .grid import Job, expand_grid, load_grid
from ..runs.cache import Cache, cache_for_export, export_jsonl
from .runner import run_jobs

__all__ = ["Job", "expand_grid", "load_grid", "Cache", "run_jobs", "export_jsonl", "cache_for_export"]
