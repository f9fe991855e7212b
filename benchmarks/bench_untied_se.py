"""Benchmark: time per point of the untied state evolution, beside the reference workload.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_untied_se.py [--repeats 2]``.

Points (``T = 2``, noise 0.5, MP teachers ``kappa0 = 0.5``, ``kappa = 1``): seq2lab and linear at
``alpha = 1, lam = 1e-2`` (tied teacher), seq2lab with the untied teacher, seq2lab at ``lam = 1e-4``
(continuation in ``lam``). Settings: the default (``D = 100``, 4 draws, per-draw error bars) and
the light one the explorer could use (``D = 100``, 2 draws, no per-draw error bars). Printed: the
reference workload (:func:`singlehead.runs.reference_seconds`, 5 float64 1000^3 GEMMs) before
and after, and the median wall time per point with its map evaluations.
"""

from __future__ import annotations

import argparse
import statistics
import time

from singlehead import MPTarget, Problem, SEOptions, UntiedMPTarget, theory
from singlehead.runs import reference_seconds

POINTS = {
    "seq2lab alpha=1 lam=1e-2": dict(channel="seq2lab", alpha=1.0, lam=1e-2, target=MPTarget(0.5)),
    "linear  alpha=1 lam=1e-2": dict(channel="linear", alpha=1.0, lam=1e-2, target=MPTarget(0.5)),
    "seq2lab untied teacher  ": dict(channel="seq2lab", alpha=1.0, lam=1e-2, target=UntiedMPTarget(0.5)),
    "seq2lab alpha=1 lam=1e-4": dict(channel="seq2lab", alpha=1.0, lam=1e-4, target=MPTarget(0.5)),
}
SETTINGS = {
    "default (D=100 x 8 + D=50 x 16, extrapolated, errors)": SEOptions(),
    "light (D=100 x 2, not extrapolated, no errors)": SEOptions(
        sample_draws=2, sample_extrapolate=False, draw_errors=False
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    theory(
        Problem(T=2, noise=0.5, student="untied"), options=SEOptions(sample_dim=20, sample_draws=1)
    )  # imports, nodes
    print(f"reference workload: {reference_seconds():.3f} s")
    for sname, opts in SETTINGS.items():
        for pname, kw in POINTS.items():
            p = Problem(d=100, T=2, noise=0.5, kappa=1.0, student="untied", **kw)
            times, its = [], []
            for _ in range(args.repeats):
                t = time.perf_counter()
                u = theory(p, options=opts)
                times.append(time.perf_counter() - t)
                its.append(u.iterations)
            print(
                f"{sname:30s} {pname}: {statistics.median(times):6.2f} s  (iterations {its[-1]}, "
                f"converged {u.converged}, test error {u.test_error:.4f})",
                flush=True,
            )
    print(f"reference workload: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
