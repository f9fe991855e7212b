"""The fit loss of a mean of softmax heads on ``H K`` fields, with its gradient and Hessian.

A sequence's student output is ``(1/H) sum_h chan_beta(M(h_h))``, ``h_h`` the ``K`` logit fields of head
``h`` (``K = T(T+1)/2``, :func:`~singlehead.numerics.attention_maps.pair_embedding` folding), and its loss
``ell(h) = ||Y - (1/H) sum_h softmax_rows(beta M(h_h))||_F^2``. The fields of a node are stored head after
head, ``h[:, h K:(h + 1) K]``.

Derivatives. With ``A_h`` the heads' attention matrices, ``R = (1/H) sum_h A_h - Y`` and ``J_h = dA_h/dh_h``
(``T x T x K``), ``grad_h ell = (2/H) J_h^T R`` and ``d^2 ell/dh_h dh_h' = (2/H^2) J_h^T J_h'`` for ``h != h'``.
The diagonal block equals ``1/H^2`` times the single-head loss's Hessian at the effective label
``Y_h = A_h - H R`` (whose residual ``A_h - Y_h = H R`` is the multi-head one's times ``H``), and the gradient
``1/H^2`` times that loss's gradient, so the single-head code
(:func:`~singlehead.numerics.attention_maps.softmax_fit_loss`) supplies both.
"""

from __future__ import annotations

import math

import numpy as np

from singlehead.numerics.attention_maps import pair_embedding, softmax_fit_loss, vec_to_mat
from singlehead.numerics.row_reductions import softmax_rows

__all__ = ["head_attention", "attention_jacobian", "multihead_fit_loss", "row_difference_map", "linear_t2_loss"]


def head_attention(h: np.ndarray, T: int, beta: float) -> np.ndarray:
    """Attention matrices ``softmax_rows(beta M(h_h))`` of every head, ``(N, H, T, T)``, from ``h`` ``(N, H K)``."""
    N = h.shape[0]
    K = T * (T + 1) // 2
    hh = h.reshape(N, -1, K)
    return softmax_rows(beta * vec_to_mat(hh.reshape(-1, K), T)).reshape(N, hh.shape[1], T, T)


def attention_jacobian(A: np.ndarray, T: int, beta: float) -> np.ndarray:
    """``dA_ac/dh_k = beta (A_ac P_ack - A_ac sum_e A_ae P_aek)`` for attention matrices ``A`` (``(..., T, T)``),
    shape ``(..., T, T, K)`` (``P`` = :func:`~singlehead.numerics.attention_maps.pair_embedding`)."""
    P = pair_embedding(T)
    K = P.shape[-1]
    lead = A.shape[:-2]
    AP = np.empty(lead + (T, K))
    for a in range(T):  # row a of every A times P[a]: one matrix product per row (not per node and row)
        AP[..., a, :] = (np.ascontiguousarray(A[..., a, :]).reshape(-1, T) @ P[a]).reshape(lead + (K,))
    return (beta * A)[..., None] * (P - AP[..., :, None, :])


def multihead_fit_loss(
    h: np.ndarray, labels: np.ndarray, beta: float, heads: int, order: int = 2
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``ell(h)`` of the module docstring per node, with gradient ``(N, H K)`` and Hessian ``(N, H K, H K)``.

    Parameters
    ----------
    h : (N, H K) array
        The fields, head after head.
    labels : (N, T, T) array
        The label matrices ``Y``.
    beta : float
        Student inverse temperature.
    heads : int
        ``H``.
    order : {0, 1, 2}
        Highest derivative returned (others ``None``).
    """
    N, T, H = h.shape[0], labels.shape[-1], int(heads)
    K = T * (T + 1) // 2
    if h.shape[1] != H * K:
        raise ValueError(f"h must have heads * K = {H * K} columns (got {h.shape[1]})")
    A = head_attention(h, T, beta)
    R = A.mean(axis=1) - labels
    val = np.einsum("nab,nab->n", R, R)
    if order == 0:
        return val, None, None
    hh = h.reshape(N, H, K)
    grad = np.empty((N, H, K))
    hess = np.zeros((N, H, K, H, K)) if order >= 2 else None
    for a in range(H):
        Yeff = A[:, a] - H * R
        _, g1, h1 = softmax_fit_loss(hh[:, a], Yeff, beta, order=min(order, 2))
        grad[:, a] = g1 / H**2
        if hess is not None:
            hess[:, a, :, a, :] = h1 / H**2
    if hess is not None and H > 1:
        J = attention_jacobian(A, T, beta).reshape(N, H, T * T, K)
        Jt = np.swapaxes(J, -1, -2)
        for a in range(H):
            for b in range(a + 1, H):
                blk = (2.0 / H**2) * (Jt[:, a] @ J[:, b])
                hess[:, a, :, b, :] = blk
                hess[:, b, :, a, :] = np.swapaxes(blk, 1, 2)
    return val, grad.reshape(N, H * K), None if hess is None else hess.reshape(N, H * K, H * K)


def row_difference_map(heads: int) -> np.ndarray:
    """At ``T = 2``, the ``(2 H, 3 H)`` matrix ``G`` with ``d = G h`` the heads' row differences: ``d[a H + h]``
    is ``D_a`` of head ``h``, ``D_0 = sqrt2 h_00 - h_01``, ``D_1 = sqrt2 h_11 - h_01`` (row ``a`` of the head's
    softmax is ``(s, 1 - s)``, ``s = sigmoid(beta D_a)``, in the order (own, other) token)."""
    H = int(heads)
    G = np.zeros((2 * H, 3 * H))
    r2 = math.sqrt(2.0)
    for h in range(H):
        G[h, 3 * h], G[h, 3 * h + 1] = r2, -1.0
        G[H + h, 3 * h + 2], G[H + h, 3 * h + 1] = r2, -1.0
    return G


def linear_t2_loss(G: np.ndarray, beta: float, heads: int):
    """:func:`multihead_fit_loss` at ``T = 2`` of ``G x`` for a fixed ``(2 H, n)`` matrix ``G``: ``x -> ell(h)``
    with ``h`` the fields whose row differences (:func:`row_difference_map`) are ``G x`` (e.g.
    ``G = row_difference_map(H) L`` for fields ``h = L x``), as ``loss(x, labels, order) -> (value, grad, hess)``.

    With ``sbar_a`` the heads' mean of ``s_{h, a}`` and ``r_a = 2 sbar_a - 1 - Y_aa + Y_ab`` (``b != a``),
    ``ell = sum_a (sbar_a - Y_aa)^2 + (1 - sbar_a - Y_ab)^2``; its derivatives in ``d = G x`` are
    ``d ell/d d_{a h} = (2/H) r_a s'_{h a}`` and, within a row ``a`` (rows do not mix),
    ``d^2 ell/d d_{a h} d d_{a h'} = (4/H^2) s'_{h a} s'_{h' a} + delta_{h h'} (2/H) r_a s''_{h a}``
    (``s' = beta s (1 - s)``, ``s'' = beta s' (1 - 2 s)``), pulled back through ``G``: the same function and
    derivatives as :func:`multihead_fit_loss` of ``h``, in whole-array operations on ``(N, 2 H)`` arrays.
    """
    H = int(heads)
    G = np.asarray(G, float)
    if G.shape[0] != 2 * H:
        raise ValueError(f"G must have 2 * heads = {2 * H} rows (got {G.shape[0]})")
    n = G.shape[1]
    GT = np.ascontiguousarray(G.T)
    # the Hessian's pull-back: hess = sum over rows a and heads h, h' of W_{a h h'} G_{a h} G_{a h'}^T, one matrix
    # product of the (N, 2 H^2) weights with the (2 H^2, n^2) outer products
    pairs = [(a * H + h, a * H + k) for a in range(2) for h in range(H) for k in range(H)]
    outer = np.stack([np.outer(G[i], G[j]).ravel() for i, j in pairs])

    def loss(x: np.ndarray, labels: np.ndarray, order: int):
        N = x.shape[0]
        s = 0.5 + 0.5 * np.tanh((0.5 * beta) * (x @ GT))  # sigmoid(beta d), (N, 2 H)
        s0, s1 = s[:, :H].mean(axis=1), s[:, H:].mean(axis=1)
        a0, b0 = s0 - labels[:, 0, 0], 1.0 - s0 - labels[:, 0, 1]
        a1, b1 = s1 - labels[:, 1, 1], 1.0 - s1 - labels[:, 1, 0]
        val = a0 * a0 + b0 * b0 + a1 * a1 + b1 * b1
        if order == 0:
            return val, None, None
        sp = beta * s * (1.0 - s)
        r = np.empty((N, 2 * H))
        r[:, :H] = (a0 - b0)[:, None]
        r[:, H:] = (a1 - b1)[:, None]
        grad = ((2.0 / H) * r * sp) @ G
        if order == 1:
            return val, grad, None
        spp = beta * sp * (1.0 - 2.0 * s)
        W = np.empty((N, len(pairs)))
        for c, (i, j) in enumerate(pairs):
            W[:, c] = (4.0 / H**2) * sp[:, i] * sp[:, j]
            if i == j:
                W[:, c] += (2.0 / H) * r[:, i] * spp[:, i]
        return val, grad, (W @ outer).reshape(N, n, n)

    return loss
