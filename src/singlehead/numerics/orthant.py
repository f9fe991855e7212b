"""Bivariate normal orthant probabilities and the derivatives of their logarithm (docs: Theory, :ref:`theory-bayes`).

``Phi2(x1, x2; r) = P(U1 <= x1, U2 <= x2)`` for a standard bivariate normal ``(U1, U2)`` with
correlation ``r`` (``|r| < 1``). Two evaluations:

* :func:`bvn_cdf`: Owen's ``T``-function formula (Owen 1956), after reducing to ``x1, x2 <= 0``
  with ``Phi2(x1, x2; r) = Phi(x2) - Phi2(-x1, x2; -r)``: accurate in *absolute* terms (about
  ``1e-15``), fast, vectorised. Enough wherever small probabilities enter only through
  ``Z ||grad log Z||^2`` (the Fisher information of the Bayes state evolution).
* :func:`log_bvn_cdf`: accurate in *relative* terms down to underflow-free tails: the Owen value
  where it exceeds ``1e-8``, elsewhere ``log Phi(x_lo) + log E[Phi((x_hi - r U)/sqrt(1 - r^2)) | U <= x_lo]``
  (``x_lo`` the smaller argument) by fixed Gauss–Legendre quadrature over the truncated normal's
  quantiles (nodes ``u = w^4``, which smooths the algebraic end-point behaviour), in log space.

:func:`bvn_log_derivatives` returns ``log Phi2``, its gradient and Hessian in ``(x1, x2)`` from the
closed forms ``d Phi2/d x1 = phi(x1) Phi((x2 - r x1)/s)``, ``d^2 Phi2/dx1 dx2 = phi2(x1, x2; r)``,
``d^2 Phi2/dx1^2 = -x1 phi(x1) Phi((x2 - r x1)/s) - (r/s) phi(x1) phi((x2 - r x1)/s)``
(``s = sqrt(1 - r^2)``), all ratios formed in log space.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["bvn_cdf", "log_bvn_cdf", "bvn_log_derivatives"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
# Gauss-Legendre nodes on (0, 1) for the tail quadrature, substituted u = w^4
_GL_W, _GL_WT = np.polynomial.legendre.leggauss(64)
_GL_W = 0.5 * (_GL_W + 1.0)
_GL_WT = 0.5 * _GL_WT
_TAIL_U = _GL_W**4
_TAIL_WT = _GL_WT * 4.0 * _GL_W**3


def _bvn_nonpositive(h: np.ndarray, k: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Owen's formula for ``h, k <= 0`` (zeros nudged to ``-1e-300``, where the formula's limit holds)."""
    h = np.minimum(h, -1e-300)
    k = np.minimum(k, -1e-300)
    s = np.sqrt(1.0 - r * r)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ah = (k - r * h) / (h * s)
        ak = (h - r * k) / (k * s)
    out = 0.5 * (special.ndtr(h) + special.ndtr(k)) - special.owens_t(h, ah) - special.owens_t(k, ak)
    return np.maximum(out, 0.0)


def bvn_cdf(x1: np.ndarray, x2: np.ndarray, r: float | np.ndarray) -> np.ndarray:
    """``Phi2(x1, x2; r)`` elementwise (broadcast), absolute accuracy about ``1e-15``.

    Parameters
    ----------
    x1, x2 : array_like
        Upper limits (finite).
    r : float or array_like
        Correlation, ``|r| < 1``.

    Examples
    --------
    >>> round(float(bvn_cdf(0.0, 0.0, 0.5)), 12)          # 1/4 + arcsin(r)/(2 pi) = 1/3
    0.333333333333
    """
    x1, x2, r = np.broadcast_arrays(np.asarray(x1, float), np.asarray(x2, float), np.asarray(r, float))
    p1, p2 = x1 > 0, x2 > 0
    out = np.empty(x1.shape)
    m = ~p1 & ~p2
    out[m] = _bvn_nonpositive(x1[m], x2[m], r[m])
    m = p1 & ~p2
    out[m] = special.ndtr(x2[m]) - _bvn_nonpositive(-x1[m], x2[m], -r[m])
    m = ~p1 & p2
    out[m] = special.ndtr(x1[m]) - _bvn_nonpositive(x1[m], -x2[m], -r[m])
    m = p1 & p2
    out[m] = 1.0 - special.ndtr(-x1[m]) - special.ndtr(-x2[m]) + _bvn_nonpositive(-x1[m], -x2[m], r[m])
    return np.clip(out, 0.0, 1.0)


def _log_bvn_tail(x1: np.ndarray, x2: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``log Phi2`` by quadrature over the truncated normal of the smaller argument (relative accuracy)."""
    swap = x2 < x1
    lo, hi = np.where(swap, x2, x1), np.where(swap, x1, x2)
    s = np.sqrt(1.0 - r * r)
    lphi = special.log_ndtr(lo)
    # U = Phi^{-1}(u Phi(lo)), u the substituted Gauss-Legendre nodes
    t = special.ndtri_exp(lphi[:, None] + np.log(_TAIL_U)[None, :])
    inner = special.log_ndtr((hi[:, None] - r[:, None] * t) / s[:, None])
    return lphi + special.logsumexp(inner, b=_TAIL_WT[None, :], axis=1)


def log_bvn_cdf(x1: np.ndarray, x2: np.ndarray, r: float | np.ndarray) -> np.ndarray:
    """``log Phi2(x1, x2; r)`` elementwise with relative accuracy also in the far tails.

    Examples
    --------
    >>> from scipy.special import log_ndtr
    >>> float(log_bvn_cdf(-40.0, 40.0, 0.3)) / float(log_ndtr(-40.0))   # Phi2(x, +inf) = Phi(x), ~1e-350
    1.0
    """
    b = np.broadcast_arrays(np.asarray(x1, float), np.asarray(x2, float), np.asarray(r, float))
    shape = b[0].shape
    x1, x2, r = (np.ravel(a) for a in b)
    p = bvn_cdf(x1, x2, r)
    out = np.empty(x1.shape)
    big = p > 1e-8
    out[big] = np.log(p[big])
    small = ~big
    if small.any():
        out[small] = _log_bvn_tail(x1[small], x2[small], r[small])
    return out.reshape(shape)


def bvn_log_derivatives(
    x1: np.ndarray, x2: np.ndarray, r: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log Phi2, grad, Hessian)`` of ``log Phi2(x1, x2; r)`` in ``(x1, x2)``: shapes ``(N,)``, ``(N, 2)``,
    ``(N, 2, 2)``.

    Examples
    --------
    >>> import numpy as np
    >>> L, G, H = bvn_log_derivatives(np.array([0.0]), np.array([50.0]), 0.3)   # ~ log Phi(x1)
    >>> np.round(G[0], 6).tolist(), round(float(H[0, 0, 0]), 6)
    ([0.797885, 0.0], -0.63662)
    """
    x1, x2, r = (
        np.ravel(a) for a in np.broadcast_arrays(np.asarray(x1, float), np.asarray(x2, float), np.asarray(r, float))
    )
    s = np.sqrt(1.0 - r * r)
    L = log_bvn_cdf(x1, x2, r)
    lphi1 = -0.5 * x1 * x1 - _LOG_SQRT_2PI
    lphi2 = -0.5 * x2 * x2 - _LOG_SQRT_2PI
    c1 = (x2 - r * x1) / s  # conditional argument of x2 given x1
    c2 = (x1 - r * x2) / s
    g1 = np.exp(lphi1 + special.log_ndtr(c1) - L)
    g2 = np.exp(lphi2 + special.log_ndtr(c2) - L)
    # phi2(x1, x2; r)/Phi2 = phi(x1) phi(c1)/s / Phi2
    f12 = np.exp(lphi1 - 0.5 * c1 * c1 - _LOG_SQRT_2PI - L) / s
    h11 = -x1 * g1 - r * f12 - g1 * g1
    h22 = -x2 * g2 - r * f12 - g2 * g2
    h12 = f12 - g1 * g2
    G = np.stack([g1, g2], axis=1)
    H = np.stack([np.stack([h11, h12], axis=1), np.stack([h12, h22], axis=1)], axis=1)
    return L, G, H
