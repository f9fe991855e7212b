"""Tests of the ERM state evolution (singlehead.state_evolution)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem
from singlehead.sim.simulation import TrainOptions
from singlehead.state_evolution import (
    OutputQuadrature,
    SEOptions,
    output_side,
    prior_model,
    prior_side,
    theory,
    theory_curve,
)


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_linear_T1_reduction(noise):
    """Linear channel, T = 1: mhat = Sigmahat = 2 alpha/(Sigma + 1/4),
    qhat = 2 alpha (Q0 - 2m + q + Delta/2)/(Sigma + 1/4)^2 — also through the generic
    quadrature + prox code path."""
    p = Problem(T=1, alpha=0.7, channel="linear", noise=noise)
    Q0, q, m, S = 1.5, 1.1, 0.9, 0.6
    exact = (2 * 0.7 * (Q0 - 2 * m + q + noise / 2) / (S + 0.25) ** 2, 2 * 0.7 / (S + 0.25), 2 * 0.7 / (S + 0.25))
    a = output_side(q, m, S, problem=p, Q0=Q0)
    assert np.allclose([a.qhat, a.mhat, a.Sigmahat], exact, rtol=1e-14)
    b = output_side(q, m, S, problem=p, Q0=Q0, analytic_linear=False, quad=OutputQuadrature.sobol(2, 4096, 4, 1))
    for name, v in zip(("qhat", "mhat", "Sigmahat"), exact):
        got = getattr(b, name)
        assert abs(got - v) < max(5 * b.err[name], 1e-9) + 2e-3 * v, (name, got, v, b.err[name])


def test_linear_T2_generic_quadrature_matches_closed_form():
    p = Problem(T=2, alpha=0.4, channel="linear", noise=0.3)
    a = output_side(0.8, 0.7, 1.3, problem=p, Q0=1.5)
    b = output_side(0.8, 0.7, 1.3, problem=p, Q0=1.5, analytic_linear=False, quad=OutputQuadrature.sobol(6, 4096, 4, 2))
    for name in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert abs(getattr(a, name) - getattr(b, name)) < 5 * b.err[name] + 1e-3 * abs(getattr(a, name))


def test_seq2lab_and_seq2seq_identical():
    base = dict(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5))
    r1 = theory(Problem(channel="seq2lab", **base), options=SEOptions(n_points=512))
    r2 = theory(Problem(channel="seq2seq", **base), options=SEOptions(n_points=512))
    for k in ("test_error", "test_error_noisy", "train_error", "matrix_error", "penalty", "rank_fraction"):
        assert getattr(r1, k) == getattr(r2, k)
    for k in ("q", "m", "Sigma", "qhat", "mhat", "Sigmahat"):
        assert r1[k] == r2[k]


def test_theory_converges_deterministic_and_reports_fields():
    p = Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5))
    r = theory(p, options=SEOptions(n_points=512))
    assert r.source == "theory" and r["converged"] and r["residual"] < 1e-5
    for k in ("q", "m", "Sigma", "qhat", "mhat", "Sigmahat", "eta", "delta", "eps", "quadrature_error"):
        assert k in r.extras
    assert r.converged and r.iterations > 0 and r.runtime_s > 0 and r.message.startswith("converged")
    assert r.matrix_error == pytest.approx(r["Q0"] - 2 * r["m"] + r["q"])
    assert r.penalty == pytest.approx(p.lam * r["first_moment"])
    assert 0 < r.rank_fraction < 1 and r.test_error_noisy > r.test_error > 0
    assert 0 < r["quadrature_error"]["test_error"] < 0.05 * r.test_error
    r2 = theory(p, options=SEOptions(n_points=512))
    assert r2.test_error == r.test_error and r2["q"] == r["q"]
    # the fixed point really is one: a cold re-evaluation of the map
    pm = prior_model(p)
    quad = OutputQuadrature.sobol(6, 512, 4, 0)
    out = output_side(r["q"], r["m"], r["Sigma"], problem=p, Q0=pm.Q0, quad=quad)
    ps = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=p, prior=pm)
    assert np.allclose([ps.q, ps.m, ps.Sigma], [r["q"], r["m"], r["Sigma"]], rtol=1e-4)


def test_direct_student_prior_constants():
    """Frobenius prox: Shat = eta' Y, eta' = mhat/(Sigmahat + 4 lam); Sigma = D(eta' x)/mhat."""
    p = Problem(T=2, student="direct", lam=0.05, target=MPTarget(0.5))
    pm = prior_model(p)
    qh, mh, Sh = 0.3, 1.2, 0.9
    ps = prior_side(qh, mh, Sh, problem=p, prior=pm)
    etap = mh / (Sh + 4 * 0.05)
    d2 = qh / mh**2
    assert ps.q == pytest.approx(etap**2 * (1.5 + d2))
    assert ps.m == pytest.approx(etap * 1.5)
    assert ps.Sigma == pytest.approx(etap / mh)


def test_factorized_lam_to_direct_limit_of_prior_side_relations():
    """Consistency of the nuclear-norm prior side: m = eta (<f, Y> - delta^2 D) (free Stein)."""
    p = Problem(T=2, lam=0.02, target=MPTarget(0.5))
    pm = prior_model(p)
    ps = prior_side(0.4, 1.1, 0.8, problem=p, prior=pm)
    ti = pm.threshold_integrals(ps.delta, ps.eps)
    fY = ti.J - 0.5 * ps.eps * ti.dJ_deps  # int f(x) x dmu
    assert ps.m == pytest.approx(ps.eta * (fY - ps.delta**2 * ti.divergence))
    assert ps.Sigma == pytest.approx(ps.eta * ti.divergence / 1.1)


def test_rank_cap_binds():
    base = dict(T=2, alpha=1.0, noise=0.5, lam=0.001, target=MPTarget(0.5))
    r1 = theory(Problem(kappa=1.0, **base), options=SEOptions(n_points=512))
    r2 = theory(Problem(kappa=0.3, **base), options=SEOptions(n_points=512))
    assert r1.rank_fraction > 0.3
    assert r2.rank_fraction == pytest.approx(0.3) and r2["cap_binds"]
    assert r2["converged"]


def test_theory_curve_matches_single_points():
    p = Problem(T=2, noise=0.5, lam=0.01, target=MPTarget(0.5))
    alphas = [0.3, 0.4, 0.5]
    rs = theory_curve(p, alphas, options=SEOptions(n_points=512))
    assert all(r["converged"] for r in rs)
    single = theory(p.replace(alpha=0.5), options=SEOptions(n_points=512))
    assert rs[-1].test_error == pytest.approx(single.test_error, rel=1e-4)
    assert rs[-1]["q"] == pytest.approx(single["q"], rel=1e-4)


def test_T3_runs():
    r = theory(Problem(T=3, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5)), options=SEOptions(n_points=256))
    assert r["converged"] and r.test_error > 0


def test_linear_channel_theory_is_fast_and_exact():
    r = theory(Problem(T=1, channel="linear", alpha=1.0, noise=0.5, lam=0.01, target=MPTarget(0.5)))
    assert r["converged"] and r["residual"] < 1e-6
    assert r.test_error == pytest.approx(2 * r.matrix_error)
    assert r["quadrature_error"]["qhat"] == 0


@pytest.mark.parametrize("student,alpha", [("factorized", 0.25), ("factorized", 1.0), ("direct", 1.0)])
def test_theory_matches_simulation_at_small_d(student, alpha):
    """Default-suite version of studies/se_vs_simulation: d = 40, 4 seeds.

    Tolerance: 3 standard errors of the seed mean plus a finite-size allowance (10% for the
    test and train errors, 15% for the matrix error; at d = 100 the measured gaps are <= 5%).
    """
    from singlehead.sim.simulation import simulate

    p = Problem(d=40, T=2, alpha=alpha, noise=0.5, lam=0.01, student=student, target=MPTarget(0.5))
    th = theory(p)
    sims = [simulate(p, seed=s, options=TrainOptions(n_test=4000)) for s in range(4)]
    for k, rel in (("test_error", 0.10), ("train_error", 0.10), ("matrix_error", 0.15)):
        v = np.array([getattr(r, k) for r in sims])
        se = v.std(ddof=1) / np.sqrt(len(v))
        t = getattr(th, k)
        assert abs(v.mean() - t) <= 3 * se + rel * t, (k, v.mean(), se, t)


@pytest.mark.slow
@pytest.mark.parametrize("student,kappa", [("factorized", 1.0), ("direct", 1.0)])
def test_theory_vs_simulation_small_d(student, kappa):
    """Small-d simulation check (d = 50, 3 seeds, wide tolerance 20%: finite-size effects)."""
    from singlehead.sim.simulation import simulate

    p = Problem(d=50, T=2, alpha=1.0, noise=0.5, lam=0.01, student=student, kappa=kappa, target=MPTarget(0.5))
    th = theory(p)
    sims = [simulate(p, seed=s) for s in range(3)]
    for k in ("test_error", "matrix_error", "train_error"):
        v = np.mean([getattr(r, k) for r in sims])
        assert abs(v - getattr(th, k)) <= 0.2 * getattr(th, k), (k, v, getattr(th, k))


# ----------------------------------------------------------------------------------------
# Complete rank collapse (S = 0)
# ----------------------------------------------------------------------------------------
_COLLAPSE_BASE = dict(d=16, T=2, noise=0.05, beta=1.0, beta0=1.0, target=MPTarget(0.05), channel="seq2lab", kappa=1.0)


def _assert_finite(r):
    for k in ("test_error", "test_error_noisy", "train_error", "matrix_error", "penalty", "rank_fraction"):
        assert math.isfinite(getattr(r, k)), (k, getattr(r, k))


@pytest.mark.parametrize("alpha,lam", [(0.02, 0.316228), (0.1, 1.0)])
def test_collapse_reproducers(alpha, lam):
    """eps = 2 lam/mhat above the spectrum used to raise a math domain error; now S = 0."""
    from singlehead.state_evolution import channel_test_errors

    p = Problem(alpha=alpha, lam=lam, student="factorized", **_COLLAPSE_BASE)
    r = theory(p, options=SEOptions(n_points=256))
    _assert_finite(r)
    assert r["collapsed"] and r["converged"] and lam >= r["collapse_lam"]
    assert r.matrix_error == r["Q0"] and r.rank_fraction == 0 and r.penalty == 0
    assert r["q"] == r["m"] == r["Sigma"] == 0
    assert r.train_error == r.test_error_noisy > r.test_error > 0
    te = channel_test_errors(0.0, 0.0, problem=p, Q0=r["Q0"], quad=OutputQuadrature.sobol(6, 256, 4, 0))
    assert r.test_error == te["test_error"] and r.test_error_noisy == te["test_error_noisy"]
    # h = 0 predicts uniform rows: E||softmax(z0) - 1/2||^2 is the same for both points
    assert r.test_error == pytest.approx(0.3511, abs=2e-3)


def test_collapse_linear_channel_closed_form():
    """Linear channel, T = 1: S = 0 fixed point conjugates in closed form; collapsed errors 2 Q0."""
    from singlehead.state_evolution import collapse_point

    p = Problem(T=1, channel="linear", alpha=0.3, noise=0.5, lam=50.0, target=MPTarget(0.5))
    pm = prior_model(p)
    c = collapse_point(p, pm)
    Vy = pm.Q0 + 0.25
    assert c.out.qhat == pytest.approx(32 * 0.3 * Vy) and c.out.mhat == pytest.approx(8 * 0.3)
    assert c.out.Sigmahat == pytest.approx(8 * 0.3)
    # the generic (prox + quadrature) code agrees with the closed form at q = m = Sigma = 0
    g = output_side(
        0.0, 0.0, 0.0, problem=p, Q0=pm.Q0, analytic_linear=False, quad=OutputQuadrature.sobol(2, 4096, 4, 1)
    )
    for name in ("qhat", "mhat", "Sigmahat"):
        assert getattr(g, name) == pytest.approx(getattr(c.out, name), rel=2e-3)
    assert c.holds and p.lam >= c.lam_c
    r = theory(p)
    assert r["collapsed"] and r.test_error == pytest.approx(2 * pm.Q0) and r.test_error_noisy == pytest.approx(2 * Vy)
    r2 = theory(p.replace(lam=0.9 * c.lam_c))
    assert not r2["collapsed"] and r2["converged"] and 0 < r2.rank_fraction < 0.05


def test_output_side_degenerate_limits_are_continuous():
    """The q -> 0 / Sigma -> 0 output side joins the regular one (no 0/0, no blow-up)."""
    p = Problem(alpha=0.1, lam=0.5, **_COLLAPSE_BASE)
    quad = OutputQuadrature.sobol(6, 512, 4, 0)
    a = output_side(0.0, 0.0, 0.0, problem=p, Q0=1.05, quad=quad)
    for q, m, S in [(1e-8, 5e-9, 1e-6), (1e-4, 8e-5, 1e-4)]:
        b = output_side(q, m, S, problem=p, Q0=1.05, quad=quad)
        for name in ("qhat", "mhat", "Sigmahat", "train_error"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=3e-3, abs=1e-6), (q, name)
    c = output_side(0.0, 0.0, 0.5, problem=p, Q0=1.05, quad=quad)
    d = output_side(1e-7, 1e-7, 0.5, problem=p, Q0=1.05, quad=quad)
    for name in ("qhat", "mhat", "Sigmahat", "train_error"):
        assert getattr(d, name) == pytest.approx(getattr(c, name), rel=3e-3), name
    from singlehead.state_evolution.fixed_point import to_u

    assert np.all(np.isfinite(to_u(np.zeros(3), 1.05)))


def test_lam_sweep_all_alphas_both_students():
    """lam from 1e-3 to 1: no exception and finite errors; factorized students collapse exactly
    at lam >= collapse_lam, direct students never (linear Frobenius shrinkage), even at huge lam."""
    lams = np.geomspace(1e-3, 1.0, 4)
    for student in ("factorized", "direct"):
        for alpha in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
            p = Problem(alpha=alpha, lam=0.1, student=student, **_COLLAPSE_BASE)
            for lam, r in zip(lams, theory_curve(p, lams, param="lam", options=SEOptions(n_points=128))):
                _assert_finite(r)
                assert r.test_error > 0 and r.matrix_error <= r["Q0"] + 1e-12
                assert r["collapsed"] == (student == "factorized" and lam >= r["collapse_lam"]), (student, alpha, lam)
                assert r["converged"], (student, alpha, lam, r["residual"])
    for alpha in (0.02, 1.0):
        for lam in (10.0, 1e4):
            r = theory(
                Problem(alpha=alpha, lam=lam, student="direct", **_COLLAPSE_BASE), options=SEOptions(n_points=128)
            )
            _assert_finite(r)
            assert r["converged"] and not r["collapsed"] and 0 < r["q"] and r.matrix_error < r["Q0"]


def test_collapse_transition_continuous_in_lam():
    """Across lam_c the matrix error rises monotonically to Q0 and the rank fraction falls to 0."""
    p = Problem(alpha=0.1, lam=0.1, student="factorized", **_COLLAPSE_BASE)
    lc = theory(p.replace(lam=10.0), options=SEOptions(n_points=256))["collapse_lam"]
    assert 0.6 < lc < 0.8
    fr = np.array([0.5, 0.8, 0.9, 0.95, 0.98, 0.995, 1.0, 1.01, 1.2])
    rs = theory_curve(p, lc * fr, param="lam", options=SEOptions(n_points=256))
    me = np.array([r.matrix_error for r in rs])
    rk = np.array([r.rank_fraction for r in rs])
    Q0 = rs[0]["Q0"]
    assert all(r["converged"] for r in rs)
    assert [r["collapsed"] for r in rs] == list(fr >= 1.0)
    assert np.all(np.diff(me) >= -1e-12) and np.all(me <= Q0 + 1e-12) and me[-1] == Q0
    assert np.all(np.diff(rk) <= 1e-12) and rk[-1] == 0
    # continuous: just below lam_c the solution is already almost S = 0
    assert 0 < rs[5]["q"] < 1e-6 and Q0 - me[5] < 1e-3 and 0 < rk[5] < 1e-3
    assert abs(rs[5].test_error - rs[6].test_error) < 1e-4


def test_lam_zero_is_solved_or_reported_unconverged_never_raises():
    """lam = 0 (no penalty) is a valid Problem: the continuation in lam goes down to 1e-8 and
    polishes at 0. Above alpha_interp the fixed point exists and is the lam -> 0+ limit; below it
    (the minimum-norm interpolator, Sigma -> inf) the SE returns unconverged with its residual."""
    above = Problem(T=2, alpha=0.5, noise=0.5, lam=0.0, target=MPTarget(0.5))
    r = theory(above)
    assert r.converged and abs(r.test_error - theory(above.replace(lam=1e-7)).test_error) < 1e-4
    below = theory(above.replace(alpha=0.1))
    assert not below.converged and "residual" in below.message
