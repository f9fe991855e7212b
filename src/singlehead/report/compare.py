"""Tidy tables and theory-vs-simulation agreement numbers."""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from singlehead.report.verdict import gap_p_value

#: Systematic allowance of a seed-averaged check, as a fraction of the theory value (finite size,
#: quadrature): the check tests ``|E[simulation] - theory| <= DEFAULT_ALLOWANCE |theory|``.
DEFAULT_ALLOWANCE = 0.03


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
              n_se: float = 2.0, rel: float = DEFAULT_ALLOWANCE, spread_from: pd.DataFrame | None = None) -> pd.DataFrame:
    """Compare seed-averaged simulations with theory at matching ``by`` keys.

    Each row has the gap ``|simulation mean - theory|``, its standard error ``se`` (the seed
    s.d. over ``sqrt(k)``; :func:`sim_summary`), the systematic ``allowance = rel |theory|`` and
    the raw two-sided ``p_value`` of ``|E[simulation] - theory| <= allowance``
    (:func:`~singlehead.report.verdict.gap_p_value`, Student's t with ``dof`` = the number
    of seeds the s.d. is estimated on, minus 1). ``within`` is the fixed-level tolerance check
    ``gap <= n_se se + allowance`` (validation scripts use it; the report judges ``p_value`` by
    Holm instead). ``spread_from``: the seed spread is estimated on these runs. A theory row
    whose state evolution did not converge (``converged`` column False) never counts as
    agreement: its rows get ``within = False`` and ``theory_converged = False``.
    """
    summ = sim_summary(sim, by, quantities, spread_from)
    spread = (sim if spread_from is None else spread_from).groupby(by).size().rename("spread_n").reset_index()
    summ = summ.merge(spread, on=by, how="left")
    conv = "converged" in theory.columns
    th = theory[by + quantities + (["converged"] if conv else [])].copy()
    if conv:
        th = th.rename(columns={"converged": "theory_converged"})
    merged = summ.merge(th, on=by, how="inner")
    rows = []
    for _, r in merged.iterrows():
        ok_theory = bool(r["theory_converged"]) if conv else True
        dof = float(r["spread_n"]) - 1.0 if float(r["spread_n"]) >= 2 else None
        for q in quantities:
            t, m, s = float(r[q]), float(r[f"{q}_mean"]), float(r[f"{q}_se"])
            s = 0.0 if math.isnan(s) else s
            allow = rel * abs(t)
            tol = n_se * s + allow
            row = {**{b: r[b] for b in by}, "quantity": q, "theory": t, "simulation": m, "se": s,
                   "gap": abs(m - t), "tolerance": tol, "within": bool(abs(m - t) <= tol) and ok_theory,
                   "allowance": allow, "dof": dof if dof is not None else math.nan,
                   "p_value": gap_p_value(abs(m - t), s, allow, dof) if math.isfinite(m) else math.nan,
                   "n_seeds": int(r["n_seeds"])}
            if conv:
                row["theory_converged"] = ok_theory
            rows.append(row)
    return pd.DataFrame(rows)


def extrapolation_p_value(intercept: float, stderr: float) -> float:
    """Two-sided p-value of ``a = 0`` for an intercept extrapolated to d = inf: ``2 (1 - Phi(|a|/s.e.))``.

    The normal distribution is the one the extrapolation's confidence interval uses
    (:class:`~singlehead.analysis.finite_size.Extrapolation`), so ``p >= 0.05`` exactly when 0 is
    inside its 95 % interval.
    """
    return gap_p_value(abs(float(intercept)), float(stderr))
