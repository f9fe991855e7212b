"""The untied prior side's tangent in the conjugates (``untied_prior_tangent``) and the draw errors built on it.

The tangent is the linearisation of the weighted nuclear-norm estimator: it must match forward differences
of the prior side solved to a tight tolerance (differences with a relative step ``1e-5``: truncation
``~1e-5`` relative, solver noise ``1e-12/1e-5``), to ``1e-3`` of the largest entry of each column. The
draw errors of a fixed point, computed with the tangent and with forward differences of the whole map,
must agree to 3 % with a difference step of ``1e-5`` relative (with the default ``1e-3`` the whole map's
differences are off by 30 % in ``q_a`` at this point, where ``qhat_a`` is small and the map is curved
along ``m_a``; the tangent route differences the output side alone).
"""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import Problem, theory
from singlehead.model.students import Untied
from singlehead.model.targets import UntiedMPTarget
from singlehead.numerics.spectra.untied_prior import UntiedPriorSample, untied_prior_side, weighted_nuclear_prox
from singlehead.numerics.spectra.untied_prior_jacobian import effective_fields, untied_prior_tangent
from singlehead.state_evolution import SEOptions, block_map


def _teacher(D, rng):
    return rng.standard_normal((D, D)) / np.sqrt(D)


HATS = np.array([0.3, 0.8, 0.6, 0.1, 0.4, 0.2])
LAM = 0.05


def test_tangent_matches_differences():
    sample = UntiedPriorSample.draw(_teacher, 20, 3, 7).normalised(1.0, 0.5)
    base = untied_prior_side(HATS, lam=LAM, kappa=1.0, sample=sample, tol=1e-12)
    t = untied_prior_tangent(HATS, lam=LAM, kappa=1.0, sample=sample, solutions=base.solutions, tol=1e-10)
    assert t.shape == (3, 6, 6)
    for j in range(6):
        h = HATS.copy()
        step = 1e-5 * HATS[j]
        h[j] += step
        moved = untied_prior_side(h, lam=LAM, kappa=1.0, sample=sample, tol=1e-12, warm=base.solutions)
        fd = (moved.per_draw - base.per_draw) / step
        scale = np.max(np.abs(fd))
        assert scale > 0
        np.testing.assert_allclose(t[:, :, j], fd, atol=1e-3 * scale, rtol=0)


def test_tangent_declines_where_it_does_not_apply():
    sample = UntiedPriorSample.draw(_teacher, 12, 2, 3).normalised(1.0, 0.5)
    base = untied_prior_side(HATS, lam=LAM, kappa=1.0, sample=sample, tol=1e-12)
    unobserved = HATS.copy()
    unobserved[5] = 0.0
    assert untied_prior_tangent(unobserved, lam=LAM, kappa=1.0, sample=sample, solutions=base.solutions) is None
    # a rank cap below the estimator's rank
    assert np.all(np.sum(base.singular_values > 0, axis=1) > 1)
    assert untied_prior_tangent(HATS, lam=LAM, kappa=1 / 12, sample=sample, solutions=base.solutions) is None


def test_prox_ignores_a_start_of_another_shape():
    sample = UntiedPriorSample.draw(_teacher, 12, 2, 3).normalised(1.0, 0.5)
    A_s, A_a = effective_fields(HATS, sample)
    cold, _, _ = weighted_nuclear_prox(A_s, A_a, HATS[2], HATS[5], 2 * LAM, tol=1e-12)
    other, _, _ = weighted_nuclear_prox(A_s, A_a, HATS[2], HATS[5], 2 * LAM, tol=1e-12, warm=np.zeros((3, 12, 12)))
    np.testing.assert_allclose(other, cold, atol=1e-9)


def test_draw_errors_agree_with_map_differences(monkeypatch):
    monkeypatch.setattr(block_map, "_RESPONSE_STEP", 1e-5)
    p = Problem(
        d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=0.1, student="untied", target=UntiedMPTarget(kappa0=0.5)
    )
    o = SEOptions(sample_dim=24, sample_draws=4)
    with_tangent = theory(p, options=o)
    monkeypatch.setattr(Untied, "block_prior_tangent", lambda self, *a, **k: None)
    with_differences = theory(p, options=o)
    assert with_tangent.converged and with_differences.converged
    assert with_tangent.test_error == pytest.approx(with_differences.test_error, rel=1e-9)
    for key in ("test_error", "train_error", "q_s", "m_s", "q_a", "m_a"):
        a, b = with_tangent.extras[f"{key}_draws_se"], with_differences.extras[f"{key}_draws_se"]
        assert b > 0 and a == pytest.approx(b, rel=0.03), key


def test_block_curve_points_match_cold_points():
    # a curve's points start from the previous point's overlaps (extrapolated), Jacobian and prior-side estimators:
    # starts only, so each point is the cold solve's fixed point to the stopping rule (100 tol relative)
    from singlehead import theory_curve

    p = Problem(
        d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=0.1, student="untied", target=UntiedMPTarget(kappa0=0.5)
    )
    o = SEOptions(sample_dim=24, sample_draws=4)
    alphas = [0.8, 1.0, 1.25, 1.5]
    curve = theory_curve(p, alphas, options=o)
    assert curve[-1].extras["evaluations"] < theory(p.replace(alpha=alphas[-1]), options=o).extras["evaluations"]
    for a, r in zip(alphas, curve):
        cold = theory(p.replace(alpha=a), options=o)
        assert r.converged and cold.converged
        for key in ("q_s", "m_s", "Sigma_s", "q_a", "m_a", "Sigma_a"):
            assert r.extras[key] == pytest.approx(cold.extras[key], rel=1e-4, abs=1e-7), (a, key)
        assert r.test_error == pytest.approx(cold.test_error, rel=1e-4)
