"""``singlehead reproduce``: the paper's figures, theory as lines and simulations as points.

Every figure is a frozen spec and four functions (grid -> run -> plot -> caption) registered in
:data:`FIGURES` (:mod:`.figspec`; the figures live in :mod:`singlehead.figures.finite_size`,
:mod:`singlehead.figures.errors`, :mod:`singlehead.figures.peak`, :mod:`singlehead.figures.power_law`, :mod:`singlehead.figures.spectra`,
:mod:`singlehead.figures.decomposition`, :mod:`.emergence`, :mod:`singlehead.figures.tuning`,
:mod:`singlehead.figures.untied`, :mod:`singlehead.figures.inspect_minilm`); its run declares its
jobs (simulations and theory points), runs them through the cached runner, and builds one tidy
table (one row per run, full config per row) and the agreement numbers.

Presets (:class:`Preset`, one spec per figure): ``quick`` (2 cores, <= 15 minutes: small d and few
seeds, stated on each figure), ``full`` (paper scale; uses a GPU for the simulations when one is
present) and ``smoke`` (tests).
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from singlehead import __version__
from singlehead.runs.reference import reference_seconds, reference_seconds_float32
# the report's order is the order of registration, that is of these imports
from singlehead.figures import finite_size  # noqa: F401,I001  (registers its figure)
from singlehead.figures import errors, peak, power_law, spectra  # noqa: F401,I001
from singlehead.figures import decomposition, emergence  # noqa: F401,I001
from singlehead.figures import tuning  # noqa: F401,I001  (lam* of the theory vs a validation set)
from singlehead.figures import untied  # noqa: F401,I001  (beyond the paper: the untied student)
from singlehead.report.compare import DEFAULT_ALLOWANCE, DEFAULT_TOL_ABS
from singlehead.figures.figspec import FIGURES, Context, FigureDef, FigureRun, Preset, build, register
from singlehead.figures.inspect_minilm import register_inspect
from singlehead.report.write import FigureOutput, save_figure, write_report
from singlehead.runs.cache import Cache
from singlehead.figures.spec import FigureSpec

__all__ = ["FIGURES", "FigureDef", "FigureRun", "FigureSpec", "Preset", "register", "Reproduction", "reproduce"]

# Pretrained-model section: registered only when the optional MiniLM package is installed.
register_inspect()


@dataclass
class Reproduction:
    """What :func:`reproduce` made: the report's path and every figure with its data."""

    report: Path
    outputs: list[FigureOutput]
    runtime_s: float
    reference_s: tuple[float, float] = (float("nan"), float("nan"))  # the reference workload at start and end
    # the float32 torch one (the rate the mixed-precision fits run at; it varies more on shared machines)
    reference_f32_s: tuple[float, float] = (float("nan"), float("nan"))
    #: Figures registered but not built by this preset (their :attr:`FigureDef.presets` leave it out).
    skipped: list[str] = field(default_factory=list)


def reproduce(mode: str | Preset = "quick", out: str | Path = "singlehead-report", *, n_jobs: int = 1,
              scheduler: str | None = None, only: list[str] | None = None, progress: bool = True,
              client: Any = None) -> Reproduction:
    """Build every figure (or those in ``only``), save PNG/PDF/CSV and the HTML report under ``out``.

    ``mode``: a preset name (``"quick"``, ``"full"``, ``"smoke"``) or a ``Preset`` (e.g. one
    figure's spec changed with ``Preset.with_spec``). Results are cached under ``out/cache``
    (one file per run, keyed by the full config): an interrupted reproduction resumes where it
    stopped and recomputes nothing finished.

    Examples
    --------
    >>> from singlehead import reproduce
    >>> res = reproduce("quick", "singlehead-report", n_jobs=2, only=["finite_size"])  # doctest: +SKIP
    >>> [o.name for o in res.outputs]  # doctest: +SKIP
    ['finite_size']
    """
    preset = mode if isinstance(mode, Preset) else Preset.named(mode)
    out = Path(out)
    for n in only or ():
        if n not in FIGURES:
            raise ValueError(f"figure must be one of {list(FIGURES)} (got {n!r})")
    # a figure left out of this preset is skipped even when asked for by name: its sizes are not defined here
    names = [n for n in (only or FIGURES) if preset.name in FIGURES[n].presets]
    skipped = [n for n in (only or FIGURES) if preset.name not in FIGURES[n].presets]
    ctx = Context(Cache(out / "cache"), n_jobs=n_jobs, scheduler=scheduler, progress=progress, client=client,
                  device=preset.device)
    finite_size = (f"{preset.name} preset (per-figure sizes are stated in each "
                   f"figure's parameters): a seed-averaged check declares a tolerance of "
                   f"{100 * DEFAULT_ALLOWANCE:g} % of the theory value (most figures; floor {DEFAULT_TOL_ABS:g}) and "
                   "agrees when its simulation is shown within it (the report's rule). At small d, finite-size corrections — "
                   "simulations above theory, shrinking as d grows — can exceed it at small alpha; the finite_size "
                   "figure measures these corrections at several d and extrapolates them to d = inf.")
    ref_start, ref32_start = reference_seconds(), reference_seconds_float32()
    t0 = time.perf_counter()
    outputs: list[FigureOutput] = []
    for n in names:
        o = build(FIGURES[n], ctx, preset.spec(n))
        if preset.name != "full" and n != "finite_size" and o.agreement is not None and "n_seeds" in o.agreement and \
                (o.agreement["n_seeds"] > 0).any():
            o.notes.append(finite_size)
        save_figure(o, out / "figures")
        outputs.append(o)
    runtime = time.perf_counter() - t0
    ref_end, ref32_end = reference_seconds(), reference_seconds_float32()
    env = {"singlehead": __version__, "torch": torch.__version__, "python": platform.python_version(),
           "cpus": os.cpu_count(), "device": preset.device,
           "reference workload (5 x 1000^3 float64 matmul) at start / end": f"{ref_start:.3f} s / {ref_end:.3f} s",
           "float32 reference workload (5 x 1000^3 float32 torch matmul, the fits' precision) at start / end":
               f"{ref32_start:.3f} s / {ref32_end:.3f} s"}
    if skipped:
        env["figures not in this preset"] = ", ".join(
            f"{n} ({', '.join(FIGURES[n].presets)} only)" for n in skipped)
    path = write_report(outputs, out / "report.html", title="singlehead: reproduction of arXiv 2509.24914",
                        mode=preset.name, total_runtime_s=runtime, environment=env)
    return Reproduction(path, outputs, runtime, (ref_start, ref_end), (ref32_start, ref32_end), skipped)
