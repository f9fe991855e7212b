"""Running and keeping results: the one runner (:mod:`.runner`) and the one result cache (:mod:`.cache`)
of the command line, ``reproduce``, the explorer and the studies.

Every cache key carries :data:`~singlehead.runs.cache.NUMERICS_VERSION`, the version of the
library's numbers: bump it in a change that alters any result, and no cache serves a number the
new code would not compute.
"""

from .cache import NUMERICS_VERSION, Cache, cache_for_export, export_jsonl, library_cache_dir, result_key, value_key
from .runner import Job, Workers, run_calls, run_jobs, stream

__all__ = ["NUMERICS_VERSION", "Cache", "result_key", "value_key", "cache_for_export", "export_jsonl",
           "library_cache_dir", "Job", "Workers", "run_jobs", "stream", "run_calls"]
