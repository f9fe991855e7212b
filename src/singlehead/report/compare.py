"""Tidy tables and theory-vs-simulation agreement numbers."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from singlehead.report.verdict import gap_p_value, tolerance

#: Default relative tolerance of a seed-averaged check, as a fraction of the theory value (finite size,
#: quadrature): the check's tolerance is ``max(DEFAULT_ALLOWANCE |theory|, tol_abs)``.
DEFAULT_ALLOWANCE = 0.03
#: Default absolute floor of a check's tolerance, in the units of a test error (a difference below it is
#: smaller than the test-set and quadrature resolution of the report's errors).
DEFAULT_TOL_ABS = 0.005
#: Default reason of the default tolerance.
DEFAULT_TOL_REASON = "finite size (d of the simulations) and SE quadrature error"


def records_to_frame(
    records: Iterable[dict[str, Any]], drop: Iterable[str] = ("eigenvalues", "history", "S", "S0")
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


def sim_summary(
    df: pd.DataFrame, by: list[str], quantities: list[str], spread_from: pd.DataFrame | None = None
) -> pd.DataFrame:
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


def agreement(
    sim: pd.DataFrame,
    theory: pd.DataFrame,
    by: list[str],
    quantities: list[str],
    n_se: float = 2.0,
    rel: float = DEFAULT_ALLOWANCE,
    spread_from: pd.DataFrame | None = None,
    tol_abs: float | dict[str, float] = DEFAULT_TOL_ABS,
    reason: str = DEFAULT_TOL_REASON,
    theory_se: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Compare seed-averaged simulations with theory at matching ``by`` keys.

    Each row has the gap ``|simulation mean - theory|``, its standard error ``se`` (the seed
    s.d. over ``sqrt(k)``; ``sim_summary``), ``dof`` (the number of seeds the s.d. is
    estimated on, minus 1; ``nan`` below 2), and the declared tolerance: ``tol_rel = rel``,
    ``tol_abs`` (one floor, or one per quantity), ``tol_reason = reason`` and
    ``tolerance = max(tol_rel |theory|, tol_abs)``. The report judges the rows from these
    (:func:`~singlehead.report.verdict.judge`). ``within`` is the fixed-level check
    ``gap <= n_se se + tolerance`` (validation scripts use it; the report replaces it by the verdict).
    ``spread_from``: the seed spread is estimated on these runs. A theory row whose state
    evolution did not converge (``converged`` column False) never counts as agreement: its rows
    get ``within = False`` and ``theory_converged = False``. ``theory_se``: per quantity, the column of
    ``theory`` holding the theory's own standard error (a sampled state evolution's), joined in quadrature with
    the seeds' in ``se`` (``nan`` counts as 0).
    """
    summ = sim_summary(sim, by, quantities, spread_from)
    spread = (sim if spread_from is None else spread_from).groupby(by).size().rename("spread_n").reset_index()
    summ = summ.merge(spread, on=by, how="left")
    conv = "converged" in theory.columns
    own = dict(theory_se or {})
    th = theory[by + quantities + list(dict.fromkeys(own.values())) + (["converged"] if conv else [])].copy()
    if conv:
        th = th.rename(columns={"converged": "theory_converged"})
    merged = summ.merge(th, on=by, how="inner")
    rows = []
    for _, r in merged.iterrows():
        ok_theory = bool(r["theory_converged"]) if conv else True
        dof = float(r["spread_n"]) - 1.0 if float(r["spread_n"]) >= 2 else math.nan
        for q in quantities:
            t, m, s = float(r[q]), float(r[f"{q}_mean"]), float(r[f"{q}_se"])
            s = 0.0 if math.isnan(s) else s
            if q in own:
                s = math.hypot(s, float(np.nan_to_num(float(r[own[q]]))))
            floor = float(tol_abs[q] if isinstance(tol_abs, dict) else tol_abs)
            tol = float(tolerance(t, rel, floor))
            row = {
                **{b: r[b] for b in by},
                "quantity": q,
                "theory": t,
                "simulation": m,
                "se": s,
                "gap": abs(m - t),
                "dof": dof,
                "tol_rel": rel,
                "tol_abs": floor,
                "tol_reason": reason,
                "tolerance": tol,
                "within": bool(abs(m - t) <= n_se * s + tol) and ok_theory,
                "n_seeds": int(r["n_seeds"]),
            }
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


def tol_columns(tol_rel: float, tol_abs: float, reason: str) -> dict[str, Any]:
    """The declared tolerance of a check as agreement-row columns: ``tol_rel``, ``tol_abs`` and ``tol_reason``.

    The tolerance is ``max(tol_rel |theory|, tol_abs)``
    (:func:`~singlehead.report.verdict.tolerance`); ``reason`` says what it covers (finite size,
    quadrature, ...).
    """
    if not (0.0 <= tol_rel and math.isfinite(tol_rel)):
        raise ValueError(f"tol_rel must be a finite number >= 0 (got {tol_rel!r})")
    if not (0.0 <= tol_abs and math.isfinite(tol_abs)):
        raise ValueError(f"tol_abs must be a finite number >= 0 (got {tol_abs!r})")
    return {"tol_rel": float(tol_rel), "tol_abs": float(tol_abs), "tol_reason": reason}
