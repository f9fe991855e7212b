"""Running and keeping results: the one runner (:mod:`.runner`) and the one result cache (:mod:`.cache`)
of the command line, ``reproduce``, the explorer and the studies.

Every cache key carries :data:`~singlehead.runs.cache.NUMERICS_VERSION`, the version of the
library's numbers: bump it in a change that alters any result, and no cache serves a number the
new code would not compute.

Jobs and grids (:mod:`.grid`), the runner (:mod:`.runner`) with its route table (:mod:`.routes`), any
computation cached by description (:mod:`.memo`), the reference workload printed beside timings
(:mod:`.reference`) and the thread policy (:mod:`.threads`) live here too;
names this module does not import itself (``_LAZY``) are imported on first use.
"""

from importlib import import_module
from typing import Any

from singlehead.runs.cache import (
    NUMERICS_VERSION,
    Cache,
    cache_for_export,
    export_jsonl,
    library_cache_dir,
    result_key,
    value_key,
)
from singlehead.runs.runner import Job, Workers, run_calls, run_jobs, run_stages, stream

# Grids and the in-process memo, imported on first use: a cache lookup needs none of their modules.
_LAZY = {
    "expand_grid": "singlehead.runs.grid",
    "load_grid": "singlehead.runs.grid",
    "random_problems": "singlehead.runs.grid",
    "cached": "singlehead.runs.memo",
    "reference_seconds": "singlehead.runs.reference",
}

__all__ = [
    "NUMERICS_VERSION",
    "Cache",
    "result_key",
    "value_key",
    "cache_for_export",
    "export_jsonl",
    "library_cache_dir",
    "Job",
    "Workers",
    "run_jobs",
    "run_stages",
    "stream",
    "run_calls",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
