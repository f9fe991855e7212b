"""Robustness of ``theory`` on random valid problems of every model.

Draws ``--n`` random valid problems (default 300) from a seed that is fresh on each run unless
``--seed`` is given (the seed is printed and stored), over every model the state evolution
serves:

* ``tied-factorized`` / ``tied-direct``: softmax channels (``seq2lab``, ``seq2seq``), ``T`` in 2..3;
* ``untied``: the untied student, an MP or an untied MP teacher;
* ``multihead-softmax``: ``heads``, ``teacher_heads`` in 1..3 (not both 1), ``seq2lab``,
  ``seq2seq`` or ``hardmax``, ``T`` in 2..3, an MP target in 80 % of the draws;
* ``multihead-linear``: the same heads on the linear channel, ``T`` in 1..3;
* ``linear``: one head on the linear channel;
* ``hardmax``: one tied head on the hardmax channel;
* ``long-T``: one tied head on a softmax channel, ``T`` in 4..8.

Tied targets are Marchenko--Pastur (``kappa0`` log-uniform in [0.1, 3], so some are above 1) or
power law (``gamma`` in [0.6, 2.5], either normalisation); the label noise is 0 in a quarter of
the draws, else log-uniform in [0.01, 2]; ``alpha`` is log-uniform in [0.003, 5] and ``lam`` in
[1e-4, 5]. A draw the library refuses at construction (``Problem(...)`` raises ``ValueError``) is
not a valid problem and is drawn again.

Each point runs ``theory(problem)`` in a child process, killed after ``HARD_KILL_S`` seconds,
and is classed as

* ``converged``;
* ``unconverged+diagnosis``: ``converged`` false with a ``diagnosis``;
* ``unconverged-no-diagnosis``: ``converged`` false and no ``diagnosis``;
* ``refused``: a ``ValueError`` whose message starts with the name of a parameter of the
  problem (a user-facing refusal);
* ``crash``: any other exception, a ``ValueError`` from inside the solver included;
* ``over-60s``: an answer (of any class above) that took more than ``SLOW_S`` seconds, or a child
  killed at ``HARD_KILL_S``.

Every point is appended to the JSON (``--json``, default
``benchmarks/results/random_problems_<seed>.json``) as soon as it is done, so an interrupted run
keeps its points. The table by model gives the counts per class and the median and max wall
time, beside a fixed numpy workload timed in the same run (a 1500 x 1500 float64 matmul and
solve, best of three), so that runs on different machines or loads can be compared.

    python benchmarks/random_problems.py [--n 300] [--seed S] [--workers 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import secrets
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from singlehead import MPTarget, PowerLawTarget, Problem, UntiedMPTarget, theory

SLOW_S = 60.0
HARD_KILL_S = 120.0
CLASSES = ("converged", "unconverged+diagnosis", "unconverged-no-diagnosis", "refused", "crash", "over-60s")
MODELS = (
    "tied-factorized",
    "tied-direct",
    "untied",
    "multihead-softmax",
    "multihead-linear",
    "linear",
    "hardmax",
    "long-T",
)
# the names a user-facing refusal may start with: the Problem's fields and the targets' parameters
_PARAMETERS = frozenset(Problem.__dataclass_fields__) | {
    "kappa0",
    "gamma",
    "normalisation",
    "eigenvalues",
    "prior",
    "options",
}


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(10 ** rng.uniform(math.log10(lo), math.log10(hi)))


def _tied_target(rng: np.random.Generator):
    if rng.random() < 0.6:
        return MPTarget(_log_uniform(rng, 0.1, 3.0))
    return PowerLawTarget(gamma=float(rng.uniform(0.6, 2.5)), normalisation=str(rng.choice(["sqrt_d", "unit_q0"])))


def _draw(model: str, rng: np.random.Generator) -> Problem:
    """One draw of ``model``; may raise ``ValueError`` (then the caller draws again)."""
    softmax = str(rng.choice(["seq2lab", "seq2seq"]))
    beta0 = float(rng.choice([1.0, 2.0]))
    beta = beta0 / float(rng.choice([1.0, 2.0, 0.5]))
    common = dict(
        alpha=_log_uniform(rng, 0.003, 5.0),
        lam=_log_uniform(rng, 1e-4, 5.0),
        noise=0.0 if rng.random() < 0.25 else _log_uniform(rng, 0.01, 2.0),
    )
    kappa = float(rng.choice([1.0, 0.5, 0.3]))
    if model in ("tied-factorized", "tied-direct"):
        student = "factorized" if model == "tied-factorized" else "direct"
        return Problem(
            T=int(rng.integers(2, 4)),
            channel=softmax,
            beta=beta,
            beta0=beta0,
            student=student,
            kappa=kappa if student == "factorized" else 1.0,
            target=_tied_target(rng),
            **common,
        )
    if model == "untied":
        target = (
            UntiedMPTarget(_log_uniform(rng, 0.2, 1.0)) if rng.random() < 0.5 else MPTarget(_log_uniform(rng, 0.1, 3.0))
        )
        return Problem(
            T=int(rng.integers(2, 4)),
            channel=softmax,
            beta=beta,
            beta0=beta0,
            student="untied",
            kappa=kappa,
            target=target,
            **common,
        )
    if model in ("multihead-softmax", "multihead-linear"):
        heads, teacher_heads = 1, 1
        while heads == 1 and teacher_heads == 1:
            heads, teacher_heads = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        # mostly MP targets: the theory of several teacher heads needs one (others are refused by theory)
        target = MPTarget(_log_uniform(rng, 0.1, 3.0)) if rng.random() < 0.8 else _tied_target(rng)
        if model == "multihead-linear":
            return Problem(
                T=int(rng.integers(1, 4)),
                channel="linear",
                kappa=kappa,
                heads=heads,
                teacher_heads=teacher_heads,
                target=target,
                **common,
            )
        channel = str(rng.choice(["seq2lab", "seq2seq", "hardmax"]))
        return Problem(
            T=int(rng.integers(2, 4)),
            channel=channel,
            beta=beta,
            beta0=beta0,
            kappa=kappa,
            heads=heads,
            teacher_heads=teacher_heads,
            target=target,
            **common,
        )
    if model == "linear":
        student = str(rng.choice(["factorized", "direct"]))
        return Problem(
            T=int(rng.integers(1, 4)),
            channel="linear",
            student=student,
            kappa=kappa if student == "factorized" else 1.0,
            target=_tied_target(rng),
            **common,
        )
    if model == "hardmax":
        student = str(rng.choice(["factorized", "direct"]))
        return Problem(
            T=int(rng.integers(2, 4)),
            channel="hardmax",
            beta=beta,
            beta0=beta0,
            student=student,
            kappa=kappa if student == "factorized" else 1.0,
            target=_tied_target(rng),
            **common,
        )
    if model == "long-T":
        student = str(rng.choice(["factorized", "direct"]))
        return Problem(
            T=int(rng.integers(4, 9)),
            channel=softmax,
            beta=beta,
            beta0=beta0,
            student=student,
            kappa=kappa if student == "factorized" else 1.0,
            target=_tied_target(rng),
            **common,
        )
    raise ValueError(f"model must be one of {MODELS} (got {model!r})")


def draw_problems(n: int, seed: int) -> list[tuple[str, Problem]]:
    """``n`` (model, problem) pairs, the models in turn (so every model gets about ``n / 8`` points).

    A draw that ``Problem`` refuses is drawn again (at most 100 times per point).
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        model = MODELS[i % len(MODELS)]
        for _ in range(100):
            try:
                out.append((model, _draw(model, rng)))
                break
            except ValueError:
                continue
        else:
            raise RuntimeError(f"no valid draw of {model} in 100 tries")
    return out


def _is_refusal(exc: BaseException) -> bool:
    if not isinstance(exc, ValueError):
        return False
    head = str(exc).split(" ", 1)[0].strip(":,'\"")
    return head in _PARAMETERS


def _child(problem_dict: dict[str, Any], conn) -> None:
    """Run one point in the child process and send a record back through ``conn``."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.perf_counter()
    try:
        r = theory(Problem.from_dict(problem_dict))
        rec = {
            "converged": bool(r.converged),
            "diagnosis": r.diagnosis,
            "message": r.message,
            "kind": "converged"
            if r.converged
            else ("unconverged+diagnosis" if r.diagnosis is not None else "unconverged-no-diagnosis"),
        }
    except Exception as exc:  # noqa: BLE001  (every exception is a result of the benchmark)
        rec = {
            "kind": "refused" if _is_refusal(exc) else "crash",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=-6),
        }
    rec["seconds"] = time.perf_counter() - t0
    conn.send(rec)
    conn.close()


def reference_seconds() -> float:
    """Best of three of a fixed numpy workload: a 1500 x 1500 float64 matmul and a linear solve."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1500, 1500))
    b = rng.standard_normal((1500, 8))
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        c = a @ a.T + 1500 * np.eye(1500)
        np.linalg.solve(c, b)
        best = min(best, time.perf_counter() - t)
    return best


def _finish(item: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    rec = {**item, **rec}
    rec["class"] = "over-60s" if rec["seconds"] > SLOW_S else rec["kind"]
    return rec


def run(points: list[tuple[str, Problem]], workers: int, sink) -> list[dict[str, Any]]:
    """Run every point, at most ``workers`` children at once; ``sink(record)`` is called per point."""
    ctx = mp.get_context("fork")
    todo = [{"i": i, "model": m, "problem": p.to_dict()} for i, (m, p) in enumerate(points)]
    active: list[tuple[dict, Any, Any, float]] = []
    done: list[dict[str, Any]] = []
    while todo or active:
        while todo and len(active) < workers:
            item = todo.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(item["problem"], child), daemon=True)
            proc.start()
            child.close()
            active.append((item, proc, parent, time.perf_counter()))
        time.sleep(0.02)
        still = []
        for item, proc, parent, t0 in active:
            if parent.poll():
                try:
                    rec = parent.recv()
                except EOFError:
                    rec = {
                        "kind": "crash",
                        "message": "child died without an answer",
                        "seconds": time.perf_counter() - t0,
                    }
            elif not proc.is_alive():
                rec = {
                    "kind": "crash",
                    "message": f"child exited with code {proc.exitcode}",
                    "seconds": time.perf_counter() - t0,
                }
            elif time.perf_counter() - t0 > HARD_KILL_S:
                proc.kill()
                rec = {
                    "kind": "over-60s",
                    "message": f"killed after {HARD_KILL_S:.0f} s",
                    "seconds": time.perf_counter() - t0,
                }
            else:
                still.append((item, proc, parent, t0))
                continue
            proc.join(5)
            parent.close()
            rec = _finish(item, rec)
            done.append(rec)
            sink(rec)
        active = still
    return sorted(done, key=lambda r: r["i"])


def table(records: list[dict[str, Any]]) -> str:
    """The counts per class and the median / max wall time, by model and in all."""
    abbrev = {
        "converged": "conv",
        "unconverged+diagnosis": "unc+diag",
        "unconverged-no-diagnosis": "unc-nodiag",
        "refused": "refused",
        "crash": "crash",
        "over-60s": ">60s",
    }
    head = f"{'model':<18} {'n':>4} " + " ".join(f"{abbrev[c]:>10}" for c in CLASSES) + f" {'median s':>9} {'max s':>8}"
    lines = [head, "-" * len(head)]
    groups = defaultdict(list)
    for r in records:
        groups[r["model"]].append(r)
    for name in [*MODELS, "all"]:
        rs = records if name == "all" else groups.get(name, [])
        if not rs:
            continue
        t = np.array([r["seconds"] for r in rs])
        counts = [sum(r["class"] == c for r in rs) for c in CLASSES]
        lines.append(
            f"{name:<18} {len(rs):>4} "
            + " ".join(f"{c:>10}" for c in counts)
            + f" {np.median(t):>9.2f} {t.max():>8.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="number of random problems (default 300)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the draws (default: fresh, printed)")
    ap.add_argument("--workers", type=int, default=1, help="child processes at once (default 1)")
    ap.add_argument(
        "--json", default=None, help="per-point records (default benchmarks/results/random_problems_<seed>.json)"
    )
    args = ap.parse_args()
    if args.n < 1 or args.workers < 1:
        ap.error("--n and --workers must be >= 1")
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    print(f"seed {seed}  (rerun: --seed {seed})", flush=True)
    out = Path(args.json) if args.json else Path(__file__).resolve().parent / "results" / f"random_problems_{seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    points = draw_problems(args.n, seed)
    ref = reference_seconds()
    print(f"reference: 1500x1500 float64 matmul + solve, best of 3 = {ref:.3f} s", flush=True)
    state: dict[str, Any] = {
        "seed": seed,
        "n": args.n,
        "workers": args.workers,
        "reference_s": [ref],
        "slow_s": SLOW_S,
        "hard_kill_s": HARD_KILL_S,
        "records": [],
    }
    t_start = time.perf_counter()

    def sink(rec: dict[str, Any]) -> None:
        state["records"].append(rec)
        if rec["class"] != "converged":
            print(
                f"  [{rec['i']:>3}] {rec['model']:<17} {rec['class']:<24} {rec['seconds']:7.2f} s  "
                f"{str(rec.get('message'))[:160]}",
                flush=True,
            )
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, default=str))
        tmp.replace(out)  # an interrupted run keeps every point done so far

    records = run(points, args.workers, sink)
    state["records"] = records
    state["reference_s"].append(reference_seconds())
    state["wall_s"] = time.perf_counter() - t_start
    out.write_text(json.dumps(state, indent=1, default=str))
    print(table(records))
    print(
        f"reference (start, end): {state['reference_s'][0]:.3f} s, {state['reference_s'][1]:.3f} s;  "
        f"wall {state['wall_s']:.0f} s;  records: {out}"
    )


if __name__ == "__main__":
    main()
