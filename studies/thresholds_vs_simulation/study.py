"""Train and test error around alpha_interp and alpha_perfect: theory (lam -> 0+) against simulation (README.md).

With label noise the training error is exactly zero for alpha < alpha_interp and positive above
(the test error peaks there); noiseless, the test error reaches zero at alpha_perfect.
Simulations at d = 60, lam = 1e-4 (L-BFGS), 3 seeds, at 0.5, 0.8, 1.25 and 2 times each
threshold. ``--quick``: d = 30, 2 seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, interpolation_threshold, perfect_recovery_threshold
from singlehead.runs import Cache, Job, run_jobs
from studies import study_parser, write_table

HERE = Path(__file__).resolve().parent
RATIOS = (0.5, 0.8, 1.25, 2.0)


def main(
    quick: bool = False,
    *,
    d: int = 60,
    seeds: int = 3,
    lam: float = 1e-4,
    jobs: int = 2,
    cache: str | Path | None = None,
) -> int:
    """Print the two tables (written to ``results/table.md`` unless ``quick``); 0 when the training error
    vanishes below alpha_interp (under a tenth of its value above) and the noiseless test error falls tenfold
    from 0.5 to 2 alpha_perfect."""
    if quick:
        d, seeds = 30, 2
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    base = dict(d=d, T=2, lam=lam, target=MPTarget(0.5), channel="seq2lab", kappa=1.0)
    a_int = interpolation_threshold(Problem(noise=0.5, **base))
    a_perf = perfect_recovery_threshold(Problem(noise=0.0, **base))
    lines = [
        f"T=2, kappa0=0.5, lam={lam}, d={d}, {seeds} seeds: "
        f"alpha_interp(Delta=0.5) = {a_int:.4f}, alpha_perfect(Delta=0) = {a_perf:.4f}"
    ]
    print(lines[0])
    ok = True
    for noise, ref, name in ((0.5, a_int, "alpha_interp"), (0.0, a_perf, "alpha_perfect")):
        problems = [Problem(alpha=float(round(r * ref, 5)), noise=noise, **base) for r in RATIOS]
        settings = (("n_test", 5000), ("optimizer", "lbfgs"))
        sims = run_jobs(
            [Job("simulation", p, s, settings) for p in problems for s in range(seeds)],
            store,
            n_jobs=jobs,
            desc=f"simulations around {name}",
        )
        ths = run_jobs([Job("theory", p) for p in problems], store, n_jobs=jobs, desc="theory")
        mean = lambda i, k: float(np.mean([x[k] for x in sims[i * seeds : (i + 1) * seeds]]))  # noqa: E731
        lines += [
            "",
            f"Delta={noise}: around {name} = {ref:.4f}",
            "",
            f"| alpha/{name} | alpha | train th | train sim | test th | test sim |",
            "|---|---|---|---|---|---|",
        ]
        for i, (r, p, th) in enumerate(zip(RATIOS, problems, ths)):
            lines.append(
                f"| {r} | {p.alpha:.4f} | {th['train_error']:.2e} | {mean(i, 'train_error'):.2e} | "
                f"{th['test_error']:.4f} | {mean(i, 'test_error'):.4f} |"
            )
        if noise > 0:
            ok &= max(mean(i, "train_error") for i in (0, 1)) < 0.1 * min(mean(i, "train_error") for i in (2, 3))
        else:
            ok &= mean(3, "test_error") < 0.1 * mean(0, "test_error")
        print("\n".join(lines[-(len(RATIOS) + 5) :]), flush=True)
    lines += [
        "",
        f"train error vanishes below alpha_interp, test error vanishes past alpha_perfect: {'yes' if ok else 'NO'}",
    ]
    print(lines[-1])
    if not quick:
        write_table(HERE, lines)
    return 0 if ok else 1


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 30, 2 seeds; writes no results")
    ap.add_argument("--d", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lam", type=float, default=1e-4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/thresholds_vs_simulation)")
    a = ap.parse_args(argv)
    return main(a.quick, d=a.d, seeds=a.seeds, lam=a.lam, jobs=a.jobs, cache=a.cache)


if __name__ == "__main__":
    raise SystemExit(cli())
