"""Long sequences: one state-evolution point at T = 2 ... 64, beside the reference workload.

Prints, with the reference workload (5 x numpy 1000^3 float64 matmul, :func:`reference_seconds`) timed in the
same run before and after, the wall time and CPU time of one cold ``theory`` point (seq2lab, alpha 0.5, every
other setting at its default) for each ``--T``, its node count, SE evaluations, convergence and test error.
With ``--quadrature`` it also solves each point on a second scramble seed (``node_seed = 1``) and on 4 times
the nodes per scramble, and prints the relative change of the test error and of ``q``: the quadrature error of
the default node count (which shrinks with ``K`` above ``T = 8``, see ``SEOptions.points``).
Targets: T = 16 <= 5 s, T = 64 <= 60 s (idle 2-core machine, one thread).

    OMP_NUM_THREADS=1 python benchmarks/bench_long_sequences.py [--T 2,4,8,16,32,64] [--quadrature]
"""

from __future__ import annotations

import argparse
import time

from singlehead import Problem, SEOptions, theory
from singlehead.runs import reference_seconds


def one_point(T: int, options: SEOptions) -> tuple[float, float, object]:
    """Wall and CPU seconds of one cold point at ``T``, and its result."""
    w0, c0 = time.perf_counter(), time.process_time()
    r = theory(Problem(T=T, alpha=0.5), options=options)
    return time.perf_counter() - w0, time.process_time() - c0, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", default="2,4,8,16,32,64")
    ap.add_argument("--quadrature", action="store_true")
    args = ap.parse_args()
    ref0 = reference_seconds()
    print(f"reference workload: {ref0:.3f} s")
    for T in (int(t) for t in args.T.split(",")):
        wall, cpu, r = one_point(T, SEOptions())
        print(
            f"T={T:3d} nodes={r.extras['n_nodes']:5d} wall={wall:7.2f} s ({wall / ref0:6.1f} ref) cpu={cpu:7.2f} s "
            f"evals={r.extras['evaluations_all_attempts']:3d} converged={r.converged} test_error={r.test_error:.6e}",
            flush=True,
        )
        if args.quadrature:
            pts = SEOptions().points(Problem(T=T))
            for label, o in (("node_seed=1", SEOptions(node_seed=1)), ("4x nodes", SEOptions(n_points=4 * pts))):
                w2, _, r2 = one_point(T, o)
                print(
                    f"      {label:12s} wall={w2:7.2f} s  d(test_error)/test_error="
                    f"{(r2.test_error - r.test_error) / r.test_error:+.2e}  d(q)/q="
                    f"{(r2.extras['q'] - r.extras['q']) / r.extras['q']:+.2e}",
                    flush=True,
                )
    print(f"reference workload (after): {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
