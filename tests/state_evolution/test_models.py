"""The one dispatch from a problem to its state-evolution model, and what it refuses.

``model_for`` reads what the student and the channel declare (``Student.symmetric``,
``Channel.multihead_theory``); a channel that declares no theory of several heads is refused with a
``ValueError`` naming ``heads``, whatever class it derives from. Where the heads can specialise, the
default returns the lowest training objective of the fixed points it solved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from singlehead import MPTarget, Problem, theory, theory_curve
from singlehead.model.channels import Channel, Seq2Lab, register_channel
from singlehead.state_evolution import SEOptions
from singlehead.state_evolution.models import model_for


@dataclass(frozen=True)
class _CubeAttention(Channel):
    """Entry-wise ``(beta h)^3``: a channel without a theory of several heads (the default declaration)."""

    name: ClassVar[str] = "cube-test"

    def attention(self, h, beta):
        return (beta * h) ** 3


@dataclass(frozen=True)
class _SharpSoftmax(Seq2Lab):
    """A softmax subclass whose output the multi-head state evolution does not describe: it says so."""

    name: ClassVar[str] = "sharp-softmax-test"
    multihead_theory: ClassVar[str | None] = None


register_channel(_CubeAttention)
register_channel(_SharpSoftmax)


@pytest.mark.parametrize(
    "problem, name",
    [
        (Problem(), "tied"),
        (Problem(student="direct"), "tied"),
        (Problem(student="untied"), "blocks"),
        (Problem(heads=2), "heads"),
        (Problem(channel="hardmax", T=2, heads=2, teacher_heads=3), "heads"),
        (Problem(channel="linear", T=1, heads=2, teacher_heads=2), "linear_heads"),
    ],
)
def test_model_for_reads_declarations(problem, name):
    assert model_for(problem).name == name


@pytest.mark.parametrize("channel", ["cube-test", "sharp-softmax-test"])
@pytest.mark.parametrize("route", ["theory", "theory_curve"])
def test_channel_without_multihead_theory_is_refused(channel, route):
    problem = Problem(channel=channel, T=2, heads=2)
    with pytest.raises(ValueError, match=r"^heads: .*no state evolution of several heads"):
        if route == "theory":
            theory(problem)
        else:
            theory_curve(problem, [0.5, 1.0])
    # one head on the same channel is the single-head model
    assert model_for(problem.replace(heads=1)).name == "tied"


def test_specialising_heads_default_is_the_lowest_objective():
    # past the specialisation transition the unspecialised fixed point is not the ERM minimiser
    problem = Problem(T=2, alpha=2.5, noise=0.5, lam=0.01, heads=2, teacher_heads=2, target=MPTarget(kappa0=0.5))
    r = theory(problem)
    points = r.extras["fixed_points"]
    assert [p["ansatz"] for p in points][0] == r.extras["ansatz"]
    assert {p["ansatz"] for p in points} == {"unspecialised", "general"}
    objectives = {p["ansatz"]: p["objective"] for p in points}
    assert r.extras["objective"] == min(objectives.values())
    gap = objectives["unspecialised"] - objectives["general"]
    se = np.hypot(*(p["objective_se"] for p in points))
    assert gap > 3 * se  # the two fixed points are told apart by their objectives, not by noise
    assert r.extras["ansatz"] == "general" and r.converged
    assert "lowest training objective" in r.message


@pytest.mark.parametrize(
    "problem, options, match",
    [
        (Problem(), SEOptions(ansatz="general"), r"options\.ansatz does not apply to the tied"),
        (Problem(student="untied"), SEOptions(prior_tol=1e-6), r"options\.prior_tol does not apply to the blocks"),
        (Problem(heads=2), SEOptions(method="iterate"), r"options\.method does not apply to the heads"),
        (Problem(heads=2), SEOptions(continuation=False), r"options\.continuation does not apply to the heads"),
    ],
)
def test_an_option_the_model_does_not_read_is_refused_by_name(problem, options, match):
    with pytest.raises(ValueError, match=match):
        theory(problem, options=options)


def test_none_options_take_the_models_defaults():
    assert model_for(Problem()).prepare(None).tol == 1e-6
    heads = model_for(Problem(heads=2)).prepare(SEOptions(tol=1e-5))
    assert (heads.tol, heads.max_iter, heads.sample_draws) == (1e-5, 60, 4)  # given, the model's, the model's
    blocks = model_for(Problem(student="untied")).prepare(None)
    assert (blocks.tol, blocks.sample_draws, blocks.sample_extrapolate) == (1e-6, 8, True)


@pytest.mark.parametrize("cap", [1, 3])
def test_max_iter_caps_the_map_evaluations_of_a_point(cap):
    problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.01)
    free = theory(problem)
    assert free.converged and free.extras["evaluations_all_attempts"] > cap
    r = theory(problem, options=SEOptions(max_iter=cap))
    assert not r.converged and r.diagnosis is not None and r.message
    assert r.extras["evaluations_all_attempts"] <= cap + 1  # and the one that reports the best point
