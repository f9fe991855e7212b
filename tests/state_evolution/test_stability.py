"""Tests of the replica-symmetry diagnostics of SE fixed points (singlehead.state_evolution.stability)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem
from singlehead.model.results import Result
from singlehead.model.targets import PowerLawTarget
from singlehead.state_evolution import stability, theory, theory_curve
from singlehead.state_evolution.replicon import _prior_factor

_PEAK = dict(d=100, T=2, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab", kappa=1.0, noise=0.5)


@pytest.mark.parametrize("T", [1, 2])
def test_ridge_replicon_is_the_ratio_law(T):
    """Direct student, linear channel (ridge): with r = 2 alpha K observations per unknown the
    replicon is r below r = 1 and 1/r above as lam -> 0, and reaches 1 at r = 1 (the scalar
    ridge law); a factor-2 error in either side's normalisation would move all three values."""
    K = T * (T + 1) // 2
    for r_obs, expected in [(0.6, 0.6), (2.0, 0.5), (1.0, 1.0)]:
        p = Problem(T=T, channel="linear", student="direct", alpha=r_obs / (2 * K), lam=1e-7, noise=0.5)
        s = stability(p, theory(p))
        assert s.replicon == pytest.approx(expected, abs=2e-3)
        assert s.replicon < 1.0


def test_convex_nuclear_problem_is_rs_stable():
    """Linear channel, nuclear norm, no rank cap: a convex problem, so the replicon is below 1
    everywhere, also across its interpolation threshold at small lam (the largest value on
    this grid is 0.85, at alpha = 0.3)."""
    alphas = [0.1, 0.2, 0.25, 0.3, 0.35, 0.5, 1.0]
    p = Problem(d=100, T=1, channel="linear", target=MPTarget(0.5), noise=0.5, alpha=0.1, lam=1e-5)
    for a, r in zip(alphas, theory_curve(p, alphas)):
        s = stability(p.replace(alpha=a), r)
        assert 0.3 < s.replicon < 0.95
        assert s.sigma_prior == pytest.approx(r.extras["Sigma"], rel=1e-6)


def test_prior_factor_matches_finite_d_divided_differences():
    """The prior factor's double integral against its finite-d definition
    (1/d^2) sum_ij ((f(nu_i) - f(nu_j))/(nu_i - nu_j))^2 over the eigenvalues of diag(s) + delta Z,
    six GOE draws at d = 200 (the SE's free law of the same d eigenvalues is their deterministic
    equivalent); tolerance 3 standard errors of the draw mean."""
    d, delta, eps = 200, 0.8, 0.3
    p = Problem(d=d, T=1, channel="linear", target=PowerLawTarget(1.0), noise=0.5, alpha=0.3, lam=1e-3)
    P, D = _prior_factor(p, dict(Sigmahat=1.0, eps=eps, delta=delta, Sigma=0.0, cap_binds=False))
    s = p.target.spectrum(d)
    sq, first = [], []
    for seed in range(6):
        g = np.random.default_rng(seed).standard_normal((d, d))
        nu = np.linalg.eigvalsh(np.diag(s) + delta * (g + g.T) / math.sqrt(2 * d))
        f = np.maximum(nu - eps, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            dd = (f[:, None] - f[None, :]) / (nu[:, None] - nu[None, :])
        np.fill_diagonal(dd, (nu > eps).astype(float))
        sq.append(np.sum(dd**2) / d**2)
        first.append(np.sum(dd) / d**2)
    for value, draws in [(P, sq), (D, first)]:
        se = np.std(draws, ddof=1) / math.sqrt(len(draws))
        assert abs(value - np.mean(draws)) < 3 * se


def _peak_fixed_point(alpha: float, extras: dict) -> tuple[Problem, Result]:
    p = Problem(alpha=alpha, lam=1e-5, **_PEAK)
    return p, Result(source="theory", problem=p.to_dict(), extras=extras)


# SE fixed point at lam = 1e-5, alpha = 0.3 of the interpolation-peak figure (reached by the figure's
# warm-started chain from alpha = 0.1; test error 0.262 against 0.225-0.24 for every ERM route at d = 100-150)
_PEAK_03 = {
    "q": 4.619723327472908,
    "m": 2.122262805078985,
    "Sigma": 26.722152877994827,
    "Q0": 1.5,
    "qhat": 0.0016548424296407357,
    "mhat": 0.03448976778236536,
    "Sigmahat": 0.02540985795194497,
    "delta": 1.179473135314428,
    "eps": 0.00057988212985957,
    "cap_binds": False,
}


def test_prox_jumps_are_measured_where_the_peak_disagrees():
    """Softmax channel. At lam = 1e-5, alpha = 0.3 the global prox jumps between branches and the
    jumps carry 5.6 % of the SE's Sigmahat (> 5 standard errors); the smooth replicon stays
    below 1. At alpha = 1 (lam = 1e-3), where SE and ERM agree, the share is < 0.5 % and the
    pointwise Sigmahat equals the SE's within its quadrature error."""
    p, r = _peak_fixed_point(0.3, _PEAK_03)
    s = stability(p, r)
    assert s.prox_jump_share > 0.03 and s.prox_jump_share > 5 * s.prox_jump_share_se
    assert 0.5 < s.replicon < 1.0
    assert s.sigma_prior == pytest.approx(_PEAK_03["Sigma"], rel=1e-3)
    p1 = Problem(alpha=1.0, lam=1e-3, **_PEAK)
    r1 = theory(p1)
    s1 = stability(p1, r1)
    assert abs(s1.prox_jump_share) < 0.005
    assert abs(s1.sigmahat_pointwise - r1.extras["Sigmahat"]) < 4 * r1.extras["quadrature_error"]["Sigmahat"] + 1e-3
    assert s1.replicon < 0.5


def test_stability_rejects_a_result_without_order_parameters():
    p = Problem(alpha=1.0, lam=1e-3, **_PEAK)
    with pytest.raises(ValueError, match="Sigmahat"):
        stability(p, Result(source="simulation", problem=p.to_dict(), extras={"q": 1.0, "m": 1.0, "Sigma": 1.0}))
    _, r = _peak_fixed_point(0.3, _PEAK_03)
    with pytest.raises(ValueError, match="another problem"):
        stability(p, r)


def test_cli_theory_reports_the_rs_check(capsys, tmp_path):
    """``singlehead theory --stability`` adds the replicon and the prox-jump share to each point (also
    to points read back from the cache of an earlier run without the flag)."""
    import json

    from singlehead.cli import main

    args = [
        "theory",
        "--T",
        "2",
        "--alpha",
        "1.0",
        "--lam",
        "1e-3",
        "--noise",
        "0.5",
        "--n-points",
        "512",
        "--out",
        str(tmp_path / "t.jsonl"),
    ]
    main(args + ["--json"])
    assert "replicon" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    main(args + ["--json", "--stability"])
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.1 < rec["replicon"] < 0.5 and abs(rec["prox_jump_share"]) < 0.02
    main(args + ["--stability"])
    assert "replicon=0." in capsys.readouterr().out


def test_output_jacobian_is_the_finite_difference_of_the_prox():
    """The output factor uses dh*/dz = (I + Sigma H)^{-1} with H the analytic Hessian of the fit loss in the
    K-vector coordinates; checked node by node against central differences of the batched prox itself
    (Sigma large enough that the prox is strongly non-linear; nodes next to a branch jump excluded)."""
    from singlehead.numerics.prox import interpolating_start
    from singlehead.state_evolution.output import _fit_derivatives

    p = Problem(alpha=0.3, lam=1e-3, **_PEAK)
    K, Sigma, eps = p.n_pairs, 8.0, 1e-6
    rng = np.random.default_rng(1)
    y, z = rng.normal(size=(400, K)) * 1.2, rng.normal(size=(400, K)) * 1.5

    def prox(zz):
        hi = interpolating_start(zz, y, 1.0, p.T)
        return p.channel.prox(zz, y, Sigma, T=p.T, beta=1.0, beta0=1.0, starts=[zz, hi, 0.5 * (zz + hi)]).h

    h = prox(z)
    _, _, H = _fit_derivatives(h, y, p)
    J = np.linalg.inv(np.eye(K)[None] + Sigma * H)
    fd = np.stack([(prox(z + eps * e) - prox(z - eps * e)) / (2 * eps) for e in np.eye(K)], axis=2)
    smooth = np.abs(fd).max(axis=(1, 2)) < 1e3  # a jump between branches inside the stencil
    assert smooth.mean() > 0.95
    err = np.abs(fd - J)[smooth].max()
    assert err < 1e-4, err


def test_local_and_global_prox_branches_agree_where_the_prox_has_one_minimum():
    """SEOptions.prox_branch: away from the interpolation peak (alpha = 2, no prox jumps) and on the
    convex linear channel, the SE on the teacher's or z's local branch is the global-branch SE; at the
    peak (lam = 1e-5, alpha = 0.3, jump share 5.6 %) the teacher branch differs by far more than
    the quadrature error (studies/peak_investigation/results/peak.md: 0.2399 against 0.2623)."""
    from singlehead.state_evolution import SEOptions

    p = Problem(T=2, alpha=2.0, lam=0.01, noise=0.5, target=MPTarget(0.5))
    glob = theory(p)
    for branch in ("teacher", "z"):
        loc = theory(p, options=SEOptions(prox_branch=branch))
        assert loc.converged
        se = glob.extras["quadrature_error"]["test_error"]
        assert abs(loc.test_error - glob.test_error) < 3 * se + 1e-6, (branch, loc.test_error, glob.test_error)
    lin = Problem(T=1, channel="linear", alpha=0.5, lam=0.01, noise=0.1)
    assert theory(lin, options=SEOptions(prox_branch="teacher")).test_error == theory(lin).test_error
    peak = Problem(T=2, alpha=0.3, lam=1e-5, noise=0.5, target=MPTarget(0.5))
    teacher = theory(peak, options=SEOptions(prox_branch="teacher"))
    assert abs(teacher.test_error - 0.2399) < 0.005 and teacher.test_error < 0.25
    with pytest.raises(ValueError, match="prox_branch"):
        SEOptions(prox_branch="nearest")
