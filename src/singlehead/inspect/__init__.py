"""``singlehead inspect``: the theory's learned-spectrum law held against pretrained attention layers.

Modules (torch-free at import; torch is imported lazily only to read a ``.pt/.bin`` state dict):

* :mod:`.checkpoint` — offline loading of ``W_Q, W_K`` (safetensors, ``weights_only`` torch);
* :mod:`.heads` — per-head query–key maps ``M_h = A_h^T B_h/sqrt(d_head)`` and their tied part;
* :mod:`.esd` — weightwatcher-style power-law exponent ``alpha`` (Clauset et al. 2009);
* :mod:`.fit` — fit of ``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` (arXiv 2509.24914 §5);
* :mod:`.untied_law`, :mod:`.untied` — the untied law ``eta SVT_eps(M0 + sigma_s Z_s + sigma_a Z_a)``,
  sampled with common random numbers, and its KS fit to the singular values of ``M_h``;
* :mod:`.model` — the per-layer / per-head table; :mod:`.figure` — the figure grid.
"""

from singlehead.inspect.checkpoint import CheckpointError, load_attention_weights, write_example_checkpoint
from singlehead.inspect.esd import esd_power_law
from singlehead.inspect.fit import SpectralFit, fit_spectrum
from singlehead.inspect.heads import head_spectrum
from singlehead.inspect.laws import LawCache, outlier_margin
from singlehead.inspect.model import Inspection, inspect_model, inspect_weights
from singlehead.inspect.untied import (
    UntiedFit,
    UntiedLawCache,
    better_fit,
    fit_untied,
    sample_singular_values,
    sample_untied_map,
)

__all__ = [
    "CheckpointError",
    "load_attention_weights",
    "write_example_checkpoint",
    "esd_power_law",
    "SpectralFit",
    "fit_spectrum",
    "UntiedFit",
    "fit_untied",
    "better_fit",
    "sample_singular_values",
    "sample_untied_map",
    "head_spectrum",
    "Inspection",
    "inspect_model",
    "inspect_weights",
    "plot_inspection",
    "LawCache",
    "outlier_margin",
    "UntiedLawCache",
]


def plot_inspection(insp, path: str, **kw) -> None:
    """Figure grid, see ``singlehead.inspect.figure.plot_inspection`` (matplotlib imported lazily).

    One panel per layer: the histogram of the pooled non-zero eigenvalues of the tied maps and
    the fitted law, with outliers marked.

    Examples
    --------
    >>> import tempfile
    >>> from singlehead.inspect import inspect_model, plot_inspection, write_example_checkpoint
    >>> path = str(write_example_checkpoint(tempfile.mkdtemp()))     # 4 heads x 16, d_model 64
    >>> plot_inspection(inspect_model(path), "inspection.png")  # doctest: +SKIP
    """
    from singlehead.inspect.figure import plot_inspection as _plot

    _plot(insp, path, **kw)
