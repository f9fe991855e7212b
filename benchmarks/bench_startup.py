"""Start-up: one ``singlehead theory`` point from the shell, end to end (issue 13, item 2).

Runs ``singlehead theory --alpha 0.5 --T 2`` (softmax seq2lab, MP target) ``--repeat`` times
in fresh processes and prints the wall and CPU seconds of each, next to a reference workload
timed in the same run (5 x numpy 1000x1000 float64 matmul), and the import time of the CLI.
The first run fills the quadrature-node cache (see
:mod:`singlehead.state_evolution.quadrature`) and is reported apart. Target: <= 1.5 s.

    python benchmarks/bench_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np
from _reference import reference_seconds  # benchmarks/ is on sys.path when run as a script


def timed(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    exe = shutil.which("singlehead")
    cli = [exe] if exe else [sys.executable, "-c", "from singlehead.cli import main; main()"]
    print(f"reference: 5 x 1000^3 float64 matmul = {reference_seconds():.3f} s")
    w, c = timed([sys.executable, "-c", "import singlehead.cli.theory"])
    print(f"import singlehead.cli.theory:           wall {w:.2f} s  cpu {c:.2f} s")
    first = timed(cli + ["theory", "--alpha", "0.5", "--T", "2"])
    print(f"first run (may fill the node cache):    wall {first[0]:.2f} s  cpu {first[1]:.2f} s")
    runs = [timed(cli + ["theory", "--alpha", "0.5", "--T", "2"]) for _ in range(args.repeat)]
    walls, cpus = np.array([r[0] for r in runs]), np.array([r[1] for r in runs])
    print(f"singlehead theory --alpha 0.5 --T 2:    wall median {np.median(walls):.2f} s (min {walls.min():.2f})  "
          f"cpu median {np.median(cpus):.2f} s   target <= 1.5 s")
    print(f"reference again: {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()
