"""Reproduction figures of the learned spectra and the four-part error decomposition."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import compare_spectrum, decompose, learned_spectrum, spectrum_table
from ..analysis.finite_size import finite_size_gaps
from ..data import sample_target
from ..problem import Problem
from ..simulation import TrainOptions, simulate
from ..spectra import MarchenkoPastur, free_convolve_semicircle, goe
from .compare import extrapolation_p_value
from .figspec import (
    BASE,
    Context,
    _params_text,
    _result_from_record,
    figure,
    new_figure,
    problem_params,
)
from .figures_finite_size import fit_note, sim_jobs_per_d
from .report import FigureOutput
from .verdict import gap_p_value


def _extrapolated_spectrum_rows(ctx: Context, problem: Problem, theory_rec: dict[str, Any], zero_atom_theory: float,
                                sims_at_d: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Agreement rows of the learned spectrum at ``problem.alpha``, extrapolated to d = inf.

    Simulations at ``Scale.spectra_fs_ds`` (``spectra_fs_seeds`` seeds each) join those at
    ``problem.d``; per seed: the zero-atom mass (fraction of ``|eig| <= 1e-3``), ``Tr S/d`` and
    ``Tr S^2/d``; their gaps to the theory (``1 - rank_fraction``, ``first_moment``, ``q``) are
    fitted as ``a + b/d`` and the rule is "0 in the 95% CI of ``a``". Standard errors use the
    pooled per-seed variance ``c^2/d^2`` (:func:`~singlehead.analysis.finite_size.finite_size_gaps`);
    the zero-atom mass is a count over ``d``, so its resolution error ``1/(sqrt(12) d)`` is added.
    """
    sc = ctx.scale
    ds = tuple(sc.spectra_fs_ds)
    if len(ds) != len(sc.spectra_fs_seeds):
        raise ValueError(f"Scale.spectra_fs_seeds must have one entry per size in Scale.spectra_fs_ds ({len(ds)}) "
                         f"(got {sc.spectra_fs_seeds!r})")
    extra = {d: k for d, k in zip(ds, sc.spectra_fs_seeds) if d != problem.d}  # problem.d: sims_at_d
    probs = [problem.replace(d=d) for d in extra]
    recs = sims_at_d + ctx.run(sim_jobs_per_d(ctx, probs, extra),
                               f"simulations: learned spectrum at alpha={problem.alpha:g}, several d")
    per: dict[str, dict[int, list[float]]] = {"zero": {}, "m1": {}, "m2": {}}
    for r in recs:
        d, eig = int(r["problem"]["d"]), np.asarray(r["eigenvalues"], dtype=float)
        per["zero"].setdefault(d, []).append(float(np.mean(np.abs(eig) <= 1e-3)))
        per["m1"].setdefault(d, []).append(float(eig.sum() / d))
        per["m2"].setdefault(d, []).append(float((eig**2).sum() / d))
    d_text = ", ".join(str(d) for d in sorted(per["zero"]))
    rows = []
    for key, name, th, extra in (
            ("zero", "zero-atom mass", zero_atom_theory, lambda d: 1.0 / (np.sqrt(12.0) * d)),
            ("m1", "Tr S / d (mean eigenvalue)", float(theory_rec["first_moment"]), None),
            ("m2", "Tr S^2 / d (= q)", float(theory_rec["q"]), None)):
        g = finite_size_gaps(per[key], th, pool=True, extra_se=extra)
        e = g.extrapolation
        rows.append({"cfg_alpha": problem.alpha, "quantity": f"{name} at d = inf, extrapolated (gap = a + b/d fitted on "
                     f"d = {d_text}; rule: 0 in the 95% CI of a)", "theory": th, "simulation": th + e.intercept,
                     "se": e.stderr, "gap": abs(e.intercept), "tolerance": e.ci[1] - e.intercept,
                     "within": bool(g.agrees), "p_value": extrapolation_p_value(e.intercept, e.stderr),
                     "n_seeds": int(g.n_seeds.sum()), "note": fit_note(g)})
    return rows


@figure("learned_spectra")
def fig_learned_spectra(ctx: Context) -> FigureOutput:
    """Learned spectra at alpha in {0.05, 0.5, 4, 40}: theory law, pooled simulated eigenvalues, target."""
    sc = ctx.scale
    alphas = (0.05, 0.5, 4.0, 40.0)
    d = sc.spectra_d
    d_high = sc.spectra_high_alpha_d or d  # n = alpha d^2: alpha = 40 runs at a smaller d
    problems = [Problem(d=d if a <= 4 else d_high, alpha=a, kappa=1.0, **BASE) for a in alphas]
    th = ctx.run(ctx.theory_jobs(problems), "theory: learned spectra")
    sims = ctx.run(ctx.sim_jobs(problems, seeds=sc.spectra_seeds), "simulations: learned spectra")
    n_seeds = sc.seeds_or(sc.spectra_seeds)
    fig, axes = new_figure(1, 4, figsize=(17, 3.9))
    rows, tables = [], []
    mp = MarchenkoPastur(0.5)
    for ax, p, rec in zip(axes, problems, th):
        pred = learned_spectrum(p, _result_from_record(rec))
        sims_p = [r for r in sims if r["problem"]["alpha"] == p.alpha]
        eig = np.concatenate([np.asarray(r["eigenvalues"]) for r in sims_p])
        cmp = compare_spectrum(p, eig, prediction=pred)
        rows.append({"cfg_alpha": p.alpha, "quantity": f"KS distance (d = {p.d})", "theory": 0.0, "simulation": cmp["ks"],
                     "se": np.nan, "gap": cmp["ks"], "tolerance": 0.05, "within": bool(cmp["ks"] < 0.05),
                     "n_seeds": n_seeds})
        if p.alpha == max(alphas):  # the largest alpha: checks extrapolated to d = inf from several d
            rows += _extrapolated_spectrum_rows(ctx, p, rec, cmp["zero_atom_theory"], sims_p)
        else:
            gap = abs(cmp["zero_atom_sim"] - cmp["zero_atom_theory"])
            rows.append({"cfg_alpha": p.alpha, "quantity": f"zero-atom mass (d = {p.d})",
                         "theory": cmp["zero_atom_theory"], "simulation": cmp["zero_atom_sim"], "se": np.nan,
                         "gap": gap, "tolerance": 0.02, "within": bool(gap <= 0.02), "n_seeds": n_seeds})
        tables.append(spectrum_table(pred, eig).assign(cfg_alpha=p.alpha))
        nz = eig[np.abs(eig) > 1e-3]
        ax.hist(nz, bins=40, density=False, weights=np.full(len(nz), 1.0 / (len(eig) * (np.ptp(nz) / 40 if len(nz) > 1 else 1))),
                color="tab:blue", alpha=0.35, label=f"simulation ({n_seeds} seeds, d={p.d})")
        law = pred.law
        ax.plot(law.grid[1:], law.density[1:], "k-", lw=1.5, label="theory")
        x = np.linspace(1e-3, max(float(nz.max()) if len(nz) else 1.0, 4.5), 400)
        ax.plot(x, mp.ac_density(x), ":", color="gray", label="target S0 (MP, kappa0=0.5)")
        ax.set_title(f"alpha={p.alpha:g}: zero atom th {cmp['zero_atom_theory']:.3f} / sim {cmp['zero_atom_sim']:.3f}, "
                     f"KS {cmp['ks']:.3f}", fontsize=8)
        ax.set(xlabel="eigenvalue of S", ylim=(0, None))
    axes[0].set_ylabel("density (non-zero part)")
    axes[0].legend(fontsize=7)
    params = problem_params(problems[0], ("kappa", problems[0].kappa), ("d", f"{d} (alpha <= 4), {d_high} (alpha > 4)"),
                            ("seeds", n_seeds))
    fig.suptitle(f"Spectrum of the learned query–key map — {_params_text(params)}", fontsize=9)
    table = pd.concat(tables, ignore_index=True)
    return FigureOutput("learned_spectra", "Learned spectra", 
                        "Histogram: non-zero eigenvalues of trained S pooled over seeds (normalised to the total "
                        "count, so the missing mass is the zero atom); black: eta ReLU(mu0 ⊞ SC(delta^2) - eps) "
                        "(THEORY §5); dotted: the target spectrum. At the largest alpha the agreement rows are "
                        "extrapolated to d = inf (students also at d = " + ", ".join(map(str, sc.spectra_fs_ds)) +
                        "): zero-atom mass, Tr S/d and Tr S^2/d, gap to theory fitted as a + b/d, rule 0 in the "
                        "95% CI of a.", params, fig, table, pd.DataFrame(rows))


def _decomposition_sim_parts(problem: Problem, extras: dict[str, Any], seeds: int, n_test: int,
                             draws: int = 8) -> dict[str, Any]:
    """E_over and r measured on trained students and on draws of eta ReLU(S0 + delta Z - eps), same d.

    For each eigenvector ``u_k`` of the (learned or drawn) matrix, ``xi_k = u_k^T S0 u_k`` and
    ``rho = <S, S0>/||S0||^2``; ``E_over = sum_{kept, below the gap} (lam_k - rho xi_k)^2 / d``
    (the kept eigenvalues outside a separated upper bulk, THEORY §6). Eigenvalues of trained
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
    return {"E_over_sim": float(sim[:, 0].mean()), "E_over_sim_se": se(sim[:, 0]),
            "r_sim": float(sim[:, 1].mean()), "r_sim_se": se(sim[:, 1]),
            "E_over_rm": float(rm[:, 0].mean()), "E_over_rm_se": se(rm[:, 0]), "r_rm": float(rm[:, 1].mean())}


@figure("error_decomposition")
def fig_error_decomposition(ctx: Context) -> FigureOutput:
    """Four non-negative parts stacked against the full theory's test error; E_over of trained students."""
    sc = ctx.scale
    grid = np.round(np.geomspace(0.1, 16.0, max(8, sc.theory_points // 2)), 6)
    problems = [Problem(d=sc.d, alpha=float(a), kappa=1.0, **BASE) for a in grid]
    th = ctx.run(ctx.theory_jobs(problems), "theory: decomposition")
    rows = []
    for p, rec in zip(problems, th):
        dec = decompose(p, _result_from_record(rec))
        rows.append({"cfg_alpha": p.alpha, "e0": dec.e0, "c_r": dec.c_r, "E_over": dec.E_over, "E_under": dec.E_under,
                     "E_approx": dec.E_approx, "E_mismatch": dec.E_mismatch, "test_error": dec.test_error,
                     "test_error_sum": dec.test_error_sum, "rho": dec.rho, "rho_best": dec.rho_best, "r": dec.r,
                     "n_recovered": len(dec.recovered_modes), "matrix_error": rec["matrix_error"]})
    df = pd.DataFrame(rows)
    # simulation check of E_over: trained students and random matrices at the simulation d
    sim_alphas = [a for a in sc.sim_alphas if a >= 0.25] + [8.0]
    sim_problems = [Problem(d=sc.decomp_d or sc.d, alpha=float(a), kappa=1.0, **BASE) for a in sim_alphas]
    th_sim = ctx.run(ctx.theory_jobs(sim_problems), "theory: decomposition (simulated alphas)")
    # the simulated parts of each alpha on the local workers, the dearest (largest alpha) first
    names = [f"decomposition-sim-{p.d}-{p.alpha}-{sc.seeds}-{sc.n_test}" for p in sim_problems]
    order = np.argsort([-p.alpha for p in sim_problems], kind="stable")
    measured = ctx.cached_many({names[i]: functools.partial(_decomposition_sim_parts, sim_problems[i], th_sim[i],
                                                            sc.seeds, min(sc.n_test, 2000)) for i in order},
                               "simulations: decomposition parts")
    srows = []
    for p, rec, name in zip(sim_problems, th_sim, names):
        dec = decompose(p, _result_from_record(rec))
        srows.append({"cfg_alpha": p.alpha, "E_over_theory": dec.E_over, "r_theory": dec.r, **measured[name]})
    sdf = pd.DataFrame(srows)
    fig, axes = new_figure(1, 3, figsize=(16, 4.3))
    a = df.cfg_alpha
    parts = [df.c_r * df[k] for k in ("E_over", "E_under", "E_approx", "E_mismatch")]
    axes[0].stackplot(a, df.e0 + parts[0], *parts[1:], alpha=0.65,
                      labels=["c_r E_over (fitted noise)", "c_r E_under (unrecovered signal)",
                              "c_r E_approx (recovered signal: shrinkage, misalignment)",
                              "c_r E_mismatch (excess over the best scale)"])
    axes[0].plot(a, df.test_error, "k-", lw=1.5, label="full theory test error")
    axes[0].plot(a, df.test_error_sum, "o", ms=3, mfc="w", mec="k", label="e0 + sum of the four parts")
    axes[0].set(xscale="log", xlabel="alpha", ylabel="test error (noiseless labels)",
                title="test error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)")
    axes[0].title.set_fontsize(8)
    axes[0].legend(fontsize=6, loc="upper right")
    frac = np.vstack(parts) / df.test_error.to_numpy()
    axes[1].stackplot(a, *frac, alpha=0.65, labels=["over", "under", "approx", "mismatch"])
    ax2 = axes[1].twinx()
    ax2.plot(a, df.rho, "k:", label="ERM scale rho/rho0")
    ax2.plot(a, df.rho_best, "k--", label="best scale at fixed r")
    ax2.set(ylabel="scale (units of rho0)", ylim=(0, 2.0))
    ax2.legend(fontsize=6, loc="lower right")
    axes[1].set(xscale="log", xlabel="alpha", ylabel="share of the test error", ylim=(0, 1))
    axes[1].set_title("shares of the test error; saturated vs best scale", fontsize=8)
    axes[1].legend(fontsize=6, loc="upper left")
    axes[2].plot(a, df.E_over, "k-", label="theory (d -> inf)")
    axes[2].errorbar(sdf.cfg_alpha, sdf.E_over_rm, sdf.E_over_rm_se, fmt="s", ms=4, mfc="none",
                     label=f"eta ReLU(S0 + delta Z - eps), d={sc.d}")
    axes[2].errorbar(sdf.cfg_alpha, sdf.E_over_sim, sdf.E_over_sim_se, fmt="o", ms=4,
                     label=f"trained students, d={sim_problems[0].d}, {sc.seeds} seeds")
    axes[2].set(xscale="log", yscale="log", xlabel="alpha", ylabel="E_over")
    axes[2].set_title("E_over (fitted-noise directions of the learned S)", fontsize=8)
    axes[2].legend(fontsize=6)
    gap = (df.test_error_sum - df.test_error).abs()
    agr = [pd.DataFrame({"cfg_alpha": a, "quantity": "e0 + c_r * (sum of parts) vs full theory test error",
                         "theory": df.test_error, "simulation": df.test_error_sum, "se": np.nan, "gap": gap,
                         "tolerance": 1e-10, "within": gap <= 1e-10, "n_seeds": 0})]
    se_gap = np.hypot(sdf.E_over_sim_se, sdf.E_over_rm_se)  # both sides are sample means
    tol_sim = 3 * se_gap + 0.1 * sdf.E_over_rm
    g2 = (sdf.E_over_sim - sdf.E_over_rm).abs()
    agr.append(pd.DataFrame({"cfg_alpha": sdf.cfg_alpha, "quantity": f"E_over: trained students vs random matrices (d={sc.d})",
                             "theory": sdf.E_over_rm, "simulation": sdf.E_over_sim, "se": se_gap, "gap": g2,
                             "tolerance": tol_sim, "within": g2 <= tol_sim, "allowance": 0.1 * sdf.E_over_rm,
                             "p_value": [gap_p_value(g, s, a, sc.seeds - 1 if sc.seeds > 1 else None)
                                         for g, s, a in zip(g2, se_gap, 0.1 * sdf.E_over_rm)],
                             "n_seeds": sc.seeds}))
    params = problem_params(problems[0], ("kappa", problems[0].kappa), ("d(sims)", sim_problems[0].d), ("seeds", sc.seeds))
    fig.subplots_adjust(wspace=0.45)
    fig.suptitle(f"Error decomposition (THEORY §6) — {_params_text(params)}", fontsize=9)
    return FigureOutput("error_decomposition", "Error decomposition",
                        "Left: the four non-negative parts (test-error units) stacked; they add up to the full "
                        "theory's test error exactly. E_over/E_under/E_approx split the orthogonal error "
                        "r = ||S - rho S0||^2/d by spectral region (a separated upper bulk of the learned law is "
                        "recovered signal); E_mismatch is the excess of the test error at the saturated scale rho "
                        "over the best scale at the same r. Middle: shares and scales. Right: E_over of trained "
                        "students against draws of the predicted law at the same d and the d -> inf theory (the "
                        "finite-d bias is O(1/d)).",
                        params, fig, pd.concat([df.assign(panel="theory"), sdf.assign(panel="simulation")],
                                               ignore_index=True), pd.concat(agr, ignore_index=True))
