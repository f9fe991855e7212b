"""Panels of the power-law figure (:mod:`singlehead.figures.power_law`): matplotlib's object API only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

from singlehead.analysis.scaling import SAMPLE_LIMITED_SETTING as SL
from singlehead.model.channels import get_channel

REGIME_COLORS = {
    "threshold": "tab:blue",
    "label_noise": "tab:orange",
    "tail_noise": "tab:green",
    "harmful_overfitting": "tab:red",
    "shrinkage": "tab:purple",
    "d2_over_n": "tab:brown",
    "plateau": "lightgray",
    "crossover": "white",
    "failed": "black",
}
_GAMMA_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")


def spectrum_panel(ax: Any, eig: np.ndarray, pred: Any, d: int, seeds: int, gamma: float) -> None:
    """Histogram of the simulated non-zero eigenvalues and the predicted outlier positions."""
    nz = eig[np.abs(eig) > 1e-3]
    ax.hist(nz, bins=50, color="tab:blue", alpha=0.4, label=f"simulation, d={d}, {seeds} seeds")
    for k, o in enumerate(pred.outliers):
        ax.axvline(o["position"], color="k", ls=":", lw=1, label="theory outliers eta(s+d^2/s-eps)" if k == 0 else None)
    ax.set(
        xlabel="eigenvalue of S",
        ylabel="count",
        yscale="log",
        title=f"power law gamma={gamma}, alpha=2:\n{len(pred.outliers)} predicted outliers",
    )
    ax.legend(fontsize=7)


def sequential_panel(ax: Any, c: pd.DataFrame, d: int, gamma: float, lam: float) -> None:
    """Recovered modes K(n) (theory) against the scaling n_i = d i^(2 gamma)."""
    ax.step(c.n, c.K, where="post", label=f"recovered modes K(n) (theory, lam={lam:g})")
    i = np.arange(1, int(np.nanmax(c.K)) + 2)
    n_i = d * i ** (2 * gamma)
    keep = n_i <= c.n.max()
    ax.plot(n_i[keep], i[keep], "x", color="tab:red", label="n_i = d i^(2 gamma) (scaling; prefactor O(1))")
    ax.set(xscale="log", yscale="log", xlabel="n", ylabel="K", title=f"sequential recovery\n(d={d})")
    ax.legend(fontsize=7)


def scaling_panel(ax: Any, curves: dict[tuple[float, float, str], dict[str, Any]], d: int) -> None:
    """Excess test error vs n/d of each threshold-limited curve, with its fitted exponent and CI."""
    gammas = sorted({g for g, _, _ in curves})
    colors = {g: _GAMMA_COLORS[i % len(_GAMMA_COLORS)] for i, g in enumerate(gammas)}
    for (g, nzv, ch), res in curves.items():
        cc = pd.DataFrame(res["curve"])
        f = res["fit"]
        closed_form = not get_channel(ch).needs_quadrature  # the quadratic network; the softmax curve in black
        lab = f"g={g}, Delta={nzv:g}" + ("" if closed_form else f", {ch} T=2")
        ax.plot(
            cc.n / d,
            cc.excess_error,
            "o-" if nzv > 0 else "s--",
            ms=3,
            color=colors[g] if closed_form else "k",
            mfc="none" if nzv == 0 else None,
            label=f"{lab}: {f['exponent']:.3f} [{f['ci_low']:.3f},{f['ci_high']:.3f}]",
        )
    pred = "/".join(f"{1 - 1 / (2 * g):.3g}" for g in gammas)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n/d",
        ylabel="excess test error",
        title=f"threshold-limited, pred. 1-1/(2 gamma)={pred}\n(d={d}, lam={SL['lam_prefactor']:g} sqrt(alpha); "
        "softmax: sqrt(alpha))",
    )
    ax.title.set_fontsize(8)
    ax.legend(fontsize=5.5)


def tail_panel(ax: Any, cc: pd.DataFrame, fit: dict[str, float], gamma: float, d: int, lam: float) -> None:
    """Local exponents of the tail-noise curve against the finite-K law (the title says so when no converged
    cell is in the tail-noise regime, e.g. at the smoke preset's small d: there is nothing to compare)."""
    conv = cc["converged"].astype(bool).to_numpy()
    lab = (cc["regime"] == "tail_noise").to_numpy() & conv
    x = cc["n"].to_numpy(dtype=float) / d
    ax.plot(x[conv], cc["local_exponent_n"][conv], "o", color="tab:green", label="measured (SE, converged)")
    ax.plot(
        x[~conv],
        cc["local_exponent_n"][~conv],
        "o",
        mfc="none",
        color="tab:green",
        label="SE not at tolerance (not compared)",
    )
    ax.plot(x[lab], cc["predicted_exponent"][lab], "kx", ms=7, label="finite-K law at the cell's K (tail_noise cells)")
    ax.axhline(2 * gamma - 1, color="k", ls="--", lw=0.8, label=f"K -> inf: 2 gamma - 1 = {2 * gamma - 1:g}")
    for xi, k, le in zip(x, cc["K"], cc["local_exponent_n"]):
        if np.isfinite(le) and 0 < le < 3:
            ax.annotate(f"K={int(k)}", (xi, le), fontsize=5, xytext=(2, 3), textcoords="offset points")
    ax.set(
        xscale="log",
        xlabel="n/d",
        ylabel="local exponent -dlogE/dlogn",
        ylim=(1.0, 2.0),
        title=f"tail noise (gamma={gamma}, d={d:g}, lam={lam:g}, Delta=0)\nfit {fit['exponent']:.3f} over all points",
    )
    ax.title.set_fontsize(8)
    ax.legend(fontsize=5.5)
    if not lab.any():
        ax.set_title(ax.get_title() + "\nno converged tail-noise cell at this d: no agreement row", fontsize=8)


def phase_diagram(ax_reg: Any, ax_exp: Any, rmap: pd.DataFrame, d: int, gamma: float, noise: float) -> None:
    """Filled regime regions and the measured local exponent over (n/d, lam), predicted beside it."""
    ns = np.sort(rmap.n.unique())
    lams = np.sort(rmap.lam.unique())

    def edges(v: np.ndarray) -> np.ndarray:
        lv = np.log(v)
        mid = 0.5 * (lv[1:] + lv[:-1])
        return np.exp(np.concatenate([[2 * lv[0] - mid[0]], mid, [2 * lv[-1] - mid[-1]]]))

    names = list(REGIME_COLORS)
    piv = rmap.pivot_table(index="lam", columns="n", values="local_exponent_n", aggfunc="first").loc[lams, ns]
    pred = rmap.pivot_table(
        index="lam", columns="n", values="predicted_exponent", aggfunc="first", dropna=False
    ).reindex(index=lams, columns=ns)
    reg = rmap.pivot_table(index="lam", columns="n", values="regime", aggfunc="first").loc[lams, ns]
    code = reg.apply(lambda col: col.map(names.index)).to_numpy(dtype=float)
    X, Y = edges(ns / d), edges(lams)
    ax_reg.pcolormesh(
        X,
        Y,
        code,
        cmap=ListedColormap([REGIME_COLORS[k] for k in names]),
        vmin=-0.5,
        vmax=len(names) - 0.5,
        edgecolors="0.85",
        linewidth=0.3,
    )
    present = [k for k in names if (reg == k).to_numpy().any()]
    handles = [Patch(facecolor=REGIME_COLORS[k], edgecolor="0.5", label=k) for k in present]
    # cells whose state evolution did not converge (at lam <= 0.05 the n = d column, on the K = 0 side): their
    # label comes from an unconverged point, so it is hatched over rather than shown as a regime
    conv = rmap.pivot_table(index="lam", columns="n", values="converged", aggfunc="first").loc[lams, ns]
    bad = ~conv.to_numpy(dtype=bool)
    for i, j in zip(*np.nonzero(bad)):
        ax_reg.add_patch(
            Rectangle(
                (X[j], Y[i]), X[j + 1] - X[j], Y[i + 1] - Y[i], facecolor="white", hatch="xxx", edgecolor="0.3", lw=0.3
            )
        )
    if bad.any():
        handles.append(Patch(facecolor="white", hatch="xxx", edgecolor="0.3", label=f"SE unconverged ({bad.sum()})"))
    ax_reg.legend(handles=handles, fontsize=6, loc="upper left")
    ax_reg.set(
        xscale="log",
        yscale="log",
        xlabel="n/d",
        ylabel="lam (fixed along each row)",
        title=f"regime = scale setting the last recovered mode\n(gamma={gamma}, d={d:g}, Delta={noise:g})",
    )
    ax_reg.title.set_fontsize(8)
    m = ax_exp.pcolormesh(X, Y, np.clip(piv.to_numpy(dtype=float), -1, 2.5), cmap="viridis", vmin=-1, vmax=2.5)
    ax_exp.figure.colorbar(m, ax=ax_exp, label="measured local exponent -dlogE/dlogn")
    for i, lv in enumerate(lams):
        for j, nv in enumerate(ns):
            r = reg.iloc[i, j]
            if r in ("plateau",) or not np.isfinite(piv.iloc[i, j]) or bad[i, j]:
                continue
            pv = pred.iloc[i, j]
            txt = f"{piv.iloc[i, j]:.2f}" + (f"\n({pv:.2f})" if np.isfinite(pv) else "\n(x)")
            ax_exp.text(
                nv / d, lv, txt, ha="center", va="center", fontsize=4.2, color="w" if piv.iloc[i, j] < 0.8 else "k"
            )
    ax_exp.set(
        xscale="log",
        yscale="log",
        xlabel="n/d",
        ylabel="lam",
        title="local exponent: measured\n(predicted for the label; x: crossover)",
    )
    ax_exp.title.set_fontsize(8)
