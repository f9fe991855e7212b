"""The block model: a non-symmetric (untied) student, a symmetric and an antisymmetric block of overlaps.

Its map is :class:`~singlehead.state_evolution.block_map.BlockSEMap` on the setup
:class:`~singlehead.state_evolution.block_map.BlockSetup` (a sampled prior side, the output side on ``T^2``
fields); the engine's attempts solve it, as the tied model's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.block_map import BLOCK_DEFAULTS, BlockPoint, BlockSetup, check_block_options
from singlehead.state_evolution.driver import solve_setup
from singlehead.state_evolution.models.base import PointSolution, SEModel
from singlehead.state_evolution.sizes import check_theory_size
from singlehead.state_evolution.sweep import block_curve

__all__ = ["BlocksModel"]


class BlocksModel(SEModel):
    """A symmetric and an antisymmetric block (the untied student)."""

    name: ClassVar[str] = "blocks"
    defaults: ClassVar[dict[str, Any]] = BLOCK_DEFAULTS
    blocks: ClassVar[dict[str, str]] = {"symmetric": "_s", "antisymmetric": "_a"}
    key_options: ClassVar[tuple[str, ...]] = (
        "sample_dim",
        "sample_draws",
        "sample_extrapolate",
        "sample_seed",
        "draw_errors",
    )

    def check(self, options: Any, prior: Any) -> None:
        check_theory_size(self.problem, options, prior)
        check_block_options(options, prior, None, self.problem)

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
        check_theory_size(problem, o, prior)
        refine = quad is None and o.n_points is None
        check_block_options(o, prior, quad, problem)
        if quad is None:
            quad = o.quadrature(problem)
        point = BlockPoint.build(problem, o)
        setup = BlockSetup(point, quad, point.collapse_holds(quad))

        def again(finer: Any, start: Any) -> PointSolution:
            return self.solve_point(finer, prior, start, None, cold_first=cold_first, alpha_tangent=alpha_tangent)

        return solve_setup(
            problem,
            setup,
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
        # the replicon of two blocks of fields is a 2 x 2 map
        from singlehead.state_evolution.block_stability import block_stability

        return block_stability(self.problem, result, options=self.prepare(options), quad=quad)

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        check_theory_size(self.problem, options, prior)
        return block_curve(self.problem, values, param, options, prior, init, quad, progress, _solve_point)


def _solve_point(problem: Any, options: Any, prior: Any, init: Any, quad: Any, **hints: Any) -> PointSolution:
    """One point of a block model's sweep."""
    return BlocksModel(problem).solve_point(options, prior, init, quad, **hints)
