"""The untied state evolution (``theory`` on the untied student's two blocks of fields): its limits and its pieces.

* Tied limit (exact, 1e-8): with ``T = 1`` there are no antisymmetric fields, so ``M_a = 0`` and
  the untied student is the symmetric nuclear-norm student; when no eigenvalue of
  ``S0 + delta Z`` lies below ``-eps`` (``qhat <= lam^2`` for a PSD teacher) its prox is the tied
  one and the untied fixed point must be the tied fixed point.
* The sampled prior against the exact (free-probability) tied prior in that regime, within the
  draw standard error plus the finite-``D`` bias bound measured in ``docs/untied_theory.rst``.
* The weighted nuclear-norm prox: optimality (no perturbation lowers the objective), its exact
  one-step cases, and the linear channel's closed form against the quadrature route.
* Large ``lam``: complete collapse (``M = 0``), test error of the null predictor for both students.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, theory
from singlehead.model.students import Factorized
from singlehead.numerics.spectra.untied_prior import _anti, _sym
from singlehead.state_evolution import SEOptions, prior_model
from singlehead.state_evolution.untied import (
    UntiedPriorSample,
    teacher_sampler,
    untied_output_side,
    untied_prior_side,
    weighted_nuclear_prox,
)


def test_tied_limit_T1_large_lam_reproduces_the_tied_state_evolution():
    p = Problem(d=100, T=1, channel="linear", alpha=1.0, noise=0.2, lam=4.0)
    tied = theory(p, options=SEOptions(tol=1e-13))
    u = theory(p.replace(student="untied"), options=SEOptions(tol=1e-13))
    ux = u.extras
    assert u.converged and ux["prior"] == "exact (tied prior)"
    assert ux["qhat_s"] <= p.lam**2  # the regime where the two priors coincide
    e = tied.extras
    for mine, ref in (
        (ux["q_s"], e["q"]),
        (ux["m_s"], e["m"]),
        (ux["Sigma_s"], e["Sigma"]),
        (u.test_error, tied.test_error),
        (u.train_error, tied.train_error),
    ):
        assert mine == pytest.approx(ref, rel=1e-8)
    assert ux["q_a"] == 0.0 and ux["asymmetry"] == 0.0


def test_sampled_prior_matches_the_exact_prior_where_they_coincide():
    p = Problem(T=1, channel="linear")
    hats, lam = (1.0, 2.0, 2.5), 1.2  # delta = 0.5, eps = 1.2 > 2 delta: no eigenvalue below -eps
    ex = Factorized().prior_side(*hats, lam=lam, kappa=1.0, prior=prior_model(p))
    draw, _ = teacher_sampler(p.target)
    side = untied_prior_side(
        np.array([*hats, 0, 0, 0]), lam=lam, kappa=1.0, sample=UntiedPriorSample.draw(draw, 200, 8, 1)
    )
    # finite-D bias at D = 200 measured below 0.5 % (docs/untied_theory.rst); plus 3 draw s.e.
    for k, ref in enumerate((ex.q, ex.m, ex.Sigma)):
        assert abs(side.values[k] - ref) <= 3 * side.draw_se[k] + 0.005 * abs(ref)


def _objective(M, A_s, A_a, Ss, Sa, tau):
    Ms, Ma = _sym(M), _anti(M)
    return (
        0.5 * Ss * np.sum(Ms**2)
        - np.sum(Ms * A_s)
        + 0.5 * Sa * np.sum(Ma**2)
        - np.sum(Ma * A_a)
        + tau * np.sum(np.linalg.svd(M, compute_uv=False))
    )


def test_weighted_nuclear_prox_is_the_minimiser():
    rng = np.random.default_rng(3)
    D = 30
    G = rng.standard_normal((1, D, D)) / math.sqrt(D)
    A_s, A_a = _sym(G) + np.diag(rng.uniform(0, 2, D))[None], 0.7 * _anti(G)
    M, s, it = weighted_nuclear_prox(A_s, A_a, 2.0, 0.7, 0.3)
    f0 = _objective(M[0], A_s[0], A_a[0], 2.0, 0.7, 0.3)
    for _ in range(20):
        E = rng.standard_normal((D, D)) * 1e-4
        assert _objective(M[0] + E, A_s[0], A_a[0], 2.0, 0.7, 0.3) >= f0 - 1e-12
    assert 0.0 < np.mean(s > 0) < 1.0  # a non-trivial threshold


def test_newton_prox_meets_its_stated_accuracy():
    # the default route (semismooth Newton, no rank cap) against proximal gradient (the route a non-binding rank
    # cap takes) solved tightly: the distance stays within tol |M|, on the whole matrix and on a block 1e-6 the
    # size of the other (an antisymmetric input driven by a floored qhat_a)
    rng = np.random.default_rng(5)
    D, R = 30, 3
    G = rng.standard_normal((2, R, D, D)) / math.sqrt(D)
    A_s = _sym(G[0]) + np.stack([np.diag(rng.uniform(0, 2, D)) for _ in range(R)])
    for scale_a in (0.7, 1e-6):
        A_a = scale_a * _anti(G[1])
        ref, s_ref, _ = weighted_nuclear_prox(A_s, A_a, 2.0, 0.5, 0.3, rank=D - 1, tol=1e-14, max_iter=100000)
        assert np.all(np.sum(s_ref > 0, axis=1) < D - 1)  # the cap does not bind: the same problem
        for tol in (1e-6, 1e-9):
            for warm in (None, 0.9 * ref):
                M, s, it = weighted_nuclear_prox(A_s, A_a, 2.0, 0.5, 0.3, tol=tol, warm=warm)
                size = np.linalg.norm(ref, axis=(1, 2))
                for part in (lambda X: X, _sym, _anti):
                    err = np.linalg.norm(part(M - ref), axis=(1, 2))
                    # plus the reference's own rounding (1e-14 of the whole matrix)
                    bound = tol * np.linalg.norm(part(ref), axis=(1, 2)) + 1e-13 * size
                    assert np.all(err <= bound), (scale_a, tol, err, bound)
                assert np.allclose(s, s_ref, atol=1e-6 * s_ref.max())


def test_weighted_prox_exact_cases():
    rng = np.random.default_rng(4)
    G = rng.standard_normal((2, 1, 20, 20)) / math.sqrt(20)
    A_s, A_a = _sym(G[0]), _anti(G[1])
    # equal weights: one singular-value soft threshold, the same as the iteration's limit
    M1, _, it1 = weighted_nuclear_prox(A_s, A_a, 1.5, 1.5, 0.2)
    M2, _, _ = weighted_nuclear_prox(A_s, A_a, 1.5, 1.5 * (1 + 1e-9), 0.2, tol=1e-13)
    assert it1 == 1 and np.max(np.abs(M1 - M2)) < 1e-7
    # unobserved antisymmetric block: M stays symmetric, eigenvalues soft-thresholded on both signs
    M3, _, _ = weighted_nuclear_prox(A_s, 0 * A_a, 1.5, 0.0, 0.2)
    w = np.linalg.eigvalsh(A_s[0] / 1.5)
    expect = np.sort(np.sign(w) * np.maximum(np.abs(w) - 0.2 / 1.5, 0))
    assert np.allclose(np.sort(np.linalg.eigvalsh(M3[0])), expect, atol=1e-12)
    with pytest.raises(ValueError, match="Sigmahat_s"):
        weighted_nuclear_prox(A_s, A_a, -1.0, 1.0, 0.2)


def test_linear_closed_form_matches_the_quadrature_route():
    """The per-block closed form of the linear channel against the generic prox + quadrature."""
    from singlehead.model.channels.linear import Linear

    class QuadratureLinear(Linear):
        def closed_form_block(self, *args, **kwargs):
            return None

    p = Problem(T=2, channel="linear", alpha=0.7, noise=0.3)
    x = np.array([1.1, 0.9, 0.6, 0.4, 0.0, 0.8])
    closed = untied_output_side(x, problem=p, Q0s=1.5, Q0a=0.0)
    quad = untied_output_side(x, problem=p.replace(channel=QuadratureLinear()), Q0s=1.5, Q0a=0.0)
    for k in (0, 1, 2, 3, 5):
        err = quad.err[("qhat_s", "mhat_s", "Sigmahat_s", "qhat_a", "mhat_a", "Sigmahat_a")[k]]
        assert abs(quad.hats[k] - closed.hats[k]) <= 4 * err + 1e-12, k
    assert quad.hats[4] == 0.0 == closed.hats[4]


def test_large_lam_collapses_to_the_null_predictor():
    p = Problem(T=2, channel="seq2lab", alpha=1.0, noise=0.5, lam=50.0)
    u = theory(p.replace(student="untied"), options=SEOptions(sample_dim=60, sample_draws=1))
    assert u.extras["q_s"] == 0.0 and u.extras["q_a"] == 0.0 and u.rank_fraction == 0.0
    assert u.extras["collapsed"] and u.converged
    tied = theory(p)
    assert u.test_error == pytest.approx(tied.test_error, rel=1e-3)
    # M = 0 fits none of the noisy training labels: the train error is the noisy-label test error
    assert u.train_error == u.test_error_noisy


def test_options_validate():
    with pytest.raises(ValueError, match="sample_dim"):
        SEOptions(sample_dim=1)
    with pytest.raises(ValueError, match="damping"):
        SEOptions(damping=0.0)


@pytest.mark.parametrize("T", [2, 3])
def test_untied_fit_loss_derivatives(T):
    """The untied softmax fit loss: gradient and Hessian against central differences; T = 2 closed form
    against the general formula."""
    from singlehead.numerics.attention_maps import (
        _softmax_fit_loss_general,
        softmax_fit_loss,
        softmax_rows,
    )

    rng = np.random.default_rng(T)
    Kt = T * T
    h = rng.standard_normal((7, Kt))
    Y = softmax_rows(rng.standard_normal((7, T, T)))
    val, grad, hess = softmax_fit_loss(h, Y, 1.3, untied=True)
    general = _softmax_fit_loss_general(h, Y, 1.3, 2, untied=True)
    for a, b in zip((val, grad, hess), general):
        assert np.allclose(a, b, atol=1e-13)
    eps = 1e-6
    for k in range(Kt):
        e = np.zeros(Kt)
        e[k] = eps
        vp, gp, _ = softmax_fit_loss(h + e, Y, 1.3, untied=True)
        vm, gm, _ = softmax_fit_loss(h - e, Y, 1.3, untied=True)
        assert np.allclose((vp - vm) / (2 * eps), grad[:, k], atol=1e-7)
        assert np.allclose((gp - gm) / (2 * eps), hess[:, k], atol=1e-6)


def test_untied_embedding_covariances():
    """Fields of a random M: symmetric block variance ||M_s||^2/d, antisymmetric ||M_a||^2/d (diag 2 q_s)."""
    from singlehead.numerics.attention_maps import untied_embedding

    P = untied_embedding(3)
    P2 = P.reshape(9, 9)
    assert np.allclose(P2.T @ P2, 2 * np.eye(9))  # ||P v||_F^2 = 2 ||v||^2: invertible, isotropic
    H = np.einsum("abk,k->ab", P, np.arange(1.0, 10.0))
    assert np.allclose(0.5 * (H - H.T)[np.triu_indices(3, 1)], [7.0, 8.0, 9.0])


def test_theory_routes_an_untied_student_and_thresholds():
    """``singlehead.theory`` runs the untied SE for ``student="untied"`` (a Result with both blocks);
    the interpolation threshold is the dimension count (softmax T = 2: 1/2, against the tied 0.153)."""
    from singlehead import interpolation_threshold
    from singlehead.model.targets import UntiedMPTarget

    p = Problem(
        d=100,
        T=2,
        channel="seq2lab",
        alpha=2.0,
        noise=0.5,
        lam=0.1,
        student="untied",
        target=UntiedMPTarget(kappa0=0.5),
    )
    r = theory(p)
    assert r.source == "theory" and r.converged
    assert r.extras["m_a"] > 0 and r.extras["q_a"] > 0  # an untied teacher: the antisymmetric part is learned
    assert 0 < r.test_error < 1 and r.penalty > 0
    assert interpolation_threshold(p) == 0.5
    assert interpolation_threshold(p.replace(kappa=0.5)) == pytest.approx(0.375)
    assert interpolation_threshold(p.replace(channel="linear", T=2, beta=1.0)) == pytest.approx(1 / 6)
    assert interpolation_threshold(p.replace(noise=0.0)) == math.inf


def test_large_alpha_limit_untied_approaches_tied():
    """As alpha grows (fixed lam) the antisymmetric part fitted to noise dies out as 1/sqrt(alpha) and the
    untied/tied test-error ratio falls towards 1 (measured: asymmetry 0.41, 0.19, 0.096 at alpha = 4, 16, 64;
    ratio 2.01, 1.46, 1.17)."""
    o = SEOptions(sample_dim=60, sample_draws=1, draw_errors=False)
    asym, ratio = [], []
    for a in (4.0, 16.0, 64.0):
        p = Problem(d=100, T=2, channel="seq2lab", alpha=a, noise=0.5, lam=1e-2)
        u = theory(p.replace(student="untied"), options=o)
        assert u.converged
        asym.append(u.extras["asymmetry"])
        ratio.append(u.test_error / theory(p).test_error)
    assert asym[1] / asym[0] == pytest.approx(0.5, rel=0.15) and asym[2] / asym[1] == pytest.approx(0.5, rel=0.15)
    assert ratio[0] > ratio[1] > ratio[2] > 1.0 and ratio[2] < 1.3


def test_untied_perfect_recovery_limits():
    """The isotropic statistical dimension at rank ratio 1/2 is 0.9054; the untied threshold is infinite under
    a rank cap below kappa0 and the families' parameter count for a full-rank teacher (T = 2: one
    symmetric-only and one isotropic equation per sequence, d^2 unknowns: 1/2)."""
    from singlehead import perfect_recovery_threshold
    from singlehead.thresholds import nuclear_statistical_dimension

    assert nuclear_statistical_dimension(0.5) == pytest.approx(0.9054, abs=1e-4)
    assert nuclear_statistical_dimension(0.0) == pytest.approx(0.0, abs=1e-9)
    assert nuclear_statistical_dimension(1.0) == pytest.approx(1.0, abs=1e-9)
    assert perfect_recovery_threshold(Problem(T=2, student="untied", kappa=0.3)) == math.inf
    assert perfect_recovery_threshold(Problem(T=2, student="untied", target=MPTarget(2.0))) == pytest.approx(0.5)
    # T = 3: 3 symmetric-only, 1 antisymmetric-only and 2 isotropic equations per sequence for d^2 unknowns
    assert perfect_recovery_threshold(Problem(T=3, student="untied", target=MPTarget(2.0))) == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="rho"):
        nuclear_statistical_dimension(1.5)


def test_untied_perfect_recovery_below_the_isotropic_value():
    """T = 2, kappa0 = 1/2: the symmetric-only equations bring the threshold to 0.4234 (large-size reference,
    tests/numerics/test_nuclear_recovery.py; spread of the evaluation about 5e-5), below the isotropic 0.4527; the
    tied student's 0.211 and the Bayes-optimal 0.1875 stay below it."""
    from singlehead import perfect_recovery_threshold

    a = perfect_recovery_threshold(Problem(T=2, student="untied"))
    assert a == pytest.approx(0.4234, abs=5e-4)
    assert a < 0.4527 - 0.02 and a > 2 * perfect_recovery_threshold(Problem(T=2))


@pytest.mark.parametrize("channel", ["linear", "seq2lab"])
def test_block_interface_of_the_channel(channel):
    """One symmetric block is the tied fit loss; two blocks are the T^2 untied fields (P(h), P^T P = 2 I)."""
    from singlehead.model.channels import Channel, get_channel
    from singlehead.model.students import get_student
    from singlehead.numerics.attention_maps import untied_embedding

    ch, T, beta = get_channel(channel), 2, 1.3
    rng = np.random.default_rng(0)
    tied, untied = get_student("factorized").field_blocks(), get_student("untied").field_blocks()
    h = rng.standard_normal((5, 3))
    labels = ch.block_labels(rng.standard_normal((5, 3)), T, 0.8, tied)
    for a, b in zip(ch.block_fit_loss(h, labels, beta, blocks=tied), ch.fit_loss(h, labels, beta)):
        assert np.array_equal(a, b)
    y, hu = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    labels_u = ch.block_labels(y, T, 0.8, untied)
    direct = ((ch.attention(np.einsum("abk,nk->nab", untied_embedding(T), hu), beta) - labels_u) ** 2).sum(axis=(1, 2))
    assert np.allclose(ch.block_fit_loss(hu, labels_u, beta, 0, blocks=untied)[0], direct)
    with pytest.raises(NotImplementedError, match="block_fit_loss"):
        Channel.block_fit_loss(ch, hu, labels_u, beta, blocks=untied)


def test_light_point_takes_the_first_instances_of_each_size():
    from singlehead.state_evolution.block_map import LIGHT_FRACTION, BlockPoint

    p = Problem(d=40, T=2, channel="seq2lab", alpha=1.0, noise=0.5, lam=1e-2, student="untied")
    pt = BlockPoint.build(p, SEOptions(sample_dim=16, sample_draws=8))
    light = pt.light()
    assert light.sample.draws == 8 // LIGHT_FRACTION and light.coarse.draws == pt.coarse.draws // LIGHT_FRACTION
    assert np.array_equal(light.sample.Zs, pt.sample.Zs[: light.sample.draws])
    assert np.array_equal(light.coarse.M0, pt.coarse.M0[: light.coarse.draws])
    # one draw stays one draw; no coarse sample stays none
    one = BlockPoint.build(p, SEOptions(sample_dim=16, sample_draws=1, sample_extrapolate=False)).light()
    assert one.sample.draws == 1 and one.coarse is None


def test_newton_prox_resumes_from_its_own_minimiser():
    # a warm start the prox returned resumes from its Newton state; a copy (no state) starts afresh: same minimiser
    rng = np.random.default_rng(6)
    D, R = 30, 2
    G = rng.standard_normal((2, R, D, D)) / math.sqrt(D)
    A_s, A_a = _sym(G[0]) + np.stack([np.diag(rng.uniform(0, 2, D)) for _ in range(R)]), 0.7 * _anti(G[1])
    M1, _, _ = weighted_nuclear_prox(A_s, A_a, 2.0, 0.5, 0.3, tol=1e-10)
    moved = (1.05 * A_s, 0.95 * A_a, 2.1, 0.45, 0.25)
    resumed, _, it_resumed = weighted_nuclear_prox(*moved, tol=1e-10, warm=M1)
    fresh, _, _ = weighted_nuclear_prox(*moved, tol=1e-10, warm=M1.copy())
    ref, _, _ = weighted_nuclear_prox(*moved, rank=D - 1, tol=1e-14, max_iter=100000)
    for M in (resumed, fresh):
        assert np.all(np.linalg.norm(M - ref, axis=(1, 2)) <= 1e-10 * np.linalg.norm(ref, axis=(1, 2)) + 1e-13)
    assert 1 <= it_resumed <= 12
