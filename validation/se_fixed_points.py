"""Several state-evolution fixed points at one problem: which one is the ERM's? (issue 25, stop 33)

Run: ``OMP_NUM_THREADS=1 python validation/se_fixed_points.py [--seeds 4]`` (about 2 minutes on 2 cores).

The problem is problem 10 of the benchmark's random grid (``random_problems(64, seed=7101)``, its T = 2
softmax problems), written out here: seq2lab, ``T = 2``, ``beta = 0.5``, ``beta0 = 1``, noise ``Delta = 1``,
MP target ``kappa0 = 1``, direct (Frobenius) student, ``lam = 1.365e-5``, at ``alpha = 0.9178`` (a point of the
benchmark's sweep over it, just above its interpolation peak). Started from different points, ``theory`` reports
three different "converged" points there. For each the script records

* the SE's test and train errors, ``q, m, Sigma``, the residual, the quadrature floor and the message;
* the predicted training objective per sample ``extras["objective"] = train_error + penalty/alpha`` (the
  replica-symmetric energy: the ERM minimiser is the fixed point with the lowest one);
* the residual of the same point under finer output quadratures (8192 x 8 and 32768 x 8 nodes), with the
  floor there: a fixed point of the state evolution stays one as the quadrature is refined;

and ERM (``simulate``, L-BFGS, mixed precision, the library's default) at ``d = 64`` and ``100`` on ``--seeds``
seeds: test and train errors, objective, ``q``, ``m``. Results go to ``validation/results/se_fixed_points.json``
and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, simulate
from singlehead.state_evolution import SEOptions, SEState, prior_model, theory
from singlehead.state_evolution._fixed_point import _residual
from singlehead.state_evolution.se_map import SEMap, residual_floor

PROBLEM = Problem(d=100, T=2, alpha=0.9178, channel="seq2lab", beta=0.5, beta0=1.0, noise=1.0, target=MPTarget(1.0),
                  student="direct", kappa=1.0, lam=1.3650866926987315e-05)
STARTS = {"default": None, "(60, 8, 100)": (60.0, 8.0, 100.0), "(20, 5, 20)": (20.0, 5.0, 20.0)}
FINER = [(8192, 8), (32768, 8)]


def _mean_se(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


def se_points() -> list[dict]:
    rows = []
    for name, init in STARTS.items():
        r = theory(PROBLEM, init=None if init is None else SEState(*init))
        e = r.extras
        x = np.array([e["q"], e["m"], e["Sigma"]])
        row = {"start": name, "test_error": r.test_error, "train_error": r.train_error, "objective": e["objective"],
               "q": x[0], "m": x[1], "Sigma": x[2], "residual": e["residual"], "floor": e["residual_floor"],
               "converged": r.converged, "message": r.message, "finer": []}
        for n_points, n_scrambles in FINER:
            o = SEOptions(n_points=n_points, n_scrambles=n_scrambles)
            pm = prior_model(PROBLEM, "auto", draws=o.draws, seed=o.node_seed)
            fx, out, _ = SEMap(PROBLEM, pm, o.quadrature(PROBLEM))(x, mode="cold")
            row["finer"].append({"nodes": f"{n_points} x {n_scrambles}", "residual": _residual(x, fx, pm.Q0),
                                 "floor": residual_floor(x, out, PROBLEM, pm)})
        rows.append(row)
    return rows


def erm(seeds: int) -> list[dict]:
    rows = []
    for d in (64, 100):
        runs = [simulate(PROBLEM.replace(d=d), seed=s) for s in range(seeds)]
        row = {"d": d, "seeds": seeds, "converged": sum(bool(r.converged) for r in runs)}
        for k, get in (("test_error", lambda r: r.test_error), ("train_error", lambda r: r.train_error),
                       ("objective", lambda r: r.extras["objective"]), ("q", lambda r: r.extras["q"]),
                       ("m", lambda r: r.extras["m"])):
            row[k] = _mean_se([get(r) for r in runs])
        rows.append(row)
    return rows


def markdown(se: list[dict], sims: list[dict], seconds: float) -> str:
    L = ["# Several SE fixed points at one problem: which is the ERM's?", "",
         f"Problem: `{PROBLEM}`. Written by `validation/se_fixed_points.py` in {seconds:.0f} s.", "",
         "## State evolution from three starts (2048 x 4 nodes, the default)", "",
         "| start | test error | train error | objective | q | m | Sigma | residual | floor | verdict |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in se:
        L.append(f"| {r['start']} | {r['test_error']:.4f} | {r['train_error']:.5f} | {r['objective']:.5f} | {r['q']:.4g} "
                 f"| {r['m']:.4g} | {r['Sigma']:.4g} | {r['residual']:.1e} | {r['floor']:.1e} | {r['message']} |")
    L += ["", "Residual of the same points under finer quadratures (floor = a tenth of one step's quadrature "
          "standard error, as in `residual_floor`):", "", "| start | " + " | ".join(
              f"{n} residual | {n} floor" for n in (f["nodes"] for f in se[0]["finer"])) + " |",
          "|---|" + "---|---|" * len(FINER)]
    for r in se:
        L.append(f"| {r['start']} | " + " | ".join(f"{f['residual']:.1e} | {f['floor']:.1e}" for f in r["finer"]) + " |")
    L += ["", "## ERM (simulate: L-BFGS, mixed precision), mean +- s.e. over seeds", "",
          "| d | seeds | converged | test error | train error | objective | q | m |", "|---|---|---|---|---|---|---|---|"]
    for s in sims:
        cell = lambda k: f"{s[k][0]:.4f} +- {s[k][1]:.4f}"  # noqa: E731
        L.append(f"| {s['d']} | {s['seeds']} | {s['converged']} | {cell('test_error')} | {cell('train_error')} "
                 f"| {cell('objective')} | {cell('q')} | {cell('m')} |")
    big = sims[-1]
    low = min(se, key=lambda r: r["objective"])
    L += ["", "## Reading", "",
          f"Distance of each SE point's test error from ERM at d = {big['d']}, in ERM standard errors: " + ", ".join(
              f"{r['start']}: {(r['test_error'] - big['test_error'][0]) / big['test_error'][1]:+.1f}" for r in se) + ".",
          f"The lowest predicted objective is the start {low['start']}'s ({low['objective']:.5f}; ERM "
          f"{big['objective'][0]:.5f} +- {big['objective'][1]:.5f}).",
          "Only a point whose residual meets the tolerance (not the floor) and whose residual stays near the floor "
          "as the quadrature is refined is a fixed point the quadrature determines; a floor verdict where one SE "
          "step's quadrature standard error is several per cent (the floor is a tenth of it) says little."]
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    t0 = time.perf_counter()
    se, sims = se_points(), erm(args.seeds)
    seconds = time.perf_counter() - t0
    out = Path(__file__).parent / "results"
    (out / "se_fixed_points.json").write_text(json.dumps({"problem": PROBLEM.to_dict(), "se": se, "erm": sims},
                                                         indent=1, default=float))
    md = markdown(se, sims, seconds)
    (out / "se_fixed_points.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
