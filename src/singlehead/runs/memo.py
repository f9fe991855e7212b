"""Any computation cached in the library's result cache, keyed by a description of it.

:func:`singlehead.runs.run_jobs` caches the records of the library's routes (simulation, theory, ...). A study
that computes something else (a fit from several initialisations, an SE point on a chosen prox
branch, a table of eigenvalues) stores it in the same :class:`Cache` through :func:`cached`: the
record's key hashes the numerics version (:data:`singlehead.runs.cache.NUMERICS_VERSION`) and a JSON-able ``spec`` that
names
everything the result depends on, so a rerun with the same ``spec`` reads the record back and an
interrupted study resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from singlehead.model.results import stable_hash
from singlehead.runs import cache as cache_module  # the version is read at call time, so a bump applies at once
from singlehead.runs.cache import Cache

__all__ = ["cached"]


def cached(
    cache: Cache, spec: dict[str, Any], compute: Callable[[], dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The record of ``spec`` from ``cache``, or ``compute()`` stored there and returned.

    Parameters
    ----------
    cache : Cache
        The result cache (a directory, or ``Cache(None)`` in memory).
    spec : dict
        JSON-able description of the computation (a ``"stage"`` name, the problem's
        ``to_dict()``, seeds, options): two computations with equal ``spec`` must give the same
        record, and every input that changes the record must be in it.
    compute : callable, optional
        ``compute() -> dict`` (JSON-able), called only on a cache miss. Without it a miss
        returns ``None`` (a lookup: tables built from whatever is cached).

    Returns
    -------
    dict or None
        ``compute()``'s record (read back from the cache on a hit; tuples come back as lists),
        or ``None`` on a miss without ``compute``.

    Examples
    --------
    >>> from singlehead.runs import Cache, cached
    >>> cache, calls = Cache(None), []
    >>> def square():
    ...     calls.append(1)
    ...     return {"value": 3 ** 2}
    >>> cached(cache, {"stage": "square", "x": 3}, square), cached(cache, {"stage": "square", "x": 3}, square)
    ({'value': 9}, {'value': 9})
    >>> len(calls), cached(cache, {"stage": "square", "x": 4})   # computed once; a lookup that misses
    (1, None)
    """
    key = "memo-" + stable_hash({"numerics": cache_module.NUMERICS_VERSION, "spec": spec})
    hit = cache.get(key)
    if hit is not None:
        return hit["record"]
    if compute is None:
        return None
    record = compute()
    cache.put({"key": key, "spec": spec, "record": record})
    return cache.get(key)["record"]
