"""GAMP iterations on one data set (:func:`run_amp`) and on one sampled instance (:func:`amp`), with
:class:`AMPOptions`."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from singlehead import __version__
from singlehead.amp.denoisers import RIE, penalty_denoiser
from singlehead.amp.operator import SensingOperator
from singlehead.amp.output import (
    BayesOutput,
    ErmOutput,
    attention_labels,
    erm_objective,
)
from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.model.validation import check as _check
from singlehead.model.validation import finite as _finite
from singlehead.model.validation import is_int as _is_int
from singlehead.numerics.prox import mat_to_vec
from singlehead.sim.data import Sequences, child_seeds, sample_sequences, sample_target
from singlehead.sim.simulation import measure_estimate


@dataclass
class AMPRun:
    """Outcome of :func:`run_amp` on one data set.

    ``history`` maps ``q, m, Sigma, tau, objective, train_error, residual`` to per-iteration
    lists; entry ``t`` is measured at the iterate ``S^t`` (``t = 0`` the initialisation;
    ``Sigma = V^t``; ``tau`` is the ``tau`` computed from ``S^t``; ``residual`` the relative
    change ``max(||S^{t+1} - S^t||_F/||S^t||_F, |V^{t+1} - V^t|/V^t)`` leading to ``S^{t+1}``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.sim.data import sample_sequences
    >>> problem = Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> from singlehead.amp import run_amp
    >>> run = run_amp(problem, data)
    >>> run.converged, run.S.shape
    (True, (30, 30))
    """

    S: np.ndarray
    V: float
    tau: float
    iterations: int
    converged: bool
    history: dict[str, list] = field(default_factory=dict)
    eigenvalues: np.ndarray | None = None


def _init_matrix(problem: Problem, init: Any, init_scale: float) -> np.ndarray:
    d = problem.d
    if init is None or (isinstance(init, str) and init == "identity"):
        return init_scale * np.eye(d)
    if isinstance(init, str) and init == "zero":
        return np.zeros((d, d))
    S = np.asarray(init, dtype=float)
    if S.shape != (d, d):
        raise ValueError(f"init must be 'identity', 'zero' or a d x d matrix (got shape {S.shape})")
    return 0.5 * (S + S.T)


@dataclass(frozen=True)
class AMPOptions:
    """Settings of GAMP (frozen, validated on construction).

    Parameters
    ----------
    bayes : bool
        Bayes-GAMP (RIE matrix denoiser, posterior-mean output) instead of ERM-GAMP.
    max_iter : int
        Iteration budget (>= 1).
    damping : float in (0, 1], optional
        Weight of the new iterate: ``x <- (1 - damping) x + damping x_new`` for ``S``, ``V`` and
        ``g`` (1 = undamped GAMP, which is what the state evolution describes). Default 1 for
        ERM-GAMP and 0.5 for Bayes-GAMP (undamped GAMP-RIE is unstable on these structured
        sensing matrices: its noise level leaves the SE after a few iterations and diverges).
    adaptive : bool
        Stopping-rule safeguard: when the residual contracts by less than a factor
        ``0.95^5`` over 5 iterations (slow drift, oscillation, or a 2-cycle of nodes jumping
        between the two local minima of the non-convex softmax prox), multiply the damping by 0.6
        (floor 0.25; at most every 10 iterations). The SE describes the iterates up to the first
        such change, recorded in ``history["damping"]``.
    tol : float
        Stop when the relative change (``residual`` in the history) is below ``tol`` (>= 0).
    init : "identity", "zero" or (d, d) array
        ``S^0``; "identity" is ``init_scale * I``.
    init_scale : float, optional
        Default: ``0.5`` (ERM); for Bayes the prior mean ``Tr S0/d`` of the target law
        (``S^0 = E S0``).
    init_sigma : float, optional
        ``V^0``. Default 1 (ERM); for Bayes the prior variance ``Q0 - (Tr S0/d)^2``.
    n_test : int
        Fresh test sequences of :func:`amp` (>= 2).
    rank_tol : float
        Eigenvalues with ``|eig| <= rank_tol`` count as zero (>= 0).
    num_threads : int, optional
        Run torch's dense algebra with this many threads for the duration of the call (the
        previous setting is restored). ``1`` is much faster on a small, shared machine, where
        multithreaded LAPACK/OpenMP pools spin against each other. Default: leave it alone.

    Examples
    --------
    >>> from singlehead.amp import AMPOptions
    >>> AMPOptions(bayes=True, max_iter=100).max_iter
    100
    >>> AMPOptions(max_iter=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: max_iter must be ...
    """

    bayes: bool = False
    max_iter: int = 300
    damping: float | None = None
    adaptive: bool = True
    tol: float = 1e-8
    init: Any = "identity"
    init_scale: float | None = None
    init_sigma: float | None = None
    n_test: int = 10000
    rank_tol: float = 1e-3
    num_threads: int | None = None

    def __post_init__(self) -> None:
        _check(_is_int(self.max_iter) and self.max_iter >= 1, "max_iter", "an integer >= 1", self.max_iter)
        _check(
            self.damping is None or (_finite(self.damping) and 0 < self.damping <= 1),
            "damping",
            "in (0, 1] or None",
            self.damping,
        )
        _check(_finite(self.tol) and self.tol >= 0, "tol", ">= 0", self.tol)
        _check(_is_int(self.n_test) and self.n_test >= 2, "n_test", "an integer >= 2", self.n_test)
        _check(_finite(self.rank_tol) and self.rank_tol >= 0, "rank_tol", ">= 0", self.rank_tol)
        _check(
            self.num_threads is None or (_is_int(self.num_threads) and self.num_threads >= 1),
            "num_threads",
            "an integer >= 1 or None",
            self.num_threads,
        )
        _check(
            isinstance(self.init, np.ndarray) or self.init in ("identity", "zero"),
            "init",
            "'identity', 'zero' or a d x d matrix",
            self.init,
        )

    def replace(self, **changes: Any) -> AMPOptions:
        return dataclasses.replace(self, **changes)


def run_amp(
    problem: Problem,
    data: Sequences,
    *,
    S0: np.ndarray | torch.Tensor | None = None,
    options: AMPOptions | None = None,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> AMPRun:
    """Run ERM-GAMP (or Bayes-GAMP) on one labelled data set.

    Parameters
    ----------
    problem : Problem
        Channel, student, ``lam`` (ERM) or prior (Bayes).
    data : Sequences
        Training set (labels ``data.y``).
    S0 : array, optional
        Target, only used to record the overlap ``m = Tr S S0/d`` in the history.
    options : AMPOptions, optional
        Algorithm settings (``bayes``, damping, tolerance, initialisation, threads).
    callback : callable, optional
        ``callback(t, record)`` after each iteration.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.sim.data import sample_sequences
    >>> problem = Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> from singlehead.amp import AMPOptions, run_amp
    >>> run = run_amp(problem, data, options=AMPOptions(max_iter=200))
    >>> run.converged, run.iterations <= 200
    (True, True)
    """
    o = options or AMPOptions()
    # the matrix step is an eigenvalue-wise denoiser of a symmetric estimate
    _check(problem.student.symmetric, "student", "a student with a symmetric matrix for AMP", problem.student.name)
    _check(problem.target.symmetric, "target", "a symmetric target for AMP", type(problem.target).__name__)
    args = (
        problem,
        data,
        S0,
        o.bayes,
        o.max_iter,
        o.damping,
        o.adaptive,
        o.tol,
        o.init,
        o.init_scale,
        o.init_sigma,
        callback,
    )
    if o.num_threads is None:
        return _run_amp(*args)
    old = torch.get_num_threads()
    torch.set_num_threads(int(o.num_threads))
    try:
        return _run_amp(*args)
    finally:
        torch.set_num_threads(old)


def _run_amp(
    problem, data, S0, bayes, max_iter, damping, adaptive, tol, init, init_scale, init_sigma, callback
) -> AMPRun:
    if damping is None:
        damping = 0.5 if bayes else 1.0
    d, n = problem.d, len(data)
    X = data.X.detach().cpu().numpy().astype(np.float64)
    Yraw = data.y.detach().cpu().numpy().astype(np.float64)
    op = SensingOperator(X)
    Ylab = attention_labels(problem, data)
    S0n = None if S0 is None else np.asarray(S0.numpy() if isinstance(S0, torch.Tensor) else S0, dtype=float)
    if bayes:
        law = problem.target.spectral_law(problem.d).engine
        mean0, Q0l = float(law.mean()), float(law.second_moment())
        if init_scale is None:
            init_scale = mean0
        if init_sigma is None:
            init_sigma = max(Q0l - mean0**2, 1e-6)
        out_step: Any = BayesOutput(problem, Ylab)
        rie = RIE(law)
    else:
        if init_scale is None:
            init_scale = 0.5
        if init_sigma is None:
            init_sigma = 1.0
        out_step = ErmOutput(problem, Ylab)
    S = _init_matrix(problem, init, init_scale)
    V = float(init_sigma)
    g = np.zeros((n, problem.n_pairs))
    cap = problem.p if (problem.student.rank_cap(problem.kappa) is not None and problem.p < d) else None
    hist: dict[str, list] = {
        k: [] for k in ("q", "m", "Sigma", "tau", "objective", "train_error", "residual", "damping")
    }
    last_change = 0
    converged = False
    tau = math.nan
    eig = None
    it = 0
    for it in range(1, int(max_iter) + 1):
        H = op.logits(S)  # once per iteration: the Onsager-corrected input and the recorded objective share it
        omega = mat_to_vec(H) - V * g
        o = out_step(omega, V)
        g_new = o.g if (damping == 1 or it == 1) else (1 - damping) * g + damping * o.g
        # gamma from the undamped step (variances are damped through V)
        tau = d / max(o.gamma, 1e-300)
        R = S + tau * op.adjoint(g_new)
        if bayes:
            den = rie(R, d * tau / 2.0)
        else:
            den = penalty_denoiser(R, problem.student, problem.lam * d * tau, cap)
        V_new = tau * den.div / d
        S_new = den.S if damping == 1 else (1 - damping) * S + damping * den.S
        V_new = V_new if damping == 1 else (1 - damping) * V + damping * V_new
        # record at S^t
        obj, tr = erm_objective(problem, op, Yraw, S, H)
        nS = math.sqrt(float(np.sum(S * S)))
        res = max(math.sqrt(float(np.sum((S_new - S) ** 2))) / max(nS, 1e-12), abs(V_new - V) / max(V, 1e-300))
        rec = {
            "q": float(np.sum(S * S)) / d,
            "m": math.nan if S0n is None else float(np.sum(S * S0n)) / d,
            "Sigma": V,
            "tau": tau,
            "objective": obj,
            "train_error": tr,
            "residual": res,
            "damping": damping,
        }
        for k, v in rec.items():
            hist[k].append(v)
        if callback is not None:
            callback(it, rec)
        S, V, g = S_new, V_new, g_new
        eig = den.eigenvalues
        if not (math.isfinite(res) and math.isfinite(V)) or V <= 0:
            break
        if res < tol:
            converged = True
            break
        r = hist["residual"]
        if adaptive and it - last_change >= 10 and len(r) > 5 and damping > 0.25 and r[-1] > 0.95**5 * r[-6]:
            damping, last_change = max(0.25, 0.6 * damping), it
    obj, tr = erm_objective(problem, op, Yraw, S)
    final = {
        "q": float(np.sum(S * S)) / d,
        "m": math.nan if S0n is None else float(np.sum(S * S0n)) / d,
        "Sigma": V,
        "tau": math.nan,
        "objective": obj,
        "train_error": tr,
        "residual": math.nan,
        "damping": damping,
    }
    for k, v in final.items():
        hist[k].append(v)
    return AMPRun(S, V, tau, it, converged, hist, eig)


def amp(
    problem: Problem,
    seed: int = 0,
    *,
    options: AMPOptions | None = None,
    return_matrices: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> Result:
    """GAMP on one draw of the task, measured like :func:`singlehead.simulate`.

    Same seed streams as ``simulate`` (``child_seeds(seed, 4)`` = target, train, test, init), so
    AMP and ERM see the same target and training set for the same ``seed``. ``options`` as in
    :func:`run_amp` (``AMPOptions(bayes=True)`` for Bayes-GAMP; ``n_test`` fresh test sequences,
    ``rank_tol`` the zero threshold of eigenvalues). The training set must hold ``n = round(alpha d^2) >= 1``
    sequences (:meth:`~singlehead.Problem.check_training_set`: ``ValueError`` naming ``alpha``
    and ``d``), as for ``simulate``.

    Returns
    -------
    Result
        ``source="amp"``; metrics with the definitions of :class:`~singlehead.Result` (computed by
        ``singlehead.sim.simulation.evaluate``); standard fields ``converged``, ``iterations``,
        ``runtime_s``, ``message``; extras ``history``, ``eigenvalues``, ``rank``,
        ``zero_fraction``, ``objective``, ``q``, ``m``, ``Q0``, ``Sigma``, ``tau``, ``bayes``,
        ``test_error_se``, ``seed``, ``version`` (``S``, ``S0`` with ``return_matrices``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.amp import amp
    >>> result = amp(Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01), seed=0)
    >>> result.source, result.converged
    ('amp', True)
    """
    problem.check_single_head("amp")
    problem.check_training_set()
    o = options or AMPOptions()
    n_test = o.n_test
    t0 = time.perf_counter()
    s_target, s_train, s_test, _ = child_seeds(seed, 4)
    S0 = sample_target(problem.target, problem.d, s_target)
    train = sample_sequences(problem, S0, problem.n, s_train)
    test = sample_sequences(problem, S0, int(n_test), s_test)
    run = run_amp(problem, train, S0=S0, options=o, callback=callback)
    S, S0_np = run.S, S0.numpy()
    metrics, common = measure_estimate(problem, S, S0_np, train, test, rank_tol=o.rank_tol)
    extras: dict[str, Any] = {
        **common,
        "history": run.history,
        "objective": run.history["objective"][-1],
        "Sigma": run.V,
        "tau": run.tau,
        "bayes": bool(o.bayes),
        "damping": run.history["damping"][-1],
        "seed": int(seed),
        "version": __version__,
        "n": problem.n,
        "n_test": int(n_test),
    }
    if return_matrices:
        extras["S"] = S
        extras["S0"] = S0_np
    finite_res = [r for r in run.history["residual"] if math.isfinite(r)]
    res = finite_res[-1] if finite_res else math.nan
    message = (
        f"converged: relative change {res:.1e} < tol {o.tol:.1e}"
        if run.converged
        else f"not converged after {run.iterations} iterations (relative change {res:.1e})"
    )
    return Result(
        "amp",
        problem.to_dict(),
        **metrics,
        converged=bool(run.converged),
        iterations=int(run.iterations),
        runtime_s=time.perf_counter() - t0,
        message=message,
        extras=extras,
    )


def bayes_amp(problem: Problem, seed: int = 0, *, options: AMPOptions | None = None, **kwargs: Any) -> Result:
    """Bayes-GAMP (GAMP-RIE): :func:`amp` with ``AMPOptions(bayes=True)``.

    Uses the rotation-invariant (RIE) denoiser of the target's spectral law instead of the
    ERM soft threshold; measured like :func:`amp` (test error per sequence, matrix error per ``d``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.amp import bayes_amp
    >>> result = bayes_amp(Problem(d=30, T=2, alpha=0.1), seed=0)  # doctest: +SKIP
    >>> result.test_error  # doctest: +SKIP
    """
    return amp(problem, seed, options=(options or AMPOptions()).replace(bayes=True), **kwargs)
