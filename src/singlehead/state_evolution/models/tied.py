"""The tied model: a symmetric student with one head, one block of overlaps ``(q, m, Sigma)``.

Its map is :class:`~singlehead.state_evolution.se_map.SEMap` on the setup
:class:`~singlehead.state_evolution.stages.TiedSetup` (the exact prior side of the target's spectral law, the
output side on fixed quadrature nodes or in closed form); the engine's attempts solve it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.models.engine import EngineModel
from singlehead.state_evolution.options import check_symmetric_options
from singlehead.state_evolution.prior import PriorModel, collapse_point, prior_model
from singlehead.state_evolution.sizes import check_theory_size
from singlehead.state_evolution.stages import TiedSetup
from singlehead.state_evolution.sweep import tied_curve

__all__ = ["TiedModel"]


class TiedModel(EngineModel):
    """One symmetric block (factorized or direct student, one head)."""

    name: ClassVar[str] = "tied"
    sweep = staticmethod(tied_curve)

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        check_theory_size(self.problem, options, prior)
        check_symmetric_options(options, self.problem.student)

    def setup(self, options: Any, prior: Any, quad: Any, collapse: Any) -> tuple[Any, Any, Any]:
        problem, o = self.problem, options
        pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior, draws=o.draws, seed=o.node_seed)
        if quad is None:
            quad = o.quadrature(problem)
        col = collapse if collapse is not None else collapse_point(problem, pm, quad)
        return TiedSetup(problem, pm, quad, col), quad, pm  # a re-solve on finer nodes reuses the prior model

    def stability(self, result: Result, *, options: Any = None, quad: Any = None) -> Any:
        from singlehead.state_evolution.replicon import tied_stability

        return tied_stability(self.problem, result, options=self.prepare(options), quad=quad)
