"""Small vectorised numerical helpers of the spectral engine.

Nothing here knows about free probability: Gauss–Legendre rules with a cosine change of
variable, a bracketed (safeguarded) Newton solver, vectorised bisection and batched cubic
roots, and the divided-difference matrix of a spectral function (the exact divergence of
a spectral map, shared by the finite-``d`` prior, the free divergence of atoms and AMP).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

__all__ = [
    "cos_gauss",
    "cos_gauss_cumulative",
    "newton_bracketed",
    "bisect_increasing",
    "cubic_roots",
    "cubic_roots_monic",
    "cubic_roots_fast",
    "divided_differences",
    "singular_value_threshold",
]

# eigenvalues closer than this (relative to max(1, max|x|)) count as tied in divided differences
TIE_RTOL = 1e-12


@lru_cache(maxsize=64)
def _gauss_legendre_theta(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``theta`` on ``[0, pi]``, weights, and ``(1 - cos theta)/2``, ``sin(theta)/2``.

    A pure function of ``n`` (memoised; the cache cannot change any result).
    """
    x, w = np.polynomial.legendre.leggauss(n)
    theta = 0.5 * np.pi * (x + 1.0)
    wt = 0.5 * np.pi * w
    frac = 0.5 * (1.0 - np.cos(theta))
    jac = 0.5 * np.sin(theta) * wt
    frac.setflags(write=False)
    jac.setflags(write=False)
    return theta, frac, jac


def cos_gauss(a: np.ndarray | float, b: np.ndarray | float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre rule on ``[a, b]`` after ``t = a + (b - a)(1 - cos theta)/2``.

    The substitution makes integrands with square-root (or inverse square-root) behaviour
    at either end analytic in ``theta``, so the rule converges exponentially for the
    densities of free convolutions with a semicircle (square-root edges) and for the
    Marchenko–Pastur hard edge.

    Parameters
    ----------
    a, b : array_like
        End points (broadcast together); shape ``S``.
    n : int
        Number of nodes per interval.

    Returns
    -------
    t, w : ndarray, shape ``S + (n,)``
        Nodes and weights, ``sum(w * f(t)) ~ int_a^b f``.
    """
    _, frac, jac = _gauss_legendre_theta(int(n))
    a = np.asarray(a, dtype=float)[..., None]
    b = np.asarray(b, dtype=float)[..., None]
    return a + (b - a) * frac, (b - a) * jac


@lru_cache(maxsize=16)
def cos_gauss_cumulative(n: int) -> np.ndarray:
    """Matrix ``T`` with ``(T @ w)_i ~ int_a^{t_i} f`` for the rule ``t, w = cos_gauss(a, b, n)``, ``w_j = W_j f(t_j)``.

    The running integral of the degree-``n - 1`` interpolant (in ``theta``) of the integrand
    through the nodes: with Legendre nodes ``s_j`` and weights ``g_j`` on ``[-1, 1]`` the
    interpolant's coefficients are ``(2k + 1)/2 sum_j g_j P_k(s_j) F_j`` (Gauss exactness) and
    ``int_{-1}^s P_k = (P_{k+1}(s) - P_{k-1}(s))/(2k + 1)``. As exact for smooth integrands as the rule
    itself; a pure function of ``n`` (memoised, read-only).
    """
    s, g = np.polynomial.legendre.leggauss(int(n))
    V = np.polynomial.legendre.legvander(s, int(n))  # P_0 .. P_n at the nodes
    k = np.arange(int(n))
    Vint = np.empty((int(n), int(n)))
    Vint[:, 0] = s + 1.0
    Vint[:, 1:] = (V[:, 2:] - V[:, :-2]) / (2 * k[1:] + 1)
    # a rule weight w_j carries the Gauss weight g_j (times the map's Jacobian), which the interpolant divides out
    T = Vint @ (((2 * k + 1) / 2)[:, None] * V[:, :-1].T)
    T.setflags(write=False)
    return T


def newton_bracketed(
    fun: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    target: np.ndarray | float,
    lo: np.ndarray | float,
    hi: np.ndarray | float,
    x0: np.ndarray | float | None = None,
    *,
    xtol: float = 1e-14,
    maxiter: int = 100,
) -> np.ndarray:
    """Solve ``fun(x)[0] = target`` for an increasing function, element-wise.

    Safeguarded Newton: a Newton step that leaves the current bracket ``(lo, hi)`` is
    replaced by bisection, and the bracket shrinks with the sign of the residual. Requires
    ``f(lo) <= target <= f(hi)``.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (f(x), f'(x))``, vectorised.
    xtol : float
        Absolute tolerance on the step, relative to ``max(1, |hi - lo|)`` of the initial bracket.
    """
    lo = np.array(lo, dtype=float, copy=True)
    hi = np.array(hi, dtype=float, copy=True)
    lo, hi = np.broadcast_arrays(lo, hi)
    lo, hi = lo.copy(), hi.copy()
    target = np.broadcast_to(np.asarray(target, dtype=float), lo.shape)
    x = 0.5 * (lo + hi) if x0 is None else np.clip(np.broadcast_to(np.asarray(x0, float), lo.shape), lo, hi)
    tol = xtol * np.maximum(1.0, np.abs(hi - lo))
    for _ in range(maxiter):
        f, df = fun(x)
        r = f - target
        lo = np.where(r < 0, x, lo)
        hi = np.where(r > 0, x, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            xn = x - r / df
        bad = ~np.isfinite(xn) | (xn <= lo) | (xn >= hi)
        xn = np.where(bad, 0.5 * (lo + hi), xn)
        xn = np.where(r == 0, x, xn)
        done = np.abs(xn - x) <= tol
        x = xn
        if np.all(done):
            break
    return x


def bisect_increasing(
    fun: Callable[[np.ndarray], np.ndarray],
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    maxiter: int = 200,
) -> np.ndarray:
    """Root of an increasing function on ``[lo, hi]`` (element-wise), to machine precision."""
    lo = np.array(lo, dtype=float, copy=True)
    hi = np.array(hi, dtype=float, copy=True)
    for _ in range(maxiter):
        mid = 0.5 * (lo + hi)
        if np.all((mid <= lo) | (mid >= hi)):
            break
        pos = fun(mid) > 0
        hi = np.where(pos, mid, hi)
        lo = np.where(pos, lo, mid)
    return 0.5 * (lo + hi)


def cubic_roots(c3: np.ndarray, c2: np.ndarray, c1: np.ndarray, c0: np.ndarray) -> np.ndarray:
    """All roots of ``c3 g^3 + c2 g^2 + c1 g + c0`` (batched companion-matrix eigenvalues).

    Returns an array of shape ``broadcast(...).shape + (3,)`` (complex). ``c3`` must not vanish.
    """
    c3, c2, c1, c0 = np.broadcast_arrays(*(np.asarray(c, dtype=complex) for c in (c3, c2, c1, c0)))
    shape = c3.shape
    M = np.zeros(shape + (3, 3), dtype=complex)
    M[..., 0, 0] = -c2 / c3
    M[..., 0, 1] = -c1 / c3
    M[..., 0, 2] = -c0 / c3
    M[..., 1, 0] = 1.0
    M[..., 2, 1] = 1.0
    return np.linalg.eigvals(M)


#: Primitive cube roots of unity, ``omega^k``, k = 0, 1, 2 (the three branches of Cardano's formula).
_OMEGA = np.exp(2j * np.pi * np.arange(3) / 3)

#: Each root's neighbour in a cyclic pairing of the three roots.
_NEXT = np.array([1, 2, 0])

#: Closed-form roots closer than this to another root (relative to the sum of their moduli) go to
#: :func:`cubic_roots`: near a double root both routes lose accuracy differently (the density
#: ``-Im g/pi`` at a node near a bulk edge, to ~eps/gap^2 relative), so there the eigenvalue route
#: is kept to give the same numbers as it always did.
CUBIC_SEPARATION_RTOL = 3e-2

#: Largest accepted last Newton correction of a closed-form root, relative to its modulus.
CUBIC_STEP_RTOL = 1e-10


def _cardano(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Roots of the monic ``g^3 + A g^2 + B g + C`` in closed form; 1-d inputs, output ``(n, 3)``.

    Cardano's formula on the depressed cubic ``y^3 + p y + q`` (``g = y - A/3``), with the sign of
    the square root that makes ``|w| = |-q/2 +- sqrt(q^2/4 + p^3/27)|`` largest, ``u = w^(1/3)``,
    ``y_k = u omega^k - p/(3 u omega^k)``. Only the root ``R`` of largest modulus is kept from it:
    when one root dwarfs the others (``|A|`` large: a small semicircle variance) the shift ``A/3``
    and ``q^2/4 + p^3/27`` cancel and the small roots are lost. They come instead from the deflated
    quadratic ``t^2 - S t + P`` with ``P = -C/R`` and ``S = (B - P)/R`` (Vieta; its rounding error is
    ``~eps`` times the small roots, where ``S = -A - R`` would cost ``eps |R|``), solved without
    cancellation (``t1 t2 = P``). Degenerate rows (``u = 0``, ``R = 0``) come out non-finite.
    """
    s = A / 3.0
    p3 = B / 3.0 - s * s
    h = 0.5 * (s * B - C) - s * s * s
    root = np.sqrt(h * h + p3 * p3 * p3)
    w = np.where(np.abs(h + root) >= np.abs(h - root), h + root, h - root)
    u = (w ** (1.0 / 3.0))[:, None] * _OMEGA
    g = u - p3[:, None] / u - s[:, None]
    a = np.abs(g)
    R = np.where(
        a[:, 0] >= a[:, 1],
        np.where(a[:, 0] >= a[:, 2], g[:, 0], g[:, 2]),
        np.where(a[:, 1] >= a[:, 2], g[:, 1], g[:, 2]),
    )
    out = np.empty_like(g)
    out[:, 0] = R
    P = -C / R
    S = (B - P) / R
    d = np.sqrt(S * S - 4.0 * P)
    out[:, 1] = t1 = 0.5 * np.where(S.real * d.real + S.imag * d.imag >= 0, S + d, S - d)
    out[:, 2] = P / t1
    return out


def cubic_roots_monic(A: np.ndarray, B: np.ndarray, C: np.ndarray | complex) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form roots of ``g^3 + A g^2 + B g + C`` (1-d ``A``, ``B``; ``C`` 1-d or a scalar).

    :func:`_cardano` followed by one Newton step. Returns the roots, shape ``(n, 3)``, and the mask of
    the rows to recompute by :func:`cubic_roots`: roots closer than :data:`CUBIC_SEPARATION_RTOL`,
    a Newton correction above :data:`CUBIC_STEP_RTOL` (the residual was not at round-off), or not
    finite. Elsewhere the two routes agree to round-off times the roots' condition number. Call it
    with floating-point warnings silenced (the masked rows may divide by zero).
    """
    r = _cardano(A, B, C)
    A, B, C = A[:, None], B[:, None], (C if np.ndim(C) == 0 else C[:, None])
    step = (((r + A) * r + B) * r + C) / ((3.0 * r + 2.0 * A) * r + B)
    r = r - step
    ar = np.abs(r)
    gap = np.abs(r - r[:, _NEXT]) / (ar + ar[:, _NEXT])
    # NaN compares False: non-finite rows are flagged too
    good = (np.min(gap, axis=1) > CUBIC_SEPARATION_RTOL) & (np.max(np.abs(step) / ar, axis=1) <= CUBIC_STEP_RTOL)
    return r, ~good


def cubic_roots_fast(
    c3: np.ndarray, c2: np.ndarray, c1: np.ndarray, c0: np.ndarray, *, with_fallback: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """All roots of ``c3 g^3 + c2 g^2 + c1 g + c0``: closed form, eigenvalue route where ill-conditioned.

    :func:`cubic_roots_monic` on ``c2/c3, c1/c3, c0/c3``; the rows it flags are recomputed by
    :func:`cubic_roots`. Returns an array of shape ``broadcast(...).shape + (3,)`` (complex), and with
    ``with_fallback`` also the boolean mask (shape ``broadcast(...).shape``) of the rows computed by
    :func:`cubic_roots`. ``c3`` must not vanish.
    """
    with np.errstate(all="ignore"):
        A, B, C = np.broadcast_arrays(*(np.asarray(c / c3, dtype=complex) for c in (c2, c1, c0)))
        shape = A.shape
        r, bad = cubic_roots_monic(A.reshape(-1), B.reshape(-1), C.reshape(-1))
    if np.any(bad):
        r[bad] = cubic_roots(
            *(c if np.ndim(c) == 0 else np.broadcast_to(c, shape).reshape(-1)[bad] for c in (c3, c2, c1, c0))
        )
    r = r.reshape(shape + (3,))
    return (r, bad.reshape(shape)) if with_fallback else r


def divided_differences(
    x: np.ndarray, f: np.ndarray, fp: np.ndarray, *, tie_rtol: float = TIE_RTOL, tie: str = "mean"
) -> np.ndarray:
    """Matrix ``M_ij = (f_i - f_j)/(x_i - x_j)`` (``i != j``), ``M_ii = f'_i``.

    The divergence of a spectral map ``U diag(x) U^T -> U diag(f(x)) U^T`` is a weighted sum of
    ``M`` (Daleckii–Krein): ``(1/d^2) sum_ij M_ij`` per entry at finite ``d``, ``w^T M w`` for
    point masses ``w``. Pairs with ``|x_i - x_j| <= tie_rtol max(1, max|x|)`` (``tie_rtol = 0``:
    exact ties only) get the mean of the two ``f'`` (``tie="mean"``, the limit of the quotient)
    or 0 (``tie="zero"``: an atom split in two by a rank cap).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.numerics.spectra import divided_differences
    >>> x = np.array([0.0, 1.0, 2.0])
    >>> divided_differences(x, x**2, 2 * x)             # (x_i^2 - x_j^2)/(x_i - x_j) = x_i + x_j
    array([[0., 1., 2.],
           [1., 2., 3.],
           [2., 3., 4.]])
    """
    x, f, fp = (np.asarray(a, dtype=float) for a in (x, f, fp))
    dn = x[:, None] - x[None, :]
    df = f[:, None] - f[None, :]
    tied = np.abs(dn) <= tie_rtol * max(1.0, float(np.max(np.abs(x)))) if x.size else np.zeros_like(dn, bool)
    value = 0.5 * (fp[:, None] + fp[None, :]) if tie == "mean" else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        M = np.where(tied, value, df / dn)
    np.fill_diagonal(M, fp)
    return M


def singular_value_threshold(M: np.ndarray, tau: float, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Singular-value soft thresholding ``U (s - tau)_+ V^T`` of ``M`` (batched over leading axes),
    keeping the top ``rank`` singular values (all when ``None``): the proximal map of
    ``tau ||.||_*`` (with a rank cap). Returns the matrix and its singular values (descending, zeros
    beyond ``rank``).

    Examples
    --------
    >>> import numpy as np
    >>> M, s = singular_value_threshold(np.diag([3.0, 1.0, 0.5]), 0.75, rank=1)
    >>> s.tolist(), np.round(np.diag(M), 12).tolist()
    ([2.25, 0.0, 0.0], [2.25, 0.0, 0.0])
    """
    # from the eigendecomposition of the smaller Gram matrix (about twice as fast as a batched SVD):
    # M V diag(f) V^T with f = (s - tau)_+/s. Its singular values lose relative accuracy
    # eps ||M||^2/s^2 below the top, which the threshold (s > tau) does not feel unless tau ~ sqrt(eps) ||M||.
    M = np.asarray(M, float)
    wide = M.shape[-2] < M.shape[-1]
    X = np.swapaxes(M, -1, -2) if wide else M
    w, V = np.linalg.eigh(np.swapaxes(X, -1, -2) @ X)
    w, V = w[..., ::-1], V[..., :, ::-1]
    sv = np.sqrt(np.maximum(w, 0.0))
    r = sv.shape[-1] if rank is None else min(int(rank), sv.shape[-1])
    s = np.maximum(sv - tau, 0.0)
    s[..., r:] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(s > 0, s / np.where(sv > 0, sv, 1.0), 0.0)
    out = (X @ (V * f[..., None, :])) @ np.swapaxes(V, -1, -2)
    return (np.swapaxes(out, -1, -2) if wide else out), s
