"""The report's rule: raw p-values of the checks, Holm's procedure per figure, the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from singlehead.report.verdict import gap_p_value, holm, holm_adjusted, judge, tally


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


def test_judge_gives_pass_fail_and_explained():
    agr = pd.DataFrame({
        "cfg_alpha": [0.1, 0.2, 0.3, 0.4, 0.5],
        "quantity": ["e"] * 5, "theory": [1.0] * 5, "simulation": [1.0, 1.5, 1.5, 1.0, 1.0],
        "se": [0.1, 0.1, 0.1, math.nan, 0.1], "gap": [0.0, 0.5, 0.5, 0.01, 0.0],
        "p_value": [1.0, 1e-6, 1e-6, math.nan, 0.9],
        "within": [True, False, False, False, True],
        "theory_converged": [True, True, True, True, False],
        "diagnostic_fails": [False, False, True, False, False]})
    j = judge(agr)
    assert j.verdict.tolist() == ["pass", "fail", "explained", "fail", "fail"]
    assert "within" not in j  # the verdict replaces the per-row check
    assert math.isnan(j.p_value[4]) and math.isnan(j.p_holm[3])  # unconverged and tolerance rows: outside the family
    assert j.p_holm[1] == pytest.approx(3e-6)  # a family of three
    assert j.deviation_se[1] == pytest.approx(5.0)
    t = tally(j)
    assert (t["n"], t["pass"], t["explained"], t["fail"]) == (5, 1, 1, 3) and t["worst_se"] == pytest.approx(5.0)
