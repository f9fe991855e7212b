"""State evolution of multi-head tied attention on softmax channels (derivation: ``docs/multihead_theory.rst``).

* :mod:`.loss`: the fit loss of a mean of softmax heads on ``H K`` fields, with its derivatives;
* :mod:`.output`: the output side, ``(Q, M, Sigma) -> (Qhat, Mhat, Sigmahat)``, a prox on ``H K`` fields;
* :mod:`.prior`: the prior side, the head-coupled PSD denoiser on sampled instances;
* :mod:`.solve`: the map, its ansatz (unspecialised, specialised, general) and its solvers;
* :mod:`.draw_error`: the prior draws' sampling error at the fixed point (a jackknife);
* :mod:`.theory`: the solution as a Result, the routed entry point of :func:`singlehead.theory`, the
  specialisation eigenvalue.

Experimental. :func:`singlehead.theory` routes a problem with several heads on a softmax channel here
(:func:`multihead_point`), its result marked experimental.
"""

from singlehead.state_evolution.multihead_se.loss import multihead_fit_loss
from singlehead.state_evolution.multihead_se.output import (
    MultiHeadOutput,
    multihead_output_side,
    multihead_quadrature,
    multihead_test_errors,
)
from singlehead.state_evolution.multihead_se.prior import (
    MultiHeadPriorSample,
    MultiHeadPriorSide,
    coupled_shrinkage,
    multihead_prior_side,
)
from singlehead.state_evolution.multihead_se.solve import (
    ANSATZE,
    MultiHeadOptions,
    MultiHeadSEMap,
    default_start,
    match_heads,
    multihead_options,
    project,
    solve_coarse_to_fine,
    solve_multihead,
    specialisation_index,
)
from singlehead.state_evolution.multihead_se.theory import (
    MAX_HEADS,
    MAX_T,
    check_multihead_problem,
    multihead_point,
    multihead_theory,
    specialisation_eigenvalue,
)

__all__ = [
    "default_start",
    "match_heads",
    "multihead_fit_loss",
    "MultiHeadOutput",
    "multihead_output_side",
    "multihead_quadrature",
    "multihead_test_errors",
    "MultiHeadPriorSample",
    "MultiHeadPriorSide",
    "coupled_shrinkage",
    "multihead_prior_side",
    "ANSATZE",
    "MAX_HEADS",
    "MAX_T",
    "check_multihead_problem",
    "multihead_options",
    "multihead_point",
    "MultiHeadOptions",
    "MultiHeadSEMap",
    "multihead_theory",
    "project",
    "solve_coarse_to_fine",
    "solve_multihead",
    "specialisation_eigenvalue",
    "specialisation_index",
]
