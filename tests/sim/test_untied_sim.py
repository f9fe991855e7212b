"""The untied student and the untied teacher in the simulator.

Conventions: the docs page Theory with ``S -> M`` non-symmetric (section '16. Untied attention').

Penalty identity (weight decay = ``lam d ||M||_*`` at balanced factors, tied objective at
``W_Q = W_K``), the closed-form gradient, the tied limit of gradient flow, float32/float64 paths,
the convex reference against gradient ERM, the untied teacher's norm split and the error messages.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from singlehead import Problem, UntiedMPTarget, simulate, solve_reference
from singlehead.model.attention_layers import FactorizedStudent, UntiedStudent
from singlehead.model.students import Untied, get_student
from singlehead.sim.data import sample_sequences
from singlehead.sim.overlaps import overlaps
from singlehead.sim.simulation import TrainOptions
from singlehead.sim.training import Objective, fit_lbfgs, reference_objective_and_grad


def _balanced(M: np.ndarray, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_Q = U sqrt(s), W_K = V sqrt(s)`` with ``sqrt(p d) M = U s V^T`` (the penalty's minimiser)."""
    d = M.shape[0]
    U, s, Vh = np.linalg.svd(math.sqrt(p * d) * M)
    r = np.sqrt(s)
    return torch.as_tensor(U * r), torch.as_tensor(Vh.T * r)


def test_penalty_identity_nuclear_norm_at_balanced_factors():
    rng = np.random.default_rng(0)
    d, lam = 9, 0.3
    M = rng.standard_normal((d, d)) / math.sqrt(d)
    WQ, WK = _balanced(M, d)
    mod = UntiedStudent(WQ, WK)
    assert torch.allclose(mod.matrix(), torch.as_tensor(M), atol=1e-12)
    nuclear = np.linalg.svd(M, compute_uv=False).sum()
    assert float(mod.regulariser(lam).detach()) == pytest.approx(lam * d * nuclear, rel=1e-12)
    assert float(Untied().penalty_value(M)) == pytest.approx(nuclear, rel=1e-12)
    assert float(Untied().penalty_value(torch.as_tensor(M))) == pytest.approx(nuclear, rel=1e-12)
    # any other factorisation of the same M costs more: W_Q R, W_K R^{-T}
    R = torch.as_tensor(np.eye(d) + 0.3 * rng.standard_normal((d, d)))
    other = UntiedStudent(WQ @ R, WK @ torch.linalg.inv(R).T)
    assert torch.allclose(other.matrix(), mod.matrix(), atol=1e-10)
    assert float(other.regulariser(lam).detach()) > float(mod.regulariser(lam).detach()) * (1 + 1e-3)


@pytest.mark.parametrize("channel", ["seq2lab", "seq2seq", "linear"])
def test_tied_point_reproduces_tied_objective_and_gradient(channel):
    problem = Problem(d=10, T=3, alpha=0.5, channel=channel, noise=0.3, lam=0.05, kappa=0.6)
    data = sample_sequences(problem, problem.target.sample(problem.d, 0), problem.n, 1)
    W = torch.randn(problem.d, problem.p, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tied, untied = FactorizedStudent(W), UntiedStudent(W, W)
    obj = Objective(data, problem.channel, problem.beta, problem.lam)
    assert float(obj(untied)) == pytest.approx(float(obj(tied)), rel=1e-12)
    # L_tied(W) = L_untied(W, W): the tied gradient is the sum of the two untied ones
    assert torch.allclose(untied.W.grad[0] + untied.W.grad[1], tied.W.grad, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("channel", ["seq2lab", "seq2seq", "linear"])
def test_closed_form_gradient_matches_autograd(channel):
    problem = Problem(d=8, T=3, alpha=0.6, channel=channel, noise=0.2, lam=0.1, student="untied", kappa=0.5)
    data = sample_sequences(problem, UntiedMPTarget(0.5).sample(problem.d, 3), problem.n, 4)
    gen = torch.Generator().manual_seed(5)
    mod = problem.student.init_module(problem.d, problem.p, gen, torch.float64, "cpu")
    ref = UntiedStudent(mod.W.detach()[0], mod.W.detach()[1])
    v = float(Objective(data, problem.channel, problem.beta, problem.lam, chunk=7)(mod))
    v_ref = reference_objective_and_grad(ref, data, problem.channel, problem.beta, problem.lam)
    assert v == pytest.approx(v_ref, rel=1e-12)
    assert torch.allclose(mod.W.grad, ref.W.grad, rtol=1e-9, atol=1e-12)


def test_tied_limit_of_gradient_flow():
    """At ``W_Q = W_K`` the two gradients are ``X^T c G Z`` and ``X^T c G^T Z``: equal when
    ``G = dL/dh`` is symmetric. Linear channel: ``G = 2 (h - y)`` with ``h`` and the labels symmetric,
    so the untied fit stays tied (L-BFGS steps are combinations of gradients). Softmax: ``G`` is
    not symmetric (row normalisation), so training leaves the tied manifold."""
    base = Problem(d=10, T=2, alpha=1.0, noise=0.5, lam=0.01, student="untied")
    W = torch.randn(10, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    gap = {}
    for channel in ("linear", "seq2lab"):
        problem = base.replace(channel=channel)
        data = sample_sequences(problem, problem.target.sample(problem.d, 1), problem.n, 2)
        mod = UntiedStudent(W, W)
        obj = Objective(data, problem.channel, problem.beta, problem.lam)
        obj(mod)
        g = mod.W.grad
        gap[channel] = float((g[0] - g[1]).norm() / g.norm())
        if channel == "linear":
            fit_lbfgs(mod, obj, max_steps=200)
            W_fit = mod.W.detach()
            assert float((W_fit[0] - W_fit[1]).norm() / W_fit.norm()) < 1e-10
    assert gap["linear"] < 1e-13
    assert gap["seq2lab"] > 1e-2


@pytest.mark.parametrize("precision", ["float64", "float32", "mixed"])
def test_simulate_untied_precisions(precision):
    problem = Problem(d=12, T=2, alpha=1.0, noise=0.5, lam=0.01, student="untied")
    run = simulate(problem, seed=0, options=TrainOptions(precision=precision, n_test=500))
    ref = simulate(problem, seed=0, options=TrainOptions(precision="float64", n_test=500))
    assert run.converged and run["dtype"] == ("float32" if precision == "float32" else "float64")
    assert len(run["singular_values"]) == 12 and "eigenvalues" not in run.extras
    assert run["q_s"] + run["q_a"] == pytest.approx(run["q"], rel=1e-10)
    assert run["m_s"] + run["m_a"] == pytest.approx(run["m"], rel=1e-10, abs=1e-12)
    # float32 stops ~1e-7 (relative objective) above the minimum: test errors agree to a few 1e-4
    assert run.test_error == pytest.approx(ref.test_error, rel=5e-3)
    assert run["objective"] == pytest.approx(ref["objective"], rel=1e-4)


def test_tied_student_reports_symmetric_split():
    run = simulate(Problem(d=10, T=2, alpha=1.0, noise=0.5), seed=0, options=TrainOptions(n_test=200))
    assert run["q_a"] == 0.0 and run["m_a"] == 0.0 and run["asymmetry"] == 0.0
    assert run["q_s"] == pytest.approx(run["q"], rel=1e-12) and run["m_s"] == pytest.approx(run["m"], rel=1e-12)
    assert len(run["eigenvalues"]) == 10


def test_convex_reference_equals_gradient_erm_linear():
    """Linear channel, kappa = 1: ``min_M`` of the smooth loss plus ``lam d ||M||_*`` is convex and,
    with ``n T^2 = 4 d^2`` measurements of the ``d^2`` entries, strongly convex, so its minimiser is
    unique and the untied ERM over ``(W_Q, W_K)`` (no spurious minima for ``p >= rank``) reaches it.
    Tolerances: both solvers stop at a relative objective change ~1e-9..1e-12 per step, hence
    objectives within 1e-7 and, by strong convexity, ``M`` within ~sqrt(gap/mu) ~ 1e-3 relative."""
    problem = Problem(
        d=20, T=2, alpha=1.0, channel="linear", noise=0.5, lam=0.05, student="untied", target=UntiedMPTarget(0.5)
    )
    run = simulate(problem, seed=3, options=TrainOptions(precision="float64", n_test=200), return_matrices=True)
    from singlehead.sim.data import child_seeds, sample_target

    s_target, s_train, _, _ = child_seeds(3, 4)
    M0 = sample_target(problem.target, problem.d, s_target)
    data = sample_sequences(problem, M0, problem.n, s_train)
    ref = solve_reference(problem, data)
    assert ref.converged
    assert run["objective"] == pytest.approx(ref.objective, rel=1e-7)
    M, Mref = run["S"], ref.S.numpy()
    assert np.linalg.norm(M - Mref) / np.linalg.norm(Mref) < 1e-3
    assert overlaps(Mref, Mref)["asymmetry"] > 0.3  # a genuinely non-symmetric minimiser


def test_untied_teacher_norm_split():
    """``E ||M0||_F^2/d = 1`` exactly; the split is 1/2 + O(1/d). Over 8 draws at d = 200 the
    standard deviation of each part is ~0.007 (measured): tolerance 0.03."""
    d = 200
    parts = np.array(
        [
            [overlaps(M, M)[k] for k in ("Q0", "q_s", "q_a")]
            for M in (UntiedMPTarget(0.5).sample(d, s).numpy() for s in range(8))
        ]
    )
    Q0, qs, qa = parts.mean(axis=0)
    assert Q0 == pytest.approx(1.0, abs=0.03)
    assert qs == pytest.approx(0.5, abs=0.03) and qa == pytest.approx(0.5, abs=0.03)
    M = UntiedMPTarget(0.25).sample(40, 0).numpy()
    assert np.linalg.matrix_rank(M) == 10 and not np.allclose(M, M.T)


def test_problem_round_trip_and_registry():
    problem = Problem(d=16, student="untied", kappa=0.5, target=UntiedMPTarget(kappa0=0.25))
    again = Problem.from_dict(json.loads(json.dumps(problem.to_dict())))
    assert again == problem and again.target == UntiedMPTarget(0.25)
    assert get_student("untied").symmetric is False and get_student("factorized").symmetric is True
    assert problem.student.rank_cap(0.5) == 0.5 and problem.student.rank_cap(1.0) is None


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: UntiedMPTarget(kappa0=0.0), "kappa0"),
        (lambda: UntiedMPTarget(kappa0=1.5), "kappa0"),
        (lambda: Problem(student="untied", kappa=1.5), "kappa"),
        (lambda: Problem(student="untie"), "student"),
        (lambda: Problem.from_dict({"target": {"kind": "untied"}}), "target kind"),
        (lambda: UntiedStudent(torch.zeros(3, 2), torch.zeros(3, 3)), "WQ and WK"),
    ],
)
def test_validation_errors_name_the_parameter(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_cli_simulate_untied(capsys, usage_error):
    from singlehead.cli import main

    main(
        [
            "simulate",
            "--student",
            "untied",
            "--target",
            "untied_mp",
            "--kappa0",
            "0.5",
            "--d",
            "8",
            "--n-test",
            "100",
            "--json",
        ]
    )
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["problem"]["student"] == "untied" and rec["problem"]["target"]["kind"] == "untied_mp"
    assert len(rec["singular_values"]) == 8 and 0 < rec["asymmetry"]
    usage_error(["simulate", "--target", "untied_mp", "--gamma", "1.0"], "target")


def test_fixed_matrix_predictions_and_trajectory():
    """``measure_estimate`` without a module predicts with the non-symmetric ``M`` itself (not its
    symmetric part), and a recorded trajectory holds the top singular values."""
    from singlehead.sim.simulation import measure_estimate

    problem = Problem(d=8, T=3, alpha=0.5, noise=0.2, student="untied", target=UntiedMPTarget(0.5))
    M0 = problem.target.sample(problem.d, 0)
    data = sample_sequences(problem, M0, 50, 1)
    mod = problem.student.init_module(problem.d, problem.p, torch.Generator().manual_seed(2), torch.float64, "cpu")
    M = mod.matrix().detach().numpy()
    with_module, _ = measure_estimate(problem, M, M0.numpy(), data, data, student=mod)
    without, extras = measure_estimate(problem, M, M0.numpy(), data, data)
    for key in ("test_error", "train_error", "penalty", "matrix_error"):
        assert without[key] == pytest.approx(with_module[key], rel=1e-12)
    assert extras["asymmetry"] > 0.5
    run = simulate(problem, seed=0, options=TrainOptions(n_test=100, record_every=5, record_top=3))
    traj = run["trajectory"]
    assert "top_eigenvalues" not in traj and len(traj["top_singular_values"][-1]) == 3
    assert all(a >= b >= 0 for a, b in zip(traj["top_singular_values"][-1], traj["top_singular_values"][-1][1:]))


@pytest.mark.parametrize(
    "changes,name", [({"student": "untied"}, "student"), ({"target": UntiedMPTarget(0.5)}, "target")]
)
def test_amp_refuses_non_symmetric_problems(changes, name):
    """AMP's matrix step denoises eigenvalues of a symmetric estimate: an untied student or teacher
    would give silently wrong numbers, so it is refused."""
    from singlehead.amp import run_amp

    problem = Problem(d=6, T=2, alpha=0.5).replace(**changes)
    data = sample_sequences(problem, problem.target.sample(problem.d, 0), problem.n, 1)
    with pytest.raises(ValueError, match=name):
        run_amp(problem, data)
