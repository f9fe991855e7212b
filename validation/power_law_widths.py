"""Validation (issue 6): theory vs. L-BFGS at several student widths, power-law target (THEORY §7).

Reference setting (arXiv 2509.24882, width experiment): linear channel, T = 1, power-law target
gamma = 1.25 with Q0 = 1 (normalisation "unit_q0"), d = 400, Delta = 0.1,
lam = 0.1 sqrt(alpha), widths p in {1, 4, 14, 35, 86, 400}, n in {26515, 160000}, 3 seeds;
acceptance: theory within 3% of the simulated test error.

That setting costs ~n d p flops per gradient (1e10 at the largest point) — hours on 2 shared CPU
cores. ``--d`` runs the same problem at a smaller d with the same n/d^2 and p/d ratios
(p = max(1, round(p400 d / 400))). Theory: state evolution with the finite-d prior
(``--prior finite``, exact eigendecompositions with fixed GOE draws) or the discrete-law
deterministic equivalent (``--prior asymptotic``, default: much cheaper), rank cap kappa = p/d.

Usage: python validation/power_law_widths.py --d 100 --seeds 3
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from singlehead.problem import PowerLawTarget, Problem
from singlehead.simulation import simulate
from singlehead.state_evolution import theory

WIDTHS_400 = (1, 4, 14, 35, 86, 400)
NS_400 = (26515, 160000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--prior", default="asymptotic")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d = args.d
    print("| n (d=400 equiv.) | n | p (d=400) | p | theory TE | sim TE (mean ± se over seeds) | rel. diff | sim s | pass |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n400 in NS_400:
        alpha = n400 / 400**2
        for p400 in WIDTHS_400:
            p = max(1, round(p400 * d / 400))
            prob = Problem(d=d, T=1, channel="linear", alpha=alpha, noise=0.1, lam=0.1 * math.sqrt(alpha),
                           kappa=p / d, target=PowerLawTarget(1.25, "unit_q0"))
            th = theory(prob, prior=args.prior)
            t0 = time.perf_counter()
            te = [simulate(prob, s, n_test=10000).test_error for s in range(args.seeds)]
            ts = time.perf_counter() - t0
            m, se = float(np.mean(te)), float(np.std(te, ddof=1) / math.sqrt(len(te))) if len(te) > 1 else math.nan
            rel = abs(th.test_error - m) / m
            print(f"| {n400} | {prob.n} | {p400} | {prob.p} | {th.test_error:.5f} | {m:.5f} ± {se:.5f} | {rel:.3%} | "
                  f"{ts:.0f} | {'yes' if rel < 0.03 else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
