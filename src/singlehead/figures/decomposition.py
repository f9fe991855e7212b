"""Reproduction figure of the four-part error decomposition (docs: Theory, :ref:`theory-decomposition`) and its check on
trained students."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.analysis import decompose
from singlehead.figures.figspec import (
    BASE,
    Context,
    FigureDef,
    FigureRun,
    new_figure,
    params_text,
    problem_params,
    register,
    result_from_record,
)
from singlehead.figures.spec import FigureSpec
from singlehead.model.problem import Problem
from singlehead.numerics.spectra import MarchenkoPastur, free_convolve_semicircle, goe
from singlehead.report.compare import tol_columns
from singlehead.sim.data import sample_target
from singlehead.sim.simulation import TrainOptions, simulate


@dataclass(frozen=True)
class DecompositionSpec(FigureSpec):
    """Sizes of the decomposition: theory on ``theory_points`` alphas geometric in ``alpha_range`` (dimension
    ``d``, which the d -> inf theory only carries along); its E_over checked at ``sim_alphas`` on trained students
    (``seeds``, ``n_test``) and on ``draws`` draws of the predicted law, both at dimension ``sim_d`` (a same-d
    comparison)."""

    d: int = 100
    theory_points: int = 12
    alpha_range: tuple[float, float] = (0.1, 16.0)
    sim_alphas: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 8.0)
    sim_d: int = 50
    seeds: int = 8
    draws: int = 8
    n_test: int = 2000

    @classmethod
    def full(cls) -> DecompositionSpec:
        return cls(theory_points=30, sim_alphas=(0.25, 0.5, 1.0, 2.0, 3.0, 8.0), sim_d=100)

    @classmethod
    def smoke(cls) -> DecompositionSpec:
        return cls(d=16, theory_points=8, sim_alphas=(0.25, 1.0, 8.0), sim_d=16, seeds=2, n_test=500)


def _decomposition_sim_parts(
    problem: Problem, extras: dict[str, Any], seeds: int, n_test: int, draws: int
) -> dict[str, Any]:
    """E_over and r measured on trained students and on draws of eta ReLU(S0 + delta Z - eps), same d.

    For each eigenvector ``u_k`` of the (learned or drawn) matrix, ``xi_k = u_k^T S0 u_k`` and
    ``rho = <S, S0>/||S0||^2``; ``E_over = sum_{kept, below the gap} (lam_k - rho xi_k)^2 / d``
    (the kept eigenvalues outside a separated upper bulk, docs: Theory, :ref:`theory-decomposition`). Eigenvalues of
    trained
    students below ``1e-3 max`` count as discarded.
    """
    eta, delta, eps = extras["eta"], extras["delta"], extras["eps"]
    edges = free_convolve_semicircle(MarchenkoPastur(problem.target.kappa0), delta**2).edges()
    split_y = 0.5 * (edges[0][1] + edges[1][0]) if len(edges) > 1 else math.inf
    split_s = eta * (split_y - eps)
    d = problem.d

    def parts(S: np.ndarray, S0: np.ndarray, kept: np.ndarray, lam: np.ndarray, U: np.ndarray) -> tuple[float, float]:
        xi = np.einsum("ik,ij,jk->k", U, S0, U)
        rho = float(np.sum(S * S0) / np.sum(S0 * S0))
        B = kept & (lam <= split_s)
        return float(np.sum((lam[B] - rho * xi[B]) ** 2) / d), float(np.sum((S - rho * S0) ** 2) / d)

    sim = []
    for seed in range(seeds):
        res = simulate(problem, seed=seed, return_matrices=True, options=TrainOptions(n_test=n_test))
        S, S0 = res.extras["S"], res.extras["S0"]
        lam, U = np.linalg.eigh(S)
        sim.append(parts(S, S0, lam > 1e-3 * lam.max(), lam, U))
    rng = np.random.default_rng(12345)
    rm = []
    for k in range(draws):
        S0 = sample_target(problem.target, d, 1000 + k).numpy()
        nu, U = np.linalg.eigh(S0 + delta * goe(d, rng))
        lam = eta * np.maximum(nu - eps, 0.0)
        rm.append(parts((U * lam) @ U.T, S0, nu > eps, lam, U))
    sim, rm = np.array(sim), np.array(rm)
    se = lambda a: float(np.std(a, ddof=1) / math.sqrt(len(a))) if len(a) > 1 else math.nan  # noqa: E731
    return {
        "E_over_sim": float(sim[:, 0].mean()),
        "E_over_sim_se": se(sim[:, 0]),
        "r_sim": float(sim[:, 1].mean()),
        "r_sim_se": se(sim[:, 1]),
        "E_over_rm": float(rm[:, 0].mean()),
        "E_over_rm_se": se(rm[:, 0]),
        "r_rm": float(rm[:, 1].mean()),
    }


def decomposition_grid(spec: DecompositionSpec) -> dict[str, Any]:
    """Theory problems on the alpha grid and the problems of the simulation check."""
    grid = np.round(np.geomspace(*spec.alpha_range, spec.theory_points), 6)
    return {
        "theory": [Problem(d=spec.d, alpha=float(a), kappa=1.0, **BASE) for a in grid],
        "sim": [Problem(d=spec.sim_d, alpha=float(a), kappa=1.0, **BASE) for a in spec.sim_alphas],
    }


def decomposition_run(ctx: Context, spec: DecompositionSpec, grid: dict[str, Any]) -> FigureRun:
    """The four parts along the theory grid; E_over of trained students and of draws; the agreement rows."""
    problems, sim_problems = grid["theory"], grid["sim"]
    th = ctx.run(ctx.theory_jobs(problems), "theory: decomposition")
    rows = []
    for p, rec in zip(problems, th):
        dec = decompose(p, result_from_record(rec))
        rows.append(
            {
                "cfg_alpha": p.alpha,
                "e0": dec.e0,
                "c_r": dec.c_r,
                "E_over": dec.E_over,
                "E_under": dec.E_under,
                "E_approx": dec.E_approx,
                "E_mismatch": dec.E_mismatch,
                "test_error": dec.test_error,
                "test_error_sum": dec.test_error_sum,
                "rho": dec.rho,
                "rho_best": dec.rho_best,
                "r": dec.r,
                "n_recovered": len(dec.recovered_modes),
                "matrix_error": rec["matrix_error"],
            }
        )
    df = pd.DataFrame(rows)
    th_sim = ctx.run(ctx.theory_jobs(sim_problems), "theory: decomposition (simulated alphas)")
    # the simulated parts of each alpha on the local workers, the dearest (largest alpha) first
    names = [f"decomposition-sim-{p.d}-{p.alpha}-{spec.seeds}-{spec.n_test}-{spec.draws}" for p in sim_problems]
    order = np.argsort([-p.alpha for p in sim_problems], kind="stable")
    measured = ctx.cached_many(
        {
            names[i]: functools.partial(
                _decomposition_sim_parts, sim_problems[i], th_sim[i], spec.seeds, spec.n_test, spec.draws
            )
            for i in order
        },
        "simulations: decomposition parts",
    )
    sdf = pd.DataFrame(
        [
            {"cfg_alpha": p.alpha, "E_over_theory": dec.E_over, "r_theory": dec.r, **measured[name]}
            for p, rec, name in zip(sim_problems, th_sim, names)
            for dec in [decompose(p, result_from_record(rec))]
        ]
    )
    params = problem_params(problems[0], ("kappa", problems[0].kappa), ("d(sims)", spec.sim_d), ("seeds", spec.seeds))
    table = pd.concat([df.assign(panel="theory"), sdf.assign(panel="simulation")], ignore_index=True)
    return FigureRun(table, _decomposition_agreement(spec, df, sdf), params, {"df": df, "sdf": sdf})


def _decomposition_agreement(spec: DecompositionSpec, df: pd.DataFrame, sdf: pd.DataFrame) -> pd.DataFrame:
    """The parts adding up to the test error (every theory point), and E_over of students vs draws."""
    gap = (df.test_error_sum - df.test_error).abs()
    agr = [
        pd.DataFrame(
            {
                "cfg_alpha": df.cfg_alpha,
                "quantity": "e0 + c_r * (sum of parts) vs full theory test error",
                "theory": df.test_error,
                "simulation": df.test_error_sum,
                "se": np.nan,
                "gap": gap,
                **tol_columns(0.0, 1e-10, "exact identity (rounding)"),
                "n_seeds": 0,
            }
        )
    ]
    se_gap = np.hypot(sdf.E_over_sim_se, sdf.E_over_rm_se)  # both sides are sample means
    g2 = (sdf.E_over_sim - sdf.E_over_rm).abs()
    agr.append(
        pd.DataFrame(
            {
                "cfg_alpha": sdf.cfg_alpha,
                "quantity": f"E_over: trained students vs random matrices (d={spec.sim_d})",
                "theory": sdf.E_over_rm,
                "simulation": sdf.E_over_sim,
                "se": se_gap,
                "gap": g2,
                "dof": spec.seeds - 1 if spec.seeds > 1 else np.nan,
                **tol_columns(
                    0.1,
                    0.005,
                    f"finite size (students at d = {spec.sim_d}: E_over is a "
                    "1/d-sensitive part of the error); floor in test-error units",
                ),
                "n_seeds": spec.seeds,
            }
        )
    )
    return pd.concat(agr, ignore_index=True)


def decomposition_plot(spec: DecompositionSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """The stacked parts, their shares with the two scales, and E_over against the simulation check."""
    df, sdf = res.data["df"], res.data["sdf"]
    fig, axes = new_figure(1, 3, figsize=(16, 4.3))
    a = df.cfg_alpha
    parts = [df.c_r * df[k] for k in ("E_over", "E_under", "E_approx", "E_mismatch")]
    axes[0].stackplot(
        a,
        df.e0 + parts[0],
        *parts[1:],
        alpha=0.65,
        labels=[
            "c_r E_over (fitted noise)",
            "c_r E_under (unrecovered signal)",
            "c_r E_approx (recovered signal: shrinkage, misalignment)",
            "c_r E_mismatch (excess over the best scale)",
        ],
    )
    axes[0].plot(a, df.test_error, "k-", lw=1.5, label="full theory test error")
    axes[0].plot(a, df.test_error_sum, "o", ms=3, mfc="w", mec="k", label="e0 + sum of the four parts")
    axes[0].set(
        xscale="log",
        xlabel="alpha",
        ylabel="test error (noiseless labels)",
        title="test error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)",
    )
    axes[0].title.set_fontsize(8)
    axes[0].legend(fontsize=6, loc="upper right")
    axes[1].stackplot(
        a, *(np.vstack(parts) / df.test_error.to_numpy()), alpha=0.65, labels=["over", "under", "approx", "mismatch"]
    )
    ax2 = axes[1].twinx()
    ax2.plot(a, df.rho, "k:", label="ERM scale rho/rho0")
    ax2.plot(a, df.rho_best, "k--", label="best scale at fixed r")
    ax2.set(ylabel="scale (units of rho0)", ylim=(0, 2.0))
    ax2.legend(fontsize=6, loc="lower right")
    axes[1].set(xscale="log", xlabel="alpha", ylabel="share of the test error", ylim=(0, 1))
    axes[1].set_title("shares of the test error; saturated vs best scale", fontsize=8)
    axes[1].legend(fontsize=6, loc="upper left")
    axes[2].plot(a, df.E_over, "k-", label="theory (d -> inf)")
    axes[2].errorbar(
        sdf.cfg_alpha,
        sdf.E_over_rm,
        sdf.E_over_rm_se,
        fmt="s",
        ms=4,
        mfc="none",
        label=f"eta ReLU(S0 + delta Z - eps), d={spec.sim_d}, {spec.draws} draws",
    )
    axes[2].errorbar(
        sdf.cfg_alpha,
        sdf.E_over_sim,
        sdf.E_over_sim_se,
        fmt="o",
        ms=4,
        label=f"trained students, d={spec.sim_d}, {spec.seeds} seeds",
    )
    axes[2].set(xscale="log", yscale="log", xlabel="alpha", ylabel="E_over")
    axes[2].set_title("E_over (fitted-noise directions of the learned S)", fontsize=8)
    axes[2].legend(fontsize=6)
    fig.subplots_adjust(wspace=0.45)
    fig.suptitle(
        f"Error decomposition (docs page Theory, section '11. Error decomposition') — {params_text(res.params)}",
        fontsize=9,
    )
    return fig


def decomposition_caption(spec: DecompositionSpec, grid: dict[str, Any], res: FigureRun) -> str:
    return (
        "Left: the four non-negative parts (test-error units) stacked; they add up to the full "
        "theory's test error exactly. E_over/E_under/E_approx split the orthogonal error "
        "r = ||S - rho S0||^2/d by spectral region (a separated upper bulk of the learned law is "
        "recovered signal); E_mismatch is the excess of the test error at the saturated scale rho "
        "over the best scale at the same r. Middle: shares and scales. Right: E_over of trained "
        f"students against draws of the predicted law at the same d ({spec.sim_d}) and the d -> inf theory (the "
        "finite-d bias is O(1/d))."
    )


register(
    FigureDef(
        "error_decomposition",
        "Error decomposition",
        DecompositionSpec,
        decomposition_grid,
        decomposition_run,
        decomposition_plot,
        decomposition_caption,
    )
)
