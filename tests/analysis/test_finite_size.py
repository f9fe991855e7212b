"""Finite-size extrapolation: the fit recovers known intercepts with honest intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead.analysis.finite_size import extrapolate_to_infinite_d, finite_size_gaps

DS = np.array([25.0, 35.0, 50.0, 70.0, 100.0])
SE = np.array([0.006, 0.004, 0.003, 0.002, 0.0015])


def _replicas(n: int, seed: int, a: float = 0.01, b: float = 0.4, c: float = 0.0, noise_scale: float = 1.0):
    rng = np.random.default_rng(seed)
    truth = a + b / DS + c / DS**2
    return [truth + noise_scale * SE * rng.standard_normal(len(DS)) for _ in range(n)]


def test_exact_data_give_the_intercept_and_slope():
    y = 0.02 + 0.5 / DS
    e = extrapolate_to_infinite_d(DS, y, SE)
    assert e.intercept == pytest.approx(0.02, abs=1e-12) and e.slopes[0] == pytest.approx(0.5, rel=1e-10)
    assert e.chi2 == pytest.approx(0.0, abs=1e-18) and e.dof == 3 and not e.inflated
    assert e.predict(np.inf) == pytest.approx(0.02) and e.predict(50.0) == pytest.approx(0.03)
    y2 = -0.01 + 0.5 / DS - 3.0 / DS**2
    e2 = extrapolate_to_infinite_d(DS, y2, SE, order=2)
    assert e2.intercept == pytest.approx(-0.01, abs=1e-10) and e2.slopes[1] == pytest.approx(-3.0, rel=1e-6)


def test_stderr_matches_the_scatter_of_replicas():
    a = np.array([extrapolate_to_infinite_d(DS, y, SE, inflate=False).intercept for y in _replicas(400, 1)])
    se = extrapolate_to_infinite_d(DS, DS * 0, SE, inflate=False).stderr
    assert abs(a.mean() - 0.01) < 4 * se / math.sqrt(len(a))
    assert a.std(ddof=1) / se == pytest.approx(1.0, abs=0.12)


@pytest.mark.parametrize("order,c", [(1, 0.0), (2, -2.0)])
def test_ci_covers_the_truth_at_the_nominal_rate(order, c):
    n = 200
    band = 3 * math.sqrt(0.95 * 0.05 / n)  # binomial error of the coverage, 3 sigma
    exact = [
        extrapolate_to_infinite_d(DS, y, SE, order=order, inflate=False).contains(0.01)
        for y in _replicas(n, 7 + order, c=c)
    ]
    assert abs(np.mean(exact) - 0.95) < band
    # inflation by chi2/dof only widens: coverage at or above nominal (within the band)
    infl = [extrapolate_to_infinite_d(DS, y, SE, order=order).contains(0.01) for y in _replicas(n, 7 + order, c=c)]
    assert np.mean(infl) >= np.mean(exact) and np.mean(infl) > 0.95 - band


def test_inflation_restores_coverage_when_errors_are_understated():
    n = 200
    ys = _replicas(n, 11, noise_scale=2.0)  # true scatter twice the stated errors
    plain = np.mean([extrapolate_to_infinite_d(DS, y, SE, inflate=False).contains(0.01) for y in ys])
    infl = np.mean([extrapolate_to_infinite_d(DS, y, SE).contains(0.01) for y in ys])
    assert plain < 0.8 and infl > 0.85  # plain: expected P(|Z| < 0.98) = 0.67; inflation restores ~nominal


def test_bad_model_is_flagged():
    y = 0.01 + 0.4 / DS + 40.0 / DS**2  # strong curvature, tiny errors
    e = extrapolate_to_infinite_d(DS, y, SE / 20)
    assert e.poor_fit() and e.inflated and e.chi2_per_dof > 1


def test_gaps_from_per_seed_values():
    rng = np.random.default_rng(3)
    theory = 0.12
    per_d = {int(d): theory + 0.5 / d + 0.01 * rng.standard_normal(k) for d, k in zip(DS, (12, 10, 8, 6, 4))}
    per_d[25] = np.append(per_d[25], np.nan)  # a failed run is left out
    g = finite_size_gaps(per_d, theory)
    assert list(g.d) == list(DS) and list(g.n_seeds) == [12, 10, 8, 6, 4]
    v = per_d[25][:-1]
    assert g.gap[0] == pytest.approx(v.mean() - theory) and g.se[0] == pytest.approx(v.std(ddof=1) / math.sqrt(12))
    assert g.agrees == g.extrapolation.contains(0.0)
    assert g.extrapolation.slopes[0] == pytest.approx(0.5, abs=0.5)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(d=[25, 50], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1]), "values"),
        (dict(d=[25, 50, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1]), "stderr"),
        (dict(d=[25, 0, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1]), "d"),
        (dict(d=[25, -5, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1]), "d"),
        (dict(d=[25, 50, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.0, 0.1]), "stderr"),
        (dict(d=[25, 50, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, -1, 0.1]), "stderr"),
        (dict(d=[25, 50, 100], values=[0.1, np.nan, 0.3], stderr=[0.1, 0.1, 0.1]), "values"),
        (dict(d=[25], values=[0.1], stderr=[0.1]), "d"),  # one point, two parameters
        (dict(d=[25, 50], values=[0.1, 0.2], stderr=[0.1, 0.1], order=2), "d"),  # two points, three parameters
        (dict(d=[25, 25, 25], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1]), "d"),  # one distinct size
        (dict(d=[25, 50, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1], order=3), "order"),
        (dict(d=[25, 50, 100], values=[0.1, 0.2, 0.3], stderr=[0.1, 0.1, 0.1], level=1.0), "level"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must"):
        extrapolate_to_infinite_d(**kwargs)


def test_gaps_bad_input():
    with pytest.raises(ValueError, match="^per_d must"):
        finite_size_gaps({25: [0.1], 50: [0.1, 0.2]}, 0.1)
    with pytest.raises(ValueError, match="^per_d must"):
        finite_size_gaps({0: [0.1, 0.2], 50: [0.1, 0.2]}, 0.1)
    with pytest.raises(ValueError, match="^theory must"):
        finite_size_gaps({25: [0.1, 0.2], 50: [0.1, 0.2]}, math.nan)


def test_extra_se_adds_in_quadrature():
    per_d = {20: [0.25, 0.25, 0.25], 40: [0.25, 0.25], 60: [0.2667, 0.2667, 0.2667]}  # identical seeds: s.e. 0
    with pytest.raises(ValueError, match="^stderr must"):
        finite_size_gaps(per_d, 0.26)
    g = finite_size_gaps(per_d, 0.26, extra_se=lambda d: 1 / (math.sqrt(12) * d))
    assert np.allclose(g.se, 1 / (math.sqrt(12) * np.array([20, 40, 60])))
    with pytest.raises(ValueError, match="^extra_se must"):
        finite_size_gaps(per_d, 0.26, extra_se=lambda d: -1.0)


def test_mc_floor_and_pooled_variance():
    rng = np.random.default_rng(5)
    ks = (12, 10, 8, 6, 4)
    c, mc = 0.4, 0.002
    per_d = {int(d): 0.1 + 0.3 / d + np.sqrt((c / d) ** 2 + mc**2) * rng.standard_normal(k) for d, k in zip(DS, ks)}
    per_d[100] = np.array([0.1031, 0.1031, 0.1032, 0.1031])  # a 4-seed scatter far below the Monte Carlo error
    mcs = {d: np.full(len(v), mc) for d, v in per_d.items()}
    floor = finite_size_gaps(per_d, 0.1, mc_se=mcs)
    assert floor.se[-1] == pytest.approx(mc / 2) and floor.sd[-1] < mc / 10
    pooled = finite_size_gaps(per_d, 0.1, mc_se=mcs, pool=True)
    assert pooled.pooled_c == pytest.approx(c, rel=0.35)
    assert np.allclose(pooled.se, np.sqrt(((pooled.pooled_c / DS) ** 2 + mc**2) / np.array(ks)))
    with pytest.raises(ValueError, match="^mc_se must"):
        finite_size_gaps(per_d, 0.1, mc_se={d: [mc] for d in per_d})
