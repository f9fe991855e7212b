"""The models the engine's attempts solve (:class:`EngineModel`): one or two blocks of ``(q, m, Sigma)`` overlaps,
a setup built from the problem, :func:`~singlehead.state_evolution.driver.solve_setup` for a point and the engine's
predictor loop for a curve. A subclass says how its setup is built and what it refuses."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.driver import solve_setup
from singlehead.state_evolution.models.base import PointSolution, SEModel

__all__ = ["EngineModel"]


class EngineModel(SEModel):
    """A model solved by the engine. Subclasses implement :meth:`check` (with the ``quad`` a caller gives),
    :meth:`setup` and set :attr:`sweep` (``staticmethod`` of the engine's curve loop for their blocks)."""

    #: the engine's sweep of this model's blocks (``sweep.tied_curve`` or ``sweep.block_curve``)
    sweep: ClassVar[Callable[..., Iterator[Result]]]

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        raise NotImplementedError

    def setup(self, options: Any, prior: Any, quad: Any, collapse: Any) -> tuple[Any, Any, Any]:
        """``(setup, quad, prior)``: the engine's setup of the point, the node set it uses and the prior a re-solve
        on finer nodes reuses."""
        raise NotImplementedError

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
        t0 = time.perf_counter()
        # the node set is the solver's choice (neither given nor set by n_points): a floor stall may refine it
        refine = quad is None and options.n_points is None
        self.check(options, prior, quad)  # every size the library cannot serve is refused here, before allocating
        setup, quad, prior_again = self.setup(options, prior, quad, collapse)

        def again(finer: Any, start: Any) -> PointSolution:
            return self.solve_point(finer, prior_again, start, None, cold_first=cold_first, alpha_tangent=alpha_tangent)

        return solve_setup(
            self.problem,
            setup,
            options,
            init,
            quad,
            t0,
            refine=refine,
            cold_first=cold_first,
            alpha_tangent=alpha_tangent,
            again=again,
            stability=self.stability,
        )

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        self.check(options, prior, quad)  # refused before any node or eigenvalue is allocated
        return self.sweep(self.problem, values, param, options, prior, init, quad, progress, self._solve_other)

    def _solve_other(self, problem: Any, options: Any, prior: Any, init: Any, quad: Any, **hints: Any) -> PointSolution:
        """One point of this model's sweep: the same model on ``problem``."""
        return type(self)(problem).solve_point(options, prior, init, quad, **hints)
