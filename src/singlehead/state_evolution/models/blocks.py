"""The block model: a non-symmetric (untied) student, a symmetric and an antisymmetric block of overlaps.

Its map is :class:`~singlehead.state_evolution.block_map.BlockSEMap` on the setup
:class:`~singlehead.state_evolution.block_map.BlockSetup` (a sampled prior side, the output side on ``T^2``
fields); the engine's attempts solve it, as the tied model's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.block_map import BLOCK_DEFAULTS, BlockPoint, BlockSetup, check_block_options
from singlehead.state_evolution.models.engine import EngineModel
from singlehead.state_evolution.sizes import check_theory_size
from singlehead.state_evolution.sweep import block_curve

__all__ = ["BlocksModel"]


class BlocksModel(EngineModel):
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
    sweep = staticmethod(block_curve)

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        check_theory_size(self.problem, options, prior)
        check_block_options(options, prior, quad, self.problem)

    def setup(self, options: Any, prior: Any, quad: Any, collapse: Any) -> tuple[Any, Any, Any]:
        if quad is None:
            quad = options.quadrature(self.problem)
        point = BlockPoint.build(self.problem, options)
        return BlockSetup(point, quad, point.collapse_holds(quad)), quad, prior

    def stability(self, result: Result, *, options: Any = None, quad: Any = None) -> Any:
        # the replicon of two blocks of fields is a 2 x 2 map
        from singlehead.state_evolution.block_stability import block_stability

        return block_stability(self.problem, result, options=self.prepare(options), quad=quad)
