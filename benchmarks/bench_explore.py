"""The explorer through a real browser: time from a change of lam to its first point and to its whole curve on screen.

Starts ``singlehead explore --no-browser --cache-dir off`` (nothing cached across runs), opens the page
in Debian's headless Chromium (playwright; ``$SINGLEHEAD_CHROMIUM`` or ``chromium`` on the PATH), loads
the default view (T = 2 seq2lab, MP kappa0 = 0.5, noise 0.5, alpha in [0.05, 3], ``--points`` points)
once to warm up, then ``--repeat`` times sets a new lam (never computed before) and waits for the
view to finish. The page times each change itself (``window.__explorer.timing``: from the change to
the first point drawn, and to the last point of the curve drawn; Bayes-optimal points and the
other panels come after the curve). It then times the solver alone on the same grid in this
process (a cold first point and one warm-started ``theory_curve``): the floor under the page's numbers. Targets: first
point <= 1 s, 20-point curve <= 4 s.
The reference workload (5 x numpy 1000x1000 float64 matmul) is timed before and after.

    OMP_NUM_THREADS=1 python benchmarks/bench_explore.py [--repeat 5] [--points 20] [--workers 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np

from singlehead.runs import reference_seconds

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _start_server(workers: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "singlehead",
            "explore",
            "--port",
            str(port),
            "--no-browser",
            "--cache-dir",
            "off",
            "--workers",
            str(workers),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the explorer did not start")


def _solver_floor(points: int) -> tuple[float, float]:
    """Cold first point and one warm-started sweep of the default view at a lam the page never drew."""
    from singlehead import Problem, theory, theory_curve
    from singlehead.explore import parse_view

    view = parse_view({"n_alpha": str(points), "lam": "0.0111"})
    problem: Problem = view.problem
    t = time.perf_counter()
    theory(problem)
    first = time.perf_counter() - t
    t = time.perf_counter()
    theory_curve(problem, view.alphas)
    return first, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--workers", type=int, default=0, help="explore --workers (0: one process)")
    args = ap.parse_args()
    chromium = os.environ.get("SINGLEHEAD_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("no system Chromium: apt-get install chromium (or set SINGLEHEAD_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    ref0 = reference_seconds()
    proc, url = _start_server(args.workers)
    first, curve = [], []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}?n_alpha={args.points}")
            page.wait_for_function("window.__explorer && window.__explorer.status === 'done'", timeout=600_000)
            for k in range(args.repeat):
                lam = f"{0.0123 * 1.31**k:.6g}"
                page.fill("[name=lam]", lam)
                page.dispatch_event("[name=lam]", "change")
                page.wait_for_function(
                    f"window.__explorer.status === 'done' && window.__explorer.data.view.problem.lam === {float(lam)}",
                    timeout=600_000,
                )
                t = page.evaluate("window.__explorer.timing")
                first.append(t["first_point_ms"] / 1e3)
                curve.append(t["curve_ms"] / 1e3)
                print(
                    f"lam={lam}: first point {first[-1]:.2f} s, {args.points}-point curve {curve[-1]:.2f} s, "
                    f"all panels {t['done_ms'] / 1e3:.2f} s",
                    flush=True,
                )
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    floor = _solver_floor(args.points)
    ref1 = reference_seconds()
    print(
        f"median over {args.repeat} changes: first point {np.median(first):.2f} s (target <= 1 s), "
        f"{args.points}-point curve {np.median(curve):.2f} s (target <= 4 s)"
    )
    print(
        f"solver alone, same grid, this process: first point {floor[0]:.2f} s, one warm-started "
        f"{args.points}-point theory_curve {floor[1]:.2f} s (the explorer's floor)"
    )
    print(
        f"reference workload (5 x 1000^3 float64 matmul): {ref0:.3f} s before, {ref1:.3f} s after; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, workers={args.workers}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
