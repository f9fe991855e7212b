"""Batched building blocks of the prox's safeguarded Newton (:mod:`singlehead.prox`), private.

Every function acts on a batch of ``N`` independent nodes with ``K``-vectors (``K <= 10``) and
updates its arrays in place where it says so: the Newton loop runs on thousands of nodes per state
evolution evaluation, and in-place updates spare it a copy of the ``(N, K, K)`` Hessians per step.
"""

from __future__ import annotations

from typing import Callable

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
    # entries as contiguous (N,) rows: every vector operation below reads unit-stride memory
    L, ok = _chol_factor(np.ascontiguousarray(H.transpose(1, 2, 0)), floor)
    x = np.ascontiguousarray(_chol_apply(L, np.ascontiguousarray(b.T)).T)
    return x, ok


def chol_solve_many(H: np.ndarray, B: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`chol_solve` for several right-hand sides ``B`` (``(N, K, R)``), factorising once."""
    L, ok = _chol_factor(np.ascontiguousarray(H.transpose(1, 2, 0)), floor)
    Bt = np.ascontiguousarray(B.transpose(2, 1, 0))  # (R, K, N)
    X = np.stack([_chol_apply(L, Bt[r]) for r in range(Bt.shape[0])])
    return np.ascontiguousarray(X.transpose(2, 1, 0)), ok


def rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("nk,nk->n", a, b)


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it can be updated in place, else a copy (a loss may return read-only broadcasts)."""
    return a if a.flags.writeable else a.copy()


def _backtrack(todo: np.ndarray, h: np.ndarray, p: np.ndarray, f: np.ndarray, slope: np.ndarray, zz: np.ndarray,
               YY: np.ndarray, inv: np.ndarray, loss: FitLoss) -> np.ndarray:
    """Armijo backtracking by halvings on the nodes ``todo``, updating ``h`` in place; returns the
    nodes whose line search failed (at machine precision)."""
    t = np.full(todo.size, 0.5)
    for _ in range(40):
        if todo.size == 0:
            break
        cand = h[todo] + t[:, None] * p[todo]
        dt = cand - zz[todo]
        fc = np.einsum("nk,nk->n", dt, dt) / (2.0 * (1.0 / inv[todo])) + loss(cand, YY[todo], 0)[0]
        ok2 = fc <= f[todo] + 1e-4 * t * slope[todo] + 1e-15 * np.abs(f[todo])
        h[todo[ok2]] = cand[ok2]
        todo, t = todo[~ok2], 0.5 * t[~ok2]
    return todo


def add_diagonal(H: np.ndarray, inv: np.ndarray) -> None:
    """``H[n] += inv[n] I`` in place (the prox curvature ``1/Sigma``; no ``(N, K, K)`` temporary)."""
    k = np.arange(H.shape[1])
    H[:, k, k] += inv[:, None]


def take_step(h: np.ndarray, p: np.ndarray, f: np.ndarray, g: np.ndarray, Hs: np.ndarray, slope: np.ndarray,
               final: np.ndarray, zz: np.ndarray, YY: np.ndarray, inv: np.ndarray, loss: FitLoss
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One Newton step along ``p`` on every node: ``(h, f, g, Hs, todo)`` after it.

    ``f, g, Hs`` are the prox objective, its gradient and its Hessian (``1/Sigma = inv`` included)
    at ``h``; ``slope = <g, p>``; ``final`` marks the nodes whose full step is taken without a
    line search. The full step is tried first, with derivatives (accepted for most nodes); the
    rest backtrack by halvings. ``todo`` are the nodes whose line search failed (at machine
    precision). The returned arrays may share memory with the inputs.
    """
    cand = h + p
    fit, gc, Hc = loss(cand, YY, 2)
    gc, Hc = _writable(gc), _writable(Hc)
    dc = cand - zz
    fc = 0.5 * inv * rowdot(dc, dc) + fit
    ok = final | (fc <= f + 1e-4 * slope + 1e-15 * np.abs(f))
    gc += inv[:, None] * dc
    add_diagonal(Hc, inv)
    rejected = np.nonzero(~ok)[0]
    if rejected.size:  # keep the current state of the nodes whose full step failed
        cand[rejected], fc[rejected], gc[rejected], Hc[rejected] = h[rejected], f[rejected], g[rejected], Hs[rejected]
    h, f, g, Hs = cand, fc, gc, Hc
    # ... then vectorised backtracking (halvings) on the rest
    todo = _backtrack(rejected, h, p, f, slope, zz, YY, inv, loss)
    jb = rejected[~np.isin(rejected, todo)]
    if jb.size:
        fit, gg, HH = loss(h[jb], YY[jb], 2)
        HH = _writable(HH)
        db = h[jb] - zz[jb]
        f[jb] = 0.5 * inv[jb] * rowdot(db, db) + fit
        g[jb] = gg + inv[jb, None] * db
        add_diagonal(HH, inv[jb])
        Hs[jb] = HH
    return h, f, g, Hs, todo
