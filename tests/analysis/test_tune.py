"""The weight decay of lowest predicted test error: singlehead.tune, tune_curve, alpha_for_error, `singlehead tune`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from singlehead import MPTarget, Problem, alpha_for_error, theory, theory_curve, tune, tune_curve
from singlehead.analysis import validation_pick, valley_halfwidth
from singlehead.analysis.tuning import TuneResult
from singlehead.state_evolution import SEOptions, prior_model
from singlehead.state_evolution.models import model_for

BASE = Problem(T=2, alpha=1.0, noise=0.5, target=MPTarget(0.5))


def _errors_around(problem: Problem, res: TuneResult, factor: float) -> tuple[float, float, float]:
    """Test error at lam*/factor, lam*, lam*·factor, on the node set and prior model the search used."""
    o = SEOptions()
    quad = o.quadrature(problem)
    pm = prior_model(problem, "auto", draws=o.draws, seed=o.node_seed)
    out = []
    for lam in (res.lam / factor, res.lam, res.lam * factor):
        r = theory(problem.replace(lam=lam), options=o, prior=pm, quad=quad, init=res.result)
        assert r.converged, lam
        out.append(r.test_error)
    return out[0], out[1], out[2]


@pytest.mark.parametrize("kw", [{}, {"channel": "linear"}], ids=["seq2lab", "linear"])
def test_tuned_lam_is_a_minimum_of_the_theory(kw):
    """lam* is a minimum of lam -> theory(lam).test_error: moving lam by a factor 10^(10 lam_tol) (10 times the
    search tolerance in log10 lam) does not lower the error beyond the solver's resolution. The comparison
    tolerance: a fixed point to relative residual tol moves the error by at most ~tol times its size (the node set
    is shared, so the quadrature error cancels in the difference); 100 tol e* leaves a factor 100. A lam* off by
    more than the step would show a decrease of order the curvature times the step squared (~1e-6 here),
    far above it."""
    problem = BASE.replace(**kw)
    res = tune(problem)
    assert res.converged and res.boundary is None and not res.skipped and res.message == ""
    assert 1e-5 < res.lam < 10.0 and math.isfinite(res.test_error)
    lo, mid, hi = _errors_around(problem, res, 10.0 ** (10 * res.lam_tol))
    assert mid == pytest.approx(res.test_error, rel=1e-5)
    slack = 100 * model_for(problem).prepare(None).tol * res.test_error
    assert lo >= mid - slack and hi >= mid - slack
    # a genuine valley: a decade away on either side the error is clearly higher
    far_lo, _, far_hi = _errors_around(problem, res, 10.0)
    assert far_lo > mid + 1e-4 and far_hi > mid + 1e-4
    # the evaluated pairs hold lam* and nothing lower among converged points
    errs = [e for _, e in res.evaluations if math.isfinite(e)]
    assert min(errs) == pytest.approx(res.test_error, rel=0, abs=1e-15)
    assert (res.lam, res.test_error) in res.evaluations


def test_tuned_lam_beats_every_grid_point_and_the_point_lam():
    res = tune(BASE, points_per_decade=2)
    assert res.converged and res.boundary is None
    assert res.test_error <= theory(BASE.replace(lam=0.01)).test_error
    assert res.result is not None and res.result.problem["lam"] == pytest.approx(res.lam)


def test_noiseless_minimum_is_at_the_lower_boundary():
    """Noiseless data above perfect recovery: the best lam is the limit lam -> 0+, reported as a boundary."""
    res = tune(BASE.replace(noise=0.0), lam_range=(1e-4, 1.0))
    assert res.boundary == "lower" and res.lam == 1e-4
    assert "boundary" in res.message and "0+" in res.message
    assert res.test_error < 1e-6


def test_minimum_above_the_range_is_at_the_upper_boundary():
    res = tune(BASE, lam_range=(1e-4, 3e-3))
    assert res.boundary == "upper" and res.lam == pytest.approx(3e-3)
    assert "boundary" in res.message


def test_collapse_is_reported_as_upper_boundary():
    """A range wholly past the collapse (lam_c ~ 3.6 here): the plateau S = 0 is reported as the upper boundary."""
    res = tune(BASE, lam_range=(10.0, 100.0), points_per_decade=2)
    assert res.boundary == "upper" and res.converged and "collapse" in res.message
    assert res.result is not None and res.result.extras["collapsed"]
    assert res.lam == 10.0 and res.test_error == pytest.approx(theory(BASE.replace(lam=100.0)).test_error, rel=1e-12)


@pytest.mark.parametrize("noise, alpha, dip", [(50.0, 0.01, 1e-3), (100.0, 0.001, 1e-4)])
def test_interior_minimum_next_to_the_collapse_is_found(noise, alpha, dip):
    """Very noisy labels at small alpha: the grid's best point is on the collapsed plateau, but the error dips
    below it just before the collapse; the refinement between the last non-collapsed grid point and the plateau
    finds the dip (2.4e-4 deep at noise 100, alpha 0.001)."""
    problem = BASE.replace(noise=noise, alpha=alpha)
    res = tune(problem, lam_range=(1e-2, 100.0), points_per_decade=2)
    assert res.boundary is None and res.converged and not res.result.extras["collapsed"]
    plateau = theory(problem.replace(lam=100.0))
    assert plateau.extras["collapsed"] and res.test_error < plateau.test_error - dip
    assert res.lam < res.result.extras["collapse_lam"]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"lam_range": (1.0, 0.1)}, "lam_range"),
        ({"lam_range": (-1.0, 1.0)}, "lam_range"),
        ({"lam_range": (0.0, 1.0)}, "lam_range"),
        ({"lam_range": (1e-3,)}, "lam_range"),
        ({"lam_tol": 0.0}, "lam_tol"),
        ({"points_per_decade": 0}, "points_per_decade"),
    ],
)
def test_bad_tune_input_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tune(BASE, **kwargs)


@pytest.mark.parametrize("target", [0.0, -0.1, math.nan])
def test_bad_target_error_names_the_parameter(target):
    with pytest.raises(ValueError, match="target_error"):
        alpha_for_error(BASE, target)


def test_bad_alpha_range_and_alphas():
    with pytest.raises(ValueError, match="alpha_range"):
        alpha_for_error(BASE, 0.05, alpha_range=(2.0, 1.0))
    with pytest.raises(ValueError, match="alpha"):
        tune_curve(BASE, [1.0, -1.0])


def test_unreachable_target_error_names_the_reachable_range():
    with pytest.raises(ValueError, match=r"target_error=1e-06 is not reached.*goes from"):
        alpha_for_error(BASE, 1e-6, alpha_range=(0.5, 1.0), points_per_decade=2)
    with pytest.raises(ValueError, match=r"target_error=0.9 is already reached"):
        alpha_for_error(BASE, 0.9, alpha_range=(0.5, 1.0), points_per_decade=2)


def test_alpha_for_error_brackets_the_target():
    """The returned alpha reaches the target, and alpha 10^(-2 alpha_tol) below it does not."""
    target = 0.04
    kw = {"points_per_decade": 2, "lam_range": (1e-3, 1.0)}
    point = alpha_for_error(BASE, target, alpha_range=(0.5, 1.0), alpha_tol=0.01, **kw)
    assert 0.5 < point.alpha < 1.0 and point.test_error <= target
    below = tune(BASE.replace(alpha=point.alpha * 10 ** (-0.02)), **kw)
    assert below.test_error > target


def test_tune_curve_is_decreasing_in_alpha():
    curve = tune_curve(BASE, [0.5, 1.0], points_per_decade=2, lam_range=(1e-3, 1.0))
    assert [c.alpha for c in curve] == [0.5, 1.0]
    assert curve[0].test_error > curve[1].test_error and all(c.converged for c in curve)


def test_unconverged_points_are_skipped_and_reported(monkeypatch):
    """A theory point that does not converge is never chosen: it is skipped and listed."""
    import singlehead.analysis.tuning as mod

    real = mod.theory_curve

    def spoiled(problem, values, **kw):
        out = real(problem, values, **kw)
        # the grid point nearest the known optimum (lam ~ 0.036) did not converge
        i = min(range(len(values)), key=lambda k: abs(math.log10(values[k] / 0.036)))
        out[i].converged = False
        return out

    monkeypatch.setattr(mod, "theory_curve", spoiled)
    res = tune(BASE)
    assert len(res.skipped) == 1 and "skipped" in res.message
    assert res.lam != res.skipped[0]
    assert any(math.isnan(e) for _, e in res.evaluations)


def test_result_to_dict_is_json():
    res = tune(BASE, points_per_decade=2, lam_range=(1e-3, 1.0))
    rec = json.loads(json.dumps(res.to_dict()))
    assert {"alpha", "lam", "test_error", "converged", "boundary", "evaluations", "problem"} <= set(rec)


def test_cli_tune_json(capsys):
    from singlehead.cli import main

    main(
        [
            "tune",
            "--T",
            "2",
            "--alpha",
            "1",
            "--noise",
            "0.5",
            "--kappa0",
            "0.5",
            "--points-per-decade",
            "2",
            "--lam-min",
            "1e-3",
            "--lam-max",
            "1",
            "--json",
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert {"alpha", "lam", "test_error", "converged", "boundary"} <= set(rec)
    assert rec["alpha"] == 1.0 and rec["converged"] is True and rec["boundary"] is None
    assert rec["lam"] == pytest.approx(0.036, rel=0.05)


def test_cli_tune_bad_range_exits_2(capsys):
    from singlehead.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["tune", "--lam-min", "1", "--lam-max", "0.1"])
    assert exc.value.code == 2
    assert "lam-min" in capsys.readouterr().err


def test_cli_tune_target_error_json(capsys):
    from singlehead.cli import main

    main(
        [
            "tune",
            "--T",
            "2",
            "--noise",
            "0.5",
            "--kappa0",
            "0.5",
            "--target-error",
            "0.04",
            "--alpha",
            "0.5,1",
            "--alpha-tol",
            "0.01",
            "--points-per-decade",
            "2",
            "--lam-min",
            "1e-3",
            "--lam-max",
            "1",
            "--json",
        ]
    )
    rec = json.loads(capsys.readouterr().out.strip())
    assert 0.5 < rec["alpha"] < 1.0 and rec["test_error"] <= 0.04 and rec["converged"] is True


@pytest.mark.slow
def test_untied_student_tuned_lam_is_a_minimum():
    """The untied student (sampled prior side, no shared node set of the tied kind): the same minimum check."""
    problem = BASE.replace(student="untied")
    res = tune(problem, points_per_decade=2, lam_range=(1e-3, 1.0))
    assert res.converged and res.boundary is None
    step = 10.0 ** (10 * res.lam_tol)
    errs = [theory(problem.replace(lam=res.lam * f), init=res.result).test_error for f in (1 / step, 1.0, step)]
    slack = 100 * model_for(problem).prepare(None).tol * res.test_error
    assert errs[1] == pytest.approx(res.test_error, rel=1e-4)
    assert errs[0] >= errs[1] - slack and errs[2] >= errs[1] - slack


# --- validation_pick and valley_halfwidth: the tools of the report's tuned_lam figure ---------------------------


@pytest.mark.parametrize("vertex", [-1.37, -1.2, -1.5, -1.0])
def test_validation_pick_returns_the_vertex_of_a_parabola(vertex):
    """Errors that are a parabola in log10 lam (here with its vertex between the grid's neighbours of the minimum,
    or on a grid point): the pick is the vertex, whatever the grid's order."""
    x = np.array([-2.0, -5 / 3, -4 / 3, -1.0, -2 / 3, -1 / 3])
    errors = 0.03 + 0.02 * (x - vertex) ** 2
    lams = 10.0**x
    assert validation_pick(lams, errors) == pytest.approx(10.0**vertex, rel=1e-10)
    order = np.array([3, 0, 5, 1, 4, 2])
    assert validation_pick(lams[order], errors[order]) == pytest.approx(10.0**vertex, rel=1e-10)


def test_validation_pick_keeps_the_grid_point_at_an_end():
    lams = [0.01, 0.1, 1.0]
    assert validation_pick(lams, [1.0, 2.0, 3.0]) == pytest.approx(0.01)  # minimum at the lower end
    assert validation_pick(lams, [3.0, 2.0, 1.0]) == pytest.approx(1.0)  # at the upper end
    assert validation_pick(lams, [2.0, 1.0, 2.0]) == pytest.approx(0.1)  # symmetric: the grid point itself
    # a tie with the right neighbour: the first minimum, moved to the vertex halfway to the neighbour
    assert validation_pick(lams + [10.0], [2.0, 1.0, 1.0, 3.0]) == pytest.approx(10.0**-0.5)
    assert validation_pick([0.5], [1.0]) == pytest.approx(0.5)


def test_validation_pick_leaves_out_failed_runs():
    x = np.linspace(-2.0, 0.0, 7)
    errors = (x + 1.1) ** 2
    with_nan = errors.copy()
    with_nan[0] = np.nan
    assert validation_pick(10.0**x, with_nan) == pytest.approx(10.0**-1.1, rel=1e-10)


@pytest.mark.parametrize(
    "lams, errors, match",
    [
        ([0.1, 1.0], [1.0], "one entry per lam"),
        ([0.1, -1.0], [1.0, 2.0], "finite numbers > 0"),
        ([0.1, 0.1], [1.0, 2.0], "distinct"),
        ([0.1, 1.0], [math.nan, math.nan], "at least one finite"),
        ([], [], "at least one"),
    ],
)
def test_validation_pick_rejects_bad_input(lams, errors, match):
    with pytest.raises(ValueError, match=match):
        validation_pick(lams, errors)


def test_valley_halfwidth_of_a_quadratic_and_an_asymmetric_valley():
    """A valley c x^2 (x = log10(lam/lam*)) rises by rel at |x| = sqrt(rel/c) exactly (the interpolation of the
    square root of the excess is exact for it); an asymmetric valley gives the nearer edge."""
    x = np.linspace(-1.0, 1.0, 9)  # a coarse grid: the crossing is between samples
    e0, lam0 = 0.05, 0.03
    quad = e0 * (1.0 + 4.0 * x**2)
    assert valley_halfwidth(lam0 * 10.0**x, quad, lam0, e0, rel=0.01) == pytest.approx(0.05, rel=1e-12)
    assert valley_halfwidth(lam0 * 10.0**x, quad, lam0, e0, rel=0.04) == pytest.approx(0.1, rel=1e-12)
    asym = e0 * (1.0 + np.where(x < 0, 1.0, 16.0) * x**2)  # the right side steeper: edge at 0.1/4
    assert valley_halfwidth(lam0 * 10.0**x, asym, lam0, e0, rel=0.01) == pytest.approx(0.025, rel=1e-12)
    flat = e0 * (1.0 + 1e-4 * x**2)
    assert valley_halfwidth(lam0 * 10.0**x, flat, lam0, e0, rel=0.01) == math.inf


def test_valley_halfwidth_of_the_theory_curve_bounds_the_error_rise():
    """On the theory's own curve around lam*: inside the half-width the predicted error is within 1 % of err*,
    just outside (on the steeper side) it is not."""
    res = tune(BASE)
    x = np.linspace(-0.5, 0.5, 21)
    errors = [r.test_error for r in theory_curve(BASE.replace(lam=res.lam), list(res.lam * 10.0**x), param="lam")]
    h = valley_halfwidth(res.lam * 10.0**x, errors, res.lam, res.test_error)
    assert 0.05 < h < 0.5
    inside = [theory(BASE.replace(lam=res.lam * 10.0**s), init=res.result).test_error for s in (-0.9 * h, 0.9 * h)]
    outside = [theory(BASE.replace(lam=res.lam * 10.0**s), init=res.result).test_error for s in (-1.1 * h, 1.1 * h)]
    assert max(inside) < 1.01 * res.test_error
    assert max(outside) > 1.01 * res.test_error


def test_valley_halfwidth_rejects_bad_input():
    with pytest.raises(ValueError, match="lam_star"):
        valley_halfwidth([0.1, 1.0], [1.0, 2.0], 0.0, 1.0)
    with pytest.raises(ValueError, match="error_star"):
        valley_halfwidth([0.1, 1.0], [1.0, 2.0], 0.1, -1.0)
    with pytest.raises(ValueError, match="rel"):
        valley_halfwidth([0.1, 1.0], [1.0, 2.0], 0.1, 1.0, rel=0.0)
