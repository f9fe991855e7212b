"""Bayes-optimal output side of the ``hardmax`` channel (docs: Theory, Bayes section).

* ``Z_out`` at ``T = 2`` (bivariate normal orthant probability) against label frequencies of
  Monte Carlo samples; ``g_out`` and ``tr(-dg_out/domega)`` against finite differences of
  ``log Z_out`` and against the posterior moments of the samples; the ``T >= 3`` QMC denoiser,
  run at ``T = 2``, against the closed form.
* The Fisher information: at most the Gaussian-observation value ``(K - 1)/V_eff`` (argmax labels
  are a function of the noisy logits); the exact ``T = 2`` value against Monte Carlo.
* The Bayes fixed point: hardmax MMSE at least the seq2lab one (labels revealing the logits);
  Bayes test error at most ERM's (state evolution); Bayes SE against Bayes-GAMP on instances.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, bayes_optimal, theory
from singlehead.amp import AMPOptions, amp, bayes_se_iterates, instance_prior
from singlehead.bayes import bayes_overlap
from singlehead.model.channels import get_channel
from singlehead.model.channels.hardmax import (
    hardmax_bayes_denoiser,
    hardmax_fisher_information,
    hardmax_log_partition,
    hardmax_rows,
)
from singlehead.numerics.attention_maps import vec_to_mat
from singlehead.numerics.orthant import bvn_cdf, log_bvn_cdf

LABELS2 = [np.array([[r0, 1 - r0], [1 - r1, r1]], float) for r0 in (1, 0) for r1 in (1, 0)]


def test_bvn_cdf_known_values_and_tail():
    r = np.array([-0.5, 0.0, 0.5])
    assert np.allclose(bvn_cdf(0.0, 0.0, r), 0.25 + np.arcsin(r) / (2 * np.pi), atol=1e-14)
    assert bvn_cdf(1.3, 0.7, 0.0) == pytest.approx(0.9031995154 * 0.7580363478, rel=1e-9)
    # far tail, relative accuracy: Phi2(x, +inf) = Phi(x)
    from scipy.special import log_ndtr

    assert float(log_bvn_cdf(-30.0, 30.0, 0.3)) == pytest.approx(float(log_ndtr(-30.0)), rel=1e-10)


@pytest.mark.parametrize("noise", [0.0, 0.6])
def test_t2_partition_against_monte_carlo(noise):
    rng = np.random.default_rng(0)
    V, n_mc = 0.7, 200_000
    Ve = V + noise / 2
    for omega in (np.zeros(3), np.array([0.4, -0.3, 0.9]), np.array([-1.2, 0.5, 0.2])):
        H = omega + math.sqrt(Ve) * rng.standard_normal((n_mc, 3))
        lab = hardmax_rows(vec_to_mat(H, 2))
        for Y in LABELS2:
            freq = float(np.mean(np.all(lab == Y, axis=(1, 2))))
            Z = float(np.exp(hardmax_log_partition(Y[None], omega[None], V, noise))[0])
            se = math.sqrt(Z * (1 - Z) / n_mc)
            assert abs(freq - Z) < 5 * se + 1e-12, (omega, Y, freq, Z)


def test_t2_denoiser_against_finite_differences():
    rng = np.random.default_rng(1)
    n, V, noise, e = 40, 0.5, 0.4, 1e-5
    omega = 1.5 * rng.standard_normal((n, 3))
    Y = np.stack([LABELS2[i] for i in rng.integers(0, 4, n)])
    g, tr = hardmax_bayes_denoiser(Y, omega, V, noise)
    trace_fd = np.zeros(n)
    for k in range(3):
        dk = np.zeros(3)
        dk[k] = e
        lp = hardmax_log_partition(Y, omega + dk, V, noise)
        lm = hardmax_log_partition(Y, omega - dk, V, noise)
        assert np.allclose((lp - lm) / (2 * e), g[:, k], rtol=1e-6, atol=1e-7)
        gp, _ = hardmax_bayes_denoiser(Y, omega + dk, V, noise)
        gm, _ = hardmax_bayes_denoiser(Y, omega - dk, V, noise)
        trace_fd -= (gp[:, k] - gm[:, k]) / (2 * e)
    assert np.allclose(trace_fd, tr, rtol=1e-5, atol=1e-6)
    # tr(-dg/domega) = (K - 1 - tr Cov(P xi | y))/V_eff lies in [0, (K - 1)/V_eff]
    assert np.all(tr >= -1e-12) and np.all(tr <= 2 / (V + noise / 2) + 1e-12)


def test_t2_denoiser_against_posterior_moments_of_samples():
    """``g = E[xi | y]/sqrt(V_eff)`` from the samples with label ``y`` (standard errors from the samples)."""
    rng = np.random.default_rng(2)
    V, noise, n_mc = 0.8, 0.0, 400_000
    omega = np.array([0.3, 0.2, -0.6])
    Xi = rng.standard_normal((n_mc, 3))
    lab = hardmax_rows(vec_to_mat(omega + math.sqrt(V) * Xi, 2))
    for Y in LABELS2:
        sel = np.all(lab == Y, axis=(1, 2))
        m, se = Xi[sel].mean(axis=0), Xi[sel].std(axis=0) / math.sqrt(sel.sum())
        g, _ = hardmax_bayes_denoiser(Y[None], omega[None], V, noise)
        assert np.all(np.abs(g[0] * math.sqrt(V) - m) < 5 * se), (Y, g[0] * math.sqrt(V), m)


def test_qmc_denoiser_matches_t2_closed_form():
    rng = np.random.default_rng(3)
    n, V, noise = 30, 0.6, 0.2
    omega = 0.8 * rng.standard_normal((n, 3))
    Y = hardmax_rows(vec_to_mat(omega + math.sqrt(V + noise / 2) * rng.standard_normal((n, 3)), 2))
    g, tr = hardmax_bayes_denoiser(Y, omega, V, noise)
    gq, trq = hardmax_bayes_denoiser(Y, omega, V, noise, method="qmc", log2_inner=15)
    # QMC error at 2^15 nodes: a few 1e-3 of the scale 1/sqrt(V_eff) (measured max 0.02 over seeds)
    assert np.max(np.abs(gq - g)) < 0.05 and np.max(np.abs(trq - tr)) < 0.1


def test_fisher_information_bounds_and_monte_carlo():
    # at omega = 0 (q = 0): J = sum_y ||grad Z||^2/Z in closed form is 1.2394...; Monte Carlo of E||g||^2
    V = 1.0
    for q in (0.0, 0.5, 3.0, 50.0):
        for T in (2,):
            info = hardmax_fisher_information(T, q, V, 0.0)
            assert 0 < info <= (T * (T + 1) // 2 - 1) / V
    rng = np.random.default_rng(4)
    q, V, n = 1.5, 0.5, 200_000
    omega = math.sqrt(q) * rng.standard_normal((n, 3))
    Y = hardmax_rows(vec_to_mat(omega + math.sqrt(V) * rng.standard_normal((n, 3)), 2))
    g, tr = hardmax_bayes_denoiser(Y, omega, V, 0.0)
    g2 = np.einsum("nk,nk->n", g, g)
    exact = hardmax_fisher_information(2, q, V, 0.0)
    assert abs(g2.mean() - exact) < 5 * g2.std() / math.sqrt(n)
    # Nishimori: E ||g||^2 = E tr(-dg/domega)
    assert abs(tr.mean() - exact) < 5 * tr.std() / math.sqrt(n)
    # the information scales as J(q/V_eff)/V_eff
    assert hardmax_fisher_information(2, 2 * q, 2 * V, 0.0) == pytest.approx(exact / 2, rel=1e-12)
    assert hardmax_fisher_information(2, q, V - 0.2, 0.4) == pytest.approx(exact, rel=1e-12)


def test_fisher_information_t3_below_gaussian_observations():
    for q, V in ((0.0, 1.0), (2.0, 1.0), (3.0, 0.01), (3.0, 1e-6)):
        info = hardmax_fisher_information(3, q, V, 0.0)
        assert 0 < info < 5 / V


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_hardmax_mmse_above_seq2lab_and_bayes_below_erm(noise):
    """Argmax labels carry less information than the softmax labels (which reveal the logits)."""
    tgt = MPTarget(kappa0=2.0)
    for alpha in (0.05, 0.2, 0.5):
        hm = Problem(T=2, alpha=alpha, noise=noise, channel="hardmax", lam=0.01, target=tgt)
        sl = hm.replace(channel="seq2lab", beta0=50.0)
        v_hm, v_sl = bayes_overlap(hm)["mmse"], bayes_overlap(sl)["mmse"]
        assert v_hm >= v_sl - 1e-10, (alpha, v_hm, v_sl)
    for alpha in (0.5, 1.5):
        hm = Problem(T=2, alpha=alpha, noise=noise, channel="hardmax", lam=0.01, target=tgt)
        b, e = bayes_optimal(hm), theory(hm)
        assert b.test_error < e.test_error, (alpha, b.test_error, e.test_error)
        assert b.matrix_error < e.matrix_error


def test_hardmax_t3_bayes_point():
    hm = Problem(T=3, alpha=0.5, noise=0.0, channel="hardmax", target=MPTarget(kappa0=2.0))
    sl = hm.replace(channel="seq2lab", beta0=50.0)
    b = bayes_optimal(hm, n_outer=512, n_inner=64)
    assert 0 < b.matrix_error < b.extras["Q0"] and b.matrix_error >= bayes_overlap(sl)["mmse"]


def test_bayes_se_iterates_reach_the_fixed_point():
    p = Problem(T=2, alpha=0.5, channel="hardmax", target=MPTarget(kappa0=2.0))
    it = bayes_se_iterates(p, V0=3.0, n_iter=60)
    assert it["V"][-1] == pytest.approx(bayes_overlap(p)["mmse"], rel=1e-6)
    assert np.all(np.diff(it["V"]) <= 1e-12)


def test_channel_hooks():
    hm, sl = get_channel("hardmax"), get_channel("seq2lab")
    assert hm.own_bayes_output and not sl.own_bayes_output
    assert sl.bayes_output_information(2, 1.0, 1.0, 0.0) is None
    assert sl.bayes_output_denoiser(np.zeros((1, 2, 2)), np.zeros((1, 3)), 1.0, 0.0) is None


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_bayes_amp_on_instances_matches_bayes_se(alpha):
    """Bayes-GAMP's matrix error at ``d = 100`` against the Bayes SE of the instance's own spectrum.

    Measured deviations (AMP - SE) at seeds 0, 1: alpha 0.5: +0.003, -0.010; alpha 1: +0.013,
    +0.0005 (per-seed spread about 0.01); the mean over the two seeds must be within 0.025, a
    tenth of the SE value or less. Labels treated as Gaussian observations instead would give
    MMSE 0 at both alphas (the seq2lab baseline)."""
    p = Problem(d=100, T=2, alpha=alpha, noise=0.0, channel="hardmax", target=MPTarget(kappa0=2.0))
    devs = []
    for seed in (0, 1):
        r = amp(
            p,
            seed,
            options=AMPOptions(bayes=True, max_iter=200, tol=1e-6, n_test=500, num_threads=1),
            return_matrices=True,
        )
        se = bayes_overlap(p, instance_prior(r.extras["S0"]))["mmse"]
        devs.append(r.matrix_error - se)
    assert abs(float(np.mean(devs))) < 0.025, devs


def test_explorer_bayes_panel_for_hardmax():
    from singlehead.explore.compute import Engine
    from singlehead.explore.view import parse_view

    view = parse_view(
        {"n_alpha": "2", "alpha_min": "0.3", "alpha_max": "1", "alpha_at": "0.5", "lam": "0.02", "channel": "hardmax"}
    )
    events = list(Engine(memory_only=True).events(view))
    assert not [e for e in events if e["event"] == "panel_error"]
    erm = {e["i"]: e["test_error"] for e in events if e["event"] == "point"}
    bayes = {e["i"]: e["test_error"] for e in events if e["event"] == "bayes"}
    assert sorted(bayes) == [0, 1] and all(bayes[i] < erm[i] for i in bayes)


def test_hardmax_has_no_perfect_recovery_threshold():
    """One-hot argmax labels never pin S0 down (invariant under S0 -> c S0): both thresholds are infinite, while
    seq2lab's are finite."""
    import math

    from singlehead import Problem
    from singlehead.thresholds import bayes_perfect_recovery_threshold, perfect_recovery_threshold

    for task in ("hardmax", "seq2lab"):
        p = Problem(T=2, channel=task, noise=0.0)
        expect_inf = task == "hardmax"
        assert math.isinf(perfect_recovery_threshold(p)) == expect_inf
        assert math.isinf(bayes_perfect_recovery_threshold(p)) == expect_inf
