"""Phase diagrams (singlehead.analysis.phase): input validation, the frame, resume, regions against the closed forms."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, interpolation_threshold, perfect_recovery_threshold, phase_diagram
from singlehead.analysis import phase as phase_mod
from singlehead.analysis.phase import REGIONS, classify

NOISY = Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5))
NOISELESS = Problem(T=2, noise=0.0, target=MPTarget(kappa0=0.5))


# ---------------------------------------------------------------- validation (before any solve)
@pytest.mark.parametrize(
    "x,y,name",
    [
        (("gamma", [0.1, 1.0]), ("lam", [1e-3, 1e-2]), "gamma"),  # not an axis parameter
        (("alpha", [0.5]), ("lam", [1e-3, 1e-2]), "alpha"),  # fewer than 2 values
        (("alpha", [0.5, 1.0]), ("lam", [0.0, 1e-2]), "lam"),  # non-positive on a log axis
        (("alpha", [-0.5, 1.0]), ("lam", [1e-3, 1e-2]), "alpha"),
        (("lam", [1e-3, 1e-2]), ("lam", [1e-3, 1e-2]), "lam"),  # the same parameter twice
        (("kappa", [0.5, 1.5]), ("lam", [1e-3, 1e-2]), "kappa"),  # outside the Problem's range
        (("T", [2, 2.5]), ("lam", [1e-3, 1e-2]), "T"),  # T takes integers
        (("alpha", [0.5, 0.5]), ("lam", [1e-3, 1e-2]), "alpha"),  # repeated values
        (("noise", [0.1, math.nan]), ("lam", [1e-3, 1e-2]), "noise"),
    ],
)
def test_bad_axes_raise_naming_the_parameter(x, y, name, monkeypatch):
    def no_solve(*args, **kwargs):
        raise AssertionError("a point was solved before the input was validated")

    monkeypatch.setattr(phase_mod, "iter_theory_curve", no_solve)
    with pytest.raises(ValueError, match=name) as exc:
        phase_diagram(NOISY, x=x, y=y, stability=False)
    assert (
        "(" in str(exc.value)
        or "valid" in str(exc.value)
        or "at least 2" in str(exc.value)
        or "distinct" in str(exc.value)
        or "finite" in str(exc.value)
    )


def test_bad_name_lists_the_valid_parameters():
    with pytest.raises(ValueError, match="valid: alpha, lam, kappa, kappa0, noise, beta, beta0, T"):
        phase_diagram(NOISY, x=("d", [10, 20]), y=("lam", [1e-3, 1e-2]))


def test_kappa0_axis_needs_a_target_with_a_rank_ratio():
    from singlehead import PowerLawTarget

    with pytest.raises(ValueError, match="kappa0"):
        phase_diagram(
            Problem(T=2, noise=0.5, target=PowerLawTarget()),
            x=("kappa0", [0.3, 0.6]),
            y=("lam", [1e-3, 1e-2]),
            stability=False,
        )


def test_workers_validated():
    with pytest.raises(ValueError, match="workers"):
        phase_diagram(NOISY, x=("alpha", [0.5, 1.0]), y=("lam", [1e-3, 1e-2]), workers=0)


# ---------------------------------------------------------------- classify (the region logic itself)
def _rec(**kw):
    base = {
        "problem": {"noise": 0.5},
        "converged": True,
        "collapsed": False,
        "replicon": 0.5,
        "train_error": 0.1,
        "e0": 0.4,
        "matrix_error": 0.3,
        "Q0": 1.5,
    }
    base.update(kw)
    return base


@pytest.mark.parametrize(
    "kw,region",
    [
        ({}, "ordinary"),
        ({"converged": False, "collapsed": True}, "unconverged"),
        ({"collapsed": True, "replicon": 2.0}, "collapsed"),
        ({"replicon": 1.2, "train_error": 1e-6}, "rs_unstable"),
        ({"replicon": math.inf}, "rs_unstable"),
        ({"replicon": None, "train_error": 1e-6}, "interpolating"),  # no stability check: never rs_unstable
        ({"train_error": 3.9e-4}, "interpolating"),  # 3.9e-4 <= 1e-3 * 0.4
        ({"train_error": 4.1e-4}, "ordinary"),
        ({"problem": {"noise": 0.0}, "train_error": 1e-7, "matrix_error": 1e-3}, "perfect_recovery"),
        ({"problem": {"noise": 0.0}, "train_error": 1e-7, "matrix_error": 1e-2}, "interpolating"),
        ({"problem": {"noise": 0.1}, "train_error": 1e-7, "matrix_error": 1e-5}, "interpolating"),  # noisy: no recovery
    ],
)
def test_classify_precedence_and_tolerances(kw, region):
    flags = classify(_rec(**kw))
    assert flags["region"] == region
    assert set(flags) == {*REGIONS[:-1], "region"}


# ---------------------------------------------------------------- the frame and the curves
def test_frame_columns_and_regions():
    diagram = phase_diagram(NOISY, x=("alpha", [0.1, 1.0]), y=("lam", [1e-4, 10.0]), stability=True)
    frame = diagram.to_frame()
    assert len(frame) == 4 and diagram.shape == (2, 2)
    for col in (
        "alpha",
        "lam",
        "test_error",
        "train_error",
        "rank_fraction",
        "converged",
        "diagnosis",
        "replicon",
        "region",
        "collapse_lam",
        "alpha_interp",
        "T",
        "noise",
        "kappa",
        "kappa0",
        "channel",
        "student",
        "beta",
        "beta0",
    ):
        assert col in frame.columns, col
    # row-major: y outer, x inner
    assert list(frame["alpha"]) == [0.1, 1.0, 0.1, 1.0] and list(frame["lam"]) == [1e-4, 1e-4, 10.0, 10.0]
    assert list(frame["region"]) == ["interpolating", "ordinary", "collapsed", "collapsed"]
    assert (frame["replicon"][:2] < 1).all() and (frame["replicon"][2:] == 0).all()
    assert diagram.grid("test_error").shape == (2, 2)
    # the curves: the library's closed forms, as functions of the other axis
    assert diagram.curves["alpha_interp"].values[0] == pytest.approx(interpolation_threshold(NOISY), rel=1e-9)
    lc = diagram.curves["collapse_lam"]
    assert lc.along == "alpha" and lc.coordinates == (0.1, 1.0) and lc.values[0] < lc.values[1]
    assert "alpha_perfect" not in diagram.curves  # noisy labels: no perfect recovery


def test_kappa0_axis_curve_follows_the_threshold():
    diagram = phase_diagram(NOISY, x=("kappa0", [0.3, 0.7]), y=("alpha", [0.5, 1.0]), stability=False)
    curve = diagram.curves["alpha_interp"]
    assert curve.along == "kappa0"
    for k0, v in zip(curve.coordinates, curve.values):
        assert v == pytest.approx(interpolation_threshold(NOISY.replace(target=MPTarget(kappa0=k0))), rel=1e-9)
    assert diagram.to_frame()["kappa0"].tolist() == [0.3, 0.7, 0.3, 0.7]


def test_plot_draws_heat_map_curves_and_boundaries():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    diagram = phase_diagram(NOISY, x=("alpha", [0.1, 0.3, 1.0]), y=("lam", [1e-4, 0.05, 10.0]), stability=False)
    ax = diagram.plot()
    labels = {h.get_label() for h in ax.get_legend().legend_handles}
    assert {"alpha_interp", "collapse_lam", "collapsed boundary"} <= labels
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    plt.close(ax.figure)


# ---------------------------------------------------------------- the cache and resume
def test_out_caches_each_point_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "grid.jsonl"
    args = dict(x=("alpha", [0.3, 0.6, 1.0]), y=("lam", [1e-3, 1e-2]), stability=False, out=out)
    first = phase_diagram(NOISY, **args)
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and all("key" in json.loads(line) for line in lines)
    # an interrupted run: the last point lost, the one before cut mid-line
    out.write_text("\n".join(lines[:4]) + "\n" + lines[4][: len(lines[4]) // 2])
    solved = []
    real = phase_mod.iter_theory_curve

    def counting(problem, values, **kw):
        for r in real(problem, values, **kw):
            solved.append(r.problem[kw.get("param", "alpha")])
            yield r

    monkeypatch.setattr(phase_mod, "iter_theory_curve", counting)
    second = phase_diagram(NOISY, **args)
    assert second.resumed == 4
    assert sorted(solved) == [0.6, 1.0]  # only the two lost points of the lam = 1e-2 row
    a, b = first.to_frame(), second.to_frame()
    np.testing.assert_allclose(a["test_error"], b["test_error"], rtol=1e-5)
    assert list(a["region"]) == list(b["region"])
    # a third run computes nothing
    solved.clear()
    third = phase_diagram(NOISY, **args)
    assert solved == [] and third.resumed == 6


def test_cache_key_separates_options(tmp_path):
    from singlehead.state_evolution import SEOptions

    out = tmp_path / "grid.jsonl"
    args = dict(x=("alpha", [0.5, 1.0]), y=("lam", [1e-2, 1e-1]), stability=False, out=out)
    phase_diagram(NOISY, **args)
    again = phase_diagram(NOISY, **args, options=SEOptions(tol=1e-7))
    assert again.resumed == 0 and len(out.read_text().splitlines()) == 8


# ---------------------------------------------------------------- regions against the closed-form thresholds
def _bracket(values, threshold):
    """Indices (k, k + 1) of the grid values bracketing ``threshold``."""
    k = int(np.searchsorted(values, threshold)) - 1
    assert 0 <= k < len(values) - 1
    return k, k + 1


def test_interpolation_boundary_brackets_the_threshold():
    """At small lam the region `interpolating` ends between the grid points bracketing alpha_interp."""
    alphas = [0.08, 0.12, 0.145, 0.2, 0.3]
    a_int = interpolation_threshold(NOISY)  # 0.153
    diagram = phase_diagram(NOISY, x=("alpha", alphas), y=("lam", [1e-5, 1e-4]), stability=False)
    lo, hi = _bracket(alphas, a_int)
    flags = np.array([f["interpolating"] for f in diagram.regions()]).reshape(diagram.shape)
    for row in flags:
        assert row[: lo + 1].all() and not row[hi:].any(), row


def test_perfect_recovery_boundary_brackets_the_threshold():
    alphas = [0.12, 0.18, 0.25, 0.4]
    a_perf = perfect_recovery_threshold(NOISELESS)  # 0.211
    diagram = phase_diagram(NOISELESS, x=("alpha", alphas), y=("lam", [1e-5, 1e-4]), stability=False)
    lo, hi = _bracket(alphas, a_perf)
    regions = np.array([r["region"] for r in diagram.rows()]).reshape(diagram.shape)
    for row in regions:
        assert (row[: lo + 1] == "interpolating").all() and (row[hi:] == "perfect_recovery").all(), row
    assert diagram.curves["alpha_perfect"].values[0] == pytest.approx(a_perf, rel=1e-9)


def test_collapse_boundary_brackets_collapse_lam():
    """Along lam at fixed alpha, `collapsed` starts between the grid points bracketing extras['collapse_lam']."""
    lams = np.geomspace(0.05, 20.0, 7).tolist()
    diagram = phase_diagram(NOISY, x=("alpha", [0.3, 1.0]), y=("lam", lams), stability=False)
    frame = diagram.to_frame()
    for alpha in (0.3, 1.0):
        col = frame[frame["alpha"] == alpha]
        lam_c = float(col["collapse_lam"].median())
        lo, hi = _bracket(lams, lam_c)
        collapsed = col["is_collapsed"].to_numpy()
        assert not collapsed[: lo + 1].any() and collapsed[hi:].all(), (alpha, lam_c, collapsed)
        assert (col["region"].to_numpy()[hi:] == "collapsed").all()


@pytest.mark.slow
def test_workers_match_one_process(tmp_path):
    args = dict(x=("alpha", [0.3, 1.0]), y=("lam", [1e-3, 1e-2, 1e-1]), stability=False)
    one = phase_diagram(NOISY, **args).to_frame()
    two = phase_diagram(NOISY, **args, workers=2, out=tmp_path / "g.jsonl").to_frame()
    np.testing.assert_allclose(one["test_error"], two["test_error"], rtol=1e-6)
    assert len((tmp_path / "g.jsonl").read_text().splitlines()) == 6


@pytest.mark.slow
def test_T_axis_chains_along_the_other_axis():
    diagram = phase_diagram(NOISY, x=("T", [2, 3]), y=("alpha", [0.5, 1.0]), stability=False)
    frame = diagram.to_frame()
    assert frame["T"].tolist() == [2, 3, 2, 3] and frame["converged"].all()
    assert frame["alpha_interp"][0] > frame["alpha_interp"][1]  # more informative directions at T = 3


def test_untied_cost_is_estimated_before_the_run(monkeypatch, capsys):
    """One point is timed first and the estimate warned (and printed with progress) before the rest runs; the
    solver is replaced by the tied one here (an untied point costs a minute), the bookkeeping is the same."""
    from singlehead.state_evolution import theory

    calls = []

    def fake_curve(problem, values, param="alpha", **kw):
        calls.append(list(values))
        for v in values:
            yield theory(problem.replace(student="factorized", **{param: v}))

    monkeypatch.setattr(phase_mod, "iter_theory_curve", fake_curve)
    with pytest.warns(UserWarning, match="4 points of a untied student problem; one point took"):
        diagram = phase_diagram(
            NOISY.replace(student="untied"),
            x=("alpha", [0.5, 1.0]),
            y=("lam", [1e-2, 1e-1]),
            stability=False,
            progress=True,
        )
    assert calls[0] == [0.5]  # the timed point, kept: the rest starts after it
    assert sorted(map(len, calls[1:])) == [1, 2]
    assert "one point took" in capsys.readouterr().err
    assert diagram.to_frame()["converged"].all()


def test_one_failing_point_fails_alone_and_no_solvable_point_raises(monkeypatch):
    from singlehead.state_evolution import theory as real_theory

    def broken_curve(problem, values, **kw):
        raise ValueError("boom: the chain broke")
        yield  # pragma: no cover

    def theory_fails_at_one(problem, **kw):
        if problem.alpha == 1.0:
            raise ValueError("kappa: no theory here")
        return real_theory(problem, **kw)

    monkeypatch.setattr(phase_mod, "iter_theory_curve", broken_curve)
    monkeypatch.setattr(phase_mod, "theory", theory_fails_at_one)
    frame = phase_diagram(NOISY, x=("alpha", [0.5, 1.0]), y=("lam", [1e-2, 1e-1]), stability=False).to_frame()
    assert list(frame["region"]) == ["ordinary", "unconverged", "ordinary", "unconverged"]

    monkeypatch.setattr(phase_mod, "theory", lambda problem, **kw: (_ for _ in ()).throw(ValueError("kappa: none")))
    with pytest.raises(ValueError, match="kappa: none"):
        phase_diagram(NOISY, x=("alpha", [0.5, 1.0]), y=("lam", [1e-2, 1e-1]), stability=False)
