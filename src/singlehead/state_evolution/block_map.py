"""The SE map of a non-symmetric student: a symmetric and an antisymmetric block of fields.

A student whose ``field_blocks()`` are ``(s, a)`` (the untied student, or any registered
non-symmetric one) has six overlaps ``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)``: the logits see
the symmetric part ``M_s`` of the learned matrix through ``T(T+1)/2`` fields per sequence and the
antisymmetric part ``M_a`` through ``T(T-1)/2`` (docs: :doc:`untied_theory`). :class:`BlockSEMap`
composes the block output side (:mod:`.untied.output`) with the student's own prior side on the
blocks (``Student.block_prior_side``: closed form, or averaged over sampled instances) and is
solved by the same stages as the one-block map (:mod:`.stages`: coarse, full, continuation in
``lam``, the re-solve with every prox start, the quadrature floor, the budget).

Which blocks the solver iterates: both, except where the antisymmetric block is *empty* — no
antisymmetric fields (``T = 1``), or a symmetric teacher seen through a channel with closed-form,
block-independent output sides (linear): there ``M_a = 0`` at the fixed point whatever the
symmetric block does, and its response ``Sigma_a`` (which feeds back into nothing observable) is
carried along by plain iteration. :class:`BlockPoint` holds what one theory point needs (the
prior's instances, the teacher norms, the collapse test) and builds its :class:`~singlehead.Result`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.fixed_point import in_domain
from singlehead.state_evolution.options import SEOptions, WarmStart
from singlehead.state_evolution.output import Q_FLOOR
from singlehead.state_evolution.prior import PriorModel, prior_model
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.se_map import (
    FLOOR_FRACTION,
    DrivenToCollapse,
    EvalCounter,
    MapCore,
    MapSettings,
    ProxBranches,
)
from singlehead.state_evolution.stages import stage_message, training_objective
from singlehead.state_evolution.untied.output import (
    UntiedOutput,
    block_sizes,
    collapse_hats,
    untied_output_side,
    untied_test_errors,
)
from singlehead.state_evolution.untied.prior import UntiedPriorSample, extrapolated_side
from singlehead.state_evolution.untied.teachers import teacher_norms, teacher_sampler

__all__ = [
    "OVERLAPS",
    "HATS",
    "BlockPoint",
    "BlockSEMap",
    "BlockSetup",
    "check_block_options",
    "block_result",
    "collapsed_block_result",
    "add_draw_errors",
    "t_quantile_975",
    "COARSE_DRAWS",
    "LIGHT_FRACTION",
]

#: the six overlaps and their conjugates, in the order of the map's full point
OVERLAPS = ("q_s", "m_s", "Sigma_s", "q_a", "m_a", "Sigma_a")
HATS = ("qhat_s", "mhat_s", "Sigmahat_s", "qhat_a", "mhat_a", "Sigmahat_a")
#: a transient negative curvature (far from the fixed point) is floored at this fraction of the larger one
_SIGMAHAT_FLOOR = 1e-3
#: labels without an antisymmetric part drive qhat_a to an exact 0; this floor (relative to qhat_s) keeps
#: Sigma_a (the response, by Stein's lemma) defined there, at a cost of q_a ~ 1e-12 qhat_s
_QHAT_A_FLOOR = 1e-12
#: instances at half the dimension per instance at the full one (extrapolated prior side): the variance of
#: ``2 F_D - F_{D/2}`` per unit cost is least at ``sqrt(c)`` coarse draws per fine one when a draw's values
#: spread as ``1/D`` and a coarse draw costs ``1/c`` of a fine one (batched SVDs at D = 100 vs 50: c ~ 3.4)
COARSE_DRAWS = 2
#: the maps on a thinned node set (the coarse stage, the continuation in ``lam``) average the prior side over
#: ``1/LIGHT_FRACTION`` of the draws of each size: they only bring the solve near the fixed point, which the
#: full map (every draw) then locates
LIGHT_FRACTION = 4
#: relative step of the finite-difference Jacobian of the linear response (draw errors)
_RESPONSE_STEP = 1e-3
#: options the block solver has no counterpart for, with the reason
#: the block model's values of the options that ``SEOptions`` leaves at ``None``
BLOCK_DEFAULTS = {"tol": 1e-6, "sample_draws": 8, "sample_extrapolate": True}

_NOT_APPLIED = {
    "prox_branch": "its output side takes the global prox minimum only",
    "draws": "it has no finite-d GOE prior mode (its prior side samples instances: sample_dim, sample_draws)",
}


def check_block_options(options: SEOptions, prior: Any, quad: OutputQuadrature | None, problem: Problem) -> None:
    """Raise ``ValueError`` naming whatever does not apply to a non-symmetric student's state evolution.

    Not applied: ``prox_branch`` other than ``"global"`` and ``draws`` away from its default (no
    counterpart), ``n_scrambles < 2`` (the error bars and the floor come from the scrambles),
    ``prior`` other than ``"auto"``/``"asymptotic"`` and a ``quad`` whose dimension is not ``2 T^2``.
    Every other option acts as it does for a symmetric student (``exact_jacobian`` where the map
    has an exact Jacobian: this one has none, so the root finder uses secant updates).
    """
    student = problem.student
    defaults = SEOptions()
    for name, why in _NOT_APPLIED.items():
        if getattr(options, name) != getattr(defaults, name):
            raise ValueError(
                f"options.{name} does not apply to the {student.name} student: {why} "
                f"(got {getattr(options, name)!r}; leave it at {getattr(defaults, name)!r})"
            )
    if options.n_scrambles < 2:
        raise ValueError(
            f"options.n_scrambles must be >= 2 for the {student.name} student (its output side's "
            f"error bars and quadrature floor come from the spread over scrambles; got "
            f"{options.n_scrambles!r})"
        )
    if isinstance(prior, PriorModel) or prior not in ("auto", "asymptotic"):
        raise ValueError(
            f"prior={prior!r} does not apply to the {student.name} student: its prior side averages "
            "sampled instances of the teacher's asymptotic law (set their size with "
            "SEOptions.sample_dim and sample_draws); use 'auto' or 'asymptotic'"
        )
    if quad is not None:
        K, Ka = block_sizes(problem.T)
        if quad.flat.shape[1] != 2 * (K + Ka):
            raise ValueError(
                f"quad has {quad.flat.shape[1]} dimensions; the {student.name} student's output side "
                f"needs 2 T^2 = {2 * (K + Ka)} (a teacher and a student field per logit)"
            )


@dataclass(frozen=True)
class BlockPoint:
    """What every map of one non-symmetric theory point shares.

    ``sample``: the prior's instances (drawn with ``SEOptions.instance_seed``, teachers normalised to
    ``Q0_s``, ``Q0_a``); ``coarse``: with ``SEOptions.sample_extrapolate``, ``3 sample_draws`` instances at
    half the dimension (an independent stream of the same seed), else ``None``; ``exact``: the tied student's exact
    prior model where it may replace the sampled
    prior side (``T = 1``, symmetric teacher; ``None`` elsewhere); ``iterated``: how many blocks the
    solver iterates (2, or 1 when the antisymmetric block is empty, see the module docstring).
    """

    problem: Problem
    sample: UntiedPriorSample
    Q0s: float
    Q0a: float
    Ka: int
    exact: PriorModel | None
    iterated: int
    coarse: UntiedPriorSample | None = None

    @classmethod
    def build(cls, problem: Problem, options: SEOptions) -> BlockPoint:
        """The point's instances and teacher norms for ``problem`` under ``options`` (its ``None`` fields the
        block model's :data:`BLOCK_DEFAULTS`)."""
        options = options.resolved(BLOCK_DEFAULTS)
        problem.student.field_blocks()  # a student without blocks raises here
        draw, symmetric_teacher = teacher_sampler(problem.target)
        Q0s, Q0a = teacher_norms(problem)
        seed = options.instance_seed
        sample = UntiedPriorSample.draw(draw, options.sample_dim, options.sample_draws, seed).normalised(Q0s, Q0a)
        coarse = (
            UntiedPriorSample.draw(
                draw, options.sample_dim // 2, COARSE_DRAWS * options.sample_draws, [seed, 1]
            ).normalised(Q0s, Q0a)
            if options.sample_extrapolate
            else None
        )
        Ka = block_sizes(problem.T)[1]
        exact = prior_model(problem) if Ka == 0 and symmetric_teacher else None
        if exact is not None:
            Q0s = float(exact.Q0)
        empty = Ka == 0 or (Q0a == 0.0 and not problem.channel.needs_quadrature)
        return cls(problem, sample, Q0s, Q0a, Ka, exact, 1 if empty else 2, coarse)

    def with_sample(self, sample: UntiedPriorSample) -> BlockPoint:
        """The same point on other instances (a subset of the draws, say)."""
        return replace(self, sample=sample)

    def light(self) -> BlockPoint:
        """The same point on the first ``1/LIGHT_FRACTION`` of each size's draws (at least one): the prior side of
        the maps that only bring the solve near the fixed point (thinned node sets)."""

        def head(sample: UntiedPriorSample | None) -> UntiedPriorSample | None:
            if sample is None:
                return None
            n = max(1, sample.draws // LIGHT_FRACTION)
            return UntiedPriorSample(sample.M0[:n], sample.Zs[:n], sample.Za[:n])

        return replace(self, sample=head(self.sample), coarse=head(self.coarse))

    @property
    def Q0(self) -> tuple[float, ...]:
        """The teacher norm of each iterated block."""
        return (self.Q0s,) if self.iterated == 1 else (self.Q0s, self.Q0a)

    def full(self, x: np.ndarray, sigma_a: float) -> np.ndarray:
        """The six overlaps of an iterated point ``x`` (an empty antisymmetric block: ``0, 0, sigma_a``)."""
        x = np.asarray(x, float)
        return x.copy() if self.iterated == 2 else np.concatenate([x[:3], [0.0, 0.0, sigma_a]])

    def default_start(self) -> np.ndarray:
        """``(Q0_s/2, 0.4 Q0_s, 1)`` and, iterated, ``(0.2 max(Q0_s, Q0_a), 0.2 Q0_a, 1)`` for the antisymmetric
        block."""
        x = [0.5 * self.Q0s, 0.4 * self.Q0s, 1.0]
        if self.iterated == 2:
            x += [0.2 * max(self.Q0s, self.Q0a), 0.2 * self.Q0a, 1.0]
        return np.array(x)

    def start_point(self, init: Any) -> np.ndarray:
        """The iterated start from ``init`` (a block result, a ``WarmStart`` or six overlaps) if admissible,
        else :meth:`default_start`."""
        x = None
        extras = getattr(init, "extras", None)
        if isinstance(extras, dict) and all(k in extras for k in OVERLAPS):
            x = np.array([extras[k] for k in OVERLAPS], float)
        elif isinstance(init, WarmStart):
            x = np.asarray(init.x, float)
        elif init is not None and not isinstance(init, Result) and np.size(init) in (3, 6):
            x = np.asarray(init, float).ravel()
        if x is not None and x.size == 6:
            x = x[: 3 * self.iterated]
        if x is None or x.size != 3 * self.iterated or not in_domain(x, self.Q0):
            return self.default_start()
        return x

    def prior_conjugates(self, hats: np.ndarray) -> np.ndarray:
        """The conjugates at which the student's sampled prior side is evaluated: ``hats`` with each ``Sigmahat_B``
        floored at ``1e-3`` of the larger one, and ``qhat_a`` at ``1e-12 qhat_s`` (``Sigmahat_a = 0`` without
        antisymmetric fields)."""
        h = np.array(hats, float)
        h[[2, 5]] = np.maximum(h[[2, 5]], _SIGMAHAT_FLOOR * max(abs(h[2]), abs(h[5])))
        if self.Ka == 0:
            h[5] = 0.0
        else:
            h[3] = max(h[3], _QHAT_A_FLOOR * h[0])
        return h

    def collapse_holds(self, quad: OutputQuadrature | None) -> bool:
        """Whether complete collapse (``M = 0``) is a fixed point: the student's prior side maps the collapse
        conjugates (``untied.output.collapse_hats``) to 0 on every instance."""
        hats = collapse_hats(problem=self.problem, Q0s=self.Q0s, Q0a=self.Q0a, quad=quad)
        return bool(self.problem.student.block_collapsed(hats, lam=self.problem.lam, sample=self.sample))


class BlockSEMap(MapCore):
    """The SE map of a non-symmetric student on its iterated blocks (see the module docstring), with the
    output side's prox branches tracked along the solve and the prior side's solutions warm-started.

    ``point``: the :class:`BlockPoint`; settings, counter, branches and modes as in
    ``se_map.MapCore``. The sampled prior side is an iterative estimator whose accuracy
    follows the residual (``1e-4`` of it, between ``1e-3 tol`` and ``1e-6``): far from the fixed
    point a fully accurate prior side is wasted. Without an exact Jacobian, its damped pre-iteration is
    Anderson-accelerated (``pre_iteration_history = 4``): plain iteration of the two blocks can circle
    a fixed point that it does not approach (seq2lab, ``T = 2``, ``alpha = 0.5``, ``lam = 1e-2``). Its root
    finder stops once the residual is below ``tol`` (``root_stop_fraction = 1``; a one-block map's goes on to
    ``0.1 tol``): an evaluation costs a batch of matrix denoisers, and the convergence verdict asks ``10 tol``.
    """

    pre_iteration_history = 4
    root_stop_fraction = 1.0

    def __init__(
        self,
        problem: Problem,
        point: BlockPoint,
        quad: OutputQuadrature | None,
        settings: MapSettings | None = None,
        *,
        counter: EvalCounter | None = None,
        branches: ProxBranches | None = None,
        sigma_a: float = 1.0,
    ) -> None:
        super().__init__(problem, point, quad, settings, counter=counter, branches=branches)
        self.point = point
        self.sigma_a = sigma_a  # an empty antisymmetric block's response, carried by plain iteration
        self.warm_prior: Any = None
        self.prior_tol = 1e-6
        self.used_sampled = False  # whether the last evaluation used the student's block prior side

    # ---- the map protocol of the stages ------------------------------------------------
    @property
    def Q0(self) -> tuple[float, ...]:
        return self.point.Q0

    def default_start(self) -> np.ndarray:
        return self.point.default_start()

    def starts(self) -> list[np.ndarray]:
        return [self.point.default_start()]

    def sibling(
        self, problem: Problem | None = None, quad: OutputQuadrature | None = None, **changes: Any
    ) -> BlockSEMap:
        """A map of ``problem`` (default this one's) on ``quad`` sharing this one's evaluation count and budget,
        its settings changed by ``changes``, without floor and tracked branches; on a node set thinner than
        this one's, with the prior side on :meth:`BlockPoint.light`."""
        settings = replace(self.settings, budget=self.budget, floor_after=None, **changes)
        pt = self.point if problem is None else replace(self.point, problem=problem)
        if quad is not None and self.quad is not None and quad.flat.shape[0] < self.quad.flat.shape[0]:
            pt = pt.light()  # a thinned node set: a map that only brings the solve near the fixed point
        return BlockSEMap(pt.problem, pt, quad, settings, counter=self.counter, sigma_a=self.sigma_a)

    def _evaluated(self, residual: float) -> None:
        self.prior_tol = min(1e-6, max(1e-3 * self.settings.tol, 1e-4 * residual))

    def floor_at(self, x: np.ndarray, out: UntiedOutput) -> float:
        """The quadrature floor of the residual at ``x``: ``0.1`` of the standard error over the node scrambles
        of one SE step (the prior side applied to each scramble's conjugates), in the residual's units
        (as ``se_map.residual_floor``); ``0`` for a closed-form output side."""
        per = out.scramble_hats
        if per is None:
            return 0.0
        try:
            fs = np.array([self._prior(h, update=False)[0][: 3 * self.point.iterated] for h in per])
        except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
            return math.nan
        if not np.all(np.isfinite(fs)) or per.shape[0] < 2:
            return math.nan
        se = fs.std(axis=0, ddof=1) / math.sqrt(per.shape[0])
        Qt = sum(self.Q0)
        terms = []
        for b in range(self.point.iterated):
            terms += [se[3 * b] / Qt, se[3 * b + 1] / Qt, se[3 * b + 2] / max(abs(float(x[3 * b + 2])), 1e-300)]
        return FLOOR_FRACTION * float(max(terms))

    # ---- one evaluation ----------------------------------------------------------------
    def evaluate_full(self, x6: np.ndarray, mode: str = "warm") -> tuple[np.ndarray, UntiedOutput, Any]:
        """``(F(x) on all six overlaps, output side, prior side)`` at the six overlaps ``x6`` (not counted)."""
        pt = self.point
        tracked = self.branches
        out = untied_output_side(
            x6,
            problem=self.problem,
            Q0s=pt.Q0s,
            Q0a=pt.Q0a,
            quad=self.quad,
            warm=None if mode == "cold" else tracked.main,
            union=mode == "union",
        )
        if out.branches is not None and mode != "cold":
            tracked.main = out.branches
        new, side = self._prior(out.hats)
        return new, out, side

    def _prior(self, hats: np.ndarray, *, update: bool = True) -> tuple[np.ndarray, Any]:
        """The prior side at the conjugates ``hats``: the tied exact prior where it applies, else the student's
        block prior side (``update``: keep its solutions as the next call's warm start)."""
        pt, problem = self.point, self.problem
        qs, ms, Ss = (float(v) for v in hats[:3])
        tied = problem.student.tied_counterpart(qs, problem.lam) if pt.exact is not None else None
        if tied is not None:
            side = tied.prior_side(qs, ms, Ss, lam=problem.lam, kappa=problem.kappa, prior=pt.exact)
            if update:
                self.used_sampled = False
            return np.array([side.q, side.m, side.Sigma, 0.0, 0.0, 1.0]), side
        h = pt.prior_conjugates(hats)
        warm = self.warm_prior if isinstance(self.warm_prior, tuple) else (self.warm_prior, None)
        side = problem.student.block_prior_side(
            h, lam=problem.lam, kappa=problem.kappa, sample=pt.sample, warm=warm[0], tol=self.prior_tol
        )
        if pt.coarse is not None:
            coarse = problem.student.block_prior_side(
                h, lam=problem.lam, kappa=problem.kappa, sample=pt.coarse, warm=warm[1], tol=self.prior_tol
            )
            side = extrapolated_side(side, coarse)
        if update:
            self.warm_prior, self.used_sampled = side.solutions, True
        new = np.array(side.values, float)
        if pt.Ka == 0:
            new[3:] = (0.0, 0.0, 1.0)  # no antisymmetric fields: M_a = 0, Sigma_a unused
        return new, side

    def output_at(self, x6: np.ndarray) -> UntiedOutput:
        """The output side at the six overlaps ``x6`` from the tracked prox branches, which it leaves unchanged (not
        counted)."""
        pt = self.point
        return untied_output_side(
            x6, problem=self.problem, Q0s=pt.Q0s, Q0a=pt.Q0a, quad=self.quad, warm=self.branches.main
        )

    def prior_tangent(self, hats: np.ndarray) -> np.ndarray | None:
        """``dF_prior/d(prior conjugates)`` (6 x 6) of the sampled prior side at the conjugates ``hats`` (before
        :meth:`BlockPoint.prior_conjugates`), from the solutions of the last evaluation, which must have been at
        ``hats`` (the student's :meth:`~singlehead.model.students.Student.block_prior_tangent`, extrapolated in
        ``1/D`` like the values); ``None`` where the student has none there or the tied exact prior is used."""
        pt, problem = self.point, self.problem
        if not self.used_sampled:
            return None
        h = pt.prior_conjugates(hats)
        warm = self.warm_prior if isinstance(self.warm_prior, tuple) else (self.warm_prior, None)
        parts = []
        for sample, sol in ((pt.sample, warm[0]), (pt.coarse, warm[1])):
            if sample is None:
                continue
            if sol is None:
                return None
            t = problem.student.block_prior_tangent(
                h, lam=problem.lam, kappa=problem.kappa, sample=sample, solutions=sol
            )
            if t is None or not np.all(np.isfinite(t)):
                return None
            parts.append(t.mean(axis=0))
        return parts[0] if len(parts) == 1 else 2 * parts[0] - parts[1]

    def _evaluate(self, x: np.ndarray, mode: str) -> tuple[np.ndarray, UntiedOutput, Any]:
        new, out, side = self.evaluate_full(self.point.full(x, self.sigma_a), mode)
        if self.point.iterated == 1 and self.point.Ka and np.isfinite(new[5]) and new[5] > 0:
            self.sigma_a = float(new[5])
        fx = new[: 3 * self.point.iterated]
        if self.settings.stop_on_collapse and not fx[0] > 0 and not (self.point.iterated == 2 and fx[3] > 0):
            raise DrivenToCollapse
        return fx, out, side


# ---------------------------------------------------------------------------------------- result
def block_result(
    F: BlockSEMap,
    x: np.ndarray,
    out: UntiedOutput,
    side: Any,
    *,
    converged: bool,
    residual: float,
    floor: float,
    iterations: int,
    message: str,
    t0: float,
) -> Result:
    """The :class:`Result` of a non-symmetric fixed point ``x`` (iterated blocks) with its output and prior
    sides (the keys of ``extras`` are listed in :func:`~singlehead.state_evolution.theory`)."""
    problem, pt = F.problem, F.point
    x6 = pt.full(x, F.sigma_a)
    errs = untied_test_errors(x6, problem=problem, Q0s=pt.Q0s, Q0a=pt.Q0a, quad=F.quad)
    qs, ms, _, qa, ma, _ = map(float, x6)
    q, m = qs + qa, ms + ma
    se = {f"{k}_quadrature": v for k, v in out.err.items()}
    se.update(test_error=errs["test_error_se"], test_error_noisy=errs["test_error_noisy_se"])
    sampled = F.used_sampled and side.sampled
    rank_fraction = float(side.rank_fraction)
    if not F.used_sampled:
        prior = "exact (tied prior)"
        # the tied counterpart's prior side was used: its penalty at this point
        tied = problem.student.tied_counterpart(float(out.hats[0]), problem.lam)
        penalty = tied.se_penalty(problem.lam, qs, side) if tied is not None else math.nan
    else:
        prior = "closed form"
        if sampled:
            prior = f"sampled D={pt.sample.D} x {pt.sample.draws}"
            if pt.coarse is not None:
                prior += f", D={pt.coarse.D} x {pt.coarse.draws}, extrapolated in 1/D"
        penalty = float(side.penalty)
    if sampled:
        for k, v in zip(OVERLAPS, side.draw_se):
            se.setdefault(k, float(v))
    extras: dict[str, Any] = {
        **dict(zip(OVERLAPS, map(float, x6))),
        **dict(zip(HATS, map(float, out.hats))),
        "asymmetry": float(2 * math.sqrt(qa / q)) if q > 0 else math.nan,
        "prior": prior,
        "residual": float(residual),
        "residual_floor": float(floor),
        "evaluations": int(F.evaluations),
        "collapsed": False,
        "objective": training_objective(out.train_error, penalty, problem.alpha),
    }
    extras.update({f"{k}_se": float(v) for k, v in se.items()})
    sv = side.singular_values if sampled else None
    if sv is not None:
        # the learned singular-value law (the prior's instances): zero mass and a histogram of the rest
        nz = sv[sv > 0]
        density, edges = np.histogram(nz, bins=48, density=True) if nz.size else (np.zeros(0), np.zeros(0))
        extras.update(
            zero_fraction=float(np.mean(sv == 0)),
            sv_edges=edges.tolist(),
            sv_density=(density * nz.size / sv.size).tolist(),
            singular_values=sv.ravel().tolist(),
        )
    return Result(
        source="theory",
        problem=problem.to_dict(),
        test_error=errs["test_error"],
        test_error_noisy=errs["test_error_noisy"],
        train_error=float(out.train_error),
        penalty=penalty,
        matrix_error=float(pt.Q0s + pt.Q0a - 2 * m + q),
        rank_fraction=rank_fraction,
        converged=converged,
        iterations=int(iterations),
        runtime_s=time.perf_counter() - t0,
        message=message,
        extras=extras,
    )


def collapsed_block_result(point: BlockPoint, quad: OutputQuadrature | None, t0: float, iterations: int) -> Result:
    """The solution ``M = 0`` (complete rank collapse): every overlap 0; test errors of predicting with ``h = 0``,
    the train error the noisy-label one (``M = 0`` fits none of the noisy training labels)."""
    problem = point.problem
    errs = untied_test_errors(
        np.array([0.0, 0.0, 1.0, 0.0, 0.0, 1.0]), problem=problem, Q0s=point.Q0s, Q0a=point.Q0a, quad=quad
    )
    extras: dict[str, Any] = {
        **dict.fromkeys(OVERLAPS, 0.0),
        "asymmetry": math.nan,
        "prior": "collapse",
        "residual": 0.0,
        "residual_floor": 0.0,
        "evaluations": int(iterations),
        "collapsed": True,
        "objective": training_objective(errs["test_error_noisy"], 0.0, problem.alpha),
        "test_error_se": errs["test_error_se"],
        "test_error_noisy_se": errs["test_error_noisy_se"],
        "train_error_se": errs["test_error_noisy_se"],
    }
    return Result(
        source="theory",
        problem=problem.to_dict(),
        test_error=errs["test_error"],
        test_error_noisy=errs["test_error_noisy"],
        train_error=errs["test_error_noisy"],
        penalty=0.0,
        matrix_error=float(point.Q0s + point.Q0a),
        rank_fraction=0.0,
        converged=True,
        iterations=int(iterations),
        runtime_s=time.perf_counter() - t0,
        message="complete rank collapse: M = 0 is the fixed point",
        extras=extras,
    )


#: the metrics whose draw-to-draw standard error a sampled fixed point reports
_DRAW_METRICS = ("test_error", "test_error_noisy", "train_error", "matrix_error", "rank_fraction", "asymmetry")


def t_quantile_975(dof: float) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (Cornish--Fisher to ``1/dof^3``:
    within 0.5 % for ``dof >= 3``, 3 % at ``dof = 2``; ``dof`` below 1 is taken as 1)."""
    z = 1.959963984540054
    v = max(float(dof), 1.0)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / v + g2 / v**2 + g3 / v**3


def _metrics(F: BlockSEMap, x6: np.ndarray, out: UntiedOutput) -> np.ndarray:
    """``_DRAW_METRICS`` (rank fraction: 0, it is taken from the instances) and the six overlaps at ``x6``."""
    pt = F.point
    errs = untied_test_errors(x6, problem=F.problem, Q0s=pt.Q0s, Q0a=pt.Q0a, quad=F.quad)
    qs, ms, _, qa, ma, _ = map(float, x6)
    q = qs + qa
    return np.array(
        [
            errs["test_error"],
            errs["test_error_noisy"],
            out.train_error,
            pt.Q0s + pt.Q0a - 2 * (ms + ma) + q,
            0.0,
            2 * math.sqrt(qa / q) if q > 0 else 0.0,
            *x6,
        ]
    )


def add_draw_errors(
    result: Result, F: BlockSEMap, x: np.ndarray, options: SEOptions, jacobian: np.ndarray | None = None
) -> None:
    """The sampling error of a sampled fixed point (in place), by the linear response of the fixed point to each draw.

    With ``F = w sum_r F_r/R - [sum_c F_c/R_c]`` (``w = 2`` and the coarse instances for an extrapolated
    prior side, ``w = 1`` and none otherwise), draw ``r``'s deviation ``F_r(x) - mean`` moves the fixed point by
    ``(I - J)^{-1} (F_r(x) - mean)``, ``J`` the map's Jacobian at ``x`` (forward differences, one evaluation
    per iterated overlap: of the output side alone, composed with the prior side's tangent
    :meth:`BlockSEMap.prior_tangent`, where the student has one; else of the whole map), and every metric by its
    gradient times that (differences too; the rank
    fraction by each instance's own). Then ``se^2 = w^2 var_r/R + var_c/R_c`` with Welch--Satterthwaite
    degrees of freedom ``nu`` (``extras["draws_dof"]``), and the reported error is
    ``se t_nu(0.975)/1.96`` (a standard error whose ``+-1.96`` band is a 95 % t interval), stored as
    ``extras["<metric>_draws_se"]`` and added in quadrature to ``extras["<metric>_se"]`` (an overlap's
    ``_se``, until then the instances' spread at fixed conjugates, is replaced by it). ``jacobian``
    is not used (the solver's secant Jacobian is too rough for error bars).
    """
    pt = F.point
    k = 3 * pt.iterated
    x = np.asarray(x, float)
    saved_branches, saved_warm, saved_tol, sigma_a = F.branches.main, F.warm_prior, F.prior_tol, F.sigma_a

    def at(xi: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any, UntiedOutput]:
        F.branches.main = saved_branches
        x6 = pt.full(xi, sigma_a)
        new, out, side = F.evaluate_full(x6)
        return new[:k], _metrics(F, x6, out), side, out

    try:
        f0, m0, side, out0 = at(x)
        J = np.empty((k, k))
        G = np.empty((m0.size, k))
        Qt = pt.Q0s + pt.Q0a
        tangent = F.prior_tangent(out0.hats)
        h0 = pt.prior_conjugates(out0.hats)
        for j in range(k):
            h = _RESPONSE_STEP * (abs(x[j]) if j % 3 == 2 else max(abs(x[j]), 1e-2 * Qt))
            xj = x.copy()
            xj[j] += h
            if tangent is not None:
                # the prior side to first order (its tangent at the fixed point), the output side by differences
                F.branches.main = saved_branches
                x6 = pt.full(xj, sigma_a)
                out = F.output_at(x6)
                J[:, j] = (tangent @ ((pt.prior_conjugates(out.hats) - h0) / h))[:k]
                G[:, j] = (_metrics(F, x6, out) - m0) / h
                continue
            fj, mj, _, _ = at(xj)
            J[:, j] = (fj - f0) / h
            G[:, j] = (mj - m0) / h
        groups = [(2.0 if side.coarse_per_draw is not None else 1.0, side.per_draw, side.rank_per_draw)]
        if side.coarse_per_draw is not None:
            groups.append((1.0, side.coarse_per_draw, side.coarse_rank_per_draw))
        resolvent = np.linalg.inv(np.eye(k) - J)
        parts, dofs = [], []
        for w, rows, ranks in groups:
            dev = rows[:, :k] - rows[:, :k].mean(axis=0)
            dmu = (dev @ resolvent.T) @ G.T  # (R, n_metrics)
            if ranks is not None:
                dmu[:, _DRAW_METRICS.index("rank_fraction")] = ranks - ranks.mean()
            R = rows.shape[0]
            var = w * w * dmu.var(axis=0, ddof=1) / R if R > 1 else np.full(dmu.shape[1], np.nan)
            parts.append(var)
            dofs.append(R - 1)
    finally:
        F.branches.main, F.warm_prior, F.prior_tol = saved_branches, saved_warm, saved_tol
    total = np.sum(parts, axis=0)
    # Welch--Satterthwaite degrees of freedom of the test error's variance (the metric the bars are for)
    i = 0
    denom = sum(p[i] ** 2 / d for p, d in zip(parts, dofs) if d > 0)
    dof = float(total[i] ** 2 / denom) if denom > 0 else float(max(sum(dofs), 1))
    inflation = t_quantile_975(dof) / t_quantile_975(math.inf)
    ex = result.extras
    ex["draws_dof"] = dof
    for name, v in zip(_DRAW_METRICS + OVERLAPS, np.sqrt(total) * inflation):
        v = float(v) if math.isfinite(v) else 0.0
        ex[f"{name}_draws_se"] = v
        # an overlap's provisional error (the instances' spread at fixed conjugates) is replaced, not added to
        base = 0.0 if name in OVERLAPS else ex.get(f"{name}_se", 0.0)
        ex[f"{name}_se"] = float(math.hypot(base if math.isfinite(base) else 0.0, v))


@dataclass
class BlockSetup:
    """The stages' view of a non-symmetric point (the counterpart of ``stages.TiedSetup``): its
    :class:`BlockPoint`, node set ``quad`` and collapse test (``collapse_holds``)."""

    point: BlockPoint
    quad: OutputQuadrature | None
    collapse_holds: bool
    #: the prior side's starting estimators of the attempts' maps (a warm start's ``prior_solutions``)
    warm_prior: Any = None

    @property
    def Q0(self) -> tuple[float, ...]:
        return self.point.Q0

    #: the block map has no exact Jacobian (its prior side is an iterative estimator on sampled instances)
    tangent = False

    def new_map(self, settings: MapSettings, branches: ProxBranches | None = None) -> BlockSEMap:
        """The attempt's map (its prior side started from :attr:`warm_prior`)."""
        F = BlockSEMap(self.point.problem, self.point, self.quad, settings, branches=branches)
        F.warm_prior = self.warm_prior
        return F

    def start_point(self, init: Any) -> np.ndarray:
        return self.point.start_point(init)

    def nontrivial(self, x: np.ndarray) -> bool:
        Qt = self.point.Q0s + self.point.Q0a
        return bool(x[0] > Q_FLOOR * Qt or (self.point.iterated == 2 and x[3] > Q_FLOOR * Qt))

    def result(self, F: BlockSEMap, dg: Any, iterations: int, t0: float, o: SEOptions) -> Result:
        return block_result(
            F,
            dg.x,
            dg.out,
            dg.pr,
            converged=dg.converged,
            residual=dg.residual,
            floor=dg.floor,
            iterations=iterations,
            message=stage_message(dg, o.tol),
            t0=t0,
        )

    def collapsed(self, t0: float, iterations: int) -> Result:
        return collapsed_block_result(self.point, self.quad, t0, iterations)

    def finish(
        self,
        result: Result,
        F: BlockSEMap,
        x: np.ndarray | None,
        options: SEOptions,
        jacobian: np.ndarray | None = None,
    ) -> None:
        """The kept attempt's result, completed (in place): the sampling error over the prior's draws of a converged,
        sampled fixed point (``SEOptions.draw_errors``, :func:`add_draw_errors`)."""
        if (
            x is not None
            and result.converged
            and options.draw_errors
            and (self.point.sample.draws > 1 or self.point.coarse is not None)
            and F.used_sampled
            and str(result.extras.get("prior", "")).startswith("sampled")
        ):
            F.report()
            add_draw_errors(result, F, x, options, jacobian)
