"""Benchmark: the untied perfect-recovery threshold (minimum-nuclear-norm phase transition of three measurement
families), seconds per call beside the reference workload.

Run: ``python benchmarks/bench_recovery_threshold.py [--repeat 3] [--instances 8] [--size 48]``
(one thread: ``OMP_NUM_THREADS=1``).

Printed: the reference workload (:func:`singlehead.runs.reference_seconds`, 5 float64 1000^3
GEMMs) before and after, then per case (``T = 2, 3, 4`` softmax families at ``kappa0 = 0.5`` and
``0.25``) the value of :func:`singlehead.numerics.nuclear_recovery.blocked_nuclear_threshold` and the
minimum wall time of one uncached call over ``--repeat`` calls, and that time in reference units.
"""

from __future__ import annotations

import argparse
import time

FAMILIES = {2: (1, 0, 1), 3: (3, 1, 2), 4: (6, 3, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=48)
    ap.add_argument("--instances", type=int, default=8)
    ap.add_argument("--kappa0", type=float, nargs="*", default=[0.5, 0.25])
    args = ap.parse_args()
    from singlehead.numerics.nuclear_recovery import blocked_nuclear_threshold
    from singlehead.runs import reference_seconds

    ref = reference_seconds()
    print(f"reference workload (5 x 1000^3 float64 GEMM): {ref:.3f} s")
    print("| kappa0 | T | families (sym, antisym, isotropic) | alpha_perf | s per call | reference units |")
    print("|---|---|---|---|---|---|")
    for k0 in args.kappa0:
        for T, fam in FAMILIES.items():
            best, value = float("inf"), float("nan")
            for _ in range(args.repeat):
                t = time.perf_counter()
                value = blocked_nuclear_threshold(k0, *map(float, fam), size=args.size, instances=args.instances)
                best = min(best, time.perf_counter() - t)
            print(f"| {k0} | {T} | {fam} | {value:.5f} | {best:.3f} | {best / ref:.2f} |", flush=True)
    print(f"reference workload after: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
