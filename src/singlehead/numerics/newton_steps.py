"""Batched building blocks of the prox's safeguarded Newton (``singlehead.numerics.prox``), private.

Every function acts on a batch of ``N`` independent nodes with ``K``-vectors (``K <= 10``) and
updates its arrays in place where it says so: the Newton loop runs on thousands of nodes per state
evolution evaluation, and in-place updates spare it a copy of the ``(N, K, K)`` Hessians per step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FitLoss = Callable[[np.ndarray, np.ndarray, int], tuple]
"""``loss(h, labels, order) -> (value, grad or None, hess or None)``, batched over nodes."""


def _chol_factor(Ht: np.ndarray, floor: np.ndarray) -> tuple[list, np.ndarray]:
    """Cholesky factor of the entry-major batch ``Ht`` (``(K, K, N)``): ``L[i][j]`` (``i >= j``) as
    ``(N,)`` vectors, and ``ok`` (every pivot above ``floor``)."""
    K = Ht.shape[0]
    L = [[None] * K for _ in range(K)]  # L[i][j], i >= j: (N,) vectors
    ok = np.ones(Ht.shape[2], dtype=bool)
    for j in range(K):
        piv = Ht[j, j].copy()
        for k in range(j):
            piv -= L[j][k] * L[j][k]
        good = piv > floor
        ok &= good
        ljj = np.sqrt(np.where(good, piv, 1.0))
        L[j][j] = ljj
        for i in range(j + 1, K):
            v = Ht[i, j].copy()
            for k in range(j):
                v -= L[i][k] * L[j][k]
            L[i][j] = v / ljj
    return L, ok


def _chol_apply(L: list, bt: np.ndarray) -> np.ndarray:
    """``x`` with ``L L^T x = b`` for an entry-major right-hand side ``bt`` (``(K, N)``)."""
    K = len(L)
    y = [None] * K
    for j in range(K):  # forward substitution L y = b
        v = bt[j].copy()
        for k in range(j):
            v -= L[j][k] * y[k]
        y[j] = v / L[j][j]
    xt = np.empty_like(bt)
    for j in reversed(range(K)):  # back substitution L^T x = y
        v = y[j]
        for k in range(j + 1, K):
            v = v - L[k][j] * xt[k]
        xt[j] = v / L[j][j]
    return xt


def chol_solve(H: np.ndarray, b: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``H x = b`` for a batch of small SPD matrices by a vectorised Cholesky.

    Returns ``(x, ok)``; ``ok[n]`` is False when a pivot of ``H[n]`` fell below ``floor[n]``
    (not safely positive definite), in which case ``x[n]`` is meaningless. The loops run over
    the ``K(K+1)/2`` matrix entries (``K <= 10``), each step a whole-batch vector operation.
    """
    # entries as contiguous (N,) rows: every vector operation below reads unit-stride memory; a matrix that is
    # not safely positive definite may overflow in its own column, which its ``ok = False`` tells the caller
    # to discard, so those floating-point warnings carry no information
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        L, ok = _chol_factor(np.ascontiguousarray(H.transpose(1, 2, 0)), floor)
        x = np.ascontiguousarray(_chol_apply(L, np.ascontiguousarray(b.T)).T)
    return x, ok


def chol_solve_many(H: np.ndarray, B: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`chol_solve` for several right-hand sides ``B`` (``(N, K, R)``), factorising once."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # see chol_solve: flagged rows are discarded
        L, ok = _chol_factor(np.ascontiguousarray(H.transpose(1, 2, 0)), floor)
        Bt = np.ascontiguousarray(B.transpose(2, 1, 0))  # (R, K, N)
        X = np.stack([_chol_apply(L, Bt[r]) for r in range(Bt.shape[0])])
    return np.ascontiguousarray(X.transpose(2, 1, 0)), ok


def rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("nk,nk->n", a, b)


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it can be updated in place, else a copy (a loss may return read-only broadcasts)."""
    return a if a.flags.writeable else a.copy()


Derivs = Callable[[np.ndarray, Any, np.ndarray], tuple]
"""``derivs(h, labels, inv) -> (fit, grad, curv)``: the fit term, its (writable) gradient and the
curvature state the direction function takes (a tuple of arrays with a leading node axis), at
prox curvature ``inv = 1/Sigma``."""


def hessian_derivs(loss: FitLoss) -> Derivs:
    """:data:`Derivs` of a loss with a dense Hessian: the curvature is ``(H + inv I,)``."""

    def derivs(h: np.ndarray, labels: Any, inv: np.ndarray) -> tuple:
        fit, g, H = loss(h, labels, 2)
        H = _writable(H)
        add_diagonal(H, inv)
        return fit, _writable(g), (H,)

    return derivs


def hessian_direction(g: np.ndarray, curv: tuple, inv: np.ndarray) -> np.ndarray:
    """Newton direction ``-(H + inv I)^{-1} g``: batched Cholesky where the Hessian is positive definite,
    else a saddle-free step (``|eigenvalues|``, floored relative to the prox curvature ``inv``)."""
    (Hs,) = curv
    p, pd = chol_solve(Hs, -g, 1e-8 * inv)
    bad = np.nonzero(~pd)[0]
    if bad.size:
        p[bad] = saddle_free_step(Hs[bad], g[bad], inv[bad])
    return p


def saddle_free_step(H: np.ndarray, g: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """``-|H|^{-1} g`` per node for indefinite (or nearly singular) ``H`` (``(n, K, K)``): the eigenvalues'
    absolute values, floored at ``1e-3 inv`` (relative to the prox curvature ``inv = 1/Sigma``)."""
    lam, V = np.linalg.eigh(H)
    lam = np.maximum(np.abs(lam), 1e-3 * inv[:, None])
    return -np.einsum("nkl,nl->nk", V, np.einsum("nlk,nl->nk", V, g) / lam)


def _backtrack(
    todo: np.ndarray,
    h: np.ndarray,
    p: np.ndarray,
    f: np.ndarray,
    slope: np.ndarray,
    zz: np.ndarray,
    YY: Any,
    inv: np.ndarray,
    value: Callable[[np.ndarray, Any], np.ndarray],
) -> np.ndarray:
    """Armijo backtracking by halvings on the nodes ``todo``, updating ``h`` in place; returns the
    nodes whose line search failed (at machine precision)."""
    t = np.full(todo.size, 0.5)
    for _ in range(40):
        if todo.size == 0:
            break
        cand = h[todo] + t[:, None] * p[todo]
        dt = cand - zz[todo]
        fc = np.einsum("nk,nk->n", dt, dt) / (2.0 * (1.0 / inv[todo])) + value(cand, YY[todo])
        ok2 = fc <= f[todo] + 1e-4 * t * slope[todo] + 1e-15 * np.abs(f[todo])
        h[todo[ok2]] = cand[ok2]
        todo, t = todo[~ok2], 0.5 * t[~ok2]
    return todo


def add_diagonal(H: np.ndarray, inv: np.ndarray) -> None:
    """``H[n] += inv[n] I`` in place (the prox curvature ``1/Sigma``; no ``(N, K, K)`` temporary)."""
    k = np.arange(H.shape[1])
    H[:, k, k] += inv[:, None]


def take_step(
    h: np.ndarray,
    p: np.ndarray,
    f: np.ndarray,
    g: np.ndarray,
    curv: tuple,
    slope: np.ndarray,
    final: np.ndarray,
    zz: np.ndarray,
    YY: Any,
    inv: np.ndarray,
    derivs: Derivs,
    value: Callable[[np.ndarray, Any], np.ndarray],
) -> tuple:
    """One Newton step along ``p`` on every node: ``(h, f, g, curv, todo)`` after it.

    ``f, g, curv`` are the prox objective, its gradient and the curvature state (:data:`Derivs`)
    at ``h``; ``slope = <g, p>``; ``final`` marks the nodes whose full step is taken without a
    line search. The full step is tried first, with derivatives (accepted for most nodes); the
    rest backtrack by halvings (``value(h, labels)``: the fit term alone). ``todo`` are the nodes
    whose line search failed (at machine precision). The returned arrays may share memory with
    the inputs.
    """
    cand = h + p
    fit, gc, cc = derivs(cand, YY, inv)
    dc = cand - zz
    fc = 0.5 * inv * rowdot(dc, dc) + fit
    ok = final | (fc <= f + 1e-4 * slope + 1e-15 * np.abs(f))
    gc += inv[:, None] * dc
    rejected = np.nonzero(~ok)[0]
    if rejected.size:  # keep the current state of the nodes whose full step failed
        cand[rejected], fc[rejected], gc[rejected] = h[rejected], f[rejected], g[rejected]
        for c, c0 in zip(cc, curv):
            c[rejected] = c0[rejected]
    h, f, g, curv = cand, fc, gc, cc
    # ... then vectorised backtracking (halvings) on the rest
    todo = _backtrack(rejected, h, p, f, slope, zz, YY, inv, value)
    jb = rejected[~np.isin(rejected, todo)]
    if jb.size:
        fit, gg, cb = derivs(h[jb], YY[jb], inv[jb])
        db = h[jb] - zz[jb]
        f[jb] = 0.5 * inv[jb] * rowdot(db, db) + fit
        g[jb] = gg + inv[jb, None] * db
        for c, cn in zip(curv, cb):
            c[jb] = cn
    return h, f, g, curv, todo


def run_newton(
    h0: np.ndarray,
    z: np.ndarray,
    Y: Any,
    Sig: np.ndarray,
    tol: float,
    max_iter: int,
    derivs: Derivs,
    value: Callable[[np.ndarray, Any], np.ndarray],
    direction: Callable[[np.ndarray, tuple, np.ndarray], np.ndarray],
    z_norm: np.ndarray | None = None,
) -> tuple:
    """Safeguarded Newton from ``h0`` on all nodes; returns ``(h, objective, grad_norm, iterations, done)``.

    ``derivs``/``value`` give the fit term's derivatives and value per node (labels ``Y``, leading
    node axis), ``direction(g, curv, inv)`` the Newton direction from the curvature state. A node is
    done when its gradient is below ``tol (1 + ||z||/Sigma)``, its Newton decrement reached round-off
    level, or its line search failed (machine precision). The state of the nodes still iterating is
    kept in compacted arrays (one gather per iteration in which some node finished), so late
    iterations cost in proportion to the nodes left. ``z_norm``: the ``||z||`` of the threshold when
    the iteration runs in reduced coordinates (default ``||z||`` of the ``z`` given).
    """
    inv_all = 1.0 / Sig
    fit, g, curv = derivs(h0, Y, inv_all)
    d = h0 - z
    f = 0.5 * inv_all * rowdot(d, d) + fit
    g = g + inv_all[:, None] * d
    gn = np.sqrt(rowdot(g, g))
    thr_all = tol * (1.0 + (np.sqrt(rowdot(z, z)) if z_norm is None else z_norm) * inv_all)
    h_out, f_out, gn_out = h0.copy(), f.copy(), gn.copy()
    done_out = gn <= thr_all
    ids = np.nonzero(~done_out)[0]
    h, zz, YY, inv, thr = h0[ids], z[ids], Y[ids], inv_all[ids], thr_all[ids]
    f, g, curv = f[ids], g[ids], tuple(c[ids] for c in curv)
    it = 0
    while ids.size and it < max_iter:
        it += 1
        p = direction(g, curv, inv)
        slope = rowdot(g, p)
        # Newton decrement at round-off level: nothing left to gain; take that last full step
        # without line search (it only polishes h) and stop these nodes
        final = -slope <= 1e-15 * (1.0 + np.abs(f))
        h, f, g, curv, todo = take_step(h, p, f, g, curv, slope, final, zz, YY, inv, derivs, value)
        gn = np.sqrt(rowdot(g, g))
        finished = final | (gn <= thr)
        finished[todo] = True  # line search failed: at machine precision
        if finished.any():
            fi = np.nonzero(finished)[0]
            out = ids[fi]
            h_out[out], f_out[out], gn_out[out], done_out[out] = h[fi], f[fi], gn[fi], True
            keep = np.nonzero(~finished)[0]
            ids, h, zz, YY, inv, thr = ids[keep], h[keep], zz[keep], YY[keep], inv[keep], thr[keep]
            f, g, curv = f[keep], g[keep], tuple(c[keep] for c in curv)
    if ids.size:  # out of iterations: report where these nodes are, not done
        h_out[ids], f_out[ids], gn_out[ids] = h, f, np.sqrt(rowdot(g, g))
    return h_out, f_out, gn_out, it, done_out
