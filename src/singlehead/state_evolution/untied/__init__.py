"""State evolution of ERM with an untied student ``M = W_Q W_K^T/sqrt(p d)`` (derivation: ``docs/untied_theory.rst``).

* :mod:`.output`: the channel side on ``T^2`` fields (symmetric and antisymmetric blocks);
* :mod:`.prior`: weighted nuclear-norm denoising on sampled ``D x D`` instances;
* :mod:`.solver`: the fixed point, :func:`untied_theory`.
"""

from singlehead.state_evolution.untied.output import block_sizes, untied_output_side, untied_test_errors
from singlehead.state_evolution.untied.prior import (
           UntiedPriorSample,
           UntiedPriorSide,
           untied_prior_side,
           weighted_nuclear_prox,
)
from singlehead.state_evolution.untied.solver import (
           UntiedSEOptions,
           UntiedTheory,
           teacher_norms,
           teacher_sampler,
           untied_result,
           untied_theory,
)

__all__ = ["block_sizes", "untied_output_side", "untied_test_errors", "UntiedPriorSample", "UntiedPriorSide",
           "untied_prior_side", "weighted_nuclear_prox", "UntiedSEOptions", "UntiedTheory", "teacher_norms", "teacher_sampler",
           "untied_theory", "untied_result"]
