"""The SE map of one problem, ``(q, m, Sigma) -> (q', m', Sigma')``, as the driver iterates it.

:class:`SEMap` composes the output side (:mod:`.output`, the channel prox on the quadrature
nodes, with its branches tracked across evaluations) and the prior side (:mod:`.prior`), counts
evaluations against the budget ``SEOptions.max_evals`` and remembers the best point seen.
The structured starting points of a solve live here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.state_evolution.fixed_point import step_residual
from singlehead.state_evolution.output import OutputSide, node_labels, output_side
from singlehead.state_evolution.prior import PriorModel, PriorSide, prior_side
from singlehead.state_evolution.quadrature import OutputQuadrature


@dataclass
class EvalCounter:
    """Map evaluations of one solve attempt, shared by every map of it (coarse, full, continuation,
    re-solve); the budget ``SEOptions.max_evals`` counts these."""

    count: int = 0


@dataclass(frozen=True)
class MapSettings:
    """How a :class:`SEMap` evaluates and when it stops a solve (fixed for the map's life).

    Attributes
    ----------
    branch : {"global", "teacher", "z"}
        Which prox minimum the output side takes (``SEOptions.prox_branch``).
    screen : int or None
        Screening of the prox's extra starts (``Tuning.prox_screen``).
    tangent : bool
        Each evaluation also returns the output side's exact tangent (``SEOptions.exact_jacobian``,
        where the output side is not closed form).
    floor_after : int or None
        The quadrature floor (:func:`residual_floor`) is measured once the attempt's evaluations reach
        this count; from then on a residual below it ends the solve (:class:`AtQuadratureFloor`); ``None``: never.
    stop_on_collapse : bool
        Raise :class:`DrivenToCollapse` when the map lands on ``S = 0``.
    budget : int or None
        Evaluations of the attempt past which :class:`BudgetExhausted` is raised (``SEOptions.max_evals``).
    tol : float
        The solve's target residual (``SEOptions.tol``): a map whose own accuracy can follow the residual (an
        iterative prior side) refines it down to ``1e-3 tol``.
    """

    branch: str = "global"
    screen: int | None = None
    tangent: bool = False
    floor_after: int | None = None
    stop_on_collapse: bool = False
    budget: int | None = None
    tol: float = 1e-6

    @classmethod
    def from_options(cls, options: Any, *, tangent: bool, stop_on_collapse: bool) -> MapSettings:
        """The settings an attempt with ``options`` (:class:`~.options.SEOptions`) gives its map."""
        return cls(
            branch=options.prox_branch,
            screen=options.tuning.prox_screen,
            tangent=options.exact_jacobian and tangent,
            floor_after=options.tuning.floor_after,
            stop_on_collapse=stop_on_collapse,
            budget=options.max_evals,
            tol=options.tol,
        )


@dataclass
class ProxBranches:
    """The output side's prox branches tracked from one evaluation to the next (each start's end points on the
    nodes; ``cv``: those of the control variate's prox at small ``q``); ``None``: none yet."""

    main: list | None = None
    cv: list | None = None


class MapCore:
    """What every state-evolution map shares, whatever its blocks of fields: the attempt's evaluation
    count and budget, the best point seen, the quadrature floor, the modes of the prox starts, the last
    evaluation. A map implements :meth:`_evaluate` (one evaluation, ``x -> (F(x), output side, prior
    side)``) and the problem-specific pieces the stages use: ``Q0`` (the teacher norm of each block),
    :meth:`default_start`, :meth:`starts`, :meth:`floor_at`, :meth:`jacobian_at` and :meth:`sibling`.

    ``settings`` (:class:`MapSettings`) say how it evaluates and when it stops a solve; ``counter``
    (:class:`EvalCounter`) is shared with the other maps of the solve attempt (default: its own);
    ``branches`` (:class:`ProxBranches`) are the tracked prox branches it starts from and updates.
    ``mode``: ``"warm"`` (each prox start restarts from its tracked branch), ``"cold"`` (the prox's
    own starts, history-free) or ``"union"`` (both, node-wise best objective: the reported point's).
    ``pre_iteration_history``: how many previous iterates the solver's pre-iteration extrapolates from
    (Anderson acceleration; 0: damped iteration), a property of the map's kind.
    """

    pre_iteration_history = 0
    #: the root finder stops at this fraction of ``tol`` (the map's kind: how much an evaluation costs against how
    #: close to ``tol`` the reported residual may come)
    root_stop_fraction = 0.1

    def __init__(
        self,
        problem: Problem,
        prior: Any,
        quad: OutputQuadrature | None,
        settings: MapSettings | None = None,
        *,
        counter: EvalCounter | None = None,
        branches: ProxBranches | None = None,
    ) -> None:
        self.problem, self.prior, self.quad = problem, prior, quad
        self.settings = settings if settings is not None else MapSettings()
        self.branches = branches if branches is not None else ProxBranches()
        self.mode = "warm"
        self.n_calls = 0
        self.counter = counter if counter is not None else EvalCounter()
        # the budget in force: the settings' own, or a union re-solve's (start_union_resolve)
        self.budget, self.exempt = self.settings.budget, False  # raise BudgetExhausted past the budget
        self._saved_budget = self.budget  # the attempt's budget while a union re-solve has its own
        self.best: tuple[float, np.ndarray | None] = (math.inf, None)  # smallest residual seen, its x
        # the floor is measured once the counter reaches floor_after; report() and the union re-solve change it
        self.floor_after = self.settings.floor_after
        self.floor = math.nan
        # the last evaluation (mode, x, (F(x), output side, prior side)), kept even when it ended the solve (its
        # Jacobian is computed from it on demand), and the last Jacobian computed
        self._last_eval: tuple[str, np.ndarray, tuple] | None = None
        self.last_jacobian: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (x, dF/dx, dF/dlog alpha)

    @property
    def Q0(self) -> Any:
        raise NotImplementedError

    def _evaluate(self, x: np.ndarray, mode: str) -> tuple[np.ndarray, Any, Any]:
        raise NotImplementedError

    def floor_at(self, x: np.ndarray, out: Any) -> float:
        """The quadrature floor of the residual at ``x`` (``nan``: not measurable, the floor does not apply)."""
        return math.nan

    def jacobian_at(self, x: np.ndarray) -> np.ndarray | None:
        """``dF/dx`` at ``x`` when the map computed it with its last evaluation (``None``: it does not)."""
        return None

    def __call__(self, x: np.ndarray, *, mode: str | None = None) -> tuple[np.ndarray, Any, Any]:
        mode = mode or self.mode
        if self.budget is not None and self.counter.count >= self.budget and not self.exempt:
            raise BudgetExhausted
        self.n_calls += 1
        self.counter.count += 1
        fx, out, pr = self._evaluate(x, mode)
        self._last_eval = (mode, np.array(x, float), (fx, out, pr))
        if np.all(np.isfinite(fx)):
            res = step_residual(np.asarray(x, float), fx, self.Q0)
            self._evaluated(res)
            if res < self.best[0]:
                self.best = (res, np.array(x, float))
            if self.floor_after is not None and self.counter.count >= self.floor_after:
                if math.isnan(self.floor):
                    self.floor = self.floor_at(np.asarray(x, float), out)
                if below_floor(self.best[0], self.floor):
                    raise AtQuadratureFloor
        return fx, out, pr

    def _evaluated(self, residual: float) -> None:
        """Told the residual of each finite evaluation (a map whose own accuracy follows it adapts here)."""

    def at(self, x: np.ndarray) -> tuple[np.ndarray, Any, Any]:
        """``self(x)``, reusing the last evaluation when it was at ``x`` in the current mode (a solve that the
        floor or the budget ended at its last point has just evaluated the map there)."""
        last = self._last_eval
        if last is not None and last[0] == self.mode and np.array_equal(last[1], np.asarray(x, float)):
            return last[2]
        return self(x)

    def values(self, x: np.ndarray) -> np.ndarray:
        """``F(x)`` alone (what the fixed-point solver needs)."""
        return self(x)[0]

    @property
    def tangent(self) -> bool:
        """Whether evaluations compute the exact Jacobian (``MapSettings.tangent``)."""
        return self.settings.tangent

    @property
    def evaluations(self) -> int:
        """Map evaluations of the solve attempt so far (every map sharing the counter)."""
        return self.counter.count

    def has_budget(self) -> bool:
        """Whether evaluations remain in the attempt's budget."""
        return self.budget is None or self.counter.count < self.budget

    def best_point(self) -> tuple[float, np.ndarray | None]:
        """The smallest residual seen by this map and its point (``(inf, None)`` before any)."""
        return self.best

    def report(self) -> None:
        """From now on evaluations are for reporting: never stopped by the budget or the floor."""
        self.exempt, self.floor_after = True, None

    def start_union_resolve(self, floor: float, max_evals: int) -> None:
        """A re-solve with every prox start: its own ``max_evals`` budget, stopping at ``floor``."""
        self.mode = "union"
        self.best, self.floor, self.floor_after = (math.inf, None), floor, 0
        self._saved_budget, self.exempt = self.budget, False
        self.budget = self.counter.count + max_evals

    def end_union_resolve(self) -> None:
        """Back to reporting, with the attempt's budget restored."""
        self.exempt, self.budget, self.floor_after = True, self._saved_budget, None


class SEMap(MapCore):
    """The SE map ``(q, m, Sigma) -> (q', m', Sigma')`` of a symmetric student (one block of fields), with
    prox warm starts (see :class:`MapCore` for the settings, counter, branches and modes).

    The prox is non-convex for large ``Sigma``; its global minimiser is searched node by node
    from several starts (``z``, the interpolating point, their midpoint), tracked along the solve.
    With ``settings.tangent`` each evaluation also returns the output side's exact tangent, and
    :meth:`jacobian_at` the map's Jacobian.
    """

    def __init__(
        self,
        problem: Problem,
        prior: PriorModel,
        quad: OutputQuadrature | None,
        settings: MapSettings | None = None,
        *,
        counter: EvalCounter | None = None,
        branches: ProxBranches | None = None,
    ) -> None:
        super().__init__(problem, prior, quad, settings, counter=counter, branches=branches)
        self._labels: np.ndarray | None = None  # the channel's labels on the nodes (fixed: node_labels)

    # ---- the problem-specific pieces the stages use (the map protocol, see :mod:`.stages`) ----
    @property
    def Q0(self) -> float:
        """The teacher norm of the map's one block of overlaps (the u-transform's and the residual's scale)."""
        return self.prior.Q0

    def default_start(self) -> np.ndarray:
        """The generic start (:func:`default_init`)."""
        return default_init(self.Q0)

    def starts(self) -> list[np.ndarray]:
        """The structured starts a solve without a warm start ranks (:func:`initial_guesses`)."""
        return initial_guesses(self.problem, self.Q0)

    def floor_at(self, x: np.ndarray, out: OutputSide) -> float:
        """The quadrature floor of the residual at ``x`` (:func:`residual_floor`)."""
        return residual_floor(x, out, self.problem, self.prior)

    def jacobian_at(self, x: np.ndarray) -> np.ndarray | None:
        """``dF/dx`` at ``x`` if the last evaluation was at ``x`` and computed it (``tangent``), else ``None``."""
        lj = self.last_jacobian
        if lj is not None and np.allclose(lj[0], x, rtol=1e-13, atol=0.0):
            return lj[1]
        last = self._last_eval
        if last is None or not np.allclose(last[1], x, rtol=1e-13, atol=0.0):
            return None
        fx, out, pr = last[2]
        if out.tangent is None or not pr.q > 0:
            return None
        self.last_jacobian = self._chain(last[1], out, fx)
        return None if self.last_jacobian is None else self.last_jacobian[1]

    # ---- the controls a solve attempt uses ---------------------------------------------
    def sibling(self, problem: Problem | None = None, quad: OutputQuadrature | None = None, **changes: Any) -> SEMap:
        """A map of ``problem`` (default this one's) on ``quad`` sharing this one's evaluation count and budget,
        its settings changed by ``changes`` (:class:`MapSettings` fields), without floor and tracked branches."""
        settings = replace(self.settings, budget=self.budget, floor_after=None, **changes)
        return SEMap(self.problem if problem is None else problem, self.prior, quad, settings, counter=self.counter)

    def _evaluate(self, x: np.ndarray, mode: str) -> tuple[np.ndarray, OutputSide, PriorSide]:
        q, m, Sigma = map(float, x)
        if self._labels is None and self.quad is not None:
            self._labels = node_labels(self.problem, self.quad, self.prior.Q0)
        st, tracked = self.settings, self.branches
        out = output_side(
            q,
            m,
            Sigma,
            problem=self.problem,
            Q0=self.prior.Q0,
            quad=self.quad,
            warm=None if mode == "cold" else tracked.main,
            union=mode == "union",
            branch=st.branch,
            screen=st.screen,
            tangent=st.tangent,
            warm_cv=None if mode == "cold" else tracked.cv,
            labels=self._labels,
        )
        if out.branches is not None and not self.problem.channel.convex_prox:
            tracked.main = out.branches
        if out.branches_cv is not None:
            tracked.cv = out.branches_cv
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=self.problem, prior=self.prior)
        if st.stop_on_collapse and not pr.q > 0:
            raise DrivenToCollapse
        return np.array([pr.q, pr.m, pr.Sigma]), out, pr

    def _chain(
        self, x: np.ndarray, out: OutputSide, fx: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(x, dF/dx, dF/dlog alpha)``: the output side's exact tangent times the prior side's
        derivative in the conjugates (forward differences, relative step ``_PRIOR_STEP``; the prior
        side is a smooth quadrature). The output side is proportional to ``alpha``, so
        ``dF/dlog alpha = dP/dhat . hat``. ``None`` where a difference is not finite."""
        dO = out.tangent() if out.tangent is not None else None
        if dO is None:
            return None
        hats = np.array([out.qhat, out.mhat, out.Sigmahat])
        dP = np.empty((3, 3))
        expo = self.problem.student.prior_sigmahat_exponents()
        if expo is not None and hats[2] != 0:  # the Sigmahat column in closed form
            dP[:, 2] = np.asarray(expo) * fx / hats[2]
        for k in range(2 if expo is not None and hats[2] != 0 else 3):
            step = _PRIOR_STEP * abs(hats[k])
            if not step > 0:
                return None
            hk = hats.copy()
            hk[k] += step
            try:
                pk = prior_side(*map(float, hk), problem=self.problem, prior=self.prior)
            except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
                return None
            dP[:, k] = (np.array([pk.q, pk.m, pk.Sigma]) - fx) / step
        if not np.all(np.isfinite(dP)):
            return None
        return x, dP @ dO, dP @ hats


#: relative step of the forward differences of the prior side in (qhat, mhat, Sigmahat)
_PRIOR_STEP = 1e-6


class BudgetExhausted(Exception):
    """The SE map evaluation budget (``SEOptions.max_evals``) of one theory() call is spent."""


#: the floor as a fraction of one SE step's quadrature standard error (residual_floor)
FLOOR_FRACTION = 0.1


#: the largest floor that can certify a fixed point: above it one SE step's quadrature standard error exceeds 10 %
#: and a residual below the floor says little (studies/se_fixed_points/results/se_fixed_points.md: a point accepted at
#: floor
#: 4.9e-2 had residual 0.38 under a 16x finer quadrature, test error 0.515 against ERM's 0.1125 +- 0.0007)
MAX_FLOOR = 1e-2


def below_floor(residual: float, floor: float) -> bool:
    """Whether ``residual`` is below the map's quadrature floor and that floor can certify a fixed point
    (``floor <= MAX_FLOOR``; ``False`` for a ``nan`` floor)."""
    return bool(residual < floor <= MAX_FLOOR)


class AtQuadratureFloor(Exception):
    """The residual is below the map's own quadrature error (:func:`residual_floor`): the solve can stop."""


def residual_floor(x: np.ndarray, out: OutputSide, problem: Problem, prior: PriorModel) -> float:
    """The quadrature error of one SE step, in the units of the residual
    (:func:`~singlehead.state_evolution.fixed_point.step_residual`).

    The output side is an average over ``R`` scrambled node sets; the prior side applied to each
    scramble's ``(qhat, mhat, Sigmahat)`` gives ``R`` versions of ``F(x)``, and their standard error
    (normalised like the residual: ``q, m`` by ``Q0``, ``Sigma`` by ``Sigma``) is the uncertainty of
    ``F(x)`` itself. Taken over the scrambles, not propagated from the three errors separately:
    they are strongly correlated (``eta = mhat/Sigmahat`` is far better determined than either).
    The floor is ``FLOOR_FRACTION`` (0.1) of that error: below it the distance to the fixed point
    (``residual / (1 - rho)``, ``rho`` the map's contraction) is a tenth of the fixed point's own
    quadrature uncertainty (``se / (1 - rho)``, amplified alike), so iterating further refines
    nothing. (At the full error instead of a tenth, near ``alpha_interp`` at ``lam = 1e-5`` the
    accepted points moved the test error by up to 1.8 %.) ``0`` when the output side is analytic
    (linear channel), ``nan`` when it cannot be measured.
    """
    per = out.scramble_hats
    if per is None:
        return 0.0
    if per.shape[0] < 2:
        return math.nan
    try:
        fs = np.array(
            [
                [v.q, v.m, v.Sigma]
                for v in (prior_side(float(a), float(b), float(c), problem=problem, prior=prior) for a, b, c in per)
            ]
        )
    except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
        return math.nan
    if not np.all(np.isfinite(fs)):
        return math.nan
    se = fs.std(axis=0, ddof=1) / math.sqrt(per.shape[0])
    Q0 = prior.Q0
    return FLOOR_FRACTION * float(max(se[0] / Q0, se[1] / Q0, se[2] / max(abs(float(x[2])), 1e-300)))


class DrivenToCollapse(Exception):
    """The SE iteration reached complete rank collapse (``J = 0``: ``q = m = Sigma = 0``)."""


def initial_guesses(problem: Problem, Q0: float) -> list[np.ndarray]:
    """Structured starting points ``(q, m, Sigma)``.

    A generic one ``(Q0/2, 0.4 Q0, 1)``, a well-learned one ``(Q0, 0.9 Q0, 0.1)``, and, for
    small ``lam``, one in the interpolation regime where ``eps = lam Sigma/(alpha c_T) = O(1)``
    (docs: Theory, :ref:`theory-thresholds`), i.e. ``Sigma ~ alpha c_T/lam``.
    """
    c = max(problem.channel.informative_directions(problem.T), 1)
    out = [np.array([0.5 * Q0, 0.4 * Q0, 1.0]), np.array([Q0, 0.9 * Q0, 0.1])]
    if problem.lam > 0:
        S = problem.alpha * c / problem.lam
        if S > 3:
            out.append(np.array([Q0, 0.65 * Q0, S]))
    return out


def default_init(Q0: float) -> np.ndarray:
    """The generic start ``(q, m, Sigma) = (Q0/2, 0.4 Q0, 1)``."""
    return np.array([0.5 * Q0, 0.4 * Q0, 1.0])
