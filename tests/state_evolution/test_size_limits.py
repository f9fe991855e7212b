"""The size limits of the state evolution (long sequences, large ``d``, the memory limit): clear refusals, in
``theory``, the command line and the explorer."""

from __future__ import annotations

import pytest

from singlehead import Problem, theory
from singlehead.numerics.limits import check_memory, memory_limit
from singlehead.state_evolution import SEOptions
from singlehead.state_evolution.sizes import check_theory_size, point_cost_seconds


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

    for argv, start, also in (
        (["theory", "--T", "1000000"], "error: T must be <= 145 ", ("got 1000000", "21201")),
        (
            ["theory", "--d", "99999999999", "--gamma", "1"],
            "error: d is too large: the prior side",
            ("d = 99999999999", "SINGLEHEAD_MEMORY_LIMIT", "lower d"),
        ),
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        out = capsys.readouterr()
        assert out.err.startswith(start), out.err
        assert all(part in out.err for part in also), out.err
        assert out.err.count("\n") == 1 and "Traceback" not in out.err  # one clean line


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
