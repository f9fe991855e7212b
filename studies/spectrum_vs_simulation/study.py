"""Predicted learned spectrum against trained students (README.md).

Problem: seq2lab, T = 2, MP target kappa0 = 0.5, Delta = 0.5, lam = 0.01, factorized student
with kappa = 1, L-BFGS (:func:`singlehead.simulate`). For each alpha the eigenvalues of the
trained S are pooled over seeds and compared with :func:`singlehead.analysis.learned_spectrum`
(state evolution at the same parameters): KS distance and zero-atom mass. Acceptance: KS < 0.05,
|zero atom difference| < 0.02. The eigenvalues of each fit are cached in the result cache, so a
rerun only redoes the comparison. ``--quick``: alpha = 0.5 at d = 60, 2 seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from singlehead import MPTarget, Problem, TrainOptions, simulate, theory
from singlehead.analysis import compare_spectrum, learned_spectrum, plot_spectrum_comparison, spectrum_table
from singlehead.runs import Cache, cached
from studies import study_parser

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RUNS = ("0.5:200:8", "4:200:8")


def student_eigenvalues(cache: Cache, problem: Problem, seed: int) -> dict:
    """Eigenvalues of the S trained by ``simulate(problem, seed)`` and the fit's runtime (cached)."""

    def fit() -> dict:
        r = simulate(problem, seed, options=TrainOptions(n_test=2000))
        print(
            f"  alpha={problem.alpha:g} d={problem.d} seed={seed}: {r.runtime_s:.0f} s, steps={r.iterations}",
            flush=True,
        )
        return {
            "eigenvalues": np.asarray(r.extras["eigenvalues"]).tolist(),
            "runtime_s": r.runtime_s,
            "test_error": r.test_error,
            "matrix_error": r.matrix_error,
        }

    return cached(cache, {"stage": "spectrum-fit", "problem": problem.to_dict(), "seed": seed, "n_test": 2000}, fit)


def main(
    quick: bool = False,
    *,
    runs: tuple[str, ...] = RUNS,
    threads: int = 1,
    cache: str | Path | None = None,
    out: str | Path | None = None,
) -> int:
    """Compare each ``ALPHA:D:SEEDS`` run; print the table, write figures and tables into ``out`` (default
    ``results/``; with ``quick`` the cache directory). 0 when every row passes."""
    torch.set_num_threads(threads)
    if quick:
        runs = ("0.5:60:2",)
    root = Path(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    store = Cache(root)
    out = Path(out or (root if quick else RESULTS))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in runs:
        a, d, k = spec.split(":")
        alpha, d, n_seeds = float(a), int(d), int(k)
        problem = Problem(d=d, T=2, alpha=alpha, channel="seq2lab", noise=0.5, lam=0.01, target=MPTarget(0.5))
        fits = [student_eigenvalues(store, problem, seed) for seed in range(n_seeds)]
        ev = np.concatenate([np.asarray(f["eigenvalues"]) for f in fits])
        t_sim = sum(f["runtime_s"] for f in fits)
        t0 = time.perf_counter()
        pred = learned_spectrum(problem, theory(problem))
        t_th = time.perf_counter() - t0
        cmp = compare_spectrum(problem, ev, prediction=pred, n_runs=n_seeds)
        plot_spectrum_comparison(pred, ev, str(out / f"spectrum_a{alpha:g}_d{d}.png"))
        spectrum_table(pred, ev).to_csv(out / f"spectrum_a{alpha:g}_d{d}.csv", index=False)
        rows.append((alpha, d, n_seeds, cmp, t_sim, t_th, len(pred.bulks)))
    lines = [
        "| alpha | d | seeds | KS | zero atom theory | zero atom sim | |diff| | bulks | top edge th/sim | "
        "sim CPU s | theory s | pass |",
        "|---" * 12 + "|",
    ]
    all_ok = True
    for alpha, d, k, c, ts, tt, nb in rows:
        diff = abs(c["zero_atom_theory"] - c["zero_atom_sim"])
        ok = c["ks"] < 0.05 and diff < 0.02
        all_ok &= ok
        lines.append(
            f"| {alpha:g} | {d} | {k} | {c['ks']:.4f} | {c['zero_atom_theory']:.4f} | {c['zero_atom_sim']:.4f} | "
            f"{diff:.4f} | {nb} | {c['top_theory']:.3f}/{c['top_sim']:.3f} | {ts:.0f} | {tt:.1f} | "
            f"{'yes' if ok else 'NO'} |"
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    (out / "table.md").write_text(text)
    return 0 if all_ok else 1


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="alpha = 0.5, d = 60, 2 seeds; writes no results")
    ap.add_argument(
        "--runs", action="append", default=None, help="ALPHA:D:SEEDS (repeatable; default 0.5:200:8, 4:200:8)"
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/spectrum_vs_simulation)")
    ap.add_argument("--out", default=None, help="figures and tables (default results/)")
    a = ap.parse_args(argv)
    return main(a.quick, runs=tuple(a.runs or RUNS), threads=a.threads, cache=a.cache, out=a.out)


if __name__ == "__main__":
    raise SystemExit(cli())
