"""Multi-head tied attention: ``Problem.heads`` / ``Problem.teacher_heads`` in data, training, metrics and theory.

The single-head model (both counts 1) must be the code path it always was: same numbers, same keys.
The linear channel with ``H`` heads is single-head ERM over ``S_eff = mean_h S_h`` with ``kappa -> H kappa``
and ``lam -> H lam`` (checked on one instance, where both fits reach the same convex minimum), and its
theory (``H0`` MP teacher heads included) is checked against simulations extrapolated in ``1/d``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
import torch

from singlehead import MPTarget, Problem, simulate, theory, theory_curve
from singlehead.model.attention_layers import MultiHeadStudent, init_multihead
from singlehead.runs.cache import result_key
from singlehead.sim.data import logits, sample_sequences, sample_target, sample_teacher
from singlehead.sim.objective import Objective, reference_objective_and_grad
from singlehead.sim.overlaps import head_overlaps, match_heads
from singlehead.sim.simulation import TrainOptions
from singlehead.state_evolution import SEOptions, effective_single_head
from singlehead.state_evolution.models import model_for
from singlehead.state_evolution.multihead_se import MultiHeadOptions, multihead_options, multihead_theory

F64 = TrainOptions(precision="float64", n_test=500)
# a single-head problem whose keys and float64 CPU numbers were recorded before heads existed
P1 = Problem(d=20, T=2, alpha=1.0, channel="linear", noise=0.2, lam=0.05, kappa=0.5, target=MPTarget(kappa0=0.5))


# ---------------------------------------------------------------- the single-head model is unchanged
def test_one_head_keeps_dict_repr_and_keys():
    assert Problem(heads=1, teacher_heads=1) == Problem()
    assert "heads" not in P1.to_dict() and "teacher_heads" not in P1.to_dict()
    assert "heads" not in repr(P1)
    # the keys the single-head code gives this problem (they carry NUMERICS_VERSION, 8)
    assert P1.key() == "ee8c2ba14a57a19f0fa9d7bb"
    assert result_key("theory", P1) == "475f4ce361da67a469167784"
    assert result_key("simulation", P1, 3, F64.key_fields("cpu")) == "48fcb55bce973496da1d0885"
    two = P1.replace(heads=2)
    assert two.to_dict()["heads"] == 2 and two.to_dict()["teacher_heads"] == 1 and "heads=2" in repr(two)
    assert two.key() != P1.key() and Problem.from_dict(two.to_dict()) == two


def test_one_head_gives_the_single_head_numbers():
    # float64 CPU numbers of the single-head code (recorded before heads existed); the head code is not on this path
    r = simulate(P1, seed=3, options=F64)
    recorded = {
        "test_error": 0.0686904788249853,
        "train_error": 0.5335700692683466,
        "objective": 0.570514190539565,
        "penalty": 0.03694412127121846,
        "matrix_error": 0.012019952287889378,
        "q": 1.6344043784994011,
    }
    got = {
        "test_error": r.test_error,
        "train_error": r.train_error,
        "objective": r.extras["objective"],
        "penalty": r.penalty,
        "matrix_error": r.matrix_error,
        "q": r.extras["q"],
    }
    assert got == pytest.approx(recorded, rel=1e-12)
    assert "head_M" not in r.extras and "heads" not in r.problem
    # the one-head teacher is the target's sample, bit for bit
    assert torch.equal(sample_teacher(P1, 7), sample_target(P1.target, P1.d, 7))


# ---------------------------------------------------------------- data, objective, predictions
def test_teacher_heads_label_with_the_mean_of_the_heads_outputs():
    p = Problem(d=10, T=3, alpha=0.2, channel="seq2seq", noise=0.3, teacher_heads=3)
    S0 = sample_teacher(p, 5)
    assert S0.shape == (3, 10, 10)
    assert torch.equal(S0[0], sample_target(p.target, p.d, 5))  # the first head is the single-head teacher
    assert not torch.allclose(S0[0], S0[1])
    data = sample_sequences(p, S0, 7, seed=1)
    expect = sum(p.channel.teacher_output(logits(data.X, S0[k]), p.beta0, data.X) for k in range(3)) / 3
    assert torch.allclose(data.y_clean, expect, atol=1e-14)
    # one noise per sequence, shared by the heads: the single-head noisy labels of the same seed carry the same xi
    one = sample_sequences(p.replace(teacher_heads=1), S0[0], 7, seed=1)
    assert torch.equal(one.X, data.X)


@pytest.mark.parametrize("channel,T", [("linear", 2), ("seq2lab", 3), ("seq2seq", 2), ("hardmax", 2)])
def test_closed_form_gradient_matches_autograd(channel, T):
    p = Problem(d=12, T=T, alpha=0.5, channel=channel, heads=3, teacher_heads=2, noise=0.3, lam=0.1)
    data = sample_sequences(p, sample_teacher(p, 1), p.n, 2)
    st = init_multihead(3, 12, 5, torch.Generator().manual_seed(0), torch.float64, "cpu")
    value = float(Objective(data, p.channel, 1.0, p.lam, chunk=7)(st))
    grad = st.W.grad.clone()
    st.W.grad = None
    ref = reference_objective_and_grad(st, data, p.channel, 1.0, p.lam)
    assert value == pytest.approx(ref, rel=1e-12)
    assert torch.allclose(grad, st.W.grad, rtol=1e-10, atol=1e-13)


def test_multihead_module_conventions():
    W = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    m = MultiHeadStudent(W)
    m.W.requires_grad_(False)
    S = m.head_matrices()
    assert torch.allclose(S[1], W[1] @ W[1].T / math.sqrt(3 * 6))
    assert torch.allclose(m.matrix(), S.mean(0))
    X = torch.randn(4, 3, 6, dtype=torch.float64)
    h = m.logits(X)
    assert torch.allclose(h[:, 1], logits(X, S[1]))
    assert float(m.regulariser(0.2)) == pytest.approx(0.2 * 6 * float(torch.diagonal(S, dim1=1, dim2=2).sum()))
    # the first head starts as the single-head student of the same generator
    single = torch.randn(6, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert torch.equal(init_multihead(3, 6, 3, torch.Generator().manual_seed(4), torch.float64, "cpu").W[0], single)


# ---------------------------------------------------------------- the linear channel: H heads = one head of width H p
def test_linear_heads_reach_the_single_head_minimum_with_kappa_times_h():
    """Same data (same seed and data fields): ``H`` heads of ``kappa`` at ``lam`` and one head of ``H kappa`` at
    ``H lam`` minimise the same convex function of ``S_eff`` (``H kappa = 1``: no rank cap)."""
    opts = TrainOptions(precision="float64", n_test=2000, tol=1e-12)
    multi = Problem(d=20, T=2, alpha=1.0, channel="linear", noise=0.2, lam=0.05, kappa=0.5, heads=2)
    single = multi.replace(heads=1, kappa=1.0, lam=0.1)
    a = simulate(multi, seed=1, options=opts, return_matrices=True)
    b = simulate(single, seed=1, options=opts, return_matrices=True)
    assert np.array_equal(a.extras["S0"], b.extras["S0"])
    assert a.extras["objective"] == pytest.approx(b.extras["objective"], rel=1e-8)
    assert a.test_error == pytest.approx(b.test_error, rel=1e-5)
    assert a.penalty == pytest.approx(b.penalty, rel=1e-5)
    assert np.linalg.norm(a.extras["S"] - b.extras["S"]) / np.linalg.norm(b.extras["S"]) < 1e-4
    assert np.allclose(a.extras["S_heads"].mean(0), a.extras["S"])


def test_float32_and_mixed_precision_fits_agree_with_float64():
    p = Problem(d=16, T=2, alpha=1.0, channel="seq2lab", lam=0.01, heads=2, teacher_heads=2)
    ref = simulate(p, seed=0, options=TrainOptions(precision="float64", n_test=500))
    for precision in ("mixed", "float32"):
        r = simulate(p, seed=0, options=TrainOptions(precision=precision, n_test=500))
        assert r.extras["dtype"] == ("float32" if precision == "float32" else "float64")
        assert r.extras["objective"] == pytest.approx(ref.extras["objective"], rel=1e-4)


def _extrapolate(ds: list[int], means: list[float], ses: list[float]) -> tuple[float, float]:
    """Value at 1/d = 0 of the line through two (1/d, mean) points, and its standard error."""
    (x1, x2), (y1, y2), (s1, s2) = [1.0 / d for d in ds], means, ses
    w1, w2 = x2 / (x2 - x1), -x1 / (x2 - x1)  # weights of y1, y2 at x = 0
    return w1 * y1 + w2 * y2, math.hypot(w1 * s1, w2 * s2)


@pytest.mark.slow
def test_linear_theory_of_heads_matches_simulations():
    """H = 2 student heads, H0 = 4 MP teacher heads: theory (single head with kappa' = 1, lam' = H sqrt(H0) lam,
    noise' = H0 noise, kappa0' = H0 kappa0, errors / H0: 0.0421) against ERM at d = 40 and 80 (6 seeds each),
    extrapolated linearly in 1/d (s.e. about 0.002). The wrong maps are far: lam' = H lam or sqrt(H0) lam gives
    0.025, noise' = noise gives 0.032."""
    p = Problem(
        T=2,
        alpha=1.0,
        channel="linear",
        noise=0.05,
        lam=0.5,
        kappa=0.5,
        target=MPTarget(kappa0=0.125),
        heads=2,
        teacher_heads=4,
    )
    th = theory(p)
    assert th.converged and th.problem["heads"] == 2
    means, ses, ds = [], [], [40, 80]
    for d in ds:
        errs = [
            simulate(p.replace(d=d), seed=s, options=TrainOptions(precision="float64", n_test=4000)).test_error
            for s in range(6)
        ]
        means.append(float(np.mean(errs)))
        ses.append(float(np.std(errs, ddof=1) / math.sqrt(len(errs))))
    value, se = _extrapolate(ds, means, ses)
    assert abs(value - th.test_error) < 4 * se, (value, se, th.test_error, means, ses)


# ---------------------------------------------------------------- theory: the map and the refusals
def test_theory_of_heads_is_the_effective_single_head_theory():
    p = Problem(
        T=2,
        alpha=1.0,
        channel="linear",
        noise=0.2,
        lam=0.05,
        kappa=0.25,
        target=MPTarget(kappa0=0.5),
        heads=3,
        teacher_heads=2,
    )
    eff, c2 = effective_single_head(p)
    assert (eff.kappa, eff.heads, eff.teacher_heads, eff.target) == (0.75, 1, 1, MPTarget(kappa0=1.0))
    assert (eff.lam, eff.noise, c2) == (pytest.approx(3 * math.sqrt(2) * 0.05), pytest.approx(0.4), 0.5)
    r, e = theory(p), theory(eff)
    assert r.test_error == pytest.approx(c2 * e.test_error, rel=1e-12)
    assert r.extras["q"] == pytest.approx(c2 * e.extras["q"], rel=1e-12)
    assert r.extras["Q0"] == pytest.approx(0.5 + 0.5)  # Tr S0_eff^2/d -> 1/H0 + kappa0
    assert r.problem == p.to_dict() and r.extras["effective_problem"] == eff.to_dict()
    # a curve along alpha (the command line's path) gives the points theory gives, to the solver's tolerance
    curve = theory_curve(p, [0.5, 1.0])
    assert curve[1].test_error == pytest.approx(r.test_error, rel=1e-4)
    assert all(c.problem["heads"] == 3 for c in curve)
    # one teacher head: the target is kept, only the student side maps
    eff1, c21 = effective_single_head(p.replace(teacher_heads=1, kappa=0.5))
    assert (eff1.target, eff1.kappa, c21) == (p.target, 1.0, 1.0)


# a multi-head softmax state evolution small enough for a unit test (not converged: the route, not the numbers)
SMALL_MH = MultiHeadOptions(n_points=32, n_scrambles=2, sample_dim=12, sample_draws=2, max_iter=2)
#: the same settings as theory()'s options
SMALL_SE = SEOptions(n_points=32, n_scrambles=2, sample_dim=12, sample_draws=2, max_iter=2)


@pytest.mark.parametrize("channel,heads,teacher_heads", [("seq2lab", 2, 2), ("seq2seq", 2, 1), ("hardmax", 1, 2)])
def test_softmax_theory_with_heads_routes_to_the_multihead_state_evolution(channel, heads, teacher_heads):
    p = Problem(T=2, channel=channel, heads=heads, teacher_heads=teacher_heads, noise=0.5, lam=0.01)
    ansatz = "unspecialised" if heads == teacher_heads else None  # one fixed point, not the lowest of several
    se = SMALL_SE.replace(ansatz=ansatz)
    r, ref = theory(p, options=se), multihead_theory(p, dataclasses.replace(SMALL_MH, ansatz=ansatz))
    for name in ("test_error", "train_error", "matrix_error", "converged", "iterations"):
        assert getattr(r, name) == getattr(ref, name), name
    assert r.extras["q"] == ref.extras["q"] and r.extras["m"] == ref.extras["m"]
    assert r.extras["experimental"] is True and r.extras["method"] == "multihead_se"
    assert r.extras["residual"] == ref.extras["residuals"][-1] and "experimental" in r.message
    assert r.problem == p.to_dict()
    # an SEOptions resolved for the heads model is carried field by field (node_seed: the nodes and the prior draws)
    prepared = model_for(p).prepare(SEOptions(n_points=32, node_seed=3))
    assert multihead_options(prepared) == MultiHeadOptions(n_points=32, node_seed=3, sample_seed=3)
    # a curve: point by point, each started from the previous converged one (here none converges: cold starts)
    curve = theory_curve(p, [1.0, 0.5], options=se)
    assert curve[0].test_error == r.test_error and curve[1].problem["alpha"] == 0.5
    assert curve[1].test_error == theory(p.replace(alpha=0.5), options=se).test_error


def test_a_routed_point_starts_from_a_given_neighbour():
    p = Problem(T=2, heads=2, teacher_heads=2, noise=0.5, lam=0.01)
    se = SMALL_SE.replace(ansatz="unspecialised")
    a = theory(p, options=se)
    b = theory(p.replace(alpha=1.1), options=se, init=a)
    start = (a.extras["head_Q"], a.extras["head_M"], a.extras["head_Sigma"])
    c = multihead_theory(p.replace(alpha=1.1), dataclasses.replace(SMALL_MH, start=start))
    assert b.test_error == c.test_error and b.test_error != theory(p.replace(alpha=1.1), options=se).test_error


@pytest.mark.parametrize(
    "change,kwargs,match",
    [
        (dict(heads=5), {}, r"heads must be in 1\.\.4"),
        (dict(teacher_heads=6), {}, r"teacher_heads must be in 1\.\.4"),
        (dict(T=4), {}, r"T must be in 2\.\.3"),
        ({}, dict(prior="finite"), r"prior must be 'auto'"),
        ({}, dict(options=SEOptions(method="iterate")), r"options\.method does not apply to the heads"),
        ({}, dict(init=(1.0, 0.5, 1.0)), r"init must be None or a Result"),
    ],
)
def test_unsupported_multihead_softmax_theory_is_refused_by_name(change, kwargs, match):
    p = Problem(T=2, heads=2, teacher_heads=2).replace(**change)
    with pytest.raises(ValueError, match=match):
        theory(p, **kwargs)
    if "init" not in kwargs:
        with pytest.raises(ValueError, match=match):
            theory_curve(p, [0.5, 1.0], **kwargs)


@pytest.mark.parametrize("channel", ["seq2lab", "linear"])
def test_one_head_theory_is_the_single_head_theory(channel, capsys):
    from singlehead.cli import main

    p = Problem(T=2, alpha=1.0, channel=channel, noise=0.5, lam=0.01, target=MPTarget(kappa0=0.5))
    one = p.replace(heads=1, teacher_heads=1)
    a, b = theory(p), theory(one)
    for x, y in (
        (a.test_error, b.test_error),
        (a.train_error, b.train_error),
        (a.extras["q"], b.extras["q"]),
        (a.extras["m"], b.extras["m"]),
    ):
        assert abs(x - y) <= 1e-6
    args = ["theory", "--task", channel, "--T", "2", "--alpha", "1", "--noise", "0.5", "--lam", "0.01", "--json"]
    main(args + ["--heads", "1", "--teacher-heads", "1"])
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    for name in ("test_error", "train_error", "q", "m"):
        assert abs(rec[name] - (a.extras[name] if name in ("q", "m") else getattr(a, name))) <= 1e-6, name


def test_teacher_heads_of_a_target_without_a_single_head_law_are_refused():
    p = Problem(T=1, channel="linear", target="power_law", teacher_heads=2)
    with pytest.raises(ValueError, match="teacher_heads"):
        theory(p)
    theory(p.replace(teacher_heads=1, heads=2))  # student heads alone: any target


# ---------------------------------------------------------------- matching the heads
def test_matching_recovers_a_permutation_of_the_teacher_heads():
    rng = np.random.default_rng(0)
    d = 30
    S0 = np.stack([(lambda A: A @ A.T / d)(rng.standard_normal((d, 5))) for _ in range(3)])
    perm = [2, 0, 1]  # student head h is teacher head perm[h], slightly perturbed
    S = S0[perm] + 0.01 * rng.standard_normal((3, d, d))
    out = head_overlaps(S, S0)
    assert out["head_order"] == [1, 2, 0] and out["teacher_head_order"] == [0, 1, 2]
    M = out["head_M"]
    assert np.all(np.diag(M) > M.max(axis=1, initial=0) - 1e-12)
    assert np.allclose(np.diag(M), np.diag(out["head_Q0"]), rtol=0.05)
    assert np.allclose(out["head_Q"], out["head_Q"].T)
    # more student heads than teacher heads: the paired ones first, the spare one last
    out = head_overlaps(np.concatenate([S, 0.1 * S0[:1]]), S0[:2])
    assert out["head_order"][:2] == [1, 2] and sorted(out["head_order"]) == [0, 1, 2, 3]
    # fewer: the paired teacher heads first
    out = head_overlaps(S[:1], S0)
    assert out["head_order"] == [0] and out["teacher_head_order"][0] == 2


def test_matching_maximises_the_total_overlap():
    rng = np.random.default_rng(1)
    for shape in [(4, 4), (3, 5), (5, 2)]:
        M = rng.standard_normal(shape)
        rows, cols = match_heads(M)
        k = min(shape)
        if shape[0] <= shape[1]:  # every student head paired: try every injective map to the teacher heads
            best = max(sum(M[h, c] for h, c in enumerate(cs)) for cs in itertools.permutations(range(shape[1]), k))
        else:
            best = max(sum(M[r, c] for c, r in enumerate(rs)) for rs in itertools.permutations(range(shape[0]), k))
        assert sum(M[rows[i], cols[i]] for i in range(k)) == pytest.approx(best)
        assert sorted(rows) == list(range(shape[0])) and sorted(cols) == list(range(shape[1]))


def test_simulation_reports_matched_head_overlaps():
    p = Problem(d=16, T=2, alpha=1.0, channel="seq2lab", lam=0.01, heads=3, teacher_heads=2)
    r = simulate(p, seed=0, options=TrainOptions(n_test=300), return_matrices=True)
    S, S0 = r.extras["S_heads"], r.extras["S0_heads"]
    assert S.shape == (3, 16, 16) and S0.shape == (2, 16, 16)
    rows, cols = r.extras["head_order"], r.extras["teacher_head_order"]
    assert r.extras["head_M"][1, 0] == pytest.approx(np.sum(S[rows[1]] * S0[cols[0]]) / 16)
    assert r.extras["head_Q"].shape == (3, 3) and r.extras["head_Q0"].shape == (2, 2)
    # the standard metrics are those of the means over heads; the penalty sums the heads
    assert np.allclose(r.extras["S"], S.mean(0)) and np.allclose(r.extras["S0"], S0.mean(0))
    assert r.matrix_error == pytest.approx(np.sum((S.mean(0) - S0.mean(0)) ** 2) / 16)
    assert r.penalty == pytest.approx(0.01 * np.trace(S.sum(0)) / 16)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "field,value",
    [
        ("heads", 0),
        ("heads", -1),
        ("heads", 1.5),
        ("heads", "2"),
        ("heads", True),
        ("teacher_heads", 0),
        ("teacher_heads", 2.0),
    ],
)
def test_bad_head_counts_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=f"{field} must be an integer >= 1"):
        Problem(**{field: value})


def test_heads_need_the_factorized_student_and_a_symmetric_teacher():
    for student in ("direct", "untied"):
        with pytest.raises(ValueError, match="heads must be 1 for the"):
            Problem(student=student, heads=2)
    with pytest.raises(ValueError, match="teacher_heads must be 1 for the non-symmetric target"):
        Problem(target="untied_mp", teacher_heads=2)
    with pytest.raises(ValueError, match="M must be a finite"):
        match_heads(np.array([[np.nan]]))
    with pytest.raises(ValueError, match="stacks of d x d heads"):
        head_overlaps(np.zeros((2, 3, 3)), np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="W must have shape"):
        MultiHeadStudent(torch.zeros(3, 2))


# ---------------------------------------------------------------- command line
def test_cli_heads(capsys, usage_error):
    from singlehead.cli import main

    main(
        ["simulate", "--d", "12", "--alpha", "0.5", "--heads", "2", "--teacher-heads", "2", "--n-test", "100", "--json"]
    )
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rec["problem"]["heads"] == 2 and np.array(rec["head_M"]).shape == (2, 2)
    main(["simulate", "--d", "12", "--alpha", "0.5", "--n-test", "100", "--json"])
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert "heads" not in rec["problem"] and "head_M" not in rec
    main(["theory", "--task", "linear", "--T", "1", "--alpha", "1", "--heads", "2", "--teacher-heads", "2", "--json"])
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rec["problem"]["teacher_heads"] == 2 and rec["effective_problem"]["target"]["kappa0"] == 1.0
    usage_error(["theory", "--heads", "2", "--T", "4"], "T must be in 2..3")
    usage_error(["theory", "--heads", "2", "--prior", "finite"], "prior must be 'auto'")
    usage_error(["theory", "--task", "linear", "--heads", "2", "--stability"], "stability")
    usage_error(["simulate", "--heads", "0"], "heads")


def test_single_head_routes_refuse_several_heads():
    from singlehead import bayes_optimal, interpolation_threshold
    from singlehead.amp import amp

    p = Problem(d=10, T=1, channel="linear", heads=2)
    for route in (bayes_optimal, interpolation_threshold, amp):
        with pytest.raises(ValueError, match="heads must be 1 for .* single-head model only"):
            route(p)
    with pytest.raises(ValueError, match="heads must be 1 for the Bayes"):
        bayes_optimal(p.replace(heads=1, teacher_heads=3))


@pytest.mark.slow
def test_cli_theory_of_softmax_heads_runs_the_multihead_state_evolution(capsys):
    from singlehead.cli import main

    main(
        [
            "theory",
            "--T",
            "2",
            "--alpha",
            "1",
            "--noise",
            "0.5",
            "--lam",
            "0.01",
            "--heads",
            "2",
            "--teacher-heads",
            "2",
            "--n-points",
            "256",
            "--json",
        ]
    )
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rec["experimental"] is True and rec["method"] == "multihead_se" and rec["problem"]["heads"] == 2
    assert rec["converged"] and rec["residual"] < 1e-4 and np.array(rec["head_M"]).shape == (2, 2)
    p = Problem(T=2, alpha=1.0, noise=0.5, lam=0.01, heads=2, teacher_heads=2)
    assert rec["test_error"] == pytest.approx(theory(p, options=SEOptions(n_points=256)).test_error, rel=1e-12)
