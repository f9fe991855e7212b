"""The library's one result cache: every stored result is found under a key that names its numerics.

Everything that keeps results between runs goes through this module: the command line's
``--out FILE.jsonl`` (backed by ``FILE.jsonl.cache/``), ``reproduce`` (``OUT/cache/``), the
explorer (``<cache dir>/explore``) and the studies. A cache is a directory of JSON files, one
per result, named by its key and written atomically (temporary file + rename) the moment the
result exists: an interrupted sweep loses only what was in flight, and rerunning it recomputes
nothing that is already there. ``Cache(None)`` keeps the records in memory only.

Keys
----
A key is :func:`singlehead.model.results.stable_hash` of everything that changes the result and of
``NUMERICS_VERSION``:

* ``result_key``: a run of a route (``"theory"``, ``"simulation"``, ``"bayes"``, ...) on a
  full :class:`~singlehead.model.problem.Problem`, with its seed (``None`` for deterministic routes)
  and the route's settings (solver and quadrature settings, training options, device, dtype);
* ``value_key``: a value computed in-process, under a name that carries every parameter it
  depends on (the figures build the name from their spec's fields).

``NUMERICS_VERSION`` is the version of the library's numbers. **Bump it in any change that
alters a number a route returns** (a new default, a different quadrature, a fixed bug in a
formula); a change that only moves code around leaves it. After a bump every key changes, so no
cache serves a result the new code would not compute; the old files stay on disk, unread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from singlehead.model.results import jsonable, stable_hash
from singlehead.numerics.cache_dir import library_cache_dir

__all__ = [
    "NUMERICS_VERSION",
    "Cache",
    "result_key",
    "value_key",
    "cache_for_export",
    "export_jsonl",
    "library_cache_dir",
]

#: The version of the library's numerics, part of every cache key. Bump it (by one) in every
#: change that alters a result of any route; see the module docstring.
NUMERICS_VERSION = 8


def result_key(
    route: str, problem: Any, seed: int | None = None, settings: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()
) -> str:
    """The cache key of one run: ``route`` on ``problem`` with ``seed`` and ``settings``.

    Parameters
    ----------
    route : str
        The route's name (``"theory"``, ``"simulation"``, ``"bayes"``, ``"thresholds"``, ``"amp"``, ...).
    problem : Problem or dict
        The full problem (``singlehead.model.problem.Problem.to_dict`` is taken of a ``Problem``).
    seed : int or None
        The data seed of a random route; ``None`` for a deterministic one.
    settings : mapping or pairs
        Every setting of the route that changes its result (order does not matter).

    Returns
    -------
    str
        24 hex digits; equal keys mean the same computation by the same numerics
        (``NUMERICS_VERSION``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.runs.cache import result_key
    >>> result_key("theory", Problem(alpha=0.5)) == result_key("theory", Problem(alpha=0.5).to_dict())
    True
    >>> result_key("theory", Problem(alpha=0.5)) != result_key("theory", Problem(alpha=1.0))
    True
    """
    pdict = problem.to_dict() if hasattr(problem, "to_dict") else dict(problem)
    return stable_hash(
        {"numerics": NUMERICS_VERSION, "route": route, "problem": pdict, "seed": seed, "settings": dict(settings)}
    )


def value_key(name: str) -> str:
    """The cache key of a value computed in-process under ``name`` (which must name every parameter it
    depends on); it carries ``NUMERICS_VERSION`` like ``result_key``.

    Examples
    --------
    >>> from singlehead.runs.cache import value_key
    >>> value_key("curve-a").startswith("value-") and value_key("curve-a") != value_key("curve-b")
    True
    """
    return "value-" + stable_hash({"numerics": NUMERICS_VERSION, "name": name})


class Cache:
    """Directory of ``<key>.json`` records; ``root=None`` keeps them in memory only.

    Each record is a JSON object with a ``key`` (``result_key`` or ``value_key``);
    writes are atomic, so an interrupted run never leaves a half-written record, and a record
    that cannot be read (a torn write of a killed process) counts as missing.

    Parameters
    ----------
    root : path or None
        The directory (created if missing); ``None``: memory only.
    memory : bool
        Also keep every record read or written in memory, so that a key is read from disk at most
        once (the explorer asks for the same points over and over). Records of one key are
        written by one computation, so the copy in memory cannot go stale.

    Examples
    --------
    >>> from singlehead.runs.cache import Cache
    >>> cache = Cache(None)                             # in memory
    >>> cache.put({"key": "abc", "test_error": 0.1})
    >>> cache.get("abc")["test_error"], cache.get("missing")
    (0.1, None)
    >>> cache.get_or_compute("def", lambda: {"test_error": 0.2})["test_error"]
    0.2
    """

    def __init__(self, root: str | os.PathLike | None, *, memory: bool = False) -> None:
        self.root = None if root is None else Path(root)
        self.memory = memory or self.root is None
        self._memory: dict[str, dict[str, Any]] = {}
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        """The file of ``key`` (``ValueError`` for an in-memory cache)."""
        if self.root is None:
            raise ValueError("an in-memory cache has no paths")
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of ``key``, or ``None`` when there is none (or it cannot be read)."""
        rec = self._memory.get(key)
        if rec is not None or self.root is None:
            return rec
        p = self.path(key)
        if not p.exists():
            return None
        try:
            rec = json.loads(p.read_text())
        except json.JSONDecodeError:  # a torn write from a killed process: recompute
            return None
        if self.memory:
            self._memory[key] = rec
        return rec

    def put(self, record: dict[str, Any]) -> None:
        """Store ``record`` (a JSON-able dict with a ``key``) under its key, replacing any record there."""
        rec = jsonable(record)
        if self.memory:
            self._memory[record["key"]] = rec
        if self.root is None:
            return
        import tempfile  # only writes to disk need it (a command-line point in memory does not)

        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(rec, fh)
        os.replace(tmp, self.path(record["key"]))

    def get_or_compute(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The record of ``key``; if missing, ``compute()`` (a JSON-able dict) is stored under ``key`` and returned."""
        rec = self.get(key)
        if rec is None:
            self.put({**compute(), "key": key})
            rec = self.get(key)
        return rec


def export_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write ``records`` as JSON lines (strict JSON: non-finite numbers become null), atomically.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from singlehead.runs.cache import export_jsonl
    >>> path = Path(tempfile.mkdtemp()) / "runs.jsonl"
    >>> export_jsonl([{"key": "a", "x": float("nan")}], path)
    >>> json.loads(path.read_text())
    {'key': 'a', 'x': None}
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        for rec in records:
            fh.write(json.dumps(jsonable(rec), allow_nan=False) + "\n")
    os.replace(tmp, path)


def cache_for_export(path: str | os.PathLike | None) -> Cache:
    """The cache backing a JSON-lines export ``path`` (``<path>.cache``; in memory without a path).

    Records are cached one file each in ``<path>.cache/``, so rerunning the same export resumes.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from singlehead.runs.cache import cache_for_export
    >>> cache = cache_for_export(Path(tempfile.mkdtemp()) / "runs.jsonl")   # runs.jsonl.cache/
    >>> cache.root.name
    'runs.jsonl.cache'
    """
    return Cache(None if path is None else Path(str(path) + ".cache"))
