"""The SE map of one problem, ``(q, m, Sigma) -> (q', m', Sigma')``, as the driver iterates it.

:class:`_SEMap` composes the output side (:mod:`.output`, the channel prox on the quadrature
nodes, with its branches tracked across evaluations) and the prior side (:mod:`.prior`), counts
evaluations against the budget ``SEOptions.max_evals`` and remembers the best point seen.
The structured starting points of a solve live here too.
"""

from __future__ import annotations

import math

import numpy as np

from ..problem import Problem
from ._fixed_point import _residual
from .output import OutputSide, output_side
from .prior import PriorModel, PriorSide, prior_side
from .quadrature import OutputQuadrature


class _SEMap:
    """The SE map ``(q, m, Sigma) -> (q', m', Sigma')`` for one problem, with prox warm starts.

    The prox is non-convex for large ``Sigma``; its global minimiser is searched node by node
    from several starts. ``mode``:

    * ``"warm"``: each start's branch restarts from its previous end point (cheap);
    * ``"cold"``: the starts ``z``, interpolating point, midpoint (history-free);
    * ``"union"``: both, node-wise best objective. Used for the reported point: it is the best
      available approximation of the global minimiser.
    """

    def __init__(self, problem: Problem, prior: PriorModel, quad: OutputQuadrature | None,
                 counter: list[int] | None = None, budget: int | None = None) -> None:
        self.problem, self.prior, self.quad = problem, prior, quad
        self.warm: list | None = None
        self.mode = "warm"
        self.n_calls = 0
        # evaluations of every map of one solve attempt (coarse, full, continuation maps share it;
        # the budget SEOptions.max_evals counts these)
        self.counter = counter if counter is not None else [0]
        self.budget, self.exempt = budget, False  # raise _BudgetExhausted past the budget
        self.best: tuple[float, np.ndarray | None] = (math.inf, None)  # smallest residual seen, its x
        self.stop_on_collapse = False  # raise _DrivenToCollapse when the map lands on S = 0

    def values(self, x: np.ndarray) -> np.ndarray:
        """``F(x)`` alone (what the fixed-point solver needs)."""
        return self(x)[0]

    def __call__(self, x: np.ndarray, *, mode: str | None = None) -> tuple[np.ndarray, OutputSide, PriorSide]:
        q, m, Sigma = map(float, x)
        mode = mode or self.mode
        if self.budget is not None and self.counter[0] >= self.budget and not self.exempt:
            raise _BudgetExhausted
        self.n_calls += 1
        self.counter[0] += 1
        out = output_side(q, m, Sigma, problem=self.problem, Q0=self.prior.Q0, quad=self.quad,
                          warm=None if mode == "cold" else self.warm, union=mode == "union")
        if out.branches is not None and self.problem.channel != "linear":
            self.warm = out.branches
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=self.problem, prior=self.prior)
        if self.stop_on_collapse and not pr.q > 0:
            raise _DrivenToCollapse
        fx = np.array([pr.q, pr.m, pr.Sigma])
        if np.all(np.isfinite(fx)):
            res = _residual(np.asarray(x, float), fx, self.prior.Q0)
            if res < self.best[0]:
                self.best = (res, np.array(x, float))
        return fx, out, pr


class _BudgetExhausted(Exception):
    """The SE map evaluation budget (``SEOptions.max_evals``) of one theory() call is spent."""


class _DrivenToCollapse(Exception):
    """The SE iteration reached complete rank collapse (``J = 0``: ``q = m = Sigma = 0``)."""


def _initial_guesses(problem: Problem, Q0: float) -> list[np.ndarray]:
    """Structured starting points ``(q, m, Sigma)``.

    A generic one ``(Q0/2, 0.4 Q0, 1)``, a well-learned one ``(Q0, 0.9 Q0, 0.1)``, and, for
    small ``lam``, one in the interpolation regime where ``eps = lam Sigma/(alpha c_T) = O(1)``
    (THEORY §4), i.e. ``Sigma ~ alpha c_T/lam``.
    """
    K = problem.n_pairs
    c = K if problem.channel == "linear" else max(K - 1, 1)
    out = [np.array([0.5 * Q0, 0.4 * Q0, 1.0]), np.array([Q0, 0.9 * Q0, 0.1])]
    if problem.lam > 0:
        S = problem.alpha * c / problem.lam
        if S > 3:
            out.append(np.array([Q0, 0.65 * Q0, S]))
    return out


def _default_init(Q0: float) -> np.ndarray:
    """The generic start ``(q, m, Sigma) = (Q0/2, 0.4 Q0, 1)``."""
    return np.array([0.5 * Q0, 0.4 * Q0, 1.0])
