"""The report's rule: each figure's theory–simulation checks are one family, judged by Holm at 5 %.

Every statistical agreement row carries a raw two-sided p-value (:func:`gap_p_value`); the rows
of one figure form one family, and :func:`holm` rejects "theory = simulation" for a row when
Holm's step-down procedure (Holm, Scand. J. Statist. 6, 65 (1979)) does at family-wise error
rate ``level``. A rejected row is a defect unless a diagnostic computed in the same run says
the theory is not expected to hold there (the figure puts ``diagnostic_fails`` and
``diagnostic`` on the row); it is then "explained". Rows without a p-value (a KS distance
against a fixed level, an exact identity, a fitted exponent against a stated margin) are
tolerance checks: they keep their ``within`` verdict and are not part of the Holm family.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["FAMILY_LEVEL", "RULE", "gap_p_value", "holm", "holm_adjusted", "judge", "tally"]

#: Family-wise error rate of the report's rule.
FAMILY_LEVEL = 0.05

#: The rule, as the report states it.
RULE = ("Each figure's theory–simulation checks are one family, judged by Holm's step-down procedure at "
        "family-wise error rate 5 %: sort the family's m raw p-values p_(1) <= ... <= p_(m) and reject "
        "p_(1), ..., p_(k) for the largest k with p_(j) <= 0.05/(m - j + 1) for every j <= k. The column "
        "'Holm p' is the Holm-adjusted p-value (max over j <= i of min(1, (m - j + 1) p_(j))); a row "
        "fails when it is <= 0.05. Raw p-values are two-sided. A seed-averaged row tests "
        "|E[simulation] - theory| <= allowance (3 % of the theory for most figures) from its gap g and the "
        "standard error s of the seed mean (sample s.d. / sqrt(k)): p = F((g - allowance)/s) + "
        "F((g + allowance)/s), F the survival function of Student's t with k - 1 degrees of freedom "
        "(k = the seeds the s.d. is estimated on), which is the two-sided t-test when the allowance is 0. "
        "A row extrapolated to d = inf tests intercept a = 0: p = 2 F(|a|/s.e.(a)), F the standard normal "
        "(the normal interval the fit states). A failed row is either a defect or explained by a diagnostic "
        "computed in the same run, shown beside it; rows without a standard error are tolerance checks "
        "outside the family.")


def gap_p_value(gap: float, se: float, allowance: float = 0.0, dof: float | None = None) -> float:
    """Two-sided p-value of ``|mean - theory| <= allowance`` given ``gap = |mean - theory|`` and its s.e.

    The test statistic is the observed gap; under the null the largest chance of a gap at least
    this large is at ``|mean - theory| = allowance``, which gives
    ``p = F((gap - allowance)/se) + F((gap + allowance)/se)`` with ``F`` the survival function of
    Student's t with ``dof`` degrees of freedom (the standard normal when ``dof`` is None). With
    ``allowance = 0`` this is the usual two-sided test ``2 F(gap/se)``. ``se = 0`` (one seed, or
    a deterministic value) gives 1 when ``gap <= allowance`` and 0 otherwise.

    Parameters
    ----------
    gap : float
        ``|simulation - theory|`` (>= 0).
    se : float
        Standard error of the simulated mean (>= 0).
    allowance : float
        Systematic difference the check allows (>= 0), e.g. 3 % of the theory value.
    dof : float, optional
        Degrees of freedom of ``se`` (>= 1); None for a normal (known-variance) statistic.

    Returns
    -------
    float
        The p-value in [0, 1]; ``nan`` when ``gap`` or ``se`` is not a finite number.
    """
    if not (math.isfinite(gap) and math.isfinite(se)):
        return math.nan
    for name, v in (("gap", gap), ("se", se), ("allowance", allowance)):
        if v < 0 or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number >= 0 (got {v!r})")
    if dof is not None and not (dof >= 1):
        raise ValueError(f"dof must be >= 1 or None (got {dof!r})")
    if se == 0.0:
        return 1.0 if gap <= allowance else 0.0
    dist = stats.norm if dof is None else stats.t(dof)
    return float(min(1.0, dist.sf((gap - allowance) / se) + dist.sf((gap + allowance) / se)))


def holm_adjusted(p_values: Any) -> np.ndarray:
    """Holm-adjusted p-values, in the input order (``nan`` inputs stay ``nan`` and are not counted).

    With the ``m`` finite p-values sorted, ``p_(1) <= ... <= p_(m)``, the adjusted value of
    ``p_(i)`` is ``max_{j <= i} min(1, (m - j + 1) p_(j))``: the smallest family-wise level at
    which Holm's procedure rejects it. This is statsmodels' ``multipletests(method="holm")``.
    """
    p = np.asarray(p_values, dtype=float).ravel()
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p_values must lie in [0, 1] (got {p[(p < 0) | (p > 1)][:3].tolist()} ...)")
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    if idx.size:
        order = idx[np.argsort(p[idx], kind="stable")]
        m = order.size
        scaled = np.minimum(1.0, p[order] * np.arange(m, 0, -1))
        out[order] = np.maximum.accumulate(scaled)
    return out


def holm(p_values: Any, level: float = FAMILY_LEVEL) -> np.ndarray:
    """Which hypotheses Holm's step-down procedure rejects at family-wise error rate ``level``.

    Rejects ``p_(1), ..., p_(k)`` for the largest ``k`` such that ``p_(j) <= level/(m - j + 1)``
    for all ``j <= k`` (equivalently: the adjusted p-value of :func:`holm_adjusted` is
    ``<= level``). ``nan`` entries are outside the family and never rejected.

    Returns
    -------
    ndarray of bool
        ``True`` where the hypothesis (theory = simulation) is rejected, in the input order.
    """
    if not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be in (0, 1) (got {level!r})")
    adj = holm_adjusted(p_values)
    return np.where(np.isfinite(adj), adj <= level, False)


def judge(agr: pd.DataFrame, level: float = FAMILY_LEVEL) -> pd.DataFrame:
    """One figure's agreement rows with ``p_holm`` and ``verdict`` (``pass``, ``explained`` or ``fail``).

    Rows with a finite ``p_value`` form the Holm family; the others (no standard error) are
    judged by their ``within`` column. A row whose state evolution did not converge
    (``theory_converged`` False) fails whatever its numbers. A failing row with
    ``diagnostic_fails`` True is ``explained``. ``deviation_se`` is the gap beyond the row's
    ``allowance`` (0 if absent) in standard errors, for the rows of the family. The per-row
    ``within`` column is dropped: the verdict replaces it.
    """
    out = agr.copy()
    n = len(out)
    p = out["p_value"].astype(float).to_numpy() if "p_value" in out else np.full(n, np.nan)
    conv = out["theory_converged"].astype(bool).to_numpy() if "theory_converged" in out else np.ones(n, bool)
    p = np.where(conv, p, np.nan)
    out["p_value"] = p
    out["p_holm"] = holm_adjusted(p)
    if "gap" in out and "se" in out:
        allow = out["allowance"].astype(float).fillna(0.0) if "allowance" in out else 0.0
        se = out["se"].astype(float)
        dev = (out["gap"].astype(float) - allow).clip(lower=0.0) / se.where(se > 0)
        out["deviation_se"] = dev.where(np.isfinite(p))
    within = out["within"].astype(bool).to_numpy() if "within" in out else np.ones(n, bool)
    ok = np.where(np.isfinite(p), ~holm(p, level), within) & conv
    explained = out["diagnostic_fails"].fillna(False).astype(bool).to_numpy() if "diagnostic_fails" in out \
        else np.zeros(n, bool)
    out["verdict"] = np.where(ok, "pass", np.where(explained, "explained", "fail"))
    return out.drop(columns=["within"], errors="ignore")


def tally(agr: pd.DataFrame | None) -> dict[str, Any]:
    """Counts of a judged table: ``n``, ``pass``, ``explained``, ``fail`` and ``worst_se``.

    ``worst_se`` is the largest ``deviation_se`` (the gap beyond its allowance in standard
    errors; ``nan`` when no row has one).
    """
    if agr is None or not len(agr) or "verdict" not in agr:
        return {"n": 0, "pass": 0, "explained": 0, "fail": 0, "worst_se": math.nan}
    v = agr["verdict"].value_counts()
    dev = agr["deviation_se"].astype(float) if "deviation_se" in agr else pd.Series(dtype=float)
    worst = float(dev.max()) if dev.notna().any() else math.nan
    return {"n": len(agr), "pass": int(v.get("pass", 0)), "explained": int(v.get("explained", 0)),
            "fail": int(v.get("fail", 0)), "worst_se": worst}
