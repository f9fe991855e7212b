"""Route functions used by the sweep runner: each maps (problem, seed, **settings) to a flat record."""

from __future__ import annotations

from typing import Any

from ..problem import Problem

# Each route imports its engine when it runs: a theory point never loads the Bayes, threshold (SciPy's
# stats and optimize), simulation (torch) or AMP code, which keeps `singlehead theory` quick to start.


def run_simulation(problem: Problem, seed: int | None, *, device: str = "cpu", **options: Any) -> dict[str, Any]:
    """``simulate(problem, seed, options=TrainOptions(**options), device=device)`` as a record."""
    from ..simulation import TrainOptions, simulate

    return simulate(problem, 0 if seed is None else int(seed), options=TrainOptions(**options),
                    device=device).to_dict()


def run_theory(problem: Problem, seed: int | None = None, *, prior: str = "auto", **settings: Any) -> dict[str, Any]:
    """``theory(problem, prior=prior, options=SEOptions(**settings))`` as a record."""
    from ..state_evolution import SEOptions, theory

    return theory(problem, prior=prior, options=SEOptions(**settings)).to_dict()


def run_theory_curve(problems: list[Problem], param: str, *, prior: str = "auto",
                     **settings: Any) -> list[dict[str, Any]]:
    """:func:`run_theory` for problems that differ only in ``param``, as one warm-started sweep
    (:func:`~singlehead.state_evolution.theory_curve`), in the given order.

    Each point is the same fixed point a cold :func:`run_theory` finds, to the solver tolerance
    (``SEOptions.tol``, relative change of ``(q, m, Sigma)`` per SE step), at a fraction of the cost.
    """
    from ..state_evolution import SEOptions, theory_curve

    values = [getattr(p, param) for p in problems]
    return [r.to_dict() for r in theory_curve(problems[0], values, param=param, prior=prior,
                                              options=SEOptions(**settings))]


def run_bayes(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    """``bayes_optimal(problem, **settings)`` as a record."""
    from ..bayes import bayes_optimal

    return bayes_optimal(problem, **settings).to_dict()


def run_thresholds(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    """The interpolation and perfect-recovery thresholds of ``problem`` as a record."""
    from ..thresholds import interpolation_threshold, perfect_recovery_threshold

    return {"source": "thresholds", "alpha_interp": interpolation_threshold(problem),
            "alpha_perfect": perfect_recovery_threshold(problem)}


def run_amp(problem: Problem, seed: int | None, **settings: Any) -> dict[str, Any]:
    from ..amp import AMPOptions, amp

    return amp(problem, 0 if seed is None else int(seed), options=AMPOptions(**settings)).to_dict()
