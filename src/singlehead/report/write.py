"""Self-contained HTML report: every figure embedded, with its parameters, agreement verdicts and runtime."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from singlehead.report.html import page, png_bytes

#: The default kind of agreement row: a theory prediction against simulations.
THEORY_SIMULATION = "theory-simulation checks"


@dataclass
class FigureOutput:
    """One figure of the reproduction: the matplotlib figure, its tidy table and its numbers.

    ``agreement`` rows compare theory and simulation: each row has at least ``quantity``,
    ``theory``, ``simulation``, ``se`` (standard error of the simulation mean) and ``gap``
    (``|simulation - theory|``) and its declared tolerance (``tol_rel``, ``tol_abs``, ``tol_reason``);
    a statistical row has ``se`` (and ``dof``), a tolerance row (no standard error) may state its
    ``within``. The columns before ``quantity`` name the point (e.g. ``cfg_lam``, ``cfg_alpha``).
    A row may carry the ``diagnostic`` computed at its point and ``diagnostic_fails``.
    :func:`~singlehead.figures.figspec.build` judges the rows
    (:func:`~singlehead.report.verdict.judge`): ``tolerance``, ``p_diff``, ``p_diff_holm``,
    ``p_equiv``, ``p_equiv_holm`` and ``verdict``, and with the seed plan's report ``seeds`` the
    columns ``seeds_declared`` and ``seeds_added``.
    """

    name: str
    title: str
    caption: str
    params: dict[str, Any]
    figure: Any
    table: pd.DataFrame
    agreement: pd.DataFrame | None = None
    runtime_s: float = 0.0
    #: seconds of computation in the runs this figure started (their records' ``runtime_s``, on whichever worker)
    compute_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    png: bytes | None = None  # the rendered PNG once saved (the report inlines it instead of rendering again)
    # what the agreement rows are (the report's summary and the CLI name it beside the count)
    checks: str = THEORY_SIMULATION
    # one sentence per diagnostic computed in the run, e.g. where replica symmetry fails along a theory curve
    # (the report's section "Where the theory holds")
    diagnostics: list[str] = field(default_factory=list)
    # what the figure's seed plan did (a singlehead.figures.seeds.SeedReport: the plan, the runs added, the verdict
    # counts of the first judgement and the points that received seeds); None when the figure was built without one
    seeds: Any = None


def save_figure(out: FigureOutput, root: Path) -> dict[str, str]:
    """Write ``<name>.png``, ``<name>.pdf`` and ``<name>.csv`` under ``root``; returns the paths."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    # each render costs seconds on the main process while the workers wait: the PNG is rendered once, kept for the
    # report, and written
    out.png = png_bytes(out.figure)
    p = root / f"{out.name}.png"
    p.write_bytes(out.png)
    paths["png"] = str(p)
    p = root / f"{out.name}.pdf"
    out.figure.savefig(p, bbox_inches="tight")
    paths["pdf"] = str(p)
    p = root / f"{out.name}.csv"
    out.table.to_csv(p, index=False)
    paths["csv"] = str(p)
    if out.agreement is not None:
        p = root / f"{out.name}_agreement.csv"
        out.agreement.to_csv(p, index=False)
        paths["agreement"] = str(p)
    return paths


def write_report(
    outputs: list[FigureOutput],
    path: Path,
    *,
    title: str,
    mode: str,
    total_runtime_s: float,
    environment: dict[str, Any],
) -> Path:
    """Write one self-contained HTML page: the summary first, a table of contents that stays on screen,
    then each figure (embedded as WebP, :func:`singlehead.report.html.web_image`) with a compact table of its checks.

    The checks are judged by the rule of :mod:`.verdict` (each figure's ``agreement`` must carry its
    ``verdict``); the page states the rule.
    """
    path.write_text(
        page(
            outputs,
            title=title,
            mode=mode,
            total_runtime_s=total_runtime_s,
            environment=environment,
            generated=_dt.datetime.now().isoformat(timespec="seconds"),
        )
    )
    return path
