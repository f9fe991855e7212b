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

import numpy as np

from singlehead.numerics.attention_maps import pair_embedding, softmax_fit_loss, vec_to_mat
from singlehead.numerics.row_reductions import softmax_rows

__all__ = ["head_attention", "attention_jacobian", "multihead_fit_loss"]


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


def multihead_fit_loss(h: np.ndarray, labels: np.ndarray, beta: float, heads: int, order: int = 2
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
