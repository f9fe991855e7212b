"""Finite-``d`` prior side: exact eigendecompositions of ``S0 + delta Z`` for a few fixed GOE draws.

Needed for power-law targets whose top eigenvalues are ``O(sqrt d)`` spikes
(``shared/THEORY.md`` §7; arXiv 2509.24914 §4). ``Z`` is GOE with semicircle on ``[-2, 2]``:
off-diagonal variance ``1/d``, diagonal variance ``2/d``. Since ``Z`` is rotation invariant,
``S0`` is taken diagonal, ``S0 = diag(s)``. The draws are fixed by an explicit seed and reused for
every ``delta`` (common random numbers), so the map ``delta -> integrals`` is deterministic and
smooth; the state-evolution map is averaged over the draws *inside* the iteration (one fixed
point of the averaged map, not an average of per-draw fixed points).

Why the overlap is computed pathwise (the cause of the old ``+2 %`` bias)
------------------------------------------------------------------------
The SE needs the overlap ``m = eta (1/d) E Tr f(Y) S0``. The earlier finite mode obtained it
from Stein's lemma, ``m = eta [J - (delta/2) dJ/ddelta - (eps/2) dJ/deps]``, i.e. with
``(1/d) Tr f(Y) Z`` replaced by its expectation ``delta D``. That is exact in expectation but
throws away a correlation that matters: a spike ``s_1 = O(sqrt d)`` moves to first order by
``delta Z_11`` (standard deviation ``delta sqrt(2/d)``), which shifts
``J = (1/d) sum_i f(nu_i)^2`` by ``(2 s_1/d) delta Z_11``: a per-draw spread of ``J`` of about
``1e-3`` at ``d = 400`` (``gamma = 1.25``, ``Q0 = 1``, ``delta = 0.18``), against a matrix
error ``Q0 - 2m + q ≈ 0.011``. With ``m`` from Stein's lemma that fluctuation does not cancel in
``Q0 - 2m + q``, so a fixed set of 3-4 draws offset the predicted error by a few percent
(measured: ``+2 %`` at ``p = 14`` and ``400``), different for every draw set and erratic in
``d``. The pathwise overlap ``(1/d) sum_i f(nu_i) u_i^T S0 u_i`` moves with ``J`` (the per-draw
matrix error ``||eta f(Y) - S0||_F^2/d`` contains ``delta Z_11`` only quadratically): at the
``p = 14`` fixed point the per-draw standard deviation of the matrix error (0.0112) drops from
``1.1e-3`` to ``4e-5``, and the mean of 12 draws agrees with the asymptotic (free-probability)
law within ``0.05 %``. It needs eigenvectors, but only through
``a_i = u_i^T S0 u_i = sum_k s_k U_ki^2``, computed once per ``delta``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Callable

import numpy as np

from ._numerics import TIE_RTOL, divided_differences
from .integrals import ThresholdIntegrals

__all__ = ["FiniteDSpectrum", "goe", "DEFAULT_DRAWS"]

DEFAULT_DRAWS = 3
# decompositions kept per instance (distinct delta values, least recently used dropped): the
# solver revisits a delta (final evaluation, collapse test, spread) and a sweep revisits the
# collapse point's delta, which does not depend on lam or the width
_CACHE_SIZE = 8
# significant digits of delta kept (cache key and value used): relative change <= 5e-14
_DELTA_DIGITS = 14
# below this |delta| / max|s| the Hellmann-Feynman derivative u^T Z u is computed with Z, not as
# (nu - u^T S0 u)/delta (cancellation)
_HF_DIRECT_BELOW = 1e-3


def goe(d: int, rng: np.random.Generator) -> np.ndarray:
    """GOE matrix, off-diagonal variance ``1/d``, diagonal ``2/d`` (semicircle on ``[-2, 2]``)."""
    G = rng.standard_normal((d, d))
    return (G + G.T) / math.sqrt(2.0 * d)


def _divergence(nu: np.ndarray, f: np.ndarray, fp: np.ndarray) -> float:
    """``(1/d^2)[sum_i f'_i + sum_{i != j} (f_i - f_j)/(nu_i - nu_j)]`` (ties: mean of ``f'``)."""
    return float(divided_differences(nu, f, fp).sum()) / nu.size**2


def _threshold_divergence(nu: np.ndarray, k: int, eps: float) -> float:
    """:func:`_divergence` of ``f = (nu - eps) 1[kept]`` when the kept set is the top ``k`` (``nu`` ascending).

    Pairs of kept eigenvalues contribute exactly 1, pairs of dropped ones 0, so only the
    ``k (d - k)`` mixed pairs are summed: ``d^2 D = k + k (k - 1) + 2 sum_{i kept, j dropped}
    (nu_i - eps)/(nu_i - nu_j)`` (a tie, ``|nu_i - nu_j| <= TIE_RTOL max(1, max|nu|)``, counts 1/2,
    the mean of the two ``f'``) — ``O(k (d - k))`` instead of ``O(d^2)``.
    """
    d = nu.size
    if k == 0:
        return 0.0
    hi, lo = nu[d - k:], nu[: d - k]
    gap = hi[:, None] - lo[None, :]
    tied = np.abs(gap) <= TIE_RTOL * max(1.0, float(np.max(np.abs(nu))))
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = np.where(tied, 0.5, (hi - eps)[:, None] / gap)
    return (k * k + 2.0 * float(mixed.sum())) / d**2


class FiniteDSpectrum:
    """The prior-side integrals at finite ``d``, averaged over fixed GOE draws.

    Parameters
    ----------
    eigenvalues : ndarray, shape (d,)
        Eigenvalues of ``S0`` (e.g. a power law ``s_i = A i^-gamma``).
    draws : int
        Number of GOE draws ``Z`` (fixed once, reused for every ``delta``; >= 1). Default 3.
    seed : int
        Seed of the draws.

    Notes
    -----
    For each ``delta`` the ``draws`` matrices ``diag(s) + delta Z_r`` are diagonalised once
    (one batched ``eigh``) and ``nu_i`` and ``a_i = u_i^T S0 u_i`` are kept in a small LRU cache
    on the instance (``_CACHE_SIZE`` values of ``delta``), so any number of thresholds, rank
    caps and spread evaluations at that ``delta`` cost ``O(draws d^2)`` at most.
    ``n_decompositions`` counts the batched decompositions done (for tests and benchmarks).
    """

    def __init__(self, eigenvalues: np.ndarray, draws: int = DEFAULT_DRAWS, seed: int = 0) -> None:
        s = np.asarray(eigenvalues, dtype=float).ravel()
        if s.size < 2 or not np.all(np.isfinite(s)):
            raise ValueError("eigenvalues must be a finite array with at least 2 entries")
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or int(draws) < 1:
            raise ValueError(f"draws must be an integer >= 1 (got {draws!r})")
        self.s = s
        self.d = s.size
        self.draws = int(draws)
        self.seed = int(seed)
        rng = np.random.default_rng(self.seed)
        self._Z = np.stack([goe(self.d, rng) for _ in range(self.draws)])
        self._cache: OrderedDict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()
        self.n_decompositions = 0

    def _decompose(self, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(nu, a, hf)``, each ``(draws, d)``: eigenvalues (ascending), ``u_i^T S0 u_i``, ``u_i^T Z u_i``.

        ``delta`` is first rounded to ``_DELTA_DIGITS`` significant digits (the map is a function
        of the rounded value, so cache hits change nothing): round trips through the solver's
        coordinates otherwise turn the same point into distinct keys.
        """
        delta = float(f"{float(delta):.{_DELTA_DIGITS - 1}e}")
        hit = self._cache.get(delta)
        if hit is not None:
            self._cache.move_to_end(delta)
            return hit
        Y = delta * self._Z
        idx = np.arange(self.d)
        Y[:, idx, idx] += self.s
        nu, U = np.linalg.eigh(Y)
        self.n_decompositions += 1
        U2 = U * U
        a = np.einsum("k,rki->ri", self.s, U2)
        if abs(delta) > _HF_DIRECT_BELOW * max(1.0, float(np.max(np.abs(self.s)))):
            hf = (nu - a) / delta  # Hellmann-Feynman u^T Z u, O(d^2) (Y u = nu u)
        else:
            hf = np.einsum("rki,rkl,rli->ri", U, self._Z, U)
        entry = (nu, a, hf)
        self._cache[delta] = entry
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return entry

    def eigenvalues(self, delta: float) -> np.ndarray:
        """Eigenvalues of ``diag(s) + delta Z_r``, shape ``(draws, d)``, ascending."""
        return self._decompose(delta)[0].copy()

    def eigen_derivatives(self, delta: float) -> np.ndarray:
        """``d nu_i / d delta = u_i^T Z u_i`` (Hellmann–Feynman), shape ``(draws, d)``."""
        return self._decompose(delta)[2].copy()

    def overlaps(self, delta: float) -> np.ndarray:
        """``u_i^T S0 u_i`` for every eigenvector of ``diag(s) + delta Z_r``, shape ``(draws, d)``."""
        return self._decompose(delta)[1].copy()

    def threshold_integrals(self, delta: float, eps: float, rank_cap: float | None = None,
                            *, pathwise: bool = True) -> ThresholdIntegrals:
        """Finite-``d`` analogue of :func:`soft_threshold_integrals`, averaged over the draws.

        ``f(nu) = (nu - eps)_+`` on the top ``round(kappa d)`` eigenvalues (all of them above
        ``eps`` without a cap). Per draw ``r``: ``J_r = (1/d) sum_i f_i^2``,
        ``S1_r = (1/d) sum_i f_i``, the pathwise overlap ``A_r = (1/d) sum_i f_i u_i^T S0 u_i``
        (``= (1/d) Tr f(Y_r) S0``, see the module docstring for why it is not taken from Stein's
        lemma) and the exact divergence ``D_r = (1/d^2)[sum_i f'_i + sum_{i != j}
        (f_i - f_j)/(nu_i - nu_j)]``. Reported: the draw means ``J``, ``dJ_deps = -2 S1``,
        ``divergence = D``, ``dJ_ddelta = 2 delta D``, ``overlap = A``, and the per-draw
        ``J_draws``, ``overlap_draws``, ``divergence_draws``. With ``pathwise=True`` also the Hellmann–Feynman
        derivative ``(2/d) sum_i f_i u_i^T Z u_i`` (exact per-draw derivative of ``J`` at fixed kept
        set; equals ``2 delta D`` in expectation up to ``O(1/d)``) as ``dJ_ddelta_pathwise``
        (it costs nothing extra now: the eigenvectors are always computed). ``cutoff`` is the
        mean over draws of the mid-point between the last kept and first dropped eigenvalue.
        """
        delta, eps = float(delta), float(eps)
        nu, a, hf = self._decompose(delta)
        d, R = self.d, self.draws
        n_above = np.sum(nu > eps, axis=1)
        p_cap = d if rank_cap is None else int(round(float(rank_cap) * d))
        k = np.minimum(n_above, p_cap)  # kept: the top k of each (ascending) row
        keep = np.arange(d)[None, :] >= (d - k)[:, None]
        f = np.where(keep, nu - eps, 0.0)
        J = np.mean(f * f, axis=1)
        S1 = np.mean(f, axis=1)
        A = np.mean(f * a, axis=1)
        D = np.array([_threshold_divergence(nu[r], int(k[r]), eps) for r in range(R)])
        binds = n_above > p_cap
        cut = np.full(R, eps)
        for r in np.flatnonzero(binds):
            kr = int(k[r])
            cut[r] = 0.5 * (nu[r, d - kr - 1] + nu[r, d - kr]) if kr > 0 else nu[r, -1]
        Dm = float(D.mean())
        P = float(np.mean(2.0 * np.mean(f * hf, axis=1))) if pathwise else None
        return ThresholdIntegrals(J=float(J.mean()), dJ_ddelta=2.0 * delta * Dm, dJ_deps=-2.0 * float(S1.mean()),
                                  rank_fraction=float(k.mean() / d), cap_binds=bool(binds.mean() > 0.5),
                                  cutoff=float(cut.mean()), divergence=Dm, dJ_ddelta_pathwise=P,
                                  overlap=float(A.mean()), J_draws=tuple(map(float, J)),
                                  overlap_draws=tuple(map(float, A)), divergence_draws=tuple(map(float, D)))

    def divergence(self, delta: float, f: Callable[[np.ndarray], np.ndarray],
                   fprime: Callable[[np.ndarray], np.ndarray]) -> float:
        """Exact finite-``d`` divergence of the spectral map ``f``, mean over draws."""
        nu = self._decompose(float(delta))[0]
        return float(np.mean([_divergence(x, f(x), fprime(x)) for x in nu]))
