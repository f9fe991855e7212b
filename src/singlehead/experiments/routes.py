"""Route functions used by the sweep runner: each maps (problem, seed, **settings) to a flat record."""

from __future__ import annotations

from typing import Any

from ..problem import Problem


def _drop(rec: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k not in keys}


def run_simulation(problem: Problem, seed: int | None, **settings: Any) -> dict[str, Any]:
    from ..simulation import simulate

    return simulate(problem, 0 if seed is None else int(seed), **settings).to_dict()


def run_theory(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    from ..state_evolution import theory

    return theory(problem, **settings).to_dict()


def run_bayes(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    from ..bayes import bayes_optimal

    r = bayes_optimal(problem, **settings)
    return r.to_dict() if hasattr(r, "to_dict") else dict(r)


def run_thresholds(problem: Problem, seed: int | None = None, **settings: Any) -> dict[str, Any]:
    from ..thresholds import interpolation_threshold, perfect_recovery_threshold

    return {"alpha_interp": interpolation_threshold(problem), "alpha_perfect": perfect_recovery_threshold(problem)}


def run_amp(problem: Problem, seed: int | None, **settings: Any) -> dict[str, Any]:
    from ..amp import amp

    rec = amp(problem, 0 if seed is None else int(seed), **settings).to_dict()
    return _drop(rec, "history")
