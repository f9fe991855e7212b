"""The finite-d prior of the state evolution: exactness, speed structure, spread."""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import Problem
from singlehead.model.targets import PowerLawTarget
from singlehead.numerics.spectra import FiniteDSpectrum
from singlehead.numerics.spectra.finite_d import _divergence
from singlehead.state_evolution import SEOptions, prior_model, theory

# the quadratic-network setting (linear T = 1, power law gamma = 1.25, Q0 = 1)
D = 400
SETTING = dict(d=D, T=1, alpha=1.0, channel="linear", noise=0.1, lam=0.1)
TARGET = PowerLawTarget(gamma=1.25, normalisation="unit_q0")


def _spectrum(d: int) -> np.ndarray:
    return TARGET.spectrum(d)


def test_overlap_is_pathwise_trace_and_divergence_exact():
    """overlap_r = (1/d) Tr f(Y_r) S0 with f the (capped) soft threshold; the O(k(d-k)) divergence
    equals the full divided-difference formula."""
    d = 60
    s = _spectrum(d)
    fd = FiniteDSpectrum(s, draws=2, seed=4)
    delta, eps = 0.4, 0.05
    Z = fd._Z
    for cap in (None, 0.1):
        ti = fd.threshold_integrals(delta, eps, rank_cap=cap)
        for r in range(2):
            nu, U = np.linalg.eigh(np.diag(s) + delta * Z[r])
            keep = nu > eps
            if cap is not None:
                keep &= np.arange(d) >= d - round(cap * d)
            f = np.where(keep, nu - eps, 0.0)
            fY = (U * f) @ U.T
            assert ti.overlap_draws[r] == pytest.approx(np.trace(fY @ np.diag(s)) / d, rel=1e-10)
            assert ti.J_draws[r] == pytest.approx(np.mean(f * f), rel=1e-12)
            assert ti.divergence_draws[r] == pytest.approx(_divergence(nu, f, keep.astype(float)), rel=1e-10)
        assert ti.overlap == pytest.approx(np.mean(ti.overlap_draws))


@pytest.mark.parametrize("delta", [0.0, 0.3])
def test_partial_route_matches_full_eigh(delta):
    """Small rank caps use the tridiagonal route with only the kept eigenvectors; same numbers as eigh
    (delta = 0: the tridiagonal matrix splits into 1 x 1 blocks)."""
    s = _spectrum(120)
    part, full = FiniteDSpectrum(s, draws=2, seed=7), FiniteDSpectrum(s, draws=2, seed=7)
    full.overlaps(delta)  # all eigenpairs by eigh
    for cap in (1 / 120, 0.1, 0.2):
        a = part.threshold_integrals(delta, 0.05, rank_cap=cap, pathwise=False)
        b = full.threshold_integrals(delta, 0.05, rank_cap=cap, pathwise=False)
        for name in ("J", "overlap", "divergence", "dJ_deps", "cutoff"):
            assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-11, abs=1e-14), name
    assert part.n_decompositions == 1 and full.n_decompositions == 1


def test_pathwise_overlap_cancels_spike_fluctuation():
    """The cause of the old +2 % bias: with m from Stein's lemma, J's O(delta s_1 Z_11/d) fluctuation
    does not cancel in the per-draw matrix error Q0 - 2m + q; with the pathwise overlap it does."""
    d = 200
    s = _spectrum(d)
    fd = FiniteDSpectrum(s, draws=6, seed=1)
    delta, eps = 0.18, 0.03
    ti = fd.threshold_integrals(delta, eps)
    J = np.array(ti.J_draws)
    pathwise = np.mean(s**2) - 2 * np.array(ti.overlap_draws) + J
    S1 = -ti.dJ_deps / 2  # the Stein form with per-draw J (S1, D fluctuate far less)
    stein = np.mean(s**2) - 2 * (J + eps * S1 - delta**2 * ti.divergence) + J
    assert np.std(pathwise) < 0.25 * np.std(stein)  # measured ratio ~0.1
    assert np.mean(pathwise) > 0


def test_decompositions_cached_and_shared():
    s = _spectrum(100)
    fd = FiniteDSpectrum(s, draws=3, seed=0)
    fd.threshold_integrals(0.3, 0.1)
    fd.threshold_integrals(0.3, 0.2, rank_cap=0.05)
    fd.eigenvalues(0.3)
    fd.threshold_integrals(0.3 * (1 + 1e-16), 0.1)  # a solver round trip: same point
    assert fd.n_decompositions == 1
    fd.threshold_integrals(0.31, 0.1)
    fd.threshold_integrals(0.3, 0.1)  # still cached
    assert fd.n_decompositions == 2
    # one prior model per (target spectrum, draws, seed): a sweep reuses its decompositions
    p = Problem(kappa=14 / D, target=TARGET, **SETTING)
    assert prior_model(p, "finite") is prior_model(p.replace(kappa=1.0), "finite")
    assert prior_model(p, "finite") is not prior_model(p, "finite", seed=1)


@pytest.fixture(scope="module")
def p14():
    p = Problem(kappa=14 / D, target=TARGET, **SETTING)
    pm = prior_model(p, "finite")
    n0 = pm.engine.n_decompositions
    fin = theory(p, prior=pm)
    n_fin = pm.engine.n_decompositions - n0
    asy = theory(p, prior="asymptotic", init=fin)
    return fin, asy, n_fin


def test_finite_matches_asymptotic_at_d400(p14):
    """Within 1 % of the asymptotic prior (measured +0.03 %; the old finite prior: +2.1 %)."""
    fin, asy, _ = p14
    assert fin.converged and asy.converged
    assert fin.extras["prior_mode"] == "finite" and asy.extras["prior_mode"] == "asymptotic"
    assert fin.test_error == pytest.approx(asy.test_error, rel=0.01)
    # and within 3 draw standard errors (plus the O(1/d) finite-size allowance of 0.2 %)
    assert abs(fin.test_error - asy.test_error) < 3 * fin.extras["prior_draw_spread"] + 2e-3 * asy.test_error


def test_draw_spread_reported(p14):
    fin, asy, n_fin = p14
    spread = fin.extras["prior_draw_spread"]
    per_draw = fin.extras["prior_draw_test_errors"]
    assert len(per_draw) == SEOptions().draws == 3
    assert np.isfinite(spread) and 0 < spread < 0.01 * fin.test_error  # measured 0.45 %
    # linear response: the per-draw fixed points scatter around the averaged one
    assert np.mean(per_draw) == pytest.approx(fin.test_error, abs=spread)
    assert "prior_draw_spread" not in asy.extras
    # eigendecompositions: at most one per SE map evaluation plus the spread's one
    assert 0 < n_fin <= fin.iterations + 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_invalid_draws_rejected(bad):
    with pytest.raises(ValueError, match="draws"):
        SEOptions(draws=bad)
    with pytest.raises(ValueError, match="draws"):
        FiniteDSpectrum(_spectrum(10), draws=bad)
    with pytest.raises(ValueError, match="draws"):
        prior_model(Problem(d=10, target=TARGET), "finite", draws=bad)
