"""Analysis layer: learned spectra, error decomposition, power-law targets and scaling laws.

Sources: arXiv 2509.24914 (single-head tied attention, §5 spectra), arXiv 2509.24882 (scaling
laws and spectra of shallow networks), arXiv 2505.17958 (nuclear route); conventions in the
docs: Theory, :ref:`theory-logits`, :ref:`theory-se`, :ref:`theory-spectrum`, :ref:`theory-decomposition`,
:ref:`theory-scaling`.
"""

from singlehead.analysis.learned_spectrum import LearnedSpectrum, learned_spectrum, target_law
from singlehead.analysis.spectrum_comparison import (
    compare_spectrum,
    ks_distance,
    plot_spectrum_comparison,
    spectrum_table,
)

__all__ = [
    "LearnedSpectrum",
    "learned_spectrum",
    "compare_spectrum",
    "ks_distance",
    "spectrum_table",
    "plot_spectrum_comparison",
    "target_law",
]

from singlehead.analysis.decomposition import (  # noqa: E402
    ErrorDecomposition,
    channel_sensitivities,
    channel_test_error,
    decompose,
    scale_profile,
)
from singlehead.analysis.finite_k import finite_d_mismatch, noise_limited_law, threshold_switch_on_exponent  # noqa: E402
from singlehead.analysis.power_law import (  # noqa: E402
    power_law_curve,
    power_law_problem,
    recovered_modes,
    spiked_prior,
    switch_on_sample_sizes,
)
from singlehead.analysis.scaling import (  # noqa: E402
    SAMPLE_LIMITED_SETTING,
    ExponentFit,
    classify_regime,
    fit_exponent,
    predicted_exponent,
    regime_map,
    scaling_curve,
)

__all__ += [
    "ErrorDecomposition",
    "decompose",
    "channel_sensitivities",
    "channel_test_error",
    "scale_profile",
    "power_law_curve",
    "power_law_problem",
    "recovered_modes",
    "spiked_prior",
    "switch_on_sample_sizes",
    "noise_limited_law",
    "finite_d_mismatch",
    "threshold_switch_on_exponent",
    "ExponentFit",
    "fit_exponent",
    "predicted_exponent",
    "classify_regime",
    "regime_map",
    "scaling_curve",
    "SAMPLE_LIMITED_SETTING",
]

from singlehead.analysis.finite_size import (  # noqa: E402
    Extrapolation,
    FiniteSizeGaps,
    extrapolate_to_infinite_d,
    finite_size_gaps,
)

__all__ += ["Extrapolation", "FiniteSizeGaps", "extrapolate_to_infinite_d", "finite_size_gaps"]

from singlehead.analysis.tuning import (  # noqa: E402
    TuneResult,
    alpha_for_error,
    tune,
    tune_curve,
    validation_pick,
    valley_halfwidth,
)

__all__ += ["TuneResult", "tune", "tune_curve", "alpha_for_error", "validation_pick", "valley_halfwidth"]
