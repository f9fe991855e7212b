"""The reference numerical routes of the MP ⊞ SC engine (private; for tests and benchmarks).

:class:`~singlehead.numerics.spectra.mp_engines.MPEngine` solves its cubic in closed form
(:func:`singlehead.numerics.spectra.primitives.cubic_roots_monic`),
forms the discriminant quartic with ``np.convolve``, decides which gaps between edges are bulks by the
discriminant's sign where it is clear, and :meth:`~.convolution.ConvolvedLaw.upper_cut` starts its
rank-cap Newton solve from the quadrature's tail quantile. The routes below are the slower ones those
replace, which define the expected numbers (the code before the change, bit for bit): companion-matrix
eigenvalues for every cubic (then the engine's Newton polish), ``numpy.polynomial.Polynomial``
arithmetic for the quartic, the density at every mid-point between edges and the Newton solve started
at the middle of the bulk. :func:`reference_routes` switches them on inside a ``with`` block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from singlehead.numerics.spectra import integrals
from singlehead.numerics.spectra import mp_engines as _mp_engines

__all__ = ["reference_routes"]


def _all_rows_eigvals(A, B, C):
    """No closed-form root: every row is flagged for the engine's eigenvalue route (and its polish)."""
    return np.empty((np.size(A), 3), dtype=complex), np.ones(np.size(A), dtype=bool)


def _quartic_polynomial(sa: float, v: float) -> np.ndarray:
    """The discriminant quartic's coefficients by ``numpy.polynomial.Polynomial`` arithmetic."""
    P = np.polynomial.Polynomial
    a, b, c, d = sa * v, P([-v, -sa]), P([sa - 1.0 / sa, 1.0]), -1.0
    disc = 18 * a * b * c * d - 4 * b**3 * d + b**2 * c**2 - 4 * a * c**3 - 27 * a**2 * d**2
    return disc.coef


@contextmanager
def reference_routes() -> Iterator[None]:
    """Run the MP engine on its reference routes inside the block (not thread-safe: it swaps module
    attributes)."""
    names = [
        (_mp_engines, "cubic_roots_monic"),
        (_mp_engines, "_quartic_discriminant"),
        (_mp_engines, "_DISC_SIGN_RTOL"),
        (integrals, "_tail_quantile"),
    ]
    saved = [getattr(module, name) for module, name in names]
    _mp_engines.cubic_roots_monic = _all_rows_eigvals
    _mp_engines._quartic_discriminant = _quartic_polynomial
    _mp_engines._DISC_SIGN_RTOL = np.inf  # every mid-point between edges is decided by the density
    integrals._tail_quantile = lambda rule, kappa, n: None
    try:
        yield
    finally:
        for (module, name), value in zip(names, saved):
            setattr(module, name, value)
