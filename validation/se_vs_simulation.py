"""State evolution vs ERM simulations (prints a table).

Default setting (issue 4): T = 2, MP target kappa0 = 0.5, Delta = 0.5, lam = 0.01,
beta = beta0 = 1, seq2lab, alpha in {0.1, 0.25, 0.5, 1, 2}, d = 100, 8 seeds, for three
students: factorized kappa = 1, factorized kappa = 0.75 and direct. A row passes when
``|simulation mean - theory| <= 2 standard errors + rel_tol * |theory|`` (rel_tol = 3%) for the
test error and for the matrix error.

Usage::

    python validation/se_vs_simulation.py                 # the full check (slow)
    python validation/se_vs_simulation.py --d 40 --seeds 3 --alphas 0.25,1
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from singlehead import MPTarget, Problem
from singlehead.simulation import simulate
from singlehead.state_evolution import theory

METRICS = ("test_error", "matrix_error")
STUDENTS = {
    "kappa=1": dict(student="factorized", kappa=1.0),
    "kappa=0.75": dict(student="factorized", kappa=0.75),
    "direct": dict(student="direct", kappa=1.0),
}


def compare(problem: Problem, seeds: int, rel_tol: float, optimizer: str = "lbfgs") -> dict:
    """Theory and the mean/standard error over ``seeds`` simulations of one problem."""
    th = theory(problem)
    sims = [simulate(problem, seed=s, optimizer=optimizer, n_test=10000) for s in range(seeds)]
    row = {"theory": th, "ok": True}
    for k in METRICS:
        v = np.array([getattr(r, k) for r in sims])
        mean = float(v.mean())
        se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
        t = float(getattr(th, k))
        ok = abs(mean - t) <= 2 * se + rel_tol * abs(t)
        row[k] = (t, mean, se, ok)
        row["ok"] &= ok
    row["train"] = (th.train_error, float(np.mean([r.train_error for r in sims])))
    row["rank"] = (th.rank_fraction, float(np.mean([r.rank_fraction for r in sims])))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--alphas", default="0.1,0.25,0.5,1,2")
    ap.add_argument("--students", default=",".join(STUDENTS), help=f"subset of {list(STUDENTS)}")
    ap.add_argument("--T", type=int, default=2)
    ap.add_argument("--kappa0", type=float, default=0.5)
    ap.add_argument("--noise", type=float, default=0.5)
    ap.add_argument("--lam", type=float, default=0.01)
    ap.add_argument("--channel", default="seq2lab")
    ap.add_argument("--rel-tol", type=float, default=0.03)
    ap.add_argument("--optimizer", default="lbfgs")
    args = ap.parse_args(argv)
    alphas = [float(a) for a in args.alphas.split(",")]
    print(f"SE vs simulation: T={args.T} channel={args.channel} kappa0={args.kappa0} Delta={args.noise} "
          f"lam={args.lam} d={args.d} seeds={args.seeds} (pass: |sim - th| <= 2 se + {args.rel_tol:.0%})")
    hdr = (f"{'student':>10} {'alpha':>6} | {'test th':>8} {'test sim':>8} {'± se':>7} | "
           f"{'mat th':>8} {'mat sim':>8} {'± se':>7} | {'train th':>8} {'train sim':>9} | "
           f"{'rank th':>7} {'rank sim':>8} | ok")
    print(hdr)
    print("-" * len(hdr))
    all_ok = True
    for name in args.students.split(","):
        for a in alphas:
            p = Problem(d=args.d, T=args.T, alpha=a, channel=args.channel, noise=args.noise, lam=args.lam,
                        target=MPTarget(args.kappa0), **STUDENTS[name])
            t0 = time.time()
            row = compare(p, args.seeds, args.rel_tol, args.optimizer)
            te, me = row["test_error"], row["matrix_error"]
            all_ok &= row["ok"]
            print(f"{name:>10} {a:6.3g} | {te[0]:8.4f} {te[1]:8.4f} {te[2]:7.4f} | {me[0]:8.4f} {me[1]:8.4f} "
                  f"{me[2]:7.4f} | {row['train'][0]:8.4f} {row['train'][1]:9.4f} | {row['rank'][0]:7.3f} "
                  f"{row['rank'][1]:8.3f} | {'yes' if row['ok'] else 'NO'}  ({time.time() - t0:.0f} s)", flush=True)
    print("ALL PASS" if all_ok else "SOME ROWS FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
