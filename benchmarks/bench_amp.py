"""Benchmark: time per GAMP iteration (ERM-GAMP and Bayes-GAMP), seq2lab, T = 2, alpha = 1.

Run: ``python benchmarks/bench_amp.py [--threads N] [--iters K]``. Reports the mean wall time of
one iteration after one warm-up iteration, with the breakdown measured by the history length;
torch runs with ``--threads`` threads (default 1: fastest on a small shared machine).
"""

from __future__ import annotations

import argparse
import time

import torch

from singlehead import AMPOptions, Problem
from singlehead.amp import run_amp
from singlehead.numerics.rng import child_seeds
from singlehead.sim.data import sample_sequences


def time_per_iteration(d: int, bayes: bool, iters: int, threads: int) -> float:
    p = Problem(d=d, T=2, alpha=1.0, noise=0.0, lam=0.01)
    s_t, s_tr, _, _ = child_seeds(0, 4)
    S0 = p.target.sample(d, s_t)
    data = sample_sequences(p, S0, p.n, s_tr)
    stamps: list[float] = []
    run_amp(
        p,
        data,
        S0=S0,
        options=AMPOptions(bayes=bayes, max_iter=iters + 1, tol=0.0, adaptive=False, num_threads=threads),
        callback=lambda t, rec: stamps.append(time.perf_counter()),
    )
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    print(f"GAMP time per iteration, seq2lab, T = 2, alpha = 1, torch threads = {args.threads}")
    print("   d       n   | ERM-GAMP (s/it) | Bayes-GAMP (s/it)")
    for d in (100, 200):
        n = Problem(d=d, alpha=1.0).n
        te = time_per_iteration(d, False, args.iters, args.threads)
        tb = time_per_iteration(d, True, args.iters, args.threads)
        print(f" {d:4d} {n:7d}  |     {te:7.3f}     |     {tb:7.3f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
