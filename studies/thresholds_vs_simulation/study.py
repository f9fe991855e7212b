"""Train and test error around alpha_interp and alpha_perfect: theory (lam -> 0+) vs simulation.

THEORY §4: with label noise the training error is exactly zero for alpha < alpha_interp and
positive above (the test error peaks there); noiseless, the test error reaches zero at
alpha_perfect. Simulations at d = 60, lam = 1e-4 (L-BFGS, cached under runs/validation/).

Usage: ``python validation/thresholds_vs_simulation.py [--d 60] [--seeds 3] [--jobs 2]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from singlehead import MPTarget, Problem
from singlehead.experiments import Cache, Job, run_jobs
from singlehead.thresholds import interpolation_threshold, perfect_recovery_threshold


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lam", type=float, default=1e-4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default="runs/validation/thresholds")
    args = ap.parse_args(argv)
    cache = Cache(args.cache)
    base = dict(d=args.d, T=2, lam=args.lam, target=MPTarget(0.5), channel="seq2lab", kappa=1.0)
    a_int = interpolation_threshold(Problem(noise=0.5, **base))
    a_perf = perfect_recovery_threshold(Problem(noise=0.0, **base))
    print(f"T=2, kappa0=0.5, lam={args.lam}, d={args.d}, {args.seeds} seeds: "
          f"alpha_interp(Delta=0.5) = {a_int:.4f}, alpha_perfect(Delta=0) = {a_perf:.4f}")
    ok = True
    for noise, ref, name in ((0.5, a_int, "alpha_interp"), (0.0, a_perf, "alpha_perfect")):
        ratios = (0.5, 0.8, 1.25, 2.0)
        problems = [Problem(alpha=float(round(r * ref, 5)), noise=noise, **base) for r in ratios]
        settings = (("n_test", 5000), ("optimizer", "lbfgs"))
        sims = run_jobs([Job("simulation", p, s, settings) for p in problems for s in range(args.seeds)], cache,
                        n_jobs=args.jobs, desc=f"simulations around {name}")
        ths = run_jobs([Job("theory", p) for p in problems], cache, n_jobs=args.jobs, desc="theory")
        print(f"\nDelta={noise}: around {name} = {ref:.4f}")
        print(f"{'alpha/' + name:>18} {'alpha':>7} | {'train th':>9} {'train sim':>10} | {'test th':>8} {'test sim':>9}")
        for i, (r, p, th) in enumerate(zip(ratios, problems, ths)):
            runs = sims[i * args.seeds:(i + 1) * args.seeds]
            tr = np.mean([x["train_error"] for x in runs])
            te = np.mean([x["test_error"] for x in runs])
            print(f"{r:>18} {p.alpha:7.4f} | {th['train_error']:9.2e} {tr:10.2e} | {th['test_error']:8.4f} {te:9.4f}")
        if noise > 0:
            below = [np.mean([x["train_error"] for x in sims[i * args.seeds:(i + 1) * args.seeds]]) for i in range(2)]
            above = [np.mean([x["train_error"] for x in sims[i * args.seeds:(i + 1) * args.seeds]]) for i in (2, 3)]
            ok &= max(below) < 0.1 * min(above)
        else:
            te = [np.mean([x["test_error"] for x in sims[i * args.seeds:(i + 1) * args.seeds]]) for i in range(4)]
            ok &= te[3] < 0.1 * te[0]
    print("\nbehaviour as THEORY §4:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
