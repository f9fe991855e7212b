"""Free additive convolution with a semicircle: ``mu_v = mu0 ⊞ SC(v)``.

Conventions
-----------
``SC(v)`` is the semicircle of variance ``v`` (support ``[-2 sqrt v, 2 sqrt v]``); in the
state evolution ``v = delta^2`` (docs: Theory, :ref:`theory-prior-side`). Stieltjes transform
``g(z) = int mu(dy)/(z - y)`` (``Im g < 0`` on the upper half-plane; docs: Theory,
:ref:`theory-free-probability`), density ``p(x) = -Im g(x + i0)/pi``, Hilbert transform
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
* MP targets (docs: Theory, :ref:`theory-free-probability`): ``g`` is the root of
  ``sqrt(a) v g^3 - (sqrt(a) z + v) g^2 + (z + sqrt(a) - 1/sqrt(a)) g - 1 = 0`` (``a = 1/kappa0``)
  that satisfies the subordination relation with the principal branch of ``g0``; the bulk
  edges are real roots of the cubic's discriminant (a quartic in ``x``), so there are at most
  two bulks. Integrals are done in ``x``, bulk by bulk, with the same cosine rule. The cubic is
  solved in closed form (Cardano, then deflation and a Newton step), by companion-matrix
  eigenvalues where two roots nearly coincide (:func:`singlehead.numerics.spectra.primitives.cubic_roots_fast`).
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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from singlehead.numerics.spectra.primitives import cos_gauss, newton_bracketed
from singlehead.numerics.spectra.subordination import Outlier, make_engine

__all__ = ["ConvolvedLaw", "Outlier", "free_convolve_semicircle"]


#: Default number of Gauss nodes per integration panel.
DEFAULT_NODES = 64


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

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, free_convolve_semicircle
    >>> mu = free_convolve_semicircle(MarchenkoPastur(0.5), 0.25)
    >>> round(mu.second_moment(), 4)                    # second moments add: 1.5 + 0.25
    1.75
    >>> round(float(mu.cdf(100.0)), 6)
    1.0
    """

    def __init__(self, law, v: float, *, n_nodes: int = DEFAULT_NODES) -> None:
        v = float(v)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"variance must be a finite number >= 0 (got {v!r})")
        self.law = law
        self.variance = v
        self.n_nodes = int(n_nodes)
        self._eng = make_engine(law, v, self.n_nodes)

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

    def _plus_atoms(self, values: np.ndarray, points: np.ndarray) -> np.ndarray:
        """``values + sum_a m_a / (points - t_a)``: the point masses' part of ``H`` or ``g``."""
        pos, mass = self._eng.atom_pos, self._eng.atom_mass
        if not pos.size:
            return values
        with np.errstate(divide="ignore", invalid="ignore"):
            return values + (1.0 / (points[:, None] - pos)) @ mass

    def hilbert(self, x: np.ndarray | float) -> np.ndarray:
        """``H(x) = p.v. int mu_v(dy)/(x - y) = Re g(x + i0)`` (point masses included)."""
        x = np.asarray(x, dtype=float)
        xf = x.ravel()
        return self._plus_atoms(self._eng.cont_hilbert(xf), xf).reshape(x.shape)

    def stieltjes(self, z: np.ndarray | complex) -> np.ndarray:
        """``g(z) = int mu_v(dy)/(z - y)``; real ``z`` is read as ``z + i0``."""
        z = np.asarray(z, dtype=complex)
        zf = z.ravel()
        g = self._plus_atoms(self._eng.cont_stieltjes(zf), zf)
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
        """Continuous mass of bulk ``k`` below each of its panel breaks (computed once per law)."""
        b = self._eng.bulks[k]
        if b.cum is None:
            t, w, ends = self._cum_nodes(k)
            _, p, jac, _ = self._eng.eval_t(k, t)
            self._store_cum(k, w, ends, p, jac)
        return b.cum

    def _cum_nodes(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nodes and weights of all panels of bulk ``k`` (concatenated) and the panels' end offsets."""
        b = self._eng.bulks[k]
        rules = [cos_gauss(b.breaks[j], b.breaks[j + 1], int(b.nodes[j])) for j in range(len(b.breaks) - 1)]
        ends = np.cumsum([0] + [w.size for _, w in rules])
        return np.concatenate([t for t, _ in rules]), np.concatenate([w for _, w in rules]), ends

    def _store_cum(self, k: int, w: np.ndarray, ends: np.ndarray, p: np.ndarray, jac: np.ndarray) -> None:
        """Panel masses of bulk ``k`` from the engine values at :meth:`_cum_nodes` (each summed over its slice)."""
        wpj = w * p * jac
        masses = [np.sum(wpj[i0:i1]) for i0, i1 in zip(ends[:-1], ends[1:])]
        self._eng.bulks[k].cum = np.concatenate([[0.0], np.cumsum(masses)])

    def _cont_mass_below_t(self, k: int, t: np.ndarray, with_density: bool = False):
        """Continuous mass of bulk ``k`` between ``t_lo`` and ``t`` (vectorised).

        With ``with_density``, also ``p dx/dt`` at ``t`` (the derivative of that mass), evaluated in the
        same engine call as the quadrature nodes.
        """
        b = self._eng.bulks[k]
        cum = self._cum(k)
        t = np.asarray(t, dtype=float)
        j = np.clip(np.searchsorted(b.breaks, t, side="right") - 1, 0, len(b.breaks) - 2)
        out = cum[j].copy()
        panels = sorted(set(j.tolist()))  # np.unique's order, without its overhead on a few values
        groups = [(j == jj) for jj in panels]
        rules = [cos_gauss(np.full(m.sum(), b.breaks[jj]), t[m], int(b.nodes[jj])) for jj, m in zip(panels, groups)]
        pts = [tt.ravel() for tt, _ in rules] + ([t] if with_density else [])
        _, p, jac, _ = self._eng.eval_t(k, np.concatenate(pts))
        pj = p * jac
        start = 0
        for m, (tt, ww) in zip(groups, rules):
            out[m] += np.sum(ww * pj[start : start + tt.size].reshape(tt.shape), axis=-1)
            start += tt.size
        return (out, pj[start:]) if with_density else out

    def rule(self, lo: float = -math.inf, hi: float = math.inf, *, with_cum: bool = False) -> _Rule:
        """Quadrature rule of the continuous part restricted to ``[lo, hi]``.

        ``with_cum``: also compute the panel masses of the bulks it meets (what a later
        :meth:`upper_cut` or :meth:`cdf` needs) in the same engine calls; the numbers are the same.
        """
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
            cum = self._cum_nodes(k) if with_cum and b.cum is None else None
            for n in sorted(set(nodes.tolist())):
                sel = nodes == n
                t, w = cos_gauss(pts[:-1][sel], pts[1:][sel], int(n))
                t, w = t.ravel(), w.ravel()
                x, p, jac, H = self._eng.eval_t(k, t if cum is None else np.concatenate([t, cum[0]]))
                if cum is not None:  # the engine is element-wise: the extra nodes change nothing here
                    self._store_cum(k, cum[1], cum[2], p[t.size :], jac[t.size :])
                    x, p, jac, H, cum = x[: t.size], p[: t.size], jac[: t.size], H[: t.size], None
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

    def upper_cut(self, kappa: float, guess: float | None = None) -> tuple[float, float | None]:
        """Point ``c`` with ``mu_v((c, inf)) <= kappa <= mu_v([c, inf))``.

        Returns ``(c, frac)``: ``frac`` is the kept fraction of an atom sitting at ``c``
        (``None`` when ``c`` is in a bulk). ``c = -inf`` when ``kappa >= 1``. ``guess`` (a point
        ``x`` near ``c``) only starts the Newton solve inside the bulk: the solution is the same to
        round-off, reached in fewer steps.
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
                target = self._cum(k)[-1] - rem
                t0 = None
                if guess is not None and b.x_lo < guess < b.x_hi:
                    t0 = eng.t_of_x(k, np.array([float(guess)]))

                def fun(t, k=k):
                    return self._cont_mass_below_t(k, t, with_density=True)

                t = newton_bracketed(
                    fun, np.array([target]), np.array([b.t_lo]), np.array([b.t_hi]), t0, xtol=1e-14, maxiter=80
                )
                x = t if getattr(eng, "t_is_x", False) else eng.eval_t(k, t)[0]
                return float(x[0]), None
            rem -= mass
        return -math.inf, None

    def __repr__(self) -> str:
        return f"ConvolvedLaw({self.law!r}, v={self.variance!r})"


def free_convolve_semicircle(law, v: float, *, n_nodes: int = DEFAULT_NODES) -> ConvolvedLaw:
    """``mu0 ⊞ SC(v)``: free additive convolution of ``law`` with a semicircle of variance ``v``.

    ``v = delta^2`` in the state evolution (docs: Theory, :ref:`theory-prior-side`); ``v = 0`` returns ``mu0`` itself
    (atoms kept). See the module docstring for methods and conventions (Biane 1997; docs: Theory,
    :ref:`theory-free-probability`).

    Examples
    --------
    >>> from singlehead.numerics.spectra import MarchenkoPastur, free_convolve_semicircle
    >>> mu = free_convolve_semicircle(MarchenkoPastur(0.5), 0.25)   # law of S0 + 0.5 Z
    >>> round(mu.mean(), 6), len(mu.edges()) >= 1
    (0.707107, True)
    """
    return ConvolvedLaw(law, v, n_nodes=n_nodes)
