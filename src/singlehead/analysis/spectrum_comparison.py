"""The learned-spectrum law against eigenvalues of trained maps: KS distance, comparison table, figure.

The law is :class:`~singlehead.analysis.learned_spectrum.LearnedSpectrum` (docs: Theory, :ref:`theory-spectrum`);
eigenvalues
are those of ``S`` in the theory's normalisation (``S = W W^T/sqrt(p d)``), pooled over runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from singlehead.analysis.learned_spectrum import LearnedSpectrum, learned_spectrum
from singlehead.model.problem import Problem
from singlehead.model.results import Result

__all__ = ["ks_distance", "compare_spectrum", "spectrum_table", "plot_spectrum_comparison"]


def ks_distance(pred: LearnedSpectrum, eigenvalues: np.ndarray, rank_tol: float = 1e-3) -> float:
    """Kolmogorov–Smirnov distance ``sup_x |F_emp(x) - F_pred(x)|`` (both one-sided limits).

    Empirical eigenvalues with ``|lambda| <= rank_tol`` are read as exact zeros (the optimiser
    never reaches an exact zero).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead import Problem
    >>> from singlehead.analysis import ks_distance, learned_spectrum
    >>> ks_distance(learned_spectrum(Problem(T=2, lam=0.05)), np.zeros(100)) > 0.5   # far from the law
    True
    """
    x = np.sort(np.where(np.abs(eigenvalues) <= rank_tol, 0.0, np.asarray(eigenvalues, dtype=float)))
    n = x.size
    if n == 0:
        raise ValueError("eigenvalues must be a non-empty array")
    ux, first = np.unique(x, return_index=True)
    right = np.searchsorted(x, ux, side="right") / n  # F_emp(x)
    left = first / n  # F_emp(x-)
    Fr = pred.cdf(ux)
    Fl = Fr.copy()
    Fl[ux == 0] = 0.0  # the theoretical atom at zero
    Fl[ux < 0] = 0.0
    return float(max(np.max(np.abs(right - Fr)), np.max(np.abs(left - Fl))))


def compare_spectrum(
    problem: Problem,
    eigenvalues_pooled: np.ndarray,
    *,
    theory_result: Result | None = None,
    prediction: LearnedSpectrum | None = None,
    rank_tol: float = 1e-3,
    n_runs: int | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Compare the predicted law with eigenvalues of trained students pooled over seeds.

    Parameters
    ----------
    eigenvalues_pooled : array
        Eigenvalues of ``S`` from several runs, concatenated.
    rank_tol : float
        Eigenvalues with ``|lambda| <= rank_tol`` count as zero (same rule as
        :func:`singlehead.simulate`).
    n_runs : int, optional
        Number of pooled runs (default ``len / d``), only reported.

    Returns
    -------
    dict
        ``ks`` (KS distance, :func:`ks_distance`), ``zero_atom_theory``, ``zero_atom_sim``
        (fraction of ``|lambda| <= rank_tol``), ``rank_theory`` / ``rank_sim`` (per run),
        ``top_theory`` / ``top_sim`` (largest eigenvalue: top bulk edge or outlier vs. mean of
        the per-run maxima), ``n_eigenvalues``, ``n_runs``.

    Examples
    --------
    >>> from singlehead import Problem, simulate
    >>> from singlehead.analysis import compare_spectrum
    >>> problem = Problem(d=80, T=2, alpha=1.0, noise=0.5, lam=0.05)
    >>> report = compare_spectrum(problem, simulate(problem, seed=0).extras["eigenvalues"])
    >>> report["ks"] < 0.1, abs(report["zero_atom_sim"] - report["zero_atom_theory"]) < 0.05
    (True, True)
    """
    ev = np.asarray(eigenvalues_pooled, dtype=float).ravel()
    pred = prediction if prediction is not None else learned_spectrum(problem, theory_result, **kwargs)
    d = problem.d
    runs = n_runs if n_runs is not None else max(1, ev.size // d)
    zs = float(np.mean(np.abs(ev) <= rank_tol))
    tops = [b for _, b in pred.bulks] + [p for p, _ in pred.law.point_masses]
    per_run_max = ev.reshape(runs, -1).max(axis=1) if ev.size == runs * d else np.array([ev.max()])
    return {
        "ks": ks_distance(pred, ev, rank_tol),
        "zero_atom_theory": pred.zero_atom,
        "zero_atom_sim": zs,
        "rank_theory": pred.rank_fraction * d,
        "rank_sim": (1.0 - zs) * d,
        "top_theory": float(max(tops)) if tops else 0.0,
        "top_sim": float(np.mean(per_run_max)),
        "n_eigenvalues": int(ev.size),
        "n_runs": int(runs),
    }


def spectrum_table(
    pred: LearnedSpectrum, eigenvalues_pooled: np.ndarray | None = None, *, bins: int = 60, rank_tol: float = 1e-3
) -> pd.DataFrame:
    """Tidy table of the predicted law (and the empirical spectrum, if given).

    Columns: ``source`` (``"theory"``/``"simulation"``), ``variable`` (``"eig_S"`` or
    ``"sv_W"``), ``component`` (``"density"``, ``"atom"``, ``"outlier"``, ``"histogram"``,
    ``"cdf"``), ``x``, ``value`` (density, mass or CDF value), ``overlap`` (outliers, else nan).
    Densities are per eigenvalue of ``S`` (they integrate to the non-zero, non-outlier mass).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import learned_spectrum, spectrum_table
    >>> len(spectrum_table(learned_spectrum(Problem(T=2, lam=0.05)))) > 0
    True
    """
    rows: list[dict[str, Any]] = []
    nan = math.nan
    for x, y in zip(pred.law.grid, pred.law.density):
        rows.append(
            {
                "source": "theory",
                "variable": "eig_S",
                "component": "density",
                "x": float(x),
                "value": float(y),
                "overlap": nan,
            }
        )
    sig, rho = pred.singular_value_density()
    for x, y in zip(sig, rho):
        rows.append(
            {
                "source": "theory",
                "variable": "sv_W",
                "component": "density",
                "x": float(x),
                "value": float(y),
                "overlap": nan,
            }
        )
    rows.append(
        {
            "source": "theory",
            "variable": "eig_S",
            "component": "atom",
            "x": 0.0,
            "value": pred.zero_atom,
            "overlap": nan,
        }
    )
    for o in pred.outliers:
        rows.append(
            {
                "source": "theory",
                "variable": "eig_S",
                "component": "outlier",
                "x": o["position"],
                "value": o["mass"],
                "overlap": o["overlap"],
            }
        )
    grid = np.linspace(0.0, float(pred.law.grid[-1]), 200)
    for x, y in zip(grid, pred.cdf(grid)):
        rows.append(
            {
                "source": "theory",
                "variable": "eig_S",
                "component": "cdf",
                "x": float(x),
                "value": float(y),
                "overlap": nan,
            }
        )
    if eigenvalues_pooled is not None:
        ev = np.asarray(eigenvalues_pooled, dtype=float).ravel()
        zero = np.abs(ev) <= rank_tol
        rows.append(
            {
                "source": "simulation",
                "variable": "eig_S",
                "component": "atom",
                "x": 0.0,
                "value": float(zero.mean()),
                "overlap": nan,
            }
        )
        nz = ev[~zero]
        if nz.size:
            hist, edges = np.histogram(nz, bins=bins, range=(0.0, max(float(nz.max()), float(grid[-1]))))
            dens = hist / (ev.size * np.diff(edges))
            for x, y in zip(0.5 * (edges[1:] + edges[:-1]), dens):
                rows.append(
                    {
                        "source": "simulation",
                        "variable": "eig_S",
                        "component": "histogram",
                        "x": float(x),
                        "value": float(y),
                        "overlap": nan,
                    }
                )
        xs = np.sort(np.where(zero, 0.0, ev))
        for x, y in zip(xs, np.arange(1, xs.size + 1) / xs.size):
            rows.append(
                {
                    "source": "simulation",
                    "variable": "eig_S",
                    "component": "cdf",
                    "x": float(x),
                    "value": float(y),
                    "overlap": nan,
                }
            )
    return pd.DataFrame(rows, columns=["source", "variable", "component", "x", "value", "overlap"])


def plot_spectrum_comparison(
    pred: LearnedSpectrum,
    eigenvalues_pooled: np.ndarray | None,
    path: str,
    *,
    bins: int = 60,
    rank_tol: float = 1e-3,
    title: str | None = None,
) -> None:
    """Figure: predicted density vs. histogram of pooled eigenvalues (left) and the two CDFs (right).

    Uses an explicit Agg canvas (no pyplot global state). The histogram is normalised by the
    total number of eigenvalues, so it matches the theoretical density of the non-zero part;
    atoms at zero are written in the legend.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import learned_spectrum, plot_spectrum_comparison
    >>> plot_spectrum_comparison(learned_spectrum(Problem(T=2)), None, "spectrum.png")  # doctest: +SKIP
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 4.0))
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    xmax = float(pred.law.grid[-1])
    if eigenvalues_pooled is not None:
        ev = np.asarray(eigenvalues_pooled, dtype=float).ravel()
        zero = np.abs(ev) <= rank_tol
        nz = ev[~zero]
        xmax = max(xmax, float(nz.max()) if nz.size else 0.0)
        if nz.size:
            h, e = np.histogram(nz, bins=bins, range=(0.0, xmax))
            ax.bar(
                0.5 * (e[1:] + e[:-1]),
                h / (ev.size * np.diff(e)),
                width=np.diff(e),
                color="C1",
                alpha=0.5,
                label=f"simulation (zero atom {zero.mean():.3f})",
            )
        xs = np.sort(np.where(zero, 0.0, ev))
        bx.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", color="C1", label="simulation")
    ax.plot(pred.law.grid, pred.law.density, color="C0", lw=1.5, label=f"theory (zero atom {pred.zero_atom:.3f})")
    for o in pred.outliers:
        ax.axvline(o["position"], color="C2", ls="--", lw=1)
        ax.annotate(
            f"i={int(o['mode'])}, ov={o['overlap']:.2f}",
            (o["position"], 0.0),
            rotation=90,
            fontsize=7,
            va="bottom",
            ha="right",
        )
    grid = np.linspace(-0.02 * xmax, 1.02 * xmax, 600)
    bx.plot(grid, pred.cdf(grid), color="C0", label="theory")
    ax.set_xlabel("eigenvalue of S")
    ax.set_ylabel("density (non-zero part)")
    bx.set_xlabel("eigenvalue of S")
    bx.set_ylabel("CDF")
    ax.legend(fontsize=8)
    bx.legend(fontsize=8)
    pb = pred.problem
    fig.suptitle(
        title
        or f"d={pb.d}, T={pb.T}, alpha={pb.alpha:g}, lam={pb.lam:g}, Delta={pb.noise:g}: "
        f"eta={pred.eta:.3g}, delta={pred.delta:.3g}, eps={pred.eps:.3g}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
