"""Spectral-denoiser integrals of ``mu_delta = mu0 ⊞ SC(delta^2)`` for the state evolution.

The prior side of the ERM state evolution (arXiv 2509.24914, Thm. 3.1; docs: Theory,
:ref:`theory-prior-side`) denoises ``Y = S0 + delta Z`` eigenvalue-wise with the soft threshold
``f(x) = (x - eps)_+`` (times ``eta``), optionally keeping only the top ``kappa d``
eigenvalues (rank cap ``kappa = p/d``). It needs

* ``J = int f(x)^2 mu_delta(dx)`` (``= int_eps^inf (x - eps)^2 mu_delta(dx)`` without cap),
* ``dJ/deps = -2 int f(x) mu_delta(dx)`` (exact),
* the free divergence ``D = int int (f(x) - f(y))/(x - y) mu_delta(dx) mu_delta(dy)``
  ``= 2 int f(x) H(x) mu_delta(dx)`` (``H`` the Hilbert transform, diagonal ``x = y`` read as
  ``f'(x)`` on atoms), reported as ``dJ_ddelta := 2 delta D``.

``dJ_ddelta`` is *defined* as ``2 delta D``, which is what the state evolution uses:
``m = eta [J - (delta/2) dJ_ddelta - (eps/2) dJ_deps]``,
``Sigma = dJ_ddelta / (2 delta Sigmahat) = D / Sigmahat``.

Without a rank cap ``2 delta D`` is also the derivative ``dJ/ddelta``: the free heat (complex
Burgers) equation ``d/dv int phi dmu_v = 1/2 int int (phi'(x) - phi'(y))/(x - y) dmu_v dmu_v``
(Biane 1997; Voiculescu) with ``phi = f^2`` and ``f f' = f`` gives ``dJ/dv = D``. With a
binding cap, ``f`` jumps at the cut-off ``c(v)`` (``mu_v((c, inf)) = kappa``), but the identity
still holds *at fixed kappa*: ``dJ/dv = int psi d(dmu_v/dv)`` with the continuous function
``psi = ((x - eps)^2 - (c - eps)^2) 1[x > c]`` (the moving cut-off term cancels because the
kept mass is fixed), and ``psi' = 2 f`` gives again ``dJ/dv = D``. The tests check
``2 delta D`` against a central difference of ``J`` in both cases; likewise ``dJ_deps`` is the
derivative at fixed ``kappa``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from singlehead.numerics.spectra.convolution import ConvolvedLaw, free_convolve_semicircle
from singlehead.numerics.spectra.primitives import cos_gauss_cumulative, divided_differences

__all__ = [
    "ThresholdIntegrals",
    "LinearShrinkageIntegrals",
    "soft_threshold_integrals",
    "linear_shrinkage_integrals",
    "free_divergence",
    "rie_mmse_integral",
]


@dataclass(frozen=True)
class ThresholdIntegrals:
    """Integrals of the (rank-capped) soft threshold against ``mu_delta``.

    Attributes
    ----------
    J : float
        ``int f^2 dmu_delta`` with ``f(x) = (x - eps)_+ 1[x > c]``.
    dJ_ddelta : float
        ``2 delta D`` (equals ``dJ/ddelta`` at fixed ``eps`` and ``kappa``, see module notes).
    dJ_deps : float
        ``-2 int f dmu_delta`` (equals ``dJ/deps`` at fixed cut-off).
    rank_fraction : float
        Fraction of non-zero eigenvalues of the estimator, ``min(kappa, 1 - F(eps))``.
    cap_binds : bool
        Whether ``kappa < 1 - F(eps)``.
    cutoff : float
        ``c = max(eps, F^{-1}(1 - kappa))``: eigenvalues ``<= c`` are set to zero.
    divergence : float
        The free divergence ``D``.
    dJ_ddelta_pathwise : float or None
        Finite-``d`` mode only: mean over draws of the Hellmann–Feynman derivative
        ``(2/d) sum_i f(nu_i) u_i^T Z u_i`` of ``J`` at fixed kept set (``None`` otherwise).
    overlap : float or None
        Finite-``d`` mode only: mean over draws of the pathwise overlap
        ``(1/d) Tr f(Y_r) S0 = (1/d) sum_i f(nu_i) u_i^T S0 u_i``; its expectation is
        ``J - (delta/2) dJ_ddelta - (eps/2) dJ_deps`` (Stein's lemma, up to ``O(1/d)``), which the
        asymptotic mode uses instead (``None`` there). See :class:`~singlehead.numerics.spectra.FiniteDSpectrum` for why
        the SE must
        use the pathwise form at finite ``d``.
    J_draws, overlap_draws, divergence_draws : tuple of float or None
        Finite-``d`` mode only: ``J``, ``overlap`` and ``divergence`` of each draw (their means
        are the reported values), for the draw-to-draw spread.

    ``J = int_{eps} (x - eps)^2 mu_delta(dx)`` with its derivatives in ``delta`` and ``eps``, the
    rank fraction ``1 - F_{mu_delta}(c)`` and the cut-off ``c`` (docs: Theory, :ref:`theory-prior-side`).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, soft_threshold_integrals
    >>> integrals = soft_threshold_integrals(MarchenkoPastur(0.5), delta=0.5, eps=0.0)
    >>> round(integrals.rank_fraction, 3), integrals.cap_binds   # mass of mu_delta above eps = 0
    (0.682, False)
    """

    J: float
    dJ_ddelta: float
    dJ_deps: float
    rank_fraction: float
    cap_binds: bool
    cutoff: float
    divergence: float = math.nan
    dJ_ddelta_pathwise: float | None = None
    overlap: float | None = None
    J_draws: tuple[float, ...] | None = None
    overlap_draws: tuple[float, ...] | None = None
    divergence_draws: tuple[float, ...] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LinearShrinkageIntegrals:
    """Integrals for the identity map ``f(x) = x`` (Frobenius penalty: ``Shat = eta Y``).

    Attributes
    ----------
    second_moment : float
        ``int x^2 dmu_delta = Q0 + delta^2``.
    dsecond_ddelta : float
        ``2 delta`` (= ``2 delta D`` since ``D = 1``).
    divergence : float
        ``D = int int (x - y)/(x - y) = 1``.
    mean : float
        ``int x dmu_delta = Tr S0/d``.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, linear_shrinkage_integrals
    >>> out = linear_shrinkage_integrals(MarchenkoPastur(0.5), delta=0.5)
    >>> round(out.second_moment, 6), round(out.mean, 6)   # E y^2 = Q0 + delta^2, E y = Tr S0 / d
    (1.75, 0.707107)
    """

    second_moment: float
    dsecond_ddelta: float
    divergence: float
    mean: float


def _as_convolved(law, v: float) -> ConvolvedLaw:
    if isinstance(law, ConvolvedLaw):
        if abs(law.variance - v) > 1e-14 * max(1.0, v):
            raise ValueError(f"ConvolvedLaw has variance {law.variance}, expected {v}")
        return law
    return free_convolve_semicircle(law, v)


def _pair_divergence(pos: np.ndarray, mass: np.ndarray, fa: np.ndarray, fpa: np.ndarray) -> float:
    """``sum_{a != b} m_a m_b (f_a - f_b)/(t_a - t_b) + sum_a m_a^2 f'_a`` (coincident split atoms: 0)."""
    return float(mass @ divided_differences(pos, fa, fpa, tie_rtol=0.0, tie="zero") @ mass)


def _divergence_parts(cl: ConvolvedLaw, f, pos, mass, fa, fpa, breakpoints) -> float:
    """Free divergence of a measure = continuous part + point masses."""
    pts = [-math.inf, *sorted(breakpoints), math.inf]
    rules = [cl.rule(a, b) for a, b in zip(pts[:-1], pts[1:])]
    x = np.concatenate([r.x for r in rules])
    w = np.concatenate([r.w for r in rules])
    H = np.concatenate([r.H for r in rules])
    fx = f(x) if x.size else x
    D = 2.0 * float(np.sum(w * fx * H))
    if pos.size:
        if x.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                M = (fx[:, None] - fa[None, :]) / (x[:, None] - pos[None, :])
            D += 2.0 * float(w @ M @ mass)
        D += _pair_divergence(pos, mass, fa, fpa)
    return D


def _tail_quantile(rule, kappa: float, n: int) -> float | None:
    """Where the tail mass of a quadrature rule crosses ``kappa``: a start for the exact cut-off.

    ``None`` when the rule holds less mass. When the rule is made of whole panels of ``n`` cosine
    nodes in increasing order (the MP engine's rules, parametrised by ``x``), the mass below each node
    is the running integral of the panel's interpolant (:func:`cos_gauss_cumulative`) and the crossing
    is found on the cubic Hermite interpolant between two nodes (slopes: the density), accurate to
    ~1e-9 of the bulk width; otherwise the tail mass is interpolated linearly, each node holding half
    of its weight on either side. The exact solve then needs two or three evaluations instead of four.
    """
    x, w = rule.x, rule.w
    total = float(np.sum(w))
    if x.size < 2 or not total > kappa:
        return None
    level = total - kappa  # the rule's mass below the cut-off
    if x.size % n or np.any(np.diff(x) <= 0):
        below = np.cumsum(w) - 0.5 * w
        return float(np.interp(level, below, x))
    panels = w.reshape(-1, n)
    below = (panels @ cos_gauss_cumulative(n).T + (np.cumsum(panels.sum(axis=1)) - panels.sum(axis=1))[:, None]).ravel()
    i = int(np.searchsorted(below, level)) - 1
    if i < 0 or i >= x.size - 1:
        return float(np.interp(level, below, x))
    h, g0, g1 = x[i + 1] - x[i], below[i], below[i + 1]
    d0, d1 = h * rule.p[i], h * rule.p[i + 1]
    u = min(max((level - g0) / (g1 - g0), 0.0), 1.0) if g1 > g0 else 0.5
    for _ in range(3):  # Newton on the Hermite cubic in u in [0, 1] (increasing between the nodes)
        u2, u3 = u * u, u * u * u
        val = (2 * u3 - 3 * u2 + 1) * g0 + (u3 - 2 * u2 + u) * d0 + (-2 * u3 + 3 * u2) * g1 + (u3 - u2) * d1
        der = (6 * u2 - 6 * u) * (g0 - g1) + (3 * u2 - 4 * u + 1) * d0 + (3 * u2 - 2 * u) * d1
        if not der > 0:
            break
        u = min(max(u - (val - level) / der, 0.0), 1.0)
    return float(x[i] + u * h)


def _threshold_integrals(cl: ConvolvedLaw, eps: float, rank_cap: float | None) -> ThresholdIntegrals:
    eps = float(eps)
    delta = math.sqrt(cl.variance)
    r_hi = cl.rule(eps, math.inf, with_cum=rank_cap is not None)
    pos, mass = cl.atoms()
    mass_eps = float(np.sum(r_hi.w) + np.sum(mass[pos > eps]))
    binds = rank_cap is not None and float(rank_cap) < mass_eps - 1e-13
    frac = None
    c = eps
    if binds:
        c, frac = cl.upper_cut(float(rank_cap), guess=_tail_quantile(r_hi, float(rank_cap), cl.n_nodes))
        if c <= eps:  # numerically at the threshold: the cap does not bind
            c, frac, binds = eps, None, False
        else:
            r_hi = cl.rule(c, math.inf)
    f_hi = r_hi.x - eps
    J = float(np.sum(r_hi.w * f_hi**2))
    S1 = float(np.sum(r_hi.w * f_hi))
    kept = pos > c
    fa = np.where(kept, pos - eps, 0.0)
    fpa = kept.astype(float)
    if frac is not None and frac > 0:
        j = int(np.argmin(np.abs(pos - c)))
        pos = np.append(pos, pos[j])
        fa = np.append(fa, c - eps)
        fpa = np.append(fpa, 1.0)
        mass = np.append(mass, frac * mass[j])
        mass[j] *= 1.0 - frac
    J += float(np.dot(mass, fa**2))
    S1 += float(np.dot(mass, fa))

    def f(x):
        return np.where(x > c, x - eps, 0.0)

    if pos.size:
        D = _divergence_parts(cl, f, pos, mass, fa, fpa, (c,))
    else:  # continuous law: D = 2 int f H dmu, f = 0 below c
        D = 2.0 * float(np.sum(r_hi.w * f_hi * r_hi.H))
    rank = min(float(rank_cap), mass_eps) if binds else mass_eps
    return ThresholdIntegrals(
        J=J,
        dJ_ddelta=2.0 * delta * D,
        dJ_deps=-2.0 * S1,
        rank_fraction=rank,
        cap_binds=bool(binds),
        cutoff=float(c),
        divergence=D,
    )


def soft_threshold_integrals(law, delta: float, eps: float, rank_cap: float | None = None) -> ThresholdIntegrals:
    """Integrals of the (rank-capped) soft threshold against ``mu_delta = mu0 ⊞ SC(delta^2)``.

    Parameters
    ----------
    law : MarchenkoPastur, DiscreteLaw, SpikedLaw or ConvolvedLaw
        Target law ``mu0`` (a :class:`ConvolvedLaw` with variance ``delta^2`` is reused).
    delta : float
        Noise level of the effective denoising problem ``Y = S0 + delta Z`` (docs: Theory, :ref:`theory-prior-side`).
    eps : float
        Threshold ``eps = 2 lambda / mhat``.
    rank_cap : float, optional
        ``kappa = p/d``: only the top ``kappa`` fraction of eigenvalues is kept; ``None`` (or
        ``kappa >= 1 - F(eps)``) means no cap.

    Returns
    -------
    ThresholdIntegrals
        ``J``, ``dJ_ddelta = 2 delta D``, ``dJ_deps``, rank fraction, cap flag, cut-off,
        divergence ``D``. For ``delta = 0`` the law ``mu0`` is used exactly (atoms included;
        ``f'`` at an atom is ``1[t > c]``).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, soft_threshold_integrals
    >>> law = MarchenkoPastur(0.5)
    >>> full = soft_threshold_integrals(law, delta=0.5, eps=0.3)
    >>> capped = soft_threshold_integrals(law, delta=0.5, eps=0.3, rank_cap=0.2)
    >>> capped.rank_fraction <= 0.2 + 1e-12 < full.rank_fraction, capped.cap_binds
    (True, True)
    """
    delta = float(delta)
    return _threshold_integrals(_as_convolved(law, delta * delta), eps, rank_cap)


def linear_shrinkage_integrals(law, delta: float) -> LinearShrinkageIntegrals:
    """Integrals for the Frobenius-penalty (unfactorized) student: ``f(x) = x``.

    The prox of ``lambda d ||S||_F^2`` is a linear shrinkage ``Shat = eta' Y`` of
    ``Y = S0 + delta Z``, so the prior side only needs ``int x^2 dmu_delta = Q0 + delta^2``,
    its ``delta``-derivative ``2 delta`` and the divergence ``D = 1`` (the state-evolution
    constants are derived in the docs, Theory, :ref:`theory-prior-side`).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, linear_shrinkage_integrals
    >>> out = linear_shrinkage_integrals(MarchenkoPastur(0.5), delta=0.5)
    >>> round(out.divergence, 6)                        # f(x) = x has free divergence 1
    1.0
    """
    delta = float(delta)
    return LinearShrinkageIntegrals(
        second_moment=float(law.second_moment()) + delta * delta,
        dsecond_ddelta=2.0 * delta,
        divergence=1.0,
        mean=float(law.mean()),
    )


def free_divergence(
    law,
    delta: float,
    f: Callable[[np.ndarray], np.ndarray],
    fprime: Callable[[np.ndarray], np.ndarray] | None = None,
    breakpoints: tuple[float, ...] = (),
) -> float:
    """Free divergence ``int int (f(x) - f(y))/(x - y) dmu_delta dmu_delta`` of a spectral map.

    Continuous part: ``2 int f H dmu`` by quadrature split at ``breakpoints`` (put the kinks
    and jumps of ``f`` there). Point masses: exact pair sums, with ``f'`` (``fprime``, or a
    central difference if ``None``) on the diagonal. This is the large-``d`` limit of
    ``(1/d^2)[sum_i f'(nu_i) + sum_{i != j} (f(nu_i) - f(nu_j))/(nu_i - nu_j)]``.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, free_divergence
    >>> round(free_divergence(MarchenkoPastur(0.5), 0.5, lambda x: 2.0 * x, lambda x: 2.0 + 0 * x), 6)
    2.0
    """
    cl = _as_convolved(law, float(delta) ** 2)
    pos, mass = cl.atoms()
    if fprime is None:
        h = 1e-6 * (1.0 + np.abs(pos))
        fpa = (f(pos + h) - f(pos - h)) / (2 * h) if pos.size else pos
    else:
        fpa = fprime(pos) if pos.size else pos
    fa = f(pos) if pos.size else pos
    return _divergence_parts(cl, f, pos, mass, np.asarray(fa, float), np.asarray(fpa, float), breakpoints)


def rie_mmse_integral(law, v: float) -> float:
    """``int mu_v(x)^3 dx`` for ``mu_v = mu0 ⊞ SC(v)``, ``v > 0`` (docs: Theory, :ref:`theory-bayes`).

    Enters the rotation-invariant denoising MMSE (Bun, Allez, Bouchaud & Potters 2016;
    Bayes-optimal attention-indexed model, arXiv 2506.01582):
    ``MMSE(v) = v - (4 pi^2/3) v^2 int mu_v^3``, i.e. ``q = Q0 - 1/qhat + 4 pi^2/(3 qhat^2) int mu^3``.
    Only the continuous part contributes (point masses of spiked laws have vanishing weight).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, rie_mmse_integral
    >>> rie_mmse_integral(MarchenkoPastur(0.5), 0.25) > 0.0
    True
    """
    v = float(v)
    if not v > 0:
        raise ValueError(f"rie_mmse_integral needs v > 0 (got {v!r})")
    cl = _as_convolved(law, v)
    r = cl.rule()
    return float(np.sum(r.w * r.p**2))
