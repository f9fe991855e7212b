"""Finite size measured: simulation-minus-theory gaps at several d, extrapolated to d = inf.

The figure replaces "simulations sit above theory at small d, as expected" by a measurement:
L-BFGS students of the MP base problem (:data:`~.figspec.BASE`, ``kappa = 1``) at
``d in Scale.fs_ds`` with ``Scale.fs_seeds`` seeds each (more at small d, where a run is cheap
and the seed scatter larger), at ``Scale.fs_alphas``; the test-error gap
``simulated - SE`` (per sequence, noiseless labels, THEORY §1) is fitted as ``a + b/d``
(:func:`~singlehead.analysis.finite_size.extrapolate_to_infinite_d`) and the agreement rule is
"0 lies in the 95% CI of the extrapolated gap ``a``" — the theory is the ``d = inf`` prediction,
so this is the comparison it makes, with no tolerance beyond the statistical interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.finite_size import FiniteSizeGaps, finite_size_gaps
from ..problem import Problem
from .compare import extrapolation_p_value, records_to_frame
from .figspec import BASE, Context, _params_text, figure, new_figure, problem_params
from .grid import Job
from .report import FigureOutput

POOR_FIT_P = 0.01  # a fit with chi2 p-value below this is called poor in the agreement rows


def sim_jobs_per_d(ctx: Context, problems: list[Problem], seeds: dict[int, int], optimizer: str = "lbfgs") -> list[Job]:
    """Simulation jobs (through :meth:`Context.sim_jobs`, same keys) with ``seeds[p.d]`` seeds per problem."""
    jobs: list[Job] = []
    for d, k in seeds.items():
        jobs += ctx.sim_jobs([p for p in problems if p.d == d], optimizer, seeds=int(k))
    return jobs


def gaps_from_frame(sim: pd.DataFrame, theory: float, quantity: str = "test_error", *, pool: bool = True,
                    order: int = 1, level: float = 0.95) -> FiniteSizeGaps:
    """Per-d gaps of ``quantity`` (one row per seed, ``cfg_d`` column) to ``theory`` and their extrapolation.

    The per-run Monte Carlo error ``<quantity>_se`` (the test-set error of the test error), when
    present, enters as ``mc_se``; ``pool`` selects the pooled variance model of
    :func:`~singlehead.analysis.finite_size.finite_size_gaps`.
    """
    groups = dict(tuple(sim.groupby("cfg_d")))
    per_d = {int(d): g[quantity].to_numpy(dtype=float) for d, g in groups.items()}
    mc = ({int(d): g[f"{quantity}_se"].to_numpy(dtype=float) for d, g in groups.items()}
          if f"{quantity}_se" in sim else None)
    return finite_size_gaps(per_d, theory, mc_se=mc, pool=pool, order=order, level=level)


def fit_note(g: FiniteSizeGaps) -> str:
    """One line: the extrapolated gap with its CI and the goodness of fit (poor fits said so)."""
    e = g.extrapolation
    half = 0.5 * (e.ci[1] - e.ci[0])
    s = (f"gap(d=inf) = {e.intercept:+.2e} ± {half:.2e} ({100 * e.level:g}% CI), slope b = {e.slopes[0]:+.3g}; "
         f"chi2/dof = {e.chi2_per_dof:.2f} (dof {e.dof}), p = {e.p_value:.3g}")
    if np.isfinite(g.pooled_c):
        s += f"; s.e. from the pooled variance c^2/d^2 + mc^2, c = {g.pooled_c:.3g}"
    if e.inflated:
        s += "; CI inflated by chi2/dof"
    if e.poor_fit(POOR_FIT_P):
        s += f"; POOR FIT (p < {POOR_FIT_P:g}): a + b/d does not describe these gaps, the CI is not trustworthy"
    return s


@figure("finite_size")
def fig_finite_size(ctx: Context) -> FigureOutput:
    """Test-error gap (simulation - theory) vs 1/d per alpha, fitted a + b/d, extrapolated to d = inf with its CI."""
    sc = ctx.scale
    ds, seeds, alphas = tuple(sc.fs_ds), tuple(sc.fs_seeds), tuple(sc.fs_alphas)
    if len(ds) != len(seeds):
        raise ValueError(f"Scale.fs_seeds must have one entry per size in Scale.fs_ds ({len(ds)}) (got {seeds!r})")
    problems = [Problem(d=d, alpha=a, kappa=1.0, **BASE) for a in alphas for d in ds]
    sim = records_to_frame(ctx.run(sim_jobs_per_d(ctx, problems, dict(zip(ds, seeds))),
                                   "L-BFGS: finite-size scan"))
    # the MP state evolution is the d -> inf law (it does not depend on Problem.d); evaluated at the largest d
    th_problems = [Problem(d=max(ds), alpha=a, kappa=1.0, **BASE) for a in alphas]
    th = records_to_frame(ctx.run(ctx.theory_jobs(th_problems), "theory: finite-size scan"))
    theory = dict(zip(th.cfg_alpha, th.test_error))
    fig, axes = new_figure(1, len(alphas), figsize=(4.6 * len(alphas), 4.0), squeeze=False)
    rows, fits = [], []
    for ax, a in zip(axes[0], alphas):
        t = float(theory[a])
        g = gaps_from_frame(sim[sim.cfg_alpha == a], t)
        raw = gaps_from_frame(sim[sim.cfg_alpha == a], t, pool=False).extrapolation  # per-d s.e., for comparison
        e = g.extrapolation
        x = 1.0 / g.d
        ax.axhline(0.0, color="k", lw=1.2, label="theory (SE, d = inf)")
        ax.errorbar(x, g.gap, yerr=g.se, fmt="o", color="tab:blue", mfc="none", capsize=3,
                    label="simulation − theory (mean ± s.e.)")
        xx = np.linspace(0.0, 1.08 * x.max(), 100)
        ax.plot(xx, np.polynomial.polynomial.polyval(xx, (e.intercept, *e.slopes)), "-", color="tab:orange",
                label="fit a + b/d")
        ax.errorbar([0.0], [e.intercept], yerr=[[e.intercept - e.ci[0]], [e.ci[1] - e.intercept]], fmt="D",
                    color="tab:red", capsize=4, label=f"d = inf: a ± {100 * e.level:g}% CI")
        ax.set_xticks([0.0, *x], ["∞", *(f"{int(d)}" for d in g.d)], fontsize=7)
        ax.set(xlabel="d (axis linear in 1/d)", ylabel="test error: simulation − theory", xlim=(-0.04 * xx[-1], xx[-1]))
        verdict = "0 in CI" if g.agrees else "0 NOT in CI"
        ax.set_title(f"alpha={a:g}: theory {t:.4f}; gap(inf) = {e.intercept:+.1e} ± {e.ci[1] - e.intercept:.1e} "
                     f"({verdict}); chi2/dof {e.chi2_per_dof:.2f}", fontsize=7.5)
        half = e.ci[1] - e.intercept
        rows.append({"cfg_alpha": a, "quantity": f"test error at d = inf, extrapolated (gap = a + b/d fitted on "
                     f"d = {', '.join(str(int(d)) for d in g.d)})", "theory": t, "simulation": t + e.intercept,
                     "se": e.stderr, "gap": abs(e.intercept), "tolerance": half, "within": bool(g.agrees),
                     "p_value": extrapolation_p_value(e.intercept, e.stderr),
                     "n_seeds": int(g.n_seeds.sum()), "ci_low": t + e.ci[0], "ci_high": t + e.ci[1],
                     "chi2_per_dof": e.chi2_per_dof, "fit_p_value": e.p_value,
                     "note": fit_note(g) + f"; with per-d seed s.e. instead of the pooled variance: gap(d=inf) = "
                     f"{raw.intercept:+.2e} ± {raw.ci[1] - raw.intercept:.2e}, chi2/dof {raw.chi2_per_dof:.2f}"})
        fits.append(pd.DataFrame({"cfg_alpha": a, "cfg_d": g.d, "gap_mean": g.gap, "gap_se": g.se, "seed_sd": g.sd,
                                  "pooled_c": g.pooled_c,
                                  "n_seeds_d": g.n_seeds, "gap_fit": e.predict(g.d), "theory_test_error": t,
                                  "extrapolated_gap": e.intercept, "extrapolated_gap_se": e.stderr,
                                  "slope_b": e.slopes[0], "chi2_per_dof": e.chi2_per_dof, "fit_p_value": e.p_value}))
    axes[0][0].legend(fontsize=7)
    params = problem_params(problems[0], ("kappa", 1.0), ("d", ", ".join(map(str, ds))),
                            ("seeds per d", ", ".join(map(str, seeds))), ("n_test", sc.n_test), ("optimizer", "lbfgs"))
    fig.suptitle(f"Finite size measured: test-error gap vs 1/d, extrapolated to d = inf\n{_params_text(params)}",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    table = pd.concat([sim.assign(kind="simulation", gap=sim.test_error - sim.cfg_alpha.map(theory)),
                       th.assign(kind="theory"), pd.concat(fits, ignore_index=True).assign(kind="fit")],
                      ignore_index=True)
    return FigureOutput("finite_size", "Finite size measured: gap to theory extrapolated to d = inf",
                        "Points: simulated minus predicted test error (per sequence, noiseless labels) at each d, "
                        "mean ± s.e. over seeds (more seeds at small d); the s.e. uses a pooled per-seed variance "
                        "c^2/d^2 + (test-set Monte Carlo error)^2, c fitted on all seeds, since a 4-6-seed variance "
                        "at the largest d can fall below the known test-set error. Orange: weighted least-squares "
                        "fit a + b/d (weights 1/s.e.^2; covariance inflated by chi2/dof when it exceeds 1). Red: the "
                        "extrapolated d = inf gap a with its 95% CI; black: the theory (gap 0). Agreement rule: "
                        "0 inside the 95% CI of a — the theory is a d = inf prediction, and this compares it "
                        "there, with no tolerance beyond the statistical interval.",
                        params, fig, table, pd.DataFrame(rows))
