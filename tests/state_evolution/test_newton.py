"""Newton's method on the state evolution: the exact Jacobian of the SE map and what uses it.

The output side is differentiated on its fixed nodes by the implicit function theorem on the prox
(:func:`singlehead.state_evolution.output._output_tangent`), the prior side by forward differences;
Newton's method then replaces Broyden's updates, and an ``alpha`` sweep predicts each point from
the previous ones' tangents. Every check compares against an independent route: central
differences of the same deterministic map, the Broyden solver, a cold solve.
"""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import MPTarget, Problem
from singlehead.model.channels import get_channel
from singlehead.model.channels.base import Channel
from singlehead.state_evolution import SEOptions, iter_theory_curve, output_side, prior_model, theory, theory_curve
from singlehead.state_evolution.fixed_point import to_u
from singlehead.state_evolution.output import _Q_CV
from singlehead.state_evolution.se_map import MapSettings, SEMap

PROBLEMS = [
    Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5)),
    Problem(T=3, alpha=2.0, noise=0.1, lam=0.1, beta=2.0),
    Problem(T=2, alpha=0.3, noise=0.5, lam=1e-3, kappa=0.5, channel="seq2seq"),
    # small q (q/Q0 ~ 6e-4): Sigmahat with the control variate, the prox at z = 0
    Problem(T=2, alpha=1.0, noise=0.5, lam=3.0, target=MPTarget(0.5)),
]


def _fixed_point(p: Problem) -> np.ndarray:
    r = theory(p)
    assert r.converged
    return np.array([r.extras["q"], r.extras["m"], r.extras["Sigma"]])


@pytest.mark.parametrize("p", PROBLEMS, ids=["T2", "T3-beta2", "T2-cap-seq2seq", "T2-small-q"])
def test_output_tangent_is_the_derivative_of_the_node_average(p):
    """d(qhat, mhat, Sigmahat)/d(q, m, Sigma) against central differences of the same quadrature (the local
    branch from z, a smooth map of (q, m, Sigma)); the differences' own error is 1e-9 to 2e-6 relative (the prox is
    solved to 1e-12; near the peak it is steep)."""
    x = _fixed_point(p)
    Q0 = prior_model(p).Q0
    quad = SEOptions().quadrature(p)
    tangent = output_side(*x, problem=p, Q0=Q0, quad=quad, branch="z", tangent=True).tangent()
    fd = np.empty((3, 3))
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-5 * x[k]
        hp, hm = (output_side(*(x + s * e), problem=p, Q0=Q0, quad=quad, branch="z") for s in (1, -1))
        fd[:, k] = (np.array([hp.qhat, hp.mhat, hp.Sigmahat]) - np.array([hm.qhat, hm.mhat, hm.Sigmahat])) / (2 * e[k])
    assert np.abs(tangent - fd).max() < 1e-5 * np.abs(fd).max(), (tangent, fd)


def test_small_q_point_uses_the_control_variate_and_tracks_its_prox():
    """The fourth problem sits in the control-variate regime, and the control variate's prox tracked from a
    previous call's branches gives the output side of the cold starts (same minima, to the Newton tolerance)."""
    p = PROBLEMS[3]
    x = _fixed_point(p)
    Q0 = prior_model(p).Q0
    assert x[0] < _Q_CV * Q0
    quad = SEOptions().quadrature(p)
    cold = output_side(*x, problem=p, Q0=Q0, quad=quad)
    # three cold starts, or one where the prox is convex at every node at this Sigma (one minimum)
    one = p.channel.prox_convex_everywhere(p.T, p.beta, x[2])
    assert cold.branches_cv is not None and len(cold.branches_cv) == (1 if one else 3)
    y = x * np.array([1.001, 1.001, 0.999])
    fresh = output_side(*y, problem=p, Q0=Q0, quad=quad)
    tracked = output_side(*y, problem=p, Q0=Q0, quad=quad, warm=cold.branches, warm_cv=cold.branches_cv)
    a = np.array([fresh.qhat, fresh.mhat, fresh.Sigmahat, fresh.train_error])
    b = np.array([tracked.qhat, tracked.mhat, tracked.Sigmahat, tracked.train_error])
    assert np.abs(a - b).max() < 1e-10 * np.abs(a).max(), (a, b)


def test_se_map_jacobian_is_the_derivative_of_the_map():
    """dF/dx of the whole map (prior side by forward differences) against central differences of F."""
    p = PROBLEMS[0]
    x = _fixed_point(p)
    pm = prior_model(p)
    F = SEMap(p, pm, SEOptions().quadrature(p), MapSettings(branch="z", tangent=True))
    F(x)
    J = F.jacobian_at(x)
    fd = np.empty((3, 3))
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-5 * x[k]
        fd[:, k] = (F(x + e)[0] - F(x - e)[0]) / (2 * e[k])
    assert J is not None and np.abs(J - fd).max() < 1e-4 * np.abs(fd).max(), (J, fd)
    assert F.jacobian_at(x * (1 + 1e-9)) is None  # only at the point of the last evaluation


def test_t2_rank_two_solve_and_convexity_test_match_the_generic_ones():
    """The T = 2 softmax Hessian has rank two: the Woodbury quadratic forms and the 2 x 2 convexity test against
    the generic Cholesky routes on random nodes (every Sigma, beta; not only prox minima)."""
    ch = get_channel("seq2lab")
    rng = np.random.default_rng(1)
    for Sigma in (0.1, 1.0, 10.0, 1e3):
        for beta in (0.5, 1.0, 2.0):
            y, h = 2 * rng.normal(size=(4000, 3)), 3 * rng.normal(size=(4000, 3))
            labels = ch.labels(y, 2, 1.0)
            convex = ch.prox_convex_at(h, labels, beta, Sigma)
            assert np.array_equal(convex, Channel.prox_convex_at(ch, h, labels, beta, Sigma))
            V = rng.normal(size=(int(convex.sum()), 3, 3))
            Q = ch.prox_tangent_forms(h[convex], labels[convex], beta, Sigma, V)
            Qg = Channel.prox_tangent_forms(ch, h[convex], labels[convex], beta, Sigma, V)
            assert np.abs(Q - Qg).max() < 1e-9 * max(1.0, np.abs(Qg).max())


def test_newton_and_broyden_reach_the_same_fixed_points_newton_with_fewer_evaluations():
    """On the report's grid both solvers converge to the same point (well inside the quadrature error; the
    residual tolerance 1e-6 bounds the difference), Newton with fewer map evaluations in all."""
    base = Problem(T=2, noise=0.5, lam=0.01, target=MPTarget(0.5))
    evals = {True: 0, False: 0}
    for a in (0.1, 0.5, 2.0):
        rs = {flag: theory(base.replace(alpha=a), options=SEOptions(exact_jacobian=flag)) for flag in (True, False)}
        assert rs[True].converged and rs[False].converged
        assert rs[True].test_error == pytest.approx(rs[False].test_error, rel=1e-5)
        assert rs[True].train_error == pytest.approx(rs[False].train_error, rel=1e-5)
        for flag, r in rs.items():
            evals[flag] += r.extras["evaluations_all_attempts"]
    assert evals[True] < evals[False], evals


def test_alpha_tangent_predicts_the_next_fixed_point():
    """The warm start's du/dlog alpha against the difference of two converged neighbours, and the sweep's
    predictor lands closer than the previous point (the secant of the Broyden solver's sweeps)."""
    base = Problem(T=2, noise=0.5, lam=0.01, target=MPTarget(0.5))
    from singlehead.state_evolution.api import solve_point

    o = SEOptions()
    quad, pm = o.quadrature(base), prior_model(base)
    warm = solve_point(base.replace(alpha=1.0), o, pm, None, quad, alpha_tangent=True).warm_start
    assert warm is not None and warm.du_dlog_alpha is not None
    h = 1e-3
    up, um = (theory(base.replace(alpha=float(np.exp(s * h)))) for s in (1, -1))
    fd = (
        to_u(np.array([up["q"], up["m"], up["Sigma"]]), pm.Q0) - to_u(np.array([um["q"], um["m"], um["Sigma"]]), pm.Q0)
    ) / (2 * h)
    assert np.abs(warm.du_dlog_alpha - fd).max() < 2e-3 * np.abs(fd).max(), (warm.du_dlog_alpha, fd)


def test_iter_theory_curve_yields_the_points_of_theory_curve_one_at_a_time():
    base = Problem(T=2, noise=0.5, lam=0.01, target=MPTarget(0.5))
    alphas = [0.2, 0.4, 0.8]
    points = iter_theory_curve(base, alphas)
    first = next(points)
    assert first.problem["alpha"] == 0.2
    rest = list(points)
    whole = theory_curve(base, alphas)
    assert [r.test_error for r in [first, *rest]] == [r.test_error for r in whole]


@pytest.mark.parametrize(
    "p, mode", [(Problem(T=2, lam=0.05, kappa=0.3), "asymptotic"), (Problem(T=2, lam=0.01, d=60), "finite")]
)
def test_factorized_prior_side_scales_with_sigmahat_as_declared(p, mode):
    """q, m, Sigma proportional to Sigmahat^(-2, -1, -1) at fixed qhat, mhat (rank cap, finite-d prior too)."""
    from singlehead.state_evolution import prior_side

    pm = prior_model(p, mode)
    a = prior_side(2.0, 1.3, 0.7, problem=p, prior=pm)
    b = prior_side(2.0, 1.3, 0.7 * 1.37, problem=p, prior=pm)
    expo = p.student.prior_sigmahat_exponents()
    for k, e in zip(("q", "m", "Sigma"), expo):
        assert getattr(b, k) == pytest.approx(getattr(a, k) * 1.37**e, rel=1e-12)
