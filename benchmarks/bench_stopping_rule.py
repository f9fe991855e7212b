"""Benchmark: how loose can the L-BFGS stopping rule be before the statistical error notices?

Run: ``python benchmarks/bench_stopping_rule.py [--d 100] [--seeds 3] [--rtol 1e-6]``.

For each operating point, every seed is fitted twice on the same data: with the default rule
(:class:`singlehead.TrainOptions` defaults: relative objective change ``1e-7`` in
float32, then a float64 polish to ``3e-8``) and with the loose rule (``tol = polish_rtol = rtol``).
Printed per point: the mean iterations and seconds of both, the largest paired change of the test
error ``max |E_loose - E_default|`` and the seed standard deviation ``sd`` of the default fits, and
their ratio. A loose rule is harmless at a point when the ratio is small against the seed spread
that the report's verdicts are computed from (the figures adopt it only where it stays <= 0.05).
The reference workload (:func:`singlehead.runs.reference_seconds`) is printed beside.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from singlehead import MPTarget, Problem, TrainOptions, simulate  # noqa: E402
from singlehead.runs import reference_seconds  # noqa: E402

# (label, problem parameters): the report's seq2lab operating points (T = 2; noise 0.5 and kappa0 0.5 unless given)
POINTS = [
    ("lam 1e-2, alpha 0.1", dict(alpha=0.1, lam=0.01)),
    ("lam 1e-2, alpha 0.25", dict(alpha=0.25, lam=0.01)),
    ("lam 1e-2, alpha 0.5", dict(alpha=0.5, lam=0.01)),
    ("lam 1e-2, alpha 1", dict(alpha=1.0, lam=0.01)),
    ("lam 1e-2, alpha 2", dict(alpha=2.0, lam=0.01)),
    ("lam 1e-3, alpha 0.2", dict(alpha=0.2, lam=1e-3)),
    ("lam 1e-5, alpha 0.2 (peak)", dict(alpha=0.2, lam=1e-5)),
    ("fvd factorized lam 1e-3 a 0.05", dict(alpha=0.05, lam=1e-3, noise=0.05, kappa0=0.05)),
    ("fvd direct lam 1e-3 a 0.05", dict(alpha=0.05, lam=1e-3, noise=0.05, kappa0=0.05, student="direct")),
    ("fvd factorized lam 3e-3 a 0.1", dict(alpha=0.1, lam=10**-2.5, noise=0.05, kappa0=0.05)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--only", default=None, help="a substring of the point labels")
    a = ap.parse_args()
    print(f"reference workload: {reference_seconds():.3f} s; d = {a.d}, {a.seeds} seeds, loose rtol {a.rtol:g}")
    print(
        f"{'point':30s} {'steps def':>9s} {'steps loose':>11s} {'s def':>6s} {'s loose':>7s} "
        f"{'max|dE|':>9s} {'sd':>9s} {'ratio':>6s}"
    )
    loose = TrainOptions(tol=a.rtol, polish_rtol=a.rtol)
    for label, kw in POINTS:
        if a.only and a.only not in label:
            continue
        kw = {"noise": 0.5, "kappa0": 0.5, **kw}
        p = Problem(d=a.d, T=2, target=MPTarget(kw.pop("kappa0")), channel="seq2lab", **kw)
        rows = []
        for s in range(a.seeds):
            out = []
            for opts in (TrainOptions(), loose):
                t = time.perf_counter()
                r = simulate(p, seed=s, options=opts)
                out.append((r.test_error, r.iterations, time.perf_counter() - t))
            rows.append(out)
        e_def = np.array([r[0][0] for r in rows])
        de = np.abs(np.array([r[1][0] for r in rows]) - e_def).max()
        sd = e_def.std(ddof=1)
        print(
            f"{label:30s} {np.mean([r[0][1] for r in rows]):9.0f} {np.mean([r[1][1] for r in rows]):11.0f} "
            f"{np.mean([r[0][2] for r in rows]):6.2f} {np.mean([r[1][2] for r in rows]):7.2f} "
            f"{de:9.2e} {sd:9.2e} {de / sd:6.3f}",
            flush=True,
        )
    print(f"reference workload (end): {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
