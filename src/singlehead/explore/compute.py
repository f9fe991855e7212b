"""The explorer's computation layer: every panel of a :class:`~.view.View`, streamed and cached.

:meth:`Engine.events` yields one JSON-ready event per computed piece, the error curve first:

* ``view`` (the validated view and its reproduction code), then ``point`` per alpha of the
  warm-started state evolution (:func:`singlehead.state_evolution.iter_theory_curve`, one
  sweep over the points not cached yet, solved and sent point by point: the first point is on
  screen after one solve, and a new view stops this one between points);
* ``thresholds`` (``alpha_interp``, ``alpha_perf``; lam -> 0+), ``spectrum`` and
  ``decomposition`` at ``alpha_at`` (:func:`singlehead.analysis.learned_spectrum`,
  :func:`singlehead.analysis.decompose`), ``scaling`` for power-law targets (excess error vs
  ``n = alpha d^2`` and its local exponent ``-d log E/d log n``,
  :func:`singlehead.analysis.scaling.local_exponents`), ``bayes`` per alpha
  (:func:`singlehead.bayes_optimal`), and ``done``.

With ``workers >= 1`` the sweeps and the Bayes-optimal points run in that many worker processes
(:mod:`.parallel`; the grid is cut into segments, one warm-started chain each); by default
everything runs in the server process.

Results are kept in the library's one result cache (:class:`singlehead.runs.cache.Cache`), under
the keys ``singlehead theory`` and ``singlehead bayes`` use (:func:`singlehead.runs.cache.result_key`,
which carries the numerics version), in memory and, unless ``SINGLEHEAD_CACHE_DIR=off``, in
``<cache dir>/explore`` (:func:`singlehead.runs.cache.library_cache_dir`: ``$SINGLEHEAD_CACHE_DIR``,
else ``$XDG_CACHE_HOME/singlehead`` or ``~/.cache/singlehead``).
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from ..analysis import decompose, learned_spectrum
from ..analysis.scaling import local_exponents
from ..bayes import bayes_optimal
from ..problem import Problem
from ..results import Result
from ..runs.cache import Cache, library_cache_dir, result_key
from ..state_evolution import SEOptions, iter_theory_curve, prior_model, theory
from ..state_evolution.options import result_settings
from ..thresholds import interpolation_threshold, perfect_recovery_threshold
from .parallel import WorkerPool
from .view import View

__all__ = ["Engine", "cache_root"]

_METRICS = ("test_error", "test_error_noisy", "train_error", "matrix_error", "rank_fraction", "penalty")
# the settings `singlehead bayes` puts in its cache keys (its defaults; theory's: result_settings)
_BAYES_SETTINGS = (("n_inner", 128), ("n_outer", 2048), ("node_seed", 0))
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
        spawned worker processes (:class:`~singlehead.explore.parallel.WorkerPool`).
    """

    def __init__(self, cache_dir: str | os.PathLike | None = None, *, memory_only: bool = False,
                 workers: int = 0) -> None:
        if not (isinstance(workers, int) and workers >= 0):
            raise ValueError(f"workers must be an integer >= 0 (got {workers!r})")
        root = None if memory_only else (Path(cache_dir) if cache_dir is not None else cache_root())
        try:  # the one result cache, with a copy in memory of every point read or written
            self._cache = Cache(root, memory=True)
        except OSError:  # read-only home: memory only
            self._cache = Cache(None)
        self._lock = threading.Lock()
        self._generation = 0
        self._gen_lock = threading.Lock()
        self._pool = None
        if workers:
            self._pool = WorkerPool(workers)

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
        try:
            self._cache.put(rec)  # in memory first, then on disk
        except OSError:  # the disk became read-only or full: keep what is in memory, write no more
            self._cache.root = None
        return rec

    def _cached(self, route: str, problem: Problem, settings: tuple, compute: Callable[[], dict[str, Any]]
                ) -> dict[str, Any]:
        key = result_key(route, problem, None, settings)
        rec = self._get(key)
        if rec is None:
            with self._lock:
                rec = self._put(key, compute())
        return rec

    # ------------------------------------------------------------------ pieces
    def theory_points(self, view: View, alive: Callable[[], bool]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, SE record)`` along the grid: cached ones at once, the rest warm-started (in this
        process, in grid order, one point at a time, or by the worker pool, segment by segment)."""
        problems = [view.problem.replace(alpha=a) for a in view.alphas]
        keys = [result_key("theory", p, None, result_settings(p, SEOptions())) for p in problems]
        if self._pool is None:
            yield from self._theory_points_here(view, problems, keys, alive)
            return
        recs = {i: self._get(k) for i, k in enumerate(keys)}
        for i, rec in recs.items():
            if rec is not None:
                yield i, rec
        todo = [i for i, rec in recs.items() if rec is None]
        first = {i: recs.get(i - 1) for i in todo}
        store = lambda i, rec: self._put(keys[i], rec)  # noqa: E731
        for i, rec in self._pool.sweep(view.problem, view.alphas, todo, first, alive, store):
            yield i, {**rec, "key": keys[i]}

    def _theory_points_here(self, view: View, problems: list[Problem], keys: list[str], alive: Callable[[], bool]
                            ) -> Iterator[tuple[int, dict[str, Any]]]:

        options = SEOptions()
        quad, prior, prev, i = None, "auto", None, 0
        while i < len(problems):
            if not alive():
                return
            rec = self._get(keys[i])
            if rec is not None:
                prev, i = rec, i + 1
                yield i - 1, rec
                continue
            j = i  # the run of points not cached yet: one warm-started sweep, solved point by point
            while j < len(problems) and self._get(keys[j]) is None:
                j += 1
            if quad is None and view.problem.student.symmetric:  # built once per view: nodes and the target's law
                with self._lock:
                    quad = options.quadrature(view.problem)
                    prior = prior_model(view.problem, "auto", draws=options.draws, seed=options.node_seed)
            init = Result.from_dict(prev) if prev is not None else None
            points = iter_theory_curve(problems[i], [p.alpha for p in problems[i:j]], options=options, quad=quad,
                                       prior=prior, init=init)
            for k in range(i, j):
                if not alive():  # a cancel waits for the point in flight only
                    return
                with self._lock:
                    rec = self._put(keys[k], next(points).to_dict())
                yield k, rec
            prev, i = rec, j

    def bayes_points(self, view: View, alive: Callable[[], bool]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, Bayes-optimal record)`` along the grid (worker pool: in parallel, as they finish)."""
        problems = [_bayes_problem(view.problem.replace(alpha=a)) for a in view.alphas]
        keys = [result_key("bayes", p, None, _BAYES_SETTINGS) for p in problems]
        todo = []
        for i, k in enumerate(keys):
            if not alive():
                return
            rec = self._get(k)
            if rec is not None:
                yield i, rec
            elif self._pool is None:
                yield i, self.bayes_at(view.problem.replace(alpha=view.alphas[i]))
            else:
                todo.append(i)
        if todo:
            for j, rec in self._pool.bayes([problems[i] for i in todo], alive):
                yield todo[j], self._put(keys[todo[j]], rec)

    def theory_at(self, problem: Problem) -> dict[str, Any]:
        """One cold SE point (the record ``singlehead theory`` caches for it)."""
        return self._cached("theory", problem, result_settings(problem, SEOptions()), lambda: theory(problem).to_dict())

    def bayes_at(self, problem: Problem) -> dict[str, Any]:
        """Bayes-optimal point; keyed on the problem without student fields (they do not enter)."""
        base = _bayes_problem(problem)
        return self._cached("bayes", base, _BAYES_SETTINGS, lambda: bayes_optimal(base).to_dict())

    def thresholds(self, problem: Problem) -> dict[str, Any]:
        """``alpha_interp`` and ``alpha_perf`` (``None`` where no closed form exists)."""
        def compute() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, f in (("alpha_interp", interpolation_threshold), ("alpha_perf", perfect_recovery_threshold)):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out[name] = _finite(f(problem))
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
            return {"grid": [float(x) for x in ls.law.grid], "density": [float(x) for x in ls.law.density],
                    "zero_atom": float(ls.zero_atom), "rank_fraction": float(ls.rank_fraction),
                    "bulks": [[float(a), float(b)] for a, b in ls.bulks],
                    "outliers": [{"position": float(o["position"]), "overlap": float(o["overlap"]),
                                  "mode": int(o["mode"])} for o in ls.outliers],
                    "eta": ls.eta, "delta": ls.delta, "eps": ls.eps}

        return self._cached("explore_spectrum", problem, (("grid_size", 256),), compute)

    def decomposition(self, problem: Problem, th: dict[str, Any]) -> dict[str, Any]:
        """The four-part test-error decomposition (factorized students only)."""
        def compute() -> dict[str, Any]:
            dc = decompose(problem, Result.from_dict(th))
            return {"parts": {k: float(v) for k, v in dc.parts().items()}, "c_r": float(dc.c_r),
                    "test_error": float(dc.test_error), "test_error_sum": float(dc.test_error_sum)}

        return self._cached("explore_decomposition", problem, (), compute)

    # ------------------------------------------------------------------ the stream
    def events(self, view: View, generation: int | None = None) -> Iterator[dict[str, Any]]:
        """Every panel of ``view`` as events (module docstring); stops when a newer view begins."""
        gen = self.begin() if generation is None else generation
        alive = lambda: self.current(gen)  # noqa: E731
        t0 = time.perf_counter()
        yield {"event": "view", **view.to_dict(), "code": {"python": view.python(), "cli": view.cli()}}
        points: dict[int, dict[str, Any]] = {}
        for i, rec in self.theory_points(view, alive):
            points[i] = _point(rec)
            yield {"event": "point", "i": i, **points[i]}
        ordered = [points[i] for i in sorted(points)]
        panels: list[tuple[str, Callable[[], Iterator[dict[str, Any]]]]] = [
            ("thresholds", lambda: iter([{"event": "thresholds", **_public(self.thresholds(view.problem))}])),
            ("spectrum", lambda: self._at_alpha(view, alive)),
            ("scaling", lambda: iter([{"event": "scaling", **_scaling(view, ordered)}] if view.power_law else [])),
            ("bayes", lambda: self._bayes_events(view, alive))]
        for name, produce in panels:
            if not alive():
                return
            try:  # a panel the library cannot compute here says why; the others still come
                yield from produce()
            except _PANEL_ERRORS as exc:
                yield {"event": "panel_error", "panel": name, "message": f"{type(exc).__name__}: {exc}"}
        if alive():
            yield {"event": "done", "elapsed_s": time.perf_counter() - t0}

    def _bayes_events(self, view: View, alive: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        for i, rec in self.bayes_points(view, alive):
            yield {"event": "bayes", "i": i, "alpha": view.alphas[i], "test_error": _finite(rec.get("test_error")),
                   "matrix_error": _finite(rec.get("matrix_error"))}

    def _at_alpha(self, view: View, alive: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        at = view.problem.replace(alpha=view.alpha_at)
        th = self.theory_at(at)
        if not alive():
            return
        yield {"event": "spectrum", "alpha": view.alpha_at, **_public(self.spectrum(at, th))}
        if at.student.thresholded and at.student.symmetric and alive():
            yield {"event": "decomposition", "alpha": view.alpha_at, **_public(self.decomposition(at, th))}


def _untied_spectrum(th: dict[str, Any]) -> dict[str, Any]:
    """The spectrum panel of an untied student: its singular-value law (histogram of the SE prior's
    instances, zero mass as the atom); no outlier theory for the untied student."""
    ex = Result.from_dict(th).extras
    edges = ex.get("sv_edges") or []
    if not edges:
        raise ValueError("this untied SE record has no singular-value law (complete collapse?)")
    mids = [0.5 * (a + b) for a, b in zip(edges[:-1], edges[1:])]
    return {"grid": mids, "density": ex["sv_density"], "zero_atom": float(ex["zero_fraction"]),
            "rank_fraction": 1.0 - float(ex["zero_fraction"]), "bulks": [[edges[0], edges[-1]]], "outliers": [],
            "eta": None, "delta": None, "eps": None, "law": "singular values (untied)"}


def _bayes_problem(problem: Problem) -> Problem:
    """The problem a Bayes-optimal point is keyed on: student fields at the CLI's defaults (they do not enter)."""
    return problem.replace(kappa=1.0, lam=0.0, beta=1.0, student="factorized")


def _scaling(view: View, points: list[dict[str, Any]]) -> dict[str, Any]:
    """Excess error vs ``n`` and its local exponent (library's centred differences in log n)."""
    d = view.problem.d
    df = pd.DataFrame({"n": [p["alpha"] * d * d for p in points], "excess_error": [p["test_error"] for p in points],
                       "lam": [view.problem.lam] * len(points),
                       "cutoff": [p["cutoff"] for p in points], "eps": [p["eps"] for p in points],
                       "delta": [p["delta"] for p in points]}, dtype=float)
    le = local_exponents(df)["local_exponent_n"]
    return {"n": df["n"].tolist(), "excess_error": [_finite(v) for v in df["excess_error"]],
            "local_exponent": [_finite(v) for v in le]}
