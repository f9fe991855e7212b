"""Target spectral laws ``mu0 = mu_{S0}``: Marchenko–Pastur, discrete, spiked.

Conventions (docs: Theory, :ref:`theory-logits`, :ref:`theory-free-probability`)
-----------------------------------------
* Stieltjes transform ``g(z) = int mu(dy) / (z - y)`` (so ``g(z) ~ 1/z`` at infinity and
  ``Im g < 0`` on the upper half-plane); density ``-Im g(x + i0)/pi``; Hilbert transform
  ``H(x) = p.v. int mu(dy)/(x - y) = Re g(x + i0)``.
* ``second_moment()`` is ``Q0 = Tr S0^2 / d``.

The MP target ``S0 = W0 W0^T / sqrt(p0 d)`` (``W0`` is ``d x p0`` Gaussian, ``kappa0 = p0/d``)
has the law ``sqrt(kappa0) * MP(c)`` with ratio ``c = 1/kappa0`` (arXiv 2509.24914, §2):
mean ``sqrt(kappa0)``, second moment ``1 + kappa0``, atom ``1 - kappa0`` at 0 when
``kappa0 < 1``, continuous part on ``[(sqrt(kappa0) - 1)^2, (sqrt(kappa0) + 1)^2] / sqrt(kappa0)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MarchenkoPastur", "DiscreteLaw", "SpikedLaw", "Law"]


#: Spikes per vectorised evaluation over the spikes of a :class:`SpikedLaw` (here and in the free convolution):
#: bounds the (evaluation points or bulk atoms) x spikes temporaries.
SPIKE_CHUNK = 2048


@dataclass(frozen=True)
class MarchenkoPastur:
    """Spectrum of the MP target: ``sqrt(kappa0) * MP(1/kappa0)``.

    Parameters
    ----------
    kappa0 : float
        Target rank ratio ``p0/d > 0``. For ``kappa0 < 1`` the law has an atom of mass
        ``1 - kappa0`` at 0.

    The law of the eigenvalues of ``S0 = W0 W0^T/sqrt(p0 d)`` as ``d -> infinity``: an atom of mass
    ``1 - kappa0`` at zero (for ``kappa0 < 1``) and a Marchenko--Pastur bulk scaled by ``sqrt(kappa0)``.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur
    >>> law = MarchenkoPastur(kappa0=0.5)
    >>> law.atom_mass, round(law.mean(), 6), round(law.second_moment(), 6)   # 1 - kappa0, sqrt(kappa0), 1 + kappa0
    (0.5, 0.707107, 1.5)
    """

    kappa0: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.kappa0) and self.kappa0 > 0):
            raise ValueError(f"kappa0 must be a positive number (got {self.kappa0!r})")

    # --- basic numbers -------------------------------------------------------------
    @property
    def scale(self) -> float:
        """``sqrt(kappa0)``: ``S0 = scale * M`` with ``M ~ MP(c)``, unit mean."""
        return math.sqrt(self.kappa0)

    @property
    def ratio(self) -> float:
        """MP ratio ``c = 1/kappa0``."""
        return 1.0 / self.kappa0

    @property
    def atom_mass(self) -> float:
        """Mass ``max(0, 1 - kappa0)`` of the atom at 0."""
        return max(0.0, 1.0 - self.kappa0)

    def ac_edges(self) -> tuple[float, float]:
        """End points of the continuous part, ``(sqrt(kappa0) -+ 1)^2 / sqrt(kappa0)``."""
        s = self.scale
        return ((s - 1.0) ** 2 / s, (s + 1.0) ** 2 / s)

    def mean(self) -> float:
        """``Tr S0/d = sqrt(kappa0)``."""
        return self.scale

    def second_moment(self) -> float:
        """``Q0 = Tr S0^2/d = 1 + kappa0``."""
        return 1.0 + self.kappa0

    def support(self) -> list[tuple[float, float]]:
        """Support components; the atom at 0 (if any) is the degenerate interval ``(0, 0)``."""
        out = [(0.0, 0.0)] if self.kappa0 < 1 else []
        return out + [self.ac_edges()]

    # --- transforms ----------------------------------------------------------------
    def stieltjes(self, z: np.ndarray | complex) -> np.ndarray:
        """``g0(z) = int mu0(dy)/(z - y)``, vectorised over complex ``z`` (off the support).

        Uses ``g_M(w) = 2 / (w + c - 1 + sqrt(w - l-) sqrt(w - l+))``, the rationalised root of
        ``c w g^2 - (w + c - 1) g + 1 = 0`` on the branch with ``g ~ 1/w``; real ``z`` on the
        support is read as ``z + i0``.
        """
        g, _ = self._unit_stieltjes(z)
        return g / self.scale

    def _unit_stieltjes(self, z: np.ndarray | complex) -> tuple[np.ndarray, np.ndarray]:
        """``(g_M(w), sqrt(w - l-) sqrt(w - l+))`` at ``w = z/scale`` (shared by g0 and g0')."""
        c = self.ratio
        w = np.asarray(z, dtype=complex) / self.scale
        lm, lp = (1 - math.sqrt(c)) ** 2, (1 + math.sqrt(c)) ** 2
        root = np.sqrt(w - lm) * np.sqrt(w - lp)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = 2.0 / (w + c - 1 + root)
        return g, root

    def stieltjes_derivative(self, z: np.ndarray | complex) -> np.ndarray:
        """``g0'(z) = -int mu0(dy)/(z - y)^2`` (implicit differentiation of the MP quadratic)."""
        return self.stieltjes_and_derivative(z)[1]

    def stieltjes_and_derivative(self, z: np.ndarray | complex) -> tuple[np.ndarray, np.ndarray]:
        """``(g0(z), g0'(z))`` from one evaluation of the square roots (the same numbers as
        :meth:`stieltjes` and :meth:`stieltjes_derivative`)."""
        c = self.ratio
        g, root = self._unit_stieltjes(z)
        with np.errstate(divide="ignore", invalid="ignore"):
            dg = (c * g * g - g) / root
        return g / self.scale, dg / self.scale**2

    def ac_density(self, x: np.ndarray | float) -> np.ndarray:
        """Density of the continuous part (mass ``min(1, kappa0)``)."""
        s, c = self.scale, self.ratio
        w = np.asarray(x, dtype=float) / s
        lm, lp = (1 - math.sqrt(c)) ** 2, (1 + math.sqrt(c)) ** 2
        inside = (w > lm) & (w < lp)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.sqrt(np.clip((lp - w) * (w - lm), 0.0, None)) / (2 * np.pi * c * w)
        return np.where(inside, p, 0.0) / s

    def ac_hilbert(self, x: np.ndarray | float) -> np.ndarray:
        """p.v. Hilbert transform of the continuous part alone, at real ``x`` (not 0)."""
        xa = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.real(self.stieltjes(xa + 0j)) - self.atom_mass / xa


@dataclass(frozen=True, eq=False)
class DiscreteLaw:
    """A finitely supported law ``sum_i w_i delta_{lambda_i}``.

    Used for finite-``d`` power-law and custom spectra (``weights = 1/d``).

    Parameters
    ----------
    eigenvalues : ndarray
        Atom positions (any order, repeats allowed).
    weights : ndarray, optional
        Non-negative masses, normalised to sum 1; uniform ``1/len`` by default.

    Examples
    --------
    >>> from singlehead.numerics.spectra import DiscreteLaw
    >>> law = DiscreteLaw([3.0, 1.0, 0.0, 0.0])         # equal weights 1/4
    >>> law.mean(), law.second_moment()
    (1.0, 2.5)
    """

    eigenvalues: np.ndarray
    weights: np.ndarray | None = None
    _atoms: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lam = np.atleast_1d(np.asarray(self.eigenvalues, dtype=float)).ravel()
        if lam.size == 0 or not np.all(np.isfinite(lam)):
            raise ValueError("eigenvalues must be a non-empty array of finite numbers")
        if self.weights is None:
            w = np.full(lam.size, 1.0 / lam.size)
        else:
            w = np.atleast_1d(np.asarray(self.weights, dtype=float)).ravel()
            if w.shape != lam.shape or np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
                raise ValueError("weights must be non-negative, finite, one per eigenvalue, not all zero")
            w = w / w.sum()
        object.__setattr__(self, "eigenvalues", lam)
        object.__setattr__(self, "weights", w)
        pos, inv = np.unique(lam, return_inverse=True)
        mass = np.bincount(inv, weights=w, minlength=pos.size)
        keep = mass > 0
        object.__setattr__(self, "_atoms", (pos[keep], mass[keep]))

    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct sorted positions and their total masses."""
        return self._atoms

    def mean(self) -> float:
        return float(np.dot(self.weights, self.eigenvalues))

    def second_moment(self) -> float:
        return float(np.dot(self.weights, self.eigenvalues**2))

    def support(self) -> list[tuple[float, float]]:
        return [(float(t), float(t)) for t in self._atoms[0]]

    def stieltjes(self, z: np.ndarray | complex) -> np.ndarray:
        t, w = self._atoms
        z = np.asarray(z, dtype=complex)
        return (1.0 / (z[..., None] - t)) @ w

    def stieltjes_derivative(self, z: np.ndarray | complex) -> np.ndarray:
        t, w = self._atoms
        z = np.asarray(z, dtype=complex)
        return -(1.0 / (z[..., None] - t) ** 2) @ w


@dataclass(frozen=True, eq=False)
class SpikedLaw:
    """Bulk plus a few isolated eigenvalues: ``(1 - k w) bulk + w sum_i delta_{s_i}``.

    Parameters
    ----------
    bulk : MarchenkoPastur or DiscreteLaw
        Law of the bulk.
    spikes : tuple of float
        Positions ``s_i`` of the ``k`` isolated eigenvalues.
    spike_weight : float
        Mass ``w`` of each spike (e.g. ``1/d``); ``k w < 1``.

    Notes
    -----
    Under free convolution with ``SC(v)`` the library uses the spiked-model (``d -> inf``)
    picture (arXiv 2509.24914 §5; Capitaine–Donati-Martin–Féral; Belinschi, Bercovici,
    Capitaine & Février 2017): the bulk becomes ``bulk ⊞ SC(v)`` and a spike ``s`` in a gap
    of the subordination domain (``1 + v g_bulk'(s) > 0``) becomes a point mass ``w`` at
    ``s + v g_bulk(s)`` (``= s + v/s`` for a null bulk); otherwise its mass joins the bulk.
    See :class:`~singlehead.numerics.spectra.convolution.ConvolvedLaw`.

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, SpikedLaw
    >>> law = SpikedLaw(MarchenkoPastur(0.5), spikes=(5.0,), spike_weight=0.01)
    >>> round(law.bulk_weight, 6), round(law.mean(), 6)   # 0.99 sqrt(0.5) + 0.01 x 5
    (0.99, 0.750036)
    """

    bulk: MarchenkoPastur | DiscreteLaw
    spikes: tuple[float, ...]
    spike_weight: float

    def __post_init__(self) -> None:
        if isinstance(self.bulk, SpikedLaw) or not isinstance(self.bulk, (MarchenkoPastur, DiscreteLaw)):
            raise TypeError("bulk must be a MarchenkoPastur or DiscreteLaw")
        sp = tuple(float(s) for s in np.atleast_1d(np.asarray(self.spikes, dtype=float)))
        object.__setattr__(self, "spikes", sp)
        w = float(self.spike_weight)
        if not (w >= 0 and len(sp) * w < 1):
            raise ValueError("spike_weight must be >= 0 with len(spikes) * spike_weight < 1")
        object.__setattr__(self, "spike_weight", w)

    @property
    def bulk_weight(self) -> float:
        return 1.0 - len(self.spikes) * self.spike_weight

    def mean(self) -> float:
        return self.bulk_weight * self.bulk.mean() + self.spike_weight * float(sum(self.spikes))

    def second_moment(self) -> float:
        return self.bulk_weight * self.bulk.second_moment() + self.spike_weight * float(sum(s * s for s in self.spikes))

    def support(self) -> list[tuple[float, float]]:
        return sorted(self.bulk.support() + [(s, s) for s in self.spikes])

    def stieltjes(self, z: np.ndarray | complex) -> np.ndarray:
        z = np.asarray(z, dtype=complex)
        out = self.bulk_weight * self.bulk.stieltjes(z)
        spikes = np.asarray(self.spikes, dtype=float)
        for lo in range(0, spikes.size, SPIKE_CHUNK):  # vectorised in chunks of spikes (up to ~10^5 of them)
            out = out + self.spike_weight * np.sum(1.0 / (z[..., None] - spikes[lo : lo + SPIKE_CHUNK]), axis=-1)
        return out


Law = MarchenkoPastur | DiscreteLaw | SpikedLaw
