"""The one result cache: an unchanged key is served from the cache, a new numerics version recomputes.

Every user of the cache is checked the same way: the runner behind the command line and
``reproduce`` (:func:`run_jobs`), the reproduction's in-process values (:meth:`Context.cached`),
the explorer (:class:`Engine`) and ``singlehead theory --out``. Each test counts the calls of the
computation, serves a rerun from the cache, then bumps :data:`NUMERICS_VERSION` and sees it
recomputed.
"""

from __future__ import annotations

import json

import pytest

import singlehead.runs.cache as cache_module
from singlehead import Problem
from singlehead.figures.figspec import Context
from singlehead.runs import Cache, Job, expand_grid, result_key, run_jobs, runner, value_key


def _bump(monkeypatch) -> None:
    monkeypatch.setattr(cache_module, "NUMERICS_VERSION", cache_module.NUMERICS_VERSION + 1)


def test_the_version_is_one_integer_in_the_keys(monkeypatch):
    assert isinstance(cache_module.NUMERICS_VERSION, int) and cache_module.NUMERICS_VERSION >= 1
    job = Job("theory", Problem(alpha=0.5), None, (("tol", 1e-6),))
    assert job.key == result_key("theory", Problem(alpha=0.5), None, {"tol": 1e-6})
    keys = (job.key, value_key("a curve"))
    _bump(monkeypatch)
    assert job.key != keys[0] and value_key("a curve") != keys[1]
    assert job.key == result_key("theory", Problem(alpha=0.5).to_dict(), None, [("tol", 1e-6)])


def test_run_jobs_serves_a_cached_key_and_recomputes_after_a_version_bump(tmp_path, monkeypatch):
    calls = []

    def bayes(problem, seed=None, **settings):  # a stand-in route that counts its calls
        calls.append(problem.alpha)
        return {"source": "bayes", "test_error": 0.1 * problem.alpha}

    monkeypatch.setitem(runner.ROUTES, "bayes", bayes)
    jobs = expand_grid({"route": "bayes", "base": {"T": 2}, "sweep": {"alpha": [0.5, 1.0]}})
    first = run_jobs(jobs, Cache(tmp_path), progress=False)
    assert calls == [0.5, 1.0] and len(list(tmp_path.glob("*.json"))) == 2
    again = run_jobs(jobs, Cache(tmp_path), progress=False)  # a fresh process on the same directory
    assert calls == [0.5, 1.0] and again == first
    _bump(monkeypatch)
    bumped = run_jobs(jobs, Cache(tmp_path), progress=False)
    assert calls == [0.5, 1.0, 0.5, 1.0]
    assert [r["test_error"] for r in bumped] == [r["test_error"] for r in first]
    assert [r["key"] for r in bumped] != [r["key"] for r in first]
    assert len(list(tmp_path.glob("*.json"))) == 4  # the old entries stay on disk, unread


def test_reproduce_values_recompute_after_a_version_bump(tmp_path, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return [1.0, 2.0]

    ctx = Context(Cache(tmp_path), progress=False)
    assert ctx.cached("curve d=50", compute) == [1.0, 2.0]
    assert Context(Cache(tmp_path), progress=False).cached("curve d=50", compute) == [1.0, 2.0]
    assert len(calls) == 1
    _bump(monkeypatch)
    assert Context(Cache(tmp_path), progress=False).cached("curve d=50", compute) == [1.0, 2.0]
    assert len(calls) == 2


def test_explorer_recomputes_after_a_version_bump(tmp_path, monkeypatch):
    pytest.importorskip("starlette")
    from singlehead.explore import Engine, compute

    calls = []

    def interp(problem):
        calls.append(1)
        return 0.25

    monkeypatch.setattr(compute, "interpolation_threshold", interp)
    monkeypatch.setattr(compute, "perfect_recovery_threshold", lambda problem: None)
    problem = Problem(T=2, alpha=0.5)
    assert Engine(tmp_path).thresholds(problem)["alpha_interp"] == 0.25
    engine = Engine(tmp_path)
    assert engine.thresholds(problem)["alpha_interp"] == 0.25 and len(calls) == 1  # from disk
    assert engine.thresholds(problem)["alpha_interp"] == 0.25 and len(calls) == 1  # from memory
    _bump(monkeypatch)
    assert Engine(tmp_path).thresholds(problem)["alpha_interp"] == 0.25 and len(calls) == 2


def test_cli_theory_out_resumes_and_recomputes_after_a_version_bump(tmp_path, monkeypatch, capsys):
    from singlehead.cli import main

    real, calls = runner.ROUTES["theory"], []

    def theory(problem, seed=None, **settings):
        calls.append(problem.alpha)
        return real(problem, seed, **settings)

    monkeypatch.setitem(runner.ROUTES, "theory", theory)
    out = tmp_path / "th.jsonl"
    args = ["theory", "--alpha", "0.5", "--T", "2", "--noise", "0.5", "--json", "--out", str(out)]
    main(args)
    first = json.loads(out.read_text())
    main(args)
    assert len(calls) == 1 and "resumed: 1 of 1" in capsys.readouterr().err
    _bump(monkeypatch)
    main(args)
    assert len(calls) == 2 and "resumed" not in capsys.readouterr().err
    assert json.loads(out.read_text())["test_error"] == first["test_error"]


def test_memory_copy_and_torn_files(tmp_path):
    cache = Cache(tmp_path, memory=True)
    cache.put({"key": "k", "x": float("nan")})
    (tmp_path / "k.json").unlink()
    assert cache.get("k") == {"key": "k", "x": None}  # served from memory
    (tmp_path / "t.json").write_text('{"key": ')
    assert Cache(tmp_path).get("t") is None  # a torn write counts as missing
    assert Cache(tmp_path).get_or_compute("t", lambda: {"x": 1}) == {"x": 1, "key": "t"}
    with pytest.raises(ValueError, match="in-memory"):
        Cache(None).path("k")
