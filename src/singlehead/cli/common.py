"""Shared pieces of the command line: problem options, list/range parsing, result streaming.

Nothing here does mathematics; it turns options into :class:`~singlehead.problem.Problem`
objects and writes results. Any ``ValueError`` raised below the CLI is reported by
:func:`singlehead.cli.main` as a one-line ``error: ...`` message (exit status 2).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import click
import numpy as np

from ..problem import CHANNELS, STUDENTS, CustomTarget, MPTarget, PowerLawTarget, Problem
from ..results import jsonable


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
        raise ValueError(f"{name} must be a number, a comma list 'a,b,c', a range 'start:stop:num' "
                         f"or 'log:start:stop:num' (got {text!r})") from None
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
        raise ValueError(f"seeds must be a count >= 1 ('8'), a list ('3,7') or a range ('10:14') (got {text!r})") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must be non-negative and non-empty (got {text!r})")
    return seeds


def problem_options(func: Callable) -> Callable:
    """Click options shared by ``simulate``, ``theory``, ``amp`` and friends."""
    opts = [
        click.option("--task", "channel", type=click.Choice(CHANNELS), default="seq2lab", show_default=True,
                     help="Output channel."),
        click.option("--T", "T", type=int, default=2, show_default=True, help="Tokens per sequence (>= 1)."),
        click.option("--d", type=int, default=50, show_default=True, help="Token dimension (>= 2)."),
        click.option("--alpha", default="1.0", show_default=True,
                     help="n/d^2: a number, 'a,b,c', 'start:stop:num' or 'log:start:stop:num'."),
        click.option("--kappa", type=float, default=1.0, show_default=True, help="Student width ratio p/d in (0, 1]."),
        click.option("--kappa0", type=float, default=None, help="MP target rank ratio p0/d in (0, 1] (default 0.5)."),
        click.option("--gamma", type=float, default=None, help="Power-law target exponent (> 0.5); selects a power-law target."),
        click.option("--normalisation", type=click.Choice(["sqrt_d", "unit_q0"]), default="sqrt_d", show_default=True,
                     help="Power-law normalisation: A = sqrt(d) or Q0 = 1."),
        click.option("--eigenvalues", default=None, help="Custom target spectrum: comma list of d eigenvalues."),
        click.option("--noise", type=float, default=0.0, show_default=True, help="Logit noise variance Delta (>= 0)."),
        click.option("--lam", type=float, default=0.01, show_default=True, help="Regularisation lambda (>= 0)."),
        click.option("--beta", type=float, default=1.0, show_default=True, help="Student inverse temperature (> 0)."),
        click.option("--beta0", type=float, default=1.0, show_default=True, help="Target inverse temperature (> 0)."),
        click.option("--student", type=click.Choice(STUDENTS), default="factorized", show_default=True),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def instance_run_options(func: Callable) -> Callable:
    """Options shared by the commands that run on sampled instances (``simulate``, ``amp``)."""
    opts = [
        click.option("--seeds", default="1", show_default=True,
                     help="Count ('8' = seeds 0..7), list ('3,7') or range ('10:14')."),
        click.option("--n-test", type=int, default=10000, show_default=True, help="Fresh test sequences per run."),
        click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="JSON-lines file; finished runs stream there and a rerun resumes from it."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object per run."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def instance_seeds(kwargs: dict[str, Any]) -> list[int]:
    """Validate the :func:`instance_run_options` values; returns the parsed seeds."""
    if kwargs["n_test"] < 2:
        raise ValueError(f"n-test must be an integer >= 2 (got {kwargs['n_test']})")
    return parse_seeds(kwargs["seeds"])


PROBLEM_OPTION_NAMES = ("channel", "T", "d", "alpha", "kappa", "kappa0", "gamma", "normalisation", "eigenvalues",
                        "noise", "lam", "beta", "beta0", "student")


def pop_problem_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs.pop(k) for k in PROBLEM_OPTION_NAMES}


def problems_from_options(channel: str, T: int, d: int, alpha: str, kappa: float, kappa0: float | None,
                          gamma: float | None, normalisation: str, eigenvalues: str | None, noise: float,
                          lam: float, beta: float, beta0: float, student: str) -> list[Problem]:
    """One validated Problem per alpha value."""
    given = [x is not None for x in (kappa0, gamma, eigenvalues)]
    if sum(given) > 1:
        raise ValueError("target: give at most one of --kappa0 (MP), --gamma (power law), --eigenvalues (custom)")
    if gamma is not None:
        target: Any = PowerLawTarget(gamma=gamma, normalisation=normalisation)
    elif eigenvalues is not None:
        target = CustomTarget(tuple(parse_floats(eigenvalues, "eigenvalues")))
    else:
        target = MPTarget(kappa0=0.5 if kappa0 is None else kappa0)
    return [Problem(d=d, T=T, alpha=a, channel=channel, beta=beta, beta0=beta0, noise=noise, target=target,
                    student=student, kappa=kappa, lam=lam) for a in parse_floats(alpha, "alpha")]


class ResultLog:
    """Append-only JSON-lines file of finished runs; the basis of resumable sweeps.

    Each line is one run's JSON object with ``key`` (hash of the full config and the
    route-specific settings). A truncated last line (interrupted write) is ignored.
    """

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path else None
        self.done: dict[str, dict[str, Any]] = {}
        if self.path is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "key" in rec:
                    self.done[rec["key"]] = rec
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def append(self, record: dict[str, Any]) -> None:
        self.done[record["key"]] = record
        if self.path is None:
            return
        with open(self.path, "a") as fh:
            fh.write(dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def run_key(route: str, problem: Problem, seed: int | None = None, **settings: Any) -> str:
    """Resume key of one run: hash of the route, the full problem, the seed and the route settings."""
    import hashlib

    blob = json.dumps({"problem": problem.key(), "route": route, "seed": seed, **settings}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def dumps(record: dict[str, Any]) -> str:
    """Strict JSON (non-finite numbers become null) of one record."""
    return json.dumps(jsonable(record), allow_nan=False, default=_json_default)


def run_sweep(items: Iterable[tuple[str, Callable[[], dict[str, Any]]]], log: ResultLog, as_json: bool,
              describe: Callable[[dict[str, Any]], str], desc: str) -> int:
    """Run ``(key, thunk)`` pairs not yet in ``log``; stream each finished record to the log and stdout.

    A progress bar (stderr) counts runs; human-readable lines are written through it so the
    two do not interleave.
    """
    import sys

    from tqdm.auto import tqdm

    items = list(items)
    skipped = 0
    with tqdm(total=len(items), desc=desc, leave=False, dynamic_ncols=True) as bar:
        for key, thunk in items:
            if key in log:
                rec = log.done[key]
                skipped += 1
            else:
                rec = thunk()
                rec["key"] = key
                log.append(rec)
            if as_json:
                click.echo(dumps(rec))
            else:
                bar.write(describe(rec), file=sys.stdout)
            bar.update()
    if skipped:
        click.echo(f"resumed: {skipped} of {len(items)} runs were already in {log.path}", err=True)
    return len(items)
