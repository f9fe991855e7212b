"""Benchmark: wall time of one point of the multi-head softmax state evolution, beside the reference workload.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_multihead_point.py [--repeats 2] [--profile]``.

Points: seq2lab, ``T = 2``, ``H = H0 = 2``, MP teachers ``kappa0 = 0.5``, ``lam = 0.01``, noise 0.5, default
:class:`~singlehead.state_evolution.multihead_se.MultiHeadOptions` (``D = 100`` x 4 draws, ``4 x 1024`` nodes):
``alpha = 1`` unspecialised and ``alpha = 2`` specialised from the default start, and ``alpha = 1.25``
unspecialised started from the ``alpha = 1`` fixed point (a curve's next point). Printed: the reference workload
(:func:`singlehead.runs.reference.reference_seconds`, 5 float64 1000^3 GEMMs) before and after, and per point
the median wall time, the map evaluations, the test error and the specialisation index. ``--profile``: a
cProfile of one solve of the first point, its 25 most expensive functions (cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from singlehead import MPTarget, Problem
from singlehead.runs.reference import reference_seconds
from singlehead.state_evolution.multihead_se import MultiHeadOptions, multihead_theory

BASE = Problem(T=2, channel="seq2lab", target=MPTarget(kappa0=0.5), lam=0.01, noise=0.5, heads=2, teacher_heads=2)
POINTS = {
    "alpha=1 unspecialised": (BASE.replace(alpha=1.0), MultiHeadOptions(ansatz="unspecialised")),
    "alpha=2 specialised  ": (BASE.replace(alpha=2.0), MultiHeadOptions(ansatz="specialised")),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    print(f"reference workload: {reference_seconds():.3f} s", flush=True)
    if args.profile:
        p, o = next(iter(POINTS.values()))
        prof = cProfile.Profile()
        prof.enable()
        multihead_theory(p, o)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    for name, (p, o) in POINTS.items():
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            r = multihead_theory(p, o)
            times.append(time.perf_counter() - t)
        print(f"{name}: {statistics.median(times):7.2f} s  (evaluations {r.iterations}, converged {r.converged}, "
              f"test error {r.test_error:.5f}, objective {r.extras['objective']:.5f}, "
              f"specialisation {r.extras['specialisation']:.3f}, q {r.extras['q']:.5f}, m {r.extras['m']:.5f})",
              flush=True)
    r1 = multihead_theory(*POINTS["alpha=1 unspecialised"])
    start = tuple(r1.extras[k] for k in ("head_Q", "head_M", "head_Sigma"))
    p, o = BASE.replace(alpha=1.25), MultiHeadOptions(ansatz="unspecialised", start=start)
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        r = multihead_theory(p, o)
        times.append(time.perf_counter() - t)
    print(f"alpha=1.25 from alpha=1 : {statistics.median(times):7.2f} s  (evaluations {r.iterations}, converged "
          f"{r.converged}, test error {r.test_error:.5f}, q {r.extras['q']:.5f})", flush=True)
    print(f"reference workload: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
