"""What a state-evolution point costs before it runs: the sizes it can serve, its memory and its time.

:func:`check_theory_size` refuses, with a ``ValueError`` naming the parameter, the limit and why, every
point the library cannot serve (it runs at the start of :func:`~singlehead.state_evolution.theory` and of
every sweep, and the explorer runs it on each view):

* the output quadrature has ``2 x fields`` Sobol dimensions (``fields = T(T+1)/2`` for a symmetric student,
  ``T^2`` for a non-symmetric one), at most :data:`~singlehead.numerics.limits.SOBOL_MAX_DIM`: ``T <= 145``
  (symmetric) and ``T <= 102`` (non-symmetric);
* the output side's memory (:func:`output_side_bytes`) and the prior side's (:func:`prior_side_bytes`) must fit
  the memory limit (:func:`~singlehead.numerics.limits.memory_limit`, ``SINGLEHEAD_MEMORY_LIMIT``, default 2 GiB).

:func:`point_cost_seconds` is the cost model the explorer uses to say that a point will be slow.
"""

from __future__ import annotations

from typing import Any

from singlehead.model.problem import Problem
from singlehead.model.targets import SpectralTarget
from singlehead.numerics.limits import SOBOL_MAX_DIM, check_memory, max_tokens_for_dim
from singlehead.numerics.prox_rows import newton_chunk_bytes
from singlehead.state_evolution.options import SEOptions

__all__ = [
    "quadrature_fields",
    "max_tokens",
    "output_side_bytes",
    "prior_side_bytes",
    "check_theory_size",
    "point_cost_seconds",
]

# Newton starts held at once by the output side (three cold starts, the tracked branches and the best)
_STARTS = 5
# (N, K) arrays the output side holds per node besides its starts: nodes (2), y, z, E[z0|y,z], h, g, the
# Sigmahat residual and the tangent's fields (3)
_PER_NODE_FIELDS = 11
# (N, K) arrays per start: the start, its end point, the end point kept as a branch
_PER_START_FIELDS = 3
# bytes per eigenvalue of the discrete prior law (the eigenvalues and the prior side's work arrays on them)
_PRIOR_VECTOR_BYTES = 8 * 24


def quadrature_fields(problem: Problem) -> int:
    """Fields per sequence of the student (the output quadrature has twice as many dimensions)."""
    return sum(b.size(problem.T) for b in problem.student.field_blocks())


def max_tokens(problem: Problem) -> int:
    """The largest ``T`` whose output quadrature fits SciPy's Sobol generator for ``problem``'s student."""
    return max_tokens_for_dim(lambda T: 2 * quadrature_fields(problem.replace(T=T)), SOBOL_MAX_DIM)


def output_side_bytes(T: int, fields: int, n_nodes: int) -> int:
    """Estimated peak memory of one output-side evaluation on ``n_nodes`` nodes (bytes).

    The ``(N, K)`` arrays held for the whole evaluation (nodes, fields, each start and its end point), the
    ``(N, T, T)`` labels, and one chunk of the Newton iteration
    (:func:`~singlehead.numerics.prox_rows.newton_chunk_bytes`, bounded by the chunking).
    """
    held = 8 * n_nodes * (fields * (_PER_NODE_FIELDS + _STARTS * _PER_START_FIELDS) + T * T)
    return int(held + newton_chunk_bytes(T, fields, n_nodes * _STARTS))


def prior_side_bytes(problem: Problem, prior: str) -> int:
    """Estimated memory of the prior side: ``d`` eigenvalues for a target with a spectrum at this ``d``, ``draws``
    ``d x d`` matrices in the finite-``d`` mode, nothing for a closed-form law."""
    d = problem.d
    spectral = isinstance(problem.target, SpectralTarget)
    out = _PRIOR_VECTOR_BYTES * d if (spectral or prior == "finite") else 0
    if prior == "finite":
        out += 8 * 6 * d * d
    return int(out)


def check_theory_size(problem: Problem, options: SEOptions | None = None, prior: Any = "auto") -> None:
    """Raise ``ValueError`` (naming ``T``, ``n_points`` or ``d``, the limit and why) when the state evolution of
    ``problem`` with ``options`` cannot be served: see the module docstring."""
    o = options or SEOptions()
    nodes = problem.channel.needs_quadrature or not problem.student.symmetric
    if nodes:
        fields = quadrature_fields(problem)
        if 2 * fields > SOBOL_MAX_DIM:
            tmax = max_tokens(problem)
            raise ValueError(
                f"T must be <= {tmax} for the state evolution of the {problem.student.name} student "
                f"(got {problem.T}): its output quadrature draws 2 x {fields} = {2 * fields} Sobol "
                f"dimensions and SciPy's Sobol generator supports at most {SOBOL_MAX_DIM}"
            )
        n_nodes = o.points(problem) * o.n_scrambles
        which = "n_points" if o.n_points is not None else "T"
        check_memory(
            output_side_bytes(problem.T, fields, n_nodes),
            which,
            f"the output side at T = {problem.T} on {n_nodes} quadrature nodes ({fields} fields each)",
            "lower n_points" if which == "n_points" else "lower T",
        )
    mode = prior if isinstance(prior, str) else "given"
    check_memory(
        prior_side_bytes(problem, mode),
        "d",
        f"the prior side at d = {problem.d} ({'the finite-d spectra' if mode == 'finite' else 'the target'}'s"
        f" {problem.d} eigenvalues)",
        "lower d (the asymptotic law does not depend on it beyond a few thousand)",
    )


# the cost model of point_cost_seconds: seconds per node and Newton iteration, per T^3 and per K (measured on
# the 2-core reference machine, one thread), and the node-iterations of a typical cold point, set so that the
# model lands within a factor 2 of benchmarks/bench_long_sequences.py at T = 2, 8, 16 and 64 (seq2lab,
# alpha 0.5: 0.3, 4.1, 3.6 and 16 s on a quiet machine)
_SEC_PER_T3 = 4e-9
_SEC_PER_FIELD = 1.5e-7
_NODE_ITERATIONS = 70


def point_cost_seconds(problem: Problem, options: SEOptions | None = None) -> float:
    """A rough estimate of the seconds one state-evolution point of ``problem`` takes (one thread).

    ``nodes x node-iterations x (a T^3 + b K)``: a typical point takes about ``_NODE_ITERATIONS`` Newton
    iterations per node over all its map evaluations, each costing a ``T x T`` factorisation and a pass over
    the ``K`` fields; 0 for closed-form output sides. An order of magnitude, for warning that a point is slow.
    """
    o = options or SEOptions()
    if problem.channel.needs_quadrature is False and problem.student.symmetric:
        return 0.0
    fields = quadrature_fields(problem)
    n = o.points(problem) * o.n_scrambles
    return float(n * _NODE_ITERATIONS * (_SEC_PER_T3 * problem.T**3 + _SEC_PER_FIELD * fields))
