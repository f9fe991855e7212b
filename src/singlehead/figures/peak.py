"""Reproduction figures near the interpolation point: the test-error peak vs lam, and ERM vs Bayes-optimal."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.figures.figspec import (
    Context,
    FigureDef,
    FigureRun,
    mean_se,
    new_figure,
    params_text,
    problem_params,
    register,
    stopping_rule,
)
from singlehead.figures.rs_diagnostic import (
    RSPoint,
    cached_rs_points,
    criterion_text,
    curve_summary,
    failing_ranges,
    shade_failing,
    with_rs_diagnostic,
)
from singlehead.figures.spec import FigureSpec
from singlehead.model.problem import MPTarget, Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, agreement, records_to_frame
from singlehead.thresholds import bayes_perfect_recovery_threshold, interpolation_threshold, perfect_recovery_threshold

#: The problem of both figures, apart from d, alpha, lam and the label noise.
PEAK_BASE = dict(T=2, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab", kappa=1.0)
#: Below this lam the peak simulations run at ``PeakSpec.small_lam_sim_alphas`` (where the peak is).
SMALL_LAM = 1e-4
#: The label noise of the peak curves, and the lam of the noiseless curve and of the thresholds.
PEAK_NOISE, THRESHOLD_LAM = 0.5, 1e-5


@dataclass(frozen=True)
class PeakSpec(FigureSpec):
    """Sizes of the interpolation peak: theory curves at ``lams`` on ``theory_points`` alphas geometric in
    ``alpha_range``; students (``seeds``, dimension ``d``) at each lam of ``sim_lams``, at ``sim_alphas``, or at
    ``small_lam_sim_alphas`` when lam < :data:`SMALL_LAM` (deep in the interpolation regime L-BFGS needs
    thousands of iterations for the minimum-norm interpolator at small alpha).

    Seed plan (:mod:`singlehead.figures.seeds`): an inconclusive row's point gets its seeds doubled up to
    ``max_seeds``, at most ``seed_budget`` simulation runs added to the figure in all.

    ``fit_rtol`` (``None``: the :class:`~singlehead.sim.simulation.TrainOptions` defaults) is the L-BFGS
    stopping rule (float32 phase and float64 polish) of the students with lam >= ``fit_rtol_lam_min``; the
    students below keep the defaults: there the objective keeps creeping down for hundreds of iterations,
    so the looser rule saves little time and moves the test error by a larger share of the seed spread than
    at lam >= 1e-3 (``benchmarks/bench_stopping_rule.py``)."""

    d: int = 100
    seeds: int = 4
    max_seeds: int = 8
    seed_budget: int = field(default=48, metadata={"min": 0})
    lams: tuple[float, ...] = (1e-5, 1e-3, 1e-2, 1e-1)
    theory_points: int = 24
    alpha_range: tuple[float, float] = (0.05, 2.0)
    sim_lams: tuple[float, ...] = (1e-3, 1e-5)
    sim_alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 1.0)
    small_lam_sim_alphas: tuple[float, ...] = (0.2, 0.3, 0.5, 1.0)
    n_test: int = 4000
    fit_rtol: float | None = 1e-6
    fit_rtol_lam_min: float = 1e-3

    @classmethod
    def full(cls) -> PeakSpec:
        return cls(
            seeds=8,
            max_seeds=32,
            seed_budget=96,
            theory_points=60,
            sim_lams=(1e-3,),
            small_lam_sim_alphas=(0.1, 0.2, 0.3, 0.5, 1.0),
            n_test=20000,
            fit_rtol=None,
        )

    def fit_options(self, lam: float) -> dict[str, float]:
        """The L-BFGS stopping rule's options for students at ``lam`` (empty: the defaults)."""
        return stopping_rule(None if lam < self.fit_rtol_lam_min else self.fit_rtol)

    @classmethod
    def smoke(cls) -> PeakSpec:
        return cls(
            d=16,
            seeds=2,
            max_seeds=4,
            seed_budget=4,
            lams=(1e-3, 1e-1),
            theory_points=6,
            sim_lams=(1e-3,),
            sim_alphas=(0.1, 0.5),
            small_lam_sim_alphas=(0.1, 0.5),
            n_test=500,
        )


def peak_grid(spec: PeakSpec) -> dict[str, Any]:
    """Noisy curves per lam, the noiseless curve, the simulated problems and the lead of each small-lam chain."""
    grid = np.round(np.geomspace(*spec.alpha_range, spec.theory_points), 6)
    small = spec.small_lam_sim_alphas
    sim = [
        Problem(d=spec.d, alpha=a, lam=l, noise=PEAK_NOISE, **PEAK_BASE)
        for l in spec.sim_lams
        for a in (small if l < SMALL_LAM else spec.sim_alphas)
    ]
    # the theory jobs run as one warm-started chain per lam (runner), in alpha order: at lam < 1e-4 the chain starts at
    # min(sim_alphas) = 0.1, below the peak, because a cold solve at alpha = 0.2, lam = 1e-5 lands on a spurious
    # point (residual 0.66 after the whole budget, test error 0.297 against 0.395 on the sweep) while the chain from
    # 0.1 converges
    a0 = min(spec.sim_alphas)
    lead = [
        Problem(d=spec.d, alpha=a0, lam=l, noise=PEAK_NOISE, **PEAK_BASE)
        for l in spec.sim_lams
        if l < SMALL_LAM and a0 < min(small)
    ]
    return {
        "noisy": [
            Problem(d=spec.d, alpha=float(a), lam=l, noise=PEAK_NOISE, **PEAK_BASE) for l in spec.lams for a in grid
        ],
        "clean": [Problem(d=spec.d, alpha=float(a), lam=THRESHOLD_LAM, noise=0.0, **PEAK_BASE) for a in grid],
        "sim": sim,
        "lead": lead,
    }


def peak_run(ctx: Context, spec: PeakSpec, grid: dict[str, Any]) -> FigureRun:
    """Theory curves, thresholds, students, the agreement with the RS diagnostic and the diagnostic on the curves."""
    noisy, sim_problems = grid["noisy"], grid["sim"]
    a_int = interpolation_threshold(Problem(d=spec.d, noise=PEAK_NOISE, lam=THRESHOLD_LAM, **PEAK_BASE))
    a_perf = perfect_recovery_threshold(Problem(d=spec.d, noise=0.0, lam=THRESHOLD_LAM, **PEAK_BASE))
    sim_jobs = [
        j
        for l in spec.sim_lams
        for j in ctx.sim_jobs(
            [p for p in sim_problems if p.lam == l], seeds=spec.seeds, n_test=spec.n_test, **spec.fit_options(l)
        )
    ]
    # the curves' chains (serial near the peak), the students and the theory at their alphas share the workers
    th_recs_all, sim_recs, th_recs = ctx.run_together(
        [ctx.theory_jobs(noisy + grid["clean"]), sim_jobs, ctx.theory_jobs(grid["lead"] + sim_problems)],
        "interpolation peak: theory curves, students, theory at their alphas",
    )
    th = records_to_frame(th_recs_all)
    sim = records_to_frame(sim_recs)
    th_sim = records_to_frame(th_recs)
    small = spec.small_lam_sim_alphas
    th_sim = th_sim[[(l >= SMALL_LAM or a in small) for l, a in zip(th_sim.cfg_lam, th_sim.cfg_alpha)]]
    # tolerance: 3 % of the theory (finite size at d = spec.d, quadrature), floor 0.005 (the train error is ~0 in
    # the interpolation regime, where a relative tolerance alone would be 0)
    agr = with_rs_diagnostic(
        agreement(
            sim,
            th_sim,
            ["cfg_lam", "cfg_alpha"],
            ["test_error", "train_error"],
            rel=DEFAULT_ALLOWANCE,
            tol_abs=0.005,
            reason=f"finite size (d = {spec.d}) and SE quadrature; floor for errors near 0",
        ),
        cached_rs_points(ctx, th_recs),
    )
    rs_curves = _rs_on_curves(ctx, th_recs_all[: len(noisy)], spec.sim_lams)
    params = problem_params(
        sim_problems[0],
        ("kappa", sim_problems[0].kappa),
        ("Delta", f"{PEAK_NOISE:g} | 0"),
        ("lam", ", ".join(f"{l:g}" for l in spec.lams)),
        ("d(sim)", spec.d),
        ("seeds", spec.seeds),
        ("sim alpha at lam < 1e-4", ", ".join(f"{a:g}" for a in small)),
        (f"alpha_interp(Delta={PEAK_NOISE:g})", round(a_int, 4)),
        ("alpha_perfect(Delta=0)", round(a_perf, 4)),
    )
    table = pd.concat([th.assign(kind="theory"), sim.assign(kind="simulation")], ignore_index=True)
    sentences = [curve_summary(l, *rs_curves[l]) for l in spec.sim_lams]
    notes = [
        criterion_text() + ". Each compared point carries its diagnostic ('replicon': the "
        "smooth de Almeida-Thouless eigenvalue, a lower bound where prox jumps carry weight; "
        "'prox_jump_%': the share of Sigmahat carried by jumps of the output prox between "
        "branches); a row that fails the report's rule where the diagnostic fails is an "
        "explained deviation, not a defect."
    ]
    return FigureRun(
        table,
        agr,
        params,
        {"th": th, "sim": sim, "rs_curves": rs_curves, "a_int": a_int, "a_perf": a_perf},
        notes=notes,
        diagnostics=sentences,
    )


def peak_plot(spec: PeakSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """The noisy curves per lam with the simulations and the RS-failing ranges; the noiseless curve."""
    th, sim, rs_curves, a_int = res.data["th"], res.data["sim"], res.data["rs_curves"], res.data["a_int"]
    lams = spec.lams
    fig, axes = new_figure(1, 2, figsize=(11, 4.2))
    cmap = matplotlib.colormaps["viridis"]
    for i, l in enumerate(lams):
        t = th[(th.cfg_lam == l) & (th.cfg_noise == PEAK_NOISE)].sort_values("cfg_alpha")
        axes[0].plot(t.cfg_alpha, t.test_error, color=cmap(i / len(lams)), label=f"lam={l:g}")
    for l in spec.sim_lams:
        x, m, e = mean_se(sim[sim.cfg_lam == l], "cfg_alpha", "test_error")
        color = cmap((lams.index(l) if l in lams else 0) / len(lams))
        axes[0].errorbar(x, m, yerr=e, fmt="o", mfc="none", color=color, capsize=2, label=f"simulation, lam={l:g}")
        alphas_l, pts_l = rs_curves[l]
        shade_failing(
            axes[0],
            failing_ranges(alphas_l, np.array([q.fails for q in pts_l])),
            color,
            f"RS diagnostic fails, lam={l:g}",
        )
    t = th[th.cfg_noise == 0.0].sort_values("cfg_alpha")
    axes[1].plot(t.cfg_alpha, t.test_error, label="test error")
    axes[1].plot(t.cfg_alpha, t.train_error, "--", label="train error")
    for ax in axes:
        ax.axvline(a_int, color="k", ls=":", lw=1)
        ax.set(xscale="log", yscale="log", xlabel="alpha")
    axes[0].text(a_int, axes[0].get_ylim()[1] * 0.5, " alpha_interp", fontsize=8)
    axes[1].axvline(res.data["a_perf"], color="tab:red", ls=":", lw=1)
    axes[1].text(res.data["a_perf"], 1e-3, " alpha_perfect", color="tab:red", fontsize=8)
    axes[0].set(ylabel="test error", title=f"Delta = {PEAK_NOISE:g}: the interpolation peak vs lam")
    axes[1].set(ylabel="error", title="Delta = 0, lam = 1e-5: interpolation and perfect recovery")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"Interpolation peak and perfect recovery — {params_text(res.params)}", fontsize=9)
    return fig


def peak_caption(spec: PeakSpec, grid: dict[str, Any], res: FigureRun) -> str:
    return (
        "Dotted lines: alpha_interp (the largest alpha with zero training error at lam -> 0+, "
        "see the docs page Theory, section '9. Thresholds') and, noiseless, alpha_perfect "
        "(smallest alpha with zero test error). Shaded: "
        "the alpha ranges of the simulated lam where the replica-symmetry diagnostic fails on the "
        "theory grid. " + " ".join(res.diagnostics)
    )


register(
    FigureDef("interpolation_peak", "Interpolation peak vs lam", PeakSpec, peak_grid, peak_run, peak_plot, peak_caption)
)


def _rs_on_curves(
    ctx: Context, records: list[dict], lams: tuple[float, ...]
) -> dict[float, tuple[np.ndarray, list[RSPoint]]]:
    """The RS diagnostic along each theory curve of ``lams`` (converged points only), cached per curve
    (:func:`~singlehead.figures.rs_diagnostic.cached_rs_points`); on the curves a non-finite value counts as
    ``inf`` (a failing point)."""
    out = {}
    for l in lams:
        pts = sorted(cached_rs_points(ctx, [r for r in records if r["problem"]["lam"] == l]).items())
        out[l] = (
            np.array([a for (_, a), _ in pts], dtype=float),
            [RSPoint(*(x if math.isfinite(x) else math.inf for x in (q.replicon, q.jump, q.jump_err))) for _, q in pts],
        )
    return out


#: The two lam of the ERM curves against the Bayes-optimal one.
ERM_LAMS = (1e-4, 1e-2)


@dataclass(frozen=True)
class BayesSpec(FigureSpec):
    """Sizes of ERM vs Bayes: theory on ``theory_points`` alphas geometric in ``alpha_range`` (dimension ``d``,
    which the d -> inf curves only carry along); Bayes-AMP on instances at ``amp_alphas`` (dimension ``amp_d``,
    >= 50: AMP is unstable at very small d; ``amp_seeds`` each, ``amp_iterations`` iterations, ``n_test``).

    ``amp_iterations``: at d = 150 (4 seeds per alpha) the iterates reach their final matrix error by iteration
    150: at alpha = 0.15 within 6e-4 per seed of iteration 300 (seed s.e. 0.0019); at alpha = 0.05 and 0.1 they sit
    on a plateau where the residual stays at 1e-2 - 5e-2 and never meets AMPOptions.tol, and the iterate at 150
    differs from the one at 300 by the plateau's own fluctuation (mean -0.001 and +0.0007, seed s.e. 0.010 and
    0.009). AMPOptions' default of 300 doubles the stage's time for nothing the check can see.
    """

    d: int = 100
    theory_points: int = 24
    alpha_range: tuple[float, float] = (0.02, 0.4)
    amp_d: int = 150
    amp_seeds: int = 4
    amp_alphas: tuple[float, ...] = (0.05, 0.1, 0.15)
    amp_iterations: int = 150
    n_test: int = 4000

    def check(self) -> None:
        if self.amp_d < 50:
            raise ValueError(
                f"BayesSpec.amp_d must be an integer >= 50 (Bayes-AMP is unstable below) (got {self.amp_d!r})"
            )

    @classmethod
    def full(cls) -> BayesSpec:
        return cls(theory_points=60, amp_d=100, amp_seeds=8, n_test=20000)

    @classmethod
    def smoke(cls) -> BayesSpec:
        return cls(d=16, theory_points=6, amp_d=50, amp_seeds=2, n_test=500)


def bayes_grid(spec: BayesSpec) -> dict[str, Any]:
    """ERM curves at each lam of :data:`ERM_LAMS`, the Bayes curve, and the AMP instances."""
    base = dict(PEAK_BASE, noise=0.0)
    grid = np.round(np.geomspace(*spec.alpha_range, spec.theory_points), 6)
    return {
        "erm": [Problem(d=spec.d, alpha=float(a), lam=l, **base) for l in ERM_LAMS for a in grid],
        "bayes": [Problem(d=spec.d, alpha=float(a), lam=0.01, **base) for a in grid],
        "amp": [Problem(d=spec.amp_d, alpha=a, lam=0.01, **base) for a in spec.amp_alphas],
        "threshold": Problem(d=spec.d, lam=THRESHOLD_LAM, **base),
    }


def bayes_run(ctx: Context, spec: BayesSpec, grid: dict[str, Any]) -> FigureRun:
    """Theory curves, Bayes-AMP on instances, the thresholds, and AMP's agreement with the Bayes SE."""
    st = tuple(sorted({"bayes": True, "n_test": spec.n_test, "max_iter": spec.amp_iterations}.items()))
    recs = ctx.run_together(
        [
            ctx.theory_jobs(grid["erm"]),
            ctx.theory_jobs(grid["bayes"], route="bayes"),
            [j for p in grid["amp"] for j in ctx.seeded_jobs("amp", p, st, spec.amp_seeds)],
            ctx.theory_jobs(grid["amp"], route="bayes"),
        ],
        "ERM vs Bayes: theory, the Bayes-optimal curve, Bayes-AMP on instances",
    )
    th, bay, amp, bay_at = (records_to_frame(r) for r in recs)
    agr = agreement(
        amp,
        bay_at,
        ["cfg_alpha"],
        ["matrix_error"],
        rel=0.05,
        tol_abs=0.005,
        reason=f"Bayes-AMP at finite d = {spec.amp_d} after {spec.amp_iterations} iterations",
    )
    agr.insert(0, "route", "Bayes-AMP vs Bayes SE")
    a_perf = perfect_recovery_threshold(grid["threshold"])
    a_bayes = bayes_perfect_recovery_threshold(grid["threshold"])
    p0 = grid["erm"][0]
    params = problem_params(
        p0,
        ("kappa", p0.kappa),
        ("lam", " | ".join(f"{l:g}" for l in ERM_LAMS)),
        ("d(AMP)", spec.amp_d),
        ("AMP iterations", spec.amp_iterations),
        ("AMP seeds", spec.amp_seeds),
        ("alpha_perf ERM", round(a_perf, 4)),
        ("alpha_perf Bayes", round(a_bayes, 4)),
    )
    table = pd.concat(
        [th.assign(kind="theory_erm"), bay.assign(kind="theory_bayes"), amp.assign(kind="bayes_amp")], ignore_index=True
    )
    return FigureRun(table, agr, params, {"th": th, "bay": bay, "amp": amp, "a_perf": a_perf, "a_bayes": a_bayes})


def bayes_plot(spec: BayesSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """Matrix error and test error vs alpha: ERM curves, the Bayes curve, AMP points, the two thresholds."""
    th, bay, amp = res.data["th"], res.data["bay"], res.data["amp"]
    fig, axes = new_figure(1, 2, figsize=(11, 4.2))
    for l, c in zip(ERM_LAMS, ("tab:blue", "tab:orange")):
        t = th[th.cfg_lam == l].sort_values("cfg_alpha")
        axes[0].plot(t.cfg_alpha, t.matrix_error, color=c, label=f"ERM theory, lam={l:g}")
        axes[1].plot(t.cfg_alpha, t.test_error, color=c, label=f"ERM theory, lam={l:g}")
    b = bay.sort_values("cfg_alpha")
    axes[0].plot(b.cfg_alpha, b.matrix_error, "k-", lw=2, label="Bayes-optimal MMSE")
    axes[1].plot(b.cfg_alpha, b.test_error, "k-", lw=2, label="Bayes-optimal")
    x, m, e = mean_se(amp, "cfg_alpha", "matrix_error")
    axes[0].errorbar(x, m, yerr=e, fmt="s", color="k", mfc="none", capsize=2, label=f"Bayes-AMP, d={spec.amp_d}")
    for ax in axes:
        ax.axvline(res.data["a_bayes"], color="k", ls=":", lw=1)
        ax.axvline(res.data["a_perf"], color="tab:blue", ls=":", lw=1)
        ax.set(xlabel="alpha")
        ax.legend(fontsize=7)
    axes[0].set(ylabel="||S - S0||_F^2 / d", title="matrix error (dotted: perfect recovery, Bayes / ERM)")
    axes[1].set(ylabel="test error", yscale="log", title="test error", ylim=(1e-6, 2))
    fig.suptitle(f"ERM vs Bayes-optimal — {params_text(res.params)}", fontsize=9)
    return fig


def bayes_caption(spec: BayesSpec, grid: dict[str, Any], res: FigureRun) -> str:
    return (
        f"ERM can never beat the Bayes-optimal curve; squares: Bayes-optimal AMP on instances (d = {spec.amp_d}, "
        f"{spec.amp_seeds} seeds, {spec.amp_iterations} iterations)."
    )


register(
    FigureDef(
        "bayes_vs_erm", "ERM vs the Bayes-optimal error", BayesSpec, bayes_grid, bayes_run, bayes_plot, bayes_caption
    )
)
