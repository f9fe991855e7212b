"""Jacobian of the weighted nuclear-norm denoiser (the untied prior side), for the replicon of block fixed points.

The untied prior side's estimator (:mod:`singlehead.numerics.spectra.untied_prior`) is

    Mhat(A) = argmin_M  (1/2) <M, W M> - <M, A> + tau ||M||_*,    W M = Sigmahat_s M_s + Sigmahat_a M_a,

with ``A = A_s + A_a`` and ``tau = 2 lam``. It is the gradient of a convex function of ``A``, so its
Jacobian ``K = dMhat/dA`` is self-adjoint and positive semi-definite. Write ``R = A - W Mhat``
(``tau`` times a subgradient of the nuclear norm at ``Mhat``) and take the full SVD
``Mhat + R = U diag(sigma) V^T``: the ``r`` singular values above ``tau`` are ``s_i + tau`` with
``s_i`` those of ``Mhat`` (active), the others ``g_j <= tau`` (inactive). In the rotated
coordinates ``X~ = U^T X V`` the second-order term of the nuclear norm along the solution is diagonal
on the symmetric and antisymmetric parts of each pair ``(i, j)``:

* both active: ``0`` on the symmetric part, ``2 tau/(s_i + s_j)`` on the antisymmetric part;
* ``i`` active, ``j`` inactive: ``(tau - g_j)/s_i`` (symmetric part), ``(tau + g_j)/s_i`` (antisymmetric);
* both inactive: infinite (the estimator stays zero there).

Linearising the optimality condition ``W Mhat - A + tau G = 0`` gives
``K = P (P (W + C) P)^{-1} P`` with ``C`` this curvature and ``P`` the projection off the
inactive-inactive block. For ``Sigmahat_s = Sigmahat_a`` it reduces to the known Jacobian of
singular-value soft thresholding (symmetric parts scaled by the divided differences of
``(sigma - t)_+``, antisymmetric parts by ``(f(sigma_i) + f(sigma_j))/(sigma_i + sigma_j)``); in
general ``W`` is not diagonal in the rotated coordinates and the system is solved by conjugate
gradients, preconditioned by ``((Sigmahat_s + Sigmahat_a)/2 + C)^{-1}``.

What is returned are the block-restricted squared Frobenius norms ``||K_{b b'}||_F^2`` (``K_{b b'}``:
block-``b'`` input perturbations to the block-``b`` part of the estimator) and the block traces
``tr K_{b b}``, both divided by ``D^2/2`` (the normalisation of the SE's ``Sigma_B =
<Mhat_B, Z_B>/(D sqrt(qhat_B))``, which is ``tr K_BB/(D^2/2)`` by Stein's lemma), estimated by
Hutchinson probes: ``xi_b`` a standard Gaussian on block ``b`` (unit variance along each
orthonormal direction: ``sym(G)`` and ``anti(G)`` of a standard Gaussian matrix ``G``),
``||P_b K xi_b'||^2`` and ``<xi_b, K xi_b>``. A block of dimension ``~D^2/2`` makes each probe's
relative error ``~ sqrt(2/(D^2/2))``, below the draw-to-draw spread.

An unobserved antisymmetric block (``Sigmahat_a = 0``, ``A_a = 0``; ``T = 1``) keeps ``Mhat``
symmetric: the symmetric block's Jacobian is then the Daleckii-Krein operator of the two-sided
eigenvalue soft threshold, evaluated exactly (no probes); the antisymmetric entries are ``nan``
(that block has no response).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from singlehead.numerics.spectra.untied_prior import ProxLinearisation, UntiedPriorSample, draw_rows

#: the second word of the probes' seed sequence (keeps them off the stream an instance sample is drawn from)
_PROBE_STREAM = 0x4A4143

__all__ = [
    "PriorJacobian",
    "nuclear_prox_jacobian",
    "nuclear_prox_jvp",
    "untied_prior_jacobian",
    "effective_fields",
    "untied_prior_tangent",
]


def _sym(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X + np.swapaxes(X, -1, -2))


def _anti(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X - np.swapaxes(X, -1, -2))


def _dot(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.einsum("rij,rij->r", X, Y)


@dataclass
class PriorJacobian:
    """Block norms of the denoiser's Jacobian ``K = dMhat/dA`` on each draw (see the module docstring).

    Attributes
    ----------
    frobenius : (R, 2, 2) array
        ``||K_{b b'}||_F^2/(D^2/2)``, blocks ``(s, a)``: row ``b`` the output block, column ``b'`` the
        input block (``nan`` where a block has no response).
    trace : (R, 2) array
        ``tr K_{b b}/(D^2/2)`` (equals the SE's ``Sigma_B`` in expectation over the draws).
    probes : int
        Hutchinson probes per draw and input block (0: evaluated exactly).
    iterations : int
        The most conjugate-gradient iterations one solve took.
    cap_binds : bool
        A rank cap excluded a singular value above the threshold (the Jacobian of the capped
        problem is not that of the convex one; ``frobenius`` is then ``inf``).
    """

    frobenius: np.ndarray
    trace: np.ndarray
    probes: int
    iterations: int = 0
    cap_binds: bool = False


def effective_fields(hats: np.ndarray, sample: UntiedPriorSample) -> tuple[np.ndarray, np.ndarray]:
    """``(A_s, A_a) = (mhat_s M0_s + sqrt(qhat_s) Z_s, mhat_a M0_a + sqrt(qhat_a) Z_a)`` on the draws of ``sample``."""
    qs, ms, _, qa, ma, _ = (float(x) for x in hats)
    return (
        ms * _sym(sample.M0) + math.sqrt(max(qs, 0.0)) * sample.Zs,
        ma * _anti(sample.M0) + math.sqrt(max(qa, 0.0)) * sample.Za,
    )


def _two_sided_jacobian(A_s: np.ndarray, Ss: float, tau: float) -> PriorJacobian:
    """The symmetric block of an unobserved antisymmetric one: Daleckii-Krein of ``sign(x)(|x| - tau)_+/Ss``."""
    R, D = A_s.shape[0], A_s.shape[-1]
    lam = np.linalg.eigvalsh(A_s)
    f = np.sign(lam) * np.maximum(np.abs(lam) - tau, 0.0) / Ss
    fp = (np.abs(lam) > tau) / Ss
    diff = lam[:, :, None] - lam[:, None, :]
    close = np.abs(diff) <= 1e-12 * (1.0 + np.abs(lam[:, :, None]))
    dd = np.where(
        close, 0.5 * (fp[:, :, None] + fp[:, None, :]), (f[:, :, None] - f[:, None, :]) / np.where(close, 1.0, diff)
    )
    half = D * D / 2.0
    # the symmetric space: pairs i < j and the diagonal, each with unit norm
    frob = (np.sum(dd**2, axis=(1, 2)) + np.sum(fp**2, axis=1)) / (2 * half)
    tr = (np.sum(dd, axis=(1, 2)) + np.sum(fp, axis=1)) / (2 * half)
    F = np.full((R, 2, 2), np.nan)
    F[:, 0, 0], F[:, 1, 0] = frob, 0.0  # a symmetric input keeps Mhat symmetric
    T = np.column_stack([tr, np.full(R, np.nan)])
    return PriorJacobian(F, T, probes=0)


class _Linearised(ProxLinearisation):
    """``P (W + C) P`` in the rotated coordinates of each draw at the minimiser ``M`` for the input ``A``."""

    def __init__(self, A: np.ndarray, M: np.ndarray, Ss: float, Sa: float, tau: float) -> None:
        Y = M + A - (Ss * _sym(M) + Sa * _anti(M))  # Mhat + tau G
        U, sig, Vt = np.linalg.svd(Y)
        super().__init__(U, sig, np.swapaxes(Vt, -1, -2), Ss, Sa, tau)


def nuclear_prox_jvp(
    A_s: np.ndarray,
    A_a: np.ndarray,
    M: np.ndarray,
    Sigmahat_s: float,
    Sigmahat_a: float,
    tau: float,
    E: np.ndarray,
    *,
    tol: float = 1e-10,
    max_iter: int = 2000,
) -> np.ndarray:
    """``K E``: the response of the weighted nuclear-norm estimator ``M`` (``(R, D, D)``, its minimiser at
    ``A_s + A_a``) to the input perturbation ``E`` (``(R, D, D)``), by the linearisation of the module docstring
    (``Sigmahat_a > 0``; ``tol``: the conjugate gradients' relative residual)."""
    if not (Sigmahat_s > 0 and Sigmahat_a > 0 and tau >= 0):
        raise ValueError(f"Sigmahat_s and Sigmahat_a must be > 0 and tau >= 0 (got {Sigmahat_s}, {Sigmahat_a}, {tau})")
    lin = _Linearised(A_s + A_a, M, float(Sigmahat_s), float(Sigmahat_a), tau)
    return lin.unrotate(lin.solve(lin.rotate(E), tol, max_iter)[0])


def nuclear_prox_jacobian(
    A_s: np.ndarray,
    A_a: np.ndarray,
    M: np.ndarray,
    Sigmahat_s: float,
    Sigmahat_a: float,
    tau: float,
    *,
    rank: int | None = None,
    probes: int = 2,
    seed: int = 0,
    tol: float = 1e-9,
    max_iter: int = 2000,
) -> PriorJacobian:
    """Block norms of ``dMhat/dA`` at the minimiser ``M`` (``(R, D, D)``) of the weighted nuclear-norm problem.

    ``A_s``, ``A_a``, ``Sigmahat_s``, ``Sigmahat_a``, ``tau``, ``rank`` as in
    ``weighted_nuclear_prox`` (``M`` must be its
    minimiser to a tight tolerance: the active set and the subgradient are read off it); ``probes``
    Hutchinson probes per draw and input block, drawn from ``np.random.default_rng([seed, 0x4A4143])``
    (independent of an instance sample drawn with ``default_rng(seed)``); ``tol``: the conjugate
    gradients' relative residual. See the module docstring for the method and the normalisation.
    """
    Ss, Sa = float(Sigmahat_s), float(Sigmahat_a)
    if not (Ss > 0 and Sa >= 0 and tau >= 0):
        raise ValueError(f"Sigmahat_s must be > 0, Sigmahat_a >= 0 and tau >= 0 (got {Ss}, {Sa}, {tau})")
    if probes < 1:
        raise ValueError(f"probes must be >= 1 (got {probes!r})")
    R, D = M.shape[0], M.shape[-1]
    if Sa == 0.0:
        if np.any(A_a):
            raise ValueError("Sigmahat_a = 0 with a non-zero antisymmetric input has no minimiser")
        return _two_sided_jacobian(A_s, Ss, tau)
    lin = _Linearised(A_s + A_a, M, Ss, Sa, tau)
    if rank is not None and rank < D:
        # the capped estimator keeps `rank` singular values: the cap binds when a further one exceeds tau
        over = np.sum(lin.active, axis=1) > rank
        if np.any(over):
            return PriorJacobian(np.full((R, 2, 2), np.inf), np.full((R, 2), np.nan), probes, 0, True)
    # a stream of its own: the probes must be independent of the instances' noise, which a sample drawn with
    # default_rng(seed) takes from the head of that stream
    rng = np.random.default_rng([seed, _PROBE_STREAM])
    frob = np.zeros((R, 2, 2))
    trace = np.zeros((R, 2))
    most = 0
    for _ in range(probes):
        G = rng.standard_normal((R, D, D))
        for b, xi in enumerate((_sym(G), _anti(G))):
            x, it = lin.solve(lin.rotate(xi), tol, max_iter)
            most = max(most, it)
            dM = lin.unrotate(x)
            parts = (_sym(dM), _anti(dM))
            for c in range(2):
                frob[:, c, b] += _dot(parts[c], parts[c])
            trace[:, b] += _dot(xi, dM)
    half = D * D / 2.0
    return PriorJacobian(frob / (probes * half), trace / (probes * half), probes, most)


def untied_prior_jacobian(
    hats: np.ndarray,
    *,
    lam: float,
    kappa: float,
    sample: UntiedPriorSample,
    solutions: np.ndarray,
    probes: int = 2,
    seed: int = 0,
) -> PriorJacobian:
    """:func:`nuclear_prox_jacobian` of the untied prior side at the conjugates ``hats`` on ``sample``.

    ``solutions``: the prior side's minimisers there (``UntiedPriorSide.solutions``, solved to a
    tight tolerance). An unobserved antisymmetric block (``qhat_a = mhat_a = Sigmahat_a = 0``) takes
    the exact two-sided route (module docstring).
    """
    A_s, A_a = effective_fields(hats, sample)
    rank = None if kappa >= 1 else max(1, int(round(kappa * sample.D)))
    return nuclear_prox_jacobian(
        A_s,
        A_a,
        np.asarray(solutions, float),
        float(hats[2]),
        float(hats[5]),
        2.0 * lam,
        rank=rank,
        probes=probes,
        seed=seed,
    )


def untied_prior_tangent(
    hats: np.ndarray,
    *,
    lam: float,
    kappa: float,
    sample: UntiedPriorSample,
    solutions: np.ndarray,
    tol: float = 1e-4,
    max_iter: int = 500,
) -> np.ndarray | None:
    """The derivative of the untied prior side's per-draw overlaps in the conjugates, ``(R, 6, 6)``.

    Entry ``[r, i, j]`` is ``d row_i / d hats_j`` on draw ``r`` (rows and conjugates in the order
    ``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)`` and ``(qhat_s, mhat_s, Sigmahat_s, qhat_a, mhat_a, Sigmahat_a)``;
    the rows as :func:`~singlehead.numerics.spectra.untied_prior.draw_rows`, the control variate's
    coefficient included). ``solutions``: the minimisers at ``hats`` (solved to a tight tolerance). The
    estimator moves by ``dMhat = K (dA - dW Mhat)``: a conjugate moves the input
    ``A_B = mhat_B M0_B + sqrt(qhat_B) Z_B`` or the weight ``W`` (``Sigmahat_B``), and ``K`` is the
    linearisation of the module docstring (one conjugate-gradient solve per conjugate, to the relative
    residual ``tol``: the draw errors it serves need no more). First order in the conjugates: exact where the active set
    of singular values does
    not change. ``None`` where the linearisation does not apply: an unobserved antisymmetric block
    (``Sigmahat_a = 0``), or a rank cap that binds on some draw.
    """
    h = np.asarray(hats, float)
    Ss, Sa, tau = float(h[2]), float(h[5]), 2.0 * lam
    if not (Ss > 0 and Sa > 0 and h[0] > 0 and h[3] > 0):
        return None
    M = np.asarray(solutions, float)
    A_s, A_a = effective_fields(h, sample)
    lin = _Linearised(A_s + A_a, M, Ss, Sa, tau)
    D = sample.D
    if kappa < 1 and np.any(np.sum(lin.active, axis=1) > max(1, int(round(kappa * D)))):
        return None
    Ms, Ma = _sym(M), _anti(M)
    inputs = (
        sample.Zs / (2.0 * math.sqrt(h[0])),
        _sym(sample.M0),
        -Ms,
        sample.Za / (2.0 * math.sqrt(h[3])),
        _anti(sample.M0),
        -Ma,
    )
    base = draw_rows(M, h, sample)
    out = np.empty((M.shape[0], 6, 6))
    for j, E in enumerate(inputs):
        try:
            x = lin.solve(lin.rotate(E), tol, max_iter)[0]
        except ArithmeticError:
            return None
        dM = lin.unrotate(x)
        # the rows are linear in M but for q_B (quadratic) and Sigma_B's 1/sqrt(qhat_B): a small step is exact to
        # O(step) relative, far below the draws' spread
        step = 1e-6 * max(abs(h[j]), 1e-12)
        hj = h.copy()
        hj[j] += step
        out[:, :, j] = (draw_rows(M + step * dM, hj, sample) - base) / step
    return out
