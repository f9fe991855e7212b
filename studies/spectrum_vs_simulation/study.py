"""Validation (issue 6): predicted learned spectrum vs. trained students (THEORY §5).

Problem: seq2lab, T = 2, MP target kappa0 = 0.5, Delta = 0.5, lam = 0.01, factorized student
with kappa = 1, L-BFGS (``singlehead.simulation.simulate``). For each alpha the eigenvalues
of the trained S are pooled over seeds and compared with ``learned_spectrum`` (state evolution
at the same parameters): KS distance and zero-atom mass. Acceptance: KS < 0.05, |zero atom
difference| < 0.02.

Usage::

    python validation/spectrum_vs_simulation.py --runs 0.5:200:8 --runs 4:200:8 --out runs/analysis

``--runs ALPHA:D:SEEDS``. Simulated eigenvalues are cached in ``OUT/spectrum_sim_*.npz``
(one file per alpha, d, seed) so reruns only redo the comparison. Cost on one CPU core:
d = 200, alpha = 0.5 about 35 s per seed; d = 120, alpha = 4 about 100 s per seed;
d = 200, alpha = 4 (n = 160000 sequences) 163-231 s per seed (measured, 60 L-BFGS steps).
Measured (8 seeds): alpha = 0.5, d = 200: KS 0.0051, zero atom 0.356/0.351; alpha = 4, d = 200:
KS 0.0088, zero atom 0.2816 (theory) / 0.2744 (simulation).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from singlehead.analysis import compare_spectrum, learned_spectrum, plot_spectrum_comparison, spectrum_table
from singlehead.simulation import TrainOptions
from singlehead.problem import MPTarget, Problem
from singlehead.simulation import simulate
from singlehead.state_evolution import theory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", action="append", default=None, help="ALPHA:D:SEEDS (repeatable)")
    ap.add_argument("--out", default="runs/analysis")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    runs = args.runs or ["0.5:200:8", "4:200:8"]
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for spec in runs:
        a, d, k = spec.split(":")
        alpha, d, n_seeds = float(a), int(d), int(k)
        problem = Problem(d=d, T=2, alpha=alpha, channel="seq2lab", noise=0.5, lam=0.01, target=MPTarget(0.5))
        eigs, t_sim = [], 0.0
        for seed in range(n_seeds):
            path = os.path.join(args.out, f"spectrum_sim_a{alpha:g}_d{d}_s{seed}.npz")
            if os.path.exists(path):
                z = np.load(path)
                eigs.append(z["eigenvalues"])
                t_sim += float(z["runtime_s"])
                continue
            r = simulate(problem, seed, options=TrainOptions(n_test=2000))
            np.savez(path, eigenvalues=r.extras["eigenvalues"], runtime_s=r.runtime_s,
                     test_error=r.test_error, matrix_error=r.matrix_error)
            eigs.append(r.extras["eigenvalues"])
            t_sim += r.runtime_s
            print(f"  alpha={alpha:g} d={d} seed={seed}: {r.runtime_s:.0f} s, steps={r.iterations}", flush=True)
        ev = np.concatenate(eigs)
        t0 = time.perf_counter()
        th = theory(problem)
        pred = learned_spectrum(problem, th)
        t_th = time.perf_counter() - t0
        cmp = compare_spectrum(problem, ev, prediction=pred, n_runs=n_seeds)
        plot_spectrum_comparison(pred, ev, os.path.join(args.out, f"spectrum_a{alpha:g}_d{d}.png"))
        spectrum_table(pred, ev).to_csv(os.path.join(args.out, f"spectrum_a{alpha:g}_d{d}.csv"), index=False)
        rows.append((alpha, d, n_seeds, cmp, t_sim, t_th, len(pred.bulks)))
    print()
    print("| alpha | d | seeds | KS | zero atom theory | zero atom sim | |diff| | bulks | top edge th/sim | sim CPU s | theory s | pass |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for alpha, d, k, c, ts, tt, nb in rows:
        diff = abs(c["zero_atom_theory"] - c["zero_atom_sim"])
        ok = c["ks"] < 0.05 and diff < 0.02
        print(f"| {alpha:g} | {d} | {k} | {c['ks']:.4f} | {c['zero_atom_theory']:.4f} | {c['zero_atom_sim']:.4f} | "
              f"{diff:.4f} | {nb} | {c['top_theory']:.3f}/{c['top_sim']:.3f} | {ts:.0f} | {tt:.1f} | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    main()
