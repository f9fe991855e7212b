"""The two sides of a non-symmetric (untied) student's state evolution (derivation: ``docs/untied_theory.rst``).

* :mod:`.output`: the channel side on ``T^2`` fields (symmetric and antisymmetric blocks);
* :mod:`.prior`: weighted nuclear-norm denoising on sampled ``D x D`` instances;
* :mod:`.teachers`: how a target is drawn at the instances' dimension.

The fixed point is solved by the one state-evolution solver (:func:`singlehead.theory`), on the
map of :mod:`singlehead.state_evolution.block_map`.
"""

from singlehead.state_evolution.untied.output import block_sizes, untied_output_side, untied_test_errors
from singlehead.state_evolution.untied.prior import (
    UntiedPriorSample,
    UntiedPriorSide,
    extrapolated_side,
    untied_prior_side,
    weighted_nuclear_prox,
)
from singlehead.state_evolution.untied.teachers import teacher_norms, teacher_sampler

__all__ = [
    "block_sizes",
    "untied_output_side",
    "untied_test_errors",
    "UntiedPriorSample",
    "UntiedPriorSide",
    "untied_prior_side",
    "weighted_nuclear_prox",
    "extrapolated_side",
    "teacher_norms",
    "teacher_sampler",
]
