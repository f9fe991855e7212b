"""The power-law figure's in-process theory curves, one by one.

Times, on one thread and next to the reference workload of the same run (5 x numpy 1000x1000
float64 matmul), each curve the quick report's ``power_law`` figure computes through
``Context.cached_many``: the sequential-recovery pieces (d = 1000), the phase-diagram rows
(d = 1000, one per lam), the scaling curves and the tail-noise curve (d = 10^5, spiked prior with
up to ~7*10^4 spikes). Prints the per-curve wall time and the total CPU of the figure's curves.

    OMP_NUM_THREADS=1 python benchmarks/bench_power_law_curves.py [--mode quick|smoke]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any

from singlehead.figures import figspec
from singlehead.figures.figspec import FIGURES, Context, Preset, build
from singlehead.runs import Cache, reference_seconds


class _Timed(Exception):
    """Raised once every curve is timed: the rest of the figure (plots) is not needed."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="quick", choices=["quick", "smoke"])
    args = ap.parse_args()
    import singlehead.figures.reproduce  # noqa: F401  (registers the figures)

    r0 = reference_seconds()
    print(f"reference workload: {r0:.3f} s", flush=True)
    total = [0.0]

    def timed(self: Context, tasks: dict[str, Callable[[], Any]], desc: str = "") -> dict[str, Any]:
        for name, compute in tasks.items():
            t = time.perf_counter()
            compute()
            dt = time.perf_counter() - t
            total[0] += dt
            print(f"{dt:8.2f} s  {name}", flush=True)
        raise _Timed

    figspec.Context.cached_many = timed  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(cache=Cache(tmp), n_jobs=1, progress=False)
        try:
            build(FIGURES["power_law"], ctx, Preset.named(args.mode).spec("power_law"))
        except _Timed:
            pass
    print(
        f"total {total[0]:.1f} s of curves (one thread); reference workload {r0:.3f} s -> {reference_seconds():.3f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
