"""Finite-``d`` prior side: exact eigendecompositions of ``S0 + delta Z`` for a few fixed GOE draws.

Needed for power-law targets whose top eigenvalues are ``O(sqrt d)`` spikes
(docs: Theory, :ref:`theory-prior-side`; arXiv 2509.24914 §4). ``Z`` is GOE with semicircle on ``[-2, 2]``:
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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from singlehead.numerics.spectra.integrals import ThresholdIntegrals
from singlehead.numerics.spectra.primitives import TIE_RTOL, divided_differences

__all__ = ["FiniteDSpectrum", "goe", "check_draws", "DEFAULT_DRAWS"]

DEFAULT_DRAWS = 3
# decompositions kept per instance (distinct delta values, least recently used dropped): the
# solver revisits a delta (final evaluation, collapse test, spread) and a sweep revisits the
# collapse point's delta, which does not depend on lam or the width
_CACHE_SIZE = 8
# significant digits of delta kept (cache key and value used): relative change <= 5e-14
_DELTA_DIGITS = 14
# a new delta needing the top k <= this fraction of d eigenvectors takes the partial route
# (tridiagonal reduction + selected eigenvectors); at d = 400 it beats a full eigh up to k ~ d/4
_PARTIAL_MAX_FRACTION = 0.2
# below this |delta| / max|s| the Hellmann-Feynman derivative u^T Z u is computed with Z, not as
# (nu - u^T S0 u)/delta (cancellation)
_HF_DIRECT_BELOW = 1e-3


def _scipy_linalg():
    """``scipy.linalg``, imported on first use (it costs ~0.5 s at start-up)."""
    from scipy import linalg

    return linalg


@dataclass
class _Entry:
    """One cached ``delta``: eigenvalues ``nu`` (ascending) and ``a_i = u_i^T S0 u_i`` (``nan`` where not
    computed; known for the top ``n_vec[r]`` of draw ``r``), and the tridiagonal reductions
    ``(reflectors, tau, diagonal, off-diagonal)`` per draw while they are kept."""

    nu: np.ndarray
    a: np.ndarray
    n_vec: np.ndarray
    reduced: list | None


def check_draws(draws: object) -> None:
    """Raise ``ValueError`` naming ``draws`` unless it is an integer >= 1 (``bool`` is not one)."""
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or int(draws) < 1:
        raise ValueError(f"draws must be an integer >= 1 (got {draws!r})")


def goe(d: int, rng: np.random.Generator) -> np.ndarray:
    """GOE matrix, off-diagonal variance ``1/d``, diagonal ``2/d`` (semicircle on ``[-2, 2]``).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.numerics.spectra import goe
    >>> Z = goe(500, np.random.default_rng(0))
    >>> bool(np.allclose(Z, Z.T)), round(float(np.trace(Z @ Z)) / 500, 1)   # Tr Z^2 / d -> 1
    (True, 1.0)
    >>> bool(abs(np.linalg.eigvalsh(Z)).max() < 2.2)    # semicircle on [-2, 2]
    True
    """
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
    hi, lo = nu[d - k :], nu[: d - k]
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
    For each ``delta`` the ``draws`` matrices ``diag(s) + delta Z_r`` are decomposed once (a
    batched ``eigh``, or for a small rank cap a tridiagonal reduction with only the kept
    eigenvectors) and ``nu_i`` and ``a_i = u_i^T S0 u_i`` are kept in a small LRU cache on the
    instance (``_CACHE_SIZE`` values of ``delta``), so any number of thresholds, rank caps and
    spread evaluations at that ``delta`` cost ``O(draws d^2)`` at most.
    ``n_decompositions`` counts the decompositions done (one per ``delta`` for all draws
    together, plus one when an entry needs more eigenvectors than its route gave).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.numerics.spectra import FiniteDSpectrum
    >>> spectrum = FiniteDSpectrum(np.linspace(0.0, 2.0, 100), draws=2, seed=0)
    >>> spectrum.eigenvalues(0.5).shape                 # eigenvalues of S0 + 0.5 Z, one row per draw
    (2, 100)
    >>> 0.0 < spectrum.threshold_integrals(0.5, 0.3).rank_fraction < 1.0
    True
    """

    def __init__(self, eigenvalues: np.ndarray, draws: int = DEFAULT_DRAWS, seed: int = 0) -> None:
        s = np.asarray(eigenvalues, dtype=float).ravel()
        if s.size < 2 or not np.all(np.isfinite(s)):
            raise ValueError("eigenvalues must be a finite array with at least 2 entries")
        check_draws(draws)
        self.s = s
        self.d = s.size
        self.draws = int(draws)
        self.seed = int(seed)
        rng = np.random.default_rng(self.seed)
        self._Z = np.stack([goe(self.d, rng) for _ in range(self.draws)])
        self._cache: OrderedDict[float, _Entry] = OrderedDict()
        self.n_decompositions = 0

    def _entry(self, delta: float, vectors: int) -> _Entry:
        """The cached decomposition at (rounded) ``delta`` with ``a_i`` known for the top ``vectors`` of each draw.

        ``delta`` is first rounded to ``_DELTA_DIGITS`` significant digits (the map is a function
        of the rounded value, so cache hits change nothing): round trips through the solver's
        coordinates otherwise turn the same point into distinct keys. A new ``delta`` asking
        for at most ``_PARTIAL_MAX_FRACTION d`` vectors is reduced to tridiagonal form
        (``dsytrd``), its eigenvalues found by ``dsterf`` and only those eigenvectors computed
        (``dstemr``, back-transformed by ``dormqr``): about half the cost of a full
        ``eigh`` for a small rank cap. Otherwise, or when more vectors are asked of an entry
        whose reduction was dropped, a full ``eigh``.
        """
        delta = float(f"{float(delta):.{_DELTA_DIGITS - 1}e}")
        entry = self._cache.get(delta)
        if entry is None:
            if vectors <= _PARTIAL_MAX_FRACTION * self.d:
                entry = self._reduce(delta)
            else:
                entry = self._full(delta)
            for other in self._cache.values():
                other.reduced = None  # keep one set of d x d reflectors only
            self._cache[delta] = entry
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(delta)
        if int(entry.n_vec.min()) < vectors:
            if entry.reduced is not None and vectors <= _PARTIAL_MAX_FRACTION * self.d:
                self._top_vectors(entry, vectors)
            else:
                full = self._full(delta)
                entry.nu, entry.a, entry.n_vec, entry.reduced = full.nu, full.a, full.n_vec, None
        return entry

    def _matrices(self, delta: float) -> np.ndarray:
        Y = delta * self._Z
        idx = np.arange(self.d)
        Y[:, idx, idx] += self.s
        return Y

    def _full(self, delta: float) -> _Entry:
        """All eigenpairs (one batched ``eigh``)."""
        nu, U = np.linalg.eigh(self._matrices(delta))
        self.n_decompositions += 1
        return _Entry(nu, np.einsum("k,rki->ri", self.s, U * U), np.full(self.draws, self.d), None)

    def _reduce(self, delta: float) -> _Entry:
        """Tridiagonal reduction and all eigenvalues of each draw; no eigenvectors yet."""
        lapack = _scipy_linalg().lapack
        d = self.d
        lwork = int(lapack.dsytrd_lwork(d, lower=1)[0])
        nu = np.empty((self.draws, d))
        reduced = []
        for r, Y in enumerate(self._matrices(delta)):
            c, diag, off, tau, info = lapack.dsytrd(np.asfortranarray(Y), lower=1, lwork=lwork)
            vals, info2 = lapack.dsterf(diag, off)
            if info or info2:
                raise np.linalg.LinAlgError(f"tridiagonal eigenvalues failed (info {info}, {info2})")
            nu[r] = np.sort(vals)
            reduced.append((c, tau, diag, off))
        self.n_decompositions += 1
        return _Entry(nu, np.full((self.draws, d), np.nan), np.zeros(self.draws, dtype=int), reduced)

    def _top_vectors(self, entry: _Entry, k: int) -> None:
        """``a_i`` of the top ``k`` eigenvectors of each draw from its tridiagonal reduction."""
        linalg = _scipy_linalg()
        eigh_tridiagonal, lapack = linalg.eigh_tridiagonal, linalg.lapack
        d = self.d
        for r, (c, tau, diag, off) in enumerate(entry.reduced):
            w, V = eigh_tridiagonal(
                diag, off, select="i", select_range=(d - k, d - 1), lapack_driver="stemr", check_finite=False
            )
            V = V[:, np.argsort(w)]  # ascending, as nu
            lwork = int(lapack.dormqr("L", "N", c[1:, :-1], tau, V[1:], -1)[1][0])
            QV, _, info = lapack.dormqr("L", "N", c[1:, :-1], tau, V[1:], max(lwork, 1))
            if info:
                raise np.linalg.LinAlgError(f"dormqr failed (info {info})")
            U = np.vstack([V[:1], QV])
            entry.a[r, d - k :] = self.s @ (U * U)
            entry.n_vec[r] = k

    def eigenvalues(self, delta: float) -> np.ndarray:
        """Eigenvalues of ``diag(s) + delta Z_r``, shape ``(draws, d)``, ascending."""
        return self._entry(delta, 0).nu.copy()

    def overlaps(self, delta: float) -> np.ndarray:
        """``u_i^T S0 u_i`` for every eigenvector of ``diag(s) + delta Z_r``, shape ``(draws, d)``."""
        return self._entry(delta, self.d).a.copy()

    def eigen_derivatives(self, delta: float) -> np.ndarray:
        """``d nu_i / d delta = u_i^T Z u_i`` (Hellmann–Feynman), shape ``(draws, d)``."""
        delta = float(delta)
        if abs(delta) > _HF_DIRECT_BELOW * max(1.0, float(np.max(np.abs(self.s)))):
            e = self._entry(delta, self.d)
            return (e.nu - e.a) / float(f"{delta:.{_DELTA_DIGITS - 1}e}")  # u^T Z u = (nu - u^T S0 u)/delta
        nu, U = np.linalg.eigh(self._matrices(delta))  # small delta: the product with Z (no cancellation)
        self.n_decompositions += 1
        return np.einsum("rki,rkl,rli->ri", U, self._Z, U)

    def threshold_integrals(
        self, delta: float, eps: float, rank_cap: float | None = None, *, pathwise: bool = True
    ) -> ThresholdIntegrals:
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
        (it needs every eigenvector: a full ``eigh`` at this ``delta``). ``cutoff`` is the
        mean over draws of the mid-point between the last kept and first dropped eigenvalue.
        """
        delta, eps = float(delta), float(eps)
        d, R = self.d, self.draws
        p_cap = d if rank_cap is None else int(round(float(rank_cap) * d))
        entry = self._entry(delta, p_cap)  # at most p_cap eigenvectors are needed
        nu = entry.nu
        n_above = np.sum(nu > eps, axis=1)
        k = np.minimum(n_above, p_cap)  # kept: the top k of each (ascending) row
        entry = self._entry(delta, int(k.max()))
        keep = np.arange(d)[None, :] >= (d - k)[:, None]
        f = np.where(keep, nu - eps, 0.0)
        J = np.mean(f * f, axis=1)
        S1 = np.mean(f, axis=1)
        A = np.mean(f * np.where(keep, entry.a, 0.0), axis=1)
        D = np.array([_threshold_divergence(nu[r], int(k[r]), eps) for r in range(R)])
        binds = n_above > p_cap
        cut = np.full(R, eps)
        for r in np.flatnonzero(binds):
            kr = int(k[r])
            cut[r] = 0.5 * (nu[r, d - kr - 1] + nu[r, d - kr]) if kr > 0 else nu[r, -1]
        Dm = float(D.mean())
        P = float(np.mean(2.0 * np.mean(f * self.eigen_derivatives(delta), axis=1))) if pathwise else None
        return ThresholdIntegrals(
            J=float(J.mean()),
            dJ_ddelta=2.0 * delta * Dm,
            dJ_deps=-2.0 * float(S1.mean()),
            rank_fraction=float(k.mean() / d),
            cap_binds=bool(binds.mean() > 0.5),
            cutoff=float(cut.mean()),
            divergence=Dm,
            dJ_ddelta_pathwise=P,
            overlap=float(A.mean()),
            J_draws=tuple(map(float, J)),
            overlap_draws=tuple(map(float, A)),
            divergence_draws=tuple(map(float, D)),
        )

    def divergence(
        self, delta: float, f: Callable[[np.ndarray], np.ndarray], fprime: Callable[[np.ndarray], np.ndarray]
    ) -> float:
        """Exact finite-``d`` divergence of the spectral map ``f``, mean over draws."""
        nu = self._entry(float(delta), 0).nu
        return float(np.mean([_divergence(x, f(x), fprime(x)) for x in nu]))
