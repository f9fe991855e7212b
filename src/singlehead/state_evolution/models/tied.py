"""The tied model: a symmetric student with one head, one block of overlaps ``(q, m, Sigma)``.

Its map is :class:`~singlehead.state_evolution.se_map.SEMap` on the setup
:class:`~singlehead.state_evolution.stages.TiedSetup` (the exact prior side of the target's spectral law, the
output side on fixed quadrature nodes or in closed form); the engine's attempts solve it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.driver import solve_setup
from singlehead.state_evolution.models.base import PointSolution, SEModel
from singlehead.state_evolution.options import check_symmetric_options
from singlehead.state_evolution.prior import PriorModel, collapse_point, prior_model
from singlehead.state_evolution.sizes import check_theory_size
from singlehead.state_evolution.stages import TiedSetup
from singlehead.state_evolution.sweep import tied_curve

__all__ = ["TiedModel"]


class TiedModel(SEModel):
    """One symmetric block (factorized or direct student, one head)."""

    name: ClassVar[str] = "tied"

    def check(self, options: Any, prior: Any) -> None:
        check_theory_size(self.problem, options, prior)
        check_symmetric_options(options, self.problem.student)

    def solve_point(
        self,
        options: Any,
        prior: Any,
        init: Any,
        quad: Any,
        *,
        cold_first: bool = False,
        alpha_tangent: bool = False,
        collapse: Any = None,
    ) -> PointSolution:
        problem, o = self.problem, options
        t0 = time.perf_counter()
        check_theory_size(problem, o, prior)  # every size the library cannot serve is refused here, before allocating
        # the node set is the solver's choice (neither given nor set by n_points): a floor stall may refine it
        refine = quad is None and o.n_points is None
        check_symmetric_options(o, problem.student)
        pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior, draws=o.draws, seed=o.node_seed)
        if quad is None:
            quad = o.quadrature(problem)
        col = collapse if collapse is not None else collapse_point(problem, pm, quad)

        def again(finer: Any, start: Any) -> PointSolution:  # the re-solve on finer nodes reuses the prior model
            return self.solve_point(finer, pm, start, None, cold_first=cold_first, alpha_tangent=alpha_tangent)

        return solve_setup(
            problem,
            TiedSetup(problem, pm, quad, col),
            o,
            init,
            quad,
            t0,
            refine=refine,
            cold_first=cold_first,
            alpha_tangent=alpha_tangent,
            again=again,
            stability=self.stability,
        )

    def stability(self, result: Result, *, options: Any = None, quad: Any = None) -> Any:
        from singlehead.state_evolution.replicon import tied_stability

        return tied_stability(self.problem, result, options=self.prepare(options), quad=quad)

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        check_theory_size(self.problem, options, prior)  # refused before any node or eigenvalue is allocated
        check_symmetric_options(options, self.problem.student)
        return tied_curve(self.problem, values, param, options, prior, init, quad, progress, _solve_point)


def _solve_point(problem: Any, options: Any, prior: Any, init: Any, quad: Any, **hints: Any) -> PointSolution:
    """One point of a tied model's sweep."""
    return TiedModel(problem).solve_point(options, prior, init, quad, **hints)
