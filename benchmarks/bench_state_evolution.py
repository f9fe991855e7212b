"""Speed of the state evolution (prints a table).

Targets (2 CPU cores): one alpha point at T = 2 converged to residual 1e-6 in <= 2 s;
a 40-point alpha curve in <= 60 s; T = 3 and T = 4 supported (cost reported).
Setting: seq2lab, MP target kappa0 = 0.5, Delta = 0.5, lam = 0.01, beta = beta0 = 1.

    python benchmarks/bench_state_evolution.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from singlehead import MPTarget, Problem, SEOptions, bayes_optimal, theory, theory_curve


def row(name: str, seconds: float, detail: str, target: str = "") -> None:
    print(f"{name:<44} {seconds:9.2f} s   {target:<10} {detail}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 40-point curve and T = 4")
    args = ap.parse_args()
    base = Problem(T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5))
    theory(base.replace(alpha=0.3), options=SEOptions(n_points=64))  # imports / law construction
    print(f"{'case':<44} {'wall':>11}   {'target':<10} details")
    for a in (0.1, 0.5, 2.0):
        t = time.perf_counter()
        r = theory(base.replace(alpha=a))
        dt = time.perf_counter() - t
        row(
            f"T=2 one point alpha={a} (8192 nodes)",
            dt,
            f"residual={r['residual']:.1e} evals={r['iterations']} converged={r['converged']}",
            "<= 2 s",
        )
    t = time.perf_counter()
    r = theory(base.replace(student="direct"))
    row(
        "T=2 direct student alpha=0.5", time.perf_counter() - t, f"residual={r['residual']:.1e} evals={r['iterations']}"
    )
    t = time.perf_counter()
    r = theory(base.replace(kappa=0.3, lam=0.001, alpha=1.0))
    row(
        "T=2 rank cap kappa=0.3 alpha=1",
        time.perf_counter() - t,
        f"residual={r['residual']:.1e} evals={r['iterations']} cap_binds={r['cap_binds']}",
    )
    t = time.perf_counter()
    r = theory(Problem(T=1, channel="linear", alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5)))
    row("linear T=1 one point (closed-form output side)", time.perf_counter() - t, f"residual={r['residual']:.1e}")
    if not args.quick:
        alphas = np.linspace(0.05, 2.0, 40)
        t = time.perf_counter()
        rs = theory_curve(base, alphas)
        dt = time.perf_counter() - t
        row(
            "T=2 40-point alpha curve 0.05..2",
            dt,
            f"all converged={all(x['converged'] for x in rs)} max residual={max(x['residual'] for x in rs):.1e} "
            f"evals={sum(x['iterations'] for x in rs)}",
            "<= 60 s",
        )
    for T, npts in ((3, 2048), (4, 1024)) if not args.quick else ((3, 1024),):
        t = time.perf_counter()
        r = theory(base.replace(T=T), options=SEOptions(n_points=npts))
        row(
            f"T={T} one point alpha=0.5 ({4 * npts} nodes, K={T * (T + 1) // 2})",
            time.perf_counter() - t,
            f"residual={r['residual']:.1e} evals={r['iterations']} test_err={r.test_error:.4f}",
        )
    t = time.perf_counter()
    b = bayes_optimal(base)
    row("Bayes-optimal point T=2", time.perf_counter() - t, f"mmse={b['mmse']:.4f} test_error={b.test_error:.4f}")


if __name__ == "__main__":
    main()
