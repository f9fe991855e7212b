"""Free-probability engine: spectra of ``S0 + delta Z`` and the prior-side integrals.

Public objects
--------------
Laws (``mu0``): :class:`MarchenkoPastur`, :class:`DiscreteLaw`, :class:`SpikedLaw`.
Free convolution with a semicircle: :func:`free_convolve_semicircle` -> :class:`ConvolvedLaw`.
State-evolution integrals: :func:`soft_threshold_integrals` (-> :class:`ThresholdIntegrals`),
:func:`linear_shrinkage_integrals`, :func:`free_divergence`, :func:`rie_mmse_integral`.
Finite ``d``: :class:`FiniteDSpectrum`. The target side of the SE: :class:`PriorModel`. Learned spectrum:
:func:`learned_spectrum_law`,
:func:`plot_learned_spectrum`.

Conventions: docs: Theory, :ref:`theory-logits`, :ref:`theory-se`, :ref:`theory-spectrum`, :ref:`theory-bayes`,
:ref:`theory-free-probability`. Sources: arXiv 2509.24914 (ERM of
single-head attention), 2506.01582 (Bayes-optimal attention-indexed model), 2505.17958
(nuclear route); Biane 1997 (free convolution with a semicircle).
"""

from singlehead.numerics.spectra.convolution import ConvolvedLaw, Outlier, free_convolve_semicircle
from singlehead.numerics.spectra.finite_d import FiniteDSpectrum, goe
from singlehead.numerics.spectra.integrals import (
    LinearShrinkageIntegrals,
    ThresholdIntegrals,
    free_divergence,
    linear_shrinkage_integrals,
    rie_mmse_integral,
    soft_threshold_integrals,
)
from singlehead.numerics.spectra.laws import DiscreteLaw, MarchenkoPastur, SpikedLaw
from singlehead.numerics.spectra.learned import LearnedSpectrum, learned_spectrum_law, plot_learned_spectrum
from singlehead.numerics.spectra.primitives import divided_differences, singular_value_threshold
from singlehead.numerics.spectra.prior_model import PriorModel, prior_from_eigenvalues

__all__ = [
    "singular_value_threshold",
    "MarchenkoPastur",
    "DiscreteLaw",
    "SpikedLaw",
    "ConvolvedLaw",
    "Outlier",
    "free_convolve_semicircle",
    "ThresholdIntegrals",
    "LinearShrinkageIntegrals",
    "soft_threshold_integrals",
    "linear_shrinkage_integrals",
    "free_divergence",
    "rie_mmse_integral",
    "FiniteDSpectrum",
    "goe",
    "LearnedSpectrum",
    "learned_spectrum_law",
    "plot_learned_spectrum",
    "PriorModel",
    "prior_from_eigenvalues",
    "divided_differences",
]
