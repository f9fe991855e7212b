"""Validity is the problem's own: every route accepts and refuses the same problems.

Two rules, each defined once:

* ``T`` below the channel's ``min_T`` (``T = 1`` for the softmax channels and hardmax, whose attention
  over a single token is constant) is refused where the ``Problem`` is built, so by every route: the
  Python entry points and every CLI subcommand (exit status 2, one ``error: ...`` line naming ``T``
  and the valid range);
* a training set with ``n = round(alpha d^2) = 0`` is refused by every route that samples data
  (``simulate``, ``amp`` and their CLI subcommands), naming ``alpha``, ``d`` and the bound
  ``1/(2 d^2)``; the theory routes, which hold ``alpha`` fixed as ``d -> inf``, accept it.

The valid edge problems (linear ``T = 1``, the softmax channels at ``T = 2``, the smallest ``alpha``
with one training sequence) are accepted by every route, on tiny ``d``; no softmax state-evolution
point runs (each costs seconds).
"""

from __future__ import annotations

import math
import re
import sys
import warnings

import pytest
from click.testing import CliRunner

from singlehead import Problem, bayes_optimal, simulate, theory
from singlehead.amp import AMPOptions, amp
from singlehead.cli import main
from singlehead.sim.simulation import TrainOptions
from singlehead.thresholds import (
    bayes_perfect_recovery_threshold,
    informative_directions,
    interpolation_threshold,
    perfect_recovery_threshold,
)

FAST_SIM = TrainOptions(n_test=10, max_steps=50)
FAST_AMP = AMPOptions(n_test=10, max_iter=20)


def _quiet(f):
    """``f`` with warnings silenced (the rank-cap warning of the thresholds is not what is tested)."""

    def run(problem):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f(problem)

    return run


# every Python route, as a function of Problem keyword arguments (the problem is built inside the route)
BUILD_ROUTES = {
    "Problem": lambda kw: Problem(**kw),
    "Problem.replace": lambda kw: Problem(d=kw.get("d", 100), channel="linear", T=1).replace(**kw),
    "Problem.from_dict": lambda kw: Problem.from_dict({**Problem().to_dict(), **kw}),
}
THEORY_ROUTES = {
    "theory": lambda kw: theory(Problem(**kw)),
    "bayes_optimal": lambda kw: bayes_optimal(Problem(**kw)),
    "informative_directions": lambda kw: informative_directions(Problem(**kw)),
    "interpolation_threshold": lambda kw: _quiet(interpolation_threshold)(Problem(**kw)),
    "perfect_recovery_threshold": lambda kw: _quiet(perfect_recovery_threshold)(Problem(**kw)),
    "bayes_perfect_recovery_threshold": lambda kw: bayes_perfect_recovery_threshold(Problem(**kw)),
}
DATA_ROUTES = {
    "simulate": lambda kw: simulate(Problem(**kw), 0, options=FAST_SIM),
    "amp": lambda kw: amp(Problem(**kw), 0, options=FAST_AMP),
}
ROUTES = {**BUILD_ROUTES, **THEORY_ROUTES, **DATA_ROUTES}

# CLI subcommands and the options each takes (thresholds has no --alpha; scaling names the channel --channel)
_TAKES_ALPHA = ("theory", "simulate", "amp", "bayes", "tune", "spectrum-theory", "decompose")
_FAST_CLI = {"simulate": ["--n-test", "10", "--max-steps", "50"], "amp": ["--n-test", "10", "--max-iter", "20"]}


def cli_args(command: str, kw: dict) -> list[str]:
    """``singlehead COMMAND`` with the options of ``kw`` (Problem fields) that the command takes."""
    if command == "scaling":
        return ["scaling", "--gamma", "1.25", "--channel", kw["channel"], "--T", str(kw["T"]), "--d", str(kw["d"])]
    names = {"channel": "--task", "T": "--T", "d": "--d", "noise": "--noise", "student": "--student"}
    if command in _TAKES_ALPHA:
        names["alpha"] = "--alpha"
    args = [command]
    for field, opt in names.items():
        if field in kw and not (command == "bayes" and field == "student"):
            args += [opt, repr(kw[field]) if isinstance(kw[field], float) else str(kw[field])]
    return args + _FAST_CLI.get(command, [])


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run the console entry point ``singlehead.cli.main`` (which maps a ``ValueError`` to exit status 2 and
    one ``error:`` line) inside click's ``CliRunner`` isolation; ``(exit status, stdout, stderr)``."""
    with CliRunner().isolation() as (out, err, _):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()  # the isolated streams are buffered text wrappers of out and err
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


# ------------------------------------------------------------------ invalid problems
def _T_message(channel: str) -> str:
    return rf"^T must be an integer >= 2 for the '{channel}' channel, whose output with fewer tokens does not depend"


T_INVALID = [
    pytest.param(dict(channel=ch, T=1, d=4, alpha=1.0, noise=0.1, **extra), _T_message(ch), id=f"{ch}-T1{tag}")
    for ch in ("seq2lab", "seq2seq", "hardmax")
    for extra, tag in (({}, ""), ({"student": "untied"}, "-untied"))
]
N_MESSAGE = r"^alpha must be > 1/\(2 d\^2\) = 0\.00125 at d=20, .*n = round\(alpha d\^2\) >= 1 .*1/d\^2 = 0\.0025"
N_INVALID = [
    pytest.param(dict(channel="linear", T=1, d=20, alpha=1e-6, noise=0.1), N_MESSAGE, id="n0-tiny-alpha"),
    pytest.param(dict(channel="linear", T=1, d=20, alpha=0.5 / 400, noise=0.1), N_MESSAGE, id="n0-half-rounds-down"),
    pytest.param(dict(channel="seq2lab", T=2, d=20, alpha=1e-4, noise=0.1), N_MESSAGE, id="n0-seq2lab"),
]
CLI_ALL = ("theory", "simulate", "amp", "bayes", "thresholds", "tune", "spectrum-theory", "decompose", "scaling")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kw, message", T_INVALID)
def test_T_below_the_channel_minimum_is_refused_by_every_route(route, kw, message):
    with pytest.raises(ValueError, match=message) as exc:
        ROUTES[route](kw)
    assert "(got 1)" in str(exc.value)


@pytest.mark.parametrize("command", CLI_ALL)
@pytest.mark.parametrize("kw, message", T_INVALID)
def test_T_below_the_channel_minimum_is_refused_by_every_cli_subcommand(command, kw, message):
    if command == "scaling" and "student" in kw:
        pytest.skip("scaling has no --student")
    code, out, err = run_cli(cli_args(command, kw))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, out, err)
    assert re.match(message, lines[0].removeprefix("error: ")), lines[0]
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("route", DATA_ROUTES)
@pytest.mark.parametrize("kw, message", N_INVALID)
def test_an_empty_training_set_is_refused_by_every_data_route(route, kw, message):
    problem = Problem(**kw)  # a valid problem for the theory (see below)
    with pytest.raises(ValueError, match=message):
        problem.check_training_set()
    with pytest.raises(ValueError, match=message):
        problem.n
    with pytest.raises(ValueError, match=message):
        DATA_ROUTES[route](kw)


@pytest.mark.parametrize("command", ("simulate", "amp"))
@pytest.mark.parametrize("kw, message", N_INVALID)
def test_an_empty_training_set_is_refused_by_the_cli_data_subcommands(command, kw, message):
    code, out, err = run_cli(cli_args(command, kw))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, out, err)
    assert re.match(message, lines[0].removeprefix("error: ")), lines[0]
    assert out == ""


@pytest.mark.parametrize("command", ("simulate", "amp"))
def test_an_alpha_grid_with_an_empty_training_set_is_refused_before_any_run(command):
    code, out, err = run_cli(
        [command, "--task", "linear", "--T", "1", "--d", "20", "--alpha", "1,1e-6", *_FAST_CLI[command]]
    )
    assert code == 2 and out == "" and "alpha must be > 1/(2 d^2)" in err


@pytest.mark.parametrize("route", THEORY_ROUTES)
def test_the_theory_routes_accept_an_empty_training_set(route):
    """``n = 0`` is the limit of the routes that sample data, not of the problem: the theory holds ``alpha``
    fixed as ``d -> inf`` (linear ``T = 1``: closed forms, cheap)."""
    out = THEORY_ROUTES[route](dict(channel="linear", T=1, d=20, alpha=1e-6, noise=0.1))
    value = getattr(out, "test_error", out)
    assert math.isfinite(value if not isinstance(value, dict) else value["test_error"])


@pytest.mark.parametrize("command", ("theory", "bayes"))
def test_the_theory_subcommands_accept_an_empty_training_set(command):
    code, out, err = run_cli(cli_args(command, dict(channel="linear", T=1, d=20, alpha=1e-6, noise=0.1)))
    assert code == 0 and "test_error" in out, (code, out, err)


# ------------------------------------------------------------------ valid edge problems
# (kw, routes skipped: a softmax state-evolution point and hardmax's Bayes quadrature cost seconds)
VALID_EDGES = [
    pytest.param(dict(channel="linear", T=1, d=6, alpha=1 / 36, noise=0.1), (), id="linear-T1-n1"),
    pytest.param(dict(channel="linear", T=1, d=20, alpha=0.5000001 / 400, noise=0.1), (), id="linear-T1-just-n1"),
    pytest.param(dict(channel="seq2lab", T=2, d=4, alpha=1 / 16, noise=0.1), ("theory",), id="seq2lab-T2-n1"),
    pytest.param(dict(channel="seq2seq", T=2, d=4, alpha=1 / 16, noise=0.1), ("theory",), id="seq2seq-T2-n1"),
    pytest.param(
        dict(channel="hardmax", T=2, d=4, alpha=1 / 16, noise=0.1),
        ("theory", "bayes_optimal", "bayes"),
        id="hardmax-T2-n1",
    ),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kw, skipped", VALID_EDGES)
def test_valid_edge_problems_are_accepted_by_every_route(route, kw, skipped, one_torch_thread):
    if route in skipped:
        pytest.skip(f"{route} at this point costs seconds")
    out = ROUTES[route](kw)
    if route in DATA_ROUTES:
        assert out.extras["n"] == 1
    elif isinstance(out, Problem):
        assert out.n == 1 and out.T == kw["T"]


@pytest.mark.parametrize("command", ("theory", "simulate", "amp", "bayes", "thresholds"))
@pytest.mark.parametrize("kw, skipped", VALID_EDGES[::2])
def test_valid_edge_problems_are_accepted_by_the_cli(command, kw, skipped, one_torch_thread):
    if command in skipped:
        pytest.skip(f"{command} at this point costs seconds")
    code, out, err = run_cli(cli_args(command, kw) + ["--json"])
    assert code == 0 and out.strip(), (code, out, err)
