"""Minimum-nuclear-norm solver and the phase transition of blocked measurement families."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead.numerics.nuclear_recovery import blocked_nuclear_threshold, min_nuclear_norm
from singlehead.thresholds import nuclear_statistical_dimension


def test_single_measurement_has_the_dual_norm_answer():
    """min ||X||_* s.t. <A, X> = b is |b|/||A||_op, attained at (b/||A||_op) u1 v1^T (duality of the nuclear
    and operator norms)."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((5, 7))
    sol = min_nuclear_norm(A.ravel()[None, :], np.array([2.0]), (5, 7), tol=1e-10)
    U, s, Vt = np.linalg.svd(A)
    assert sol.converged
    assert np.linalg.norm(sol.X, "nuc") == pytest.approx(2.0 / s[0], rel=1e-6)
    np.testing.assert_allclose(sol.X, (2.0 / s[0]) * np.outer(U[:, 0], Vt[0]), atol=1e-6)


def test_recovers_low_rank_above_and_not_below_the_statistical_dimension():
    """Rank 2, 20 x 20: 260 Gaussian measurements (well above the statistical dimension) recover it; 60, fewer
    than its r (2d - r) = 76 degrees of freedom, cannot, and the solution is then feasible with a smaller
    nuclear norm."""
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((20, 2)) @ rng.standard_normal((2, 20))
    for p, recovered in ((260, True), (60, False)):
        A = rng.standard_normal((p, 400))
        sol = min_nuclear_norm(A, A @ X0.ravel(), (20, 20))
        err = np.linalg.norm(sol.X - X0) / np.linalg.norm(X0)
        assert sol.residual < 1e-10
        if recovered:
            assert err < 1e-5
        else:
            assert err > 0.1
            assert np.linalg.norm(sol.X, "nuc") < np.linalg.norm(X0, "nuc")


def test_determined_and_overdetermined_systems_are_solved_directly():
    rng = np.random.default_rng(1)
    X0 = rng.standard_normal((4, 4))
    for p in (16, 20):
        A = rng.standard_normal((p, 16))
        sol = min_nuclear_norm(A, A @ X0.ravel(), (4, 4))
        np.testing.assert_allclose(sol.X, X0, atol=1e-9)


def test_dependent_rows_are_allowed():
    """A repeated measurement changes nothing (the projection is onto the row space)."""
    rng = np.random.default_rng(2)
    X0 = rng.standard_normal((12, 1)) @ rng.standard_normal((1, 12))
    A = rng.standard_normal((90, 144))
    A = np.concatenate([A, A[:5]])
    sol = min_nuclear_norm(A, A @ X0.ravel(), (12, 12))
    assert np.linalg.norm(sol.X - X0) < 1e-5 * np.linalg.norm(X0)


def test_min_nuclear_norm_rejects_bad_input():
    with pytest.raises(ValueError, match="A must have shape"):
        min_nuclear_norm(np.ones((2, 5)), np.ones(2), (2, 2))
    with pytest.raises(ValueError, match="b must have length"):
        min_nuclear_norm(np.ones((2, 4)), np.ones(3), (2, 2))
    with pytest.raises(ValueError, match="tol"):
        min_nuclear_norm(np.ones((1, 4)), np.ones(1), (2, 2), tol=0.0)
    with pytest.raises(ValueError, match="penalty"):
        min_nuclear_norm(np.ones((1, 4)), np.ones(1), (2, 2), penalty=-1.0)


def test_blocked_threshold_limits():
    """rho = 0: nothing to recover; rho = 1: the parameter count (d^2/2 symmetric and d^2/2 antisymmetric
    unknowns); no measurement of the symmetric part: never."""
    assert blocked_nuclear_threshold(0.0, 1, 0, 1) == 0.0
    assert blocked_nuclear_threshold(1.0, 0, 0, 1) == pytest.approx(1.0, rel=1e-6)
    assert blocked_nuclear_threshold(1.0, 1, 0, 1) == pytest.approx(0.5, rel=1e-6)
    assert blocked_nuclear_threshold(1.0, 1, 1, 0) == pytest.approx(0.5, rel=1e-6)
    assert blocked_nuclear_threshold(0.5, 0, 1, 0) == math.inf
    with pytest.raises(ValueError, match="rho"):
        blocked_nuclear_threshold(1.5, 1, 0, 1)
    with pytest.raises(ValueError, match="n_sym"):
        blocked_nuclear_threshold(0.5, 0, 0, 0)


def test_blocked_threshold_isotropic_is_the_statistical_dimension():
    """One isotropic family: the statistical dimension (finite-size error of the complement instance a few
    1e-3 at the default size)."""
    assert blocked_nuclear_threshold(0.5, 0, 0, 1) == pytest.approx(nuclear_statistical_dimension(0.5), abs=4e-3)
    assert blocked_nuclear_threshold(0.5, 0, 0, 2) == pytest.approx(nuclear_statistical_dimension(0.5) / 2,
                                                                      abs=2e-3)


@pytest.mark.slow
def test_t2_families_recover_below_the_isotropic_value():
    """One symmetric-only and one isotropic family (the untied student at T = 2): 0.424, below 0.4527 by far
    more than the spread over instances (two seeds agree to 2e-3)."""
    a = [blocked_nuclear_threshold(0.5, 1, 0, 1, seed=s) for s in (0, 1)]
    assert abs(a[0] - a[1]) < 3e-3
    assert max(a) < nuclear_statistical_dimension(0.5) / 2 - 0.02
    assert min(a) > 0.41


def test_symmetric_only_family_is_the_symmetric_problem():
    """GOE measurements only (the linear channel's untied student): the certificate is symmetric, and the
    two-sided symmetric nuclear norm needs more than the PSD trace of the tied student (c_T alpha_perf =
    0.4222 at rho = 1/2) and fewer than the d^2/2 symmetric unknowns."""
    from singlehead import Problem, perfect_recovery_threshold

    a = blocked_nuclear_threshold(0.5, 1, 0, 0)
    tied = 2 * perfect_recovery_threshold(Problem(T=2))
    assert tied + 0.01 < a < 0.5
    assert perfect_recovery_threshold(Problem(T=2, channel="linear", student="untied")) == pytest.approx(a / 3)
