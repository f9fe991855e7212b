"""``singlehead explore`` without a browser: views, reproduction code, cache, cancellation, overlay, server."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="explore needs the 'explore' extra (starlette, uvicorn, plotly)")
pytest.importorskip("plotly", reason="explore needs the 'explore' extra (starlette, uvicorn, plotly)")

from singlehead import MPTarget, Problem, theory  # noqa: E402
from singlehead.explore import Engine, ViewError, parse_view  # noqa: E402

# T = 2 quick problems, three alpha points: every test here runs in seconds
SMALL = {"n_alpha": "3", "alpha_min": "0.1", "alpha_max": "1", "alpha_at": "0.3", "lam": "0.02"}


def _events(engine: Engine, params: dict[str, str]) -> list[dict]:
    return list(engine.events(parse_view(params)))


# each bad control, and the library call that refuses the same value
BAD = {
    "lam": ("-1", lambda: Problem(lam=-1.0)),
    "T": ("0", lambda: Problem(T=0)),
    "kappa0": ("-1", lambda: MPTarget(kappa0=-1.0)),
    "kappa": ("1.5", lambda: Problem(kappa=1.5)),
    "noise": ("-0.1", lambda: Problem(noise=-0.1)),
    "beta0": ("0", lambda: Problem(beta0=0.0)),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_control_gets_the_library_message_under_its_name(name):
    value, library = BAD[name]
    with pytest.raises(ViewError) as exc:
        parse_view({**SMALL, name: value})
    with pytest.raises(ValueError) as lib:
        library()
    assert exc.value.field == name and str(exc.value) == str(lib.value)


def test_grid_controls_are_checked_by_the_explorer():
    for params, field in (
        ({"alpha_max": "0.05"}, "alpha_max"),
        ({"n_alpha": "1"}, "n_alpha"),
        ({"n_alpha": "x"}, "n_alpha"),
        ({"alpha_at": "-1"}, "alpha_at"),
        ({"target": "x"}, "target"),
    ):
        with pytest.raises(ViewError) as exc:
            parse_view({**SMALL, **params})
        assert exc.value.field == field and field in str(exc.value)


@pytest.fixture(scope="module")
def small_engine() -> Engine:
    """An in-memory engine shared by the tests of the SMALL view (it is computed once)."""
    return Engine(memory_only=True)


def test_streamed_points_are_theory_and_the_cli_line_reproduces_them(capsys, small_engine):
    from singlehead.cli import main

    view = parse_view(SMALL)
    events = _events(small_engine, SMALL)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "view" and kinds[-1] == "done" and kinds.index("point") == 1
    assert {"thresholds", "spectrum", "decomposition", "bayes"} <= set(kinds) and "scaling" not in kinds
    points = [e for e in events if e["event"] == "point"]
    assert [p["alpha"] for p in points] == view.alphas
    for p in points:  # a warm-started chunked sweep lands on the cold fixed point (tol 1e-6 on (q, m, Sigma))
        r = theory(view.problem.replace(alpha=p["alpha"]))
        assert p["test_error"] == pytest.approx(r.test_error, abs=1e-6)
        assert p["train_error"] == pytest.approx(r.train_error, abs=1e-6)
    argv = shlex.split(view.cli())
    assert argv[:2] == ["singlehead", "theory"]
    capsys.readouterr()
    main(argv[1:])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert len(lines) == 3
    for line, p in zip(lines, points):
        assert line["problem"]["alpha"] == pytest.approx(p["alpha"], rel=1e-12)
        assert line["test_error"] == pytest.approx(p["test_error"], abs=1e-6)


def test_a_failing_panel_says_why_and_the_others_still_come(small_engine, monkeypatch):
    def refuse(problem):
        raise NotImplementedError("no closed form here")

    monkeypatch.setattr(small_engine, "thresholds", refuse)
    events = _events(small_engine, SMALL)
    errors = [e for e in events if e["event"] == "panel_error"]
    assert errors == [
        {"event": "panel_error", "panel": "thresholds", "message": "NotImplementedError: no closed form here"}
    ]
    assert {"spectrum", "decomposition", "bayes", "done"} <= {e["event"] for e in events}


def test_the_python_code_runs_and_gives_the_same_curve():
    view = parse_view({**SMALL, "n_alpha": "2"})
    scope: dict = {}
    exec(compile(view.python(), "<explore>", "exec"), scope)  # noqa: S102 - code the page hands to users
    ref = [theory(view.problem.replace(alpha=a)).test_error for a in view.alphas]
    assert [r.test_error for r in scope["curve"]] == pytest.approx(ref, abs=1e-6)
    assert "parts" in scope and scope["spectrum"].rank_fraction > 0


def test_a_new_view_cancels_the_stream_in_flight():
    engine = Engine(memory_only=True)
    stream = engine.events(parse_view({**SMALL, "n_alpha": "12"}))
    assert next(stream)["event"] == "view"
    assert next(stream)["event"] == "point"
    engine.begin()  # what the server does when the page sends a new view
    rest = list(stream)
    # the first chunk is one point and the next holds two: at most those come out after the cancel
    assert len(rest) <= 2 and all(e["event"] == "point" for e in rest)


def test_points_are_cached_on_disk_under_the_library_keys(tmp_path, monkeypatch):
    from singlehead.runs import Job
    from singlehead.state_evolution import SEOptions
    from singlehead.state_evolution.api import result_settings

    view = parse_view(SMALL)
    first = [e for e in _events(Engine(tmp_path), SMALL) if e["event"] in ("point", "bayes")]
    for a in view.alphas:  # the key `singlehead theory` gives the same point with its default settings
        p = view.problem.replace(alpha=a)
        key = Job("theory", p, None, result_settings(p, SEOptions())).key
        assert (tmp_path / f"{key}.json").is_file()

    def fail(*args, **kwargs):
        raise AssertionError("recomputed a cached point")

    monkeypatch.setattr("singlehead.state_evolution.theory_curve", fail)
    monkeypatch.setattr("singlehead.state_evolution.theory", fail)
    monkeypatch.setattr("singlehead.bayes.bayes_optimal", fail)
    again = [e for e in _events(Engine(tmp_path), SMALL) if e["event"] in ("point", "bayes")]
    assert again == first


def test_power_law_views_stream_the_scaling_curve():
    params = {**SMALL, "target": "power_law", "gamma": "1.0", "d": "50", "noise": "0.1", "n_alpha": "3"}
    ev = {e["event"]: e for e in _events(Engine(memory_only=True), params)}
    s = ev["scaling"]
    assert s["n"] == pytest.approx([a * 2500 for a in parse_view(params).alphas])
    assert all(x > 0 for x in s["local_exponent"])  # the excess error falls with n on this grid
    assert ev["thresholds"]["alpha_perf"] is None  # no closed form for power-law targets


@pytest.fixture(scope="module")
def sim_files(tmp_path_factory):
    """A ``simulate --out`` JSON-lines file and the reproduce-style CSV of the same runs."""
    from singlehead.cli import main
    from singlehead.report.compare import records_to_frame

    root = tmp_path_factory.mktemp("sims")
    jsonl = root / "runs.jsonl"
    main(
        [
            "simulate",
            "--T",
            "2",
            "--d",
            "12",
            "--alpha",
            "0.25,0.5",
            "--seeds",
            "3",
            "--noise",
            "0.5",
            "--lam",
            "0.02",
            "--n-test",
            "100",
            "--out",
            str(jsonl),
        ]
    )
    records = [json.loads(x) for x in jsonl.read_text().splitlines()]
    csv = root / "errors_vs_alpha.csv"
    records_to_frame(records).assign(kind="simulation_lbfgs").to_csv(csv, index=False)
    return jsonl, csv, records


def test_overlay_reads_simulate_and_reproduce_files(sim_files):
    import numpy as np

    from singlehead.explore.overlay import load_overlay

    jsonl, csv, records = sim_files
    for path in (jsonl, csv):
        out = load_overlay(Path(path).read_text(), path.name)
        (s,) = out["series"]
        assert s["alpha"] == [0.25, 0.5] and s["n_seeds"] == [3, 3]
        for i, a in enumerate(s["alpha"]):
            v = np.array([r["test_error"] for r in records if r["problem"]["alpha"] == a])
            assert s["test_error_mean"][i] == pytest.approx(v.mean(), rel=1e-12)
            assert s["test_error_se"][i] == pytest.approx(v.std(ddof=1) / np.sqrt(3), rel=1e-12)
    with pytest.raises(ValueError, match="no simulation rows"):
        load_overlay("a,b\n1,2\n")


def test_server_routes():
    import warnings

    with warnings.catch_warnings():  # recent starlette asks for httpx2 over httpx; either drives the app
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from singlehead.explore import create_app
    from singlehead.explore.server import plotly_bundle

    client = TestClient(create_app(Engine(memory_only=True)))
    assert client.get("/").status_code == 200
    assert client.get("/static/plotly.min.js").content == plotly_bundle().read_bytes()
    assert client.get("/static/nothing.js").status_code == 404
    lines = client.get("/api/stream", params={**SMALL, "lam": "-1"}).text.splitlines()
    assert [json.loads(x) for x in lines] == [
        {"event": "invalid", "field": "lam", "message": "lam must be >= 0 (got -1.0)"}
    ]
    bad = client.post("/api/overlay", content=b"x,y\n1,2\n")
    assert bad.status_code == 400 and "no simulation rows" in bad.json()["error"]


def test_cli_refuses_a_bad_port(usage_error):
    usage_error(["explore", "--port", "70000", "--no-browser"], "port")


def test_mp_default_target_matches_problem_default():
    assert parse_view({}).problem.target == MPTarget(kappa0=0.5)


def test_worker_processes_give_the_same_points_and_bayes_curve():
    from singlehead.runs import Cache, Job
    from singlehead.runs.runner import theory_chains

    jobs = [Job("theory", Problem(alpha=0.1 * (k + 1))) for k in range(7)]

    def cut(todo, parts, cache=None):  # the runner's segments of the grid points to compute, as indices
        chains, rest = theory_chains(jobs, {jobs[k].key for k in todo}, parts, min_piece=1, cache=cache)
        return [[jobs.index(j) for j in seg] for _, seg, _ in chains], [jobs.index(j) for j in rest]

    assert cut(range(7), 2) == ([[0, 1, 2, 3], [4, 5, 6]], [])
    cache = Cache(None)
    cache.put({"key": jobs[3].key, "test_error": 0.5})  # a cached point starts the segment after it
    assert cut([0, 1, 4, 5, 6], 3, cache) == ([[0, 1], [4, 5], [6]], [])
    assert [init for *_, init in theory_chains(jobs, {jobs[k].key for k in (0, 1, 4, 5, 6)}, 3, 1, cache)[0]] == [
        None,
        cache.get(jobs[3].key),
        None,
    ]
    assert cut([3], 4) == ([], [3])  # one point: a cold solve, no chain
    from singlehead import bayes_optimal

    view = parse_view(SMALL)
    engine = Engine(memory_only=True, workers=2)
    try:
        events = _events(engine, SMALL)
    finally:
        engine.close()
    got = {(e["event"], e["i"]): e for e in events if e["event"] in ("point", "bayes")}
    assert len(got) == 6 and events[-1]["event"] == "done"
    for i, a in enumerate(view.alphas):  # other chunk boundaries: the same fixed points to the solver tolerance
        p = view.problem.replace(alpha=a)
        assert got["point", i]["test_error"] == pytest.approx(theory(p).test_error, abs=1e-6)
        assert got["bayes", i]["test_error"] == bayes_optimal(p).test_error


def test_the_untied_student_streams_its_curve_and_singular_value_law():
    """The explorer knows the untied student: its SE points (as theory() gives them), its interpolation
    threshold (1/2 at T = 2), its singular-value law in the spectrum panel, no decomposition panel."""
    params = {"student": "untied", "n_alpha": "2", "alpha_min": "1", "alpha_max": "2", "alpha_at": "1", "lam": "0.05"}
    ev = _events(Engine(memory_only=True), params)
    points = sorted((e for e in ev if e["event"] == "point"), key=lambda e: e["i"])
    ref = theory(Problem(d=100, T=2, alpha=1.0, noise=0.5, lam=0.05, student="untied"))
    assert points[0]["test_error"] == pytest.approx(ref.test_error, rel=1e-9)
    thr = next(e for e in ev if e["event"] == "thresholds")
    assert thr["alpha_interp"] == 0.5 and thr["alpha_perf"] == pytest.approx(0.4234, abs=5e-4)
    spec = next(e for e in ev if e["event"] == "spectrum")
    assert 0.0 <= spec["zero_atom"] < 1.0 and len(spec["grid"]) == len(spec["density"]) > 10
    assert not any(e["event"] == "decomposition" for e in ev)
    # the empty panel says why (the page shows it under the panel)
    why = [e for e in ev if e["event"] == "panel_error" and e["panel"] == "decomposition"]
    assert len(why) == 1 and "factorized (tied) student, not 'untied'" in why[0]["message"]


# several heads: the linear channel (exact theory, one effective head)
HEADS = {**SMALL, "channel": "linear", "kappa": "0.5", "heads": "2", "teacher_heads": "2"}


def test_heads_controls_default_to_one_head_and_change_nothing():
    assert parse_view({}).problem.heads == parse_view({}).problem.teacher_heads == 1
    one = parse_view({**SMALL, "heads": "1", "teacher_heads": "1"})
    assert one == parse_view(SMALL) and one.key() == parse_view(SMALL).key()
    assert "--heads" not in one.cli() and "heads=" not in one.python()


def test_linear_heads_stream_the_exact_multihead_theory():
    from singlehead import bayes_optimal, interpolation_threshold, perfect_recovery_threshold
    from singlehead.state_evolution import effective_single_head

    view = parse_view(HEADS)
    assert (view.problem.heads, view.problem.teacher_heads) == (2, 2)
    ev = _events(Engine(memory_only=True), HEADS)
    assert ev[0]["heads"] and "linear" in ev[0]["heads"] and ev[-1]["event"] == "done"
    assert not [e for e in ev if e["event"] == "panel_error"]
    points = sorted((e for e in ev if e["event"] == "point"), key=lambda e: e["i"])
    eff, c2 = effective_single_head(view.problem)
    assert c2 == 0.5
    for p in points:  # the multi-head problem's theory (the library's route for several heads)
        r = theory(view.problem.replace(alpha=p["alpha"]))
        assert p["test_error"] == pytest.approx(r.test_error, abs=1e-6)
    thr = next(e for e in ev if e["event"] == "thresholds")  # the equivalent keeps alpha: its thresholds
    assert thr["alpha_interp"] == pytest.approx(interpolation_threshold(eff), rel=1e-12)
    assert thr["alpha_perf"] == pytest.approx(perfect_recovery_threshold(eff), rel=1e-12)
    bayes = sorted((e for e in ev if e["event"] == "bayes"), key=lambda e: e["i"])
    assert [b["test_error"] for b in bayes] == pytest.approx(
        [c2 * bayes_optimal(eff.replace(alpha=a)).test_error for a in view.alphas], rel=1e-12
    )
    # the spectrum of S_eff: the rank of the mean of two heads of width p, not of one head
    spec = next(e for e in ev if e["event"] == "spectrum")
    at = theory(view.problem.replace(alpha=view.alpha_at))
    assert spec["rank_fraction"] == pytest.approx(at.rank_fraction, rel=1e-6) and spec["rank_fraction"] > 0.5
    assert spec["of"].startswith("S_eff")
    dc = next(e for e in ev if e["event"] == "decomposition")
    assert dc["test_error"] == pytest.approx(at.test_error, rel=1e-6)
    scope: dict = {}
    exec(compile(view.python(), "<explore>", "exec"), scope)  # noqa: S102 - code the page hands to users
    assert [r.test_error for r in scope["curve"]] == pytest.approx([p["test_error"] for p in points], abs=1e-6)
    assert shlex.split(view.cli())[-5:] == ["--heads", "2", "--teacher-heads", "2", "--json"]


def test_softmax_heads_draw_the_experimental_curve_only_with_a_note(monkeypatch):
    """Several heads on a softmax channel: the view is served, its note says experimental and slow, the curve is
    theory()'s (the runner's theory jobs, stubbed here: a point costs tens of seconds) and every other panel says
    why it is not drawn."""
    params = {**SMALL, "heads": "2", "teacher_heads": "2"}
    view = parse_view(params)
    engine = Engine(memory_only=True)
    calls = []

    def points(v, alive):
        calls.append(v.problem)
        return iter([])

    def refuse(*args, **kwargs):
        raise AssertionError("computed a single-head panel for several softmax heads")

    monkeypatch.setattr(engine, "theory_points", points)
    for name in ("thresholds", "spectrum", "decomposition", "bayes_points", "theory_at"):
        monkeypatch.setattr(engine, name, refuse)
    ev = list(engine.events(view))
    assert "EXPERIMENTAL" in ev[0]["heads"] and "slow" in ev[0]["heads"]
    assert calls == [view.problem] and (view.problem.heads, view.problem.channel.name) == (2, "seq2lab")
    errors = [e for e in ev if e["event"] == "panel_error"]
    assert [e["panel"] for e in errors] == ["thresholds", "spectrum", "bayes", "decomposition"]
    assert all("error curve only" in e["message"] for e in errors) and ev[-1]["event"] == "done"
    code = view.python()
    assert "heads=2, teacher_heads=2" in code and "bayes_optimal(" not in code.split("\n", 5)[-1]
    assert shlex.split(view.cli())[-5:] == ["--heads", "2", "--teacher-heads", "2", "--json"]


@pytest.mark.parametrize(
    "params, field",
    [({"heads": "5"}, "heads"), ({"teacher_heads": "5"}, "teacher_heads"), ({"heads": "2", "T": "4"}, "T")],
)
def test_softmax_heads_beyond_the_state_evolution_are_refused_naming_the_control(params, field):
    from singlehead.state_evolution.multihead_se import check_multihead_problem

    with pytest.raises(ViewError) as exc:
        parse_view({**SMALL, **params})
    with pytest.raises(ValueError) as lib:
        check_multihead_problem(parse_view({**SMALL, "channel": "linear", **params}).problem.replace(channel="seq2lab"))
    assert exc.value.field == field and str(exc.value) == str(lib.value)


@pytest.mark.slow
def test_softmax_heads_stream_the_theory_points():
    params = {**SMALL, "heads": "2", "teacher_heads": "2", "n_alpha": "2", "alpha_min": "1", "alpha_max": "2"}
    view = parse_view(params)
    ev = _events(Engine(memory_only=True), params)
    from singlehead.state_evolution import SEOptions, theory_curve
    from singlehead.state_evolution.api import result_settings

    points = sorted((e for e in ev if e["event"] == "point"), key=lambda e: e["i"])
    # the curve as singlehead theory solves it: its settings (the explorer's cache keys), each point from the
    # previous one
    settings = dict(result_settings(view.problem, SEOptions()))
    settings.pop("prior")
    curve = theory_curve(view.problem, view.alphas, options=SEOptions(**settings))
    assert [p["test_error"] for p in points] == pytest.approx([r.test_error for r in curve], rel=1e-3)
    assert "error curve only" in next(e for e in ev if e["event"] == "panel_error")["message"]


def test_heads_errors_of_the_library_land_on_their_control():
    with pytest.raises(ViewError) as exc:  # several teacher heads need an MP target for the exact theory
        parse_view({**HEADS, "target": "power_law", "d": "50"})
    assert exc.value.field == "teacher_heads" and "MP target" in str(exc.value)
    with pytest.raises(ViewError) as exc:
        parse_view({**HEADS, "student": "untied"})
    assert exc.value.field == "heads" and "factorized" in str(exc.value)
    with pytest.raises(ViewError) as exc:
        parse_view({**SMALL, "heads": "0"})
    assert exc.value.field == "heads"


def test_the_page_has_the_heads_controls():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from singlehead.explore import create_app

    client = TestClient(create_app(Engine(memory_only=True)))
    page = client.get("/").text
    for name in ("heads", "teacher_heads"):
        assert f'name="{name}"' in page and f'data-err="{name}"' in page
    lines = client.get("/api/stream", params={**SMALL, "heads": "5"}).text.splitlines()
    (ev,) = [json.loads(x) for x in lines]
    assert ev["event"] == "invalid" and ev["field"] == "heads"
