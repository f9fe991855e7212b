"""The thresholds: informative directions ``c_T``, perfect recovery (ERM and Bayes-optimal), interpolation."""

from __future__ import annotations

import math

import pytest

from singlehead import MPTarget, Problem
from singlehead.bayes import bayes_overlap
from singlehead.state_evolution import SEOptions, theory
from singlehead.thresholds import (
    bayes_perfect_recovery_threshold,
    informative_directions,
    interpolation_threshold,
    perfect_recovery_threshold,
)


def test_c_T():
    assert informative_directions(Problem(T=2)) == 2
    assert informative_directions(Problem(T=3)) == 5
    assert informative_directions(Problem(T=1, channel="linear")) == 1
    with pytest.raises(ValueError):
        informative_directions(Problem(T=1))


def test_alpha_perfect_recovery_value():
    p = Problem(T=2, target=MPTarget(0.5))
    assert perfect_recovery_threshold(p) == pytest.approx(0.4222 / 2, abs=2e-4)
    assert bayes_perfect_recovery_threshold(p) == pytest.approx(0.375 / 2)
    assert perfect_recovery_threshold(p.replace(student="direct")) == pytest.approx(0.25)


def test_bayes_perfect_recovery():
    p = Problem(T=2, noise=0.0, target=MPTarget(0.5))
    a = bayes_perfect_recovery_threshold(p)
    assert bayes_overlap(p.replace(alpha=1.03 * a))["mmse"] == 0.0
    assert bayes_overlap(p.replace(alpha=0.95 * a))["mmse"] > 1e-3


def test_train_error_vanishes_below_interpolation_threshold():
    """lam = 1e-5: zero training error below alpha_interp, positive above (linear and softmax)."""
    for ch, T, factors in (("linear", 1, (0.6, 0.9, 1.1, 1.5)), ("seq2lab", 2, (0.6, 3.0))):
        p = Problem(T=T, channel=ch, noise=0.5, lam=1e-5, target=MPTarget(0.5))
        ai = interpolation_threshold(p)
        for f in factors:
            r = theory(p.replace(alpha=f * ai), options=SEOptions(n_points=512))
            assert r["converged"]
            if f < 1:
                assert r.train_error < 1e-5, (ch, f, r.train_error)
            else:
                assert r.train_error > 1e-2, (ch, f, r.train_error)


def test_interpolation_threshold_properties():
    p = Problem(T=2, target=MPTarget(0.5), noise=0.5)
    ai = interpolation_threshold(p)
    assert 0.1 < ai < 0.2189
    assert interpolation_threshold(p.replace(noise=0.0)) == math.inf
    assert interpolation_threshold(p.replace(noise=1e-6)) == pytest.approx(0.875 / 4, rel=1e-2)
    assert interpolation_threshold(p.replace(student="direct")) == 0.25
