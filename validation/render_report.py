"""Render a reproduction report in a real headless browser and check the screenshot is not blank.

Usage: ``python validation/render_report.py singlehead-report/report.html [--out shot.png]``.
Needs Chromium (Debian: ``apt-get install chromium``). Exit status 0 when the page rendered.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def find_browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: Path, png: Path, width: int = 1200, height: int = 3000, timeout: float = 120) -> Path:
    """Screenshot ``html`` with headless Chromium into ``png``."""
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--screenshot={png}", html.resolve().as_uri()], check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return png


def is_rendered(png: Path) -> tuple[bool, float]:
    """A rendered report has images and text: many distinct, non-white pixels."""
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(png)[..., :3]
    non_white = float(np.mean(img.min(axis=-1) < 0.9))
    return non_white > 0.02 and float(img.std()) > 0.05, non_white


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("report", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    png = args.out or args.report.with_suffix(".png")
    screenshot(args.report, png)
    ok, frac = is_rendered(png)
    print(f"screenshot {png}: {frac:.1%} non-white pixels -> {'rendered' if ok else 'BLANK'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
