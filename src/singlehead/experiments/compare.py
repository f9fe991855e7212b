"""Tidy tables and theory-vs-simulation agreement numbers."""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd
from scipy.stats import binom


def records_to_frame(records: Iterable[dict[str, Any]], drop: Iterable[str] = ("eigenvalues", "history", "S", "S0")
                     ) -> pd.DataFrame:
    """One row per record; the full config is flattened into ``cfg_*`` columns (tidy: config per row)."""
    rows = []
    for rec in records:
        row = {k: v for k, v in rec.items() if k not in drop and k != "problem" and not isinstance(v, (list, dict))}
        for k, v in rec.get("problem", {}).items():
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    row[f"cfg_{k}_{k2}"] = v2 if not isinstance(v2, list) else str(v2)
            else:
                row[f"cfg_{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)


def sim_summary(df: pd.DataFrame, by: list[str], quantities: list[str],
                spread_from: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean and standard error (``std/sqrt(k)``, ddof=1) over the ``k`` seeds of each quantity, per group.

    With ``spread_from`` (more seeds of the same problems, e.g. L-BFGS runs beside a few Adam
    runs that reach the same minimiser) the seed standard deviation is estimated on those runs
    instead and divided by ``sqrt(k)`` of ``df``: a 3-seed standard deviation has 2 degrees of
    freedom and is often several times too small.
    """
    g = df.groupby(by)
    out = g[quantities].mean().add_suffix("_mean")
    sd = g[quantities].std(ddof=1) if spread_from is None else spread_from.groupby(by)[quantities].std(ddof=1)
    se = sd.reindex(out.index).div(np.sqrt(g.size()), axis=0).add_suffix("_se")
    out = out.join(se)
    out["n_seeds"] = g.size()
    return out.reset_index()


def agreement(sim: pd.DataFrame, theory: pd.DataFrame, by: list[str], quantities: list[str],
              n_se: float = 2.0, rel: float = 0.03, spread_from: pd.DataFrame | None = None) -> pd.DataFrame:
    """Compare seed-averaged simulations with theory at matching ``by`` keys.

    Tolerance per point: ``n_se`` standard errors of the simulation mean plus ``rel`` times
    the theory value (the acceptance rule of the validation scripts). ``spread_from``: the
    seed spread is estimated on these runs (:func:`sim_summary`). A theory row whose state
    evolution did not converge (``converged`` column False) never counts as agreement: its
    rows get ``within = False`` and ``theory_converged = False``.
    """
    summ = sim_summary(sim, by, quantities, spread_from)
    conv = "converged" in theory.columns
    th = theory[by + quantities + (["converged"] if conv else [])].copy()
    if conv:
        th = th.rename(columns={"converged": "theory_converged"})
    merged = summ.merge(th, on=by, how="inner")
    rows = []
    for _, r in merged.iterrows():
        ok_theory = bool(r["theory_converged"]) if conv else True
        for q in quantities:
            t, m, s = float(r[q]), float(r[f"{q}_mean"]), float(r[f"{q}_se"])
            s = 0.0 if math.isnan(s) else s
            tol = n_se * s + rel * abs(t)
            row = {**{b: r[b] for b in by}, "quantity": q, "theory": t, "simulation": m, "se": s,
                   "gap": abs(m - t), "tolerance": tol, "within": bool(abs(m - t) <= tol) and ok_theory,
                   "n_seeds": int(r["n_seeds"])}
            if conv:
                row["theory_converged"] = ok_theory
            rows.append(row)
    return pd.DataFrame(rows)


def chance_misses_note(n_rows: int, n_missed: int, level: float = 0.95) -> str:
    """How many of ``n_rows`` independent ``level`` confidence-interval checks miss by chance alone.

    If the theory is exact, each check misses with probability ``1 - level``; the number of
    misses is Binomial(``n_rows``, ``1 - level``). Returns one sentence with its mean and the
    probability of at least ``n_missed`` misses (the p-value of the observed count).
    """

    if n_rows <= 0:
        return ""
    q = 1.0 - level
    p = float(binom.sf(n_missed - 1, n_rows, q)) if n_missed > 0 else 1.0
    return (f"{n_rows} rows are checked at {100 * level:g}% confidence (treated as independent): if the theory is exact, "
            f"{n_rows * q:.1f} rows are expected outside their interval by chance alone; observed {n_missed}, "
            f"P(at least {n_missed}) = {p:.2f}.")
