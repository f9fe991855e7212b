"""``singlehead theory | bayes | thresholds``: state evolution, Bayes-optimal baseline, thresholds.

Thin wrappers over :func:`singlehead.state_evolution.theory`, :func:`singlehead.bayes.bayes_optimal`
and :mod:`singlehead.thresholds`; one JSON object per alpha (``--json``) or a readable line.
"""

from __future__ import annotations

import math
from typing import Any

import click

from . import cli
from ..results import jsonable
from .common import (ResultLog, dumps, pop_problem_options, problem_options, problems_from_options, run_key,
                     run_sweep)

THEORY_KEYS = ("test_error", "test_error_noisy", "train_error", "matrix_error", "rank_fraction", "q", "m", "Sigma",
               "qhat", "mhat", "Sigmahat", "eta", "delta", "eps", "converged", "residual")


@cli.command()
@problem_options
@click.option("--prior", type=click.Choice(["auto", "asymptotic", "finite"]), default="auto", show_default=True,
              help="Target side: asymptotic law (MP) or finite-d spectrum (power-law/custom).")
@click.option("--tol", type=float, default=1e-6, show_default=True, help="Fixed-point residual target.")
@click.option("--n-points", type=int, default=2048, show_default=True, help="Sobol nodes per scramble (4 scrambles).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the quadrature nodes / finite-d draws.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="JSON-lines file (resumable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per alpha.")
def theory(**kwargs: Any) -> None:
    """State-evolution prediction of the ERM minimiser, warm-started along the alpha grid."""
    from ..state_evolution import OutputQuadrature, prior_model, theory as run_theory

    problems = problems_from_options(**pop_problem_options(kwargs))
    if kwargs["tol"] <= 0:
        raise ValueError(f"tol must be > 0 (got {kwargs['tol']})")
    if kwargs["n_points"] < 16:
        raise ValueError(f"n-points must be an integer >= 16 (got {kwargs['n_points']})")
    settings = {k: kwargs[k] for k in ("prior", "tol", "n_points", "seed")}
    p0 = problems[0]
    pm = prior_model(p0, kwargs["prior"], seed=kwargs["seed"])
    quad = None if p0.channel == "linear" else OutputQuadrature.sobol(2 * p0.n_pairs, kwargs["n_points"], 4, kwargs["seed"])
    state: dict[str, Any] = {"init": None, "jac": None}

    def make(problem):
        def thunk() -> dict[str, Any]:
            r = run_theory(problem, prior=pm, init=state["init"], jacobian=state["jac"], tol=kwargs["tol"],
                           quad=quad, seed=kwargs["seed"])
            if r.extras["converged"]:
                state["init"], state["jac"] = r, r.extras.get("se_jacobian")
            rec = {"alpha": problem.alpha, **{k: r[k] for k in THEORY_KEYS}, "penalty": r.penalty,
                   "iterations": r["iterations"], "quadrature_error": r["quadrature_error"], "config": r.config,
                   "source": "theory"}
            return jsonable(rec)
        return thunk

    def describe(rec: dict[str, Any]) -> str:
        return (f"alpha={rec['alpha']:.4g}: test_error={rec['test_error']:.5f} train_error={rec['train_error']:.5f} "
                f"matrix_error={rec['matrix_error']:.5f} rank_fraction={rec['rank_fraction']:.4f} "
                f"converged={rec['converged']} (residual {rec['residual']:.1e})")

    items = [(run_key("theory", p, **settings), make(p)) for p in problems]
    run_sweep(items, ResultLog(kwargs["out"]), kwargs["as_json"], describe, "theory")


@cli.command()
@problem_options
@click.option("--n-outer", type=int, default=2048, show_default=True, help="Outer Sobol nodes (posterior means).")
@click.option("--n-inner", type=int, default=128, show_default=True, help="Inner Sobol nodes (posterior spread).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="JSON-lines file (resumable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per alpha.")
def bayes(**kwargs: Any) -> None:
    """Bayes-optimal MMSE and test error (posterior-mean prediction) per alpha."""
    from ..bayes import bayes_optimal
    from ..state_evolution import prior_model

    problems = problems_from_options(**pop_problem_options(kwargs))
    if kwargs["n_outer"] < 16 or kwargs["n_inner"] < 4:
        raise ValueError("n-outer must be >= 16 and n-inner >= 4")
    settings = {k: kwargs[k] for k in ("n_outer", "n_inner", "seed")}
    pm = prior_model(problems[0])

    def make(problem):
        def thunk() -> dict[str, Any]:
            r = bayes_optimal(problem, prior=pm, n_outer=kwargs["n_outer"], n_inner=kwargs["n_inner"],
                              seed=kwargs["seed"])
            return jsonable({"alpha": problem.alpha, "mmse": r["mmse"], "test_error": r.test_error,
                           "test_error_noisy": r.test_error_noisy, "test_error_plugin": r["test_error_plugin"],
                           "q": r["q"], "config": r.config, "source": "bayes"})
        return thunk

    def describe(rec: dict[str, Any]) -> str:
        return f"alpha={rec['alpha']:.4g}: mmse={rec['mmse']:.5f} test_error={rec['test_error']:.5f}"

    items = [(run_key("bayes", p, **settings), make(p)) for p in problems]
    run_sweep(items, ResultLog(kwargs["out"]), kwargs["as_json"], describe, "bayes")


@cli.command()
@problem_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def thresholds(**kwargs: Any) -> None:
    """Interpolation and perfect-recovery thresholds (lam -> 0+; alpha and lam are ignored)."""
    import warnings

    from ..thresholds import bayes_perfect_recovery_threshold, interpolation_threshold, perfect_recovery_threshold

    problem = problems_from_options(**pop_problem_options(kwargs))[0]

    def safe(f):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return f(problem)
        except NotImplementedError:
            return math.nan

    rec = jsonable({"alpha_interp": interpolation_threshold(problem), "alpha_perfect": safe(perfect_recovery_threshold),
                  "alpha_perfect_bayes": safe(bayes_perfect_recovery_threshold), "config": problem.to_dict()})
    if kwargs["as_json"]:
        click.echo(dumps(rec))
    else:
        fmt = lambda v: "n/a" if v is None else f"{v:.6g}"  # noqa: E731
        click.echo(f"alpha_interp={fmt(rec['alpha_interp'])} alpha_perfect={fmt(rec['alpha_perfect'])} "
                   f"alpha_perfect_bayes={fmt(rec['alpha_perfect_bayes'])}")
