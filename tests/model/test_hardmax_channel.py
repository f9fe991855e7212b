"""The ``hardmax`` channel: one-hot row-argmax labels fitted by a softmax student.

* labels: one-hot, the argmax of each row of the noisy teacher logits, independent of ``beta0``,
  on samples (data generation) and on the state evolution's nodes;
* ``beta0 -> inf``: a seq2lab teacher at ``beta0`` approaches the hardmax one. Its labels differ
  from the argmax ones on rows whose top two logits are within ``O(1/beta0)``, so the test
  error of a fixed student moves by ``D(beta0) = c/beta0 + O(1/beta0^2)``: checked on samples
  against the state evolution's test-error function, and on the state evolution's fixed points;
* theory against simulation (seed means at two sizes extrapolated linearly in ``1/d``);
* the CLI, and the refusal of the Bayes baseline.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from singlehead import MPTarget, Problem, simulate, theory
from singlehead.bayes import bayes_optimal
from singlehead.cli import main
from singlehead.model.channels import Hardmax, channel_names, get_channel
from singlehead.model.channels.hardmax import hardmax_rows
from singlehead.numerics.attention_maps import shift_direction, softmax_rows, vec_to_mat
from singlehead.sim.data import logits, sample_sequences
from singlehead.sim.simulation import TrainOptions
from singlehead.state_evolution import channel_test_errors
from singlehead.state_evolution.output import gauss_pair
from singlehead.state_evolution.quadrature import OutputQuadrature

BASE = dict(channel="hardmax", noise=0.5, lam=0.05, target=MPTarget(0.5))


def test_registered_and_round_trip():
    assert "hardmax" in channel_names() and isinstance(get_channel("hardmax"), Hardmax)
    p = Problem(d=20, T=3, beta0=7.0, **BASE)
    assert p.to_dict()["channel"] == "hardmax" and Problem.from_dict(p.to_dict()) == p
    with pytest.raises(ValueError, match="beta0"):
        Problem(d=20, T=3, beta0=0.0, **BASE)


def test_hardmax_rows_numpy_and_torch():
    h = np.random.default_rng(0).normal(size=(50, 3, 3))
    A = hardmax_rows(h)
    assert A.shape == h.shape and set(np.unique(A)) == {0.0, 1.0} and np.all(A.sum(axis=-1) == 1.0)
    assert np.array_equal(A.argmax(axis=-1), h.argmax(axis=-1))
    At = hardmax_rows(torch.as_tensor(h))
    assert At.dtype == torch.float64 and np.array_equal(At.numpy(), A)


@pytest.mark.parametrize("T", [2, 3])
def test_sample_labels_are_one_hot_argmax_of_noisy_logits(T):
    base = dict(d=30, T=T, alpha=0.5, noise=0.5, target=MPTarget(0.5))
    p = Problem(channel="hardmax", **base)
    S0 = p.target.sample(p.d, seed=0)
    data = sample_sequences(p, S0, 2000, seed=1)
    y, yc = data.y.numpy(), data.y_clean.numpy()
    for lab in (y, yc):
        assert set(np.unique(lab)) == {0.0, 1.0} and np.all(lab.sum(axis=-1) == 1.0)
    h0 = logits(data.X, S0).numpy()
    assert np.array_equal(yc.argmax(axis=-1), h0.argmax(axis=-1))  # noiseless: argmax of the target's logits
    # noisy labels: argmax of h0 + xi. The seq2lab data of the same seed has the same X and xi, and its
    # softmax rows have the same argmax; the noise flips some rows
    soft = sample_sequences(Problem(channel="seq2lab", beta0=3.0, **base), S0, 2000, seed=1)
    assert torch.equal(soft.X, data.X)
    assert np.array_equal(y.argmax(axis=-1), soft.y.numpy().argmax(axis=-1))
    assert np.mean(y.argmax(axis=-1) != yc.argmax(axis=-1)) > 0.05
    # beta0 does not change the labels
    other = sample_sequences(Problem(channel="hardmax", beta0=40.0, **base), S0, 2000, seed=1)
    assert torch.equal(other.y, data.y)


def test_node_labels_are_argmax_of_teacher_fields():
    ch, T = Hardmax(), 3
    y = np.random.default_rng(1).normal(size=(200, 6))
    lab = ch.labels(y, T, beta0=1.0)
    assert np.array_equal(lab, hardmax_rows(vec_to_mat(y, T)))
    assert np.array_equal(lab, ch.labels(y, T, beta0=50.0))
    assert np.array_equal(lab.argmax(-1), softmax_rows(vec_to_mat(y, T)).argmax(-1))
    # the labels ignore the global shift u (every logit moved by t), and only it among the K directions
    assert np.array_equal(ch.labels(y + 5.0 * shift_direction(T), T, 1.0), lab)
    assert ch.informative_directions(T) == T * (T + 1) // 2 - 1


@pytest.mark.parametrize("T", [2, 3])
def test_large_beta0_seq2lab_approaches_hardmax_on_samples_and_in_theory(T):
    """A fixed student ``S = 2 S0`` (overlaps ``q = 4 Q0, m = 2 Q0`` exactly on the instance).

    ``D(b)``: its test error against seq2lab labels at ``beta0 = b`` minus that against hardmax
    labels, on the same sequences (paired, standard error from the per-sequence differences) and
    from the state evolution's test-error function on common nodes (standard error over scrambles).
    Checks: the two agree within 4 standard errors at ``b = 50`` and ``200``; ``D`` shrinks like
    ``1/b`` (``D(200) = D(50)/4`` up to ``O(1/b^2)``, within 4 standard errors) and is resolved
    (more than 4 standard errors from 0), so wrong labels on either side would fail.
    """
    d, n = 100, 40000
    base = dict(d=d, T=T, alpha=0.5, noise=0.5, target=MPTarget(0.5))
    hm = Problem(channel="hardmax", **base)
    S0 = hm.target.sample(d, seed=3)
    Q0 = float((S0 * S0).sum()) / d
    data = sample_sequences(hm, S0, n, seed=4)
    student = softmax_rows(logits(data.X, 2.0 * S0).numpy())
    e_hm = ((student - data.y_clean.numpy()) ** 2).sum(axis=(1, 2))
    quad = OutputQuadrature.sobol(2 * hm.n_pairs, 1 << 14, 8)
    th_hm = channel_test_errors(4 * Q0, 2 * Q0, problem=hm, Q0=Q0, quad=quad)["test_error"]
    D = {}
    for b in (50.0, 200.0):
        s2l = Problem(channel="seq2lab", beta0=b, **base)
        soft = sample_sequences(s2l, S0, n, seed=4)
        assert torch.equal(soft.X, data.X)
        diff = ((student - soft.y_clean.numpy()) ** 2).sum(axis=(1, 2)) - e_hm
        Ds, Ds_se = diff.mean(), diff.std(ddof=1) / math.sqrt(n)
        # the theory's D on common nodes: per-node differences, error over scrambles
        K = hm.n_pairs
        z0, z = gauss_pair(quad.flat[:, :K], quad.flat[:, K:], Q0, 2 * Q0, 4 * Q0)
        A = softmax_rows(vec_to_mat(z, T))
        per = ((s2l.channel.labels(z0, T, b) - A) ** 2).sum(axis=(1, 2)) - (
            (hm.channel.labels(z0, T, 1.0) - A) ** 2
        ).sum(axis=(1, 2))
        Dt, Dt_se = (float(v) for v in quad.mean_and_error(per))
        # consistency with channel_test_errors (the function the state evolution reports)
        th_s = channel_test_errors(4 * Q0, 2 * Q0, problem=s2l, Q0=Q0, quad=quad)["test_error"]
        assert th_s - th_hm == pytest.approx(Dt, abs=1e-12)
        assert abs(Ds - Dt) <= 4 * math.hypot(Ds_se, Dt_se), (b, Ds, Ds_se, Dt, Dt_se)
        D[b] = (Ds, Ds_se, Dt, Dt_se)
    for k in (0, 2):  # samples, theory
        d50, s50, d200, s200 = D[50.0][k], D[50.0][k + 1], D[200.0][k], D[200.0][k + 1]
        assert abs(d200) > 4 * s200, D
        assert abs(d200 - d50 / 4) <= 4 * math.hypot(s200, s50 / 4), D


@pytest.mark.parametrize("T", [2, 3])
def test_large_beta0_seq2lab_fixed_point_approaches_hardmax(T):
    """The state evolution of a seq2lab teacher at ``beta0 = 50, 200`` against the hardmax one.

    The gap ``g(b) = TE_seq2lab(b) - TE_hardmax`` of the fixed points' test errors follows the
    ``1/b`` law: ``g(200) = g(50)/4`` within 4 quadrature standard errors (the three fixed points'
    errors added in quadrature), with ``g(50)`` resolved.
    """
    base = dict(d=60, T=T, alpha=1.0, noise=0.5, lam=0.05, target=MPTarget(0.5))
    hm = theory(Problem(channel="hardmax", **base))
    assert hm.converged, hm.message
    res = {b: theory(Problem(channel="seq2lab", beta0=b, **base)) for b in (50.0, 200.0)}
    assert all(r.converged for r in res.values())
    qe = [r.extras["quadrature_error"]["test_error"] for r in (hm, *res.values())]
    tol = 4 * math.sqrt(sum(e * e for e in qe))
    g = {b: r.test_error - hm.test_error for b, r in res.items()}
    assert abs(g[50.0]) > tol, (g, tol)
    assert abs(g[200.0] - g[50.0] / 4) <= tol, (g, tol)


def _extrapolated_agreement(T, alphas, sizes, seeds):
    """Seed means of the test error at two sizes, extrapolated linearly in ``1/d`` to ``d = inf``
    (``y_inf = (d2 y2 - d1 y1)/(d2 - d1)``, standard error propagated from the seeds' spread),
    against the state evolution; tolerance 4 standard errors (seeds and quadrature)."""
    d1, d2 = sizes
    rows = []
    for a in alphas:
        th = theory(Problem(d=d2, T=T, alpha=a, **BASE))
        assert th.converged, th.message
        mean, se = {}, {}
        for d in sizes:
            v = np.array(
                [
                    simulate(Problem(d=d, T=T, alpha=a, **BASE), seed=s, options=TrainOptions(n_test=4000)).test_error
                    for s in seeds
                ]
            )
            mean[d], se[d] = v.mean(), v.std(ddof=1) / math.sqrt(len(v))
        w1, w2 = -d1 / (d2 - d1), d2 / (d2 - d1)
        y = w1 * mean[d1] + w2 * mean[d2]
        s = math.sqrt((w1 * se[d1]) ** 2 + (w2 * se[d2]) ** 2 + th.extras["quadrature_error"]["test_error"] ** 2)
        rows.append((a, mean[d1], mean[d2], y, s, th.test_error))
    for a, m1, m2, y, s, t in rows:
        assert abs(y - t) <= 4 * s, ("alpha, d1 mean, d2 mean, extrapolated, se, theory", rows)
    # informative: the test error moves by many standard errors between the alphas
    assert abs(rows[0][5] - rows[-1][5]) > 4 * max(r[4] for r in rows), rows
    return rows


def test_theory_agrees_with_simulation_t2():
    _extrapolated_agreement(2, (0.5, 2.0), (30, 60), range(4))


@pytest.mark.slow
def test_theory_agrees_with_simulation_t2_larger_d():
    _extrapolated_agreement(2, (0.5, 2.0), (60, 120), range(4))


@pytest.mark.slow
def test_theory_agrees_with_simulation_t3():
    _extrapolated_agreement(3, (0.5, 2.0), (60, 120), range(4))


def test_cli_theory_and_simulate(capsys):
    main(["theory", "--task", "hardmax", "--alpha", "0.5", "--json"])
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["problem"]["channel"] == "hardmax"
    p = Problem.from_dict(rec["problem"])
    assert rec["test_error"] == pytest.approx(theory(p).test_error, rel=1e-9)
    main(
        [
            "simulate",
            "--task",
            "hardmax",
            "--T",
            "3",
            "--d",
            "16",
            "--alpha",
            "1",
            "--noise",
            "0.5",
            "--json",
            "--n-test",
            "200",
        ]
    )
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["problem"]["channel"] == "hardmax" and rec["problem"]["T"] == 3
    assert math.isfinite(rec["test_error"]) and rec["test_error"] > 0


def test_bayes_runs_for_hardmax(capsys):
    """The Bayes baseline (and ``singlehead bayes``) accepts hardmax; see tests/bayes/test_hardmax_bayes.py."""
    r = bayes_optimal(Problem(T=2, alpha=0.5, **BASE))
    assert r.source == "bayes" and 0 < r.matrix_error < r.extras["Q0"]
    main(["bayes", "--task", "hardmax", "--alpha", "0.5", "--json"])
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["problem"]["channel"] == "hardmax" and math.isfinite(rec["test_error"])
