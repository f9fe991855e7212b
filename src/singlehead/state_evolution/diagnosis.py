"""Why a state-evolution solve did not converge: the diagnosis an unconverged :class:`~singlehead.Result` carries.

:func:`~singlehead.theory` keeps the best of its solve attempts. When none converged, this module
names the cause, from what the same run computed, in one of three kinds (``Result.diagnosis``):

* ``"rs_unstable"``: **no stable replica-symmetric fixed point** near the best point found (one
  with a residual below ``_NEAR`` = 0.1: farther from a fixed point the checks say nothing about
  it). The replica-symmetry checks of :func:`~singlehead.state_evolution.stability` are evaluated
  there: the smooth replicon ``AT`` (``> 1``: unstable; ``inf`` where the rank cap binds, the formal
  replicon of the rank-constrained problem) and the prox-jump share of ``Sigmahat`` (the part of
  the response carried by jumps of the channel prox between its minima: above ``_JUMP_SHARE`` =
  5 % the SE map is discontinuous enough that the replica-symmetric description is not reliable).
* ``"quadrature_floor"``: the residual **stalled at the map's own quadrature error**. One SE
  step's quadrature standard error is ``10 residual_floor`` (:func:`~.se_map.residual_floor`);
  a residual below that standard error cannot be lowered reliably without more nodes,
  and a floor above :data:`~.se_map.MAX_FLOOR` cannot certify a fixed point at all.
* ``"solver_miss"``: neither: the replica-symmetric fixed point looks stable and the residual is
  above the quadrature noise, so the root finder missed it. The details list what every attempt
  tried: its start (``"warm"`` or ``"cold"``), whether it was the quick warm attempt or the
  secant fallback, the continuation in ``lam`` (from where to where, how far it got), whether the
  evaluation budget was spent, and the residual it reached.

The same checks are always all recorded in ``Result.extras["diagnosis_details"]`` (a JSON-ready
dict: ``cause``, ``residual``, ``tol``, ``residual_floor``, ``quadrature_se``, ``replicon``,
``prox_jump_share``, ``prox_jump_share_se``, ``cap_binds``, ``prox_converged``,
``stability_error`` (why the replicon could not be evaluated, else ``None``), ``attempts`` (one
:class:`AttemptRecord` each, as a dict) and, where the driver solved the point again on finer
nodes, ``refined``);
the message names the cause and the remedy. A non-symmetric student's blocks of fields
(:mod:`.block_map`) get the two-block check (:mod:`.block_stability`: the replicon is the spectral
radius of a 2 x 2 map, ``inf`` where the rank cap binds; the jump share is the larger of the two
blocks').
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.se_map import FLOOR_FRACTION, MAX_FLOOR

__all__ = ["CAUSES", "AttemptRecord", "record_attempt", "diagnose"]

#: the causes, in the order they are tested (the first that holds is named)
CAUSES = ("rs_unstable", "quadrature_floor", "solver_miss")

#: a residual below this many of one SE step's quadrature standard errors is at the quadrature noise
#: (the solver's own stopping rule certifies a point below a tenth of one, the floor)
_FLOOR_BAND = 1.0
#: the replica-symmetry checks name the cause only at a best point this close to a fixed point (residual):
#: far from one (a spent budget, a diverging start) the replicon there says nothing about the fixed point
_NEAR = 0.1
#: a prox-jump share above this (and significant at 3 standard errors) makes the SE map discontinuous
#: enough that the replica-symmetric fixed point is not reliable (converged peak points reach about 5 %)
_JUMP_SHARE = 0.05


@dataclass
class AttemptRecord:
    """What one solve attempt of :func:`~singlehead.theory` tried and reached.

    ``start``: ``"warm"`` (the caller's ``init``) or ``"cold"`` (the structured default starts);
    ``quick``: the quick warm attempt (no continuation, small budget, ``SEOptions.quick_attempt``);
    ``secant``: the fallback with Broyden's secant updates instead of exact Jacobians;
    ``evaluations`` / ``budget``: map evaluations spent and allowed (``budget_exhausted`` when spent);
    ``stopped_by``: ``"budget"``, ``"floor"`` or ``None`` (the stages ran to their end);
    ``continuation``: ``None`` when not run, else ``{"from", "to", "reached", "completed"}`` in ``lam``;
    ``tracked_residual``: the residual the stages reached on the tracked prox branches;
    ``union_resolve_from``: ``None``, or the residual with every prox start from which a re-solve ran
    (the tracked map had a fixed point the global-minimum map did not share);
    ``residual``: the residual of the point the attempt reported.
    """

    start: str
    quick: bool
    secant: bool
    evaluations: int
    budget: int | None
    budget_exhausted: bool
    stopped_by: str | None
    continuation: dict[str, Any] | None
    tracked_residual: float
    union_resolve_from: float | None
    residual: float
    converged: bool

    def describe(self) -> str:
        words = [f"{self.start}{' quick' if self.quick else ''} start{' (secant)' if self.secant else ''}"]
        c = self.continuation
        if c is not None:
            if c["completed"]:
                words.append(f"continuation in lam {c['from']:.1e} -> {c['to']:.1e} completed")
            elif c["reached"] is None:
                words.append(f"continuation in lam from {c['from']:.1e} failed at its first point")
            else:
                words.append(f"continuation in lam {c['from']:.1e} -> {c['to']:.1e} stopped at {c['reached']:.1e}")
        budget = "" if self.budget is None else f"/{self.budget}"
        words.append(f"{self.evaluations}{budget} evaluations{' (budget spent)' if self.budget_exhausted else ''}")
        if self.union_resolve_from is not None:
            words.append(
                f"tracked prox branches reached {self.tracked_residual:.1e}, every prox start "
                f"{self.union_resolve_from:.1e}, re-solved with every start"
            )
        words.append(f"residual {self.residual:.1e}")
        return ", ".join(words)


def record_attempt(
    *,
    warm: bool,
    quick: bool,
    secant: bool,
    result: Result,
    evaluations: int,
    budget: int | None,
    trace: dict[str, Any],
) -> AttemptRecord:
    """The :class:`AttemptRecord` of one attempt from its result, its map's evaluation count and budget, and the
    ``trace`` the solve stages filled (``stopped_by``, ``continuation``)."""
    return AttemptRecord(
        start="warm" if warm else "cold",
        quick=quick,
        secant=secant,
        evaluations=int(evaluations),
        budget=budget,
        budget_exhausted=budget is not None and evaluations >= budget,
        stopped_by=trace.get("stopped_by"),
        continuation=trace.get("continuation"),
        tracked_residual=float(trace.get("tracked_residual", math.nan)),
        union_resolve_from=trace.get("union_resolve_from"),
        residual=float(result.extras.get("residual", math.nan)),
        converged=bool(result.converged),
    )


@dataclass
class _Checks:
    residual: float
    tol: float
    residual_floor: float
    quadrature_se: float
    replicon: float = math.nan
    prox_jump_share: float = math.nan
    prox_jump_share_se: float = math.nan
    cap_binds: bool = False
    prox_converged: bool = True
    stability_error: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)


def _stability_checks(
    result: Result, options: SEOptions, quad: OutputQuadrature | None, ch: _Checks, stability: Callable[..., Any]
) -> None:
    try:
        st = stability(result, options=options, quad=quad)
    except (ValueError, FloatingPointError, ZeroDivisionError, ArithmeticError) as exc:
        ch.stability_error = f"{type(exc).__name__}: {exc}"
        return
    ch.replicon, ch.prox_jump_share, ch.prox_jump_share_se = st.replicon, st.prox_jump_share, st.prox_jump_share_se


def _cause(ch: _Checks) -> str:
    # an unstable replica-symmetric point comes first: prox jumps also make the map's quadrature noisy,
    # and no number of nodes makes such a point a reliable fixed point
    jumps = (
        math.isfinite(ch.prox_jump_share)
        and ch.prox_jump_share > _JUMP_SHARE
        and not ch.prox_jump_share < 3 * ch.prox_jump_share_se
    )
    if ch.residual < _NEAR and (ch.replicon > 1 or ch.cap_binds or jumps):  # inf > 1: a binding cap's replicon
        return "rs_unstable"
    floor = ch.residual_floor
    if math.isfinite(floor) and floor > 0 and (floor > MAX_FLOOR or ch.residual < _FLOOR_BAND * ch.quadrature_se):
        return "quadrature_floor"
    return "solver_miss"


def _message(cause: str, ch: _Checks, attempts: list[AttemptRecord]) -> str:
    head = f"not converged (residual {ch.residual:.1e}, 10 tol = {10 * ch.tol:.1e})"
    if cause == "quadrature_floor":
        if ch.residual_floor > MAX_FLOOR:
            why = (
                f"the map's quadrature error is too large to determine a fixed point (floor {ch.residual_floor:.1e} "
                f"> {MAX_FLOOR:g}); raise SEOptions.n_points"
            )
        else:
            why = (
                f"the residual stalled at the map's own quadrature error (one SE step's standard error "
                f"{ch.quadrature_se:.1e}, floor {ch.residual_floor:.1e}); raise SEOptions.n_points or n_scrambles"
            )
        return f"{head}: {why}"
    if cause == "rs_unstable":
        parts = []
        if ch.cap_binds or math.isinf(ch.replicon):
            parts.append("the rank cap binds (formal replicon infinite)")
        elif ch.replicon > 1:
            parts.append(f"smooth replicon {ch.replicon:.2f} > 1")
        if math.isfinite(ch.prox_jump_share) and ch.prox_jump_share > _JUMP_SHARE:
            parts.append(f"prox jumps carry {100 * ch.prox_jump_share:.1f} % of Sigmahat")
        return f"{head}: no stable replica-symmetric fixed point near the best point ({'; '.join(parts)})"
    tried = "; ".join(a.describe() for a in attempts)
    prox = "" if ch.prox_converged else " (the channel prox did not converge at some nodes)"
    if ch.residual < _NEAR and not math.isfinite(ch.replicon):
        where = (
            f"the residual is above the quadrature noise (replica-symmetric stability not checked: "
            f"{ch.stability_error})"
        )
    elif ch.residual < _NEAR:
        where = (
            f"the replica-symmetric point looks stable (replicon {ch.replicon:.2f}) and the residual is above "
            "the quadrature noise"
        )
    else:
        where = f"the best point is far from any fixed point (residual >= {_NEAR:g})"
    budget = "; raise SEOptions.max_evals" if any(a.budget_exhausted for a in attempts) else ""
    return f"{head}: solver miss{prox}: {where}; tried: {tried}{budget}"


def diagnose(
    problem: Problem,
    result: Result,
    attempts: list[AttemptRecord],
    options: SEOptions,
    quad: OutputQuadrature | None,
    *,
    stability: Callable[..., Any],
) -> None:
    """Attach the diagnosis to the unconverged ``result`` (in place).

    Sets ``result.diagnosis`` (one of :data:`CAUSES`), ``result.extras["diagnosis_details"]`` and a message
    naming the cause; a converged ``result`` is left as it is. ``stability(result, options=, quad=)`` is the
    model's replica-symmetry check.
    """
    if result.converged:
        return
    ex = result.extras
    floor = float(ex.get("residual_floor", math.nan))
    ch = _Checks(
        residual=float(ex.get("residual", math.nan)),
        tol=options.tol,
        residual_floor=floor,
        quadrature_se=floor / FLOOR_FRACTION if math.isfinite(floor) else math.nan,
        cap_binds=bool(ex.get("cap_binds", False)),
        prox_converged="prox did not converge" not in result.message,
        attempts=[asdict(a) for a in attempts],
    )
    if ch.residual < _NEAR:  # the replicon only speaks about a point near a fixed point (see _cause)
        _stability_checks(result, options, quad, ch, stability)
    cause = _cause(ch)
    result.diagnosis = cause
    result.message = _message(cause, ch, attempts)
    ex["diagnosis_details"] = {"cause": cause, **asdict(ch)}
