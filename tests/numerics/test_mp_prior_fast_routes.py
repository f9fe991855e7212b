"""The fast routes of the Marchenko-Pastur prior side give the numbers of the reference routes.

:mod:`singlehead.numerics.spectra._mp_reference` switches the MP ⊞ SC engine back to companion-matrix
eigenvalues for its cubic, ``Polynomial`` arithmetic for its discriminant quartic and a mid-bulk
start for the rank-cap Newton solve. On a fixed-seed random set of prior-side inputs (small and
large ``delta``, ``eps`` close to the top edge, binding and slack rank caps) every field of
:class:`PriorSide` agrees within ``1e-10`` relative (measured: ``3.6e-13`` at most on 3 x 600-1500 inputs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead.model.students import Factorized
from singlehead.numerics.spectra import MarchenkoPastur, free_convolve_semicircle
from singlehead.numerics.spectra._mp_reference import _quartic_polynomial, reference_routes
from singlehead.numerics.spectra.mp_engines import MPEngine, _quartic_discriminant, _quartic_roots
from singlehead.numerics.spectra.primitives import cubic_roots, cubic_roots_fast
from singlehead.numerics.spectra.prior_model import PriorModel

FIELDS = ("q", "m", "Sigma", "eta", "delta", "eps", "cutoff", "rank_fraction", "first_moment")
RTOL = 1e-10


def _inputs(seed: int, n: int) -> list[tuple[float, float, float, float, float, float]]:
    """``(kappa0, qhat, mhat, Sigmahat, lam, kappa)``: delta over 1e-4..100, eps over (0, 1.02) of
    the top edge (a sixth within 1e-9..1e-2 of it, a sixth within 1e-6..0.1 of 0), a cap for 60 %."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kappa0 = float(np.exp(rng.uniform(math.log(0.03), math.log(5.0))))
        kind = i % 6
        lo, hi = {0: (1e-4, 3e-3), 1: (5.0, 100.0)}.get(kind, (1e-3, 30.0))
        delta = float(np.exp(rng.uniform(math.log(lo), math.log(hi))))
        top = free_convolve_semicircle(MarchenkoPastur(kappa0), delta**2).edges()[-1][1]
        u = {2: 1.0 - 10 ** rng.uniform(-9, -2), 3: 10 ** rng.uniform(-6, -1)}.get(kind, rng.uniform(0.0, 1.02))
        eps = max(u * top, 1e-7)
        kappa = 1.0 if rng.random() < 0.4 else float(10 ** rng.uniform(-3, -0.01))
        mhat = float(10 ** rng.uniform(-1, 2))
        out.append((kappa0, (delta * mhat) ** 2, mhat, float(10 ** rng.uniform(-1, 2)), eps * mhat / 2, kappa))
    return out


def _prior_sides(inputs) -> np.ndarray:
    student, rows = Factorized(), []
    for kappa0, qhat, mhat, Sigmahat, lam, kappa in inputs:
        prior = PriorModel("asymptotic", 1.0 + kappa0, MarchenkoPastur(kappa0))
        side = student.prior_side(qhat, mhat, Sigmahat, lam=lam, kappa=kappa, prior=prior)
        rows.append([float(getattr(side, f)) for f in FIELDS])
    return np.array(rows)


def _rel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a == b, 0.0, np.abs(a - b) / np.maximum(np.abs(a), np.abs(b)))


def test_prior_side_matches_reference_routes():
    inputs = _inputs(2026, 90)
    with reference_routes():
        ref = _prior_sides(inputs)
    new = _prior_sides(inputs)
    assert np.all(np.isfinite(new))
    rel = _rel(ref, new)
    worst = np.unravel_index(np.argmax(rel), rel.shape)
    assert rel.max() <= RTOL, f"{FIELDS[worst[1]]} differs by {rel.max():.2e} at input {inputs[worst[0]]}"
    binds = [k < 1 for *_, k in inputs]
    assert any(binds) and not all(binds)


@pytest.mark.parametrize("kappa0", [0.05, 0.5, 1.0, 4.0])
def test_bulks_identical_to_reference(kappa0):
    """Edges, panel breaks and the bulk decisions at the mid-points are bit-identical."""
    law = MarchenkoPastur(kappa0)
    for v in np.geomspace(1e-9, 1e4, 40):
        new = MPEngine(law, v, 64)
        with reference_routes():
            ref = MPEngine(law, v, 64)
        assert len(new.bulks) == len(ref.bulks)
        for a, b in zip(new.bulks, ref.bulks):
            assert (a.t_lo, a.t_hi) == (b.t_lo, b.t_hi)
            assert np.array_equal(a.breaks, b.breaks)


def test_quartic_routes_bit_identical():
    rng = np.random.default_rng(7)
    for _ in range(500):
        sa, v = math.exp(rng.uniform(-1.0, 2.0)), math.exp(rng.uniform(-20.0, 9.0))
        k = _quartic_discriminant(sa, v)
        assert np.array_equal(k, _quartic_polynomial(sa, v))
        assert np.array_equal(_quartic_roots(k), np.polynomial.polynomial.polyroots(k))


def _matched(r_new: np.ndarray, r_ref: np.ndarray) -> np.ndarray:
    """Distance of each reference root to the nearest new root, relative to ``1 + |root|``."""
    return np.abs(r_ref[..., :, None] - r_new[..., None, :]).min(-1) / (1.0 + np.abs(r_ref))


@pytest.mark.parametrize("v", [1e-10, 1e-6, 1e-2, 1.0, 1e2, 1e4])
def test_cubic_roots_fast_matches_eigvals_on_mp_cubics(v):
    """The MP ⊞ SC cubic at real and complex ``z``; where roots coalesce both routes are eigvals."""
    rng = np.random.default_rng(int(-math.log10(v) * 10 + 100))
    sa = 1.0 / math.sqrt(0.5)
    z = np.concatenate([rng.uniform(-3.0, 8.0, 400), rng.uniform(-3.0, 8.0, 200) + 1j * 10 ** rng.uniform(-8, 1, 200)])
    c = (sa * v, -(sa * z + v), z + sa - 1.0 / sa, -1.0 + 0 * z)
    r_new, fallback = cubic_roots_fast(*c, with_fallback=True)
    r_ref = cubic_roots(*c)
    assert np.all(np.isfinite(r_new))
    assert _matched(r_new, r_ref).max() <= RTOL
    assert np.array_equal(r_new[fallback], r_ref[fallback])


def test_cubic_roots_fast_generic_and_degenerate():
    rng = np.random.default_rng(3)
    c = [rng.standard_normal(300) + 1j * rng.standard_normal(300) for _ in range(4)]
    assert _matched(cubic_roots_fast(*c), cubic_roots(*c)).max() <= RTOL
    # a triple root and a double root go to the eigenvalue route
    r = cubic_roots_fast(np.array([1.0, 1.0]), np.array([-3.0, -4.0]), np.array([3.0, 5.0]), np.array([-1.0, -2.0]))
    assert np.allclose(np.sort_complex(r[0]), 1.0, atol=1e-4) and np.allclose(np.sort(r[1].real), [1, 1, 2], atol=1e-6)


def test_stieltjes_off_axis_matches_reference():
    cl = free_convolve_semicircle(MarchenkoPastur(0.3), 0.04)
    z = np.linspace(-1.0, 6.0, 301) + 1j * np.geomspace(1e-9, 3.0, 301)
    new = cl.stieltjes(z)
    with reference_routes():
        ref = free_convolve_semicircle(MarchenkoPastur(0.3), 0.04).stieltjes(z)
    assert np.max(np.abs(new - ref) / np.abs(ref)) <= RTOL
