"""The protocol every state-evolution model follows (:class:`SEModel`) and what a solved point returns."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from singlehead.model.problem import Problem
from singlehead.model.results import METRIC_FIELDS, Result
from singlehead.state_evolution.options import HEADS_ONLY, SEOptions

__all__ = ["SEModel", "PointSolution", "OVERLAP_NAMES"]

#: the overlaps of one block, by name (``extras["overlaps"][block]``)
OVERLAP_NAMES = ("q", "m", "Sigma", "qhat", "mhat", "Sigmahat")


@dataclass
class PointSolution:
    """What a model's :meth:`SEModel.solve_point` returns: the point's ``result``, the ``warm_start`` its solution
    offers to a next point of a sweep (``None`` when it is unconverged, collapsed, or the model has none), and
    ``warm_start_retried``: whether a warm attempt failed (also ``result.extras["warm_start_retried"]``)."""

    result: Result
    warm_start: Any = None
    warm_start_retried: bool = False


class SEModel:
    """A state-evolution model of one problem: what :func:`singlehead.theory` and
    :func:`singlehead.theory_curve` solve, chosen by :func:`~singlehead.state_evolution.models.model_for`.

    Subclasses set :attr:`name` and implement :meth:`solve_point` and :meth:`curve`; ``options`` is an
    :class:`~singlehead.state_evolution.SEOptions`, ``prior`` a prior mode name or a
    :class:`~singlehead.state_evolution.PriorModel`, ``init`` a start (a model's own warm start, overlaps or a
    :class:`~singlehead.Result` of the same model), ``quad`` an output node set or ``None``.
    """

    #: the model's name
    name: ClassVar[str] = ""
    #: the model's values of the options that ``SEOptions`` leaves at ``None`` (see :meth:`SEOptions.resolved`)
    defaults: ClassVar[dict[str, Any]] = {"tol": 1e-6}
    #: what the model takes instead of the options it does not read (the refusal's explanation)
    takes: ClassVar[str] = "the heads model's options (ansatz, threads and its solver's tuning) need several heads"

    def __init__(self, problem: Problem) -> None:
        self.problem = problem

    def reads(self) -> set[str]:
        """The options (fields and tuning constants) this model reads; the others must stay at their defaults."""
        return set(SEOptions().flat()) - set(HEADS_ONLY)

    def prepare(self, options: Any) -> SEOptions:
        """``options`` checked against :meth:`reads` (``ValueError`` naming an option that does not apply) and
        resolved with :attr:`defaults`; ``None`` is ``SEOptions()``."""
        if options is None:
            options = SEOptions()
        if not isinstance(options, SEOptions):
            raise ValueError(f"options must be an SEOptions or None (got {type(options).__name__})")
        options.refuse(self.reads(), f"{self.name} state-evolution model", self.takes)
        return options.resolved(self.defaults)

    #: the options besides ``tol`` and the nodes that change the model's result (what a cache key holds)
    key_options: ClassVar[tuple[str, ...]] = ()

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        """Raise ``ValueError``, naming the parameter, when the model cannot serve :attr:`problem` with ``options``
        (resolved), ``prior`` and the node set ``quad`` a caller gives, before anything is solved."""

    #: the model's blocks of overlaps and the suffix of their names in ``extras`` (``q_s``: block ``s``)
    blocks: ClassVar[dict[str, str]] = {"S": ""}

    def overlaps(self, extras: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The overlaps of each block by name (:data:`OVERLAP_NAMES` that the result holds)."""
        return {b: {n: extras[n + sfx] for n in OVERLAP_NAMES if n + sfx in extras} for b, sfx in self.blocks.items()}

    def finish(self, result: Result) -> Result:
        """``result`` in the one schema of every theory result (docs: Concepts, "The theory's result"): every
        metric with an error bar has ``<metric>_se`` (quadrature and sampling combined where both apply; the
        parts stay alongside, ``quadrature_error`` and ``<metric>_draws_se``), ``residual``, ``overlaps`` (by
        block, :meth:`overlaps`) and ``se_model`` (:attr:`name`); ``diagnosis`` is a field of the result."""
        ex = result.extras
        parts = ex.get("quadrature_error") if isinstance(ex.get("quadrature_error"), dict) else {}
        for k in METRIC_FIELDS:
            if f"{k}_se" not in ex and isinstance(parts.get(k), (int, float)):
                draws = ex.get(f"{k}_draws_se")
                ex[f"{k}_se"] = math.hypot(parts[k], draws) if isinstance(draws, (int, float)) else float(parts[k])
        ex.setdefault("residual", math.nan)
        ex["overlaps"] = self.overlaps(ex)
        ex["se_model"] = self.name
        return result

    def stability(self, result: Result, *, options: Any = None, quad: Any = None) -> Any:
        """The replica-symmetry check of the fixed point ``result`` (:func:`~singlehead.state_evolution.stability`);
        a model without one refuses, naming ``heads``."""
        raise ValueError(
            f"heads: the replica-symmetry check is not available for the {self.name} state-evolution "
            f"model (got heads={self.problem.heads}, teacher_heads={self.problem.teacher_heads}; it "
            "covers one head)"
        )

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
        """The fixed point of :attr:`problem` (``cold_first``, ``alpha_tangent``, ``collapse``: a sweep's hints,
        which a model without them ignores)."""
        raise NotImplementedError

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        """The fixed points of :attr:`problem` along ``param`` over ``values``, each yielded when solved."""
        raise NotImplementedError
