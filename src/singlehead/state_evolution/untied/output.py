"""Output (channel) side of the untied state evolution: ``T^2`` fields in two blocks.

An untied student's logits ``h_ab = (x_a^T M x_b - delta_ab Tr M)/sqrt(d)`` split into the
symmetric fields (``K = T(T+1)/2``, from ``M_s``, variance ``q_s = ||M_s||_F^2/d``, diagonal
carrying ``sqrt 2``) and the antisymmetric fields (``K_a = T(T-1)/2``, from ``M_a``, variance
``q_a``); the two blocks are uncorrelated because ``<M_s, M_a> = 0``. Per block ``B`` the
teacher/student pairs are ``N(0, [[Q0_B, m_B], [m_B, q_B]])``, the label noise (symmetric,
variance ``Delta/2`` per symmetric field) only enters the symmetric block. With the prox

    h* = argmin_h  sum_B ||h_B - z_B||^2/(2 Sigma_B) + ||chan_beta0(P y) - chan_beta(P h)||_F^2 ,

``P`` = ``singlehead.numerics.attention_maps.untied_embedding``, ``g = h* - z``, each block gets the tied
formulas with its own overlaps (docs: Theory, :ref:`theory-output-side`):

    qhat_B =  2 alpha E ||g_B||^2 / Sigma_B^2
    mhat_B =  2 alpha E <g_B, q_B z0_B - m_B z_B> / (Sigma_B (Q0_B q_B - m_B^2))
    Sigmahat_B = -2 alpha E <g_B, Q0_B z_B - m_B z0_B> / (Sigma_B (Q0_B q_B - m_B^2))

(a tied teacher has ``Q0_a = 0``: then ``mhat_a = 0`` and ``Sigmahat_a = -2 alpha E<g_a, z_a>/(Sigma_a q_a)``).
The factor ``2 alpha`` is ``n`` over the dimension ``d^2/2`` of each block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.students import ANTISYMMETRIC_BLOCK, SYMMETRIC_BLOCK
from singlehead.numerics.attention_maps import untied_embedding
from singlehead.numerics.prox import prox_newton
from singlehead.state_evolution.output import gauss_pair
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = [
    "block_sizes",
    "UntiedOutput",
    "untied_output_side",
    "untied_test_errors",
    "collapse_hats",
    "block_jacobian_averages",
]

#: the fields of this module: a symmetric and an antisymmetric block
_BLOCKS = (SYMMETRIC_BLOCK, ANTISYMMETRIC_BLOCK)
_NAMES = ("qhat_s", "mhat_s", "Sigmahat_s", "qhat_a", "mhat_a", "Sigmahat_a")


def block_sizes(T: int) -> tuple[int, int]:
    """``(K, K_a) = (T(T+1)/2, T(T-1)/2)``: symmetric and antisymmetric fields per sequence."""
    return T * (T + 1) // 2, T * (T - 1) // 2


@dataclass
class UntiedOutput:
    """Conjugates ``(qhat_s, mhat_s, Sigmahat_s, qhat_a, mhat_a, Sigmahat_a)``, train error, quadrature errors."""

    hats: np.ndarray
    train_error: float
    err: dict[str, float] = field(default_factory=dict)
    branches: list | None = None
    prox_converged: bool = True
    #: the six conjugates on each scramble of the node set (``(R, 6)``; ``None``: closed form), for the floor
    scramble_hats: np.ndarray | None = None
    #: with ``jacobian=True``, per scramble: ``2 alpha`` times the node means of the block-restricted squared
    #: Frobenius norms ``(ss, sa, as, aa)`` of ``J = H (I + Sigma H)^{-1}`` and of its block traces ``(s, a)``,
    #: ``(R, 6)`` (:func:`block_jacobian_averages`; ``None``: closed form)
    scramble_jacobian: np.ndarray | None = None


def _fields(X: np.ndarray, x: np.ndarray, Q0s: float, Q0a: float, noise: float, T: int):
    """Teacher fields ``y`` (noise included), student fields ``z`` and ``E[z0 | y, z]`` on the nodes, ``(N, T^2)``."""
    K, Ka = block_sizes(T)
    Kt = K + Ka
    qs, ms, _, qa, ma, _ = x
    u1, u2 = X[:, :Kt], X[:, Kt:]
    Vy = Q0s + noise / 2.0
    ys, zs = gauss_pair(u1[:, :K], u2[:, :K], Vy, ms, qs)
    a, b = np.linalg.solve(np.array([[Vy, ms], [ms, qs]]), np.array([Q0s, ms])) if qs > 0 else (Q0s / Vy, 0.0)
    ya, za = gauss_pair(u1[:, K:], u2[:, K:], Q0a, ma, qa)
    y = np.concatenate([ys, ya], axis=1)
    z = np.concatenate([zs, za], axis=1)
    z0 = np.concatenate([a * ys + b * zs, ya], axis=1)
    return y, z, z0


def _block_hats(
    g: np.ndarray, z: np.ndarray, z0: np.ndarray, q: float, m: float, Q0: float, Sigma: float, alpha: float
) -> np.ndarray:
    """Per-node integrands of ``(qhat, mhat, Sigmahat)`` of one block, already multiplied by their factors."""
    gg = np.einsum("nk,nk->n", g, g) * (2 * alpha / Sigma**2)
    if Q0 <= 0.0:
        return np.stack([gg, np.zeros_like(gg), np.einsum("nk,nk->n", g, z) * (-2 * alpha / (Sigma * q))], axis=1)
    det = max(Q0 * q - m * m, 1e-300)
    return np.stack(
        [
            gg,
            np.einsum("nk,nk->n", g, q * z0 - m * z) * (2 * alpha / (Sigma * det)),
            np.einsum("nk,nk->n", g, Q0 * z - m * z0) * (-2 * alpha / (Sigma * det)),
        ],
        axis=1,
    )


def _scaled_loss(channel: Any, beta: float, scale: np.ndarray):
    """The fit loss in coordinates ``h' = h/scale`` (the prox becomes isotropic with ``Sigma = 1``)."""
    outer = np.outer(scale, scale)

    def loss(hp: np.ndarray, labels: np.ndarray, order: int):
        val, grad, hess = channel.block_fit_loss(hp * scale, labels, beta, order, blocks=_BLOCKS)
        return val, None if grad is None else grad * scale, None if hess is None else hess * outer

    return loss


def _interpolating_start(z: np.ndarray, y: np.ndarray, ratio: float, T: int, scale: np.ndarray) -> np.ndarray:
    """Closest point to ``z`` (in the prox metric) of ``ratio y + row shifts``: the softmax labels are met exactly."""
    P2 = untied_embedding(T).reshape(T * T, -1)
    shifts = np.zeros((T * T, T))
    for a in range(T):
        shifts[a * T : (a + 1) * T, a] = 1.0  # add t_a to every logit of row a
    U = np.linalg.solve(P2, shifts) / scale[:, None]  # the row shifts in scaled field coordinates
    base = ratio * y / scale
    t = np.linalg.lstsq(U, (z / scale - base).T, rcond=None)[0]
    return (base + (U @ t).T) * scale


def untied_output_side(
    x: np.ndarray,
    *,
    problem: Any,
    Q0s: float,
    Q0a: float,
    quad: OutputQuadrature | None = None,
    warm: list | None = None,
    union: bool = False,
    jacobian: bool = False,
) -> UntiedOutput:
    """``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a) -> (qhat_s, mhat_s, Sigmahat_s, qhat_a, mhat_a, Sigmahat_a)``.

    ``problem`` supplies ``alpha, T, channel, beta, beta0, noise``. A channel with closed forms
    (linear) uses them block by block; otherwise the expectations are taken on fixed scrambled-Sobol
    nodes in ``2 T^2`` dimensions and the prox is the global one over the channel's starts (``z``,
    the teacher's logits at the student's temperature, the interpolating point), tracked from
    ``warm`` when given (those end points replace the channel's starts; ``union``: both, node-wise
    lowest objective). ``jacobian=True`` (a channel without closed forms) also returns the prox's
    pointwise Jacobian averages per scramble (``UntiedOutput.scramble_jacobian``, for the replicon).
    """
    alpha, T, ch, noise = problem.alpha, problem.T, problem.channel, problem.noise
    K, Ka = block_sizes(T)
    qs, ms, Ss, qa, ma, Sa = (float(v) for v in x)
    closed_s = ch.closed_form_block(alpha, K, Q0s, qs, ms, Ss, noise)
    if closed_s is not None:
        hats = [closed_s["qhat"], closed_s["mhat"], closed_s["Sigmahat"]]
        train = closed_s["train_error"]
        if Ka:
            closed_a = ch.closed_form_block(alpha, Ka, Q0a, qa, ma, Sa, 0.0)
            hats += [closed_a["qhat"], closed_a["mhat"] if Q0a > 0 else 0.0, closed_a["Sigmahat"]]
            train += closed_a["train_error"]
        else:
            hats += [0.0, 0.0, 0.0]
        return UntiedOutput(np.array(hats), float(train), dict.fromkeys(_NAMES + ("train_error",), 0.0))
    quad = quad if quad is not None else OutputQuadrature.sobol(2 * (K + Ka))
    y, z, z0 = _fields(quad.flat, np.array([qs, ms, Ss, qa, ma, Sa]), Q0s, Q0a, noise, T)
    scale = np.sqrt(np.array([Ss] * K + [Sa] * Ka))
    labels = ch.block_labels(y, T, problem.beta0, _BLOCKS)
    ratio = ch.logit_scale(problem.beta, problem.beta0)
    cold = [z, ratio * y, _interpolating_start(z, y, ratio, T, scale)]
    starts = cold if warm is None else list(warm) + (cold if union else [])
    pr = prox_newton(z / scale, labels, 1.0, _scaled_loss(ch, problem.beta, scale), starts=[s / scale for s in starts])
    g = pr.h * scale - z
    vals = [_block_hats(g[:, :K], z[:, :K], z0[:, :K], qs, ms, Q0s, Ss, alpha)]
    vals.append(_block_hats(g[:, K:], z[:, K:], z0[:, K:], qa, ma, Q0a, Sa, alpha) if Ka else np.zeros_like(vals[0]))
    vals.append(pr.fit[:, None])
    mean, err, per = quad.mean_error_and_scrambles(np.concatenate(vals, axis=1))
    # unscaled (the next call's Sigma may differ); a union evaluation tracks the branches it started from
    branches = [b * scale for b in pr.branches][: len(warm) if union and warm is not None else None]
    jac = None
    if jacobian:
        H = ch.block_fit_loss(pr.h * scale, labels, problem.beta, 2, blocks=_BLOCKS)[2]
        jac = 2 * alpha * quad.mean_error_and_scrambles(block_jacobian_averages(H, scale**2, K))[2]
    return UntiedOutput(
        mean[:6],
        float(mean[6]),
        dict(zip(_NAMES + ("train_error",), map(float, err))),
        branches=branches,
        prox_converged=bool(pr.converged),
        scramble_hats=per[:, :6],
        scramble_jacobian=jac,
    )


def block_jacobian_averages(H: np.ndarray, sigma: np.ndarray, K: int) -> np.ndarray:
    """Per node, the block-restricted squared Frobenius norms and block traces of ``J = H (I + Sigma H)^{-1}``.

    ``H``: ``(N, F, F)`` Hessians of the fit loss at the prox point in the field coordinates, the first
    ``K`` fields symmetric and the others antisymmetric; ``sigma``: ``(F,)`` each field's ``Sigma_B``.
    The prox ``h* = argmin_h sum_B ||h_B - z_B||^2/(2 Sigma_B) + ell(h)`` has ``dh*/dz = (I + Sigma H)^{-1}``,
    so ``-J`` is the Jacobian of ``f_out = Sigma^{-1}(h* - z)`` in ``z`` (entry ``(k, k')``: the
    response of output field ``k`` to input field ``k'``). Returns ``(N, 6)``: ``sum J_kk'^2`` over
    ``(k, k')`` in the blocks ``(s, s), (s, a), (a, s), (a, a)`` (output block first), then
    ``sum_k J_kk`` over ``s`` and over ``a``.
    """
    F = H.shape[-1]
    # J = (H^{-1} + Sigma)^{-1} is symmetric; (I + H Sigma)^{-1} H is the same matrix without inverting H
    J = np.linalg.solve(np.eye(F)[None] + H * sigma[None, None, :], H)
    sq = J**2
    s, a = slice(0, K), slice(K, F)
    diag = np.einsum("nkk->nk", J)
    return np.stack(
        [
            sq[:, s, s].sum(axis=(1, 2)),
            sq[:, s, a].sum(axis=(1, 2)),
            sq[:, a, s].sum(axis=(1, 2)),
            sq[:, a, a].sum(axis=(1, 2)),
            diag[:, s].sum(axis=1),
            diag[:, a].sum(axis=1),
        ],
        axis=1,
    )


def untied_test_errors(
    x: np.ndarray, *, problem: Any, Q0s: float, Q0a: float, quad: OutputQuadrature | None = None
) -> dict[str, float]:
    """Test error ``E ||chan_beta0(P z0) - chan_beta(P z)||_F^2`` against noiseless and noisy labels, with errors."""
    T, ch, noise = problem.T, problem.channel, problem.noise
    K, Ka = block_sizes(T)
    qs, ms, Ss, qa, ma, Sa = (float(v) for v in x)
    closed_s = ch.closed_form_block(problem.alpha, K, Q0s, qs, ms, Ss, noise)
    if closed_s is not None:
        out = {k: closed_s[k] for k in ("test_error", "test_error_noisy")}
        if Ka:
            closed_a = ch.closed_form_block(problem.alpha, Ka, Q0a, qa, ma, Sa, 0.0)
            out = {k: out[k] + closed_a[k] for k in out}
        return {**out, "test_error_se": 0.0, "test_error_noisy_se": 0.0}
    quad = quad if quad is not None else OutputQuadrature.sobol(2 * (K + Ka))
    y, z, z0 = _fields(quad.flat, np.array([qs, ms, Ss, qa, ma, Sa]), Q0s, Q0a, noise, T)
    P = untied_embedding(T)
    X = quad.flat
    # noiseless teacher fields: redraw the symmetric block with variance Q0s (no noise)
    t0, zz = gauss_pair(X[:, :K], X[:, K + Ka : 2 * K + Ka], Q0s, ms, qs)
    teacher = np.concatenate([t0, y[:, K:]], axis=1)
    student = np.concatenate([zz, z[:, K:]], axis=1)
    A = ch.attention(np.einsum("abk,nk->nab", P, student), problem.beta)
    e_clean = np.sum((ch.teacher_attention(np.einsum("abk,nk->nab", P, teacher), problem.beta0) - A) ** 2, axis=(1, 2))
    e_noisy = np.sum(
        (
            ch.teacher_attention(np.einsum("abk,nk->nab", P, y), problem.beta0)
            - ch.attention(np.einsum("abk,nk->nab", P, z), problem.beta)
        )
        ** 2,
        axis=(1, 2),
    )
    mean, err = quad.mean_and_error(np.stack([e_clean, e_noisy], axis=1))
    return {
        "test_error": float(mean[0]),
        "test_error_noisy": float(mean[1]),
        "test_error_se": float(err[0]),
        "test_error_noisy_se": float(err[1]),
    }


def collapse_hats(*, problem: Any, Q0s: float, Q0a: float, quad: OutputQuadrature | None = None) -> np.ndarray:
    """The conjugates in the limit ``q, m, Sigma -> 0`` (complete rank collapse, ``M = 0``).

    There ``g/Sigma -> r(y) = -grad ell(0; y)``, so ``qhat_B = 2 alpha E||r_B||^2`` and, with
    ``z = (m/Q0) z0 + independent``, ``mhat_B = 2 alpha E<r_B, z0_B>/Q0_B``; ``Sigmahat`` does not
    enter the collapse condition (the prior's minimiser is 0 iff the spectral norm of its input is
    at most ``2 lam``) and is returned as ``nan``.
    """
    T, ch = problem.T, problem.channel
    K, Ka = block_sizes(T)
    quad = quad if quad is not None else OutputQuadrature.sobol(2 * (K + Ka))
    y, _, z0 = _fields(quad.flat, np.array([0.0, 0.0, 1.0, 0.0, 0.0, 1.0]), Q0s, Q0a, problem.noise, T)
    labels = ch.block_labels(y, T, problem.beta0, _BLOCKS)
    r = -ch.block_fit_loss(np.zeros_like(y), labels, problem.beta, 1, blocks=_BLOCKS)[1]
    a = 2 * problem.alpha
    cols = [
        a * np.einsum("nk,nk->n", r[:, :K], r[:, :K]),
        a * np.einsum("nk,nk->n", r[:, :K], z0[:, :K]) / Q0s,
        a * np.einsum("nk,nk->n", r[:, K:], r[:, K:]),
        a * np.einsum("nk,nk->n", r[:, K:], z0[:, K:]) / Q0a if Q0a > 0 else np.zeros(len(y)),
    ]
    mean, _ = quad.mean_and_error(np.stack(cols, axis=1))
    return np.array([mean[0], mean[1], np.nan, mean[2], mean[3], np.nan])
