"""Report figure "long sequences": what the sequence length ``T`` does, theory lines with ERM points.

The MP(0.5) teacher with the factorized student (``kappa = 1``), seq2lab, label noise ``Delta = 0.5`` and
the weight decay scaled with the informative logit directions per sequence, ``lam = lam_scaled/c_T``
(``c_T = (T^2 + T - 2)/2``, :func:`singlehead.thresholds.informative_directions`): the thresholds and the
collapse point of the regularisation fall like ``1/c_T``, so a fixed ``lam`` would collapse the learned
matrix at long sequences. Three panels against ``T``:

(a) the state evolution's test error at one fixed ``alpha`` (line), with L-BFGS fits at each ``d in ds``
    extrapolated to ``d = inf`` by ``a + b/d`` (points) at the simulated lengths;
(b) the interpolation threshold and the noiseless perfect-recovery threshold (both ``const/c_T``), with the
    fixed ``alpha`` of (a) and (c);
(c) the rank fraction of the learned ``S`` (one minus its zero atom) at the same ``alpha``, line and points.

Agreement rows: per simulated ``T``, the test error and the rank fraction at ``d = inf``, each judged by the
report's rule. The test error's standard error adds the state evolution's reported quadrature error
(``test_error_se``, the quadrature's for the tied model, which grows with the number of logits per sequence) to
the extrapolation's; the rank fraction's adds the ``1/d`` resolution of a count over ``d`` eigenvalues.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from singlehead.analysis.finite_size import finite_size_gaps
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
from singlehead.figures.finite_size import fit_note, gaps_from_frame, sim_jobs_per_d
from singlehead.figures.spec import FigureSpec, check_same_length
from singlehead.model.problem import Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, extrapolation_p_value, records_to_frame, tol_columns
from singlehead.thresholds import informative_directions, interpolation_threshold, perfect_recovery_threshold

__all__ = ["LongSequencesSpec"]

_ARRAYS = ("eigenvalues", "history", "S", "S0")
#: absolute tolerance floor of the rank-fraction rows (a fraction of d eigenvalues, resolved to 1/d)
RANK_TOL_ABS = 0.01


@dataclass(frozen=True)
class LongSequencesSpec(FigureSpec):
    """Sizes of the long-sequences figure: the state evolution at every ``T in lengths``, L-BFGS fits at
    every ``T in lengths_sim`` and ``d in ds`` (``seeds`` per size), all at the fixed sample ratio ``alpha``
    with ``lam = lam_scaled/c_T``; ``n_test`` test sequences per fit, ``fit_rtol`` the L-BFGS stopping rule
    (:func:`~singlehead.figures.figspec.stopping_rule`).

    The full preset fits ``T = 2, 4, 8, 16`` at ``d = 50, 100, 200`` (its largest fit: ``n = alpha d^2 =
    2000`` sequences of 16 tokens at ``d = 200``) and solves the state evolution up to ``T = 64`` (2079
    logit directions per sequence); it is left out of the quick preset.
    """

    lengths: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    lengths_sim: tuple[int, ...] = (2, 4, 8, 16)
    alpha: float = 0.05
    lam_scaled: float = 0.1
    ds: tuple[int, ...] = (50, 100)
    seeds: tuple[int, ...] = (6, 4)
    n_test: int = 2000
    fit_rtol: float | None = 1e-6

    def check(self) -> None:
        check_same_length(self, "ds", "seeds")
        if min(self.lengths) < 2:
            raise ValueError(f"LongSequencesSpec.lengths must hold integers >= 2 (got {self.lengths!r})")
        if not set(self.lengths_sim) <= set(self.lengths):
            raise ValueError(
                f"LongSequencesSpec.lengths_sim must be a subset of lengths {self.lengths!r} (got {self.lengths_sim!r})"
            )
        if len(self.ds) < 2:
            raise ValueError(
                f"LongSequencesSpec.ds must hold at least 2 sizes for the 1/d extrapolation (got {self.ds!r})"
            )

    @classmethod
    def full(cls) -> LongSequencesSpec:
        return cls(ds=(50, 100, 200), seeds=(8, 6, 4), n_test=10000, fit_rtol=None)

    @classmethod
    def smoke(cls) -> LongSequencesSpec:
        return cls(lengths=(2, 4), lengths_sim=(2, 4), alpha=0.5, ds=(10, 14), seeds=(2, 2), n_test=300)


def problem_at(spec: LongSequencesSpec, T: int, d: int) -> Problem:
    """The figure's problem at length ``T`` and size ``d``: ``lam = lam_scaled/c_T``, ``alpha = spec.alpha``."""
    p = Problem(d=d, alpha=spec.alpha, kappa=1.0, **{**BASE, "T": T})
    return p.replace(lam=spec.lam_scaled / informative_directions(p))


def long_sequences_grid(spec: LongSequencesSpec) -> dict[str, Any]:
    """The theory problems (every ``T``, at the largest ``d``: the state evolution does not depend on it), the
    simulated ones (every simulated ``T`` at every ``d``) and both thresholds per ``T``."""
    theory = [problem_at(spec, T, max(spec.ds)) for T in spec.lengths]
    return {
        "theory": theory,
        "sims": [problem_at(spec, T, d) for T in spec.lengths_sim for d in spec.ds],
        "c_T": {p.T: informative_directions(p) for p in theory},
        "alpha_interp": {p.T: interpolation_threshold(p) for p in theory},
        "alpha_perf": {p.T: perfect_recovery_threshold(p.replace(noise=0.0)) for p in theory},
    }


def long_sequences_run(ctx: Context, spec: LongSequencesSpec, grid: dict[str, Any]) -> FigureRun:
    """The state evolution at every ``T``; the fits and, per simulated ``T``, their extrapolation to ``d = inf``
    (test error and rank fraction) as agreement rows."""
    recs = ctx.run(ctx.theory_jobs(grid["theory"]), "theory: long sequences")
    th = records_to_frame(recs, drop=_ARRAYS)
    qse = {r["problem"]["T"]: float(r.get("test_error_se", 0.0) or 0.0) for r in recs}
    th["test_error_quadrature_se"] = th.cfg_T.map(qse)
    sim = records_to_frame(
        ctx.run(
            sim_jobs_per_d(
                ctx, grid["sims"], dict(zip(spec.ds, spec.seeds)), n_test=spec.n_test, **stopping_rule(spec.fit_rtol)
            ),
            "L-BFGS: long sequences",
        ),
        drop=_ARRAYS,
    )
    byT = th.set_index("cfg_T")
    rows, fits = [], {}
    for T in spec.lengths_sim:
        s = sim[sim.cfg_T == T]
        t, t_se, ok = float(byT.loc[T, "test_error"]), qse[T], bool(byT.loc[T, "converged"])
        g = gaps_from_frame(s, t)
        e = g.extrapolation
        se = math.hypot(e.stderr, t_se)
        ds = ", ".join(str(int(d)) for d in g.d)
        rows.append(
            {
                "cfg_T": T,
                "quantity": f"test error at d = inf (a + b/d on d = {ds}; s.e. with the SE's quadrature error)",
                "theory": t,
                "simulation": t + e.intercept,
                "se": se,
                "gap": abs(e.intercept),
                "p_zero": extrapolation_p_value(e.intercept, se),
                **tol_columns(
                    DEFAULT_ALLOWANCE,
                    0.005,
                    "finite size beyond a + b/d at these d, and the SE's quadrature at K = T(T+1)/2 logits",
                ),
                "n_seeds": int(g.n_seeds.sum()),
                "theory_converged": ok,
                "note": fit_note(g),
            }
        )
        r_t = float(byT.loc[T, "rank_fraction"])
        per_d = {int(d): grp.rank_fraction.to_numpy(dtype=float) for d, grp in s.groupby("cfg_d")}
        gr = finite_size_gaps(per_d, r_t, pool=True, extra_se=lambda d: 1.0 / (math.sqrt(12.0) * d))
        er = gr.extrapolation
        rows.append(
            {
                "cfg_T": T,
                "quantity": f"rank fraction of S at d = inf (a + b/d on d = {ds})",
                "theory": r_t,
                "simulation": r_t + er.intercept,
                "se": er.stderr,
                "gap": abs(er.intercept),
                "p_zero": extrapolation_p_value(er.intercept, er.stderr),
                **tol_columns(
                    DEFAULT_ALLOWANCE,
                    RANK_TOL_ABS,
                    "finite size beyond a + b/d; a count over d eigenvalues (resolution 1/d)",
                ),
                "n_seeds": int(gr.n_seeds.sum()),
                "theory_converged": ok,
                "note": fit_note(gr),
            }
        )
        fits[T] = {
            "test_error": (t + e.intercept, se),
            "rank_fraction": (r_t + er.intercept, er.stderr),
            "largest_d": s[s.cfg_d == max(spec.ds)][["test_error", "rank_fraction"]].agg(["mean", "sem"]),
        }
    p0 = grid["theory"][0]
    params = problem_params(
        p0,
        ("kappa", 1.0),
        ("alpha", spec.alpha),
        ("lam", f"{spec.lam_scaled:g}/c_T"),
        ("T", ", ".join(map(str, spec.lengths))),
        ("T simulated", ", ".join(map(str, spec.lengths_sim))),
        ("d", ", ".join(map(str, spec.ds))),
        ("seeds per d", ", ".join(map(str, spec.seeds))),
        ("n_test", spec.n_test),
    )
    thr = pd.DataFrame(
        {
            "cfg_T": list(grid["c_T"]),
            "c_T": list(grid["c_T"].values()),
            "alpha_interp": [grid["alpha_interp"][T] for T in grid["c_T"]],
            "alpha_perf": [grid["alpha_perf"][T] for T in grid["c_T"]],
        }
    )
    table = pd.concat(
        [sim.assign(kind="simulation"), th.assign(kind="theory"), thr.assign(kind="thresholds")], ignore_index=True
    )
    return FigureRun(table, pd.DataFrame(rows), params, {"theory": th, "fits": fits})


def long_sequences_plot(spec: LongSequencesSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """(a) test error, (b) the thresholds, (c) rank fraction, each against ``T``."""
    fig, (ax1, ax2, ax3) = new_figure(1, 3, figsize=(14.0, 4.2))
    th = res.data["theory"].sort_values("cfg_T")
    Ts = th.cfg_T.to_numpy(dtype=float)
    dmax = max(spec.ds)
    for ax, q, label in ((ax1, "test_error", "test error"), (ax3, "rank_fraction", "rank fraction of S")):
        ax.plot(Ts, th[q], "-", color="k", marker=".", label="state evolution")
        fits = res.data["fits"]
        if fits:
            x = np.array(sorted(fits), dtype=float)
            y = np.array([fits[T][q][0] for T in sorted(fits)])
            s = np.array([fits[T][q][1] for T in sorted(fits)])
            ax.errorbar(
                x, y, yerr=2 * s, fmt="D", color="tab:red", ms=4, capsize=3, label="L-BFGS, d = inf (a + b/d; ±2 s.e.)"
            )
            m = np.array([fits[T]["largest_d"].loc["mean", q] for T in sorted(fits)])
            ax.plot(x * 1.06, m, "o", mfc="none", color="tab:blue", label=f"L-BFGS, d = {dmax} (seed mean)")
        ax.set(xscale="log", xlabel="T (tokens per sequence)", ylabel=label)
        ax.legend(fontsize=7)
    ax1.set_yscale("log")
    ax1.set_title(f"(a) test error at alpha = {spec.alpha:g}", fontsize=9)
    ax3.set_title(f"(c) learned spectrum at alpha = {spec.alpha:g}", fontsize=9)
    c = np.array([grid["c_T"][int(T)] for T in Ts], dtype=float)
    ai = np.array([grid["alpha_interp"][int(T)] for T in Ts])
    ap = np.array([grid["alpha_perf"][int(T)] for T in Ts])
    ax2.plot(Ts, ai, "^-", color="tab:red", label=f"alpha_interp = {ai[0] * c[0]:.4f}/c_T")
    ax2.plot(Ts, ap, "v-", color="tab:blue", label=f"alpha_perf (noiseless) = {ap[0] * c[0]:.4f}/c_T")
    ax2.axhline(spec.alpha, color="k", lw=0.8, ls="-.", label=f"alpha = {spec.alpha:g} of (a), (c)")
    ax2.set(xscale="log", yscale="log", xlabel="T (tokens per sequence)", ylabel="sample ratio alpha = n/d^2")
    ax2.set_title("(b) thresholds (c_T = (T^2 + T - 2)/2)", fontsize=9)
    ax2.legend(fontsize=7)
    for ax in (ax1, ax2, ax3):
        ax.set_xticks(list(Ts), [str(int(T)) for T in Ts])
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(f"Long sequences\n{params_text(res.params)}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return fig


def long_sequences_caption(spec: LongSequencesSpec, grid: dict[str, Any], res: FigureRun) -> str:
    T0, T1 = min(spec.lengths), max(spec.lengths)
    th = res.data["theory"].set_index("cfg_T")
    c0 = grid["c_T"][T0]
    return (
        f"Seq2lab, MP(0.5) teacher, factorized student, Delta = 0.5, lam = {spec.lam_scaled:g}/c_T with "
        f"c_T = (T^2 + T - 2)/2 informative logit directions per sequence. (a) Test error (per sequence, "
        f"noiseless labels) at alpha = {spec.alpha:g}: the state evolution (line; {th.loc[T0, 'test_error']:.3g} "
        f"at T = {T0}, {th.loc[T1, 'test_error']:.3g} at T = {T1}) and L-BFGS fits at d = "
        f"{', '.join(map(str, spec.ds))} extrapolated to d = inf by a + b/d (diamonds, ±2 s.e., the SE's "
        f"quadrature error included), with the seed mean at the largest d (circles). (b) The interpolation "
        f"threshold (lam -> 0+) and the noiseless perfect-recovery threshold: both are constants over c_T "
        f"({c0 * grid['alpha_interp'][T0]:.4f} and {c0 * grid['alpha_perf'][T0]:.4f}), so a fixed alpha lies "
        f"deeper past them as T grows. (c) The rank fraction of the learned S (one minus its zero atom), state "
        f"evolution and fits as in (a)."
    )


register(
    FigureDef(
        "long_sequences",
        "Long sequences: test error, thresholds and learned spectrum against T",
        LongSequencesSpec,
        long_sequences_grid,
        long_sequences_run,
        long_sequences_plot,
        long_sequences_caption,
        presets=("full", "smoke"),
    )
)
