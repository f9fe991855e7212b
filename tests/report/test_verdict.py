"""The report's rule: the difference and equivalence tests of each check, Holm per family, the four verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from singlehead.report.verdict import (
    AGREES,
    DEVIATES,
    EXPLAINED,
    INCONCLUSIVE,
    equivalence_p_value,
    gap_p_value,
    holm,
    holm_adjusted,
    judge,
    tally,
)


def test_holm_on_a_hand_computed_example():
    """m = 4, p = (0.01, 0.04, 0.03, 0.005). Sorted: 0.005 <= 0.05/4 = 0.0125 (reject), 0.01 <= 0.05/3 =
    0.0167 (reject), 0.03 > 0.05/2 = 0.025 (stop: 0.03 and 0.04 stand). Adjusted, as statsmodels'
    multipletests(method='holm') defines them, max_{j<=i} min(1, (m - j + 1) p_(j)): 4 x 0.005 = 0.02,
    max(0.02, 3 x 0.01) = 0.03, max(0.03, 2 x 0.03) = 0.06, max(0.06, 1 x 0.04) = 0.06."""
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p).tolist() == [True, False, False, True]
    np.testing.assert_allclose(holm_adjusted(p), [0.03, 0.06, 0.06, 0.02], rtol=1e-12)


def test_holm_steps_down_where_bonferroni_does_not():
    """p = (0.012, 0.04): Bonferroni (0.025 each) rejects only the first; Holm, after rejecting it,
    tests the second at 0.05/1 and rejects it too. Adjusted: 2 x 0.012 = 0.024 and max(0.024, 0.04)."""
    assert holm([0.012, 0.04]).tolist() == [True, True]
    np.testing.assert_allclose(holm_adjusted([0.012, 0.04]), [0.024, 0.04])
    assert holm([0.012, 0.04], level=0.03).tolist() == [True, False]  # 0.04 > 0.03/1


def test_holm_ignores_missing_p_values_and_checks_its_inputs():
    adj = holm_adjusted([np.nan, 0.02, 0.5])  # a family of 2: 2 x 0.02, max(0.04, 0.5)
    assert math.isnan(adj[0]) and adj[1:].tolist() == pytest.approx([0.04, 0.5])
    assert holm([np.nan, 0.02, 0.5]).tolist() == [False, True, False]
    assert holm([]).size == 0
    with pytest.raises(ValueError, match="p_values"):
        holm([0.1, 1.5])
    with pytest.raises(ValueError, match="level"):
        holm([0.1], level=0.0)


def test_gap_p_value_is_the_two_sided_test_with_an_allowance():
    # no allowance: 2 Phi(-2) at a 2-s.e. gap; Student's t with 3 dof is wider
    assert gap_p_value(0.2, 0.1) == pytest.approx(2 * stats.norm.sf(2.0))
    assert gap_p_value(0.2, 0.1, dof=3) == pytest.approx(2 * stats.t(3).sf(2.0))
    assert gap_p_value(0.2, 0.1, dof=3) > 0.1
    # a gap equal to the allowance: the boundary of the null, P = 1/2 + P(Z > 2 allowance / se)
    assert gap_p_value(0.3, 0.1, allowance=0.3) == pytest.approx(0.5 + stats.norm.sf(6.0))
    # the allowance only raises the p-value; a deterministic value (se = 0) is in or out
    assert gap_p_value(0.5, 0.1, allowance=0.1) > gap_p_value(0.5, 0.1)
    assert gap_p_value(0.01, 0.0, allowance=0.02) == 1.0 and gap_p_value(0.03, 0.0, allowance=0.02) == 0.0
    assert math.isnan(gap_p_value(0.1, math.nan))
    with pytest.raises(ValueError, match="se"):
        gap_p_value(0.1, -1.0)
    with pytest.raises(ValueError, match="dof"):
        gap_p_value(0.1, 0.1, dof=0)


def test_gap_p_value_is_uniform_under_the_null():
    """Seed means of 4 normal draws at the theory value: P(p <= 0.05) = 0.05 with the t law (the normal
    law would give 0.14); 4000 repetitions, tolerance 4 binomial standard errors (0.014)."""
    rng = np.random.default_rng(11)
    x = rng.normal(0.0, 1.0, size=(4000, 4))
    m, se = x.mean(axis=1), x.std(axis=1, ddof=1) / 2.0
    p = np.array([gap_p_value(abs(a), s, dof=3) for a, s in zip(m, se)])
    assert np.mean(p <= 0.05) == pytest.approx(0.05, abs=4 * math.sqrt(0.05 * 0.95 / 4000))


def _t3_sf(x: float) -> float:
    """Survival function of Student's t with 3 degrees of freedom, in closed form:
    F(t) = 1/2 + (t / (sqrt(3) (1 + t^2/3)) + arctan(t / sqrt(3))) / pi."""
    return 0.5 - (x / (math.sqrt(3.0) * (1.0 + x * x / 3.0)) + math.atan(x / math.sqrt(3.0))) / math.pi


def test_equivalence_p_value_is_the_larger_one_sided_p_by_hand():
    """gap 0.01, s.e. 0.02, tolerance 0.05: the one-sided tests of delta > -tol and delta < tol have
    statistics (0.05 + 0.01)/0.02 = 3 and (0.05 - 0.01)/0.02 = 2; p = max(F(3), F(2)) = F(2).
    t with 3 dof: F(2) = 1/2 - (2/(sqrt3 * 7/3) + atan(2/sqrt3))/pi = 0.0697; normal: 0.02275."""
    assert _t3_sf(2.0) == pytest.approx(0.069662, abs=1e-6)
    assert equivalence_p_value(0.01, 0.02, 0.05, dof=3) == pytest.approx(_t3_sf(2.0), rel=1e-9)
    assert equivalence_p_value(0.01, 0.02, 0.05) == pytest.approx(0.0227501, abs=1e-7)
    # a gap beyond the tolerance: the near side's statistic is negative, p > 1/2
    assert equivalence_p_value(0.07, 0.02, 0.05, dof=3) == pytest.approx(1.0 - _t3_sf(1.0), rel=1e-9)
    # a deterministic value is in (p = 0) or out (p = 1); a zero tolerance is never shown
    assert equivalence_p_value(0.01, 0.0, 0.05) == 0.0 and equivalence_p_value(0.05, 0.0, 0.05) == 1.0
    assert equivalence_p_value(0.0, 0.01, 0.0) == pytest.approx(0.5)
    assert math.isnan(equivalence_p_value(math.nan, 0.1, 0.1))
    with pytest.raises(ValueError, match="tol"):
        equivalence_p_value(0.1, 0.1, -1.0)
    with pytest.raises(ValueError, match="dof"):
        equivalence_p_value(0.1, 0.1, 0.2, dof=0.5)


def test_equivalence_test_holds_its_level_at_the_margin():
    """Seed means of 4 normal draws (s.d. 0.2) centred at the margin |delta| = tol = 1: P(p_equiv <= 0.05)
    = 0.05 up to the far side's negligible share; 4000 repetitions, tolerance 4 binomial standard errors."""
    rng = np.random.default_rng(5)
    x = rng.normal(1.0, 0.2, size=(4000, 4))
    m, se = x.mean(axis=1), x.std(axis=1, ddof=1) / 2.0
    p = np.array([equivalence_p_value(abs(a), s, 1.0, dof=3) for a, s in zip(m, se)])
    assert np.mean(p <= 0.05) == pytest.approx(0.05, abs=4 * math.sqrt(0.05 * 0.95 / 4000))


def _rows(**cols) -> pd.DataFrame:
    n = len(cols["gap"])
    base = {"cfg_alpha": np.arange(n) / 10.0, "quantity": ["e"] * n, "theory": [1.0] * n}
    base.update(cols)
    base.setdefault("simulation", [1.0 + g for g in cols["gap"]])
    base.setdefault("tol_rel", [0.03] * n)
    base.setdefault("tol_abs", [0.005] * n)
    return pd.DataFrame(base)


def test_judge_gives_each_of_the_four_verdicts():
    """Tolerance 0.03 on theory 1. Rows: within (gap 0.001, s.e. 0.002) -> agrees; far out (0.2, 0.01) ->
    deviates, and with a failing diagnostic -> deviates, explained; a wide s.e. (0.2, 0.2) -> inconclusive;
    an exact match whose theory did not converge -> inconclusive (never agrees); tolerance rows (no s.e.):
    within -> agrees, outside -> deviates, outside with a failing diagnostic -> deviates, explained."""
    agr = _rows(
        gap=[0.001, 0.2, 0.2, 0.2, 0.0, 0.01, 0.1, 0.1],
        se=[0.002, 0.01, 0.01, 0.2, 1e-4, math.nan, math.nan, math.nan],
        dof=[3.0] * 5 + [math.nan] * 3,
        theory_converged=[True] * 4 + [False] + [True] * 3,
        diagnostic_fails=[False, False, True, False, False, False, False, True],
        p_value=[0.5] * 8,
        within=[False] * 5 + [True, False, False],
    )
    j = judge(agr)
    assert j.verdict.tolist() == [AGREES, DEVIATES, EXPLAINED, INCONCLUSIVE, INCONCLUSIVE, AGREES, DEVIATES, EXPLAINED]
    assert not ({"within", "p_value", "allowance"} & set(j.columns))
    for col in ("tolerance", "p_diff", "p_diff_holm", "p_equiv", "p_equiv_holm", "verdict"):
        assert col in j
    np.testing.assert_allclose(j.tolerance, 0.03)
    # the unconverged row keeps its raw p-values but is outside both families; tolerance rows have none
    assert np.isfinite(j.p_diff[4]) and math.isnan(j.p_diff_holm[4]) and math.isnan(j.p_equiv_holm[4])
    assert j.p_diff[5:].isna().all() and j.p_equiv_holm[5:].isna().all()
    t = tally(j)
    assert (t["n"], t[AGREES], t[DEVIATES], t["explained"], t[INCONCLUSIVE]) == (8, 2, 2, 2, 2)
    assert t["inconclusive_rows"] == ["alpha=0.3 · e", "alpha=0.4 · e"]
    assert t["worst_se"] == pytest.approx(20.0)  # 0.2 / 0.01
    assert t["worst_rel"] == pytest.approx(0.2)


def test_holm_corrects_each_test_over_its_own_family():
    """Three rows, each alone equivalent (p_equiv = 0.02 <= 0.05), are not together: Holm's adjusted value
    is 3 x 0.02 = 0.06 for all three. The difference family is corrected the same way, separately."""
    se, tol = 0.005, 0.03
    g = tol - se * stats.t(3).isf(0.02)  # p_equiv = 0.02 exactly
    alone = judge(_rows(gap=[g], se=[se], dof=[3.0]))
    assert alone.p_equiv[0] == pytest.approx(0.02) and alone.verdict[0] == AGREES
    three = judge(_rows(gap=[g] * 3, se=[se] * 3, dof=[3.0] * 3))
    np.testing.assert_allclose(three.p_equiv_holm, 0.06)
    assert (three.verdict == INCONCLUSIVE).all()
    # the difference family: raw p_diff ~ 0.01 on two rows, 0.5 on a third -> adjusted ~ 0.03, 0.03, 0.5
    gd = tol + se * stats.t(3).isf(0.01)  # the far side's share F((gd + tol)/se) is ~2e-4
    j = judge(_rows(gap=[gd, gd, 0.03], se=[se] * 3, dof=[3.0] * 3))
    np.testing.assert_allclose(j.p_diff_holm, holm_adjusted(j.p_diff))
    np.testing.assert_allclose(j.p_equiv_holm, holm_adjusted(j.p_equiv))
    assert j.verdict.tolist() == [DEVIATES, DEVIATES, INCONCLUSIVE]


def test_a_row_more_than_10_percent_off_never_agrees():
    """Acceptance: any row whose simulation differs from the theory by more than 10 % of it and more than
    0.005, whatever its s.e. (0 included), degrees of freedom and declared tolerance (tol_rel <= 10 %, the
    cap, and tol_abs <= 0.005), is not 'agrees'; a larger tol_rel is refused."""
    rng = np.random.default_rng(3)
    n = 2000
    theory = rng.choice([-1.0, 1.0], n) * 10 ** rng.uniform(-4, 1, n)
    gap = np.maximum(0.1 * np.abs(theory), 0.005) * (1.0 + 10 ** rng.uniform(-6, 1, n))
    se = np.where(rng.random(n) < 0.1, 0.0, gap * 10 ** rng.uniform(-3, 1, n))
    agr = pd.DataFrame(
        {
            "quantity": "e",
            "theory": theory,
            "simulation": theory + gap,
            "gap": gap,
            "se": se,
            "dof": np.where(rng.random(n) < 0.5, np.nan, rng.integers(1, 30, n)),
            "tol_rel": rng.uniform(0.0, 0.1, n),
            "tol_abs": rng.uniform(0.0, 0.005, n),
        }
    )
    for fam in np.array_split(np.arange(n), 200):  # families of 10, and each row alone
        assert (judge(agr.iloc[fam]).verdict != AGREES).all()
    for i in range(0, n, 50):
        assert judge(agr.iloc[[i]]).verdict.iloc[0] != AGREES
    # tolerance rows as well
    assert (judge(agr.assign(se=np.nan)).verdict != AGREES).all()
    with pytest.raises(ValueError, match="tol_rel"):
        judge(agr.assign(tol_rel=0.2))
    with pytest.raises(ValueError, match="tol_abs"):
        judge(agr.drop(columns=["tol_abs"]))


def test_the_peak_row_of_the_report_is_not_shown_to_agree():
    """theory 0.2612 vs 4 seeds 0.2237 ± 0.0058 (a 14 % deviation): the tolerance is 3 % (0.0078);
    alone it deviates (raw p_diff ~ 0.01), with a failing RS diagnostic 'deviates, explained'."""
    row = _rows(
        gap=[0.2612 - 0.2237], theory=[0.2612], simulation=[0.2237], se=[0.0058], dof=[3.0], diagnostic_fails=[True]
    )
    j = judge(row)
    assert j.tolerance[0] == pytest.approx(0.03 * 0.2612)
    assert j.p_diff[0] == pytest.approx(
        _t3_sf((0.0375 - 0.007836) / 0.0058) + _t3_sf((0.0375 + 0.007836) / 0.0058), rel=1e-3
    )
    assert j.p_equiv[0] > 0.5 and j.verdict[0] == EXPLAINED
