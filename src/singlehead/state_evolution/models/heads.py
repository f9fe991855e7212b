"""The heads model: several tied heads on a softmax channel, per-head overlap matrices ``(Q, M, Sigma)``
(experimental; derivation: docs page "Multi-head attention: the state evolution").

Its map, ansätze and solvers are :mod:`singlehead.state_evolution.multihead_se`'s. Where the student and the
teacher have as many heads (``heads = teacher_heads >= 2``) the map has an unspecialised fixed point (every
student head equally aligned with every teacher head) and, past the specialisation transition, specialised ones;
ERM finds the minimiser, so without an ``ansatz`` among the options the point is solved in the unspecialised
and the general ansatz and the lower training objective's fixed point is returned, the other reported in
``extras["fixed_points"]`` and named in ``message``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any, ClassVar

from singlehead.model.results import Result
from singlehead.state_evolution.models.base import PointSolution, SEModel
from singlehead.state_evolution.multihead_se.solve import HEADS_DEFAULTS, HEADS_READS, multihead_options
from singlehead.state_evolution.multihead_se.theory import check_multihead_problem, multihead_point
from singlehead.state_evolution.sweep import progress_bar

__all__ = ["HeadsModel", "CANDIDATE_ANSATZE"]

#: the ansätze solved, for ``heads = teacher_heads >= 2`` without a given ansatz, to find the lowest objective
CANDIDATE_ANSATZE = ("unspecialised", "general")


def _summary(r: Result) -> dict[str, Any]:
    ex = r.extras
    return {
        "ansatz": ex.get("ansatz"),
        "converged": bool(r.converged),
        "objective": ex.get("objective"),
        "objective_se": ex.get("objective_se"),
        "test_error": r.test_error,
        "specialisation": ex.get("specialisation"),
        "iterations": r.iterations,
    }


class HeadsModel(SEModel):
    """Per-head overlaps; ``init`` ``None`` or a ``Result`` of this model (a neighbouring point of a sweep), ``quad``
    ``None`` (the model draws its own nodes); no warm start is returned."""

    name: ClassVar[str] = "heads"
    defaults: ClassVar[dict[str, Any]] = HEADS_DEFAULTS
    key_options: ClassVar[tuple[str, ...]] = (
        "sample_dim",
        "sample_draws",
        "sample_seed",
        "draw_errors",
        "ansatz",
        "max_iter",
    )

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        check_multihead_problem(self.problem, prior)

    takes: ClassVar[str] = "its solver takes " + ", ".join(HEADS_READS)

    def reads(self) -> set[str]:
        return set(HEADS_READS)

    def overlaps(self, extras: dict[str, Any]) -> dict[str, dict[str, Any]]:
        # one block of H x H (and H x H0) matrices: the heads matched to the teacher heads, as a simulation's
        names = {
            "Q": "head_Q",
            "M": "head_M",
            "Sigma": "head_Sigma",
            "Q0": "head_Q0",
            "Qhat": "Qhat",
            "Mhat": "Mhat",
            "Sigmahat": "Sigmahat",
        }
        return {"heads": {n: extras[k] for n, k in names.items() if k in extras}}

    def candidates(self, options: Any) -> tuple[str | None, ...]:
        """The ansätze to solve: the given one, or :data:`CANDIDATE_ANSATZE` where the heads can specialise."""
        o = multihead_options(options)
        p = self.problem
        if o.ansatz is not None or p.heads != p.teacher_heads or p.heads < 2:
            return (None,)
        return CANDIDATE_ANSATZE

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
        problem = self.problem
        check_multihead_problem(problem, prior)
        cands = self.candidates(options)
        if cands == (None,):
            return PointSolution(multihead_point(problem, options, prior, init, quad))
        o = multihead_options(options)
        results = [multihead_point(problem, dataclasses.replace(o, ansatz=a), prior, init, quad) for a in cands]
        # the ERM minimiser's fixed point is the lowest objective (a converged one before any unconverged one)
        kept = min(results, key=lambda r: (not r.converged, _objective(r)))
        others = [_summary(r) for r in results if r is not kept]
        kept.extras["fixed_points"] = [_summary(kept), *others]
        kept.extras["evaluations_all_attempts"] = int(sum(r.iterations for r in results))
        kept.runtime_s = float(sum(r.runtime_s for r in results))
        told = ", ".join(f"{s['ansatz']} {_objective_text(s)}" for s in others)
        kept.message = (
            f"{kept.message}; the lowest training objective of the fixed points solved (kept: "
            f"{kept.extras['ansatz']} {_objective_text(_summary(kept))}; also {told})"
        )
        return PointSolution(kept)

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        """Point by point, each started from the previous converged point's overlaps (``init`` for the first)."""
        points = [self.problem.replace(**{param: v}) for v in values]
        for p in points:
            check_multihead_problem(p, prior)  # every point refused before the first is solved
        warm = init if isinstance(init, Result) else None
        if init is not None and warm is None:
            raise ValueError(
                f"init must be None or a Result of the multi-head state evolution for heads="
                f"{self.problem.heads}, teacher_heads={self.problem.teacher_heads} "
                f"(got {type(init).__name__})"
            )
        for p in progress_bar(points, param) if progress else points:
            r = HeadsModel(p).solve_point(options, prior, warm, quad).result
            warm = r if r.converged else warm
            yield r


def _objective(r: Result) -> float:
    v = r.extras.get("objective")
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.inf


def _objective_text(s: dict[str, Any]) -> str:
    obj, se = s.get("objective"), s.get("objective_se")
    if not isinstance(obj, (int, float)) or not math.isfinite(obj):
        return "(no objective)"
    tail = f" +- {se:.1e}" if isinstance(se, (int, float)) and math.isfinite(se) else ""
    return f"(objective {obj:.6f}{tail}{'' if s['converged'] else ', unconverged'})"
