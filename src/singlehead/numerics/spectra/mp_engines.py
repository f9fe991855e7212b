"""Engines of the free convolution with a semicircle (internal to the spectral engine): closed-form MP cases and bulk
helpers.

See :mod:`singlehead.numerics.spectra.convolution` for the methods and conventions; each engine exposes the
bulks (in a parametrisation ``t``), atoms and outliers of ``mu0 ⊞ SC(v)`` for one family of ``mu0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from singlehead.numerics.spectra.laws import DiscreteLaw, MarchenkoPastur
from singlehead.numerics.spectra.primitives import cubic_roots, cubic_roots_monic

#: Nodes per panel for the small panels around isolated atoms of a discrete law.
PANEL_NODES_SINGLE = 24


#: Ratio ``y/gap`` below which the Biane curve of a discrete law ripples near each atom.
RIPPLE_RATIO = 3.0


@dataclass
class Bulk:
    """A bulk of the continuous part, parametrised by ``t`` (``t = x`` or ``t = u``)."""

    t_lo: float
    t_hi: float
    x_lo: float
    x_hi: float
    breaks: np.ndarray  # panel end points in t (includes t_lo, t_hi)
    nodes: np.ndarray  # Gauss nodes per panel
    cum: np.ndarray | None = None  # continuous mass up to each break


class _Engine(Protocol):  # pragma: no cover - typing only
    v: float
    bulks: list[Bulk]
    atom_pos: np.ndarray
    atom_mass: np.ndarray

    def eval_t(self, k: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
    def t_of_x(self, k: int, x: np.ndarray) -> np.ndarray: ...
    def cont_density(self, x: np.ndarray) -> np.ndarray: ...
    def cont_hilbert(self, x: np.ndarray) -> np.ndarray: ...
    def cont_stieltjes(self, z: np.ndarray) -> np.ndarray: ...


def _simple_bulk(t_lo: float, t_hi: float, x_lo: float, x_hi: float, n: int) -> Bulk:
    return Bulk(t_lo, t_hi, x_lo, x_hi, np.array([t_lo, t_hi]), np.array([n]))


def _horner(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_k coef[k] x^k`` (increasing powers), by Horner's rule."""
    out = np.full_like(x, coef[-1])
    for ck in coef[-2::-1]:
        out = out * x + ck
    return out


#: The sign of the discriminant at a point between two edges decides whether it lies in a bulk
#: when its modulus exceeds this fraction of the sum of the moduli of its terms (rounding is ~1e-16).
_DISC_SIGN_RTOL = 1e-8


def _quartic_roots(k: np.ndarray) -> np.ndarray:
    """Roots of the quartic with coefficients ``k`` (increasing powers), sorted: the eigenvalues of
    the companion matrix built and ordered as ``numpy.polynomial.polynomial.polyroots`` does (same
    numbers), without its generic argument handling."""
    mat = np.zeros((4, 4))
    mat.reshape(-1)[4::5] = 1.0
    mat[:, -1] -= k[:-1] / k[-1]
    roots = np.linalg.eigvals(mat)
    roots.sort()
    return roots


def _quartic_discriminant(sa: float, v: float) -> np.ndarray:
    """Coefficients (increasing powers of ``x``) of the discriminant of the MP ⊞ SC cubic in ``g``.

    The cubic ``a g^3 + b g^2 + c g + d`` of :meth:`MPEngine.g` has ``a = sa v``, ``b = -v - sa x``,
    ``c = sa - 1/sa + x``, ``d = -1`` (``sa = 1/sqrt(kappa0)``); its discriminant
    ``18abcd - 4b^3 d + b^2 c^2 - 4ac^3 - 27a^2 d^2`` is a quartic in ``x`` whose real roots are the
    bulk edges. The products are formed with ``np.convolve`` on coefficient arrays, factor by factor
    and left to right, which rounds exactly as ``numpy.polynomial.Polynomial`` arithmetic on the same
    expression (without its per-operation overhead): the edges must be reproducible to the last
    bit, because a threshold ``eps`` within ``1e-8`` of the top edge turns an ulp of the edge into a
    ``1e-7`` relative change of the prior-side integrals.
    """
    a, d = sa * v, -1.0
    b = np.array([-v, -sa])
    c = np.array([sa - 1.0 / sa, 1.0])
    b2, c2 = np.convolve(b, b), np.convolve(c, c)
    b3, c3 = np.convolve(b2, b), np.convolve(c2, c)
    disc = np.zeros(5)
    disc[:3] += np.convolve((18 * a) * b, c) * d
    disc[:4] -= (4 * b3) * d
    disc += np.convolve(b2, c2)
    disc[:4] -= (4 * a) * c3
    disc[0] -= 27 * a**2 * d**2
    return disc


# ======================================================================================
# Engines
# ======================================================================================
def _sorted_distinct(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of a finite 1-D array (the same sort and the same values), without the import of
    ``numpy.ma`` that ``np.unique`` makes on first use (a noticeable share of a theory point's start-up)."""
    x = np.sort(x)
    return x[np.concatenate([[True], x[1:] != x[:-1]])]


class MPEngine:
    """``MarchenkoPastur(kappa0) ⊞ SC(v)``, ``v > 0``, through the cubic of docs: Theory,
    :ref:`theory-free-probability`."""

    t_is_x = True  # the bulks are parametrised by x itself

    def __init__(self, law: MarchenkoPastur, v: float, n: int) -> None:
        self.law, self.v, self.n = law, float(v), int(n)
        self.sa = 1.0 / law.scale  # sqrt(a), a = 1/kappa0
        self.atom_pos = np.zeros(0)
        self.atom_mass = np.zeros(0)
        self.bulks = []
        for a, b in self._edges():
            # near-cusps (complex discriminant roots close to the bulk) become panel breaks, so
            # that the cosine rule clusters nodes at the sharp density minimum
            cr = self._complex_disc_roots
            near = cr[(cr.real > a) & (cr.real < b) & (np.abs(cr.imag) < 0.25 * (b - a))].real
            breaks = _sorted_distinct(np.concatenate([[a], near, [b]])) if near.size else np.array([a, b])
            self.bulks.append(Bulk(a, b, a, b, breaks, np.full(breaks.size - 1, self.n)))

    # -- the cubic ---------------------------------------------------------------------
    def _coeffs(self, z: np.ndarray) -> tuple:
        sa, v = self.sa, self.v
        return sa * v, -(sa * z + v), z + sa - 1.0 / sa, -1.0 + 0 * z

    def g(self, z: np.ndarray) -> np.ndarray:
        """Stieltjes transform at ``z`` with ``Im z >= 0`` (real ``z`` means ``z + i0``).

        The three roots of the cubic (closed form; companion-matrix eigenvalues, then one Newton
        polish kept if it lowers the residual, where roots nearly coincide), then the one that
        satisfies the subordination relation with the principal branch of ``g0``.
        """
        z = np.asarray(z, dtype=complex)
        shape = z.shape
        z = z.reshape(-1)
        sa, v = self.sa, self.v
        with np.errstate(all="ignore"):
            # the cubic divided by its leading coefficient sqrt(a) v
            r, eig = cubic_roots_monic(
                z * (-1.0 / v) - 1.0 / sa, (z + (sa - 1.0 / sa)) * (1.0 / (sa * v)), -1.0 / (sa * v)
            )
            if np.any(eig):
                c3, c2, c1, c0 = self._coeffs(z[eig])
                re = cubic_roots(c3, c2, c1, c0)
                c2e, c1e = c2[:, None], c1[:, None]

                def P(g):
                    return ((c3 * g + c2e) * g + c1e) * g - 1.0

                Pr = P(re)
                r1 = re - Pr / ((3 * c3 * re + 2 * c2e) * re + c1e)
                better = np.isfinite(r1) & (np.abs(P(r1)) < np.abs(Pr))
                r[eig] = np.where(better, r1, re)
            om = z[:, None] - v * r
            g0, dg0 = self.law.stieltjes_and_derivative(om)
            d0 = 1.0 + v * np.real(dg0)
            size = 1.0 + np.abs(r)
            pen = np.abs(g0 - r) / size
        pen = np.where(np.isfinite(pen), pen, 1e3)
        pen = pen + (r.imag > 1e-9 * size)
        real_om = np.abs(om.imag) <= 1e-9 * (1.0 + np.abs(om))
        pen = pen + (real_om & ~(d0 >= -1e-7))
        return r[np.arange(z.size), np.argmin(pen, axis=1)].reshape(shape)

    def _edges(self) -> list[tuple[float, float]]:
        k = _quartic_discriminant(self.sa, self.v)
        roots = _quartic_roots(k)
        isreal = np.abs(roots.imag) <= 1e-6 * (1 + np.abs(roots))
        self._complex_disc_roots = roots[~isreal]
        cand = np.sort(roots[isreal].real)
        dk = k[1:] * np.arange(1.0, 5.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for _ in range(3):  # Newton polish on the quartic
                step = _horner(k, cand) / _horner(dk, cand)
                ok = np.isfinite(step) & (np.abs(step) < 1e-3 * (1 + np.abs(cand)))
                if not np.any(ok & (step != 0)):
                    break  # a fixed point: the remaining steps would change nothing
                cand = np.where(ok, cand - step, cand)
        cand = np.sort(cand)
        cand = cand[np.concatenate([[True], cand[1:] != cand[:-1]])]
        if cand.size < 2:
            raise RuntimeError("could not locate the bulk edges of MP ⊞ SC")
        mids = 0.5 * (cand[:-1] + cand[1:])
        # inside a bulk the cubic has a complex pair (negative discriminant), outside three real
        # roots: where the sign of the discriminant is beyond doubt it decides, elsewhere the density
        disc, size = _horner(k, mids), _horner(np.abs(k), np.abs(mids))
        pos = disc < 0
        unsure = ~(np.abs(disc) > _DISC_SIGN_RTOL * size)
        if np.any(unsure):
            pos[unsure] = -self.g(mids[unsure] + 0j).imag > 1e-12
        bulks: list[tuple[float, float]] = []
        start = None
        for i, inside in enumerate(pos):
            if inside and start is None:
                start = cand[i]
            if not inside and start is not None:
                bulks.append((float(start), float(cand[i])))
                start = None
        if start is not None:
            bulks.append((float(start), float(cand[-1])))
        if not bulks:
            raise RuntimeError("MP ⊞ SC: no bulk found")
        return bulks

    # -- engine interface --------------------------------------------------------------
    def eval_t(self, k: int, t: np.ndarray):
        g = self.g(np.asarray(t, dtype=float) + 0j)
        p = np.maximum(-g.imag, 0.0) / np.pi
        return np.asarray(t, dtype=float), p, np.ones_like(p), g.real

    def t_of_x(self, k: int, x):
        b = self.bulks[k]
        return np.clip(np.asarray(x, dtype=float), b.t_lo, b.t_hi)

    def cont_density(self, x):
        return np.maximum(-self.g(np.asarray(x, dtype=float) + 0j).imag, 0.0) / np.pi

    def cont_hilbert(self, x):
        return self.g(np.asarray(x, dtype=float) + 0j).real

    def cont_stieltjes(self, z):
        z = np.asarray(z, dtype=complex)
        lower = z.imag < 0
        g = self.g(np.where(lower, np.conj(z), z))
        return np.where(lower, np.conj(g), g)


class MPZeroEngine:
    """``v = 0``: the MP law itself (continuous part plus the atom at 0)."""

    def __init__(self, law: MarchenkoPastur, n: int) -> None:
        self.law, self.v = law, 0.0
        a, b = law.ac_edges()
        self.bulks = [_simple_bulk(a, b, a, b, n)]
        m = law.atom_mass
        self.atom_pos = np.zeros(1) if m > 0 else np.zeros(0)
        self.atom_mass = np.full(1, m) if m > 0 else np.zeros(0)

    def eval_t(self, k, t):
        t = np.asarray(t, dtype=float)
        return t, self.law.ac_density(t), np.ones_like(t), self.law.ac_hilbert(t)

    def t_of_x(self, k, x):
        b = self.bulks[k]
        return np.clip(np.asarray(x, dtype=float), b.t_lo, b.t_hi)

    def cont_density(self, x):
        return self.law.ac_density(x)

    def cont_hilbert(self, x):
        return self.law.ac_hilbert(x)

    def cont_stieltjes(self, z):
        z = np.asarray(z, dtype=complex)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.law.stieltjes(z) - self.law.atom_mass / z


class DiscreteZeroEngine:
    """``v = 0`` for a discrete law: atoms only."""

    def __init__(self, law: DiscreteLaw) -> None:
        self.v = 0.0
        self.bulks: list[Bulk] = []
        self.atom_pos, self.atom_mass = law.atoms()

    def eval_t(self, k, t):  # pragma: no cover - no bulks
        raise IndexError("no continuous part")

    def t_of_x(self, k, x):  # pragma: no cover
        raise IndexError("no continuous part")

    def cont_density(self, x):
        return np.zeros_like(np.asarray(x, dtype=float))

    def cont_hilbert(self, x):
        return np.zeros_like(np.asarray(x, dtype=float))

    def cont_stieltjes(self, z):
        return np.zeros_like(np.asarray(z, dtype=complex))
