"""Fixed point of the untied state evolution: output side (:mod:`.output`) and prior side (:mod:`.prior`).

Twelve order parameters: ``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)`` and their conjugates
(``_s``: symmetric part of the learned matrix, ``_a``: antisymmetric part). The fixed point of
``x -> prior(output(x))`` is found by Anderson-accelerated iteration with a damped fallback.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from singlehead.model.results import Result
from singlehead.model.students import ANTISYMMETRIC_BLOCK, SYMMETRIC_BLOCK
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.prior import PriorModel, prior_model
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.untied.options import UntiedSEOptions, UntiedTheory
from singlehead.state_evolution.untied.output import block_sizes, collapse_hats, untied_output_side, untied_test_errors
from singlehead.state_evolution.untied.prior import UntiedPriorSample
from singlehead.state_evolution.untied.teachers import teacher_norms, teacher_sampler

__all__ = ["UntiedSEOptions", "UntiedTheory", "untied_theory", "untied_result", "teacher_sampler", "teacher_norms"]

_OVERLAPS = ("q_s", "m_s", "Sigma_s", "q_a", "m_a", "Sigma_a")
_SIGMAHAT_FLOOR = 1e-3


class _Map:
    """``x -> prior(output(x))`` with warm starts carried between calls."""

    def __init__(self, problem: Any, options: UntiedSEOptions, sample: UntiedPriorSample, symmetric_teacher: bool,
                 like: "_Map | None" = None, quad: OutputQuadrature | None = None):
        """``like``: a map of the same task (other ``lam`` or draws) whose node set and exact prior model
        are reused (read and built once per :func:`untied_theory`, not once per map); ``quad``: the
        output side's node set (default: ``options``' scrambled Sobol nodes in ``2 T^2`` dimensions)."""
        self.problem, self.options, self.sample = problem, options, sample
        self.student = problem.student
        self.Q0s, self.Q0a = sample.teacher_norms()
        K, self.Ka = block_sizes(problem.T)
        if like is not None:
            self.quad = like.quad
        elif quad is not None:
            self.quad = quad
        else:
            self.quad = OutputQuadrature.sobol(2 * (K + self.Ka), options.n_points, options.n_scrambles, options.seed)
        self.exact = options.exact_symmetric and self.Ka == 0 and symmetric_teacher
        if self.exact:
            self.prior_model = like.prior_model if like is not None else prior_model(problem)
            self.Q0s = float(self.prior_model.Q0)
        self.warm_prior = None
        self.warm_out = None
        self.last_out = None
        self.last_prior = None
        self.used_sampled = False  # whether the last evaluation used the student's block prior side
        self.evaluations = 0
        # the prox's own tolerance follows the fixed point's residual (an inexact iteration: far from
        # the fixed point a 1e-11 prox is wasted), down to 1e-3 tol at the end
        self.prior_tol = 1e-6

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        out = untied_output_side(x, problem=self.problem, Q0s=self.Q0s, Q0a=self.Q0a, quad=self.quad,
                                 warm=self.warm_out)
        self.warm_out = out.branches
        self.last_out = out
        qs, ms, Ss = out.hats[:3]
        tied = self.student.tied_counterpart(qs, self.problem.lam) if self.exact else None
        if tied is not None:
            side = tied.prior_side(qs, ms, Ss, lam=self.problem.lam, kappa=self.problem.kappa, prior=self.prior_model)
            self.last_prior, self.used_sampled = side, False
            return np.array([side.q, side.m, side.Sigma, 0.0, 0.0, 1.0])
        self.used_sampled = True
        hats = out.hats.copy()
        # a transient negative curvature (far from the fixed point) is floored: the prox needs Sigmahat >= 0
        hats[[2, 5]] = np.maximum(hats[[2, 5]], _SIGMAHAT_FLOOR * max(abs(hats[2]), abs(hats[5])))
        if self.Ka == 0:
            hats[5] = 0.0
        else:
            # labels without an antisymmetric part drive qhat_a to an exact 0; a floor keeps Sigma_a (the
            # response, by Stein's lemma) defined there, at a cost of q_a ~ 1e-12 qhat_s
            hats[3] = max(hats[3], 1e-12 * hats[0])
        side = self.student.block_prior_side(hats, lam=self.problem.lam, kappa=self.problem.kappa, sample=self.sample,
                                             warm=self.warm_prior, tol=self.prior_tol)
        self.warm_prior = side.solutions
        self.last_prior = side
        new = side.values.copy()
        if self.Ka == 0:
            new[3:] = (0.0, 0.0, 1.0)  # no antisymmetric fields: M_a = 0, Sigma_a unused
        return new


def _anderson_step(X: list[np.ndarray], F: list[np.ndarray]) -> np.ndarray:
    """Anderson (type II) extrapolation from iterates ``X`` and their images ``F``."""
    R = np.array([f - x for x, f in zip(X, F)])
    if len(X) == 1:
        return F[-1]
    dR = np.diff(R, axis=0)
    dF = np.diff(np.array(F), axis=0)
    gamma = np.linalg.lstsq(dR.T, R[-1], rcond=None)[0]
    return F[-1] - gamma @ dF


def _residual(x: np.ndarray, fx: np.ndarray, Q0: float) -> float:
    """Largest change of an overlap, relative to its value, or to ``1e-3 Q0`` for overlaps near 0
    (``q_a`` decays geometrically to an exact 0 when the labels carry no antisymmetric part)."""
    return float(np.max(np.abs(fx - x) / np.maximum(np.abs(fx), 1e-3 * Q0)))


def _valid(x: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(x)) and x[0] >= 0 and x[2] > 0 and x[3] >= 0 and x[5] > 0)


def _settings(problem: Any, options: SEOptions | UntiedSEOptions | None, prior: Any,
              quad: OutputQuadrature | None) -> UntiedSEOptions:
    """The solver's settings for ``problem``; ``ValueError`` naming whatever does not apply to its student."""
    student = problem.student
    if student.field_blocks() != (SYMMETRIC_BLOCK, ANTISYMMETRIC_BLOCK):
        raise ValueError(f"student {student.name!r}: this state evolution solves the fields of a symmetric and an "
                         f"antisymmetric block (Student.field_blocks), not {student.field_blocks()!r}")
    if isinstance(prior, PriorModel) or prior not in ("auto", "asymptotic"):
        raise ValueError(f"prior={prior!r} does not apply to the {student.name} student: its prior side averages "
                         "sampled instances of the teacher's asymptotic law (set their size with "
                         "SEOptions.sample_dim and sample_draws); use 'auto' or 'asymptotic'")
    opts = options if isinstance(options, UntiedSEOptions) else \
        UntiedSEOptions.from_options(options if options is not None else SEOptions(), student)
    if quad is not None:
        K, Ka = block_sizes(problem.T)
        if quad.flat.shape[1] != 2 * (K + Ka):
            raise ValueError(f"quad has {quad.flat.shape[1]} dimensions; the {student.name} student's output side "
                             f"needs 2 T^2 = {2 * (K + Ka)} (a teacher and a student field per logit)")
    return opts


def untied_theory(problem: Any, *, options: SEOptions | UntiedSEOptions | None = None, prior: str = "auto",
                  quad: OutputQuadrature | None = None, start: dict[str, float] | None = None) -> UntiedTheory:
    """State evolution of ERM with a non-symmetric student (derivation: ``docs/untied_theory.rst``).

    Parameters
    ----------
    problem : Problem
        Task, student and regularisation (``alpha, T, channel, beta, beta0, noise, target, kappa,
        lam, student``). The student declares a symmetric and an antisymmetric block of fields
        (:meth:`~singlehead.model.students.Student.field_blocks`) and supplies the prior side on them
        (:meth:`~singlehead.model.students.Student.block_prior_side`).
    options : SEOptions or UntiedSEOptions
        Solver settings; :class:`~singlehead.state_evolution.SEOptions` are translated by
        :meth:`UntiedSEOptions.from_options`, which raises ``ValueError`` naming an option that
        does not apply here.
    prior : {"auto", "asymptotic"}
        The teacher side (both: the teacher's asymptotic law at the instances' dimension); others raise.
    quad : OutputQuadrature
        Output-side node set in ``2 T^2`` dimensions (default: from the options).
    start : dict
        Initial overlaps (e.g. a neighbouring point's ``overlaps``).

    Returns
    -------
    UntiedTheory
        The fixed point of the map averaged over all draws. With ``options.draw_errors`` and a
        sampled prior side the fixed point is also solved leaving each draw out (from the pooled
        one); their jackknife standard error is the prior's sampling error (``se["<metric>_draws"]``),
        added in quadrature to the output quadrature's error in ``se["<metric>"]``.
    """
    t0 = time.perf_counter()
    opts = _settings(problem, options, prior, quad)
    draw, symmetric = teacher_sampler(problem.target)
    sample = UntiedPriorSample.draw(draw, opts.D, opts.draws, opts.seed).normalised(*teacher_norms(problem))
    F = _Map(problem, opts, sample, symmetric, quad=quad)
    if _collapsed(problem, F):
        return _result(problem, F, np.zeros(6), True, 0, 0.0, time.perf_counter() - t0)
    budget = opts.max_evals if opts.max_evals is not None else math.inf
    maps = [F]
    x0 = None if start is None else np.array([start[k] for k in _OVERLAPS], dtype=float)
    if x0 is None and opts.continuation and problem.lam < opts.continuation_from:
        # small lam (Sigma ~ 1/lam below interpolation): continue down from continuation_from in decades
        for lam in _continuation(problem.lam, opts.continuation_from):
            Fc = _Map(problem.replace(lam=lam), opts, sample, symmetric, like=F)
            maps.append(Fc)
            xc, ok, _, _ = _solve(Fc, x0, opts, budget - sum(m.evaluations for m in maps))
            x0 = xc if ok else x0
    x, converged, it, residual = _solve(F, x0, opts, budget - sum(m.evaluations for m in maps))
    res = _result(problem, F, x, converged, it, residual, math.nan)
    res.evaluations = int(sum(m.evaluations for m in maps))
    if opts.draw_errors and opts.draws > 1 and F.used_sampled and F.last_prior.sampled:
        _add_draw_errors(res, F, symmetric, x)
    res.seconds = time.perf_counter() - t0
    return res


def _continuation(lam: float, start: float) -> list[float]:
    """``start, start/10, ...`` down to (not including) ``lam``."""
    out, v = [], start
    while v > lam * 1.5:
        out.append(v)
        v /= 10.0
    return out


def _solve(F: _Map, x: np.ndarray | None, opts: UntiedSEOptions, budget: float = math.inf
           ) -> tuple[np.ndarray, bool, int, float]:
    """Anderson-accelerated iteration of ``F`` from ``x`` (default: a generic start), within ``max_iter``
    iterations and ``budget`` evaluations of ``F``."""
    if x is None:
        x = np.array([0.5 * F.Q0s, 0.4 * F.Q0s, 1.0, 0.2 * max(F.Q0s, F.Q0a), 0.2 * F.Q0a, 1.0])
    x = x.copy()
    if F.Ka == 0:
        x[3:] = (0.0, 0.0, 1.0)
    X_hist: list[np.ndarray] = []
    F_hist: list[np.ndarray] = []
    converged, residual, it = False, math.inf, 0
    good = x
    for it in range(1, opts.max_iter + 1):
        if F.evaluations >= budget:
            it -= 1  # this iteration was not taken
            break
        try:
            fx = F(x)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            fx = np.full(6, np.nan)
        if fx[0] == 0.0 and fx[3] == 0.0:
            # the prior collapsed at a transient point (the collapse fixed point was excluded above)
            fx = 0.5 * x
        if not _valid(fx):
            # an overshoot out of the domain (a negative curvature, an overflow): back towards the
            # last valid iterate, and forget the extrapolation history
            if x is good:
                break  # the map fails at the last valid iterate itself: return it, unconverged
            x = 0.5 * (x + good)
            X_hist, F_hist = [], []
            continue
        good = x
        residual = _residual(x, fx, F.Q0s + F.Q0a)
        F.prior_tol = min(1e-6, max(1e-3 * opts.tol, 1e-2 * residual))
        if residual < opts.tol:
            x, converged = fx, True
            break
        X_hist.append(x)
        F_hist.append(fx)
        X_hist, F_hist = X_hist[-(opts.anderson + 1):], F_hist[-(opts.anderson + 1):]
        cand = _anderson_step(X_hist, F_hist) if opts.anderson else fx
        x = cand if _valid(cand) else (1 - opts.damping) * x + opts.damping * fx
    if x[0] > 0.0:
        F(x)  # the output and prior sides at the returned point (a report, outside the budget)
    return x, converged, it, residual


_DRAW_METRICS = ("test_error", "test_error_noisy", "train_error", "matrix_error", "asymmetry", "rank_fraction")


def _add_draw_errors(res: "UntiedTheory", like: _Map, symmetric: bool, x: np.ndarray) -> None:
    """Jackknife over the prior's draws: the fixed point without draw ``r``, for each ``r``, from ``x``.

    ``se^2 = (R-1)/R sum_r (theta_(r) - mean)^2`` estimates the sampling variance of the pooled fixed
    point. Leave-one-out maps stay close to the pooled one, so they converge where it does; fixed points
    on single draws do not near interpolation (at ``lam = 1e-4``, 3 of 4 did not within 300 iterations).
    ``se["draws_converged"]`` counts the leave-one-out solves that converged.
    """
    problem, opts, sample = like.problem, like.options, like.sample
    R = sample.draws
    rows, ok_count = [], 0
    for r in range(R):
        keep = [i for i in range(R) if i != r]
        loo = UntiedPriorSample(sample.M0[keep], sample.Zs[keep], sample.Za[keep])
        F = _Map(problem, opts, loo, symmetric, like=like)
        # an error bar needs a few digits only: the leave-one-out fixed points stop at 1e-5
        xr, ok, _, _ = _solve(F, x, dataclasses.replace(opts, tol=max(opts.tol, 1e-5)))
        ok_count += bool(ok)
        rr = _result(problem, F, xr, ok, 0, 0.0, math.nan)
        rows.append([getattr(rr, k) for k in _DRAW_METRICS] + [rr.overlaps[k] for k in _OVERLAPS])
    arr = np.array(rows)
    spread = np.sqrt((R - 1) / R * np.sum((arr - arr.mean(axis=0)) ** 2, axis=0))
    res.se["draws_converged"] = float(ok_count)
    for k, v in zip(_DRAW_METRICS + _OVERLAPS, spread):
        res.se[f"{k}_draws"] = float(v)
        base = res.se.get(k, 0.0)
        res.se[k] = float(math.hypot(base if math.isfinite(base) else 0.0, v))


def _collapsed(problem: Any, F: _Map) -> bool:
    """Whether complete collapse (``M = 0``) is a fixed point: the student's prior side maps the collapse
    conjugates (:func:`.output.collapse_hats`) to 0 on every instance."""
    hats = collapse_hats(problem=problem, Q0s=F.Q0s, Q0a=F.Q0a, quad=F.quad)
    return F.student.block_collapsed(hats, lam=problem.lam, sample=F.sample)


def _result(problem: Any, F: _Map, x: np.ndarray, converged: bool, it: int, residual: float,
            seconds: float) -> UntiedTheory:
    out, side = F.last_out, F.last_prior
    errs = untied_test_errors(x, problem=problem, Q0s=F.Q0s, Q0a=F.Q0a, quad=F.quad)
    if out is None:  # collapsed before any iteration
        return UntiedTheory(overlaps=dict.fromkeys(_OVERLAPS, 0.0), hats={}, test_error=errs["test_error"],
                            test_error_noisy=errs["test_error_noisy"], train_error=math.nan,
                            matrix_error=F.Q0s + F.Q0a, asymmetry=math.nan, rank_fraction=0.0, converged=True,
                            iterations=0, residual=0.0, se={"test_error": errs["test_error_se"]},
                            prior="collapse", seconds=seconds)
    qs, ms, _, qa, ma, _ = x
    q, m = qs + qa, ms + ma
    se = {f"{k}_quadrature": v for k, v in out.err.items()}
    se.update(test_error=errs["test_error_se"], test_error_noisy=errs["test_error_noisy_se"])
    sampled = F.used_sampled and side.sampled
    if not F.used_sampled:
        prior = "exact (tied prior)"
    else:
        prior = f"sampled D={F.options.D} x {F.options.draws}" if sampled else "closed form"
    penalty = side.penalty if F.used_sampled else math.nan
    return UntiedTheory(
        overlaps=dict(zip(_OVERLAPS, map(float, x))), hats=dict(zip(("qhat_s", "mhat_s", "Sigmahat_s", "qhat_a",
                                                                        "mhat_a", "Sigmahat_a"), map(float, out.hats))),
        test_error=errs["test_error"], test_error_noisy=errs["test_error_noisy"], train_error=out.train_error,
        matrix_error=float(F.Q0s + F.Q0a - 2 * m + q), asymmetry=float(2 * math.sqrt(qa / q)) if q > 0 else math.nan,
        rank_fraction=float(side.rank_fraction), converged=converged, iterations=it, residual=residual, se=se,
        singular_values=side.singular_values if sampled else None,
        prior=prior, seconds=seconds, penalty=float(penalty))


def untied_result(problem: Any, *, options: SEOptions | UntiedSEOptions | None = None, prior: str = "auto",
                  quad: OutputQuadrature | None = None, init: Any = None) -> Result:
    """:func:`untied_theory` as the library's :class:`~singlehead.model.results.Result` (``source="theory"``).

    ``penalty`` is the student's ``lam pen(Mhat)/d`` on the prior's instances; ``extras`` holds the
    twelve order parameters, ``asymmetry``, the standard errors (``*_se``), ``prior`` (how the prior
    side was computed) and ``evaluations`` (map evaluations, continuation included). ``init``: a
    previous untied ``Result`` (its overlaps start the iteration); anything else is ignored (a tied
    warm start does not carry the antisymmetric block). ``options``, ``prior``, ``quad``: as in
    :func:`untied_theory`.
    """
    start = None
    extras0 = getattr(init, "extras", None)
    if isinstance(extras0, dict) and all(k in extras0 for k in _OVERLAPS):
        start = {k: float(extras0[k]) for k in _OVERLAPS}
    u = untied_theory(problem, options=options, prior=prior, quad=quad, start=start)
    sv = u.singular_values
    extras: dict[str, Any] = {**u.overlaps, **u.hats, "asymmetry": u.asymmetry, "prior": u.prior,
                              "residual": u.residual, "evaluations": u.evaluations}
    extras.update({f"{k}_se": v for k, v in u.se.items()})
    if sv is not None:
        # the learned singular-value law (the prior's instances): zero mass and a histogram of the rest
        nz = sv[sv > 0]
        density, edges = np.histogram(nz, bins=48, density=True) if nz.size else (np.zeros(0), np.zeros(0))
        extras.update(zero_fraction=float(np.mean(sv == 0)), sv_edges=edges.tolist(),
                      sv_density=(density * nz.size / sv.size).tolist())
    return Result(source="theory", problem=problem.to_dict(), test_error=u.test_error,
                  test_error_noisy=u.test_error_noisy, train_error=u.train_error, penalty=u.penalty,
                  matrix_error=u.matrix_error, rank_fraction=u.rank_fraction, converged=u.converged,
                  iterations=u.iterations, runtime_s=u.seconds,
                  message="" if u.converged else f"untied SE not converged (residual {u.residual:.2e})",
                  extras=extras)
