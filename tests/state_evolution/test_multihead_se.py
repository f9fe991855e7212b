"""The multi-head state evolution of softmax channels (singlehead.state_evolution.multihead_se)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, theory
from singlehead.state_evolution import output_side, prior_model, prior_side
from singlehead.state_evolution.multihead_se.loss import head_attention, multihead_fit_loss
from singlehead.state_evolution.multihead_se.output import (
    isotropic,
    multihead_output_side,
    multihead_quadrature,
    multihead_test_errors,
)
from singlehead.state_evolution.multihead_se.prior import (
    MultiHeadPriorSample,
    coupled_shrinkage,
    multihead_prior_side,
)
from singlehead.state_evolution.multihead_se.solve import (
    MultiHeadOptions,
    project,
    specialisation_index,
)
from singlehead.state_evolution.multihead_se.theory import multihead_theory
from singlehead.state_evolution.output import channel_test_errors

PROBLEM = Problem(T=2, alpha=1.0, channel="seq2lab", target=MPTarget(kappa0=0.5), lam=0.01, noise=0.5)


@pytest.mark.parametrize("T, H", [(2, 2), (3, 2), (2, 3), (2, 1)])
def test_multihead_loss_derivatives_match_finite_differences(T, H):
    rng = np.random.default_rng(0)
    K = T * (T + 1) // 2
    h = rng.standard_normal((4, H * K))
    Y = head_attention(rng.standard_normal((4, 2 * K)), T, 1.3).mean(axis=1)
    _, g, Hs = multihead_fit_loss(h, Y, 1.3, H)
    eps = 1e-6
    for i in range(H * K):
        e = np.zeros(H * K)
        e[i] = eps
        vp, gp, _ = multihead_fit_loss(h + e, Y, 1.3, H, 1)
        vm, gm, _ = multihead_fit_loss(h - e, Y, 1.3, H, 1)
        np.testing.assert_allclose((vp - vm) / (2 * eps), g[:, i], atol=1e-8)
        np.testing.assert_allclose((gp - gm) / (2 * eps), Hs[:, :, i], atol=1e-8)


@pytest.mark.parametrize("x", [(1.0, 0.8, 0.5), (1.3, 1.1, 3.0)])
def test_one_head_output_side_is_the_single_heads(x):
    q, m, S = x
    quad = multihead_quadrature(PROBLEM, n_points=256)
    a = output_side(q, m, S, problem=PROBLEM, Q0=1.5, quad=quad)
    b = multihead_output_side([[q]], [[m]], [[S]], problem=PROBLEM, Q0=[[1.5]], quad=quad)
    np.testing.assert_allclose(
        [b.Qhat[0, 0], b.Mhat[0, 0], b.Sigmahat[0, 0], b.train_error],
        [a.qhat, a.mhat, a.Sigmahat, a.train_error],
        rtol=1e-9,
    )
    c = channel_test_errors(q, m, problem=PROBLEM, Q0=1.5, quad=quad)
    d = multihead_test_errors([[q]], [[m]], problem=PROBLEM, Q0=[[1.5]], quad=quad)
    assert d["test_error"] == pytest.approx(c["test_error"], rel=1e-12)
    assert d["test_error_noisy"] == pytest.approx(c["test_error_noisy"], rel=1e-12)


def test_output_side_is_equivariant_under_a_head_permutation():
    p = PROBLEM.replace(heads=2, teacher_heads=2)
    quad = multihead_quadrature(p, n_points=256, n_scrambles=8)
    Q0 = isotropic(2, 1.5, 0.5)
    Q, M, S = np.array([[1.4, 0.5], [0.5, 1.2]]), np.array([[1.1, 0.6], [0.4, 0.9]]), np.array([[1.0, 0.3], [0.3, 0.8]])
    a = multihead_output_side(Q, M, S, problem=p, Q0=Q0, quad=quad)
    P = np.array([[0, 1], [1, 0]])
    b = multihead_output_side(P @ Q @ P, P @ M, P @ S @ P, problem=p, Q0=Q0, quad=quad)
    # the node layout is not permuted with the heads: equal up to quadrature error
    for x, y, e in (
        (a.Qhat, P @ b.Qhat @ P, a.err["Qhat"]),
        (a.Mhat, P @ b.Mhat, a.err["Mhat"]),
        (a.Sigmahat, P @ b.Sigmahat @ P, a.err["Sigmahat"]),
    ):
        assert np.all(np.abs(x - y) < 5 * np.sqrt(2) * e + 1e-12)


def test_one_head_sampled_prior_side_agrees_with_the_asymptotic_one():
    pm = prior_model(PROBLEM)
    hats = (0.43, 1.0, 1.11)
    a = prior_side(*hats, problem=PROBLEM, prior=pm)
    sample = MultiHeadPriorSample.draw(PROBLEM.target, pm.Q0, 1, 1, D=200, draws=4, seed=0)
    b = multihead_prior_side([[hats[0]]], [[hats[1]]], [[hats[2]]], lam=PROBLEM.lam, kappa=1.0, sample=sample)
    for name, ref in (("Q", a.q), ("M", a.m), ("Sigma", a.Sigma)):
        # measured at D = 200: |difference| <= 1 draw standard error (finite-D bias of Sigma ~0.5 %)
        assert abs(getattr(b, name)[0, 0] - ref) < 4 * b.draw_se(name)[0, 0]


def test_coupled_shrinkage_is_a_fixed_point_of_every_block_update():
    rng = np.random.default_rng(1)
    D = 30
    G = rng.standard_normal((2, 2, D, D)) / np.sqrt(D)
    B = (G + np.swapaxes(G, -1, -2)) / np.sqrt(2) + 0.5 * np.eye(D)
    Sh = np.array([[1.0, 0.8], [0.8, 1.2]])
    S, sweeps, ok = coupled_shrinkage(B, Sh, 0.1, tol=1e-12)
    assert ok
    for h in range(2):
        A = (B[:, h] - Sh[h, 1 - h] * S[:, 1 - h]) / Sh[h, h]
        w, V = np.linalg.eigh(A)
        exact = (V * np.maximum(w - 0.1 / Sh[h, h], 0.0)[:, None, :]) @ np.swapaxes(V, -1, -2)
        np.testing.assert_allclose(S[:, h], exact, atol=1e-9)
    # uncoupled heads: one spectral shrinkage each
    S2, _, _ = coupled_shrinkage(B, np.diag([1.0, 2.0]), 0.1, tol=1e-12)
    w, V = np.linalg.eigh(B[:, 1] / 2.0)
    np.testing.assert_allclose(
        S2[:, 1], (V * np.maximum(w - 0.05, 0.0)[:, None, :]) @ np.swapaxes(V, -1, -2), atol=1e-12
    )


def test_projections_and_specialisation_index():
    Q = np.array([[2.0, 0.4], [0.6, 1.0]])
    M = np.array([[1.0, 0.2], [0.4, 0.8]])
    Qp, Mp, Sp = project("unspecialised", Q, M, Q)
    np.testing.assert_allclose(Qp, [[1.5, 0.5], [0.5, 1.5]])
    np.testing.assert_allclose(Mp, np.full((2, 2), 0.6))
    _, Ms, _ = project("specialised", Q, M, Q)
    np.testing.assert_allclose(Ms, [[0.9, 0.3], [0.3, 0.9]])
    assert project("specialised", *project("specialised", Q, M, Q))[1] == pytest.approx(Ms)
    Q0 = isotropic(2, 1.5, 0.5)
    assert specialisation_index(Ms, Q0) == pytest.approx(0.6)
    assert specialisation_index(Mp, Q0) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="ansatz must be one of"):
        project("other", Q, M, Q)


@pytest.mark.slow
def test_one_head_through_the_multihead_path_matches_the_single_head_theory():
    single = theory(PROBLEM)
    mh = multihead_theory(PROBLEM, MultiHeadOptions(n_points=2048, sample_dim=200))
    assert mh.converged
    # the sampled prior side's draw error (and its finite-D bias, ~1 % in q at D = 100) bound the agreement
    se_q, se_m = mh.extras["head_Q_draw_se"][0, 0], mh.extras["head_M_draw_se"][0, 0]
    assert abs(mh.extras["q"] - single.extras["q"]) < 5 * se_q
    assert abs(mh.extras["m"] - single.extras["m"]) < 5 * se_m
    assert mh.test_error == pytest.approx(single.test_error, rel=0.05)


def test_match_heads_puts_the_largest_overlaps_on_the_diagonal():
    from singlehead.state_evolution.multihead_se.solve import match_heads

    Q = np.array([[2.0, 0.5], [0.5, 1.0]])
    M = np.array([[0.2, 0.9], [0.8, 0.3]])
    S = np.array([[3.0, -1.0], [-1.0, 4.0]])
    Qm, Mm, Sm, order = match_heads(Q, M, S)
    assert order == [1, 0]
    np.testing.assert_allclose(Mm, [[0.8, 0.3], [0.2, 0.9]])
    np.testing.assert_allclose(Qm, [[1.0, 0.5], [0.5, 2.0]])
    np.testing.assert_allclose(Sm, [[4.0, -1.0], [-1.0, 3.0]])


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("ansatz", "diagonal", r"ansatz must be None or one of"),
        ("sample_dim", 1, r"sample_dim must be an integer >= 2 \(got 1\)"),
        ("damping", 0.0, r"damping must be in \(0, 1\] \(got 0.0\)"),
        ("history", -1, r"history must be an integer >= 0"),
        ("tol", float("nan"), r"tol must be a finite number > 0"),
        ("threads", 0, r"threads must be None or an integer >= 1 \(got 0\)"),
    ],
)
def test_options_refuse_out_of_range_values_naming_them(field, value, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadOptions(**{field: value})


def test_the_denoiser_accuracy_follows_the_iteration_and_convergence_needs_a_full_accuracy_step():
    from singlehead.state_evolution.multihead_se.solve import (
        INEXACT_SWEEPS,
        MultiHeadSEMap,
        default_start,
        solve_multihead,
    )

    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(n_points=32, n_scrambles=2, sample_dim=12, sample_draws=2, tol=100.0)
    se_map = MultiHeadSEMap(p, o)
    assert se_map.prior_accuracy(None) == (o.prior_tol, 5000)
    assert se_map.prior_accuracy(math.inf) == (1e-3, INEXACT_SWEEPS)
    assert se_map.prior_accuracy(5e4) == (1e-3, INEXACT_SWEEPS)
    assert se_map.prior_accuracy(10 * o.tol) == (o.prior_tol, 5000)  # near the tolerance: full accuracy
    exact = MultiHeadSEMap(p, dataclasses.replace(o, inexact=False))
    assert exact.prior_accuracy(math.inf) == (o.prior_tol, 5000)
    # the first evaluation (after no step) is inexact: even a step below tol does not stop the iteration there
    sol = solve_multihead(se_map, "unspecialised", default_start(p, se_map.Q0, "unspecialised"), tol=100.0)
    assert sol.residuals[0] < 100.0 and sol.converged and sol.evaluations == 2 and se_map.last_exact


def test_specialisation_eigenvalue_is_the_gap_response_of_the_map():
    from singlehead.state_evolution.multihead_se import specialisation_eigenvalue

    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(n_points=32, n_scrambles=2, sample_dim=12, sample_draws=2, max_iter=3)
    d = specialisation_eigenvalue(p, o, eps=0.1)
    # lambda is the central difference of the map's gaps over the gaps put in
    assert d["lambda"] == pytest.approx((d["gap_out"][0] - d["gap_out"][1]) / (d["gap_in"][0] - d["gap_in"][1]))
    assert d["gap_in"][0] == pytest.approx(-d["gap_in"][1]) and d["gap_in"][0] > 0
    assert d["result"].extras["ansatz"] == "unspecialised"
    np.testing.assert_allclose(d["result"].extras["head_M"], d["result"].extras["head_M"].mean())  # no gap
    with pytest.raises(ValueError, match="heads and teacher_heads must be equal"):
        specialisation_eigenvalue(PROBLEM.replace(heads=2, teacher_heads=1), o)
    with pytest.raises(ValueError, match="eps must be in"):
        specialisation_eigenvalue(p, o, eps=0.0)


def test_draw_jackknife_vanishes_for_identical_draws_and_enters_the_test_error_bar():
    from singlehead.state_evolution.block_map import t_quantile_975
    from singlehead.state_evolution.multihead_se.draw_error import multihead_draw_jackknife
    from singlehead.state_evolution.multihead_se.solve import MultiHeadSEMap, default_start, solve_multihead

    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(n_points=64, n_scrambles=2, sample_dim=16, sample_draws=3, tol=1e-3)
    res = multihead_theory(p, o)
    assert res.converged
    ex = res.extras
    assert ex["draws_dof"] == 2 and ex["test_error_draws_se"] > 0
    assert ex["test_error_se"] == pytest.approx(math.hypot(ex["test_error_quadrature_se"], ex["test_error_draws_se"]))
    assert "test_error_draws_se" not in multihead_theory(p, dataclasses.replace(o, draw_errors=False)).extras

    # the jackknife's formula, and its mechanism: three copies of one draw leave nothing to spread
    se_map = MultiHeadSEMap(p, o)
    sol = solve_multihead(se_map, "unspecialised", default_start(p, se_map.Q0, "unspecialised"), tol=1e-3)
    x = (sol.Q, sol.M, sol.Sigma)
    jk = multihead_draw_jackknife(se_map, "unspecialised", x)
    t = np.array(jk["leave_one_out"])
    assert jk["test_error_draws_se"] == pytest.approx(math.sqrt(2 / 3 * np.sum((t - t.mean()) ** 2)))
    assert ex["test_error_draws_se"] == pytest.approx(
        jk["test_error_draws_se"] * t_quantile_975(2) / 1.959963984540054, rel=0.05
    )
    same = MultiHeadSEMap(p, o)
    same.sample = MultiHeadPriorSample(same.sample.S0[[0, 0, 0]], same.sample.Z[[0, 0, 0]])
    same.Q0 = same.sample.teacher_overlaps()
    sol1 = solve_multihead(same, "unspecialised", x, tol=1e-3)
    flat = multihead_draw_jackknife(same, "unspecialised", (sol1.Q, sol1.M, sol1.Sigma))
    assert flat["test_error_draws_se"] < 0.05 * jk["test_error_draws_se"]


@pytest.mark.parametrize("H", [1, 2, 3])
def test_t2_closed_form_loss_is_the_multihead_loss_through_a_linear_map(H):
    from singlehead.state_evolution.multihead_se.loss import linear_t2_loss, row_difference_map

    rng = np.random.default_rng(1)
    x = 2.0 * rng.standard_normal((50, 3 * H))
    Y = head_attention(rng.standard_normal((50, 6)), 2, 0.9).mean(axis=1)
    L = np.linalg.cholesky(np.eye(H) + 0.3 * np.ones((H, H)))
    big = np.kron(L, np.eye(3))  # fields h = big x (the prox's whitened coordinates)
    v, g, Hs = linear_t2_loss(row_difference_map(H) @ big, 1.3, H)(x, Y, 2)
    v0, g0, H0 = multihead_fit_loss(x @ big.T, Y, 1.3, H)
    np.testing.assert_allclose(v, v0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, g0 @ big, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(Hs, big.T @ H0 @ big, rtol=1e-10, atol=1e-13)
    assert linear_t2_loss(row_difference_map(H), 1.3, H)(x @ big.T, Y, 0)[1] is None
    with pytest.raises(ValueError, match="G must have 2 \\* heads"):
        linear_t2_loss(np.eye(3), 1.3, H)


def test_sor_relaxation_is_youngs_optimum_and_reaches_the_same_minimiser():
    from singlehead.state_evolution.multihead_se.prior import sor_relaxation

    Sh = np.array([[0.4, 0.3], [0.3, 0.4]])
    assert sor_relaxation(Sh) == pytest.approx(2.0 / (1.0 + math.sqrt(1.0 - 0.75**2)))
    assert sor_relaxation(np.eye(3)) == 1.0  # uncoupled heads: the exact block minimiser
    assert sor_relaxation(np.array([[1.0, 2.0], [2.0, 1.0]])) == 1.5  # not positive definite
    s = MultiHeadPriorSample.draw(MPTarget(kappa0=0.5), 1.5, 2, 2, D=30, draws=2, seed=1)
    B = 0.8 * s.S0 + 0.5 * s.Z
    a, na, oka = coupled_shrinkage(B, Sh, 0.02, tol=1e-11, relax=None)
    b, nb, okb = coupled_shrinkage(B, Sh, 0.02, tol=1e-11, relax=1.5)
    assert oka and okb and na < nb
    np.testing.assert_allclose(a, b, atol=1e-8 * np.abs(b).max())


def test_options_refuse_a_non_boolean_coarse():
    with pytest.raises(ValueError, match="coarse must be True or False"):
        MultiHeadOptions(coarse=1)


def test_coarse_to_fine_reaches_the_full_designs_fixed_point():
    from singlehead.state_evolution.multihead_se.solve import MultiHeadSEMap, coarse_map

    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(ansatz="unspecialised", n_points=1024, n_scrambles=2, sample_dim=30, sample_draws=2)
    assert coarse_map(MultiHeadSEMap(p, dataclasses.replace(o, n_points=256, sample_dim=12))) is None
    cm = coarse_map(MultiHeadSEMap(p, o))
    assert cm.quad.nodes.shape == (1, 512, 12) and cm.sample.D == 30 and cm.sample.S0.shape[0] == 1
    a = multihead_theory(p, o)
    b = multihead_theory(p, dataclasses.replace(o, coarse=False))
    assert a.converged and b.converged and a.extras["coarse_evaluations"] > 0 == b.extras["coarse_evaluations"]
    assert a.iterations < b.iterations
    # the same map's fixed point, to the stopping rule (the coarse design's own fixed point is ~5 % away in q)
    for k in ("q", "m"):
        assert a.extras[k] == pytest.approx(b.extras[k], rel=2e-3)
    assert abs(a.test_error - b.test_error) < 0.2 * b.extras["test_error_se"]
    # the specialised ansatz keeps the Anderson iteration on the full design
    c = multihead_theory(p, dataclasses.replace(o, ansatz="specialised", max_iter=2))
    assert c.extras["coarse_evaluations"] == 0


def test_chord_steps_return_to_the_fixed_point_from_a_displaced_start():
    from singlehead.state_evolution.multihead_se.solve import (
        MultiHeadSEMap,
        chord_solve,
        default_start,
        solve_coarse_to_fine,
    )

    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(ansatz="unspecialised", n_points=1024, n_scrambles=2, sample_dim=50, sample_draws=2)
    se_map = MultiHeadSEMap(p, o)
    sol = solve_coarse_to_fine(se_map, "unspecialised", default_start(p, se_map.Q0, "unspecialised"), tol=o.tol)
    assert sol.converged and sol.chord_matrix is not None and sol.chord_matrix.shape == (5, 5)
    # Q and Sigma displaced by 5 %: back to the same fixed point (to the stopping rule) in a few evaluations
    back = chord_solve(se_map, "unspecialised", (1.05 * sol.Q, sol.M, 0.95 * sol.Sigma), sol.chord_matrix, tol=o.tol)
    assert back.converged and back.evaluations <= 8
    for a, b in ((back.Q, sol.Q), (back.M, sol.M), (back.Sigma, sol.Sigma)):
        assert np.abs(a - b).max() < 2e-3 * np.abs(b).max()


def test_a_specialised_solve_reaches_the_specialised_branch_for_a_draw_the_sor_factor_lost():
    # sampling seed 3 of H = H0 = 2 at alpha = 2: with the denoiser's SOR factor the outer iteration ended
    # unconverged near the unspecialised branch (index 0.13, test error 0.0286); with the default 1.5 it converges
    # to the specialised fixed point (index ~0.72, test error ~0.020) as the other seeds do
    p = PROBLEM.replace(heads=2, teacher_heads=2, alpha=2.0)
    r = multihead_theory(p, MultiHeadOptions(ansatz="specialised", sample_seed=3, draw_errors=False))
    assert r.converged and r.extras["specialisation"] > 0.5 and r.test_error < 0.024


def test_specialisation_eigenvalue_refuses_an_inadmissible_perturbation_naming_eps(monkeypatch):
    import singlehead.state_evolution.multihead_se.theory as theory_module
    from singlehead.state_evolution.multihead_se import specialisation_eigenvalue
    from singlehead.state_evolution.multihead_se.solve import admissible

    Q0 = np.array([[1.0, 0.2], [0.2, 1.0]])
    assert admissible((np.eye(2), 0.5 * np.eye(2), np.eye(2)), Q0)
    assert not admissible((np.eye(2), 2.0 * np.eye(2), np.eye(2)), Q0)  # |M| > sqrt(Q Q0): no covariance
    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(n_points=32, n_scrambles=2, sample_dim=12, sample_draws=2, max_iter=3)
    # where the perturbed overlaps are not admissible (at lam = 1 the unconverged point was: a LinAlgError in the
    # output side before), a ValueError naming eps
    monkeypatch.setattr(theory_module, "admissible", lambda t, Q0: False)
    with pytest.raises(ValueError, match=r"eps=0.1 moves M out of the admissible overlaps"):
        specialisation_eigenvalue(p, o, eps=0.1)


def test_the_jackknife_groups_draws_with_their_nodes_and_so_carries_the_quadrature_error():
    from singlehead.state_evolution.multihead_se.draw_error import jackknife_groups, multihead_draw_jackknife
    from singlehead.state_evolution.multihead_se.solve import MultiHeadSEMap, default_start, solve_multihead

    assert jackknife_groups(2, 4) == ([[0], [1]], [[0, 1], [2, 3]])
    assert jackknife_groups(3, 2)[1] is None
    p = PROBLEM.replace(heads=2, teacher_heads=2)
    o = MultiHeadOptions(n_points=64, n_scrambles=3, sample_dim=16, sample_draws=3, tol=1e-3)
    ex = multihead_theory(p, o).extras
    # groups of one draw and one scramble: the bar is the jackknife's alone (the quadrature's is inside it)
    assert ex["draw_error_groups"] == "draws and nodes" and ex["test_error_se"] == ex["test_error_draws_se"]
    # the mechanism: with three copies of one draw only the nodes spread the leave-one-out test errors; with three
    # copies of one scramble as well nothing does
    base = MultiHeadSEMap(p, o)
    one_draw = MultiHeadPriorSample(base.sample.S0[[0, 0, 0]], base.sample.Z[[0, 0, 0]])
    spreads = []
    for quad in (base.quad, type(base.quad)(base.quad.nodes[[0, 0, 0]], base.quad.seed)):
        m = MultiHeadSEMap(p, o, sample=one_draw, quad=quad)
        sol = solve_multihead(m, "unspecialised", default_start(p, m.Q0, "unspecialised"), tol=1e-3)
        jk = multihead_draw_jackknife(m, "unspecialised", (sol.Q, sol.M, sol.Sigma))
        assert jk["groups"] == "draws and nodes" and jk["converged"]
        spreads.append(jk["test_error_draws_se"])
    assert spreads[1] < 0.05 * spreads[0]


def test_the_denoiser_on_several_threads_gives_the_serial_numbers_bit_for_bit():
    # the groups of draws sweep in step and stop together: the same operations, in the same order, as one loop
    rng = np.random.default_rng(5)
    A = rng.standard_normal((5, 2, 20, 20))
    B = (A + np.swapaxes(A, -1, -2)) / math.sqrt(40)
    Sh = np.array([[0.13, 0.11], [0.11, 0.13]])
    S1, n1, ok1 = coupled_shrinkage(B, Sh, 0.02, tol=1e-8)
    for threads in (2, 3, 8):
        S, n, ok = coupled_shrinkage(B, Sh, 0.02, tol=1e-8, threads=threads)
        assert (n, ok) == (n1, ok1) and np.array_equal(S, S1)
    assert ok1 and n1 > 5  # coupled heads: several sweeps, so the groups' common stop is exercised


def test_an_error_in_one_group_of_the_threaded_denoiser_is_raised_not_a_deadlock(monkeypatch):
    from singlehead.state_evolution.multihead_se import prior

    real = prior._shrink

    def failing(A, tau, rank):
        if A.shape[0] == 1:  # the last group holds one instance
            raise FloatingPointError("group failed")
        return real(A, tau, rank)

    monkeypatch.setattr(prior, "_shrink", failing)
    B = np.zeros((3, 2, 4, 4)) + np.eye(4)
    with pytest.raises(FloatingPointError, match="group failed"):
        coupled_shrinkage(B, np.eye(2), 0.02, threads=2)


def test_a_multihead_point_on_two_threads_equals_the_one_thread_point():
    # prior side in step over the draws, jackknife groups side by side; BLAS held at one thread either way
    o = MultiHeadOptions(ansatz="unspecialised", n_points=128, n_scrambles=2, sample_dim=20, sample_draws=2, tol=1e-3)
    a, b = (
        multihead_theory(PROBLEM.replace(heads=2, teacher_heads=2), dataclasses.replace(o, threads=t)) for t in (1, 2)
    )
    assert a.converged and a.extras["draw_error_evaluations"] > 0
    assert a.test_error == b.test_error and a.extras["test_error_se"] == b.extras["test_error_se"]
    np.testing.assert_array_equal(a.extras["head_M"], b.extras["head_M"])
