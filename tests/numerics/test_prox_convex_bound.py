"""The global convexity bound of the T = 2 softmax prox (``softmax_t2_prox_convex_everywhere``).

Below ``Sigma beta^2 = 1/(4 c*)`` the prox objective is strictly convex at every node, so the SE's output
side runs one Newton start there (no cold starts, no union). The bound must hold (every node convex, and
the three cold starts ending at one point) and be tight (just above it a node with the worst row state is
not convex).
"""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import MPTarget, Problem
from singlehead.model.channels import Seq2Lab
from singlehead.numerics.attention_maps import (
    T2_ROW_CURVATURE_BOUND,
    softmax_t2_prox_convex,
    softmax_t2_prox_convex_everywhere,
)
from singlehead.state_evolution import SEOptions
from singlehead.state_evolution.output import _fields, node_labels, output_side

SIGMA_BETA2_MAX = 0.25 / T2_ROW_CURVATURE_BOUND  # 1.0399


def _worst_node(beta: float) -> tuple[np.ndarray, np.ndarray]:
    """A node where both rows sit at the most negative curvature: s_a = 0.86436 with own label 0."""
    D = np.log(0.8643567780629748 / (1 - 0.8643567780629748)) / beta
    h = np.array([[D / np.sqrt(2.0), 0.0, D / np.sqrt(2.0)]])  # D_a = sqrt2 h_aa - h_01
    Y = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    return h, Y


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_bound_holds_at_random_nodes_and_is_tight_at_the_worst_one(beta):
    rng = np.random.default_rng(11)
    below, above = 0.999 * SIGMA_BETA2_MAX / beta**2, 1.01 * SIGMA_BETA2_MAX / beta**2
    assert softmax_t2_prox_convex_everywhere(beta, below) and not softmax_t2_prox_convex_everywhere(beta, above)
    # random logits over a wide range and labels anywhere in the simplex rows, extremes included
    h = rng.normal(scale=4.0 / beta, size=(200_000, 3))
    p = rng.uniform(size=(200_000, 2))
    p[:1000] = rng.integers(0, 2, size=(1000, 2))
    Y = np.stack([np.stack([p[:, 0], 1 - p[:, 0]], 1), np.stack([1 - p[:, 1], p[:, 1]], 1)], 1)
    assert softmax_t2_prox_convex(h, Y, beta, below).all()
    hw, Yw = _worst_node(beta)
    assert softmax_t2_prox_convex(hw, Yw, beta, below).all()
    assert not softmax_t2_prox_convex(hw, Yw, beta, above).any()  # tight: c* is the true minimum


@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_below_the_bound_every_cold_start_ends_at_one_point(beta):
    problem = Problem(T=2, alpha=0.3, noise=0.5, lam=1e-3, beta=beta, target=MPTarget(0.5))
    quad = SEOptions().quadrature(problem)
    Sigma = 0.99 * SIGMA_BETA2_MAX / beta**2
    y, z, _ = _fields(quad, 1.0, 0.6, 1.5 + 0.25, 1.5)
    ch = Seq2Lab()
    starts = ch.prox_starts(z, y, T=2, beta=beta, beta0=1.0)
    ends = [ch.prox(z, y, Sigma, T=2, beta=beta, beta0=1.0, starts=[s]).h for s in starts]
    for e in ends[1:]:
        assert np.max(np.abs(e - ends[0])) < 1e-8
    # and the SE output side (one start there) equals the node-wise best of the three
    out = output_side(1.0, 0.6, Sigma, problem=problem, Q0=1.5, quad=quad, labels=node_labels(problem, quad, 1.5))
    every = output_side(
        1.0, 0.6, Sigma, problem=problem, Q0=1.5, quad=quad, union=True, warm=[np.array(s) for s in starts]
    )
    assert len(out.branches) == 1
    for k in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert getattr(out, k) == pytest.approx(getattr(every, k), rel=1e-9)


def test_no_bound_claimed_beyond_t2():
    assert not Seq2Lab().prox_convex_everywhere(3, 1.0, 1e-6)
    assert Seq2Lab().prox_convex_everywhere(2, 1.0, 1.0) and not Seq2Lab().prox_convex_everywhere(2, 1.0, 1.1)
