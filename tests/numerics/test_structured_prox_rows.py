"""The structured (Woodbury) Newton systems of the softmax prox's rows, against the dense ``K x K`` systems.

For ``T >= 3`` the prox's Newton matrix is a diagonal plus rank ``2T`` (:mod:`singlehead.numerics.prox_rows`):
its factorisation and solves, the tangents, Hessian traces and convexity test built on it must give the dense
matrix's numbers, and the prox run with the structured Newton step must reach the dense Newton's minima.
"""

from __future__ import annotations

import numpy as np
import pytest

from singlehead.numerics.attention_maps import softmax_fit_loss, softmax_rows, vec_to_mat
from singlehead.numerics.prox import prox_newton
from singlehead.numerics.prox_rows import (
    dense_newton_matrix,
    hessian_trace_rows,
    newton_rows,
    prox_convex_rows,
    row_derivatives,
    structured_factor,
    structured_solve,
    tangent_solve_rows,
)


def _batch(T: int, N: int, seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    K = T * (T + 1) // 2
    h = scale * rng.normal(size=(N, K))
    Y = softmax_rows(vec_to_mat(rng.normal(size=(N, K)), T))
    return rng, h, Y


@pytest.mark.parametrize("T", [3, 5, 9])
def test_structured_matches_dense(T):
    rng, h, Y = _batch(T, 40, T)
    beta, inv = 1.3, 2.0
    v, g, H = softmax_fit_loss(h, Y, beta, order=2)
    v2, g2, cu = row_derivatives(h, Y, beta)
    np.testing.assert_allclose(v2, v, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g2, g, rtol=1e-13, atol=1e-14)
    K = h.shape[1]
    Mk = H + inv * np.eye(K)
    D = cu.Dl + inv
    np.testing.assert_allclose(dense_newton_matrix(D, cu.Up, cu.Um), Mk, atol=1e-12)
    ok = np.all(D > 0, axis=1)
    f, pd = structured_factor(D[ok], cu.Up[ok], cu.Um[ok])
    B = rng.normal(size=(int(ok.sum()), K, 3))
    np.testing.assert_allclose(structured_solve(f, B), np.linalg.solve(Mk[ok], B), atol=1e-11)
    assert np.array_equal(pd, np.linalg.eigvalsh(Mk[ok])[:, 0] > 1e-10)


def test_tangent_and_trace_match_dense():
    rng, h, Y = _batch(6, 60, 1, scale=2.0)
    beta = 1.0
    H = softmax_fit_loss(h, Y, beta, order=2)[2]
    K = h.shape[1]
    for Sigma in (0.5, 20.0):
        B = rng.normal(size=(60, K, 2))
        X = tangent_solve_rows(h, Y, beta, Sigma, B)
        np.testing.assert_allclose(X, np.linalg.solve(np.eye(K) + Sigma * H, B), rtol=1e-8, atol=1e-10)
        ref = np.einsum("nkk->n", np.linalg.solve(np.eye(K) + Sigma * H, H))
        np.testing.assert_allclose(hessian_trace_rows(h, Y, beta, Sigma), ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(hessian_trace_rows(h, Y, beta, 0.0), np.einsum("nkk->n", H), rtol=1e-10, atol=1e-12)
    conv = prox_convex_rows(h, Y, beta, 20.0)
    assert np.array_equal(conv, np.linalg.eigvalsh(np.eye(K) / 20.0 + H)[:, 0] > 1e-12 / 20.0)


@pytest.mark.parametrize("Sigma", [0.3, 30.0])
def test_structured_prox_matches_dense_newton(Sigma):
    rng, z, Y = _batch(6, 200, 2, scale=1.5)
    beta = 1.0

    def loss(h, lab, order):
        return softmax_fit_loss(h, lab, beta, order=order)

    dense = prox_newton(z, Y, Sigma, loss)
    rows = prox_newton(z, Y, Sigma, loss, newton=newton_rows(beta))
    assert dense.converged and rows.converged
    same = np.abs(dense.objective - rows.objective) < 1e-9 * (1 + np.abs(dense.objective))
    assert same.mean() > 0.97  # a non-convex prox: a few nodes may end in another local minimum
    np.testing.assert_allclose(rows.h[same], dense.h[same], atol=1e-7)
