"""Validation (issue 6): exponent of the excess test error in n for power-law targets (THEORY §7).

Theory curves only (state evolution, linear channel, T = 1, normalisation A = sqrt(d),
label noise Delta, large-d spiked prior: modes s_i = sqrt(d) i^-gamma above a floor are spikes
of mass 1/d over a null bulk, Q0 counts all d modes). Regularisation lam = C sqrt(alpha), which
keeps the threshold eps at a fixed multiple of the noise delta (eps ≈ 2.5-3 delta for C = 3),
i.e. the noise bulk is thresholded away and the last recovered mode is set by the sample size.
The excess error (test error against noiseless labels) is fitted on log-log axes over
n in [10 d, d^2/10] (OLS, 95% t-interval from the residuals) and compared with
1 - 1/(2 gamma). Acceptance: |fitted - predicted| < 0.05.

Usage: python validation/scaling_exponents.py [--d 10000] [--noise 0.1] [--C 3] [--points 9]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from singlehead.analysis.scaling import scaling_curve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=10000)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--C", type=float, default=3.0)
    ap.add_argument("--points", type=int, default=9)
    ap.add_argument("--gammas", default="0.75,1.25,2")
    args = ap.parse_args()
    d = args.d
    ns = np.geomspace(10 * d, d * d / 10, args.points)
    print("| gamma | d | n range | fitted exponent [95% CI] | predicted | |diff| | K(n) first→last | runtime s | pass |")
    print("|---|---|---|---|---|---|---|---|---|")
    for g in [float(x) for x in args.gammas.split(",")]:
        t0 = time.perf_counter()
        res = scaling_curve(g, d, ns, lam=lambda a: args.C * math.sqrt(a), noise=args.noise, prior="spiked", tol=1e-7)
        f, pr, df = res["fit"], res["predicted"], res["curve"]
        diff = abs(f.exponent - pr)
        print(f"| {g} | {d} | {ns[0]:.3g}–{ns[-1]:.3g} | {f.exponent:.4f} [{f.ci_low:.4f}, {f.ci_high:.4f}] | {pr:.4f} | "
              f"{diff:.4f} | {df['K'].iloc[0]}→{df['K'].iloc[-1]} | {time.perf_counter() - t0:.1f} | "
              f"{'yes' if diff < 0.05 else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
