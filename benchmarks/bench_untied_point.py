"""Benchmark: one untied state-evolution point with its error bar, cold, and a warm-started curve.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_untied_point.py [--repeats 2] [--curve-points 20]``.

Setting: ``d = 60``, seq2lab, ``T = 2``, noise 0.5, MP teacher ``kappa0 = 0.5``, ``kappa = 1``, default
:class:`~singlehead.SEOptions` (``D = 100 x 8`` and ``D = 50 x 16`` instances,
extrapolated in ``1/D``, draw errors by linear response). Cases: a cold point at ``alpha = 1`` for
``lam = 1e-2, 1e-3, 1e-4`` (median over ``--repeats``), and a curve of ``--curve-points`` points
along ``alpha`` in ``[0.15, 3]`` at ``lam = 1e-2`` (:func:`~singlehead.theory_curve`, warm-started
from point to point, every point with its error bar). Printed: the reference workload
(:func:`singlehead.runs.reference_seconds`, 5 float64 1000^3 GEMMs) before and after, and
per case the wall time and the process's CPU time (on a shared machine the CPU time is the steadier
figure), map evaluations, convergence, test error and its draw error.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from singlehead import MPTarget, Problem, SEOptions, theory, theory_curve
from singlehead.runs import reference_seconds


def _problem(lam: float, alpha: float = 1.0) -> Problem:
    return Problem(
        d=60, T=2, noise=0.5, kappa=1.0, alpha=alpha, lam=lam, channel="seq2lab", target=MPTarget(0.5), student="untied"
    )


def _line(r) -> str:
    ex = r.extras
    return (
        f"evals {ex.get('evaluations')}, converged {r.converged}, test error {r.test_error:.5f} "
        f"+- {ex.get('test_error_draws_se', float('nan')):.5f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--curve-points", type=int, default=20)
    ap.add_argument("--lams", type=float, nargs="*", default=[1e-2, 1e-3, 1e-4])
    args = ap.parse_args()
    theory(Problem(T=2, noise=0.5, student="untied"), options=SEOptions(sample_dim=20, sample_draws=1))  # imports
    print(f"reference workload: {reference_seconds():.3f} s", flush=True)
    options = SEOptions()
    for lam in args.lams:
        times, cpus = [], []
        for _ in range(args.repeats):
            t, c = time.perf_counter(), time.process_time()
            r = theory(_problem(lam), options=options)
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        print(
            f"cold point  lam={lam:g}: {statistics.median(times):6.2f} s (CPU {statistics.median(cpus):6.2f} s)  "
            f"({_line(r)})",
            flush=True,
        )
    if args.curve_points:
        alphas = np.geomspace(0.15, 3.0, args.curve_points)
        t, c = time.perf_counter(), time.process_time()
        curve = theory_curve(_problem(1e-2), alphas, options=options)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        ok = sum(r.converged for r in curve)
        print(
            f"curve {len(curve)} points lam=0.01: {dt:6.2f} s (CPU {dc:6.2f} s)  ({dt / len(curve):.2f} s/point, "
            f"{ok} converged, evals {sum(r.extras.get('evaluations', 0) for r in curve)})",
            flush=True,
        )
    print(f"reference workload: {reference_seconds():.3f} s", flush=True)


if __name__ == "__main__":
    main()
