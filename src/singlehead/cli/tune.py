"""``singlehead tune``: the weight decay ``lam`` of lowest predicted test error, per alpha.

A thin wrapper of :func:`singlehead.tune` (and of
:func:`~singlehead.alpha_for_error` with ``--target-error``); one JSON object per alpha
(``--json``) or a readable line.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from singlehead.analysis.tuning import DEFAULT_ALPHA_RANGE, DEFAULT_LAM_RANGE, TuneResult, alpha_for_error
from singlehead.analysis.tuning import tune as tune_point
from singlehead.cli.common import dumps, pop_problem_options, problem_options, problems_from_options
from singlehead.state_evolution import SEOptions


@click.command()
@problem_options(omit=("lam",))
@click.option(
    "--lam-min",
    type=float,
    default=DEFAULT_LAM_RANGE[0],
    show_default=True,
    help="Lower end of the searched lam range (> 0).",
)
@click.option(
    "--lam-max",
    type=float,
    default=DEFAULT_LAM_RANGE[1],
    show_default=True,
    help="Upper end of the searched lam range (> lam-min).",
)
@click.option(
    "--points-per-decade", type=int, default=4, show_default=True, help="Density of the initial log grid in lam."
)
@click.option(
    "--lam-tol", type=float, default=1e-3, show_default=True, help="Tolerance of the refinement in log10 lam."
)
@click.option(
    "--target-error",
    type=float,
    default=None,
    help="Instead: the smallest alpha whose optimally regularised test error is at most this; searched "
    "between the smallest and largest --alpha when it lists two or more values, else in "
    f"[{DEFAULT_ALPHA_RANGE[0]:g}, {DEFAULT_ALPHA_RANGE[1]:g}].",
)
@click.option(
    "--alpha-tol",
    type=float,
    default=1e-3,
    show_default=True,
    help="With --target-error: tolerance of the bisection in log10 alpha.",
)
@click.option(
    "--prior",
    type=click.Choice(["auto", "asymptotic", "finite"]),
    default="auto",
    show_default=True,
    help="Target side of the state evolution (as in `singlehead theory`).",
)
@click.option("--tol", type=float, default=1e-6, show_default=True, help="Fixed-point residual target.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per alpha (alpha, lam, test_error, converged, boundary, ...).",
)
def tune(**kwargs: Any) -> None:
    """The weight decay lam of lowest state-evolution test error at each alpha (or the alpha
    reaching --target-error)."""
    problems = problems_from_options(**pop_problem_options(kwargs))
    options = SEOptions(tol=kwargs["tol"])  # validates
    if not 0 < kwargs["lam_min"] < kwargs["lam_max"]:
        raise ValueError(
            f"lam-min and lam-max must satisfy 0 < lam-min < lam-max "
            f"(got {kwargs['lam_min']:g} and {kwargs['lam_max']:g})"
        )
    search = {
        "lam_range": (kwargs["lam_min"], kwargs["lam_max"]),
        "options": options,
        "prior": kwargs["prior"],
        "points_per_decade": kwargs["points_per_decade"],
        "lam_tol": kwargs["lam_tol"],
    }

    def show(res: TuneResult) -> None:
        if kwargs["as_json"]:
            rec = res.to_dict()
            rec.pop("evaluations")
            click.echo(dumps(rec))
        else:
            where = f" boundary={res.boundary}" if res.boundary else ""
            note = f" ({res.message})" if res.message else ""
            click.echo(
                f"alpha={res.alpha:.4g}: lam={res.lam:.5g} test_error={res.test_error:.6f} "
                f"converged={res.converged}{where}{note}"
            )

    if kwargs["target_error"] is not None:
        alphas = [p.alpha for p in problems]
        rng = (min(alphas), max(alphas)) if len(alphas) > 1 else DEFAULT_ALPHA_RANGE
        show(
            alpha_for_error(
                problems[0], kwargs["target_error"], alpha_range=rng, alpha_tol=kwargs["alpha_tol"], **search
            )
        )
        return
    bar = None
    if len(problems) > 1:
        from tqdm import tqdm  # a single point starts without tqdm

        bar = tqdm(total=len(problems), desc="tune", file=sys.stderr)
    for p in problems:
        res = tune_point(p, **search)
        if bar is not None:
            bar.clear()
        show(res)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
