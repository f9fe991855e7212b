"""The analysis layer: learned spectrum, error decomposition, power laws, scaling."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from singlehead.analysis import (
    classify_regime,
    compare_spectrum,
    decompose,
    fit_exponent,
    learned_spectrum,
    power_law_curve,
    predicted_exponent,
    recovered_modes,
    scaling_curve,
    spectrum_table,
    switch_on_sample_sizes,
)
from singlehead.model.problem import MPTarget, PowerLawTarget, Problem
from singlehead.numerics.spectra import goe
from singlehead.state_evolution import SEOptions, theory


@pytest.fixture(scope="module")
def mp_softmax():
    p = Problem(d=200, T=2, alpha=2.0, noise=0.5, lam=0.01, target=MPTarget(0.5))
    return p, theory(p, options=SEOptions(tol=1e-9))


@pytest.fixture(scope="module")
def pl_linear():
    p = Problem(d=100, T=1, channel="linear", alpha=0.3, noise=0.1, lam=0.1, target=PowerLawTarget(1.25, "sqrt_d"))
    return p, theory(p, prior="asymptotic", options=SEOptions(tol=1e-9))


# ----------------------------------------------------------------------------- decomposition
def _check_identities(D, tol=1e-10):
    """Four non-negative parts; Identity 1 (= r) and Identity 2 (= full SE test error)."""
    assert min(D.E_over, D.E_under, D.E_approx, D.E_mismatch) >= -1e-12, D.to_dict()
    assert abs(D.test_error_sum - D.test_error) <= tol * max(1.0, D.test_error)
    assert abs(D.e0 + D.c_r * (D.E_over + D.E_under + D.E_approx + D.E_mismatch) - D.test_error) <= tol
    assert abs(D.orthogonal_error - D.r) < 1e-7 and abs(D.quadrature_gap) < 1e-9
    assert D.c_r > 0


def test_decomposition_identity_softmax(mp_softmax):
    p, r = mp_softmax
    D = decompose(p, r)
    _check_identities(D)
    assert abs(D.test_error_gap) < 1e-12  # TE(rho, r) here is the SE's own test-error function
    # upper bulk of the MP target separated at alpha = 2? (kappa0 = 0.5: not yet) -> all in E_over/E_under
    assert D.E_over > 0 and D.E_under > 0


@pytest.mark.parametrize("alpha,lam,noise,beta", [(0.5, 0.01, 0.5, 2.0), (4.0, 0.1, 0.0, 1.0), (1.0, 0.1, 1.0, 0.5)])
def test_decomposition_identity_grid(alpha, lam, noise, beta):
    """Acceptance grid (MP kappa0 = 0.5, T = 2): beta = beta0 and beta != beta0 (reference rho0 S0)."""
    p = Problem(d=200, T=2, alpha=alpha, noise=noise, lam=lam, beta=beta, beta0=1.0, target=MPTarget(0.5))
    D = decompose(p, theory(p, options=SEOptions(tol=1e-9)))
    _check_identities(D)
    assert D.rho0 == pytest.approx(1.0 / beta)
    # the best scale at fixed r is above the teacher's (a noisy field is read by a colder softmax)
    assert D.rho_best > D.rho0


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.3, 3.0])
@pytest.mark.parametrize("lam", [0.01, 0.3])
@pytest.mark.parametrize("noise", [0.0, 0.5])
@pytest.mark.parametrize("beta", [1.0, 2.0])
def test_decomposition_identity_full_grid(alpha, lam, noise, beta):
    p = Problem(d=200, T=2, alpha=alpha, noise=noise, lam=lam, beta=beta, beta0=1.0, target=MPTarget(0.5))
    _check_identities(decompose(p, theory(p, options=SEOptions(tol=1e-9))))


def test_mismatch_is_excess_over_best_scale():
    """MP kappa0 = 0.5, alpha = 1, Delta = 0.5, lam = 0.01: TE is smallest at rho ≈ 1.15, ERM at 0.91.

    Before the fix the mismatch was Q0 (rho - 1)^2 with a negative secant weight (c2 = -0.78), i.e.
    about 0.001 of the test error 0.030; the excess over the best scale is 0.0057 (19%). Checked
    with the module's own Sobol nodes (2^15, independent of the SE's), not the SE quadrature.
    """
    from singlehead.analysis import channel_test_error

    p = Problem(d=200, T=2, alpha=1.0, noise=0.5, lam=0.01, target=MPTarget(0.5))
    D = decompose(p, theory(p, options=SEOptions(tol=1e-9)))
    _check_identities(D)
    assert 0.90 < D.rho < 0.93 and 1.10 < D.rho_best < 1.20
    excess = D.c_r * D.E_mismatch
    assert 0.15 < excess / D.test_error < 0.25
    te_rho = channel_test_error(p, D.Q0, D.m, D.q, seed=3)
    te_best = channel_test_error(p, D.Q0, D.rho_best * D.Q0, D.rho_best**2 * D.Q0 + D.r, seed=3)
    assert abs((te_rho - te_best) - excess) < 0.05 * excess
    # the matrix parts carry no scale error: E_over + E_under + E_approx = q - m^2/Q0 < matrix error
    assert D.orthogonal_error < D.matrix_error - 0.9 * D.Q0 * (1 - D.rho) ** 2


def test_upper_bulk_is_recovered_signal():
    """At alpha = 8 the MP law splits (null space of S0 / its range): the upper bulk is recovered signal."""
    p = Problem(d=200, T=2, alpha=8.0, noise=0.5, lam=0.01, target=MPTarget(0.5))
    D = decompose(p, theory(p, options=SEOptions(tol=1e-9)))
    _check_identities(D)
    assert len(D.recovered_modes) == 1 and abs(D.recovered_modes[0]["mass"] - 0.5) < 1e-6
    assert D.E_approx > D.E_over > 0 and D.E_under < 0.01 * D.E_approx


@pytest.mark.parametrize("alpha", [1.0, 8.0])
def test_matrix_parts_against_random_matrices(alpha):
    """E_over, E_under and E_approx from direct draws of eta ReLU(S0 + delta Z - eps) at d = 400.

    For each eigenvector u_k of Y the signal is xi_k = u_k^T S0 u_k; with rho = <Shat, S0>/||S0||^2:
    E_over = sum_B (lam_k - rho xi_k)^2/d, E_under = rho^2 sum_{discarded, not R} xi_k^2/d,
    E_approx = r - E_over - E_under (R: eigenvalues above the gap of the split law). Finite-d bias
    measured at d = 40/80/400: 0.0134/0.0116/0.0105 against 0.0100 (alpha = 1), so 10% tolerance.
    """
    from singlehead.numerics.spectra import MarchenkoPastur, free_convolve_semicircle

    p = Problem(d=200, T=2, alpha=alpha, noise=0.5, lam=0.01, target=MPTarget(0.5))
    th = theory(p, options=SEOptions(tol=1e-9))
    D = decompose(p, th)
    ex = th.extras
    edges = free_convolve_semicircle(MarchenkoPastur(0.5), ex["delta"] ** 2).edges()
    split = 0.5 * (edges[0][1] + edges[1][0]) if len(edges) > 1 else math.inf
    rng = np.random.default_rng(0)
    d, p0, vals = 400, 200, []
    for _ in range(3):
        W0 = rng.standard_normal((d, p0))
        S0 = W0 @ W0.T / math.sqrt(p0 * d)
        nu, U = np.linalg.eigh(S0 + ex["delta"] * goe(d, rng))
        lam = ex["eta"] * np.maximum(nu - ex["eps"], 0.0)
        S = (U * lam) @ U.T
        xi = np.einsum("ik,ij,jk->k", U, S0, U)
        rho = np.sum(S * S0) / np.sum(S0 * S0)
        kept, R = nu > ex["eps"], nu > split
        E_over = np.sum((lam[kept & ~R] - rho * xi[kept & ~R]) ** 2) / d
        if R.any():  # misalignment of the upper bulk takes the off-diagonal energy
            E_under = rho**2 * np.sum(xi[~kept & ~R] ** 2) / d
        else:
            E_under = rho**2 * (np.sum(S0 * S0) / d - np.sum(xi[kept] ** 2) / d)
        r = np.sum((S - rho * S0) ** 2) / d
        vals.append((E_over, E_under, r - E_over - E_under))
    E_over, E_under, E_approx = np.mean(vals, axis=0)
    assert abs(E_over - D.E_over) < 0.1 * D.E_over + 1e-4
    assert abs(E_under - D.E_under) < 0.1 * D.E_under + 2e-4
    assert abs(E_approx - D.E_approx) < 0.1 * D.E_approx + 2e-4


def test_decomposition_power_law_linear(pl_linear):
    """Power-law target, linear channel: c_r = 2K, E_mismatch = Q0 (1 - rho)^2, recovered spikes."""
    p, r = pl_linear
    D = decompose(p, r, model="discrete")
    _check_identities(D)
    assert len(D.recovered_modes) >= 1
    top = D.recovered_modes[0]
    assert top["mode"] == 1 and 0.9 < top["overlap"] <= 1.0
    assert D.c_r == pytest.approx(2.0) and D.rho_best == 1.0
    assert D.E_mismatch == pytest.approx(D.Q0 * (1 - D.rho) ** 2, rel=1e-6)
    assert abs(D.E_over + D.E_under + D.E_approx + D.E_mismatch - r.matrix_error) < 1e-7


def test_decomposition_power_law_softmax():
    """Power-law target with the softmax channel (T = 2) and beta != beta0."""
    p = Problem(d=100, T=2, alpha=0.5, noise=0.1, lam=0.1, beta=1.5, target=PowerLawTarget(1.25, "sqrt_d"))
    D = decompose(p, theory(p, prior="asymptotic", options=SEOptions(tol=1e-9)), model="discrete")
    _check_identities(D)
    assert len(D.recovered_modes) >= 1 and D.E_approx > 0


def test_matrix_part_spiked_model(pl_linear):
    p, r = pl_linear
    D = decompose(p, r, model="spiked")
    assert abs(D.quadrature_gap) < 1e-5  # point-mass quadrature (its own law, not the SE's)
    assert abs(D.test_error_sum - D.test_error) < 1e-10
    assert D.E_approx_misalignment > 0
    # (E_under can be < 0 here: the spiked law redistributes the mass of absorbed spikes over
    # the bulk, so its energy accounting is only O(1/d)-consistent; the default discrete law is exact)


# ----------------------------------------------------------------------------- learned spectrum
def test_learned_spectrum_against_random_matrices(mp_softmax):
    """The law of eta ReLU(S0 + delta Z - eps) against direct draws at d = 400 (no training)."""
    p, r = mp_softmax
    pred = learned_spectrum(p, r)
    ex = r.extras
    rng = np.random.default_rng(0)
    d, p0 = 400, 200
    evs = []
    for _ in range(2):
        W0 = rng.standard_normal((d, p0))
        S0 = W0 @ W0.T / math.sqrt(p0 * d)
        nu = np.linalg.eigvalsh(S0 + ex["delta"] * goe(d, rng))
        evs.append(ex["eta"] * np.maximum(nu - ex["eps"], 0.0))
    ev = np.concatenate(evs)
    c = compare_spectrum(p, ev, prediction=pred, rank_tol=1e-12, n_runs=2)
    assert c["ks"] < 0.03
    assert abs(c["zero_atom_sim"] - c["zero_atom_theory"]) < 0.02
    F = pred.cdf(np.array([-1.0, 0.0, 1e9]))
    assert F[0] == 0 and abs(F[1] - pred.zero_atom) < 1e-12 and abs(F[2] - 1) < 1e-9
    grid = np.linspace(0, pred.bulks[-1][1], 50)
    assert np.all(np.diff(pred.cdf(grid)) >= -1e-12)
    df = spectrum_table(pred, ev)
    assert set(df.columns) == {"source", "variable", "component", "x", "value", "overlap"}
    assert {"theory", "simulation"} == set(df["source"])


def test_spiked_outliers_formula(pl_linear):
    p, r = pl_linear
    pred = learned_spectrum(p, r, model="spiked")
    dl = pred.delta
    assert pred.outliers
    for o in pred.outliers[:3]:
        s = o["spike"]
        # null-bulk approximation: s + delta^2/s, overlap 1 - delta^2/s^2 (bulk corrections small)
        assert abs(o["position_Y"] - (s + dl * dl / s)) < 0.05 * s
        assert abs(o["overlap"] - (1 - dl * dl / s**2)) < 0.05


def test_plot_spectrum(tmp_path, mp_softmax):
    from singlehead.analysis import plot_spectrum_comparison

    p, r = mp_softmax
    pred = learned_spectrum(p, r)
    out = tmp_path / "fig.png"
    plot_spectrum_comparison(pred, np.abs(np.random.default_rng(1).standard_normal(100)), str(out))
    assert out.stat().st_size > 1000


# ----------------------------------------------------------------------------- power laws / scaling
def test_recovered_modes_rules():
    s = 10.0 * np.arange(1, 11) ** -1.0
    rm = recovered_modes(s, delta=2.0, eps=0.0)
    assert rm["K"] == int(np.sum(s > 2.0))
    rm2 = recovered_modes(s, delta=1.0, eps=6.0)
    # survive: s + 1/s > 6  -> s = 10 (10.1) only; s = 5 gives 5.2
    assert rm2["K"] == 1 and rm2["K_simple"] == 1


def test_switch_on_sample_sizes_synthetic():
    d, gamma = 100, 1.0
    s = math.sqrt(d) * np.arange(1, 21) ** -gamma
    ns = np.geomspace(10, 1e6, 200)
    deltas = d / np.sqrt(ns)  # delta = d / sqrt(n): mode i recovered at n_i = d i^{2 gamma}
    n_on = switch_on_sample_sizes(ns, deltas, np.zeros_like(ns), s, modes=10)
    expect = d * np.arange(1, 11) ** (2 * gamma)
    ok = np.isfinite(n_on) & (n_on > 0)
    assert ok.sum() >= 8
    assert np.allclose(n_on[ok], expect[ok], rtol=0.02)


def test_fit_exponent_ols_and_bootstrap():
    x = np.geomspace(1, 1e3, 12)
    rng = np.random.default_rng(0)
    y = 3.0 * x**-0.6 * np.exp(0.01 * rng.standard_normal(x.size))
    f = fit_exponent(x, y)
    assert abs(f.exponent - 0.6) < 0.01 and f.ci_low < 0.6 < f.ci_high and f.r2 > 0.999
    b = fit_exponent(x, y, method="bootstrap", n_boot=500, seed=1)
    assert abs(b.exponent - f.exponent) < 1e-12 and b.ci_low < 0.6 < b.ci_high
    with pytest.raises(ValueError, match="method"):
        fit_exponent(x, y, method="mle")
    with pytest.raises(ValueError, match="> 0"):
        fit_exponent(x, -y)
    assert predicted_exponent("threshold", 1.25, lam_slope=0.5) == pytest.approx(0.6)
    assert predicted_exponent("threshold", 1.25) == pytest.approx(1.2)
    assert predicted_exponent("label_noise", 1.25) == pytest.approx(0.6)
    assert predicted_exponent("tail_noise", 1.25) == pytest.approx(1.5)
    assert math.isnan(predicted_exponent("harmful_overfitting", 1.25))
    with pytest.raises(ValueError, match="gamma"):
        predicted_exponent("threshold", 0.5)
    with pytest.raises(ValueError, match="regime"):
        predicted_exponent("sample_limited", 1.25)


def test_power_law_curve_sample_limited_exponent():
    """gamma = 1.25, d = 1000 (spiked large-d prior), lam = 3 sqrt(alpha): exponent 1 - 1/(2 gamma)."""
    d = 1000
    ns = np.geomspace(10 * d, d * d / 10, 5)
    df = power_law_curve(1.25, d, ns, lam=lambda a: 3 * math.sqrt(a), noise=0.1, prior="spiked", tol=1e-7)
    assert df["converged"].all()
    assert (np.diff(df["K"]) >= 0).all() and df["K"].iloc[-1] > df["K"].iloc[0]
    f = fit_exponent(df["n"], df["excess_error"])
    assert abs(f.exponent - 0.6) < 0.05


@pytest.mark.parametrize("gamma", [1.25, 2.0])
def test_threshold_exponent_needs_no_label_noise(gamma):
    """The 'sample-limited' exponent 1 - 1/(2 gamma) is set by the threshold with lam ∝ sqrt(alpha).

    d = 10^5, lam = 10 sqrt(alpha), n in [100 d, 10^4 d]: Delta = 0 and Delta = 4 give the same
    exponent (before: 0.585 / 0.730 with Delta = 0, 0.578 / 0.715 with Delta = 4, and the Delta = 0
    points were labelled 'truncation' with predicted 2 - 1/gamma). Every point has c > 2 delta.
    """
    from singlehead.analysis.scaling import SAMPLE_LIMITED_SETTING as SL

    d, (lo, hi) = SL["d"], SL["n_over_d"]
    ns = np.geomspace(lo * d, hi * d, 5)
    fits = {}
    for noise in (0.0, 4.0):
        res = scaling_curve(
            gamma, d, ns, lam=lambda a: SL["lam_prefactor"] * math.sqrt(a), noise=noise, prior="spiked", tol=1e-7
        )
        df = res["curve"]
        assert df["converged"].all()
        assert (df["cutoff"] > 2 * df["delta"]).all()  # the threshold sets the last mode at every point
        # points with K < 5 recovered modes (all of gamma = 2's with Delta = 0) are labelled crossover
        assert set(df["regime"]) <= {"threshold", "crossover"}
        thr = df[df["regime"] == "threshold"]
        assert np.allclose(thr["predicted_exponent"], 1 - 1 / (2 * gamma), atol=1e-3)  # lam_slope = 1/2
        assert (abs(thr["local_exponent_n"] - thr["predicted_exponent"]) < 0.05).all()
        assert abs(res["fit"].exponent - (1 - 1 / (2 * gamma))) < 0.05
        fits[noise] = res["fit"].exponent
    assert abs(fits[0.0] - fits[4.0]) < 0.03


@pytest.mark.slow
def test_threshold_exponent_gamma_075_no_label_noise():
    """gamma = 0.75 (slow tail, many spikes: ~4 min per curve): 0.333 with Delta = 0, 0.332 with Delta = 4."""
    d = 100_000
    ns = np.geomspace(100 * d, 10_000 * d, 3)
    for noise in (0.0, 4.0):
        res = scaling_curve(0.75, d, ns, lam=lambda a: 10 * math.sqrt(a), noise=noise, prior="spiked", tol=1e-7)
        assert res["curve"]["converged"].all() and (res["curve"]["cutoff"] > 2 * res["curve"]["delta"]).all()
        assert abs(res["fit"].exponent - 1 / 3) < 0.05


def test_classify_regime_rules():
    """Labels by the scale that sets the last recovered mode (synthetic fixed points, d = 1000)."""

    base = {"rank_fraction": 0.05, "delta": 1.0, "eps": 2.5, "eta": 1.0, "cutoff": 2.5, "K": 10, "matrix_error": 0.3}
    assert classify_regime(base, 1000) == "threshold"  # c > 2 delta
    assert classify_regime({**base, "cutoff": 3.5, "eps": 3.5}, 1000, noise=4.0) == "threshold"
    assert classify_regime({**base, "K": 4}, 1000) == "crossover"  # emergence of single modes
    det = {**base, "eps": 1.9, "cutoff": 1.9}  # threshold just inside the noise bulk: detection binds
    assert classify_regime(det, 1000, noise=4.0) == "label_noise"  # Delta/2 = 2 > 3 E
    assert classify_regime(det, 1000, noise=0.0) == "tail_noise"  # E > 3 Delta/2
    assert classify_regime(det, 1000, noise=0.3) == "crossover"
    deep = {**det, "eps": 0.2, "cutoff": 0.2}  # threshold deep in the noise bulk: fitted noise dominates
    assert classify_regime(deep, 1000, noise=4.0) == "harmful_overfitting"
    assert classify_regime({**base, "rank_fraction": 0.0}, 1000) == "plateau"
    assert classify_regime({**base, "K": 999}, 1000) == "shrinkage"


def test_harmful_overfitting_error_rises():
    """Paper's small lam (0.1 sqrt(alpha)) with Delta = 4, d = 1000: the error rises with n and says so."""
    d = 1000
    res = scaling_curve(
        1.25,
        d,
        np.geomspace(10 * d, d * d / 10, 7),
        lam=lambda a: 0.1 * math.sqrt(a),
        noise=4.0,
        prior="spiked",
        tol=1e-7,
    )
    df = res["curve"]
    ho = df[df["regime"] == "harmful_overfitting"]
    assert len(ho) >= 2 and (ho["local_exponent_n"] < 0).all()
    assert df["excess_error"].iloc[-1] > df["excess_error"].min() * 1.5
    assert (df["regime"] != "threshold").all()


def test_scaling_curve_softmax_channel():
    """Softmax channel (T = 2), d = 10^5, Delta = 0, lam = sqrt(alpha): threshold-limited, -> 1 - 1/(2 gamma).

    Full 7-point curve over n in [100 d, 10^4 d]: local exponents 0.51 -> 0.61 (K = 5 -> 30),
    fit 0.564 against 0.600. Here 3 points in the upper decade.
    """
    d = 100_000
    res = scaling_curve(
        1.25,
        d,
        np.geomspace(1000 * d, 10_000 * d, 3),
        lam=lambda a: math.sqrt(a),
        noise=0.0,
        prior="spiked",
        tol=1e-7,
        channel="seq2lab",
        T=2,
    )
    df = res["curve"]
    assert df["converged"].all() and (df["cutoff"] > 2 * df["delta"]).all()
    assert abs(res["fit"].exponent - 0.6) < 0.05


def test_power_law_curve_warm_start_retry():
    """A warm start that fails near the first recovered spike is retried cold (d = 100, small alpha).

    Before the retry, the points n = 80 and 105.7 stalled at residuals 0.06 and 0.13.
    """
    df = power_law_curve(1.25, 100, [50, 80, 105.737126, 150], lam=1e-3, noise=0.1, prior="asymptotic", tol=1e-8)
    assert df["converged"].all()
    assert (df["residual"] < 1e-8).all()
    assert np.all(np.diff(df["excess_error"]) < 0)  # more data, less error on this stretch


def test_power_law_curve_bad_prior():
    with pytest.raises(ValueError, match="prior"):
        power_law_curve(1.25, 50, [100, 200], prior="exact")


# ----------------------------------------------------------------------------- CLI
def _run_cli(args):
    from click.testing import CliRunner

    from singlehead.cli import cli

    return CliRunner().invoke(cli, args)


def test_cli_decompose_json():
    res = _run_cli(["decompose", "--d", "100", "--alpha", "2", "--noise", "0.5", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for k in ("e0", "E_over", "E_under", "E_approx", "E_mismatch", "test_error"):
        assert k in out and math.isfinite(out[k])


def test_cli_spectrum_theory_json():
    res = _run_cli(["spectrum-theory", "--d", "100", "--alpha", "1", "--json", "--grid-size", "64"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert 0 <= out["zero_atom"] <= 1 and out["n_bulks"] >= 1


def test_cli_bad_input_messages(usage_error):
    usage_error(["scaling", "--gamma", "0.4"], "gamma")
    usage_error(["decompose", "--alpha", "1,2"], "alpha")


def test_regime_map_labelled_exponents():
    """Phase diagram (gamma = 1.25, d = 10^5, Delta = 0, fixed lam per row): every labelled cell's
    measured local exponent is within 0.05 of its label's prediction (threshold: 2 - 1/gamma = 1.2 at
    fixed lam; plateau: 0); the rest are crossovers (few modes, or a neighbour in another regime)."""
    from singlehead.analysis import regime_map

    d = 100_000
    rm = regime_map(1.25, d, np.geomspace(10 * d, 1e4 * d, 8), [0.1, 1.0, 10.0], noise=0.0, prior="spiked", tol=1e-7)
    assert rm["converged"].all()
    lab = rm[rm["predicted_exponent"].notna()]
    assert {"threshold", "plateau"} <= set(lab["regime"])
    assert (lab["exponent_gap"].abs() < 0.05).all(), lab[["n", "lam", "K", "regime", "local_exponent_n"]]
    assert set(rm["regime"]) <= {"threshold", "plateau", "crossover"}
    # the map is complete: one cell per (n, lam)
    assert len(rm) == 8 * 3


# ----------------------------------------------------------------------------- finite-K scaling laws
def test_finite_k_threshold_exponent_against_discrete_sums():
    """a_K from direct sums of min(t_i, e)^2 over a switch-on period vs its Euler-Maclaurin O(1/K) form."""
    from singlehead.analysis.finite_k import threshold_exponent_leading, threshold_switch_on_exponent

    K = np.array([5, 10, 20, 50, 200])
    for gamma in (0.75, 1.25, 2.0):
        a = threshold_switch_on_exponent(K, gamma)
        # direct: secant of E(e) = sum_i min(t_i, e)^2 between e = t_{K+1} and e = t_K
        t = np.arange(1, 200_001, dtype=float) ** -gamma
        E = [float(np.sum(np.minimum(t, e) ** 2)) + 200_000 ** (1 - 2 * gamma) / (2 * gamma - 1) for e in t[K - 1]]
        E1 = [float(np.sum(np.minimum(t, e) ** 2)) + 200_000 ** (1 - 2 * gamma) / (2 * gamma - 1) for e in t[K]]
        direct = np.log(np.array(E) / np.array(E1)) / (gamma * np.log((K + 1.0) / K))
        assert np.allclose(a, direct, rtol=1e-4)
        lead = threshold_exponent_leading(K, gamma)
        assert (np.abs(a - lead) < 0.2 / K**2).all()  # the next term is O(K^-2)
        assert (a < 2 - 1 / gamma).all() and abs(a[-1] - (2 - 1 / gamma)) < 0.005


def test_finite_k_noise_limited_law():
    """The discrete noise-limited law: exact exponent = finite difference of its sums; -> 2 gamma - 1 like -1.9/K."""
    from singlehead.analysis.finite_k import noise_limited_law, recovered_mode_error

    r = np.array([0.0, 0.3, 0.999999, 1.0, 2.0])
    assert np.allclose(recovered_mode_error(r), [0.0, 1 + 0.7**4 - 2 * 0.7**3 * 1.3, 1.0, 1.0, 1.0], atol=1e-6)
    d = 1_000_000
    for K, noise in ((10, 0.0), (50, 0.0), (20, 1.0)):
        dt = K**-1.25 * 1.0001
        law = noise_limited_law(dt, 1.25, d, noise)
        lo, hi = (
            noise_limited_law(dt * math.exp(-1e-4), 1.25, d, noise),
            noise_limited_law(dt * math.exp(1e-4), 1.25, d, noise),
        )
        fd = -math.log(hi["E"] / lo["E"]) / math.log(hi["x"] / lo["x"])
        assert law["exponent"] == pytest.approx(fd, abs=1e-5)
        assert law["x"] == pytest.approx((law["E"] + noise / 2) / (2 * dt * dt))
    p = {K: noise_limited_law(K**-1.25 * 1.0001, 1.25, d)["exponent"] for K in (10, 100, 1000)}
    assert 1.25 < p[10] < 1.35 and 1.47 < p[100] < 1.49 and abs(p[1000] - 1.5) < 0.003  # 1.5 - 1.9/K
    assert (
        abs(noise_limited_law(1e-3, 1.25, d, noise=100.0)["exponent"] - 0.6) < 0.02
    )  # Delta dominant: 1 - 1/(2 gamma)


def test_regime_map_small_finite_d_crossovers():
    """Small phase diagram (d = 1000, Delta = 0): the tail-noise cells at lam = 1e-3 (measured 1.54 -> 2.00
    against 2 gamma - 1 = 1.5) are crossovers because the fixed point departs from the large-d law by 15-36 %
    (finite d). Every labelled cell's measured local exponent is within 0.05 of its prediction except one known
    miss: lam = 0.19, n = 12.9 d (K = 7, c/delta = 1.92, finite_d_mismatch -0.044) is labelled tail_noise, measured
    1.197 against the discrete law's 1.315 on the same one-sided stencil (point derivative 1.256) — its whole row
    follows the fixed-lam threshold exponent 2 - 1/gamma = 1.2 (1.197 -> 1.228) while c sits just below the bulk
    edge (c/delta 1.92 -> 2.07). Its fixed point obeys the law to 4.4 %, but that departure falls to 1.0 % at the
    next n, and the identity of ``finite_d_exponent_shift`` turns this change into -0.118 of exponent: law 1.315 +
    shift = measured 1.197. Relabelling by the shift would make the check circular, so it stays a labelled,
    explained miss rather than a hand-tuned crossover."""
    from singlehead.analysis import regime_map

    d = 1000
    rm = regime_map(
        1.25, d, np.geomspace(12.9 * d, 100 * d, 4), [1e-3, 0.19307, 10.0], noise=0.0, prior="spiked", tol=1e-7
    )
    assert rm["converged"].all()
    lab = rm[rm["predicted_exponent"].notna()]
    assert {"threshold", "plateau", "tail_noise"} <= set(lab["regime"])
    miss = lab[lab["exponent_gap"].abs() >= 0.05]
    assert len(miss) == 1, lab[["n", "lam", "K", "regime", "local_exponent_n", "predicted_exponent"]]
    m = miss.iloc[0]
    assert m["regime"] == "tail_noise" and m["lam"] == 0.19307 and m["n"] == pytest.approx(12.9 * d) and m["K"] == 7
    assert 1.9 < m["cutoff"] / m["delta"] < 2.0 and abs(m["local_exponent_n"] - 1.2) < 0.01
    # the miss is the finite-d departure changing along n (-4.4 % -> -1.0 % across its stencil), not a wrong law:
    # the law's exponent plus that shift is the measured exponent (exact at end points), here and on every cell
    # where detection binds, crossovers included (where the shift is 0.2-0.5)
    assert abs(m["finite_d_mismatch"]) < 0.05 and m["finite_d_exponent_shift"] == pytest.approx(
        m["exponent_gap"], abs=1e-6
    )
    on_law = rm[rm["finite_d_exponent_shift"].notna()]
    assert len(on_law) >= 6
    recon = on_law["discrete_law_exponent"] + on_law["finite_d_exponent_shift"]
    assert np.allclose(recon, on_law["local_exponent_n"], atol=5e-3), on_law[["local_exponent_n"]].assign(recon=recon)
    assert (rm.loc[rm["lam"] == 1e-3, "finite_d_exponent_shift"] > 0.15).all()
    small = rm[rm["lam"] == 1e-3]
    assert (small["regime"] == "crossover").all()
    assert (small["finite_d_mismatch"].abs() > 0.05).all()
    assert (small["local_exponent_n"].iloc[1:] - 1.5 > 0.05).any()  # the asymptotic law would have failed here
