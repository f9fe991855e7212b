"""Extensive-rank MP targets, ``kappa0 > 1``: ``S0 = W0 W0^T/sqrt(p0 d)`` with ``p0 = kappa0 d > d``.

The target is full rank (no zero atom), ``Tr S0/d -> sqrt(kappa0)``, ``Q0 = Tr S0^2/d -> 1 + kappa0``.
Checked: the target and its law, the perfect-recovery thresholds (the parameter count ``1/(2 c_T)``
once ``S0`` is full rank), the state evolution against ERM (extrapolated to ``d = inf`` from two
sizes), and the Bayes-optimal state evolution against Bayes AMP on an instance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import (
    MPTarget,
    Problem,
    bayes_perfect_recovery_threshold,
    perfect_recovery_threshold,
    simulate,
    theory,
)
from singlehead.sim.simulation import TrainOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("kappa0", [1.5, 2.0])
def test_target_is_full_rank_with_the_stated_moments(kappa0):
    target = MPTarget(kappa0)
    law = target.spectral_law(400)
    assert law.engine.atom_mass == 0.0
    assert float(law.Q0) == pytest.approx(1 + kappa0, rel=1e-12)
    eig = np.linalg.eigvalsh(target.sample(400, seed=0).double().numpy())
    lo, hi = law.engine.ac_edges()
    # full rank; the spectrum fills the MP bulk (edges within finite-d fluctuations, O(d^(-2/3)))
    assert eig.min() > 0.5 * lo and abs(eig.min() - lo) < 0.1 and abs(eig.max() - hi) < 0.2
    # Tr S0/d and Tr S0^2/d: their fluctuations are O(1/d) (the second moment also has an O(1/d) bias)
    assert eig.mean() == pytest.approx(math.sqrt(kappa0), abs=0.02)
    assert np.mean(eig**2) == pytest.approx(1 + kappa0, abs=0.05)


def test_kappa0_must_be_positive():
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="kappa0"):
            MPTarget(bad)


def test_perfect_recovery_is_the_parameter_count_once_full_rank():
    for kappa0 in (1.0, 1.5, 2.0):
        p = Problem(T=2, noise=0.0, target=MPTarget(kappa0))
        # c_T = 2 at T = 2: d^2/2 parameters, 2 alpha d^2 equations
        assert perfect_recovery_threshold(p) == pytest.approx(0.25, rel=1e-12)
        assert bayes_perfect_recovery_threshold(p) == pytest.approx(0.25, rel=1e-12)
    # continuous at kappa0 = 1 from below
    below = Problem(T=2, noise=0.0, target=MPTarget(0.999))
    assert perfect_recovery_threshold(below) == pytest.approx(0.25, abs=1e-3)
    # a full-rank student (kappa = 1) represents every PSD S0
    assert math.isfinite(perfect_recovery_threshold(Problem(T=2, kappa=1.0, target=MPTarget(2.0))))


def _extrapolated(base: dict, sizes: tuple[int, int], seeds: int, metrics: tuple[str, ...]):
    """Seed means at two sizes extrapolated linearly in 1/d to d = inf, with the propagated standard error."""
    means, ses = {}, {}
    for d in sizes:
        v = np.array(
            [
                [getattr(simulate(Problem(d=d, **base), seed=s, options=TrainOptions(n_test=4000)), k) for k in metrics]
                for s in range(seeds)
            ]
        )
        means[d], ses[d] = v.mean(axis=0), v.std(axis=0, ddof=1) / math.sqrt(seeds)
    d1, d2 = sizes
    w = d2 / (d2 - d1)  # y_inf = w y_d2 - (w - 1) y_d1
    return w * means[d2] - (w - 1) * means[d1], np.sqrt(w**2 * ses[d2] ** 2 + (w - 1) ** 2 * ses[d1] ** 2)


def _check_against_theory(base: dict, sizes: tuple[int, int], seeds: int) -> None:
    metrics = ("test_error", "matrix_error")
    th = theory(Problem(d=sizes[1], **base))
    assert th.converged, th.message
    y_inf, se_inf = _extrapolated(base, sizes, seeds, metrics)
    for k, metric in enumerate(metrics):
        # 4 standard errors: a two-sided 1e-4 level per comparison
        assert abs(y_inf[k] - getattr(th, metric)) <= 4 * se_inf[k], (metric, y_inf[k], se_inf[k], getattr(th, metric))
    # informative: the error bar is a few percent of the value
    assert np.all(se_inf < 0.1 * np.array([getattr(th, m) for m in metrics]))


def test_linear_channel_theory_agrees_with_erm_at_kappa0_2():
    base = dict(T=2, channel="linear", alpha=1.0, noise=0.5, lam=0.05, target=MPTarget(2.0))
    _check_against_theory(base, (30, 60), 4)


@pytest.mark.slow
@pytest.mark.parametrize("kappa0", [1.5, 2.0])
def test_softmax_theory_agrees_with_erm(kappa0):
    base = dict(T=2, channel="seq2lab", alpha=1.0, noise=0.5, lam=0.01, target=MPTarget(kappa0))
    _check_against_theory(base, (40, 80), 6)


def test_bayes_state_evolution_agrees_with_bayes_amp_at_kappa0_2():
    from singlehead.amp import AMPOptions, amp
    from singlehead.bayes import bayes_overlap

    p = Problem(d=100, T=2, alpha=0.1, target=MPTarget(2.0))
    mmse = bayes_overlap(p)["mmse"]
    r = amp(p, 0, options=AMPOptions(bayes=True, max_iter=150, tol=1e-6, n_test=200))
    # one instance at d = 100: the MSE fluctuates by O(1/d) around the asymptotic MMSE
    assert abs(r.matrix_error - mmse) / mmse < 0.05
