"""Gallery examples: wall and CPU seconds of each ``examples/plot_*.py``, one thread each.

The documentation build executes every example; each must finish in 60 s on 2 cores. This runs
them one after another in fresh processes with ``OMP_NUM_THREADS=1`` and a headless matplotlib
back end, and prints wall and CPU seconds of each next to a reference workload timed in the same
run (5 x numpy 1000x1000 float64 matmul), so that numbers from machines of different speed, or
from a loaded machine (wall far above CPU), can be compared.

    python benchmarks/bench_gallery.py [--only thresholds]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from singlehead.runs import reference_seconds

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BUDGET_S = 60.0


def timed(path: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one example run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(path)], check=True, capture_output=True, env=env, cwd=path.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="Run only examples whose file name contains this text.")
    args = parser.parse_args()
    paths = sorted(p for p in EXAMPLES.glob("plot_*.py") if args.only in p.name)
    print(f"reference workload (5 x 1000x1000 matmul): {reference_seconds():.3f} s")
    total_wall = total_cpu = 0.0
    for path in paths:
        wall, cpu = timed(path)
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        flag = "" if wall <= BUDGET_S else f"  over the {BUDGET_S:.0f} s budget"
        print(f"{path.name:34s} wall {wall:6.1f} s   cpu {cpu:6.1f} s{flag}")
    print(f"{'total':34s} wall {total_wall:6.1f} s   cpu {total_cpu:6.1f} s")
    print(f"reference workload (again):                {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
