"""Eigenvalue law of the learned query–key matrix ``Shat = eta ReLU(S0 + delta Z - eps)``.

docs: Theory, :ref:`theory-spectrum` (arXiv 2509.24914 §5): with ``mu_delta = mu0 ⊞ SC(delta^2)`` the law of
``Shat`` has an atom ``F(eps)`` at zero (low-rank collapse; ``1 - kappa`` if the rank cap
binds), a density ``(1/eta) mu_delta(x/eta + eps)`` for ``x > 0`` (above the cut-off), and,
for each spike ``s`` of the target with ``1 + v g_bulk'(s) > 0``, an outlier at
``eta (s + v g_bulk(s) - eps)`` (``eta (s + v/s - eps)`` for a null bulk) with squared
overlap ``1 + v g_bulk'(s)`` (``1 - v/s^2``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from singlehead.numerics.spectra.convolution import free_convolve_semicircle
from singlehead.numerics.spectra.integrals import soft_threshold_integrals

__all__ = ["LearnedSpectrum", "learned_spectrum_law", "plot_learned_spectrum"]


@dataclass(frozen=True, eq=False)
class LearnedSpectrum:
    """Law of ``eta ReLU(mu0 ⊞ SC(v) - eps)`` (rank-capped).

    Attributes
    ----------
    grid, density : ndarray
        Density of the continuous part on ``x >= 0`` (zero inside gaps and above the top edge).
    atom_at_zero : float
        Mass of the atom at zero.
    edges : list of (float, float)
        Bulks of the continuous part after the map.
    outliers : list of dict
        ``{"spike", "position", "overlap", "mass"}`` for the spike outliers that survive.
    point_masses : list of (float, float)
        All positive point masses ``(position, mass)`` (outliers and atoms of ``v = 0`` laws).
    variance, threshold, scale, rank_cap, rank_fraction, cutoff : float
        Inputs ``v, eps, eta, kappa``, the fraction of non-zero eigenvalues and the cut-off
        ``c`` on the scale of ``Y``.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, learned_spectrum_law
    >>> law = learned_spectrum_law(MarchenkoPastur(0.5), variance=0.1, threshold=0.3, scale=2.0)
    >>> 0.0 < law.atom_at_zero < 1.0, law.grid.shape == law.density.shape
    (True, True)
    """

    grid: np.ndarray
    density: np.ndarray
    atom_at_zero: float
    edges: list[tuple[float, float]]
    outliers: list[dict]
    point_masses: list[tuple[float, float]] = field(default_factory=list)
    variance: float = 0.0
    threshold: float = 0.0
    scale: float = 1.0
    rank_cap: float | None = None
    rank_fraction: float = math.nan
    cutoff: float = math.nan

    def to_dict(self) -> dict:
        """JSON-friendly dictionary (lists of floats)."""
        return {
            "variance": self.variance,
            "threshold": self.threshold,
            "scale": self.scale,
            "rank_cap": self.rank_cap,
            "rank_fraction": self.rank_fraction,
            "cutoff": self.cutoff,
            "atom_at_zero": self.atom_at_zero,
            "edges": [[float(a), float(b)] for a, b in self.edges],
            "outliers": [{k: float(v) for k, v in o.items()} for o in self.outliers],
            "point_masses": [[float(a), float(b)] for a, b in self.point_masses],
            "grid": [float(x) for x in self.grid],
            "density": [float(p) for p in self.density],
        }


def learned_spectrum_law(
    law,
    variance: float,
    threshold: float = 0.0,
    scale: float = 1.0,
    rank_cap: float | None = None,
    grid_size: int = 512,
) -> LearnedSpectrum:
    """Eigenvalue law of ``eta ReLU(mu0 ⊞ SC(v) - eps)`` (docs: Theory, :ref:`theory-spectrum`).

    Parameters
    ----------
    law : MarchenkoPastur, DiscreteLaw or SpikedLaw
        Target law ``mu0``.
    variance : float
        ``v = delta^2``.
    threshold : float
        ``eps``.
    scale : float
        ``eta > 0``.
    rank_cap : float, optional
        ``kappa``: keep only the top ``kappa`` fraction of eigenvalues.
    grid_size : int
        Number of uniform grid points on ``[0, 1.05 x_max]`` (the bulk edges are added).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, learned_spectrum_law
    >>> law = learned_spectrum_law(MarchenkoPastur(0.5), variance=0.1, threshold=0.3, scale=2.0)
    >>> round(law.atom_at_zero + law.rank_fraction, 12)   # zero atom and non-zero part
    1.0
    >>> capped = learned_spectrum_law(MarchenkoPastur(0.5), variance=0.1, rank_cap=0.25)
    >>> round(capped.atom_at_zero, 6)                   # the rank cap keeps the top quarter
    0.75
    """
    eta, eps = float(scale), float(threshold)
    if not eta > 0:
        raise ValueError(f"scale must be > 0 (got {scale!r})")
    cl = free_convolve_semicircle(law, float(variance))
    ti = soft_threshold_integrals(cl, math.sqrt(cl.variance), eps, rank_cap)
    c = ti.cutoff
    edges = [(eta * (max(a, c) - eps), eta * (b - eps)) for a, b in cl.edges() if b > c]
    pos, mass = cl.atoms()
    pm = [(eta * (p - eps), float(m)) for p, m in zip(pos, mass) if p > c]
    if ti.cap_binds:
        cc, frac = cl.upper_cut(float(rank_cap))
        if frac:
            j = int(np.argmin(np.abs(pos - cc)))
            pm.append((eta * (cc - eps), float(frac * mass[j])))
    outliers = [
        {"spike": o.spike, "position": eta * (o.position - eps), "overlap": o.overlap, "mass": o.mass}
        for o in cl.outliers()
        if o.position > c
    ]
    top = max([b for _, b in edges] + [p for p, _ in pm] + [0.0])
    xmax = 1.05 * top if top > 0 else 1.0
    grid = np.linspace(0.0, xmax, int(grid_size))
    grid = np.unique(np.concatenate([grid, [e for ab in edges for e in ab]]))
    y = grid / eta + eps
    dens = np.where(y > c, cl.density(y) / eta, 0.0)
    return LearnedSpectrum(
        grid=grid,
        density=dens,
        atom_at_zero=float(max(0.0, 1.0 - ti.rank_fraction)),
        edges=edges,
        outliers=outliers,
        point_masses=pm,
        variance=float(variance),
        threshold=eps,
        scale=eta,
        rank_cap=None if rank_cap is None else float(rank_cap),
        rank_fraction=float(ti.rank_fraction),
        cutoff=float(c),
    )


def plot_learned_spectrum(result: LearnedSpectrum, path: str) -> None:
    """Plot a :class:`LearnedSpectrum` to ``path`` (matplotlib Agg canvas; no global state).

    Draws the density of the non-zero part, the zero atom (its mass in the legend) and the
    outliers as vertical lines.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, learned_spectrum_law, plot_learned_spectrum
    >>> law = learned_spectrum_law(MarchenkoPastur(0.5), variance=0.1, threshold=0.3, scale=2.0)
    >>> plot_learned_spectrum(law, "law.png")  # doctest: +SKIP
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(result.grid, result.density, color="C0", lw=1.5, label="density (x > 0)")
    ax.fill_between(result.grid, result.density, color="C0", alpha=0.2)
    ymax = float(np.max(result.density)) if result.density.size and np.max(result.density) > 0 else 1.0
    ax.vlines([0.0], 0, ymax, color="C3", lw=3, label=f"atom at 0: {result.atom_at_zero:.3f}")
    for i, (p, m) in enumerate(result.point_masses):
        ax.vlines([p], 0, 0.5 * ymax, color="C2", lw=1.5, ls="--", label="point masses" if i == 0 else None)
    for o in result.outliers:
        ax.annotate(
            f"overlap {o['overlap']:.2f}", (o["position"], 0.5 * ymax), fontsize=7, rotation=90, va="bottom", ha="right"
        )
    ax.set_xlabel("eigenvalue of S")
    ax.set_ylabel("density")
    ax.set_title(
        f"v={result.variance:.3g}, eps={result.threshold:.3g}, eta={result.scale:.3g}"
        + ("" if result.rank_cap is None else f", kappa={result.rank_cap:.3g}")
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
