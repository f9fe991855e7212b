"""State-evolution speed for interactive use, beside the reference workload.

Prints, with the reference workload (5 x numpy 1000^3 float64 matmul, :func:`reference_seconds`)
timed in the same run before and after:

* the median wall time of one cold T = 2 point (``theory``) on the report's alpha grid
  (seq2lab, MP kappa0 = 0.5, Delta = 0.5, lam = 0.01, 24 alphas in [0.05, 4]) and on the softmax
  T = 2 problems of a random grid of valid problems (``random_problems(n, seed)``; pass a seed the
  tests do not use, e.g. 7101, so that the figure is not tuned to the test grid);
* the wall time per point of warm-started alpha sweeps (``theory_curve``) on the report's grids
  (lam = 0.01, and the interpolation-peak figure's sweeps at lam = 1e-3 and 1e-5), and on the T = 2 softmax problems of
  the random grid (12 alphas log-spaced over a factor 16 around each problem's alpha; the median
  over problems of the time per point, first cold point included).

Each figure is the median over ``--repeats`` runs of the same workload; every time is also given
as a multiple of the reference, which is what to compare across machines and loads, and beside it
the process CPU time (one thread: on a shared machine it is far less load-dependent than the wall
time).
Targets: single point <= 0.1 s, warm sweep <= 0.05 s per point (idle 2-core machine,
where the reference takes 0.13-0.15 s).

    OMP_NUM_THREADS=1 python benchmarks/bench_se_speed.py [--n 64] [--seed 7101] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from singlehead import MPTarget, Problem, theory, theory_curve
from singlehead.runs import random_problems, reference_seconds

REPORT_BASE = Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5))
REPORT_ALPHAS = np.geomspace(0.05, 4.0, 24)


def point_times(problems: list[Problem], repeats: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-problem median wall and CPU times of a cold ``theory`` call over ``repeats`` runs; unconverged count."""
    times = np.empty((2, repeats, len(problems)))
    unconverged = 0
    for r in range(repeats):
        for i, p in enumerate(problems):
            t, c = time.perf_counter(), time.process_time()
            res = theory(p)
            times[:, r, i] = time.perf_counter() - t, time.process_time() - c
            unconverged += int(r == 0 and not res.converged)
    wall, cpu = np.median(times, axis=1)
    return wall, cpu, unconverged


def sweep_time(base: Problem, alphas: np.ndarray, repeats: int) -> tuple[float, float, int]:
    """Medians over ``repeats`` of the warm sweep's wall and CPU time per point; unconverged count."""
    wall, cpu, unconverged = [], [], 0
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        rs = theory_curve(base, alphas)
        wall.append((time.perf_counter() - t) / len(alphas))
        cpu.append((time.process_time() - c) / len(alphas))
        unconverged = sum(not r.converged for r in rs)
    return float(np.median(wall)), float(np.median(cpu)), unconverged


def row(name: str, seconds: float, cpu: float, ref: float, target: str, detail: str = "") -> None:
    print(
        f"{name:<48} {seconds:8.3f} s  = {seconds / ref:5.2f} x ref  (CPU {cpu:.3f} s)   target {target:<8} {detail}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64, help="random problems drawn (the T = 2 softmax ones are timed)")
    ap.add_argument("--seed", type=int, default=7101, help="random-grid seed (use one the tests do not use)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 report alphas, no peak sweep")
    args = ap.parse_args()
    theory(REPORT_BASE.replace(alpha=0.3))  # imports, quadrature-node cache, law construction
    ref0 = reference_seconds()
    print(f"reference (5 x 1000^3 float64 matmul): {ref0:.3f} s")
    alphas = REPORT_ALPHAS[::3] if args.quick else REPORT_ALPHAS
    t, c, bad = point_times([REPORT_BASE.replace(alpha=float(a)) for a in alphas], args.repeats)
    row(
        f"T=2 point, report grid ({len(alphas)} alphas): median",
        float(np.median(t)),
        float(np.median(c)),
        ref0,
        "<= 0.1 s",
        f"max {t.max():.3f} s, unconverged {bad}",
    )
    grid = [p for p in random_problems(args.n, seed=args.seed) if p.T == 2 and p.channel.name != "linear"]
    t, c, bad = point_times(grid, args.repeats)
    row(
        f"T=2 point, random grid seed {args.seed} ({len(grid)} softmax): median",
        float(np.median(t)),
        float(np.median(c)),
        ref0,
        "<= 0.1 s",
        f"p90 {np.quantile(t, 0.9):.3f} s, max {t.max():.3f} s, unconverged {bad}",
    )
    s, c, bad = sweep_time(REPORT_BASE, alphas, args.repeats)
    row(f"warm sweep lam=0.01 ({len(alphas)} points): per point", s, c, ref0, "<= 0.05 s", f"unconverged {bad}")
    if not args.quick:
        for lam in (
            1e-3,
            1e-5,
        ):  # the interpolation-peak figure's grid (singlehead.figures.peak: 24 alphas in [0.05, 2])
            s, c, bad = sweep_time(REPORT_BASE.replace(lam=lam), np.geomspace(0.05, 2.0, 24), args.repeats)
            row(f"warm peak sweep lam={lam:g} (24 points): per point", s, c, ref0, "<= 0.05 s", f"unconverged {bad}")
        per = [sweep_time(p, np.geomspace(p.alpha / 4, p.alpha * 4, 12), 1) for p in grid]
        w, c = np.array([x[0] for x in per]), np.array([x[1] for x in per])
        row(
            f"warm sweeps, random grid seed {args.seed} ({len(grid)} x 12): per point",
            float(np.median(w)),
            float(np.median(c)),
            ref0,
            "<= 0.05 s",
            f"p90 {np.quantile(w, 0.9):.3f} s, max {w.max():.3f} s, unconverged {sum(x[2] for x in per)}",
        )
    print(f"reference again at the end: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
