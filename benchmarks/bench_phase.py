"""Benchmark: phase diagrams, the command line's 16 x 12 grid and a 40 x 40 tied seq2lab T = 2 grid.

Run: ``python benchmarks/bench_phase.py [--workers 1,2] [--skip-large] [--profile FILE]``.

* ``cli``: wall time of ``singlehead phase --x alpha=log:0.05:3:16 --y lam=log:1e-4:3:12 --T 2
  --kappa0 0.5 --noise 0.5 --json`` (192 points, the replica-symmetry check included) in a fresh
  process, per worker count;
* ``large``: :func:`singlehead.phase_diagram` on ``alpha = log:0.05:3:40`` x ``lam = log:1e-4:3:40``
  (1600 points), same problem, per worker count;

each as wall and CPU seconds (CPU: the process and the worker processes it reaped, so the in-process
``large`` run with several workers counts its main process only, the loky workers living on; on a shared
machine the wall time follows the share of the cores the run got), next to a reference workload timed in the same run
just before it (a 1500 x 1500 float64
matmul plus a linear solve of that size, best of 3), so that timings taken on a shared machine can
be compared. ``--profile FILE`` runs the 16 x 12 grid in this process under cProfile, one worker,
and writes the statistics to FILE (the top 25 by cumulative time are printed).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from singlehead import MPTarget, Problem, phase_diagram

CLI_GRID = [
    "--x",
    "alpha=log:0.05:3:16",
    "--y",
    "lam=log:1e-4:3:12",
    "--T",
    "2",
    "--kappa0",
    "0.5",
    "--noise",
    "0.5",
    "--json",
]
PROBLEM = Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5))


def reference_seconds() -> float:
    """Best of 3 wall times of ``A @ A`` plus ``solve(A, b)``, ``A`` 1500 x 1500 float64."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1500, 1500)), rng.standard_normal(1500)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        a @ a
        np.linalg.solve(a, b)
        best = min(best, time.perf_counter() - t)
    return best


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def time_cli(workers: int) -> tuple[float, float, int]:
    """``(wall s, CPU s of the command and the workers it reaped, JSON rows)``."""
    exe = shutil.which("singlehead")
    cmd = [exe] if exe else [sys.executable, "-m", "singlehead"]
    c0, t = _children_cpu(), time.perf_counter()
    out = subprocess.run(
        [*cmd, "phase", *CLI_GRID, "--workers", str(workers)], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - t, _children_cpu() - c0, len(out.stdout.strip().splitlines())


def time_large(workers: int, n: int = 40) -> tuple[float, float, int, int]:
    """``(wall s, CPU s of this process and its reaped workers, points, unconverged points)``."""
    with tempfile.TemporaryDirectory() as tmp:
        c0, t = time.process_time() + _children_cpu(), time.perf_counter()
        d = phase_diagram(
            PROBLEM,
            x=("alpha", np.geomspace(0.05, 3.0, n)),
            y=("lam", np.geomspace(1e-4, 3.0, n)),
            workers=workers,
            out=f"{tmp}/grid.jsonl",
        )
        dt, cpu = time.perf_counter() - t, time.process_time() + _children_cpu() - c0
    frame = d.to_frame()
    return dt, cpu, len(frame), int((~frame["converged"]).sum())


def profile(path: str) -> None:
    prof = cProfile.Profile()
    prof.enable()
    phase_diagram(PROBLEM, x=("alpha", np.geomspace(0.05, 3.0, 16)), y=("lam", np.geomspace(1e-4, 3.0, 12)))
    prof.disable()
    prof.dump_stats(path)
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
    print(s.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="comma list of worker counts (default 1,2)")
    ap.add_argument("--skip-large", action="store_true", help="only the command line's 16 x 12 grid")
    ap.add_argument("--profile", default=None, metavar="FILE", help="cProfile the 16 x 12 grid instead")
    args = ap.parse_args()
    if args.profile:
        print(f"reference (1500^2 matmul + solve, best of 3): {reference_seconds():.3f} s")
        profile(args.profile)
        print(f"reference (1500^2 matmul + solve, best of 3): {reference_seconds():.3f} s")
        return
    workers = [int(w) for w in args.workers.split(",")]
    print("phase diagrams, seq2lab, T = 2, kappa0 = 0.5, noise = 0.5, factorized student, stability on")
    for w in workers:
        ref = reference_seconds()
        dt, cpu, rows = time_cli(w)
        print(
            f"cli 16 x 12 ({rows} rows), workers={w}: {dt:.1f} s wall, {cpu:.1f} s CPU   [reference {ref:.3f} s]",
            flush=True,
        )
    if not args.skip_large:
        for w in workers:
            ref = reference_seconds()
            dt, cpu, n, bad = time_large(w)
            what = "CPU" if w == 1 else "CPU of the main process"
            print(
                f"large 40 x 40 ({n} points, {bad} unconverged), workers={w}: {dt:.1f} s wall, {cpu:.1f} s {what}   "
                f"[reference {ref:.3f} s]",
                flush=True,
            )


if __name__ == "__main__":
    main()
