"""Finite size measured: simulation-minus-theory gaps at several d, extrapolated to d = inf.

The figure replaces "simulations sit above theory at small d, as expected" by a measurement:
L-BFGS students of the MP base problem (:data:`~.figspec.BASE`, ``kappa = 1``) at
``d in FiniteSizeSpec.ds`` with ``FiniteSizeSpec.seeds`` seeds each (more at small d, where a run is
cheap and the seed scatter larger), at ``FiniteSizeSpec.alphas``; the test-error gap
``simulated - SE`` (per sequence, noiseless labels, docs: Theory, :ref:`theory-metrics`) is fitted as ``a + b/d``
(:func:`~singlehead.analysis.finite_size.extrapolate_to_infinite_d`) and the extrapolated gap ``a``
is judged by the report's rule (``singlehead.report.verdict``) with the normal law of the fit:
the theory is the ``d = inf`` prediction, and the declared tolerance (3 % of it, floor 0.005)
covers only what ``a + b/d`` leaves out and the quadrature. ``p_zero`` (``a = 0``; ``>= 0.05``
exactly when 0 is in the 95 % CI) is kept beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.analysis.finite_size import FiniteSizeGaps, finite_size_gaps
from singlehead.figures.figspec import (
    BASE,
    Context,
    FigureDef,
    FigureRun,
    new_figure,
    params_text,
    problem_params,
    register,
    stopping_rule,
)
from singlehead.figures.spec import FigureSpec, check_same_length
from singlehead.model.problem import Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, extrapolation_p_value, records_to_frame, tol_columns
from singlehead.runs import Job

POOR_FIT_P = 0.01  # a fit with chi2 p-value below this is called poor in the agreement rows


@dataclass(frozen=True)
class FiniteSizeSpec(FigureSpec):
    """Sizes of the finite-size figure: L-BFGS students at each ``d in ds`` with ``seeds`` (one count per
    size), at each alpha of ``alphas``, ``n_test`` test sequences per run; ``fit_rtol`` is the L-BFGS
    stopping rule, as in :class:`singlehead.figures.errors.ErrorsSpec` (the same value, so that the d = 100
    runs are those of errors vs alpha)."""

    ds: tuple[int, ...] = (25, 35, 50, 70, 100)
    seeds: tuple[int, ...] = (12, 10, 8, 6, 8)  # d = 100: the 8 seeds of errors_vs_alpha (cached)
    alphas: tuple[float, ...] = (0.25, 0.5, 1.0)
    n_test: int = 4000
    fit_rtol: float | None = 1e-6

    def check(self) -> None:
        check_same_length(self, "ds", "seeds")

    @classmethod
    def full(cls) -> FiniteSizeSpec:
        return cls(n_test=20000, fit_rtol=None)

    @classmethod
    def smoke(cls) -> FiniteSizeSpec:
        return cls(ds=(8, 12, 16), seeds=(3, 3, 3), alphas=(0.25, 1.0), n_test=500)


def sim_jobs_per_d(
    ctx: Context,
    problems: list[Problem],
    seeds: dict[int, int],
    *,
    n_test: int,
    optimizer: str = "lbfgs",
    **options: Any,
) -> list[Job]:
    """Simulation jobs (through :meth:`Context.sim_jobs`, same keys) with ``seeds[p.d]`` seeds per problem;
    ``options`` are further :class:`~singlehead.sim.simulation.TrainOptions` fields."""
    jobs: list[Job] = []
    for d, k in seeds.items():
        jobs += ctx.sim_jobs([p for p in problems if p.d == d], optimizer, seeds=int(k), n_test=n_test, **options)
    return jobs


def gaps_from_frame(
    sim: pd.DataFrame,
    theory: float,
    quantity: str = "test_error",
    *,
    pool: bool = True,
    order: int = 1,
    level: float = 0.95,
) -> FiniteSizeGaps:
    """Per-d gaps of ``quantity`` (one row per seed, ``cfg_d`` column) to ``theory`` and their extrapolation.

    The per-run Monte Carlo error ``<quantity>_se`` (the test-set error of the test error), when
    present, enters as ``mc_se``; ``pool`` selects the pooled variance model of
    :func:`~singlehead.analysis.finite_size.finite_size_gaps`.
    """
    groups = dict(tuple(sim.groupby("cfg_d")))
    per_d = {int(d): g[quantity].to_numpy(dtype=float) for d, g in groups.items()}
    mc = (
        {int(d): g[f"{quantity}_se"].to_numpy(dtype=float) for d, g in groups.items()}
        if f"{quantity}_se" in sim
        else None
    )
    return finite_size_gaps(per_d, theory, mc_se=mc, pool=pool, order=order, level=level)


def fit_note(g: FiniteSizeGaps) -> str:
    """One line: the extrapolated gap with its CI and the goodness of fit (poor fits said so)."""
    e = g.extrapolation
    half = 0.5 * (e.ci[1] - e.ci[0])
    s = (
        f"gap(d=inf) = {e.intercept:+.2e} ± {half:.2e} ({100 * e.level:g}% CI), slope b = {e.slopes[0]:+.3g}; "
        f"chi2/dof = {e.chi2_per_dof:.2f} (dof {e.dof}), p = {e.p_value:.3g}"
    )
    if np.isfinite(g.pooled_c):
        s += f"; s.e. from the pooled variance c^2/d^2 + mc^2, c = {g.pooled_c:.3g}"
    if e.inflated:
        s += "; CI inflated by chi2/dof"
    if e.poor_fit(POOR_FIT_P):
        s += f"; POOR FIT (p < {POOR_FIT_P:g}): a + b/d does not describe these gaps, the CI is not trustworthy"
    return s


def finite_size_grid(spec: FiniteSizeSpec) -> dict[str, Any]:
    """The simulated problems (every alpha at every d) and the theory problems (every alpha, once)."""
    problems = [Problem(d=d, alpha=a, kappa=1.0, **BASE) for a in spec.alphas for d in spec.ds]
    # the MP state evolution is the d -> inf law (it does not depend on Problem.d); evaluated at the largest d
    theory = [Problem(d=max(spec.ds), alpha=a, kappa=1.0, **BASE) for a in spec.alphas]
    return {"problems": problems, "theory": theory}


def finite_size_run(ctx: Context, spec: FiniteSizeSpec, grid: dict[str, Any]) -> FigureRun:
    """Simulations and theory; per alpha the gaps, their a + b/d fit and one agreement row."""
    sim_recs, th_recs = ctx.run_together(
        [
            sim_jobs_per_d(
                ctx,
                grid["problems"],
                dict(zip(spec.ds, spec.seeds)),
                n_test=spec.n_test,
                **stopping_rule(spec.fit_rtol),
            ),
            ctx.theory_jobs(grid["theory"]),
        ],
        "finite-size scan: L-BFGS and theory",
    )
    sim, th = records_to_frame(sim_recs), records_to_frame(th_recs)
    theory = dict(zip(th.cfg_alpha, th.test_error))
    rows, fits, gaps = [], [], {}
    for a in spec.alphas:
        t = float(theory[a])
        g = gaps_from_frame(sim[sim.cfg_alpha == a], t)
        raw = gaps_from_frame(sim[sim.cfg_alpha == a], t, pool=False).extrapolation  # per-d s.e., for comparison
        e = g.extrapolation
        gaps[a] = (t, g)
        half = e.ci[1] - e.intercept
        rows.append(
            {
                "cfg_alpha": a,
                "quantity": f"test error at d = inf, extrapolated (gap = a + b/d fitted on "
                f"d = {', '.join(str(int(d)) for d in g.d)})",
                "theory": t,
                "simulation": t + e.intercept,
                "se": e.stderr,
                "gap": abs(e.intercept),
                "ci_half": half,
                "p_zero": extrapolation_p_value(e.intercept, e.stderr),
                **tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d and SE quadrature"),
                "n_seeds": int(g.n_seeds.sum()),
                "ci_low": t + e.ci[0],
                "ci_high": t + e.ci[1],
                "chi2_per_dof": e.chi2_per_dof,
                "fit_p_value": e.p_value,
                "note": fit_note(g) + f"; with per-d seed s.e. instead of the pooled variance: gap(d=inf) = "
                f"{raw.intercept:+.2e} ± {raw.ci[1] - raw.intercept:.2e}, chi2/dof {raw.chi2_per_dof:.2f}",
            }
        )
        fits.append(
            pd.DataFrame(
                {
                    "cfg_alpha": a,
                    "cfg_d": g.d,
                    "gap_mean": g.gap,
                    "gap_se": g.se,
                    "seed_sd": g.sd,
                    "pooled_c": g.pooled_c,
                    "n_seeds_d": g.n_seeds,
                    "gap_fit": e.predict(g.d),
                    "theory_test_error": t,
                    "extrapolated_gap": e.intercept,
                    "extrapolated_gap_se": e.stderr,
                    "slope_b": e.slopes[0],
                    "chi2_per_dof": e.chi2_per_dof,
                    "fit_p_value": e.p_value,
                }
            )
        )
    params = problem_params(
        grid["problems"][0],
        ("kappa", 1.0),
        ("d", ", ".join(map(str, spec.ds))),
        ("seeds per d", ", ".join(map(str, spec.seeds))),
        ("n_test", spec.n_test),
        ("optimizer", "lbfgs"),
    )
    table = pd.concat(
        [
            sim.assign(kind="simulation", gap=sim.test_error - sim.cfg_alpha.map(theory)),
            th.assign(kind="theory"),
            pd.concat(fits, ignore_index=True).assign(kind="fit"),
        ],
        ignore_index=True,
    )
    return FigureRun(table, pd.DataFrame(rows), params, {"gaps": gaps})


def finite_size_plot(spec: FiniteSizeSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """One panel per alpha: the gaps vs 1/d, the fit and the extrapolated gap with its CI."""
    fig, axes = new_figure(1, len(spec.alphas), figsize=(4.6 * len(spec.alphas), 4.0), squeeze=False)
    for ax, a in zip(axes[0], spec.alphas):
        t, g = res.data["gaps"][a]
        e = g.extrapolation
        x = 1.0 / g.d
        ax.axhline(0.0, color="k", lw=1.2, label="theory (SE, d = inf)")
        ax.errorbar(
            x,
            g.gap,
            yerr=g.se,
            fmt="o",
            color="tab:blue",
            mfc="none",
            capsize=3,
            label="simulation − theory (mean ± s.e.)",
        )
        xx = np.linspace(0.0, 1.08 * x.max(), 100)
        ax.plot(
            xx,
            np.polynomial.polynomial.polyval(xx, (e.intercept, *e.slopes)),
            "-",
            color="tab:orange",
            label="fit a + b/d",
        )
        ax.errorbar(
            [0.0],
            [e.intercept],
            yerr=[[e.intercept - e.ci[0]], [e.ci[1] - e.intercept]],
            fmt="D",
            color="tab:red",
            capsize=4,
            label=f"d = inf: a ± {100 * e.level:g}% CI",
        )
        ax.set_xticks([0.0, *x], ["∞", *(f"{int(d)}" for d in g.d)], fontsize=7)
        ax.set(xlabel="d (axis linear in 1/d)", ylabel="test error: simulation − theory", xlim=(-0.04 * xx[-1], xx[-1]))
        verdict = "0 in CI" if g.agrees else "0 NOT in CI"
        ax.set_title(
            f"alpha={a:g}: theory {t:.4f}; gap(inf) = {e.intercept:+.1e} ± {e.ci[1] - e.intercept:.1e} "
            f"({verdict}); chi2/dof {e.chi2_per_dof:.2f}",
            fontsize=7.5,
        )
    axes[0][0].legend(fontsize=7)
    fig.suptitle(
        f"Finite size measured: test-error gap vs 1/d, extrapolated to d = inf\n{params_text(res.params)}", fontsize=9
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def finite_size_caption(spec: FiniteSizeSpec, grid: dict[str, Any], res: FigureRun) -> str:
    level = next(iter(res.data["gaps"].values()))[1].extrapolation.level
    return (
        "Points: simulated minus predicted test error (per sequence, noiseless labels) at each d, "
        "mean ± s.e. over seeds ("
        + ", ".join(f"{k} at d = {d}" for d, k in zip(spec.ds, spec.seeds))
        + "); the s.e. uses a pooled per-seed variance "
        "c^2/d^2 + (test-set Monte Carlo error)^2, c fitted on all seeds, since a few-seed variance "
        "at the largest d can fall below the known test-set error. Orange: weighted least-squares "
        "fit a + b/d (weights 1/s.e.^2; covariance inflated by chi2/dof when it exceeds 1). Red: the "
        f"extrapolated d = inf gap a with its {100 * level:g}% CI; black: the theory (gap 0). The theory is a d = inf "
        "prediction and a is compared with it there: equivalence and difference tests of |a| against the "
        "declared tolerance (the report's rule)."
    )


register(
    FigureDef(
        "finite_size",
        "Finite size measured: gap to theory extrapolated to d = inf",
        FiniteSizeSpec,
        finite_size_grid,
        finite_size_run,
        finite_size_plot,
        finite_size_caption,
    )
)
