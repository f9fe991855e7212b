"""State-evolution speed and robustness on a random grid of valid problems.

Prints, next to a reference workload timed in the same run (5 x numpy 1000x1000 float64
matmul), the per-point wall time (median, 90th percentile, max), the number of SE map
evaluations and the unconverged points of

* a random grid of valid problems: channel x T in {1, 2, 3} x student x rank cap x
  beta != beta0 x lam in [1e-5, 5] x alpha in [3e-3, 20] (log-uniform), MP targets
  (``random_problems``, also used by the convergence-rate test);
* the report's grids: a T = 2 alpha sweep (``theory_curve``) at lam = 0.01 and the
  interpolation-peak sweeps at lam = 1e-5 and 1e-3 across alpha_interp.

Targets: median <= 0.3 s per T = 2 point, no point over 3 s, unconverged <= 1 %. Points over
3 s or unconverged are printed with their replica-symmetry check
(:func:`singlehead.state_evolution.stability`: smooth replicon, prox-jump share of Sigmahat).

    python benchmarks/bench_se_random_grid.py [--n 128] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from singlehead import MPTarget, Problem, stability, theory, theory_curve
from singlehead.runs import random_problems, reference_seconds


def summary(name: str, times: list[float], evals: list[int], conv: list[bool]) -> dict:
    t = np.asarray(times)
    out = {
        "name": name,
        "n": len(t),
        "median_s": float(np.median(t)),
        "p90_s": float(np.quantile(t, 0.9)),
        "max_s": float(t.max()),
        "total_s": float(t.sum()),
        "median_evals": float(np.median(evals)),
        "unconverged": int(len(conv) - sum(conv)),
    }
    print(
        f"{name:<42} n={out['n']:>4}  median {out['median_s']:6.3f} s  p90 {out['p90_s']:6.3f} s  "
        f"max {out['max_s']:6.2f} s  total {out['total_s']:7.1f} s  evals(median) {out['median_evals']:5.1f}  "
        f"unconverged {out['unconverged']}",
        flush=True,
    )
    return out


def _rs_check(problem: Problem, result) -> str:
    """Replicon and prox-jump share of a slow point (``stability`` handles collapsed fixed points itself)."""
    return stability(problem, result).describe()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128, help="random problems")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write per-point records here")
    ap.add_argument("--skip-grid", action="store_true", help="only the report sweeps")
    args = ap.parse_args()
    theory(Problem(T=2, alpha=0.3, noise=0.5, lam=0.01, target=MPTarget(0.5)))  # imports, node cache
    ref = reference_seconds()
    print(f"reference: 5 x 1000^3 float64 matmul = {ref:.3f} s  ({5 * 2e9 / ref / 1e9:.1f} GFLOP/s)")
    rows, records = [], []
    if not args.skip_grid:
        times, evals, conv, times2 = [], [], [], []
        for i, p in enumerate(random_problems(args.n, seed=args.seed)):
            t = time.perf_counter()
            r = theory(p)
            dt = time.perf_counter() - t
            times.append(dt)
            evals.append(r.iterations)
            conv.append(bool(r.converged))
            if p.T == 2 and p.channel != "linear":
                times2.append(dt)
            records.append(
                {
                    "i": i,
                    "problem": p.to_dict(),
                    "seconds": dt,
                    "evals": r.iterations,
                    "converged": bool(r.converged),
                    "residual": r.extras["residual"],
                    "message": r.message,
                }
            )
            if not r.converged or dt > 3:
                print(f"  point {i}: {dt:.2f} s, {r.message}; {p}; {_rs_check(p, r)}", flush=True)
        rows.append(summary(f"random grid (n={args.n}, seed={args.seed})", times, evals, conv))
        rows.append(summary("  of which softmax T = 2", times2, [1] * len(times2), [True] * len(times2)))
    base = Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5))
    for name, prob, grid in (
        ("T=2 alpha sweep lam=0.01 (24 points)", base, np.geomspace(0.05, 4.0, 24)),
        ("T=2 peak sweep lam=1e-5 (24 points)", base.replace(lam=1e-5), np.geomspace(0.05, 2.0, 24)),
        ("T=2 peak sweep lam=1e-3 (24 points)", base.replace(lam=1e-3), np.geomspace(0.05, 2.0, 24)),
    ):
        t0 = time.perf_counter()
        rs = theory_curve(prob, grid)
        total = time.perf_counter() - t0
        rows.append(summary(name, [r.runtime_s for r in rs], [r.iterations for r in rs], [r.converged for r in rs]))
        rows[-1]["wall_s"] = total
        for a, r in zip(grid, rs):
            if r.runtime_s > 3 or not r.converged:
                print(
                    f"  alpha = {a:.4f}: {r.runtime_s:.2f} s, {r.iterations} evaluations; "
                    f"{_rs_check(prob.replace(alpha=float(a)), r)}",
                    flush=True,
                )
    ref2 = reference_seconds()
    print(f"reference again at the end: {ref2:.3f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"reference_s": [ref, ref2], "rows": rows, "records": records},
                fh,
                indent=1,
                default=lambda o: None if isinstance(o, float) and not math.isfinite(o) else str(o),
            )


if __name__ == "__main__":
    main()
