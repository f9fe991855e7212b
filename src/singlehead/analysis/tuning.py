"""The weight decay that the theory predicts best: :func:`~singlehead.tune`, :func:`~singlehead.tune_curve`,
:func:`~singlehead.alpha_for_error`.

Beside them, two tools to compare the tuned ``lam`` with a measured one:
:func:`validation_pick` (the ``lam`` a validation curve picks) and :func:`valley_halfwidth` (how far
from the optimum ``lam`` may move before the predicted error rises by a given fraction).

The objective is the state-evolution test error ``theory(problem.replace(lam=lam)).test_error`` (the
noiseless test error of :class:`~singlehead.Result`) as a function of the penalty strength ``lam`` at the
problem's ``alpha``. Every point of one search shares one output node set and one prior model, so the
objective is a deterministic, smooth function of ``lam`` (common random numbers): differences between
two ``lam`` are resolved far below the quadrature error of each value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution import SEOptions, prior_model, theory, theory_curve
from singlehead.state_evolution.models import model_for

__all__ = ["TuneResult", "tune", "tune_curve", "alpha_for_error", "validation_pick", "valley_halfwidth"]

#: default search range of ``lam`` and of ``alpha`` (:func:`~singlehead.alpha_for_error`)
DEFAULT_LAM_RANGE = (1e-5, 10.0)
DEFAULT_ALPHA_RANGE = (0.01, 100.0)


@dataclass(frozen=True)
class TuneResult:
    """The optimally regularised point of one problem: the ``lam`` of lowest predicted test error and that error.

    Returned by :func:`~singlehead.tune`, :func:`~singlehead.tune_curve` (one per ``alpha``) and
    :func:`~singlehead.alpha_for_error`.

    Attributes
    ----------
    alpha : float
        The problem's sample ratio ``n/d^2``.
    lam : float
        The ``lam`` of lowest predicted test error found. On a boundary (see ``boundary``) it is the
        end of the search range (``"lower"``), or for a collapse (``"upper"``) the smallest ``lam`` of
        the range at which the fixed point is the collapsed one ``S = 0`` when known, else the upper end.
    test_error : float
        The state-evolution test error at ``lam`` (``nan`` when no evaluated point converged).
    converged : bool
        The theory converged at ``lam`` and the search met its tolerance (a boundary minimum is
        converged when its end point is).
    boundary : {None, "lower", "upper"}
        ``None``: an interior minimum. ``"lower"``: the error is lowest at the lower end of the range
        (within the comparison tolerance): the optimum is the limit ``lam -> 0+`` or lies below the
        range. ``"upper"``: lowest at the upper end or on the collapsed branch ``S = 0`` (every
        ``lam`` beyond the collapse is equally good: predicting with zero logits is optimal), or the
        optimum lies above the range.
    evaluations : tuple of (float, float)
        Every ``(lam, test_error)`` evaluated, grid first then the refinement, in evaluation order;
        unconverged points have ``nan`` error.
    skipped : tuple of float
        The ``lam`` at which the theory did not converge (never chosen).
    lam_tol : float
        Tolerance of the refinement in ``log10 lam``.
    message : str
        The boundary or the failure, in words ("" for an interior converged minimum).
    result : Result or None
        The theory's :class:`~singlehead.Result` at ``lam``.

    Examples
    --------
    >>> from singlehead.analysis import TuneResult
    >>> res = TuneResult(alpha=1.0, lam=0.036, test_error=0.0285, converged=True, boundary=None,
    ...                  evaluations=((0.01, 0.0301), (0.036, 0.0285)))
    >>> sorted(res.to_dict())[:4]
    ['alpha', 'boundary', 'converged', 'evaluations']
    """

    alpha: float
    lam: float
    test_error: float
    converged: bool
    boundary: str | None
    evaluations: tuple[tuple[float, float], ...]
    skipped: tuple[float, ...] = ()
    lam_tol: float = 1e-3
    message: str = ""
    result: Result | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly fields (``result`` left out; its problem is under ``problem``)."""
        out: dict[str, Any] = {
            "alpha": self.alpha,
            "lam": self.lam,
            "test_error": self.test_error,
            "converged": self.converged,
            "boundary": self.boundary,
            "message": self.message,
            "lam_tol": self.lam_tol,
            "skipped": list(self.skipped),
            "evaluations": [list(e) for e in self.evaluations],
        }
        if self.result is not None:
            out["problem"] = self.result.problem
        return out


def _check_range(rng: Sequence[float], name: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in rng)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers with 0 < low < high (got {rng!r})") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"{name} must be a pair (low, high) with 0 < low < high, both finite (got {rng!r})")
    return lo, hi


def _check_positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return v


class _Objective:
    """``log10 lam -> test error`` with one node set and prior model, warm-started from the nearest solved point."""

    def __init__(self, problem: Problem, options: SEOptions, prior: Any) -> None:
        self.problem, self.options = problem, options
        self.quad = None
        self.prior = prior
        if problem.student.symmetric:
            self.quad = options.quadrature(problem)
            if isinstance(prior, str):
                self.prior = prior_model(problem, prior, draws=options.draws, seed=options.node_seed)
        self.points: list[tuple[float, Result]] = []  # (lam, result), evaluation order

    def record(self, lam: float, r: Result) -> float:
        self.points.append((lam, r))
        return self.error(r)

    @staticmethod
    def error(r: Result) -> float:
        return float(r.test_error) if r.converged and math.isfinite(r.test_error) else math.nan

    def grid(self, lams: np.ndarray) -> list[float]:
        curve = theory_curve(
            self.problem, [float(v) for v in lams], param="lam", options=self.options, prior=self.prior, quad=self.quad
        )
        return [self.record(float(v), r) for v, r in zip(lams, curve)]

    def __call__(self, log_lam: float) -> float:
        lam = float(10.0**log_lam)
        good = [(abs(math.log10(v) - log_lam), r) for v, r in self.points if r.converged]
        init = min(good, key=lambda t: t[0])[1] if good else None
        r = theory(self.problem.replace(lam=lam), options=self.options, prior=self.prior, init=init, quad=self.quad)
        e = self.record(lam, r)
        return e if math.isfinite(e) else math.inf  # an unconverged point is never the minimum


def tune(
    problem: Problem,
    *,
    lam_range: Sequence[float] = DEFAULT_LAM_RANGE,
    options: SEOptions | None = None,
    prior: str | Any = "auto",
    points_per_decade: int = 4,
    lam_tol: float = 1e-3,
) -> TuneResult:
    """The ``lam`` that minimises the state-evolution test error at ``problem.alpha``, and that error.

    The objective is ``theory(problem.replace(lam=lam)).test_error`` (``problem.lam`` is ignored).
    Method: the theory on a log-spaced grid of ``lam_range`` (``points_per_decade`` per decade, ends
    included, warm-started along the grid by :func:`~singlehead.theory_curve`), then a bounded Brent
    search (golden section with parabolic steps) in ``log10 lam`` between the converged neighbours of
    the best grid point, to an absolute tolerance ``lam_tol`` in ``log10 lam`` (default ``1e-3``: ``lam``
    to a relative ``0.23 %``). The grid locates the lowest valley at its resolution; a second valley
    narrower than a grid step can be missed. Unconverged theory points are never chosen: they are
    skipped (listed in ``skipped``, and ``converged`` is ``False`` when one lies in the refined bracket
    or no grid point converged).

    A minimum on an end of the grid is reported as a boundary (``TuneResult.boundary``): ``"lower"``
    when the error at the lowest ``lam`` is within the comparison tolerance of the minimum (the best
    regularisation is ``lam -> 0+``, e.g. noiseless data above perfect recovery), ``"upper"`` when the
    lowest error is at the top of the range or on the collapsed branch ``S = 0`` (then ``lam`` is the
    first collapsed grid point: any larger ``lam`` gives the same error). Errors are compared with
    the tolerance ``10 options.tol max(error, 1e-3)``.

    Parameters
    ----------
    problem : Problem
        Any problem :func:`~singlehead.theory` solves; its ``lam`` is not used.
    lam_range : (float, float)
        ``0 < low < high``, the search range of ``lam``.
    options : SEOptions, optional
        Solver settings of every theory point (default ``SEOptions()``).
    prior : str or PriorModel
        As in :func:`~singlehead.theory`.
    points_per_decade : int
        Density of the initial grid (>= 1).
    lam_tol : float
        Tolerance in ``log10 lam`` of the refinement (> 0).

    Returns
    -------
    TuneResult

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, tune
    >>> best = tune(Problem(T=2, alpha=1.0, noise=0.5, target=MPTarget(kappa0=0.5)))
    >>> best.boundary is None and best.converged
    True
    >>> round(best.lam, 3), round(best.test_error, 4)
    (0.036, 0.0285)
    """
    lo, hi = _check_range(lam_range, "lam_range")
    lam_tol = _check_positive(lam_tol, "lam_tol")
    if (
        isinstance(points_per_decade, bool)
        or not isinstance(points_per_decade, (int, np.integer))
        or points_per_decade < 1
    ):
        raise ValueError(f"points_per_decade must be an integer >= 1 (got {points_per_decade!r})")
    o = model_for(problem).prepare(options)  # resolved: the tolerance below is the model's
    obj = _Objective(problem, o, prior)
    a, b = math.log10(lo), math.log10(hi)
    n = max(3, int(math.ceil((b - a) * points_per_decade)) + 1)
    logs = np.linspace(a, b, n)
    errs = np.array(obj.grid(10.0**logs))
    grid_results = [r for _, r in obj.points]
    ok = np.flatnonzero(np.isfinite(errs))
    alpha = float(problem.alpha)

    def done(lam: float, err: float, r: Result | None, converged: bool, boundary: str | None, msg: str) -> TuneResult:
        evals = tuple((v, obj.error(rr)) for v, rr in obj.points)
        skipped = tuple(v for v, rr in obj.points if not rr.converged)
        if skipped:
            msg = (msg + " " if msg else "") + f"{len(skipped)} unconverged theory point(s) skipped."
        return TuneResult(alpha, float(lam), float(err), bool(converged), boundary, evals, skipped, lam_tol, msg, r)

    if ok.size == 0:
        return done(math.nan, math.nan, None, False, None, "no theory point of the grid converged.")
    best = int(ok[np.argmin(errs[ok])])
    emin = float(errs[best])
    etol = 10.0 * o.tol * max(abs(emin), 1e-3)

    def collapsed(i: int) -> bool:
        return bool(grid_results[i].extras.get("collapsed", False))

    is_col = collapsed(best)  # the collapsed branch S = 0: a plateau, the first collapsed grid point is the best
    if best == n - 1 and not is_col:
        return done(
            hi,
            emin,
            grid_results[best],
            True,
            "upper",
            f"boundary: the error is lowest at the top of lam_range ({hi:g}): the optimum lies at or above it.",
        )
    if best == 0:
        if is_col:
            return _collapse(done, lo, emin, grid_results[0])
        return done(
            lo,
            emin,
            grid_results[0],
            True,
            "lower",
            f"boundary: the error is lowest at the bottom of lam_range ({lo:g}): the best regularisation is "
            "lam -> 0+ or lies below the range.",
        )
    # the bracket: the converged grid neighbours of the best point (a collapsed one: up to it, where the non-collapsed
    # branch may dip below the plateau)
    left = int(ok[ok < best][-1])
    right = best if is_col else (int(ok[ok > best][0]) if np.any(ok > best) else n - 1)
    from scipy.optimize import minimize_scalar  # SciPy's optimize is imported only when a search runs

    n_before = len(obj.points)
    sol = minimize_scalar(
        obj, bounds=(float(logs[left]), float(logs[right])), method="bounded", options={"xatol": lam_tol}
    )
    # the refined minimum: the lowest converged point in the bracket (grid points included)
    cands = [
        (e, v, r)
        for v, r in obj.points
        if logs[left] - 1e-12 <= math.log10(v) <= logs[right] + 1e-12 and math.isfinite(e := obj.error(r))
    ]
    e_star, lam_star, r_star = min(cands, key=lambda t: t[0])
    if is_col and (e_star >= emin - etol or r_star.extras.get("collapsed", False)):
        return _collapse(done, float(10.0 ** logs[best]), emin, grid_results[best])
    bracket_skipped = any(not r.converged for v, r in obj.points[n_before:]) or right - left > 2
    converged = bool(sol.success) and not bracket_skipped
    msg = (
        ""
        if converged
        else (
            "the bracket holds unconverged theory points; the minimum is that of the converged ones."
            if bracket_skipped
            else f"the refinement stopped early: {sol.message}"
        )
    )
    # a lower-end minimum found by the refinement: the first grid cell and no lower than the end point
    if left == 0 and errs[0] <= e_star + etol and np.isfinite(errs[0]):
        return done(
            lo,
            float(errs[0]),
            grid_results[0],
            True,
            "lower",
            f"boundary: the error at the bottom of lam_range ({lo:g}) is within {etol:.1e} of the minimum: "
            "the best regularisation is lam -> 0+ or lies below the range.",
        )
    return done(lam_star, e_star, r_star, converged, None, msg)


def _collapse(done: Any, lam: float, err: float, r: Result) -> TuneResult:
    lam_c = r.extras.get("collapse_lam", math.nan)
    at = f" (S = 0 is a fixed point from lam = {lam_c:.4g} on)" if math.isfinite(lam_c) else ""
    return done(
        lam,
        err,
        r,
        r.converged,
        "upper",
        "boundary: the collapsed fixed point S = 0 (zero logits) has the lowest error: every lam from the "
        f"collapse on is equally good, lam -> +inf included{at}.",
    )


def tune_curve(problem: Problem, alphas: Iterable[float], *, progress: bool = False, **kwargs: Any) -> list[TuneResult]:
    """The optimally regularised curve: :func:`~singlehead.tune` at each ``alpha`` (``lam*(alpha)``, ``error*(alpha)``).

    ``kwargs`` are those of :func:`~singlehead.tune`; ``progress`` shows a tqdm bar on stderr.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, tune_curve
    >>> curve = tune_curve(Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5)), [0.5, 1.0])
    >>> curve[0].test_error > curve[1].test_error          # more data, lower optimal error
    True
    """
    alphas = [_check_positive(a, "alpha") for a in alphas]
    it: Iterable[float] = alphas
    if progress:
        from tqdm import tqdm

        it = tqdm(alphas, desc="tune over alpha")
    return [tune(problem.replace(alpha=a), **kwargs) for a in it]


def alpha_for_error(
    problem: Problem,
    target_error: float,
    *,
    alpha_range: Sequence[float] = DEFAULT_ALPHA_RANGE,
    alpha_tol: float = 1e-3,
    **kwargs: Any,
) -> TuneResult:
    """The tuned point at the smallest ``alpha`` whose optimally regularised test error is at most ``target_error``.

    Bisection in ``log10 alpha`` on ``alpha -> tune(problem.replace(alpha=alpha)).test_error``, assumed
    non-increasing in ``alpha`` (more data at the best ``lam`` does not hurt), to an absolute tolerance
    ``alpha_tol`` in ``log10 alpha``; the returned point is the upper end of the final bracket, so its
    error is at most ``target_error``. Its ``alpha`` is the answer, its ``lam`` the weight decay to use.

    Parameters
    ----------
    problem : Problem
        Its ``alpha`` and ``lam`` are not used.
    target_error : float
        The test error to reach (> 0).
    alpha_range : (float, float)
        ``0 < low < high``, where ``alpha`` is searched.
    alpha_tol : float
        Tolerance in ``log10 alpha`` (> 0).
    **kwargs
        Passed to :func:`~singlehead.tune` (``lam_range``, ``options``, ``prior``, ...).

    Raises
    ------
    ValueError
        When ``target_error`` is not reached in ``alpha_range`` (the message gives the reachable range
        of errors), is already reached at its lower end, or a tuned end point does not converge.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, alpha_for_error
    >>> point = alpha_for_error(Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5)), 0.04, alpha_range=(0.5, 1.0),
    ...                         alpha_tol=0.01, lam_range=(1e-3, 1.0), points_per_decade=2)
    >>> point.test_error <= 0.04 and 0.5 < point.alpha < 1.0
    True
    """
    target = _check_positive(target_error, "target_error")
    a_lo, a_hi = _check_range(alpha_range, "alpha_range")
    alpha_tol = _check_positive(alpha_tol, "alpha_tol")

    def at(log_a: float) -> TuneResult:
        return tune(problem.replace(alpha=float(10.0**log_a)), **kwargs)

    x0, x1 = math.log10(a_lo), math.log10(a_hi)
    top = at(x1)
    if not math.isfinite(top.test_error):
        raise ValueError(f"alpha_for_error: the tuned theory did not converge at alpha_range's upper end {a_hi:g}")
    bottom = at(x0)
    if not math.isfinite(bottom.test_error):
        raise ValueError(f"alpha_for_error: the tuned theory did not converge at alpha_range's lower end {a_lo:g}")
    reach = (
        f"the tuned test error over alpha_range ({a_lo:g}, {a_hi:g}) goes from {bottom.test_error:.6g} "
        f"to {top.test_error:.6g}"
    )
    if top.test_error > target:
        raise ValueError(
            f"target_error={target:g} is not reached: {reach}; raise alpha_range's upper end or the target_error"
        )
    if bottom.test_error <= target:
        raise ValueError(
            f"target_error={target:g} is already reached at alpha_range's lower end: {reach}; lower "
            "alpha_range's lower end"
        )
    best = top
    while x1 - x0 > alpha_tol:
        xm = 0.5 * (x0 + x1)
        mid = at(xm)
        if math.isfinite(mid.test_error) and mid.test_error <= target:
            x1, best = xm, mid
        else:  # above the target, or unconverged (treated as not reached)
            x0 = xm
    return best


def _lam_curve(lams: Sequence[float], errors: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(log10 lam, error)`` sorted by ``lam``, the points with a non-finite error left out."""
    try:
        lam = np.asarray(lams, dtype=float).ravel()
        err = np.asarray(errors, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"{what}: lams and errors must be sequences of numbers (got {lams!r}, {errors!r})") from None
    if lam.size != err.size:
        raise ValueError(f"{what}: errors must have one entry per lam ({lam.size}) (got {err.size})")
    if not (lam.size and np.all(np.isfinite(lam)) and np.all(lam > 0)):
        raise ValueError(f"{what}: lams must be finite numbers > 0, at least one (got {lams!r})")
    if np.unique(lam).size != lam.size:
        raise ValueError(f"{what}: lams must be distinct (got {lams!r})")
    ok = np.isfinite(err)
    if not ok.any():
        raise ValueError(f"{what}: errors must hold at least one finite value (got {errors!r})")
    order = np.argsort(lam[ok])
    return np.log10(lam[ok][order]), err[ok][order]


def validation_pick(lams: Sequence[float], errors: Sequence[float]) -> float:
    """The ``lam`` a validation curve picks: its grid minimum, refined by a parabola in ``log10 lam``.

    ``errors[i]`` is the validation error of the model trained at ``lams[i]``. The pick is the grid
    point of lowest error, moved to the vertex of the parabola in ``x = log10 lam`` through that
    point and its two neighbours on the grid (sorted by ``lam``). The vertex lies between the two
    neighbours; the grid point itself is returned when it is an end of the grid, when the grid has
    fewer than three points, or when the parabola is not convex. Points with a non-finite error (a
    failed run) are left out before the minimum is taken.

    Parameters
    ----------
    lams : sequence of float
        Distinct values of ``lam`` (> 0, any order).
    errors : sequence of float
        One validation error per ``lam``; at least one finite.

    Returns
    -------
    float
        The picked ``lam``.

    Raises
    ------
    ValueError
        When the lengths differ, a ``lam`` is not a finite number > 0, two ``lam`` are equal, or no
        error is finite.

    Examples
    --------
    >>> from singlehead.analysis import validation_pick
    >>> lams = [0.01, 0.1, 1.0]
    >>> errors = [(x + 0.8) ** 2 for x in (-2.0, -1.0, 0.0)]     # a parabola in log10 lam, vertex at -0.8
    >>> round(validation_pick(lams, errors), 6)
    0.158489
    """
    x, e = _lam_curve(lams, errors, "validation_pick")
    i = int(np.argmin(e))
    if i == 0 or i == len(x) - 1:
        return float(10.0 ** x[i])
    c2, c1, _ = np.polyfit(x[i - 1 : i + 2], e[i - 1 : i + 2], 2)
    if not c2 > 0:
        return float(10.0 ** x[i])
    return float(10.0 ** np.clip(-c1 / (2.0 * c2), x[i - 1], x[i + 1]))


def valley_halfwidth(
    lams: Sequence[float], errors: Sequence[float], lam_star: float, error_star: float, rel: float = 0.01
) -> float:
    """How far ``lam`` may move from the optimum, in ``log10 lam``, before the error exceeds ``(1 + rel) error_star``.

    ``(lams, errors)`` samples a curve ``lam -> test error`` on both sides of its minimum at
    ``lam_star`` with value ``error_star`` (e.g. the theory's curve around :func:`~singlehead.tune`'s
    result). On each side the samples are walked outwards from ``lam_star``; the first one whose
    excess ``error - error_star`` reaches ``rel error_star`` is the crossing, located between it and
    the sample before (``lam_star`` itself, excess 0, for the first) by linear interpolation of the
    square root of the excess in ``log10 lam`` (exact for a valley quadratic in ``log10 lam``). The
    result is the smaller of the two distances ``|log10 lam_cross - log10 lam_star|``: every ``lam``
    within it of ``lam_star`` has an error below ``(1 + rel) error_star`` at the curve's resolution.
    A side without a crossing in the samples gives ``inf`` (the valley is flatter than the sampled
    range); points with a non-finite error are left out.

    Parameters
    ----------
    lams, errors : sequence of float
        The sampled curve (``lams`` distinct, > 0; at least one finite error).
    lam_star : float
        The minimiser (> 0).
    error_star : float
        The minimum (> 0).
    rel : float
        The relative rise of the error that defines the edge of the valley (> 0).

    Returns
    -------
    float
        The half-width in ``log10 lam`` (>= 0; ``inf`` when neither side crosses).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import valley_halfwidth
    >>> x = np.linspace(-1.0, 1.0, 21)
    >>> errors = 0.05 * (1.0 + x ** 2)                     # rises by 1 % at |log10 lam| = 0.1
    >>> round(valley_halfwidth(10.0 ** x, errors, 1.0, 0.05, rel=0.01), 6)
    0.1
    """
    x, e = _lam_curve(lams, errors, "valley_halfwidth")
    x0 = math.log10(_check_positive(lam_star, "lam_star"))
    e0 = _check_positive(error_star, "error_star")
    thr = math.sqrt(_check_positive(rel, "rel") * e0)
    out = math.inf
    for side in (x > x0, x < x0):
        xs, es = x[side], e[side]
        order = np.argsort(np.abs(xs - x0))
        prev_x, prev_r = x0, 0.0
        for xi, ei in zip(xs[order], es[order]):
            r = math.sqrt(max(float(ei) - e0, 0.0))
            if r >= thr:
                t = (thr - prev_r) / (r - prev_r)
                out = min(out, abs(prev_x + t * (float(xi) - prev_x) - x0))
                break
            prev_x, prev_r = float(xi), r
    return float(out)
