"""Prior (matrix) side of the untied state evolution: the weighted nuclear-norm denoiser on sampled instances.

The numerics live in :mod:`singlehead.numerics.spectra.untied_prior` (below the students, whose
:meth:`~singlehead.model.students.Untied.block_prior_side` calls them); this module is their place in the
state evolution's namespace.
"""

from singlehead.numerics.spectra.untied_prior import (
    UntiedPriorSample,
    UntiedPriorSide,
    extrapolated_side,
    untied_prior_side,
    weighted_nuclear_prox,
)

__all__ = ["UntiedPriorSample", "UntiedPriorSide", "untied_prior_side", "weighted_nuclear_prox", "extrapolated_side"]
