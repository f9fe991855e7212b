"""The softmax prox's Newton systems for ``T >= 3`` in row coordinates: diagonal plus rank ``2T`` (Woodbury).

The fit loss ``ell(h) = sum_a ||softmax(beta H_a) - Y_a||^2`` (``H = M(h)``, :mod:`~singlehead.numerics.attention_maps`)
couples only the logits of one row, so in the ``T^2`` row coordinates its Hessian is block diagonal, one
``T x T`` block per row (:func:`~singlehead.numerics.attention_maps.softmax_fit_loss`, Notes):

    Hr_a = 2 beta^2 [diag(delta_a) + c_a A_a A_a^T - v_a A_a^T - A_a v_a^T]
         = 2 beta^2 [diag(delta_a) + u+_a u+_a^T - u-_a u-_a^T],

with ``delta = A^2 + w - s A``, ``c = |A|^2 + 2 s``, ``v = A^2 + w`` and ``u+-`` from the eigenvalues
``(c +- sqrt(c^2 + 4))/2`` of ``[[c, -1], [-1, 0]]`` (one positive, one negative). The symmetric fields tie
the rows by the fixed map ``M``: the Hessian in ``h`` is ``M^T Hr M``. ``M`` sends a diagonal in row
coordinates to a diagonal in ``h`` and the rank-one terms of row ``a`` to a vector supported on the ``T``
pairs ``{a, e}``, so the Newton matrix of the prox is

    Mk = D + W+ W+^T - W- W-^T,     D = 1/Sigma + 2 beta^2 M^T diag(delta) M   (diagonal, K entries),

with ``W+-`` of size ``K x T``, column ``a`` supported on the pairs of row ``a``. Where ``D > 0``, Woodbury
with the ``2T x 2T`` capacitance ``S = diag(I, -I) + W^T D^{-1} W`` solves it; the blocks of ``S`` are
``T x T`` matrices formed in ``O(T^2)`` (two columns overlap on one pair only) and ``S`` is eliminated
through ``F = I + W+^T D^{-1} W+`` (positive definite) and its Schur complement ``E = I - W-^T (D + W+
W+^T)^{-1} W-``, which is positive definite exactly when ``Mk`` is (Sylvester's law of inertia). So a
Newton step costs ``O(T^3)`` per node (two ``T x T`` factorisations and a few ``T x T`` products) and
``O(T^2) = O(K)`` memory, against ``O(K^3) = O(T^6)`` and ``O(K^2)`` for the dense system.

Nodes where ``D`` is not safely positive (``D <= 0.01/Sigma`` somewhere) or ``Mk`` is not positive definite
take the dense safeguarded step of :func:`~singlehead.numerics.newton_steps.hessian_direction`
(Cholesky, else saddle-free) up to ``K = 36`` (``T = 8``), built from the same structure in
``O(K^2 T)``; above, a Levenberg-Marquardt step ``-(Mk + mu I)^{-1} g`` with the smallest ``mu`` of
``mu_0 10^j`` that makes ``Mk + mu I`` positive definite (``mu_0 = 1/Sigma`` plus what lifts ``D`` to
``0.01/Sigma``). The Newton iteration runs on chunks of nodes sized to a quarter of the memory limit
(:func:`newton_chunk_nodes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from singlehead.numerics.limits import memory_limit
from singlehead.numerics.newton_steps import chol_solve_many, hessian_direction, run_newton
from singlehead.numerics.row_reductions import softmax_rows

__all__ = [
    "pair_index",
    "to_rows",
    "from_rows",
    "RowCurvature",
    "row_derivatives",
    "row_fit_value",
    "structured_factor",
    "structured_solve",
    "newton_rows",
    "newton_chunk_nodes",
    "newton_chunk_bytes",
    "dense_newton_matrix",
    "prox_convex_rows",
    "tangent_solve_rows",
    "hessian_trace_rows",
    "DENSE_FALLBACK_K",
    "STRUCTURED_MIN_T",
]

SQRT2 = math.sqrt(2.0)
#: the softmax channels use these Newton systems from this ``T`` on (below, the dense ``K x K`` system is faster)
STRUCTURED_MIN_T = 6
#: largest ``K`` at which a node the Woodbury step cannot serve takes the dense safeguarded step (``T = 8``)
DENSE_FALLBACK_K = 36
# D must exceed this times 1/Sigma for the Woodbury step (else the dense or Levenberg-Marquardt step)
_D_FLOOR = 1e-2
# doubles per node and start of one Newton chunk: K-vectors (h, z, g, p, candidates, D) and (T, T) arrays
# (labels, softmax, residual, curvature, Woodbury blocks and their temporaries)
_CHUNK_K, _CHUNK_T2 = 12, 30


@cache
def pair_index(T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(kidx, wgt, iu, ju, diag)``: the pair index ``kidx[a, e]`` of entry ``(a, e)``, its weight in ``M``
    (``sqrt2`` on the diagonal, 1 off it), ``numpy.triu_indices(T)`` and which pairs are diagonal."""
    iu, ju = np.triu_indices(T)
    kidx = np.empty((T, T), dtype=np.intp)
    kidx[iu, ju] = np.arange(iu.size)
    kidx[ju, iu] = np.arange(iu.size)
    wgt = np.ones((T, T))
    wgt[np.arange(T), np.arange(T)] = SQRT2
    for a in (kidx, wgt, iu, ju):
        a.setflags(write=False)
    diag = iu == ju
    diag.setflags(write=False)
    return kidx, wgt, iu, ju, diag


def to_rows(h: np.ndarray, T: int) -> np.ndarray:
    """``M(h)``: ``(N, K) -> (N, T, T)`` by a gather (``O(K)`` per node)."""
    kidx, wgt = pair_index(T)[:2]
    return h[:, kidx] * wgt


def from_rows(G: np.ndarray) -> np.ndarray:
    """``M^T G``: ``(N, T, T) -> (N, K)``, ``G_ab + G_ba`` off the diagonal and ``sqrt2 G_aa`` on it."""
    T = G.shape[-1]
    _, _, iu, ju, diag = pair_index(T)
    out = G[:, iu, ju] + G[:, ju, iu]
    d = np.arange(T)
    out[:, diag] = SQRT2 * G[:, d, d]
    return out


def row_fit_value(h: np.ndarray, Y: np.ndarray, beta: float) -> np.ndarray:
    """``ell(h) = ||softmax_rows(beta M(h)) - Y||_F^2`` per node."""
    R = softmax_rows(beta * to_rows(h, Y.shape[-1])) - Y
    return np.einsum("nab,nab->n", R, R)


@dataclass
class RowCurvature:
    """The loss Hessian at some ``h`` in the form ``2 beta^2 [M^T diag(delta) M + W+ W+^T - W- W-^T]`` (module
    docstring):
    ``Dl = 2 beta^2 M^T diag(delta) M`` (``(N, K)``) and the row vectors ``Up, Um`` (``(N, T, T)``, row ``a`` is
    ``sqrt(2) beta u+-_a``)."""

    Dl: np.ndarray
    Up: np.ndarray
    Um: np.ndarray

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.Dl, self.Up, self.Um


def row_derivatives(h: np.ndarray, Y: np.ndarray, beta: float, order: int = 2):
    """``(value, grad, RowCurvature or None)`` of the fit loss at ``h`` (``order`` 1 or 2), ``O(T^2)`` per node."""
    T = Y.shape[-1]
    A = softmax_rows(beta * to_rows(h, T))
    R = A - Y
    val = np.einsum("nab,nab->n", R, R)
    w = R * A
    s = w.sum(axis=2, keepdims=True)
    ws = w - s * A
    grad = (2.0 * beta) * from_rows(ws)
    if order < 2:
        return val, grad, None
    A2 = A * A
    delta = A2 + ws
    c = A2.sum(axis=2, keepdims=True) + 2.0 * s
    v = A2 + w
    r = np.sqrt(c * c + 4.0)
    lp, lm = 0.5 * (c + r), 0.5 * (c - r)  # lp > 0 > lm, lp lm = -1
    scale = SQRT2 * beta
    Up = (scale * np.sqrt(lp / (1.0 + lm * lm))) * (A + lm * v)
    Um = (scale * np.sqrt(-lm / (1.0 + lp * lp))) * (A + lp * v)
    _, _, iu, ju, _ = pair_index(T)
    Dl = (2.0 * beta * beta) * (delta[:, iu, ju] + delta[:, ju, iu])
    return val, grad, RowCurvature(Dl, Up, Um)


def _gram(Us: np.ndarray, Ut: np.ndarray, rho_rows: np.ndarray) -> np.ndarray:
    """``W_s^T diag(rho) W_t`` (``(N, T, T)``): ``Us[a,b] Ut[b,a] rho[a,b]``, plus ``sum_e Us[a,e] Ut[a,e] rho[a,e]``
    on the diagonal (columns ``a != b`` overlap on the pair ``{a, b}`` only)."""
    G = Us * Ut.swapaxes(1, 2) * rho_rows
    d = np.arange(Us.shape[-1])
    G[:, d, d] += np.einsum("nae,nae,nae->na", Us, Ut, rho_rows)
    return G


@dataclass
class StructuredFactor:
    """The eliminated capacitance of ``Mk = diag(D) + W+ W+^T - W- W-^T`` on a batch of nodes (module docstring)."""

    rho: np.ndarray  # 1/D, (N, K)
    Up: np.ndarray
    Um: np.ndarray
    F: np.ndarray  # I + W+^T D^-1 W+
    B: np.ndarray  # W+^T D^-1 W-
    E: np.ndarray  # I - W-^T (D + W+ W+^T)^-1 W-
    X: np.ndarray  # F^-1 B

    def take(self, idx: np.ndarray) -> StructuredFactor:
        """The factor of the nodes ``idx``."""
        return StructuredFactor(
            self.rho[idx], self.Up[idx], self.Um[idx], self.F[idx], self.B[idx], self.E[idx], self.X[idx]
        )


# up to this T the T x T systems are solved by a Cholesky vectorised over the nodes (entry by entry), above by
# LAPACK per node (whose per-matrix overhead dominates for small matrices)
_VECTOR_CHOL_MAX_T = 10


def _solve_small(A: np.ndarray, B: np.ndarray, spd: bool) -> np.ndarray:
    """``A^{-1} B`` for a batch of ``T x T`` matrices and ``(N, T, R)`` right-hand sides; ``spd``: ``A`` is known to be
    positive definite (then a vectorised Cholesky for small ``T``)."""
    if spd and A.shape[-1] <= _VECTOR_CHOL_MAX_T:
        X, ok = chol_solve_many(A, B, np.zeros(A.shape[0]))
        if ok.all():
            return X
        bad = np.nonzero(~ok)[0]
        X[bad] = np.linalg.solve(A[bad], B[bad])
        return X
    return np.linalg.solve(A, B)


def structured_factor(D: np.ndarray, Up: np.ndarray, Um: np.ndarray) -> tuple[StructuredFactor, np.ndarray]:
    """Factor ``Mk = diag(D) + W+ W+^T - W- W-^T`` (``D > 0`` on every node): ``(factor, pd)``, ``pd[n]`` whether ``Mk``
    is positive definite at node ``n`` (its capacitance ``E`` has a Cholesky factor with pivots above ``1e-10``)."""
    T = Up.shape[-1]
    kidx = pair_index(T)[0]
    rho = 1.0 / D
    rr = rho[:, kidx]
    eye = np.eye(T)
    F = _gram(Up, Up, rr) + eye
    B = _gram(Up, Um, rr)
    X = _solve_small(F, B, spd=bool(np.all(D > 0)))
    E = eye - _gram(Um, Um, rr) + B.swapaxes(1, 2) @ X
    return StructuredFactor(rho, Up, Um, F, B, E, X), _positive_definite(E)


def _positive_definite(E: np.ndarray) -> np.ndarray:
    """Per matrix of the batch, whether it is safely positive definite (smallest eigenvalue above ``1e-10``)."""
    if E.shape[-1] <= _VECTOR_CHOL_MAX_T:
        return chol_solve_many(E, np.zeros(E.shape[:2] + (1,)), np.full(E.shape[0], 1e-10))[1]
    try:
        L = np.linalg.cholesky(E)
        return np.all(np.diagonal(L, axis1=1, axis2=2) ** 2 > 1e-10, axis=1)
    except np.linalg.LinAlgError:
        return np.linalg.eigvalsh(E)[:, 0] > 1e-10


def structured_solve(f: StructuredFactor, b: np.ndarray) -> np.ndarray:
    """``Mk^{-1} b`` for ``b`` ``(N, K)`` or ``(N, K, R)`` (Woodbury through ``F`` and ``E``; ``E`` need only be
    nonsingular)."""
    many = b.ndim == 3
    bb = b if many else b[:, :, None]
    T = f.Up.shape[-1]
    kidx, wgt = pair_index(T)[:2]
    y = f.rho[:, :, None] * bb  # D^-1 b
    Y = y[:, kidx, :] * wgt[None, :, :, None]  # rows of each right-hand side, (N, T, T, R)
    bp = np.einsum("nae,naer->nar", f.Up, Y)  # W+^T D^-1 b
    bm = np.einsum("nae,naer->nar", f.Um, Y)
    spd = bool(np.all(f.rho > 0))
    t = _solve_small(f.F, bp, spd)
    rm = -_solve_small(f.E, bm - f.B.swapaxes(1, 2) @ t, spd)
    rp = t - f.X @ rm
    Z = f.Up[:, :, :, None] * rp[:, :, None, :] + f.Um[:, :, :, None] * rm[:, :, None, :]  # (N, T, T, R)
    _, _, iu, ju, diag = pair_index(T)
    WZ = Z[:, iu, ju, :] + Z[:, ju, iu, :]
    d = np.arange(T)
    WZ[:, diag, :] = SQRT2 * Z[:, d, d, :]
    x = y - f.rho[:, :, None] * WZ
    return x if many else x[:, :, 0]


def dense_newton_matrix(D: np.ndarray, Up: np.ndarray, Um: np.ndarray) -> np.ndarray:
    """``diag(D) + W+ W+^T - W- W-^T`` as dense ``(n, K, K)`` matrices (``O(K^2 T)`` per node; small batches)."""
    n, T = Up.shape[0], Up.shape[-1]
    K = D.shape[1]
    kidx, wgt = pair_index(T)[:2]
    cols = np.broadcast_to(np.arange(T)[:, None], (T, T))
    Wp = np.zeros((n, K, T))
    Wm = np.zeros((n, K, T))
    Wp[:, kidx, cols] = Up * wgt
    Wm[:, kidx, cols] = Um * wgt
    M = Wp @ Wp.swapaxes(1, 2) - Wm @ Wm.swapaxes(1, 2)
    k = np.arange(K)
    M[:, k, k] += D
    return M


def _direction(g: np.ndarray, curv: tuple, inv: np.ndarray) -> np.ndarray:
    """Newton direction ``-Mk^{-1} g`` (module docstring: Woodbury, else dense safeguarded or Levenberg-Marquardt)."""
    Dl, Up, Um = curv
    D = Dl + inv[:, None]
    okD = np.all(D > _D_FLOOR * inv[:, None], axis=1)
    p = np.empty_like(g)
    good = np.nonzero(okD)[0]
    bad = np.nonzero(~okD)[0]
    if good.size:
        f, pd = structured_factor(D[good], Up[good], Um[good])
        ok = np.nonzero(pd)[0]
        p[good[ok]] = -structured_solve(f.take(ok) if ok.size < good.size else f, g[good[ok]])
        bad = np.concatenate([bad, good[~pd]])
    if bad.size:
        p[bad] = _fallback_direction(g[bad], D[bad], Up[bad], Um[bad], inv[bad])
    return p


def _fallback_direction(g: np.ndarray, D: np.ndarray, Up: np.ndarray, Um: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """The step of the nodes the Woodbury Newton step cannot serve (module docstring)."""
    if D.shape[1] <= DENSE_FALLBACK_K:
        return hessian_direction(g, (dense_newton_matrix(D, Up, Um),), inv)
    p = np.empty_like(g)
    mu = np.maximum(0.0, _D_FLOOR * inv - D.min(axis=1)) + inv
    todo = np.arange(g.shape[0])
    for _ in range(30):
        f, pd = structured_factor(D[todo] + mu[todo, None], Up[todo], Um[todo])
        ok = np.nonzero(pd)[0]
        if ok.size:
            p[todo[ok]] = -structured_solve(f.take(ok), g[todo[ok]])
        todo = todo[~pd]
        if not todo.size:
            break
        mu[todo] *= 10.0
    if todo.size:  # not reached for finite curvature: the shift dominates after a few rounds
        p[todo] = -g[todo] / mu[todo, None]
    return p


def newton_chunk_nodes(T: int, K: int) -> int:
    """Nodes (times starts) per chunk of the Newton iteration: a quarter of ``memory_limit`` over the bytes of
    one node's working arrays (``12 K + 30 T^2`` doubles)."""
    per = 8 * (_CHUNK_K * K + _CHUNK_T2 * T * T)
    return max(1, (memory_limit() // 4) // per)


def newton_chunk_bytes(T: int, K: int, n_rows: int | None = None) -> int:
    """Bytes of one Newton chunk on ``n_rows`` node-starts (default: a full chunk)."""
    per = 8 * (_CHUNK_K * K + _CHUNK_T2 * T * T)
    n = newton_chunk_nodes(T, K)
    return per * (n if n_rows is None else min(n, n_rows))


def newton_rows(beta: float) -> Callable:
    """The ``T >= 3`` Newton runner for inverse temperature ``beta``: ``run(h0, z, Y, Sig, tol, max_iter) -> (h,
    objective, grad_norm, iterations, done)``, the contract of the generic Newton of ``singlehead.numerics.prox``
    (``run_newton`` with the structured curvature and ``_direction``),
    run on chunks of nodes (:func:`newton_chunk_nodes`)."""

    def derivs(h: np.ndarray, Y: np.ndarray, inv: np.ndarray) -> tuple:
        val, grad, cu = row_derivatives(h, Y, beta, 2)
        return val, grad, cu.arrays()

    def value(h: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return row_fit_value(h, Y, beta)

    def run(h0: np.ndarray, z: np.ndarray, Y: np.ndarray, Sig: np.ndarray, tol: float, max_iter: int):
        N, K = z.shape
        chunk = newton_chunk_nodes(Y.shape[-1], K)
        if N <= chunk:
            return run_newton(h0, z, Y, Sig, tol, max_iter, derivs, value, _direction)
        parts = [
            run_newton(
                h0[i : i + chunk],
                z[i : i + chunk],
                Y[i : i + chunk],
                Sig[i : i + chunk],
                tol,
                max_iter,
                derivs,
                value,
                _direction,
            )
            for i in range(0, N, chunk)
        ]
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            max(p[3] for p in parts),
            np.concatenate([p[4] for p in parts]),
        )

    return run


def prox_convex_rows(h: np.ndarray, Y: np.ndarray, beta: float, Sigma: float) -> np.ndarray:
    """Per node, whether ``I/Sigma + H(h)`` is positive definite (structured; ``T >= 3``). Nodes where ``D`` is not
    safely positive are tested on the dense matrix up to ``K = DENSE_FALLBACK_K`` and reported not convex above."""
    inv = 1.0 / Sigma
    out = np.zeros(h.shape[0], dtype=bool)
    for i in range(0, h.shape[0], newton_chunk_nodes(Y.shape[-1], h.shape[1])):
        sl = slice(i, i + newton_chunk_nodes(Y.shape[-1], h.shape[1]))
        _, _, cu = row_derivatives(h[sl], Y[sl], beta, 2)
        D = cu.Dl + inv
        okD = np.all(D > _D_FLOOR * inv, axis=1)
        res = np.zeros(D.shape[0], dtype=bool)
        good = np.nonzero(okD)[0]
        if good.size:
            res[good] = structured_factor(D[good], cu.Up[good], cu.Um[good])[1]
        bad = np.nonzero(~okD)[0]
        if bad.size and D.shape[1] <= DENSE_FALLBACK_K:
            M = dense_newton_matrix(D[bad], cu.Up[bad], cu.Um[bad])
            res[bad] = np.linalg.eigvalsh(M)[:, 0] > 1e-12 * inv
        out[sl] = res
    return out


def tangent_solve_rows(h: np.ndarray, Y: np.ndarray, beta: float, Sigma: float, B: np.ndarray) -> np.ndarray | None:
    """``(I + Sigma H)^{-1} B`` per node (``B`` ``(N, K, R)``), ``H`` the fit loss's Hessian at ``h`` (structured;
    ``T >= 3``): ``Mk^{-1} B / Sigma`` with ``Mk = I/Sigma + H``. Nodes where ``D`` is not safely away from 0 are solved
    densely up to ``K = DENSE_FALLBACK_K``; ``None`` where a system is singular (or such a node is above it)."""
    inv = 1.0 / Sigma
    N, K = h.shape
    X = np.empty_like(B, dtype=float)
    step = newton_chunk_nodes(Y.shape[-1], K)
    for i in range(0, N, step):
        sl = slice(i, i + step)
        _, _, cu = row_derivatives(h[sl], Y[sl], beta, 2)
        D = cu.Dl + inv
        okD = np.all(np.abs(D) > _D_FLOOR * inv, axis=1)
        good, bad = np.nonzero(okD)[0], np.nonzero(~okD)[0]
        Xs = np.empty((D.shape[0],) + B.shape[1:])
        try:
            if good.size:
                f, _ = structured_factor(D[good], cu.Up[good], cu.Um[good])
                Xs[good] = structured_solve(f, B[sl][good]) / Sigma
            if bad.size:
                if K > DENSE_FALLBACK_K:
                    return None
                Xs[bad] = np.linalg.solve(dense_newton_matrix(D[bad], cu.Up[bad], cu.Um[bad]), B[sl][bad]) / Sigma
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(Xs)):
            return None
        X[sl] = Xs
    return X


def hessian_trace_rows(h: np.ndarray, Y: np.ndarray, beta: float, Sigma: float) -> np.ndarray | None:
    """Per node ``tr[H (I + Sigma H)^{-1}]`` (``Sigma = 0``: ``tr H``), ``H`` the fit loss's Hessian at ``h``
    (``T >= 3``).

    ``tr H`` from the structure in ``O(T^2)``: ``sum(Dl) + |U+|^2 - |U-|^2`` plus the diagonal entries once more
    (weight ``sqrt2``). For ``Sigma > 0``, ``(K - tr (I + Sigma H)^{-1})/Sigma`` with the inverse's trace from
    :func:`tangent_solve_rows` on blocks of unit vectors (``O(K T^2)`` per node). ``None`` where a system is singular.
    """
    N, K = h.shape
    if Sigma == 0:
        _, _, cu = row_derivatives(h, Y, beta, 2)
        d = np.arange(Y.shape[-1])
        return (
            cu.Dl.sum(axis=1)
            + np.einsum("nae,nae->n", cu.Up, cu.Up)
            - np.einsum("nae,nae->n", cu.Um, cu.Um)
            + (cu.Up[:, d, d] ** 2 - cu.Um[:, d, d] ** 2).sum(axis=1)
        )
    tr = np.zeros(N)
    block = 64
    for j in range(0, K, block):
        cols = np.arange(j, min(K, j + block))
        E = np.zeros((N, K, cols.size))
        E[:, cols, np.arange(cols.size)] = 1.0
        X = tangent_solve_rows(h, Y, beta, Sigma, E)
        if X is None:
            return None
        tr += X[:, cols, np.arange(cols.size)].sum(axis=1)
    return (K - tr) / Sigma
