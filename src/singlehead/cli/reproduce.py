"""``singlehead reproduce``: figures of the paper with theory and simulation, and an HTML report."""

from __future__ import annotations

import importlib.util
import os

import click

from singlehead.figures.reproduce import FIGURES, FIGURES_AT_A_TIME
from singlehead.figures.reproduce import reproduce as run
from singlehead.report.verdict import tally, tally_text


@click.command()
@click.option(
    "--quick",
    "mode",
    flag_value="quick",
    default=True,
    help="Laptop scale: the MP figures at d = 100 (about 12 min on 2 cores).",
)
@click.option("--full", "mode", flag_value="full", help="Paper scale; uses a GPU when present.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="singlehead-report",
    show_default=True,
    help="Output folder: report.html, figures/ (PNG, PDF, CSV) and cache/ (resumable).",
)
@click.option("--jobs", "n_jobs", type=int, default=None, help="Local worker processes (default: all cores).")
@click.option("--scheduler", default=None, help="Dask distributed scheduler address, e.g. tcp://host:8786.")
@click.option("--figure", "only", multiple=True, help="Build only this figure (repeatable).")
def reproduce(mode: str, out: str, n_jobs: int | None, scheduler: str | None, only: tuple[str, ...]) -> None:
    """Reproduce the paper's results: theory as lines, simulations as points, one HTML report."""
    if n_jobs is not None and n_jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1 (got {n_jobs})")
    for name in only:
        if name not in FIGURES:
            raise ValueError(f"figure must be one of {', '.join(FIGURES)} (got {name!r})")
    if scheduler is not None:
        if importlib.util.find_spec("distributed") is None:
            raise ValueError("scheduler needs Dask: pip install 'singlehead[dask]'")
    jobs = n_jobs or (os.cpu_count() or 1)
    res = run(mode, out, n_jobs=jobs, scheduler=scheduler, only=list(only) or None)
    tallies = [tally(o.agreement) for o in res.outputs]
    for o, t in zip(res.outputs, tallies):
        ok = (
            ""
            if not t["n"]
            else (
                f"; {o.checks}: {tally_text(t)} (Holm, family-wise 5 % per test)"
                + (
                    f"; worst deviation {100 * t['worst_rel']:.1f} % of the theory"
                    if t["worst_rel"] == t["worst_rel"]
                    else ""
                )
                + (f", {t['worst_se']:.1f} s.e." if t["worst_se"] == t["worst_se"] else "")
            )
        )
        click.echo(f"{o.name}: {o.runtime_s:.0f} s wall, {o.compute_s:.0f} s of runs{ok}")
        rep = o.seeds
        if rep is not None and rep.plan.active:
            first = rep.first
            before = f"; before: {tally_text(first)}" if first.get("n") else ""
            click.echo(f"  {rep.text()}{before}")
    for name in res.skipped:
        click.echo(f"{name}: not built by the {mode} preset ({', '.join(FIGURES[name].presets)} only)")
    if len(res.outputs) > 1 and jobs != 1 and scheduler is None:
        click.echo(
            f"(figures built {FIGURES_AT_A_TIME} at a time on {jobs} workers: their wall times "
            f"overlap; the runs' seconds add up to {sum(o.compute_s for o in res.outputs):.0f} s)"
        )
    total = {k: sum(t[k] for t in tallies) for k in ("n", "agrees", "deviates", "explained", "inconclusive")}
    click.echo(f"checks: {tally_text(total)}")
    for o, t in zip(res.outputs, tallies):
        for row in t["inconclusive_rows"]:
            click.echo(f"  inconclusive: {o.name}: {row}")
    (r0, r1), (f0, f1) = res.reference_s, res.reference_f32_s
    click.echo(
        f"report: {res.report} (total {res.runtime_s:.0f} s; reference workloads, 5 x 1000^3 matmul: "
        f"float64 {r0:.3f} s at the start, {r1:.3f} s at the end; float32 {f0:.3f} s / {f1:.3f} s)"
    )
