"""Noiseless untied recovery instances at ``T = 2``: the model's own label equations as measurements."""

from __future__ import annotations

import numpy as np


def t2_measurements(M0: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The ``2 n`` label equations of ``n`` sequences ``(x_1, x_2)`` (iid ``N(0, I_d)``) at ``T = 2``.

    Logits ``h_ab = x_a^T M x_b/sqrt(d) - delta_ab Tr M/sqrt(d)``; the softmax labels fix each row's
    differences ``h_11 - h_12`` and ``h_22 - h_21``. Returns ``(A, b)`` with ``A`` of shape
    ``(2 n, d^2)`` (row-major ``vec``) and ``b = A vec(M0)``.
    """
    d = M0.shape[0]
    x1 = rng.standard_normal((n, d))
    x2 = rng.standard_normal((n, d))
    eye = np.eye(d).ravel()
    r1 = (np.einsum("ni,nj->nij", x1, x1 - x2).reshape(n, d * d) - eye) / np.sqrt(d)
    r2 = (np.einsum("ni,nj->nij", x2, x2 - x1).reshape(n, d * d) - eye) / np.sqrt(d)
    A = np.concatenate([r1, r2])
    return A, A @ M0.ravel()


def mp_teacher(d: int, kappa0: float, rng: np.random.Generator) -> np.ndarray:
    """``S0 = W0 W0^T/sqrt(p0 d)``, ``W0`` iid ``N(0, 1)`` of shape ``(d, p0)``, ``p0 = round(kappa0 d)``."""
    p0 = int(round(kappa0 * d))
    W0 = rng.standard_normal((d, p0))
    return W0 @ W0.T / np.sqrt(p0 * d)


def row_difference_measurements(
    M0: np.ndarray, n: int, T: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n T (T-1)`` label equations ``h_aa - h_ab`` (``b != a``) of ``n`` sequences of ``T`` tokens: a basis
    of the row differences that softmax labels fix. ``T = 2`` gives the rows of :func:`t2_measurements`."""
    d = M0.shape[0]
    X = rng.standard_normal((n, T, d))
    eye = np.eye(d).ravel()
    rows = [
        (np.einsum("ni,nj->nij", X[:, a], X[:, a] - X[:, b]).reshape(n, d * d) - eye) / np.sqrt(d)
        for a in range(T)
        for b in range(T)
        if b != a
    ]
    A = np.concatenate(rows)
    return A, A @ M0.ravel()
