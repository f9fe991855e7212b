"""Finite-``d`` prior against the asymptotic prior on the quadratic-network setting.

Setting: linear channel ``T = 1``, power-law target ``gamma = 1.25`` with ``Q0 = 1``
(``normalisation="unit_q0"``), ``d = 400``, ``Delta = 0.1``, ``lam = 0.1``, ``alpha = 1``,
student widths ``p in {1, 4, 14, 55, 400}`` (``kappa = p/d``). Each point of the table is a
cold :func:`~singlehead.state_evolution.theory` call (no warm start from the previous width; the
prior model and its cached decompositions are shared, as in any sweep on one target); the last
lines time the same widths as one warm-started sweep (:func:`theory_curve` over ``kappa``).
Targets: <= 3 s per point on 2 cores and finite within 1 % of asymptotic.

Printed per width: wall time per point of both priors, their test errors, the relative
difference, the finite prior's ``prior_draw_spread`` (standard error over its GOE draws, see
:func:`~singlehead.state_evolution.prior.prior_draw_spread`) and, with ``--seeds N``, the test
errors of ``N`` independent draw sets (``node_seed = 0..N-1``): their standard deviation is the
spread of the whole finite prediction, feedback of the fixed point included. A reference
workload (5 products of 1000 x 1000 float64 matrices) is timed in the same run, so times from
machines under different load can be compared.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_finite_prior.py [--seeds 3]``
(the script also runs against older versions of the library: missing extras print as nan).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from singlehead import PowerLawTarget, Problem, SEOptions, theory, theory_curve

D = 400
WIDTHS = (1, 4, 14, 55, 400)
SETTING = dict(T=1, alpha=1.0, channel="linear", noise=0.1, lam=0.1)
GAMMA = 1.25
MATMUL_SIZE, MATMUL_REPEATS = 1000, 5
TIME_TARGET_S, REL_TARGET = 3.0, 0.01


def reference_workload() -> float:
    """Seconds for ``MATMUL_REPEATS`` products of two ``MATMUL_SIZE`` square float64 matrices (best of 3)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE))
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(MATMUL_REPEATS):
            A @ A
        best = min(best, time.perf_counter() - t)
    return best


def solve(problem: Problem, prior: str, seed: int = 0) -> tuple[float, float, float]:
    """(test error, wall seconds, prior_draw_spread) of one cold theory call."""
    t = time.perf_counter()
    r = theory(problem, prior=prior, options=SEOptions(node_seed=seed))
    dt = time.perf_counter() - t
    if not r.converged:
        print(f"  warning: {prior} p={problem.kappa * D:.0f} not converged: {r.message}")
    return float(r.test_error), dt, float(r.extras.get("prior_draw_spread", math.nan))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1, help="independent GOE draw sets of the finite prior")
    args = ap.parse_args()
    ref = reference_workload()
    print(f"reference workload: {MATMUL_REPEATS} x numpy {MATMUL_SIZE}x{MATMUL_SIZE} matmul = {ref:.3f} s")
    print(f"d = {D}, {SETTING}, gamma = {GAMMA}, Q0 = 1; finite prior draws = {SEOptions().draws}")
    head = (
        f"{'p':>4} {'t_fin[s]':>9} {'t_asy[s]':>9} {'TE finite':>10} {'TE asympt':>10} {'rel diff':>9} "
        f"{'draw s.e.':>10}"
    )
    if args.seeds > 1:
        head += f" {'seed sd':>9}"
    print(head)
    t_fin, rels = [], []
    for p in WIDTHS:
        prob = Problem(d=D, kappa=p / D, target=PowerLawTarget(gamma=GAMMA, normalisation="unit_q0"), **SETTING)
        te_f, dt_f, spread = solve(prob, "finite")
        te_a, dt_a, _ = solve(prob, "asymptotic")
        rel = te_f / te_a - 1
        t_fin.append(dt_f)
        rels.append(rel)
        line = f"{p:>4} {dt_f:>9.2f} {dt_a:>9.2f} {te_f:>10.6f} {te_a:>10.6f} {100 * rel:>8.3f}% {spread:>10.2e}"
        if args.seeds > 1:
            tes = [te_f] + [solve(prob, "finite", seed=s)[0] for s in range(1, args.seeds)]
            line += f" {np.std(tes, ddof=1):>9.2e}"
        print(line, flush=True)
    print(
        f"finite prior: max {max(t_fin):.2f} s/point (target {TIME_TARGET_S} s), "
        f"max |rel diff| {100 * max(map(abs, rels)):.3f}% (target {100 * REL_TARGET:.0f}%), "
        f"total {sum(t_fin):.1f} s = {sum(t_fin) / ref:.1f} reference workloads"
    )
    # the same widths as one warm-started sweep (theory_curve: each point starts from the last)
    base = Problem(d=D, kappa=1.0, target=PowerLawTarget(gamma=GAMMA, normalisation="unit_q0"), **SETTING)
    for prior in ("finite", "asymptotic"):
        t = time.perf_counter()
        rs = theory_curve(base, [p / D for p in WIDTHS], param="kappa", prior=prior)
        dt = time.perf_counter() - t
        tes = " ".join(f"{r.test_error:.6f}" for r in rs)
        print(f"warm-started sweep over p, {prior:>10}: {dt:.1f} s = {dt / len(WIDTHS):.2f} s/point; TE {tes}")


if __name__ == "__main__":
    main()
