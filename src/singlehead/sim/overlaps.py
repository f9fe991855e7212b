"""Overlaps and spectrum of a learned matrix ``M`` against the target ``M0`` (docs: Theory, :ref:`theory-metrics`).

For every student (tied students learn a symmetric ``M = S``, the untied one a general ``M``):

* ``q = ||M||_F^2/d``, ``m = <M, M0>/d``, ``Q0 = ||M0||_F^2/d`` (``<A, B> = Tr A^T B``);
* the symmetric/antisymmetric split, ``M_s = (M + M^T)/2``, ``M_a = (M - M^T)/2`` (orthogonal in
  the Frobenius product, so ``q = q_s + q_a`` and ``m = m_s + m_a``):
  ``q_s = ||M_s||_F^2/d``, ``q_a = ||M_a||_F^2/d``, ``m_s = <M_s, M0_s>/d``, ``m_a = <M_a, M0_a>/d``;
* the asymmetry ``||M - M^T||_F/||M||_F = 2 ||M_a||_F/||M||_F`` (0 for a symmetric ``M``, 2 for an
  antisymmetric one, about ``sqrt 2`` for a matrix with iid entries; nan for ``M = 0``).

The spectrum of a symmetric ``M`` is its eigenvalues, of any other its singular values.

Several heads (:func:`head_overlaps`): the per-head overlap matrices ``Q[h, h'] = <S_h, S_h'>/d``
(student x student), ``M[h, k] = <S_h, S0_k>/d`` (student x teacher) and ``Q0[k, k'] = <S0_k, S0_k'>/d``
(teacher x teacher), with the heads matched: heads are unlabelled (any permutation of the student's
heads, or of the teacher's, is the same model), so the student heads are paired with distinct teacher
heads by the assignment that maximises the total overlap ``sum_pairs M[h, k]`` (Hungarian algorithm,
``scipy.optimize.linear_sum_assignment``; ``min(H, H0)`` pairs), and both sides are reordered so that
the pairs come first, in the teacher's order: ``M[i, i]`` is the ``i``-th pair's overlap for
``i < min(H, H0)``, then the unpaired heads follow in their original order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["head_overlaps", "match_heads", "overlaps", "spectrum_summary"]


def overlaps(M: np.ndarray, M0: np.ndarray) -> dict[str, float]:
    """``q, m, Q0, q_s, q_a, m_s, m_a, asymmetry`` of ``M`` against ``M0`` (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> o = overlaps(np.array([[1.0, 1.0], [-1.0, 1.0]]), np.eye(2))
    >>> o["q_s"], o["q_a"], o["m_s"], o["m_a"], round(o["asymmetry"], 6)
    (1.0, 1.0, 1.0, 0.0, 1.414214)
    """
    d = M.shape[0]
    Ms, Ma = 0.5 * (M + M.T), 0.5 * (M - M.T)
    M0s, M0a = 0.5 * (M0 + M0.T), 0.5 * (M0 - M0.T)
    norm = float(np.sqrt(np.sum(M * M)))
    return {
        "q": float(np.sum(M * M) / d),
        "m": float(np.sum(M * M0) / d),
        "Q0": float(np.sum(M0 * M0) / d),
        "q_s": float(np.sum(Ms * Ms) / d),
        "q_a": float(np.sum(Ma * Ma) / d),
        "m_s": float(np.sum(Ms * M0s) / d),
        "m_a": float(np.sum(Ma * M0a) / d),
        "asymmetry": 2.0 * float(np.sqrt(np.sum(Ma * Ma))) / norm if norm > 0 else math.nan,
    }


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


def match_heads(M: np.ndarray) -> tuple[list[int], list[int]]:
    """Orders ``(student_order, teacher_order)`` of the rows and columns of the head overlap matrix ``M``
    (``H x H0``) that put the maximum-total-overlap pairing on the leading diagonal (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> match_heads(np.array([[0.1, 0.9], [0.8, 0.2]]))        # student 1 <-> teacher 0, student 0 <-> teacher 1
    ([1, 0], [0, 1])
    >>> match_heads(np.array([[0.1, 0.2, 0.9]]))               # one student head, three teacher heads
    ([0], [2, 0, 1])
    """
    from scipy.optimize import linear_sum_assignment  # imported on use: SciPy's optimize is slow to load

    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or min(M.shape) < 1 or not np.all(np.isfinite(M)):
        raise ValueError(f"M must be a finite H x H0 matrix with H, H0 >= 1 (got shape {np.shape(M)})")
    rows, cols = linear_sum_assignment(M, maximize=True)
    pairs = sorted(zip(cols.tolist(), rows.tolist()))  # in the teacher's order
    students = [r for _, r in pairs]
    teachers = [c for c, _ in pairs]
    students += [h for h in range(M.shape[0]) if h not in students]
    teachers += [k for k in range(M.shape[1]) if k not in teachers]
    return students, teachers


def head_overlaps(S: np.ndarray, S0: np.ndarray) -> dict[str, object]:
    """Matched per-head overlaps of student heads ``S`` (``(H, d, d)``) and teacher heads ``S0`` (``(H0, d, d)``).

    Returns ``head_Q`` (``H x H``), ``head_M`` (``H x H0``), ``head_Q0`` (``H0 x H0``), all in the matched
    orders of ``match_heads``, and the orders ``head_order`` (student head of each row) and
    ``teacher_head_order`` (teacher head of each column); overlaps are ``<A, B>/d = Tr(A^T B)/d``.

    Examples
    --------
    >>> import numpy as np
    >>> e = np.eye(2)[:, :, None] * np.eye(2)[:, None, :]       # the projectors on e_1 and on e_2
    >>> out = head_overlaps(e[::-1], e)                         # the student's heads in the other order
    >>> out["head_order"], out["head_M"].tolist()
    ([1, 0], [[0.5, 0.0], [0.0, 0.5]])
    """
    S, S0 = np.asarray(S, dtype=float), np.asarray(S0, dtype=float)
    if S.ndim != 3 or S0.ndim != 3 or S.shape[1:] != S0.shape[1:] or S.shape[1] != S.shape[2]:
        raise ValueError(
            f"S and S0 must be stacks of d x d heads, (H, d, d) and (H0, d, d) (got {S.shape} and {S0.shape})"
        )
    d = S.shape[1]
    Q = np.einsum("hij,gij->hg", S, S) / d
    M = np.einsum("hij,kij->hk", S, S0) / d
    Q0 = np.einsum("kij,lij->kl", S0, S0) / d
    rows, cols = match_heads(M)
    return {
        "head_Q": Q[np.ix_(rows, rows)],
        "head_M": M[np.ix_(rows, cols)],
        "head_Q0": Q0[np.ix_(cols, cols)],
        "head_order": rows,
        "teacher_head_order": cols,
    }
