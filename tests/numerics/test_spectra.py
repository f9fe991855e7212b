"""Tests of the free-probability engine ``singlehead.numerics.spectra``.

Monte Carlo checks use fixed seeds; tolerances (KS < 0.02, 1 %, 2 %) sit
well above the measured spread (quoted next to each check), so they fail on a wrong formula
(e.g. a factor 2 in the semicircle variance moves J by ~10 %).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.sparse.linalg

from singlehead.numerics.spectra import (
    ConvolvedLaw,
    DiscreteLaw,
    FiniteDSpectrum,
    MarchenkoPastur,
    SpikedLaw,
    ThresholdIntegrals,
    free_convolve_semicircle,
    free_divergence,
    goe,
    learned_spectrum_law,
    linear_shrinkage_integrals,
    plot_learned_spectrum,
    rie_mmse_integral,
    soft_threshold_integrals,
)


def mp_sample(d: int, kappa0: float, seed: int) -> np.ndarray:
    """Eigenvalues of ``S0 = W0 W0^T / sqrt(p0 d)`` (docs page Theory, section '4. Targets')."""
    rng = np.random.default_rng(seed)
    p0 = int(round(kappa0 * d))
    W = rng.standard_normal((d, p0))
    if p0 >= d:
        return np.linalg.eigvalsh(W @ W.T / math.sqrt(p0 * d))
    # the non-zero eigenvalues of W W^T are those of the smaller W^T W; the rest are 0
    return np.sort(np.concatenate([np.zeros(d - p0), np.linalg.eigvalsh(W.T @ W / math.sqrt(p0 * d))]))


def power_law(d: int, gamma: float) -> np.ndarray:
    return math.sqrt(d) * np.arange(1, d + 1, dtype=float) ** (-gamma)


LAWS = {
    "mp0.5": MarchenkoPastur(0.5),
    "mp2": MarchenkoPastur(2.0),
    "mp1": MarchenkoPastur(1.0),
    "three_atoms": DiscreteLaw([-3.0, 0.0, 3.0]),
    "weighted": DiscreteLaw([0.0, 1.0, 5.0], [0.5, 0.3, 0.2]),
    "power_law": DiscreteLaw(power_law(200, 1.0)),
    "spiked_null": SpikedLaw(DiscreteLaw([0.0]), (2.0, 0.5), 1e-3),
    "spiked_mp": SpikedLaw(MarchenkoPastur(0.5), (6.0,), 1e-3),
}


# --------------------------------------------------------------------------------------
# Analytic checks
# --------------------------------------------------------------------------------------
def test_semicircle_density_hilbert_edges():
    cl = free_convolve_semicircle(DiscreteLaw([0.0]), 1.0)
    x = np.linspace(-1.99, 1.99, 101)
    assert cl.edges() == [pytest.approx((-2.0, 2.0), abs=1e-12)]
    np.testing.assert_allclose(cl.hilbert(x), x / 2, atol=1e-12)
    np.testing.assert_allclose(cl.density(x), np.sqrt(4 - x**2) / (2 * np.pi), atol=1e-12)
    # outside: g(x) = (x - sqrt(x^2 - 4))/2
    xo = np.array([-5.0, -2.5, 2.5, 5.0])
    np.testing.assert_allclose(cl.hilbert(xo), (xo - np.sign(xo) * np.sqrt(xo**2 - 4)) / 2, atol=1e-12)
    # semicircle of variance v: radius 2 sqrt(v), cdf(0) = 1/2
    cl4 = free_convolve_semicircle(DiscreteLaw([0.0]), 4.0)
    assert cl4.edges()[0] == pytest.approx((-4.0, 4.0))
    assert cl4.cdf(0.0) == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("name", list(LAWS))
@pytest.mark.parametrize("v", [0.01, 0.25])
def test_mass_and_moments(name, v):
    law = LAWS[name]
    cl = free_convolve_semicircle(law, v)
    assert cl.expect(lambda x: np.ones_like(x)) == pytest.approx(1.0, abs=1e-9)
    # spiked laws use the d -> inf outlier picture: moments exact only to O(spike_weight)
    tol = 10 * law.spike_weight * len(law.spikes) if isinstance(law, SpikedLaw) else 1e-8
    assert cl.expect(lambda x: x) == pytest.approx(law.mean(), abs=tol * (1 + abs(law.mean())))
    assert cl.expect(lambda x: x**2) == pytest.approx(law.second_moment() + v, rel=tol)
    assert cl.second_moment() == pytest.approx(law.second_moment() + v)


def test_mp_moments_and_v_zero():
    for k0 in (0.3, 0.5, 1.0, 2.0):
        law = MarchenkoPastur(k0)
        assert law.mean() == pytest.approx(math.sqrt(k0))
        assert law.second_moment() == pytest.approx(1 + k0)
        cl0 = free_convolve_semicircle(law, 0.0)
        pos, mass = cl0.atoms()
        assert mass.sum() == pytest.approx(max(0.0, 1 - k0))
        assert cl0.expect(lambda x: x) == pytest.approx(math.sqrt(k0), rel=1e-9)
        assert cl0.expect(lambda x: x**2) == pytest.approx(1 + k0, rel=1e-9)
        # v -> 0: moments and J are continuous
        cl = free_convolve_semicircle(law, 1e-8)
        assert cl.expect(lambda x: x**2) == pytest.approx(1 + k0, rel=1e-7)
        J0 = soft_threshold_integrals(law, 0.0, 0.4).J
        assert soft_threshold_integrals(law, 1e-4, 0.4).J == pytest.approx(J0, rel=1e-6)


def test_v_zero_threshold_integrals_exact():
    # MP: J from an independent adaptive quadrature of the MP density
    law = MarchenkoPastur(0.5)
    a, b = law.ac_edges()
    eps = 0.7
    J_ref = scipy.integrate.quad(lambda x: (x - eps) ** 2 * law.ac_density(x), eps, b, epsabs=1e-13, limit=200)[0]
    ti = soft_threshold_integrals(law, 0.0, eps)
    assert ti.J == pytest.approx(J_ref, rel=1e-9)
    assert ti.dJ_ddelta == 0.0
    # discrete law: J and D are the finite sums, D the exact divided-difference formula
    lam = np.array([-1.0, 0.2, 0.5, 1.5, 3.0, 3.0])
    ti = soft_threshold_integrals(DiscreteLaw(lam), 0.0, 0.3)
    f = np.maximum(lam - 0.3, 0.0)
    assert ti.J == pytest.approx(np.mean(f**2), rel=1e-14)
    assert ti.dJ_deps == pytest.approx(-2 * np.mean(f), rel=1e-14)
    assert ti.rank_fraction == pytest.approx(4 / 6)
    n = lam.size
    D = 0.0
    for i in range(n):
        for j in range(n):
            if i == j or lam[i] == lam[j]:
                D += float(lam[i] > 0.3)
            else:
                D += (f[i] - f[j]) / (lam[i] - lam[j])
    assert ti.divergence == pytest.approx(D / n**2, rel=1e-13)
    # rank cap at v = 0 keeps the top atoms (here 2 of 6, the pair at 3.0)
    tc = soft_threshold_integrals(DiscreteLaw(lam), 0.0, 0.3, rank_cap=2 / 6)
    assert tc.cap_binds and tc.J == pytest.approx(2 * 2.7**2 / 6)


def test_mp_cubic_against_subordination_and_discretisation():
    law = MarchenkoPastur(0.5)
    v = 0.25
    cl = free_convolve_semicircle(law, v)
    z = np.array([0.3 + 0.2j, 2.0 + 1e-3j, -1.0 + 1.0j, 5.0 - 0.5j])
    g = cl.stieltjes(z)
    np.testing.assert_allclose(g, law.stieltjes(z - v * g), atol=1e-12)
    assert np.all(np.sign(g.imag) == -np.sign(z.imag))
    # the cubic (x-space) vs Biane's parametrisation on an MP quantile discretisation (d = 3000)
    xs = np.linspace(*law.ac_edges(), 20001)
    F = free_convolve_semicircle(law, 0.0).cdf(xs)
    pts = np.interp(0.5 + 0.5 * (np.arange(1500) + 0.5) / 1500, F, xs)  # atom 0.5 at 0
    lam = np.concatenate([np.zeros(1500), pts])
    cd = free_convolve_semicircle(DiscreteLaw(lam), v)
    x = np.linspace(-0.5, 4.0, 46)
    np.testing.assert_allclose(cd.density(x), cl.density(x), atol=2e-3)
    np.testing.assert_allclose(cd.hilbert(x), cl.hilbert(x), atol=2e-3)
    # the top quantile atom sits ~(1/1500)^(2/3) below the square-root edge: edges agree to ~0.04
    assert cd.edges()[0] == pytest.approx(cl.edges()[0], abs=0.06)


def test_multiple_bulks_and_hilbert():
    law = DiscreteLaw([-3.0, 0.0, 3.0])
    cl = free_convolve_semicircle(law, 0.1)
    E = cl.edges()
    assert len(E) == 3
    assert E[0][0] == pytest.approx(-E[2][1], abs=1e-12) and E[1][0] == pytest.approx(-E[1][1], abs=1e-12)
    for a, b in E:
        r = cl.rule(a, b)
        assert r.w.sum() == pytest.approx(1 / 3, abs=1e-11)
        assert cl.density(np.array([a - 1e-6, b + 1e-6])).max() == 0.0
        assert cl.density(0.5 * (a + b)) > 0.1
    # Hilbert transform outside and inside the support against the quadrature
    r = cl.rule()
    xo = np.array([-5.0, -1.5, 1.5, 5.0])
    np.testing.assert_allclose(cl.hilbert(xo), [(r.w / (x - r.x)).sum() for x in xo], atol=1e-12)
    # MP with kappa0 < 1 and small v: the atom at 0 becomes its own bulk
    E2 = free_convolve_semicircle(MarchenkoPastur(0.5), 0.01).edges()
    assert len(E2) == 2 and E2[0][0] < 0 < E2[0][1] < E2[1][0]
    assert free_convolve_semicircle(MarchenkoPastur(0.5), 0.01).rule(*E2[0]).w.sum() == pytest.approx(0.5, abs=1e-10)


def test_cdf_quantile_roundtrip():
    cl = free_convolve_semicircle(MarchenkoPastur(0.5), 0.2)
    x = np.array([-0.3, 0.5, 1.7, 3.0])
    F = cl.cdf(x)
    np.testing.assert_allclose(cl.quantile(F), x, atol=1e-9)
    assert np.all(np.diff(cl.cdf(np.linspace(-2, 6, 50))) >= -1e-15)


# --------------------------------------------------------------------------------------
# Derivatives: Burgers identity dJ/ddelta = 2 delta D, exact dJ/deps
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "law,delta,eps,cap",
    [
        (MarchenkoPastur(0.5), 0.5, 0.3, None),
        (MarchenkoPastur(2.0), 0.8, 1.5, None),
        (MarchenkoPastur(0.5), 0.5, 0.3, 0.2),  # cap binds: 2 delta D is dJ/ddelta at fixed kappa
        (DiscreteLaw([-3.0, 0.0, 3.0]), 0.3, 0.2, None),
        (DiscreteLaw(power_law(200, 1.0)), 1.0, 0.5, None),
    ],
)
def test_burgers_identity_and_eps_derivative(law, delta, eps, cap):
    ti = soft_threshold_integrals(law, delta, eps, cap)
    h = 1e-3
    fd = (
        soft_threshold_integrals(law, delta + h, eps, cap).J - soft_threshold_integrals(law, delta - h, eps, cap).J
    ) / (2 * h)
    fe = (
        soft_threshold_integrals(law, delta, eps + h, cap).J - soft_threshold_integrals(law, delta, eps - h, cap).J
    ) / (2 * h)
    # central-difference truncation error ~ h^2: measured <= 4e-7 relative
    assert ti.dJ_ddelta == pytest.approx(fd, rel=1e-5)
    assert ti.dJ_deps == pytest.approx(fe, rel=1e-5)
    assert ti.dJ_ddelta == pytest.approx(2 * delta * ti.divergence)
    assert ti.cap_binds == (cap is not None)


def test_free_divergence_generic_and_linear_shrinkage():
    law = MarchenkoPastur(0.5)
    delta = 0.6
    ti = soft_threshold_integrals(law, delta, 0.4)
    D = free_divergence(law, delta, lambda x: np.maximum(x - 0.4, 0.0), lambda x: (x > 0.4) * 1.0, breakpoints=(0.4,))
    assert D == pytest.approx(ti.divergence, rel=1e-10)
    assert free_divergence(law, delta, lambda x: x) == pytest.approx(1.0, rel=1e-10)
    ls = linear_shrinkage_integrals(law, delta)
    cl = free_convolve_semicircle(law, delta**2)
    assert ls.second_moment == pytest.approx(cl.expect(lambda x: x**2), rel=1e-10)
    assert ls.divergence == 1.0 and ls.dsecond_ddelta == pytest.approx(2 * delta)
    # with atoms (v = 0 MP and a spiked law) the pair formula is used
    sp = LAWS["spiked_null"]
    D2 = free_divergence(sp, 1.0, lambda x: x)
    assert D2 == pytest.approx(1.0, rel=1e-9)


def test_rie_mmse_integral():
    v = 0.7
    # semicircle: int p^3 = 3/(4 pi^2 v); then q = Q0 - 1/qhat + 4pi^2/(3qhat^2) int p^3 = 0 = Q0
    assert rie_mmse_integral(DiscreteLaw([0.0]), v) == pytest.approx(3 / (4 * np.pi**2 * v), rel=1e-10)
    law = MarchenkoPastur(0.5)
    for v in (0.05, 0.5, 2.0):
        I3 = rie_mmse_integral(law, v)
        mmse = v - 4 * np.pi**2 / 3 * v**2 * I3
        assert 0 < mmse < min(v, law.second_moment())
    with pytest.raises(ValueError):
        rie_mmse_integral(law, 0.0)


# --------------------------------------------------------------------------------------
# Monte Carlo
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mp2000():
    s0 = mp_sample(2000, 0.5, seed=11)
    return s0, FiniteDSpectrum(s0, draws=2, seed=12)


def test_monte_carlo_d2000_density_and_integrals(mp2000):
    s0, fd = mp2000
    law = MarchenkoPastur(0.5)
    delta, eps = 0.5, 0.3
    nu = np.sort(fd.eigenvalues(delta).ravel())
    cl = free_convolve_semicircle(law, delta**2)
    xs = nu[::8]
    F = cl.cdf(xs)
    idx = np.arange(0, nu.size, 8)
    ks = max(np.max(np.abs(F - (idx + 1) / nu.size)), np.max(np.abs(F - idx / nu.size)))
    assert ks < 0.02  # measured ~2e-3
    th = soft_threshold_integrals(law, delta, eps)
    mc = fd.threshold_integrals(delta, eps, pathwise=False)
    # measured relative gaps: J 0.3 %, dJ_deps 0.2 %, dJ_ddelta 0.1 %
    assert mc.J == pytest.approx(th.J, rel=0.01)
    assert mc.dJ_deps == pytest.approx(th.dJ_deps, rel=0.01)
    assert mc.dJ_ddelta == pytest.approx(th.dJ_ddelta, rel=0.01)
    assert mc.rank_fraction == pytest.approx(th.rank_fraction, abs=0.01)
    # the same at a different delta with a wrong variance must fail: check sensitivity
    wrong = soft_threshold_integrals(law, delta * math.sqrt(2), eps)
    assert abs(wrong.J / mc.J - 1) > 0.05


@pytest.fixture(scope="module")
def mp1000():
    s0 = mp_sample(1000, 0.5, seed=21)
    return s0, FiniteDSpectrum(s0, draws=3, seed=22)


def test_free_divergence_matches_finite_d_formula(mp1000):
    _, fd = mp1000
    law = MarchenkoPastur(0.5)
    for delta, eps in [(1.0, 1.0), (0.5, 0.3)]:  # ends at delta = 0.5, reused by the rank-cap test
        mc = fd.threshold_integrals(delta, eps)
        th = soft_threshold_integrals(law, delta, eps)
        assert mc.divergence == pytest.approx(th.divergence, rel=0.01)  # measured <= 0.2 %
        # Hellmann-Feynman pathwise derivative (exact per draw) agrees on average
        assert mc.dJ_ddelta_pathwise == pytest.approx(th.dJ_ddelta, rel=0.02)


def test_free_divergence_power_law_finite_d():
    s = power_law(500, 1.0)
    fd = FiniteDSpectrum(s, draws=3, seed=5)
    for delta in (0.5, 2.0):
        mc = fd.threshold_integrals(delta, 0.5, pathwise=False)
        th = soft_threshold_integrals(DiscreteLaw(s), delta, 0.5)
        assert mc.divergence == pytest.approx(th.divergence, rel=0.01)
        assert mc.J == pytest.approx(th.J, rel=0.01)


def test_rank_cap_matches_finite_d(mp1000):
    _, fd = mp1000
    law = MarchenkoPastur(0.5)
    delta, eps, kappa = 0.5, 0.3, 0.2
    th = soft_threshold_integrals(law, delta, eps, rank_cap=kappa)
    mc = fd.threshold_integrals(delta, eps, rank_cap=kappa)
    assert th.cap_binds and mc.cap_binds
    assert th.rank_fraction == pytest.approx(kappa) and mc.rank_fraction == pytest.approx(kappa)
    # measured relative gaps ~0.5 %
    assert mc.J == pytest.approx(th.J, rel=0.01)
    assert mc.dJ_deps == pytest.approx(th.dJ_deps, rel=0.01)
    assert mc.divergence == pytest.approx(th.divergence, rel=0.02)
    assert mc.cutoff == pytest.approx(th.cutoff, rel=0.01)
    assert free_convolve_semicircle(law, delta**2).mass_above(th.cutoff) == pytest.approx(kappa, abs=1e-9)
    # a cap above the rank fraction does not bind
    assert not soft_threshold_integrals(law, delta, eps, rank_cap=0.9).cap_binds


def _top_eig(Y):
    """Top eigenpair by Lanczos (the outlier is separated from the bulk), deterministic start."""
    w, U = scipy.sparse.linalg.eigsh(Y, k=1, which="LA", v0=np.ones(Y.shape[0]), tol=1e-12)
    return w[0], U[:, 0]


def test_outlier_null_bulk_monte_carlo():
    d, s, delta = 2000, 2.0, 1.0
    cl = free_convolve_semicircle(SpikedLaw(DiscreteLaw([0.0]), (s,), 1 / d), delta**2)
    (o,) = cl.outliers()
    assert o.position == pytest.approx(s + delta**2 / s) and o.overlap == pytest.approx(1 - delta**2 / s**2)
    rng = np.random.default_rng(7)
    pos, ov = [], []
    for _ in range(3):
        Y = delta * goe(d, rng)
        Y[0, 0] += s
        lam, u = _top_eig(Y)
        pos.append(lam)
        ov.append(u[0] ** 2)
    # measured spread: position 0.3 %, overlap 1 % per draw
    assert np.mean(pos) == pytest.approx(o.position, rel=0.02)
    assert np.mean(ov) == pytest.approx(o.overlap, rel=0.02)
    # sub-critical spike: no outlier, the top eigenvalue sticks to the edge 2 delta
    assert free_convolve_semicircle(SpikedLaw(DiscreteLaw([0.0]), (0.8,), 1 / d), 1.0).outliers() == []


def test_outlier_mp_bulk_monte_carlo(mp2000):
    d, s, delta = 2000, 6.0, 0.5
    s0 = mp2000[0]
    cl = free_convolve_semicircle(SpikedLaw(MarchenkoPastur(0.5), (s,), 1 / d), delta**2)
    (o,) = cl.outliers()
    rng = np.random.default_rng(32)
    pos, ov = [], []
    for _ in range(2):
        Y = delta * goe(d, rng)
        Y[np.diag_indices(d)] += np.concatenate([s0[:-1], [s]])
        lam, u = _top_eig(Y)
        pos.append(lam)
        ov.append(u[-1] ** 2)
    assert np.mean(pos) == pytest.approx(o.position, rel=0.02)
    assert np.mean(ov) == pytest.approx(o.overlap, rel=0.02)
    # the general formula differs from the null-bulk one here
    assert abs(o.position - (s + delta**2 / s)) > 0.005


# --------------------------------------------------------------------------------------
# Finite-d mode, learned spectrum, contract
# --------------------------------------------------------------------------------------
def test_finite_d_mode_contract():
    s = power_law(100, 1.0)
    a = FiniteDSpectrum(s, draws=2, seed=3)
    b = FiniteDSpectrum(s, draws=2, seed=3)
    assert a.eigenvalues(0.7).shape == (2, 100)
    np.testing.assert_array_equal(a.eigenvalues(0.7), b.eigenvalues(0.7))
    ti = a.threshold_integrals(0.7, 0.5)
    assert isinstance(ti, ThresholdIntegrals) and ti.dJ_ddelta == pytest.approx(2 * 0.7 * ti.divergence)
    # common random numbers: J is smooth in delta; HF derivative = derivative of J per draw (no cap)
    h = 1e-5
    fdJ = (a.threshold_integrals(0.7 + h, 0.5).J - a.threshold_integrals(0.7 - h, 0.5).J) / (2 * h)
    assert a.threshold_integrals(0.7, 0.5).dJ_ddelta_pathwise == pytest.approx(fdJ, rel=1e-5)
    # delta = 0 reproduces the target exactly
    assert a.threshold_integrals(0.0, 0.5).J == pytest.approx(np.mean(np.maximum(s - 0.5, 0) ** 2))


def test_learned_spectrum_law(tmp_path):
    law = SpikedLaw(MarchenkoPastur(0.5), (6.0,), 1e-3)
    v, eps, eta = 0.25, 0.5, 2.0
    res = learned_spectrum_law(law, v, threshold=eps, scale=eta, grid_size=400)
    cl = free_convolve_semicircle(law, v)
    assert res.atom_at_zero == pytest.approx(cl.cdf(eps), abs=1e-10)
    # total mass: atom + continuous + point masses
    cont = cl.rule(eps, math.inf).w.sum()
    assert res.atom_at_zero + cont + sum(m for _, m in res.point_masses) == pytest.approx(1.0, abs=1e-10)
    # density is (1/eta) mu_delta(x/eta + eps)
    x = res.grid[(res.grid > 0.1) & (res.grid < 5)]
    np.testing.assert_allclose(np.interp(x, res.grid, res.density), cl.density(x / eta + eps) / eta, atol=1e-12)
    (o,) = res.outliers
    assert o["position"] == pytest.approx(eta * (cl.outliers()[0].position - eps))
    d = res.to_dict()
    json.dumps(d)
    assert set(d) >= {"grid", "density", "atom_at_zero", "edges", "outliers"}
    path = tmp_path / "spec.png"
    plot_learned_spectrum(res, str(path))
    assert path.stat().st_size > 1000
    # rank cap: atom = 1 - kappa
    capped = learned_spectrum_law(MarchenkoPastur(0.5), v, threshold=0.3, rank_cap=0.2)
    assert capped.atom_at_zero == pytest.approx(0.8, abs=1e-9)


def test_validation():
    with pytest.raises(ValueError):
        MarchenkoPastur(0.0)
    with pytest.raises(ValueError):
        free_convolve_semicircle(MarchenkoPastur(0.5), -1.0)
    with pytest.raises(ValueError):
        DiscreteLaw([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        SpikedLaw(MarchenkoPastur(0.5), (3.0, 4.0), 0.6)
    with pytest.raises(ValueError):
        learned_spectrum_law(MarchenkoPastur(0.5), 0.1, scale=0.0)
    assert isinstance(free_convolve_semicircle(MarchenkoPastur(0.5), 0.1), ConvolvedLaw)
    assert DiscreteLaw([1.0, 2.0], [1.0, 3.0]).weights.sum() == pytest.approx(1.0)


def test_many_spikes_match_the_per_spike_formulas():
    """The vectorised spike handling (chunks of 2048) against the formulas spike by spike: a spike inside
    the bulk's support or sub-critical (1 + v g'(s) <= 0) creates no outlier; otherwise position
    s + v g(s), overlap 1 + v g'(s). 5000 spikes cross two chunk boundaries."""
    bulk, v = MarchenkoPastur(0.5), 0.25
    spikes = tuple(np.linspace(-1.0, 12.0, 5000))
    law = SpikedLaw(bulk, spikes, 1e-5)
    got = {o.spike: o for o in free_convolve_semicircle(law, v).outliers()}
    (a0, b0), (a1, b1) = bulk.support()
    expected = 0
    for s in spikes:
        if (a0 - 1e-12 <= s <= b0 + 1e-12) or (a1 - 1e-12 <= s <= b1 + 1e-12):
            assert s not in got
            continue
        g = float(np.real(bulk.stieltjes(np.array(s + 0j))))
        dg = float(np.real(bulk.stieltjes_derivative(np.array(s + 0j))))
        if 1 + v * dg <= 0:
            assert s not in got
            continue
        expected += 1
        assert got[s].position == pytest.approx(s + v * g, rel=1e-12, abs=1e-12)
        assert got[s].overlap == pytest.approx(1 + v * dg, rel=1e-12, abs=1e-12)
    assert len(got) == expected > 1000
    # the law's own Stieltjes transform (also chunked) against the direct sum
    z = np.array([13.0 + 0.1j, -2.0 + 1.0j])
    direct = (1 - len(spikes) * 1e-5) * bulk.stieltjes(z) + 1e-5 * sum(1.0 / (z - s) for s in spikes)
    assert np.allclose(law.stieltjes(z), direct, rtol=1e-12)
