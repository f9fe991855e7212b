"""The replica-symmetry check of a block (untied) fixed point: the prior side's Jacobian, the 2 x 2 replicon, its
limits (the tied student, the ridgeless linear channel, a convex problem) and the prox-jump shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, theory
from singlehead.model.results import Result
from singlehead.model.targets import UntiedMPTarget
from singlehead.numerics.spectra.untied_prior import UntiedPriorSample, weighted_nuclear_prox
from singlehead.numerics.spectra.untied_prior_jacobian import (
    effective_fields,
    nuclear_prox_jacobian,
    nuclear_prox_jvp,
)
from singlehead.state_evolution import SEOptions, stability
from singlehead.state_evolution.block_map import BlockPoint
from singlehead.state_evolution.block_stability import BlockStability
from singlehead.state_evolution.untied.output import block_jacobian_averages
from singlehead.state_evolution.untied.teachers import teacher_sampler


def _sym(X):
    return 0.5 * (X + np.swapaxes(X, -1, -2))


def _anti(X):
    return 0.5 * (X - np.swapaxes(X, -1, -2))


def _instance(D=30, R=2, seed=3):
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((2, R, D, D)) / math.sqrt(D)
    A_s = math.sqrt(2) * _sym(G[0]) + np.diag(np.linspace(0.0, 2.0, D))[None]
    A_a = 0.6 * math.sqrt(2) * _anti(G[1])
    return A_s, A_a, rng


@pytest.mark.parametrize("Ss, Sa", [(1.3, 0.4), (0.4, 2.0)])
def test_prior_jacobian_is_the_derivative_of_the_prox(Ss, Sa):
    """The linearised weighted nuclear-norm problem against central differences of its solver (both blocks of
    input), and the Jacobian's symmetry (it is the Hessian of a convex function)."""
    A_s, A_a, rng = _instance()
    tau = 0.5
    M = weighted_nuclear_prox(A_s, A_a, Ss, Sa, tau, tol=1e-14, max_iter=100000)[0]
    E, F = rng.standard_normal((2,) + M.shape)
    KE = nuclear_prox_jvp(A_s, A_a, M, Ss, Sa, tau, E, tol=1e-12)
    h = 1e-6
    Mp = weighted_nuclear_prox(A_s + h * _sym(E), A_a + h * _anti(E), Ss, Sa, tau, warm=M, tol=1e-14, max_iter=100000)[
        0
    ]
    Mm = weighted_nuclear_prox(A_s - h * _sym(E), A_a - h * _anti(E), Ss, Sa, tau, warm=M, tol=1e-14, max_iter=100000)[
        0
    ]
    fd = (Mp - Mm) / (2 * h)
    assert np.linalg.norm(fd - KE) < 1e-5 * np.linalg.norm(fd)
    KF = nuclear_prox_jvp(A_s, A_a, M, Ss, Sa, tau, F, tol=1e-12)
    assert np.sum(F * KE) == pytest.approx(np.sum(E * KF), rel=1e-8)


def test_equal_curvatures_give_the_singular_value_threshold_jacobian():
    """Sigmahat_s = Sigmahat_a: the estimator is singular-value soft thresholding of A/Sigmahat, whose Jacobian
    scales the symmetric and antisymmetric parts of each pair in the singular bases by the divided differences
    of f(x) = (x - t)_+ and by (f(x_i) + f(x_j))/(x_i + x_j)."""
    A_s, A_a, rng = _instance(R=1)
    S, tau = 1.3, 0.5
    M = weighted_nuclear_prox(A_s, A_a, S, S, tau)[0]
    E = rng.standard_normal(M.shape)
    KE = nuclear_prox_jvp(A_s, A_a, M, S, S, tau, E, tol=1e-12)[0]
    U, x, Vt = np.linalg.svd((A_s + A_a)[0] / S)
    t = tau / S
    f = np.maximum(x - t, 0.0)
    Et = U.T @ E[0] @ Vt.T / S
    dx = x[:, None] - x[None, :]
    dsym = np.where(
        np.eye(x.size, dtype=bool), (x > t)[:, None] * 1.0, (f[:, None] - f[None, :]) / np.where(dx == 0, 1, dx)
    )
    danti = (f[:, None] + f[None, :]) / (x[:, None] + x[None, :])
    expect = U @ (dsym * _sym(Et) + danti * _anti(Et)) @ Vt
    assert np.max(np.abs(KE - expect)) < 1e-8 * np.max(np.abs(expect))


def test_unobserved_antisymmetric_block_is_the_two_sided_threshold():
    """A symmetric input keeps the estimator symmetric for any Sigmahat_a, so the symmetric block's Jacobian is
    that of the two-sided eigenvalue threshold (the exact route taken at Sigmahat_a = 0); the probes' estimate
    of its Frobenius norm and trace agree with it within 4 of their standard errors over draws."""
    A_s, _, rng = _instance(D=40, R=4)
    Ss, tau = 1.3, 0.5
    M = weighted_nuclear_prox(A_s, 0 * A_s, Ss, 0.0, tau)[0]
    E = _sym(rng.standard_normal(M.shape))
    KE = nuclear_prox_jvp(A_s, 0 * A_s, M, Ss, 0.7, tau, E, tol=1e-12)
    lam, V = np.linalg.eigh(A_s)
    f = np.sign(lam) * np.maximum(np.abs(lam) - tau, 0.0) / Ss
    dl = lam[:, :, None] - lam[:, None, :]
    eye = np.eye(lam.shape[1], dtype=bool)[None]
    dd = np.where(eye, (np.abs(lam) > tau)[:, :, None] / Ss, (f[:, :, None] - f[:, None, :]) / np.where(eye, 1, dl))
    Vt = np.swapaxes(V, -1, -2)
    assert np.max(np.abs(KE - V @ (dd * (Vt @ E @ V)) @ Vt)) < 1e-8
    exact = nuclear_prox_jacobian(A_s, 0 * A_s, M, Ss, 0.0, tau)
    probed = nuclear_prox_jacobian(A_s, 0 * A_s, M, Ss, 0.7, tau, probes=4)
    assert exact.probes == 0 and np.isnan(exact.frobenius[:, 1, 1]).all()
    for a, b in ((exact.frobenius[:, 0, 0], probed.frobenius[:, 0, 0]), (exact.trace[:, 0], probed.trace[:, 0])):
        diff = b - a  # the same instances: the probes' error alone
        assert abs(diff.mean()) < 4 * diff.std(ddof=1) / math.sqrt(diff.size)
    assert np.max(np.abs(probed.frobenius[:, 1, 0])) < 1e-12  # symmetric inputs, no antisymmetric response


def test_probes_are_independent_of_the_instances_noise():
    """Instances drawn with default_rng(seed) and probes with the same seed: the probes take a stream of their own.
    (A probe equal to an instance's noise Z_s biases the Hutchinson trace: <Z, K(Z)> is Stein's estimate, not
    the trace.) On a symmetric input the probed trace of the symmetric block equals the exact two-sided one."""
    s = UntiedPriorSample.draw(teacher_sampler(MPTarget(0.5))[0], 60, 4, 0)
    hats = np.array([0.865, 1.0, 1.18, 0.0, 0.0, 0.0])  # rank fraction ~0.6 at tau = 0.67
    A_s, A_a = effective_fields(hats, s)
    M = weighted_nuclear_prox(A_s, A_a, 1.18, 0.0, 0.67)[0]
    exact = nuclear_prox_jacobian(A_s, A_a, M, 1.18, 0.0, 0.67).trace[:, 0]
    probed = nuclear_prox_jacobian(A_s, A_a, M, 1.18, 0.7, 0.67, probes=2, seed=0).trace[:, 0]
    # each probe's relative error is ~3 % at D = 60 (8 probes: ~1 %); a probe equal to Z_s is off by ~45 %
    assert abs(probed.mean() / exact.mean() - 1) < 0.1


def test_block_jacobian_averages_are_the_block_norms():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((3, 4, 4))
    H = G @ np.swapaxes(G, 1, 2)
    sig = np.array([1.0, 1.0, 1.0, 3.0])
    out = block_jacobian_averages(H, sig, 3)
    for n in range(3):
        J = H[n] @ np.linalg.inv(np.eye(4) + np.diag(sig) @ H[n])
        s, a = slice(0, 3), slice(3, 4)
        expect = [
            np.sum(J[s, s] ** 2),
            np.sum(J[s, a] ** 2),
            np.sum(J[a, s] ** 2),
            np.sum(J[a, a] ** 2),
            np.trace(J[s, s]),
            np.trace(J[a, a]),
        ]
        assert np.allclose(out[n], expect, rtol=1e-12)


def test_tied_limit_reproduces_the_tied_replicon():
    """T = 1, PSD teacher, qhat <= lam^2: the untied fixed point is the tied one (tied prior used), and no
    eigenvalue of the effective field lies below -2 lam, so the untied estimator is the tied one on the draws.
    The output factors agree exactly; the replicons agree within 3 standard errors of the draws once the sampled
    prior factor's diagonal directions (sum_i f'(nu_i)^2/D^2, O(1/D), which the double integral of the tied
    factor does not count) are taken out."""
    p = Problem(d=100, T=1, channel="linear", alpha=1.0, noise=0.2, lam=4.0)
    tied_r = theory(p)
    pu = p.replace(student="untied")
    u = theory(pu)
    assert u.extras["prior"] == "exact (tied prior)"
    tied, un = stability(p, tied_r), stability(pu, u)
    assert isinstance(un, BlockStability) and not isinstance(tied, BlockStability)
    assert un.output_factor == pytest.approx(tied.output_factor, rel=1e-6)
    assert math.isnan(un.output_matrix[1][1]) or un.output_matrix[1][1] == 0.0
    pt = BlockPoint.build(pu, SEOptions())
    hats = pt.prior_conjugates(
        np.array([u.extras[k] for k in ("qhat_s", "mhat_s", "Sigmahat_s", "qhat_a", "mhat_a", "Sigmahat_a")])
    )
    nu = np.linalg.eigvalsh(effective_fields(hats, pt.sample)[0])
    assert nu.min() > -2 * p.lam  # the two-sided threshold is the one-sided one on these draws
    D = pt.sample.D
    diagonal = np.mean(np.sum(np.abs(nu) > 2 * p.lam, axis=1)) / (hats[2] ** 2 * D**2)
    at = un.output_factor * (un.prior_factor - diagonal)
    assert abs(at - tied.replicon) < 3 * un.replicon_se
    assert un.replicon == pytest.approx(tied.replicon, rel=0.03)  # with the diagonal: within its O(1/D)
    assert un.sigma_prior == pytest.approx(u.extras["Sigma_s"], rel=0.02)


def test_ridgeless_linear_blocks_follow_the_ratio_law():
    """Linear channel, lam -> 0 with both blocks overdetermined (2 alpha K_B > 1 observations per unknown): the
    estimator is W^{-1} A, and each block's replicon is the ridge value 1/(2 alpha K_B) (times (D -+ 1)/D, the
    blocks' dimensions over D^2/2); the larger, the antisymmetric block's 1/2 at alpha = 1, T = 2, is AT. A
    factor-2 error in either block's normalisation would move it to 1 or 1/4."""
    p = Problem(d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=1e-6, student="untied")
    s = stability(p, theory(p))
    Mo, P = np.array(s.output_matrix), np.array(s.prior_matrix)
    D = SEOptions().sample_dim
    assert Mo[0, 1] == Mo[1, 0] == 0.0
    assert Mo[0, 0] * P[0, 0] == pytest.approx((1 + 1 / D) / 6, rel=0.02)
    assert abs(s.replicon - (1 - 1 / D) / 2) < 3 * s.replicon_se + 0.005
    assert s.prox_jump_share == 0.0


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_convex_untied_problem_is_rs_stable(alpha):
    """Linear channel, nuclear norm, an untied teacher (both blocks iterated): a convex problem, the replicon is
    below 1 (measured 0.49 and 0.25 at D = 100; here on smaller instances), and the prior's block traces are the
    SE's Sigma_B (Stein's lemma on the same draws) within 3 of its draw standard errors."""
    o = SEOptions(sample_dim=40, sample_draws=3)
    p = Problem(
        d=100,
        T=2,
        channel="linear",
        alpha=alpha,
        noise=0.5,
        lam=1e-2,
        student="untied",
        target=UntiedMPTarget(kappa0=0.5),
    )
    r = theory(p, options=o)
    s = stability(p, r, options=o)
    assert 0.1 < s.replicon < 0.8 and s.replicon + 3 * s.replicon_se < 1.0
    for b, k in enumerate(("Sigma_s", "Sigma_a")):
        assert abs(s.sigma_prior_blocks[b] - r.extras[k]) < 3 * r.extras[f"{k}_se"] + 1e-3 * r.extras[k]


# the untied fixed point of seq2lab, T = 2, alpha = 1, lam = 1e-2, noise 0.5, MP(0.5) teacher (defaults of the
# tied-vs-untied figure), solved with SEOptions()
_UNTIED_1 = {
    "q_s": 1.6689227477457738,
    "m_s": 1.479506663678147,
    "Sigma_s": 2.2992957351612353,
    "q_a": 0.4832542181402573,
    "m_a": 0.0,
    "Sigma_a": 7.798764671009056,
    "qhat_s": 0.0403447163121865,
    "mhat_s": 0.43283627949000314,
    "Sigmahat_s": 0.4292806956786833,
    "qhat_a": 0.007751188354892934,
    "mhat_a": 0.0,
    "Sigmahat_a": 0.10996208181129175,
    "Sigma_s_se": 0.0445,
    "Sigma_a_se": 0.169,
}


def test_softmax_block_point_is_stable_and_smooth():
    """seq2lab, T = 2, alpha = 1: the smooth replicon is below 1 (0.65), neither block's Sigmahat has a
    significant prox-jump share (each within 3 s.e. of 0, and >= -3 s.e.), the pointwise block Sigmahats equal
    the SE's, and the prior's block traces its Sigma_B; the figure's RS diagnostic reads the same record."""
    from singlehead.figures.rs_diagnostic import rs_points

    p = Problem(d=100, T=2, channel="seq2lab", alpha=1.0, noise=0.5, lam=1e-2, target=MPTarget(0.5), student="untied")
    r = Result(source="theory", problem=p.to_dict(), extras=dict(_UNTIED_1), converged=True)
    s = stability(p, r)
    assert 0.5 < s.replicon < 0.8 and s.replicon_se < 0.05
    Mo = np.array(s.output_matrix)
    assert np.all(Mo > 0) and Mo[0, 1] == pytest.approx(Mo[1, 0], rel=1e-10)  # J = (H^-1 + Sigma)^-1 is symmetric
    for share, se in zip(s.prox_jump_shares, s.prox_jump_shares_se):
        assert share >= -3 * se and abs(share) < 3 * se + 0.002
    for b, k in enumerate(("Sigma_s", "Sigma_a")):
        assert abs(s.sigma_prior_blocks[b] - _UNTIED_1[k]) < 3 * _UNTIED_1[f"{k}_se"]
    # the Perron root of the non-negative Mo P is at least each block's own loop, coupling included
    assert s.replicon >= np.max(np.diag(Mo @ np.array(s.prior_matrix))) * (1 - 1e-12)
    pts = rs_points([{**r.to_dict(), "key": "x"}])
    assert pts[(p.lam, p.alpha)].replicon == pytest.approx(s.replicon, rel=1e-9)
    assert "two blocks" in s.describe()
