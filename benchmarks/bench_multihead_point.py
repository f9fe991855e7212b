"""Benchmark: wall time of one point of the multi-head softmax state evolution, beside the reference workload.

Run: ``python benchmarks/bench_multihead_point.py [--repeats 2] [--profile] [--anderson] [--serial]``.

Points: seq2lab, ``T = 2``, ``H = H0 = 2``, MP teachers ``kappa0 = 0.5``, ``lam = 0.01``, noise 0.5, default
:class:`~singlehead.SEOptions` (``D = 100`` x 4 draws, ``4 x 1024`` nodes):
``alpha = 1`` unspecialised and ``alpha = 2`` specialised from the default start, and ``alpha = 1.25``
unspecialised started from the ``alpha = 1`` fixed point (a curve's next point). Printed: the reference workload
(:func:`singlehead.runs.reference_seconds`, 5 float64 1000^3 GEMMs) before and after, the threads a point runs on
(``SEOptions.threads``: the thread policy's allotment,
:func:`singlehead.runs.threads.configure` with one worker, i.e. every core), and per point the median wall time, the
full design's map evaluations (then the coarse design's, ``+Nc``, and the draw
jackknife's, ``+Nj``), the test error,
objective, overlaps and the specialisation index. ``--anderson``: each point also with ``coarse=False`` (the
Anderson iteration on the full design from the start, the solver before the coarse-to-fine one), its numbers
beside. ``--profile``: a cProfile of one solve of the first point, its 25 most expensive functions (cumulative
time). ``--serial``: each point also on one thread (``threads=1``; the numbers are the same, only the time differs).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from singlehead import MPTarget, Problem, SEOptions
from singlehead.numerics.thread_map import blas_threads
from singlehead.runs import reference_seconds
from singlehead.runs.threads import configure
from singlehead.state_evolution.multihead_se import multihead_theory

BASE = Problem(T=2, channel="seq2lab", target=MPTarget(kappa0=0.5), lam=0.01, noise=0.5, heads=2, teacher_heads=2)
POINTS = {
    "alpha=1 unspecialised": (BASE.replace(alpha=1.0), SEOptions(ansatz="unspecialised")),
    "alpha=2 specialised  ": (BASE.replace(alpha=2.0), SEOptions(ansatz="specialised")),
}


def _timed(p: Problem, o: SEOptions, repeats: int, start: tuple | None = None) -> tuple:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = multihead_theory(p, o, start=start)
        times.append(time.perf_counter() - t)
    return statistics.median(times), r


def _line(name: str, t: float, r) -> str:
    e = r.extras
    return (
        f"{name}: {t:7.2f} s  (evaluations {r.iterations}+{e.get('coarse_evaluations', 0)}c"
        f"+{e.get('draw_error_evaluations', 0)}j, converged "
        f"{r.converged}, test error {r.test_error:.5f}, objective {e['objective']:.5f}, specialisation "
        f"{e['specialisation']:.3f}, q {e['q']:.5f}, m {e['m']:.5f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--anderson", action="store_true", help="also run each point with coarse=False")
    ap.add_argument("--serial", action="store_true", help="also run each point on one thread")
    args = ap.parse_args()
    configure()
    print(f"reference workload: {reference_seconds():.3f} s; threads per point: {blas_threads()}", flush=True)
    if args.profile:
        p, o = next(iter(POINTS.values()))
        prof = cProfile.Profile()
        prof.enable()
        multihead_theory(p, o)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    r1 = None
    for name, (p, o) in POINTS.items():
        t, r = _timed(p, o, args.repeats)
        r1 = r if r1 is None else r1
        print(_line(name, t, r), flush=True)
        if args.anderson:
            t, r = _timed(p, o.replace(coarse=False), args.repeats)
            print(_line("  coarse=False        ", t, r), flush=True)
        if args.serial:
            t, r = _timed(p, o.replace(threads=1), args.repeats)
            print(_line("  one thread          ", t, r), flush=True)
    start = tuple(r1.extras[k] for k in ("head_Q", "head_M", "head_Sigma"))
    p, o = BASE.replace(alpha=1.25), SEOptions(ansatz="unspecialised")
    t, r = _timed(p, o, args.repeats, start)
    print(_line("alpha=1.25 from alpha=1", t, r), flush=True)
    if args.anderson:
        t, r = _timed(p, o.replace(coarse=False), args.repeats, start)
        print(_line("  coarse=False          ", t, r), flush=True)
    if args.serial:
        t, r = _timed(p, o.replace(threads=1), args.repeats)
        print(_line("  one thread            ", t, r), flush=True)
    print(f"reference workload: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
