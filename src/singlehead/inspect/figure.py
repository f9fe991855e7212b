"""Figure grid of :func:`singlehead.inspect.model.inspect_model`: one panel per layer.

Each panel: histogram of the non-zero eigenvalues of the d_model-normalised tied maps of the
layer's heads (pooled; normalised by the total number of eigenvalues, zeros included, so it
is comparable with the density of the law's continuous part), the fitted law
``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` (rank-capped), its bulk edge (dashed) and the outliers
(red ticks). Matplotlib is imported lazily (explicit Agg canvas, no pyplot state).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

__all__ = ["inspection_figure", "plot_inspection"]


def plot_inspection(insp, path: str, *, bins: int = 60) -> None:
    """Write the per-layer figure grid of an :class:`~singlehead.inspect.model.Inspection` to ``path``."""
    inspection_figure(insp, bins=bins).savefig(path, dpi=110)


def inspection_figure(insp, *, bins: int = 60):
    """The per-layer figure grid as a matplotlib ``Figure`` (explicit Agg canvas)."""
    layers = list(insp.layer_fits)
    ncol = min(3, max(1, len(layers)))
    nrow = math.ceil(len(layers) / ncol)
    fig = Figure(figsize=(4.2 * ncol, 3.3 * nrow))
    for i, l in enumerate(layers):
        ax = fig.add_subplot(nrow, ncol, i + 1)
        f = insp.layer_fits[l]
        ev = insp.eigenvalues[l]
        nz = ev[ev > 0]
        bulk = nz[nz <= f.bulk_edge + f.margin]
        xmax = float(max(bulk.max() if bulk.size else 0.0, f.bulk_edge)) * 1.15
        if bulk.size:
            h, e = np.histogram(bulk, bins=bins, range=(0.0, xmax))
            ax.bar(
                0.5 * (e[1:] + e[:-1]),
                h / (ev.size * np.diff(e)),
                width=np.diff(e),
                color="C1",
                alpha=0.55,
                label=f"measured ({insp.n_heads} heads)",
            )
        law = f.law()
        m = law.grid <= xmax
        ax.plot(law.grid[m], law.density[m], color="C0", lw=1.5, label="fitted law")
        ax.axvline(f.bulk_edge, color="C0", ls="--", lw=0.8)
        ymax = ax.get_ylim()[1]
        for j, o in enumerate(f.outliers):
            xo = min(o["position"], 0.99 * xmax)
            ax.plot([xo, xo], [0, 0.25 * ymax], color="C3", lw=1.5, label="outliers" if j == 0 else None)
        if f.outliers and f.outliers[0]["position"] > xmax:
            ax.annotate(
                f"{f.n_outliers} outliers, top {f.outliers[0]['position']:.3g} (clipped)",
                (0.98 * xmax, 0.3 * ymax),
                ha="right",
                fontsize=7,
                color="C3",
            )
        verdict = "fits" if f.fits else "does NOT fit"
        shape = "kappa0" if f.prior == "mp" else "gamma"
        ax.set_title(
            f"layer {l}: KS {f.ks:.3f} ({verdict})\neta={f.eta:.3g} delta={f.delta:.3g} "
            f"eps={f.eps:.3g} {shape}={f.shape:.2g}",
            fontsize=8,
        )
        ax.set_xlabel("eigenvalue of S_h (non-zero)", fontsize=8)
        ax.set_ylabel("density", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.suptitle(
        f"{insp.source}: tied query-key spectra vs eta ReLU(mu0 ⊞ SC(delta^2) - eps), "
        f"rank cap {insp.d_head}/{insp.d_model}",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
