"""Benchmark: time per full-batch gradient step, peak memory, and time to a converged fit.

Run: ``python benchmarks/bench_training.py [--quick]``. Each configuration runs in a fresh
subprocess so that its peak resident memory (``ru_maxrss``) is its own; the figure
reported is the peak minus the resident size right after ``import torch``.
Targets (2 cores): d = 100, alpha = 1, T = 2: one step <= 20 ms; a converged fit <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time


def _step_worker(cfg: dict, queue) -> None:
    import torch

    from singlehead.data import generator, sample_sequences
    from singlehead.problem import Problem
    from singlehead.students import init_student
    from singlehead.data import sample_target
    from singlehead.training import objective_and_grad

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    p = Problem(d=cfg["d"], T=cfg["T"], alpha=cfg["alpha"], noise=0.5, lam=0.01)
    S0 = sample_target(p.target, p.d, 0)
    data = sample_sequences(p, S0, p.n, 1)
    st = init_student(cfg.get("student", "factorized"), p.d, p.p, generator(2), torch.float64, "cpu")
    for _ in range(2):  # warm-up
        st.zero_grad(set_to_none=True)
        objective_and_grad(st, data, p.channel, p.beta, p.lam)
    reps = cfg.get("reps", 10)
    t0 = time.perf_counter()
    for _ in range(reps):
        st.zero_grad(set_to_none=True)
        objective_and_grad(st, data, p.channel, p.beta, p.lam)
    dt = (time.perf_counter() - t0) / reps
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    queue.put({**cfg, "n": p.n, "ms_per_step": 1e3 * dt, "peak_mib": peak / 1024})


def _fit_worker(cfg: dict, queue) -> None:
    from singlehead.problem import Problem
    from singlehead.simulation import simulate

    p = Problem(d=cfg["d"], T=cfg["T"], alpha=cfg["alpha"], noise=0.5, lam=0.01)
    t0 = time.perf_counter()
    r = simulate(p, seed=0, optimizer=cfg["optimizer"], n_test=2000)
    queue.put({**cfg, "fit_s": time.perf_counter() - t0, "steps": r.iterations, "converged": r.converged,
               "test_error": r.test_error})


def run(worker, cfg: dict) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=worker, args=(cfg, q))
    proc.start()
    out = q.get()
    proc.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="only d = 100")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float64, CPU")
    ds = [100] if args.quick else [50, 100, 200]
    rows = []
    print(f"{'d':>4} {'T':>2} {'alpha':>5} {'n':>7} {'ms/step':>9} {'peak MiB':>9}")
    for d in ds:
        for alpha in (0.5, 1.0, 2.0) if d == 100 else (0.5, 2.0):
            for T in (2, 3):
                r = run(_step_worker, {"d": d, "T": T, "alpha": alpha, "reps": 5 if d == 200 else 10})
                rows.append(r)
                print(f"{d:>4} {T:>2} {alpha:>5} {r['n']:>7} {r['ms_per_step']:>9.1f} {r['peak_mib']:>9.0f}", flush=True)
    print("\nconverged fits (d=100, T=2, alpha=1, kappa0=0.5, Delta=0.5, lam=0.01):")
    for opt in ("lbfgs", "adam"):
        r = run(_fit_worker, {"d": 100, "T": 2, "alpha": 1.0, "optimizer": opt})
        rows.append(r)
        print(f"  {opt:6s} {r['fit_s']:6.1f} s, {r['steps']} steps, converged={r['converged']}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
