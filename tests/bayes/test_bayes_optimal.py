"""The Bayes-optimal baseline against ERM: no ERM fixed point has a lower error than the Bayes-optimal one."""

from __future__ import annotations

import pytest

from singlehead import MPTarget, Problem
from singlehead.bayes import bayes_optimal
from singlehead.state_evolution import SEOptions, theory, theory_curve


def test_erm_never_beats_bayes():
    for noise in (0.0, 0.5):
        p = Problem(T=2, noise=noise, lam=0.01, target=MPTarget(0.5))
        alphas = [0.1, 0.2, 0.4, 0.8]
        rs = theory_curve(p, alphas, options=SEOptions(n_points=512))
        for a, r in zip(alphas, rs):
            b = bayes_optimal(p.replace(alpha=a), n_outer=1024, n_inner=64)
            assert r.test_error >= b.test_error - 1e-3, (noise, a, r.test_error, b.test_error)
            assert r.matrix_error >= b.matrix_error - 1e-6
            assert b["test_error_plugin"] >= b.test_error - 1e-3


def test_linear_bayes_below_erm():
    p = Problem(T=1, channel="linear", noise=0.5, lam=0.01, target=MPTarget(0.5))
    for a in (0.2, 0.6, 1.5):
        r, b = theory(p.replace(alpha=a)), bayes_optimal(p.replace(alpha=a))
        assert b.test_error == pytest.approx(2 * b.matrix_error)
        assert r.matrix_error > b.matrix_error
