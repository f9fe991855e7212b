"""Tests of the batched proximal step (singlehead.numerics.prox)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from singlehead.model.channels import get_channel
from singlehead.numerics.prox import (
    interpolating_start,
    mat_to_vec,
    prox_objective,
    prox_softmax,
    softmax_fit_loss,
    softmax_rows,
    vec_to_mat,
)


@pytest.mark.parametrize("T", [1, 2, 3, 4])
def test_embedding_roundtrip_and_norm(T):
    rng = np.random.default_rng(0)
    K = T * (T + 1) // 2
    v = rng.normal(size=(7, K))
    H = vec_to_mat(v, T)
    assert np.allclose(H, np.swapaxes(H, -1, -2))
    assert np.allclose(
        np.diagonal(H, axis1=-2, axis2=-1),
        np.sqrt(2) * v[:, [k for k, (a, b) in enumerate(zip(*np.triu_indices(T))) if a == b]],
    )
    assert np.allclose(mat_to_vec(H), v)
    assert np.allclose((H**2).sum(axis=(1, 2)), 2 * (v**2).sum(axis=1))


def test_softmax_matches_channels_module():
    rng = np.random.default_rng(1)
    h = rng.normal(size=(5, 3))
    H = vec_to_mat(h, 2)
    assert np.allclose(softmax_rows(1.7 * H), get_channel("seq2lab").attention(H, 1.7))


@pytest.mark.parametrize("T,beta", [(2, 1.0), (3, 1.3), (4, 0.7)])
def test_gradient_hessian_finite_differences(T, beta):
    rng = np.random.default_rng(2)
    K = T * (T + 1) // 2
    h = rng.normal(size=(6, K)) * 1.5
    Y = softmax_rows(2 * rng.normal(size=(6, T, T)))
    _, g, H = softmax_fit_loss(h, Y, beta)
    e = 1e-6
    E = np.eye(K)
    gfd = np.stack(
        [
            (softmax_fit_loss(h + e * E[k], Y, beta, order=0)[0] - softmax_fit_loss(h - e * E[k], Y, beta, order=0)[0])
            / (2 * e)
            for k in range(K)
        ],
        1,
    )
    Hfd = np.stack(
        [
            (softmax_fit_loss(h + e * E[k], Y, beta, order=1)[1] - softmax_fit_loss(h - e * E[k], Y, beta, order=1)[1])
            / (2 * e)
            for k in range(K)
        ],
        2,
    )
    assert np.abs(g - gfd).max() < 1e-7
    assert np.abs(H - Hfd).max() < 1e-6


def test_gradient_hessian_autograd():
    rng = np.random.default_rng(3)
    T, K, beta = 3, 6, 1.2
    h = rng.normal(size=K)
    Y = softmax_rows(rng.normal(size=(T, T)))
    _, g, H = softmax_fit_loss(h[None], Y[None], beta)
    P = torch.as_tensor(np.einsum("abk->abk", vec_to_mat(np.eye(K), T).transpose(1, 2, 0)))

    def f(x):
        A = torch.softmax(beta * torch.einsum("abk,k->ab", P, x), dim=-1)
        return ((A - torch.as_tensor(Y)) ** 2).sum()

    x = torch.as_tensor(h, dtype=torch.float64)
    gt = torch.autograd.functional.jacobian(f, x).numpy()
    Ht = torch.autograd.functional.hessian(f, x).numpy()
    assert np.allclose(g[0], gt, atol=1e-12) and np.allclose(H[0], Ht, atol=1e-12)


@pytest.mark.parametrize("Sigma", [0.05, 1.0, 30.0])
def test_prox_is_global_minimum(Sigma):
    """Newton result vs a dense scan around the minimiser (T = 2, K = 3) and first-order conditions."""
    rng = np.random.default_rng(4)
    T, K, N = 2, 3, 40
    z = 1.5 * rng.normal(size=(N, K))
    y = 1.5 * rng.normal(size=(N, K))
    pr = get_channel("seq2lab").prox(z, y, Sigma, T=T, beta=1.0, beta0=1.0)
    assert pr.converged
    Y = softmax_rows(vec_to_mat(y, T))
    _, g, H = softmax_fit_loss(pr.h, Y, 1.0)
    g = g + (pr.h - z) / Sigma
    assert np.abs(g).max() < 1e-8
    assert np.all(np.linalg.eigvalsh(H + np.eye(K) / Sigma) > -1e-10)
    # brute force: random candidates around z and the interpolating point cannot beat it
    hi = interpolating_start(z, y, 1.0, T)
    cands = np.concatenate([z[None] + 3 * rng.normal(size=(3000, 1, K)), hi[None] + 3 * rng.normal(size=(3000, 1, K))])
    obj = np.stack([prox_objective(c, z, Y, Sigma, 1.0) for c in cands])
    assert np.all(obj.min(axis=0) >= pr.objective - 1e-10)


def test_prox_linear_closed_form_and_generic_newton():
    rng = np.random.default_rng(5)
    z, y = rng.normal(size=(10, 3)), rng.normal(size=(10, 3))
    pr = get_channel("linear").prox(z, y, 0.7, T=2, beta=1.0, beta0=1.0)
    # stationarity of ||h-z||^2/(2 Sigma) + 2||h-y||^2
    assert np.allclose((pr.h - z) / 0.7 + 4 * (pr.h - y), 0)


def test_nonconvex_case_picks_lower_branch():
    """Large Sigma: the interpolating branch can win over the branch grown from z."""
    rng = np.random.default_rng(6)
    z, y = 2 * rng.normal(size=(4000, 3)), 2 * rng.normal(size=(4000, 3))
    Y = softmax_rows(vec_to_mat(y, 2))
    single = prox_softmax(z, Y, 50.0, 1.0)
    multi = get_channel("seq2lab").prox(z, y, 50.0, T=2, beta=1.0, beta0=1.0)
    assert np.all(multi.objective <= single.objective + 1e-12)
    assert (multi.objective < single.objective - 1e-6).any()


def test_newton_prox_accepts_read_only_loss_derivatives():
    # a loss may hand back read-only arrays (here a broadcast constant Hessian); Newton updates its own
    # state in place, so it must copy those rather than write into them
    from singlehead.numerics.prox import prox_linear, prox_newton

    rng = np.random.default_rng(6)
    z, y = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))

    def quadratic(h, lab, order):
        r = h - lab
        grad = np.broadcast_to(4.0 * r, r.shape) if order >= 1 else None
        hess = np.broadcast_to(4.0 * np.eye(3), (h.shape[0], 3, 3)) if order >= 2 else None
        return 2.0 * np.sum(r * r, axis=1), grad, hess

    pr = prox_newton(z, y, 0.7, quadratic)
    assert pr.converged
    np.testing.assert_allclose(pr.h, prox_linear(z, y, 0.7).h, rtol=1e-12, atol=1e-12)


def test_t2_newton_reaches_the_generic_newtons_minima():
    """The T = 2 Newton (in the plane of the row differences, 2 x 2 Newton systems) against the generic Newton
    from the same starts (z, the interpolating point, their midpoint) across Sigma and beta: the same local
    minimum at every node (end points within 1e-9), the same objective and node-wise best start."""
    from singlehead.model.channels import get_channel
    from singlehead.numerics.attention_maps import softmax_fit_loss
    from singlehead.numerics.prox import prox_newton
    from singlehead.numerics.prox_t2 import newton_t2

    ch = get_channel("seq2lab")
    rng = np.random.default_rng(3)
    for Sigma in (0.05, 2.0, 300.0):
        for beta in (0.5, 2.0):
            y = 1.3 * rng.normal(size=(3000, 3))
            z = 0.7 * y + 0.6 * rng.normal(size=(3000, 3))
            labels = ch.labels(y, 2, 1.0)
            starts = ch.prox_starts(z, y, T=2, beta=beta, beta0=1.0)
            loss = lambda h, lab, order: softmax_fit_loss(h, lab, beta, order=order)  # noqa: E731
            a = prox_newton(z, labels, Sigma, loss, starts=starts)
            b = prox_newton(z, labels, Sigma, loss, starts=starts, newton=newton_t2(beta))
            assert a.converged and b.converged
            for ba, bb in zip(a.branches, b.branches):
                assert np.abs(ba - bb).max() < 1e-9 * (1 + np.abs(ba).max())
            assert np.array_equal(a.start_index, b.start_index)
            assert np.allclose(a.objective, b.objective, rtol=1e-12, atol=1e-14)
