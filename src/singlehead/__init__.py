"""singlehead: the high-dimensional theory of single-head tied attention as a working instrument.

Source: *Single-Head Attention in High Dimensions: A Theory of Generalization, Weights
Spectra, and Scaling Laws* (arXiv 2509.24914). Conventions: see ``Problem`` and
``shared/THEORY.md`` §1.
"""

__version__ = "0.1.0"

from .problem import CustomTarget, MPTarget, PowerLawTarget, Problem  # noqa: E402
from .results import Result  # noqa: E402

__all__ = ["Problem", "MPTarget", "PowerLawTarget", "CustomTarget", "Result", "__version__"]
