"""GAMP (singlehead.amp): operator adjointness, exact divergence, ERM fixed point = convex minimiser,
SE tracking, Bayes-GAMP vs the Bayes-optimal SE, result fields and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from singlehead.amp import (
    AMPOptions,
    SensingOperator,
    amp,
    bayes_se_iterates,
    erm_objective,
    instance_prior,
    run_amp,
    se_iterates,
    spectral_divergence,
)
from singlehead.model.problem import MPTarget, Problem
from singlehead.model.results import METRIC_FIELDS
from singlehead.sim.convex import solve_reference
from singlehead.sim.data import child_seeds, sample_sequences, sample_target

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _instance(p: Problem, seed: int = 0):
    s_t, s_tr, _, _ = child_seeds(seed, 4)
    S0 = sample_target(p.target, p.d, s_t)
    return S0, sample_sequences(p, S0, p.n, s_tr)


def test_sensing_operator_adjoint_and_logits():
    rng = np.random.default_rng(1)
    n, T, d = 50, 3, 12
    X = rng.standard_normal((n, T, d))
    op = SensingOperator(X)
    A = rng.standard_normal((d, d))
    A = A + A.T
    g = rng.standard_normal((n, op.K))
    assert np.isclose(np.sum(op.forward(A) * g), np.sum(A * op.adjoint(g)), rtol=1e-12)
    # every component has variance Tr S^2/d (diagonal logits divided by sqrt 2)
    Xb = rng.standard_normal((20000, 2, d))
    v = SensingOperator(Xb).forward(A)
    assert np.allclose(v.var(axis=0) / (np.sum(A * A) / d), 1.0, atol=0.05)


def test_spectral_divergence_matches_numerical_jacobian():
    rng = np.random.default_rng(2)
    d, thr = 6, 0.3
    R = rng.standard_normal((d, d))
    R = (R + R.T) / 2

    def F(M):
        nu, U = np.linalg.eigh(M)
        return (U * np.maximum(nu - thr, 0)) @ U.T

    # Frobenius-orthonormal basis of symmetric matrices
    basis = []
    for i in range(d):
        for j in range(i, d):
            E = np.zeros((d, d))
            if i == j:
                E[i, i] = 1.0
            else:
                E[i, j] = E[j, i] = 1 / math.sqrt(2)
            basis.append(E)
    h = 1e-6
    num = sum(np.sum(E * (F(R + h * E) - F(R - h * E))) / (2 * h) for E in basis)
    nu = np.linalg.eigvalsh(R)
    exact = spectral_divergence(nu, np.maximum(nu - thr, 0), (nu > thr).astype(float))
    assert abs(num - exact) < 1e-5


@pytest.mark.parametrize("student", ["factorized", "direct"])
def test_linear_channel_fixed_point_is_convex_minimiser(student):
    d = 60 if student == "factorized" else 40
    p = Problem(d=d, T=2, alpha=1.0, channel="linear", noise=0.5, lam=0.05, student=student)
    S0, data = _instance(p)
    run = run_amp(p, data, S0=S0, options=AMPOptions(max_iter=300, tol=1e-10))
    assert run.converged
    ref = solve_reference(p, data, max_iter=5000)
    dS = float(np.sum((run.S - ref.S.numpy()) ** 2)) / d
    assert dS < 1e-3
    assert abs(run.history["objective"][-1] - ref.objective) / ref.objective < 1e-4


def test_softmax_fixed_point_is_stationary():
    p = Problem(d=40, T=2, alpha=0.5, noise=0.2, lam=0.02)
    S0, data = _instance(p)
    run = run_amp(p, data, S0=S0, options=AMPOptions(max_iter=400, tol=1e-9))
    assert run.history["residual"][-2] < 1e-6
    # proximal-gradient from the AMP point barely moves and cannot lower the objective much
    ref = solve_reference(p, data, S_init=torch.as_tensor(run.S), max_iter=300, tol=1e-13)
    obj = run.history["objective"][-1]
    assert ref.objective > obj - 1e-6 * abs(obj)
    assert float(np.sum((ref.S.numpy() - run.S) ** 2)) / p.d < 1e-4
    op = SensingOperator(data.X.numpy())
    assert math.isclose(erm_objective(p, op, data.y.numpy(), run.S)[0], obj, rel_tol=1e-12)


def test_linear_iterates_follow_state_evolution():
    # linear channel: the SE output side is in closed form; the SE uses this instance's spectrum
    p = Problem(d=60, T=2, alpha=1.0, channel="linear", noise=0.5, lam=0.05)
    S0, data = _instance(p)
    run = run_amp(p, data, S0=S0, options=AMPOptions(max_iter=8, tol=0.0, adaptive=False))
    h = run.history
    se = se_iterates(p, h["q"][0], h["m"][0], h["Sigma"][0], 8, prior=instance_prior(S0))
    for t in range(1, 9):
        for k in ("q", "m", "Sigma"):
            assert abs(h[k][t] - se[k][t]) < 0.06 * se[k][t], (t, k)


def test_bayes_amp_small_instance_matches_bayes_se():
    from singlehead.bayes import bayes_overlap

    p = Problem(d=80, T=2, alpha=0.1, target=MPTarget(0.5))
    r = amp(p, 0, options=AMPOptions(bayes=True, max_iter=150, tol=1e-6, n_test=200))
    mmse = bayes_overlap(p)["mmse"]
    assert abs(r.matrix_error - mmse) / mmse < 0.1
    se = bayes_se_iterates(p, 1.0, 50)
    assert abs(se["V"][-1] - mmse) < 1e-6


def test_amp_result_fields_and_seed_streams():
    p = Problem(d=20, T=2, alpha=0.5, noise=0.1, lam=0.05)
    r = amp(p, 3, options=AMPOptions(max_iter=30, n_test=100), return_matrices=True)
    assert r.source == "amp"
    for k in METRIC_FIELDS:
        assert math.isfinite(getattr(r, k))
    for k in ("history", "eigenvalues", "rank", "seed", "version"):
        assert k in r.extras
    assert r.iterations >= 1 and isinstance(r.converged, bool) and r.runtime_s > 0 and r.message
    s_t = child_seeds(3, 4)[0]
    assert np.array_equal(r["S0"], sample_target(p.target, p.d, s_t).numpy())  # same stream as simulate
    assert math.isclose(r.matrix_error, r["Q0"] - 2 * r["m"] + r["q"], rel_tol=1e-9)
    assert len(r["history"]["q"]) == r["iterations"] + 1
    json.dumps(r.to_dict())


def test_invalid_arguments():
    p = Problem(d=10, T=2, alpha=0.5)
    with pytest.raises(ValueError, match="damping"):
        amp(p, 0, options=AMPOptions(damping=0.0))
    with pytest.raises(ValueError, match="n_test"):
        amp(p, 0, options=AMPOptions(n_test=1))


def test_cli_amp_json(capsys):
    from singlehead.cli import main

    main(["amp", "--d", "16", "--alpha", "0.3,0.6", "--max-iter", "15", "--n-test", "50", "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    rec = json.loads(lines[0])
    for k in (*METRIC_FIELDS, "iterations", "history", "seed", "problem"):
        assert k in rec
    assert rec["source"] == "amp"
    main(["amp", "--d", "16", "--alpha", "0.1", "--bayes", "--max-iter", "10", "--n-test", "50", "--json"])
    assert json.loads(capsys.readouterr().out.strip())["bayes"] is True


def test_cli_amp_bad_damping(usage_error):
    usage_error(["amp", "--damping", "2"], "damping")
