"""The routes of the runner (:mod:`.runner`): each maps ``(problem, seed, **settings)`` to a flat record.

:func:`run_theory_curve` runs a warm-started chain of theory points; its solver inputs (quadrature
nodes, prior model) are kept per process for the last chains it ran, so that a chain cut into
chunks (the explorer streams its curves that way) builds them once per worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from singlehead.model.problem import Problem
from singlehead.model.results import stable_hash

# Each route imports its engine when it runs: a theory point never loads the Bayes, threshold (SciPy's
# stats and optimize), simulation (torch) or AMP code, which keeps `singlehead theory` quick to start.


def run_simulation(problem: Problem, seed: int | None, *, device: str = "cpu", **options: Any) -> dict[str, Any]:
    """``simulate(problem, seed, options=TrainOptions(**options), device=device)`` as a record."""
    from singlehead.sim.simulation import TrainOptions, simulate

    return simulate(problem, 0 if seed is None else int(seed), options=TrainOptions(**options), device=device).to_dict()


def run_theory(problem: Problem, seed: int | None = None, *, prior: str = "auto", **settings: Any) -> dict[str, Any]:
    """``theory(problem, prior=prior, options=SEOptions(**settings))`` as a record."""
    from singlehead.state_evolution import SEOptions, theory

    return theory(problem, prior=prior, options=SEOptions(**settings)).to_dict()


def run_theory_curve(
    problems: list[Problem], param: str, *, prior: str = "auto", init: dict[str, Any] | None = None, **settings: Any
) -> list[dict[str, Any]]:
    """:func:`run_theory` for problems that differ only in ``param``, as one warm-started sweep
    (:func:`~singlehead.state_evolution.theory_curve`), in the given order.

    Each point is the same fixed point a cold :func:`run_theory` finds, to the solver tolerance
    (``SEOptions.tol``, relative change of ``(q, m, Sigma)`` per SE step), at a fraction of the cost.
    ``init``: the record of a neighbouring fixed point to start the first point from.
    """
    return list(iter_theory_curve(problems, param, prior=prior, init=init, **settings))


def iter_theory_curve(
    problems: list[Problem], param: str, *, prior: str = "auto", init: dict[str, Any] | None = None, **settings: Any
) -> Iterator[dict[str, Any]]:
    """:func:`run_theory_curve`, yielding each record as soon as its point is solved (the next point is
    solved only when asked for)."""
    from singlehead.model.results import Result
    from singlehead.state_evolution import iter_theory_curve as curve

    options, quad, prior_side = solver_inputs(problems[0], param, prior, settings)
    values = [getattr(p, param) for p in problems]
    start = Result.from_dict(init) if init is not None else None
    for r in curve(problems[0], values, param=param, prior=prior_side, options=options, quad=quad, init=start):
        yield r.to_dict()


# solver inputs of the last chains run in this process: key -> (options, quadrature, prior model)
_SOLVER_INPUTS: dict[str, tuple[Any, Any, Any]] = {}
_SOLVER_INPUTS_KEPT = 32


def solver_inputs(problem: Problem, param: str, prior: str, settings: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(SEOptions(**settings), quadrature nodes, prior model)`` of a chain along ``param``, as
    :func:`~singlehead.state_evolution.theory_curve` builds them for ``problem`` (shared by every point
    of the chain, so they are kept per process under a key that leaves ``param`` out); the
    quadrature is ``None`` and the prior ``prior`` where theory_curve builds them per point (along
    ``d`` or ``target``), a non-symmetric student samples its own prior side, or the problem has several
    heads (its curve is its single-head equivalent's on the linear channel, see
    :mod:`singlehead.state_evolution.multihead`, and point by point on a softmax channel).

    ``settings``: the ``SEOptions`` fields of the theory job (its settings less ``prior``)."""
    from singlehead.state_evolution import SEOptions, prior_model
    from singlehead.state_evolution.sizes import check_theory_size

    options = SEOptions(**settings)
    check_theory_size(problem, options, prior)  # refused before any node or eigenvalue is allocated
    if param in ("d", "target") or not problem.student.symmetric or problem.multihead:
        return options, None, prior
    key = stable_hash({"problem": {**problem.to_dict(), param: None}, "prior": prior, "settings": settings})
    if key not in _SOLVER_INPUTS:
        if len(_SOLVER_INPUTS) >= _SOLVER_INPUTS_KEPT:
            _SOLVER_INPUTS.clear()
        _SOLVER_INPUTS[key] = (
            options,
            options.quadrature(problem),
            prior_model(problem, prior, draws=options.draws, seed=options.node_seed),
        )
    return _SOLVER_INPUTS[key]


def run_bayes(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    """``bayes_optimal(problem, **settings)`` as a record."""
    from singlehead.bayes import bayes_optimal

    return bayes_optimal(problem, **settings).to_dict()


def run_thresholds(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    """The interpolation and perfect-recovery thresholds of ``problem`` as a record."""
    from singlehead.thresholds import interpolation_threshold, perfect_recovery_threshold

    return {
        "source": "thresholds",
        "alpha_interp": interpolation_threshold(problem),
        "alpha_perfect": perfect_recovery_threshold(problem),
    }


def run_amp(problem: Problem, seed: int | None, **settings: Any) -> dict[str, Any]:
    from singlehead.amp import AMPOptions, amp

    return amp(problem, 0 if seed is None else int(seed), options=AMPOptions(**settings)).to_dict()
