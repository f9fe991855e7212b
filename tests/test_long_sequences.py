"""Long sequences: the size limits of the state evolution and the structured (Woodbury) Newton systems of the prox."""

from __future__ import annotations

import numpy as np
import pytest

from singlehead import Problem, theory
from singlehead.numerics.attention_maps import softmax_fit_loss, softmax_rows, vec_to_mat
from singlehead.numerics.limits import check_memory, memory_limit
from singlehead.numerics.prox import prox_newton
from singlehead.numerics.prox_rows import (
    dense_newton_matrix,
    hessian_trace_rows,
    newton_rows,
    prox_convex_rows,
    row_derivatives,
    structured_factor,
    structured_solve,
    tangent_solve_rows,
)
from singlehead.state_evolution import SEOptions
from singlehead.state_evolution.sizes import check_theory_size, point_cost_seconds


def _batch(T: int, N: int, seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    K = T * (T + 1) // 2
    h = scale * rng.normal(size=(N, K))
    Y = softmax_rows(vec_to_mat(rng.normal(size=(N, K)), T))
    return rng, h, Y


# ------------------------------------------------------------------------------------------ limits
def test_memory_limit_env(monkeypatch):
    monkeypatch.setenv("SINGLEHEAD_MEMORY_LIMIT", "3G")
    assert memory_limit() == 3 * 2**30
    monkeypatch.setenv("SINGLEHEAD_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="SINGLEHEAD_MEMORY_LIMIT"):
        memory_limit()
    monkeypatch.delenv("SINGLEHEAD_MEMORY_LIMIT")
    assert memory_limit() == 2 * 2**30
    with pytest.raises(ValueError, match="^d is too large"):
        check_memory(2.0**40, "d", "x")


@pytest.mark.parametrize("T", [10**6, 146])
def test_theory_refuses_T_beyond_sobol(T):
    with pytest.raises(ValueError, match=r"^T must be <= 145 .*21201"):
        theory(Problem(T=T, alpha=0.5))


def test_theory_refuses_memory(monkeypatch):
    monkeypatch.setenv("SINGLEHEAD_MEMORY_LIMIT", "16M")
    with pytest.raises(ValueError, match=r"^T is too large: the output side .*SINGLEHEAD_MEMORY_LIMIT"):
        check_theory_size(Problem(T=40, alpha=0.5))
    with pytest.raises(ValueError, match=r"^n_points is too large"):
        check_theory_size(Problem(T=3, alpha=0.5), SEOptions(n_points=2**20))


def test_theory_refuses_huge_d():
    with pytest.raises(ValueError, match=r"^d is too large: the prior side"):
        theory(Problem(d=99999999999, alpha=0.5, target="power_law"))


def test_sizes_served_up_to_T40():
    check_theory_size(Problem(T=40, alpha=0.5))  # the default memory limit serves T = 40
    assert point_cost_seconds(Problem(T=64, alpha=0.5)) > point_cost_seconds(Problem(T=8, alpha=0.5)) > 0
    assert SEOptions().points(Problem(T=8)) == 2048 and SEOptions().points(Problem(T=64)) == 32


def test_cli_clean_messages(capsys):
    from singlehead.cli import main  # the entry point catches ValueError itself: one line on stderr, exit code 2

    for argv, start, also in ((["theory", "--T", "1000000"], "error: T must be <= 145 ", ("got 1000000", "21201")),
                              (["theory", "--d", "99999999999", "--gamma", "1"], "error: d is too large: the prior side",
                               ("d = 99999999999", "SINGLEHEAD_MEMORY_LIMIT", "lower d"))):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        out = capsys.readouterr()
        assert out.err.startswith(start), out.err
        assert all(part in out.err for part in also), out.err
        assert out.err.count("\n") == 1 and "Traceback" not in out.err  # one clean line


# ------------------------------------------------------------------------------------------ structure
@pytest.mark.parametrize("T", [3, 5, 9])
def test_structured_matches_dense(T):
    rng, h, Y = _batch(T, 40, T)
    beta, inv = 1.3, 2.0
    v, g, H = softmax_fit_loss(h, Y, beta, order=2)
    v2, g2, cu = row_derivatives(h, Y, beta)
    np.testing.assert_allclose(v2, v, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g2, g, rtol=1e-13, atol=1e-14)
    K = h.shape[1]
    Mk = H + inv * np.eye(K)
    D = cu.Dl + inv
    np.testing.assert_allclose(dense_newton_matrix(D, cu.Up, cu.Um), Mk, atol=1e-12)
    ok = np.all(D > 0, axis=1)
    f, pd = structured_factor(D[ok], cu.Up[ok], cu.Um[ok])
    B = rng.normal(size=(int(ok.sum()), K, 3))
    np.testing.assert_allclose(structured_solve(f, B), np.linalg.solve(Mk[ok], B), atol=1e-11)
    assert np.array_equal(pd, np.linalg.eigvalsh(Mk[ok])[:, 0] > 1e-10)


def test_tangent_and_trace_match_dense():
    rng, h, Y = _batch(6, 60, 1, scale=2.0)
    beta = 1.0
    H = softmax_fit_loss(h, Y, beta, order=2)[2]
    K = h.shape[1]
    for Sigma in (0.5, 20.0):
        B = rng.normal(size=(60, K, 2))
        X = tangent_solve_rows(h, Y, beta, Sigma, B)
        np.testing.assert_allclose(X, np.linalg.solve(np.eye(K) + Sigma * H, B), rtol=1e-8, atol=1e-10)
        ref = np.einsum("nkk->n", np.linalg.solve(np.eye(K) + Sigma * H, H))
        np.testing.assert_allclose(hessian_trace_rows(h, Y, beta, Sigma), ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(hessian_trace_rows(h, Y, beta, 0.0), np.einsum("nkk->n", H), rtol=1e-10, atol=1e-12)
    conv = prox_convex_rows(h, Y, beta, 20.0)
    assert np.array_equal(conv, np.linalg.eigvalsh(np.eye(K) / 20.0 + H)[:, 0] > 1e-12 / 20.0)


@pytest.mark.parametrize("Sigma", [0.3, 30.0])
def test_structured_prox_matches_dense_newton(Sigma):
    rng, z, Y = _batch(6, 200, 2, scale=1.5)
    beta = 1.0

    def loss(h, lab, order):
        return softmax_fit_loss(h, lab, beta, order=order)

    dense = prox_newton(z, Y, Sigma, loss)
    rows = prox_newton(z, Y, Sigma, loss, newton=newton_rows(beta))
    assert dense.converged and rows.converged
    same = np.abs(dense.objective - rows.objective) < 1e-9 * (1 + np.abs(dense.objective))
    assert same.mean() > 0.97  # a non-convex prox: a few nodes may end in another local minimum
    np.testing.assert_allclose(rows.h[same], dense.h[same], atol=1e-7)


def test_explorer_refuses_and_warns():
    from singlehead.explore.view import ViewError, parse_view, slow_point_note

    with pytest.raises(ViewError) as exc:
        parse_view({"T": "1000000"})
    assert exc.value.field == "T" and "T must be <= 145" in str(exc.value)
    with pytest.raises(ViewError) as exc:
        parse_view({"d": "99999999999", "target": "power_law"})
    assert exc.value.field == "d"
    assert parse_view({"T": "40"}).problem.T == 40
    assert slow_point_note(Problem(T=64)) is not None and slow_point_note(Problem(T=2)) is None
