"""Logits of one sequence as a ``K``-vector, the attention map on it, and the softmax square loss (numpy).

Conventions (shared by the state evolution, GAMP and the prox of ``singlehead.numerics.prox``):
``K = T(T+1)/2`` components, one per upper-triangular pair ``(a, b), a <= b`` in
``numpy.triu_indices(T)`` order; :func:`vec_to_mat` copies each off-diagonal component to
``(a, b)`` and ``(b, a)`` and **multiplies the diagonal components by sqrt(2)** (this restores
the variance ``2 Tr S^2/d`` of diagonal logits), so ``||M(v)||_F^2 = 2 ||v||^2``. The channel
``chan_beta`` is the row-wise softmax of ``beta M(h)`` (``seq2lab`` / ``seq2seq``) or the
identity (``linear``). Everything is vectorised over nodes.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from singlehead.numerics.row_reductions import max_last, softmax_rows, sum_last  # noqa: F401  (softmax_rows: re-exported)

__all__ = [
    "pair_embedding",
    "untied_embedding",
    "vec_to_mat",
    "mat_to_vec",
    "shift_direction",
    "softmax_rows",
    "softmax_fit_loss",
    "SQRT2",
    "t2_rows",
]


@cache
def _embedding(T: int) -> np.ndarray:
    K = T * (T + 1) // 2
    P = np.zeros((T, T, K))
    iu, ju = np.triu_indices(T)
    for k, (a, b) in enumerate(zip(iu, ju)):
        if a == b:
            P[a, a, k] = math.sqrt(2.0)
        else:
            P[a, b, k] = 1.0
            P[b, a, k] = 1.0
    P.setflags(write=False)
    return P


@cache
def _pullback(T: int) -> np.ndarray:
    """``B[(a,c,e), (k,l)] = P[a,c,k] P[a,e,l]`` as a ``(T^3, K^2)`` matrix."""
    return _pull(_embedding(T))


def _pull(P: np.ndarray) -> np.ndarray:
    T, K = P.shape[0], P.shape[-1]
    B = np.einsum("ack,ael->acekl", P, P).reshape(T**3, K * K)
    B.setflags(write=False)
    return B


@cache
def _untied_embedding(T: int) -> np.ndarray:
    K, Ka = T * (T + 1) // 2, T * (T - 1) // 2
    P = np.zeros((T, T, K + Ka))
    P[:, :, :K] = _embedding(T)
    for k, (a, b) in enumerate(zip(*np.triu_indices(T, 1))):
        P[a, b, K + k] = 1.0
        P[b, a, K + k] = -1.0
    P.setflags(write=False)
    return P


@cache
def _untied_pullback(T: int) -> np.ndarray:
    return _pull(_untied_embedding(T))


def untied_embedding(T: int) -> np.ndarray:
    """The logits of an untied student from its ``T^2`` field coordinates, ``(T, T, K + K_a)``.

    The first ``K = T(T+1)/2`` coordinates are the symmetric fields ``s`` (as
    :func:`pair_embedding`: ``H_ab = H_ba = s_k`` off the diagonal, ``H_aa = sqrt(2) s_k``), the
    last ``K_a = T(T-1)/2`` the antisymmetric fields ``w``: ``H_ab = w_k = -H_ba`` for the pair
    ``a < b`` (``numpy.triu_indices(T, 1)`` order). For a matrix ``M = M_s + M_a`` the symmetric
    fields have variance ``||M_s||_F^2/d`` and the antisymmetric ones ``||M_a||_F^2/d``; the map
    is invertible and ``||H||_F^2 = 2 ||(s, w)||^2``.
    """
    return _untied_embedding(int(T))


def pair_embedding(T: int) -> np.ndarray:
    """The linear map ``M`` as an array ``P`` of shape ``(T, T, K)``: ``M(v)_ab = sum_k P[a,b,k] v_k``.

    ``P[a,b,k] = 1`` for an off-diagonal pair ``k = {a, b}`` (both orders), ``sqrt(2)`` for a
    diagonal pair ``k = (a, a)``; pairs are ordered as ``numpy.triu_indices(T)``.
    """
    return _embedding(int(T))


def vec_to_mat(v: np.ndarray, T: int) -> np.ndarray:
    """``M(v)``: ``(..., K) -> (..., T, T)`` symmetric, diagonal multiplied by ``sqrt(2)``."""
    return np.einsum("abk,...k->...ab", pair_embedding(T), v)


def mat_to_vec(H: np.ndarray) -> np.ndarray:
    """Inverse of :func:`vec_to_mat` on symmetric matrices: ``(..., T, T) -> (..., K)``."""
    T = H.shape[-1]
    iu, ju = np.triu_indices(T)
    v = H[..., iu, ju].copy()
    v[..., iu == ju] /= math.sqrt(2.0)
    return v


def shift_direction(T: int) -> np.ndarray:
    """Unit ``K``-vector ``u`` with ``M(u)`` proportional to the all-ones matrix.

    Adding ``t u`` to ``h`` shifts every logit by the same amount, which leaves the row-wise
    softmax unchanged (the only symmetric shift that does).
    """
    iu, ju = np.triu_indices(T)
    u = np.where(iu == ju, 1.0 / math.sqrt(2.0), 1.0)
    return u / np.linalg.norm(u)


def softmax_fit_loss(
    h: np.ndarray, Y: np.ndarray, beta: float, *, order: int = 2, untied: bool = False
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``ell(h) = ||softmax_rows(beta M(h)) - Y||_F^2`` with analytic gradient and Hessian in ``h``.

    Parameters
    ----------
    h : (N, K) array
        Logit ``K``-vectors.
    Y : (N, T, T) array
        Label matrices.
    beta : float
        Inverse temperature.
    order : {0, 1, 2}
        Highest derivative returned (others are ``None``).
    untied : bool
        ``h`` holds the ``T^2`` field coordinates of an untied student (:func:`untied_embedding`)
        instead of the ``K`` symmetric ones.

    Returns
    -------
    value (N,), grad (N, K) or None, hess (N, K, K) or None

    Notes
    -----
    Row ``a`` only depends on row ``a`` of ``H = M(h)``. With ``A = softmax(beta H_a)``,
    ``R = A - Y_a``, ``w = R * A``, ``s = sum(w)``, the row Jacobian is
    ``J = beta (diag A - A A^T)``; the row gradient is ``2 J R = 2 beta (w - s A)`` and the
    row Hessian ``2 J J + 2 beta^2 [diag(w - s A) - A w^T - w A^T + 2 s A A^T]``, i.e.
    ``2 beta^2 [delta_ce (A_c^2 + w_c - s A_c) + A_c A_e (|A|^2 + 2 s - A_c - A_e)
    - A_c w_e - w_c A_e]``. They are pulled back to ``h`` through ``P``
    (:func:`pair_embedding`). ``T = 2`` has its own closed form (:func:`_softmax_fit_loss_t2`),
    equal to this one to round-off and several times faster.
    """
    if untied:
        if Y.shape[-1] == 2:
            return _softmax_fit_loss_t2_untied(h, Y, beta, order)
        return _softmax_fit_loss_general(h, Y, beta, order, untied=True)
    if Y.shape[-1] == 2:
        return _softmax_fit_loss_t2(h, Y, beta, order)
    return _softmax_fit_loss_general(h, Y, beta, order)


def _softmax_fit_loss_general(
    h: np.ndarray, Y: np.ndarray, beta: float, order: int, untied: bool = False
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`softmax_fit_loss` for any ``T`` (the formulas of its Notes)."""
    N, K = h.shape
    T = Y.shape[-1]
    if untied:
        P2 = untied_embedding(T).reshape(T * T, K)
        H = (h @ P2.T).reshape(N, T, T)
    else:  # M(h) by a gather: O(K) per node, the same numbers as the product with the embedding
        H = _gather_rows(h, T)
    A = softmax_rows(beta * H)
    R = A - Y
    val = sum_last((R * R).reshape(N, T * T))
    if order == 0:
        return val, None, None
    w = R * A
    s = sum_last(w)[..., None]  # (N, T, 1)
    ws = w - s * A
    # pull-back of d ell / d H
    grad = (2.0 * beta) * (ws.reshape(N, T * T) @ P2 if untied else _scatter_rows(ws))
    if order == 1:
        return val, grad, None
    if not untied and T > _PULLBACK_MAX_T:
        return val, grad, _structured_dense_hessian(h, Y, beta)
    # row Hessians Hr[n, a, c, e] (closed form of 2 J J + 2 sum_b R_b Hess(A_b), J = beta(diag A - A A^T)):
    # Hr = 2 beta^2 [delta_ce (A_c^2 + ws_c) + A_c A_e (|A|^2 + 2 s - A_c - A_e) - A_c w_e - w_c A_e]
    # the same as a symmetric rank-2 update: Hr = c A A^T - v A^T - A v^T (+ the diagonal), with
    # c = |A|^2 + 2 s and v = A^2 + w per row (in place: 20-35% faster at T = 3, 4)
    c = sum_last(A * A) + 2.0 * s[..., 0]
    Q = (A * A + w)[..., :, None] * A[..., None, :]
    Hr = A[..., :, None] * A[..., None, :]
    Hr *= c[..., None, None]
    Hr -= Q
    Hr -= Q.swapaxes(-1, -2)
    idx = np.arange(T)
    Hr[..., idx, idx] += A * A + ws
    # pull back through M: hess[k, l] = sum_{a,c,e} P[a,c,k] Hr[a,c,e] P[a,e,l]  (one matmul)
    pull = _untied_pullback(T) if untied else _pullback(T)
    hess = (2.0 * beta**2) * (Hr.reshape(N, T**3) @ pull).reshape(N, K, K)
    return val, grad, hess


# above this T the dense Hessian is assembled from the row structure (O(K^2 T) per node) instead of the
# pull-back matrix of T^3 x K^2 entries
_PULLBACK_MAX_T = 8


@cache
def _pairs(T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(kidx, wgt, iu, ju)``: pair index of each entry, its weight in ``M``, ``numpy.triu_indices(T)``."""
    iu, ju = np.triu_indices(T)
    kidx = np.empty((T, T), dtype=np.intp)
    kidx[iu, ju] = np.arange(iu.size)
    kidx[ju, iu] = np.arange(iu.size)
    wgt = np.ones((T, T))
    wgt[np.arange(T), np.arange(T)] = math.sqrt(2.0)
    return kidx, wgt, iu, ju


def _gather_rows(h: np.ndarray, T: int) -> np.ndarray:
    """``M(h)`` for ``(N, K)`` ``h`` by a gather."""
    kidx, wgt = _pairs(T)[:2]
    return h[:, kidx] * wgt


def _scatter_rows(G: np.ndarray) -> np.ndarray:
    """``M^T G`` for ``(N, T, T)`` ``G``: ``G_ab + G_ba`` off the diagonal, ``sqrt2 G_aa`` on it."""
    T = G.shape[-1]
    _, _, iu, ju = _pairs(T)
    out = G[:, iu, ju] + G[:, ju, iu]
    d = np.arange(T)
    out[:, iu == ju] = math.sqrt(2.0) * G[:, d, d]
    return out


def _structured_dense_hessian(h: np.ndarray, Y: np.ndarray, beta: float) -> np.ndarray:
    """The dense ``(N, K, K)`` Hessian from the row structure (:mod:`singlehead.numerics.prox_rows`), memory checked."""
    from singlehead.numerics.limits import check_memory
    from singlehead.numerics.prox_rows import dense_newton_matrix, row_derivatives

    N, K = h.shape
    check_memory(
        8.0 * 3 * N * K * K,
        "T",
        f"the dense {K} x {K} Hessians of the softmax loss on {N} nodes",
        "lower T or the number of nodes",
    )
    _, _, cu = row_derivatives(h, Y, beta, 2)
    return dense_newton_matrix(cu.Dl, cu.Up, cu.Um)


#: ``sqrt(2)``: the diagonal weight of the ``T = 2`` pair embedding, shared with :mod:`singlehead.numerics.prox_t2`.
SQRT2 = math.sqrt(2.0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1/(1 + exp(-x))`` without overflow."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def t2_rows(
    D0: np.ndarray,
    D1: np.ndarray,
    y0: np.ndarray,
    y0o: np.ndarray,
    y1: np.ndarray,
    y1o: np.ndarray,
    beta: float,
    order: int,
) -> tuple:
    """The two row losses of the ``T = 2`` softmax fit at row differences ``D0, D1`` (:func:`_softmax_fit_loss_t2`):
    ``(value, f'_0, f'_1, f''_0, f''_1)`` per node, the derivatives in ``D_a`` up to ``order`` (``None`` above it);
    ``y_a``/``y'_a`` the labels on/off the diagonal of row ``a``."""
    s0, s1 = _sigmoid(beta * D0), _sigmoid(beta * D1)
    a0, b0, a1, b1 = s0 - y0, 1.0 - s0 - y0o, s1 - y1, 1.0 - s1 - y1o
    val = a0 * a0 + b0 * b0 + a1 * a1 + b1 * b1
    if order == 0:
        return val, None, None, None, None
    sp0, sp1 = beta * s0 * (1.0 - s0), beta * s1 * (1.0 - s1)
    r0, r1 = a0 - b0, a1 - b1  # 2 s - 1 - y + y'
    f0, f1 = 2.0 * sp0 * r0, 2.0 * sp1 * r1
    if order == 1:
        return val, f0, f1, None, None
    ff0 = 2.0 * beta * sp0 * (1.0 - 2.0 * s0) * r0 + 4.0 * sp0 * sp0
    ff1 = 2.0 * beta * sp1 * (1.0 - 2.0 * s1) * r1 + 4.0 * sp1 * sp1
    return val, f0, f1, ff0, ff1


def _softmax_fit_loss_t2(
    h: np.ndarray, Y: np.ndarray, beta: float, order: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`softmax_fit_loss` at ``T = 2``, where every softmax row is a sigmoid.

    With ``h = (h_00, h_01, h_11)`` and ``M(h) = [[sqrt2 h_00, h_01], [h_01, sqrt2 h_11]]``, row
    ``a`` of the softmax is ``(s_a, 1 - s_a)`` (in the order (own, other) token) with
    ``s_a = sigmoid(beta D_a)``, ``D_0 = sqrt2 h_00 - h_01``, ``D_1 = sqrt2 h_11 - h_01``. The row
    loss is ``f_a = (s_a - y_a)^2 + (1 - s_a - y'_a)^2`` (``y_a`` the label on the diagonal,
    ``y'_a`` off it), so with ``s' = beta s (1 - s)``, ``s'' = beta s' (1 - 2 s)`` and
    ``r_a = 2 s_a - 1 - y_a + y'_a``: ``f' = 2 s' r``, ``f'' = 2 s'' r + 4 s'^2``, and
    ``grad = sum_a f'_a g_a``, ``hess = sum_a f''_a g_a g_a^T`` with ``g_0 = (sqrt2, -1, 0)``,
    ``g_1 = (0, -1, sqrt2)`` (the gradients of ``D_a``). All operations act on ``(N,)`` vectors.
    """
    N = h.shape[0]
    val, f0, f1, ff0, ff1 = t2_rows(
        SQRT2 * h[:, 0] - h[:, 1],
        SQRT2 * h[:, 2] - h[:, 1],
        Y[:, 0, 0],
        Y[:, 0, 1],
        Y[:, 1, 1],
        Y[:, 1, 0],
        beta,
        order,
    )
    if order == 0:
        return val, None, None
    grad = np.empty((N, 3))
    grad[:, 0] = SQRT2 * f0
    grad[:, 1] = -(f0 + f1)
    grad[:, 2] = SQRT2 * f1
    if order == 1:
        return val, grad, None
    hess = np.empty((N, 3, 3))
    hess[:, 0, 0] = 2.0 * ff0
    hess[:, 0, 1] = hess[:, 1, 0] = -SQRT2 * ff0
    hess[:, 0, 2] = hess[:, 2, 0] = 0.0
    hess[:, 1, 1] = ff0 + ff1
    hess[:, 1, 2] = hess[:, 2, 1] = -SQRT2 * ff1
    hess[:, 2, 2] = 2.0 * ff1
    return val, grad, hess


def _t2_row_curvatures(h: np.ndarray, Y: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """The second derivatives ``f''_a`` of the two row losses along ``D_a`` (:func:`_softmax_fit_loss_t2`)."""
    return t2_rows(
        SQRT2 * h[:, 0] - h[:, 1], SQRT2 * h[:, 2] - h[:, 1], Y[:, 0, 0], Y[:, 0, 1], Y[:, 1, 1], Y[:, 1, 0], beta, 2
    )[3:]


def softmax_t2_prox_convex(h: np.ndarray, Y: np.ndarray, beta: float, Sigma: float) -> np.ndarray:
    """Whether the prox objective's Hessian ``I/Sigma + H`` is positive definite at ``h`` (``T = 2``).

    With ``H = G F G^T`` (rank two, :func:`softmax_t2_prox_forms`) and ``v = G w + v_perp``,
    ``v^T (I + Sigma H) v = |v_perp|^2 + s^T ((G^T G)^{-1} + Sigma F) s`` with ``s = G^T G w``, so it is
    positive definite iff the ``2 x 2`` matrix ``(G^T G)^{-1} + Sigma F`` is, ``(G^T G)^{-1} = [[3, -1], [-1, 3]]/8``.
    """
    ff0, ff1 = _t2_row_curvatures(h, Y, beta)
    a, c = 0.375 + Sigma * ff0, 0.375 + Sigma * ff1
    return (a > 0) & (a * c > 0.015625)


#: ``c* = -min f''_a / beta^2`` over every row state and label at ``T = 2``: with labels ``y' = 1 - y`` (rows of a
#: softmax), ``f''/beta^2 = 4 s (1 - s) (1 - 2 s) (s - y) + 4 s^2 (1 - s)^2`` (:func:`t2_rows`), linear in ``y``, so
#: its minimum over ``y in [0, 1]`` sits at ``y = 0`` or ``1``; both give ``-0.2404088069094`` (at ``s = 0.8644``
#: and ``0.1356``; bounded scalar minimisation to 1e-14). Rounded up.
T2_ROW_CURVATURE_BOUND = 0.240408807


def softmax_t2_prox_convex_everywhere(beta: float, Sigma: float) -> bool:
    """Whether the ``T = 2`` prox objective ``|h - z|^2/(2 Sigma) + ell(h)`` is strictly convex for *every* ``z``
    and every label (then it has one minimum, and one Newton start finds it).

    Its Hessian ``(I + Sigma G F G^T)/Sigma`` is positive definite iff ``(G^T G)^{-1} + Sigma F`` is
    (:func:`softmax_t2_prox_convex`); the smallest eigenvalue of ``(G^T G)^{-1} = [[3, -1], [-1, 3]]/8`` is
    ``1/4`` and ``F = diag(f''_0, f''_1) >= -beta^2 c* I`` (:data:`T2_ROW_CURVATURE_BOUND`), so
    ``Sigma beta^2 c* < 1/4`` (``Sigma beta^2 < 1.0399``) suffices.
    """
    return Sigma * beta * beta * T2_ROW_CURVATURE_BOUND < 0.25


def softmax_t2_prox_forms(h: np.ndarray, Y: np.ndarray, beta: float, Sigma: float, V: np.ndarray) -> np.ndarray | None:
    """Node means ``Q[i, j] = mean_n V_i^T (I + Sigma H)^{-1} V_j`` at ``T = 2`` without solving.

    ``H = f''_0 g_0 g_0^T + f''_1 g_1 g_1^T`` has rank two (:func:`_softmax_fit_loss_t2`), so by the
    Woodbury identity ``(I + G D G^T)^{-1} = I - G D (I + G^T G D)^{-1} G^T`` with ``G = [g_0, g_1]``,
    ``G^T G = [[3, 1], [1, 3]]`` and ``D = Sigma diag(f''_0, f''_1)``: ``v^T (I + G D G^T)^{-1} w = v^T w -
    c(v)^T K c(w)`` with ``c(v) = G^T v`` and ``K = D (I + G^T G D)^{-1}`` (symmetric, ``2 x 2`` per node).
    ``V`` is ``(N, k, 3)``; ``None`` where some node's ``2 x 2`` system is singular.
    """
    ff0, ff1 = _t2_row_curvatures(h, Y, beta)
    d0, d1 = Sigma * ff0, Sigma * ff1
    a00, a11 = 1.0 + 3.0 * d0, 1.0 + 3.0 * d1
    det = a00 * a11 - d0 * d1
    if not np.all(np.abs(det) > 1e-12 * (np.abs(a00 * a11) + np.abs(d0 * d1))):
        return None
    k00, k01, k11 = d0 * a11 / det, -d0 * d1 / det, d1 * a00 / det
    C0 = SQRT2 * V[:, :, 0] - V[:, :, 1]  # (N, k): c_0 of every field
    C1 = SQRT2 * V[:, :, 2] - V[:, :, 1]
    N = h.shape[0]
    plain = np.tensordot(V, V, axes=([0, 2], [0, 2]))
    KC0 = k00[:, None] * C0 + k01[:, None] * C1  # K c, row by row
    KC1 = k01[:, None] * C0 + k11[:, None] * C1
    return (plain - C0.T @ KC0 - C1.T @ KC1) / N


def _softmax_fit_loss_t2_untied(
    h: np.ndarray, Y: np.ndarray, beta: float, order: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`softmax_fit_loss` at ``T = 2`` in untied coordinates ``h = (s_00, s_01, s_11, w)``.

    ``H = [[sqrt2 s_00, s_01 + w], [s_01 - w, sqrt2 s_11]]``, so the row differences are
    ``D_0 = sqrt2 s_00 - s_01 - w`` and ``D_1 = sqrt2 s_11 - s_01 + w``, with gradients
    ``g_0 = (sqrt2, -1, 0, -1)``, ``g_1 = (0, -1, sqrt2, 1)``; the rest is :func:`_softmax_fit_loss_t2`'s.
    """
    g = np.array([[SQRT2, -1.0, 0.0, -1.0], [0.0, -1.0, SQRT2, 1.0]])
    Dm = h @ g.T
    s0, s1 = _sigmoid(beta * Dm[:, 0]), _sigmoid(beta * Dm[:, 1])
    a0, b0, a1, b1 = s0 - Y[:, 0, 0], 1.0 - s0 - Y[:, 0, 1], s1 - Y[:, 1, 1], 1.0 - s1 - Y[:, 1, 0]
    val = a0 * a0 + b0 * b0 + a1 * a1 + b1 * b1
    if order == 0:
        return val, None, None
    sp0, sp1 = beta * s0 * (1.0 - s0), beta * s1 * (1.0 - s1)
    r0, r1 = a0 - b0, a1 - b1
    f = np.stack([2.0 * sp0 * r0, 2.0 * sp1 * r1], axis=1)
    grad = f @ g
    if order == 1:
        return val, grad, None
    ff0 = 2.0 * beta * sp0 * (1.0 - 2.0 * s0) * r0 + 4.0 * sp0 * sp0
    ff1 = 2.0 * beta * sp1 * (1.0 - 2.0 * s1) * r1 + 4.0 * sp1 * sp1
    hess = ff0[:, None, None] * np.outer(g[0], g[0]) + ff1[:, None, None] * np.outer(g[1], g[1])
    return val, grad, hess
