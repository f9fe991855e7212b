"""When a state-evolution point counts as converged (:func:`is_converged`), and the plan of solve attempts that
looks for it (:func:`attempt_plan`): the one place that states both (docs: "How a theory point is solved").

**The rule.** A model's solver stops when one step of its map changes the overlaps by less than ``tol``
relative (the *residual* ``r``, ``SEOptions.tol``). The point it reports is *converged* when

* ``r < accept * tol``: ``accept`` is :data:`ACCEPT_FACTOR` (10) for the engine's root finders (tied and block
  models), whose reported point is re-evaluated after the last step; 1 for the heads model, whose stopping
  step is the reported one and must be an evaluation with the denoiser solved to its full accuracy; or
* ``r`` is below the map's own quadrature error at the point (its *floor*, certified when at most
  ``se_map.MAX_FLOOR``): one more step would move the point by less than the quadrature leaves it undetermined
  (tied and block models, from ``Tuning.floor_after`` evaluations on; ``diagnosis = "quadrature_floor"`` is
  reported when a solve stalls there unconverged),

and every prox the output side solved converged. Anything else is unconverged, and the result says why
(``diagnosis``, ``message``; :mod:`.diagnosis`).

**The plan.** :func:`attempt_plan` orders the attempts of a point; each has its own budget
(``SEOptions.max_evals``), all together at most ``SEOptions.max_iter`` evaluations; the first converged attempt
is kept, else the smallest residual. A kept point that stalled at its floor is solved once more on four times
the nodes (the node set being the solver's choice). Within an attempt the stages are those of
:func:`~.stages.solve_attempt` (coarse nodes, full nodes, continuation in ``lam``, a re-solve with every prox
start).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["ACCEPT_FACTOR", "is_converged", "attempt_plan"]

#: a point reported by the engine's root finders is converged at a residual below this many times ``tol``
ACCEPT_FACTOR = 10.0


def is_converged(
    residual: float, tol: float, *, accept: float, floor: float = math.nan, prox_converged: bool = True
) -> tuple[bool, bool]:
    """``(converged, at_floor)`` of a reported point by the rule of the module docstring: ``at_floor`` when the
    residual misses ``accept * tol`` but is below the certified quadrature ``floor`` (``nan``: none).

    Examples
    --------
    >>> is_converged(5e-6, 1e-6, accept=10.0)
    (True, False)
    >>> is_converged(5e-6, 1e-6, accept=1.0, floor=1e-5)
    (True, True)
    >>> is_converged(5e-6, 1e-6, accept=1.0)
    (False, False)
    """
    from singlehead.state_evolution.se_map import below_floor

    at_floor = residual >= accept * tol and below_floor(residual, floor)
    return bool((residual < accept * tol or at_floor) and prox_converged), bool(at_floor)


def attempt_plan(
    init: Any, jacobian: np.ndarray | None, branches: Any, cold_first: bool, *, secant_fallback: bool = False
) -> list[tuple]:
    """The solve attempts ``(init, jacobian, branches, escalate, secant)`` in the order they are tried.

    A warm start (sweeps pass the previous fixed point and Jacobian) is first tried quickly
    (``SEOptions.quick_attempt``: no continuation in lam, a short re-solve with every prox start).
    Near a fast change of the fixed point it can lead the root finder into a region it does not
    leave while the default start converges (e.g. at very small alpha for a power-law target, or
    across the interpolation peak at very small lam). Then the
    default start runs the full pipeline, and if that fails too, the warm start does; the first
    converged solve is kept, else the smallest residual. ``cold_first`` (a sweep whose previous
    warm start failed) puts the default start first.

    ``secant_fallback`` (the exact-Jacobian Newton solver on a quadrature output side): when every
    attempt above fails, the default start once more with Broyden's secant updates instead of exact
    Jacobians (``exact_jacobian=False``). Where the SE equations have several fixed points, the exact
    Newton steps can lead into the basin of an unstable one (replicon above 1) that the quadrature
    noise keeps them from reaching, while the secant solver, whose first steps are damped SE
    iterations, is drawn to the attracting one. It runs only after every other attempt failed, so
    no converged result changes.
    """
    fallback = [(None, None, None, True, True)] if secant_fallback else []
    if init is None and jacobian is None:
        return [(None, None, None, True, False), *fallback]
    cold, warm_quick = (None, None, None, True, False), (init, jacobian, branches, False, False)
    warm_full = (init, jacobian, branches, True, False)
    return [cold, warm_quick, warm_full, *fallback] if cold_first else [warm_quick, cold, warm_full, *fallback]
