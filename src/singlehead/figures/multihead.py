"""Report figure "multi-head attention": the theory of ``H = 2`` student heads against ERM.

Left, the linear channel, where the theory of several heads is exact (one effective head,
:func:`~singlehead.state_evolution.effective_single_head`): test error vs alpha for ``H0 = 1`` and
``H0 = 2`` teacher heads (lines), L-BFGS fits of two heads at several ``d`` (points), the
interpolation and perfect-recovery thresholds of the effective head (dotted, dash-dotted). Its
agreement rows: the test error at ``d = inf`` per simulated alpha and teacher, extrapolated by
``a + b/d`` as in the finite-size figure.

Right, a softmax channel (seq2lab, ``H = H0 = 2``): the experimental state evolution
(:func:`singlehead.state_evolution.multihead_se.multihead_theory`, specialised ansatz, sampled prior)
at a few alphas against L-BFGS fits of two heads (lowest objective of several starts) at one ``d``:
the test error and the per-head overlaps after matching the student heads to the teacher heads
(``head_M``: the mean of its diagonal, student head with its own teacher head, and of its
off-diagonal). Its tolerance is wider (stated on the rows): the sampled prior's finite-size bias,
one ``d``, and a theory that is experimental (docs: Multi-head attention).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from singlehead.model.problem import MPTarget, Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, agreement, extrapolation_p_value, records_to_frame, tol_columns
from singlehead.state_evolution import effective_single_head
from singlehead.state_evolution.multihead_se import MultiHeadOptions, multihead_theory
from singlehead.thresholds import interpolation_threshold, perfect_recovery_threshold
from singlehead.figures.figspec import Context, FigureDef, FigureRun, new_figure, params_text, problem_params, register
from singlehead.figures.finite_size import fit_note, gaps_from_frame, sim_jobs_per_d
from singlehead.figures.spec import FigureSpec, check_same_length

__all__ = ["MultiheadSpec"]

# per-run arrays kept in the cache records, not in the figure's table
_ARRAYS = ("eigenvalues", "singular_values", "history", "S", "S0", "head_Q", "head_M", "head_Q0", "head_order")
# the softmax part's relative tolerance: the sampled prior's finite-D bias (+2.5 % on the test error at D = 100 for
# one head), one d, and an experimental theory
_SOFTMAX_TOL_REL = 0.08


@dataclass(frozen=True)
class MultiheadSpec(FigureSpec):
    """Sizes of the multi-head figure.

    Linear channel: ``heads`` student heads of width ``kappa d`` each, teachers of ``teacher_heads`` heads,
    L-BFGS at each ``d in ds`` (``seeds`` per size) at ``alphas_sim``, theory on ``alphas_theory``. Softmax
    channel (seq2lab, ``heads`` student and teacher heads, ``kappa = 1``): the experimental state evolution at
    ``softmax_alphas`` (empty: no softmax part) with ``se_sample_dim``, ``se_draws``, ``se_points``,
    ``se_scrambles``, ``se_max_iter`` (:class:`~singlehead.state_evolution.multihead_se.MultiHeadOptions`), and
    L-BFGS at ``softmax_d`` (``softmax_seeds`` seeds, ``softmax_starts`` starts each, the lowest objective kept).
    Seed plan (:mod:`singlehead.figures.seeds`): an inconclusive row's points get their seeds doubled up to
    ``max_seeds``, at most ``seed_budget`` runs added to the figure (0: no plan).
    """

    heads: int = 2
    teacher_heads: tuple[int, ...] = (1, 2)
    kappa: float = 0.5
    ds: tuple[int, ...] = (30, 45, 60)
    seeds: tuple[int, ...] = (4, 3, 3)
    alphas_sim: tuple[float, ...] = (0.5, 1.0, 2.0)
    alphas_theory: tuple[float, ...] = (0.1, 0.15, 0.2, 0.3, 0.45, 0.7, 1.0, 1.5, 2.0, 3.0)
    lam: float = 0.01
    n_test: int = 4000
    softmax_alphas: tuple[float, ...] = field(default=(0.5, 2.0), metadata={"empty": True})
    softmax_d: int = 40
    softmax_seeds: int = 4
    softmax_starts: int = 4
    se_sample_dim: int = 100
    se_draws: int = 4
    se_points: int = 1024
    se_scrambles: int = 4
    se_max_iter: int = 60
    max_seeds: int = 16
    seed_budget: int = field(default=0, metadata={"min": 0})

    def check(self) -> None:
        check_same_length(self, "ds", "seeds")
        if self.heads < 2:
            raise ValueError(f"MultiheadSpec.heads must be an integer >= 2 (got {self.heads})")

    @classmethod
    def full(cls) -> "MultiheadSpec":
        return cls(ds=(40, 60, 80), seeds=(6, 4, 4), n_test=20000, softmax_alphas=(0.5, 1.0, 2.0), seed_budget=168)

    @classmethod
    def smoke(cls) -> "MultiheadSpec":
        return cls(ds=(12, 16), seeds=(2, 2), alphas_sim=(1.0,), alphas_theory=(0.5, 1.0, 2.0), n_test=300,
                   softmax_alphas=(1.0,), softmax_d=12, softmax_seeds=2, softmax_starts=1, se_sample_dim=24,
                   se_draws=1, se_points=128, se_scrambles=2, se_max_iter=6)

    def se_options(self) -> MultiHeadOptions:
        """The experimental state evolution's settings (specialised ansatz)."""
        return MultiHeadOptions(ansatz="specialised", sample_dim=self.se_sample_dim, sample_draws=self.se_draws,
                                n_points=self.se_points, n_scrambles=self.se_scrambles, max_iter=self.se_max_iter)


def _linear(spec: MultiheadSpec, d: int, alpha: float, h0: int) -> Problem:
    return Problem(d=d, T=2, alpha=alpha, channel="linear", kappa=spec.kappa, noise=0.5, lam=spec.lam,
                   target=MPTarget(0.5), heads=spec.heads, teacher_heads=h0)


def _softmax(spec: MultiheadSpec, alpha: float) -> Problem:
    return Problem(d=spec.softmax_d, T=2, alpha=alpha, channel="seq2lab", kappa=1.0, noise=0.5, lam=spec.lam,
                   target=MPTarget(0.5), heads=spec.heads, teacher_heads=spec.heads)


def multihead_grid(spec: MultiheadSpec) -> dict[str, Any]:
    """Linear: simulations (every simulated alpha at every d, per teacher) and theory (per teacher); softmax:
    the problems of the experimental SE and of the fits."""
    d = max(spec.ds)
    alphas = sorted(set(spec.alphas_theory) | set(spec.alphas_sim))
    return {"sims": [_linear(spec, dd, a, h0) for h0 in spec.teacher_heads for a in spec.alphas_sim for dd in spec.ds],
            "theory": {h0: [_linear(spec, d, a, h0) for a in alphas] for h0 in spec.teacher_heads},
            "softmax": [_softmax(spec, a) for a in spec.softmax_alphas]}


def _head_M(rec: dict[str, Any]) -> np.ndarray:
    """The matched per-head overlaps ``head_M`` (``H x H0``) of a record (top level or in its extras)."""
    m = rec.get("head_M", (rec.get("extras") or {}).get("head_M"))
    return np.asarray(m, dtype=float)


def diag_offdiag(M: np.ndarray) -> tuple[float, float]:
    """Mean diagonal and mean off-diagonal entry of a square ``M`` (``nan`` off the diagonal for one head)."""
    n = M.shape[0]
    off = float((M.sum() - np.trace(M)) / (n * (n - 1))) if n > 1 else math.nan
    return float(np.mean(np.diag(M))), off


def _softmax_se(problem: Problem, options: MultiHeadOptions) -> dict[str, Any]:
    """The experimental SE point as JSON: errors, ``head_M`` (matched), its draw error, convergence, timing."""
    r = multihead_theory(problem, options)
    ex = r.extras
    return {"test_error": r.test_error, "train_error": r.train_error, "test_error_se": float(ex["test_error_se"]),
            "head_M": np.asarray(ex["head_M"]).tolist(), "head_M_draw_se": np.asarray(ex["head_M_draw_se"]).tolist(),
            "head_Q0": np.asarray(ex["head_Q0"]).tolist(), "specialisation": float(ex["specialisation"]),
            "objective": float(ex["objective"]), "converged": bool(r.converged), "iterations": int(r.iterations),
            "runtime_s": float(r.runtime_s)}


def multihead_run(ctx: Context, spec: MultiheadSpec, grid: dict[str, Any]) -> FigureRun:
    """Linear theory per teacher, linear fits per d and their extrapolation; softmax SE and fits at one d."""
    recs = {h0: ctx.run(ctx.theory_jobs(ps), f"theory: linear, H0 = {h0}") for h0, ps in grid["theory"].items()}
    th = {h0: records_to_frame(r, drop=_ARRAYS) for h0, r in recs.items()}
    sim = records_to_frame(ctx.run(sim_jobs_per_d(ctx, grid["sims"], dict(zip(spec.ds, spec.seeds)),
                                                  n_test=spec.n_test), "L-BFGS: linear, two heads"), drop=_ARRAYS)
    if "cfg_teacher_heads" not in sim:
        sim["cfg_teacher_heads"] = 1
    rows, gaps = [], {}
    for h0 in spec.teacher_heads:
        t_at = th[h0].set_index("cfg_alpha")
        for a in spec.alphas_sim:
            t = float(t_at.loc[a, "test_error"])
            g = gaps_from_frame(sim[(sim.cfg_alpha == a) & (sim.cfg_teacher_heads == h0)], t)
            e = g.extrapolation
            gaps[h0, a] = g
            rows.append({"cfg_channel": "linear", "cfg_teacher_heads": h0, "cfg_alpha": a,
                         "quantity": f"test error at d = inf, linear, H = {spec.heads}, H0 = {h0} (a + b/d on d = "
                                     f"{', '.join(str(int(d)) for d in g.d)})",
                         "theory": t, "simulation": t + e.intercept, "se": e.stderr, "gap": abs(e.intercept),
                         "p_zero": extrapolation_p_value(e.intercept, e.stderr), "n_seeds": int(g.n_seeds.sum()),
                         **tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d (the theory is exact)"),
                         "theory_converged": bool(t_at.loc[a, "converged"]), "note": fit_note(g)})
    agr = [pd.DataFrame(rows)]
    soft = _softmax_part(ctx, spec, grid["softmax"])
    if soft["rows"] is not None:
        agr.append(soft["rows"])
    thresholds = {}
    for h0, ps in grid["theory"].items():
        eff = effective_single_head(ps[0])[0]
        thresholds[h0] = (interpolation_threshold(eff), perfect_recovery_threshold(eff))
    p0 = grid["theory"][spec.teacher_heads[0]][0]
    params = problem_params(p0, ("kappa (per head)", spec.kappa), ("H", spec.heads),
                            ("H0", ", ".join(map(str, spec.teacher_heads))), ("d", ", ".join(map(str, spec.ds))),
                            ("seeds per d", ", ".join(map(str, spec.seeds))), ("n_test", spec.n_test))
    if spec.softmax_alphas:
        params["softmax part"] = (f"seq2lab, H = H0 = {spec.heads}, kappa = 1, d = {spec.softmax_d}, "
                                  f"{spec.softmax_seeds} seeds x {spec.softmax_starts} starts; SE: specialised ansatz, "
                                  f"prior D = {spec.se_sample_dim} x {spec.se_draws} draws, "
                                  f"{spec.se_scrambles} x {spec.se_points} nodes")
    table = pd.concat([sim.assign(kind="simulation linear"),
                       *(f.assign(kind=f"theory linear H0={h0}") for h0, f in th.items()), soft["table"]],
                      ignore_index=True)
    notes = ["Linear channel: the theory of several heads is exact (the mean of the heads is one effective head); "
             "its rows extrapolate the fits' test error to d = inf. Softmax channel: the state evolution of several "
             "heads is experimental (sampled prior, specialised ansatz, docs: Multi-head attention); its rows compare "
             "one d with a wider declared tolerance, and head_M is matched (student heads reordered to the "
             "assignment of largest sum of diagonal overlaps) in the fits and in the theory alike."]
    return FigureRun(table, pd.concat(agr, ignore_index=True), params,
                     {"theory": th, "sim": sim, "gaps": gaps, "thresholds": thresholds, "softmax": soft},
                     notes=notes)


def _softmax_part(ctx: Context, spec: MultiheadSpec, problems: list[Problem]) -> dict[str, Any]:
    """The experimental SE (cached in-process values) and the fits at ``softmax_d``; their agreement rows."""
    if not problems:
        return {"se": {}, "sim": pd.DataFrame(), "rows": None, "table": pd.DataFrame()}
    o = spec.se_options()
    tag = (f"multihead_se H={spec.heads} lam={spec.lam} ansatz={o.ansatz} D={o.sample_dim} draws={o.sample_draws} "
           f"nodes={o.n_scrambles}x{o.n_points} max_iter={o.max_iter}")
    se = ctx.cached_many({f"{tag} alpha={p.alpha!r}": (lambda p=p: _softmax_se(p, o)) for p in problems},
                         "experimental multi-head SE")
    se = {p.alpha: se[f"{tag} alpha={p.alpha!r}"] for p in problems}
    raw = ctx.run(ctx.sim_jobs(problems, seeds=spec.softmax_seeds, n_test=spec.n_test, n_starts=spec.softmax_starts),
                  "L-BFGS: seq2lab, two heads")
    sim = records_to_frame(raw, drop=_ARRAYS)
    dm = [diag_offdiag(_head_M(r)) for r in raw]
    sim["head_M_diag"], sim["head_M_offdiag"] = [x[0] for x in dm], [x[1] for x in dm]
    th = pd.DataFrame([{"cfg_alpha": a, "test_error": v["test_error"], "converged": v["converged"],
                        "head_M_diag": diag_offdiag(np.asarray(v["head_M"]))[0],
                        "head_M_offdiag": diag_offdiag(np.asarray(v["head_M"]))[1]} for a, v in se.items()])
    reason = (f"experimental SE: sampled prior at D = {spec.se_sample_dim} (its finite-D bias), one d = "
              f"{spec.softmax_d} (no extrapolation), and a fixed point of the specialised ansatz")
    rows = agreement(sim, th, ["cfg_alpha"], ["test_error", "head_M_diag", "head_M_offdiag"], rel=_SOFTMAX_TOL_REL,
                     tol_abs={"test_error": 0.003, "head_M_diag": 0.02, "head_M_offdiag": 0.02}, reason=reason)
    rows["quantity"] = rows["quantity"].map(lambda q: f"seq2lab, H = H0 = {spec.heads}: {q}")
    # the point's keys, as the linear rows name theirs (the seed plan matches rows to simulated points by them)
    rows.insert(0, "cfg_teacher_heads", spec.heads)
    rows.insert(0, "cfg_channel", "seq2lab")
    table = pd.concat([sim.assign(kind="simulation seq2lab"), th.assign(kind="theory seq2lab (experimental SE)")],
                      ignore_index=True)
    return {"se": se, "sim": sim, "rows": rows, "table": table}


def multihead_plot(spec: MultiheadSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """Left: linear channel, test error vs alpha per teacher; right: seq2lab, test error and matched head_M."""
    soft = res.data["softmax"]
    fig, axes = new_figure(1, 2 if soft["se"] else 1, figsize=(11.0 if soft["se"] else 5.5, 5.2), squeeze=False)
    ax = axes[0][0]
    th, sim, dmax = res.data["theory"], res.data["sim"], max(spec.ds)
    colors = dict(zip(spec.teacher_heads, ("tab:blue", "tab:red", "tab:green", "tab:purple")))
    for h0, f in th.items():
        f = f.sort_values("cfg_alpha")
        c = colors.get(h0, "k")
        ax.plot(f.cfg_alpha, f.test_error, "-", color=c, label=f"H0 = {h0}: theory (exact)")
        m = sim[(sim.cfg_teacher_heads == h0) & (sim.cfg_d == dmax)].groupby("cfg_alpha").test_error.agg(["mean", "sem"])
        ax.errorbar(m.index, m["mean"], yerr=m["sem"].fillna(0.0), fmt="o", mfc="none", color=c, capsize=3,
                    label=f"H0 = {h0}: L-BFGS, d = {dmax}")
        ext = [(a, float(f.set_index("cfg_alpha").loc[a, "test_error"]) + g.extrapolation.intercept)
               for (hh, a), g in res.data["gaps"].items() if hh == h0]
        if ext:
            ax.plot([x for x, _ in ext], [y for _, y in ext], "D", color=c, ms=4,
                    label=f"H0 = {h0}: d = inf extrapolation")
        a_int, a_perf = res.data["thresholds"][h0]
        ax.axvline(a_int, color=c, ls=":", lw=1)
        if a_perf is not None and math.isfinite(a_perf):
            ax.axvline(a_perf, color=c, ls="-.", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="alpha = n/d^2", ylabel="test error",
           title=f"linear channel, H = {spec.heads} heads")
    if soft["se"]:
        ax2 = axes[0][1]
        alphas = sorted(soft["se"])
        s = soft["sim"].groupby("cfg_alpha")
        for q, c, lab in (("head_M_diag", "tab:red", "head_M diagonal"), ("head_M_offdiag", "tab:blue",
                                                                            "head_M off-diagonal")):
            ax2.plot(alphas, [diag_offdiag(np.asarray(soft["se"][a]["head_M"]))[0 if q == "head_M_diag" else 1]
                              for a in alphas], "s-", color=c, label=f"{lab}: SE (experimental)")
            m = s[q].agg(["mean", "sem"])
            ax2.errorbar(m.index, m["mean"], yerr=m["sem"].fillna(0.0), fmt="o", mfc="none", color=c, capsize=3,
                         label=f"{lab}: L-BFGS, d = {spec.softmax_d}")
        ax3 = ax2.twinx()
        ax3.plot(alphas, [soft["se"][a]["test_error"] for a in alphas], "^--", color="k", label="test error: SE")
        m = s.test_error.agg(["mean", "sem"])
        ax3.errorbar(m.index, m["mean"], yerr=m["sem"].fillna(0.0), fmt="v", mfc="none", color="k", capsize=3,
                     label="test error: L-BFGS")
        ax3.set_ylabel("test error")
        ax2.set(xscale="log", xlabel="alpha = n/d^2", ylabel="per-head overlap Tr(S_h S0_k)/d (matched)",
                title=f"seq2lab, H = H0 = {spec.heads} (experimental SE)")
        ax2.xaxis.set_minor_formatter(NullFormatter())
        ax2.set_xticks(alphas, [f"{a:g}" for a in alphas])
        h1, l1 = ax2.get_legend_handles_labels()
        h2, l2 = ax3.get_legend_handles_labels()
        ax2.legend(h1 + h2, l1 + l2, fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.suptitle("Multi-head attention\n" + textwrap.fill(params_text(res.params), 160), fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return fig


def multihead_caption(spec: MultiheadSpec, grid: dict[str, Any], res: FigureRun) -> str:
    thr = res.data["thresholds"]
    text = (f"Test error (per sequence, noiseless labels) of {spec.heads} tied student heads S_h = W_h W_h^T/sqrt(pd) "
            f"(width kappa d = {spec.kappa:g} d each, weight decay lam d sum_h Tr S_h) on the linear channel, for teachers "
            f"of {' and '.join(map(str, spec.teacher_heads))} heads: lines, the exact theory (the mean of the heads is "
            f"one effective head of width min(1, H kappa) d); circles, L-BFGS at d = {max(spec.ds)}; diamonds, the fits "
            f"extrapolated to d = inf by a + b/d over d = {', '.join(map(str, spec.ds))}. Dotted and dash-dotted: the "
            "interpolation and perfect-recovery thresholds of the effective head (lam -> 0+), "
            + ", ".join(f"H0 = {h0}: {a:.3f} and {p:.3f}" for h0, (a, p) in thr.items()) + ".")
    se = res.data["softmax"]["se"]
    if se:
        text += (f" Right: seq2lab with H = H0 = {spec.heads} (kappa = 1): the experimental state evolution "
                 f"(specialised ansatz, sampled prior; squares and triangles) against L-BFGS at d = {spec.softmax_d} "
                 "(lowest objective of several starts); per-head overlaps head_M after matching the student heads "
                 "to the teacher heads, diagonal (a head with its own teacher head) and off-diagonal. Specialisation "
                 "index of the SE: " + ", ".join(f"{se[a]['specialisation']:.2f} at alpha = {a:g}" for a in sorted(se))
                 + ".")
    return text


register(FigureDef("multihead", "Multi-head attention: exact linear theory and the experimental softmax SE against ERM",
                   MultiheadSpec, multihead_grid, multihead_run, multihead_plot, multihead_caption,
                   presets=("full", "smoke")))
