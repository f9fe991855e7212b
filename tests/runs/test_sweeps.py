"""Sweeps: grid expansion, validation, cache hit/resume, joblib and Dask execution paths."""

from __future__ import annotations

import json

import pytest

from singlehead.model.problem import MPTarget, Problem
from singlehead.runs import Cache, expand_grid, load_grid, run_jobs, runner

GRID = {
    "route": "simulation",
    "seeds": [0, 1],
    "base": {"d": 8, "T": 2, "noise": 0.2, "target": {"kind": "mp", "kappa0": 0.5}},
    "sweep": {"alpha": [0.5, 1.0], "kappa": [0.5, 1.0]},
    "settings": {"n_test": 100, "max_steps": 50},
}


def test_grid_expansion_is_cartesian_and_keys_unique():
    jobs = expand_grid(GRID)
    assert len(jobs) == 2 * 2 * 2
    assert len({j.key for j in jobs}) == len(jobs)
    assert {(j.problem.alpha, j.problem.kappa, j.seed) for j in jobs} == {
        (a, k, s) for a in (0.5, 1.0) for k in (0.5, 1.0) for s in (0, 1)
    }
    assert all(j.problem.target == MPTarget(0.5) for j in jobs)
    # keys depend on the full config and the settings, not on the order of expansion
    again = {j.key for j in expand_grid({**GRID, "sweep": {"kappa": [1.0, 0.5], "alpha": [1.0, 0.5]}})}
    assert again == {j.key for j in jobs}
    other = {j.key for j in expand_grid({**GRID, "settings": {"n_test": 101, "max_steps": 50}})}
    assert other.isdisjoint(again)


def test_deterministic_routes_ignore_seeds():
    jobs = expand_grid({**GRID, "route": "theory"})
    assert len(jobs) == 4 and all(j.seed is None for j in jobs)


@pytest.mark.parametrize(
    "bad,msg",
    [
        ({"sweep": {"alpha": []}}, "sweep.alpha"),
        ({"sweep": {"alpah": [1]}}, "alpah"),
        ({"base": {"lam": -1}}, "lam"),
        ({"sweeps": {}}, "unknown sections"),
    ],
)
def test_grid_validation(bad, msg):
    with pytest.raises(ValueError, match=msg):
        expand_grid({**GRID, **bad})


def test_grid_files(tmp_path):
    (tmp_path / "g.toml").write_text('route = "simulation"\nseeds = 2\n[base]\nd = 8\n[sweep]\nalpha = [0.5, 1.0]\n')
    (tmp_path / "g.yaml").write_text("route: simulation\nseeds: 2\nbase: {d: 8}\nsweep: {alpha: [0.5, 1.0]}\n")
    a = [j.key for j in expand_grid(load_grid(tmp_path / "g.toml"))]
    b = [j.key for j in expand_grid(load_grid(tmp_path / "g.yaml"))]
    assert a == b and len(a) == 4
    with pytest.raises(ValueError, match="grid file"):
        load_grid(tmp_path / "g.txt")


def test_cache_hit_and_resume(tmp_path, monkeypatch):
    jobs = expand_grid(GRID)
    cache = Cache(tmp_path)
    calls = []
    real = runner.execute

    def counting(job):
        calls.append(job.key)
        return real(job)

    monkeypatch.setattr(runner, "execute", counting)
    # "Interrupted" first pass: only half of the jobs ran.
    run_jobs(jobs[:4], cache, progress=False)
    (tmp_path / "torn.json").write_text("{")  # stray torn file is ignored
    cache.path(jobs[4].key).write_text('{"key": ')  # a torn record is recomputed
    recs = run_jobs(jobs, cache, progress=False)
    assert len(calls) == 8 and calls[4:] == [j.key for j in jobs[4:]]
    assert [r["key"] for r in recs] == [j.key for j in jobs]
    run_jobs(jobs, cache, progress=False)
    assert len(calls) == 8  # everything cached: nothing recomputed
    rec = json.loads(cache.path(jobs[0].key).read_text())
    assert rec["problem"]["d"] == 8 and rec["route"] == "simulation" and rec["test_error"] >= 0


def test_joblib_path_matches_serial(tmp_path):
    jobs = expand_grid({**GRID, "sweep": {"alpha": [0.5]}, "seeds": [0, 1]})
    serial = run_jobs(jobs, Cache(tmp_path / "a"), progress=False)
    par = run_jobs(jobs, Cache(tmp_path / "b"), n_jobs=2, progress=False)
    assert [r["test_error"] for r in serial] == [r["test_error"] for r in par]


def test_dask_local_cluster_path(tmp_path):
    distributed = pytest.importorskip("distributed")
    jobs = expand_grid({**GRID, "sweep": {"alpha": [0.5]}, "seeds": [3]})
    serial = run_jobs(jobs, Cache(tmp_path / "a"), progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        recs = run_jobs(jobs, Cache(tmp_path / "b"), scheduler=cluster.scheduler_address, progress=False)
    assert [r["test_error"] for r in recs] == [r["test_error"] for r in serial]


def test_failed_jobs_are_reported_not_cached(tmp_path, monkeypatch):
    jobs = expand_grid({**GRID, "sweep": {"alpha": [0.5]}, "seeds": [0, 1]})
    import singlehead.runs.routes as routes
    import singlehead.runs.runner as runner

    real = routes.run_simulation

    def boom(problem, seed, **kw):
        if seed == 1:
            raise ValueError("bad point")
        return real(problem, seed, **kw)

    monkeypatch.setitem(runner.ROUTES, "simulation", boom)  # the runner's route table
    with pytest.warns(RuntimeWarning, match="1 of 2 runs failed"):
        recs = run_jobs(jobs, Cache(tmp_path), progress=False)
    assert "error" in recs[1] and "bad point" in recs[1]["error"] and "test_error" in recs[0]
    assert Cache(tmp_path).get(jobs[1].key) is None and Cache(tmp_path).get(jobs[0].key) is not None


def test_cached_many_runs_missing_values_on_workers_and_caches_each(tmp_path):
    import functools

    from singlehead.figures.figspec import Context
    from singlehead.runs import Cache

    ctx = Context(Cache(tmp_path / "c"), n_jobs=2, progress=False)
    ctx.cached("a", functools.partial(pow, 2, 3))  # already cached: not recomputed
    out = ctx.cached_many(
        {
            "a": functools.partial(pow, 5, 5),
            "b": functools.partial(pow, 3, 2),
            "c": functools.partial(sorted, [3, 1, 2]),
        }
    )
    assert out == {"a": 8, "b": 9, "c": [1, 2, 3]}
    assert ctx.cached("b", functools.partial(pow, 7, 7)) == 9  # read back from the cache


def _fail_later(seconds: float) -> None:
    import time

    time.sleep(seconds)
    raise RuntimeError("interrupted")


def test_cached_many_keeps_what_finished_when_another_task_fails(tmp_path):
    """Values are cached as they come back, so an interrupted (here: failing) batch keeps the finished ones."""
    import functools

    from singlehead.figures.figspec import Context
    from singlehead.runs import Cache

    ctx = Context(Cache(tmp_path / "c"), n_jobs=2, progress=False)
    with pytest.raises(RuntimeError, match="interrupted"):
        ctx.cached_many({"slow-failure": functools.partial(_fail_later, 3.0), "quick": functools.partial(pow, 2, 5)})
    fresh = Context(Cache(tmp_path / "c"), n_jobs=1, progress=False)
    assert fresh.cached("quick", functools.partial(pow, 7, 7)) == 32  # read back, not recomputed


def test_dearest_jobs_are_dispatched_first():
    """The dispatch order (runner.cost_estimate) ranks fits by n T^2 d^2 per evaluation, more iterations at small
    lam and for Adam; theory points last. The order never changes a record (cache keys are the jobs')."""
    from singlehead.runs import Job
    from singlehead.runs.runner import cost_estimate

    base = dict(T=2, noise=0.5)
    lbfgs, adam = (("optimizer", "lbfgs"),), (("optimizer", "adam"),)
    peak = Job("simulation", Problem(d=100, alpha=0.2, lam=1e-5, **base), 0, lbfgs)
    easy = Job("simulation", Problem(d=100, alpha=1.0, lam=1e-2, **base), 0, lbfgs)
    small = Job("simulation", Problem(d=40, alpha=1.0, lam=1e-2, **base), 0, lbfgs)
    assert cost_estimate(peak) > cost_estimate(easy) > cost_estimate(small) > 0
    assert cost_estimate(Job("simulation", easy.problem, 0, adam)) > cost_estimate(easy)
    assert cost_estimate(Job("theory", easy.problem)) == 0.0


def test_phase_diagram_hatches_unconverged_cells():
    """An unconverged SE cell is hatched over (its regime label is not trusted) and left without an exponent."""
    import pandas as pd

    from singlehead.figures.figspec import new_figure
    from singlehead.figures.power_law_plot import phase_diagram

    rmap = pd.DataFrame(
        {
            "n": [1e3, 1e4, 1e3, 1e4],
            "lam": [1e-3, 1e-3, 1.0, 1.0],
            "local_exponent_n": [0.5, 0.6, 0.7, 0.8],
            "predicted_exponent": [0.5, 0.6, 0.7, 0.8],
            "regime": ["threshold"] * 4,
            "converged": [False, True, True, True],
        }
    )
    fig, (a, b) = new_figure(1, 2, figsize=(8, 3))
    phase_diagram(a, b, rmap, 1000, 1.25, 0.0)
    hatched = [p for p in a.patches if p.get_hatch() == "xxx"]
    assert len(hatched) == 1 and hatched[0].get_x() < 1.0 < hatched[0].get_x() + hatched[0].get_width()
    assert hatched[0].get_y() < 1e-3 < hatched[0].get_y() + hatched[0].get_height()
    assert "SE unconverged (1)" in [t.get_text() for t in a.get_legend().get_texts()]
    assert sorted(t.get_text().split("\n")[0] for t in b.texts) == ["0.60", "0.70", "0.80"]


def test_stream_yields_as_it_goes_and_stops_between_points(tmp_path):
    """The runner's stream: the cached records first, then a warm-started chain point by point; once ``alive``
    turns false no further point is solved (and what was computed is cached); a rerun completes the chain from
    the cached neighbour, at the fixed points of the uninterrupted chain (solver tolerance)."""
    from singlehead.runs import Job, stream

    jobs = [Job("theory", Problem(T=2, noise=0.5, lam=0.01, alpha=a)) for a in (0.3, 0.5, 0.8, 1.2)]
    cache = Cache(tmp_path)
    got = []
    for rec in stream(jobs, cache, alive=lambda: len(got) < 2):
        got.append(rec)
    assert [r["problem"]["alpha"] for r in got] == [0.3, 0.5]
    assert [cache.get(j.key) is not None for j in jobs] == [True, True, False, False]
    rest = list(stream(jobs, cache))
    assert [r["problem"]["alpha"] for r in rest] == [0.3, 0.5, 0.8, 1.2]
    full = list(stream(jobs, Cache(None)))
    for a, b in zip(rest, full):
        assert a["test_error"] == pytest.approx(b["test_error"], rel=1e-5)


def test_stream_refuses_bad_chunks():
    from singlehead.runs import Job, stream

    with pytest.raises(ValueError, match="chunks"):
        list(stream([Job("theory", Problem(alpha=a)) for a in (0.5, 1.0)], Cache(None), workers=2, chunks=[0]))


def test_dask_runs_theory_chains(tmp_path):
    distributed = pytest.importorskip("distributed")
    jobs = expand_grid({"route": "theory", "base": {"T": 2, "noise": 0.5}, "sweep": {"alpha": [0.3, 0.6, 1.0]}})
    serial = run_jobs(jobs, Cache(tmp_path / "a"), progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        recs = run_jobs(jobs, Cache(tmp_path / "b"), scheduler=cluster.scheduler_address, progress=False)
    assert [r["key"] for r in recs] == [j.key for j in jobs]
    assert [r["test_error"] for r in recs] == pytest.approx([r["test_error"] for r in serial], rel=1e-9)


def test_run_stages_keeps_each_stage_s_chains_and_order(tmp_path):
    """Stages run together return each stage's records in its jobs' order; a stage's theory points chain only
    among themselves (stage b's 0.6 does not join stage a's chain; the 0.75 both hold is computed once, in a);
    a label per job is required."""
    from singlehead.runs import run_stages
    from singlehead.runs.runner import Job, _grouped_chains, stream

    a = [Job("theory", Problem(T=2, noise=0.5, alpha=x)) for x in (1.0, 0.5, 0.75)]
    b = [Job("theory", Problem(T=2, noise=0.5, alpha=x)) for x in (0.6, 0.75)]
    chains, rest = _grouped_chains(a + b, {j.key for j in a + b}, 1, 6, Cache(None), [0, 0, 0, 1, 1])
    got = [[j.problem.alpha for j in js] for _, js, _ in chains]
    assert got == [[0.5, 0.75, 1.0]] and [j.problem.alpha for j in rest] == [0.6]  # one point: no chain
    cache = Cache(tmp_path)
    ra, rb = run_stages([a, b], cache, progress=False)
    assert [r["problem"]["alpha"] for r in ra] == [1.0, 0.5, 0.75]
    assert [r["problem"]["alpha"] for r in rb] == [0.6, 0.75] and rb[1]["key"] == ra[2]["key"]
    with pytest.raises(ValueError, match="groups must give one label per job"):
        list(stream(a, Cache(None), groups=[0]))
