"""``singlehead reproduce``: the paper's figures, theory as lines and simulations as points.

Every figure is a frozen spec and four functions (grid -> run -> plot -> caption) registered in
:data:`FIGURES` (:mod:`.figspec`; the figures live in :mod:`singlehead.figures.finite_size`,
:mod:`singlehead.figures.errors`, :mod:`singlehead.figures.peak`, :mod:`singlehead.figures.power_law`,
:mod:`singlehead.figures.spectra`,
:mod:`singlehead.figures.decomposition`, :mod:`.emergence`, :mod:`singlehead.figures.tuning`,
:mod:`singlehead.figures.untied`, :mod:`singlehead.figures.multihead`, :mod:`singlehead.figures.long_sequences`,
:mod:`singlehead.figures.inspect_minilm`); its run declares its
jobs (simulations and theory points), runs them through the cached runner, and builds one tidy
table (one row per run, full config per row) and the agreement numbers.

Presets (:class:`Preset`, one spec per figure): ``quick`` (2 cores, about 12 minutes: small d and few
seeds, stated on each figure), ``full`` (paper scale; uses a GPU for the simulations when one is
present) and ``smoke`` (tests).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from singlehead import __version__
from singlehead.runs.reference import reference_seconds, reference_seconds_float32

# the report's order is the order of registration, that is of these imports
# isort: off
from singlehead.figures import finite_size  # noqa: F401,I001  (registers its figure)
from singlehead.figures import errors, peak, power_law, spectra  # noqa: F401,I001
from singlehead.figures import decomposition, emergence  # noqa: F401,I001
from singlehead.figures import tuning  # noqa: F401,I001  (lam* of the theory vs a validation set)
from singlehead.figures import untied  # noqa: F401,I001  (beyond the paper: the untied student)
from singlehead.figures import multihead  # noqa: F401,I001  (beyond the paper: several heads)
from singlehead.figures import long_sequences  # noqa: F401,I001  (T = 2 ... 64; full and smoke presets only)

# isort: on
from singlehead.figures.figspec import DRAWING, FIGURES, Context, FigureDef, FigureRun, Preset, build, register
from singlehead.figures.inspect_minilm import register_inspect
from singlehead.figures.spec import FigureSpec
from singlehead.report.compare import DEFAULT_ALLOWANCE, DEFAULT_TOL_ABS
from singlehead.report.write import FigureOutput, save_figure, write_report
from singlehead.runs import Workers
from singlehead.runs.cache import Cache
from singlehead.runs.threads import configure

__all__ = ["FIGURES", "FigureDef", "FigureRun", "FigureSpec", "Preset", "register", "Reproduction", "reproduce"]

# Pretrained-model section: registered only when the optional MiniLM package is installed.
register_inspect()

#: Figures built at once when the runs go to local workers (they share the workers; more would only queue).
FIGURES_AT_A_TIME = 2


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


def reproduce(
    mode: str | Preset = "quick",
    out: str | Path = "singlehead-report",
    *,
    n_jobs: int = 1,
    scheduler: str | None = None,
    only: list[str] | None = None,
    progress: bool = True,
    client: Any = None,
) -> Reproduction:
    """Build every figure (or those in ``only``), save PNG/PDF/CSV and the HTML report under ``out``.

    ``mode``: a preset name (``"quick"``, ``"full"``, ``"smoke"``) or a ``Preset`` (e.g. one
    figure's spec changed with ``Preset.with_spec``). Results are cached under ``out/cache``
    (one file per run, keyed by the full config): an interrupted reproduction resumes where it
    stopped and recomputes nothing finished. With ``n_jobs != 1`` and no scheduler,
    ``FIGURES_AT_A_TIME`` figures are built at once on one pool of ``n_jobs`` worker processes
    (each figure's runtime is then its own wall time, overlapping the others'); the results do not
    depend on it (every run is keyed and seeded, chains stay within a figure's stage).

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
    # with local workers, two figures are built at a time on one shared pool: the serial parts of one (a warm-started
    # theory chain, a seed-plan round's last fits, an in-process run, its plots) leave a core to the other's runs
    local = n_jobs != 1 and scheduler is None and client is None
    pool = Workers(n_jobs) if local and len(names) > 1 else None
    if pool is not None:
        configure(workers=pool.workers)
    ctx = Context(
        Cache(out / "cache"),
        n_jobs=pool or n_jobs,
        scheduler=scheduler,
        progress=progress,
        client=client,
        device=preset.device,
    )
    finite_size_note = (
        f"{preset.name} preset (per-figure sizes are stated in each "
        f"figure's parameters): a seed-averaged check declares a tolerance of "
        f"{100 * DEFAULT_ALLOWANCE:g} % of the theory value (most figures; floor {DEFAULT_TOL_ABS:g}) and "
        "agrees when its simulation is shown within it (the report's rule). At small d, finite-size corrections — "
        "simulations above theory, shrinking as d grows — can exceed it at small alpha; the finite_size "
        "figure measures these corrections at several d and extrapolates them to d = inf."
    )
    ref_start, ref32_start = reference_seconds(), reference_seconds_float32()
    t0 = time.perf_counter()

    def one(n: str) -> FigureOutput:
        # a context per figure: the seed plan's bookkeeping is the figure's own
        o = build(FIGURES[n], dataclasses.replace(ctx, seed_groups={}, seed_grants={}, compute_s=0.0), preset.spec(n))
        if (
            preset.name != "full"
            and n != "finite_size"
            and o.agreement is not None
            and "n_seeds" in o.agreement
            and (o.agreement["n_seeds"] > 0).any()
        ):
            o.notes.append(finite_size_note)
        with DRAWING:
            save_figure(o, out / "figures")
        return o

    if pool is None:
        outputs = [one(n) for n in names]
    else:
        try:
            with ThreadPoolExecutor(FIGURES_AT_A_TIME, thread_name_prefix="figure") as ex:
                outputs = list(ex.map(one, names))  # report order kept
        finally:
            pool.close()
    runtime = time.perf_counter() - t0
    ref_end, ref32_end = reference_seconds(), reference_seconds_float32()
    env = {
        "singlehead": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "device": preset.device,
        "reference workload (5 x 1000^3 float64 matmul) at start / end": f"{ref_start:.3f} s / {ref_end:.3f} s",
        "float32 reference workload (5 x 1000^3 float32 torch matmul, the fits' precision)"
        " at start / end": f"{ref32_start:.3f} s / {ref32_end:.3f} s",
    }
    if skipped:
        env["figures not in this preset"] = ", ".join(f"{n} ({', '.join(FIGURES[n].presets)} only)" for n in skipped)
    path = write_report(
        outputs,
        out / "report.html",
        title="singlehead: reproduction of arXiv 2509.24914",
        mode=preset.name,
        total_runtime_s=runtime,
        environment=env,
    )
    return Reproduction(path, outputs, runtime, (ref_start, ref_end), (ref32_start, ref32_end), skipped)
