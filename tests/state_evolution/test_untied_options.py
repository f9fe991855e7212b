"""Every state-evolution option reaches a non-symmetric (untied) student, or is refused by name.

``theory(problem, options=..., prior=..., quad=...)`` and :func:`theory_curve` solve a
non-symmetric student with the one state-evolution solver, on the map of its two blocks of fields
(:mod:`singlehead.state_evolution.block_map`); these tests check that the budget, the method, the
stages' tuning, the sample and quadrature settings and a given node set change what it does, that
the options it has no counterpart for raise ``ValueError`` naming them, that a non-symmetric
student without a block prior side is refused (not given nuclear-norm theory), and that cache keys
hold exactly the settings that change a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from singlehead import Problem, theory, theory_curve
from singlehead.model.students import Student
from singlehead.state_evolution import SEOptions, prior_model
from singlehead.state_evolution.api import result_settings
from singlehead.state_evolution.quadrature import OutputQuadrature

# cheap settings: closed-form output side, small prior instances
LINEAR = Problem(d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=0.5, student="untied")
SMALL = SEOptions(sample_dim=24, sample_draws=2, draw_errors=False)


def test_max_iter_one_cannot_report_converged():
    # max_iter bounds the damped iteration: with method="iterate" it is the whole solve
    r = theory(LINEAR, options=SMALL.replace(max_iter=1, method="iterate"))
    assert not r.converged and r.iterations <= 2  # one step on the coarse nodes' start, one on the full ones
    assert "not converged" in r.message and r.diagnosis == "solver_miss"
    assert theory(LINEAR, options=SMALL.replace(method="iterate")).converged  # the default budget suffices


def test_max_evals_bounds_the_solve():
    r = theory(LINEAR, options=SMALL.replace(max_evals=3))
    assert not r.converged
    assert r.extras["evaluations"] <= 3 + 1  # the budget, plus the evaluation that reports the returned point


def test_tol_and_sample_settings_are_applied():
    loose = theory(LINEAR, options=SMALL.replace(tol=1e-2, method="iterate"))
    tight = theory(LINEAR, options=SMALL.replace(tol=1e-7, method="iterate"))
    assert loose.converged and tight.converged
    assert 1e-7 < loose.extras["residual"] < 1e-1 and tight.extras["residual"] < 1e-6
    assert loose.iterations < tight.iterations
    assert tight.extras["prior"] == "sampled D=24 x 2, D=12 x 4, extrapolated in 1/D"
    other_seed = theory(LINEAR, options=SMALL.replace(tol=1e-7, node_seed=1))
    assert other_seed.test_error != tight.test_error  # node_seed draws the prior's instances
    # sample_seed alone redraws them; None is node_seed
    assert theory(LINEAR, options=SMALL.replace(tol=1e-7, sample_seed=1)).test_error == other_seed.test_error
    assert (
        theory(LINEAR, options=SMALL.replace(tol=1e-7, method="iterate", sample_seed=0)).test_error == tight.test_error
    )
    plain = theory(LINEAR, options=SMALL.replace(tol=1e-7, method="iterate", sample_extrapolate=False))
    assert plain.extras["prior"] == "sampled D=24 x 2" and plain.test_error != tight.test_error


def test_a_given_node_set_is_used():
    p = LINEAR.replace(channel="seq2lab", alpha=0.5, lam=0.05)
    o = SMALL.replace(n_points=64, n_scrambles=2)
    quad = OutputQuadrature.sobol(8, 64, 2, 0)  # 2 T^2 dimensions, the nodes o describes
    assert theory(p, options=o, quad=quad).test_error == theory(p, options=o).test_error
    other = theory(p, options=o, quad=OutputQuadrature.sobol(8, 64, 2, 5))
    assert other.test_error != theory(p, options=o).test_error
    with pytest.raises(ValueError, match="quad has 6 dimensions"):
        theory(p, options=o, quad=OutputQuadrature.sobol(6, 64, 2, 0))


@pytest.mark.parametrize("change", [dict(prox_branch="teacher"), dict(prox_branch="z"), dict(draws=5)])
def test_options_without_a_counterpart_raise_naming_them(change):
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"options.{name} does not apply to the untied student"):
        theory(LINEAR, options=SEOptions(**change))
    with pytest.raises(ValueError, match=f"options.{name}"):
        theory_curve(LINEAR, [0.5, 1.0], options=SEOptions(**change))


def test_one_scramble_is_refused():
    with pytest.raises(ValueError, match="options.n_scrambles must be >= 2 for the untied student"):
        theory(LINEAR, options=SMALL.replace(n_scrambles=1))


def test_the_stages_options_apply():
    # the one solver's methods and stages act on the block map as on a symmetric student's
    base = theory(LINEAR, options=SMALL)
    assert base.converged
    for change in (
        dict(method="hybr"),
        dict(method="iterate"),
        dict(switch=0.1),
        dict(coarse=False),
        dict(exact_jacobian=False),
        dict(prox_screen=None),
    ):
        r = theory(LINEAR, options=SMALL.replace(**change))
        assert r.converged, change
        assert r.test_error == pytest.approx(base.test_error, rel=1e-4), change  # 100 tol
    evals = {
        m: theory(LINEAR, options=SMALL.replace(method=m)).extras["evaluations_all_attempts"]
        for m in ("broyden", "hybr", "iterate")
    }
    assert len(set(evals.values())) > 1  # the method changes the solve's path


def test_the_quadrature_floor_and_the_union_resolve_apply():
    p = LINEAR.replace(channel="seq2lab", alpha=0.5, lam=0.05)
    o = SMALL.replace(n_points=64, n_scrambles=2)
    r = theory(p, options=o.replace(tol=1e-12, floor_after=3))
    # a tolerance below the 64-node quadrature error: the solve ends at the map's quadrature floor
    assert r.converged and "quadrature floor" in r.message, r.message
    assert r.extras["residual"] < r.extras["residual_floor"]
    # without the floor stop the solve goes on (to its budget) before the same verdict
    longer = theory(p, options=o.replace(tol=1e-12, floor_after=None, max_evals=40))
    assert longer.extras["evaluations_all_attempts"] > r.extras["evaluations_all_attempts"]


@pytest.mark.parametrize("prior", ["finite", "priormodel"])
def test_a_prior_that_does_not_apply_raises(prior):
    arg = prior_model(LINEAR.replace(student="factorized")) if prior == "priormodel" else prior
    with pytest.raises(ValueError, match="does not apply to the untied student"):
        theory(LINEAR, prior=arg, options=SMALL)


def test_asymptotic_prior_is_auto():
    assert theory(LINEAR, prior="asymptotic", options=SMALL).test_error == theory(LINEAR, options=SMALL).test_error


def test_sample_options_do_not_apply_to_a_symmetric_student():
    with pytest.raises(ValueError, match="options.sample_dim does not apply to the factorized student"):
        theory(LINEAR.replace(student="factorized"), options=SEOptions(sample_dim=50))
    with pytest.raises(ValueError, match="options.draw_errors does not apply to the direct student"):
        theory_curve(LINEAR.replace(student="direct"), [1.0], options=SEOptions(draw_errors=False))


@dataclass(frozen=True)
class _NoBlockPrior(Student):
    """A non-symmetric student that implements no prior side on field blocks."""

    name: ClassVar[str] = "no_block_prior_example"
    symmetric: ClassVar[bool] = False


def test_a_non_symmetric_student_without_a_block_prior_side_is_refused():
    with pytest.raises(NotImplementedError, match="block_prior_side"):
        theory(LINEAR.replace(student=_NoBlockPrior()), options=SMALL)


def test_cache_settings_hold_what_changes_the_result():
    tied_linear, tied_soft = (
        LINEAR.replace(student="factorized"),
        LINEAR.replace(student="factorized", channel="seq2lab"),
    )
    untied_linear = LINEAR
    # closed forms, asymptotic prior: no nodes, nothing drawn
    assert result_settings(tied_linear, SEOptions(n_points=512, node_seed=3)) == (("prior", "auto"), ("tol", 1e-6))
    assert result_settings(tied_linear, SEOptions(), "asymptotic") == result_settings(tied_linear, SEOptions())
    assert dict(result_settings(tied_linear, SEOptions(node_seed=3), "finite"))["node_seed"] == 3
    # the resolved node count: None and the student's default give one key
    assert result_settings(tied_soft, SEOptions()) == result_settings(tied_soft, SEOptions(n_points=2048))
    assert result_settings(untied_linear, SEOptions()) == result_settings(untied_linear, SEOptions(n_points=4096))
    assert result_settings(untied_linear, SEOptions()) != result_settings(untied_linear, SEOptions(n_points=2048))
    assert dict(result_settings(untied_linear, SEOptions(node_seed=2)))["node_seed"] == 2
    # the prior's instances and their sampling error change a non-symmetric student's result
    for change in (
        dict(sample_dim=50),
        dict(sample_draws=2),
        dict(draw_errors=False),
        dict(sample_seed=1),
        dict(sample_extrapolate=False),
    ):
        assert result_settings(untied_linear, SEOptions(**change)) != result_settings(untied_linear, SEOptions())
    # sample_seed None is node_seed: one key
    assert result_settings(untied_linear, SEOptions(sample_seed=0)) == result_settings(untied_linear, SEOptions())
    assert result_settings(untied_linear, SEOptions(node_seed=2, sample_seed=2)) == result_settings(
        untied_linear, SEOptions(node_seed=2)
    )
