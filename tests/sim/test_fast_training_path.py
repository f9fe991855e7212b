"""The fast training path: closed-form gradient, L-BFGS stopping and polish,
TrainOptions, precision policy, trajectory recording, thread policy, emergence figure.

Speed itself is measured by ``benchmarks/bench_training.py``, never here.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
import torch

from singlehead.model.problem import MPTarget, PowerLawTarget, Problem
from singlehead.model.students import init_student
from singlehead.sim.data import child_seeds, generator, sample_sequences, sample_target
from singlehead.sim.simulation import TrainOptions, simulate
from singlehead.sim.training import Objective, fit_lbfgs, reference_objective_and_grad, step_flops

# the softmax channels need T >= 2 (with one token their output does not depend on the logits)
CASES = [
    (ch, T, st)
    for ch, T, st in itertools.product(["seq2lab", "seq2seq", "linear"], [1, 2, 3], ["factorized", "direct"])
    if ch == "linear" or T >= 2
]


@pytest.mark.parametrize("channel,T,student", CASES)
def test_closed_form_gradient_matches_autograd(channel, T, student):
    p = Problem(
        d=9,
        T=T,
        alpha=1.5,
        channel=channel,
        noise=0.3,
        lam=0.07,
        kappa=0.67,
        student=student,
        beta=1.0 if channel == "linear" else 1.7,
    )
    S0 = sample_target(p.target, p.d, 0)
    data = sample_sequences(p, S0, p.n, 1)
    st = init_student(student, p.d, p.p, generator(2), torch.float64, "cpu")
    v_ref = reference_objective_and_grad(st, data, channel, p.beta, p.lam)
    param = next(st.parameters())
    g_ref = param.grad.clone()
    for batch_size, chunk in ((None, None), (37, None), (None, 5), (50, 7)):
        param.grad = None
        v = float(Objective(data, channel, p.beta, p.lam, batch_size=batch_size, chunk=chunk)(st))
        assert v == pytest.approx(v_ref, rel=1e-12)
        torch.testing.assert_close(param.grad, g_ref, rtol=1e-10, atol=1e-12)


def test_objective_without_backward_leaves_grad_alone():
    p = Problem(d=8, T=2, alpha=1.0, noise=0.2)
    data = sample_sequences(p, sample_target(p.target, p.d, 0), p.n, 1)
    st = init_student("factorized", p.d, p.p, generator(2), torch.float64, "cpu")
    Objective(data, p.channel, p.beta, p.lam)(st, backward=False)
    assert st.W.grad is None


def test_step_flops_counts_the_two_gemms():
    assert step_flops(10000, 2, 100, 100) == 4 * 10000 * 2 * 100 * 100 + 4 * 10000 * 4 * 100


def _instance(p: Problem, seed: int = 0):
    s_target, s_train, _, s_init = child_seeds(seed, 4)
    S0 = sample_target(p.target, p.d, s_target)
    return sample_sequences(p, S0, p.n, s_train), s_init


def test_lbfgs_relative_rule_reaches_the_long_run_objective():
    """The relative-change rule stops within 1e-7 of a fit run 4x longer with a 1e-13 rule."""
    p = Problem(d=24, T=2, alpha=1.0, noise=0.5, lam=0.01)
    data, s_init = _instance(p)
    obj = Objective(data, p.channel, p.beta, p.lam)
    st = init_student("factorized", p.d, p.p, generator(s_init), torch.float64, "cpu")
    info = fit_lbfgs(st, obj)
    assert info.converged
    st2 = init_student("factorized", p.d, p.p, generator(s_init), torch.float64, "cpu")
    long = fit_lbfgs(st2, obj, rtol=1e-13, max_steps=4 * info.steps)
    assert long.objective <= info.objective * (1 + 1e-12)
    assert (info.objective - long.objective) / long.objective < 1e-7


def test_float32_fit_with_float64_polish_reaches_the_float64_objective():
    p = Problem(d=24, T=2, alpha=1.0, noise=0.5, lam=0.01)
    data, s_init = _instance(p)
    obj = Objective(data, p.channel, p.beta, p.lam)
    st64 = init_student("factorized", p.d, p.p, generator(s_init), torch.float64, "cpu")
    ref = fit_lbfgs(st64, obj)
    st = init_student("factorized", p.d, p.p, generator(s_init), torch.float32, "cpu")
    info = fit_lbfgs(st, obj, polish_dtype=torch.float64)
    assert st.W.dtype == torch.float64 and info.polish_steps > 0
    assert abs(info.objective - ref.objective) / ref.objective < 1e-6


@pytest.mark.parametrize("precision,student", [("mixed", "factorized"), ("float32", "factorized"), ("mixed", "direct")])
def test_precision_policies_give_the_float64_test_error_within_its_standard_error(precision, student):
    p = Problem(d=30, T=2, alpha=1.0, noise=0.5, lam=0.01, student=student)
    a = simulate(p, 3, options=TrainOptions(n_test=4000, precision="float64"))
    b = simulate(p, 3, options=TrainOptions(n_test=4000, precision=precision))
    assert a["dtype"] == "float64" and b["dtype"] == ("float64" if precision == "mixed" else "float32")
    assert b["precision"] == precision and b["options"]["precision"] == precision
    # Same data, same initialisation: the two fits land on the same minimiser.
    assert abs(a.test_error - b.test_error) < 0.5 * a["test_error_se"]
    assert abs(a["objective"] - b["objective"]) / a["objective"] < (1e-6 if precision == "mixed" else 1e-4)


BAD_OPTIONS = [
    ({"optimizer": "sgd"}, "optimizer"),
    ({"precision": "float16"}, "precision"),
    ({"max_steps": 0}, "max_steps"),
    ({"max_steps": 2.5}, "max_steps"),
    ({"tol": -1.0}, "tol"),
    ({"lr": 0.0}, "lr"),
    ({"batch_size": 0}, "batch_size"),
    ({"n_test": 1}, "n_test"),
    ({"rank_tol": -1e-3}, "rank_tol"),
    ({"record_every": 0}, "record_every"),
    ({"record_top": 0}, "record_top"),
    ({"init_scale": float("nan")}, "init_scale"),
    ({"polish_rtol": 0.0}, "polish_rtol"),
]


@pytest.mark.parametrize("kwargs,name", BAD_OPTIONS)
def test_train_options_validate(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        TrainOptions(**kwargs)


def test_train_options_identify_a_run():
    o = TrainOptions(optimizer="adam", n_test=500)
    assert o.precision is None
    k_cpu = o.key_fields("cpu")
    assert k_cpu["precision"] == "mixed" and k_cpu["device"] == "cpu" and k_cpu["optimizer"] == "adam"
    assert o.key_fields("cuda")["precision"] == "float32"
    assert TrainOptions(**o.to_dict()) == o
    with pytest.raises(ValueError):
        o.replace(lr=-1)


def test_solver_settings_travel_only_in_options():
    p = Problem(d=10, T=2, alpha=0.5, noise=0.2)
    with pytest.raises(TypeError):
        simulate(p, 1, n_test=300)  # a loose keyword is refused, not silently applied


def test_trajectory_is_recorded_every_k_steps():
    p = Problem(d=16, T=2, alpha=1.0, noise=0.3, target=PowerLawTarget(1.5))
    r = simulate(p, 0, options=TrainOptions(optimizer="adam", max_steps=60, record_every=20, record_top=4, n_test=500))
    tr = r["trajectory"]
    assert tr["step"][:3] == [20, 40, 60]
    assert all(len(tr[k]) == len(tr["step"]) for k in tr)
    top = np.asarray(tr["top_eigenvalues"])
    assert top.shape == (len(tr["step"]), 4) and np.all(np.diff(top, axis=1) <= 1e-12)
    np.testing.assert_allclose(top[-1], r["eigenvalues"][:4], rtol=1e-10, atol=1e-12)
    assert tr["test_error"][-1] == pytest.approx(r.test_error, rel=1e-12)
    assert tr["train_error"][-1] == pytest.approx(r.train_error, rel=1e-12)


def test_lbfgs_trajectory_counts_iterations():
    p = Problem(d=12, T=2, alpha=1.0, noise=0.3)
    r = simulate(p, 0, options=TrainOptions(record_every=5, n_test=300))
    steps = r["trajectory"]["step"]
    assert all(s % 5 == 0 for s in steps[:-1]) and steps[-1] == r.iterations
    obj = r["trajectory"]["objective"]
    assert obj[-1] <= obj[0]


def test_thread_policy():
    from singlehead.runs import threads

    assert threads.threads_per_worker(2, cores=2) == 1
    assert threads.threads_per_worker(1, cores=2) == 2
    assert threads.threads_per_worker(8, cores=2) == 1
    with pytest.raises(ValueError, match="^workers must be"):
        threads.threads_per_worker(0)
    with pytest.raises(ValueError, match="^threads must be"):
        threads.configure(workers=2, threads=2, cores=2)
    saved_env = {v: os.environ.get(v) for v in (*threads.THREAD_ENV_VARS, threads.USER_LIMIT_VAR)}
    saved = torch.get_num_threads()
    try:
        os.environ.pop("OMP_NUM_THREADS", None)
        os.environ.pop(threads.USER_LIMIT_VAR, None)
        assert threads.configure(workers=1, cores=2) == 2
        assert threads.configure(workers=1, cores=4) == 4  # the OMP_NUM_THREADS it set does not cap a later call
        assert threads.configure(workers=2, cores=2) == 1
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert threads.configure(workers=1, cores=2) == 2  # in-process work after a parallel stage: every core
        assert torch.get_num_threads() == 2
        assert threads.joblib_config(2)["inner_max_num_threads"] == threads.threads_per_worker(2)
        os.environ.pop(threads.USER_LIMIT_VAR)
        os.environ["OMP_NUM_THREADS"] = "1"  # a user's limit caps every later call
        assert threads.configure(workers=1, cores=2) == 1
        assert threads.configure(workers=1, cores=4) == 1
    finally:
        torch.set_num_threads(saved)
        for v, x in saved_env.items():
            if x is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = x


def test_emergence_data_and_figure(tmp_path):
    from singlehead.figures.emergence import emergence_data, plot_emergence

    p = Problem(d=12, T=1, alpha=2.0, channel="linear", noise=0.1, lam=0.05, target=PowerLawTarget(1.5))
    o = TrainOptions(
        optimizer="adam", lr=0.02, init_scale=1e-3, max_steps=60, n_test=300, record_every=10, record_top=3
    )
    data = emergence_data(p, o, theory=False)
    assert data["trajectory"]["step"][0] == 10 and len(data["final"]["top_eigenvalues"]) == 3
    # Small initialisation: S starts near zero and its top eigenvalue grows towards the target's.
    top = np.asarray(data["trajectory"]["top_eigenvalues"])[:, 0]
    assert top[0] < top[-1]
    data["theory"] = {"test_error": 0.1, "train_error": 0.05, "outliers": [2.0, 1.0]}
    files = plot_emergence(data, tmp_path / "em.png")
    assert all(f.exists() and f.stat().st_size > 1000 for f in files)
    with pytest.raises(ValueError, match="record_every"):
        emergence_data(p, o.replace(record_every=None), theory=False)


def test_mp_target_unaffected_by_init_scale_default():
    p = Problem(d=10, T=2, alpha=0.5, target=MPTarget(0.5))
    a = simulate(p, 2, options=TrainOptions(n_test=200, max_steps=30))
    b = simulate(p, 2, options=TrainOptions(n_test=200, max_steps=30, init_scale=1.0))
    assert np.array_equal(a["eigenvalues"], b["eigenvalues"])


def test_cli_simulate_builds_train_options(capsys, usage_error):
    import json

    from singlehead.cli import main

    main(
        [
            "simulate",
            "--d",
            "8",
            "--alpha",
            "0.5",
            "--n-test",
            "50",
            "--precision",
            "mixed",
            "--record-every",
            "5",
            "--max-steps",
            "30",
            "--json",
        ]
    )
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["precision"] == "mixed" and rec["options"]["record_every"] == 5 and rec["options"]["device"] == "cpu"
    assert rec["trajectory"]["step"][0] == 5
    usage_error(["simulate", "--record-every", "0"], "record_every")
    usage_error(["simulate", "--lr", "-1"], "lr")
    usage_error(["simulate", "--threads", "64"], "threads")


def test_fig_emergence_for_the_reproduction():
    """The reproduction figure (smoke preset): figure, tidy table and agreement rows."""
    from types import SimpleNamespace

    from singlehead.figures.emergence import EmergenceSpec
    from singlehead.figures.figspec import FIGURES, build

    store: dict = {}
    ctx = SimpleNamespace(cached=lambda name, compute: store.setdefault(name, compute()))
    out = build(FIGURES["emergence"], ctx, EmergenceSpec.smoke())
    assert out.name == "emergence" and len(store) == 1
    assert {"step", "test_error", "eig_1"} <= set(out.table.columns)
    assert list(out.agreement.quantity[:2]) == ["test error", "outlier 1"]
    assert np.isfinite(out.agreement.theory).all() and np.isfinite(out.agreement.simulation).all()
