"""The explorer's computation layer: every panel of a :class:`~.view.View`, streamed and cached.

:meth:`Engine.events` yields one JSON-ready event per computed piece, the error curve first:

* ``view`` (the validated view and its reproduction code), then ``point`` per alpha of the
  warm-started state evolution (the theory jobs of the grid through the library's runner,
  :func:`singlehead.runs.stream`: the points not cached yet form warm-started chains, solved and
  sent point by point here, or cut into segments run in chunks of 1, 2, 3, then 4 points on the
  workers: the first point is on screen after one solve, and a new view stops this one between
  points, or between chunks);
* ``thresholds`` (``alpha_interp``, ``alpha_perf``; lam -> 0+), ``spectrum`` and
  ``decomposition`` at ``alpha_at`` (:func:`singlehead.analysis.learned_spectrum`,
  :func:`singlehead.analysis.decompose`), ``scaling`` for power-law targets (excess error vs
  ``n = alpha d^2`` and its local exponent ``-d log E/d log n``,
  :func:`singlehead.analysis.scaling.local_exponents`), ``bayes`` per alpha
  (:func:`singlehead.bayes_optimal`), and ``done``.

A view with several heads streams the theory of the multi-head problem (:func:`singlehead.theory`): on a softmax
channel the experimental multi-head state evolution, and a ``panel_error`` for each other panel (none is
computed); on the linear channel the exact theory, and the other panels are those of its
single-head equivalent (:func:`singlehead.state_evolution.effective_single_head`: ``S_eff = sqrt(c2) S'``)
in the problem's units: the thresholds as they are (the equivalence keeps alpha), the Bayes-optimal errors
and the decomposition times ``c2``, the spectrum that of ``S_eff``, the mean of the heads (eigenvalues
``sqrt(c2)`` times the equivalent's).

With ``workers >= 1`` the sweeps and the Bayes-optimal points run in that many worker processes
(:class:`singlehead.runs.Workers`, started with the engine and kept warm); by default
everything runs in the server process.

Results are kept in the library's one result cache (:class:`singlehead.runs.cache.Cache`), as the
records and under the keys ``singlehead theory`` and ``singlehead bayes`` use
(:func:`singlehead.runs.cache.result_key`, which carries the numerics version), in memory and,
unless ``SINGLEHEAD_CACHE_DIR=off``, in
``<cache dir>/explore`` (:func:`singlehead.runs.cache.library_cache_dir`: ``$SINGLEHEAD_CACHE_DIR``,
else ``$XDG_CACHE_HOME/singlehead`` or ``~/.cache/singlehead``).
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from singlehead.analysis import decompose, learned_spectrum
from singlehead.analysis.scaling import local_exponents
from singlehead.explore.view import View, experimental_heads, heads_note, slow_point_note
from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.runs import Job, Workers, stream
from singlehead.runs.cache import Cache, library_cache_dir, result_key
from singlehead.state_evolution import SEOptions
from singlehead.state_evolution.api import result_settings
from singlehead.state_evolution.multihead import effective_single_head
from singlehead.thresholds import interpolation_threshold, perfect_recovery_threshold

__all__ = ["Engine", "cache_root"]

_METRICS = ("test_error", "test_error_noisy", "train_error", "matrix_error", "rank_fraction", "penalty")
# the settings `singlehead bayes` puts in its cache keys (its defaults; theory's: result_settings)
_BAYES_SETTINGS = (("n_inner", 128), ("n_outer", 2048), ("node_seed", 0))
# sizes of the successive chunks of a chain segment on the workers: the first point after one solve, then
# chunks long enough to keep the warm starts, short enough that a new view stops the old one soon
_CHUNKS = (1, 2, 3, 4)
# what the library raises for a problem outside a method's reach (not a bug of the explorer)
_PANEL_ERRORS = (ValueError, ArithmeticError, NotImplementedError, RuntimeError)


def cache_root() -> Path | None:
    """``<cache dir>/explore``, or ``None`` when ``SINGLEHEAD_CACHE_DIR`` is ``off`` (or empty, 0, none)."""
    return library_cache_dir("explore")


def _finite(x: Any) -> float | None:
    """``x`` as a float, ``None`` (JSON null) when not finite."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _public(rec: dict[str, Any]) -> dict[str, Any]:
    """A cached record without its cache key."""
    return {k: v for k, v in rec.items() if k != "key"}


def _point(rec: dict[str, Any]) -> dict[str, Any]:
    out = {"alpha": rec["problem"]["alpha"], "converged": bool(rec.get("converged", False))}
    out.update({k: _finite(rec.get(k)) for k in _METRICS})
    for k in ("delta", "eps", "cutoff", "eta"):
        out[k] = _finite(rec.get(k))
    return out


class Engine:
    """Computes and caches the explorer's panels; one computation at a time.

    Parameters
    ----------
    cache_dir : path, optional
        Directory of the on-disk cache (default :func:`cache_root`); ``None`` with
        ``memory_only=True`` keeps results in memory only.
    memory_only : bool
        Do not touch the disk.
    workers : int
        ``0``: compute in this process; ``>= 1``: SE sweeps and Bayes points in that many
        worker processes (:class:`singlehead.runs.Workers`, started here and kept warm).
    """

    def __init__(
        self, cache_dir: str | os.PathLike | None = None, *, memory_only: bool = False, workers: int = 0
    ) -> None:
        if not (isinstance(workers, int) and workers >= 0):
            raise ValueError(f"workers must be an integer >= 0 (got {workers!r})")
        root = None if memory_only else (Path(cache_dir) if cache_dir is not None else cache_root())
        try:  # the one result cache, with a copy in memory of every point read or written
            self._cache: Cache = _KeepingCache(root, memory=True)
        except OSError:  # read-only home: memory only
            self._cache = _KeepingCache(None)
        self._lock = threading.Lock()
        self._generation = 0
        self._gen_lock = threading.Lock()
        self._pool: Workers | None = None
        if workers:
            self._pool = Workers(workers)
            for _ in range(workers):  # the imports and the node set of the default view, before a request
                self._pool.submit(_warm_up)

    def close(self) -> None:
        """Stop the worker processes (if any)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # ------------------------------------------------------------------ generations
    def begin(self) -> int:
        """Start a new view: every earlier :meth:`events` stream stops at its next check."""
        with self._gen_lock:
            self._generation += 1
            return self._generation

    def current(self, generation: int) -> bool:
        return generation == self._generation

    # ------------------------------------------------------------------ cache
    def _get(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key)

    def _put(self, key: str, rec: dict[str, Any]) -> dict[str, Any]:
        rec = {**rec, "key": key}
        self._cache.put(rec)
        return rec

    def _cached(
        self, route: str, problem: Problem, settings: tuple, compute: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        key = result_key(route, problem, None, settings)
        rec = self._get(key)
        if rec is None:
            with self._lock:
                rec = self._put(key, compute())
        return rec

    # ------------------------------------------------------------------ pieces
    def _stream(
        self, jobs: list[Job], alive: Callable[[], bool], *, here: bool = False
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index in jobs, record)`` through the runner: cached ones at once, the rest as they finish (on the
        workers, unless there are none or ``here``)."""
        index: dict[str, list[int]] = {}
        for i, j in enumerate(jobs):
            index.setdefault(j.key, []).append(i)
        pool = None if here else self._pool
        records = stream(jobs, self._cache, workers=pool or 1, alive=alive, chunks=_CHUNKS, min_piece=1)
        while True:
            if pool is None:  # in this process: one computation at a time (the views' threads share the solver)
                with self._lock:
                    rec = next(records, None)
            else:
                rec = next(records, None)
            if rec is None:
                return
            if "error" in rec:  # a point outside the method's reach: the panel says why
                raise ValueError(rec["error"])
            for i in index.pop(rec["key"], []):
                yield i, rec

    def theory_points(self, view: View, alive: Callable[[], bool]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, SE record)`` along the grid: cached ones at once, the rest one warm-started chain (in this
        process, in grid order, one point at a time, or on the workers, segment by segment)."""
        yield from self._stream(_theory_jobs([view.problem.replace(alpha=a) for a in view.alphas]), alive)

    def bayes_points(self, view: View, alive: Callable[[], bool]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, Bayes-optimal record)`` along the grid (on the workers: in parallel, as they finish); with
        several heads the records of the single-head equivalent (module docstring: multiply by ``c2``)."""
        jobs = [_bayes_job(_effective(view.problem.replace(alpha=a))[0]) for a in view.alphas]
        yield from self._stream(jobs, alive)

    def theory_at(self, problem: Problem) -> dict[str, Any]:
        """One cold SE point (the record ``singlehead theory`` caches for it)."""
        return self._one(_theory_jobs([problem])[0])

    def bayes_at(self, problem: Problem) -> dict[str, Any]:
        """Bayes-optimal point; keyed on the problem without student fields (they do not enter)."""
        return self._one(_bayes_job(problem))

    def _one(self, job: Job) -> dict[str, Any]:
        for _, rec in self._stream([job], lambda: True, here=True):
            return rec
        raise AssertionError("the runner returned no record")

    def thresholds(self, problem: Problem) -> dict[str, Any]:
        """``alpha_interp`` and ``alpha_perf`` (``None`` where no closed form exists; several heads: those of the
        single-head equivalent)."""

        def compute() -> dict[str, Any]:
            out: dict[str, Any] = {}
            eff = _effective(problem)[0]
            for name, f in (("alpha_interp", interpolation_threshold), ("alpha_perf", perfect_recovery_threshold)):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out[name] = _finite(f(eff))
                except (NotImplementedError, ValueError):
                    out[name] = None
            return out

        return self._cached("thresholds", problem.replace(alpha=1.0, lam=0.0), (), compute)

    def spectrum(self, problem: Problem, th: dict[str, Any]) -> dict[str, Any]:
        """Learned-spectrum law at ``problem`` from its SE record."""

        def compute() -> dict[str, Any]:
            if not problem.student.symmetric:
                return _untied_spectrum(th)
            ls = learned_spectrum(problem, Result.from_dict(th), grid_size=256)
            return {
                "grid": [float(x) for x in ls.law.grid],
                "density": [float(x) for x in ls.law.density],
                "zero_atom": float(ls.zero_atom),
                "rank_fraction": float(ls.rank_fraction),
                "bulks": [[float(a), float(b)] for a, b in ls.bulks],
                "outliers": [
                    {"position": float(o["position"]), "overlap": float(o["overlap"]), "mode": int(o["mode"])}
                    for o in ls.outliers
                ],
                "eta": ls.eta,
                "delta": ls.delta,
                "eps": ls.eps,
            }

        return self._cached("explore_spectrum", problem, (("grid_size", 256),), compute)

    def decomposition(self, problem: Problem, th: dict[str, Any]) -> dict[str, Any]:
        """The four-part test-error decomposition (factorized students only)."""

        def compute() -> dict[str, Any]:
            dc = decompose(problem, Result.from_dict(th))
            return {
                "parts": {k: float(v) for k, v in dc.parts().items()},
                "c_r": float(dc.c_r),
                "test_error": float(dc.test_error),
                "test_error_sum": float(dc.test_error_sum),
            }

        return self._cached("explore_decomposition", problem, (), compute)

    # ------------------------------------------------------------------ the stream
    def events(self, view: View, generation: int | None = None) -> Iterator[dict[str, Any]]:
        """Every panel of ``view`` as events (module docstring); stops when a newer view begins."""
        gen = self.begin() if generation is None else generation
        alive = lambda: self.current(gen)  # noqa: E731
        t0 = time.perf_counter()
        yield {
            "event": "view",
            **view.to_dict(),
            "code": {"python": view.python(), "cli": view.cli()},
            "slow": slow_point_note(view.problem),
            "heads": heads_note(view.problem),
        }
        points: dict[int, dict[str, Any]] = {}
        for i, rec in self.theory_points(view, alive):
            points[i] = _point(rec)
            yield {"event": "point", "i": i, **points[i]}
        ordered = [points[i] for i in sorted(points)]
        panels: list[tuple[str, Callable[[], Iterator[dict[str, Any]]]]] = [
            ("thresholds", lambda: iter([{"event": "thresholds", **_public(self.thresholds(view.problem))}])),
            ("spectrum", lambda: self._at_alpha(view, alive)),
            ("scaling", lambda: iter([{"event": "scaling", **_scaling(view, ordered)}] if view.power_law else [])),
            ("bayes", lambda: self._bayes_events(view, alive)),
        ]
        if experimental_heads(view.problem):  # the experimental state evolution gives the error curve only
            msg = (
                f"several heads on the {view.problem.channel.name!r} channel: the experimental multi-head state "
                "evolution gives the error curve only (this panel covers one head, or several on the linear channel)"
            )
            panels = []
            for name in ("thresholds", "spectrum", "bayes", "decomposition"):
                yield {"event": "panel_error", "panel": name, "message": msg}
        for name, produce in panels:
            if not alive():
                return
            try:  # a panel the library cannot compute here says why; the others still come
                yield from produce()
            except _PANEL_ERRORS as exc:
                kind = f"{type(exc).__name__}: "
                # an error re-raised from a worker's record already names its kind
                yield {
                    "event": "panel_error",
                    "panel": name,
                    "message": str(exc) if str(exc).startswith(kind) else kind + str(exc),
                }
        if alive():
            yield {"event": "done", "elapsed_s": time.perf_counter() - t0}

    def _bayes_events(self, view: View, alive: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        c2 = _effective(view.problem)[1]
        for i, rec in self.bayes_points(view, alive):
            yield {
                "event": "bayes",
                "i": i,
                "alpha": view.alphas[i],
                "test_error": _scaled(rec.get("test_error"), c2),
                "matrix_error": _scaled(rec.get("matrix_error"), c2),
            }

    def _at_alpha(self, view: View, alive: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        at, c2 = _effective(view.problem.replace(alpha=view.alpha_at))
        th = self.theory_at(at)
        if not alive():
            return
        spectrum = _public(self.spectrum(at, th))
        if view.problem.multihead:
            spectrum = _spectrum_of_mean(spectrum, math.sqrt(c2), view.problem)
        yield {"event": "spectrum", "alpha": view.alpha_at, **spectrum}
        if not (at.student.thresholded and at.student.symmetric):
            yield {
                "event": "panel_error",
                "panel": "decomposition",
                "message": f"the four-part decomposition covers the factorized (tied) student, not {at.student.name!r}",
            }
        elif alive():
            dc = _public(self.decomposition(at, th))
            if view.problem.multihead:
                dc = {
                    **dc,
                    "parts": {k: c2 * v for k, v in dc["parts"].items()},
                    "test_error": c2 * dc["test_error"],
                    "test_error_sum": c2 * dc["test_error_sum"],
                }
            yield {"event": "decomposition", "alpha": view.alpha_at, **dc}


class _KeepingCache(Cache):
    """The explorer's cache: when the disk becomes read-only or full it keeps what is in memory and writes no
    more (a server must not fail over its cache)."""

    def put(self, record: dict[str, Any]) -> None:
        try:
            super().put(record)  # in memory first, then on disk
        except OSError:
            self.root = None


def _untied_spectrum(th: dict[str, Any]) -> dict[str, Any]:
    """The spectrum panel of an untied student: its singular-value law (histogram of the SE prior's
    instances, zero mass as the atom); no outlier theory for the untied student."""
    ex = Result.from_dict(th).extras
    edges = ex.get("sv_edges") or []
    if not edges:
        raise ValueError("this untied SE record has no singular-value law (complete collapse?)")
    mids = [0.5 * (a + b) for a, b in zip(edges[:-1], edges[1:])]
    return {
        "grid": mids,
        "density": ex["sv_density"],
        "zero_atom": float(ex["zero_fraction"]),
        "rank_fraction": 1.0 - float(ex["zero_fraction"]),
        "bulks": [[edges[0], edges[-1]]],
        "outliers": [],
        "eta": None,
        "delta": None,
        "eps": None,
        "law": "singular values (untied)",
    }


def _effective(problem: Problem) -> tuple[Problem, float]:
    """``problem``'s single-head equivalent and ``c2`` (``problem`` and 1 for one head)."""
    return effective_single_head(problem) if problem.multihead else (problem, 1.0)


def _scaled(x: Any, c2: float) -> float | None:
    v = _finite(x)
    return None if v is None else c2 * v


def _spectrum_of_mean(s: dict[str, Any], c: float, problem: Problem) -> dict[str, Any]:
    """The spectrum panel of the equivalent's ``S'`` as that of ``S_eff = c S'``: eigenvalues times ``c``,
    density divided by ``c`` (masses, the rank and the outliers' overlaps unchanged)."""
    out = dict(s)
    out["grid"] = [c * x for x in s["grid"]]
    out["density"] = [x / c for x in s["density"]]
    out["bulks"] = [[c * a, c * b] for a, b in s["bulks"]]
    out["outliers"] = [{**o, "position": c * o["position"]} for o in s["outliers"]]
    for k in ("delta", "eps"):
        out[k] = None if s.get(k) is None else c * s[k]
    out["of"] = f"S_eff = mean of the {problem.heads} heads"
    return out


def _bayes_job(problem: Problem) -> Job:
    """The Bayes-optimal job of ``problem``, as ``singlehead bayes`` runs it: student fields at the CLI's
    defaults (they do not enter), the CLI's settings."""
    return Job("bayes", problem.replace(kappa=1.0, lam=0.0, beta=1.0, student="factorized"), None, _BAYES_SETTINGS)


def _theory_jobs(problems: list[Problem]) -> list[Job]:
    """The theory jobs of ``problems`` at the default settings, as ``singlehead theory`` runs them."""
    return [Job("theory", p, None, result_settings(p, SEOptions())) for p in problems]


def _warm_up() -> None:
    """The imports, the node set and the prior model of the default view (run once on each worker)."""
    from singlehead.runs.routes import solver_inputs

    p = Problem()
    settings = dict(result_settings(p, SEOptions()))
    solver_inputs(p, "alpha", settings.pop("prior"), settings)


def _scaling(view: View, points: list[dict[str, Any]]) -> dict[str, Any]:
    """Excess error vs ``n`` and its local exponent (library's centred differences in log n)."""
    d = view.problem.d
    df = pd.DataFrame(
        {
            "n": [p["alpha"] * d * d for p in points],
            "excess_error": [p["test_error"] for p in points],
            "lam": [view.problem.lam] * len(points),
            "cutoff": [p["cutoff"] for p in points],
            "eps": [p["eps"] for p in points],
            "delta": [p["delta"] for p in points],
        },
        dtype=float,
    )
    le = local_exponents(df)["local_exponent_n"]
    return {
        "n": df["n"].tolist(),
        "excess_error": [_finite(v) for v in df["excess_error"]],
        "local_exponent": [_finite(v) for v in le],
    }
