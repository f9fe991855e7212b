"""The report's rule: each figure's theory–simulation checks are judged by two tests, Holm per family.

Every check declares its tolerance: a relative part ``tol_rel`` and an absolute floor ``tol_abs``
(``tolerance = max(tol_rel |theory|, tol_abs)``) with a reason ``tol_reason``. A statistical row
(a finite standard error ``se`` of the simulated value) is judged at 5 % by

* the **difference test** (:func:`gap_p_value`): the null ``|E[simulation] - theory| <= tolerance``
  against a larger deviation, p-value ``p_diff``;
* the **equivalence test** (:func:`equivalence_p_value`, two one-sided tests, TOST): the null
  ``|E[simulation] - theory| >= tolerance`` against agreement within it, ``p_equiv``.

Both use the row's ``se`` and degrees of freedom ``dof`` (Student's t; the standard normal where
``dof`` is missing, e.g. for a gap extrapolated to ``d = inf``). The statistical rows of one
figure form two families, one per test, each corrected by Holm's step-down procedure (Holm,
Scand. J. Statist. 6, 65 (1979)). The verdicts:

* ``agrees``: equivalence shown after Holm;
* ``deviates``: difference shown after Holm;
* ``deviates, explained``: deviates where a diagnostic computed in the same run fails at the
  row's point (the figure puts ``diagnostic_fails`` and ``diagnostic`` on the row);
* ``inconclusive``: neither (too few seeds to tell), or the theory did not converge.

A figure may declare a seed plan (:mod:`singlehead.figures.seeds`): its inconclusive
seed-averaged rows get more seeds, by a fixed doubling rule within a declared budget, and the
figure is judged again, Holm over all its rows, until every row is decided or the budget is spent.

The two nulls share the tolerance, so a row cannot both agree and deviate. A row whose state
evolution did not converge (``theory_converged`` False) is outside both families and
``inconclusive``: it can never agree. Rows without a standard error (a KS distance against a
level, an exact identity, a fraction of cells within a margin) are tolerance checks: ``within``
(given by the figure, else ``gap <= tolerance``) maps to ``agrees``, outside to ``deviates``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = [
    "AGREES",
    "DEVIATES",
    "EXPLAINED",
    "FAMILY_LEVEL",
    "INCONCLUSIVE",
    "MAX_TOL_REL",
    "RULE",
    "VERDICTS",
    "equivalence_p_value",
    "gap_p_value",
    "holm",
    "holm_adjusted",
    "judge",
    "key_columns",
    "row_label",
    "tally",
    "tally_text",
    "tolerance",
]

#: Family-wise error rate of each of the report's two tests.
FAMILY_LEVEL = 0.05
#: The largest relative tolerance a check may declare: a row more than 10 % (and more than its absolute floor)
#: away from the theory can never agree.
MAX_TOL_REL = 0.10

#: Verdict of a row whose equivalence with the theory (within its tolerance) is shown.
AGREES = "agrees"
#: Verdict of a row whose difference from the theory (beyond its tolerance) is shown.
DEVIATES = "deviates"
#: Verdict of a row that deviates where a diagnostic computed in the same run fails.
EXPLAINED = "deviates, explained"
#: Verdict of a row where neither test decides, or whose theory did not converge.
INCONCLUSIVE = "inconclusive"
#: The four verdicts, in the report's order.
VERDICTS = (AGREES, DEVIATES, EXPLAINED, INCONCLUSIVE)

#: The rule, as the report states it.
RULE = (
    "Each check declares a tolerance tol = max(tol_rel |theory|, tol_abs) with its reason (finite size, "
    "quadrature, ...; tol_rel <= 10 %). A check with a standard error s of the simulated value is judged by two "
    "tests at 5 %, each corrected by Holm's step-down procedure over the figure's checks (sort the family's m "
    "raw p-values p_(1) <= ... <= p_(m); the Holm-adjusted value of p_(i) is max over j <= i of "
    "min(1, (m - j + 1) p_(j)); a hypothesis is rejected when its adjusted value is <= 0.05). Difference test: "
    "null |E[simulation] - theory| <= tol, p_diff = F((g - tol)/s) + F((g + tol)/s) from the gap g. "
    "Equivalence test (two one-sided tests): null |E[simulation] - theory| >= tol, p_equiv = max(F((tol + g)/s), "
    "F((tol - g)/s)). F is the survival function of Student's t with k - 1 degrees of freedom for a mean "
    "over k seeds (s = sample s.d./sqrt(k)) and of the standard normal for a gap extrapolated to d = inf or a "
    "test-set error. Verdicts: 'agrees' when equivalence is shown, 'deviates' when the difference is shown, "
    "'deviates, explained' when it deviates where a diagnostic computed in the same run fails, 'inconclusive' "
    "when neither is shown or the theory did not converge (such a row never agrees). Checks without a standard "
    "error (a KS distance against a level, an exact identity) agree when within their tolerance and deviate "
    "otherwise; they are outside the Holm families. Seeds: a figure may declare a seed plan, fixed before the data "
    "(at most max_seeds seeds per simulated point, at most a budget of added simulation runs per figure): after "
    "each judgement every inconclusive seed-averaged check gets its point's seeds doubled (4 -> 8 -> 16, new seeds "
    "continuing the seed sequence), served in the figure's table order while the budget lasts, and the whole "
    "figure is judged again with both Holm families recomputed over all its checks, until every check is decided, "
    "none can get more seeds, or the budget is spent. Each figure states its plan, the runs it added and the "
    "checks that received seeds."
)


def _dist(dof: float | None) -> Any:
    if dof is not None and not (dof >= 1):
        raise ValueError(f"dof must be >= 1 or None (got {dof!r})")
    return stats.norm if dof is None else stats.t(dof)


def _check(**values: float) -> None:
    for name, v in values.items():
        if v < 0 or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number >= 0 (got {v!r})")


def gap_p_value(gap: float, se: float, allowance: float = 0.0, dof: float | None = None) -> float:
    """Difference test: p-value of the null ``|mean - theory| <= allowance`` given ``gap = |mean - theory|``.

    The test statistic is the observed gap; under the null the largest chance of a gap at least
    this large is at ``|mean - theory| = allowance``, which gives
    ``p = F((gap - allowance)/se) + F((gap + allowance)/se)`` with ``F`` the survival function of
    Student's t with ``dof`` degrees of freedom (the standard normal when ``dof`` is None). With
    ``allowance = 0`` this is the usual two-sided test ``2 F(gap/se)``. ``se = 0`` (one seed, or
    a deterministic value) gives 1 when ``gap <= allowance`` and 0 otherwise. The report passes
    the row's tolerance as ``allowance``.

    Parameters
    ----------
    gap : float
        ``|simulation - theory|`` (>= 0).
    se : float
        Standard error of the simulated mean (>= 0).
    allowance : float
        Difference the null allows (>= 0), e.g. the row's tolerance.
    dof : float, optional
        Degrees of freedom of ``se`` (>= 1); None for a normal (known-variance) statistic.

    Returns
    -------
    float
        The p-value in [0, 1]; ``nan`` when ``gap`` or ``se`` is not a finite number.
    """
    if not (math.isfinite(gap) and math.isfinite(se)):
        return math.nan
    _check(gap=gap, se=se, allowance=allowance)
    dist = _dist(dof)
    if se == 0.0:
        return 1.0 if gap <= allowance else 0.0
    return float(min(1.0, dist.sf((gap - allowance) / se) + dist.sf((gap + allowance) / se)))


def equivalence_p_value(gap: float, se: float, tol: float, dof: float | None = None) -> float:
    """Equivalence test (TOST): p-value of the null ``|mean - theory| >= tol`` given ``gap = |mean - theory|``.

    Two one-sided tests of the signed difference ``delta``: ``delta <= -tol`` is rejected by a
    large ``(delta + tol)/se``, ``delta >= tol`` by a large ``(tol - delta)/se``; equivalence is
    shown when both are, so ``p = max(F((tol + gap)/se), F((tol - gap)/se))`` with ``F`` the
    survival function of Student's t with ``dof`` degrees of freedom (the standard normal when
    ``dof`` is None) — by symmetry in the sign of ``delta`` the gap suffices, and the maximum is
    the second term. ``se = 0`` gives 0 when ``gap < tol`` and 1 otherwise; ``tol = 0`` gives 1
    (no finite sample shows an exact equality).

    Parameters
    ----------
    gap : float
        ``|simulation - theory|`` (>= 0).
    se : float
        Standard error of the simulated mean (>= 0).
    tol : float
        Equivalence margin (>= 0).
    dof : float, optional
        Degrees of freedom of ``se`` (>= 1); None for a normal statistic.

    Returns
    -------
    float
        The p-value in [0, 1]; ``nan`` when ``gap`` or ``se`` is not a finite number.
    """
    if not (math.isfinite(gap) and math.isfinite(se)):
        return math.nan
    _check(gap=gap, se=se, tol=tol)
    dist = _dist(dof)
    if se == 0.0:
        return 0.0 if gap < tol else 1.0
    return float(max(dist.sf((tol + gap) / se), dist.sf((tol - gap) / se)))


def tolerance(theory: Any, tol_rel: Any, tol_abs: Any) -> np.ndarray:
    """``max(tol_rel |theory|, tol_abs)`` elementwise (a non-finite theory leaves the floor)."""
    t = np.abs(np.asarray(theory, dtype=float))
    rel = np.asarray(tol_rel, dtype=float) * np.where(np.isfinite(t), t, 0.0)
    return np.maximum(rel, np.asarray(tol_abs, dtype=float))


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
    for all ``j <= k`` (equivalently: the adjusted p-value of ``holm_adjusted`` is
    ``<= level``). ``nan`` entries are outside the family and never rejected.

    Returns
    -------
    ndarray of bool
        ``True`` where the null hypothesis is rejected, in the input order.
    """
    if not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be in (0, 1) (got {level!r})")
    adj = holm_adjusted(p_values)
    return np.where(np.isfinite(adj), adj <= level, False)


def _column(df: pd.DataFrame, name: str, default: Any) -> np.ndarray:
    return df[name].to_numpy() if name in df else np.full(len(df), default)


def judge(agr: pd.DataFrame, level: float = FAMILY_LEVEL) -> pd.DataFrame:
    """One figure's agreement rows with their tolerance, both tests, Holm over both families and the verdict.

    Reads ``theory``, ``gap``, ``tol_rel`` and ``tol_abs`` (required on every row;
    ``0 <= tol_rel <= MAX_TOL_REL``, ``tol_abs >= 0``), ``se`` (a finite value makes the row
    statistical), ``dof`` (missing or ``nan``: the normal law), ``theory_converged``,
    ``within`` (tolerance rows) and ``diagnostic_fails``. Adds ``tolerance``, ``p_diff``,
    ``p_diff_holm``, ``p_equiv``, ``p_equiv_holm``, ``rel_gap`` (``gap/|theory|``, where ``tol_rel > 0``), ``gap_se``
    (``gap/se``) and ``verdict`` (one of :data:`VERDICTS`; see the module docstring). The
    per-row ``within``, ``allowance`` and ``p_value`` columns are dropped: the verdict replaces
    them. Raw p-values of an unconverged row are kept but it is outside both families.

    Raises
    ------
    ValueError
        When ``tol_rel`` or ``tol_abs`` is missing or out of range on some row.
    """
    out = agr.copy()
    for name in ("tol_rel", "tol_abs"):
        if name not in out:
            raise ValueError(
                f"agreement rows must declare {name} (the check's tolerance); columns: {list(out.columns)}"
            )
    rel, ab = out["tol_rel"].astype(float).to_numpy(), out["tol_abs"].astype(float).to_numpy()
    bad = ~((rel >= 0) & (rel <= MAX_TOL_REL))
    if bad.any():
        raise ValueError(f"tol_rel must be in [0, {MAX_TOL_REL:g}] on every row (got {rel[bad][:3].tolist()})")
    if not ((ab >= 0) & np.isfinite(ab)).all():
        raise ValueError(f"tol_abs must be a finite number >= 0 on every row (got {ab[~(ab >= 0)][:3].tolist()})")
    theory = out["theory"].astype(float).to_numpy()
    gap = out["gap"].astype(float).to_numpy()
    se = _column(out, "se", np.nan).astype(float)
    dof = _column(out, "dof", np.nan).astype(float)
    conv = _column(out, "theory_converged", True).astype(bool)
    tol = tolerance(theory, rel, ab)
    stat = np.isfinite(se) & np.isfinite(gap)
    p_diff = np.array(
        [
            gap_p_value(g, s, t, d if math.isfinite(d) else None) if ok else math.nan
            for g, s, t, d, ok in zip(gap, se, tol, dof, stat)
        ]
    )
    p_equiv = np.array(
        [
            equivalence_p_value(g, s, t, d if math.isfinite(d) else None) if ok else math.nan
            for g, s, t, d, ok in zip(gap, se, tol, dof, stat)
        ]
    )
    family = stat & conv
    out["tolerance"] = tol
    out["p_diff"], out["p_equiv"] = p_diff, p_equiv
    out["p_diff_holm"] = holm_adjusted(np.where(family, p_diff, np.nan))
    out["p_equiv_holm"] = holm_adjusted(np.where(family, p_equiv, np.nan))
    with np.errstate(divide="ignore", invalid="ignore"):
        # relative terms only where the row's tolerance has a relative part (a log10 lam, a KS distance or an
        # exponent judged against an absolute tolerance has no meaningful relative gap)
        rel_ok = np.isfinite(theory) & (theory != 0) & (out["tol_rel"].to_numpy(dtype=float) > 0)
        out["rel_gap"] = np.where(rel_ok, gap / np.abs(theory), np.nan)
        out["gap_se"] = np.where(stat & (se > 0), gap / np.where(se > 0, se, 1.0), np.nan)
    equiv = np.where(family, out["p_equiv_holm"].to_numpy() <= level, False)
    diff = np.where(family, out["p_diff_holm"].to_numpy() <= level, False)
    if "within" in out:
        within = out["within"].astype(bool).to_numpy()
    else:
        within = np.isfinite(gap) & (gap <= tol)
    equiv = np.where(stat, equiv, within & conv)
    diff = np.where(stat, diff, ~within & conv)
    explained = _column(out, "diagnostic_fails", False)
    explained = pd.Series(explained).fillna(False).astype(bool).to_numpy()
    out["verdict"] = np.where(equiv, AGREES, np.where(diff, np.where(explained, EXPLAINED, DEVIATES), INCONCLUSIVE))
    return out.drop(columns=["within", "allowance", "p_value"], errors="ignore")


def key_columns(agr: pd.DataFrame) -> list[str]:
    """The columns that name a row's point: those before ``quantity``."""
    cols = list(agr.columns)
    return cols[: cols.index("quantity")] if "quantity" in cols else []


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


def row_label(row: pd.Series, keys: list[str]) -> str:
    """``"lam=1e-05, alpha=0.3 · test_error"``: a row's point (``cfg_`` dropped) and quantity."""
    point = ", ".join(f"{k.removeprefix('cfg_')}={_fmt(row[k])}" for k in keys)
    q = str(row.get("quantity", ""))
    return f"{point} · {q}" if point else q


def tally(agr: pd.DataFrame | None) -> dict[str, Any]:
    """Counts of a judged table and its worst deviations.

    Returns ``n``, ``agrees``, ``deviates``, ``explained`` (``deviates, explained``),
    ``inconclusive``, ``worst_rel`` (the largest ``|gap|/|theory|`` of a converged row whose gap exceeds
    its absolute floor ``tol_abs``: below the floor a relative deviation says nothing),
    ``worst_se`` (the largest ``gap/se`` of a statistical row; ``nan`` when none) and
    ``inconclusive_rows`` (``row_label`` of each inconclusive row).
    """
    empty = {
        "n": 0,
        AGREES: 0,
        DEVIATES: 0,
        "explained": 0,
        INCONCLUSIVE: 0,
        "worst_rel": math.nan,
        "worst_se": math.nan,
        "inconclusive_rows": [],
    }
    if agr is None or not len(agr) or "verdict" not in agr:
        return empty
    v = agr["verdict"].value_counts()
    conv = agr["theory_converged"].astype(bool) if "theory_converged" in agr else pd.Series(True, index=agr.index)

    def worst(col: str, sel: pd.Series) -> float:
        x = agr[col].astype(float)[conv & sel] if col in agr else pd.Series(dtype=float)
        return float(x.max()) if x.notna().any() else math.nan

    beyond_floor = agr["gap"].astype(float) > agr["tol_abs"].astype(float) if "tol_abs" in agr else conv

    keys = key_columns(agr)
    return {
        "n": len(agr),
        AGREES: int(v.get(AGREES, 0)),
        DEVIATES: int(v.get(DEVIATES, 0)),
        "explained": int(v.get(EXPLAINED, 0)),
        INCONCLUSIVE: int(v.get(INCONCLUSIVE, 0)),
        "worst_rel": worst("rel_gap", beyond_floor),
        "worst_se": worst("gap_se", conv),
        "inconclusive_rows": [row_label(r, keys) for _, r in agr[agr.verdict == INCONCLUSIVE].iterrows()],
    }


def tally_text(t: dict[str, Any]) -> str:
    """``"3 agree, 1 deviates (1 explained), 2 inconclusive of 6"``: the four counts of :func:`tally`."""
    return (
        f"{t[AGREES]} agree, {t[DEVIATES]} deviate, {t['explained']} deviate (explained), "
        f"{t[INCONCLUSIVE]} inconclusive of {t['n']}"
    )
