"""Benchmark: training throughput against the machine's GEMM rate, converged fits, thread policy.

Run: ``python benchmarks/bench_training.py [--quick] [--threads N] [--oversubscription]``.

1. **GEMM rate** of this machine, measured in the same run as the steps: a 1000 x 1000
   GEMM and the two GEMM shapes of a step (``X W`` and ``X^T dZ``, ``n T x d`` by ``d x p``),
   float64 and float32.
2. **Step**: one full-batch objective + gradient (:class:`singlehead.sim.training.Objective`),
   its FLOP count (:func:`singlehead.sim.training.step_flops`) and achieved FLOP rate, next to
   the autograd evaluation of the same objective (the implementation the closed-form gradient replaced).
   Timings interleave the reference GEMMs and the steps and keep the minimum of each, so
   that other load on a shared machine affects both alike; CPU time (``process_time``)
   is printed too.
3. **Fits** at d = 100, alpha = 1, T = 2 (kappa0 = 0.5, Delta = 0.5, lam = 0.01): L-BFGS
   in float64 and in ``mixed`` precision (float32 + float64 polish), Adam; wall time,
   iterations and final objective. Each fit runs in a fresh subprocess, whose peak
   resident memory is reported (minus the size right after ``import torch``).
4. ``--oversubscription``: two worker processes doing small linear algebra (d = 100
   eigendecompositions and tall GEMMs) with 1 thread each vs 2 threads each, the
   penalty that :mod:`singlehead.runs.threads` prevents.

Targets (2 cores): float64 step within 2x of the float64 GEMM rate, float32 within
2x of the float32 rate; converged L-BFGS fit <= 2 s with the objective within 1e-6 of the
float64 one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time

SETTING = {"d": 100, "T": 2, "alpha": 1.0}


def _problem(cfg: dict):
    from singlehead import Problem

    return Problem(d=cfg["d"], T=cfg["T"], alpha=cfg["alpha"], noise=0.5, lam=0.01)


def _min_times(fns: dict, rounds: int) -> dict:
    """Interleaved rounds; minimum wall and CPU seconds of each callable."""
    best = {k: [float("inf"), float("inf")] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            best[k][0] = min(best[k][0], time.perf_counter() - t)
            best[k][1] = min(best[k][1], time.process_time() - c)
    return best


def _step_worker(cfg: dict, queue) -> None:
    import torch

    torch.set_num_threads(cfg["threads"])
    from singlehead.model.students import init_student
    from singlehead.numerics.rng import generator
    from singlehead.sim.data import sample_sequences
    from singlehead.sim.training import Objective, reference_objective_and_grad, step_flops

    p = _problem(cfg)
    S0 = p.target.sample(p.d, 0)
    data = sample_sequences(p, S0, p.n, 1)
    flops = step_flops(p.n, p.T, p.d, p.p)
    out = {**cfg, "n": p.n, "step_gflop": flops / 1e9}
    for name, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        g = torch.Generator().manual_seed(0)
        A = torch.randn(1000, 1000, dtype=dtype, generator=g)
        X2 = torch.randn(p.n * p.T, p.d, dtype=dtype, generator=g)
        W = torch.randn(p.d, p.p, dtype=dtype, generator=g)
        Z = X2 @ W
        st = init_student("factorized", p.d, p.p, generator(2), dtype, "cpu")
        dd = data.to("cpu", dtype)
        obj = Objective(dd, p.channel, p.beta, p.lam)
        fns = {"gemm_1k": lambda: A @ A, "gemm_shape": lambda: (X2 @ W, X2.T @ Z), "step": lambda: obj(st)}
        if not cfg.get("skip_old"):
            fns["old_step"] = lambda: reference_objective_and_grad(st, dd, p.channel, p.beta, p.lam)
        best = _min_times(fns, cfg["rounds"])
        work = {"gemm_1k": 2e9, "gemm_shape": 4.0 * p.n * p.T * p.d * p.p, "step": flops, "old_step": flops}
        for k, (wall, cpu) in best.items():
            out[f"{name}_{k}_ms"] = 1e3 * wall
            out[f"{name}_{k}_cpu_ms"] = 1e3 * cpu
            out[f"{name}_{k}_gflops"] = work[k] / wall / 1e9
    queue.put(out)


def _fit_worker(cfg: dict, queue) -> None:
    import torch

    torch.set_num_threads(cfg["threads"])
    from singlehead import TrainOptions, simulate

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    p = _problem(cfg)
    opts = TrainOptions(optimizer=cfg["optimizer"], precision=cfg["precision"], n_test=2000)
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(p, seed=0, options=opts)
    queue.put(
        {
            **cfg,
            "fit_s": time.perf_counter() - t0,
            "fit_cpu_s": time.process_time() - c0,
            "steps": r.iterations,
            "polish_steps": r["polish_steps"],
            "converged": r.converged,
            "objective": r["objective"],
            "test_error": r.test_error,
            "test_error_se": r["test_error_se"],
            "peak_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
        }
    )


def _linalg_worker(threads: int, reps: int, queue) -> None:
    import torch

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    A = torch.randn(100, 100, dtype=torch.float64, generator=g)
    S = A + A.T
    X = torch.randn(2000, 100, dtype=torch.float64, generator=g)
    torch.linalg.eigvalsh(S)
    t = time.perf_counter()
    for _ in range(reps):
        torch.linalg.eigvalsh(S)
        X @ A
        A @ A
    queue.put(time.perf_counter() - t)


def run(worker, *args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=worker, args=(*args, q))
    proc.start()
    out = q.get()
    proc.join()
    return out


def oversubscription(workers: int = 2, reps: int = 300) -> dict:
    """Wall time of ``workers`` concurrent processes doing small linear algebra, 1 vs 2 threads each."""
    ctx = mp.get_context("spawn")
    res = {}
    for threads in (1, 2, 1):  # 1 twice: the spread of the reference
        q = ctx.Queue()
        procs = [ctx.Process(target=_linalg_worker, args=(threads, reps, q)) for _ in range(workers)]
        for pr in procs:
            pr.start()
        times = [q.get() for _ in procs]
        for pr in procs:
            pr.join()
        res.setdefault(threads, []).append(max(times))
    return {
        "workers": workers,
        "reps": reps,
        "wall_1_thread_s": min(res[1]),
        "wall_2_threads_s": min(res[2]),
        "penalty": min(res[2]) / min(res[1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="steps at d = 100 only, no Adam fit")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per process (default 2)")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds")
    ap.add_argument("--oversubscription", action="store_true", help="also measure 2 workers x 2 threads vs x 1")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU; minimum of {args.rounds} interleaved rounds")
    rows = []
    shapes = (
        [dict(SETTING)]
        if args.quick
        else [dict(SETTING), {"d": 100, "T": 3, "alpha": 1.0}, {"d": 200, "T": 2, "alpha": 0.5}]
    )
    print(
        f"{'d':>4} {'T':>2} {'alpha':>5} {'n':>6} {'prec':>4} {'GEMM1k':>7} {'GEMMsh':>7} {'step ms':>8} "
        f"{'GF/s':>6} {'1k/step':>7} {'sh/step':>7} {'old ms':>7} {'old GF/s':>8}"
    )
    for cfg in shapes:
        r = run(_step_worker, {**cfg, "threads": args.threads, "rounds": args.rounds, "skip_old": cfg["d"] > 100})
        rows.append(r)
        for nm in ("f64", "f32"):
            old = (
                f"{r[f'{nm}_old_step_ms']:>7.1f} {r[f'{nm}_old_step_gflops']:>8.1f}"
                if f"{nm}_old_step_ms" in r
                else f"{'-':>7} {'-':>8}"
            )
            print(
                f"{cfg['d']:>4} {cfg['T']:>2} {cfg['alpha']:>5} {r['n']:>6} {nm:>4} {r[f'{nm}_gemm_1k_gflops']:>7.1f} "
                f"{r[f'{nm}_gemm_shape_gflops']:>7.1f} {r[f'{nm}_step_ms']:>8.1f} {r[f'{nm}_step_gflops']:>6.1f} "
                f"{r[f'{nm}_gemm_1k_gflops'] / r[f'{nm}_step_gflops']:>7.2f} "
                f"{r[f'{nm}_gemm_shape_gflops'] / r[f'{nm}_step_gflops']:>7.2f} {old}",
                flush=True,
            )
    print(
        "  (GEMM1k, GEMMsh, GF/s: GFLOP/s of a 1000^3 GEMM, of the step's two GEMM shapes and of the step;"
        " 1k/step, sh/step: how far the step is from those rates)"
    )
    print("\nconverged fits (d=100, T=2, alpha=1, kappa0=0.5, Delta=0.5, lam=0.01, seed 0):")
    fits = [("lbfgs", "float64"), ("lbfgs", "mixed")] + ([] if args.quick else [("adam", "float64"), ("adam", "mixed")])
    ref = None
    for opt, prec in fits:
        r = run(_fit_worker, {**SETTING, "optimizer": opt, "precision": prec, "threads": args.threads})
        rows.append(r)
        if opt == "lbfgs" and prec == "float64":
            ref = r["objective"]
        rel = (r["objective"] - ref) / ref if ref else float("nan")
        print(
            f"  {opt:6s} {prec:8s} {r['fit_s']:6.2f} s (cpu {r['fit_cpu_s']:6.2f} s), {r['steps']} iterations "
            f"({r['polish_steps']} float64 polish), converged={r['converged']}, objective {r['objective']:.12g} "
            f"(rel. to L-BFGS float64 {rel:+.1e}), test error {r['test_error']:.5f} ± {r['test_error_se']:.5f}, "
            f"peak {r['peak_mib']:.0f} MiB",
            flush=True,
        )
    if args.oversubscription:
        o = oversubscription()
        rows.append(o)
        print(
            f"\noversubscription: {o['workers']} workers x {o['reps']} x"
            " (eigvalsh 100x100 + 2000x100 GEMM + 100^3 GEMM):"
            f" 1 thread each {o['wall_1_thread_s']:.2f} s, 2 threads each {o['wall_2_threads_s']:.2f} s "
            f"-> {o['penalty']:.1f}x slower"
        )
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
