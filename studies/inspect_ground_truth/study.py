"""Does the ``inspect`` fit give back the state evolution's parameters? (README.md)

Ground truth: students trained by :func:`singlehead.sim.simulation.simulate` (seq2lab, T = 2,
Delta = 0.5, lam = 0.01, factorized kappa = 1, L-BFGS) at d = 100 on

* an MP target, kappa0 = 0.5, alpha in {0.5, 4};
* a power-law target s_i = sqrt(d) i^-2 (gamma = 2, "sqrt_d"), alpha = 0.5 (three outliers).

The eigenvalues of the learned S (pooled over seeds) are fitted with
:func:`singlehead.inspect.fit.fit_spectrum` (prior "mp" or "power_law"; shape fixed at the
truth, and fitted) and compared with the state evolution's (eta, delta, eps)
(:func:`singlehead.state_evolution.theory`) and its outlier count: predicted outliers of
:func:`singlehead.analysis.learned_spectrum` above the predicted bulk edge plus the same
resolution margin ``4 eta sigma_bulk d^{-2/3}`` that the fit uses. Per-seed fits give the spread.
A second block fits eigenvalues drawn from the theory's own law at d = 100
(``eta ReLU(eig(S0 + delta Z) - eps)``, 4 GOE draws) to separate estimator error from the
finite-d / optimisation gap between students and the state evolution.

Students are cached in the result cache (``runs/studies/inspect_ground_truth``), one record per
seed. ``--quick``: the case ``mp_a0.5`` with 2 seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from singlehead import MPTarget, PowerLawTarget, Problem, TrainOptions, simulate, theory
from singlehead.analysis import learned_spectrum
from singlehead.inspect import LawCache, fit_spectrum, outlier_margin
from singlehead.runs import Cache, cached
from studies import echo_into, study_parser, write_table

HERE = Path(__file__).resolve().parent

CASES = {
    "mp_a0.5": (Problem(d=100, T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(0.5)), "mp", 0.5),
    "mp_a4": (Problem(d=100, T=2, alpha=4.0, noise=0.5, lam=0.01, target=MPTarget(0.5)), "mp", 0.5),
    "pl_g2_a0.5": (Problem(d=100, T=2, alpha=0.5, noise=0.5, lam=0.01, target=PowerLawTarget(2.0)), "power_law", 2.0),
}


def student_eigenvalues(label: str, problem: Problem, seeds: int, cache: Cache) -> list[np.ndarray]:
    """Eigenvalues of the S trained by ``simulate(problem, seed)`` for each seed (cached)."""
    evs = []
    for seed in range(seeds):

        def fit() -> dict:
            r = simulate(problem, seed, options=TrainOptions(n_test=2000))
            print(f"  simulated {label} seed {seed}: {r.runtime_s:.0f} s", flush=True)
            return {
                "eigenvalues": np.asarray(r.extras["eigenvalues"]).tolist(),
                "runtime_s": r.runtime_s,
                "steps": r.iterations,
            }

        rec = cached(
            cache, {"stage": "inspect-student", "problem": problem.to_dict(), "seed": seed, "n_test": 2000}, fit
        )
        evs.append(np.asarray(rec["eigenvalues"]))
    return evs


def theory_outliers(problem: Problem, th, prior: str, shape: float) -> tuple[int, list[float]]:
    pred = learned_spectrum(problem, th)
    top = max([b for _, b in pred.bulks] + [0.0])
    sigma = LawCache().table(prior, shape, pred.delta, problem.d).sigma
    m = outlier_margin(pred.eta, sigma, problem.d)
    pos = sorted([o["position"] for o in pred.outliers if o["position"] > top + m], reverse=True)
    return len(pos), pos


def law_samples(problem: Problem, eta: float, delta: float, eps: float, draws: int, seed: int = 0) -> list[np.ndarray]:
    """Eigenvalues of ``eta ReLU(S0 + delta Z - eps)`` at this d (the theory's law at finite d)."""
    rng = np.random.default_rng(seed)
    d = problem.d
    out = []
    for k in range(draws):
        S0 = problem.target.sample(d, 1000 + k).numpy()
        G = rng.standard_normal((d, d))
        Z = (G + G.T) / np.sqrt(2 * d)
        out.append(eta * np.maximum(np.linalg.eigvalsh(S0 + delta * Z) - eps, 0.0))
    return out


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else float("nan")


def main(
    quick: bool = False, *, seeds: int = 8, cases: tuple[str, ...] = tuple(CASES), cache: str | Path | None = None
) -> int:
    """Fit every case's pooled and per-seed spectra and print the tables; 0."""
    lines: list[str] = []

    say = echo_into(lines)

    if quick:
        seeds, cases = 2, ("mp_a0.5",)
    bad = [c for c in cases if c not in CASES]
    if bad:
        raise ValueError(f"cases must be among {list(CASES)} (got {bad})")
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    torch.set_num_threads(1)
    rows = []
    for label in cases:
        problem, prior, shape = CASES[label]
        th = theory(problem)
        se = {k: float(th.extras[k]) for k in ("eta", "delta", "eps")}
        n_th, pos_th = theory_outliers(problem, th, prior, shape)
        sources = {
            "students": student_eigenvalues(label, problem, seeds, store),
            "theory law (finite d)": law_samples(problem, se["eta"], se["delta"], se["eps"], seeds),
        }
        for src, evs in sources.items():
            for fixed in (True, False):
                t0 = time.perf_counter()
                f = fit_spectrum(np.concatenate(evs), problem.d, prior=prior, shape=shape if fixed else None)
                t_fit = time.perf_counter() - t0
                per = [fit_spectrum(e, problem.d, prior=prior, shape=shape if fixed else None) for e in evs]
                spread = {k: float(np.std([getattr(p, k) for p in per], ddof=1)) for k in ("eta", "delta", "eps")}
                n_out = [p.n_outliers for p in per]
                rows.append((label, src, "fixed" if fixed else "fitted", f, se, spread, n_out, n_th, pos_th, t_fit))
    say()
    say(
        "| case | eigenvalues | mu0 shape | eta fit (SE) | delta fit (SE) | eps fit (SE) | shape fit | "
        "per-seed sd eta/delta/eps | z eta/delta/eps | outliers per seed (theory) | KS | all within 10% |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, src, mode, f, se, sp, n_out, n_th, pos_th, t_fit in rows:
        r = {k: rel(getattr(f, k), se[k]) for k in ("eta", "delta", "eps")}
        ok = all(abs(v) <= 0.10 for v in r.values()) and all(n == n_th for n in n_out)
        # z: (pooled fit - SE) / (per-seed sd / sqrt(seeds)), the gap in standard errors of the pooled fit
        z = [
            (getattr(f, k) - se[k]) / (sp[k] / np.sqrt(len(n_out))) if sp[k] > 0 else float("nan")
            for k in ("eta", "delta", "eps")
        ]
        say(
            f"| {label} | {src} | {mode} | {f.eta:.4f} ({se['eta']:.4f}, {r['eta']:+.1%}) | "
            f"{f.delta:.4f} ({se['delta']:.4f}, {r['delta']:+.1%}) | {f.eps:.4f} ({se['eps']:.4f}, {r['eps']:+.1%}) | "
            f"{f.shape:.3f} | {sp['eta']:.3f}/{sp['delta']:.3f}/{sp['eps']:.4f} | "
            f"{z[0]:+.1f}/{z[1]:+.1f}/{z[2]:+.1f} | {n_out} ({n_th}) | "
            f"{f.ks:.3f} | {'yes' if ok else 'NO'} |"
        )
    say()
    for label, src, mode, f, se, sp, n_out, n_th, pos_th, t_fit in rows:
        if src == "students" and mode == "fixed" and n_th:
            meas = [round(o["position"], 3) for o in f.outliers]
            pred = [round(p, 3) for p in f.extras["predicted_outliers"]]
            say(
                f"{label}: theory (SE) outlier positions {np.round(pos_th, 3).tolist()}; fitted law's "
                f"{pred}; measured (pooled) {meas}"
            )

    if not quick:
        write_table(HERE, lines)
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="the case mp_a0.5 with 2 seeds")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/inspect_ground_truth)")
    a = ap.parse_args(argv)
    return main(a.quick, seeds=a.seeds, cases=tuple(a.cases.split(",")), cache=a.cache)


if __name__ == "__main__":
    raise SystemExit(cli())
