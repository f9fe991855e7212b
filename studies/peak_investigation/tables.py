"""Tables of the interpolation-peak investigation (finite-size fits, optimizer spread, overlaps).

Every function takes cached records (plain dicts, see :mod:`.erm`) and returns markdown lines;
nothing here runs a fit or an SE solve.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from singlehead.analysis import extrapolate_to_infinite_d

#: exponents c of the finite-size model a + b d^-c that are compared (1/d, 1/sqrt(d), d^(-2/3))
EXPONENTS = (1.0, 0.5, 2.0 / 3.0)


def mean_se(values: list[float]) -> tuple[float, float]:
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan


def per_d(erm: dict[int, list[dict]], name: str) -> tuple[list[int], list[float], list[float], list[int]]:
    """Sizes, seed means, standard errors and seed counts of ``name`` over the init-0 fits."""
    ds, ms, ses, ns = [], [], [], []
    for d in sorted(erm):
        vals = [rec["fits"][0][name] for rec in erm[d]]
        if len(vals) < 2:
            continue
        m, s = mean_se(vals)
        ds.append(d), ms.append(m), ses.append(s), ns.append(len(vals))
    return ds, ms, ses, ns


def free_exponent(ds: list[int], ms: list[float], ses: list[float]) -> tuple[float, float]:
    """The exponent ``c`` in [0.2, 3] minimising the weighted chi^2 of ``a + b d^-c`` (grid search), and that chi^2."""
    best = (math.nan, math.inf)
    for c in np.linspace(0.2, 3.0, 281):
        e = extrapolate_to_infinite_d(np.asarray(ds, float) ** c, ms, ses, inflate=False)
        if e.chi2 < best[1]:
            best = (float(c), float(e.chi2))
    return best


def extrapolation_rows(erm: dict[int, list[dict]], name: str, theory: dict[str, float]) -> list[str]:
    """Markdown rows: one per exponent (and the free one), with chi^2/dof, residuals and the SE values inside."""
    return extrapolation_rows_values(
        {d: [rec["fits"][0][name] for rec in recs] for d, recs in erm.items()}, name, theory
    )


def extrapolation_rows_values(values: dict[int, list[float]], name: str, theory: dict[str, float]) -> list[str]:
    """:func:`extrapolation_rows` for per-seed values by d."""
    ds, ms, ses = [], [], []
    for d in sorted(values):
        if len(values[d]) >= 2:
            m, s = mean_se(values[d])
            ds.append(d), ms.append(m), ses.append(s)
    if len(ds) < 3:
        return [f"| {name} | (fewer than 3 sizes) | | | | |"]
    c_free, _ = free_exponent(ds, ms, ses)
    rows = []
    for label, c in [(f"d^-{c:.2g}", c) for c in EXPONENTS] + [(f"free c = {c_free:.2f}", c_free)]:
        e = extrapolate_to_infinite_d(np.asarray(ds, float) ** c, ms, ses)
        fit = e.predict(np.asarray(ds, float) ** c)
        resid = ", ".join(f"{(m - f) / s:+.1f}" for m, f, s in zip(ms, fit, ses))
        inside = ", ".join(f"{k} {'in' if e.ci[0] <= v <= e.ci[1] else 'OUT'}" for k, v in theory.items())
        rows.append(
            f"| {name} | {label} | {e.intercept:.4f} [{e.ci[0]:.4f}, {e.ci[1]:.4f}] | "
            f"{e.chi2_per_dof:.2f} (p = {e.p_value:.2f}) | {resid} | {inside} |"
        )
    return rows


def size_table(erm: dict[int, list[dict]]) -> list[str]:
    lines = [
        "| d | seeds | test error | train error | objective L/n | fit time / seed (s) |",
        "|---|---|---|---|---|---|",
    ]
    for d in sorted(erm):
        f0 = [r["fits"][0] for r in erm[d]]
        t, tr, ob = (mean_se([f[k] for f in f0]) for k in ("test_error", "train_error", "objective"))
        rt = float(np.mean([f["runtime_s"] for f in f0]))
        lines.append(
            f"| {d} | {len(f0)} | {t[0]:.4f} ± {t[1]:.4f} | {tr[0]:.5f} ± {tr[1]:.5f} | "
            f"{ob[0]:.5f} ± {ob[1]:.5f} | {rt:.1f} |"
        )
    return lines


def overlap_table(erm: dict[int, list[dict]], all_pairs: bool = False) -> list[str]:
    """``||S_1 - S_2||_F^2/d`` between two initialisations on the same data, against d (the first pair of each
    data set, or with ``all_pairs`` every pair; the standard error is over data sets, pairs averaged within)."""
    lines = [
        "| d | data sets × pairs | ‖S1−S2‖²/d | matrix error ‖S−S0‖²/d | "
        "test-error difference | objective difference (rel.) |",
        "|---|---|---|---|---|---|",
    ]
    for d in sorted(erm):
        pairs = [r for r in erm[d] if r["distances"]]
        if not pairs:
            continue
        idx = [(i, j) for i in range(len(pairs[0]["fits"])) for j in range(i + 1, len(pairs[0]["fits"]))]
        idx = idx if all_pairs else idx[:1]
        dist = [float(np.mean(r["distances"][: len(idx)])) for r in pairs]
        me = [r["fits"][0]["matrix_error"] for r in pairs]
        dt = [
            float(np.mean([abs(r["fits"][i]["test_error"] - r["fits"][j]["test_error"]) for i, j in idx]))
            for r in pairs
        ]
        do = [
            float(
                np.mean(
                    [
                        abs(r["fits"][i]["objective"] - r["fits"][j]["objective"]) / r["fits"][0]["objective"]
                        for i, j in idx
                    ]
                )
            )
            for r in pairs
        ]
        lines.append(
            f"| {d} | {len(pairs)} × {len(idx)} | {_fmt_ms(dist, 4)} | {np.mean(me):.3f} | {_fmt_ms(dt, 4)} | "
            f"{_fmt_ms(do, 1, sci=True)} |"
        )
    return lines


def _fmt_ms(v: list[float], nd: int, sci: bool = False) -> str:
    m, s = mean_se(v)
    if sci:
        return f"{m:.2e}" + ("" if math.isnan(s) else f" ± {s:.1e}")
    return f"{m:.{nd}f}" + ("" if math.isnan(s) else f" ± {s:.{nd}f}")


def optim_table(optim: dict[tuple[str, int], dict]) -> list[str]:
    """Final float64 objectives from 8 initialisations per data set and optimizer."""
    lines = [
        "| data seed | optimizer | objective: min / median / max | (max−min)/min | distinct minima (rel. gap > 1e-5) "
        "| test error: min / max | ‖Si−Sj‖²/d: median (max) | steps (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (opt, s), rec in sorted(optim.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        obj = np.array([f["objective"] for f in rec["fits"]])
        te = [f["test_error"] for f in rec["fits"]]
        distinct = _distinct(obj, 1e-5)
        dist = np.asarray(rec["distances"])
        steps = np.median([f["steps"] for f in rec["fits"]])
        lines.append(
            f"| {s} | {opt} | {obj.min():.6f} / {np.median(obj):.6f} / {obj.max():.6f} | "
            f"{(obj.max() - obj.min()) / obj.min():.1e} | {distinct} | {min(te):.4f} / {max(te):.4f} | "
            f"{np.median(dist):.4f} ({dist.max():.4f}) | {steps:.0f} |"
        )
    return lines


def _distinct(obj: np.ndarray, rel: float) -> int:
    """Number of clusters of sorted objective values separated by relative gaps above ``rel``."""
    v = np.sort(obj)
    return int(1 + np.sum(np.diff(v) / v[:-1] > rel))


def optim_cross(optim: dict[tuple[str, int], dict]) -> list[str]:
    """Per data set: best Adam minus best L-BFGS objective, relative."""
    out = []
    for s in sorted({k[1] for k in optim}):
        if ("adam", s) in optim and ("lbfgs", s) in optim:
            a = min(f["objective"] for f in optim[("adam", s)]["fits"])
            b = min(f["objective"] for f in optim[("lbfgs", s)]["fits"])
            out.append(f"data seed {s}: best Adam − best L-BFGS = {(a - b) / b:+.1e} (relative)")
    return out


def branch_table(se: dict[str, Any], alphas: tuple[float, ...]) -> list[str]:
    lines = [
        "| alpha | branch | test error | train error | replicon | jump share | residual |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in alphas:
        for b in ("global", "teacher", "z"):
            r = se[b].get(str(a))
            if r is None:
                continue
            lines.append(
                f"| {a} | {b} | {r['test_error']:.4f} | {r['train_error']:.5f} | {r['replicon']:.2f} | "
                f"{100 * r['jump_weight']:.1f} % | {r['residual']:.1e} |"
            )
    return lines


def finding_figure(erm: dict[int, list[dict]], se: dict[str, dict[str, float]], path: Path) -> None:
    """ERM's test error against 1/d with its 1/d extrapolation to d = inf (95 % band), beside the SE on
    the global and the teacher-branch prox minimum, at the peak point; written to ``path`` (PNG)."""
    ds, ms, ses, ns = per_d(erm, "test_error")
    e = extrapolate_to_infinite_d(ds, ms, ses)
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    x = 1.0 / np.asarray(ds, float)
    ax.errorbar(x, ms, yerr=ses, fmt="o", color="k", capsize=3, label="ERM (L-BFGS), seed mean ± s.e.")
    xx = np.linspace(0.0, x.max() * 1.05, 50)
    a, b = e.intercept, e.slopes[0]
    ax.plot(xx, a + b * xx, "k--", lw=1, label=f"a + b/d fit: d = ∞ {a:.4f} [{e.ci[0]:.4f}, {e.ci[1]:.4f}]")
    ax.fill_between([0, x.max() * 0.08], e.ci[0], e.ci[1], color="0.7", alpha=0.6)
    for name, style, color in (("global", "-", "tab:red"), ("teacher", "-.", "tab:blue")):
        ax.axhline(se[name], ls=style, color=color, label=f"state evolution, {name} prox branch: {se[name]:.4f}")
    for xi, d, n in zip(x, ds, ns):
        ax.annotate(f"d={d}\n{n} seeds", (xi, ms[ds.index(d)]), textcoords="offset points", xytext=(6, -18), fontsize=7)
    ax.set(
        xlabel="1/d",
        ylabel="test error per sequence",
        xlim=(0, x.max() * 1.15),
        title="seq2lab, T = 2, MP(0.5), Delta = 0.5, lam = 1e-5, alpha = 0.3",
    )
    ax.legend(fontsize=7, loc="lower left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
