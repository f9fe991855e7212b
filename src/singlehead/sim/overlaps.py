"""Overlaps and spectrum of a learned matrix ``M`` against the target ``M0`` (docs: Theory, :ref:`theory-metrics`).

For every student (tied students learn a symmetric ``M = S``, the untied one a general ``M``):

* ``q = ||M||_F^2/d``, ``m = <M, M0>/d``, ``Q0 = ||M0||_F^2/d`` (``<A, B> = Tr A^T B``);
* the symmetric/antisymmetric split, ``M_s = (M + M^T)/2``, ``M_a = (M - M^T)/2`` (orthogonal in
  the Frobenius product, so ``q = q_s + q_a`` and ``m = m_s + m_a``):
  ``q_s = ||M_s||_F^2/d``, ``q_a = ||M_a||_F^2/d``, ``m_s = <M_s, M0_s>/d``, ``m_a = <M_a, M0_a>/d``;
* the asymmetry ``||M - M^T||_F/||M||_F = 2 ||M_a||_F/||M||_F`` (0 for a symmetric ``M``, 2 for an
  antisymmetric one, about ``sqrt 2`` for a matrix with iid entries; nan for ``M = 0``).

The spectrum of a symmetric ``M`` is its eigenvalues, of any other its singular values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["overlaps", "spectrum_summary"]


def overlaps(M: np.ndarray, M0: np.ndarray) -> dict[str, float]:
    """``q, m, Q0, q_s, q_a, m_s, m_a, asymmetry`` of ``M`` against ``M0`` (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> o = overlaps(np.array([[1.0, 1.0], [-1.0, 1.0]]), np.eye(2))
    >>> o["q_s"], o["q_a"], o["m_s"], o["m_a"], round(o["asymmetry"], 6)
    (1.0, 1.0, 1.0, 0.0, 1.0)
    """
    d = M.shape[0]
    Ms, Ma = 0.5 * (M + M.T), 0.5 * (M - M.T)
    M0s, M0a = 0.5 * (M0 + M0.T), 0.5 * (M0 - M0.T)
    norm = float(np.sqrt(np.sum(M * M)))
    return {"q": float(np.sum(M * M) / d), "m": float(np.sum(M * M0) / d), "Q0": float(np.sum(M0 * M0) / d),
            "q_s": float(np.sum(Ms * Ms) / d), "q_a": float(np.sum(Ma * Ma) / d),
            "m_s": float(np.sum(Ms * M0s) / d), "m_a": float(np.sum(Ma * M0a) / d),
            "asymmetry": 2.0 * float(np.sqrt(np.sum(Ma * Ma))) / norm if norm > 0 else math.nan}


def spectrum_summary(S: np.ndarray, rank_tol: float, symmetric: bool = True) -> dict[str, Any]:
    """Eigenvalues (``symmetric``) or singular values of ``S``, descending, with the rank
    ``#{|value| > rank_tol}`` and the zero fraction; keys ``eigenvalues`` or ``singular_values``,
    ``rank``, ``zero_fraction``."""
    if symmetric:
        values, key = np.linalg.eigvalsh(S)[::-1], "eigenvalues"
    else:
        values, key = np.linalg.svd(S, compute_uv=False), "singular_values"
    rank = int(np.sum(np.abs(values) > rank_tol))
    return {key: values, "rank": rank, "zero_fraction": 1.0 - rank / len(values)}
