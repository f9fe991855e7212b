"""Report figure "tied vs untied student": the untied state evolution against ERM, beside the tied one.

The untied student ``M = W_Q W_K^T/sqrt(p d)`` (weight decay = ``lam d ||M||_*``) on the tied MP
teacher of the other figures: its state evolution (:mod:`singlehead.state_evolution.untied`,
beyond arXiv 2509.24914) against L-BFGS fits at several ``d``, extrapolated to ``d = inf`` by
``a + b/d``; the tied student's curve for comparison. Agreement rows: the untied test error at
``d = inf`` per simulated alpha (the gap's extrapolation, with the SE's own sampling error added), each with
the RS diagnostic at its SE point (:mod:`singlehead.figures.rs_diagnostic`: the two-block replicon and the
prox-jump shares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from singlehead.figures.figspec import (
    BASE,
    Context,
    FigureDef,
    FigureRun,
    new_figure,
    params_text,
    problem_params,
    register,
)
from singlehead.figures.finite_size import fit_note, gaps_from_frame, sim_jobs_per_d
from singlehead.figures.rs_diagnostic import cached_rs_points, criterion_text, with_rs_diagnostic
from singlehead.figures.spec import FigureSpec, check_same_length
from singlehead.model.problem import Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, extrapolation_p_value, records_to_frame, tol_columns
from singlehead.thresholds import interpolation_threshold

__all__ = ["UntiedSpec"]

# per-run arrays kept in the cache records, not in the figure's table
_ARRAYS = ("eigenvalues", "singular_values", "history", "S", "S0", "sv_edges", "sv_density")


@dataclass(frozen=True)
class UntiedSpec(FigureSpec):
    """Sizes of the tied-vs-untied figure: untied L-BFGS fits at each ``d in ds`` (``seeds`` per size)
    at ``alphas_sim``; both students' state evolution on ``alphas_theory`` and ``alphas_sim`` (an untied point is
    the figure's dearest theory: the quick preset draws its line through seven); ``lam`` for every point."""

    ds: tuple[int, ...] = (40, 60)
    seeds: tuple[int, ...] = (4, 3)
    alphas_sim: tuple[float, ...] = (0.3, 1.0, 2.0)
    alphas_theory: tuple[float, ...] = (0.15, 0.6, 1.5, 3.0)
    lam: float = 0.01
    n_test: int = 4000

    def check(self) -> None:
        check_same_length(self, "ds", "seeds")

    @classmethod
    def full(cls) -> UntiedSpec:
        return cls(
            ds=(60, 100, 150), seeds=(4, 3, 2), alphas_theory=(0.15, 0.25, 0.4, 0.6, 1.0, 1.5, 2.0, 3.0), n_test=20000
        )

    @classmethod
    def smoke(cls) -> UntiedSpec:
        return cls(ds=(12, 16), seeds=(2, 2), alphas_sim=(1.0,), alphas_theory=(0.5, 1.0), n_test=300)


def untied_grid(spec: UntiedSpec) -> dict[str, Any]:
    """Untied simulations (every simulated alpha at every d), both students' theory, tied fits at the largest d."""
    base = {**BASE, "lam": spec.lam}
    alphas = sorted(set(spec.alphas_theory) | set(spec.alphas_sim))
    d = max(spec.ds)
    return {
        "sims": [Problem(d=dd, alpha=a, student="untied", **base) for a in spec.alphas_sim for dd in spec.ds],
        "tied_sims": [Problem(d=d, alpha=a, **base) for a in spec.alphas_sim],
        "theory": {st: [Problem(d=d, alpha=a, student=st, **base) for a in alphas] for st in ("untied", "factorized")},
    }


def untied_run(ctx: Context, spec: UntiedSpec, grid: dict[str, Any]) -> FigureRun:
    """Theory of both students, untied fits per d and their extrapolation, tied fits at the largest d."""
    students = list(grid["theory"])
    # the untied SE chain (the dearest theory) overlaps the fits on the other worker
    *th_recs, un_recs, tied_recs = ctx.run_together(
        [
            *(ctx.theory_jobs(grid["theory"][st]) for st in students),
            sim_jobs_per_d(ctx, grid["sims"], dict(zip(spec.ds, spec.seeds)), n_test=spec.n_test),
            ctx.sim_jobs(grid["tied_sims"], seeds=spec.seeds[-1], n_test=spec.n_test),
        ],
        "tied vs untied: both students' theory, untied and tied L-BFGS",
    )
    recs = dict(zip(students, th_recs))
    th = {st: records_to_frame(r, drop=_ARRAYS) for st, r in recs.items()}
    sim = records_to_frame(un_recs, drop=_ARRAYS)
    tied = records_to_frame(tied_recs, drop=_ARRAYS)
    un = th["untied"].set_index("cfg_alpha")
    rows, gaps = [], {}
    for a in spec.alphas_sim:
        t, t_se = float(un.loc[a, "test_error"]), float(un.loc[a].get("test_error_se", 0.0) or 0.0)
        g = gaps_from_frame(sim[sim.cfg_alpha == a], t)
        e = g.extrapolation
        se = math.hypot(e.stderr, t_se)
        gaps[a] = g
        rows.append(
            {
                "cfg_alpha": a,
                "quantity": "untied test error at d = inf (a + b/d on d = "
                f"{', '.join(str(int(d)) for d in g.d)}; s.e. with the SE's sampling error)",
                "theory": t,
                "simulation": t + e.intercept,
                "se": se,
                "gap": abs(e.intercept),
                "p_zero": extrapolation_p_value(e.intercept, se),
                "n_seeds": int(g.n_seeds.sum()),
                **tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d and the SE's sampling error"),
                "theory_converged": bool(un.loc[a, "converged"]),
                "note": fit_note(g),
            }
        )
    # the RS diagnostic (two-block replicon, prox-jump shares) at the untied SE points the rows compare
    rs = cached_rs_points(ctx, [r for r in recs["untied"] if Problem.from_dict(r["problem"]).alpha in spec.alphas_sim])
    agr = with_rs_diagnostic(pd.DataFrame(rows), rs, lam=spec.lam)
    thresholds = {st: interpolation_threshold(ps[0]) for st, ps in grid["theory"].items()}
    params = problem_params(
        grid["sims"][0],
        ("kappa", 1.0),
        ("d", ", ".join(map(str, spec.ds))),
        ("seeds per d", ", ".join(map(str, spec.seeds))),
        ("n_test", spec.n_test),
    )
    table = pd.concat(
        [
            sim.assign(kind="simulation untied"),
            tied.assign(kind="simulation tied"),
            th["untied"].assign(kind="theory untied"),
            th["factorized"].assign(kind="theory tied"),
        ],
        ignore_index=True,
    )
    notes = [
        criterion_text() + ". Each untied row carries its diagnostic ('replicon': the spectral radius of the "
        "two-block map of the symmetric and antisymmetric perturbations; 'prox_jump_%': the larger of the two "
        "blocks' jump shares): a deviating row where it fails is 'deviates, explained'."
    ]
    return FigureRun(
        table,
        agr,
        params,
        {"theory": th, "sim": sim, "tied": tied, "gaps": gaps, "thresholds": thresholds},
        notes=notes,
    )


def untied_plot(spec: UntiedSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """Left: test error vs alpha (both students, theory and ERM); right: the untied M's asymmetry."""
    fig, (ax, ax2) = new_figure(1, 2, figsize=(10.0, 4.0))
    th, dat = res.data["theory"], res.data
    for st, color, label in (("factorized", "tab:blue", "tied"), ("untied", "tab:red", "untied")):
        f = th[st].sort_values("cfg_alpha")
        ax.plot(f.cfg_alpha, f.test_error, "-", color=color, label=f"{label} student: state evolution")
        if "test_error_se" in f and st == "untied":
            se = f.test_error_se.fillna(0.0)
            ax.fill_between(f.cfg_alpha, f.test_error - 2 * se, f.test_error + 2 * se, color=color, alpha=0.2)
        ax.axvline(dat["thresholds"][st], color=color, ls=":", lw=1)
    dmax = max(spec.ds)
    for frame, color, label in (
        (dat["sim"][dat["sim"].cfg_d == dmax], "tab:red", "untied"),
        (dat["tied"], "tab:blue", "tied"),
    ):
        m = frame.groupby("cfg_alpha").test_error.agg(["mean", "sem"]).reset_index()
        ax.errorbar(
            m.cfg_alpha,
            m["mean"],
            yerr=m["sem"],
            fmt="o",
            mfc="none",
            color=color,
            capsize=3,
            label=f"{label}: L-BFGS, d = {dmax}",
        )
    for a, g in dat["gaps"].items():
        t = float(th["untied"].set_index("cfg_alpha").loc[a, "test_error"])
        e = g.extrapolation
        ax.errorbar(
            [a],
            [t + e.intercept],
            yerr=[[e.intercept - e.ci[0]], [e.ci[1] - e.intercept]],
            fmt="D",
            color="k",
            ms=4,
            capsize=3,
            label="untied: d = inf extrapolation" if a == spec.alphas_sim[0] else None,
        )
    ax.set(xscale="log", yscale="log", xlabel="alpha = n/d^2", ylabel="test error")
    ax.legend(fontsize=7)
    f = th["untied"].sort_values("cfg_alpha")
    ax2.plot(f.cfg_alpha, f.asymmetry, "-", color="tab:red", label="state evolution")
    m = dat["sim"][dat["sim"].cfg_d == dmax].groupby("cfg_alpha").asymmetry.agg(["mean", "sem"]).reset_index()
    ax2.errorbar(
        m.cfg_alpha,
        m["mean"],
        yerr=m["sem"],
        fmt="o",
        mfc="none",
        color="tab:red",
        capsize=3,
        label=f"L-BFGS, d = {dmax}",
    )
    ax2.set(xscale="log", xlabel="alpha = n/d^2", ylabel="||M - M^T||_F / ||M||_F (untied)")
    for a in (ax, ax2):  # a short log axis: plain labels at chosen alphas (matplotlib's minor labels overlap)
        a.xaxis.set_minor_formatter(NullFormatter())
        a.set_xticks([0.2, 0.5, 1.0, 2.0], ["0.2", "0.5", "1", "2"])
    ax2.legend(fontsize=7)
    fig.suptitle(f"Tied vs untied student\n{params_text(res.params)}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def untied_caption(spec: UntiedSpec, grid: dict[str, Any], res: FigureRun) -> str:
    th = {st: f.set_index("cfg_alpha") for st, f in res.data["theory"].items()}
    a = 1.0 if 1.0 in th["untied"].index else float(th["untied"].index[len(th["untied"]) // 2])
    ratio = th["untied"].loc[a, "test_error"] / th["factorized"].loc[a, "test_error"]
    thr = res.data["thresholds"]
    return (
        f"Test error (per sequence, noiseless labels) of the tied student S = W W^T/sqrt(pd) and of the "
        f"untied student M = W_Q W_K^T/sqrt(pd), same teacher and weight decay: lines, the state evolution "
        f"(untied: the two-block SE with the sampled prior, band = 2 s.e. of its sampling error); circles, "
        f"L-BFGS at d = {max(spec.ds)}; diamonds, the untied fits extrapolated to d = inf by a + b/d over "
        f"d = {', '.join(map(str, spec.ds))}. At alpha = {a:g} the untied student's error is {ratio:.2f} times "
        f"the tied one's: its antisymmetric part fits label noise (right: asymmetry ||M - M^T||/||M||). Dotted: "
        f"interpolation thresholds (lam -> 0+), tied {thr['factorized']:.3f}, untied {thr['untied']:.3f} "
        f"(a dimension count: the untied logits are linear in M with no sign constraint)."
    )


register(
    FigureDef(
        "tied_vs_untied",
        "Tied vs untied student: the untied state evolution against ERM",
        UntiedSpec,
        untied_grid,
        untied_run,
        untied_plot,
        untied_caption,
    )
)
