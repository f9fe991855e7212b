"""Benchmark: untied vs tied student, one full-batch step and a converged fit, beside the reference workload.

Run: ``python benchmarks/bench_untied.py [--d 100] [--alpha 1] [--seeds 2]``.

Setting: ``T = 2``, seq2lab, ``Delta = 0.5``, ``lam = 1e-2``, MP teacher ``kappa0 = 0.5``,
``kappa = 1``. Printed: the reference workload (:func:`singlehead.runs.reference_seconds`,
5 float64 1000^3 GEMMs), the minimum wall time of one objective + gradient evaluation of the untied
student in closed form (:class:`singlehead.sim.training.Objective`) and by autograd through the
module's ``logits`` (the generic path), the tied step, and per seed the wall time, iterations and
convergence of ``simulate`` (L-BFGS, ``mixed`` and ``float64`` precision) for both students.
"""

from __future__ import annotations

import argparse
import time


def _min_time(f, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    import torch

    from singlehead import MPTarget, Problem, TrainOptions, simulate
    from singlehead.runs import reference_seconds
    from singlehead.sim.data import sample_sequences
    from singlehead.sim.training import Objective

    print(
        f"reference workload (5 x 1000^3 float64 GEMM): {reference_seconds():.3f} s; "
        f"torch threads {torch.get_num_threads()}"
    )
    base = Problem(d=args.d, T=2, alpha=args.alpha, noise=0.5, lam=1e-2, target=MPTarget(0.5))
    data = sample_sequences(base, base.target.sample(base.d, 0), base.n, 1)
    for student in ("factorized", "untied"):
        problem = base.replace(student=student)
        mod = problem.student.init_module(problem.d, problem.p, torch.Generator().manual_seed(2), torch.float64, "cpu")
        obj = Objective(data, problem.channel, problem.beta, problem.lam)
        obj(mod)
        line = f"{student}: step {1e3 * _min_time(lambda: obj(mod)):.1f} ms (closed form, float64)"
        if student == "untied":
            line += f", {1e3 * _min_time(lambda: obj._generic(mod, True)):.1f} ms (autograd)"
        print(line, flush=True)
    for precision in ("mixed", "float64"):
        for student in ("factorized", "untied"):
            problem = base.replace(student=student)
            for seed in range(args.seeds):
                r = simulate(problem, seed=seed, options=TrainOptions(precision=precision, n_test=2000))
                print(
                    f"{student} {precision} seed {seed}: {r.runtime_s:.2f} s, {r.iterations} iterations, "
                    f"converged {r.converged}, test error {r.test_error:.5f}",
                    flush=True,
                )
    print(f"reference workload again: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
