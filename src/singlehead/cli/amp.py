"""``singlehead amp``: GAMP on instances (ERM-GAMP, or Bayes-GAMP with ``--bayes``), one JSON line per (alpha, seed)."""

from __future__ import annotations

from typing import Any

import click

from singlehead.amp import AMPOptions
from singlehead.cli.common import (
    instance_run_options,
    instance_seeds,
    pop_problem_options,
    problem_options,
    problems_from_options,
    run_sweep,
)
from singlehead.runs import Job


@click.command()
@problem_options
@instance_run_options
@click.option("--bayes", is_flag=True, help="Bayes-optimal GAMP-RIE (RIE matrix denoiser, posterior-mean output).")
@click.option("--max-iter", type=int, default=300, show_default=True, help="GAMP iteration budget.")
@click.option(
    "--damping",
    type=float,
    default=None,
    help="Weight of the new iterate in (0, 1] (default: 1 for ERM, 0.5 for --bayes).",
)
@click.option("--tol", type=float, default=1e-6, show_default=True, help="Stop when the relative change is below this.")
def amp(**kwargs: Any) -> None:
    """Run GAMP on sampled instances and print the same metrics as `simulate`, plus iterations and history."""
    problems = problems_from_options(**pop_problem_options(kwargs))
    seeds = instance_seeds(kwargs, problems)
    options = AMPOptions(
        bayes=kwargs["bayes"],
        max_iter=kwargs["max_iter"],
        damping=kwargs["damping"],
        tol=kwargs["tol"],
        n_test=kwargs["n_test"],
    )  # validates
    settings = {k: getattr(options, k) for k in ("bayes", "max_iter", "damping", "tol", "n_test")}
    jobs = [Job("amp", p, s, tuple(sorted(settings.items()))) for p in problems for s in seeds]

    def describe(rec: dict[str, Any]) -> str:
        c = rec["problem"]
        return (
            f"alpha={c['alpha']:.4g} seed={rec['seed']}{' (bayes)' if rec['bayes'] else ''}: "
            f"test_error={rec['test_error']:.5f} train_error={rec['train_error']:.5f} "
            f"matrix_error={rec['matrix_error']:.5f} rank={rec['rank']}/{c['d']} "
            f"iterations={rec['iterations']}{'' if rec['converged'] else ' (not converged)'} "
            f"({rec['runtime_s']:.1f} s)"
        )

    run_sweep(jobs, kwargs["out"], kwargs["as_json"], describe, "amp")
