"""Engines of the free convolution with a semicircle (internal to the spectral engine): Biane subordination for discrete
laws,
spiked laws, and the engine choice for a law.

See :mod:`singlehead.numerics.spectra.convolution` for the methods and conventions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from singlehead.numerics.spectra.laws import SPIKE_CHUNK, DiscreteLaw, MarchenkoPastur, SpikedLaw
from singlehead.numerics.spectra.mp_engines import (
    PANEL_NODES_SINGLE,
    RIPPLE_RATIO,
    Bulk,
    DiscreteZeroEngine,
    MPEngine,
    MPZeroEngine,
)
from singlehead.numerics.spectra.primitives import bisect_increasing, cos_gauss, newton_bracketed


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

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, SpikedLaw, free_convolve_semicircle
    >>> law = SpikedLaw(MarchenkoPastur(0.5), spikes=(5.0,), spike_weight=0.01)
    >>> [out] = free_convolve_semicircle(law, 0.25).outliers()
    >>> out.spike, round(out.position, 3), round(out.overlap, 3)   # position s + v g_bulk(s)
    (5.0, 5.064, 0.98)
    """

    spike: float
    position: float
    overlap: float
    mass: float


#: the largest (gap, atom) pair array the free convolution of a discrete law may allocate
MAX_PAIR_BYTES = 2 * 2**30


class _BianeEngine:
    """``DiscreteLaw ⊞ SC(v)``, ``v > 0``, through Biane's parametrisation of the subordination."""

    def __init__(self, law: DiscreteLaw, v: float, n: int) -> None:
        self.t, self.w = law.atoms()
        pair_bytes = 8 * self.t.size * self.t.size
        if pair_bytes > MAX_PAIR_BYTES:
            # the bulks are found by solving the subordination equation on every (gap, atom) pair at once
            raise ValueError(
                f"law: the free convolution of a discrete law of {self.t.size} atoms needs "
                f"{pair_bytes / 2**30:.1f} GiB of (gap, atom) pairs, above the "
                f"{MAX_PAIR_BYTES / 2**30:.0f} GiB limit (MAX_PAIR_BYTES)"
            )
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
    def _make_bulks(self) -> list[Bulk]:
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
                bumpy = y < RIPPLE_RATIO * gap
                if np.any(bumpy):
                    breaks = np.concatenate([[ua], mids[bumpy], [ub]])
                    count = np.histogram(tk, bins=breaks)[0]
                    nodes = np.where(count > 1, self.n, PANEL_NODES_SINGLE)
            bulks.append(Bulk(float(ua), float(ub), float(xa), float(xb), breaks, nodes))
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


def _inside_support(x: np.ndarray, support: list[tuple[float, float]], tol: float = 1e-12) -> np.ndarray:
    """``x_i`` in some interval ``[a - tol, b + tol]`` of ``support`` (vectorised over ``x``).

    With the intervals sorted by ``a``: ``x`` lies in one of them iff the largest ``b`` among those with
    ``a <= x + tol`` is ``>= x - tol``.
    """
    if not support:
        return np.zeros(x.shape, dtype=bool)
    iv = np.asarray(sorted(support), dtype=float)
    bmax = np.maximum.accumulate(iv[:, 1])
    idx = np.searchsorted(iv[:, 0], x + tol, side="right") - 1
    return (idx >= 0) & (bmax[np.maximum(idx, 0)] >= x - tol)


class _SpikedEngine:
    """Spiked law: ``(1 - n_out w) (bulk ⊞ SC(v)) + w sum_out delta_{outlier}``."""

    def __init__(self, law: SpikedLaw, v: float, n: int) -> None:
        self.law, self.v = law, float(v)
        self.inner = make_engine(law.bulk, v, n)
        w = law.spike_weight
        spikes = np.asarray(law.spikes, dtype=float)
        if v == 0:
            pos, ov, keep = spikes, np.ones_like(spikes), np.ones(spikes.shape, dtype=bool)
        else:
            # vectorised over spikes (the power-law priors carry up to ~10^5 of them, too many for a Python
            # loop in every SE map evaluation): a spike inside a bulk component creates no outlier
            keep = ~_inside_support(spikes, law.bulk.support())
            gs, dgs = np.zeros_like(spikes), np.zeros_like(spikes)
            for lo in range(0, spikes.size, SPIKE_CHUNK):  # chunks bound the (spikes x bulk atoms) temporaries
                sl = slice(lo, lo + SPIKE_CHUNK)
                zs = spikes[sl][keep[sl]] + 0j
                if zs.size:
                    gs[sl][keep[sl]] = np.real(law.bulk.stieltjes(zs))
                    dgs[sl][keep[sl]] = np.real(law.bulk.stieltjes_derivative(zs))
            ov = 1.0 + v * dgs
            keep &= ov > 0
            pos = spikes + v * gs
        # the outliers as arrays (spike, position, overlap); the Outlier objects are built only when asked for
        self._outlier_arrays = (spikes[keep], pos[keep], ov[keep])
        self._weight = w
        n_out = int(keep.sum())
        self.factor = 1.0 - n_out * w
        self.bulks = self.inner.bulks
        pos = np.concatenate([self.inner.atom_pos, pos[keep]])
        mass = np.concatenate([self.factor * self.inner.atom_mass, np.full(n_out, w)])
        order = np.argsort(pos, kind="stable")
        self.atom_pos, self.atom_mass = pos[order], mass[order]

    @property
    def outliers(self) -> list[Outlier]:
        """The spikes' outliers, in spike order."""
        return [Outlier(float(a), float(b), float(c), self._weight) for a, b, c in zip(*self._outlier_arrays)]

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


def make_engine(law, v: float, n: int):
    """The engine of ``law ⊞ SC(v)`` on ``n`` nodes per panel, chosen by the kind of ``law`` (spiked,
    Marchenko--Pastur or discrete; ``TypeError`` for any other law)."""
    if isinstance(law, SpikedLaw):
        return _SpikedEngine(law, v, n)
    if isinstance(law, MarchenkoPastur):
        return MPEngine(law, v, n) if v > 0 else MPZeroEngine(law, n)
    if isinstance(law, DiscreteLaw):
        return _BianeEngine(law, v, n) if v > 0 else DiscreteZeroEngine(law)
    raise TypeError(f"unsupported law {type(law).__name__}; use MarchenkoPastur, DiscreteLaw or SpikedLaw")
