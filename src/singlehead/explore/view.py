"""What the explorer shows: one validated :class:`View` built from the page's controls.

A view is a :class:`~singlehead.model.problem.Problem` (validated by its own constructor, so a bad
value raises the library's ``ValueError`` naming the parameter) plus the alpha grid of the
error curve and the alpha at which the spectrum and the error decomposition are drawn. It
also writes the Python code and the ``singlehead`` command line that reproduce it.

Conventions are those of :class:`~singlehead.model.problem.Problem` (docs: Theory, :ref:`theory-sizes`): the
grid is ``numpy.geomspace(alpha_min, alpha_max, n_alpha)``, the same grid as the CLI's
``--alpha log:alpha_min:alpha_max:n_alpha``.

Several heads (``heads`` = ``H``, ``teacher_heads`` = ``H0``, default 1): on the linear channel the explorer
draws the exact theory (one effective head, :func:`~singlehead.state_evolution.effective_single_head`); on a
softmax channel the error curve of the experimental multi-head state evolution only, with a note saying so
and that its points are slow (:func:`heads_note`, :func:`check_heads`).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import stable_hash
from singlehead.model.targets import BUILTIN_TARGET_PARAMS, TargetParam, params_by_name, target_class, target_names
from singlehead.state_evolution.models import model_for
from singlehead.state_evolution.multihead import effective_single_head
from singlehead.state_evolution.multihead_se import check_multihead_problem
from singlehead.state_evolution.sizes import check_theory_size, point_cost_seconds

__all__ = [
    "View",
    "ViewError",
    "parse_view",
    "DEFAULTS",
    "MAX_POINTS",
    "explorer_targets",
    "view_defaults",
    "check_heads",
    "heads_note",
    "experimental_heads",
]

# Upper bound on the curve's points: one SE point costs ~0.1-0.5 s, so 200 is already a minute.
MAX_POINTS = 200

DEFAULTS: dict[str, str] = {
    "channel": "seq2lab",
    "student": "factorized",
    "T": "2",
    "d": "100",
    "kappa": "1",
    "noise": "0.5",
    "lam": "0.01",
    "beta": "1",
    "beta0": "1",
    "target": "mp",
    "kappa0": "0.5",
    "gamma": "1.0",
    "alpha_min": "0.05",
    "alpha_max": "3",
    "n_alpha": "20",
    "alpha_at": "0.5",
    "heads": "1",
    "teacher_heads": "1",
}


def explorer_targets() -> tuple[str, ...]:
    """The registered targets the explorer offers (:attr:`~singlehead.model.targets.Target.explorable`)."""
    return tuple(n for n in target_names() if target_class(n).explorable)


def target_controls() -> dict[str, TargetParam]:
    """The controls of the offered targets' parameters, by name (the first target to declare a name gives it)."""
    return params_by_name(explorer_targets())


def view_defaults() -> dict[str, str]:
    """:data:`DEFAULTS` plus the default of every offered target's parameter (its dataclass default)."""
    out = dict(DEFAULTS)
    for n in explorer_targets():
        fields = {f.name: f.default for f in dataclasses.fields(target_class(n))}  # type: ignore[arg-type]
        for prm in target_class(n).params:
            if prm.name not in out and fields.get(prm.name, dataclasses.MISSING) is not dataclasses.MISSING:
                out[prm.name] = prm.format(fields[prm.name])
    return out


class ViewError(ValueError):
    """A bad control value: ``field`` names the control, the message is the library's."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _number(params: Mapping[str, Any], name: str, kind: type = float) -> Any:
    text = str(params.get(name, view_defaults()[name])).strip()
    try:
        value = kind(text)
    except ValueError:
        word = "an integer" if kind is int else "a number"
        raise ViewError(name, f"{name} must be {word} (got {text!r})") from None
    if kind is float and not math.isfinite(value):
        raise ViewError(name, f"{name} must be a finite number (got {text!r})")
    return value


def _field_of(message: str, known: tuple[str, ...]) -> str:
    """The control a library message is about: its first word (``"lam must be >= 0 ..."``)."""
    word = message.split(" ", 1)[0]
    return word if word in known else ""


@dataclass(frozen=True)
class View:
    """A validated explorer view.

    Attributes
    ----------
    problem : Problem
        The problem at ``alpha = alpha_min`` (every other field as drawn).
    alpha_min, alpha_max : float
        Ends of the alpha grid, ``0 < alpha_min < alpha_max``.
    n_alpha : int
        Points of the geometric alpha grid, ``2 <= n_alpha <= MAX_POINTS``.
    alpha_at : float
        Where the learned spectrum and the error decomposition are drawn (``> 0``).
    """

    problem: Problem
    alpha_min: float
    alpha_max: float
    n_alpha: int
    alpha_at: float

    @property
    def alphas(self) -> list[float]:
        """The curve's grid, ``numpy.geomspace(alpha_min, alpha_max, n_alpha)``."""
        return [float(a) for a in np.geomspace(self.alpha_min, self.alpha_max, self.n_alpha)]

    @property
    def power_law(self) -> bool:
        """The target has a power-law spectrum (:attr:`~singlehead.model.targets.Target.scaling_law`): the scaling panel
        is drawn."""
        return bool(self.problem.target.scaling_law)

    def key(self) -> str:
        """Stable hash of the view (``singlehead.model.results.stable_hash``)."""
        return stable_hash(
            {
                "problem": self.problem.to_dict(),
                "grid": [self.alpha_min, self.alpha_max, self.n_alpha],
                "alpha_at": self.alpha_at,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem.to_dict(),
            "alpha_min": self.alpha_min,
            "alpha_max": self.alpha_max,
            "n_alpha": self.n_alpha,
            "alpha_at": self.alpha_at,
            "alphas": self.alphas,
            "power_law": self.power_law,
        }

    # ------------------------------------------------------------------ reproduction
    def cli(self) -> str:
        """The ``singlehead theory`` command that prints this view's error curve (one JSON line per alpha)."""
        p = self.problem
        args = [
            "singlehead",
            "theory",
            "--task",
            p.channel.name,
            "--T",
            str(p.T),
            "--d",
            str(p.d),
            "--alpha",
            f"log:{self.alpha_min!r}:{self.alpha_max!r}:{self.n_alpha}",
            "--student",
            p.student.name,
            "--kappa",
            repr(p.kappa),
            "--noise",
            repr(p.noise),
            "--lam",
            repr(p.lam),
            "--beta",
            repr(p.beta),
            "--beta0",
            repr(p.beta0),
            *p.target.cli_args(BUILTIN_TARGET_PARAMS),
        ]
        if p.multihead:
            args += ["--heads", str(p.heads), "--teacher-heads", str(p.teacher_heads)]
        return shlex.join([*args, "--json"])

    def python(self) -> str:
        """Python code computing every panel of this view through the public API."""
        p = self.problem
        cls, target = type(p.target).__name__, repr(p.target)
        import singlehead

        home = "singlehead" if getattr(singlehead, cls, None) is type(p.target) else type(p.target).__module__
        first = (
            f"from singlehead import {cls}, Problem"
            if home == "singlehead"
            else f"from {home} import {cls}\nfrom singlehead import Problem"
        )
        heads = f",\n                  heads={p.heads}, teacher_heads={p.teacher_heads}" if p.multihead else ""
        lines = [
            "import numpy as np",
            f"{first}, bayes_optimal, interpolation_threshold, theory",
            "from singlehead.analysis import decompose, learned_spectrum",
            "from singlehead.state_evolution import theory_curve"
            + (", effective_single_head" if p.multihead and not experimental_heads(p) else ""),
            "",
            f"problem = Problem(d={p.d}, T={p.T}, alpha={self.alpha_min!r}, "
            f"channel={p.channel.name!r}, student={p.student.name!r},",
            f"                  kappa={p.kappa!r}, noise={p.noise!r}, lam={p.lam!r}, "
            f"beta={p.beta!r}, beta0={p.beta0!r},",
            f"                  target={target}{heads})",
            f"alphas = np.geomspace({self.alpha_min!r}, {self.alpha_max!r}, {self.n_alpha})",
            "curve = theory_curve(problem, alphas)  # test/train error vs alpha (warm-started state evolution)",
        ]
        if experimental_heads(p):  # the experimental multi-head state evolution: the curve only
            lines.append("print([(float(a), r.test_error, r.train_error) for a, r in zip(alphas, curve)])")
            return "\n".join(lines) + "\n"
        if p.multihead:  # the other panels: the exact single-head equivalent, its errors times c2
            lines += [
                "eff, c2 = effective_single_head(problem)  # S_eff = mean of the heads = sqrt(c2) S_eff'",
                "bayes = [c2 * bayes_optimal(eff.replace(alpha=float(a))).test_error for a in alphas]",
                "alpha_interp = interpolation_threshold(eff)",
                f"at = eff.replace(alpha={self.alpha_at!r})",
                "th = theory(at)",
                "spectrum = learned_spectrum(at, th)  # of S_eff' (eigenvalues of S_eff: sqrt(c2) times these)",
            ]
        else:
            lines += [
                "bayes = [bayes_optimal(problem.replace(alpha=float(a))) for a in alphas]",
                "alpha_interp = interpolation_threshold(problem)",
                f"at = problem.replace(alpha={self.alpha_at!r})",
                "th = theory(at)",
                "spectrum = learned_spectrum(at, th)  # bulk density, zero atom, outliers",
            ]
        if p.student.thresholded:
            lines.append(
                "parts = decompose(at, th).parts()  # e0 + over + under + approx + mismatch"
                + (" (times c2)" if p.multihead else "")
            )
        lines.append("print([(float(a), r.test_error, r.train_error) for a, r in zip(alphas, curve)])")
        return "\n".join(lines) + "\n"


#: a point estimated to take longer than this (seconds) gets a note on the page (:func:`slow_point_note`)
SLOW_POINT_SECONDS = 10.0


def slow_point_note(problem: Problem) -> str | None:
    """A note for the page when one state-evolution point of ``problem`` is estimated to take over
    :data:`SLOW_POINT_SECONDS` (:func:`~singlehead.state_evolution.sizes.point_cost_seconds`), else ``None``."""
    sec = point_cost_seconds(problem)
    if sec <= SLOW_POINT_SECONDS:
        return None
    return f"T = {problem.T}: each point of the curve takes about {sec:.0f} s (a rough estimate, one core)"


def experimental_heads(problem: Problem) -> bool:
    """Whether ``problem`` has several heads on a channel other than the linear one: its curve is the experimental
    multi-head state evolution (:func:`singlehead.state_evolution.multihead_se.multihead_theory`), its other
    panels are not drawn."""
    return model_for(problem).name == "heads"


def heads_note(problem: Problem) -> str | None:
    """A note for the page on a view with several heads (what its curves are and, on a softmax channel, that they
    are experimental and slow), else ``None``."""
    if not problem.multihead:
        return None
    heads = f"H = {problem.heads} student heads, H0 = {problem.teacher_heads} teacher heads"
    if experimental_heads(problem):
        return (
            f"{heads} on the {problem.channel.name!r} channel: EXPERIMENTAL multi-head state evolution (sampled "
            "prior; docs: Multi-head attention), and slower than one head: a few seconds a point, more where the heads "
            "specialise; the other panels cover one head, or several on the linear channel"
        )
    return f"{heads}: exact theory of the linear channel (one effective head); spectrum of S_eff, the mean of the heads"


def check_heads(problem: Problem) -> None:
    """Raise :class:`ViewError` (on the control the library names) when the explorer cannot draw ``problem``'s
    several heads.

    With ``heads = teacher_heads = 1`` nothing is checked. On the linear channel the theory is the exact one
    (:func:`~singlehead.state_evolution.effective_single_head`; several teacher heads need a Marchenko--Pastur
    target); on a softmax channel it is the experimental multi-head state evolution, within its limits
    (:func:`~singlehead.state_evolution.multihead_se.check_multihead_problem`: heads, teacher heads, ``T``).
    """
    if not problem.multihead:
        return
    field = "heads" if problem.heads > 1 else "teacher_heads"
    try:
        if experimental_heads(problem):
            check_multihead_problem(problem)
        else:
            effective_single_head(problem)
    except ValueError as exc:
        msg = str(exc)
        first = msg.split(" ", 1)[0].rstrip(":")
        raise ViewError(first if first in ("heads", "teacher_heads", "T", "student") else field, msg) from None


def parse_view(params: Mapping[str, Any]) -> View:
    """Build a :class:`View` from the controls' text values (missing ones take ``DEFAULTS``, the explorer's
    starting view).

    ``params`` maps control names (the page's query parameters: ``T``, ``d``, ``lam``, ``n_alpha``, the target's
    parameters, ...) to text or values; the view's problem and its geometric alpha grid (``View.alphas``) are
    what the explorer computes, so a script can time or reproduce a page.

    Raises
    ------
    ViewError
        With ``field`` the control to flag and the library's message (``Problem`` validates
        every problem field; the explorer checks only its own grid controls).

    Examples
    --------
    >>> from singlehead.explore import ViewError, parse_view
    >>> view = parse_view({"n_alpha": "5", "lam": "0.02"})
    >>> view.problem.lam, len(view.alphas)
    (0.02, 5)
    >>> try:
    ...     parse_view({"n_alpha": "1"})
    ... except ViewError as err:
    ...     print(err.field)
    n_alpha
    """
    target_kind = str(params.get("target", DEFAULTS["target"]))
    offered = explorer_targets()
    if target_kind not in offered:
        raise ViewError("target", f"target must be one of {', '.join(map(repr, offered))} (got {target_kind!r})")
    tparams = target_class(target_kind).params
    fields = {
        "T": _number(params, "T", int),
        "d": _number(params, "d", int),
        "kappa": _number(params, "kappa"),
        "noise": _number(params, "noise"),
        "lam": _number(params, "lam"),
        "beta": _number(params, "beta"),
        "beta0": _number(params, "beta0"),
        "heads": _number(params, "heads", int),
        "teacher_heads": _number(params, "teacher_heads", int),
    }
    a_min, a_max = _number(params, "alpha_min"), _number(params, "alpha_max")
    n_alpha, a_at = _number(params, "n_alpha", int), _number(params, "alpha_at")
    values = {
        prm.name: _number(params, prm.name)
        if prm.kind == "float"
        else str(params.get(prm.name, view_defaults()[prm.name])).strip()
        for prm in tparams
    }
    try:
        target: Any = target_class(target_kind).from_params(values)
        problem = Problem(
            alpha=a_min,
            channel=str(params.get("channel", DEFAULTS["channel"])),
            student=str(params.get("student", DEFAULTS["student"])),
            target=target,
            **fields,
        )
    except ViewError:
        raise
    except ValueError as exc:
        msg = str(exc)
        field = _field_of(msg, ("channel", "student", *(prm.name for prm in tparams), *fields))
        raise ViewError(field or ("alpha_min" if msg.startswith("alpha") else "target"), msg) from None
    if not a_max > a_min:
        raise ViewError("alpha_max", f"alpha_max must be > alpha_min = {a_min!r} (got {a_max!r})")
    if not 2 <= n_alpha <= MAX_POINTS:
        raise ViewError("n_alpha", f"n_alpha must be an integer in [2, {MAX_POINTS}] (got {n_alpha})")
    try:
        problem.replace(alpha=a_at)
    except ValueError as exc:
        raise ViewError("alpha_at", str(exc).replace("alpha", "alpha_at", 1)) from None
    check_heads(problem)
    try:  # sizes the state evolution cannot serve (T, d, memory): refused here, shown beside the control
        check_theory_size(problem)
    except ValueError as exc:
        msg = str(exc)
        raise ViewError(_field_of(msg, ("T", "d")) or "T", msg) from None
    return View(problem=problem, alpha_min=a_min, alpha_max=a_max, n_alpha=n_alpha, alpha_at=a_at)
