"""Perfect recovery of the untied student at T = 2: minimum-nuclear-norm recovery from the model's own label
equations, recovery probability against alpha at d = 30, 40, 60 (README.md).

Each instance: an MP teacher ``S0`` (``kappa0 = 0.5``), ``n = alpha d^2`` sequences, the ``2 n`` noiseless
row-difference equations of the softmax labels, ``min ||M||_*`` subject to them
(:func:`singlehead.numerics.nuclear_recovery.min_nuclear_norm`); recovered when
``||M - S0||_F < 1e-3 ||S0||_F``. The 50 % point per ``d`` (linear interpolation of the recovered
fraction across its crossing of 1/2) is compared with
:func:`singlehead.untied_perfect_recovery_threshold` and with the isotropic statistical dimension
``psi(kappa0)/2``. ``--quick``: d = 30, 3 instances, writes nothing.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, untied_perfect_recovery_threshold
from singlehead.numerics.nuclear_recovery import min_nuclear_norm, nuclear_statistical_dimension
from singlehead.runs import reference_seconds
from studies import study_parser, write_table
from studies.untied_recovery_threshold.instances import mp_teacher, row_difference_measurements, t2_measurements
from studies.untied_recovery_threshold.interpolation import measure

HERE = Path(__file__).resolve().parent

KAPPA0 = 0.5
SUCCESS_RTOL = 1e-3
GRIDS = {
    30: (0.32, 0.36, 0.38, 0.40, 0.41, 0.42, 0.43, 0.44, 0.46, 0.50),
    40: (0.34, 0.37, 0.39, 0.41, 0.42, 0.425, 0.43, 0.45, 0.48),
    60: (0.40, 0.41, 0.42, 0.425, 0.43, 0.44, 0.46),
}
INSTANCES = {30: 10, 40: 6, 60: 2}
GRIDS_T3 = {30: (0.125, 0.135, 0.14, 0.145, 0.15, 0.16), 40: (0.135, 0.14, 0.1425, 0.145, 0.15)}
INSTANCES_T3 = {30: 4, 40: 3}


def run_d(
    d: int, alphas: tuple[float, ...], instances: int, *, done: list[dict] | None = None, T: int = 2
) -> list[dict]:
    """One record per (alpha, instance): relative error, iterations, seconds; the records in ``done`` are kept
    and not recomputed."""
    out = list(done or [])
    have = {(r["alpha"], r["instance"]) for r in out}
    for a in alphas:
        for i in range(instances):
            if (a, i) in have:
                continue
            rng = np.random.default_rng([d, int(round(1e4 * a)), i] if T == 2 else [T, d, int(round(1e4 * a)), i])
            M0 = mp_teacher(d, KAPPA0, rng)
            n = int(round(a * d * d))
            A, b = t2_measurements(M0, n, rng) if T == 2 else row_difference_measurements(M0, n, T, rng)
            t = time.perf_counter()
            sol = min_nuclear_norm(A, b, (d, d), tol=1e-7, max_iter=8000)
            err = float(np.linalg.norm(sol.X - M0) / np.linalg.norm(M0))
            out.append(
                dict(
                    T=T,
                    d=d,
                    alpha=a,
                    instance=i,
                    rel_error=err,
                    iterations=sol.iterations,
                    converged=sol.converged,
                    seconds=time.perf_counter() - t,
                )
            )
            print(f"T={T} d={d} alpha={a:.4f} instance={i} rel_error={err:.2e} iterations={sol.iterations}", flush=True)
    return out


def fractions(records: list[dict]) -> tuple[list[float], list[float]]:
    """The grid of ``alpha`` and the recovered fraction at each."""
    alphas = sorted({r["alpha"] for r in records})
    return alphas, [float(np.mean([r["rel_error"] < SUCCESS_RTOL for r in records if r["alpha"] == a])) for a in alphas]


def point_50(records: list[dict]) -> tuple[float, float, float]:
    """``(lo, hi, a50)``: the grid points around the first crossing of 1/2 by the recovered fraction, and the
    linear interpolation of the fraction between them."""
    alphas, frac = fractions(records)
    for k in range(1, len(alphas)):
        if frac[k - 1] < 0.5 <= frac[k]:
            lo, hi = alphas[k - 1], alphas[k]
            return lo, hi, lo + (hi - lo) * (0.5 - frac[k - 1]) / (frac[k] - frac[k - 1])
    return math.nan, math.nan, math.nan


def report(ds: list[int]) -> list[str]:
    """The table from the stored records of each ``d``, and the figure ``results/recovery.png``."""
    new = untied_perfect_recovery_threshold(Problem(T=2, student="untied", target=MPTarget(KAPPA0)))
    old = nuclear_statistical_dimension(KAPPA0) / 2
    lines = [
        f"T = 2, seq2lab, MP teacher kappa0 = {KAPPA0}; success: ||M - S0||_F < {SUCCESS_RTOL} ||S0||_F",
        "",
        f"derived threshold (untied_perfect_recovery_threshold): {new:.4f}; isotropic psi(kappa0)/2: {old:.4f}",
        "",
        "| d | instances per alpha | last alpha below 50 % | first alpha at or above 50 % | 50 % point (linear) |",
        "|---|---|---|---|---|",
    ]
    curves = {}
    for d in ds:
        recs = json.loads((HERE / "results" / f"recovery_d{d}.json").read_text())["records"]
        lo, hi, a50 = point_50(recs)
        alphas, frac = fractions(recs)
        curves[d] = (alphas, frac, a50)
        per = len(recs) // len(alphas)
        lines.append(f"| {d} | {per} | {lo:.3f} | {hi:.3f} | {a50:.4f} |")
    lines += ["", "Recovery fractions:", ""]
    for d, (alphas, frac, _) in curves.items():
        lines.append(f"d = {d}: " + ", ".join(f"{a:.3f}: {f:.2f}" for a, f in zip(alphas, frac)))
    t3 = sorted(HERE.glob("results/recovery_T3_d*.json"))
    if t3:
        new3 = untied_perfect_recovery_threshold(Problem(T=3, student="untied", target=MPTarget(KAPPA0)))
        lines += [
            "",
            f"T = 3 (six row differences per sequence): derived {new3:.4f}, isotropic psi(kappa0)/6 = "
            f"{nuclear_statistical_dimension(KAPPA0) / 6:.4f}",
            "",
            "| d | instances per alpha | last alpha below 50 % | first alpha at or above 50 % | 50 % point (linear) |",
            "|---|---|---|---|---|",
        ]
        for path in t3:
            recs = json.loads(path.read_text())["records"]
            lo, hi, a50 = point_50(recs)
            alphas, frac = fractions(recs)
            lines.append(f"| {recs[0]['d']} | {len(recs) // len(alphas)} | {lo:.4f} | {hi:.4f} | {a50:.4f} |")
        for path in t3:
            recs = json.loads(path.read_text())["records"]
            alphas, frac = fractions(recs)
            lines.append(
                f"\nT = 3, d = {recs[0]['d']}: " + ", ".join(f"{a:.4f}: {f:.2f}" for a, f in zip(alphas, frac))
            )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for d, (alphas, frac, _) in curves.items():
            ax.plot(alphas, frac, "o-", label=f"d = {d}")
        ax.axvline(new, color="k", ls="-", label=f"derived {new:.3f}")
        ax.axvline(old, color="k", ls="--", label=f"isotropic {old:.3f}")
        ax.set_xlabel("alpha = n/d^2")
        ax.set_ylabel("recovery probability")
        ax.legend()
        fig.tight_layout()
        fig.savefig(HERE / "results" / "recovery.png", dpi=120)
    except ImportError:  # pragma: no cover
        pass
    return lines


def main(
    quick: bool = False,
    *,
    ds: tuple[int, ...] = (30, 40, 60),
    t3_ds: tuple[int, ...] = (30, 40),
    only_report: bool = False,
) -> int:
    """Run the instances of each ``d`` (stored in ``results/recovery_d<d>.json``), then print and write the
    table; 0 when every 50 % point lies below the isotropic value ``psi(kappa0)/2``."""
    if quick:
        recs = run_d(30, GRIDS[30], 3)
        print(f"d = 30, 3 instances: 50 % point {point_50(recs)[2]:.4f}")
        return 0
    if not only_report:
        for d in ds:
            ref = reference_seconds()
            path = HERE / "results" / f"recovery_d{d}.json"
            stored = json.loads(path.read_text()) if path.exists() else {}
            recs = run_d(d, GRIDS[d], INSTANCES[d], done=stored.get("records"))
            (HERE / "results").mkdir(exist_ok=True)
            path.write_text(
                json.dumps(dict(reference_seconds=stored.get("reference_seconds", []) + [ref], records=recs), indent=1)
            )
        for d in t3_ds:
            ref = reference_seconds()
            path = HERE / "results" / f"recovery_T3_d{d}.json"
            stored = json.loads(path.read_text()) if path.exists() else {}
            recs = run_d(d, GRIDS_T3[d], INSTANCES_T3[d], done=stored.get("records"), T=3)
            path.write_text(
                json.dumps(dict(reference_seconds=stored.get("reference_seconds", []) + [ref], records=recs), indent=1)
            )
    stored = sorted(int(p.stem.split("_d")[1]) for p in (HERE / "results").glob("recovery_d*.json"))
    lines = report(stored)
    print("\n".join(lines))
    write_table(HERE, lines)
    old = nuclear_statistical_dimension(KAPPA0) / 2
    return (
        0
        if all(
            point_50(json.loads((HERE / "results" / f"recovery_d{d}.json").read_text())["records"])[2] < old
            for d in stored
        )
        else 1
    )


INTERP_CASES = (
    (20, 0.5, (0.30, 0.34, 0.36, 0.37, 0.375, 0.38, 0.40)),
    (20, 0.25, (0.16, 0.19, 0.205, 0.21875, 0.23, 0.26)),
    (24, 0.5, (0.34, 0.36, 0.375, 0.39)),
)


def interpolation(instances: int = 4) -> list[str]:
    """The rank-capped interpolation check (``interpolation.py``): table ``results/interpolation.md``."""
    ref = reference_seconds()
    lines = [
        "Rank-capped untied student, T = 2, noisy labels (noise 0.5 per equation): smallest relative residual",
        "of Levenberg-Marquardt on M = P Q^T (3 starts); interpolated when below 1e-8.",
        f"reference_seconds = {ref:.3f} (shared machine)",
        "",
        "| d | kappa | count kappa (2 - kappa)/2 | alpha | 2n / (p (2d - p)) | interpolated | median residual |",
        "|---|---|---|---|---|---|---|",
    ]
    for d, kappa, alphas in INTERP_CASES:
        recs = measure(d, kappa, alphas, instances)
        p = int(round(kappa * d))
        for a in alphas:
            res = [r["residual"] for r in recs if r["alpha"] == a]
            n = int(round(a * d * d))
            lines.append(
                f"| {d} | {kappa} | {kappa * (2 - kappa) / 2:.4f} | {a} | {2 * n / (p * (2 * d - p)):.3f} | "
                f"{sum(x < 1e-8 for x in res)}/{len(res)} | {float(np.median(res)):.1e} |"
            )
    (HERE / "results" / "interpolation.md").write_text("\n".join(lines) + "\n")
    return lines


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 30, 3 instances; writes no results")
    ap.add_argument(
        "--d",
        type=int,
        nargs="*",
        default=[30, 40, 60],
        choices=sorted(GRIDS),
        help="sizes of the T = 2 curves (none: skip them)",
    )
    ap.add_argument(
        "--t3-d",
        type=int,
        nargs="*",
        default=[30, 40],
        choices=sorted(GRIDS_T3),
        help="sizes of the T = 3 check (none: skip it)",
    )
    ap.add_argument("--report", action="store_true", help="only rebuild the table and figure from stored results")
    ap.add_argument("--interpolation", action="store_true", help="the rank-capped interpolation check only")
    a = ap.parse_args(argv)
    if a.interpolation:
        print("\n".join(interpolation()))
        return 0
    return main(a.quick, ds=tuple(a.d), t3_ds=tuple(a.t3_d), only_report=a.report)


if __name__ == "__main__":
    raise SystemExit(cli())
