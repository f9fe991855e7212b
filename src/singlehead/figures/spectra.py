"""Reproduction figure of the learned spectra: the theory's law against trained students' eigenvalues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.analysis import compare_spectrum, learned_spectrum, spectrum_table
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
    result_from_record,
)
from singlehead.figures.finite_size import fit_note, sim_jobs_per_d
from singlehead.figures.spec import FigureSpec, check_same_length
from singlehead.model.problem import Problem
from singlehead.numerics.spectra import MarchenkoPastur
from singlehead.report.compare import DEFAULT_ALLOWANCE, extrapolation_p_value, tol_columns


@dataclass(frozen=True)
class LearnedSpectraSpec(FigureSpec):
    """Sizes of the learned spectra: students (``seeds``) at each alpha of ``alphas``, at dimension ``d`` up to
    alpha = ``high_alpha`` and ``high_alpha_d`` above it (n = alpha d^2 makes ``d`` too costly there); the
    largest alpha is also simulated at ``fs_ds`` (``fs_seeds`` each) to extrapolate its checks to d = inf."""

    d: int = 100
    high_alpha_d: int = 40  # the largest of fs_ds: its runs serve both the spectrum and the extrapolation
    high_alpha: float = 4.0
    seeds: int = 4
    alphas: tuple[float, ...] = (0.05, 0.5, 4.0, 40.0)
    fs_ds: tuple[int, ...] = (20, 30, 40)
    fs_seeds: tuple[int, ...] = (8, 6, 4)
    n_test: int = 4000

    def check(self) -> None:
        check_same_length(self, "fs_ds", "fs_seeds")

    @classmethod
    def full(cls) -> LearnedSpectraSpec:
        return cls(d=200, high_alpha_d=200, seeds=8, n_test=20000)

    @classmethod
    def smoke(cls) -> LearnedSpectraSpec:
        return cls(d=16, high_alpha_d=16, seeds=2, fs_ds=(8, 12), fs_seeds=(3, 3), n_test=500)


def spectra_grid(spec: LearnedSpectraSpec) -> dict[str, Any]:
    """One problem per alpha (kappa = 1, the MP base problem)."""
    return {
        "problems": [
            Problem(d=spec.d if a <= spec.high_alpha else spec.high_alpha_d, alpha=a, kappa=1.0, **BASE)
            for a in spec.alphas
        ]
    }


def spectra_run(ctx: Context, spec: LearnedSpectraSpec, grid: dict[str, Any]) -> FigureRun:
    """Theory and students per alpha; the predicted law, the pooled eigenvalues and the checks."""
    problems = grid["problems"]
    top = next(p for p in problems if p.alpha == max(spec.alphas))
    extra = {d: k for d, k in zip(spec.fs_ds, spec.fs_seeds) if d != top.d}
    # the largest alpha's finite-size students (read back from the cache by its extrapolated rows) run alongside
    th, sims, _ = ctx.run_together(
        [
            ctx.theory_jobs(problems),
            ctx.sim_jobs(problems, seeds=spec.seeds, n_test=spec.n_test),
            sim_jobs_per_d(ctx, [top.replace(d=d) for d in extra], extra, n_test=spec.n_test),
        ],
        "learned spectra: theory, students, students at several d",
    )
    rows, tables, panels = [], [], []
    for p, rec in zip(problems, th):
        pred = learned_spectrum(p, result_from_record(rec))
        sims_p = [r for r in sims if r["problem"]["alpha"] == p.alpha]
        eig = np.concatenate([np.asarray(r["eigenvalues"]) for r in sims_p])
        cmp = compare_spectrum(p, eig, prediction=pred)
        # a distance between the predicted law and the pooled eigenvalues has no theory value to compare with: the
        # row is a tolerance check of the distance itself (theory nan, so no reading takes 0 for a prediction)
        rows.append(
            {
                "cfg_alpha": p.alpha,
                "quantity": f"KS distance (d = {p.d})",
                "theory": float("nan"),
                "simulation": cmp["ks"],
                "se": np.nan,
                "gap": cmp["ks"],
                **tol_columns(0.0, 0.05, "KS level of the pooled eigenvalues at finite d"),
                "within": bool(cmp["ks"] < 0.05),
                "n_seeds": spec.seeds,
            }
        )
        if p.alpha == max(spec.alphas):  # the largest alpha: checks extrapolated to d = inf from several d
            rows += _extrapolated_spectrum_rows(ctx, spec, p, rec, cmp["zero_atom_theory"], sims_p)
        else:
            gap = abs(cmp["zero_atom_sim"] - cmp["zero_atom_theory"])
            rows.append(
                {
                    "cfg_alpha": p.alpha,
                    "quantity": f"zero-atom mass (d = {p.d})",
                    "theory": cmp["zero_atom_theory"],
                    "simulation": cmp["zero_atom_sim"],
                    "se": np.nan,
                    "gap": gap,
                    **tol_columns(0.0, 0.02, "finite d: the zero-atom count's resolution"),
                    "n_seeds": spec.seeds,
                }
            )
        tables.append(spectrum_table(pred, eig).assign(cfg_alpha=p.alpha))
        panels.append((p, pred, eig, cmp))
    params = problem_params(
        problems[0],
        ("kappa", problems[0].kappa),
        ("d", f"{spec.d} (alpha <= {spec.high_alpha:g}), {spec.high_alpha_d} (alpha > {spec.high_alpha:g})"),
        ("seeds", spec.seeds),
    )
    return FigureRun(pd.concat(tables, ignore_index=True), pd.DataFrame(rows), params, {"panels": panels})


def spectra_plot(spec: LearnedSpectraSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """One panel per alpha: the non-zero eigenvalues' histogram, the theory's law and the target's."""
    fig, axes = new_figure(1, len(spec.alphas), figsize=(4.25 * len(spec.alphas), 3.9), squeeze=False)
    mp = MarchenkoPastur(BASE["target"].kappa0)
    for ax, (p, pred, eig, cmp) in zip(axes[0], res.data["panels"]):
        nz = eig[np.abs(eig) > 1e-3]
        width = np.ptp(nz) / 40 if len(nz) > 1 else 1
        ax.hist(
            nz,
            bins=40,
            density=False,
            weights=np.full(len(nz), 1.0 / (len(eig) * width)),
            color="tab:blue",
            alpha=0.35,
            label=f"simulation ({spec.seeds} seeds, d={p.d})",
        )
        ax.plot(pred.law.grid[1:], pred.law.density[1:], "k-", lw=1.5, label="theory")
        x = np.linspace(1e-3, max(float(nz.max()) if len(nz) else 1.0, 4.5), 400)
        ax.plot(x, mp.ac_density(x), ":", color="gray", label=f"target S0 (MP, kappa0={BASE['target'].kappa0:g})")
        ax.set_title(
            f"alpha={p.alpha:g}: zero atom th {cmp['zero_atom_theory']:.3f} / sim {cmp['zero_atom_sim']:.3f}, "
            f"KS {cmp['ks']:.3f}",
            fontsize=8,
        )
        ax.set(xlabel="eigenvalue of S", ylim=(0, None))
    axes[0][0].set_ylabel("density (non-zero part)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Spectrum of the learned query–key map — {params_text(res.params)}", fontsize=9)
    return fig


def spectra_caption(spec: LearnedSpectraSpec, grid: dict[str, Any], res: FigureRun) -> str:
    return (
        "Histogram: non-zero eigenvalues of trained S pooled over seeds (normalised to the total "
        "count, so the missing mass is the zero atom); black: eta ReLU(mu0 ⊞ SC(delta^2) - eps) "
        "(docs page Theory, section '10. Spectrum of the learned matrix'); dotted: the target spectrum. "
        "At the largest alpha the agreement rows are "
        "extrapolated to d = inf (students also at d = "
        + ", ".join(map(str, spec.fs_ds))
        + "): zero-atom mass, Tr S/d and Tr S^2/d, gap to theory fitted as a + b/d, rule 0 in the "
        "95% CI of a."
    )


register(
    FigureDef(
        "learned_spectra",
        "Learned spectra",
        LearnedSpectraSpec,
        spectra_grid,
        spectra_run,
        spectra_plot,
        spectra_caption,
    )
)


def _extrapolated_spectrum_rows(
    ctx: Context,
    spec: LearnedSpectraSpec,
    problem: Problem,
    theory_rec: dict[str, Any],
    zero_atom_theory: float,
    sims_at_d: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Agreement rows of the learned spectrum at ``problem.alpha``, extrapolated to d = inf.

    Simulations at ``spec.fs_ds`` (``spec.fs_seeds`` seeds each) join those at
    ``problem.d``; per seed: the zero-atom mass (fraction of ``|eig| <= 1e-3``), ``Tr S/d`` and
    ``Tr S^2/d``; their gaps to the theory (``1 - rank_fraction``, ``first_moment``, ``q``) are
    fitted as ``a + b/d`` and ``a`` is judged against the declared tolerance (``p_zero``: the test of
    ``a = 0``). Standard errors use the
    pooled per-seed variance ``c^2/d^2`` (:func:`~singlehead.analysis.finite_size.finite_size_gaps`);
    the zero-atom mass is a count over ``d``, so its resolution error ``1/(sqrt(12) d)`` is added.
    """
    extra = {d: k for d, k in zip(spec.fs_ds, spec.fs_seeds) if d != problem.d}  # problem.d: sims_at_d
    probs = [problem.replace(d=d) for d in extra]
    recs = sims_at_d + ctx.run(
        sim_jobs_per_d(ctx, probs, extra, n_test=spec.n_test),
        f"simulations: learned spectrum at alpha={problem.alpha:g}, several d",
    )
    per: dict[str, dict[int, list[float]]] = {"zero": {}, "m1": {}, "m2": {}}
    for r in recs:
        d, eig = int(r["problem"]["d"]), np.asarray(r["eigenvalues"], dtype=float)
        per["zero"].setdefault(d, []).append(float(np.mean(np.abs(eig) <= 1e-3)))
        per["m1"].setdefault(d, []).append(float(eig.sum() / d))
        per["m2"].setdefault(d, []).append(float((eig**2).sum() / d))
    d_text = ", ".join(str(d) for d in sorted(per["zero"]))
    # declared tolerances at d = inf: what a + b/d leaves (1/d^2 terms) and the SE quadrature
    tols = {
        "zero": tol_columns(0.0, 0.005, "terms beyond a + b/d (the zero-atom mass of the law is exact)"),
        "m1": tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d and SE quadrature"),
        "m2": tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d and SE quadrature"),
    }
    rows = []
    for key, name, th, extra in (
        ("zero", "zero-atom mass", zero_atom_theory, lambda d: 1.0 / (np.sqrt(12.0) * d)),
        ("m1", "Tr S / d (mean eigenvalue)", float(theory_rec["first_moment"]), None),
        ("m2", "Tr S^2 / d (= q)", float(theory_rec["q"]), None),
    ):
        g = finite_size_gaps(per[key], th, pool=True, extra_se=extra)
        e = g.extrapolation
        rows.append(
            {
                "cfg_alpha": problem.alpha,
                "quantity": f"{name} at d = inf, extrapolated (gap = a + b/d fitted on d = {d_text})",
                "theory": th,
                "simulation": th + e.intercept,
                "se": e.stderr,
                "gap": abs(e.intercept),
                "ci_half": e.ci[1] - e.intercept,
                "p_zero": extrapolation_p_value(e.intercept, e.stderr),
                **tols[key],
                "n_seeds": int(g.n_seeds.sum()),
                "note": fit_note(g),
            }
        )
    return rows
