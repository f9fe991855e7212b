"""Finite-``d`` prior side: exact eigendecompositions of ``S0 + delta Z`` for fixed GOE draws.

Needed for power-law targets whose top eigenvalues are ``O(sqrt d)`` spikes
(``shared/THEORY.md`` §7; arXiv 2509.24914 §4). ``Z`` is GOE with semicircle on ``[-2, 2]``:
off-diagonal variance ``1/d``, diagonal variance ``2/d``. Since ``Z`` is rotation invariant,
``S0`` is taken diagonal. The draws are fixed by an explicit seed and reused for every
``delta`` (common random numbers), so the map ``delta -> integrals`` is deterministic and
smooth.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ._numerics import divided_differences
from .integrals import ThresholdIntegrals

__all__ = ["FiniteDSpectrum", "goe"]


def goe(d: int, rng: np.random.Generator) -> np.ndarray:
    """GOE matrix, off-diagonal variance ``1/d``, diagonal ``2/d`` (semicircle on ``[-2, 2]``)."""
    G = rng.standard_normal((d, d))
    return (G + G.T) / math.sqrt(2.0 * d)


def _divergence(nu: np.ndarray, f: np.ndarray, fp: np.ndarray) -> float:
    """``(1/d^2)[sum_i f'_i + sum_{i != j} (f_i - f_j)/(nu_i - nu_j)]`` (ties: mean of ``f'``)."""
    return float(divided_differences(nu, f, fp).sum()) / nu.size**2


class FiniteDSpectrum:
    """The prior-side integrals at finite ``d``, averaged over fixed GOE draws.

    Parameters
    ----------
    eigenvalues : ndarray, shape (d,)
        Eigenvalues of ``S0`` (e.g. a power law ``s_i = A i^-gamma``).
    draws : int
        Number of GOE draws ``Z`` (fixed once, reused for every ``delta``).
    seed : int
        Seed of the draws.

    Notes
    -----
    The last eigendecomposition is kept on the instance (explicit, per-object cache), so
    successive calls at the same ``delta`` (several ``eps``) cost one decomposition.
    """

    def __init__(self, eigenvalues: np.ndarray, draws: int = 4, seed: int = 0) -> None:
        s = np.asarray(eigenvalues, dtype=float).ravel()
        if s.size < 2 or not np.all(np.isfinite(s)):
            raise ValueError("eigenvalues must be a finite array with at least 2 entries")
        if int(draws) < 1:
            raise ValueError(f"draws must be >= 1 (got {draws!r})")
        self.s = s
        self.d = s.size
        self.draws = int(draws)
        self.seed = int(seed)
        rng = np.random.default_rng(self.seed)
        self._Z = np.stack([goe(self.d, rng) for _ in range(self.draws)])
        self._cache: tuple | None = None

    def _decompose(self, delta: float, vectors: bool):
        delta = float(delta)
        if self._cache is not None and self._cache[0] == delta and (self._cache[2] is not None or not vectors):
            return self._cache[1], self._cache[2]
        nus, hfs = [], []
        for Z in self._Z:
            Y = delta * Z
            Y[np.diag_indices(self.d)] += self.s
            if vectors:
                nu, U = np.linalg.eigh(Y)
                # Hellmann–Feynman u_i^T Z u_i; for delta away from 0 use u^T Z u = (nu - u^T S0 u)/delta
                # (O(d^2), no matrix product), else the product with Z
                if abs(delta) > 1e-3 * max(1.0, float(np.max(np.abs(self.s)))):
                    hfs.append((nu - self.s @ (U * U)) / delta)
                else:
                    hfs.append(np.einsum("ij,ij->j", U, Z @ U))
            else:
                nu = np.linalg.eigvalsh(Y)
            nus.append(nu)
        nu = np.stack(nus)
        hf = np.stack(hfs) if vectors else None
        self._cache = (delta, nu, hf)
        return nu, hf

    def eigenvalues(self, delta: float) -> np.ndarray:
        """Eigenvalues of ``diag(s) + delta Z_r``, shape ``(draws, d)``, ascending."""
        return self._decompose(delta, vectors=False)[0].copy()

    def eigen_derivatives(self, delta: float) -> np.ndarray:
        """``d nu_i / d delta = u_i^T Z u_i`` (Hellmann–Feynman), shape ``(draws, d)``."""
        return self._decompose(delta, vectors=True)[1].copy()

    def threshold_integrals(self, delta: float, eps: float, rank_cap: float | None = None,
                            *, pathwise: bool = True) -> ThresholdIntegrals:
        """Finite-``d`` analogue of :func:`soft_threshold_integrals`, averaged over the draws.

        ``f(nu) = (nu - eps)_+`` on the top ``round(kappa d)`` eigenvalues (all of them
        above ``eps`` without a cap); ``J = mean_r (1/d) sum_i f(nu_i)^2``,
        ``dJ_deps = -(2/d) sum f``, ``D`` the exact divergence
        ``(1/d^2)[sum_i f'(nu_i) + sum_{i != j}(f_i - f_j)/(nu_i - nu_j)]`` and
        ``dJ_ddelta = 2 delta D``. With ``pathwise=True`` the Hellmann–Feynman derivative
        ``(2/d) sum_i f_i u_i^T Z u_i`` (the exact per-draw derivative of ``J`` at fixed kept set)
        is reported as ``dJ_ddelta_pathwise``; by Stein's lemma it agrees with ``2 delta D`` in
        expectation up to ``O(1/d)`` (per-draw noise is larger for power laws, whose top
        eigenvalues are ``O(sqrt d)``). ``cutoff`` is the
        mean over draws of the mid-point between the last kept and first dropped eigenvalue.
        """
        delta, eps = float(delta), float(eps)
        nu, hf = self._decompose(delta, vectors=pathwise)
        d = self.d
        J = np.empty(self.draws)
        S1 = np.empty(self.draws)
        D = np.empty(self.draws)
        P = np.empty(self.draws)
        rank = np.empty(self.draws)
        cut = np.empty(self.draws)
        binds = np.zeros(self.draws, dtype=bool)
        p_cap = None if rank_cap is None else int(round(float(rank_cap) * d))
        for r in range(self.draws):
            x = nu[r]
            above = x > eps
            n_above = int(above.sum())
            keep = above.copy()
            cut[r] = eps
            if p_cap is not None and p_cap < n_above:
                binds[r] = True
                keep = np.zeros(d, dtype=bool)
                if p_cap > 0:
                    keep[d - p_cap:] = True  # ascending order: the top p_cap
                lo = x[d - p_cap - 1]
                hi = x[d - p_cap] if p_cap > 0 else x[-1]
                cut[r] = 0.5 * (lo + hi) if p_cap > 0 else hi
            f = np.where(keep, x - eps, 0.0)
            fp = keep.astype(float)
            J[r] = np.mean(f * f)
            S1[r] = np.mean(f)
            D[r] = _divergence(x, f, fp)
            P[r] = 2.0 * np.mean(f * hf[r]) if pathwise else np.nan
            rank[r] = keep.mean()
        Dm = float(D.mean())
        return ThresholdIntegrals(J=float(J.mean()), dJ_ddelta=2.0 * delta * Dm, dJ_deps=-2.0 * float(S1.mean()),
                                  rank_fraction=float(rank.mean()), cap_binds=bool(binds.mean() > 0.5),
                                  cutoff=float(cut.mean()), divergence=Dm,
                                  dJ_ddelta_pathwise=float(P.mean()) if pathwise else None)

    def divergence(self, delta: float, f: Callable[[np.ndarray], np.ndarray],
                   fprime: Callable[[np.ndarray], np.ndarray]) -> float:
        """Exact finite-``d`` divergence of the spectral map ``f``, mean over draws."""
        nu = self._decompose(float(delta), vectors=False)[0]
        return float(np.mean([_divergence(x, f(x), fprime(x)) for x in nu]))
