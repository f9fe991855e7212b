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
import sys

import numpy as np

from singlehead import MPTarget, Problem
from singlehead.experiments import Cache, Job, run_jobs
from singlehead.experiments.compare import agreement, records_to_frame

METRICS = ("test_error", "matrix_error")
STUDENTS = {
    "kappa=1": dict(student="factorized", kappa=1.0),
    "kappa=0.75": dict(student="factorized", kappa=0.75),
    "direct": dict(student="direct", kappa=1.0),
}


def compare(problems: list[Problem], seeds: int, rel_tol: float, optimizer: str, cache: Cache, n_jobs: int) -> list[dict]:
    """Theory and mean/standard error over ``seeds`` simulations, per problem (cached, parallel).

    The pass rule is the fixed-level tolerance ``within`` of :func:`singlehead.experiments.compare.agreement`
    (2 s.e. + ``rel_tol``); the report judges the same rows' p-values by Holm per figure instead.
    """
    settings = (("n_test", 10000), ("optimizer", optimizer))
    sim_jobs = [Job("simulation", p, s, settings) for p in problems for s in range(seeds)]
    sims = run_jobs(sim_jobs, cache, n_jobs=n_jobs, desc="simulations")
    ths = run_jobs([Job("theory", p) for p in problems], cache, n_jobs=n_jobs, desc="theory")
    by = ["cfg_alpha"]
    agr = agreement(records_to_frame(sims), records_to_frame(ths), by, list(METRICS), rel=rel_tol)
    rows = []
    for i, (p, th) in enumerate(zip(problems, ths)):
        runs = sims[i * seeds:(i + 1) * seeds]
        row = {"theory": th, "ok": True, "runtime": sum(r["runtime_s"] for r in runs)}
        for k in METRICS:
            a = agr[(agr.cfg_alpha == p.alpha) & (agr.quantity == k)].iloc[0]
            row[k] = (a.theory, a.simulation, a.se, bool(a.within))
            row["ok"] &= bool(a.within)
        row["train"] = (th["train_error"], float(np.mean([r["train_error"] for r in runs])))
        row["rank"] = (th["rank_fraction"], float(np.mean([r["rank_fraction"] for r in runs])))
        rows.append(row)
    return rows


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
    ap.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    ap.add_argument("--cache", default="runs/validation/se_vs_simulation", help="result cache (resumable)")
    args = ap.parse_args(argv)
    cache = Cache(args.cache)
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
        problems = [Problem(d=args.d, T=args.T, alpha=a, channel=args.channel, noise=args.noise, lam=args.lam,
                            target=MPTarget(args.kappa0), **STUDENTS[name]) for a in alphas]
        for a, row in zip(alphas, compare(problems, args.seeds, args.rel_tol, args.optimizer, cache, args.jobs)):
            te, me = row["test_error"], row["matrix_error"]
            all_ok &= row["ok"]
            print(f"{name:>10} {a:6.3g} | {te[0]:8.4f} {te[1]:8.4f} {te[2]:7.4f} | {me[0]:8.4f} {me[1]:8.4f} "
                  f"{me[2]:7.4f} | {row['train'][0]:8.4f} {row['train'][1]:9.4f} | {row['rank'][0]:7.3f} "
                  f"{row['rank'][1]:8.3f} | {'yes' if row['ok'] else 'NO'}  ({row['runtime']:.0f} s of fits)",
                  flush=True)
    print("ALL PASS" if all_ok else "SOME ROWS FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
