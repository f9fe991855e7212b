"""The linear-heads model: several heads on a channel whose output is linear in the logits, solved exactly as
one head (:func:`~singlehead.state_evolution.effective_single_head`, docs: :ref:`concepts-multihead`).

A model transform: the effective single-head problem is solved by its own model (``inner``, the dispatch that
chose this model) and the result is put back in the problem's units
(:func:`~singlehead.state_evolution.multihead_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.models.base import PointSolution, SEModel
from singlehead.state_evolution.multihead import effective_single_head, multihead_result
from singlehead.state_evolution.prior import PriorModel
from singlehead.state_evolution.sweep import progress_bar

__all__ = ["LinearHeadsModel"]


def _check_prior(problem: Any, prior: Any) -> None:
    if isinstance(prior, PriorModel) and problem.teacher_heads > 1:
        raise ValueError(
            "prior: with teacher_heads > 1 the target law is the effective single-head target's; "
            "give the prior as a mode name ('auto', 'asymptotic', 'finite'), not a PriorModel"
        )


class LinearHeadsModel(SEModel):
    """Several heads reduced to one (``init``, ``quad`` and ``collapse`` are the effective problem's; a
    ``Result`` as ``init`` is not used). ``inner`` gives the effective problem's model."""

    name: ClassVar[str] = "linear_heads"

    def __init__(self, problem: Problem, inner: Callable[[Problem], SEModel]) -> None:
        super().__init__(problem)
        self.inner = inner
        self.effective, self.c2 = effective_single_head(problem)

    def check(self, options: Any, prior: Any, quad: Any = None) -> None:
        _check_prior(self.problem, prior)
        self.inner(self.effective).check(options, prior, quad)

    def prepare(self, options: Any) -> Any:
        # the effective single-head problem's model checks and resolves the options
        return self.inner(self.effective).prepare(options)

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
        _check_prior(self.problem, prior)
        model = self.inner(self.effective)
        sol = model.solve_point(
            options,
            prior,
            None if isinstance(init, Result) else init,
            quad,
            cold_first=cold_first,
            alpha_tangent=alpha_tangent,
            collapse=collapse,
        )
        r = multihead_result(model.finish(sol.result), self.problem, self.effective, self.c2)
        return PointSolution(r, sol.warm_start, sol.warm_start_retried)

    def curve(
        self, values: list, param: str, options: Any, prior: Any, init: Any, quad: Any, progress: bool
    ) -> Iterator[Result]:
        """The curve of the single-head equivalent along the same parameter, each point back in the problem's units,
        when the effective problems differ only in ``param`` (along ``alpha``, ``lam``, ``noise``, ``T``, ...); else
        point by point."""
        points = [self.problem.replace(**{param: v}) for v in values]
        effs = [effective_single_head(p) for p in points]
        e0, c0 = effs[0]
        rest = {**e0.to_dict(), param: None}
        if all(c == c0 and {**e.to_dict(), param: None} == rest for e, c in effs):
            _check_prior(self.problem, prior)
            model = self.inner(e0)
            inner = model.curve(
                [getattr(e, param) for e, _ in effs],
                param,
                options,
                prior,
                None if isinstance(init, Result) else init,
                quad,
                progress,
            )
            for p, (e, c), r in zip(points, effs, inner):
                yield multihead_result(model.finish(r), p, e, c)
            return
        for p in progress_bar(points, param) if progress else points:
            yield LinearHeadsModel(p, self.inner).solve_point(options, prior, None, quad).result
