"""The screened prox starts (``SEOptions.prox_screen``) against every start on every node.

Where the prox has one minimum per node the screened output side must equal the unscreened one to
Newton's precision; where it has several (the interpolation peak) the screen must see them and
fall back to every start on every node, so that the result is again the unscreened one.
"""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import MPTarget, Problem
from singlehead.state_evolution import SEOptions, theory
from singlehead.state_evolution.output import output_side
from singlehead.state_evolution.prox_screen import screening_nodes

PEAK = Problem(T=2, alpha=0.267, noise=0.5, lam=1e-3, target=MPTarget(0.5))
# (q, m, Sigma) near the SE fixed point at PEAK (several prox minima on 50 of the 8192 nodes, 6 of
# them screening nodes), one where only 2 nodes have several (none a screening node), and one at
# alpha = 2 (one minimum everywhere); Q0 = 1.5
PEAK_X = (2.9847, 1.7413, 23.656)
RARE_X = (1.27, 0.99, 23.6)
EASY = PEAK.replace(alpha=2.0)
EASY_X = (1.2, 1.1, 0.344)
Q0 = 1.5


def _quad(problem):
    return SEOptions().quadrature(problem)


def test_screening_nodes_are_the_prefix_of_each_scramble():
    quad = _quad(PEAK)
    R, N = quad.nodes.shape[:2]
    mask = screening_nodes(quad, 8)
    assert mask.shape == (R * N,) and mask.sum() == R * N // 8
    assert np.array_equal(quad.flat[mask], quad.nodes[:, : N // 8].reshape(-1, quad.nodes.shape[2]))
    assert screening_nodes(quad, None) is None
    assert screening_nodes(SEOptions().thinned(quad), 8).sum() == R * N // 64  # the coarse stage's nodes
    assert screening_nodes(SEOptions(thin_factor=16).thinned(quad), 8) is None  # too few nodes to screen


def _disagreeing_fraction(out):
    b = out.branches
    dis = np.zeros(b[0].shape[0], dtype=bool)
    for x in b[1:]:
        dis |= np.any(np.abs(x - b[0]) > 1e-6 * (1 + np.abs(b[0])), axis=1)
    return dis.mean()


@pytest.mark.parametrize("problem, x, several", [(EASY, EASY_X, False), (PEAK, PEAK_X, True)])
def test_screened_cold_and_union_evaluations_equal_unscreened(problem, x, several):
    quad = _quad(problem)
    full = output_side(*x, problem=problem, Q0=Q0, quad=quad)
    assert (_disagreeing_fraction(full) > 0) == several  # the two regimes are what they claim
    scr = output_side(*x, problem=problem, Q0=Q0, quad=quad, screen=8)
    for k in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert getattr(scr, k) == pytest.approx(getattr(full, k), rel=1e-9, abs=1e-12)
    # a union evaluation from branches tracked at a nearby point
    x2 = (x[0] * 1.001, x[1] * 1.001, x[2] * 1.01)
    full_u = output_side(*x2, problem=problem, Q0=Q0, quad=quad, warm=full.branches, union=True)
    scr_u = output_side(*x2, problem=problem, Q0=Q0, quad=quad, warm=scr.branches, union=True, screen=8)
    for k in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert getattr(scr_u, k) == pytest.approx(getattr(full_u, k), rel=1e-9, abs=1e-12)
    assert len(scr_u.branches) == len(full_u.branches)


def test_minima_off_the_screening_nodes_are_found_by_the_convexity_probes():
    quad = _quad(PEAK)
    full = output_side(*RARE_X, problem=PEAK, Q0=Q0, quad=quad)
    mask = screening_nodes(quad, 8)
    b = full.branches
    several = np.any(np.abs(b[1] - b[0]) > 1e-6 * (1 + np.abs(b[0])), axis=1)
    assert several.sum() > 0 and not several[mask].any()  # the screening nodes alone would miss them
    scr = output_side(*RARE_X, problem=PEAK, Q0=Q0, quad=quad, screen=8)
    for k in ("qhat", "mhat", "Sigmahat", "train_error"):
        # missing the 2 nodes' global minima moves qhat by 0.3 and the train error by 0.5 standard errors
        assert abs(getattr(scr, k) - getattr(full, k)) < 1e-9 * abs(getattr(full, k))


def test_minima_the_probes_miss_on_screening_nodes_set_off_the_fallback(monkeypatch):
    """With probes that flag nothing, the screening nodes' lower minima (6 of PEAK_X's 50 nodes with
    several minima) are the probes' misses: every start then runs on every node, and the output
    side is the unscreened one again. Without that fallback it would not be."""
    import singlehead.state_evolution.prox_screen as ps

    quad = _quad(PEAK)
    full = output_side(*PEAK_X, problem=PEAK, Q0=Q0, quad=quad)
    monkeypatch.setattr(ps, "_not_convex_nodes", lambda problem, labels, *a: np.zeros(labels.shape[0], dtype=bool))
    scr = output_side(*PEAK_X, problem=PEAK, Q0=Q0, quad=quad, screen=8)
    for k in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert getattr(scr, k) == pytest.approx(getattr(full, k), rel=1e-9, abs=1e-12)
    calls = []
    real_prox = type(PEAK.channel).prox

    def counted(self, z, *a, **kw):
        calls.append(z.shape[0])
        return real_prox(self, z, *a, **kw)

    monkeypatch.setattr(type(PEAK.channel), "prox", counted)
    output_side(*PEAK_X, problem=PEAK, Q0=Q0, quad=quad, screen=8)
    assert calls[-1] == quad.flat.shape[0] and len(calls) == 3  # lead, screened subset, fallback on all nodes


def test_theory_with_screen_equals_theory_without_within_quadrature_error():
    for p in (EASY, PEAK.replace(alpha=0.19)):
        a = theory(p, options=SEOptions(prox_screen=None))
        b = theory(p)
        assert a.converged and b.converged
        se = a.extras["quadrature_error"]["test_error"]
        assert abs(a.test_error - b.test_error) < 0.1 * se


def test_prox_screen_is_validated():
    with pytest.raises(ValueError, match="prox_screen"):
        SEOptions(prox_screen=1)
