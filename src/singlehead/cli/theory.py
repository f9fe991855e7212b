"""``singlehead theory | bayes | thresholds``: state evolution, Bayes-optimal baseline, thresholds.

Thin wrappers over :func:`singlehead.theory`, :func:`singlehead.bayes.bayes_optimal`
and ``singlehead.thresholds``; one JSON object per alpha (``--json``) or a readable line.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import click

from singlehead.cli.common import (
    STUDENT_OPTIONS,
    dumps,
    head_options,
    pop_head_options,
    pop_problem_options,
    problem_options,
    problems_from_options,
    run_sweep,
)
from singlehead.model.results import Result, jsonable
from singlehead.runs import Job, cache_for_export, run_jobs
from singlehead.state_evolution import SEOptions, stability
from singlehead.state_evolution.api import result_settings
from singlehead.state_evolution.models import model_for


@click.command()
@problem_options
@head_options
@click.option(
    "--prior",
    type=click.Choice(["auto", "asymptotic", "finite"]),
    default="auto",
    show_default=True,
    help="Target side: auto = asymptotic law (MP, or the discrete law of the d eigenvalues), "
    "or the finite-d spectrum with GOE draws.",
)
@click.option(
    "--tol",
    type=float,
    default=None,
    help="Fixed-point residual target (default: the model's, 1e-6; 1e-4 for several softmax heads).",
)
@click.option(
    "--n-points",
    type=int,
    default=None,
    help="Sobol nodes per scramble (4 scrambles); default 2048, 4096 for the untied student.",
)
@click.option(
    "--node-seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the quadrature nodes and of the finite-d prior's GOE draws.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON-lines export; points are cached in OUT.cache, a rerun resumes.",
)
@click.option(
    "--stability",
    is_flag=True,
    help="Also report the replica-symmetry check of each point: the smooth replicon (RS unstable above 1) "
    "and the share of Sigmahat carried by prox jumps (state_evolution.stability).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per alpha.")
def theory(**kwargs: Any) -> None:
    """State-evolution prediction of the ERM minimiser, warm-started along the alpha grid.

    Several heads (--heads, --teacher-heads): on the linear channel its single-head equivalent (kappa ->
    min(1, H kappa), lam -> H sqrt(H0) lam; H0 > 1 needs an MP target), exact; on a softmax channel the
    experimental multi-head state evolution (factorized student, up to 4 heads, T <= 3, --prior auto; its own
    tolerance 1e-4 unless --tol is given), each point started from the previous one.
    """
    problems = problems_from_options(**pop_problem_options(kwargs), **pop_head_options(kwargs))
    options = SEOptions(tol=kwargs["tol"], n_points=kwargs["n_points"], node_seed=kwargs["node_seed"])  # validates
    if problems[0].multihead and kwargs["stability"]:
        raise ValueError(
            "stability: the replica-symmetry check is not available with --heads or --teacher-heads above 1"
        )
    model = model_for(problems[0])  # refuses, naming the parameter, what no model serves
    model.check(model.prepare(options), kwargs["prior"])
    # the key holds the settings that change each point's result
    jobs = [Job("theory", p, None, result_settings(p, options, kwargs["prior"])) for p in problems]
    cache = cache_for_export(kwargs["out"])
    resumed = sum(cache.get(j.key) is not None for j in jobs)
    # the runner's path, as for reproduce: the points not yet cached run as one warm-started sweep along alpha
    if kwargs["stability"]:
        run_jobs(jobs, cache, desc="theory")
        _add_stability(jobs, cache)

    def describe(rec: dict[str, Any]) -> str:
        rs = ""
        if "replicon" in rec:  # JSON null: infinite (a binding rank cap), see state_evolution.stability
            rep = "inf" if rec["replicon"] is None else f"{rec['replicon']:.3f}"
            rs = f" replicon={rep} prox_jump_share={rec['prox_jump_share']:.4f}"
        return (
            f"alpha={rec['problem']['alpha']:.4g}: test_error={rec['test_error']:.5f} "
            f"train_error={rec['train_error']:.5f} matrix_error={rec['matrix_error']:.5f} "
            f"rank_fraction={rec['rank_fraction']:.4f} converged={rec['converged']} "
            f"(residual {rec['residual']:.1e}){rs}"
        )

    run_sweep(jobs, kwargs["out"], kwargs["as_json"], describe, "theory", cache=cache, resumed=resumed)


def _add_stability(jobs: list, cache: Any) -> None:
    """Add ``replicon``, ``prox_jump_share`` and its error to each cached point that lacks them."""
    for j in jobs:
        rec = cache.get(j.key)
        if rec is None or "replicon" in rec or "Sigmahat" not in rec:
            continue
        s = stability(j.problem, Result.from_dict(rec))
        cache.put(
            {
                **rec,
                "replicon": s.replicon,
                "prox_jump_share": s.prox_jump_share,
                "prox_jump_share_se": s.prox_jump_share_se,
            }
        )


@click.command()
@problem_options(omit=STUDENT_OPTIONS)
@click.option("--n-outer", type=int, default=2048, show_default=True, help="Outer Sobol nodes (posterior means).")
@click.option("--n-inner", type=int, default=128, show_default=True, help="Inner Sobol nodes (posterior spread).")
@click.option("--node-seed", type=int, default=0, show_default=True, help="Seed of the quadrature nodes.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON-lines export; points are cached in OUT.cache, a rerun resumes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per alpha.")
def bayes(**kwargs: Any) -> None:
    """Bayes-optimal MMSE and test error (posterior-mean prediction) per alpha (no student options)."""
    problems = problems_from_options(**pop_problem_options(kwargs))
    if kwargs["n_outer"] < 16 or kwargs["n_inner"] < 4:
        raise ValueError("n-outer must be >= 16 and n-inner >= 4")
    settings = {k: kwargs[k] for k in ("n_outer", "n_inner", "node_seed")}
    jobs = [Job("bayes", p, None, tuple(sorted(settings.items()))) for p in problems]

    def describe(rec: dict[str, Any]) -> str:
        return f"alpha={rec['problem']['alpha']:.4g}: mmse={rec['mmse']:.5f} test_error={rec['test_error']:.5f}"

    run_sweep(jobs, kwargs["out"], kwargs["as_json"], describe, "bayes")


@click.command()
@problem_options(omit=("alpha", "lam"))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def thresholds(**kwargs: Any) -> None:
    """Interpolation and perfect-recovery thresholds (in alpha, at lam -> 0+)."""
    # imported here: SciPy's optimize and integrate would slow the start of `singlehead theory`
    from singlehead.thresholds import (
        bayes_perfect_recovery_threshold,
        interpolation_threshold,
        perfect_recovery_threshold,
    )

    problem = problems_from_options(**pop_problem_options(kwargs))[0]

    def safe(f):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return f(problem)
        except NotImplementedError:
            return math.nan

    rec = jsonable(
        {
            "alpha_interp": interpolation_threshold(problem),
            "alpha_perfect": safe(perfect_recovery_threshold),
            "alpha_perfect_bayes": safe(bayes_perfect_recovery_threshold),
            "problem": problem.to_dict(),
        }
    )
    if kwargs["as_json"]:
        click.echo(dumps(rec))
    else:
        fmt = lambda v: "n/a" if v is None else f"{v:.6g}"  # noqa: E731
        click.echo(
            f"alpha_interp={fmt(rec['alpha_interp'])} alpha_perfect={fmt(rec['alpha_perfect'])} "
            f"alpha_perfect_bayes={fmt(rec['alpha_perfect_bayes'])}"
        )
