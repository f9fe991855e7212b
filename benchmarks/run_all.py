"""Run the benchmarks under ``benchmarks/`` and write ``docs/performance.rst``, the one page of performance figures.

Each benchmark runs in a fresh process (this interpreter, the environment below added to the caller's) and
its printed table goes into the page verbatim, beside the reference workload (five float64 1000 x 1000
matrix products in numpy, :func:`singlehead.runs.reference_seconds`) timed by this script right before
and right after it, and with the machine's facts (CPU model, cores, numpy and its BLAS, torch). A figure
means little without the machine's speed at the time it was measured: compare figures across machines and
loads as multiples of the reference.

    nice -n 5 python benchmarks/run_all.py --quick     # the quick set (a few minutes on 2 cores)
    python benchmarks/run_all.py                       # every benchmark with its own default sizes
    python benchmarks/run_all.py --list [--quick]      # what would run, with its arguments
    python benchmarks/run_all.py --only se_speed       # a subset (the page then holds only these)

This is not part of the test suite: its figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Bench:
    """One benchmark script: its arguments in the full and the quick set, and the environment it runs under."""

    script: str
    title: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = ()  # None: left out of the quick set
    env: dict[str, str] = field(default_factory=dict)
    needs: str = ""  # an executable that must be on the PATH (else the benchmark is listed as skipped)

    @property
    def name(self) -> str:
        return self.script.removeprefix("bench_").removesuffix(".py")

    def args(self, quick: bool) -> tuple[str, ...] | None:
        return self.quick if quick else self.full


# The order of the page: the command line first, then the state evolution, the simulations, the rest.
BENCHMARKS: tuple[Bench, ...] = (
    Bench("bench_startup.py", "Start-up: one theory point from the shell", quick=("--repeat", "3")),
    Bench(
        "bench_se_speed.py",
        "State evolution: one point and warm sweeps",
        quick=("--quick", "--repeats", "1"),
        env=ONE_THREAD,
    ),
    Bench("bench_state_evolution.py", "State evolution: points, curves, T = 3 and T = 4", quick=("--quick",)),
    Bench(
        "bench_se_random_grid.py",
        "State evolution on a random grid of valid problems",
        quick=("--n", "24"),
        env=ONE_THREAD,
    ),
    Bench("bench_prior_side.py", "Prior side of the tied state evolution", quick=("--repeat", "2"), env=ONE_THREAD),
    Bench("bench_finite_prior.py", "Finite-d prior against the asymptotic prior", env=ONE_THREAD),
    Bench("bench_untied_se.py", "Untied state evolution: time per point", quick=("--repeats", "1"), env=ONE_THREAD),
    Bench(
        "bench_multihead_point.py",
        "Multi-head softmax state evolution: time per point",
        quick=("--repeats", "1"),
        env=ONE_THREAD,
    ),
    Bench(
        "bench_untied_point.py",
        "Untied state evolution: a point with its error bar, and a curve",
        quick=None,
        env=ONE_THREAD,
    ),
    Bench("bench_spectra.py", "Spectral engine"),
    Bench("bench_power_law_curves.py", "Power-law figure: theory curves", quick=("--mode", "smoke"), env=ONE_THREAD),
    Bench("bench_training.py", "Training: step throughput and converged fits", quick=("--quick", "--rounds", "3")),
    Bench("bench_untied.py", "Untied student: step and fit", quick=("--seeds", "1")),
    Bench("bench_amp.py", "GAMP: time per iteration", quick=("--iters", "5")),
    Bench("bench_untied_inspect.py", "inspect: the untied law's fit", quick=None, env=ONE_THREAD),
    Bench(
        "bench_recovery_threshold.py",
        "Untied perfect-recovery threshold: seconds per call",
        quick=("--repeat", "1", "--kappa0", "0.5"),
        env=ONE_THREAD,
    ),
    Bench("bench_gallery.py", "Documentation gallery examples", quick=("--only", "thresholds")),
    Bench(
        "bench_explore.py",
        "The explorer in a headless browser",
        quick=("--repeat", "2", "--points", "10"),
        env=ONE_THREAD,
        needs="chromium",
    ),
)


@dataclass
class Outcome:
    bench: Bench
    command: str
    status: str  # "ok", "failed (exit N)", "timed out", "skipped: ..."
    wall_s: float
    ref_before: float
    ref_after: float
    output: str


def reference() -> float:
    from singlehead.runs import reference_seconds

    return reference_seconds()


def blas_facts() -> list[tuple[str, str]]:
    """numpy's BLAS as built and the kernel set OpenBLAS chose on this CPU (when it is OpenBLAS)."""
    import numpy as np

    facts = [("numpy", np.__version__)]
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        facts.append(("numpy BLAS", f"{blas.get('name', '?')} {blas.get('version', '')}".strip()))
    except Exception as exc:  # the layout of show_config is numpy's, not ours
        facts.append(("numpy BLAS", f"unknown ({type(exc).__name__})"))
    maps = Path("/proc/self/maps")  # Linux: the shared libraries this process has loaded
    lines = maps.read_text().splitlines() if maps.exists() else []
    libs = sorted({line.split()[-1] for line in lines if "openblas" in line.lower() and "/" in line})
    for lib in libs:
        so = ctypes.CDLL(lib)
        for sym in (
            "scipy_openblas_get_corename64_",
            "scipy_openblas_get_corename",
            "openblas_get_corename64_",
            "openblas_get_corename",
        ):
            fn = getattr(so, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                facts.append(("OpenBLAS kernels", fn().decode()))
                break
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        facts.append(("OPENBLAS_CORETYPE", core))
    return facts


def machine_facts() -> list[tuple[str, str]]:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    facts = [
        ("CPU", model),
        ("cores", f"{os.cpu_count()} ({usable} usable by this process)"),
        ("system", f"{platform.system()} {platform.release()}"),
        ("Python", platform.python_version()),
    ]
    facts += blas_facts()
    try:
        import torch

        facts.append(("torch", f"{torch.__version__} ({torch.get_num_threads()} threads by default)"))
    except ImportError:
        facts.append(("torch", "not installed"))
    import singlehead

    facts.append(("singlehead", getattr(singlehead, "__version__", "?")))
    return facts


def run_one(bench: Bench, quick: bool, timeout_s: float) -> Outcome:
    args = bench.args(quick)
    assert args is not None
    env_txt = " ".join(f"{k}={v}" for k, v in bench.env.items())
    command = " ".join(x for x in (env_txt, "python", f"benchmarks/{bench.script}", *args) if x)
    if bench.needs and shutil.which(bench.needs) is None:
        return Outcome(bench, command, f"skipped: {bench.needs} not found", 0.0, float("nan"), float("nan"), "")
    ref_before = reference()
    t = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(HERE / bench.script), *args],
            cwd=ROOT,
            env={**os.environ, **bench.env},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        output = proc.stdout + (f"\n[stderr]\n{proc.stderr[-3000:]}" if proc.returncode and proc.stderr else "")
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output, status = out, f"timed out after {timeout_s:.0f} s"
    wall = time.perf_counter() - t
    return Outcome(bench, command, status, wall, ref_before, reference(), output)


def _docline(script: str) -> str:
    """The first sentence of a benchmark's module docstring (what it measures)."""
    import ast

    doc = ast.get_docstring(ast.parse((HERE / script).read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return re.sub(r"\s*\((a script|a plain script)[^)]*\)", "", first)  # file-kind asides


def _rst_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in (header, *rows):
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {cell}" for cell in row[1:]]
    return lines + [""]


def _literal(text: str) -> list[str]:
    body = text.rstrip() or "(no output)"
    return ["::", "", *textwrap.indent(body.expandtabs(), "   ").splitlines(), ""]


def render(
    outcomes: list[Outcome],
    facts: list[tuple[str, str]],
    command: str,
    quick: bool,
    started: str,
    load: tuple[str, str],
) -> str:
    title = "Performance"
    out = [
        ".. This page is written by benchmarks/run_all.py: rerun it rather than editing the page.",
        "",
        title,
        "=" * len(title),
        "",
        "Every figure on this page was measured by one command, on the machine described below, in one run:",
        "",
        ".. code-block:: bash",
        "",
        f"   {command}",
        "",
        "Each benchmark ran in a fresh process; its printed table is reproduced verbatim. Beside each one stands",
        "the **reference workload**, five float64 ``1000 x 1000`` matrix products in numpy",
        "(``singlehead.runs.reference_seconds``, numpy's default threads), timed by ``run_all.py``",
        "right before and right after the benchmark; most benchmarks also time it themselves, under their own",
        "thread settings. Timings from another machine, or from this one under other load, compare as",
        "multiples of the reference, not in seconds. "
        + (
            "This is the quick set (smaller sizes, fewer repeats; ``--list --quick`` shows the arguments); "
            "run ``python benchmarks/run_all.py`` for every benchmark at its own default sizes."
            if quick
            else "Every benchmark ran at its own default sizes."
        ),
        "",
        "Machine",
        "-------",
        "",
    ]
    out += _rst_table(
        ("machine", "value"), [*facts, ("started (UTC)", started), ("load average, start / end", " / ".join(load))]
    )
    out += ["Summary", "-------", ""]
    rows = []
    for o in outcomes:
        ref = "--" if o.status.startswith("skipped") else f"{o.ref_before:.3f} / {o.ref_after:.3f}"
        wall = "--" if o.status.startswith("skipped") else f"{o.wall_s:.1f}"
        rows.append((f":ref:`{o.bench.name} <perf-{o.bench.name}>`", o.status, wall, ref))
    out += _rst_table(("benchmark", "status", "wall (s)", "reference before / after (s)"), rows)
    for o in outcomes:
        out += [
            f".. _perf-{o.bench.name}:",
            "",
            o.bench.title,
            "-" * len(o.bench.title),
            "",
            _docline(o.bench.script),
            "",
            "Command (from the repository root):",
            "",
            ".. code-block:: bash",
            "",
            f"   {o.command}",
            "",
        ]
        if o.status.startswith("skipped"):
            out += [f"Not run: {o.status.removeprefix('skipped: ')}.", ""]
            continue
        out += [
            f"Status: {o.status}; wall {o.wall_s:.1f} s; reference workload {o.ref_before:.3f} s before and "
            f"{o.ref_after:.3f} s after.",
            "",
        ]
        out += _literal(o.output)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the quick set: smaller sizes, fewer repeats")
    ap.add_argument("--list", action="store_true", help="print what would run and exit")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only benchmarks whose name contains NAME (repeatable)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.rst", help="the page to write")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds one benchmark may run")
    args = ap.parse_args(argv)
    chosen = [
        b
        for b in BENCHMARKS
        if b.args(args.quick) is not None and (not args.only or any(o in b.name for o in args.only))
    ]
    if not chosen:
        ap.error(f"--only {args.only} matches none of: {', '.join(b.name for b in BENCHMARKS)}")
    if args.list:
        for b in chosen:
            env = " ".join(f"{k}={v}" for k, v in b.env.items())
            print(f"{b.name:<20} {env + ' ' if env else ''}python benchmarks/{b.script} {' '.join(b.args(args.quick))}")
        return 0
    shown = ["python", "benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])]
    if os.getpriority(os.PRIO_PROCESS, 0) > 0:
        shown = ["nice", "-n", str(os.getpriority(os.PRIO_PROCESS, 0)), *shown]
    started = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M")
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    outcomes = []
    for b in chosen:
        print(f"running {b.name} ...", end=" ", flush=True)
        o = run_one(b, args.quick, args.timeout)
        print(f"{o.status}, {o.wall_s:.1f} s", flush=True)
        outcomes.append(o)
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    args.out.write_text(render(outcomes, machine_facts(), " ".join(shown), args.quick, started, (load0, load1)))
    print(f"wrote {args.out}")
    return 0 if all(o.status == "ok" or o.status.startswith("skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
