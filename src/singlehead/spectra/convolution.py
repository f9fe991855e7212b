"""Free additive convolution with a semicircle: ``mu_v = mu0 ⊞ SC(v)``.

Conventions
-----------
``SC(v)`` is the semicircle of variance ``v`` (support ``[-2 sqrt v, 2 sqrt v]``); in the
state evolution ``v = delta^2`` (``shared/THEORY.md`` §3). Stieltjes transform
``g(z) = int mu(dy)/(z - y)`` (``Im g < 0`` on the upper half-plane; THEORY §9 writes
"``Im g > 0``", which is the opposite sign convention for the same root: its cubic is
satisfied by this ``g``), density ``p(x) = -Im g(x + i0)/pi``, Hilbert transform
``H(x) = p.v. int mu(dy)/(x - y) = Re g(x + i0)``.

Methods
-------
* Subordination (Biane 1997, "On the free convolution with a semi-circular distribution",
  Indiana Univ. Math. J. 46): ``g(z) = g0(omega(z))`` with ``omega = z - v g(z)``, i.e.
  ``z = omega + v g0(omega)``. On the real line ``omega(x + i0) = u + i y(u)`` where ``y >= 0``
  solves ``int mu0(dt)/((u - t)^2 + y^2) = 1/v``; ``x(u) = u + v int (u - t) mu0(dt)/|omega - t|^2``
  is an increasing homeomorphism, ``p(x(u)) = y(u)/(pi v)`` and ``H(x(u)) = (x(u) - u)/v``.
  Bulks of ``mu_v`` are the images of the intervals where ``int mu0(dt)/(u - t)^2 >= 1/v``,
  whose end points (the ``u``-edges) are found by bracketed bisection between the atoms of
  ``mu0``; integrals are done in the variable ``u`` with a Gauss–Legendre rule after the
  cosine substitution (the integrand behaves like ``sqrt(u - u_edge)``), using the exact
  Jacobian ``dx/du = |1 + v g0'(omega)|^2 / Re(1 + v g0'(omega))``. Used for discrete laws.
* MP targets (THEORY §9): ``g`` is the root of
  ``sqrt(a) v g^3 - (sqrt(a) z + v) g^2 + (z + sqrt(a) - 1/sqrt(a)) g - 1 = 0`` (``a = 1/kappa0``)
  that satisfies the subordination relation with the principal branch of ``g0``; the bulk
  edges are real roots of the cubic's discriminant (a quartic in ``x``), so there are at most
  two bulks. Integrals are done in ``x``, bulk by bulk, with the same cosine rule.
* Spiked laws (outliers of deformed Wigner matrices: Capitaine, Donati-Martin & Féral 2009;
  Belinschi, Bercovici, Capitaine & Février 2017; arXiv 2509.24914 §5): a spike ``s`` with
  ``1 + v g_bulk'(s) > 0`` (``s`` outside the bulk support) gives an outlier at
  ``s + v g_bulk(s)`` with squared overlap ``1 + v g_bulk'(s)`` (``s + v/s`` and ``1 - v/s^2``
  for a null bulk); the spike is kept as a point mass ``w`` there and the bulk law
  ``bulk ⊞ SC(v)`` carries the rest of the mass (sub-critical spikes are absorbed in it).
  This is the ``d -> inf`` spiked-model picture, exact to ``O(w)``.
* ``v = 0`` returns ``mu0`` itself: atoms are kept as atoms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from ._numerics import bisect_increasing, cos_gauss, cubic_roots, newton_bracketed
from .laws import DiscreteLaw, MarchenkoPastur, SpikedLaw

__all__ = ["ConvolvedLaw", "Outlier", "free_convolve_semicircle"]

#: Default number of Gauss nodes per integration panel.
DEFAULT_NODES = 64
#: Nodes per panel for the small panels around isolated atoms of a discrete law.
_PANEL_NODES_SINGLE = 24
#: Ratio ``y/gap`` below which the Biane curve of a discrete law ripples near each atom.
_RIPPLE_RATIO = 3.0


@dataclass(frozen=True)
class Outlier:
    """An isolated eigenvalue of ``S0 + delta Z`` created by a spike.

    Attributes
    ----------
    spike : float
        Target eigenvalue ``s``.
    position : float
        Outlier position ``s + v g_bulk(s)`` (``s + v/s`` for a null bulk).
    overlap : float
        Squared overlap ``<u, e_s>^2 = 1 + v g_bulk'(s)`` (``1 - v/s^2`` for a null bulk).
    mass : float
        Point mass of the outlier in the law (the spike weight).
    """

    spike: float
    position: float
    overlap: float
    mass: float


@dataclass
class _Bulk:
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
    bulks: list[_Bulk]
    atom_pos: np.ndarray
    atom_mass: np.ndarray

    def eval_t(self, k: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
    def t_of_x(self, k: int, x: np.ndarray) -> np.ndarray: ...
    def cont_density(self, x: np.ndarray) -> np.ndarray: ...
    def cont_hilbert(self, x: np.ndarray) -> np.ndarray: ...
    def cont_stieltjes(self, z: np.ndarray) -> np.ndarray: ...


def _simple_bulk(t_lo: float, t_hi: float, x_lo: float, x_hi: float, n: int) -> _Bulk:
    return _Bulk(t_lo, t_hi, x_lo, x_hi, np.array([t_lo, t_hi]), np.array([n]))


# ======================================================================================
# Engines
# ======================================================================================
class _MPEngine:
    """``MarchenkoPastur(kappa0) ⊞ SC(v)``, ``v > 0``, through the cubic of THEORY §9."""

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
            breaks = np.unique(np.concatenate([[a], near, [b]]))
            self.bulks.append(_Bulk(a, b, a, b, breaks, np.full(breaks.size - 1, self.n)))

    # -- the cubic ---------------------------------------------------------------------
    def _coeffs(self, z: np.ndarray) -> tuple:
        sa, v = self.sa, self.v
        return sa * v, -(sa * z + v), z + sa - 1.0 / sa, -1.0 + 0 * z

    def g(self, z: np.ndarray) -> np.ndarray:
        """Stieltjes transform at ``z`` with ``Im z >= 0`` (real ``z`` means ``z + i0``)."""
        z = np.asarray(z, dtype=complex)
        c3, c2, c1, c0 = self._coeffs(z)
        r = cubic_roots(c3, c2, c1, c0)
        c2e, c1e = c2[..., None], c1[..., None]

        def P(g):
            return ((c3 * g + c2e) * g + c1e) * g - 1.0

        def dP(g):
            return (3 * c3 * g + 2 * c2e) * g + c1e

        with np.errstate(divide="ignore", invalid="ignore"):
            r1 = r - P(r) / dP(r)
        better = np.isfinite(r1) & (np.abs(P(r1)) < np.abs(P(r)))
        r = np.where(better, r1, r)
        v = self.v
        om = z[..., None] - v * r
        with np.errstate(divide="ignore", invalid="ignore"):
            g0 = self.law.stieltjes(om)
            d0 = 1.0 + v * np.real(self.law.stieltjes_derivative(om))
        size = 1.0 + np.abs(r)
        pen = np.abs(g0 - r) / size
        pen = np.where(np.isfinite(pen), pen, 1e3)
        pen = pen + (r.imag > 1e-9 * size)
        real_om = np.abs(om.imag) <= 1e-9 * (1.0 + np.abs(om))
        pen = pen + (real_om & ~(d0 >= -1e-7))
        idx = np.argmin(pen, axis=-1)
        return np.take_along_axis(r, idx[..., None], axis=-1)[..., 0]

    def _edges(self) -> list[tuple[float, float]]:
        P = np.polynomial.Polynomial
        sa, v = self.sa, self.v
        a, b, c, d = sa * v, P([-v, -sa]), P([sa - 1.0 / sa, 1.0]), -1.0
        disc = 18 * a * b * c * d - 4 * b**3 * d + b**2 * c**2 - 4 * a * c**3 - 27 * a**2 * d**2
        roots = disc.roots()
        isreal = np.abs(roots.imag) <= 1e-6 * (1 + np.abs(roots))
        self._complex_disc_roots = roots[~isreal]
        cand = np.sort(roots[isreal].real)
        ddisc = disc.deriv()
        for _ in range(3):  # Newton polish on the quartic
            with np.errstate(divide="ignore", invalid="ignore"):
                step = disc(cand) / ddisc(cand)
            ok = np.isfinite(step) & (np.abs(step) < 1e-3 * (1 + np.abs(cand)))
            cand = np.where(ok, cand - step, cand)
        cand = np.unique(cand)
        if cand.size < 2:
            raise RuntimeError("could not locate the bulk edges of MP ⊞ SC")
        mids = 0.5 * (cand[:-1] + cand[1:])
        pos = -self.g(mids + 0j).imag > 1e-12
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


class _MPZeroEngine:
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


class _DiscreteZeroEngine:
    """``v = 0`` for a discrete law: atoms only."""

    def __init__(self, law: DiscreteLaw) -> None:
        self.v = 0.0
        self.bulks: list[_Bulk] = []
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


class _BianeEngine:
    """``DiscreteLaw ⊞ SC(v)``, ``v > 0``, through Biane's parametrisation of the subordination."""

    def __init__(self, law: DiscreteLaw, v: float, n: int) -> None:
        self.t, self.w = law.atoms()
        self.v, self.n = float(v), int(n)
        self._max_newton = 200
        self.scale = max(float(self.t[-1] - self.t[0]), math.sqrt(self.v))
        self.atom_pos = np.zeros(0)
        self.atom_mass = np.zeros(0)
        self.bulks = self._make_bulks()
        self._tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # -- real-line sums ----------------------------------------------------------------
    def _F(self, u: np.ndarray) -> np.ndarray:
        """``int mu0(dt)/(u - t)^2 - 1/v``."""
        with np.errstate(divide="ignore"):
            return (1.0 / (u[..., None] - self.t) ** 2) @ self.w - 1.0 / self.v

    def _dF(self, u: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return -2.0 * (1.0 / (u[..., None] - self.t) ** 3) @ self.w

    def _solve_s(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``s = y^2 >= 0`` solving ``sum w/((u - t)^2 + s) = 1/v`` (0 outside the u-bulks).

        Newton on ``phi(s) = 1/G(s) - v``, concave and increasing with ``phi' >= 1``: from a
        start left of the root the iterates increase monotonically to it.
        Returns ``s``, ``d = u - t`` and ``r = 1/(d^2 + s)``.
        """
        u = np.asarray(u, dtype=float)
        d = u[..., None] - self.t
        a = d * d
        s = np.full(u.shape, 1e-30 * self.scale**2)
        for _ in range(self._max_newton):
            r = 1.0 / (a + s[..., None])
            G = r @ self.w
            G2 = (r * r) @ self.w
            sn = np.maximum(s - (1.0 / G - self.v) * G * G / G2, 0.0)
            # relative accuracy, or the round-off floor of phi (~1e-16 v) near the edges
            done = np.abs(sn - s) <= 1e-14 * sn + 1e-15 * self.v
            s = sn
            if np.all(done):
                break
        r = 1.0 / (a + s[..., None])
        return s, d, r

    def curve(self, u: np.ndarray):
        """``x(u)``, density, ``dx/du`` and Hilbert transform on the Biane curve."""
        s, d, r = self._solve_s(u)
        r2 = r * r
        T2 = (d * r) @ self.w
        S4 = r2 @ self.w
        T4 = (d * r2) @ self.w
        x = np.asarray(u, dtype=float) + self.v * T2
        p = np.sqrt(s) / (np.pi * self.v)
        jac = 2.0 * self.v * (s * S4 * S4 + T4 * T4) / S4
        return x, p, jac, T2

    def _x_gap(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``x(u) = u + v g0(u)`` and its derivative on a u-gap."""
        with np.errstate(divide="ignore"):
            r = 1.0 / (u[..., None] - self.t)
        return u + self.v * (r @ self.w), 1.0 - self.v * ((r * r) @ self.w)

    # -- bulks -------------------------------------------------------------------------
    def _make_bulks(self) -> list[_Bulk]:
        t, w, v = self.t, self.w, self.v
        sv = math.sqrt(v)
        uL = bisect_increasing(self._F, np.array([t[0] - sv]), np.array([t[0]]))[0]
        uR = bisect_increasing(lambda u: -self._F(u), np.array([t[-1]]), np.array([t[-1] + sv]))[0]
        gaps_lo: list[float] = []
        gaps_hi: list[float] = []
        if t.size > 1:
            L = np.diff(t)
            cand = np.nonzero(L * L > v * (np.cbrt(w[:-1]) + np.cbrt(w[1:])) ** 3)[0]
            if cand.size:
                lo, hi = t[cand], t[cand + 1]
                um = bisect_increasing(self._dF, lo, hi)
                has = self._F(um) < 0
                lo, hi, um = lo[has], hi[has], um[has]
                if um.size:
                    a = bisect_increasing(lambda u: -self._F(u), lo, um)
                    b = bisect_increasing(self._F, um, hi)
                    gaps_lo, gaps_hi = list(a), list(b)
        starts = [uL] + gaps_hi
        ends = gaps_lo + [uR]
        xs = self._x_gap(np.array(starts))[0]
        xe = self._x_gap(np.array(ends))[0]
        bulks = []
        for ua, ub, xa, xb in zip(starts, ends, xs, xe):
            inside = (t > ua) & (t < ub)
            tk = t[inside]
            breaks = np.array([ua, ub])
            nodes = np.array([self.n])
            if tk.size >= 2:
                mids = 0.5 * (tk[:-1] + tk[1:])
                gap = np.diff(tk)
                y = np.sqrt(self._solve_s(mids)[0])
                bumpy = y < _RIPPLE_RATIO * gap
                if np.any(bumpy):
                    breaks = np.concatenate([[ua], mids[bumpy], [ub]])
                    count = np.histogram(tk, bins=breaks)[0]
                    nodes = np.where(count > 1, self.n, _PANEL_NODES_SINGLE)
            bulks.append(_Bulk(float(ua), float(ub), float(xa), float(xb), breaks, nodes))
        return bulks

    # -- engine interface --------------------------------------------------------------
    def eval_t(self, k, t):
        return self.curve(np.asarray(t, dtype=float))

    def _table(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k not in self._tables:
            b = self.bulks[k]
            uu, _ = cos_gauss(b.breaks[:-1], b.breaks[1:], 8)
            uu = np.concatenate([[b.t_lo], uu.ravel(), [b.t_hi]])
            xx = self.curve(uu)[0]
            xx[0], xx[-1] = b.x_lo, b.x_hi
            self._tables[k] = (np.maximum.accumulate(xx), uu)
        return self._tables[k]

    def t_of_x(self, k, x):
        b = self.bulks[k]
        x = np.clip(np.asarray(x, dtype=float), b.x_lo, b.x_hi)
        xx, uu = self._table(k)
        u0 = np.interp(x, xx, uu)
        fun = lambda u: self.curve(u)[::2]  # noqa: E731  (x, jac)
        return newton_bracketed(fun, x, np.full(x.shape, b.t_lo), np.full(x.shape, b.t_hi), u0, xtol=1e-15)

    def _u_gap(self, x: np.ndarray) -> np.ndarray:
        """Inverse of ``x(u)`` for ``x`` outside all bulks."""
        x = np.asarray(x, dtype=float)
        B = self.bulks
        lo = np.empty_like(x)
        hi = np.empty_like(x)
        left = x <= B[0].x_lo
        right = x >= B[-1].x_hi
        lo[left] = x[left]
        hi[left] = B[0].t_lo - (B[0].x_lo - x[left])
        lo[right] = B[-1].t_hi + (x[right] - B[-1].x_hi)
        hi[right] = x[right]
        for k in range(len(B) - 1):
            m = (x >= B[k].x_hi) & (x <= B[k + 1].x_lo)
            lo[m], hi[m] = B[k].t_hi, B[k + 1].t_lo
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        return newton_bracketed(self._x_gap, x, lo, hi, xtol=1e-15)

    def _locate(self, x: np.ndarray) -> np.ndarray:
        """Bulk index of each ``x`` (``-1`` outside every bulk)."""
        idx = np.full(x.shape, -1)
        for k, b in enumerate(self.bulks):
            idx[(x > b.x_lo) & (x < b.x_hi)] = k
        return idx

    def _g_real(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x, dtype=float)
        idx = self._locate(x)
        p = np.zeros_like(x)
        H = np.zeros_like(x)
        for k in range(len(self.bulks)):
            m = idx == k
            if np.any(m):
                u = self.t_of_x(k, x[m])
                _, p[m], _, H[m] = self.curve(u)
        m = idx < 0
        if np.any(m):
            u = self._u_gap(x[m])
            H[m] = (1.0 / (u[:, None] - self.t)) @ self.w
        return p, H

    def cont_density(self, x):
        return self._g_real(x)[0]

    def cont_hilbert(self, x):
        return self._g_real(x)[1]

    def cont_stieltjes(self, z):
        z = np.asarray(z, dtype=complex)
        lower = z.imag < 0
        zu = np.where(lower, np.conj(z), z)
        out = np.empty(zu.shape, dtype=complex)
        real = zu.imag == 0
        if np.any(real):
            p, H = self._g_real(zu[real].real)
            out[real] = H - 1j * np.pi * p
        if np.any(~real):
            zz = zu[~real]
            om = zz.copy()
            g0 = lambda o: (1.0 / (o[..., None] - self.t)) @ self.w  # noqa: E731
            for _ in range(50):  # fixed point: contracts towards the subordination function
                om = zz - self.v * g0(om)
            for _ in range(100):  # Newton on omega + v g0(omega) = z
                dg = -(1.0 / (om[..., None] - self.t) ** 2) @ self.w
                f = om + self.v * g0(om) - zz
                step = f / (1.0 + self.v * dg)
                new = om - step
                new = np.where((new.imag > 0) & np.isfinite(new), new, zz - self.v * g0(om))
                conv = np.abs(new - om) <= 1e-15 * (1 + np.abs(om))
                om = new
                if np.all(conv):
                    break
            out[~real] = g0(om)
        return np.where(lower, np.conj(out), out)


class _SpikedEngine:
    """Spiked law: ``(1 - n_out w) (bulk ⊞ SC(v)) + w sum_out delta_{outlier}``."""

    def __init__(self, law: SpikedLaw, v: float, n: int) -> None:
        self.law, self.v = law, float(v)
        self.inner = _make_engine(law.bulk, v, n)
        w = law.spike_weight
        self.outliers: list[Outlier] = []
        bulk = law.bulk
        supp = bulk.support()
        for s in law.spikes:
            if v == 0:
                self.outliers.append(Outlier(s, s, 1.0, w))
                continue
            in_supp = any(a - 1e-12 <= s <= b + 1e-12 for a, b in supp)
            if in_supp:
                continue
            gs = float(np.real(bulk.stieltjes(np.array(s + 0j))))
            dgs = float(np.real(bulk.stieltjes_derivative(np.array(s + 0j))))
            ov = 1.0 + v * dgs
            if ov > 0:
                self.outliers.append(Outlier(s, s + v * gs, ov, w))
        self.factor = 1.0 - len(self.outliers) * w
        self.bulks = self.inner.bulks
        pos = np.concatenate([self.inner.atom_pos, [o.position for o in self.outliers]])
        mass = np.concatenate([self.factor * self.inner.atom_mass, [o.mass for o in self.outliers]])
        order = np.argsort(pos, kind="stable")
        self.atom_pos, self.atom_mass = pos[order], mass[order]

    def eval_t(self, k, t):
        x, p, jac, H = self.inner.eval_t(k, t)
        return x, self.factor * p, jac, self.factor * H

    def t_of_x(self, k, x):
        return self.inner.t_of_x(k, x)

    def cont_density(self, x):
        return self.factor * self.inner.cont_density(x)

    def cont_hilbert(self, x):
        return self.factor * self.inner.cont_hilbert(x)

    def cont_stieltjes(self, z):
        return self.factor * self.inner.cont_stieltjes(z)


def _make_engine(law, v: float, n: int):
    if isinstance(law, SpikedLaw):
        return _SpikedEngine(law, v, n)
    if isinstance(law, MarchenkoPastur):
        return _MPEngine(law, v, n) if v > 0 else _MPZeroEngine(law, n)
    if isinstance(law, DiscreteLaw):
        return _BianeEngine(law, v, n) if v > 0 else _DiscreteZeroEngine(law)
    raise TypeError(f"unsupported law {type(law).__name__}; use MarchenkoPastur, DiscreteLaw or SpikedLaw")


# ======================================================================================
# Public object
# ======================================================================================
@dataclass(frozen=True)
class _Rule:
    """Quadrature rule for the continuous part of ``mu_v`` restricted to an interval."""

    x: np.ndarray
    w: np.ndarray  # includes the density: sum(w f(x)) ~ int f dmu_cont
    p: np.ndarray
    H: np.ndarray  # Hilbert transform of the continuous part at x


class ConvolvedLaw:
    """The law ``mu_v = mu0 ⊞ SC(v)`` on the real line.

    Build it with :func:`free_convolve_semicircle`. The law is split into a continuous part
    (one or several bulks, each with its quadrature rule) and point masses (``v = 0`` atoms,
    spike outliers). All methods are vectorised over their array argument.

    Parameters
    ----------
    law : MarchenkoPastur, DiscreteLaw or SpikedLaw
        Target law ``mu0``.
    v : float
        Semicircle variance ``v = delta^2 >= 0``.
    n_nodes : int
        Gauss nodes per integration panel (default 64; integrals of smooth functions are
        then accurate to ~1e-10 on single bulks).
    """

    def __init__(self, law, v: float, *, n_nodes: int = DEFAULT_NODES) -> None:
        v = float(v)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"variance must be a finite number >= 0 (got {v!r})")
        self.law = law
        self.variance = v
        self.n_nodes = int(n_nodes)
        self._eng = _make_engine(law, v, self.n_nodes)

    # -- structure ---------------------------------------------------------------------
    def edges(self) -> list[tuple[float, float]]:
        """Bulk intervals ``(left, right)`` of the continuous part, sorted (atoms excluded)."""
        return [(b.x_lo, b.x_hi) for b in self._eng.bulks]

    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """Point masses ``(positions, masses)`` (``v = 0`` atoms and spike outliers)."""
        return self._eng.atom_pos.copy(), self._eng.atom_mass.copy()

    def outliers(self) -> list[Outlier]:
        """Outliers created by the spikes of a :class:`SpikedLaw` (empty otherwise)."""
        return list(getattr(self._eng, "outliers", []))

    def mean(self) -> float:
        """Mean of ``mu_v`` (= mean of ``mu0``)."""
        return float(self.law.mean())

    def second_moment(self) -> float:
        """Second moment of ``mu_v``: ``Q0 + v``."""
        return float(self.law.second_moment()) + self.variance

    # -- pointwise functions -----------------------------------------------------------
    def density(self, x: np.ndarray | float) -> np.ndarray:
        """Density of the continuous part of ``mu_v`` at real ``x`` (point masses excluded)."""
        x = np.asarray(x, dtype=float)
        return self._eng.cont_density(x.ravel()).reshape(x.shape)

    def hilbert(self, x: np.ndarray | float) -> np.ndarray:
        """``H(x) = p.v. int mu_v(dy)/(x - y) = Re g(x + i0)`` (point masses included)."""
        x = np.asarray(x, dtype=float)
        xf = x.ravel()
        H = self._eng.cont_hilbert(xf)
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        if pos.size:
            with np.errstate(divide="ignore"):
                H = H + (1.0 / (xf[:, None] - pos)) @ mass
        return H.reshape(x.shape)

    def stieltjes(self, z: np.ndarray | complex) -> np.ndarray:
        """``g(z) = int mu_v(dy)/(z - y)``; real ``z`` is read as ``z + i0``."""
        z = np.asarray(z, dtype=complex)
        zf = z.ravel()
        g = self._eng.cont_stieltjes(zf)
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        if pos.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                g = g + (1.0 / (zf[:, None] - pos)) @ mass
        return g.reshape(z.shape)

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """``F(x) = mu_v((-inf, x])`` (right-continuous; atoms at ``x`` included)."""
        x = np.asarray(x, dtype=float)
        xf = x.ravel()
        out = np.zeros_like(xf)
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        if pos.size:
            out += (xf[:, None] >= pos) @ mass
        for k, b in enumerate(self._eng.bulks):
            cum = self._cum(k)
            out[xf >= b.x_hi] += cum[-1]
            m = (xf > b.x_lo) & (xf < b.x_hi)
            if np.any(m):
                out[m] += self._cont_mass_below_t(k, self._eng.t_of_x(k, xf[m]))
        return np.clip(out, 0.0, 1.0).reshape(x.shape)

    def quantile(self, p: np.ndarray | float) -> np.ndarray:
        """Generalised inverse ``inf{x : F(x) >= p}`` for ``p`` in ``[0, 1]`` (not a hot path)."""
        p = np.asarray(p, dtype=float)
        out = np.array([self.upper_cut(1.0 - float(pi))[0] for pi in p.ravel()])
        return out.reshape(p.shape)

    # -- quadrature --------------------------------------------------------------------
    def _cum(self, k: int) -> np.ndarray:
        b = self._eng.bulks[k]
        if b.cum is None:
            masses = []
            for j in range(len(b.breaks) - 1):
                t, w = cos_gauss(b.breaks[j], b.breaks[j + 1], int(b.nodes[j]))
                _, p, jac, _ = self._eng.eval_t(k, t)
                masses.append(np.sum(w * p * jac))
            b.cum = np.concatenate([[0.0], np.cumsum(masses)])
        return b.cum

    def _cont_mass_below_t(self, k: int, t: np.ndarray) -> np.ndarray:
        """Continuous mass of bulk ``k`` between ``t_lo`` and ``t`` (vectorised)."""
        b = self._eng.bulks[k]
        cum = self._cum(k)
        t = np.asarray(t, dtype=float)
        j = np.clip(np.searchsorted(b.breaks, t, side="right") - 1, 0, len(b.breaks) - 2)
        out = cum[j].copy()
        for jj in np.unique(j):
            m = j == jj
            tt, ww = cos_gauss(np.full(m.sum(), b.breaks[jj]), t[m], int(b.nodes[jj]))
            _, p, jac, _ = self._eng.eval_t(k, tt.ravel())
            out[m] += np.sum(ww * (p * jac).reshape(tt.shape), axis=-1)
        return out

    def rule(self, lo: float = -math.inf, hi: float = math.inf) -> _Rule:
        """Quadrature rule of the continuous part restricted to ``[lo, hi]``."""
        xs, ws, ps, Hs = [], [], [], []
        for k, b in enumerate(self._eng.bulks):
            if b.x_hi <= lo or b.x_lo >= hi:
                continue
            ta = b.t_lo if lo <= b.x_lo else float(self._eng.t_of_x(k, np.array([lo]))[0])
            tb = b.t_hi if hi >= b.x_hi else float(self._eng.t_of_x(k, np.array([hi]))[0])
            if tb <= ta:
                continue
            br = b.breaks
            inner = (br > ta) & (br < tb)
            pts = np.concatenate([[ta], br[inner], [tb]])
            # nodes of panel j: those of the original panel containing it
            jidx = np.clip(np.searchsorted(br, pts[:-1], side="right") - 1, 0, len(br) - 2)
            nodes = b.nodes[jidx]
            for n in np.unique(nodes):
                sel = nodes == n
                t, w = cos_gauss(pts[:-1][sel], pts[1:][sel], int(n))
                t, w = t.ravel(), w.ravel()
                x, p, jac, H = self._eng.eval_t(k, t)
                xs.append(x)
                ws.append(w * p * jac)
                ps.append(p)
                Hs.append(H)
        if not xs:
            e = np.zeros(0)
            return _Rule(e, e, e, e)
        return _Rule(np.concatenate(xs), np.concatenate(ws), np.concatenate(ps), np.concatenate(Hs))

    def expect(self, f: Callable[[np.ndarray], np.ndarray], breakpoints: tuple[float, ...] = ()) -> float:
        """``int f dmu_v`` (continuous part by quadrature split at ``breakpoints``, atoms exactly)."""
        pts = [-math.inf, *sorted(breakpoints), math.inf]
        total = 0.0
        for a, b in zip(pts[:-1], pts[1:]):
            r = self.rule(a, b)
            if r.x.size:
                total += float(np.sum(r.w * f(r.x)))
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        if pos.size:
            total += float(np.dot(mass, f(pos)))
        return total

    def mass_above(self, x: float) -> float:
        """``mu_v((x, inf)) = 1 - F(x)``."""
        r = self.rule(x, math.inf)
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        return float(np.sum(r.w) + np.sum(mass[pos > x]))

    def upper_cut(self, kappa: float) -> tuple[float, float | None]:
        """Point ``c`` with ``mu_v((c, inf)) <= kappa <= mu_v([c, inf))``.

        Returns ``(c, frac)``: ``frac`` is the kept fraction of an atom sitting at ``c``
        (``None`` when ``c`` is in a bulk). ``c = -inf`` when ``kappa >= 1``.
        """
        eng = self._eng
        pieces = [("atom", float(p), float(m), -1) for p, m in zip(eng.atom_pos, eng.atom_mass)]
        pieces += [("bulk", b.x_hi, float(self._cum(k)[-1]), k) for k, b in enumerate(eng.bulks)]
        pieces.sort(key=lambda q: -q[1])
        rem = float(kappa)
        if rem <= 0:
            top = pieces[0][1] if pieces else 0.0
            return top, (0.0 if pieces and pieces[0][0] == "atom" else None)
        for kind, pos, mass, k in pieces:
            if rem <= mass * (1 + 1e-12) or (kind == "bulk" and rem <= mass + 1e-13):
                if kind == "atom":
                    return pos, min(1.0, rem / mass)
                b = eng.bulks[k]
                cum = self._cum(k)
                target = cum[-1] - rem

                def fun(t, k=k):
                    _, p, jac, _ = eng.eval_t(k, t)
                    return self._cont_mass_below_t(k, t), p * jac

                t = newton_bracketed(fun, np.array([target]), np.array([b.t_lo]), np.array([b.t_hi]),
                                     xtol=1e-14, maxiter=80)
                x = eng.eval_t(k, t)[0]
                return float(x[0]), None
            rem -= mass
        return -math.inf, None

    def __repr__(self) -> str:
        return f"ConvolvedLaw({self.law!r}, v={self.variance!r})"


def free_convolve_semicircle(law, v: float, *, n_nodes: int = DEFAULT_NODES) -> ConvolvedLaw:
    """``mu0 ⊞ SC(v)``: free additive convolution of ``law`` with a semicircle of variance ``v``.

    ``v = delta^2`` in the state evolution (THEORY §3); ``v = 0`` returns ``mu0`` itself (atoms
    kept). See the module docstring for methods and conventions (Biane 1997; THEORY §9).
    """
    return ConvolvedLaw(law, v, n_nodes=n_nodes)
