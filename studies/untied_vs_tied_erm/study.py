"""Tied vs untied student by ERM on a tied or untied teacher: test error, asymmetry and overlaps (README.md).

Setting: ``T = 2``, seq2lab, noise ``Delta = 0.5``, teacher of rank ratio ``kappa0 = 0.5``, tied
(``MPTarget``) or untied (``UntiedMPTarget``, ``--teacher untied``), ``kappa = 1``;
points ``(alpha, lam)``: ``(1, 1e-2)``, ``(0.5, 1e-2)``, ``(2, 1e-2)``, ``(1, 1e-4)``, ``(1, 1)``.
Each (point, student) is trained on the same seeds (same teacher and data for both students),
in float64. Printed per point: mean test error (noiseless labels) with its standard error over
seeds, the untied/tied ratio, the untied ``M``'s asymmetry ``||M - M^T||_F/||M||_F`` and the
split ``q_s, q_a, m_s`` of :func:`singlehead.sim.overlaps.overlaps`. Results go to
``results/untied_vs_tied_erm.json`` (``..._untied_teacher.json`` for the untied teacher).
``--quick``: d = 20, 2 seeds, the first two points, written to ``runs/studies/untied_vs_tied_erm-quick``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from singlehead import MPTarget, Problem, TrainOptions, UntiedMPTarget, simulate
from studies import study_parser

HERE = Path(__file__).resolve().parent
POINTS = [(1.0, 1e-2), (0.5, 1e-2), (2.0, 1e-2), (1.0, 1e-4), (1.0, 1.0)]
KEYS = ("test_error", "train_error", "asymmetry", "q", "q_s", "q_a", "m_s", "m_a", "rank_fraction", "objective")


def _mean_se(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n) if n > 1 else math.nan
    return m, se


def main(
    quick: bool = False,
    *,
    seeds: int = 4,
    d: int = 40,
    optimizer: str = "lbfgs",
    teacher: str = "tied",
    out: str | Path | None = None,
) -> int:
    """Train both students at every point, print the rows and write them to ``out`` (JSON); 0."""
    if optimizer not in ("lbfgs", "adam") or teacher not in ("tied", "untied"):
        raise ValueError(
            f"optimizer must be 'lbfgs' or 'adam' and teacher 'tied' or 'untied' (got {optimizer!r}, {teacher!r})"
        )
    points = POINTS[:2] if quick else POINTS
    if quick:
        seeds, d = 2, 20
    suffix = "" if teacher == "tied" else "_untied_teacher"
    folder = Path("runs", "studies", HERE.name + "-quick") if quick else HERE / "results"
    out = out or folder / f"untied_vs_tied_erm{suffix}.json"
    target = MPTarget(0.5) if teacher == "tied" else UntiedMPTarget(0.5)

    opts = TrainOptions(optimizer=optimizer, precision="float64")
    rows = []
    for alpha, lam in points:
        row: dict = {"alpha": alpha, "lam": lam}
        for student in ("factorized", "untied"):
            problem = Problem(
                d=d, T=2, alpha=alpha, channel="seq2lab", noise=0.5, lam=lam, target=target, student=student, kappa=1.0
            )
            t0 = time.perf_counter()
            runs = [simulate(problem, seed=s, options=opts) for s in range(seeds)]
            stats = {k: _mean_se([float(r[k]) for r in runs]) for k in KEYS}
            stats["converged"] = sum(bool(r.converged) for r in runs)
            stats["seconds_per_run"] = (time.perf_counter() - t0) / seeds
            row[student] = stats
        ratio = row["untied"]["test_error"][0] / row["factorized"]["test_error"][0]
        row["ratio"] = ratio
        rows.append(row)
        t, u = row["factorized"], row["untied"]
        print(
            f"alpha={alpha:g} lam={lam:g}: tied {t['test_error'][0]:.5f}({t['test_error'][1]:.5f}) "
            f"untied {u['test_error'][0]:.5f}({u['test_error'][1]:.5f}) ratio {ratio:.2f}; "
            f"asym {u['asymmetry'][0]:.3f}({u['asymmetry'][1]:.3f}) q_s {u['q_s'][0]:.3f} q_a {u['q_a'][0]:.3f} "
            f"m_s {u['m_s'][0]:.3f} (tied q {t['q'][0]:.3f} m_s {t['m_s'][0]:.3f}); "
            f"converged {t['converged']}/{u['converged']} of {seeds}; "
            f"{t['seconds_per_run']:.1f}/{u['seconds_per_run']:.1f} s per run",
            flush=True,
        )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(
        json.dumps(
            {
                "d": d,
                "T": 2,
                "seeds": seeds,
                "optimizer": optimizer,
                "teacher": teacher,
                "threads": os.environ.get("OMP_NUM_THREADS"),
                "rows": rows,
            },
            indent=1,
        )
    )

    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 20, 2 seeds, two points; writes no results")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--d", type=int, default=40)
    ap.add_argument("--optimizer", choices=["lbfgs", "adam"], default="lbfgs")
    ap.add_argument("--teacher", choices=["tied", "untied"], default="tied")
    ap.add_argument(
        "--out", default=None, help="the JSON file (default results/untied_vs_tied_erm[_untied_teacher].json)"
    )
    a = ap.parse_args(argv)
    return main(a.quick, seeds=a.seeds, d=a.d, optimizer=a.optimizer, teacher=a.teacher, out=a.out)


if __name__ == "__main__":
    raise SystemExit(cli())
