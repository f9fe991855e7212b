"""The output prox's global minimiser with the extra Newton starts screened.

The softmax prox ``argmin_h ||h - z||^2/(2 Sigma) + ell(h)`` is non-convex, so the output side
runs Newton from several starts (the channel's cold starts and the branches tracked from the
previous evaluation) and keeps the node-wise lowest objective. Away from the interpolation peak
the prox has one minimum at almost every node and every start ends at the same point; near
``alpha_interp`` a few nodes have several minima.

:func:`screened_prox` therefore runs one start everywhere and the *extra* starts only where they
can matter: on a screening subset, the first ``1/screen`` of each scramble's nodes (a Sobol
prefix, itself balanced over the node distribution), and on the nodes where the prox objective is
not convex at a probe on the segment from the first start's minimum to an extra start (at its
midpoint and three quarters of the way: ``_PROBE_POINTS``). The screening nodes that no probe
flagged measure the probes' misses: where some extra start reaches, on one of them, a minimum that
the others missed, every start runs on every node (what ``screen=None`` does from the outset).
Missing the global minimum at even a few of thousands of nodes moves the train error by a
sizeable fraction of a quadrature standard error (``tests/state_evolution/test_prox_screen.py``), hence the two
safeguards (probes and fallback).

In an evaluation with the tracked branches as lead starts (the reporting and re-solve evaluations),
only the tracked branches and the node-wise best end point are kept for the next evaluation, so
the fallback runs where an extra start ends *lower* than every tracked branch on a screening node;
a higher local minimum found by a cold start changes neither the result nor what is tracked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from singlehead.model.problem import Problem
from singlehead.numerics.prox import ProxResult
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["screened_prox", "screening_nodes"]

# two Newton end points closer than this (relative, per coordinate) are the same minimum
_SAME_MINIMUM = 1e-6
# no screening with fewer screening nodes per scramble than this (32: the coarse stage's thinned
# set, 256 nodes per scramble, is screened too)
_MIN_SCREEN_NODES = 32
# where along the segment from the first lead start's end point to each extra start the prox
# objective's convexity is probed (see the module docstring for why three quarters too)
_PROBE_POINTS = (0.5, 0.75)


def screening_nodes(quad: OutputQuadrature, screen: int | None) -> np.ndarray | None:
    """Boolean mask over ``quad.flat`` of the screening nodes (``None``: screen every node).

    The first ``N // screen`` nodes of each of the ``R`` scrambles of ``N`` nodes; ``None`` when
    ``screen`` is ``None`` or that prefix would hold fewer than 32 nodes per scramble.
    """
    if screen is None:
        return None
    R, N = quad.nodes.shape[:2]
    n = N // int(screen)
    if n < _MIN_SCREEN_NODES or n >= N:
        return None
    return np.tile(np.arange(N) < n, R)


def same_minimum(point: np.ndarray, branches: Sequence[np.ndarray]) -> np.ndarray:
    """Per node, whether ``point`` is one of the ``branches``' end points (to ``_SAME_MINIMUM`` relative)."""
    seen = np.zeros(point.shape[0], dtype=bool)
    for b in branches:
        seen |= np.all(np.abs(point - b) <= _SAME_MINIMUM * (1.0 + np.abs(b)), axis=1)
    return seen


def _new_minimum(pr: ProxResult, lead: int, mask: np.ndarray) -> bool:
    """Whether an extra start (index ``>= lead``) ended, on a screening node, away from every lead start's end."""
    ends = [b[mask] for b in pr.branches]
    return any(not same_minimum(e, ends[:lead]).all() for e in ends[lead:])


def _better_minimum(pr: ProxResult, lead: int, mask: np.ndarray) -> bool:
    """Whether on some screening node an extra start (index ``>= lead``) ended lower than every lead start."""
    return bool(np.any(pr.start_index[mask] >= lead))


def _not_convex_nodes(problem: Problem, labels: np.ndarray, Sigma: float, probes: Sequence[np.ndarray]) -> np.ndarray:
    """Nodes where the prox objective's Hessian ``H_ell(h) + I/Sigma`` is not positive definite at some probe ``h``."""
    ch = problem.channel
    bad = np.zeros(labels.shape[0], dtype=bool)
    for h in probes:
        bad |= ~ch.prox_convex_at(h, labels, problem.beta, Sigma)
    return bad


def _merge(first: ProxResult, sel: np.ndarray, sub: ProxResult, lead: int) -> ProxResult:
    """``first`` (the lead starts on every node) with the nodes ``sel`` replaced by ``sub`` (every start there)."""

    def put(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = a.copy()
        out[sel] = b
        return out

    branches = [put(first.branches[k], sub.branches[k]) for k in range(lead)]
    branches += [put(first.branches[0], b) for b in sub.branches[lead:]]
    return ProxResult(
        put(first.h, sub.h),
        put(first.objective, sub.objective),
        put(first.fit, sub.fit),
        put(first.grad_norm, sub.grad_norm),
        bool(first.converged and sub.converged),
        max(first.iterations, sub.iterations),
        put(first.start_index, sub.start_index),
        branches,
    )


def screened_prox(
    problem: Problem,
    z: np.ndarray,
    y: np.ndarray,
    Sigma: float,
    cold: Sequence[np.ndarray],
    warm: Sequence[np.ndarray] | None,
    mask: np.ndarray,
    labels: np.ndarray | None = None,
) -> tuple[ProxResult, int]:
    """Global prox from the ``warm`` (tracked) and ``cold`` starts, the extra ones screened.

    The *lead* starts run on every node: the tracked branches ``warm`` when given (a union
    evaluation), else the first cold start. The other (*extra*) starts run on the ``mask`` nodes and
    on the nodes where the prox objective is not convex at one of the probes, points of the
    segments from the first lead start's end point to each extra start (where it is convex at all
    of them, every start is taken to descend to the same minimum). If on some mask node that no
    probe flagged an extra start reaches a minimum no lead start reached (with ``warm``: a lower one
    than every lead start reached), every start runs on every node.

    ``labels``: the channel's labels of ``y`` when the caller has them.

    Returns the prox result and the number of lead branches: its first ``lead`` branches are the
    tracked ones (the warm starts of the next evaluation) when ``warm`` is given; without ``warm``
    every branch is tracked (an extra start's branch is the first lead's where it did not run).
    """
    ch = problem.channel
    kw = {"T": problem.T, "beta": problem.beta, "beta0": problem.beta0}
    labels = ch.labels(y, problem.T, problem.beta0) if labels is None else labels
    lead = list(warm) if warm else [cold[0]]
    extra = list(cold) if warm else list(cold[1:])
    first = ch.prox(z, y, Sigma, starts=lead, labels=labels, **kw)
    end = first.branches[0]
    probes = [(1.0 - t) * end + t * c for c in extra for t in _PROBE_POINTS]
    flagged = _not_convex_nodes(problem, labels, Sigma, probes)
    sel = np.nonzero(mask | flagged)[0]
    # the lead starts' end points are converged starts: Newton stops there at once
    sub = ch.prox(
        z[sel],
        y[sel],
        Sigma,
        starts=[b[sel] for b in first.branches] + [c[sel] for c in extra],
        labels=labels[sel],
        **kw,
    )
    pr = _merge(first, sel, sub, len(lead))
    # with tracked branches only they are kept: an extra start matters where it ends lower than all of
    # them; without, every branch is tracked, so any minimum the lead start missed matters. Only the
    # screening nodes the probes did not flag tell whether the probes miss such nodes (on the flagged
    # ones every start ran already)
    unflagged = mask & ~flagged
    if _better_minimum(pr, len(lead), unflagged) if warm else _new_minimum(pr, len(lead), unflagged):
        pr = ch.prox(z, y, Sigma, starts=list(pr.branches[: len(lead)]) + extra, labels=labels, **kw)
    return pr, len(lead)
