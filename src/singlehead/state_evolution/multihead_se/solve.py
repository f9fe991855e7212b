"""The multi-head state evolution solved: the map ``(Q, M, Sigma) -> (Q', M', Sigma')`` and its damped iteration.

One evaluation is the output side (:mod:`.output`, the prox on ``H K`` fields) followed by the prior side
(:mod:`.prior`, the head-coupled denoiser on sampled instances). An *ansatz* restricts the overlaps to a
subspace the map leaves invariant (its output is projected back onto it, which also averages out part of
the sampling noise of the prior side):

* ``"unspecialised"`` (``H = H0``): every student head equally aligned with every teacher head,
  ``M = m 11^T``, and ``Q``, ``Sigma`` (and the conjugates) of the form ``a I + b 11^T``;
* ``"specialised"`` (``H = H0``): symmetric under a joint permutation of student and teacher heads,
  ``M = a I + b 11^T`` (student head ``h`` paired with teacher head ``h``), ``Q``, ``Sigma`` as above;
* ``"general"``: no restriction.

Both restricted subspaces are invariant because the map is equivariant under permutations of the heads
(the teacher heads are exchangeable); the unspecialised one is contained in the specialised one
(``a = 0``), so a specialised fixed point is looked for from a start with ``a > 0``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.validation import check, finite, is_int
from singlehead.state_evolution.convergence import is_converged
from singlehead.state_evolution.multihead_se.output import (
    collapsed_output_side,
    isotropic,
    multihead_output_side,
    multihead_quadrature,
)
from singlehead.state_evolution.multihead_se.prior import (
    MultiHeadPriorSample,
    multihead_prior_side,
    zero_is_denoised,
)
from singlehead.state_evolution.prior import prior_model
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = [
    "ANSATZE",
    "HEADS_DEFAULTS",
    "HEADS_READS",
    "multihead_options",
    "project",
    "MultiHeadOptions",
    "MultiHeadSEMap",
    "solve_multihead",
    "solve_coarse_to_fine",
    "coarse_map",
    "coarse_jacobian",
    "chord_solve",
    "specialisation_index",
    "match_heads",
    "default_start",
    "admissible",
    "MapFailure",
    "collapsed_solution",
    "unconverged_reason",
]

ANSATZE = ("unspecialised", "specialised", "general")


class MapFailure(ArithmeticError):
    """The map cannot be evaluated at the point it was given: the fields' covariance or ``Sigma`` is not
    positive definite, or the output side's ``Sigmahat`` has a non-positive diagonal (the denoiser's quadratic
    term would not be convex). Raised inside the solvers and handled by them (:func:`solve_multihead`), never
    passed to the caller: near the collapsed point ``S = 0`` (small ``alpha``, large ``lam``) the iterates
    approach the boundary of the admissible overlaps, where it happens."""


def _sym_avg(A: np.ndarray) -> np.ndarray:
    """``a I + b 11^T`` with the mean diagonal and mean off-diagonal entries of square ``A``."""
    n = A.shape[0]
    d = float(np.mean(np.diag(A)))
    o = float((A.sum() - np.trace(A)) / (n * (n - 1))) if n > 1 else 0.0
    return isotropic(n, d, o)


def project(ansatz: str, Q: np.ndarray, M: np.ndarray, Sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Q, M, Sigma)`` (or the conjugates) projected onto the ansatz's subspace (module docstring)."""
    if ansatz not in ANSATZE:
        raise ValueError(f"ansatz must be one of {ANSATZE} (got {ansatz!r})")
    Q, Sigma = 0.5 * (Q + Q.T), 0.5 * (Sigma + Sigma.T)
    if ansatz == "general":
        return Q, M, Sigma
    if M.shape[0] != M.shape[1]:
        raise ValueError(f"ansatz {ansatz!r} needs heads == teacher_heads (got M of shape {M.shape})")
    Mp = np.full_like(M, float(M.mean())) if ansatz == "unspecialised" else _sym_avg(M)
    return _sym_avg(Q), Mp, _sym_avg(Sigma)


def match_heads(Q: np.ndarray, M: np.ndarray, Sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """The student heads reordered to the assignment of largest ``sum_h M[h, perm(h)]`` (as a simulation's
    ``head_M``, :func:`singlehead.sim.overlaps.head_overlaps`; exhaustive over assignments, ``H <= 6``), and the
    order. The theory's heads have no labels either: a specialised fixed point and its relabellings are one point."""
    H, H0 = M.shape
    if H > 6 or H0 > 6:
        return Q, M, Sigma, list(range(H))
    best, order = -math.inf, list(range(H))
    for perm in itertools.permutations(range(H)):
        val = sum(M[perm[k], k] for k in range(min(H, H0)))
        if val > best + 1e-12:
            best, order = val, list(perm)
    idx = np.array(order)
    return Q[np.ix_(idx, idx)], M[idx], Sigma[np.ix_(idx, idx)], order


def specialisation_index(M: np.ndarray, Q0: np.ndarray) -> float:
    """``(mean diag M - mean off-diag M)/(mean diag Q0 - mean off-diag Q0)`` of square ``M``, ``Q0``: 0 for
    unspecialised heads, 1 for heads equal to their teacher heads (``M = Q0``). ``nan`` for one head."""
    n = M.shape[0]
    if n < 2 or M.shape != Q0.shape:
        return math.nan

    def gap(A: np.ndarray) -> float:
        return float(np.mean(np.diag(A)) - (A.sum() - np.trace(A)) / (n * (n - 1)))

    return gap(M) / gap(Q0)


@dataclass
class MultiHeadOptions:
    """The heads model's solver settings (internal: users pass an :class:`~singlehead.SEOptions`, which
    :func:`multihead_options` carries here by name).

    ``ansatz`` (``ANSATZE``; default ``"unspecialised"`` for ``H = H0 > 1``, ``"general"`` otherwise);
    ``sample_dim``, ``sample_draws``, ``sample_seed``: the prior side's instances; ``n_points``,
    ``n_scrambles``: output-side nodes per scramble and scrambles; ``damping``, ``history``: the mixing and the
    residuals kept by the Anderson-accelerated iteration (``solve_multihead``);
    ``tol``: stop when the largest relative change of the overlaps in one step is below it; ``max_iter``:
    map evaluations; ``union_every``: every this many evaluations the prox runs its cold starts as well as the
    tracked branch; ``prior_tol``: the denoiser's tolerance; ``start``: ``(Q, M, Sigma)`` to start from
    (default: the ansatz's generic start, ``default_start``); ``node_seed``: the seed of the output side's
    scrambled Sobol nodes (an integer >= 0); ``inexact``: the denoiser is solved only as accurately as the
    iteration needs (``solve_multihead``): to ``max(prior_tol, min(1e-3, 1e-2 r))``, ``r`` the previous
    step's relative change, in at most ``INEXACT_SWEEPS`` sweeps while ``r > 10 tol``, and to ``prior_tol``
    itself once ``r <= 10 tol`` (the steps that decide convergence are those of ``inexact=False``);
    ``track_z``: between the evaluations that run every cold start, the prox's start from ``z`` continues the
    branch it reached in the previous evaluation (``False``: a fresh start from ``z`` in every evaluation);
    ``draw_errors``: with ``sample_draws >= 2``, the test error's standard error is the sampling error of the fixed
    point, a jackknife over groups of one draw and ``n_scrambles/sample_draws`` node scrambles (over the draws alone
    where ``n_scrambles`` is not a multiple of ``sample_draws``; ``multihead_se.draw_error``; ``sample_draws`` more
    solves, each started at the fixed point), inflated by the Student-t quantile of its ``sample_draws - 1`` degrees
    of freedom as the single head's (``extras["test_error_draws_se"]``, ``extras["draws_dof"]``).
    ``coarse``: the fixed point is first approached on a coarse design and finished on the full one by
    quasi-Newton steps (:func:`solve_coarse_to_fine`; ``False``: the Anderson iteration on the full design
    from the start, ``solve_multihead``). Either way the result is a point of the full design's map that
    meets ``tol`` in an evaluation with the denoiser solved to ``prior_tol``.
    ``threads``: the prior side's draws (swept in step) and the jackknife's leave-one-out solves run on this many
    threads, BLAS held at one thread meanwhile (:func:`~singlehead.numerics.thread_map.thread_map`); ``None``:
    :func:`multihead_theory` takes the size of this process's BLAS pool (the thread policy's allotment), a bare
    ``MultiHeadSEMap`` one thread. The numbers do not depend on it.
    """

    ansatz: str | None = None
    sample_dim: int = 100
    sample_draws: int = 4
    sample_seed: int = 0
    n_points: int = 1024
    n_scrambles: int = 4
    damping: float = 0.5
    history: int = 4
    tol: float = 1e-4
    max_iter: int = 60
    union_every: int = 5
    prior_tol: float = 1e-7
    start: tuple | None = None
    node_seed: int = 0
    inexact: bool = True
    track_z: bool = False
    draw_errors: bool = True
    coarse: bool = True
    threads: int | None = None

    def __post_init__(self) -> None:
        check(self.ansatz is None or self.ansatz in ANSATZE, "ansatz", f"None or one of {ANSATZE}", self.ansatz)
        for name, lo in (
            ("sample_dim", 2),
            ("sample_draws", 1),
            ("n_points", 1),
            ("n_scrambles", 1),
            ("max_iter", 1),
            ("union_every", 1),
        ):
            v = getattr(self, name)
            check(is_int(v) and v >= lo, name, f"an integer >= {lo}", v)
        for name in ("sample_seed", "node_seed"):
            v = getattr(self, name)
            check(is_int(v) and v >= 0, name, "an integer >= 0", v)
        check(is_int(self.history) and self.history >= 0, "history", "an integer >= 0", self.history)
        check(
            self.threads is None or (is_int(self.threads) and self.threads >= 1),
            "threads",
            "None or an integer >= 1",
            self.threads,
        )
        check(finite(self.damping) and 0 < self.damping <= 1, "damping", "in (0, 1]", self.damping)
        for name in ("inexact", "track_z", "draw_errors", "coarse"):
            check(isinstance(getattr(self, name), bool), name, "True or False", getattr(self, name))
        for name in ("tol", "prior_tol"):
            v = getattr(self, name)
            check(finite(v) and v > 0, name, "a finite number > 0", v)


#: the heads model's values of the options that ``SEOptions`` leaves at ``None``
HEADS_DEFAULTS = {"tol": 1e-4, "max_iter": 60, "sample_draws": 4, "n_points": 1024}
#: the ``SEOptions`` fields and tuning constants the heads model reads (the others are refused when set)
HEADS_READS = (
    "tol",
    "max_iter",
    "damping",
    "n_points",
    "n_scrambles",
    "node_seed",
    "sample_dim",
    "sample_draws",
    "sample_seed",
    "draw_errors",
    "coarse",
    "ansatz",
    "threads",
    "history",
    "union_every",
    "prior_tol",
    "inexact",
    "track_z",
)


def multihead_options(options: Any = None, *, start: tuple | None = None) -> MultiHeadOptions:
    """The solver settings of the multi-head state evolution (internal) from an :class:`~singlehead.SEOptions`.

    ``None``: the defaults. An ``SEOptions``: checked (a field or tuning constant outside ``HEADS_READS`` set
    away from its default raises ``ValueError`` naming it), resolved with ``HEADS_DEFAULTS`` and carried by
    name (``sample_seed=None`` as ``node_seed``). A ``MultiHeadOptions`` (this package's own callers):
    itself. ``start``: the ``(Q, M, Sigma)`` to start from, if given.
    """
    from singlehead.state_evolution.options import SEOptions

    if options is None:
        o = MultiHeadOptions()
    elif isinstance(options, MultiHeadOptions):
        o = options
    elif isinstance(options, SEOptions):
        options.refuse(HEADS_READS, "heads state-evolution model", "its solver takes " + ", ".join(HEADS_READS))
        r = options.resolved(HEADS_DEFAULTS)
        o = MultiHeadOptions(
            ansatz=r.ansatz,
            sample_dim=r.sample_dim,
            sample_draws=r.sample_draws,
            sample_seed=r.instance_seed,
            n_points=r.n_points,
            n_scrambles=r.n_scrambles,
            damping=r.damping,
            history=r.history,
            tol=r.tol,
            max_iter=r.max_iter,
            union_every=r.union_every,
            prior_tol=r.prior_tol,
            node_seed=r.node_seed,
            inexact=r.inexact,
            track_z=r.track_z,
            draw_errors=r.draw_errors,
            coarse=r.coarse,
            threads=r.threads,
        )
    else:
        raise ValueError(f"options must be None or an SEOptions (got {type(options).__name__})")
    return o if start is None else dataclasses.replace(o, start=start)


def default_start(problem: Problem, Q0: np.ndarray, ansatz: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A start inside the ansatz: ``Q = 0.8 Q0``-like, ``M`` at ``0.6`` of the teachers' mean overlap (specialised:
    ``M = 0.6 Q0``), ``Sigma = 0.5 I``. With one teacher head the student heads' off-diagonal overlap is
    ``0.4 Q0`` (``0.8 Q0`` would make them copies: a singular covariance of the fields)."""
    H, H0 = problem.heads, problem.teacher_heads
    q0d, q0o = float(np.mean(np.diag(Q0))), float(Q0.mean())
    Q = isotropic(H, 0.8 * q0d, (0.8 * q0o if H0 > 1 else 0.4 * q0d) if H > 1 else 0.0)
    if ansatz == "specialised":
        M = 0.6 * Q0.copy()
    else:
        M = np.full((H, H0), 0.6 * q0o)
    return Q, M, 0.5 * np.eye(H)


#: the denoiser's sweeps per evaluation while the iteration is far from its fixed point (``MultiHeadOptions.inexact``)
INEXACT_SWEEPS = 50


class MultiHeadSEMap:
    """The map of one problem on fixed nodes and fixed prior draws, with the prox branch and the denoiser's
    solutions carried from one evaluation to the next (warm starts)."""

    def __init__(
        self,
        problem: Problem,
        options: Any = None,
        *,
        sample: MultiHeadPriorSample | None = None,
        quad: OutputQuadrature | None = None,
    ) -> None:
        options = multihead_options(options)
        self.problem, self.options = problem, options
        if sample is None:
            Q0 = float(prior_model(problem.replace(heads=1, teacher_heads=1)).Q0)
            sample = MultiHeadPriorSample.draw(
                problem.target,
                Q0,
                problem.heads,
                problem.teacher_heads,
                D=options.sample_dim,
                draws=options.sample_draws,
                seed=options.sample_seed,
            )
        self.sample = sample
        self.Q0 = self.sample.teacher_overlaps()
        self.quad = (
            quad
            if quad is not None
            else multihead_quadrature(problem, options.n_points, options.n_scrambles, options.node_seed)
        )
        self.branches: list | None = None
        self.z_branch: np.ndarray | None = None
        self.solutions: np.ndarray | None = None
        self.calls = 0
        self.last: tuple | None = None
        #: the point of the last evaluation that succeeded (``last`` is its image)
        self.last_input: tuple | None = None
        #: whether the last evaluation solved the denoiser to ``prior_tol`` (see :meth:`prior_accuracy`)
        self.last_exact = True
        #: whether the last evaluation ran the prox's cold starts (the first one, and every ``union_every``-th)
        self.last_cold = True

    def prior_accuracy(self, residual: float | None) -> tuple[float, int]:
        """The denoiser's ``(tol, max_sweeps)`` for an evaluation after a step of relative change ``residual``
        (``None``: full accuracy; see ``MultiHeadOptions.inexact``)."""
        o = self.options
        if residual is None or not o.inexact or residual <= 10 * o.tol:
            return o.prior_tol, 5000
        return max(o.prior_tol, min(1e-3, 1e-2 * residual)), INEXACT_SWEEPS

    def state(self) -> tuple:
        """The warm starts carried between evaluations (for :meth:`restore`)."""
        return self.branches, self.z_branch, self.solutions, self.calls

    def restore(self, state: tuple) -> None:
        """Return to the warm starts of :meth:`state`."""
        self.branches, self.z_branch, self.solutions, self.calls = state

    def __call__(
        self,
        Q: np.ndarray,
        M: np.ndarray,
        Sigma: np.ndarray,
        ansatz: str,
        residual: float | None = None,
        *,
        track_only: bool = False,
    ) -> tuple:
        """``((Q', M', Sigma'), output side, prior side)``, every matrix projected onto ``ansatz``; the denoiser
        solved to :meth:`prior_accuracy` of ``residual`` (default: to ``prior_tol``). ``track_only`` (after a
        first evaluation): the prox only continues the branch of the previous evaluation (no start from ``z``,
        no cold starts), so that the map is continuous in its arguments (finite differences)."""
        self.calls += 1
        ptol, sweeps = self.prior_accuracy(residual)
        exact = (ptol, sweeps) == self.prior_accuracy(None)
        if track_only and self.branches is not None:
            warm, union, z_start = self.branches, False, self.branches[0]
        else:
            warm = self.branches
            union = self.branches is not None and self.calls % max(1, self.options.union_every) == 0
            z_start = self.z_branch if self.options.track_z else None
        try:
            out = multihead_output_side(
                Q, M, Sigma, problem=self.problem, Q0=self.Q0, quad=self.quad, warm=warm, union=union, z_start=z_start
            )
        except np.linalg.LinAlgError as exc:  # the covariance of the fields or Sigma is singular here
            raise MapFailure(f"the output side is not defined at this point ({exc})") from None
        Qh, Mh, Sh = project(ansatz, out.Qhat, out.Mhat, out.Sigmahat)
        if not (np.all(np.isfinite(Sh)) and np.all(np.diag(Sh) > 0)):
            raise MapFailure(f"the output side's Sigmahat has a non-positive diagonal ({np.diag(Sh).tolist()})")
        self.last_cold = warm is None or union
        self.branches = [out.h]
        self.z_branch = out.z_branch
        self.last_exact = exact
        pr = multihead_prior_side(
            Qh,
            Mh,
            Sh,
            lam=self.problem.lam,
            kappa=self.problem.kappa,
            sample=self.sample,
            warm=self.solutions,
            tol=ptol,
            max_sweeps=sweeps,
            threads=self.options.threads or 1,
        )
        self.solutions = pr.solutions
        new = project(ansatz, pr.Q, pr.M, pr.Sigma)
        self.last = (new, out, pr, (Qh, Mh, Sh))
        self.last_input = (Q, M, Sigma)
        return new, out, pr


def _log(label: str, it: int, r: float, new: tuple, pr: Any) -> None:
    """One line of a verbose solve: the evaluation, its relative change, the new overlaps and the denoiser's sweeps."""
    print(
        f"  {label} {it:2d} res {r:.2e} Q {np.round(new[0], 4).tolist()} M {np.round(new[1], 4).tolist()} "
        f"Sigma {np.round(new[2], 4).tolist()} sweeps {pr.sweeps}",
        flush=True,
    )


def _rel_change(a: tuple, b: tuple) -> float:
    return max(float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-12)) for x, y in zip(a, b))


@dataclass
class MultiHeadSolution:
    """A solve: the fixed point ``(Q, M, Sigma)``, the conjugates, the last output and prior sides, the residual
    history and whether the tolerance was met."""

    Q: np.ndarray
    M: np.ndarray
    Sigma: np.ndarray
    hats: tuple
    out: Any
    prior: Any
    residuals: list = field(default_factory=list)
    converged: bool = False
    evaluations: int = 0
    #: evaluations of the coarse map (:func:`solve_coarse_to_fine`: its iteration and its Jacobian)
    coarse_evaluations: int = 0
    #: :func:`solve_coarse_to_fine`'s chord matrix ``J - I`` (the coarse map's Jacobian in the ansatz's
    #: coordinates, :func:`chord_solve`), ``None`` from :func:`solve_multihead`
    chord_matrix: np.ndarray | None = None
    #: the collapsed solution ``S_h = 0`` of every head (:func:`collapsed_solution`)
    collapsed: bool = False
    #: why the solve stopped early, where the map could not be evaluated (:class:`MapFailure`); ``None`` otherwise
    failure: str | None = None


def solve_multihead(
    se_map: MultiHeadSEMap,
    ansatz: str,
    start: tuple,
    *,
    damping: float = 0.5,
    tol: float = 2e-3,
    max_iter: int = 60,
    history: int = 4,
    verbose: bool = False,
) -> MultiHeadSolution:
    """Anderson-accelerated iteration of the map inside ``ansatz`` from ``start`` (``_anderson``), with the
    fallbacks of ``_guarded``: it never raises from inside the map; an unconverged solve where ``S = 0`` is a
    fixed point returns the collapsed solution."""
    return _guarded(
        _anderson, se_map, ansatz, start, damping=damping, tol=tol, max_iter=max_iter, history=history, verbose=verbose
    )


def _anderson(
    se_map: MultiHeadSEMap,
    ansatz: str,
    start: tuple,
    *,
    damping: float = 0.5,
    tol: float = 2e-3,
    max_iter: int = 60,
    history: int = 4,
    verbose: bool = False,
) -> MultiHeadSolution:
    """Anderson-accelerated iteration of the map inside ``ansatz`` from ``start``.

    The iterate is the vector of ``(Q, M, Sigma)``; each step mixes the last ``history`` residuals
    ``F(x) - x`` (Anderson's type-II extrapolation, ``damping`` the mixing of the extrapolated residual; with
    ``history = 0`` the damped iteration ``x <- x + damping (F(x) - x)``). Stops when the relative change
    ``max |F(x) - x| / max |F(x)|`` over every matrix is below ``tol`` (or after ``max_iter`` evaluations).
    A step that leaves ``Sigma`` or the fields' covariance ``[[Q0, M^T], [M, Q]]`` not positive definite is
    replaced by the damped step, halved until they are. A point where the map is not defined raises
    :class:`MapFailure` (halving such steps towards the last point did not recover on the random problems that
    reach one, and cost up to ``max_iter`` evaluations). Each evaluation gets the previous relative change, which
    sets the accuracy of its denoiser (``MultiHeadSEMap.prior_accuracy``); the tolerance is met only by an
    evaluation whose denoiser was solved to ``prior_tol``.
    """
    x = project(ansatz, *(np.asarray(a, float) for a in start))
    _, flat, unflat = _subspace(ansatz, x)
    Q0 = se_map.Q0
    res, ok = [], False
    X, Fs = [], []
    new = out = pr = None
    for _ in range(max_iter):
        new, out, pr = se_map(*x, ansatz, residual=res[-1] if res else math.inf)  # MapFailure: to _guarded
        r = _rel_change(new, x)
        res.append(r)
        if verbose:
            _log("it", len(res) - 1, r, new, pr)
        if is_converged(r, tol, accept=1.0)[0] and se_map.last_exact:  # the rule of .convergence
            ok = True
            break
        xv, fv = flat(x), flat(new) - flat(x)
        X.append(xv)
        Fs.append(fv)
        X, Fs = X[-(history + 1) :], Fs[-(history + 1) :]
        step = xv + damping * fv
        if history > 0 and len(X) > 1:
            dX = np.stack([X[i + 1] - X[i] for i in range(len(X) - 1)], axis=1)
            dF = np.stack([Fs[i + 1] - Fs[i] for i in range(len(Fs) - 1)], axis=1)
            gamma = np.linalg.lstsq(dF, fv, rcond=None)[0]
            step = xv + damping * fv - (dX + damping * dF) @ gamma
        cand = unflat(step)
        if not admissible(cand, Q0):  # the damped step instead, shortened until admissible
            X, Fs = X[-1:], Fs[-1:]
            eta = damping
            cand = unflat(xv + eta * fv)
            while not admissible(cand, Q0) and eta > 1e-3:
                eta *= 0.5
                cand = unflat(xv + eta * fv)
        x = cand
    hats = se_map.last[3]
    return MultiHeadSolution(*new, hats=hats, out=out, prior=pr, residuals=res, converged=ok, evaluations=len(res))


#: the coarse design of :func:`solve_coarse_to_fine`: output-side nodes (the first ones of the full design's first
#: scramble, a Sobol net themselves) and the prior side's dimension (one draw)
COARSE_POINTS = 512
COARSE_DIM = 50
COARSE_DRAWS = 1
#: the coarse Anderson iteration stops at this relative change, the coarse quasi-Newton steps at ``COARSE_FINISH``
COARSE_TOL = 1e-2
COARSE_FINISH = 1e-3
#: the coarse map's denoiser tolerance (at least ``prior_tol``)
COARSE_PRIOR_TOL = 1e-5
#: the coarse map's Jacobian: forward differences of this step, relative to the largest entry of the overlaps
JACOBIAN_STEP = 1e-3
#: at most this many coarse Jacobians (a new one where the coarse chord steps stall)
JACOBIANS = 3


def coarse_map(se_map: MultiHeadSEMap) -> MultiHeadSEMap | None:
    """The map of ``se_map``'s problem on the coarse design (``COARSE_POINTS`` nodes of the first scramble of
    ``se_map``'s nodes, ``COARSE_DRAWS`` prior draws at dimension ``COARSE_DIM``, capped by the full design; its
    denoiser to ``COARSE_PRIOR_TOL``, its prox's start from ``z`` continuing its branch, ``track_z``), or ``None``
    where the full design is not several times costlier (fewer than ``4 COARSE_POINTS`` nodes and a prior side
    of less than 4 draws at ``COARSE_DIM``)."""
    o, quad, sample = se_map.options, se_map.quad, se_map.sample
    R, N = quad.nodes.shape[:2]
    draws = sample.S0.shape[0]
    if R * N < 4 * COARSE_POINTS and draws * sample.D**3 < 4 * COARSE_DIM**3:
        return None
    cq = OutputQuadrature(np.ascontiguousarray(quad.nodes[:1, : min(COARSE_POINTS, N)]), quad.seed)
    co = dataclasses.replace(
        o,
        sample_dim=min(COARSE_DIM, sample.D),
        sample_draws=min(COARSE_DRAWS, draws),
        n_points=cq.nodes.shape[1],
        n_scrambles=1,
        tol=max(o.tol, COARSE_TOL),
        prior_tol=max(o.prior_tol, COARSE_PRIOR_TOL),
        track_z=True,
    )
    return MultiHeadSEMap(se_map.problem, co, quad=cq)  # its prior draws: the coarse options' (sample_seed kept)


def _subspace(ansatz: str, x: tuple) -> tuple:
    """``(B, flat, unflat)``: an orthonormal basis ``B`` (columns) of the ansatz's subspace in the flattened
    ``(Q, M, Sigma)``, the flattening and its inverse (projected onto the ansatz)."""
    shapes = [a.shape for a in x]

    def flat(t: tuple) -> np.ndarray:
        return np.concatenate([np.asarray(a, float).ravel() for a in t])

    def unflat(v: np.ndarray) -> tuple:
        out, i = [], 0
        for sh in shapes:
            n = int(np.prod(sh))
            out.append(v[i : i + n].reshape(sh))
            i += n
        return project(ansatz, *out)

    n = flat(x).size
    P = np.stack([flat(unflat(e)) for e in np.eye(n)], axis=1)
    U, sv, _ = np.linalg.svd(P)
    return U[:, sv > 1e-9 * sv[0]], flat, unflat


def coarse_jacobian(cmap: MultiHeadSEMap, ansatz: str, x: tuple) -> tuple[np.ndarray, int]:
    """The Jacobian of ``cmap`` at ``x`` in the coordinates of the ansatz's subspace (:func:`_subspace`), by
    forward differences of step ``JACOBIAN_STEP`` times the largest entry of ``x``, every evaluation with the
    denoiser at ``prior_tol`` and the prox continuing the branch of the evaluation at ``x`` (``track_only``);
    and the evaluations used. ``cmap`` is left in the state of the evaluation at ``x``."""
    B, flat, unflat = _subspace(ansatz, x)
    xv = flat(x)
    c = B.T @ xv
    base, _, _ = cmap(*unflat(B @ c), ansatz, None, track_only=True)
    f0 = B.T @ flat(base)
    state = cmap.state()
    h = JACOBIAN_STEP * max(float(np.max(np.abs(xv))), 1e-12)
    J = np.empty((c.size, c.size))
    for i in range(c.size):
        cmap.restore(state)
        new, _, _ = cmap(*unflat(B @ (c + h * np.eye(c.size)[i])), ansatz, None, track_only=True)
        J[:, i] = (B.T @ flat(new) - f0) / h
    cmap.restore(state)
    return J, c.size + 1


def _chord(
    se_map: MultiHeadSEMap,
    ansatz: str,
    x: tuple,
    A: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    first_inexact: bool,
    verbose: bool,
    label: str,
) -> tuple:
    """Chord steps ``x <- x - A^{-1} G(x)`` on ``G(x) = F(x) - x`` in the ansatz's coordinates (each shortened,
    as :func:`solve_multihead`'s, until ``Sigma`` and the fields' covariance are positive definite), the
    denoiser at ``prior_tol`` (the first evaluation at that of an infinite residual if ``first_inexact``).
    Stops at a relative change below ``tol`` in an evaluation at ``prior_tol`` (``ok``), after ``max_iter``
    evaluations, or when the relative change did not decrease in a step (but for a step to an evaluation that
    ran the prox's cold starts, where the map itself may change: the next step is compared with it).
    Returns ``(ok, residuals, best point, last evaluation (new, out, pr))``."""
    B, flat, unflat = _subspace(ansatz, x)
    Q0 = se_map.Q0
    c = B.T @ flat(x)
    res: list = []
    last = None
    best = (x, math.inf)
    for it in range(max_iter):
        xt = unflat(B @ c)
        new, out, pr = se_map(*xt, ansatz, residual=math.inf if (it == 0 and first_inexact) else None)
        last = (new, out, pr)
        r = _rel_change(new, xt)
        res.append(r)
        if verbose:
            _log(label, it, r, new, pr)
        if is_converged(r, tol, accept=1.0)[0] and se_map.last_exact:  # the rule of .convergence
            return True, res, xt, last
        if r >= best[1] and not se_map.last_cold:
            break
        if r < best[1] or se_map.last_cold:  # after cold starts (the map may have moved to lower branches): anew
            best = (xt, r)
        g = B.T @ (flat(new) - flat(xt))
        step = -np.linalg.solve(A, g)
        eta = 1.0
        cand = c + step
        while not admissible(unflat(B @ cand), Q0) and eta > 1e-3:
            eta *= 0.5
            cand = c + eta * step
        if not admissible(unflat(B @ cand), Q0):
            break  # no chord step stays admissible: the best point so far goes on (Anderson iteration or fallback)
        c = cand
    return False, res, best[0], last


def solve_coarse_to_fine(
    se_map: MultiHeadSEMap,
    ansatz: str,
    start: tuple,
    *,
    damping: float = 0.5,
    tol: float = 1e-4,
    max_iter: int = 60,
    history: int = 4,
    verbose: bool = False,
) -> MultiHeadSolution:
    """The fixed point of ``se_map`` inside ``ansatz``, approached on the coarse design and finished on the full one
    (``_coarse_to_fine``), with the fallbacks of ``_guarded`` (as :func:`solve_multihead`)."""
    return _guarded(
        _coarse_to_fine,
        se_map,
        ansatz,
        start,
        damping=damping,
        tol=tol,
        max_iter=max_iter,
        history=history,
        verbose=verbose,
    )


def _coarse_to_fine(
    se_map: MultiHeadSEMap,
    ansatz: str,
    start: tuple,
    *,
    damping: float = 0.5,
    tol: float = 1e-4,
    max_iter: int = 60,
    history: int = 4,
    verbose: bool = False,
) -> MultiHeadSolution:
    """The fixed point of ``se_map`` inside ``ansatz``: approached on the coarse design, finished on the full one.

    1. ``solve_multihead`` on ``coarse_map`` from ``start`` to a relative change ``COARSE_TOL``;
    2. the coarse map's Jacobian ``J`` there (``coarse_jacobian``), and chord steps
       ``x <- x - (J - I)^{-1} (F(x) - x)`` on the coarse map to ``COARSE_FINISH``;
    3. the same chord steps on ``se_map`` from there, whose first evaluation runs every cold prox start (a
       fresh map) with the denoiser at ``MultiHeadSEMap.prior_accuracy`` of an infinite residual, the
       others at ``prior_tol``; they stop as ``solve_multihead`` does (relative change below ``tol`` in an
       evaluation with the denoiser at ``prior_tol``).

    A chord step after which the relative change did not decrease (but for one to an evaluation that reran
    the prox's cold starts) hands that map's iteration to ``solve_multihead`` from the best point so far (on
    the full design: for the evaluations left of ``max_iter``). Where the full design is not several times
    costlier than the coarse one (``coarse_map`` is ``None``), this is ``solve_multihead`` on ``se_map``.

    Parameters
    ----------
    se_map : MultiHeadSEMap
        The full design's map (its nodes, draws and warm starts; it is evaluated, so its state changes).
    ansatz, start : str, tuple
        The ansatz and the start ``(Q, M, Sigma)`` (projected onto the ansatz).
    damping, tol, max_iter, history, verbose :
        As for ``solve_multihead``; ``max_iter`` bounds each stage's evaluations.

    Returns
    -------
    MultiHeadSolution
        ``evaluations`` and ``residuals``: the full design's evaluations; ``coarse_evaluations``: the coarse
        ones; ``chord_matrix``: ``J - I`` where the full design's chord steps met ``tol`` (``None`` otherwise).
    """
    cmap = coarse_map(se_map)
    if cmap is None:
        return _anderson(
            se_map, ansatz, start, damping=damping, tol=tol, max_iter=max_iter, history=history, verbose=verbose
        )
    csol = _anderson(
        cmap, ansatz, start, damping=damping, tol=cmap.options.tol, max_iter=max_iter, history=history, verbose=verbose
    )
    x = project(ansatz, csol.Q, csol.M, csol.Sigma)
    if not admissible(x, se_map.Q0):  # the coarse iteration ended on the boundary (collapse): the full design's own
        return _anderson(
            se_map, ansatz, start, damping=damping, tol=tol, max_iter=max_iter, history=history, verbose=verbose
        )
    n_coarse = csol.evaluations
    for _ in range(JACOBIANS):
        J, n_jac = coarse_jacobian(cmap, ansatz, x)
        A = J - np.eye(J.shape[0])
        if verbose:
            print(
                f"  coarse Jacobian ({n_jac} evaluations) eigenvalues {np.round(np.linalg.eigvals(J), 3).tolist()}",
                flush=True,
            )
        ok, res, x, last = _chord(
            cmap,
            ansatz,
            x,
            A,
            tol=max(tol, COARSE_FINISH),
            max_iter=max_iter,
            first_inexact=False,
            verbose=verbose,
            label="coarse",
        )
        n_coarse += n_jac + len(res)
        if ok:
            x = last[0]
            break
    ok, res, xb, last = _chord(
        se_map, ansatz, x, A, tol=tol, max_iter=max_iter, first_inexact=True, verbose=verbose, label="fine"
    )
    if not ok and len(res) < max_iter:  # the Anderson iteration from the best point, for the evaluations left
        sol = _anderson(
            se_map, ansatz, xb, damping=damping, tol=tol, max_iter=max_iter - len(res), history=history, verbose=verbose
        )
        return dataclasses.replace(
            sol, residuals=res + sol.residuals, evaluations=len(res) + sol.evaluations, coarse_evaluations=n_coarse
        )
    new, out, pr = last
    return MultiHeadSolution(
        *new,
        hats=se_map.last[3],
        out=out,
        prior=pr,
        residuals=res,
        converged=ok,
        evaluations=len(res),
        coarse_evaluations=n_coarse,
        chord_matrix=A,
    )


def chord_solve(
    se_map: MultiHeadSEMap,
    ansatz: str,
    start: tuple,
    chord_matrix: np.ndarray,
    *,
    tol: float,
    max_iter: int = 30,
    damping: float = 0.5,
    history: int = 4,
) -> MultiHeadSolution:
    """The fixed point of ``se_map`` inside ``ansatz`` near ``start`` by the chord steps of
    :func:`solve_coarse_to_fine` with a given ``chord_matrix`` (``J - I`` in the ansatz's coordinates, e.g. a
    solve's ``MultiHeadSolution.chord_matrix``), every evaluation's denoiser at ``prior_tol``; where they stall,
    :func:`solve_multihead` from the best point for the evaluations left of ``max_iter``. Same stopping rule."""
    ok, res, xb, last = _chord(
        se_map,
        ansatz,
        project(ansatz, *start),
        chord_matrix,
        tol=tol,
        max_iter=max_iter,
        first_inexact=False,
        verbose=False,
        label="chord",
    )
    if not ok and len(res) < max_iter:
        sol = solve_multihead(
            se_map, ansatz, xb, damping=damping, tol=tol, max_iter=max_iter - len(res), history=history
        )
        return dataclasses.replace(sol, residuals=res + sol.residuals, evaluations=len(res) + sol.evaluations)
    new, out, pr = last
    return MultiHeadSolution(
        *new,
        hats=se_map.last[3],
        out=out,
        prior=pr,
        residuals=res,
        converged=ok,
        evaluations=len(res),
        chord_matrix=chord_matrix,
    )


def admissible(t: tuple, Q0: np.ndarray) -> bool:
    """``Sigma`` and the fields' covariance ``[[Q0, M^T], [M, Q]]`` positive definite."""
    C = np.block([[Q0, t[1].T], [t[1], t[0]]])
    return bool(np.all(np.linalg.eigvalsh(t[2]) > 0) and np.all(np.linalg.eigvalsh(C) > 1e-9 * np.trace(C)))


def collapsed_solution(se_map: MultiHeadSEMap, ansatz: str) -> MultiHeadSolution:
    """The collapsed point ``S_h = 0`` of every head as a solution, ``converged`` where it is a fixed point.

    The conjugates are the ``Q, M, Sigma -> 0`` limits (:func:`~.output.collapsed_output_side`); the prior side
    at them (on ``se_map``'s draws) maps them back to ``Q = M = Sigma = 0`` exactly when the nuclear-norm
    threshold ``2 lam`` removes every eigenvalue of every head (:func:`~.prior.zero_is_denoised`): then ``S = 0``
    is a fixed point (``converged``; the single head's ``collapse_point(...).holds``). The overlaps returned are zeros;
    ``hats``, ``out`` and ``prior`` are those of the collapsed point, and ``evaluations`` the map's so far.
    """
    out = collapsed_output_side(se_map.problem, se_map.Q0, se_map.quad)
    Qh, Mh, Sh = project(ansatz, out.Qhat, out.Mhat, out.Sigmahat)
    H, H0 = Qh.shape[0], se_map.Q0.shape[0]
    lam, kappa, o = se_map.problem.lam, se_map.problem.kappa, se_map.options
    holds = bool(
        np.all(np.isfinite(Sh)) and np.all(np.diag(Sh) > 0) and zero_is_denoised(Qh, Mh, lam=lam, sample=se_map.sample)
    )
    # the prior side's record of the point (traces, draws): from S = 0 where it holds, so one sweep; elsewhere
    # only the fallback of a solve that never evaluated its map needs it, and a few sweeps serve
    Sd = Sh if np.all(np.diag(Sh) > 0) else np.diag(np.maximum(np.abs(np.diag(Sh)), 1e-12))
    pr = multihead_prior_side(
        Qh,
        Mh,
        Sd,
        lam=lam,
        kappa=kappa,
        sample=se_map.sample,
        warm=np.zeros_like(se_map.sample.Z) if holds else None,
        tol=o.prior_tol,
        max_sweeps=5000 if holds else INEXACT_SWEEPS,
        threads=o.threads or 1,
    )
    zero = (np.zeros((H, H)), np.zeros((H, H0)), np.zeros((H, H)))
    return MultiHeadSolution(
        *zero,
        hats=(Qh, Mh, Sh),
        out=out,
        prior=pr,
        residuals=[0.0 if holds else math.nan],
        converged=holds,
        evaluations=se_map.calls,
        collapsed=True,
    )


def _guarded(solver, se_map: MultiHeadSEMap, ansatz: str, start: tuple, **kw: Any) -> MultiHeadSolution:
    """``solver(se_map, ansatz, start, **kw)`` with the fallbacks that keep every valid problem answered.

    * A converged solve is returned as it is.
    * Otherwise (the solve did not meet ``tol``, or the map could not be evaluated at one of its points,
      :class:`MapFailure`) where ``S = 0`` is a fixed point (:func:`collapsed_solution`): the collapsed solution,
      as the single head's solve returns it where its softmax solve fails or reaches the collapse.
    * Otherwise the unconverged solve; after a :class:`MapFailure`, the last evaluation that succeeded (its image,
      conjugates and sides; ``residuals``: its relative change), with ``failure`` saying why.
    """
    failure, sol = None, None
    try:
        sol = solver(se_map, ansatz, start, **kw)
    except MapFailure as exc:
        failure = str(exc)
    if sol is not None and sol.converged:
        return sol
    col = collapsed_solution(se_map, ansatz)
    if col.converged:
        return col
    if sol is not None:
        return sol
    if se_map.last is None:  # not one evaluation succeeded
        return dataclasses.replace(col, failure=failure, residuals=[math.nan])
    new, out, pr, hats = se_map.last
    r = _rel_change(new, se_map.last_input) if se_map.last_input is not None else math.nan
    return MultiHeadSolution(
        *new, hats=hats, out=out, prior=pr, residuals=[r], converged=False, evaluations=se_map.calls, failure=failure
    )


def unconverged_reason(sol: MultiHeadSolution, tol: float) -> tuple[str, str]:
    """``(diagnosis, message)`` of an unconverged solve, ``diagnosis`` one of
    :data:`singlehead.state_evolution.diagnosis.CAUSES`' ``"quadrature_floor"`` and ``"solver_miss"``.

    ``"quadrature_floor"``: the smallest relative change is within ten times the sampled map's own relative error
    (the output side's quadrature standard errors of the conjugates, relative to their largest entry), which
    ``tol`` is then too small to see past; ``"solver_miss"``: otherwise, and where the map could not be
    evaluated at the iteration's next point (``sol.failure``). The multi-head route has no replica-symmetry check,
    so ``"rs_unstable"`` is not given.
    """
    res = [r for r in sol.residuals if math.isfinite(r)]
    best = min(res) if res else math.nan
    if sol.failure is not None:
        return "solver_miss", (
            f"the iteration stopped at a point where the map is not defined: {sol.failure} "
            f"(last relative change {best:.2e}, tol={tol})"
        )
    hats, err = sol.hats, sol.out.err
    floor = max(
        (
            float(np.max(np.abs(err[k]))) / max(float(np.max(np.abs(h))), 1e-300)
            for k, h in zip(("Qhat", "Mhat", "Sigmahat"), hats)
            if k in err
        ),
        default=0.0,
    )
    if res and best <= 10.0 * floor:
        return "quadrature_floor", (
            f"the relative change stalled at {best:.2e}, within ten times the sampled "
            f"map's own relative error {floor:.1e}, above tol={tol} "
            f"({sol.evaluations} evaluations)"
        )
    return "solver_miss", (
        f"damped iteration did not reach tol={tol} in {sol.evaluations} evaluations "
        f"(smallest relative change {best:.2e}, last {res[-1] if res else math.nan:.2e})"
    )
