"""Shared pieces of the command line: problem options, list/range parsing, result streaming.

Nothing here does mathematics; it turns options into :class:`~singlehead.model.problem.Problem`
objects and writes results. Any ``ValueError`` raised below the CLI is reported by
:func:`singlehead.cli.main` as a one-line ``error: ...`` message (exit status 2).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from singlehead.model.channels import channel_names
from singlehead.model.problem import Problem
from singlehead.model.results import jsonable
from singlehead.model.students import student_names
from singlehead.model.targets import TargetParam, params_by_name, target_class, target_names
from singlehead.runs import cache_for_export, export_jsonl, run_jobs


def parse_floats(text: str, name: str) -> list[float]:
    """Parse ``"0.1,0.5,1"``, a linear range ``"start:stop:num"`` or a log range ``"log:start:stop:num"``."""
    text = str(text).strip()
    try:
        if text.startswith("log:"):
            a, b, k = text[4:].split(":")
            if float(a) <= 0 or float(b) <= 0:
                raise ValueError
            vals = np.geomspace(float(a), float(b), int(k)).tolist()
        elif ":" in text:
            a, b, k = text.split(":")
            vals = np.linspace(float(a), float(b), int(k)).tolist()
        else:
            vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(
            f"{name} must be a number, a comma list 'a,b,c', a range 'start:stop:num' "
            f"or 'log:start:stop:num' (got {text!r})"
        ) from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"{name} must contain at least one finite number (got {text!r})")
    return vals


def parse_seeds(text: str) -> list[int]:
    """``"4"`` -> seeds 0..3; ``"3,7"`` -> [3, 7]; ``"10:14"`` -> 10..13."""
    text = str(text).strip()
    try:
        if ":" in text:
            a, b = text.split(":")
            seeds = list(range(int(a), int(b)))
        elif "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        else:
            k = int(text)
            if k < 1:
                raise ValueError
            seeds = list(range(k))
    except ValueError:
        raise ValueError(
            f"seeds must be a count >= 1 ('8'), a list ('3,7') or a range ('10:14') (got {text!r})"
        ) from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must be non-negative and non-empty (got {text!r})")
    return seeds


class RegisteredName(click.ParamType):
    """A name of a registry (channels, students), read when the command line is parsed, so that
    channels and students registered after import are accepted."""

    def __init__(self, kind: str, names: Callable[[], tuple[str, ...]]) -> None:
        self.name, self._names = kind, names

    def get_metavar(self, *args: Any, **kwargs: Any) -> str:
        return "[" + "|".join(self._names()) + "]"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        if value in self._names():
            return value
        self.fail(f"{value!r} is not one of {', '.join(map(repr, self._names()))}", param, ctx)


CHANNEL = RegisteredName("channel", channel_names)
TARGET = RegisteredName("target", target_names)
STUDENT = RegisteredName("student", student_names)
DEFAULT_TARGET = "mp"


def _target_option(prm: TargetParam) -> Callable:
    takers = [n for n in target_names() if any(q.name == prm.name for q in target_class(n).params)]
    kind = click.Choice(list(prm.choices)) if prm.kind == "choice" else float if prm.kind == "float" else str
    return click.option(
        f"--{prm.name}", prm.name, type=kind, default=None, help=f"{prm.help} Target: {', '.join(takers)}."
    )


# the options of the targets registered when the CLI is built; any target's parameters, also of
# one registered later, are accepted through --target-param NAME=VALUE
TARGET_PARAMS = params_by_name()

_PROBLEM_OPTIONS: dict[str, Callable] = {
    "channel": click.option(
        "--task", "channel", type=CHANNEL, default="seq2lab", show_default=True, help="Output channel."
    ),
    "T": click.option(
        "--T",
        "T",
        type=int,
        default=2,
        show_default=True,
        help="Tokens per sequence (>= 2 for the softmax channels, >= 1 for linear).",
    ),
    "d": click.option("--d", type=int, default=50, show_default=True, help="Token dimension (>= 2)."),
    "alpha": click.option(
        "--alpha",
        default="1.0",
        show_default=True,
        help="n/d^2: a number, 'a,b,c', 'start:stop:num' or 'log:start:stop:num'.",
    ),
    "kappa": click.option(
        "--kappa", type=float, default=1.0, show_default=True, help="Student width ratio p/d in (0, 1]."
    ),
    "target": click.option(
        "--target",
        "target",
        type=TARGET,
        default=None,
        help=f"Target family (default: {DEFAULT_TARGET}, or the first registered target that takes "
        "the target options given); untied_mp: the untied teacher M0 = W0Q W0K^T/sqrt(p0 d) "
        "of rank ratio --kappa0.",
    ),
    **{name: _target_option(prm) for name, prm in TARGET_PARAMS.items()},
    "target_param": click.option(
        "--target-param",
        "target_param",
        multiple=True,
        metavar="NAME=VALUE",
        help="A parameter of the target (repeatable), for any registered target.",
    ),
    "noise": click.option(
        "--noise", type=float, default=0.0, show_default=True, help="Logit noise variance Delta (>= 0)."
    ),
    "lam": click.option("--lam", type=float, default=0.01, show_default=True, help="Regularisation lambda (>= 0)."),
    "beta": click.option(
        "--beta", type=float, default=1.0, show_default=True, help="Student inverse temperature (> 0)."
    ),
    "beta0": click.option(
        "--beta0", type=float, default=1.0, show_default=True, help="Target inverse temperature (> 0)."
    ),
    "student": click.option("--student", type=STUDENT, default="factorized", show_default=True),
}
# fields a command does not use are not offered (an option that does nothing is refused by click)
STUDENT_OPTIONS = ("kappa", "lam", "beta", "student")


def problem_options(func: Callable | None = None, *, omit: tuple[str, ...] = ()) -> Callable:
    """Click options shared by ``simulate``, ``theory``, ``amp`` and friends, less those in ``omit``.

    Use as ``@problem_options`` or ``@problem_options(omit=STUDENT_OPTIONS)``.
    """

    def decorate(f: Callable) -> Callable:
        for name in reversed(PROBLEM_OPTION_NAMES):
            if name not in omit:
                f = _PROBLEM_OPTIONS[name](f)
        return f

    return decorate(func) if func is not None else decorate


def head_options(func: Callable) -> Callable:
    """``--heads`` and ``--teacher-heads`` (``Problem.heads``, ``Problem.teacher_heads``; default 1, the
    single-head model), for the commands that take several heads (``simulate``, ``theory``)."""
    func = click.option(
        "--teacher-heads",
        "teacher_heads",
        type=int,
        default=1,
        show_default=True,
        help="Teacher heads H0 >= 1, each drawn from the target; the labels are the mean over "
        "heads of their channel outputs.",
    )(func)
    return click.option(
        "--heads",
        "heads",
        type=int,
        default=1,
        show_default=True,
        help="Student heads H >= 1 (factorized student), each of width p = kappa d; the output is the mean over heads.",
    )(func)


def pop_head_options(kwargs: dict[str, Any]) -> dict[str, int]:
    """The :func:`head_options` values of ``kwargs`` (removed from it), as ``problems_from_options`` takes them."""
    return {"heads": kwargs.pop("heads", 1), "teacher_heads": kwargs.pop("teacher_heads", 1)}


def instance_run_options(func: Callable) -> Callable:
    """Options shared by the commands that run on sampled instances (``simulate``, ``amp``)."""
    opts = [
        click.option(
            "--seeds", default="1", show_default=True, help="Count ('8' = seeds 0..7), list ('3,7') or range ('10:14')."
        ),
        click.option("--n-test", type=int, default=10000, show_default=True, help="Fresh test sequences per run."),
        click.option(
            "--out",
            type=click.Path(dir_okay=False),
            default=None,
            help="JSON-lines export of the runs; finished runs are cached in OUT.cache, a rerun resumes.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object per run."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def instance_seeds(kwargs: dict[str, Any], problems: list[Problem]) -> list[int]:
    """Validate the :func:`instance_run_options` values and that each of ``problems`` has a training set
    (:meth:`~singlehead.Problem.check_training_set`, before any run starts); returns the parsed seeds."""
    for problem in problems:
        problem.check_training_set()
    if kwargs["n_test"] < 2:
        raise ValueError(f"n-test must be an integer >= 2 (got {kwargs['n_test']})")
    return parse_seeds(kwargs["seeds"])


PROBLEM_OPTION_NAMES = (
    "channel",
    "T",
    "d",
    "alpha",
    "kappa",
    "target",
    *TARGET_PARAMS,
    "target_param",
    "noise",
    "lam",
    "beta",
    "beta0",
    "student",
)


def pop_problem_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The problem options of ``kwargs`` (removed from it); omitted ones take the Problem defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(Problem) if f.name in PROBLEM_OPTION_NAMES}
    defaults["alpha"] = str(defaults["alpha"])
    defaults["target"] = None  # a registered name here; Problem.target is the object built from it
    defaults.update({k: None for k in TARGET_PARAMS}, target_param=())
    return {k: kwargs.pop(k) if k in kwargs else defaults[k] for k in PROBLEM_OPTION_NAMES}


def target_from_options(target: str | None, given: dict[str, Any]) -> Any:
    """The target object of ``--target`` and the target options given (``None`` values: not given).

    Without ``--target``, the first registered target that takes every option given and is selected
    by one of them (its :attr:`~singlehead.model.targets.TargetParam.selects`); with none given,
    ``DEFAULT_TARGET``. Each option's text is read by the target's :class:`~singlehead.model.targets.TargetParam`.
    """
    given = {k: v for k, v in given.items() if v is not None}
    takes = {n: {q.name: q for q in target_class(n).params} for n in target_names()}
    opts = ", ".join(f"--{k}" for k in given)
    if target is None:
        fits = [n for n, ps in takes.items() if set(given) <= set(ps) and any(ps[k].selects for k in given)]
        if not given:
            target = DEFAULT_TARGET
        elif not fits:
            offered = "; ".join(f"{n}: {', '.join('--' + q for q in ps) or 'no options'}" for n, ps in takes.items())
            raise ValueError(f"target: no registered target takes {opts} together ({offered})")
        else:
            target = fits[0]
    cls = target_class(target)
    bad = [k for k in given if k not in takes[target]]
    if bad:
        raise ValueError(
            f"target {target!r} does not take --{', --'.join(bad)} "
            f"(it takes: {', '.join('--' + q for q in takes[target]) or 'no options'})"
        )
    # comma lists also take the ranges of parse_floats ('start:stop:num', 'log:start:stop:num')
    given = {
        k: tuple(parse_floats(v, k)) if takes[target][k].kind == "floats" and isinstance(v, str) else v
        for k, v in given.items()
    }
    return cls.from_params(given)


def _target_param_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in pairs:
        name, sep, value = str(text).partition("=")
        if not sep or not name.strip():
            raise ValueError(f"target-param must be NAME=VALUE (got {text!r})")
        out[name.strip()] = value
    return out


def problems_from_options(
    channel: str,
    T: int,
    d: int,
    alpha: str,
    kappa: float,
    noise: float,
    lam: float,
    beta: float,
    beta0: float,
    student: str,
    target: str | None = None,
    target_param: tuple[str, ...] = (),
    heads: int = 1,
    teacher_heads: int = 1,
    **target_options: Any,
) -> list[Problem]:
    """One validated Problem per alpha value (``target``: a registered name, else inferred from the
    target options: ``target_options`` by name, ``None`` when not given, plus ``--target-param`` pairs;
    ``heads``, ``teacher_heads``: :func:`head_options`)."""
    given = {**{k: v for k, v in target_options.items() if v is not None}, **_target_param_pairs(target_param)}
    target_obj = target_from_options(target, given)
    return [
        Problem(
            d=d,
            T=T,
            alpha=a,
            channel=channel,
            beta=beta,
            beta0=beta0,
            noise=noise,
            target=target_obj,
            student=student,
            kappa=kappa,
            lam=lam,
            heads=heads,
            teacher_heads=teacher_heads,
        )
        for a in parse_floats(alpha, "alpha")
    ]


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def dumps(record: dict[str, Any]) -> str:
    """Strict JSON (non-finite numbers become null) of one record."""
    return json.dumps(jsonable(record), allow_nan=False, default=_json_default)


def run_sweep(
    jobs: list,
    out: str | None,
    as_json: bool,
    describe: Callable[[dict[str, Any]], str],
    desc: str,
    *,
    cache: Any = None,
    resumed: int | None = None,
) -> list[dict[str, Any]]:
    """Run ``jobs`` through the result cache behind ``out`` and export the sweep to ``out`` (JSON lines).

    The cache (default :func:`singlehead.runs.cache_for_export`, ``<out>.cache``) holds one file per
    finished run, so an interrupted sweep resumes where it stopped; ``out`` is rewritten with
    the records of this sweep in grid order. Each record is printed as it finishes (strict JSON
    with ``--json``, else ``describe(record)``), through the progress bar on stderr. ``resumed``
    (default: the jobs already cached) is how many runs a rerun reused, reported on stderr.
    """
    cache = cache if cache is not None else cache_for_export(out)
    cached = sum(cache.get(j.key) is not None for j in jobs) if resumed is None else resumed

    def show(rec: dict[str, Any], bar: Any) -> None:
        if "error" in rec:  # the runner's "ValueError: ..." record: the message alone, as a direct ValueError prints
            raise ValueError(str(rec["error"]).removeprefix("ValueError: "))
        bar.write(dumps(rec) if as_json else describe(rec), file=sys.stdout)

    records = run_jobs(jobs, cache, desc=desc, on_record=show)
    if out is not None:
        export_jsonl(records, out)
    if cached and out is not None:
        click.echo(f"resumed: {cached} of {len(jobs)} runs were already in {out}.cache", err=True)
    return records
