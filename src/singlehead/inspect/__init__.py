"""``singlehead inspect``: the theory's learned-spectrum law held against pretrained attention layers.

Modules (torch-free at import; torch is imported lazily only to read a ``.pt/.bin`` state dict):

* :mod:`.checkpoint` — offline loading of ``W_Q, W_K`` (safetensors, ``weights_only`` torch);
* :mod:`.heads` — per-head query–key maps ``M_h = A_h^T B_h/sqrt(d_head)`` and their tied part;
* :mod:`.esd` — weightwatcher-style power-law exponent ``alpha`` (Clauset et al. 2009);
* :mod:`.fit` — fit of ``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` (arXiv 2509.24914 §5);
* :mod:`.model` — the per-layer / per-head table; :mod:`.figure` — the figure grid.
"""

from .checkpoint import CheckpointError, load_attention_weights
from .esd import esd_power_law
from .fit import SpectralFit, fit_spectrum
from .heads import head_spectrum
from .model import Inspection, inspect_model, inspect_weights

__all__ = ["CheckpointError", "load_attention_weights", "esd_power_law", "SpectralFit", "fit_spectrum",
           "head_spectrum", "Inspection", "inspect_model", "inspect_weights", "plot_inspection", "inspect_figure"]


def plot_inspection(insp, path: str, **kw) -> None:
    """Figure grid, see :func:`singlehead.inspect.figure.plot_inspection` (matplotlib imported lazily)."""
    from .figure import plot_inspection as _plot

    _plot(insp, path, **kw)


def inspect_figure(out_dir: str, model: str | None = None) -> dict | None:
    """Run ``inspect`` on ``model`` (default: built-in MiniLM) for a report; ``None`` if it is not installed.

    Writes ``inspect_<name>.png`` and ``inspect_<name>.csv`` to ``out_dir`` and returns
    ``{"figure", "csv", "summary", "runtime_s"}`` (``summary``: one line per layer).
    """
    import os

    try:
        insp = inspect_model(model)
    except CheckpointError:
        return None
    name = "minilm" if model is None else os.path.splitext(os.path.basename(str(model)))[0]
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, f"inspect_{name}.png")
    csv = os.path.join(out_dir, f"inspect_{name}.csv")
    plot_inspection(insp, png)
    insp.table().to_csv(csv, index=False)
    return {"figure": png, "csv": csv, "summary": insp.summary_lines(), "runtime_s": insp.runtime_s}
