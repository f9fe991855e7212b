"""Start-up: one ``singlehead theory`` point from the shell, end to end, and where its imports go.

Runs ``python -m singlehead theory --alpha 1`` (softmax seq2lab, T = 2, MP target: the defaults)
``--repeat`` times in fresh processes and prints the median wall and CPU seconds, next to the
reference workload (5 x numpy 1000x1000 float64 matmul) timed in the same run, before and after.
The first run fills the quadrature-node cache (see :mod:`singlehead.state_evolution.quadrature`)
and is reported apart. Then one more run under ``python -X importtime`` gives the import-time
breakdown: the top-level imports by cumulative time, the packages by their own time, and whether
a module the point should never load (SciPy's stats/optimize/integrate, torch, pandas,
matplotlib, joblib) was imported. Target: a median wall <= 0.4 s on 2 cores.

    python benchmarks/bench_startup.py [--repeat 5] [--top 12]
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import subprocess
import sys
import time

from singlehead.runs import reference_seconds

CMD = [sys.executable, "-m", "singlehead", "theory", "--alpha", "1"]
NEVER = ("scipy.stats", "scipy.optimize", "scipy.integrate", "torch", "pandas", "matplotlib", "joblib")
TARGET_S = 0.4


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU (user + system) seconds of ``cmd`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def parse_importtime(stderr: str) -> list[tuple[int, str, float, float]]:
    """``(depth, module, self ms, cumulative ms)`` per line of ``-X importtime`` output."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((depth, name.strip(), int(self_us) / 1e3, int(cum_us) / 1e3))
    return rows


def group(module: str) -> str:
    """The package a module's own time is counted under (singlehead and scipy by subpackage)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("singlehead", "scipy") else parts[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=12, help="rows of each import table")
    args = ap.parse_args()
    ref_start = reference_seconds()
    print(f"reference: 5 x 1000^3 float64 matmul = {ref_start:.3f} s")
    first = timed(CMD)
    print(f"first run (may fill the node cache):  wall {first[0]:.2f} s  cpu {first[1]:.2f} s")
    runs = [timed(CMD) for _ in range(args.repeat)]
    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
    ref_end = reference_seconds()
    print(
        f"{' '.join(CMD[1:])}: wall median {statistics.median(walls):.3f} s (min {min(walls):.3f}, "
        f"max {max(walls):.3f}, {args.repeat} runs)  cpu median {statistics.median(cpus):.3f} s  "
        f"target <= {TARGET_S} s"
    )
    print(f"reference workload at start / end: {ref_start:.3f} s / {ref_end:.3f} s")

    wall, _, out = timed([sys.executable, "-X", "importtime", *CMD[1:]])
    rows = parse_importtime(out.stderr)
    total = sum(r[2] for r in rows)
    print(f"\nimport time (python -X importtime, one run of {wall:.2f} s wall): {total:.0f} ms in {len(rows)} modules")
    print("  top-level imports by cumulative time (ms):")
    for depth, name, _, cum in sorted((r for r in rows if r[0] == 0), key=lambda r: -r[3])[: args.top]:
        print(f"    {cum:8.1f}  {name}")
    own: collections.Counter[str] = collections.Counter()
    for _, name, self_ms, _ in rows:
        own[group(name)] += self_ms
    print("  packages by their own import time (ms):")
    for name, ms in own.most_common(args.top):
        print(f"    {ms:8.1f}  {name}")
    loaded = sorted({r[1] for r in rows} & set(NEVER))
    print(f"  modules a theory point should not load: {', '.join(loaded) if loaded else 'none loaded'}")


if __name__ == "__main__":
    main()
